//! The per-simulation LLM client: owns every call's identity (its number among the
//! calls of its kind, its context) and the mapping of a failed call to the turn it
//! failed in; sends every call to the shared backend and keeps the simulation's ledger
//! (calls, tokens and latency by kind and by agent), and the warnings about how the
//! backend answered, each said once per simulation.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::cancel::CancelToken;

use super::{
    CallContext, CallKind, ChoiceMethod, Completion, LlmBackend, LlmError, LlmRequest, TokenSink,
};

/// A model call that failed, with the turn it belongs to.
#[derive(Debug, thiserror::Error)]
#[error("model call failed at turn {turn}")]
pub struct CallError {
    /// The run's turn (from 1) the call belongs to.
    pub turn: u64,
    /// Why the call failed.
    #[source]
    pub source: LlmError,
}

impl CallError {
    /// Whether the call was abandoned because the run was stopped.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.source, LlmError::Cancelled)
    }
}

/// Totals for one kind of call or one agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KindUsage {
    /// Calls made.
    pub calls: u64,
    /// Prompt tokens sent, over every call.
    pub prompt_tokens: u64,
    /// Tokens generated, over every call.
    pub completion_tokens: u64,
    /// Prompt tokens the backend reused from a cache.
    pub cached_prompt_tokens: u64,
    /// `cached_prompt_tokens` over `prompt_tokens`, when any prompt was read.
    pub prompt_cache_share: Option<f64>,
    /// With speculative decoding: the model's checks of drafts, and the drafts drawn
    /// and kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub draft_checks: u64,
    /// Tokens drafted for the model to check.
    #[serde(skip_serializing_if = "is_zero")]
    pub drafted_tokens: u64,
    /// Drafted tokens the model kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub accepted_drafts: u64,
    /// Of `completion_tokens`, those spent thinking before answering.
    #[serde(skip_serializing_if = "is_zero")]
    pub thinking_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl KindUsage {
    fn count(&mut self, c: &Completion) {
        self.draft_checks = self.draft_checks.saturating_add(c.usage.draft_checks);
        self.drafted_tokens = self.drafted_tokens.saturating_add(c.usage.drafted_tokens);
        self.accepted_drafts = self.accepted_drafts.saturating_add(c.usage.accepted_drafts);
        self.thinking_tokens = self.thinking_tokens.saturating_add(c.usage.thinking_tokens);
        self.calls += 1;
        self.prompt_tokens = self.prompt_tokens.saturating_add(c.usage.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(c.usage.completion_tokens);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(c.usage.cached_prompt_tokens);
        self.prompt_cache_share = cache_share(self.cached_prompt_tokens, self.prompt_tokens);
    }
}

/// The share of `prompt` tokens read from the cache (`cached` of them), when any were
/// read.
pub fn cache_share(cached: u64, prompt: u64) -> Option<f64> {
    (prompt > 0).then(|| cached as f64 / prompt as f64)
}

/// Everything a simulation spent on its model.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ledger {
    /// Totals by kind of call.
    pub by_kind: BTreeMap<CallKind, KindUsage>,
    /// Totals by the agent that made the calls.
    pub by_agent: BTreeMap<String, KindUsage>,
    /// Totals by the role the calling agent played.
    pub by_role: BTreeMap<String, KindUsage>,
    /// Totals by the state the run was in.
    pub by_state: BTreeMap<String, KindUsage>,
    /// Totals by the model that answered, as the backend names it.
    pub by_model: BTreeMap<String, KindUsage>,
    /// Whether any figure came from the estimator instead of the model.
    pub tokens_estimated: bool,
    /// Prompt tokens by turn (element 0 is turn 1).
    #[serde(skip)]
    pub prompt_tokens_by_turn: Vec<u64>,
    /// Latency of each call in microseconds, in call order.
    #[serde(skip)]
    pub latencies_us: Vec<u64>,
    /// Replies drawn again, by the first draw's flaw, and every redraw made.
    #[serde(skip)]
    pub redrawn: Redrawn,
    /// Tokens decoded for the replies kept, over all their draws.
    #[serde(skip)]
    pub reply_tokens: ReplyTokens,
}

