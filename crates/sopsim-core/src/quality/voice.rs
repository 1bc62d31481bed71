//! Whether a reply speaks in its own voice: no stage directions (a leading line built
//! from the instructions, "reply as …", "your turn", an action in brackets, an
//! assistant's "Certainly!"), no speaking as another
//! participant ("As Rosa (Chair), I …"), and no words in a script the scenario does not
//! use ("vesicles,以及其他 hazards"). Pure text checks, each cheap enough to run on every
//! candidate of every reply.

/// Words that make a leading line ending in a colon a direction rather than speech.
const DIRECTION_WORDS: &[&str] = &[
    "reply",
    "replies",
    "respond",
    "response",
    "answer",
    "say",
    "says",
    "speak",
    "speech",
    "statement",
    "turn",
    "task",
    "todo",
    "to-do",
    "note",
    "output",
    "rebuttal",
    "opening",
    "closing",
    "verdict",
    "draft",
    "as",
    "continues",
    "adds",
    "answers",
    "responds",
];

/// How an assistant, not a character, opens a reply ("Certainly! To support the
/// motion …", "Here is my statement:"). Refusals are [`refusal`]'s.
const ASSISTANT_OPENINGS: &[&str] = &[
    "certainly",
    "sure!",
    "sure,",
    "sure.",
    "of course!",
    "of course,",
    "absolutely!",
    "i'd be happy to help",
    "i’d be happy to help",
    "i would be happy to help",
    "here is ",
    "here's ",
    "here’s ",
];

/// Verbs that, followed by "as" and a name, direct the speaker rather than speak.
const AS_VERBS: &[&str] = &[
    "reply",
    "replying",
    "respond",
    "responding",
    "answer",
    "answering",
    "speak",
    "speaking",
    "act",
    "acting",
    "continue",
    "continuing",
];

/// Whether `text` carries a stage direction: its first line is a short lead-in ending
/// in a colon that names a direction or repeats `instructions` (three words in a row
/// of them, as `repeats` says), it tells someone to reply as somebody, it opens with
/// an action in brackets or asterisks, or it carries a piece of its cue anywhere: a
/// cue phrase, a note on length as a sentence of its own, or brackets that repeat the
/// instructions.
pub(super) fn has_direction(text: &str, repeats: impl Fn(&str) -> bool) -> bool {
    let body = text.trim_start();
    let first = body.lines().next().unwrap_or("").trim();
    // A line that ends in a colon, or a bold heading that does ("**Rebuttal:** …").
    let bold_head = first
        .strip_prefix("**")
        .and_then(|rest| rest.find("**").map(|end| &rest[..end]))
        .filter(|h| h.trim_end().ends_with(':'));
    let lead = bold_head.unwrap_or_else(|| first.trim_end_matches(['*', '_']).trim_end());
    if let Some(head) = lead.trim_end().strip_suffix(':') {
        let words = lower_words(head);
        let short = !words.is_empty() && words.len() <= 14;
        if short && (words.iter().any(|w| DIRECTION_WORDS.contains(&w.as_str())) || repeats(head)) {
            return true;
        }
    }
    let words = lower_words(body);
    let directs = words.windows(3).any(|w| {
        AS_VERBS.contains(&w[0].as_str())
            && w[1] == "as"
            && !matches!(
                w[2].as_str(),
                "well"
                    | "if"
                    | "though"
                    | "a"
                    | "an"
                    | "the"
                    | "i"
                    | "we"
                    | "soon"
                    | "much"
                    | "many"
                    | "follows"
            )
    });
    let lower = body.to_lowercase();
    let cue = CUE_PHRASES.iter().any(|p| lower.contains(p));
    directs
        || cue
        || opens_with_action(body)
        || talks_as_assistant(body)
        || has_length_note(body)
        || brackets(body).any(repeats)
}

/// Pieces of the cue an agent's prompt ends with ("(Ada, your turn: … Your view: …)"),
/// never said aloud.
const CUE_PHRASES: &[&str] = &["your turn", "your view:"];

