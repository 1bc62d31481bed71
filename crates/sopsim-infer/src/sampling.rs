//! Choosing the next token from the logits: the sequence's [`Penalties`], then
//! min-p (on the probabilities before temperature, as llama.cpp applies it),
//! temperature, top-k and top-p, drawn with a seeded generator so that a seeded run
//! samples the same way every time. Without top-k and top-p nothing needs sorting: the
//! draw walks the vocabulary in id order.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::penalties::Penalties;

/// Tokens less likely than e^−30 times the most likely one are left out before
/// sorting (a mass below 10⁻⁸ for any vocabulary sopsim reads): a draw then sorts a
/// few hundred candidates instead of the whole vocabulary.
const NEGLIGIBLE: f64 = 30.0;

/// How to draw: the penalties, temperature (0 or less: always the most likely),
/// top-k, top-p and min-p.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// Divides the logits before the draw; 0 or less always takes the most likely token.
    pub temperature: f32,
    /// Draws only among this many most likely tokens (`None` or 0: no limit).
    pub top_k: Option<u32>,
    /// Draws only among the most likely tokens whose probabilities reach this sum
    /// (used when strictly between 0 and 1).
    pub top_p: Option<f32>,
    /// Leaves out tokens less likely than this times the most likely one (used when
    /// above 0 and at most 1).
    pub min_p: Option<f32>,
    /// What the sequence's context does to the logits before the draw.
    pub penalties: Penalties,
}

/// Draws tokens by `SamplingParams`, from a generator seeded once.
pub struct Sampler {
    rng: ChaCha8Rng,
    temperature: f32,
    top_k: Option<usize>,
    top_p: Option<f32>,
    /// `ln(min_p)`: a token whose logit is this far below the best is left out.
    min_p_gap: Option<f32>,
    penalties: Penalties,
}

