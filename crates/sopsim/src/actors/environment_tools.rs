//! The Environment actor's tool messages: storing tool returns (with who made them
//! and in which visit), the standing errors per agent and tool, what a decision may
//! see of the store, and the tools that run over the store or a knowledge base.
//!
//! In a simultaneous round no turn may see what another turn of the round did, and the
//! outcome must not depend on which turn finished first. So while a round is open each
//! of its agents works on its own view (the store as the round began, plus its own
//! returns); its returns are queued, and the commit applies every turn's queue in the
//! order of the roles, renumbering the `_REF_ID`s its messages and events list.

use std::collections::{BTreeSet, HashMap};

use actix::prelude::*;
use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use super::environment::EnvironmentActor;
use super::messages::*;
use super::tool_turn::{relist, tag_refs};
use crate::elysia::{Entry, ResultObject, Return, Store, REF_ID};
use crate::memory::MessageKind;
use crate::scenario::Mode;
use crate::tools::{decision, store_query, Failure, InEnvironment};

/// Agent → tool → standing self-healing error lines.
type Errors = IndexMap<String, IndexMap<String, Vec<String>>>;

/// Tool bookkeeping of one simulation.
#[derive(Debug, Default)]
pub struct ToolRecords {
    /// Agent → tool → standing self-healing error lines.
    pub errors: Errors,
    /// Tools that returned a result.
    pub ran: BTreeSet<String>,
    calls: IndexMap<String, IndexMap<String, u64>>,
    failed: u64,
    retries: u64,
}

impl ToolRecords {
    pub fn summary(&self) -> ToolSummary {
        ToolSummary {
            calls: self.calls.clone(),
            errors: self.failed,
            retries: self.retries,
        }
    }
}

impl EnvironmentActor {
    /// Whether `agent` may see `entry` now: in competitive mode only what was made in
    /// the current visit, in cooperative mode everything.
    fn visible(&self, entry: &Entry) -> bool {
        match self.mode {
            Mode::Cooperative => true,
            Mode::Competitive => {
                entry.metadata.get("_state").and_then(Value::as_str) == Some(self.state.as_str())
                    && entry.metadata.get("_visit").and_then(Value::as_u64)
                        == Some(u64::from(self.visit))
            }
        }
    }
}

/// A simultaneous round in progress: what each of its agents' turns did with tools.
#[derive(Debug, Default)]
pub struct OpenRound {
    turns: HashMap<String, RoundTurn>,
}

impl OpenRound {
    pub(super) fn turn_mut(&mut self, agent: &str) -> Option<&mut RoundTurn> {
        self.turns.get_mut(agent)
    }

    /// The agent's turn, taken out for the commit.
    pub(super) fn take(&mut self, agent: &str) -> RoundTurn {
        self.turns.remove(agent).unwrap_or_default()
    }
}

/// One agent's turn in an open round, kept apart from the Environment until the
/// round is committed.
#[derive(Debug, Default)]
pub struct RoundTurn {
    /// The store as the round began plus this turn's results (copied at the first).
    store: Option<Store>,
    /// Tools that have returned a result, before the round or in this turn.
    ran: BTreeSet<String>,
    /// This agent's standing errors (its own entry only).
    errors: Errors,
    /// The returns to apply at the commit, each with the `_REF_ID`s this turn saw.
    returns: Vec<(ApplyReturn, Vec<String>)>,
    /// Values this turn's `extract` step read.
    pub(super) shared: Vec<(String, String)>,
}

/// Stores a result's objects (with who made them, where and when) under its tool;
/// returns their `_REF_ID`s. Nothing for errors, or for results not to be kept.
fn store_result(store: &mut Store, msg: &ApplyReturn, state: &str, visit: u32) -> Vec<String> {
    match &msg.ret {
        Return::Result(result) if msg.store => {
            let mut result = result.clone();
            let meta = &mut result.metadata;
            meta.insert("_agent".into(), json!(msg.agent));
            meta.insert("_state".into(), json!(state));
            meta.insert("_visit".into(), json!(visit));
            meta.insert("_turn".into(), json!(msg.turn));
            store.add(&msg.tool, &result, false)
        }
        _ => Vec::new(),
    }
}

