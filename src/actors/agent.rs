//! The Agent actor: one per agent. On `TakeTurn` it observes the Environment, builds its
//! prompt (pure, in `prompt`), calls its model or reads its human's input, and records
//! the result. It keeps only what is its own: its name and how many replies it made.

use std::sync::Arc;

use actix::prelude::*;

use super::environment::EnvironmentActor;
use super::messages::*;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::human::HumanInput;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest, TokenSink};
use crate::memory::MessageKind;
use crate::prompt::{self, Speaker};
use crate::scenario::{LlmSettings, Scenario};
use crate::tokens::TokenCounter;

pub struct AgentActor {
    pub(crate) name: String,
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) env: Addr<EnvironmentActor>,
    pub(crate) llm: LlmClient,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) sinks: Sinks,
    /// Set when a person plays this agent.
    pub(crate) human: Option<Arc<dyn HumanInput>>,
    pub(crate) replies: u64,
    pub(crate) seed: u64,
}

impl Actor for AgentActor {
    type Context = Context<Self>;
}

impl AgentActor {
    /// Model settings for this agent in `state` playing `role`, innermost first.
    fn settings(&self, state: &str, role: &str) -> LlmSettings {
        let st = &self.scenario.sop.states[state];
        let agent = &self.scenario.agents[&self.name];
        let mut s = LlmSettings::default();
        for layer in [
            agent.llm.as_ref(),
            st.components.get(role).and_then(|c| c.llm.as_ref()),
            st.llm.as_ref(),
            Some(&self.scenario.llm),
        ]
        .into_iter()
        .flatten()
        {
            s = s.over(layer);
        }
        // A small model tends to go on as the other speakers; stop where it would.
        let mut stop = s.stop.take().unwrap_or_default();
        for other in self
            .scenario
            .agents
            .keys()
            .filter(|n| **n != self.name && self.scenario.agents[*n].roles.contains_key(state))
        {
            stop.push(format!("\n{other}:"));
        }
        s.stop = Some(stop);
        s
    }

    fn token_sink(&self) -> Option<TokenSink> {
        if !self.sinks.wants_tokens() {
            return None;
        }
        let sinks = self.sinks.clone();
        let name = self.name.clone();
        Some(Arc::new(move |text: &str| {
            sinks.emit(SimEvent::Token {
                name: name.clone(),
                text: text.to_string(),
            })
        }))
    }
}

impl Handler<TakeTurn> for AgentActor {
    type Result = ResponseActFuture<Self, Result<TurnDone, SimError>>;

    fn handle(&mut self, msg: TakeTurn, _: &mut Context<Self>) -> Self::Result {
        self.sinks.emit(SimEvent::TurnStarted {
            name: self.name.clone(),
            role: msg.role.clone(),
            human: self.human.is_some(),
        });
        let env = self.env.clone();
        let record = |response: String, kind: MessageKind, name: String, msg: &TakeTurn| Record {
            name,
            role: msg.role.clone(),
            response,
            kind,
            turn: msg.turn,
        };
        if let Some(query) = msg.opening.clone() {
            let rec = record(query, MessageKind::Opening, self.name.clone(), &msg);
            return Box::pin(
                async move { Ok(TurnDone::Spoke(env.send(rec).await??)) }.into_actor(self),
            );
        }
        if let Some(human) = self.human.clone() {
            let name = self.name.clone();
            return Box::pin(
                async move {
                    let Some(line) = human.read_turn(&name, &msg.role).await else {
                        return Ok(TurnDone::InputClosed);
                    };
                    let rec = record(line, MessageKind::Human, name, &msg);
                    Ok(TurnDone::Spoke(env.send(rec).await??))
                }
                .into_actor(self),
            );
        }
        let settings = self.settings(&msg.state, &msg.role);
        let context = CallContext {
            kind: CallKind::Act,
            state: msg.state.clone(),
            turn: msg.turn,
            agent: Some(self.name.clone()),
            role: Some(msg.role.clone()),
            index: self.replies,
            choices: Vec::new(),
            run_seed: self.seed,
        };
        self.replies += 1;
        let (scenario, counter, llm, stream, name) = (
            self.scenario.clone(),
            self.counter.clone(),
            self.llm.clone(),
            self.token_sink(),
            self.name.clone(),
        );
        let tool_context = CallContext {
            kind: CallKind::Tool,
            ..context.clone()
        };
        let tool_settings = settings.clone();
        Box::pin(
            async move {
                let mut obs = env.send(Observe).await?;
                let state = &scenario.sop.states[&msg.state];
                let comps = state.components.get(&msg.role);
                // Tool steps run before the reply, as aiwaves' components do in `compile`.
                if let Some(step) = comps.and_then(|c| c.extract.as_ref()) {
                    let assembled =
                        prompt::extract_prompt(&scenario, state, step, &obs, counter.as_ref());
                    let request = LlmRequest::chat(assembled.messages, tool_settings, tool_context);
                    let reply =
                        llm.complete(request, None)
                            .await
                            .map_err(|source| SimError::Llm {
                                turn: msg.turn,
                                source,
                            })?;
                    let values = prompt::read_extracted(&reply.text, &step.words);
                    obs.shared.extend(values.iter().cloned());
                    env.send(SetShared { values }).await?;
                }
                let found = match comps.and_then(|c| c.knowledge.clone()) {
                    Some(lookup) => Some(env.send(Consult { lookup }).await??),
                    None => None,
                };
                let who = Speaker {
                    name: &name,
                    role: &msg.role,
                    agent: &scenario.agents[&name],
                };
                let assembled = prompt::agent_prompt(
                    &scenario,
                    state,
                    who,
                    &obs,
                    found.as_deref(),
                    counter.as_ref(),
                );
                let request = LlmRequest::chat(assembled.messages, settings, context);
                let reply =
                    llm.complete(request, stream)
                        .await
                        .map_err(|source| SimError::Llm {
                            turn: msg.turn,
                            source,
                        })?;
                let rec = record(reply.text, MessageKind::Reply, name, &msg);
                Ok(TurnDone::Spoke(env.send(rec).await??))
            }
            .into_actor(self),
        )
    }
}
