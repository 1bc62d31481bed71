//! Speculative decoding: a small draft model that shares the model's vocabulary (qwen05
//! for qwen15) draws a few tokens of a reply ahead, one cheap pass each, and the model
//! checks them all in one pass of its own, which costs about what one token costs
//! (the weights are read once for every row). Each draft is kept by the standard
//! rejection rule (`Sampler::verify`), so what is kept follows the model's own
//! distribution, and at temperature 0 the reply is the very one plain decoding gives.
//!
//! Drafting pays only when the tokens it saves outweigh what the drafts cost. A draft
//! token costs about the draft's weights over the model's (each decode step reads its
//! model's weights once), and each draft adds a row to the model's check. The draft
//! length is the one that gives the most tokens per unit of that cost at the reply's
//! acceptance so far, which is none at all when acceptance is low; then a single draft
//! every few steps keeps the estimate current.
//!
//! Every draw comes from the sequence's own seeded generators, and the draft length
//! depends only on the sequence's own acceptance and the two models' sizes, so a reply
//! does not depend on the batch or the machine.

use sopsim_infer::kv::KvCache;
use sopsim_infer::sampling::{Dist, Sampler, SamplingParams};
use sopsim_infer::transformer::{Model, Scratch, Segment, Want};

use super::prefix_tree::PrefixTree;

/// Drafts per check at most.
const MAX_DRAFTS: usize = 8;
/// The acceptance a reply is assumed to have before its first check.
const FIRST_ACCEPTANCE: f64 = 0.7;
/// How much each check's acceptance moves the reply's estimate.
const ACCEPTANCE_WEIGHT: f64 = 0.3;
/// What a further row adds to the model's check, against a pass over one row. It
/// ranges from 0.07 (Intel with AMX, batched decode) to about 0.5 (AMD Zen 3, whose
/// AVX2 has no 8-bit dot product: qwen15's steps in a debate took 117 ms at two rows
/// and 156 ms at three). The length must not depend on the machine, or a sampled
/// reply would, so it is priced as on the dearest CPU measured.
const CHECK_ROW_COST: f64 = 0.5;
/// While drafting does not pay, one draft is tried after this many plain steps.
const PROBE_EVERY: usize = 16;

/// The draft model, with the prompt prefixes it has read.
pub(super) struct Draft {
    pub model: Model,
    scratch: Scratch,
    tree: PrefixTree,
    /// What one draft costs, in passes of the model over one row.
    pub draft_cost: f64,
}

/// One sequence's speculation: the draft model's cache of it, the generator its drafts
/// are drawn with, and this cycle's drafts.
pub(super) struct Spec {
    cache: Option<KvCache>,
    sampler: Sampler,
    /// What one draft costs (see [`Draft::draft_cost`]).
    draft_cost: f64,
    /// The estimated chance that the model keeps a draft.
    acceptance: f64,
    /// Plain steps since the last check, while drafting does not pay.
    plain_steps: usize,
    /// This cycle's drafts and the distributions they were drawn from.
    pub drafted: Vec<u32>,
    pub q: Vec<Dist>,
    /// The draft cache's length when this cycle's drafts began (the context through
    /// the last token the model kept).
    base: usize,
    pub stats: SpecStats,
}

/// What speculation did for one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SpecStats {
    /// Checks by the model (each one pass over the drafts).
    pub checks: u64,
    pub drafted: u64,
    pub accepted: u64,
}

impl Spec {
    /// Speculation for a reply drawn with `params` and `seed` (its drafts from a
    /// generator of their own), with drafts that cost `draft_cost`.
    pub(super) fn new(params: SamplingParams, seed: u64, draft_cost: f64) -> Self {
        Self {
            cache: None,
            sampler: Sampler::new(params, seed ^ 0x5eed_d4af_7000_0001),
            draft_cost,
            acceptance: FIRST_ACCEPTANCE,
            plain_steps: 0,
            drafted: Vec::new(),
            q: Vec::new(),
            base: 0,
            stats: SpecStats::default(),
        }
    }

    /// The drafts to draw this step: the length that pays best, or, while none does,
    /// one draft every [`PROBE_EVERY`] steps to see whether acceptance has risen.
    pub(super) fn wanted(&mut self) -> usize {
        let best = best_length(self.acceptance, self.draft_cost);
        if best > 0 {
            return best;
        }
        self.plain_steps += 1;
        if self.plain_steps < PROBE_EVERY {
            return 0;
        }
        self.plain_steps = 0;
        1
    }

    /// After the model kept `accepted` of this cycle's drafts: the estimate of
    /// acceptance takes in this check, and the draft cache is cut back to what the
    /// model kept.
    pub(super) fn settle(&mut self, accepted: usize) {
        let k = self.drafted.len();
        self.stats.checks += 1;
        self.stats.drafted += k as u64;
        self.stats.accepted += accepted as u64;
        if k > 0 {
            // Drafts are tried in order until one is refused.
            let tried = (accepted + 1).min(k);
            let rate = accepted as f64 / tried as f64;
            self.acceptance += ACCEPTANCE_WEIGHT * (rate - self.acceptance);
        }
        if let Some(c) = &mut self.cache {
            c.truncate(c.len().min(self.base + accepted));
        }
        self.drafted.clear();
        self.q.clear();
    }

    /// Keeps the draft cache's whole blocks for later prompts.
    pub(super) fn finish(self, draft: &mut Draft) {
        if let Some(c) = &self.cache {
            draft.tree.insert(c);
        }
    }
}