/// What the replies kept cost to decode (`reply_tokens` in `summary.json`): every
/// draw's tokens (candidates and redraws), and the kept replies' own.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplyTokens {
    /// Replies kept.
    pub replies: u64,
    /// Tokens decoded over every draw of those replies.
    pub decoded: u64,
    /// The kept replies' own tokens.
    pub kept: u64,
    /// `decoded` over `replies`.
    pub decoded_per_reply: Option<f64>,
    /// `decoded` over `kept`: 1 when every reply is kept at its first draw.
    pub decoded_over_kept: Option<f64>,
}

impl ReplyTokens {
    fn add(&mut self, decoded: u64, kept: u64) {
        self.replies += 1;
        self.decoded = self.decoded.saturating_add(decoded);
        self.kept = self.kept.saturating_add(kept);
        self.decoded_per_reply = Some(self.decoded as f64 / self.replies as f64);
        self.decoded_over_kept = (self.kept > 0).then(|| self.decoded as f64 / self.kept as f64);
    }
}

/// Replies drawn again (`redrawn_replies` in `summary.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Redrawn {
    /// Replies drawn at least once more, by what was wrong with their first draw.
    pub by_cause: BTreeMap<sopsim_core::quality::RedrawCause, u64>,
    /// Draws in all after those replies' first (more candidates, and new sets).
    pub draws: u64,
}

impl Ledger {
    /// Calls made, of every kind.
    pub fn calls(&self) -> u64 {
        self.by_kind
            .values()
            .map(|k| k.calls)
            .fold(0, u64::saturating_add)
    }
    /// Prompt tokens sent, over every call.
    pub fn prompt_tokens(&self) -> u64 {
        self.by_kind
            .values()
            .map(|k| k.prompt_tokens)
            .fold(0, u64::saturating_add)
    }
    /// Tokens generated, over every call.
    pub fn completion_tokens(&self) -> u64 {
        self.by_kind
            .values()
            .map(|k| k.completion_tokens)
            .fold(0, u64::saturating_add)
    }
    /// Prompt tokens the backend reused from a cache, over every call.
    pub fn cached_prompt_tokens(&self) -> u64 {
        self.by_kind
            .values()
            .map(|k| k.cached_prompt_tokens)
            .fold(0, u64::saturating_add)
    }

    fn add(&mut self, ctx: &super::CallContext, c: &Completion, micros: u64) {
        self.by_kind.entry(ctx.kind).or_default().count(c);
        if let Some(a) = &ctx.agent {
            self.by_agent.entry(a.clone()).or_default().count(c);
        }
        if let Some(r) = &ctx.role {
            self.by_role.entry(r.clone()).or_default().count(c);
        }
        self.by_state.entry(ctx.state.clone()).or_default().count(c);
        self.by_model.entry(c.model.clone()).or_default().count(c);
        self.tokens_estimated |= c.usage.estimated;
        self.latencies_us.push(micros);
        let slot = ctx.turn.saturating_sub(1) as usize;
        if self.prompt_tokens_by_turn.len() <= slot {
            self.prompt_tokens_by_turn.resize(slot + 1, 0);
        }
        let by_turn = &mut self.prompt_tokens_by_turn[slot];
        *by_turn = by_turn.saturating_add(c.usage.prompt_tokens);
    }
}

/// What a closed choice answered from plain text means for the run, or `None` when the
/// choice was made as asked.
fn text_choice_warning(method: ChoiceMethod) -> Option<&'static str> {
    match method {
        ChoiceMethod::Text => Some(
            "the server refused structured outputs (HTTP 400 to response_format): closed \
             choices (speaker controller, transition judge, choice components) are asked in \
             plain text and read from the answers, without probabilities",
        ),
        ChoiceMethod::TextAfterUnusable => Some(
            "the server's structured answers to a closed choice were unusable (not JSON, or \
             none of the options) after the retries: closed choices are asked in plain text \
             from then on and read from the answers, without probabilities",
        ),
        ChoiceMethod::Logits | ChoiceMethod::Structured | ChoiceMethod::Script => None,
    }
}

/// Warnings about how the backend answered: each said once, then waiting until the
/// run takes them.
#[derive(Debug, Default)]
struct Notices {
    said: Vec<ChoiceMethod>,
    said_unsent: bool,
    said_unforbidden: bool,
    said_implausible: bool,
    pending: Vec<String>,
}

const SETTINGS_UNSENT: &str = "the server does not take the sampling settings repeat_penalty, \
     repeat_window, min_p and dry_* (OpenAI's own API refuses fields it does not know; \
     another server answered them with HTTP 400): they were left out of the requests, and \
     only temperature, top_p, top_k, frequency_penalty and presence_penalty reach it";

