//! The Agent actor: one per agent. On `TakeTurn` it drafts the turn — its opening
//! line, its person's typed line, or a `ModelTurn` (settings and tools) that observes
//! the Environment, prompts its model and makes its role's closed choice outside the
//! handler — and hands the draft back for the Director to commit. It keeps only what
//! is its own: its name, who plays it, and its place in the run.

use std::sync::Arc;

use actix::prelude::*;

use super::environment::EnvironmentActor;
use super::messages::*;
use super::model_turn::ModelTurn;
use super::participants::{other_labels, speaker_stops};
use super::tool_turn::Decider;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::human::HumanInput;
use crate::llm::{LlmClient, TokenSink};
use crate::scenario::{ChoiceSpec, ChoiceTiming, LlmSettings, Scenario};
use sopsim_core::memory::{Decision, MessageKind};
use sopsim_core::sop::parse_choice;
use sopsim_core::tokens::TokenCounter;

pub(crate) struct AgentActor {
    pub(crate) name: String,
    /// Set when a person plays this agent.
    pub(crate) human: Option<Arc<dyn HumanInput>>,
    /// What every agent of the run shares: one copy for a population's million.
    pub(crate) shared: Arc<AgentShared>,
}

/// The run's actors and services every agent uses.
pub(crate) struct AgentShared {
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) env: Addr<EnvironmentActor>,
    pub(crate) llm: LlmClient,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) sinks: Sinks,
    pub(crate) tools: Arc<crate::tools::ToolBox>,
    pub(crate) seed: u64,
    /// What a reply must not copy or echo.
    pub(crate) instructions: sopsim_core::quality::Instructions,
}

impl Actor for AgentActor {
    type Context = Context<Self>;
}

impl AgentActor {
    /// Model settings for this agent in `state` playing `role`, with stop sequences
    /// where a reply would go on as another participant.
    fn settings(&self, state: &str, role: &str, others: &[String]) -> (LlmSettings, Vec<String>) {
        let mut s = self
            .shared
            .scenario
            .settings_for(state, Some(role), Some(&self.name));
        let speaker_stops = speaker_stops(others);
        let mut stop = s.stop.take().unwrap_or_default();
        stop.extend(speaker_stops.iter().cloned());
        s.stop = Some(stop);
        (s, speaker_stops)
    }

    fn token_sink(&self) -> Option<TokenSink> {
        if !self.shared.sinks.wants_tokens() {
            return None;
        }
        let sinks = self.shared.sinks.clone();
        let name = self.name.clone();
        Some(Arc::new(move |text: &str| {
            sinks.emit(SimEvent::Token {
                name: name.clone(),
                text: text.to_string(),
            })
        }))
    }

    /// The turn as drafted: `message`, alone.
    fn alone(&self, message: DraftMessage) -> TurnDone {
        TurnDone::Drafted(DraftTurn {
            name: self.name.clone(),
            messages: vec![message],
            events: Vec::new(),
        })
    }
}

/// A human's typed line as a choice: the option it names, if any.
fn typed_decision(line: &str, options: &[String]) -> Option<Decision> {
    parse_choice(line, options).map(|i| Decision {
        value: options[i].clone(),
        probabilities: None,
    })
}

impl AgentActor {
    /// The agent's number in the run: its place among the scenario's agents.
    fn index(&self) -> Option<u32> {
        self.shared
            .scenario
            .agents
            .get_index_of(&self.name)
            .map(|i| i as u32)
    }

