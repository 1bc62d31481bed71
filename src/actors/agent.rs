//! The Agent actor: one per agent. On `TakeTurn` it observes the Environment, builds its
//! prompt (pure, in `prompt`), calls its model or reads its human's input, makes its
//! role's closed choice if it has one, and records the result — or hands it back, for a
//! simultaneous round, for the Director to record with the others (its tool events
//! held with it, and a person's move read without showing it). It keeps only what
//! is its own: its name and how many calls of each kind it made.

use std::sync::Arc;

use actix::prelude::*;

use super::environment::EnvironmentActor;
use super::messages::*;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::human::HumanInput;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest, TokenSink};
use crate::memory::{Decision, MessageKind, Observation};
use crate::prompt;
use crate::scenario::{ChoiceTiming, LlmSettings, Persona, Scenario};
use crate::sop::parse_choice;
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
    pub(crate) choices: u64,
    /// Decide calls made so far (numbers them; turns of one agent never overlap).
    pub(crate) decides: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) tools: Arc<crate::tools::ToolBox>,
    pub(crate) seed: u64,
}

impl Actor for AgentActor {
    type Context = Context<Self>;
}

/// What the other participants are called here: every other agent's name, and every
/// other role of the state. A reply stops where it goes on as one of them.
fn other_labels(scenario: &Scenario, state: &str, name: &str, role: &str) -> Vec<String> {
    let mut labels: Vec<String> = scenario
        .agents
        .keys()
        .filter(|n| *n != name)
        .cloned()
        .collect();
    if let Some(st) = scenario.sop.states.get(state) {
        for r in st.roles.iter().filter(|r| *r != role) {
            if !labels.contains(r) {
                labels.push(r.clone());
            }
        }
    }
    labels
}

impl AgentActor {
    /// Model settings for this agent in `state` playing `role`, with stop sequences
    /// where a reply would go on as another participant.
    fn settings(&self, state: &str, role: &str, others: &[String]) -> (LlmSettings, Vec<String>) {
        let mut s = self
            .scenario
            .settings_for(state, Some(role), Some(&self.name));
        let speaker_stops: Vec<String> = others.iter().map(|o| format!("\n{o}:")).collect();
        let mut stop = s.stop.take().unwrap_or_default();
        stop.extend(speaker_stops.iter().cloned());
        s.stop = Some(stop);
        (s, speaker_stops)
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

    fn context(&self, kind: CallKind, msg: &TakeTurn, index: u64) -> CallContext {
        CallContext::new(kind, &msg.state, msg.turn, self.seed).by(&self.name, &msg.role, index)
    }
}

/// A human's typed line as a choice: the option it names, if any.
fn typed_decision(line: &str, options: &[String]) -> Option<Decision> {
    parse_choice(line, options).map(|i| Decision {
        value: options[i].clone(),
        probabilities: None,
    })
}

impl Handler<TakeTurn> for AgentActor {
    type Result = ResponseActFuture<Self, Result<TurnDone, SimError>>;

