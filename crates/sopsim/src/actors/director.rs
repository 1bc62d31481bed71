//! The Director actor: the only place that decides who speaks and when the state
//! changes. It asks the SOP engine (pure) for decisions, runs the model calls the engine
//! asks for (controller, judge), sends `TakeTurn` to agents and appends every finished
//! turn to the transcript before the next one starts.
//!
//! A run is a chain of self-messages: `Step` (choose who speaks) → `Play` (their
//! turns) → `Transit` (apply the transition) → `Step`. Every turn takes one path: the
//! Environment begins a round for it, its agent drafts it, and the Director commits
//! it. A sequential turn is a round of one, shown as it happens; in a simultaneous
//! state every role's turn is in flight at once, each on the memory as it stood when
//! the round began, shown and committed together in the order of the state's roles,
//! and the transition is checked after the round.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::agent::AgentActor;
use super::environment::EnvironmentActor;
use super::messages::*;
use crate::control::{Control, Pacer, RunControl, Wake};
use crate::error::{CancelToken, SimError};
use crate::events::{Progress, SimEvent, Sinks};
use crate::llm::cost::PriceTable;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest};
use crate::memory::{Message, Observation};
use crate::output::TranscriptWriter;
use crate::prompt::{self, Assembled};
use crate::quality::{Checker, Instructions, Paraphrases, ReplyQuality, PARAPHRASE_COSINE};
use crate::scenario::Scenario;
use crate::sop::{Check, SopEngine, Speaker, Transition};
use crate::tokens::TokenCounter;

/// Why a run ended (`ended_by` in `summary.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// A transition reached the SOP's end.
    End,
    /// The turn limit (`--max-turns` or `sop.max_turns`) was reached.
    MaxTurns,
    /// A human agent's input ended.
    InputClosed,
    /// Interrupted (Ctrl-C) between turns.
    Interrupted,
    /// `--budget-usd` or `--max-total-tokens` was reached; `stop_reason` says which.
    Budget,
    /// A runtime failure; `error` says what.
    Error,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::End => "end",
            EndReason::MaxTurns => "max_turns",
            EndReason::InputClosed => "input_closed",
            EndReason::Interrupted => "interrupted",
            EndReason::Budget => "budget",
            EndReason::Error => "error",
        }
    }
}

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
    pub reply_quality: ReplyQuality,
}

/// Model answers the routing rules could not use (`parse_failures` in `summary.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ParseFailures {
    /// Speaker-controller answers that named no offered role.
    pub controller_answers: u64,
    /// Turns where the controller's answer failed and the order rule chose.
    pub controller_fallbacks: u64,
    /// Judge answers that named no offered choice (the state stayed).
    pub judge_answers: u64,
}

/// The actors and services of the Director's simulation.
pub struct Cast {
    pub scenario: Arc<Scenario>,
    pub agents: HashMap<String, Addr<AgentActor>>,
    pub env: Addr<EnvironmentActor>,
    pub llm: LlmClient,
    pub counter: Arc<dyn TokenCounter>,
    pub sinks: Sinks,
    /// Whether replies are checked for paraphrases, from the messages' embeddings.
    pub paraphrases: bool,
    /// The participants' stakes embedded, when replies are checked against them.
    pub stakes: Option<Arc<crate::quality::Stakes>>,
}

/// When the Director ends a run early, between turns.
pub struct Limits {
    pub max_turns: u64,
    pub budget_usd: Option<f64>,
    pub max_total_tokens: Option<u64>,
    pub prices: Arc<PriceTable>,
    /// Cancelled to stop at the next turn boundary.
    pub cancel: CancelToken,
    /// Pause, step and stop from outside the run.
    pub control: Option<RunControl>,
}