/// Whether a sentence of `body` is only a note on length ("Two or three sentences.",
/// "In one sentence."), copied from the task.
fn has_length_note(body: &str) -> bool {
    const COUNTS: &[&str] = &["one", "two", "three", "four", "five", "a", "few", "or"];
    body.split(['.', '!', '?', '\n', '(', ')', ':'])
        .map(lower_words)
        .any(|w| {
            let (last, rest) = match w.split_last() {
                Some(split) => split,
                None => return false,
            };
            let rest = match rest.split_first() {
                Some((first, after)) if first == "in" => after,
                _ => rest,
            };
            matches!(last.as_str(), "sentence" | "sentences")
                && !rest.is_empty()
                && rest.iter().all(|x| COUNTS.contains(&x.as_str()))
        })
}

/// The text inside each pair of round or square brackets in `text`.
fn brackets(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices(['(', '['])
        .filter_map(move |(at, open)| {
            let close = if open == "(" { ')' } else { ']' };
            let inner = &text[at + 1..];
            inner.find(close).map(|end| &inner[..end])
        })
}

/// Whether `body` opens as an assistant answering a request rather than as a
/// participant speaking.
fn talks_as_assistant(body: &str) -> bool {
    let lead: String = body
        .trim_start_matches(['*', '_', '"'])
        .chars()
        .take(32)
        .flat_map(char::to_lowercase)
        .collect();
    ASSISTANT_OPENINGS.iter().any(|o| lead.starts_with(o))
}

/// What an assistant says when it declines a request, wherever in a reply: a model
/// that has stepped out of its role ("I'm sorry, but I can't assist with that
/// request."). Each phrase is one no participant says in character.
const REFUSALS: &[&str] = &[
    "i'm sorry, but i can't",
    "i'm sorry, but i cannot",
    "i am sorry, but i can't",
    "i am sorry, but i cannot",
    "sorry, but i can't assist",
    "sorry, but i can't help with that",
    "i can't assist with",
    "i cannot assist with",
    "i can't help with that request",
    "i cannot help with that request",
    "i'm unable to assist",
    "i am unable to assist",
    "i can't fulfill",
    "i cannot fulfill",
    "i can't comply",
    "i cannot comply",
    "as an ai",
    "as a language model",
];

/// The refusal in `text`, as written, if it has one: from its phrase to the end of
/// that sentence.
pub(super) fn refusal(text: &str) -> Option<&str> {
    static PHRASES: std::sync::LazyLock<aho_corasick::AhoCorasick> =
        std::sync::LazyLock::new(|| {
            // Each phrase also with a typographic apostrophe, as models write them.
            let typographic = REFUSALS.iter().map(|r| r.replace('\'', "\u{2019}"));
            aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(REFUSALS.iter().map(|r| r.to_string()).chain(typographic))
                .expect("the refusal phrases build a searcher")
        });
    let start = PHRASES.find(text)?.start();
    let end = text[start..]
        .find(['.', '!', '?', '\n'])
        .map_or(text.len(), |e| start + e);
    Some(&text[start..end])
}

/// Whether `body` opens as a stage direction no later word takes back: an action in
/// brackets or an assistant's opening ("Certainly!").
pub(super) fn opens_as_direction(body: &str) -> bool {
    opens_with_action(body) || talks_as_assistant(body)
}