/// Notes a return where later decisions see it: a stored result marks its tool as run
/// and clears the agent's errors for it; an error joins them.
fn note_return(ran: &mut BTreeSet<String>, errors: &mut Errors, msg: &ApplyReturn) {
    match &msg.ret {
        Return::Result(_) if !msg.store => {}
        Return::Result(_) => {
            ran.insert(msg.tool.clone());
            if let Some(errors) = errors.get_mut(&msg.agent) {
                errors.shift_remove(&msg.tool);
            }
        }
        Return::Error {
            feedback,
            error_message,
        } => {
            let failure = if feedback.is_empty() {
                Failure::unknown(error_message.clone())
            } else {
                Failure::avoidable(feedback.clone())
            };
            errors
                .entry(msg.agent.clone())
                .or_default()
                .entry(msg.tool.clone())
                .or_default()
                .push(decision::error_line(&failure));
        }
        _ => {}
    }
}

impl EnvironmentActor {
    /// Opens a round for `agents`: each starts from the Environment as it stands.
    pub(super) fn open_round(&self, agents: &[String]) -> OpenRound {
        let turns = agents
            .iter()
            .map(|a| {
                let errors = self
                    .tools
                    .errors
                    .get(a)
                    .map(|e| IndexMap::from([(a.clone(), e.clone())]))
                    .unwrap_or_default();
                let turn = RoundTurn {
                    ran: self.tools.ran.clone(),
                    errors,
                    ..RoundTurn::default()
                };
                (a.clone(), turn)
            })
            .collect();
        OpenRound { turns }
    }

    /// Applies a return to the Environment and counts it; returns the stored objects'
    /// `_REF_ID`s.
    fn apply_return(&mut self, msg: &ApplyReturn) -> Vec<String> {
        let records = &mut self.tools;
        *records
            .calls
            .entry(msg.tool.clone())
            .or_default()
            .entry(msg.outcome.as_str().to_string())
            .or_default() += 1;
        records.failed += u64::from(msg.outcome != CallOutcome::Ok);
        records.retries += u64::from(msg.retry);
        note_return(&mut records.ran, &mut records.errors, msg);
        store_result(&mut self.store, msg, &self.state, self.visit)
    }

    /// Commits one turn of a round: applies its queued returns and extracted values,
    /// and gives its tool results' lines and events the `_REF_ID`s the store gave
    /// now (another turn of the round may have stored under the same key first).
    pub(super) fn settle(&mut self, own: RoundTurn, drafted: Drafted) -> (Vec<Turn>, Vec<Return>) {
        let committed: Vec<Vec<String>> = own
            .returns
            .iter()
            .map(|(msg, _)| self.apply_return(msg))
            .collect();
        // A turn's k-th tool result line is the line of its k-th return.
        let mut k = 0;
        let turns = drafted
            .turns
            .into_iter()
            .map(|mut t| {
                if t.kind == MessageKind::ToolResult {
                    if let (Some((_, seen)), Some(now)) = (own.returns.get(k), committed.get(k)) {
                        t.response = relist(&t.response, seen, now);
                    }
                    k += 1;
                }
                t
            })
            .collect();
        // What the turn's own objects were called in its view, and are called now: a
        // `store_query` in the turn may have shown them.
        let renamed: HashMap<&str, &str> = own
            .returns
            .iter()
            .zip(&committed)
            .flat_map(|((_, seen), now)| seen.iter().zip(now))
            .filter(|(seen, now)| seen != now)
            .map(|(seen, now)| (seen.as_str(), now.as_str()))
            .collect();
        let events = drafted
            .events
            .into_iter()
            .map(|e| match e.stored.and_then(|i| committed.get(i)) {
                Some(refs) if !refs.is_empty() => tag_refs(e.ret, refs),
                _ => rename_refs(e.ret, &renamed),
            })
            .collect();
        self.shared.extend(own.shared);
        (turns, events)
    }
}

