//! Token counting for prompt budgets and usage figures when a backend reports none.
//!
//! Backends with a real tokenizer count exactly; everything else uses [`Estimator`],
//! whose figures are marked as estimated wherever they are reported.

// The cached and per-line counters serve the model backends only; a build without them keeps the rest.

/// Tokens of chat framing counted per message (role markers, separators, and a share of
/// the reply's opening). ChatML costs 5 per message plus 3 to open the reply, so 8 per
/// message keeps a two-message prompt inside the budget.
pub const MESSAGE_OVERHEAD: usize = 8;

/// Lines joined as a prompt joins them: non-empty ones, one per line.
pub fn join_lines(parts: &[String]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tokens of a two-message prompt holding only `system` and `tail` (the fixed
/// text, with no conversation), each text's tokens as `tokens` counts them
/// ([`TokenCounter::count`] or [`TokenCounter::at_most`]).
pub fn fixed_prompt_tokens(
    system: &[String],
    tail: &[String],
    tokens: impl Fn(&str) -> usize,
) -> usize {
    tokens(&join_lines(system)) + tokens(&join_lines(tail)) + 2 * MESSAGE_OVERHEAD
}

/// Counts the tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// How many tokens `text` takes.
    fn count(&self, text: &str) -> usize;
    /// A figure never below [`count`](Self::count)'s that costs no tokenizer: whether
    /// a prompt fits a budget is settled by it first, and counted only when it does
    /// not settle it. OpenAI's tokenizers spend a byte at least on each token, so a
    /// text's length bounds their count and their tables load only for prompts long
    /// enough to need them.
    fn at_most(&self, text: &str) -> usize {
        self.count(text)
    }
    /// Whether the counts are exact for the model in use.
    fn exact(&self) -> bool;
}

/// A tokenizer-free estimate that errs high. In each whitespace-separated word: a run
/// of ASCII letters costs a token per four letters (BPE tokenizers merge common words
/// into one or two), every digit a token (Qwen, Mistral and Llama 2 split numbers into
/// digits) and one more for the space before a number (GPT's tokenizers keep it
/// apart), every other ASCII character a token (punctuation merges little: JSON, URLs
/// and code are mostly punctuation), every other character a token, and a character
/// outside the Basic Multilingual Plane (emoji) a token per UTF-8 byte, as tokenizers
/// that fall back to bytes count it. Each newline is one token, and so is each run of
/// two or more spaces or tabs (indentation).
///
/// It runs at memory speed and is additive over newline-joined segments,
/// `count(a + "\n" + b) == count(a) + 1 + count(b)`, which lets prompt assembly budget
/// parts independently. On English prose it lands within about 20% of BPE tokenizers,
/// erring high; on numbers, JSON, URLs, code, Chinese or emoji it counts at least what
/// GPT-4o's tokenizer does (tested against it and GPT-4's), so budgets it enforces are
/// safe. Not for every tokenizer: GPT-4's older one and small SentencePiece
/// vocabularies spend more than a token on many Chinese and Japanese characters.
#[derive(Debug, Default, Clone, Copy)]
pub struct Estimator;

impl TokenCounter for Estimator {
    /// One pass over the text: each word's estimate (see [`Estimator`]), each newline,
    /// and each run of two or more spaces or tabs within a line.
    fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut in_word = false;
        let mut letters: usize = 0;
        let mut blanks: usize = 0;
        for c in text.chars() {
            if c == ' ' || c == '\t' {
                blanks += 1;
            } else {
                tokens += usize::from(blanks >= 2);
                blanks = 0;
            }
            if c.is_whitespace() {
                if in_word {
                    tokens += letters.div_ceil(4);
                    letters = 0;
                    in_word = false;
                }
                tokens += usize::from(c == '\n');
                continue;
            }
            if !in_word {
                in_word = true;
                // A number's leading space is a token of its own.
                tokens += usize::from(c.is_ascii_digit());
            }
            if c.is_ascii_alphabetic() {
                letters += 1;
                continue;
            }
            tokens += letters.div_ceil(4);
            letters = 0;
            tokens += match c.len_utf8() {
                4 => 4,
                _ => 1,
            };
        }
        tokens + letters.div_ceil(4) + usize::from(blanks >= 2)
    }

    fn exact(&self) -> bool {
        false
    }
}

