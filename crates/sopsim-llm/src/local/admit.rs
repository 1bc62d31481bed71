//! Admitting a request: its prompt rendered with the model's chat template and
//! tokenized, what it will do once the prompt is read (a reply with its sampler and
//! budget, or a choice's questions), and its seed.

use std::hash::Hasher;
use std::sync::Arc;

use sopsim_infer::choice::OptionTrie;
use sopsim_infer::sampling::Sampler;
use sopsim_infer::transformer::Model;
use xxhash_rust::xxh3::Xxh3;

use super::constrain::{ConstrainError, Constraints};
use super::draw_settings::TokenTexts;
use super::sequence::{ChoiceState, Phase, Reply, Text, Who};
use super::speculate::{Spec, SpecStats};
use super::text_stream::TextStream;
use super::LocalOptions;
use crate::{CallKind, ChatRole, LlmError, LlmRequest};

/// What reading a request needs of the worker: the model and its text, the options,
/// the draft model's cost per draft (when one drafts), and what the worker builds once
/// and keeps (decision constraints, the tokens settings name).
pub(super) struct Admission<'w> {
    pub text: &'w Text,
    pub model: &'w Model,
    pub options: &'w LocalOptions,
    pub who: &'w Who,
    pub draft_cost: Option<f64>,
    /// Built at the first decision: most runs never need it.
    pub constraints: &'w mut Option<Result<Constraints, Arc<ConstrainError>>>,
    pub token_texts: &'w mut TokenTexts,
}

impl Admission<'_> {
    /// A request's prompt tokens and what follows them; a bad request fails here,
    /// before it takes a place in the batch.
    pub(super) fn read(&mut self, request: &LlmRequest) -> Result<(Phase, Vec<u32>), LlmError> {
        if request.tools.is_some() && self.constraints.is_none() {
            *self.constraints = Some(
                Constraints::new(
                    &self.text.tokenizer,
                    self.model.vocab,
                    &self.text.special.stop_ids,
                )
                .map_err(Arc::new),
            );
        }
        let (rendered, prompt) = self.prepare(request)?;
        let phase = self.after_prompt(request, &rendered, &prompt)?;
        Ok((phase, prompt))
    }

    /// The token that ends the model's thinking, when this request lets it think: a
    /// reply (not a choice or a decision's JSON) whose settings turn thinking on, on a
    /// model that has it.
    fn think_end(&self, request: &LlmRequest) -> Option<u32> {
        let reply = request.options.is_none() && request.tools.is_none();
        (reply && request.settings.thinking == Some(true))
            .then_some(self.text.special.think_end)
            .flatten()
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
            .render(&messages, self.think_end(request).is_some())
            .map_err(|e| self.who.failed("rendering the prompt", e))?;
        let prompt = super::encode(&self.text.tokenizer, &rendered)
            .map_err(|e| self.who.failed("tokenizing the prompt", e))?;
        if prompt.is_empty() {
            return Err(self.who.error("the prompt is empty"));
        }
        let room = self.model.shape.positions;
        if prompt.len() >= room {
            return Err(self.who.error(format!(
                "the prompt is {} tokens; the model takes at most {room}",
                prompt.len()
            )));
        }
        Ok((rendered, prompt))
    }

    /// The phase after the prompt has been read.
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
                .then(|| sopsim_core::sentence::ReplyBudget::of(max_tokens));
                let params = super::draw_settings::params(
                    &req.settings,
                    req.redraw.as_ref(),
                    budget.is_some(),
                    &self.text.tokenizer,
                    self.token_texts,
                );
                let matcher = match (&req.tools, &*self.constraints) {
                    (None, _) => None,
                    (Some(tools), Some(Ok(c))) => Some(Box::new(
                        c.matcher(&tools.decision_schema)
                            .map_err(|e| self.who.error(format!("the decision's schema: {e}")))?,
                    )),
                    (Some(_), Some(Err(e))) => {
                        return Err(self.who.failed("constraining decisions", e.clone()))
                    }
                    (Some(_), None) => {
                        return Err(self.who.error("decisions cannot be constrained"))
                    }
                };
                // A draft drafts free text; a decision's JSON is decoded under its
                // schema a token at a time.
                let spec = match (self.draft_cost, &matcher) {
                    (Some(cost), None) => Some(Box::new(Spec::new(params.clone(), seed, cost))),
                    _ => None,
                };
                Ok(Phase::Reply(Box::new(Reply {
                    matcher,
                    spec,
                    spec_stats: SpecStats::default(),
                    sampler: Sampler::new(params, seed),
                    context: prompt.to_vec(),
                    generated: Vec::new(),
                    text: self
                        .think_end(req)
                        .map_or_else(TextStream::default, TextStream::thinking),
                    min_tokens: req.redraw.as_ref().map_or(0, |r| r.min_tokens()),
                    max_tokens: budget.map_or(max_tokens, |b| b.hard).min(room),
                    soft: budget.map(|b| b.soft),
                    look_from: 0,
                    stops: req.settings.stop.clone().unwrap_or_default(),
                    stopped_at: None,
                    screen: req.screen.clone().map(crate::Screen::reading),
                    abandoned: None,
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
                    .map_err(|e| self.who.failed("tokenizing the options", e))?;
                let trie = OptionTrie::new(&tokens)
                    .map_err(|e| self.who.failed(&format!("options {options:?}"), e))?;
                let questions = trie.questions();
                if prompt_len + questions.iter().map(|q| q.path.len()).max().unwrap_or(0)
                    >= self.model.shape.positions
                {
                    return Err(self
                        .who
                        .error("the prompt and the options do not fit the model's positions"));
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
