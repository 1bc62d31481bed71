//! Counting tokens for a server's models: OpenAI's own tokenizers for OpenAI's models
//! (through the `tiktoken` crate, whose vocabularies take about 10 MB once loaded and
//! are loaded only when a prompt is long enough to need a count), else the
//! conservative [`Estimator`].

use std::sync::Arc;

use sopsim_core::tokens::{ByLine, Cached, Estimator, MostOf, TokenCounter};

/// The `tiktoken` crate's encodings of OpenAI's models (the crate is built with
/// their vocabularies only).
const OPENAI_ENCODINGS: [&str; 6] = [
    "cl100k_base",
    "o200k_base",
    "o200k_harmony",
    "p50k_base",
    "p50k_edit",
    "r50k_base",
];

/// Exact counts with one of OpenAI's tokenizers, whose tables load at the first count.
struct Exact {
    /// The encoding's name in the `tiktoken` crate.
    encoding: &'static str,
    /// Whether a text's count is the sum of its lines' (see [`ByLine`]). GPT-4's and
    /// GPT-4o's pre-tokenizers end a run of whitespace that holds a newline at its
    /// last newline, and no other piece reaches past a newline, so a letter or digit
    /// after one always starts a piece. GPT-2's and GPT-3's (r50k, p50k) split "\n\nA"
    /// into "\n", "\n" and "A" but a text ending in "\n\n" into one piece.
    by_line: bool,
}

impl Exact {
    fn for_model(model: &str) -> Option<Self> {
        let encoding = tiktoken::model_to_encoding(model)?;
        OPENAI_ENCODINGS.contains(&encoding).then_some(Exact {
            encoding,
            by_line: matches!(encoding, "cl100k_base" | "o200k_base" | "o200k_harmony"),
        })
    }

    fn same(&self, other: &Exact) -> bool {
        self.encoding == other.encoding
    }
}

impl TokenCounter for Exact {
    fn count(&self, text: &str) -> usize {
        tiktoken::get_encoding(self.encoding)
            .expect("the tiktoken crate is built with OpenAI's vocabularies")
            .count(text)
    }

    /// Each token of these byte-level tokenizers is one byte or more.
    fn at_most(&self, text: &str) -> usize {
        text.len()
    }

    fn exact(&self) -> bool {
        true
    }
}

