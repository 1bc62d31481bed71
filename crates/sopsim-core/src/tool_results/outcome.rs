//! How a tool call ended.

use serde::{Deserialize, Serialize};

/// How a tool call ended, as `summary.json` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The tool ran and succeeded.
    Ok,
    /// The tool ran and failed.
    Failed,
    /// The arguments were not JSON or did not match the schema; the tool did not run.
    InvalidArguments,
    /// The model named no tool the scenario has.
    UnknownTool,
    /// The model named a tool whose `available_if` does not hold now.
    Unavailable,
    /// The same call again in one turn; its result is already in the prompt.
    Repeated,
}

impl CallOutcome {
    /// The outcome as `summary.json` names it: `ok`, `failed`, `invalid_arguments`…
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Failed => "failed",
            CallOutcome::InvalidArguments => "invalid_arguments",
            CallOutcome::UnknownTool => "unknown_tool",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::Repeated => "repeated",
        }
    }
}