    /// A turn played by a rule: its move decided exactly from the world's history,
    /// its line from the strategy's template. No model is asked.
    fn strategy_turn(
        &self,
        strategy: &crate::scenario::StrategySpec,
        msg: &TakeTurn,
        base: DraftMessage,
        options: &[String],
    ) -> Result<TurnDone, SimError> {
        let scenario = &self.shared.scenario;
        let view = msg.world.clone().unwrap_or_default();
        let agent = self.index().unwrap_or_default();
        let (cooperate, defect) = crate::scenario::strategy_moves(scenario, &self.name, strategy);
        let situation = sopsim_core::world::strategy::Situation {
            view: &view,
            state: &msg.state,
            agent,
            name: &self.name,
            options,
            cooperate: cooperate.as_deref(),
            defect: defect.as_deref(),
            seed: self.shared.seed,
        };
        let mut chosen = sopsim_core::world::strategy::decide(strategy, &situation)
            .map_err(|why| self.world_error(msg, "strategy", why))?;
        if let Some(p) = scenario.agents[&self.name].noise.filter(|p| *p > 0.0) {
            // The move trembles; its probabilities are then the tremble's.
            let intended = chosen.value.clone();
            chosen.value = sopsim_core::noise::tremble(
                self.shared.seed,
                &self.name,
                msg.turn,
                p,
                options,
                &intended,
            );
            let others = options.len().saturating_sub(1).max(1) as f64;
            chosen.probabilities = options
                .iter()
                .map(|o| (o.clone(), if *o == intended { 1.0 - p } else { p / others }))
                .collect();
        }
        let line = match &strategy.say {
            Some(say) => sopsim_core::world::view::render_say(say, &view, agent, &chosen.value)
                .map_err(|why| self.world_error(msg, "strategy.say", why))?,
            None => chosen.value.clone(),
        };
        let message = DraftMessage {
            response: line,
            kind: MessageKind::Choice,
            decision: Some(Decision {
                value: chosen.value,
                probabilities: Some(chosen.probabilities),
            }),
            ..base
        };
        Ok(TurnDone::Drafted(DraftTurn {
            name: self.name.clone(),
            messages: vec![message],
            events: Vec::new(),
        }))
    }

    /// A world formula of this agent's turn that cannot give a value.
    fn world_error(&self, msg: &TakeTurn, field: &str, why: String) -> SimError {
        let at = match &self.shared.scenario.agents[&self.name].member {
            Some(m) => format!("populations.{}.{field}", m.population),
            None if field.starts_with("strategy") => format!("agents.{}.{field}", self.name),
            None => format!("sop.states.{}.components.{}.{field}", msg.state, msg.role),
        };
        SimError::World(sopsim_core::world::WorldError {
            field: at,
            round: msg.world.as_ref().map_or(0, |v| v.rounds + 1),
            agent: Some(self.name.clone()),
            why,
        })
    }

    /// A person's turn: their typed line, read unseen by the others in a round.
    fn human_turn(
        &self,
        human: Arc<dyn HumanInput>,
        msg: TakeTurn,
        base: DraftMessage,
        options: Vec<String>,
    ) -> impl std::future::Future<Output = Result<TurnDone, SimError>> {
        let (name, role) = (self.name.clone(), msg.role.clone());
        async move {
            let read = if msg.live {
                human.read_turn(&name, &role)
            } else {
                human.read_move(&name, &role)
            };
            let Some(line) = read.await else {
                return Ok(TurnDone::InputClosed);
            };
            let decision = typed_decision(&line, &options);
            let message = DraftMessage {
                response: line,
                kind: MessageKind::Human,
                decision,
                ..base
            };
            Ok(TurnDone::Drafted(DraftTurn {
                name,
                messages: vec![message],
                events: Vec::new(),
            }))
        }
    }

    /// Everything the model's turn needs.
    fn model_turn(
        &self,
        msg: TakeTurn,
        base: DraftMessage,
        choice: Option<ChoiceSpec>,
        options: Vec<String>,
    ) -> Result<ModelTurn, SimError> {
        let (settings, speaker_stops) = self.settings(&msg.state, &msg.role, &base.others);
        let replies = !choice
            .as_ref()
            .is_some_and(|c| c.after == ChoiceTiming::Instead);
        let decider = replies.then(|| self.decider(&msg, &settings)).flatten();
        let shown = match msg.world.as_ref() {
            Some(view) => {
                let state = &self.shared.scenario.sop.states[&msg.state];
                sopsim_core::world::view::render_state(&msg.state, state, view, self.index())
                    .map_err(|e| SimError::World(self.agent_named(e)))?
            }
            None => None,
        };
        Ok(ModelTurn {
            shown,
            env: self.shared.env.clone(),
            scenario: self.shared.scenario.clone(),
            counter: self.shared.counter.clone(),
            llm: self.shared.llm.clone(),
            stream: self.token_sink().filter(|_| msg.live),
            sinks: self.shared.sinks.clone(),
            instructions: self.shared.instructions.clone(),
            msg,
            base,
            settings,
            speaker_stops,
            replies,
            choice,
            options,
            decider,
            seed: self.shared.seed,
        })
    }

