//! What a sequence's own context does to its next token's logits, before the draw:
//! llama.cpp's repeat, frequency and presence penalties, its DRY ("don't repeat
//! yourself") penalty, a flat penalty on chosen tokens (a redrawn reply's copied
//! span), and tokens never drawn at all. Each depends only on the sequence's context
//! and its logits, never on the other sequences of a batch.

use std::collections::HashMap;
use std::sync::Arc;

/// Which part of the context a penalty looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last this many tokens.
    Last(usize),
    /// The whole context: the prompt and what was generated.
    All,
}

impl Window {
    fn of<'a>(&self, context: &'a [u32]) -> &'a [u32] {
        match *self {
            Window::Last(n) => &context[context.len().saturating_sub(n)..],
            Window::All => context,
        }
    }
}

/// DRY as llama.cpp and koboldcpp define it: a token that would extend a sequence
/// already in the window (at least `allowed_length` tokens long, not crossing a
/// breaker) loses `multiplier · base^(length − allowed_length)` of its logit, for the
/// longest such sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Dry {
    /// Scale of the penalty (0: off).
    pub multiplier: f32,
    /// Growth of the penalty per token of repeat beyond `allowed_length`.
    pub base: f32,
    /// Shortest repeat that is penalised (0: off).
    pub allowed_length: usize,
    /// Where repeats are looked for.
    pub window: Window,
    /// Tokens no repeat may run across (those holding a breaker string: a newline, a
    /// colon, a quote…). Sorted.
    pub breakers: Vec<u32>,
    /// Tokens that hold the same word, one with a leading space and one without, in
    /// both orders, sorted. The token that would extend a repeat is penalised in both
    /// forms: otherwise a model quoting a long phrase escapes the penalty by gluing
    /// each next word to the one before ("aretheonlyway").
    pub twins: Arc<[(u32, u32)]>,
}

/// Every penalty of one request. The default changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Penalties {
    /// Divides a positive logit, multiplies a negative one (1: off).
    pub repeat: f32,
    /// Subtracted once per occurrence.
    pub frequency: f32,
    /// Subtracted once for any occurrence.
    pub presence: f32,
    /// Where repeat, frequency and presence penalties count tokens.
    pub window: Window,
    /// The DRY penalty, if any.
    pub dry: Option<Dry>,
    /// Tokens that lose `avoid_penalty` whatever the context (sorted).
    pub avoid: Vec<u32>,
    /// Subtracted from each of `avoid`'s logits.
    pub avoid_penalty: f32,
    /// Tokens never drawn, whatever the context (sorted).
    pub forbidden: Vec<u32>,
}

impl Default for Penalties {
    fn default() -> Self {
        Self {
            repeat: 1.0,
            frequency: 0.0,
            presence: 0.0,
            window: Window::Last(64),
            dry: None,
            avoid: Vec::new(),
            avoid_penalty: 0.0,
            forbidden: Vec::new(),
        }
    }
}