pub struct Director {
    cast: Cast,
    limits: Limits,
    engine: SopEngine,
    transcript: Option<TranscriptWriter>,
    done: Option<oneshot::Sender<Finish>>,
    turn: u64,
    rounds: u32,
    warnings: Vec<String>,
    stop_reason: Option<String>,
    budget_unknown_warned: bool,
    failures: ParseFailures,
    pacer: Pacer,
    /// Every committed message, judged as it comes.
    quality: Checker,
    /// Messages committed so far.
    messages: u64,
    /// A resumed run that has not yet said again every line of its killed run.
    catching_up: bool,
    /// Who plays each role in each state.
    players: crate::scenario::Players,
}

impl Director {
    /// A Director at the start of the scenario's first state; `notes` start its
    /// warnings; `done` receives how the run ended.
    pub fn new(
        cast: Cast,
        limits: Limits,
        transcript: Option<TranscriptWriter>,
        seed: u64,
        notes: Vec<String>,
        done: oneshot::Sender<Finish>,
    ) -> Self {
        Self {
            quality: {
                let mut checker = Checker::new(Instructions::of(&cast.scenario));
                if cast.paraphrases {
                    checker = checker.with_paraphrases(Paraphrases::new(PARAPHRASE_COSINE));
                }
                if let Some(stakes) = &cast.stakes {
                    checker = checker.with_stakes(stakes.clone());
                }
                checker
            },
            players: cast.scenario.players(),
            engine: SopEngine::new(cast.scenario.clone(), seed),
            cast,
            limits,
            done: Some(done),
            turn: 0,
            rounds: 0,
            warnings: notes,
            stop_reason: None,
            budget_unknown_warned: false,
            failures: ParseFailures::default(),
            pacer: Pacer::default(),
            messages: 0,
            catching_up: transcript
                .as_ref()
                .is_some_and(TranscriptWriter::is_resumed),
            transcript,
        }
    }
}

impl Actor for Director {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(control) = &self.limits.control {
            self.pacer = Pacer::starting(control.is_paused());
        }
        if let Some(rx) = self
            .limits
            .control
            .as_ref()
            .and_then(RunControl::take_receiver)
        {
            ctx.add_stream(futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|c| (c, rx))
            }));
            // A run waiting for a control still ends when cancelled (Ctrl-C).
            ctx.run_interval(CANCEL_POLL, |act, ctx| {
                if act.pacer.parked() && act.limits.cancel.is_cancelled() {
                    act.pacer.unpark();
                    ctx.notify(Step);
                }
            });
        }
        self.check_caught_up();
        let state = self.engine.current_state().to_string();
        self.enter(state, ctx);
    }
}

/// How often a paused run looks at its cancellation token.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl StreamHandler<Control> for Director {
    fn handle(&mut self, control: Control, ctx: &mut Context<Self>) {
        let was_paused = self.pacer.paused();
        let wake = self.pacer.receive(control);
        if let Some(c) = &self.limits.control {
            c.set_paused(self.pacer.paused());
        }
        if was_paused != self.pacer.paused() {
            self.report_progress();
        }
        if wake == Wake::Continue {
            ctx.notify(Step);
        }
    }

    // The controls' sender may go away; the run goes on without them.
    fn finished(&mut self, _: &mut Context<Self>) {}
}

#[derive(Message)]
#[rtype(result = "()")]
struct Step;

/// The next turns: one role's (with its visit's opening line, if it opens), or a
/// simultaneous round's.
#[derive(Message)]
#[rtype(result = "()")]
struct Play {
    roles: Vec<String>,
    opening: Option<String>,
    simultaneous: bool,
}

