//! The Director's questions to the model: the speaker controller (who speaks next,
//! a closed choice among the roles) and the transition judge (stay, or where to go),
//! each asked as a closed choice on the memory as it stands. What the answer leads to
//! is the SOP's (`sop::controller_choice`, `SopEngine::judge_ruling`).

use std::sync::Arc;

use actix::Addr;

use super::environment::EnvironmentActor;
use super::messages::Observe;
use crate::error::SimError;
use crate::llm::{CallContext, CallKind, LlmClient, LlmRequest};
use crate::scenario::{LlmSettings, Scenario, State};
use sopsim_core::memory::Observation;
use sopsim_core::prompt::{self, Assembled};
use sopsim_core::tokens::TokenCounter;

/// A routing call (the speaker controller or the transition judge): its prompt and
/// the options offered.
pub(super) struct RoutingCall {
    kind: CallKind,
    /// Offered to the model.
    options: Vec<String>,
    prompt: Assembled,
}

/// Builds a routing call from the scenario, the state as the question shows it, and
/// the memory.
pub(super) type BuildCall = Box<dyn FnOnce(&Scenario, &State, &Observation) -> RoutingCall>;

/// Where a question is asked: the state (as shown, with the world's values) and the
/// turns taken so far.
pub(super) struct Asked {
    pub scenario: Arc<Scenario>,
    pub state: String,
    pub shown: State,
    pub settings: LlmSettings,
    pub turns: u64,
}

/// Asks `build`'s question as a closed choice: the index of the option chosen, `None`
/// when the backend could not give a valid one.
pub(super) async fn ask(
    env: Addr<EnvironmentActor>,
    llm: LlmClient,
    asked: Asked,
    build: BuildCall,
) -> Result<Option<usize>, SimError> {
    let obs = env.send(Observe(None)).await?;
    let q = build(&asked.scenario, &asked.shown, &obs);
    // A controller chooses who takes the next turn; a judge rules on the last.
    let turn = asked.turns + u64::from(q.kind == CallKind::Route);
    let context = CallContext {
        choices: q.options.clone(),
        ..llm.context(q.kind, &asked.state, turn, None)
    };
    let request = LlmRequest::choice(q.prompt.messages, q.options, asked.settings, context);
    let completion = llm.call(request, None).await?;
    Ok(completion.chosen.map(|c| c.index))
}

/// The `llm` speaker rule's question: which of `offered` takes the next turn.
pub(super) fn controller_call(counter: Arc<dyn TokenCounter>, offered: Vec<String>) -> BuildCall {
    Box::new(move |scenario, state, obs| RoutingCall {
        kind: CallKind::Route,
        prompt: prompt::route_prompt(scenario, state, &offered, obs, counter.as_ref()),
        options: offered,
    })
}

/// The transition judge's question in `state_name`: stay, or go to one of `offered`,
/// offered to the model as `options` (the judge's labels, for configs that answer with
/// labels).
pub(super) fn judge_call(
    counter: Arc<dyn TokenCounter>,
    state_name: String,
    offered: Vec<String>,
    options: Vec<String>,
) -> BuildCall {
    Box::new(move |scenario, state, obs| {
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
    })
}
