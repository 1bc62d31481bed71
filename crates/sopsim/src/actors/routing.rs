//! The Director's questions to the model: the speaker controller (who speaks next,
//! a closed choice among the roles) and the transition judge (stay, or where to go).
//! An answer the backend could not give falls back to the order rule or to staying,
//! with a warning the run state keeps.

use actix::prelude::*;

use super::director::Director;
use super::messages::Observe;
use super::steps::{Play, Transit};
use crate::error::SimError;
use crate::llm::{CallContext, CallKind, LlmRequest};
use crate::memory::Observation;
use crate::prompt::{self, Assembled};
use crate::run_state::EndReason;
use crate::scenario::{Scenario, State};
use crate::sop::{controller_choice, judge_options, Check, Transition};

/// A routing call (the speaker controller or the transition judge): its prompt and
/// the options offered.
struct RoutingCall {
    kind: CallKind,
    /// Offered to the model.
    options: Vec<String>,
    prompt: Assembled,
}

impl Director {
    /// Asks a controller or judge question as a closed choice; `then` gets the option
    /// chosen (`None` when the backend could not give a valid one).
    fn ask(
        &mut self,
        build: impl FnOnce(&Scenario, &State, &Observation) -> RoutingCall + 'static,
        then: impl FnOnce(&mut Self, Option<usize>, &mut Context<Self>) + 'static,
        ctx: &mut Context<Self>,
    ) {
        let (env, llm, scenario) = (
            self.cast.env.clone(),
            self.cast.llm.clone(),
            self.cast.scenario.clone(),
        );
        // The state as the question shows it: with the world's values, when it shows any.
        let current = &scenario.sop.states[self.engine.current_state()];
        let shown = self
            .world_view()
            .and_then(|view| crate::world::view::render_state(current, &view, None))
            .unwrap_or_else(|| current.clone());
        let settings = self
            .cast
            .scenario
            .settings_for(self.engine.current_state(), None, None);
        let (state, turn) = (self.engine.current_state().to_string(), self.state.turns());
        async move {
            let obs = env.send(Observe(None)).await?;
            let q = build(&scenario, &shown, &obs);
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
            // A question the stop abandoned ends the run as interrupted.
            Err(e) if e.is_cancelled() => act.finish(EndReason::Interrupted, None, ctx),
            Err(e) => act.fail(e, ctx),
        })
        .wait(ctx);
    }

    /// The `llm` speaker rule: one closed choice among the roles; if the backend gives
    /// no valid one, `order` decides and a warning is recorded.
    pub(super) fn ask_controller(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let (counter, offered) = (self.cast.counter.clone(), choices.clone());
        self.ask(
            move |scenario, state, obs| RoutingCall {
                kind: CallKind::Route,
                prompt: prompt::route_prompt(scenario, state, &offered, obs, counter.as_ref()),
                options: offered,
            },
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
    /// their labels, for configs that answer with labels).
    fn ask_judge(&mut self, choices: Vec<String>, ctx: &mut Context<Self>) {
        let state_name = self.engine.current_state().to_string();
        let (counter, offered) = (self.cast.counter.clone(), choices.clone());
        // What the judge is offered, as its warning names it.
        let judge = self.cast.scenario.sop.states[&state_name]
            .transition
            .judge
            .as_ref();
        let named = judge_options(judge, &choices);
        let options = named.clone();
        self.ask(
            move |scenario, state, obs| {
                let judge = state.transition.judge.clone().unwrap_or_default();
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

    pub(super) fn transit_after(&mut self, check: Check, ctx: &mut Context<Self>) {
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
