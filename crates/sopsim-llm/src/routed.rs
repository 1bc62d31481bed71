//! Model against model: one backend per model the scenario's agents, roles or states
//! name (`llm.backend` with `llm.model`), beside the run's own, each request going to
//! the one its settings name. Every model is loaded once per process and shared by
//! every run that asks for it; each keeps its own batching, so each stays
//! batch-invariant.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink};
use sopsim_core::scenario::{BackendKind, LlmSettings};

/// What a request names: its backend and model.
pub type BackendKey = (BackendKind, Option<String>);

/// The run's backend and the named ones.
pub struct Routed {
    default: Arc<dyn LlmBackend>,
    named: Vec<(BackendKey, Arc<dyn LlmBackend>)>,
}

impl Routed {
    /// The run's backend `default` and the `named` ones; a request goes to the one its
    /// settings name, else to `default`.
    pub fn new(
        default: Arc<dyn LlmBackend>,
        named: Vec<(BackendKey, Arc<dyn LlmBackend>)>,
    ) -> Self {
        Self { default, named }
    }

    /// The backend `settings` name, else the run's.
    fn pick(&self, settings: &LlmSettings) -> &dyn LlmBackend {
        let Some(kind) = settings.backend else {
            return self.default.as_ref();
        };
        self.named
            .iter()
            .find(|((k, m), _)| *k == kind && *m == settings.model)
            .map_or(self.default.as_ref(), |(_, b)| b.as_ref())
    }
}

impl LlmBackend for Routed {
    /// The run's backend, then each named one: part of what a run is, so a resume with
    /// other pairings is refused.
    fn describe(&self) -> String {
        let mut each = vec![self.default.describe()];
        for (_, b) in &self.named {
            let d = b.describe();
            // An agent naming the run's own model is still one model.
            if !each.contains(&d) {
                each.push(d);
            }
        }
        each.join(" + ")
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.default.notes();
        for (_, b) in &self.named {
            for n in b.notes() {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        notes
    }

    fn native_tools(&self) -> bool {
        self.default.native_tools()
    }

    fn draws(&self) -> bool {
        self.default.draws()
    }

    fn candidates(&self) -> u32 {
        self.default.candidates()
    }

    fn forbids(&self) -> bool {
        self.default.forbids()
    }

    fn tool_tape(&self) -> Option<super::record::ToolTape> {
        self.default.tool_tape()
    }

    fn routed(&self, settings: &LlmSettings) -> Option<&dyn LlmBackend> {
        settings.backend.map(|_| self.pick(settings))
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        self.pick(&request.settings).complete(request, stream)
    }
}