    /// A world error of this agent's turn, naming the agent.
    fn agent_named(&self, e: sopsim_core::world::WorldError) -> sopsim_core::world::WorldError {
        sopsim_core::world::WorldError {
            agent: Some(self.name.clone()),
            ..e
        }
    }

    /// The role's tool steps in this state, if it has tools.
    fn decider(&self, msg: &TakeTurn, settings: &LlmSettings) -> Option<Decider> {
        let state = &self.shared.scenario.sop.states[&msg.state];
        let tools: Vec<Arc<crate::tools::Tool>> = crate::scenario::tools_of(state, &msg.role)
            .into_iter()
            .filter_map(|t| self.shared.tools.get(t).cloned())
            .collect();
        if tools.is_empty() {
            return None;
        }
        let mut settings = settings.clone();
        // A decision is JSON or a tool call: speaker stops would cut it, and a short
        // reply limit would leave it unfinished.
        settings.stop = None;
        settings.max_tokens = Some(settings.max_tokens.unwrap_or(0).max(300));
        Some(Decider {
            env: self.shared.env.clone(),
            llm: self.shared.llm.clone(),
            sinks: self.shared.sinks.clone(),
            name: self.name.clone(),
            role: msg.role.clone(),
            state: msg.state.clone(),
            visit: msg.visit,
            turn: msg.turn,
            run_seed: self.shared.seed,
            settings,
            max_steps: crate::scenario::max_tool_steps(state, &msg.role),
            environment_budget: self.shared.scenario.environment.prompt_token_budget / 4,
            tools,
            last_message: None,
            live: msg.live,
        })
    }
}

impl Handler<TakeTurn> for AgentActor {
    type Result = ResponseActFuture<Self, Result<TurnDone, SimError>>;

    fn handle(&mut self, msg: TakeTurn, _: &mut Context<Self>) -> Self::Result {
        // A round's turns are shown when the round is committed, not as they happen.
        if msg.live {
            self.shared.sinks.emit(SimEvent::TurnStarted {
                name: self.name.clone(),
                role: msg.role.clone(),
                human: self.human.is_some(),
            });
        }
        let others = other_labels(&self.shared.scenario, &msg.state, &self.name, &msg.role);
        // What every message of the turn shares; each path fills in what it said.
        let base = DraftMessage {
            name: self.name.clone(),
            role: msg.role.clone(),
            response: String::new(),
            kind: MessageKind::Reply,
            turn: msg.turn,
            decision: None,
            others,
            stopped_at_speaker: false,
            stored: None,
        };
        if let Some(query) = msg.opening.clone() {
            let opening = self.alone(DraftMessage {
                response: query,
                kind: MessageKind::Opening,
                ..base
            });
            return Box::pin(fut::ready(Ok(opening)));
        }
        let choice = self.shared.scenario.sop.states[&msg.state]
            .components
            .get(&msg.role)
            .and_then(|c| c.choice.clone());
        let mut options = choice.as_ref().map(|c| c.options()).unwrap_or_default();
        // A choice the world bounds offers what the world allows this turn.
        let bound = choice.as_ref().and_then(|c| c.at_most.as_deref());
        if let (Some(at_most), Some(view)) = (bound, &msg.world) {
            match sopsim_core::world::view::bounded_options(&options, at_most, view, self.index()) {
                Ok(kept) => options = kept,
                Err(why) => {
                    return Box::pin(fut::ready(Err(self.world_error(
                        &msg,
                        "choice.at_most",
                        why,
                    ))))
                }
            }
        }
        let strategy = self.shared.scenario.agents[&self.name].strategy.clone();
        if let Some(strategy) = strategy.filter(|_| !options.is_empty()) {
            let turn = self.strategy_turn(&strategy, &msg, base, &options);
            return Box::pin(fut::ready(turn));
        }
        if let Some(human) = self.human.clone() {
            return Box::pin(self.human_turn(human, msg, base, options).into_actor(self));
        }
        let turn = match self.model_turn(msg, base, choice, options) {
            Ok(turn) => turn,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        Box::pin(turn.run().into_actor(self))
    }
}