impl Sampler {
    /// A sampler drawing by `params`, its generator seeded with `seed`.
    pub fn new(params: SamplingParams, seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            temperature: params.temperature,
            top_k: params.top_k.map(|k| k as usize).filter(|k| *k > 0),
            top_p: params.top_p.filter(|p| *p > 0.0 && *p < 1.0),
            min_p_gap: params.min_p.filter(|p| *p > 0.0 && *p <= 1.0).map(f32::ln),
            penalties: params.penalties,
        }
    }

    /// The next token after `context` (the prompt and what was generated, oldest
    /// first).
    pub fn sample(&mut self, logits: &mut [f32], context: &[u32]) -> u32 {
        self.penalties.apply(logits, context);
        // NaN counts as zero: the most likely token.
        if self.temperature.is_nan() || self.temperature <= 0.0 {
            return argmax(logits);
        }
        let best = logits
            .iter()
            .filter(|l| l.is_finite())
            .fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        if best == f32::NEG_INFINITY {
            return 0;
        }
        if let Some(gap) = self.min_p_gap {
            let floor = best + gap;
            for l in logits.iter_mut() {
                if *l < floor {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        if self.top_k.is_none() && self.top_p.is_none() {
            return self.draw_any(logits, best);
        }
        // Candidates sorted by logit, highest first (ties by token id), cut to top-k.
        let t = f64::from(self.temperature);
        let floor = f64::from(best) - NEGLIGIBLE * t;
        let mut cand: Vec<(f32, u32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite() && f64::from(**l) >= floor)
            .map(|(i, l)| (*l, i as u32))
            .collect();
        let by_logit = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let keep = self.top_k.unwrap_or(cand.len()).min(cand.len());
        if keep < cand.len() {
            cand.select_nth_unstable_by(keep - 1, by_logit);
            cand.truncate(keep);
        }
        cand.sort_unstable_by(by_logit);
        let probs = probabilities(&cand, t, self.top_p);
        cand[draw(&probs, &mut self.rng)].1
    }
}

/// What a draw chooses from after the penalties and cuts: one token for certain
/// (temperature 0), or tokens with their probabilities (in id order, summing to 1).
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    /// This token, for certain.
    Certain(u32),
    /// Tokens with their probabilities, in id order.
    Weighted(Vec<(u32, f64)>),
}

impl Dist {
    /// The probability of `token`.
    pub fn p(&self, token: u32) -> f64 {
        match self {
            Dist::Certain(t) => f64::from(u8::from(*t == token)),
            Dist::Weighted(w) => w
                .binary_search_by_key(&token, |(t, _)| *t)
                .map_or(0.0, |i| w[i].1),
        }
    }
}

impl Sampler {
    /// The distribution [`sample`](Self::sample) draws the next token from, after
    /// `context`: the same penalties, min-p, temperature, top-k and top-p.
    pub fn distribution(&self, logits: &mut [f32], context: &[u32]) -> Dist {
        self.penalties.apply(logits, context);
        if self.temperature.is_nan() || self.temperature <= 0.0 {
            return Dist::Certain(argmax(logits));
        }
        let best = logits
            .iter()
            .filter(|l| l.is_finite())
            .fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        if best == f32::NEG_INFINITY {
            return Dist::Certain(0);
        }
        let floor_min_p = self.min_p_gap.map_or(f32::NEG_INFINITY, |gap| best + gap);
        let t = f64::from(self.temperature);
        let floor = (f64::from(best) - NEGLIGIBLE * t).max(f64::from(floor_min_p));
        let mut cand: Vec<(f32, u32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite() && f64::from(**l) >= floor)
            .map(|(i, l)| (*l, i as u32))
            .collect();
        let by_logit = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        cand.sort_unstable_by(by_logit);
        if let Some(k) = self.top_k {
            cand.truncate(k.max(1));
        }
        let probs = probabilities(&cand, t, self.top_p);
        let mut weighted: Vec<(u32, f64)> = cand.iter().map(|(_, t)| *t).zip(probs).collect();
        weighted.sort_unstable_by_key(|(t, _)| *t);
        Dist::Weighted(weighted)
    }

    /// A token drawn from `dist` with this sampler's generator.
    pub fn draw_from(&mut self, dist: &Dist) -> u32 {
        match dist {
            Dist::Certain(t) => *t,
            Dist::Weighted(w) => {
                let probs: Vec<f64> = w.iter().map(|(_, p)| *p).collect();
                w[draw(&probs, &mut self.rng)].0
            }
        }
    }

    /// Speculative decoding's rule for a `drafted` token that the draft drew from `q`,
    /// where the model itself would draw from `p`: kept with probability
    /// `min(1, p/q)`, else replaced by a draw from `max(0, p − q)` renormalised, so
    /// that what is kept follows `p` exactly (Leviathan et al., Chen et al. 2023).
    /// With `p` certain (temperature 0): kept when it is `p`'s token.
    pub fn verify(&mut self, p: &Dist, q: &Dist, drafted: u32) -> Result<(), u32> {
        let (pw, qw) = match (p, q) {
            (Dist::Certain(t), _) => return if *t == drafted { Ok(()) } else { Err(*t) },
            (Dist::Weighted(pw), q) => (pw, q),
        };
        let (px, qx) = (p.p(drafted), qw.p(drafted));
        if qx > 0.0 && self.rng.random::<f64>() < (px / qx).min(1.0) {
            return Ok(());
        }
        let residual: Vec<(u32, f64)> = pw
            .iter()
            .map(|(t, pt)| (*t, (pt - qw.p(*t)).max(0.0)))
            .filter(|(_, r)| *r > 0.0)
            .collect();
        if residual.is_empty() {
            return Err(self.draw_from(p));
        }
        let probs: Vec<f64> = residual.iter().map(|(_, r)| *r).collect();
        Err(residual[draw(&probs, &mut self.rng)].0)
    }

    /// A draw from the whole vocabulary (no top-k or top-p): each token weighs
    /// `e^((logit − best) / temperature)` (sopsim's own `exp`, sixteen at a time), and
    /// the draw walks the tokens in id order — no sorting.
    fn draw_any(&mut self, logits: &[f32], best: f32) -> u32 {
        let mut weights = Vec::new();
        crate::math::weights(logits, best, 1.0 / self.temperature, &mut weights);
        let total: f64 = weights.iter().map(|w| f64::from(*w)).sum();
        let u = self.rng.random::<f64>() * total;
        let mut cum = 0.0;
        for (i, w) in weights[..logits.len()].iter().enumerate() {
            cum += f64::from(*w);
            if u < cum {
                return i as u32;
            }
        }
        // Rounding left `u` at the very end: the last token that weighs anything.
        weights[..logits.len()]
            .iter()
            .rposition(|w| *w > 0.0)
            .unwrap_or(0) as u32
    }
}

/// The index of the largest value (the first of equals).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// An index drawn from `probs` (which sum to about 1).
pub fn draw(probs: &[f64], rng: &mut ChaCha8Rng) -> usize {
    let u: f64 = rng.random::<f64>() * probs.iter().sum::<f64>();
    let mut cum = 0.0;
    for (i, p) in probs.iter().enumerate() {
        cum += p;
        if u < cum {
            return i;
        }
    }
    probs.len().saturating_sub(1)
}

/// The probabilities of candidates sorted best first, at temperature `t`, cut to the
/// fewest whose sum reaches `top_p` and summing to 1: what `sample` draws from and
/// `distribution` reports.
fn probabilities(cand: &[(f32, u32)], t: f64, top_p: Option<f32>) -> Vec<f64> {
    let mut probs = crate::math::softmax(cand.iter().map(|(l, _)| *l), t);
    if let Some(top_p) = top_p {
        let mut cum = 0.0;
        let cut = probs
            .iter()
            .position(|p| {
                cum += p;
                cum >= f64::from(top_p)
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(cut);
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
    }
    probs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(t: f32) -> SamplingParams {
        SamplingParams {
            temperature: t,
            top_k: None,
            top_p: None,
            min_p: None,
            penalties: Penalties {
                repeat: 1.1,
                ..Penalties::default()
            },
        }
    }

    #[test]
    fn temperature_zero_takes_the_best_after_the_penalty() {
        let mut s = Sampler::new(settings(0.0), 1);
        assert_eq!(s.sample(&mut [0.1, 2.0, 1.95], &[]), 1);
        // Token 1 was just said: 2.0 / 1.1 < 1.95.
        assert_eq!(s.sample(&mut [0.1, 2.0, 1.95], &[1]), 2);
    }

    #[test]
    fn min_p_leaves_out_tokens_far_below_the_best() {
        // p(1) / p(0) = e^-3 ≈ 0.05: under a min-p of 0.1, token 1 is never drawn.
        let mut s = Sampler::new(
            SamplingParams {
                min_p: Some(0.1),
                ..settings(5.0)
            },
            4,
        );
        for _ in 0..200 {
            assert_eq!(s.sample(&mut [3.0, 0.0, f32::NEG_INFINITY], &[]), 0);
        }
        let mut s = Sampler::new(settings(5.0), 4);
        let ones = (0..200)
            .filter(|_| s.sample(&mut [3.0, 0.0, f32::NEG_INFINITY], &[]) == 1)
            .count();
        assert!(ones > 20, "without min-p, token 1 is drawn ({ones} of 200)");
    }

    #[test]
    fn seeded_draws_repeat_and_follow_the_distribution() {
        let draws = |seed| {
            let mut s = Sampler::new(settings(1.0), seed);
            (0..2000)
                .map(|_| s.sample(&mut [0.0, (3.0f32).ln(), f32::NEG_INFINITY], &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(5), draws(5));
        let ones = draws(5).iter().filter(|t| **t == 1).count();
        assert!(
            (1400..1600).contains(&ones),
            "{ones} of 2000, expected about 1500"
        );
        assert!(!draws(5).contains(&2));
    }

    #[test]
    fn negligible_tokens_are_never_drawn_but_likely_ones_are() {
        let mut logits = vec![-100.0f32; 50_000];
        logits[7] = 5.0;
        logits[9] = 4.0;
        let mut s = Sampler::new(settings(1.0), 2);
        let draws: Vec<u32> = (0..300)
            .map(|_| s.sample(&mut logits.clone(), &[]))
            .collect();
        assert!(draws.iter().all(|t| *t == 7 || *t == 9));
        assert!(draws.contains(&7) && draws.contains(&9));
    }

    #[test]
    fn verified_drafts_follow_the_models_distribution() {
        // p over three tokens; the draft's q favours token 2, which p rarely takes.
        let logits_p = [0.0f32, (2.0f32).ln(), (0.5f32).ln()];
        let logits_q = [0.0f32, 0.0, (6.0f32).ln()];
        let params = SamplingParams {
            penalties: Penalties::default(),
            ..settings(1.0)
        };
        let s = Sampler::new(params.clone(), 1);
        let p = s.distribution(&mut logits_p.clone(), &[]);
        let q = s.distribution(&mut logits_q.clone(), &[]);
        let mut draft = Sampler::new(params.clone(), 2);
        let mut model = Sampler::new(params, 3);
        let mut counts = [0usize; 3];
        let n = 40_000;
        for _ in 0..n {
            let d = draft.draw_from(&q);
            let t = model.verify(&p, &q, d).map_or_else(|r| r, |()| d);
            counts[t as usize] += 1;
        }
        for (i, c) in counts.iter().enumerate() {
            let expected = p.p(i as u32);
            let got = *c as f64 / n as f64;
            assert!(
                (got - expected).abs() < 0.01,
                "token {i}: {got} against {expected}"
            );
        }
        // Greedy: kept only when it is the best.
        let greedy = Sampler::new(settings(0.0), 1);
        let p0 = greedy.distribution(&mut logits_p.clone(), &[]);
        let mut g = Sampler::new(settings(0.0), 1);
        assert_eq!(g.verify(&p0, &q, 1), Ok(()));
        assert_eq!(g.verify(&p0, &q, 2), Err(1));
    }

    #[test]
    fn the_distribution_is_what_sample_draws_from() {
        let params = SamplingParams {
            top_k: Some(2),
            top_p: Some(0.9),
            ..settings(0.8)
        };
        let logits = [1.0f32, 2.0, 0.5, 1.8];
        let d = Sampler::new(params.clone(), 0).distribution(&mut logits.clone(), &[1]);
        let mut s = Sampler::new(params, 9);
        let n = 20_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.sample(&mut logits.clone(), &[1]) as usize] += 1;
        }
        for (i, c) in counts.iter().enumerate() {
            let got = *c as f64 / n as f64;
            assert!(
                (got - d.p(i as u32)).abs() < 0.015,
                "token {i}: {got} against {}",
                d.p(i as u32)
            );
        }
    }

    #[test]
    fn top_k_and_top_p_cut_the_tail() {
        let mut s = Sampler::new(
            SamplingParams {
                top_k: Some(1),
                ..settings(1.0)
            },
            3,
        );
        for _ in 0..50 {
            assert_eq!(s.sample(&mut [1.0, 1.2, 0.5], &[]), 1);
        }
        let mut s = Sampler::new(
            SamplingParams {
                top_p: Some(0.5),
                ..settings(1.0)
            },
            3,
        );
        for _ in 0..50 {
            assert_eq!(s.sample(&mut [0.0, 5.0, 0.0], &[]), 1);
        }
    }
}
