//! A sequence in the worker's batch and what it does: the request it answers (its
//! job), its prompt and cache, and its phase once the prompt is read (a reply being
//! drawn, or a choice's questions being asked).

use sopsim_infer::chat_template::ChatTemplate;
use sopsim_infer::choice::{Branching, OptionTrie};
use sopsim_infer::kv::KvCache;
use sopsim_infer::sampling::Sampler;
use sopsim_infer::transformer::Want;
use tokenizers::Tokenizer;
use tokio::sync::oneshot;

use super::speculate::{Spec, SpecStats};
use super::text_stream::TextStream;
use super::SpecialTokens;
use crate::{Completion, LlmError, LlmRequest, TokenSink};

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
pub(super) enum Phase {
    Reply(Box<Reply>),
    Choice(ChoiceState),
}

/// A sequence's part of a step: the tokens it feeds, and the logits it wants for which
/// of them.
pub(super) type Plan = (Vec<u32>, Vec<(usize, Want)>);

pub(super) struct Reply {
    /// Set for a decision: the schema its JSON must follow.
    pub(super) matcher: Option<Box<llguidance::Matcher>>,
    pub(super) sampler: Sampler,
    /// The prompt and what was generated, which the penalties look at.
    pub(super) context: Vec<u32>,
    pub(super) generated: Vec<u32>,
    pub(super) text: TextStream,
    /// The end-of-text tokens cannot come before this many tokens (a reply drawn again
    /// for being empty).
    pub(super) min_tokens: usize,
    /// The hard cap: the reply stops here wherever it is.
    pub(super) max_tokens: usize,
    /// For replies and summaries: from `soft` tokens on, the reply stops at the first
    /// sentence end (`sopsim_core::sentence`); the text is searched from `look_from`.
    pub(super) soft: Option<usize>,
    pub(super) look_from: usize,
    pub(super) stops: Vec<String>,
    pub(super) stopped_at: Option<String>,
    /// Set when the reply is screened for a flaw that would have it drawn again.
    pub(super) screen: Option<crate::Screening>,
    /// The flaw the screen stopped the reply for.
    pub(super) abandoned: Option<sopsim_core::quality::RedrawCause>,
    /// Set when a draft model drafts for this reply (`speculate.rs`).
    pub(super) spec: Option<Box<Spec>>,
    pub(super) spec_stats: SpecStats,
}

pub(super) struct ChoiceState {
    pub(super) trie: OptionTrie,
    pub(super) questions: Vec<Branching>,
    pub(super) answers: Vec<Vec<f32>>,
    pub(super) option_tokens: u64,
    pub(super) seed: u64,
}

pub(super) struct Seq {
    pub(super) id: u64,
    pub(super) job: Job,
    pub(super) prompt: Vec<u32>,
    pub(super) cache: KvCache,
    pub(super) cached: usize,
    pub(super) phase: Phase,
    /// Set while the sequence waits for another in flight to read the prompt prefix
    /// they share: that sequence's id and the prefix's length. The prefix is read once
    /// for both (a reply's candidates, the same first prompt of several runs).
    pub(super) follows: Option<(u64, usize)>,
}

/// The model as the worker's answers and errors name it: `local:NAME`.
pub(super) struct Who(pub String);

impl Who {
    pub(super) fn of(name: &str) -> Self {
        Who(format!("local:{name}"))
    }

    pub(super) fn error(&self, message: impl Into<String>) -> LlmError {
        LlmError::failed(self.0.clone(), message)
    }

    /// `what` failed because of `source`.
    pub(super) fn failed(&self, what: &str, source: impl Into<crate::BoxError>) -> LlmError {
        LlmError::caused_by(self.0.clone(), what, source)
    }
}