/// Several counters at once, for prompts that may go to any of several models: a text
/// costs the most any of them says, so a budget holds for each.
pub struct MostOf(pub Vec<std::sync::Arc<dyn TokenCounter>>);

impl TokenCounter for MostOf {
    fn count(&self, text: &str) -> usize {
        self.0.iter().map(|c| c.count(text)).max().unwrap_or(0)
    }

    fn at_most(&self, text: &str) -> usize {
        self.0.iter().map(|c| c.at_most(text)).max().unwrap_or(0)
    }

    /// Exact only as one exact counter: two tokenizers' maximum is no one's count.
    fn exact(&self) -> bool {
        matches!(self.0.as_slice(), [one] if one.exact())
    }
}

/// An exact counter that remembers the counts of the texts it has counted. A prompt
/// repeats most of its text from turn to turn (the system part, the recent messages),
/// and a tokenizer costs microseconds per message where a lookup costs nanoseconds.
/// Short texts are counted again (as cheap as looking them up); the memory is bounded
/// by forgetting everything once [`CACHED_COUNTS`] texts are held.
pub struct Cached<C> {
    inner: C,
    /// By the text's 64-bit hash and length.
    counts: dashmap::DashMap<(u64, usize), usize>,
}

/// How many texts' counts a [`Cached`] counter holds at most.
pub const CACHED_COUNTS: usize = 1 << 16;

/// Texts shorter than this are counted, not looked up.
const SHORT_TEXT: usize = 64;

impl<C> Cached<C> {
    /// A cache in front of `inner`, holding no counts yet.
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            counts: dashmap::DashMap::new(),
        }
    }
}

impl<C: TokenCounter> TokenCounter for Cached<C> {
    fn count(&self, text: &str) -> usize {
        if text.len() < SHORT_TEXT {
            return self.inner.count(text);
        }
        let key = (xxhash_rust::xxh3::xxh3_64(text.as_bytes()), text.len());
        if let Some(n) = self.counts.get(&key) {
            return *n;
        }
        let n = self.inner.count(text);
        if self.counts.len() >= CACHED_COUNTS {
            self.counts.clear();
        }
        self.counts.insert(key, n);
        n
    }

    fn at_most(&self, text: &str) -> usize {
        self.inner.at_most(text)
    }

    fn exact(&self) -> bool {
        self.inner.exact()
    }
}

/// A counter whose count of a text is the sum of its lines' counts, each line counted
/// by `inner` (a [`Cached`] one remembers them). A prompt's history is one message
/// whose lines mostly were in the last turn's prompt too: only its new lines are
/// counted. Right only for tokenizers that never make a token, nor a pre-tokenizer
/// piece, across a newline that a letter or digit follows; the cut falls there.
pub struct ByLine<C>(pub C);

impl<C: TokenCounter> TokenCounter for ByLine<C> {
    fn count(&self, text: &str) -> usize {
        lines_apart(text).map(|line| self.0.count(line)).sum()
    }

    fn at_most(&self, text: &str) -> usize {
        self.0.at_most(text)
    }

    fn exact(&self) -> bool {
        self.0.exact()
    }
}

