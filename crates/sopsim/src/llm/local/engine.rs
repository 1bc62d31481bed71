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

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokenizers::Tokenizer;
use tokio::sync::oneshot;

use std::hash::Hasher;

use sopsim_infer::kv::KvCache;
use sopsim_infer::options::{Branching, OptionTrie};
use sopsim_infer::sampling::{draw, Sampler};
use sopsim_infer::template::ChatTemplate;
use sopsim_infer::transformer::{Model, Scratch, Segment, Want};
use xxhash_rust::xxh3::Xxh3;

use super::speculate::{Draft, DraftJob, Spec, SpecStats};
use super::{LocalOptions, SpecialTokens};
use crate::llm::{
    CallKind, ChatRole, ChoiceMethod, Chosen, Completion, LlmError, LlmRequest, TokenSink, Usage,
};

/// Prompt tokens one step reads at most (all sequences together).
const STEP_PROMPT_TOKENS: usize = 128;

pub(super) struct Job {
    pub request: LlmRequest,
    pub stream: Option<TokenSink>,
    pub reply: oneshot::Sender<Result<Completion, LlmError>>,
}

/// What the tokenizer and template give the worker.
pub(super) struct Text {
    pub tokenizer: Tokenizer,
    pub special: SpecialTokens,
    pub template: ChatTemplate,
}

/// What a sequence does once its prompt is read (until then — while its cache holds
/// less than the prompt — it reads the prompt).
enum Phase {
    Reply(Box<Reply>),
    Choice(ChoiceState),
}

/// A sequence's part of a step: the tokens it feeds, and the logits it wants for which
/// of them.
type Plan = (Vec<u32>, Vec<(usize, Want)>);

struct Reply {
    /// Set for a decision: the schema its JSON must follow.
    matcher: Option<Box<llguidance::Matcher>>,
    sampler: Sampler,
    /// The prompt and what was generated, which the penalties look at.
    context: Vec<u32>,
    generated: Vec<u32>,
    text: TextStream,
    /// The end-of-text tokens cannot come before this many tokens (a reply drawn again
    /// for being empty).
    min_tokens: usize,
    /// The hard cap: the reply stops here wherever it is.
    max_tokens: usize,
    /// For replies and summaries: from `soft` tokens on, the reply stops at the first
    /// sentence end (`crate::sentence`); the text is searched from `look_from`.
    soft: Option<usize>,
    look_from: usize,
    stops: Vec<String>,
    stopped_at: Option<String>,
    /// Set when a draft model drafts for this reply (`speculate.rs`).
    spec: Option<Box<Spec>>,
    spec_stats: SpecStats,
}

struct ChoiceState {
    trie: OptionTrie,
    questions: Vec<Branching>,
    answers: Vec<Vec<f32>>,
    option_tokens: u64,
    seed: u64,
}

struct Seq {
    id: u64,
    job: Job,
    prompt: Vec<u32>,
    cache: KvCache,
    cached: usize,
    phase: Phase,
    /// Set while the sequence waits for another in flight to read the prompt prefix
    /// they share: that sequence's id and the prefix's length. The prefix is read once
    /// for both (a reply's candidates, the same first prompt of several runs).
    follows: Option<(u64, usize)>,
}

pub(super) struct Worker {
    pub model: Model,
    pub text: Text,
    pub options: LocalOptions,
    pub name: String,
    /// The prompt prefixes read so far, for every sequence of the process.
    tree: super::prefix_tree::PrefixTree,
    /// The draft model of speculative decoding, when there is one.
    draft: Option<Draft>,
    /// The id of the next sequence admitted.
    next_id: u64,
    active: Vec<Seq>,
    scratch: Scratch,
    /// Built at the first decision: most runs never need it.
    constraints:
        Option<Result<super::constrain::Constraints, Arc<super::constrain::ConstrainError>>>,
    /// The tokens that hold DRY's breaker strings.
    breakers: super::sampling::Breakers,
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
    pub fn new(
        model: Model,
        text: Text,
        options: LocalOptions,
        name: String,
        draft: Option<Model>,
    ) -> Self {
        let tree = super::prefix_tree::PrefixTree::new(options.cache_bytes);
        Self {
            tree,
            draft: draft.map(|m| Draft::new(m, options.cache_bytes / 2)),
            model,
            text,
            options,
            name,
            next_id: 0,
            active: Vec::new(),
            scratch: Scratch::default(),
            constraints: None,
            breakers: super::sampling::Breakers::default(),
            load: Load::default(),
        }
    }

