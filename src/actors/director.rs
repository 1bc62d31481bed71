//! The Director actor: the only place that decides who speaks and when the state
//! changes. It asks the SOP engine (pure) for decisions, runs the model calls the engine
//! asks for (controller, judge), sends `TakeTurn` to agents and appends every finished
//! turn to the transcript before the next one starts.
//!
//! One turn is a chain of self-messages: `Step` (choose the speaker) → `Speak` (the
//! agent's turn) → `Transit` (apply the transition) → `Step`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::oneshot;

use super::agent::AgentActor;
use super::environment::EnvironmentActor;
use super::messages::*;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::llm::cost::PriceTable;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest};
use crate::memory::Memory;
use crate::output::TranscriptWriter;
use crate::prompt;
use crate::scenario::{Scenario, SpeakerRule};
use crate::sim::EndReason;
use crate::sop::{parse_choice_in, Check, SopEngine, Speaker, Transition};
use crate::tokens::TokenCounter;

/// How a run ended, as the Director saw it.
#[derive(Debug)]
pub struct Finish {
    pub ended_by: EndReason,
    pub error: Option<SimError>,
    pub turns: u64,
    pub final_state: String,
    pub visits: u32,
    pub warnings: Vec<String>,
    pub stop_reason: Option<String>,
    pub failures: ParseFailures,
}

/// Model answers the routing rules could not use (`parse_failures` in `summary.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ParseFailures {
    /// Speaker-controller answers that named no offered role.
    pub controller_answers: u64,
    /// Turns where both controller answers failed and the order rule chose.
    pub controller_fallbacks: u64,
    /// Judge answers that named no offered choice (the state stayed).
    pub judge_answers: u64,
}

pub struct Director {
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) engine: SopEngine,
    pub(crate) agents: HashMap<String, Addr<AgentActor>>,
    pub(crate) env: Addr<EnvironmentActor>,
    pub(crate) llm: LlmClient,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) sinks: Sinks,
    pub(crate) transcript: Option<TranscriptWriter>,
    pub(crate) max_turns: u64,
    pub(crate) cancel: Arc<AtomicBool>,
    pub(crate) done: Option<oneshot::Sender<Finish>>,
    pub(crate) turn: u64,
    pub(crate) route_calls: u64,
    pub(crate) transit_calls: u64,
    pub(crate) warnings: Vec<String>,
    pub(crate) seed: u64,
    pub(crate) prices: Arc<PriceTable>,
    pub(crate) budget_usd: Option<f64>,
    pub(crate) max_total_tokens: Option<u64>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) budget_unknown_warned: bool,
    pub(crate) failures: ParseFailures,
}

impl Actor for Director {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let state = self.engine.current_state().to_string();
        self.enter(state, ctx);
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Step;

#[derive(Message)]
#[rtype(result = "()")]
struct Speak {
    role: String,
    opening: Option<String>,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Transit(Transition);

impl Director {
    /// Why the run must stop for its budget, if it must. Checked between turns.
    fn over_budget(&mut self) -> Option<String> {
        if self.budget_usd.is_none() && self.max_total_tokens.is_none() {
            return None;
        }
        let ledger = self.llm.ledger();
        let tokens = ledger.prompt_tokens() + ledger.completion_tokens();
        if let Some(max) = self.max_total_tokens.filter(|max| tokens >= *max) {
            return Some(format!(
                "max_total_tokens {max} reached: {tokens} tokens used"
            ));
        }
        let budget = self.budget_usd?;
        match self.prices.cost(&ledger).usd {
            Some(usd) if usd >= budget => {
                Some(format!("budget of ${budget} reached: ${usd:.6} spent"))
            }
            Some(_) => None,
            None => {
                if !self.budget_unknown_warned {
                    self.budget_unknown_warned = true;
                    let unknown: Vec<String> = ledger
                        .by_model
                        .keys()
                        .filter(|m| self.prices.price(m).is_none())
                        .cloned()
                        .collect();
                    self.warn(format!(
                        "--budget-usd cannot be enforced: no price for {} (add it with --prices)",
                        unknown.join(", ")
                    ));
                }
                None
            }
        }
    }

    fn warn(&mut self, text: String) {
        self.sinks.emit(SimEvent::Warning { text: text.clone() });
        self.warnings.push(text);
    }

