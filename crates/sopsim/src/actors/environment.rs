//! The Environment actor: owns a simulation's shared memory and its Elysia store.
//! Embedding goes to the embedding service and summaries to the LLM client; the
//! actor only sequences the work and keeps the state. During a simultaneous round it
//! keeps each turn's tool returns and extracted values apart (`environment_tools`)
//! and applies them when the round is committed, in the order of the roles.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::json;

use super::messages::*;
use crate::action::{Action, Place};
use crate::elysia::Store;
use crate::embed::EmbedService;
use crate::error::SimError;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest};
use crate::memory::{Message, SharedMemory, SummaryRequest};
use crate::prompt;
use crate::scenario::Scenario;
use crate::tokens::TokenCounter;

pub struct EnvironmentActor {
    pub(super) scenario: Arc<Scenario>,
    memory: SharedMemory,
    pub(super) store: Store,
    pub(super) tools: super::environment_tools::ToolRecords,
    pub(super) mode: crate::scenario::Mode,
    /// Values `extract` steps stored, by tag.
    pub(super) shared: std::collections::BTreeMap<String, String>,
    /// The simultaneous round in progress, if any.
    pub(super) round: Option<super::environment_tools::OpenRound>,
    /// Embedding calls made for this simulation.
    embeddings: u64,
    /// Replies cut where they went on as another participant.
    cut_replies: u64,
    /// Whether anything reads embeddings (`Scenario::needs_embeddings`).
    needs_embeddings: bool,
    pub(super) embed: EmbedService,
    llm: LlmClient,
    pub(super) counter: Arc<dyn TokenCounter>,
    pub(super) state: String,
    pub(super) visit: u32,
    seed: u64,
}

impl EnvironmentActor {
    pub fn new(
        scenario: Arc<Scenario>,
        mode: crate::scenario::Mode,
        embed: EmbedService,
        llm: LlmClient,
        counter: Arc<dyn TokenCounter>,
        seed: u64,
    ) -> Self {
        let env = &scenario.environment;
        let memory = SharedMemory::new(mode, env.max_chat_history, env.top_k);
        let state = scenario.sop.start.clone();
        Self {
            needs_embeddings: scenario.needs_embeddings(),
            scenario,
            memory,
            store: Store::new(),
            tools: Default::default(),
            mode,
            shared: Default::default(),
            round: None,
            embeddings: 0,
            cut_replies: 0,
            embed,
            llm,
            counter,
            state,
            visit: 0,
            seed,
        }
    }

    fn summary_request(&self, req: &SummaryRequest, turn: u64) -> LlmRequest {
        let state = &self.scenario.sop.states[&self.state];
        let assembled = prompt::summary_prompt(&self.scenario, state, req, self.counter.as_ref());
        let index = self.memory.summaries().len() as u64;
        LlmRequest::chat(
            assembled.messages,
            self.scenario.settings_for(&self.state, None, None),
            CallContext::new(CallKind::Summary, &self.state, turn, self.seed).numbered(index),
        )
    }
}

impl Actor for EnvironmentActor {
    type Context = Context<Self>;
}

impl Handler<EnterVisit> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: EnterVisit, _: &mut Context<Self>) {
        self.state = msg.state;
        self.visit = msg.visit;
        self.memory.begin_visit();
    }
}

impl Handler<Observe> for EnvironmentActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        let mut obs = self.memory.observe();
        obs.shared = self.shared.clone();
        MessageResult(obs)
    }
}

impl Handler<Record> for EnvironmentActor {
    type Result = AtomicResponse<Self, Result<Vec<Arc<Message>>, SimError>>;

    fn handle(&mut self, Record(turns): Record, _: &mut Context<Self>) -> Self::Result {
        AtomicResponse::new(self.record(turns))
    }
}

impl Handler<BeginRound> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: BeginRound, _: &mut Context<Self>) {
        self.round = Some(self.open_round(&msg.agents));
    }
}

impl Handler<CommitRound> for EnvironmentActor {
    type Result = AtomicResponse<Self, Result<Vec<CommittedTurn>, SimError>>;

    fn handle(&mut self, CommitRound(drafted): CommitRound, _: &mut Context<Self>) -> Self::Result {
        let mut round = self.round.take().unwrap_or_default();
        let mut turns = Vec::new();
        let mut shapes = Vec::with_capacity(drafted.len());
        for d in drafted {
            let own = round.take(&d.name);
            let name = d.name.clone();
            let (settled, events) = self.settle(own, d);
            shapes.push((name, events, settled.len()));
            turns.extend(settled);
        }
        AtomicResponse::new(Box::pin(self.record(turns).map(move |res, _, _| {
            let mut messages = res?.into_iter();
            Ok(shapes
                .into_iter()
                .map(|(name, events, n)| CommittedTurn {
                    name,
                    events,
                    messages: messages.by_ref().take(n).collect(),
                })
                .collect())
        })))
    }
}

