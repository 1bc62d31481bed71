//! Speculative decoding: a small draft model that shares the model's vocabulary (qwen05
//! for qwen15) draws a few tokens of a reply ahead, one cheap pass each, and the model
//! checks them all in one pass of its own, which costs about what one token costs
//! (the weights are read once for every row). Each draft is kept by the standard
//! rejection rule (`Sampler::verify`), so what is kept follows the model's own
//! distribution, and at temperature 0 the reply is the very one plain decoding gives.
//!
//! Every draw comes from the sequence's own seeded generators, and the draft length
//! adapts to the sequence's own acceptance, so a reply does not depend on the batch.

use sopsim_infer::kv::KvCache;
use sopsim_infer::sampling::{Dist, Sampler, SamplingParams};
use sopsim_infer::transformer::{Model, Scratch, Segment, Want};

use super::prefix_tree::PrefixTree;

/// Drafts per check at most, and at first.
const MAX_DRAFTS: usize = 8;
const FIRST_DRAFTS: usize = 4;

/// The draft model, with the prompt prefixes it has read.
pub(super) struct Draft {
    pub model: Model,
    scratch: Scratch,
    tree: PrefixTree,
}

/// One sequence's speculation: the draft model's cache of it, the generator its drafts
/// are drawn with, and this cycle's drafts.
pub(super) struct Spec {
    cache: Option<KvCache>,
    sampler: Sampler,
    /// Drafts to draw next cycle.
    next: usize,
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
pub struct SpecStats {
    /// Checks by the model (each one pass over the drafts).
    pub checks: u64,
    pub drafted: u64,
    pub accepted: u64,
}

impl Spec {
    /// Speculation for a reply drawn with `params` and `seed` (its drafts from a
    /// generator of their own).
    pub fn new(params: SamplingParams, seed: u64) -> Self {
        Self {
            cache: None,
            sampler: Sampler::new(params, seed ^ 0x5eed_d4af_7000_0001),
            next: FIRST_DRAFTS,
            drafted: Vec::new(),
            q: Vec::new(),
            base: 0,
            stats: SpecStats::default(),
        }
    }

    /// After the model kept `accepted` of this cycle's drafts: the next cycle's length
    /// follows how many were kept, and the draft cache is cut back to what the model
    /// kept.
    pub fn settle(&mut self, accepted: usize) {
        let k = self.drafted.len();
        self.stats.checks += 1;
        self.stats.drafted += k as u64;
        self.stats.accepted += accepted as u64;
        self.next = if accepted == k {
            (k + 1).min(MAX_DRAFTS)
        } else {
            (accepted + 1).clamp(1, MAX_DRAFTS)
        };
        if let Some(c) = &mut self.cache {
            c.truncate(c.len().min(self.base + accepted));
        }
        self.drafted.clear();
        self.q.clear();
    }

    /// Keeps the draft cache's whole blocks for later prompts.
    pub fn finish(self, draft: &mut Draft) {
        if let Some(c) = &self.cache {
            draft.tree.insert(c);
        }
    }
}

/// What a sequence asks the draft for: its context (the prompt and every token kept,
/// the last one included) and at most how many drafts.
pub(super) struct DraftJob<'a> {
    pub spec: &'a mut Spec,
    pub context: &'a [u32],
    pub most: usize,
    /// Tokens that end a reply: drafting stops after one.
    pub stops: &'a [u32],
}

impl Draft {
    pub fn new(model: Model, cache_bytes: usize) -> Self {
        Self {
            model,
            scratch: Scratch::default(),
            tree: PrefixTree::new(cache_bytes),
        }
    }

    /// Draws each job's drafts: one pass of the draft model per draft, every job in
    /// it; the first pass also reads what the draft has not seen of each context.
    pub fn draw(
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
        let wanted: Vec<usize> = jobs.iter().map(|j| j.spec.next.min(j.most)).collect();
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
