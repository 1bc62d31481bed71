//! The turns under way and what their tools did, kept apart until the commit.
//!
//! In a simultaneous round no turn may see what another turn of the round did, and the
//! outcome must not depend on which turn finished first. So each turn of a round of
//! several works on its own view (the store as the round began, plus its own returns);
//! its returns are queued, and the commit applies every turn's queue in the order of
//! the roles. A round of one (a sequential turn) has no one to hide from: its returns
//! go into the Environment as they come, which is what applying them at the commit
//! would give.

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::tool_results::{error_line, CallOutcome, Return, Store, ToolFailure};

/// Agent → tool → standing self-healing error lines.
pub(super) type Errors = IndexMap<String, IndexMap<String, Vec<String>>>;

/// A tool's return for the Environment: a result goes into the store (with the agent,
/// state, visit and turn that made it in the entry's metadata), an error into the
/// agent's error list for that tool, which a later success of the same tool clears.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolReturn {
    /// The tool called.
    pub tool: String,
    /// The agent whose turn called it.
    pub agent: String,
    /// The run's turn number, from 1.
    pub turn: u64,
    /// What the tool returned.
    pub ret: Return,
    /// How the call ended.
    pub outcome: CallOutcome,
    /// An earlier call this turn failed.
    pub retry: bool,
    /// Keep a result in the store (not for `store_query`, whose objects are already
    /// there).
    pub store: bool,
}

/// Tool use over a run, for `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Tool → outcome (`ok`, `failed`, `invalid_arguments`, `unknown_tool`, `unavailable`,
    /// `repeated`) → calls.
    pub calls: IndexMap<String, IndexMap<String, u64>>,
    /// Calls that did not succeed.
    pub errors: u64,
    /// Calls made after an earlier call of the same turn failed.
    pub retries: u64,
}

/// What the tools of a run did, as later decisions see it.
#[derive(Debug, Clone, Default)]
pub struct ToolRecords {
    /// Agent → tool → standing self-healing error lines.
    pub errors: Errors,
    /// Tools that returned a result.
    pub ran: BTreeSet<String>,
    summary: ToolSummary,
}

impl ToolRecords {
    /// Tool use so far, for `summary.json`.
    pub fn summary(&self) -> ToolSummary {
        self.summary.clone()
    }

    /// Counts a return and notes it where later decisions see it.
    pub(super) fn count(&mut self, ret: &ToolReturn) {
        *self
            .summary
            .calls
            .entry(ret.tool.clone())
            .or_default()
            .entry(ret.outcome.as_str().to_string())
            .or_default() += 1;
        self.summary.errors += u64::from(ret.outcome != CallOutcome::Ok);
        self.summary.retries += u64::from(ret.retry);
        note_return(&mut self.ran, &mut self.errors, ret);
    }
}

/// Stores a result's objects (with who made them, where and when) under its tool;
/// returns their `_REF_ID`s. Nothing for errors, or for results not to be kept.
pub(super) fn store_result(
    store: &mut Store,
    ret: &ToolReturn,
    state: &str,
    visit: u32,
) -> Vec<String> {
    match &ret.ret {
        Return::Result(result) if ret.store => {
            let mut result = result.clone();
            let meta = &mut result.metadata;
            meta.insert("_agent".into(), json!(ret.agent));
            meta.insert("_state".into(), json!(state));
            meta.insert("_visit".into(), json!(visit));
            meta.insert("_turn".into(), json!(ret.turn));
            store.add(&ret.tool, &result, false)
        }
        _ => Vec::new(),
    }
}

/// Notes a return where later decisions see it: a stored result marks its tool as run
/// and clears the agent's errors for it; an error joins them.
fn note_return(ran: &mut BTreeSet<String>, errors: &mut Errors, ret: &ToolReturn) {
    match &ret.ret {
        Return::Result(_) if !ret.store => {}
        Return::Result(_) => {
            ran.insert(ret.tool.clone());
            if let Some(errors) = errors.get_mut(&ret.agent) {
                errors.shift_remove(&ret.tool);
            }
        }
        Return::Error {
            feedback,
            error_message,
        } => {
            let failure = if feedback.is_empty() {
                ToolFailure::unknown(error_message.clone())
            } else {
                ToolFailure::avoidable(feedback.clone())
            };
            errors
                .entry(ret.agent.clone())
                .or_default()
                .entry(ret.tool.clone())
                .or_default()
                .push(error_line(&failure));
        }
        _ => {}
    }
}

/// One agent's turn under way.
#[derive(Debug, Default)]
pub(super) struct TurnView {
    /// Its own copy of the store (taken at its first stored result), in a round of
    /// several; `None` while it has stored nothing, or in a round of one.
    pub store: Option<Store>,
    /// Tools that have returned a result, before the round or in this turn.
    pub ran: BTreeSet<String>,
    /// This agent's standing errors (its own entry only).
    pub errors: Errors,
    /// Its returns in order, each with the `_REF_ID`s it got when it came (applied at
    /// the commit in a round of several).
    pub returns: Vec<(ToolReturn, Vec<String>)>,
    /// Values its `extract` steps read (applied at the commit in a round of several).
    pub shared: Vec<(String, String)>,
}

impl TurnView {
    /// A turn starting from what the Environment knows now.
    pub(super) fn starting(agent: &str, records: &ToolRecords) -> Self {
        Self {
            ran: records.ran.clone(),
            errors: records
                .errors
                .get(agent)
                .map(|e| IndexMap::from([(agent.to_string(), e.clone())]))
                .unwrap_or_default(),
            ..Self::default()
        }
    }

    /// Notes a return in this turn's own view.
    pub(super) fn note(&mut self, ret: &ToolReturn) {
        note_return(&mut self.ran, &mut self.errors, ret);
    }
}

/// The turns under way: one, or a simultaneous round's.
#[derive(Debug, Default)]
pub(super) struct Round {
    pub turns: HashMap<String, TurnView>,
    /// A round of several: turns are kept apart until the commit.
    pub apart: bool,
}
