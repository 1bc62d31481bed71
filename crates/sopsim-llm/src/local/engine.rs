//! The worker thread that owns the local model and serves every simulation's requests
//! with continuous batching: each step runs one forward pass over every sequence in
//! flight — the next token of each reply being generated, a chunk of each prompt being
//! read, the next question of each choice — so the weights are read once per step for
//! all of them. Sequences join and leave between steps.
//!
//! Reuse: a finished sequence's keys and values go to the process's prefix tree
//! (`prefix_tree.rs`), and a new prompt continues from the longest prefix it holds, or
//! waits for a sequence in flight that is reading the same prefix. Because every row of
//! a step is computed independently of the others (see [`super::quant`]), a reply is
//! the same bytes alone or batched, with or without reuse.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use tokio::sync::oneshot;

use sopsim_infer::kv::KvCache;
use sopsim_infer::transformer::{Model, Scratch, Segment, Want};

use super::admit::Admission;
use super::decode::Decoder;
use super::prefix_tree::PrefixTree;
use super::sequence::{Job, Phase, Plan, Seq, Text, Who};
use super::speculate::{Draft, DraftJob};
use super::LocalOptions;
use crate::LlmError;

/// Prompt tokens one step reads at most (all sequences together).
const STEP_PROMPT_TOKENS: usize = 128;

pub(super) struct Worker {
    model: Model,
    text: Text,
    options: LocalOptions,
    name: String,
    /// The model as answers and errors name it.
    who: Who,
    /// The prompt prefixes read so far, for every sequence of the process.
    tree: PrefixTree,
    /// The draft model of speculative decoding, when there is one.
    draft: Option<Draft>,
    /// The id of the next sequence admitted.
    next_id: u64,
    active: Vec<Seq>,
    scratch: Scratch,
    /// Built at the first decision: most runs never need it.
    constraints:
        Option<Result<super::constrain::Constraints, Arc<super::constrain::ConstrainError>>>,
    /// The tokens DRY and `forbid` name, found at the first reply that uses them.
    token_texts: super::draw_settings::TokenTexts,
    load: Load,
}

/// Where the worker's time went, logged when it stops (`SOPSIM_LOG=debug`).
#[derive(Debug, Default)]
struct Load {
    /// Steps that read some prompt (decode rows may ride along), and their time.
    prompt_steps: u64,
    prompt_secs: f64,
    /// Steps that only generated (or chose), and their time.
    decode_steps: u64,
    decode_secs: f64,
    prompt_rows: u64,
    decode_rows: u64,
    /// Turning logits into tokens and choices, between the steps.
    after_secs: f64,
    /// Waiting for requests with nothing to run.
    idle_secs: f64,
}

impl Worker {
    pub(super) fn new(
        model: Model,
        text: Text,
        options: LocalOptions,
        name: String,
        draft: Option<Model>,
    ) -> Self {
        let tree = PrefixTree::new(options.cache_bytes);
        Self {
            tree,
            draft: draft.map(|m| Draft::new(m, &model, options.cache_bytes / 2)),
            model,
            text,
            options,
            who: Who::of(&name),
            name,
            next_id: 0,
            active: Vec::new(),
            scratch: Scratch::default(),
            constraints: None,
            token_texts: super::draw_settings::TokenTexts::default(),
            load: Load::default(),
        }
    }

    /// Reads a request and gives its sequence a place in the batch; a bad request is
    /// answered at once.
    fn admit(&mut self, job: Job) {
        let mut admission = Admission {
            text: &self.text,
            model: &self.model,
            options: &self.options,
            who: &self.who,
            draft_cost: self.draft.as_ref().map(|d| d.draft_cost),
            constraints: &mut self.constraints,
            token_texts: &mut self.token_texts,
        };
        let (phase, prompt) = match admission.read(&job.request) {
            Ok(read) => read,
            Err(e) => {
                let _ = job.reply.send(Err(e));
                return;
            }
        };
        let mut cache = self.take_cache(&prompt);
        let cached = cache.len();
        if let Err(e) = cache.reserve(prompt.len()) {
            let _ = job
                .reply
                .send(Err(self.who.failed("making room for the prompt", e)));
            return;
        }
        let follows = self.leader_for(&prompt, cached);
        self.next_id += 1;
        self.active.push(Seq {
            id: self.next_id,
            job,
            prompt,
            cache,
            cached,
            phase,
            follows,
        });
    }