/// A result's objects with the `_REF_ID`s in `renamed` replaced.
fn rename_refs(ret: Return, renamed: &HashMap<&str, &str>) -> Return {
    match ret {
        Return::Result(mut r) if !renamed.is_empty() => {
            for o in &mut r.objects {
                if let Some(Value::String(id)) = o.get_mut(REF_ID) {
                    if let Some(now) = renamed.get(id.as_str()) {
                        *id = now.to_string();
                    }
                }
            }
            Return::Result(r)
        }
        other => other,
    }
}

impl Handler<ApplyReturn> for EnvironmentActor {
    type Result = MessageResult<ApplyReturn>;
    fn handle(&mut self, msg: ApplyReturn, _: &mut Context<Self>) -> Self::Result {
        let Some(turn) = self.round.as_mut().and_then(|r| r.turn_mut(&msg.agent)) else {
            return MessageResult(self.apply_return(&msg));
        };
        // A turn of a round: into its own view only, for the commit to apply.
        note_return(&mut turn.ran, &mut turn.errors, &msg);
        let refs = match (&msg.ret, msg.store) {
            (Return::Result(_), true) => {
                let store = turn.store.get_or_insert_with(|| self.store.clone());
                store_result(store, &msg, &self.state, self.visit)
            }
            _ => Vec::new(),
        };
        turn.returns.push((msg, refs.clone()));
        MessageResult(refs)
    }
}

impl Handler<ViewTools> for EnvironmentActor {
    type Result = MessageResult<ViewTools>;
    fn handle(&mut self, msg: ViewTools, _: &mut Context<Self>) -> Self::Result {
        let own = self.round.as_ref().and_then(|r| r.turns.get(&msg.agent));
        let (store, ran, errors) = match own {
            Some(t) => (t.store.as_ref().unwrap_or(&self.store), &t.ran, &t.errors),
            None => (&self.store, &self.tools.ran, &self.tools.errors),
        };
        let entries: Vec<(&str, &str, &Entry)> = store
            .entries()
            .filter(|(_, _, e)| self.visible(e))
            .collect();
        let stored: BTreeSet<String> = entries.iter().map(|(t, _, _)| t.to_string()).collect();
        let environment = decision::render_environment(&entries, msg.budget, self.counter.as_ref());
        MessageResult(ToolView {
            errors: errors.get(&msg.agent).cloned().unwrap_or_default(),
            environment,
            ran: ran.iter().cloned().collect(),
            stored: stored.into_iter().collect(),
        })
    }
}

impl Handler<RunInEnvironment> for EnvironmentActor {
    type Result = ResponseFuture<Result<ResultObject, Failure>>;
    fn handle(&mut self, msg: RunInEnvironment, _: &mut Context<Self>) -> Self::Result {
        match msg.tool.in_environment() {
            Some(InEnvironment::StoreQuery) => {
                let store = self
                    .round
                    .as_ref()
                    .and_then(|r| r.turns.get(&msg.agent))
                    .and_then(|t| t.store.as_ref())
                    .unwrap_or(&self.store);
                let (objects, total) =
                    store_query::run(store, &msg.arguments, &msg.tool.spec.config, |e| {
                        self.visible(e)
                    });
                let result = msg.tool.result(objects, total);
                Box::pin(async move { Ok(result) })
            }
            Some(InEnvironment::Knowledge(lookup)) => {
                let embed = self.embed.clone();
                Box::pin(async move {
                    let query = msg
                        .arguments
                        .get("query")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let vector = embed
                        .embed(query.clone())
                        .await
                        .map_err(|e| Failure::unknown(format!("embedding the query: {e}")))?;
                    let base = crate::knowledge::shared(&lookup, &embed)
                        .await
                        .map_err(|e| Failure::unknown(format!("{}: {e}", lookup.path)))?;
                    let found = base.lookup(&vector, &lookup);
                    let mut obj = Map::new();
                    obj.insert("query".into(), json!(query));
                    obj.insert("found".into(), json!(found));
                    let mut result = msg.tool.result(vec![obj], 1);
                    result.llm_message = Some(format!("Knowledge for {query:?}: {found}"));
                    Ok(result)
                })
            }
            None => Box::pin(async {
                Err(Failure::unknown(
                    "this tool does not run in the Environment",
                ))
            }),
        }
    }
}
