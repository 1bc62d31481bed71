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

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::cast::{Cast, Finish, Limits};
use super::director_rules::{self as rules, CheckOn, RoundEnd};
use super::messages::*;
use super::routing::{self, Asked, BuildCall};
use super::seating::{Seat, Seating};
use super::steps::{Play, Step, Transit};
use super::turns::play_round;
use crate::control::{Control, Pacer, RunControl, Wake};
use crate::error::SimError;
use crate::events::SimEvent;
use crate::output::TranscriptWriter;
use sopsim_core::memory::Message;
use sopsim_core::quality::Checker;
use sopsim_core::run_state::EndReason;
use sopsim_core::run_state::{Begun, Gate, RunState, TurnLimits};
use sopsim_core::sop::{
    after_transit, controller_choice, judge_options, next_turns, AfterTransit, Check, NextTurns,
    SopEngine, Transition,
};

pub(crate) struct Director {
    cast: Cast,
    limits: Limits,
    engine: SopEngine,
    transcript: Option<TranscriptWriter>,
    done: Option<oneshot::Sender<Finish>>,
    /// Counters, limits, budgets, warnings and catch-up (`run_state`, pure).
    state: RunState,
    pacer: Pacer,
    /// Every committed message, judged as it comes.
    quality: Checker,
    /// Who plays each role in each state.
    seating: Seating,
    /// The run's world, when the scenario keeps one.
    world: Option<super::world_keeper::WorldKeeper>,
    /// The scenario's probes, when it has any.
    probes: Option<super::prober::Prober>,
    /// Whether the run has ended (the end's probes may still be asked).
    ending: bool,
}