    pub(super) fn run(mut self, jobs: Receiver<Job>) {
        let mut waiting: VecDeque<Job> = VecDeque::new();
        loop {
            if self.active.is_empty() && waiting.is_empty() {
                let idle = std::time::Instant::now();
                let job = jobs.recv();
                self.load.idle_secs += idle.elapsed().as_secs_f64();
                match job {
                    Ok(job) => waiting.push_back(job),
                    Err(_) => return self.log_load(),
                }
            }
            loop {
                match jobs.try_recv() {
                    Ok(job) => waiting.push_back(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected)
                        if self.active.is_empty() && waiting.is_empty() =>
                    {
                        return self.log_load()
                    }
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            while self.active.len() < self.options.max_batch.max(1) {
                let Some(job) = waiting.pop_front() else {
                    break;
                };
                self.admit(job);
            }
            // A simulation that went away (cancelled, or its run ended) leaves now.
            let (gone, kept): (Vec<Seq>, Vec<Seq>) = std::mem::take(&mut self.active)
                .into_iter()
                .partition(|s| s.job.reply.is_closed());
            self.active = kept;
            for seq in gone {
                recycle(&mut self.tree, &mut self.draft, seq);
            }
            if !self.active.is_empty() {
                self.step();
            }
        }
    }

    /// A cache holding the longest prefix of `ids` that the prefix tree, or a sequence
    /// still in flight, holds (short of the last prompt token, which must run to give
    /// the logits), copied. Keys and values depend only on the tokens before them, so
    /// a copied prefix gives the same bytes as computing it again.
    fn take_cache(&mut self, ids: &[u32]) -> KvCache {
        let keep_of = |n: usize| n.min(ids.len() - 1);
        let common = |c: &KvCache| {
            c.tokens()
                .iter()
                .zip(ids)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let active = self
            .active
            .iter()
            .enumerate()
            .map(|(i, s)| (keep_of(common(&s.cache)), i))
            .max();
        let kept = self.tree.matched(ids);
        if let Some((n, i)) = active.filter(|(n, _)| *n > kept) {
            if let Ok(c) = self.active[i].cache.copy_prefix(n) {
                return c;
            }
        }
        let model = &self.model;
        self.tree
            .take(ids, || model.new_cache())
            .unwrap_or_else(|| self.model.new_cache())
    }

    /// The sequence in flight, not itself waiting, whose prompt shares with `prompt` a
    /// longer prefix than the `cached` tokens a new sequence starts with, and the
    /// length of that prefix (short of the prompt's last token, which must run).
    fn leader_for(&self, prompt: &[u32], cached: usize) -> Option<(u64, usize)> {
        self.active
            .iter()
            .filter(|s| s.follows.is_none())
            .map(|s| {
                let shared = s
                    .prompt
                    .iter()
                    .zip(prompt)
                    .take_while(|(a, b)| a == b)
                    .count();
                (shared.min(prompt.len() - 1), s.id)
            })
            .filter(|(shared, _)| *shared > cached)
            .max()
            .map(|(shared, id)| (id, shared))
    }

    /// Starts every waiting sequence whose leader has read their shared prefix: it
    /// continues from a copy of that prefix. One whose leader has left takes what the
    /// pool holds.
    fn start_followers(&mut self) {
        for i in 0..self.active.len() {
            let Some((leader, shared)) = self.active[i].follows else {
                continue;
            };
            let copied = match self.active.iter().find(|s| s.id == leader) {
                Some(l) if l.cache.len() >= shared => Some(l.cache.copy_prefix(shared)),
                Some(_) => continue,
                None => None,
            };
            let prompt = std::mem::take(&mut self.active[i].prompt);
            let cache = match copied {
                Some(Ok(c)) => c,
                // Out of memory for a copy, or the leader gone: from the pool.
                _ => self.take_cache(&prompt),
            };
            let who = self.who.0.clone();
            let seq = &mut self.active[i];
            seq.prompt = prompt;
            seq.cached = cache.len();
            seq.cache = cache;
            seq.follows = None;
            if let Err(e) = seq.cache.reserve(seq.prompt.len()) {
                // Answered now; the closed reply takes the sequence out next round.
                let (tx, _) = oneshot::channel();
                let e = LlmError::caused_by(who, "making room for the prompt", e);
                let _ = std::mem::replace(&mut seq.job.reply, tx).send(Err(e));
            }
        }
    }

    /// Has the draft model draft ahead for every reply being generated that it drafts
    /// for, all in the same passes. A draft that fails leaves its replies to plain
    /// decoding this step.
    fn draw_drafts(&mut self) {
        let Some(draft) = &mut self.draft else {
            return;
        };
        let stops = &self.text.special.stop_ids;
        let mut jobs: Vec<DraftJob<'_>> = Vec::new();
        for seq in &mut self.active {
            if seq.follows.is_some() || seq.cache.len() < seq.prompt.len() {
                continue;
            }
            let Phase::Reply(reply) = &mut seq.phase else {
                continue;
            };
            if reply.generated.is_empty() {
                continue;
            }
            let Some(spec) = reply.spec.as_deref_mut() else {
                continue;
            };
            // Drafts past the hard cap would be thrown away.
            let room = reply.max_tokens.saturating_sub(reply.generated.len() + 1);
            let most = spec.wanted().min(room);
            if most > 0 {
                jobs.push(DraftJob {
                    spec,
                    context: &reply.context,
                    most,
                    stops,
                });
            }
        }
        if jobs.is_empty() {
            return;
        }
        if let Err(e) = draft.draw(&mut jobs) {
            tracing::debug!(error = %e, "the draft model failed; decoding plainly this step");
            for job in jobs {
                job.spec.drafted.clear();
                job.spec.q.clear();
            }
        }
    }

    fn log_load(&self) {
        let l = &self.load;
        tracing::debug!(
            model = %self.name,
            prompt_steps = l.prompt_steps,
            prompt_rows = l.prompt_rows,
            prompt_secs = l.prompt_secs,
            decode_steps = l.decode_steps,
            decode_rows = l.decode_rows,
            decode_secs = l.decode_secs,
            after_secs = l.after_secs,
            idle_secs = l.idle_secs,
            prefix_tree_bytes = self.tree.bytes(),
            "local model worker stops"
        );
    }

    /// One forward pass over every active sequence, then each one's next move.
    fn step(&mut self) {
        self.start_followers();
        self.draw_drafts();
        let mut plans: Vec<Plan> = Vec::with_capacity(self.active.len());
        let mut prompt_budget = STEP_PROMPT_TOKENS;
        let (mut prompt_rows, mut decode_rows) = (0u64, 0u64);
        for seq in &mut self.active {
            let reading = seq.cache.len() < seq.prompt.len();
            let p = plan(seq, &mut prompt_budget);
            if reading {
                prompt_rows += p.0.len() as u64;
            } else {
                decode_rows += p.0.len() as u64;
            }
            plans.push(p);
        }
        let started = std::time::Instant::now();
        let result = {
            let mut segments: Vec<Segment<'_>> = self
                .active
                .iter_mut()
                .zip(&plans)
                .filter(|(_, (tokens, _))| !tokens.is_empty())
                .map(|(seq, (tokens, wants))| Segment {
                    cache: &mut seq.cache,
                    tokens,
                    wants: wants.clone(),
                })
                .collect();
            let _lock = sopsim_infer::compute::compute_lock();
            self.model.forward(&mut self.scratch, &mut segments)
        };
        let secs = started.elapsed().as_secs_f64();
        if prompt_rows > 0 {
            self.load.prompt_steps += 1;
            self.load.prompt_secs += secs;
        } else {
            self.load.decode_steps += 1;
            self.load.decode_secs += secs;
        }
        self.load.prompt_rows += prompt_rows;
        self.load.decode_rows += decode_rows;
        let after = std::time::Instant::now();
        let outputs = match result {
            Ok(o) => o,
            Err(e) => {
                // The checks at admission leave nothing that one sequence could fail
                // on its own here; whatever it was, every sequence of the step gets it.
                let e = std::sync::Arc::new(e);
                for seq in std::mem::take(&mut self.active) {
                    let _ = seq
                        .job
                        .reply
                        .send(Err(self.who.failed("the forward pass", e.clone())));
                }
                return;
            }
        };
        let mut outputs = outputs.into_iter();
        let mut still = Vec::with_capacity(self.active.len());
        let decoder = Decoder {
            text: &self.text,
            ignore_eos: self.options.ignore_eos,
            who: &self.who,
        };
        for (mut seq, (tokens, _)) in std::mem::take(&mut self.active).into_iter().zip(plans) {
            let logits = if tokens.is_empty() {
                Vec::new()
            } else {
                outputs.next().unwrap_or_default()
            };
            match decoder.advance(&mut seq, logits) {
                Ok(true) => still.push(seq),
                Ok(false) => recycle(&mut self.tree, &mut self.draft, seq),
                Err(e) => {
                    let (tx, _) = oneshot::channel();
                    let _ = std::mem::replace(&mut seq.job.reply, tx).send(Err(e));
                    recycle(&mut self.tree, &mut self.draft, seq);
                }
            }
        }
        self.active = still;
        self.load.after_secs += after.elapsed().as_secs_f64();
    }
}

/// Keeps a finished sequence's keys and values in the prefix tree, for the prompts
/// that continue them, and settles what its draft model drafted.
fn recycle(tree: &mut PrefixTree, draft: &mut Option<Draft>, seq: Seq) {
    tree.insert(&seq.cache);
    if let (Phase::Reply(reply), Some(draft)) = (seq.phase, draft) {
        if let Some(spec) = reply.spec {
            spec.finish(draft);
        }
    }
}

/// What a sequence runs in the next step: its tokens and the logits it wants.
fn plan(seq: &mut Seq, prompt_budget: &mut usize) -> (Vec<u32>, Vec<(usize, Want)>) {
    if seq.follows.is_some() {
        return (Vec::new(), Vec::new());
    }
    let fed = seq.cache.len();
    if fed < seq.prompt.len() {
        let take = (seq.prompt.len() - fed).min(*prompt_budget);
        if take == 0 {
            return (Vec::new(), Vec::new());
        }
        *prompt_budget -= take;
        let tokens = seq.prompt[fed..fed + take].to_vec();
        let last = take - 1;
        let wants = match &seq.phase {
            _ if fed + take < seq.prompt.len() => Vec::new(),
            Phase::Choice(c) => match c.questions.first() {
                Some(q) if q.path.is_empty() => vec![(last, Want::Only(q.children.clone()))],
                _ => Vec::new(),
            },
            Phase::Reply(_) => vec![(last, Want::All)],
        };
        return (tokens, wants);
    }
    match &mut seq.phase {
        Phase::Reply(reply) => {
            let last = *reply.generated.last().unwrap_or(&0);
            let drafted = reply.spec.as_ref().map_or(&[][..], |s| &s.drafted[..]);
            // The last kept token and the drafts, with the logits after each: one
            // pass checks them all.
            let mut tokens = vec![last];
            tokens.extend_from_slice(drafted);
            let wants = (0..tokens.len()).map(|i| (i, Want::All)).collect();
            (tokens, wants)
        }
        Phase::Choice(choice) => {
            let Some(q) = choice.questions.get(choice.answers.len()) else {
                return (Vec::new(), Vec::new());
            };
            // Each question starts again from the prompt.
            seq.cache.truncate(seq.prompt.len());
            choice.option_tokens += q.path.len() as u64;
            (
                q.path.clone(),
                vec![(q.path.len() - 1, Want::Only(q.children.clone()))],
            )
        }
    }
}