impl Play {
    fn one(role: String, opening: Option<String>) -> Self {
        Self {
            roles: vec![role],
            opening,
            simultaneous: false,
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Transit(Transition);

/// A routing call (the speaker controller or the transition judge): its prompt and
/// the options offered.
struct RoutingCall {
    kind: CallKind,
    /// Offered to the model.
    options: Vec<String>,
    prompt: Assembled,
}

impl Director {
    /// Why the run must stop for its budget, if it must. Checked between turns.
    fn over_budget(&mut self) -> Option<String> {
        let l = &self.limits;
        if l.budget_usd.is_none() && l.max_total_tokens.is_none() {
            return None;
        }
        let ledger = self.cast.llm.ledger_totals();
        let tokens = ledger
            .prompt_tokens()
            .saturating_add(ledger.completion_tokens());
        if let Some(max) = l.max_total_tokens.filter(|max| tokens >= *max) {
            return Some(format!(
                "max_total_tokens {max} reached: {tokens} tokens used"
            ));
        }
        let budget = l.budget_usd?;
        match l.prices.cost(&ledger).usd {
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
                        .filter(|m| l.prices.price(m).is_none())
                        .cloned()
                        .collect();
                    self.warn(format!(
                        "the budget of ${budget} cannot be enforced: no price for {}",
                        unknown.join(", ")
                    ));
                }
                None
            }
        }
    }

    /// Tells the sinks how far the run is (turns, tokens, cost, calls by kind).
    fn report_progress(&self) {
        let ledger = self.cast.llm.ledger_totals();
        self.cast.sinks.emit(SimEvent::Progress(Progress {
            turns: self.turn,
            paused: self.pacer.paused(),
            prompt_tokens: ledger.prompt_tokens(),
            completion_tokens: ledger.completion_tokens(),
            cost_usd: self.limits.prices.cost(&ledger).usd,
            calls: ledger
                .by_kind
                .iter()
                .map(|(k, u)| (k.as_str().to_string(), u.calls))
                .collect(),
            reply_quality: self.quality.summary(),
        }));
    }

    fn warn(&mut self, text: String) {
        self.cast
            .sinks
            .emit(SimEvent::Warning { text: text.clone() });
        self.warnings.push(text);
    }

    /// Passes on what the model client noticed about the backend's answers (each
    /// warning comes once per run, whichever choice met it: see `LlmClient`).
    fn backend_warnings(&mut self) {
        for text in self.cast.llm.take_warnings() {
            self.warn(text);
        }
    }

    /// Tells the sinks when a resumed run has said again all its killed run said.
    fn check_caught_up(&mut self) {
        if self.catching_up
            && self
                .transcript
                .as_ref()
                .is_none_or(TranscriptWriter::caught_up)
        {
            self.catching_up = false;
            self.cast.sinks.emit(SimEvent::Resumed {
                messages: self.messages,
            });
        }
    }

    fn finish(&mut self, ended_by: EndReason, error: Option<SimError>, ctx: &mut Context<Self>) {
        // A resumed run that ends (rather than stops) short of its killed run's
        // transcript would leave lines it never said.
        let short = match (&self.transcript, ended_by) {
            (Some(t), EndReason::MaxTurns) => t.check_caught_up().err().map(|e| match e {
                SimError::ResumeEnded { path, left } => SimError::ResumeBelowLimit {
                    path,
                    left,
                    max_turns: self.limits.max_turns,
                },
                e => e,
            }),
            (Some(t), EndReason::End | EndReason::Budget) => t.check_caught_up().err(),
            _ => None,
        };
        let (ended_by, error) = match short {
            Some(e) if error.is_none() => (EndReason::Error, Some(e)),
            _ => (ended_by, error),
        };
        self.backend_warnings();
        tracing::debug!(scenario = %self.cast.scenario.name, ended_by = ended_by.as_str(), turns = self.turn, "run finished");
        self.cast.sinks.emit(SimEvent::Finished {
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
                reply_quality: self.quality.summary(),
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
        self.cast.sinks.emit(SimEvent::StateEntered {
            state: state.clone(),
            visit,
        });
        self.cast
            .env
            .send(EnterVisit { state, visit })
            .into_actor(self)
            .map(|res, act, ctx| match res {
                Ok(()) => ctx.notify(Step),
                Err(e) => act.fail(e.into(), ctx),
            })
            .wait(ctx);
    }

    /// Asks a controller or judge question as a closed choice; `then` gets the option
    /// chosen (`None` when the backend could not give a valid one).
    fn ask(
        &mut self,
        build: impl FnOnce(&Scenario, &Observation) -> RoutingCall + 'static,
        then: impl FnOnce(&mut Self, Option<usize>, &mut Context<Self>) + 'static,
        ctx: &mut Context<Self>,
    ) {
        let (env, llm, scenario) = (
            self.cast.env.clone(),
            self.cast.llm.clone(),
            self.cast.scenario.clone(),
        );
        let settings = self
            .cast
            .scenario
            .settings_for(self.engine.current_state(), None, None);
        let (state, turn) = (self.engine.current_state().to_string(), self.turn);
        async move {
            let obs = env.send(Observe(None)).await?;
            let q = build(&scenario, &obs);
            // A controller chooses who takes the next turn; a judge rules on the last.
            let turn = turn + u64::from(q.kind == CallKind::Route);
            let context = CallContext {
                choices: q.options.clone(),
                ..llm.context(q.kind, &state, turn, None)
            };
            let request = LlmRequest::choice(q.prompt.messages, q.options, settings, context);
            let completion = llm.call(request, None).await?;
            Ok::<_, SimError>(completion.chosen)
        }
        .into_actor(self)
        .map(move |res, act, ctx| match res {
            Ok(chosen) => {
                act.backend_warnings();
                then(act, chosen.map(|c| c.index), ctx)
            }
            Err(e) => act.fail(e, ctx),
        })
        .wait(ctx);
    }

    /// The `llm` speaker rule: one closed choice among the roles; if the backend gives
    /// no valid one, `order` decides and a warning is recorded.
    fn ask_controller(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let state_name = self.engine.current_state().to_string();
        let (counter, offered) = (self.cast.counter.clone(), choices.clone());
        self.ask(
            move |scenario, obs| RoutingCall {
                kind: CallKind::Route,
                prompt: prompt::route_prompt(scenario, &scenario.sop.states[&state_name], &offered, obs, counter.as_ref()),
                options: offered,
            },
            move |act, chosen, ctx| {
                let role = match chosen {
                    Some(i) => choices[i].clone(),
                    None => {
                        let fallback = act.engine.in_order();
                        act.failures.controller_answers += 1;
                        act.failures.controller_fallbacks += 1;
                        act.warn(format!(
                            "turn {}: the speaker controller gave none of {}; falling back to order: {fallback}",
                            act.turn + 1,
                            choices.join(", ")
                        ));
                        fallback
                    }
                };
                ctx.notify(Play::one(role, None));
            },
            ctx,
        );
    }

    /// The transition judge: one closed choice between staying and each next state (or
    /// their labels, for configs that answer with labels).
    fn ask_judge(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let state_name = self.engine.current_state().to_string();
        let (counter, offered) = (self.cast.counter.clone(), choices.clone());
        self.ask(
            move |scenario, obs| {
                let state = &scenario.sop.states[&state_name];
                let judge = state.transition.judge.clone().unwrap_or_default();
                let options = if judge.labels.len() == offered.len() {
                    judge.labels.clone()
                } else {
                    offered.clone()
                };
                RoutingCall {
                    kind: CallKind::Transit,
                    prompt: prompt::judge_prompt(
                        scenario,
                        &state_name,
                        state,
                        &judge,
                        &offered,
                        obs,
                        counter.as_ref(),
                    ),
                    options,
                }
            },
            move |act, chosen, ctx| {
                let t = match chosen {
                    Some(0) => Transition::Stay,
                    Some(i) => act.engine.move_to(&choices[i]),
                    None => {
                        act.failures.judge_answers += 1;
                        act.warn(format!(
                            "turn {}: the transition judge gave none of {}; staying in {}",
                            act.turn,
                            choices.join(", "),
                            act.engine.current_state()
                        ));
                        Transition::Stay
                    }
                };
                ctx.notify(Transit(t));
            },
            ctx,
        );
    }

    /// Appends finished turns to the transcript and the events, in order.
    fn commit(&mut self, memories: &[Arc<Message>], vectors: &[Vec<f32>]) -> Result<(), SimError> {
        for (i, memory) in memories.iter().enumerate() {
            if let Some(t) = &mut self.transcript {
                t.append(memory)?;
            }
            self.messages += 1;
            let vector = vectors.get(i).filter(|v| !v.is_empty());
            self.quality.record(memory, vector.map(Vec::as_slice));
            self.cast.sinks.emit(SimEvent::Message(memory.clone()));
            self.check_caught_up();
            if !memory.kind.is_tool() {
                self.engine.record_turn(&memory.role);
            }
        }
        Ok(())
    }

    fn transit_after(&mut self, check: Check, ctx: &mut Context<Self>) {
        match check {
            Check::Decided(t, cause) => {
                tracing::debug!(
                    turn = self.turn,
                    state = self.engine.current_state(),
                    ?t,
                    ?cause,
                    "transition"
                );
                ctx.notify(Transit(t))
            }
            Check::AskJudge { choices } => self.ask_judge(choices, ctx),
        }
    }

    /// The agents who play `role` in the current state: one, or a population's members.
    fn players(&self, role: &str) -> &[String] {
        let state = self.engine.current_state();
        self.players
            .get(state)
            .and_then(|p| p.get(role))
            .map_or(&[], Vec::as_slice)
    }

    /// How many turns a round of `roles` takes: one per player.
    fn seat_count(&self, roles: &[String]) -> u64 {
        roles.iter().map(|r| self.players(r).len() as u64).sum()
    }

    /// Each turn of `roles`, in order: the role, its player's name and actor.
    fn seats(&self, roles: &[String]) -> Result<Vec<(String, String, Addr<AgentActor>)>, SimError> {
        let state = self.engine.current_state();
        let mut seats = Vec::new();
        for role in roles {
            let players = self.players(role);
            if players.is_empty() {
                return Err(SimError::NoAgent {
                    state: state.to_string(),
                    role: role.to_string(),
                });
            }
            for name in players {
                let agent =
                    self.cast
                        .agents
                        .get(name)
                        .cloned()
                        .ok_or_else(|| SimError::NoAgent {
                            state: state.to_string(),
                            role: role.to_string(),
                        })?;
                seats.push((role.clone(), name.clone(), agent));
            }
        }
        Ok(seats)
    }
}

impl Handler<Step> for Director {
    type Result = ();
    fn handle(&mut self, _: Step, ctx: &mut Context<Self>) {
        // Agents' choices of the last turn are in the client's notices by now.
        self.backend_warnings();
        // A run whose events cannot be written stops, rather than go on unrecorded.
        if let Some(f) = self.cast.sinks.take_failure() {
            let error = SimError::Io {
                what: f.what,
                source: f.source,
            };
            return self.fail(error, ctx);
        }
        if self.limits.cancel.is_cancelled() || self.pacer.stopped() {
            return self.finish(EndReason::Interrupted, None, ctx);
        }
        self.report_progress();
        if !self.pacer.may_start_turn() {
            return;
        }
        if self.turn >= self.limits.max_turns {
            return self.finish(EndReason::MaxTurns, None, ctx);
        }
        if let Some(reason) = self.over_budget() {
            self.stop_reason = Some(reason);
            return self.finish(EndReason::Budget, None, ctx);
        }
        match self.engine.next_speaker() {
            Speaker::Opening { role, query } => ctx.notify(Play::one(role, Some(query))),
            Speaker::Role(role) => ctx.notify(Play::one(role, None)),
            Speaker::Ask { choices } => self.ask_controller(choices, ctx),
            // A round is all or nothing: it does not start if the turn limit would
            // cut it short.
            Speaker::Round { roles }
                if self.turn + self.seat_count(&roles) > self.limits.max_turns =>
            {
                self.finish(EndReason::MaxTurns, None, ctx)
            }
            Speaker::Round { roles } => ctx.notify(Play {
                roles,
                opening: None,
                simultaneous: true,
            }),
        }
    }
}

impl Handler<Play> for Director {
    type Result = ();
    fn handle(&mut self, msg: Play, ctx: &mut Context<Self>) {
        // A sequential turn is one role's, whose state validation gave one player.
        let seats = match self.seats(&msg.roles) {
            Ok(seats) if msg.simultaneous => seats,
            Ok(mut seats) => {
                seats.truncate(1);
                seats
            }
            Err(e) => return self.fail(e, ctx),
        };
        let (state, visit) = (self.engine.current_state().to_string(), self.engine.visit());
        let names: Vec<String> = seats.iter().map(|(_, name, _)| name.clone()).collect();
        let round = msg.simultaneous.then(|| {
            self.rounds += 1;
            self.rounds
        });
        if let Some(round) = round {
            self.cast.sinks.emit(SimEvent::RoundStarted {
                state: state.clone(),
                visit,
                round,
                roles: msg.roles.clone(),
            });
        }
        let first = self.turn + 1;
        let n = seats.len() as u64;
        self.turn += n;
        tracing::debug!(turn = first, %state, roles = ?msg.roles, turns = n, opening = msg.opening.is_some(), "take turns");
        let turns: Vec<_> = seats
            .into_iter()
            .enumerate()
            .map(|(i, (role, _, agent))| {
                let turn = TakeTurn {
                    state: state.clone(),
                    visit,
                    role,
                    turn: first + i as u64,
                    opening: msg.opening.clone(),
                    live: !msg.simultaneous,
                };
                (agent, turn)
            })
            .collect();
        let env = self.cast.env.clone();
        async move {
            env.send(BeginRound { agents: names }).await?;
            // Every turn is in flight at once (asked in the order of the roles); each
            // observes the memory as it stood when the round began, since nothing of
            // the round is committed until all are in.
            let turns = turns.into_iter().map(|(agent, turn)| agent.send(turn));
            let mut drafted = Vec::with_capacity(n as usize);
            for done in futures::future::join_all(turns).await {
                match done?? {
                    TurnDone::Drafted(d) => drafted.push(d),
                    TurnDone::InputClosed => return Ok(None),
                }
            }
            Ok::<_, SimError>(Some(env.send(Commit(drafted)).await??))
        }
        .into_actor(self)
        .map(move |res, act, ctx| {
            let committed = match res {
                Ok(Some(c)) => c,
                other => {
                    act.turn -= n; // nothing of the turns was committed
                    return match other {
                        Err(e) => act.fail(e, ctx),
                        _ => act.finish(EndReason::InputClosed, None, ctx),
                    };
                }
            };
            // Each turn shows its held tool events, then its messages.
            let mut said = Vec::new();
            for turn in committed {
                for ret in turn.events {
                    act.cast.sinks.emit(SimEvent::Tool {
                        name: turn.name.clone(),
                        visit,
                        ret: Box::new(ret),
                    });
                }
                if let Err(e) = act.commit(&turn.messages, &turn.vectors) {
                    return act.fail(e, ctx);
                }
                said.extend(turn.messages.into_iter().filter(|m| !m.kind.is_tool()));
            }
            let check = match round {
                Some(round) => {
                    act.cast.sinks.emit(SimEvent::RoundEnded {
                        state,
                        visit,
                        round,
                        roles: msg.roles,
                    });
                    let texts: Vec<&str> = said.iter().map(|m| m.content.as_str()).collect();
                    act.engine.record_round();
                    act.engine.check_round(&texts)
                }
                None => match said.last() {
                    Some(reply) => act.engine.check_transition(&reply.content),
                    None => return act.fail(SimError::Internal("a turn said nothing"), ctx),
                },
            };
            act.transit_after(check, ctx);
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
