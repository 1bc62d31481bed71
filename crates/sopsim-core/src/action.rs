//! `Action`: what one turn produced, and `Action::process`, which makes it a `Message`.

use crate::memory::{Decision, Message, MessageKind};

/// The output of one agent turn, before it enters memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// The agent's name.
    pub name: String,
    /// The agent's role in the current state.
    pub role: String,
    /// The turn's text: a model's reply, a typed turn, an opening line, or a tool line.
    pub response: String,
    /// How the message came about.
    pub kind: MessageKind,
    /// The turn's closed choice, if it made one.
    pub decision: Option<Decision>,
    /// How the other participants are labelled (their names and roles): a reply is cut
    /// where a line starts with one of them and a colon.
    pub others: Vec<String>,
}

/// Where in the run's log the action's message goes.
#[derive(Debug, Clone, Copy)]
pub struct LogPlace<'a> {
    /// The message's position in the run's log, from 0.
    pub seq: u64,
    /// The state the message is said in.
    pub state: &'a str,
    /// The state's visit number within the run, from 1.
    pub visit: u32,
}

/// A processed action: the memory, and whether the reply was cut where it went on as
/// another participant.
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// The message as it goes into memory.
    pub memory: Message,
    /// Whether the reply was cut where it went on as another participant.
    pub cut: bool,
}

/// A reply as it is recorded: the model's words up to where a new line starts as
/// another participant's (their name or role and a colon), which is where a stop
/// sequence ends generation — an agent never writes other people's lines. Nothing else
/// is changed: a speaker label the model wrote is kept (and counted, and drawn again;
/// see [`crate::quality`]), never stripped to hide it. Also whether it was cut.
pub fn recorded_reply<'t>(text: &'t str, others: &[String]) -> (&'t str, bool) {
    let text = text.trim();
    match other_speaker_line(text, others) {
        Some(end) => (text[..end].trim(), true),
        None => (text, false),
    }
}

impl Action {
    /// Turns the action into a memory message: a model's reply as [`recorded_reply`]
    /// records it, anything else as given (trimmed).
    pub fn process(self, at: LogPlace<'_>) -> Processed {
        let (text, cut) = if self.kind == MessageKind::Reply {
            recorded_reply(&self.response, &self.others)
        } else {
            (self.response.trim(), false)
        };
        Processed {
            memory: Message {
                seq: at.seq,
                state: at.state.to_string(),
                visit: at.visit,
                role: self.role,
                name: self.name,
                content: text.to_string(),
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
        action(response, MessageKind::Reply).process(LogPlace {
            seq: 4,
            state: "s",
            visit: 1,
        })
    }

    #[test]
    fn labels_the_model_wrote_are_kept_as_written() {
        assert_eq!(
            process("Ada: Hello there.").memory.content,
            "Ada: Hello there."
        );
        assert_eq!(
            process("  Ada (Host): Ada: Hi").memory.content,
            "Ada (Host): Ada: Hi"
        );
        assert_eq!(
            process("Ben (Guest): Hello.").memory.content,
            "Ben (Guest): Hello."
        );
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
    fn invented_speakers_are_cut() {
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
        let p = process("Let us begin.\n\n**Ben (Guest):** I object.");
        assert_eq!((p.memory.content.as_str(), p.cut), ("Let us begin.", true));
        let p = process("Our guest arrives.\nGuest: Hello.");
        assert_eq!(p.memory.content, "Our guest arrives.");
        // A person's typed turn is kept as typed.
        let human = action("Hi\nBen: hi", MessageKind::Human).process(LogPlace {
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
            .process(LogPlace {
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
