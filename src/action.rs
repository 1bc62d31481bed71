//! `Action`: what one turn produced, and `Action::process`, which makes it a `Message`.

use crate::memory::{Decision, Message, MessageKind};

/// The output of one agent turn, before it enters memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub name: String,
    pub role: String,
    pub response: String,
    pub kind: MessageKind,
    pub decision: Option<Decision>,
    /// How the other participants are labelled (their names and roles): a reply is cut
    /// where a line starts with one of them and a colon.
    pub others: Vec<String>,
}

/// Where in the run the action happened.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub seq: u64,
    pub state: &'a str,
    pub visit: u32,
}

/// A processed action: the memory, and whether the reply was cut where it went on as
/// another participant.
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    pub memory: Message,
    pub cut: bool,
}

impl Action {
    /// Turns the action into a memory message. As in the seed, a speaker's own name
    /// written as a prefix (`Ada:`, also `Ada (Host):` and `**Ada:**`) is stripped,
    /// repeatedly, because models often echo the transcript format. Unlike the seed,
    /// the name is only stripped at the start: the seed cut everything before its last
    /// occurrence anywhere, which loses text when a speaker quotes their own name. A
    /// model's reply also ends where a new line starts with another participant's name
    /// or role and a colon: an agent never writes other people's lines.
    pub fn process(self, at: Place<'_>) -> Processed {
        let mut text = self.response.trim();
        let mut cut = false;
        if self.kind == MessageKind::Reply {
            while let Some(rest) =
                strip_name(text, &self.name, &self.role).or_else(|| strip_label(text, &self.others))
            {
                text = rest.trim_start();
            }
            if let Some(end) = other_speaker_line(text, &self.others) {
                text = &text[..end];
                cut = true;
            }
        }
        Processed {
            memory: Message {
                seq: at.seq,
                state: at.state.to_string(),
                visit: at.visit,
                role: self.role,
                name: self.name,
                content: text.trim().to_string(),
                kind: self.kind,
                decision: self.decision,
            },
            cut,
        }
    }
}

/// A speaker's label at the start of a line: one to three capitalised words and a
/// part in brackets, then a colon (`Brasher (Host):`, `**Anna (Guest):**`) — how a
/// transcript line starts, whoever the speaker.
static LABELLED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"^\**\s*\p{Lu}[\p{L}'’_-]*(?: \p{Lu}[\p{L}'’_-]*){0,2}\s*\([^()\n]{1,40}\)\s*\**\s*:",
    )
    .expect("the label pattern is valid")
});

/// A bare name and a colon (`Anna:`): one capitalised word of letters.
static NAMED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^\**\s*\p{Lu}[\p{Ll}'’-]{1,20}\s*\**\s*:\s")
        .expect("the name pattern is valid")
});

/// Whether `line` starts as a participant's line: another participant's name or role and
/// a colon (`Bob:`, `Bob (Con):`, `**Bob:**`), or any `Name (Role):` label.
fn speaker_line(line: &str, others: &[String]) -> bool {
    let t = line.trim_start().trim_start_matches('*').trim_start();
    LABELLED.is_match(t)
        || others.iter().filter(|o| !o.is_empty()).any(|o| {
            t.strip_prefix(o.as_str()).is_some_and(|rest| {
                let rest = rest.trim_start();
                let rest = match rest.strip_prefix('(') {
                    Some(r) => r.split_once(')').map_or("", |(_, after)| after),
                    None => rest,
                };
                rest.trim_start_matches('*').starts_with(':')
            })
        })
}

