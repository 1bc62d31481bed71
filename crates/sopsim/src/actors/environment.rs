//! The Environment actor: a thin shell around [`sopsim_core::environment::Environment`],
//! which holds the state and the rules. The actor sequences the work around it:
//! embedding committed messages (the embedding service batches them with other
//! simulations'), asking for a summary when one is due, and running the tools that
//! read the Environment (`store_query`, `knowledge`).

use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Map, Value};

use super::messages::*;
use crate::embed::EmbedService;
use crate::error::SimError;
use crate::llm::{CallKind, LlmClient, LlmRequest};
use crate::scenario::Scenario;
use crate::tools::{store_query, InEnvironment, RunsIn, ToolFailure};
use sopsim_core::environment::{Environment, SettledTurn};
use sopsim_core::memory::{Message, SummaryRequest};
use sopsim_core::prompt;
use sopsim_core::tokens::TokenCounter;
use sopsim_core::tool_results::ResultObject;

/// What reply quality reads from the committed messages' embeddings.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QualityEmbeddings {
    /// Replies are checked against stakes (every reply is embedded).
    pub stakes: bool,
}

pub(crate) struct EnvironmentActor {
    env: Environment,
    scenario: Arc<Scenario>,
    /// Which committed messages are embedded.
    meaning: sopsim_core::quality::Meaning,
    embed: EmbedService,
    /// The knowledge bases this run has built.
    knowledge: crate::knowledge::KnowledgeBases,
    llm: LlmClient,
    counter: Arc<dyn TokenCounter>,
    /// The world after the last round, for the summaries' prompts.
    world: Option<Arc<sopsim_core::world::WorldView>>,
}

impl EnvironmentActor {
    pub(crate) fn new(
        scenario: Arc<Scenario>,
        mode: crate::scenario::Mode,
        embed: EmbedService,
        llm: LlmClient,
        counter: Arc<dyn TokenCounter>,
        audience: Option<sopsim_core::memory::Audience>,
        quality: QualityEmbeddings,
    ) -> Self {
        let mut env = Environment::new(&scenario, mode);
        if let Some(audience) = audience {
            env.set_audience(audience);
        }
        Self {
            env,
            meaning: sopsim_core::quality::Meaning::new(
                scenario.needs_embeddings(),
                quality.stakes,
            ),
            scenario,
            embed,
            knowledge: Default::default(),
            llm,
            counter,
            world: None,
        }
    }

    fn summary_request(&self, req: &SummaryRequest, turn: u64) -> Result<LlmRequest, SimError> {
        let state_name = self.env.state();
        let state = &self.scenario.sop.states[state_name];
        let shown = match &self.world {
            Some(view) => sopsim_core::world::view::render_state(state_name, state, view, None)?,
            None => None,
        };
        let state = shown.as_ref().unwrap_or(state);
        let assembled = prompt::summary_prompt(&self.scenario, state, req, self.counter.as_ref());
        Ok(LlmRequest::chat(
            assembled.messages,
            self.scenario.settings_for(state_name, None, None),
            self.llm.context(CallKind::Summary, state_name, turn, None),
        ))
    }
}

impl Actor for EnvironmentActor {
    type Context = Context<Self>;
}

impl Handler<EnterVisit> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: EnterVisit, _: &mut Context<Self>) {
        self.env.enter(msg.state, msg.visit);
    }
}

impl Handler<SetWorld> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, SetWorld(view): SetWorld, _: &mut Context<Self>) {
        self.world = Some(view);
    }
}

impl Handler<Observe> for EnvironmentActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, Observe(viewer): Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.env.observe(viewer.as_deref()))
    }
}

impl Handler<BeginRound> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: BeginRound, _: &mut Context<Self>) {
        self.env.begin_round(&msg.agents);
    }
}

impl Handler<ApplyReturn> for EnvironmentActor {
    type Result = MessageResult<ApplyReturn>;
    fn handle(&mut self, ApplyReturn(ret): ApplyReturn, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.env.apply_return(ret))
    }
}

impl Handler<SetShared> for EnvironmentActor {
    type Result = ();
    fn handle(&mut self, msg: SetShared, _: &mut Context<Self>) {
        self.env.set_shared(&msg.agent, msg.values);
    }
}

impl Handler<ViewTools> for EnvironmentActor {
    type Result = MessageResult<ViewTools>;
    fn handle(&mut self, msg: ViewTools, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.env
                .view_tools(&msg.agent, msg.budget, self.counter.as_ref()),
        )
    }
}