const USAGE_IMPLAUSIBLE: &str = "the server reported token counts no request of this size \
     could have (more prompt tokens than the prompt has bytes, or over a million reply \
     tokens): sopsim counted those calls with its own estimate, and their cost is an \
     estimate too";

const FORBID_UNKEPT: &str = "the scenario's `forbid` is kept by the local engine alone: \
     this backend was not told, so its replies may hold the forbidden strings";

/// How many calls of each kind each agent (or the run itself: `None`) has made.
type CallNumbers = HashMap<(CallKind, Option<String>), u64>;

/// A simulation's handle on the shared backend.
#[derive(Clone)]
pub struct LlmClient {
    backend: Arc<dyn LlmBackend>,
    ledger: Arc<Mutex<Ledger>>,
    notices: Arc<Mutex<Notices>>,
    run_seed: u64,
    /// Calls numbered so far, by kind and agent (none: the run's own calls).
    numbers: Arc<Mutex<CallNumbers>>,
    /// Stops the run: a call in progress is abandoned then.
    cancel: CancelToken,
}

impl LlmClient {
    /// The client of one simulation seeded with `run_seed`.
    pub fn new(backend: Arc<dyn LlmBackend>, run_seed: u64) -> Self {
        Self {
            backend,
            ledger: Arc::default(),
            notices: Arc::default(),
            run_seed,
            numbers: Arc::default(),
            cancel: CancelToken::default(),
        }
    }

