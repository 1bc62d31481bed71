//! `Action`: what one turn produced, and `Action::process`, which makes it a `Memory`.

use crate::memory::{Memory, MessageKind};

/// The output of one agent turn, before it enters memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub name: String,
    pub role: String,
    pub response: String,
    pub kind: MessageKind,
}

/// Where in the run the action happened.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub seq: u64,
    pub state: &'a str,
    pub visit: u32,
}

impl Action {
    /// Turns the action into a memory message. As in the seed, a speaker's own name
    /// written as a prefix (`Ada:`, also `Ada (Host):` and `**Ada:**`) is stripped,
    /// repeatedly, because models often echo the transcript format. Unlike the seed,
    /// the name is only stripped at the start: the seed cut everything before its last
    /// occurrence anywhere, which loses text when a speaker quotes their own name.
    pub fn process(self, at: Place<'_>) -> Memory {
        let mut text = self.response.trim();
        if self.kind == MessageKind::Reply {
            while let Some(rest) = strip_name(text, &self.name, &self.role) {
                text = rest.trim_start();
            }
        }
        Memory {
            seq: at.seq,
            state: at.state.to_string(),
            visit: at.visit,
            role: self.role,
            name: self.name,
            content: text.trim().to_string(),
            kind: self.kind,
        }
    }
}

fn strip_name<'t>(text: &'t str, name: &str, role: &str) -> Option<&'t str> {
    let t = text.trim_start_matches('*').trim_start();
    let rest = t.strip_prefix(name)?;
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('(') {
        Some(r) => r
            .trim_start()
            .strip_prefix(role)?
            .trim_start()
            .strip_prefix(')')?,
        None => rest,
    };
    let rest = rest.trim_start_matches('*').strip_prefix(':')?;
    Some(rest.trim_start_matches('*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(response: &str) -> String {
        let a = Action {
            name: "Ada".into(),
            role: "Host".into(),
            response: response.into(),
            kind: MessageKind::Reply,
        };
        a.process(Place {
            seq: 4,
            state: "s",
            visit: 1,
        })
        .content
    }

    #[test]
    fn strips_leading_own_name_prefixes() {
        assert_eq!(process("Ada: Hello there."), "Hello there.");
        assert_eq!(process("  Ada (Host): Ada: Hi"), "Hi");
        assert_eq!(process("**Ada:** Bold start"), "Bold start");
    }

    #[test]
    fn keeps_other_names_and_mid_text_mentions() {
        assert_eq!(process("Bob: not me"), "Bob: not me");
        assert_eq!(process("As Ada: I said, yes."), "As Ada: I said, yes.");
        assert_eq!(process("Adam: close but no"), "Adam: close but no");
    }

    #[test]
    fn keeps_the_place_in_the_run() {
        let a = Action {
            name: "Ada".into(),
            role: "Host".into(),
            response: "Ada: x".into(),
            kind: MessageKind::Human,
        };
        let m = a.process(Place {
            seq: 9,
            state: "vote",
            visit: 3,
        });
        assert_eq!(
            (m.seq, m.state.as_str(), m.visit, m.content.as_str()),
            (9, "vote", 3, "Ada: x")
        );
    }
}
