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

use actix::prelude::*;
use tokio::sync::oneshot;

use super::cast::{Cast, Finish, Limits};
use super::messages::*;
use super::steps::{Play, Step, Transit};
use crate::control::{Control, Pacer, RunControl, Wake};
use crate::error::SimError;
use crate::events::{Progress, SimEvent};
use crate::llm::cost::PriceTable;
use crate::llm::LlmClient;
use crate::output::TranscriptWriter;
use crate::quality::Checker;
use crate::run_state::EndReason;
use crate::run_state::{Gate, RunState, Spend, TurnLimits};
use crate::sop::{after_transit, next_turns, AfterTransit, NextTurns, SopEngine, Transition};

pub struct Director {
    pub(super) cast: Cast,
    pub(super) limits: Limits,
    pub(super) engine: SopEngine,
    pub(super) transcript: Option<TranscriptWriter>,
    pub(super) done: Option<oneshot::Sender<Finish>>,
    /// Counters, limits, budgets, warnings and catch-up (`run_state`, pure).
    pub(super) state: RunState,
    pub(super) pacer: Pacer,
    /// Every committed message, judged as it comes.
    pub(super) quality: Checker,
    /// Who plays each role in each state.
    pub(super) players: crate::scenario::Players,
    /// The run's world, when the scenario keeps one.
    pub(super) world: Option<super::world_keeper::WorldKeeper>,
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
            world: None,
            quality: {
                let mut checker = Checker::new(cast.instructions.clone());
                if cast.paraphrases {
                    checker = checker.counting_paraphrases();
                }
                if let Some(stakes) = &cast.stakes {
                    checker = checker.with_stakes(stakes.clone());
                }
                checker
            },
            players: cast.scenario.players(),
            engine: SopEngine::new(cast.scenario.clone(), seed),
            state: RunState::new(
                TurnLimits {
                    max_turns: limits.max_turns,
                    budget_usd: limits.budget_usd,
                    max_total_tokens: limits.max_total_tokens,
                },
                notes,
                transcript
                    .as_ref()
                    .is_some_and(TranscriptWriter::is_resumed),
            ),
            cast,
            limits,
            done: Some(done),
            pacer: Pacer::default(),
            transcript,
        }
    }
}

impl Director {
    /// The Director of a run whose world is `world`, its rounds appended to `log`.
    pub fn with_world(mut self, world: crate::world::World, log: Option<TranscriptWriter>) -> Self {
        self.world = Some(super::world_keeper::WorldKeeper::new(world, log));
        self
    }

    /// The world as the next turns see it.
    pub(super) fn world_view(&self) -> Option<std::sync::Arc<crate::world::WorldView>> {
        self.world.as_ref().map(|w| w.view())
    }