impl Director {
    /// A Director at the start of the scenario's first state; `notes` start its
    /// warnings; `done` receives how the run ended.
    pub(crate) fn new(
        cast: Cast,
        limits: Limits,
        transcript: Option<TranscriptWriter>,
        seed: u64,
        notes: Vec<String>,
        done: oneshot::Sender<Finish>,
    ) -> Self {
        Self {
            world: None,
            probes: None,
            ending: false,
            quality: cast.checker(),
            seating: Seating::new(cast.scenario.players()),
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
    pub(crate) fn with_world(
        mut self,
        world: sopsim_core::world::World,
        log: Option<TranscriptWriter>,
    ) -> Self {
        self.world = Some(super::world_keeper::WorldKeeper::new(world, log));
        self
    }

    /// The Director of a run that asks the scenario's probes.
    pub(crate) fn with_probes(mut self, probes: super::prober::Prober) -> Self {
        self.probes = Some(probes);
        self
    }

    /// Asks the probes due at `occasion`, then goes on with `then`; none due, it goes
    /// on at once. Nothing of what they answer reaches the run.
    fn probe(
        &mut self,
        occasion: crate::scenario::probes::Occasion<'_>,
        then: impl FnOnce(&mut Self, &mut Context<Self>) + 'static,
        ctx: &mut Context<Self>,
    ) {
        let Some(probes) = self.probes.as_mut().filter(|p| p.due(occasion)) else {
            return then(self, ctx);
        };
        let moment = super::prober::Moment {
            turn: self.state.turns(),
            state: self.engine.current_state().to_string(),
            world: self.world.as_ref().map(|w| w.view()),
        };
        probes
            .ask(occasion, moment)
            .into_actor(self)
            .map(move |answers, act, ctx| {
                let recorded = act.probes.as_mut().map_or(Ok(()), |p| p.record(answers));
                match recorded {
                    Ok(()) => then(act, ctx),
                    Err(e) => act.fail(e, ctx),
                }
            })
            .wait(ctx);
    }

    /// The world as the next turns see it.
    fn world_view(&self) -> Option<std::sync::Arc<sopsim_core::world::WorldView>> {
        self.world.as_ref().map(|w| w.view())
    }

    /// Ends the visit under way as a round of the world: tells it, gives the
    /// Environment the new view; the name of the condition that ends the run, if one
    /// holds.
    fn close_round(&mut self) -> Result<Option<String>, SimError> {
        match &mut self.world {
            Some(world) => world.close(&self.cast.sinks, &self.cast.env, &self.limits.cancel),
            None => Ok(None),
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
        if let Some(messages) = self.state.caught_up_now(self.transcript_caught_up()) {
            self.cast.sinks.emit(SimEvent::Resumed { messages });
        }
        let state = self.engine.current_state().to_string();
        self.probe(
            crate::scenario::probes::Occasion::Start,
            move |act, ctx| act.enter(state, ctx),
            ctx,
        );
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

impl Director {
    /// Tells the sinks how far the run is (turns, tokens, cost, calls by kind).
    fn report_progress(&self) {
        let progress = self.cast.progress(
            (self.state.turns(), self.pacer.paused()),
            &self.limits.prices,
            self.quality.summary(),
        );
        self.cast.sinks.emit(SimEvent::Progress(Box::new(progress)));
    }

    /// Tells the sinks a warning the run state kept.
    fn tell(&self, warning: String) {
        self.cast.sinks.emit(SimEvent::Warning { text: warning });
    }

    /// Passes on what the model client noticed about the backend's answers (each
    /// warning comes once per run, whichever choice met it: see `LlmClient`).
    fn backend_warnings(&mut self) {
        for text in self.cast.llm.take_warnings() {
            let text = self.state.warn(text);
            self.tell(text);
        }
    }

    /// Whether a resumed run's transcript has every line of the killed run said again.
    fn transcript_caught_up(&self) -> bool {
        self.transcript
            .as_ref()
            .is_none_or(TranscriptWriter::caught_up)
    }

    fn finish(&mut self, ended_by: EndReason, error: Option<SimError>, ctx: &mut Context<Self>) {
        if self.ending {
            return;
        }
        self.ending = true;
        if rules::asks_end_probes(ended_by, self.limits.cancel.is_cancelled()) {
            return self.probe(
                crate::scenario::probes::Occasion::End,
                move |act, ctx| act.finish_now(ended_by, error, ctx),
                ctx,
            );
        }
        self.finish_now(ended_by, error, ctx)
    }

    fn finish_now(
        &mut self,
        ended_by: EndReason,
        error: Option<SimError>,
        ctx: &mut Context<Self>,
    ) {
        let round_open = self.world.as_ref().is_some_and(|w| w.open());
        let (ended_by, error) = if rules::closes_round(ended_by, round_open) {
            rules::after_closing((ended_by, error), self.close_round().map(|_| ()))
        } else {
            (ended_by, error)
        };
        // A resumed run that ends by its own course short of its killed run's
        // transcript would leave lines it never said.
        let short = self
            .transcript
            .as_ref()
            .and_then(|t| t.shortfall(ended_by, self.state.max_turns()));
        let (ended_by, error) = rules::with_shortfall((ended_by, error), short);
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
                probes: self.probes.as_mut().map(|p| p.summary()),
            });
        }
        ctx.stop();
    }

    fn fail(&mut self, error: SimError, ctx: &mut Context<Self>) {
        let (ended_by, error) = rules::ended_by_error(error);
        self.finish(ended_by, error, ctx)
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
        let (llm, limits) = (&self.cast.llm, &self.limits);
        let (gate, warning) = self.state.gate(cancelled, may_start, || limits.spend(llm));
        if let Some(w) = warning {
            self.tell(w);
        }
        match gate {
            Gate::Go => {}
            Gate::Wait => return,
            Gate::Stop(reason) => return self.finish(reason, None, ctx),
        }
        let speaker = self.engine.next_speaker();
        let state = self.engine.current_state();
        match next_turns(speaker, |roles| {
            self.state.round_fits(self.seating.count(state, roles))
        }) {
            NextTurns::Play {
                roles,
                opening,
                simultaneous,
            } => {
                let opening = match (opening, &self.world) {
                    (Some(query), Some(world)) => match world.shown(state, &query) {
                        Ok(shown) => Some(shown),
                        Err(e) => return self.fail(e, ctx),
                    },
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
        let state = self.engine.current_state().to_string();
        let probes = rules::probes_after_visit(&t, self.cast.scenario.sop.states[&state].turns);
        let go_on = move |act: &mut Self, ctx: &mut Context<Self>| {
            act.engine.apply(&t);
            match after_transit(t, ended_if.is_some()) {
                AfterTransit::NextTurn => ctx.notify(Step),
                AfterTransit::Enter(state) => act.enter(state, ctx),
                AfterTransit::End => act.finish(EndReason::End, None, ctx),
                AfterTransit::WorldEnded => act.finish(EndReason::EndIf, None, ctx),
            }
        };
        if probes {
            let occasion = crate::scenario::probes::Occasion::AfterRound { state: &state };
            self.probe(occasion, go_on, ctx)
        } else {
            go_on(self, ctx)
        }
    }
}

impl Handler<Play> for Director {
    type Result = ();
    fn handle(&mut self, msg: Play, ctx: &mut Context<Self>) {
        let (state, visit) = (self.engine.current_state().to_string(), self.engine.visit());
        let seats = match self.seating.seats(&state, &msg.roles, &self.cast.agents) {
            Ok(seats) => rules::seats_to_play(seats, msg.simultaneous),
            Err(e) => return self.fail(e, ctx),
        };
        let names: Vec<String> = seats.iter().map(|s| s.name.clone()).collect();
        let n = seats.len() as u64;
        let Begun {
            first_turn: first,
            round,
        } = self.state.begin(n, msg.simultaneous);
        if let Some(round) = round {
            self.cast.sinks.emit(SimEvent::RoundStarted {
                state: state.clone(),
                visit,
                round,
                roles: msg.roles.clone(),
            });
        }
        tracing::debug!(turn = first, %state, roles = ?msg.roles, turns = n, opening = msg.opening.is_some(), "take turns");
        // Each turn's message is made when it is sent, so a population's round holds
        // only the turns in flight.
        let (turn_state, opening, live) = (state.clone(), msg.opening.clone(), !msg.simultaneous);
        let world = self.world_view();
        let turns = seats.into_iter().enumerate().map(move |(i, seat)| {
            let Seat { role, player, .. } = seat;
            player.send(TakeTurn {
                state: turn_state.clone(),
                visit,
                role,
                turn: first + i as u64,
                opening: opening.clone(),
                live,
                world: world.clone(),
            })
        });
        let reach = (self.cast.sinks.clone(), self.limits.cancel.clone());
        play_round(turns, n, names, self.cast.env.clone(), reach)
            .into_actor(self)
            .map(move |res, act, ctx| {
                let end = rules::round_end(res, act.limits.cancel.is_cancelled());
                if !matches!(end, RoundEnd::Committed(_)) {
                    act.state.abandon(n); // nothing of the turns was committed
                }
                match end {
                    RoundEnd::Committed(committed) => {
                        act.committed(committed, (state, visit, round), msg, ctx)
                    }
                    RoundEnd::Failed(e) => act.fail(e, ctx),
                    RoundEnd::Interrupted => act.finish(EndReason::Interrupted, None, ctx),
                    RoundEnd::InputClosed => act.finish(EndReason::InputClosed, None, ctx),
                }
            })
            .wait(ctx);
    }
}

impl Director {
    /// Shows and records a committed round, then checks the transition on what was
    /// said: each turn's held tool events, then its messages.
    fn committed(
        &mut self,
        committed: Vec<CommittedTurn>,
        (state, visit, round): (String, u32, Option<u32>),
        msg: Play,
        ctx: &mut Context<Self>,
    ) {
        let mut said = Vec::new();
        let taken = committed.len() as u64;
        for turn in committed {
            for ret in turn.events {
                self.cast.sinks.emit(SimEvent::Tool {
                    name: turn.name.clone(),
                    visit,
                    ret: Box::new(ret),
                });
            }
            if let Err(e) = self.commit(&turn.messages, &turn.vectors) {
                return self.fail(e, ctx);
            }
            said.extend(turn.messages.into_iter().filter(|m| !m.kind.is_tool()));
        }
        if let Some(world) = &mut self.world {
            world.heard(&said);
        }
        let turns = self.state.turns();
        let before = turns.saturating_sub(taken);
        let round_of = round.map(|_| state.clone());
        if let Some(round) = round {
            self.cast.sinks.emit(SimEvent::RoundEnded {
                state,
                visit,
                round,
                roles: msg.roles,
            });
        }
        let check = match rules::check_on(round.is_some(), &said) {
            CheckOn::Round(texts) => {
                self.engine.record_round();
                self.engine.check_round(&texts)
            }
            CheckOn::Reply(reply) => self.engine.check_transition(reply),
            CheckOn::NothingSaid => {
                return self.fail(SimError::Internal("a turn said nothing"), ctx)
            }
        };
        // The probes of every few turns, then of a simultaneous state's round.
        use crate::scenario::probes::Occasion;
        let after_turns = Occasion::Turns {
            before,
            after: turns,
        };
        self.probe(
            after_turns,
            move |act, ctx| match round_of {
                Some(state) => act.probe(
                    Occasion::AfterRound { state: &state },
                    move |act, ctx| act.transit_after(check, ctx),
                    ctx,
                ),
                None => act.transit_after(check, ctx),
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
            let vector = vectors.get(i).filter(|v| !v.is_empty());
            self.quality.record(memory, vector.map(Vec::as_slice));
            self.cast.sinks.emit(SimEvent::Message(memory.clone()));
            if let Some(messages) = self.state.committed(self.transcript_caught_up()) {
                self.cast.sinks.emit(SimEvent::Resumed { messages });
            }
            if !memory.kind.is_tool() {
                self.engine.record_turn(&memory.role);
            }
        }
        Ok(())
    }

    /// Asks a controller or judge question as a closed choice; `then` gets the option
    /// chosen (`None` when the backend could not give a valid one).
    fn ask(
        &mut self,
        build: BuildCall,
        then: impl FnOnce(&mut Self, Option<usize>, &mut Context<Self>) + 'static,
        ctx: &mut Context<Self>,
    ) {
        let scenario = self.cast.scenario.clone();
        let state = self.engine.current_state().to_string();
        // The state as the question shows it: with the world's values, when it shows any.
        let current = &scenario.sop.states[&state];
        let shown = match self.world_view() {
            Some(view) => {
                match sopsim_core::world::view::render_state(&state, current, &view, None) {
                    Ok(shown) => shown,
                    Err(e) => return self.fail(SimError::World(e), ctx),
                }
            }
            None => None,
        }
        .unwrap_or_else(|| current.clone());
        let asked = Asked {
            settings: scenario.settings_for(&state, None, None),
            scenario,
            state,
            shown,
            turns: self.state.turns(),
        };
        routing::ask(self.cast.env.clone(), self.cast.llm.clone(), asked, build)
            .into_actor(self)
            .map(move |res, act, ctx| match res {
                Ok(chosen) => {
                    act.backend_warnings();
                    then(act, chosen, ctx)
                }
                // A question the stop abandoned ends the run as interrupted.
                Err(e) if e.is_cancelled() => act.finish(EndReason::Interrupted, None, ctx),
                Err(e) => act.fail(e, ctx),
            })
            .wait(ctx);
    }

    /// The `llm` speaker rule: one closed choice among the roles; if the backend gives
    /// no valid one, `order` decides and a warning is recorded.
    fn ask_controller(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let build = routing::controller_call(self.cast.counter.clone(), choices.clone());
        self.ask(
            build,
            move |act, chosen, ctx| {
                let role = match controller_choice(chosen, &choices) {
                    Some(role) => role.to_string(),
                    None => {
                        let fallback = act.engine.in_order();
                        let warning = act.state.controller_failed(&choices, &fallback);
                        act.tell(warning);
                        fallback
                    }
                };
                ctx.notify(Play::one(role, None));
            },
            ctx,
        );
    }

    /// The transition judge: one closed choice between staying and each next state (or
    /// their labels, for configs that answer with labels); if the backend gives no
    /// valid one, the run stays and a warning is recorded.
    fn ask_judge(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let state = self.engine.current_state().to_string();
        let judge = self.cast.scenario.sop.states[&state]
            .transition
            .judge
            .as_ref();
        // What the judge is offered, as its warning names it.
        let named = judge_options(judge, &choices);
        let build = routing::judge_call(
            self.cast.counter.clone(),
            state,
            choices.clone(),
            named.clone(),
        );
        self.ask(
            build,
            move |act, chosen, ctx| {
                let t = act
                    .engine
                    .judge_ruling(chosen, &choices)
                    .unwrap_or_else(|| {
                        let state = act.engine.current_state().to_string();
                        let warning = act.state.judge_failed(&named, &state);
                        act.tell(warning);
                        Transition::Stay
                    });
                ctx.notify(Transit(t));
            },
            ctx,
        );
    }

    fn transit_after(&mut self, check: Check, ctx: &mut Context<Self>) {
        match check {
            Check::Decided(t, cause) => {
                tracing::debug!(
                    turn = self.state.turns(),
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
}

#[cfg(test)]
mod tests;