/// `text` cut after each newline that a letter or digit follows.
pub fn lines_apart(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut from = 0;
        let cut = loop {
            match rest[from..].find('\n') {
                Some(at) => {
                    let after = from + at + 1;
                    if rest[after..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphanumeric)
                    {
                        break after;
                    }
                    from = after;
                }
                None => break rest.len(),
            }
        };
        let (line, next) = rest.split_at(cut);
        rest = next;
        Some(line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts each distinct text it is asked (as an exact tokenizer would, slowly).
    struct Tally(std::sync::atomic::AtomicUsize);

    impl TokenCounter for Tally {
        fn count(&self, text: &str) -> usize {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Estimator.count(text)
        }
        fn exact(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_cached_counter_counts_a_long_text_once_and_stays_bounded() {
        let cached = Cached::new(Tally(Default::default()));
        let long = "The motion: cities should ban cars from their centres. ".repeat(4);
        let first = cached.count(&long);
        assert_eq!(cached.count(&long), first);
        assert_eq!(cached.inner.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(cached.exact());
        for i in 0..CACHED_COUNTS + 10 {
            cached.count(&format!("{long}{i}"));
        }
        assert!(cached.counts.len() <= CACHED_COUNTS);
    }

    #[test]
    fn lines_are_cut_after_a_newline_a_letter_or_digit_follows() {
        let lines: Vec<&str> = lines_apart("Ada: hi\nBen: 2\n\n3 ways\n  x\n.\nÉ\n").collect();
        assert_eq!(
            lines,
            ["Ada: hi\n", "Ben: 2\n\n", "3 ways\n  x\n.\n", "É\n"]
        );
        assert_eq!(lines_apart("").count(), 0);
        assert_eq!(lines_apart("\n\n").collect::<Vec<_>>(), ["\n\n"]);
        let text = "Ada: one two\nBen: three\n\nCal: 4";
        assert_eq!(ByLine(Estimator).count(text), Estimator.count(text));
    }

    /// The estimate as its definition reads: words split at whitespace, each estimated
    /// alone, plus newlines, plus runs of blanks within lines.
    fn estimate_by_definition(text: &str) -> usize {
        let word = |w: &str| {
            let (mut tokens, mut letters) = (0, 0usize);
            for c in w.chars() {
                if c.is_ascii_alphabetic() {
                    letters += 1;
                } else {
                    tokens += letters.div_ceil(4) + if c.len_utf8() == 4 { 4 } else { 1 };
                    letters = 0;
                }
            }
            tokens + letters.div_ceil(4) + usize::from(w.starts_with(|c: char| c.is_ascii_digit()))
        };
        let blank_runs = text
            .split('\n')
            .flat_map(|line| line.split(|c: char| c != ' ' && c != '\t'))
            .filter(|run| run.len() >= 2)
            .count();
        text.split_whitespace().map(word).sum::<usize>() + text.matches('\n').count() + blank_runs
    }

    #[test]
    fn the_one_pass_estimate_is_the_definition() {
        let texts = [
            "The motion: cities should ban cars.\n\n  Ada, 2–3 sentences. 你好 émigré 🙂\t{\"a\": [1, 22]}  \n",
            "  \t x1 22y\r\n\u{a0}\u{a0}word\u{2003}  end \t",
            "fn main() {\n    let x = 3141592653;\n\t\treturn;\n}\n\n",
        ];
        for text in texts {
            for cut in 0..text.len() {
                if let Some(part) = text.get(cut..) {
                    assert_eq!(
                        Estimator.count(part),
                        estimate_by_definition(part),
                        "{part:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn estimate_is_additive_over_newline_joins() {
        let e = Estimator;
        let (a, b) = ("The quick brown fox\njumps", "over the lazy dog, twice.");
        assert_eq!(e.count(&format!("{a}\n{b}")), e.count(a) + 1 + e.count(b));
        assert_eq!(e.count(""), 0);
        assert_eq!(e.count("internationalisation"), 5);
        // Text without spaces: about a token per character, as BPE tokenizers count it.
        assert_eq!(e.count("我们今天讨论合作与竞争"), 11);
    }

    #[test]
    fn digits_punctuation_and_emoji_are_counted_high() {
        let e = Estimator;
        assert_eq!(
            e.count("3141592653"),
            11,
            "a token per digit, one for the space"
        );
        assert_eq!(e.count("v1.2.3"), 6, "letters, digits and dots");
        assert_eq!(e.count(r#"{"name":"Ada","age":36}"#), 16);
        assert_eq!(
            e.count("https://example.com/api?id=42"),
            16,
            "https(2) ://(3) example(2) .(1) com(1) /(1) api(1) ?(1) id(1) =(1) 42(2)"
        );
        assert_eq!(e.count("👍"), 4, "a token per byte outside the BMP");
        assert_eq!(e.count("café"), 2);
        assert_eq!(e.count("{\n    \"a\": 1\n}"), 11, "indentation is a token");
    }

    #[test]
    fn most_of_counts_the_most_and_is_exact_only_alone() {
        struct Fixed(usize, bool);
        impl TokenCounter for Fixed {
            fn count(&self, _: &str) -> usize {
                self.0
            }
            fn exact(&self) -> bool {
                self.1
            }
        }
        use std::sync::Arc;
        let both = MostOf(vec![Arc::new(Fixed(3, true)), Arc::new(Fixed(5, true))]);
        assert_eq!(both.count("x"), 5);
        assert!(!both.exact());
        assert!(MostOf(vec![Arc::new(Fixed(3, true))]).exact());
        assert!(!MostOf(vec![Arc::new(Estimator)]).exact());
    }
}