/// "(smiles)", "[pauses]", "*nods*" at the start.
fn opens_with_action(body: &str) -> bool {
    let (open, close) = match body.chars().next() {
        Some('(') => ('(', ')'),
        Some('[') => ('[', ']'),
        Some('*') if !body.starts_with("**") => ('*', '*'),
        _ => return false,
    };
    let inner = &body[open.len_utf8()..];
    match inner.find(close) {
        Some(end) => {
            let words = inner[..end].split_whitespace().count();
            (1..=8).contains(&words)
        }
        None => false,
    }
}

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `text` speaks as a participant other than `speaker`: "As Rosa, …",
/// "As Rosa (Chair), …", "I am Rosa", "I'm Rosa", "This is Rosa", "Rosa here" —
/// at its start or a sentence's.
pub(super) fn speaks_as_other<'a>(
    text: &str,
    speaker: &str,
    others: impl IntoIterator<Item = &'a str>,
) -> bool {
    let sentences = sentence_starts(text);
    let ends_name =
        |after: &str| !after.starts_with(|c: char| c.is_alphanumeric() || c == '\'' || c == '’');
    others
        .into_iter()
        .filter(|n| *n != speaker && !n.is_empty())
        .any(|name| {
            sentences.iter().any(|s| {
                let s = s.trim_start_matches(['*', '_', '"', '“', '\'']);
                let after = |lead: &str| {
                    s.strip_prefix(lead)
                        .map(|rest| rest.trim_start_matches(['*', '_']))
                        .and_then(|rest| rest.strip_prefix(name))
                        .map(|after| after.trim_start_matches(['*', '_']))
                };
                // "As Rosa, …" or "As Rosa (Chair) …", not "As Rosa said".
                let as_name = ["As ", "Speaking as "].iter().any(|lead| {
                    after(lead).is_some_and(|a| {
                        a.is_empty() || a.starts_with([',', ':', '(']) || a.starts_with(" (")
                    })
                });
                let i_am = ["I am ", "I'm ", "I’m ", "This is "]
                    .iter()
                    .any(|lead| after(lead).is_some_and(ends_name));
                as_name || i_am || after("").is_some_and(|a| a.starts_with(" here"))
            })
        })
}

/// The start of the text and of each sentence and line in it.
fn sentence_starts(text: &str) -> Vec<&str> {
    let mut starts = vec![text.trim_start()];
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?' | '\n') {
            let rest = text[i + c.len_utf8()..].trim_start();
            if !rest.is_empty() {
                starts.push(rest);
            }
        }
    }
    starts
}

/// A writing system, as far as telling a reply's words apart from the scenario's goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Script {
    /// Latin letters, with their accented and extended forms.
    Latin,
    /// Greek letters.
    Greek,
    /// Cyrillic letters.
    Cyrillic,
    /// Hebrew letters.
    Hebrew,
    /// Arabic letters.
    Arabic,
    /// The scripts of India and its neighbours (Devanagari to Sinhala).
    Indic,
    /// Thai letters.
    Thai,
    /// Chinese characters, and CJK punctuation and full-width forms.
    Han,
    /// Japanese kana.
    Kana,
    /// Korean hangul.
    Hangul,
    /// Letters of any other script.
    Other,
}

/// The script of a letter or of CJK punctuation; `None` for what every script shares
/// (digits, spaces, common punctuation, symbols, emoji).
pub(super) fn script_of(c: char) -> Option<Script> {
    let u = c as u32;
    let script = match u {
        0x3000..=0x303F | 0xFF00..=0xFFEF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => {
            Script::Han
        }
        0x3040..=0x30FF | 0x31F0..=0x31FF => Script::Kana,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => Script::Hangul,
        _ if !c.is_alphabetic() => return None,
        0x0000..=0x024F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF => Script::Latin,
        0x0370..=0x03FF | 0x1F00..=0x1FFF => Script::Greek,
        0x0400..=0x052F => Script::Cyrillic,
        0x0590..=0x05FF => Script::Hebrew,
        0x0600..=0x06FF | 0x0750..=0x077F => Script::Arabic,
        0x0900..=0x0DFF => Script::Indic,
        0x0E00..=0x0E7F => Script::Thai,
        _ => Script::Other,
    };
    Some(script)
}

/// The scripts `text` is written in.
pub(super) fn scripts_in(text: &str) -> std::collections::BTreeSet<Script> {
    text.chars().filter_map(script_of).collect()
}