    /// Ends the visit under way as a round of the world: tells it, gives the
    /// Environment the new view; the name of the condition that ends the run, if one
    /// holds.
    fn close_round(&mut self) -> Result<Option<String>, SimError> {
        let Some(world) = &mut self.world else {
            return Ok(None);
        };
        let Some(closed) = world.close()? else {
            return Ok(None);
        };
        self.cast.sinks.emit(closed.event);
        self.cast.env.do_send(SetWorld(world.view()));
        Ok(closed.ended_if)
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
        if let Some(messages) = self.state.caught_up_now(self.transcript_caught_up()) {
            self.cast.sinks.emit(SimEvent::Resumed { messages });
        }
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

/// What a run has spent, as the budget checks read it.
fn spend(llm: &LlmClient, prices: &PriceTable) -> Spend {
    let ledger = llm.ledger_totals();
    Spend {
        tokens: ledger
            .prompt_tokens()
            .saturating_add(ledger.completion_tokens()),
        usd: prices.cost(&ledger).usd,
        unpriced: ledger
            .by_model
            .keys()
            .filter(|m| prices.price(m).is_none())
            .cloned()
            .collect(),
    }
}

impl Director {
    /// Tells the sinks how far the run is (turns, tokens, cost, calls by kind).
    fn report_progress(&self) {
        let ledger = self.cast.llm.ledger_totals();
        self.cast.sinks.emit(SimEvent::Progress(Box::new(Progress {
            turns: self.state.turns(),
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
        })));
    }

    /// Tells the sinks a warning the run state kept.
    pub(super) fn tell(&self, warning: String) {
        self.cast.sinks.emit(SimEvent::Warning { text: warning });
    }

    /// Passes on what the model client noticed about the backend's answers (each
    /// warning comes once per run, whichever choice met it: see `LlmClient`).
    pub(super) fn backend_warnings(&mut self) {
        for text in self.cast.llm.take_warnings() {
            let text = self.state.warn(text);
            self.tell(text);
        }
    }

    /// Whether a resumed run's transcript has every line of the killed run said again.
    pub(super) fn transcript_caught_up(&self) -> bool {
        self.transcript
            .as_ref()
            .is_none_or(TranscriptWriter::caught_up)
    }

    pub(super) fn finish(
        &mut self,
        ended_by: EndReason,
        error: Option<SimError>,
        ctx: &mut Context<Self>,
    ) {
        // A round the turn limit or a budget ended before its visit did still counts.
        let (ended_by, error) = match ended_by {
            EndReason::MaxTurns | EndReason::Budget
                if self.world.as_ref().is_some_and(|w| w.open()) =>
            {
                match self.close_round() {
                    Ok(_) => (ended_by, error),
                    Err(e) => (EndReason::Error, Some(e)),
                }
            }
            _ => (ended_by, error),
        };
        // A resumed run that ends by its own course short of its killed run's
        // transcript would leave lines it never said.
        let short = match &self.transcript {
            Some(t) if ended_by.ends_the_course() => t.check_caught_up().err(),
            _ => None,
        };
        let short = short.map(|e| match (e, ended_by) {
            (SimError::ResumeEnded { path, left }, EndReason::MaxTurns) => {
                SimError::ResumeBelowLimit {
                    path,
                    left,
                    max_turns: self.state.max_turns(),
                }
            }
            (e, _) => e,
        });
        let (ended_by, error) = match short {
            Some(e) if error.is_none() => (EndReason::Error, Some(e)),
            _ => (ended_by, error),
        };
        self.backend_warnings();
        let turns = self.state.turns();
        tracing::debug!(scenario = %self.cast.scenario.name, ended_by = ended_by.as_str(), turns, "run finished");
        self.cast.sinks.emit(SimEvent::Finished {
            ended_by: ended_by.as_str().to_string(),
            turns,
        });
        if let Some(done) = self.done.take() {
            let (warnings, stop_reason, failures) = self.state.take_record();
            let _ = done.send(Finish {
                ended_by,
                error,
                turns,
                final_state: self.engine.current_state().to_string(),
                visits: self.engine.visit(),
                warnings,
                stop_reason,
                failures,
                reply_quality: self.quality.summary(),
                world: self.world.as_ref().map(|w| w.summary()),
            });
        }
        ctx.stop();
    }

    pub(super) fn fail(&mut self, error: SimError, ctx: &mut Context<Self>) {
        self.finish(EndReason::Error, Some(error), ctx);
    }

    /// Starts the engine's current visit: tell the Environment, then take the first step.
    fn enter(&mut self, state: String, ctx: &mut Context<Self>) {
        let visit = self.engine.visit();
        if let Some(world) = &mut self.world {
            world.entered(&state, visit);
        }
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
        let cancelled = self.limits.cancel.is_cancelled() || self.pacer.stopped();
        if !cancelled {
            self.report_progress();
        }
        let may_start = self.pacer.may_start_turn();
        let (llm, prices) = (&self.cast.llm, &self.limits.prices);
        let (gate, warning) = self.state.gate(cancelled, may_start, || spend(llm, prices));
        if let Some(w) = warning {
            self.tell(w);
        }
        match gate {
            Gate::Go => {}
            Gate::Wait => return,
            Gate::Stop(reason) => return self.finish(reason, None, ctx),
        }
        let speaker = self.engine.next_speaker();
        match next_turns(speaker, |roles| {
            self.state.round_fits(self.seat_count(roles))
        }) {
            NextTurns::Play {
                roles,
                opening,
                simultaneous,
            } => {
                let opening = match (opening, self.world_view()) {
                    (Some(query), Some(view)) => {
                        Some(crate::world::render(&query, &view, None, &[]).into_owned())
                    }
                    (opening, _) => opening,
                };
                ctx.notify(Play {
                    roles,
                    opening,
                    simultaneous,
                })
            }
            NextTurns::AskController { choices } => self.ask_controller(choices, ctx),
            NextTurns::EndAtTurnLimit => self.finish(EndReason::MaxTurns, None, ctx),
        }
    }
}

impl Handler<Transit> for Director {
    type Result = ();
    fn handle(&mut self, Transit(t): Transit, ctx: &mut Context<Self>) {
        // Leaving a visit closes its round of the world, whose conditions may end
        // the run.
        let ended_if = match t {
            Transition::Stay => None,
            _ => match self.close_round() {
                Ok(ended_if) => ended_if,
                Err(e) => return self.fail(e, ctx),
            },
        };
        self.engine.apply(&t);
        match after_transit(t, ended_if.is_some()) {
            AfterTransit::NextTurn => ctx.notify(Step),
            AfterTransit::Enter(state) => self.enter(state, ctx),
            AfterTransit::End => self.finish(EndReason::End, None, ctx),
            AfterTransit::WorldEnded => self.finish(EndReason::EndIf, None, ctx),
        }
    }
}
