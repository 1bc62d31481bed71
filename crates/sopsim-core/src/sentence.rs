//! Where sentences end, and the reply budget built on it: `max_tokens` is the length a
//! reply aims for, not where it is cut. Near the budget a reply stops at the first
//! sentence end; a hard cap a little above it stops one that never ends a sentence.
//! The local engine and the server backends stop the same way, and reply quality
//! counts a reply that does not end a sentence as cut.

// Where a sentence ends is read by the model backends only; a build without them keeps the rest.

/// A reply's token budget: from `soft` tokens on it stops at the first sentence end;
/// at `hard` tokens it stops wherever it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyBudget {
    /// The tokens from which the reply stops at the first sentence end.
    pub soft: usize,
    /// The tokens at which the reply stops wherever it is.
    pub hard: usize,
}

impl ReplyBudget {
    /// The budget for `max_tokens`: looking for a sentence end from seven eighths of
    /// it, and stopping at the latest half as much again (at least 32 tokens more).
    pub fn of(max_tokens: usize) -> Self {
        let soft = max_tokens - max_tokens / 8;
        let hard = max_tokens + (max_tokens / 2).max(32);
        Self {
            soft: soft.max(1),
            hard,
        }
    }
}

/// Words that end with a full stop without ending a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "prof", "vs", "etc", "e.g", "i.e", "no", "approx", "inc", "ltd",
    "jr", "sr", "mt",
];

/// Where the first sentence that ends in `text` at or after byte `from` ends (the byte
/// after its closing punctuation and any closing quote or bracket), once the text
/// shows it ended: whitespace follows. A stop after an abbreviation or between digits
/// ("3.5") is not an end.
pub fn first_end(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from.min(text.len());
    while i < text.len() {
        if !text.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let c = text[i..].chars().next()?;
        let at = i;
        i += c.len_utf8();
        if !matches!(c, '.' | '!' | '?' | '…') {
            continue;
        }
        // Closing quotes, brackets and further marks belong to the sentence.
        let mut end = i;
        while let Some(next) = text[end..].chars().next() {
            if matches!(
                next,
                '"' | '\'' | '”' | '’' | ')' | ']' | '*' | '.' | '!' | '?' | '…'
            ) {
                end += next.len_utf8();
            } else {
                break;
            }
        }
        let followed = text[end..].chars().next();
        if !followed.is_some_and(char::is_whitespace) {
            continue;
        }
        if c == '.' && (is_abbreviation(&text[..at]) || is_digit_before(bytes, at)) {
            continue;
        }
        return Some(end);
    }
    None
}

fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"')
        .next()
        .unwrap_or("")
        .to_lowercase();
    ABBREVIATIONS.contains(&word.as_str())
        || (word.chars().count() == 1 && word.chars().all(char::is_alphabetic))
}

/// A list number ("1.") or a number's point at the start of a line: not a sentence end.
fn is_digit_before(bytes: &[u8], at: usize) -> bool {
    let digits = bytes[..at]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    digits > 0 && {
        let before = &bytes[..at - digits];
        before.is_empty() || before.ends_with(b"\n") || before.ends_with(b" ")
    }
}

/// Whether `text` ends where a sentence ends (after trailing whitespace): with `.`,
/// `!`, `?` or `…`, maybe followed by closing quotes or brackets.
pub fn ends_sentence(text: &str) -> bool {
    let body = text.trim_end();
    let body = body.trim_end_matches(['"', '\'', '”', '’', ')', ']', '*']);
    body.ends_with(['.', '!', '?', '…'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_ends_once_whitespace_follows_its_stop() {
        assert_eq!(first_end("We agree. Then", 0), Some(9));
        assert_eq!(first_end("We agree.", 0), None, "not yet known to end");
        assert_eq!(first_end("He said \"no!\" Then", 0), Some(13));
        assert_eq!(first_end("Costs fell 3.5 percent. Then", 0), Some(23));
        assert_eq!(first_end("Ask Dr. Lee. Then", 0), Some(12));
        assert_eq!(first_end("Two points:\n1. Health. Then", 0), Some(22));
        assert_eq!(first_end("One. Two. Three", 5), Some(9));
        assert_eq!(first_end("Really?! Yes", 0), Some(8));
    }

    #[test]
    fn ends_sentence_reads_the_last_mark() {
        assert!(ends_sentence("It works.\n"));
        assert!(ends_sentence("He said \"go!\""));
        assert!(!ends_sentence("would lead to significant ec"));
        assert!(!ends_sentence("Reasons:"));
    }

    #[test]
    fn the_budget_looks_for_an_end_before_it_and_stops_past_it() {
        assert_eq!(
            ReplyBudget::of(100),
            ReplyBudget {
                soft: 88,
                hard: 150
            }
        );
        assert_eq!(ReplyBudget::of(40), ReplyBudget { soft: 35, hard: 72 });
        assert_eq!(ReplyBudget::of(1), ReplyBudget { soft: 1, hard: 33 });
    }
}