    /// A client of the same backend, seed and stop, whose calls are numbered and
    /// counted apart from this one's (probes and judgements: they change neither the
    /// run's call numbers nor its spend).
    pub fn apart(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            ledger: Arc::default(),
            notices: Arc::default(),
            run_seed: self.run_seed,
            numbers: Arc::default(),
            cancel: self.cancel.clone(),
        }
    }

    /// The client whose calls are abandoned, failing with [`LlmError::Cancelled`], once
    /// `cancel` is cancelled.
    pub fn stopped_by(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// The context of the next call of `kind` in `state` during `turn`, made by `by`
    /// (agent and role) or by the run itself, numbered among the calls of its kind by
    /// the same maker. An `extract` step is numbered as the reply it precedes.
    pub fn context(
        &self,
        kind: CallKind,
        state: &str,
        turn: u64,
        by: Option<(&str, &str)>,
    ) -> CallContext {
        let mut numbers = self.numbers.lock().unwrap_or_else(|p| p.into_inner());
        let maker = by.map(|(agent, _)| agent.to_string());
        let index = match kind {
            CallKind::Extract => *numbers.entry((CallKind::Act, maker)).or_default(),
            _ => {
                let n = numbers.entry((kind, maker)).or_default();
                *n += 1;
                *n - 1
            }
        };
        let context = CallContext::new(kind, state, turn, self.run_seed).numbered(index);
        match by {
            Some((agent, role)) => context.by(agent, role, index),
            None => context,
        }
    }

    /// The backend's short description, for summaries and logs.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// Where tools with side effects keep or find their results.
    pub fn tool_tape(&self) -> Option<super::record::ToolTape> {
        self.backend.tool_tape()
    }

    /// The backend that answers requests with `settings`.
    fn backend_for(&self, settings: &sopsim_core::scenario::LlmSettings) -> &dyn LlmBackend {
        self.backend
            .routed(settings)
            .unwrap_or(self.backend.as_ref())
    }

    /// Whether a flawed reply is worth drawing again from the backend `settings` name
    /// (see [`LlmBackend::draws`]).
    pub fn draws(&self, settings: &sopsim_core::scenario::LlmSettings) -> bool {
        self.backend_for(settings).draws()
    }

    /// Counts a reply whose first draw had `cause` wrong, and the `draws` made after it.
    pub fn count_redrawn(&self, cause: sopsim_core::quality::RedrawCause, draws: u64) {
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        *ledger.redrawn.by_cause.entry(cause).or_default() += 1;
        ledger.redrawn.draws = ledger.redrawn.draws.saturating_add(draws);
    }

    /// Counts a kept reply: the tokens decoded over all its draws, and its own.
    pub fn count_reply_tokens(&self, decoded: u64, kept: u64) {
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        ledger.reply_tokens.add(decoded, kept);
    }

    /// Candidates of a reply drawn at once when the scenario does not say (see
    /// [`LlmBackend::candidates`]).
    pub fn default_candidates(&self, settings: &sopsim_core::scenario::LlmSettings) -> u32 {
        self.backend_for(settings).candidates()
    }

    /// How decisions are asked for when the scenario does not say.
    pub fn default_decision(
        &self,
        settings: &sopsim_core::scenario::LlmSettings,
    ) -> super::DecisionFormat {
        if self.backend_for(settings).native_tools() {
            super::DecisionFormat::Native
        } else {
            super::DecisionFormat::Json
        }
    }

    /// Sends a call; a failure names the turn it belongs to. A call in progress when
    /// the run is stopped is abandoned ([`LlmError::Cancelled`]).
    pub async fn call(
        &self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> Result<Completion, CallError> {
        let turn = request.context.turn.max(1);
        self.cancel
            .unless_cancelled(self.complete(request, stream))
            .await
            .unwrap_or(Err(LlmError::Cancelled))
            .map_err(|source| CallError { turn, source })
    }

    async fn complete(
        &self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> Result<Completion, LlmError> {
        let context = request.context.clone();
        let answering = self.backend_for(&request.settings);
        let unforbidden = answering.draws()
            && !answering.forbids()
            && request
                .settings
                .forbid
                .as_ref()
                .is_some_and(|f| !f.is_empty());
        let started = Instant::now();
        let completion = self.backend.complete(request, stream).await?;
        let micros = started.elapsed().as_micros() as u64;
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        ledger.add(&context, &completion, micros);
        drop(ledger);
        // Every closed choice passes here, whoever asks it (the Director's controller and
        // judge, an agent's choice component): so a fallback to plain text is noticed
        // once per run, whichever path met it first.
        if let Some(method) = completion.chosen.as_ref().map(|c| c.method) {
            if let Some(text) = text_choice_warning(method) {
                let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
                if !n.said.contains(&method) {
                    n.said.push(method);
                    n.pending.push(text.to_string());
                }
            }
        }
        if completion.usage.implausible {
            let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
            if !n.said_implausible {
                n.said_implausible = true;
                n.pending.push(USAGE_IMPLAUSIBLE.to_string());
            }
        }
        if completion.settings_unsent || unforbidden {
            let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
            if completion.settings_unsent && !n.said_unsent {
                n.said_unsent = true;
                n.pending.push(SETTINGS_UNSENT.to_string());
            }
            if unforbidden && !n.said_unforbidden {
                n.said_unforbidden = true;
                n.pending.push(FORBID_UNKEPT.to_string());
            }
        }
        Ok(completion)
    }

    /// The warnings not yet taken, in the order they arose; each is given once per
    /// simulation.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(
            &mut self
                .notices
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pending,
        )
    }

    /// Everything the simulation has spent so far, its series by turn and by call included.
    pub fn ledger(&self) -> Ledger {
        self.ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The ledger's totals, without its series by turn and by call (which grow with
    /// the run): cheap enough to take at every turn.
    pub fn ledger_totals(&self) -> Ledger {
        let ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        Ledger {
            by_kind: ledger.by_kind.clone(),
            by_agent: ledger.by_agent.clone(),
            by_role: ledger.by_role.clone(),
            by_state: ledger.by_state.clone(),
            by_model: ledger.by_model.clone(),
            tokens_estimated: ledger.tokens_estimated,
            prompt_tokens_by_turn: Vec::new(),
            latencies_us: Vec::new(),
            redrawn: ledger.redrawn.clone(),
            reply_tokens: ledger.reply_tokens.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallContext, CallKind, Usage};

    #[test]
    fn absurd_usage_from_a_recording_saturates_instead_of_wrapping() {
        let mut ledger = Ledger::default();
        let usage = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            cached_prompt_tokens: u64::MAX,
            estimated: false,
            ..Usage::default()
        };
        let reply = Completion::text("x".into(), usage, "m".into());
        for kind in [CallKind::Act, CallKind::Act, CallKind::Summary] {
            ledger.add(&CallContext::new(kind, "s", 1, 0), &reply, 1);
        }
        assert_eq!(ledger.prompt_tokens(), u64::MAX);
        assert_eq!(ledger.completion_tokens(), u64::MAX);
        assert_eq!(ledger.cached_prompt_tokens(), u64::MAX);
        assert_eq!(ledger.prompt_tokens_by_turn, vec![u64::MAX]);
    }

    /// Answers every choice with the first option, read from text as `method` says.
    struct Answers(ChoiceMethod);

    impl LlmBackend for Answers {
        fn describe(&self) -> String {
            "answers".into()
        }
        fn complete<'a>(
            &'a self,
            _: LlmRequest,
            _: Option<TokenSink>,
        ) -> futures::future::BoxFuture<'a, Result<Completion, LlmError>> {
            let mut c = Completion::text("A".into(), Usage::default(), "m".into());
            c.chosen = Some(crate::Chosen {
                index: 0,
                probabilities: None,
                method: self.0,
            });
            Box::pin(async move { Ok(c) })
        }
    }

    fn choose(client: &LlmClient) {
        let request = LlmRequest::choice(
            Vec::new(),
            vec!["A".into(), "B".into()],
            Default::default(),
            CallContext::new(CallKind::Choice, "s", 1, 0),
        );
        futures::executor::block_on(client.complete(request, None)).unwrap();
    }

    #[test]
    fn a_choice_read_from_text_is_warned_about_once_per_simulation_and_why() {
        let refused = LlmClient::new(Arc::new(Answers(ChoiceMethod::Text)), 0);
        let other_run = LlmClient::new(refused.backend.clone(), 0);
        let shared = refused.clone(); // an agent's clone of the run's client
        choose(&refused);
        choose(&shared);
        let warnings = refused.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("refused structured outputs"));
        choose(&refused);
        assert!(refused.take_warnings().is_empty(), "said once");
        choose(&other_run);
        assert_eq!(
            other_run.take_warnings().len(),
            1,
            "once per run, not per process"
        );

        let unusable = LlmClient::new(Arc::new(Answers(ChoiceMethod::TextAfterUnusable)), 0);
        choose(&unusable);
        let warnings = unusable.take_warnings();
        assert!(
            warnings.len() == 1 && warnings[0].contains("were unusable"),
            "{warnings:?}"
        );
        let structured = LlmClient::new(Arc::new(Answers(ChoiceMethod::Structured)), 0);
        choose(&structured);
        assert!(structured.take_warnings().is_empty());
    }

    #[test]
    fn a_forbid_that_the_backend_cannot_keep_is_warned_about_once() {
        let client = LlmClient::new(Arc::new(Answers(ChoiceMethod::Structured)), 0);
        let reply = |forbid: Option<Vec<String>>| {
            let settings = sopsim_core::scenario::LlmSettings {
                forbid,
                ..Default::default()
            };
            let context = CallContext::new(CallKind::Act, "s", 1, 0);
            let request = LlmRequest::chat(Vec::new(), settings, context);
            futures::executor::block_on(client.complete(request, None)).unwrap();
        };
        reply(Some(Vec::new()));
        reply(None);
        assert!(client.take_warnings().is_empty(), "nothing was forbidden");
        reply(Some(vec!["(".into()]));
        reply(Some(vec!["*".into()]));
        let warnings = client.take_warnings();
        assert!(
            warnings.len() == 1 && warnings[0].contains("`forbid`"),
            "{warnings:?}"
        );
    }
}

#[cfg(test)]
mod numbering {
    use super::*;
    use crate::ScriptedBackend;

    #[test]
    fn calls_are_numbered_by_kind_and_maker_and_an_extract_as_its_reply() {
        let client = LlmClient::new(Arc::new(ScriptedBackend::new(Default::default())), 7);
        let ada = Some(("Ada", "Pro"));
        let n = |kind, by| client.context(kind, "s", 1, by).index;
        assert_eq!(
            [
                n(CallKind::Act, ada),
                n(CallKind::Act, ada),
                n(CallKind::Act, Some(("Ben", "Con")))
            ],
            [0, 1, 0]
        );
        assert_eq!(n(CallKind::Extract, ada), 2, "the reply it comes before");
        assert_eq!([n(CallKind::Route, None), n(CallKind::Route, None)], [0, 1]);
        let c = client.context(CallKind::Choice, "s", 3, ada);
        assert_eq!(
            (
                c.agent.as_deref(),
                c.role.as_deref(),
                c.turn,
                c.run_seed,
                c.index
            ),
            (Some("Ada"), Some("Pro"), 3, 7, 0)
        );
    }
}
