//! Words as reply quality reads them: lower-cased runs of letters and digits, each
//! hashed as it is read, and runs of them (n-grams) hashed from the words' hashes.

use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_64;

use super::{COPY_WORDS, ECHO_WORDS};

/// The hash of each lower-cased word of `text`.
pub(super) fn words(text: &str) -> Vec<u64> {
    word_spans(text).into_iter().map(|(w, _)| w).collect()
}

/// The hash of each lower-cased word of `text`, with where the word stands in `text`.
/// A reply is checked against every message its speaker was shown, so words are
/// hashed as they are read, never copied into strings of their own.
pub(super) fn word_spans(text: &str) -> Vec<(u64, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut lower = String::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let word = &text[s..i];
                let hash = if word
                    .bytes()
                    .any(|b| b.is_ascii_uppercase() || !b.is_ascii())
                {
                    lower.clear();
                    lower.extend(word.chars().flat_map(char::to_lowercase));
                    xxh3_64(lower.as_bytes())
                } else {
                    xxh3_64(word.as_bytes())
                };
                out.push((hash, s..i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The most words in a run that is hashed.
const LONGEST_GRAM: usize = if COPY_WORDS > ECHO_WORDS {
    COPY_WORDS
} else {
    ECHO_WORDS
};

/// The hash of a run of at most [`LONGEST_GRAM`] words, from the words' hashes.
pub(super) fn gram_hash(words: &[u64]) -> u64 {
    let mut bytes = [0u8; 8 * LONGEST_GRAM];
    for (chunk, w) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    xxh3_64(&bytes[..8 * words.len()])
}

pub(super) fn gram_hashes(words: &[u64], n: usize) -> impl Iterator<Item = u64> + '_ {
    assert!(n <= LONGEST_GRAM, "runs of {n} words are not hashed");
    words.windows(n).map(gram_hash)
}

/// The text of the longest run of `text`'s words whose every `n`-gram is in `grams`
/// (as `text` writes it), if any `n`-gram is.
pub(super) fn shared_span(text: &str, grams: &FxHashSet<u64>, n: usize) -> Option<String> {
    let spans = word_spans(text);
    let w: Vec<u64> = spans.iter().map(|(w, _)| *w).collect();
    let hits: Vec<bool> = w
        .windows(n)
        .map(|g| grams.contains(&gram_hash(g)))
        .collect();
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < hits.len() {
        if !hits[i] {
            i += 1;
            continue;
        }
        let first = i;
        while i < hits.len() && hits[i] {
            i += 1;
        }
        // Grams first..i cover words first..i-1+n.
        let last = i - 1 + n - 1;
        if best.is_none_or(|(a, b)| last - first > b - a) {
            best = Some((first, last));
        }
    }
    best.map(|(a, b)| text[spans[a].1.start..spans[b].1.end].to_string())
}