/// The number of drafts that gives the most tokens per unit of cost, when each draft
/// is kept with chance `acceptance` and costs `draft_cost` (a check alone costs 1):
/// `k` drafts give `1 + a + … + a^k` tokens on average for `1 + k · (draft_cost +
/// CHECK_ROW_COST)`.
fn best_length(acceptance: f64, draft_cost: f64) -> usize {
    let per_draft = draft_cost + CHECK_ROW_COST;
    let mut best = (0, 1.0);
    let (mut tokens, mut kept) = (1.0, 1.0);
    for k in 1..=MAX_DRAFTS {
        kept *= acceptance;
        tokens += kept;
        let rate = tokens / (1.0 + k as f64 * per_draft);
        if rate > best.1 {
            best = (k, rate);
        }
    }
    best.0
}

/// What a sequence asks the draft for: its context (the prompt and every token kept,
/// the last one included) and how many drafts (fewer if one ends the reply).
pub(super) struct DraftJob<'a> {
    pub spec: &'a mut Spec,
    pub context: &'a [u32],
    pub most: usize,
    /// Tokens that end a reply: drafting stops after one.
    pub stops: &'a [u32],
}

impl Draft {
    /// The draft model for `target`, keeping `cache_bytes` of prompt prefixes.
    pub(super) fn new(model: Model, target: &Model, cache_bytes: usize) -> Self {
        let draft_cost = model.decode_bytes() as f64 / target.decode_bytes().max(1) as f64;
        tracing::debug!(
            draft_cost,
            check_row_cost = CHECK_ROW_COST,
            "a draft is priced against a step of the model"
        );
        Self {
            model,
            scratch: Scratch::default(),
            tree: PrefixTree::new(cache_bytes),
            draft_cost,
        }
    }

    /// Draws each job's drafts: one pass of the draft model per draft, every job in
    /// it; the first pass also reads what the draft has not seen of each context.
    pub(super) fn draw(
        &mut self,
        jobs: &mut [DraftJob<'_>],
    ) -> Result<(), sopsim_infer::error::InferError> {
        for job in jobs.iter_mut() {
            let spec = &mut *job.spec;
            if spec.cache.is_none() {
                let model = &self.model;
                spec.cache = Some(
                    self.tree
                        .take(job.context, || model.new_cache())
                        .unwrap_or_else(|| self.model.new_cache()),
                );
            }
            spec.base = job.context.len();
            spec.drafted.clear();
            spec.q.clear();
        }
        let wanted: Vec<usize> = jobs.iter().map(|j| j.most).collect();
        let rounds = wanted.iter().copied().max().unwrap_or(0);
        for round in 0..rounds {
            let live: Vec<usize> = (0..jobs.len())
                .filter(|&i| {
                    let s = &jobs[i].spec;
                    s.drafted.len() == round
                        && round < wanted[i]
                        && !s.drafted.last().is_some_and(|t| jobs[i].stops.contains(t))
                })
                .collect();
            if live.is_empty() {
                break;
            }
            let feeds: Vec<Vec<u32>> = live
                .iter()
                .map(|&i| {
                    let job = &jobs[i];
                    let have = job.spec.cache.as_ref().map_or(0, KvCache::len);
                    match round {
                        0 => job.context[have.min(job.context.len() - 1)..].to_vec(),
                        _ => vec![*job.spec.drafted.last().unwrap_or(&0)],
                    }
                })
                .collect();
            let mut caches: Vec<KvCache> = live
                .iter()
                .map(|&i| {
                    jobs[i]
                        .spec
                        .cache
                        .take()
                        .unwrap_or_else(|| self.model.new_cache())
                })
                .collect();
            // A cache that already holds the context's last token is cut back by one,
            // so that the pass gives the logits after it.
            for (c, (f, &i)) in caches.iter_mut().zip(feeds.iter().zip(&live)) {
                if round == 0 && c.len() + f.len() > jobs[i].context.len() {
                    c.truncate(jobs[i].context.len() - f.len());
                }
            }
            let outputs = {
                let mut segments: Vec<Segment<'_>> = caches
                    .iter_mut()
                    .zip(&feeds)
                    .map(|(cache, tokens)| Segment {
                        cache,
                        tokens,
                        wants: vec![(tokens.len() - 1, Want::All)],
                    })
                    .collect();
                let _lock = sopsim_infer::compute::compute_lock();
                self.model.forward(&mut self.scratch, &mut segments)
            };
            for (c, &i) in caches.into_iter().zip(&live) {
                jobs[i].spec.cache = Some(c);
            }
            let outputs = outputs?;
            for (out, &i) in outputs.into_iter().zip(&live) {
                let job = &mut jobs[i];
                let Some(mut logits) = out.into_iter().next() else {
                    continue;
                };
                let mut seen = job.context.to_vec();
                seen.extend_from_slice(&job.spec.drafted);
                let q = job.spec.sampler.distribution(&mut logits, &seen);
                let token = job.spec.sampler.draw_from(&q);
                job.spec.drafted.push(token);
                job.spec.q.push(q);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::best_length;

    #[test]
    fn drafting_stops_where_it_would_cost_more_than_it_saves() {
        // qwen05 drafting for qwen15: a draft costs 0.39 of a check.
        assert_eq!(best_length(0.6, 0.39), 0);
        assert_eq!(best_length(0.85, 0.39), 0);
        assert!(best_length(0.99, 0.39) >= 3);
        // A model drafting for itself never pays.
        assert_eq!(best_length(1.0, 1.0), 0);
    }

    #[test]
    fn cheaper_drafts_and_higher_acceptance_draft_further() {
        let mut last = 0;
        for acceptance in [0.5, 0.7, 0.8, 0.9, 0.95] {
            let k = best_length(acceptance, 0.1);
            assert!(k >= last, "{acceptance}: {k} < {last}");
            last = k;
            assert!(best_length(acceptance, 0.1) >= best_length(acceptance, 0.39));
        }
        assert!(last > 1);
    }
}