    fn finish(&mut self, ended_by: EndReason, error: Option<SimError>, ctx: &mut Context<Self>) {
        tracing::debug!(scenario = %self.scenario.name, ended_by = ended_by.as_str(), turns = self.turn, "run finished");
        self.sinks.emit(SimEvent::Finished {
            ended_by: ended_by.as_str().to_string(),
            turns: self.turn,
        });
        if let Some(done) = self.done.take() {
            let _ = done.send(Finish {
                ended_by,
                error,
                turns: self.turn,
                final_state: self.engine.current_state().to_string(),
                visits: self.engine.visit(),
                warnings: std::mem::take(&mut self.warnings),
                stop_reason: self.stop_reason.take(),
                failures: self.failures,
            });
        }
        ctx.stop();
    }

    fn fail(&mut self, error: SimError, ctx: &mut Context<Self>) {
        self.finish(EndReason::Error, Some(error), ctx);
    }

    /// Starts the engine's current visit: tell the Environment, then take the first step.
    fn enter(&mut self, state: String, ctx: &mut Context<Self>) {
        let visit = self.engine.visit();
        self.sinks.emit(SimEvent::StateEntered {
            state: state.clone(),
            visit,
        });
        self.env
            .send(EnterVisit { state, visit })
            .into_actor(self)
            .map(|res, act, ctx| match res {
                Ok(()) => ctx.notify(Step),
                Err(e) => act.fail(e.into(), ctx),
            })
            .wait(ctx);
    }

    fn controller_context(&self, kind: CallKind, index: u64, choices: &[String]) -> CallContext {
        CallContext {
            kind,
            state: self.engine.current_state().to_string(),
            turn: self.turn + u64::from(kind == CallKind::Route),
            agent: None,
            role: None,
            index,
            choices: choices.to_vec(),
            run_seed: self.seed,
        }
    }

    fn controller_settings(&self) -> crate::scenario::LlmSettings {
        let state = &self.scenario.sop.states[self.engine.current_state()];
        state
            .llm
            .clone()
            .unwrap_or_default()
            .over(&self.scenario.llm)
    }

    /// The `llm` speaker rule: ask, retry once, then fall back to order with a warning.
    fn ask_controller(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let (env, llm, scenario, counter) = (
            self.env.clone(),
            self.llm.clone(),
            self.scenario.clone(),
            self.counter.clone(),
        );
        let state_name = self.engine.current_state().to_string();
        let contexts = [0, 1]
            .map(|i| self.controller_context(CallKind::Route, self.route_calls + i, &choices));
        let settings = self.controller_settings();
        let fallback = self.engine.in_order();
        let turn = self.turn + 1;
        let tag = match &self.scenario.sop.states[self.engine.current_state()].speaker {
            SpeakerRule::Llm {
                extract_words: Some(tag),
                ..
            } => tag.clone(),
            _ => "end".to_string(),
        };
        async move {
            let obs = env.send(Observe).await?;
            let state = &scenario.sop.states[&state_name];
            let assembled = prompt::route_prompt(&scenario, state, &choices, &obs, counter.as_ref());
            let mut answers = Vec::new();
            for context in contexts {
                let req = LlmRequest::chat(assembled.messages.clone(), settings.clone(), context);
                let answer = llm.complete(req, None).await.map_err(|source| SimError::Llm { turn, source })?.text;
                if let Some(i) = parse_choice_in(&answer, &choices, &tag, &[]) {
                    return Ok((choices[i].clone(), answers.len() as u64 + 1, answers.len() as u64, None));
                }
                answers.push(answer);
            }
            let warning = format!(
                "turn {turn}: the speaker controller named none of {} (answers: {:?}); falling back to order: {fallback}",
                choices.join(", "),
                answers
            );
            Ok::<_, SimError>((fallback, 2, 2, Some(warning)))
        }
        .into_actor(self)
        .map(|res, act, ctx| match res {
            Ok((role, calls, unparsed, warning)) => {
                act.route_calls += calls;
                act.failures.controller_answers += unparsed;
                if let Some(w) = warning {
                    act.failures.controller_fallbacks += 1;
                    act.warn(w);
                }
                ctx.notify(Speak { role, opening: None });
            }
            Err(e) => act.fail(e, ctx),
        })
        .wait(ctx);
    }

    fn spoken(&mut self, memory: Arc<Memory>, ctx: &mut Context<Self>) {
        if let Some(t) = &mut self.transcript {
            if let Err(e) = t.append(&memory) {
                return self.fail(e, ctx);
            }
        }
        self.sinks.emit(SimEvent::Message(memory.clone()));
        self.engine.record_turn(&memory.role);
        match self.engine.check_transition(&memory.content) {
            Check::Decided(t, cause) => {
                tracing::debug!(turn = self.turn, state = %memory.state, ?t, ?cause, "transition");
                ctx.notify(Transit(t))
            }
            Check::AskJudge { choices } => self.ask_judge(choices, ctx),
        }
    }

