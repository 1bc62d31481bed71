//! What every tool kind provides: [`Start`], which its settings implement to make it
//! ready, and [`Kind`], what a ready tool shows and runs. Each kind implements both in
//! its own file; the toolbox knows no kind by name.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{RunsIn, Setup, Tool, ToolCallPlace, ToolSetupError};
use sopsim_core::tool_results::{ResultObject, ToolFailure};

/// A kind's settings, made ready to run: data files loaded, servers started.
pub(crate) trait Start {
    async fn start(self, setup: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError>;
}

/// A tool kind, ready: what it shows the model and where and how its calls run.
pub(crate) trait Kind: Send + Sync {
    /// The argument schema when the scenario gives none.
    fn parameters(&self) -> Value;

    /// Where a call runs.
    fn runs_in(&self) -> RunsIn<'_>;

    /// What the model is told the tool does, when the scenario says nothing.
    fn description(&self) -> Option<String> {
        None
    }

    /// What its results are named, when the scenario does not name them (otherwise
    /// after the kind).
    fn result_name(&self) -> Option<&str> {
        None
    }

    /// Elysia's `payload_type` of its results, when the scenario gives none.
    fn payload_type(&self) -> &'static str;

    /// The `llm_message` of a result with objects, when the scenario gives none.
    fn message(&self) -> &'static str {
        "{name}: {num_objects} shown of {total} matching."
    }

    /// Whether its results go into the Environment's store (a query of the store
    /// would otherwise store copies of what it found).
    fn stores_results(&self) -> bool {
        true
    }

    /// Runs a call in the caller's turn ([`RunsIn::Place`] kinds).
    fn run_here(
        &self,
        _tool: &Tool,
        _args: &Map<String, Value>,
        _place: &ToolCallPlace,
    ) -> Option<Result<ResultObject, ToolFailure>> {
        None
    }

    /// Runs a call outside the process ([`RunsIn::Outside`] kinds).
    fn run_outside<'a>(
        &'a self,
        _tool: &'a Tool,
        _args: &'a Map<String, Value>,
    ) -> Option<BoxFuture<'a, Result<ResultObject, ToolFailure>>> {
        None
    }
}

/// A kind whose calls compute one object from their arguments and where they are made,
/// in the caller's turn (the calculator, dice). Its fields are also the result's
/// metadata, so `message` may name them.
pub(crate) struct Computed {
    pub parameters: fn() -> Value,
    pub run: Compute,
    pub message: &'static str,
}

/// A computed kind's call: its arguments and where it is made, to one object.
type Compute = fn(&Map<String, Value>, &ToolCallPlace) -> Result<Map<String, Value>, ToolFailure>;

impl Kind for Computed {
    fn parameters(&self) -> Value {
        (self.parameters)()
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Place
    }

    fn payload_type(&self) -> &'static str {
        "default"
    }

    fn message(&self) -> &'static str {
        self.message
    }

    fn run_here(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        place: &ToolCallPlace,
    ) -> Option<Result<ResultObject, ToolFailure>> {
        Some((self.run)(args, place).map(|o| tool.computed(o)))
    }
}