impl Handler<Snapshot> for EnvironmentActor {
    type Result = MessageResult<Snapshot>;
    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.env.snapshot())
    }
}

impl Handler<Commit> for EnvironmentActor {
    type Result = AtomicResponse<Self, Result<Vec<CommittedTurn>, SimError>>;

    fn handle(&mut self, Commit(drafts): Commit, _: &mut Context<Self>) -> Self::Result {
        let turn = drafts
            .iter()
            .flat_map(|d| d.messages.iter().map(|m| m.turn))
            .max()
            .unwrap_or(0);
        let settled = self.env.commit(drafts);
        // Only what something reads is embedded (`quality::Meaning`).
        let committed: Vec<&Message> = settled.iter().flat_map(|t| &t.messages).collect();
        let plan = self.meaning.plan(&committed);
        let texts = plan.texts(&committed);
        let embed = self.embed.clone();
        AtomicResponse::new(Box::pin(
            async move {
                futures::future::join_all(texts.into_iter().map(|t| embed.embed(t)))
                    .await
                    .into_iter()
                    .collect::<Result<Vec<_>, _>>()
            }
            .into_actor(self)
            .map(move |embedded, act, _| {
                let embeddings = plan.settle(embedded?);
                let (shapes, messages) = shapes(settled);
                let pairs: Vec<(Message, &[f32])> = messages
                    .into_iter()
                    .zip(embeddings.iter().map(Vec::as_slice))
                    .collect();
                let (kept, due) = act.env.record(pairs);
                let request = due.map(|req| act.summary_request(&req, turn)).transpose()?;
                let kept = kept.into_iter().zip(embeddings);
                Ok((shapes, kept.collect::<Vec<_>>(), request))
            })
            .then(move |res: Result<_, SimError>, act, _| {
                let llm = act.llm.clone();
                async move {
                    let (shapes, kept, request) = res?;
                    // A summary the stop abandoned is left unmade: the turns it
                    // follows are finished and are kept.
                    let summary = match request {
                        Some(r) => match llm.call(r, None).await {
                            Ok(c) => Some(c.text),
                            Err(e) if e.is_cancelled() => None,
                            Err(e) => return Err(e.into()),
                        },
                        None => None,
                    };
                    Ok::<_, SimError>((shapes, kept, summary))
                }
                .into_actor(act)
            })
            .map(|res, act, _| {
                let (shapes, kept, summary) = res?;
                if let Some(text) = summary {
                    tracing::debug!(
                        through_seq = kept.last().map_or(0, |(m, _)| m.seq),
                        chars = text.len(),
                        "summary made"
                    );
                    act.env.set_summary(text.trim().to_string());
                }
                let mut kept = kept.into_iter();
                Ok(shapes
                    .into_iter()
                    .map(|(name, events, n)| {
                        let (messages, vectors) = kept.by_ref().take(n).unzip();
                        CommittedTurn {
                            name,
                            events,
                            messages,
                            vectors,
                        }
                    })
                    .collect())
            }),
        ))
    }
}

/// Each settled turn's name, events and number of messages, and every message in order.
type Shapes = Vec<(String, Vec<sopsim_core::tool_results::Return>, usize)>;

fn shapes(settled: Vec<SettledTurn>) -> (Shapes, Vec<Message>) {
    let mut shapes = Vec::with_capacity(settled.len());
    let mut messages = Vec::new();
    for t in settled {
        shapes.push((t.name, t.events, t.messages.len()));
        messages.extend(t.messages);
    }
    (shapes, messages)
}

impl Handler<Consult> for EnvironmentActor {
    type Result = ResponseFuture<Result<String, SimError>>;
    fn handle(&mut self, msg: Consult, _: &mut Context<Self>) -> Self::Result {
        // The latest message was embedded when it was recorded; the lookup reuses it.
        let query = self.env.latest_vector().map(<[f32]>::to_vec);
        let embed = self.embed.clone();
        let bases = self.knowledge.clone();
        Box::pin(async move {
            let Some(query) = query else {
                return Ok(String::new());
            };
            let base =
                bases
                    .get(&msg.lookup, &embed)
                    .await
                    .map_err(|source| SimError::Knowledge {
                        path: msg.lookup.path.clone(),
                        source,
                    })?;
            Ok(base.lookup(&query, &msg.lookup))
        })
    }
}