    fn handle(&mut self, msg: TakeTurn, _: &mut Context<Self>) -> Self::Result {
        // A round's turns are shown when the round is complete, not as they happen.
        if msg.commit {
            self.sinks.emit(SimEvent::TurnStarted {
                name: self.name.clone(),
                role: msg.role.clone(),
                human: self.human.is_some(),
            });
        }
        let env = self.env.clone();
        let others = other_labels(&self.scenario, &msg.state, &self.name, &msg.role);
        // The turn as recorded; each path below fills in what it said.
        let draft = Turn {
            name: self.name.clone(),
            role: msg.role.clone(),
            response: String::new(),
            kind: MessageKind::Reply,
            turn: msg.turn,
            decision: None,
            others,
            stopped_at_speaker: false,
        };
        // The turn's tool messages, then its reply, recorded together; in a round, handed
        // back with its held tool events.
        let finish_with = move |turns: Vec<Turn>,
                                events: Vec<HeldEvent>,
                                commit: bool,
                                env: Addr<EnvironmentActor>| async move {
            if !commit {
                let name = turns.last().map(|t| t.name.clone()).unwrap_or_default();
                return Ok(TurnDone::Drafted(Drafted {
                    name,
                    turns,
                    events,
                }));
            }
            let n = turns.len();
            let stored = env.send(Record(turns)).await??;
            if stored.len() != n {
                return Err(SimError::Internal("a turn was not recorded"));
            }
            Ok(TurnDone::Spoke(stored))
        };
        let finish = move |t: Turn, commit: bool, env: Addr<EnvironmentActor>| {
            finish_with(vec![t], Vec::new(), commit, env)
        };
        let choice = self.scenario.sop.states[&msg.state]
            .components
            .get(&msg.role)
            .and_then(|c| c.choice.clone());
        let options = choice.as_ref().map(|c| c.options()).unwrap_or_default();
        if let Some(query) = msg.opening.clone() {
            let t = Turn {
                response: query,
                kind: MessageKind::Opening,
                ..draft
            };
            return Box::pin(finish(t, msg.commit, env).into_actor(self));
        }
        if let Some(human) = self.human.clone() {
            let (name, role, commit) = (self.name.clone(), msg.role.clone(), msg.commit);
            return Box::pin(
                async move {
                    // A move of a round is typed without the others seeing it.
                    let read = if commit {
                        human.read_turn(&name, &role)
                    } else {
                        human.read_move(&name, &role)
                    };
                    let Some(line) = read.await else {
                        return Ok(TurnDone::InputClosed);
                    };
                    let decision = typed_decision(&line, &options);
                    finish(
                        Turn {
                            response: line,
                            kind: MessageKind::Human,
                            decision,
                            ..draft
                        },
                        commit,
                        env,
                    )
                    .await
                }
                .into_actor(self),
            );
        }
        let (settings, speaker_stops) = self.settings(&msg.state, &msg.role, &draft.others);
        let instead = choice
            .as_ref()
            .is_some_and(|c| c.after == ChoiceTiming::Instead);
        let act_context = (!instead).then(|| {
            self.replies += 1;
            self.context(CallKind::Act, &msg, self.replies - 1)
        });
        let choice_context = choice.is_some().then(|| {
            self.choices += 1;
            self.context(CallKind::Choice, &msg, self.choices - 1)
        });
        let tool_context = self.context(CallKind::Tool, &msg, self.replies.saturating_sub(1));
        let (scenario, counter, llm, stream, name) = (
            self.scenario.clone(),
            self.counter.clone(),
            self.llm.clone(),
            self.token_sink().filter(|_| msg.commit),
            self.name.clone(),
        );
        let state_spec = &self.scenario.sop.states[&msg.state];
        let role_tools: Vec<Arc<crate::tools::Tool>> =
            crate::scenario::tools_of(state_spec, &msg.role)
                .into_iter()
                .filter_map(|t| self.tools.get(t).cloned())
                .collect();
        let decider = (!role_tools.is_empty() && act_context.is_some()).then(|| {
            let mut decide_settings = settings.clone();
            // A decision is JSON or a tool call: speaker stops would cut it, and a
            // short reply limit would leave it unfinished.
            decide_settings.stop = None;
            decide_settings.max_tokens = Some(decide_settings.max_tokens.unwrap_or(0).max(300));
            crate::actors::tool_turn::Decider {
                env: self.env.clone(),
                llm: self.llm.clone(),
                sinks: self.sinks.clone(),
                name: self.name.clone(),
                role: msg.role.clone(),
                state: msg.state.clone(),
                visit: msg.visit,
                turn: msg.turn,
                run_seed: self.seed,
                settings: decide_settings,
                max_steps: crate::scenario::max_tool_steps(state_spec, &msg.role),
                environment_budget: self.scenario.environment.prompt_token_budget / 4,
                tools: role_tools,
                decides: self.decides.clone(),
                last_message: None,
                held: (!msg.commit).then(Default::default),
            }
        });
        Box::pin(
            async move {
                let failed = |source| SimError::Llm {
                    turn: msg.turn,
                    source,
                };
                let mut obs: Observation = env.send(Observe).await?;
                let state = &scenario.sop.states[&msg.state];
                let comps = state.components.get(&msg.role);
                // Tool steps run before the reply, as aiwaves' components do in `compile`.
                if let Some(step) = comps.and_then(|c| c.extract.as_ref()) {
                    let assembled =
                        prompt::extract_prompt(&scenario, state, step, &obs, counter.as_ref());
                    let request =
                        LlmRequest::chat(assembled.messages, settings.clone(), tool_context);
                    let reply = llm.complete(request, None).await.map_err(failed)?;
                    let values = prompt::read_extracted(&reply.text, &step.words);
                    obs.shared.extend(values.iter().cloned());
                    env.send(SetShared {
                        agent: name.clone(),
                        values,
                    })
                    .await?;
                }
                let found = match comps.and_then(|c| c.knowledge.clone()) {
                    Some(lookup) => Some(env.send(Consult { lookup }).await??),
                    None => None,
                };
                let who = Persona {
                    name: &name,
                    role: &msg.role,
                    agent: &scenario.agents[&name],
                };
                let mut tool_turn = crate::actors::tool_turn::ToolTurn::default();
                let mut found = found;
                if let Some(mut decider) = decider {
                    decider.last_message = obs.recent.last().map(|m| m.content.clone());
                    let base = prompt::agent_prompt(
                        &scenario,
                        state,
                        who,
                        &obs,
                        found.as_deref(),
                        counter.as_ref(),
                    );
                    let format = decider
                        .settings
                        .decision
                        .unwrap_or_else(|| llm.default_decision());
                    tool_turn = decider.run(&base.messages, format).await?;
                    if let Some(results) = tool_turn.for_reply.take() {
                        found = Some(match found {
                            Some(f) if !f.is_empty() => format!("{f}\n\n{results}"),
                            _ => results,
                        });
                    }
                }
                let mut reply = None;
                let mut stopped = false;
                if let Some(context) = act_context {
                    let assembled = prompt::agent_prompt(
                        &scenario,
                        state,
                        who,
                        &obs,
                        found.as_deref(),
                        counter.as_ref(),
                    );
                    let request = LlmRequest::chat(assembled.messages, settings.clone(), context);
                    let completion = llm.complete(request, stream).await.map_err(failed)?;
                    stopped = completion
                        .stopped_at
                        .as_ref()
                        .is_some_and(|s| speaker_stops.contains(s));
                    reply = Some(completion.text);
                }
                let mut decision = None;
                if let (Some(spec), Some(context)) = (&choice, choice_context) {
                    let assembled = prompt::choice_prompt(
                        &scenario,
                        state,
                        who,
                        &obs,
                        prompt::Question {
                            spec,
                            options: &options,
                            own_reply: reply.as_deref(),
                        },
                        counter.as_ref(),
                    );
                    let request = LlmRequest::choice(
                        assembled.messages,
                        options.clone(),
                        settings.clone(),
                        context,
                    );
                    let completion = llm.complete(request, None).await.map_err(failed)?;
                    decision = completion.chosen.and_then(|c| {
                        let value = options.get(c.index)?.clone();
                        let probabilities = c
                            .probabilities
                            .map(|p| options.iter().cloned().zip(p).collect());
                        Some(Decision {
                            value,
                            probabilities,
                        })
                    });
                }
                let (response, kind) = match reply {
                    Some(text) => (text, MessageKind::Reply),
                    None => (
                        decision
                            .as_ref()
                            .map(|d| d.value.clone())
                            .unwrap_or_default(),
                        MessageKind::Choice,
                    ),
                };
                let t = Turn {
                    response,
                    kind,
                    decision,
                    stopped_at_speaker: stopped,
                    ..draft
                };
                let mut turns = tool_turn.messages;
                turns.push(t);
                finish_with(turns, tool_turn.events, msg.commit, env).await
            }
            .into_actor(self),
        )
    }
}