    fn ask_judge(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let (env, llm, scenario, counter) = (
            self.env.clone(),
            self.llm.clone(),
            self.scenario.clone(),
            self.counter.clone(),
        );
        let state_name = self.engine.current_state().to_string();
        let context = self.controller_context(CallKind::Transit, self.transit_calls, &choices);
        let settings = self.controller_settings();
        let turn = self.turn;
        self.transit_calls += 1;
        let asked = choices.clone();
        async move {
            let obs = env.send(Observe).await?;
            let state = &scenario.sop.states[&state_name];
            let judge = state.transition.judge.clone().unwrap_or_default();
            let assembled = prompt::judge_prompt(&scenario, &state_name, state, &judge, &asked, &obs, counter.as_ref());
            let req = LlmRequest::chat(assembled.messages, settings, context);
            Ok::<_, SimError>(llm.complete(req, None).await.map_err(|source| SimError::Llm { turn, source })?.text)
        }
        .into_actor(self)
        .map(move |res, act, ctx| match res {
            Ok(answer) => {
                let t = act.engine.judge_answer(&answer, &choices).unwrap_or_else(|| {
                    act.failures.judge_answers += 1;
                    act.warn(format!(
                        "turn {turn}: the transition judge named none of {} (answer: {answer:?}); staying in {}",
                        choices.join(", "),
                        act.engine.current_state()
                    ));
                    Transition::Stay
                });
                ctx.notify(Transit(t));
            }
            Err(e) => act.fail(e, ctx),
        })
        .wait(ctx);
    }
}

impl Handler<Step> for Director {
    type Result = ();
    fn handle(&mut self, _: Step, ctx: &mut Context<Self>) {
        if self.cancel.load(Ordering::Relaxed) {
            return self.finish(EndReason::Interrupted, None, ctx);
        }
        if self.turn >= self.max_turns {
            return self.finish(EndReason::MaxTurns, None, ctx);
        }
        if let Some(reason) = self.over_budget() {
            self.stop_reason = Some(reason);
            return self.finish(EndReason::Budget, None, ctx);
        }
        match self.engine.next_speaker() {
            Speaker::Opening { role, query } => ctx.notify(Speak {
                role,
                opening: Some(query),
            }),
            Speaker::Role(role) => ctx.notify(Speak {
                role,
                opening: None,
            }),
            Speaker::Ask { choices } => self.ask_controller(choices, ctx),
        }
    }
}

impl Handler<Speak> for Director {
    type Result = ();
    fn handle(&mut self, msg: Speak, ctx: &mut Context<Self>) {
        let state = self.engine.current_state().to_string();
        let Some(agent) = self
            .scenario
            .agent_for(&state, &msg.role)
            .and_then(|n| self.agents.get(n))
            .cloned()
        else {
            let e = SimError::BadInput(format!(
                "no agent plays role {:?} in state {state:?}",
                msg.role
            ));
            return self.fail(e, ctx);
        };
        self.turn += 1;
        tracing::debug!(turn = self.turn, %state, role = %msg.role, opening = msg.opening.is_some(), "take turn");
        let turn = TakeTurn {
            state,
            visit: self.engine.visit(),
            role: msg.role,
            turn: self.turn,
            opening: msg.opening,
        };
        agent
            .send(turn)
            .into_actor(self)
            .map(|res, act, ctx| {
                if !matches!(res, Ok(Ok(TurnDone::Spoke(_)))) {
                    act.turn -= 1; // the turn did not finish: `turns` counts finished ones
                }
                match res {
                    Ok(Ok(TurnDone::Spoke(memory))) => act.spoken(memory, ctx),
                    Ok(Ok(TurnDone::InputClosed)) => act.finish(EndReason::InputClosed, None, ctx),
                    Ok(Err(e)) => act.fail(e, ctx),
                    Err(e) => act.fail(e.into(), ctx),
                }
            })
            .wait(ctx);
    }
}

impl Handler<Transit> for Director {
    type Result = ();
    fn handle(&mut self, Transit(t): Transit, ctx: &mut Context<Self>) {
        self.engine.apply(&t);
        match t {
            Transition::Stay => ctx.notify(Step),
            Transition::End => self.finish(EndReason::End, None, ctx),
            Transition::Move(state) => self.enter(state, ctx),
        }
    }
}