impl Penalties {
    /// Applies every penalty to `logits` for the next token after `context`.
    pub fn apply(&self, logits: &mut [f32], context: &[u32]) {
        self.counted(logits, context);
        if let Some(dry) = &self.dry {
            dry.apply(logits, context);
        }
        if self.avoid_penalty != 0.0 {
            for &t in &self.avoid {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l -= self.avoid_penalty;
                }
            }
        }
        for &t in &self.forbidden {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    fn counted(&self, logits: &mut [f32], context: &[u32]) {
        if self.repeat == 1.0 && self.frequency == 0.0 && self.presence == 0.0 {
            return;
        }
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for &t in self.window.of(context) {
            *counts.entry(t).or_default() += 1;
        }
        // Sorted, so the float operations happen in the same order on every run.
        let mut counts: Vec<(u32, u32)> = counts.into_iter().collect();
        counts.sort_unstable();
        for (t, n) in counts {
            let Some(l) = logits.get_mut(t as usize) else {
                continue;
            };
            if self.repeat != 1.0 {
                *l = if *l > 0.0 {
                    *l / self.repeat
                } else {
                    *l * self.repeat
                };
            }
            *l -= n as f32 * self.frequency + self.presence;
        }
    }
}

/// The penalty of a repeat is capped where `base^exponent` would stop being finite.
const MAX_DRY_EXPONENT: f32 = 64.0;

impl Dry {
    fn apply(&self, logits: &mut [f32], context: &[u32]) {
        if self.multiplier == 0.0 || self.allowed_length == 0 {
            return;
        }
        let ctx = self.window.of(context);
        let n = ctx.len();
        if n < 2 {
            return;
        }
        let is_breaker = |t: u32| self.breakers.binary_search(&t).is_ok();
        // A repeat may not run back across a breaker: at most this many tokens match.
        let limit = ctx.iter().rev().take_while(|t| !is_breaker(**t)).count();
        if limit < self.allowed_length {
            return;
        }
        // z[k]: how many tokens before position n-1-k (inclusive) equal the tokens
        // before the end — the common suffix of ctx[..n-k] and ctx — computed with the
        // Z-algorithm over the reversed context.
        let z = reversed_z(ctx);
        let mut longest: HashMap<u32, usize> = HashMap::new();
        for k in 1..n {
            let length = z[k].min(limit);
            if length < self.allowed_length {
                continue;
            }
            // The repeat ends at position n-1-k; the token after it would extend it.
            let next = ctx[n - k];
            let best = longest.entry(next).or_default();
            *best = (*best).max(length);
        }
        let mut longest: Vec<(u32, usize)> = longest.into_iter().collect();
        let twins: Vec<(u32, usize)> = longest
            .iter()
            .filter_map(|&(t, length)| self.twin(t).map(|u| (u, length)))
            .collect();
        longest.extend(twins);
        // By token, the longest repeat first; then one entry a token.
        longest.sort_unstable_by_key(|&(t, length)| (t, std::cmp::Reverse(length)));
        longest.dedup_by_key(|&mut (t, _)| t);
        for (t, length) in longest {
            let exponent = ((length - self.allowed_length) as f32).min(MAX_DRY_EXPONENT);
            let penalty = self.multiplier * self.base.powf(exponent);
            if let Some(l) = logits.get_mut(t as usize) {
                *l -= penalty;
            }
        }
    }