    fn error(&self, message: impl Into<String>) -> LlmError {
        LlmError::failed(format!("local:{}", self.name), message)
    }

    /// `what` failed because of `source`.
    fn failed(&self, what: &str, source: impl Into<crate::llm::BoxError>) -> LlmError {
        LlmError::caused_by(format!("local:{}", self.name), what, source)
    }

    pub fn run(mut self, jobs: Receiver<Job>) {
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
                self.recycle(seq);
            }
            if !self.active.is_empty() {
                self.step();
            }
        }
    }

    /// Renders and tokenizes a request; a bad request is answered at once.
    fn admit(&mut self, job: Job) {
        if job.request.tools.is_some() && self.constraints.is_none() {
            self.constraints = Some(
                super::constrain::Constraints::new(
                    &self.text.tokenizer,
                    self.model.vocab,
                    &self.text.special.stop_ids,
                )
                .map_err(Arc::new),
            );
        }
        let prepared = self.prepare(&job.request).and_then(|(rendered, prompt)| {
            Ok((
                self.after_prompt(&job.request, &rendered, &prompt)?,
                rendered,
                prompt,
            ))
        });
        match prepared {
            Ok((phase, _, prompt)) => {
                let mut cache = self.take_cache(&prompt);
                let cached = cache.len();
                if let Err(e) = cache.reserve(prompt.len()) {
                    let _ = job
                        .reply
                        .send(Err(self.failed("making room for the prompt", e)));
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
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
    }

    fn prepare(&self, request: &LlmRequest) -> Result<(String, Vec<u32>), LlmError> {
        let messages: Vec<(&str, &str)> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    ChatRole::System => "system",
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                };
                (role, m.content.as_str())
            })
            .collect();
        let rendered = self
            .text
            .template
            .render(&messages)
            .map_err(|e| self.failed("rendering the prompt", e))?;
        let prompt = super::encode(&self.text.tokenizer, &rendered)
            .map_err(|e| self.failed("tokenizing the prompt", e))?;
        if prompt.is_empty() {
            return Err(self.error("the prompt is empty"));
        }
        let room = self.model.shape.positions;
        if prompt.len() >= room {
            return Err(self.error(format!(
                "the prompt is {} tokens; the model takes at most {room}",
                prompt.len()
            )));
        }
        Ok((rendered, prompt))
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
            let who = format!("local:{}", self.name);
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

    /// Keeps a finished sequence's keys and values in the prefix trees, for the prompts
    /// that continue them.
    fn recycle(&mut self, seq: Seq) {
        self.tree.insert(&seq.cache);
        if let (Phase::Reply(reply), Some(draft)) = (seq.phase, &mut self.draft) {
            if let Some(spec) = reply.spec {
                spec.finish(draft);
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
            // Drafts past the hard cap would be thrown away.
            let most = reply.max_tokens.saturating_sub(reply.generated.len() + 1);
            if let (Some(spec), true) = (reply.spec.as_deref_mut(), most > 0) {
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
            let _lock = crate::compute::compute_lock();
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
                        .send(Err(self.failed("the forward pass", e.clone())));
                }
                return;
            }
        };
        let mut outputs = outputs.into_iter();
        let mut still = Vec::with_capacity(self.active.len());
        for (mut seq, (tokens, _)) in std::mem::take(&mut self.active).into_iter().zip(plans) {
            let logits = if tokens.is_empty() {
                Vec::new()
            } else {
                outputs.next().unwrap_or_default()
            };
            match self.advance(&mut seq, logits) {
                Ok(true) => still.push(seq),
                Ok(false) => self.recycle(seq),
                Err(e) => {
                    let (tx, _) = oneshot::channel();
                    let _ = std::mem::replace(&mut seq.job.reply, tx).send(Err(e));
                    self.recycle(seq);
                }
            }
        }
        self.active = still;
        self.load.after_secs += after.elapsed().as_secs_f64();
    }

    /// Moves a sequence on after a step. `Ok(false)`: it has answered and is done.
    fn advance(&mut self, seq: &mut Seq, logits: Vec<Vec<f32>>) -> Result<bool, LlmError> {
        if seq.cache.len() < seq.prompt.len() {
            return Ok(true);
        }
        // After the last prompt row, its logits open the reply or answer the root
        // question.
        let mut logits = logits.into_iter();
        match &mut seq.phase {
            Phase::Reply(reply) if reply.spec.as_ref().is_some_and(|s| !s.drafted.is_empty()) => {
                self.verify_drafts(seq, logits.collect())
            }
            Phase::Reply(reply) => {
                let Some(mut l) = logits.next() else {
                    return Ok(true);
                };
                if let Some(m) = reply.matcher.as_deref_mut() {
                    super::constrain::mask(m, &mut l).map_err(|e| {
                        self.error(format!("decoding under the decision's schema: {e}"))
                    })?;
                }
                if reply.generated.len() < reply.min_tokens {
                    for &stop in &self.text.special.stop_ids {
                        if let Some(logit) = l.get_mut(stop as usize) {
                            *logit = f32::NEG_INFINITY;
                        }
                    }
                }
                let next = reply.sampler.sample(&mut l, &reply.context);
                let done = self.text.special.stop_ids.contains(&next) && !self.options.ignore_eos;
                if let Some(m) = reply.matcher.as_deref_mut() {
                    let complete = super::constrain::consume(m, next).map_err(|e| {
                        self.error(format!("decoding under the decision's schema: {e}"))
                    })?;
                    // The schema is complete: nothing more may follow.
                    if complete && !done {
                        reply.generated.push(next);
                        reply
                            .text
                            .push(&self.text.tokenizer, &reply.generated)
                            .map_err(|e| self.failed("decoding the reply", e))?;
                        return self.finish_reply(seq);
                    }
                }
                if done {
                    return self.finish_reply(seq);
                }
                self.take_token(seq, next)
            }
            Phase::Choice(choice) => {
                if let Some(answer) = logits.next() {
                    choice.answers.push(answer);
                }
                if choice.answers.len() < choice.questions.len() {
                    return Ok(true);
                }
                self.finish_choice(seq)
            }
        }
    }

    /// Takes the reply's next token (not an end of text): its text is streamed unless a
    /// stop sequence, a sentence end near the budget or the hard cap ends the reply.
    /// `Ok(false)`: the reply is finished.
    fn take_token(&self, seq: &mut Seq, next: u32) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        reply.generated.push(next);
        reply.context.push(next);
        let piece = reply
            .text
            .push(&self.text.tokenizer, &reply.generated)
            .map_err(|e| self.failed("decoding the reply", e))?;
        if let Some((cut, stop)) = stop_position(reply.text.full(), &reply.stops) {
            reply.text.truncate(cut);
            reply.stopped_at = Some(stop);
            return self.finish_reply(seq);
        }
        if let Some(soft) = reply.soft {
            let text = reply.text.full();
            if reply.generated.len() + 1 == soft {
                // A sentence may end right at the soft budget.
                reply.look_from = text.len().saturating_sub(4);
            }
            if reply.generated.len() >= soft {
                if let Some(end) = crate::sentence::first_end(text, reply.look_from) {
                    reply.text.truncate(end);
                    return self.finish_reply(seq);
                }
            }
        }
        if let (Some(sink), false) = (&seq.job.stream, piece.is_empty()) {
            sink(&piece);
        }
        if reply.generated.len() < reply.max_tokens {
            return Ok(true);
        }
        self.finish_reply(seq)
    }

    /// The model's check of a reply's drafts: `logits` after the last kept token and
    /// after each draft. Drafts are kept by the rejection rule until one is not, which
    /// the model's own draw replaces; when all are kept, the model draws one more.
    fn verify_drafts(&mut self, seq: &mut Seq, logits: Vec<Vec<f32>>) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        let Some(mut spec) = reply.spec.take() else {
            return Ok(true);
        };
        let k = spec.drafted.len();
        // The cache as it was before this pass: the pass added the last kept token and
        // the drafts.
        let base = seq.cache.len() - (k + 1);
        let mut accepted = 0;
        for (i, mut l) in logits.into_iter().enumerate().take(k + 1) {
            let Phase::Reply(reply) = &mut seq.phase else {
                break;
            };
            if reply.generated.len() < reply.min_tokens {
                for &stop in &self.text.special.stop_ids {
                    if let Some(logit) = l.get_mut(stop as usize) {
                        *logit = f32::NEG_INFINITY;
                    }
                }
            }
            let p = reply.sampler.distribution(&mut l, &reply.context);
            let (token, kept) = match spec.drafted.get(i) {
                Some(&d) => match reply.sampler.verify(&p, &spec.q[i], d) {
                    Ok(()) => (d, true),
                    Err(t) => (t, false),
                },
                None => (reply.sampler.draw_from(&p), false),
            };
            accepted += usize::from(kept);
            // What this check did so far, told if the reply ends now.
            reply.spec_stats = SpecStats {
                checks: spec.stats.checks + 1,
                drafted: spec.stats.drafted + k as u64,
                accepted: spec.stats.accepted + accepted as u64,
            };
            let done = self.text.special.stop_ids.contains(&token) && !self.options.ignore_eos;
            let going = !done && self.take_token(seq, token)?;
            if !going {
                spec.settle(accepted);
                if let Phase::Reply(reply) = &mut seq.phase {
                    reply.spec = Some(spec);
                }
                return if done {
                    self.finish_reply(seq)
                } else {
                    Ok(false)
                };
            }
            if !kept {
                break;
            }
        }
        seq.cache.truncate(base + 1 + accepted);
        spec.settle(accepted);
        if let Phase::Reply(reply) = &mut seq.phase {
            reply.spec = Some(spec);
        }
        Ok(true)
    }

    /// The phase after the prompt has been read: checked at admission, so that a bad
    /// request fails before it takes a place in the batch.
    fn after_prompt(
        &mut self,
        req: &LlmRequest,
        rendered: &str,
        prompt: &[u32],
    ) -> Result<Phase, LlmError> {
        let prompt_len = prompt.len();
        let seed = call_seed(req, rendered);
        match &req.options {
            None => {
                let room = self.model.shape.positions - prompt_len;
                let max_tokens =
                    req.settings
                        .max_tokens
                        .unwrap_or(self.options.default_max_tokens) as usize;
                // Replies and summaries end where a sentence ends, near their budget;
                // decisions (JSON) and extract steps (tags) end as they are written.
                let budget = (req.tools.is_none()
                    && matches!(req.context.kind, CallKind::Act | CallKind::Summary))
                .then(|| crate::sentence::ReplyBudget::of(max_tokens));
                let params = super::sampling::params(
                    &req.settings,
                    req.redraw.as_ref(),
                    &self.text.tokenizer,
                    &mut self.breakers,
                );
                let matcher = match (&req.tools, &self.constraints) {
                    (None, _) => None,
                    (Some(tools), Some(Ok(c))) => Some(Box::new(
                        c.matcher(&tools.decision_schema)
                            .map_err(|e| self.error(format!("the decision's schema: {e}")))?,
                    )),
                    (Some(_), Some(Err(e))) => {
                        return Err(self.failed("constraining decisions", e.clone()))
                    }
                    (Some(_), None) => return Err(self.error("decisions cannot be constrained")),
                };
                // A draft drafts free text; a decision's JSON is decoded under its
                // schema a token at a time.
                let spec = (self.draft.is_some() && matcher.is_none())
                    .then(|| Box::new(Spec::new(params.clone(), seed)));
                Ok(Phase::Reply(Box::new(Reply {
                    matcher,
                    spec,
                    spec_stats: SpecStats::default(),
                    sampler: Sampler::new(params, seed),
                    context: prompt.to_vec(),
                    generated: Vec::new(),
                    text: TextStream::default(),
                    min_tokens: req.redraw.as_ref().map_or(0, |r| r.min_tokens()),
                    max_tokens: budget.map_or(max_tokens, |b| b.hard).min(room),
                    soft: budget.map(|b| b.soft),
                    look_from: 0,
                    stops: req.settings.stop.clone().unwrap_or_default(),
                    stopped_at: None,
                })))
            }
            Some(options) => {
                let end = self.text.special.eos_id;
                let tokens: Vec<Vec<u32>> = options
                    .iter()
                    .map(|o| {
                        let mut t = super::encode(&self.text.tokenizer, o)?;
                        t.push(end);
                        Ok(t)
                    })
                    .collect::<Result<_, tokenizers::Error>>()
                    .map_err(|e| self.failed("tokenizing the options", e))?;
                let trie = OptionTrie::new(&tokens)
                    .map_err(|e| self.failed(&format!("options {options:?}"), e))?;
                let questions = trie.questions();
                if prompt_len + questions.iter().map(|q| q.path.len()).max().unwrap_or(0)
                    >= self.model.shape.positions
                {
                    return Err(
                        self.error("the prompt and the options do not fit the model's positions")
                    );
                }
                Ok(Phase::Choice(ChoiceState {
                    trie,
                    questions,
                    answers: Vec::new(),
                    option_tokens: 0,
                    seed,
                }))
            }
        }
    }

    fn finish_reply(&self, seq: &mut Seq) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        if let Some(sink) = &seq.job.stream {
            let rest = reply.text.unsent();
            if !rest.is_empty() {
                sink(&rest);
            }
        }
        let completion = Completion {
            tool_calls: Vec::new(),
            model: format!("local:{}", self.name),
            text: reply.text.full().trim().to_string(),
            usage: Usage {
                prompt_tokens: seq.prompt.len() as u64,
                completion_tokens: reply.generated.len() as u64,
                cached_prompt_tokens: seq.cached as u64,
                estimated: false,
                draft_checks: reply.spec_stats.checks,
                drafted_tokens: reply.spec_stats.drafted,
                accepted_drafts: reply.spec_stats.accepted,
            },
            stopped_at: reply.stopped_at.take(),
            chosen: None,
            settings_unsent: false,
        };
        // The generated tokens stay in the cache: their keys and values are what a
        // later prompt holding them would compute.
        let (tx, _) = oneshot::channel();
        let reply_to = std::mem::replace(&mut seq.job.reply, tx);
        let _ = reply_to.send(Ok(completion));
        Ok(false)
    }

    fn finish_choice(&self, seq: &mut Seq) -> Result<bool, LlmError> {
        let Phase::Choice(choice) = &mut seq.phase else {
            return Ok(false);
        };
        let req = &seq.job.request;
        let options = req.options.clone().unwrap_or_default();
        let probabilities = choice.trie.probabilities(&choice.answers);
        let index = pick(
            &probabilities,
            req.settings.temperature.unwrap_or(0.0),
            choice.seed,
        );
        seq.cache.truncate(seq.prompt.len());
        let completion = Completion {
            tool_calls: Vec::new(),
            model: format!("local:{}", self.name),
            text: options.get(index).cloned().unwrap_or_default(),
            usage: Usage {
                prompt_tokens: seq.prompt.len() as u64,
                completion_tokens: choice.option_tokens,
                cached_prompt_tokens: seq.cached as u64,
                estimated: false,
                ..Usage::default()
            },
            stopped_at: None,
            chosen: Some(Chosen {
                index,
                probabilities: Some(probabilities),
                method: ChoiceMethod::Logits,
            }),
            settings_unsent: false,
        };
        let (tx, _) = oneshot::channel();
        let reply_to = std::mem::replace(&mut seq.job.reply, tx);
        let _ = reply_to.send(Ok(completion));
        Ok(false)
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

/// The seed of a call: the request's own `seed` if set, else the run's seed mixed with
/// the prompt, so a seeded run draws the same way every time it sends the same prompt;
/// a redraw mixes in its attempt, so each draw is a draw of its own.
fn call_seed(req: &LlmRequest, prompt: &str) -> u64 {
    let seed = req.settings.seed.unwrap_or_else(|| {
        let mut h = Xxh3::new();
        h.write_u64(req.context.run_seed);
        h.write(prompt.as_bytes());
        h.finish()
    });
    let seed = match &req.redraw {
        None => seed,
        Some(r) => {
            let mut h = Xxh3::new();
            h.write_u64(seed);
            h.write_u32(r.attempt);
            h.finish()
        }
    };
    match req.candidate {
        0 => seed,
        c => {
            let mut h = Xxh3::new();
            h.write_u64(seed);
            h.write(b"candidate");
            h.write_u32(c);
            h.finish()
        }
    }
}

/// The option drawn from `probabilities` at `temperature` (0: the most probable).
fn pick(probabilities: &[f64], temperature: f32, seed: u64) -> usize {
    // NaN counts as zero: the most probable.
    if temperature.is_nan() || temperature <= 0.0 {
        let mut best = 0;
        for (i, p) in probabilities.iter().enumerate() {
            if *p > probabilities[best] {
                best = i;
            }
        }
        return best;
    }
    let t = f64::from(temperature);
    let weights: Vec<f64> = probabilities.iter().map(|p| p.powf(1.0 / t)).collect();
    draw(&weights, &mut ChaCha8Rng::seed_from_u64(seed))
}

/// Where the first stop sequence starts in `text`, and which it is.
fn stop_position(text: &str, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
        .min()
}

/// Decoded text of the generated tokens, and how much of it was streamed. Text is
/// streamed only up to a point that no stop sequence could still claim and that is not
/// a partial UTF-8 character.
#[derive(Default)]
struct TextStream {
    text: String,
    sent: usize,
}

impl TextStream {
    fn push(
        &mut self,
        tokenizer: &Tokenizer,
        generated: &[u32],
    ) -> Result<String, tokenizers::Error> {
        self.text = tokenizer.decode(generated, true)?;
        // Hold back a trailing replacement character (a multi-byte character cut in two)
        // and a trailing partial line, where a stop sequence such as "\nBob:" may begin.
        let safe = self.text.trim_end_matches('\u{fffd}').len();
        let safe = self.text[..safe]
            .rfind('\n')
            .filter(|_| safe > 0)
            .map_or(safe, |nl| nl.max(self.sent));
        if safe <= self.sent || !self.text.is_char_boundary(safe) {
            return Ok(String::new());
        }
        let piece = self.text[self.sent..safe].to_string();
        self.sent = safe;
        Ok(piece)
    }

    fn full(&self) -> &str {
        &self.text
    }

    fn truncate(&mut self, at: usize) {
        self.text.truncate(at);
        self.sent = self.sent.min(at);
    }

    fn unsent(&mut self) -> String {
        let end = self.text.trim_end().len();
        let piece = if end > self.sent {
            self.text[self.sent..end].to_string()
        } else {
            String::new()
        };
        self.sent = self.text.len();
        piece
    }
}