impl EnvironmentActor {
    /// Commits turns to memory, in order, with consecutive `seq` numbers: embeds them,
    /// appends them, and makes a summary if one is due.
    fn record(
        &mut self,
        turns: Vec<Turn>,
    ) -> ResponseActFuture<Self, Result<Vec<Arc<Message>>, SimError>> {
        let first_seq = self.memory.next_seq();
        let turn = turns.last().map_or(0, |t| t.turn);
        let memories: Vec<Message> = turns
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let action = Action {
                    name: t.name,
                    role: t.role,
                    response: t.response,
                    kind: t.kind,
                    decision: t.decision,
                    others: t.others,
                };
                let processed = action.process(Place {
                    seq: first_seq + i as u64,
                    state: &self.state,
                    visit: self.visit,
                });
                self.cut_replies += u64::from(processed.cut || t.stopped_at_speaker);
                processed.memory
            })
            .collect();
        // Nothing reads embeddings when retrieval is off and no knowledge lookup needs
        // the latest message's vector: then none is computed.
        let embed = self.needs_embeddings.then(|| self.embed.clone());
        let texts: Vec<String> = memories.iter().map(|m| m.content.clone()).collect();
        if embed.is_some() {
            self.embeddings += texts.len() as u64;
        }
        Box::pin(
            async move {
                match embed {
                    // The embedding service batches these with other simulations'.
                    Some(embed) => {
                        futures::future::join_all(texts.into_iter().map(|t| embed.embed(t)))
                            .await
                            .into_iter()
                            .collect::<Result<Vec<_>, _>>()
                    }
                    None => Ok(vec![Vec::new(); texts.len()]),
                }
            }
            .into_actor(self)
            .map(move |embeddings, act, _| {
                let embeddings = embeddings?;
                let pairs = memories
                    .into_iter()
                    .zip(embeddings.iter().map(Vec::as_slice))
                    .collect();
                let (recorded, due) = act.memory.record_all(pairs);
                Ok((recorded, due.map(|req| act.summary_request(&req, turn))))
            })
            .then(
                move |res: Result<(Vec<Arc<Message>>, Option<LlmRequest>), SimError>, act, _| {
                    let llm = act.llm.clone();
                    async move {
                        let (recorded, request) = res?;
                        let summary = match request {
                            Some(r) => Some(
                                llm.complete(r, None)
                                    .await
                                    .map_err(|source| SimError::Llm { turn, source })?
                                    .text,
                            ),
                            None => None,
                        };
                        Ok::<_, SimError>((recorded, summary))
                    }
                    .into_actor(act)
                },
            )
            .map(|res, act, _| {
                let (recorded, summary) = res?;
                if let Some(text) = summary {
                    tracing::debug!(
                        through_seq = recorded.last().map_or(0, |m| m.seq),
                        chars = text.len(),
                        "summary made"
                    );
                    act.memory.set_summary(text.trim().to_string());
                }
                Ok(recorded)
            }),
        )
    }
}

impl Handler<SetShared> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: SetShared, _: &mut Context<Self>) {
        // In a round, the values wait for the commit: the round's others must not see
        // them in their templates.
        match self.round.as_mut().and_then(|r| r.turn_mut(&msg.agent)) {
            Some(turn) => turn.shared.extend(msg.values),
            None => self.shared.extend(msg.values),
        }
    }
}

impl Handler<Consult> for EnvironmentActor {
    type Result = ResponseFuture<Result<String, SimError>>;
    fn handle(&mut self, msg: Consult, _: &mut Context<Self>) -> Self::Result {
        // The latest message was embedded when it was recorded; the lookup reuses it.
        let query = self.memory.latest_vector().map(<[f32]>::to_vec);
        let embed = self.embed.clone();
        Box::pin(async move {
            let Some(query) = query else {
                return Ok(String::new());
            };
            let base = crate::knowledge::shared(&msg.lookup, &embed)
                .await
                .map_err(|source| SimError::Knowledge {
                    path: msg.lookup.path.clone(),
                    source,
                })?;
            Ok(base.lookup(&query, &msg.lookup))
        })
    }
}

impl Handler<Snapshot> for EnvironmentActor {
    type Result = MessageResult<Snapshot>;
    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        let store = self.store.to_json();
        let json = json!({
            "environment": store["environment"],
            "hidden_environment": store["hidden_environment"],
            "tool_errors": self.tools.errors,
            "extracted": self.shared,
            "shared_memory": {
                "long_term_memory": self.memory.log(),
                "short_term_memory": self.memory.summary(),
                "summaries": self.memory.summaries(),
            },
        });
        MessageResult(EnvironmentSnapshot {
            transcript: self.memory.log().to_vec(),
            json,
            embeddings: self.embeddings,
            cut_replies: self.cut_replies,
            tools: self.tools.summary(),
        })
    }
}