/// Where the first line that someone else "says" starts, if any line after the first
/// does. Bare `Name:` lines count only when there are two or more of them (a written
/// dialogue), since `Evidence:` or `Note:` alone is a heading, not a speaker.
fn other_speaker_line(text: &str, others: &[String]) -> Option<usize> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let named = |l: &str| NAMED.is_match(l.trim_start().trim_start_matches('*').trim_start());
    let dialogue = lines.iter().skip(1).filter(|l| named(l)).count() >= 2;
    let mut at = 0;
    for line in lines {
        if at > 0 && (speaker_line(line, others) || (dialogue && named(line))) {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// A reply that opens with someone else's label (a known participant's, or a `Name
/// (Role):` label) without the label: the words are the speaker's, the label is not.
fn strip_label<'t>(text: &'t str, others: &[String]) -> Option<&'t str> {
    let t = text.trim_start();
    if !speaker_line(t, others) {
        return None;
    }
    let (_, rest) = t.split_once(':')?;
    let rest = rest.trim_start_matches('*').trim_start();
    (!rest.is_empty()).then_some(rest)
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

    fn action(response: &str, kind: MessageKind) -> Action {
        Action {
            name: "Ada".into(),
            role: "Host".into(),
            response: response.into(),
            kind,
            decision: None,
            others: vec!["Ben".into(), "Guest".into()],
        }
    }

    fn process(response: &str) -> Processed {
        action(response, MessageKind::Reply).process(Place {
            seq: 4,
            state: "s",
            visit: 1,
        })
    }

    #[test]
    fn strips_leading_own_name_prefixes() {
        assert_eq!(process("Ada: Hello there.").memory.content, "Hello there.");
        assert_eq!(process("  Ada (Host): Ada: Hi").memory.content, "Hi");
        assert_eq!(process("**Ada:** Bold start").memory.content, "Bold start");
    }

    #[test]
    fn keeps_mid_text_mentions() {
        assert_eq!(
            process("As Ada: I said, yes.").memory.content,
            "As Ada: I said, yes."
        );
        assert_eq!(
            process("The council, Ben: all of them").memory.content,
            "The council, Ben: all of them"
        );
        let p = process("I agree with Ben: the bridge is costly.\nBen's point stands.");
        assert!(!p.cut, "{p:?}");
    }

    #[test]
    fn invented_speakers_are_cut_and_foreign_labels_dropped() {
        let p = process("Cars are a problem.\nBrasher (Host): I disagree!");
        assert_eq!(
            (p.memory.content.as_str(), p.cut),
            ("Cars are a problem.", true)
        );
        let p = process("Evidence: streets that closed to cars saw footfall rise.");
        assert_eq!(
            p.memory.content,
            "Evidence: streets that closed to cars saw footfall rise."
        );
        let p = process("Good point.\nAnna: Why?\nBrasher: Because.");
        assert_eq!((p.memory.content.as_str(), p.cut), ("Good point.", true));
        let p = process("**Ben (Guest):** Hello.\nMore.");
        assert_eq!(p.memory.content, "Hello.\nMore.");
        // Headings and lists are not speakers.
        let p = process("Two points:\n1. **Economic Impact**: costs rise.\nSummary: both matter.");
        assert!(!p.cut, "{p:?}");
    }

    #[test]
    fn stops_where_another_participant_starts_speaking() {
        let p = process("Welcome, everyone.\nBen: Thank you, Ada!\nAda: You're welcome.");
        assert_eq!(
            (p.memory.content.as_str(), p.cut),
            ("Welcome, everyone.", true)
        );
        let p = process("Ada: Let us begin.\n\n**Ben (Guest):** I object.");
        assert_eq!((p.memory.content.as_str(), p.cut), ("Let us begin.", true));
        let p = process("Our guest arrives.\nGuest: Hello.");
        assert_eq!(p.memory.content, "Our guest arrives.");
        // A person's typed turn is kept as typed.
        let human = action("Hi\nBen: hi", MessageKind::Human).process(Place {
            seq: 0,
            state: "s",
            visit: 1,
        });
        assert_eq!(
            (human.memory.content.as_str(), human.cut),
            ("Hi\nBen: hi", false)
        );
    }

    #[test]
    fn keeps_the_place_in_the_run() {
        let m = action("Ada: x", MessageKind::Human)
            .process(Place {
                seq: 9,
                state: "vote",
                visit: 3,
            })
            .memory;
        assert_eq!(
            (m.seq, m.state.as_str(), m.visit, m.content.as_str()),
            (9, "vote", 3, "Ada: x")
        );
    }
}
