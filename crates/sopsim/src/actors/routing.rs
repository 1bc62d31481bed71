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

/// The questions asked of the scripted backend, on the debate and a real Environment.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{ask, controller_call, judge_call, Asked, BuildCall};
    use crate::llm::CallKind;
    use crate::scenario::LlmSettings;

    /// `build`'s question in the debate's first state, with `route` and `transit` as
    /// the script's answers: the option chosen, and the kinds of call made.
    fn asked(route: &[&str], transit: &[&str], build: BuildCall) -> (Option<usize>, Vec<CallKind>) {
        let mut scenario = crate::actors::tests::shipped("debate.json");
        let script = scenario.script.get_or_insert_with(Default::default);
        script.route = route.iter().map(|s| s.to_string()).collect();
        script.transit = transit.iter().map(|s| s.to_string()).collect();
        let scenario = Arc::new(scenario);
        actix::System::new().block_on(async {
            let (env, llm) = crate::actors::tests::start(&scenario);
            let state = scenario.sop.start.clone();
            let shown = scenario.sop.states[&state].clone();
            let asked = Asked {
                scenario: scenario.clone(),
                state,
                shown,
                settings: LlmSettings::default(),
                turns: 2,
            };
            let chosen = ask(env, llm.clone(), asked, build).await.unwrap();
            (chosen, llm.ledger().by_kind.keys().copied().collect())
        })
    }

    #[test]
    fn the_controller_is_asked_who_speaks_and_its_answer_is_an_index() {
        let offered = vec!["Lead".to_string(), "Support".to_string()];
        let counter = Arc::new(crate::llm::Estimator);
        let (chosen, kinds) = asked(&["Support"], &[], controller_call(counter, offered));
        assert_eq!(chosen, Some(1));
        assert_eq!(kinds, [CallKind::Route]);
    }

    #[test]
    fn the_judge_rules_with_the_options_it_is_offered() {
        let counter = Arc::new(crate::llm::Estimator);
        let call = |answer: &str| {
            let build = judge_call(
                counter.clone(),
                "affirmative_prep".into(),
                vec!["negative_prep".into()],
                vec!["stay".into(), "negative_prep".into()],
            );
            asked(&[], &[answer], build)
        };
        assert_eq!(call("negative_prep"), (Some(1), vec![CallKind::Transit]));
        assert_eq!(call("stay").0, Some(0));
    }
}