    fn twin(&self, token: u32) -> Option<u32> {
        self.twins
            .binary_search_by_key(&token, |&(t, _)| t)
            .ok()
            .map(|i| self.twins[i].1)
    }
}

/// The Z-array of `ctx` reversed: `z[k]` is the length of the longest common prefix
/// of the reversed context and the reversed context from `k` (`z[0]` is the length).
fn reversed_z(ctx: &[u32]) -> Vec<usize> {
    let n = ctx.len();
    let at = |i: usize| ctx[n - 1 - i];
    let mut z = vec![0usize; n];
    z[0] = n;
    let (mut l, mut r) = (0usize, 0usize);
    for k in 1..n {
        let mut len = if k < r { (r - k).min(z[k - l]) } else { 0 };
        while k + len < n && at(len) == at(k + len) {
            len += 1;
        }
        z[k] = len;
        if k + len > r {
            l = k;
            r = k + len;
        }
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dry(breakers: Vec<u32>) -> Penalties {
        dry_with_twins(breakers, &[])
    }

    fn dry_with_twins(breakers: Vec<u32>, twins: &[(u32, u32)]) -> Penalties {
        Penalties {
            dry: Some(Dry {
                multiplier: 0.8,
                base: 1.75,
                allowed_length: 2,
                window: Window::All,
                breakers,
                twins: twins.into(),
            }),
            ..Penalties::default()
        }
    }

    #[test]
    fn the_z_array_matches_the_naive_common_suffixes() {
        let ctx = [1, 2, 3, 1, 2, 3, 1, 2, 4, 1, 2];
        let z = reversed_z(&ctx);
        let n = ctx.len();
        for k in 1..n {
            let naive = (0..n - k)
                .take_while(|i| ctx[n - 1 - i] == ctx[n - 1 - k - i])
                .count();
            assert_eq!(z[k], naive, "k = {k}");
        }
    }

    #[test]
    fn dry_penalises_the_token_that_would_extend_a_repeat_by_its_length() {
        // "5 6 7 8 9 … 5 6 7": 8 would make "5 6 7 8" again (a repeat of 3 tokens).
        let ctx = [5, 6, 7, 8, 9, 0, 5, 6, 7];
        let mut logits = vec![0.0f32; 10];
        dry(vec![]).apply(&mut logits, &ctx);
        let expected = 0.8 * 1.75f32.powf(1.0);
        assert!((logits[8] + expected).abs() < 1e-6, "{logits:?}");
        for t in [0, 1, 2, 3, 4, 5, 6, 7, 9] {
            assert_eq!(logits[t], 0.0, "token {t}");
        }
    }

    #[test]
    fn dry_penalises_the_word_of_a_repeat_with_or_without_its_space() {
        // 8 and 3 hold one word, with and without a space: after "5 6 7" the model
        // may not glue the word on (3) any more than it may repeat it (8).
        let ctx = [5, 6, 7, 8, 9, 0, 5, 6, 7];
        let mut logits = vec![0.0f32; 10];
        dry_with_twins(vec![], &[(3, 8), (8, 3)]).apply(&mut logits, &ctx);
        assert_eq!(logits[3], logits[8]);
        assert!(logits[3] < 0.0, "{logits:?}");
        for t in [0, 1, 2, 4, 5, 6, 7, 9] {
            assert_eq!(logits[t], 0.0, "token {t}");
        }
    }

    #[test]
    fn dry_leaves_repeats_shorter_than_allowed_and_stops_at_breakers() {
        // 6 repeats, but a repeat of one token is shorter than the two allowed.
        let ctx = [6, 8, 0, 6];
        let mut logits = vec![0.0f32; 10];
        dry(vec![]).apply(&mut logits, &ctx);
        assert!(logits.iter().all(|l| *l == 0.0), "{logits:?}");
        // With 6 a breaker, "5 6 7" cannot match back across it.
        let ctx = [5, 6, 7, 8, 9, 0, 5, 6, 7];
        let mut logits = vec![0.0f32; 10];
        dry(vec![6]).apply(&mut logits, &ctx);
        assert!(logits.iter().all(|l| *l == 0.0), "{logits:?}");
    }

    #[test]
    fn repeat_frequency_and_presence_count_the_window() {
        let p = Penalties {
            repeat: 2.0,
            frequency: 0.5,
            presence: 0.25,
            window: Window::Last(3),
            ..Penalties::default()
        };
        let mut logits = vec![4.0f32, -4.0, 4.0, 4.0];
        // Token 0 is outside the window; 1 once; 2 twice.
        p.apply(&mut logits, &[0, 1, 2, 2]);
        assert_eq!(logits, vec![4.0, -8.0 - 0.75, 2.0 - 1.25, 4.0]);
    }

    #[test]
    fn avoided_tokens_lose_their_penalty() {
        let p = Penalties {
            avoid: vec![1, 3],
            avoid_penalty: 1.5,
            ..Penalties::default()
        };
        let mut logits = vec![1.0f32; 4];
        p.apply(&mut logits, &[]);
        assert_eq!(logits, vec![1.0, -0.5, 1.0, -0.5]);
    }

    #[test]
    fn forbidden_tokens_are_never_drawn() {
        let p = Penalties {
            forbidden: vec![0, 2],
            ..Penalties::default()
        };
        let mut logits = vec![9.0f32, 1.0, 9.0, 0.5];
        p.apply(&mut logits, &[]);
        assert_eq!(logits, vec![f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY, 0.5]);
    }
}