impl Handler<RunInEnvironment> for EnvironmentActor {
    type Result = ResponseFuture<Result<ResultObject, ToolFailure>>;
    fn handle(&mut self, msg: RunInEnvironment, _: &mut Context<Self>) -> Self::Result {
        match msg.tool.runs_in() {
            RunsIn::Environment(InEnvironment::StoreQuery { max_objects }) => {
                let (objects, total) = store_query::run(
                    self.env.store_seen_by(&msg.agent),
                    &msg.arguments,
                    *max_objects,
                    |e| self.env.visible(e),
                );
                let result = msg.tool.result(objects, total);
                Box::pin(async move { Ok(result) })
            }
            RunsIn::Environment(InEnvironment::Knowledge(lookup)) => {
                let lookup = lookup.clone();
                let embed = self.embed.clone();
                let bases = self.knowledge.clone();
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
                        .map_err(|e| ToolFailure::unknown(format!("embedding the query: {e}")))?;
                    let base = bases
                        .get(&lookup, &embed)
                        .await
                        .map_err(|e| ToolFailure::unknown(format!("{}: {e}", lookup.path)))?;
                    let found = base.lookup(&vector, &lookup);
                    let mut obj = Map::new();
                    obj.insert("query".into(), json!(query));
                    obj.insert("found".into(), json!(found));
                    let mut result = msg.tool.result(vec![obj], 1);
                    result.llm_message = Some(format!("Knowledge for {query:?}: {found}"));
                    Ok(result)
                })
            }
            RunsIn::Place | RunsIn::Outside => Box::pin(async {
                Err(ToolFailure::unknown(
                    "this tool does not run in the Environment",
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::EnvironmentActor;
    use crate::actors::messages::{ApplyReturn, CallOutcome, Snapshot, ToolReturn};
    use crate::llm::LlmClient;
    use crate::scenario::Mode;
    use sopsim_core::tool_results::{ResultObject, Return};

    #[test]
    fn tool_results_go_to_the_store_and_errors_to_the_tool() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/debate.json");
        let s = Arc::new(
            crate::runner::load(std::path::Path::new(file), &[])
                .unwrap()
                .scenario,
        );
        let snapshot = actix::System::new().block_on(async {
            let services = crate::simulation::Services::scripted(&s);
            let env = actix::Actor::start(EnvironmentActor::new(
                s.clone(),
                Mode::Cooperative,
                services.embed.clone(),
                LlmClient::new(services.llm.clone(), 0),
                services.counter.clone(),
                None,
                super::QualityEmbeddings::default(),
            ));
            let mut result = ResultObject::new(
                "sources",
                vec![json!({"title": "Car-free Oslo"})
                    .as_object()
                    .unwrap()
                    .clone()],
            );
            result.metadata = json!({"query": "car-free city centres"})
                .as_object()
                .unwrap()
                .clone();
            env.send(ApplyReturn(ToolReturn {
                tool: "search".into(),
                agent: "Ada".into(),
                turn: 1,
                ret: Return::Result(result.clone()),
                outcome: CallOutcome::Ok,
                retry: false,
                store: true,
            }))
            .await
            .unwrap();
            env.send(ApplyReturn(ToolReturn {
                tool: "search".into(),
                agent: "Ada".into(),
                turn: 2,
                ret: Return::Result(result),
                outcome: CallOutcome::Ok,
                retry: false,
                store: true,
            }))
            .await
            .unwrap();
            let err = Return::Error {
                feedback: "rate limited, try later".into(),
                error_message: "429".into(),
            };
            env.send(ApplyReturn(ToolReturn {
                tool: "search".into(),
                agent: "Ada".into(),
                turn: 3,
                ret: err,
                outcome: CallOutcome::Failed,
                retry: false,
                store: true,
            }))
            .await
            .unwrap();
            env.send(Snapshot).await.unwrap()
        });
        let entries = &snapshot.record.store["search"]["sources"];
        assert_eq!(entries[0]["objects"][0]["_REF_ID"], "search_sources_0_0");
        assert_eq!(entries[0]["metadata"]["query"], "car-free city centres");
        assert_eq!(
            entries[1]["objects"][0]["object_info"], "[repeat]",
            "the same source twice is a duplicate"
        );
        assert_eq!(
            entries[0]["metadata"]["_agent"], "Ada",
            "entries remember who made them"
        );
        let errors = &snapshot.record.tool_errors;
        assert!(
            errors["Ada"]["search"][0].starts_with("Avoidable error: rate limited, try later"),
            "{errors:?}"
        );
    }
}
