//! The Environment actor's tool messages: storing tool returns (with who made them
//! and in which visit), the standing errors per agent and tool, what a decision may
//! see of the store, and the tools that run over the store or a knowledge base.

use std::collections::BTreeSet;

use actix::prelude::*;
use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use super::environment::EnvironmentActor;
use super::messages::*;
use crate::elysia::{Entry, ResultObject, Return};
use crate::scenario::Mode;
use crate::tools::{decision, store_query, Failure, InEnvironment};

/// Tool bookkeeping of one simulation.
#[derive(Debug, Default)]
pub struct ToolRecords {
    /// Agent → tool → standing self-healing error lines.
    pub errors: IndexMap<String, IndexMap<String, Vec<String>>>,
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

impl Handler<ApplyReturn> for EnvironmentActor {
    type Result = MessageResult<ApplyReturn>;
    fn handle(&mut self, msg: ApplyReturn, _: &mut Context<Self>) -> Self::Result {
        let records = &mut self.tools;
        *records
            .calls
            .entry(msg.tool.clone())
            .or_default()
            .entry(msg.outcome.as_str().to_string())
            .or_default() += 1;
        records.failed += u64::from(msg.outcome != CallOutcome::Ok);
        records.retries += u64::from(msg.retry);
        let refs = match msg.ret {
            Return::Result(_) if !msg.store => Vec::new(),
            Return::Result(mut result) => {
                let meta = &mut result.metadata;
                meta.insert("_agent".into(), json!(msg.agent));
                meta.insert("_state".into(), json!(self.state));
                meta.insert("_visit".into(), json!(self.visit));
                meta.insert("_turn".into(), json!(msg.turn));
                records.ran.insert(msg.tool.clone());
                if let Some(errors) = records.errors.get_mut(&msg.agent) {
                    errors.shift_remove(&msg.tool);
                }
                self.store.add(&msg.tool, &result, false)
            }
            Return::Error {
                feedback,
                error_message,
            } => {
                let failure = if feedback.is_empty() {
                    Failure::unknown(error_message)
                } else {
                    Failure::avoidable(feedback)
                };
                records
                    .errors
                    .entry(msg.agent)
                    .or_default()
                    .entry(msg.tool)
                    .or_default()
                    .push(decision::error_line(&failure));
                Vec::new()
            }
            _ => Vec::new(),
        };
        MessageResult(refs)
    }
}

impl Handler<ViewTools> for EnvironmentActor {
    type Result = MessageResult<ViewTools>;
    fn handle(&mut self, msg: ViewTools, _: &mut Context<Self>) -> Self::Result {
        let entries: Vec<(&str, &str, &Entry)> = self
            .store
            .entries()
            .filter(|(_, _, e)| self.visible(e))
            .collect();
        let stored: BTreeSet<String> = entries.iter().map(|(t, _, _)| t.to_string()).collect();
        let environment = decision::render_environment(&entries, msg.budget, self.counter.as_ref());
        MessageResult(ToolView {
            errors: self
                .tools
                .errors
                .get(&msg.agent)
                .cloned()
                .unwrap_or_default(),
            environment,
            ran: self.tools.ran.iter().cloned().collect(),
            stored: stored.into_iter().collect(),
        })
    }
}

impl Handler<RunInEnvironment> for EnvironmentActor {
    type Result = ResponseFuture<Result<ResultObject, Failure>>;
    fn handle(&mut self, msg: RunInEnvironment, _: &mut Context<Self>) -> Self::Result {
        match msg.tool.in_environment() {
            Some(InEnvironment::StoreQuery) => {
                let (objects, total) =
                    store_query::run(&self.store, &msg.arguments, &msg.tool.spec.config, |e| {
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