/// Whether `text` holds a letter of a script outside `allowed`, or words run together
/// into one ("theonlywayicanreachthepharmacy"): a run of [`GLUED_LETTERS`] lower-case
/// letters or more, longer than any word a speaker would say.
pub(super) fn has_foreign(text: &str, allowed: &std::collections::BTreeSet<Script>) -> bool {
    let glued = text
        .split(|c: char| !c.is_lowercase())
        .any(|run| run.chars().count() >= GLUED_LETTERS);
    glued
        || text
            .chars()
            .filter_map(script_of)
            .any(|s| !allowed.contains(&s))
}

/// Lower-case letters in a row from which words have run together
/// ("counterrevolutionaries" has 22).
const GLUED_LETTERS: usize = 23;

#[cfg(test)]
mod tests {
    use super::*;

    fn no_repeat(_: &str) -> bool {
        false
    }

    #[test]
    fn stage_directions_are_found() {
        for text in [
            "Back up Ada and say:\nCars choke our streets.",
            "Reply as Ben, in response to the negative's points:\nWe disagree.",
            "To-Do:\n- argue for the motion",
            "**My rebuttal:** Cars must go.",
            "I will answer as Cleo would: cars stay.",
            "(smiles) Thank you, Mia.",
            "*nods* Good point.",
            "Certainly! To support the motion, consider health.",
            "Ada (Affirmative) continues:\nCars must go.",
            "Cars must go.\n(Cleo, your turn to continue the negative argument.)",
            "Neighbours ate outside. Your view:\nI take no side.",
            "Cars choke the centre. Two or three sentences.",
            "Cars choke the centre.\nIn one sentence: they must go.",
        ] {
            assert!(has_direction(text, no_repeat), "{text}");
        }
        for text in [
            "Cars choke our streets: that is the problem.",
            "We agree on one thing: children need clean air.",
            "I see it as a matter of health. Cars must go.",
            "Our two points are clear. First, health.",
            "**Health** comes first.",
            "Speaking as well as listening matters.",
            "Surely you see the problem.",
            "Here in Millbrook we walk.",
            "Sorry, but I disagree with Tom.",
            "I have two sentences for you. First, health.",
            "The bus (the number 14) takes 25 minutes.",
            "In a few words: no.",
        ] {
            assert!(!has_direction(text, no_repeat), "{text}");
        }
        assert!(has_direction(
            "Name the team's two strongest arguments:\nHealth.",
            |h| h.contains("strongest arguments")
        ));
        let task = |h: &str| h.contains("the last speaker's point");
        assert!(has_direction(
            "Thank you, Ben. (Name the last speaker's point and ask the other side.)",
            task
        ));
        assert!(!has_direction("Thank you, Ben (who spoke last).", task));
    }

    #[test]
    fn speaking_as_another_participant_is_found() {
        let others = ["Rosa", "Ben", "Ada"];
        for text in [
            "As Rosa (Chair), I appreciate your input.",
            "Thank you. As Rosa, I must close the meeting.",
            "I am Ben and I say cars must go.",
            "Ben here: cars must go.",
        ] {
            assert!(speaks_as_other(text, "Ada", others), "{text}");
        }
        for text in [
            "As Rosa said, the car park is full.",
            "I am with Ben on this one.",
            "As Ada, I argue cars must go.",
            "As Rosalind put it, parks matter.",
            "I'm Ben's neighbour.",
        ] {
            assert!(!speaks_as_other(text, "Ada", others), "{text}");
        }
    }

    #[test]
    fn letters_of_a_script_the_scenario_does_not_use_are_foreign() {
        let latin = scripts_in("Cars should go. Café naïve.");
        assert!(has_foreign("vesicles,以及其他 hazards", &latin));
        assert!(has_foreign("хорошо", &latin));
        assert!(!has_foreign("Naïve café — 3.5% ✓ 😀", &latin));
        assert!(has_foreign(
            "the bays aretheonlywayicanreachthepharmacy",
            &latin
        ));
        assert!(!has_foreign(
            "counterrevolutionaries and internationalization",
            &latin
        ));
        let both = scripts_in("Hello 你好");
        assert!(!has_foreign("好的 okay", &both));
    }
}