/// The counter for prompts sent to any of `models`: exact when they all share one
/// tokenizer OpenAI names for them (gpt-4o, gpt-4, gpt-3.5, o1…); otherwise each
/// model's count (the estimator's for a model OpenAI's tables do not know, or when
/// none is named), the most of them taken.
pub fn counter_for(models: &[&str]) -> Arc<dyn TokenCounter> {
    let mut exact: Vec<Exact> = Vec::new();
    let mut unknown = models.is_empty();
    for model in models {
        match Exact::for_model(model) {
            Some(e) if !exact.iter().any(|x| x.same(&e)) => exact.push(e),
            Some(_) => {}
            None => unknown = true,
        }
    }
    let mut counters: Vec<Arc<dyn TokenCounter>> = exact
        .into_iter()
        .map(|e| {
            if e.by_line {
                Arc::new(ByLine(Cached::new(e))) as Arc<dyn TokenCounter>
            } else {
                Arc::new(Cached::new(e))
            }
        })
        .collect();
    if unknown {
        counters.push(Arc::new(Estimator));
    }
    match counters.len() {
        1 => counters.remove(0),
        _ => Arc::new(MostOf(counters)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_counted_is_built_in() {
        for name in OPENAI_ENCODINGS {
            assert!(tiktoken::get_encoding(name).is_some(), "{name}");
        }
    }

    #[test]
    fn openai_models_are_counted_exactly_and_others_estimated() {
        let gpt = counter_for(&["gpt-4o-mini"]);
        assert!(gpt.exact());
        assert_eq!(gpt.count("Hello, world!"), 4);
        assert!(
            counter_for(&["gpt-4o-mini", "gpt-4o"]).exact(),
            "one tokenizer"
        );
        let other = counter_for(&["qwen2.5-coder-0.5b-instruct"]);
        assert!(!other.exact());
        assert!(!counter_for(&[]).exact());
        // An agent on another model: the most of both counts.
        let mixed = counter_for(&["gpt-4o-mini", "qwen2.5-coder-0.5b-instruct"]);
        assert!(!mixed.exact());
        assert_eq!(
            mixed.count("Hello, world!"),
            Estimator.count("Hello, world!")
        );
        let old = counter_for(&["gpt-4o-mini", "gpt-4"]);
        let text = "Zusammenarbeit und Wettbewerb, 2024-05-17.";
        assert_eq!(
            old.count(text),
            counter_for(&["gpt-4o-mini"])
                .count(text)
                .max(counter_for(&["gpt-4"]).count(text))
        );
    }

    /// The counts are those of tiktoken-rs (OpenAI's own Rust core), on every suffix of
    /// text of every kind: prose with contractions, numbers, runs of spaces and
    /// newlines, trailing whitespace, code, JSON, CJK, accents and emoji, and lines
    /// (which GPT-4's and GPT-4o's counters count one by one).
    #[test]
    fn counts_are_tiktokens() {
        let texts = [
            "The motion: cities should ban cars.\n\n  Ada, 2–3 sentences. 你好 émigré 🙂\t{\"a\": [1, 22]}  \n",
            "I'll say it's 12345678 and they've WON'T   stop.\r\n\r\n   \n\tfn x() { y?; }   ",
            "Ünïcödé façade naïve — “quotes” … 協力と競争について話しましょう。 👨‍👩‍👧 🇩🇪 ❤️ \n \n",
            // Lines as a prompt's history holds them: counted apart and summed.
            "Ada: Cars go.\nBen: No!\n\nCal: 12 of them\n  Dan\n.\nÉmile\n你好\n1st\r\nX \nY\t\nZ\n\n\nW...\n\n/x\n'tis\n\u{301}e\n",
        ];
        for (model, bpe) in [
            ("gpt-4o-mini", tiktoken_rs::o200k_base_singleton()),
            ("gpt-4", tiktoken_rs::cl100k_base_singleton()),
            ("text-davinci-003", tiktoken_rs::p50k_base_singleton()),
        ] {
            let counter = counter_for(&[model]);
            for text in texts {
                for cut in 0..text.len() {
                    if let Some(part) = text.get(cut..) {
                        assert_eq!(
                            counter.count(part),
                            bpe.encode_ordinary(part).len(),
                            "{model}: {part:?}"
                        );
                    }
                }
            }
        }
    }

    /// Text BPE tokenizers split finely: the estimate must not undercount it.
    #[test]
    fn the_estimate_is_at_least_what_openais_tokenizers_count() {
        let cjk = "我们今天讨论合作与竞争。協力と競争について話しましょう。";
        let texts = [
            "The quick brown fox jumps over the lazy dog.",
            "3141592653589793 2718281828 1234567890",
            r#"{"id": 1729, "name": "Ada", "tags": ["x", "y"], "ok": true, "ratio": 0.375}"#,
            "https://example.com/api/v1/items?id=12345&sort=desc#top",
            cjk,
            "👍🏽 🎉🎉 👨‍👩‍👧 🇩🇪 ❤️",
            "fn main() { println!(\"{}\", x[0] + y.len()); }",
            "Ünïcödé façade naïve résumé — “quotes” … ñ",
            "0x7f3a9c 3f2a9c7e-1b2d-4e5f-8a9b-0c1d2e3f4a5b",
            "{\n  \"turns\": [\n    {\"seq\": 12, \"score\": -3.5e-2},\n    {\"seq\": 13}\n  ]\n}",
            "def f(x):\n    if x > 10:\n        return x * 2\n    return -x\n",
            "\tTab\tseparated\t1\t22\t333",
        ];
        for model in ["gpt-4o-mini", "gpt-4", "gpt-3.5-turbo"] {
            let exact = counter_for(&[model]);
            for text in texts {
                if text == cjk && model != "gpt-4o-mini" {
                    // GPT-4's tokenizer spends up to two tokens on a CJK character; the
                    // estimate counts one, as newer tokenizers (GPT-4o's, Qwen's) spend.
                    continue;
                }
                let (estimate, real) = (Estimator.count(text), exact.count(text));
                assert!(
                    estimate >= real,
                    "{model}: {estimate} < {real} for {text:?}"
                );
            }
        }
    }
}
