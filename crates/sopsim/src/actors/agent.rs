//! The Agent actor: one per agent. On `TakeTurn` it reads its human's input, or
//! prepares a `ModelTurn` (settings, call contexts, tools) that observes the
//! Environment, prompts its model and makes its role's closed choice outside the
//! handler; the result is recorded — or handed back, for a simultaneous round, for
//! the Director to record with the others (its tool events held with it, and a
//! person's move read without showing it). It keeps only what is its own: its name and
//! how many calls of each kind it made.

use std::sync::Arc;

use actix::prelude::*;

use super::environment::EnvironmentActor;
use super::messages::*;
use super::model_turn::ModelTurn;
use super::tool_turn::Decider;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::human::HumanInput;
use crate::llm::{CallContext, CallKind, LlmClient, TokenSink};
use crate::memory::{Decision, MessageKind};
use crate::scenario::{ChoiceSpec, ChoiceTiming, LlmSettings, Scenario};
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
    /// What a reply must not copy or echo (shared by every agent of the run).
    pub(crate) instructions: crate::quality::Instructions,
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

/// The turn's tool messages, then its reply, recorded together; in a round, handed back
/// (with its held tool events) for the Director to record with the others.
pub(super) async fn hand_back(
    turns: Vec<Turn>,
    events: Vec<HeldEvent>,
    commit: bool,
    env: Addr<EnvironmentActor>,
) -> Result<TurnDone, SimError> {
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
}

impl AgentActor {
    /// A person's turn: their typed line, read hidden from the others in a round.
    fn human_turn(
        &self,
        human: Arc<dyn HumanInput>,
        msg: TakeTurn,
        draft: Turn,
        options: Vec<String>,
    ) -> impl std::future::Future<Output = Result<TurnDone, SimError>> {
        let (name, role, commit, env) = (
            self.name.clone(),
            msg.role.clone(),
            msg.commit,
            self.env.clone(),
        );
        async move {
            let read = if commit {
                human.read_turn(&name, &role)
            } else {
                human.read_move(&name, &role)
            };
            let Some(line) = read.await else {
                return Ok(TurnDone::InputClosed);
            };
            let decision = typed_decision(&line, &options);
            let t = Turn {
                response: line,
                kind: MessageKind::Human,
                decision,
                ..draft
            };
            hand_back(vec![t], Vec::new(), commit, env).await
        }
    }

    /// Everything the model's turn needs, with this turn's calls counted.
    fn model_turn(
        &mut self,
        msg: TakeTurn,
        draft: Turn,
        choice: Option<ChoiceSpec>,
        options: Vec<String>,
    ) -> ModelTurn {
        let (settings, speaker_stops) = self.settings(&msg.state, &msg.role, &draft.others);
        let instead = choice
            .as_ref()
            .is_some_and(|c| c.after == ChoiceTiming::Instead);
        let act = (!instead).then(|| {
            self.replies += 1;
            self.context(CallKind::Act, &msg, self.replies - 1)
        });
        let choice = choice.map(|spec| {
            self.choices += 1;
            let context = self.context(CallKind::Choice, &msg, self.choices - 1);
            (spec, context)
        });
        let extract = self.context(CallKind::Tool, &msg, self.replies.saturating_sub(1));
        let decider = act
            .is_some()
            .then(|| self.decider(&msg, &settings))
            .flatten();
        ModelTurn {
            env: self.env.clone(),
            scenario: self.scenario.clone(),
            counter: self.counter.clone(),
            llm: self.llm.clone(),
            stream: self.token_sink().filter(|_| msg.commit),
            sinks: self.sinks.clone(),
            instructions: self.instructions.clone(),
            msg,
            draft,
            settings,
            speaker_stops,
            act,
            extract,
            choice,
            options,
            decider,
        }
    }

    /// The role's tool steps in this state, if it has tools.
    fn decider(&self, msg: &TakeTurn, settings: &LlmSettings) -> Option<Decider> {
        let state = &self.scenario.sop.states[&msg.state];
        let tools: Vec<Arc<crate::tools::Tool>> = crate::scenario::tools_of(state, &msg.role)
            .into_iter()
            .filter_map(|t| self.tools.get(t).cloned())
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
            env: self.env.clone(),
            llm: self.llm.clone(),
            sinks: self.sinks.clone(),
            name: self.name.clone(),
            role: msg.role.clone(),
            state: msg.state.clone(),
            visit: msg.visit,
            turn: msg.turn,
            run_seed: self.seed,
            settings,
            max_steps: crate::scenario::max_tool_steps(state, &msg.role),
            environment_budget: self.scenario.environment.prompt_token_budget / 4,
            tools,
            decides: self.decides.clone(),
            last_message: None,
            held: (!msg.commit).then(Default::default),
        })
    }
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
        if let Some(query) = msg.opening.clone() {
            let t = Turn {
                response: query,
                kind: MessageKind::Opening,
                ..draft
            };
            let done = hand_back(vec![t], Vec::new(), msg.commit, self.env.clone());
            return Box::pin(done.into_actor(self));
        }
        let choice = self.scenario.sop.states[&msg.state]
            .components
            .get(&msg.role)
            .and_then(|c| c.choice.clone());
        let options = choice.as_ref().map(|c| c.options()).unwrap_or_default();
        if let Some(human) = self.human.clone() {
            return Box::pin(self.human_turn(human, msg, draft, options).into_actor(self));
        }
        let turn = self.model_turn(msg, draft, choice, options);
        Box::pin(turn.run().into_actor(self))
    }
}
