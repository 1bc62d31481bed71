//! What a user relies on: the two modes, summaries agents can see, the controller's and
//! judge's handling of bad answers, prompt budgets and turn limits.

use std::sync::Arc;

use crate::common::*;
use sopsim::llm::{CallKind, ScriptedBackend};
use sopsim::scenario::{JudgePrompts, Mode, ScenarioBuilder, Script, SpeakerRule, StateBuilder};
use sopsim::{RunIo, RunOptions};

/// Prompts of `agent`'s own turns in `state`.
fn act_prompts(reqs: &[sopsim::llm::LlmRequest], agent: &str, state: &str) -> Vec<String> {
    reqs.iter()
        .filter(|r| {
            r.context.kind == CallKind::Act
                && r.context.agent.as_deref() == Some(agent)
                && r.context.state == state
        })
        .map(prompt_text)
        .collect()
}

const AFFIRMATIVE_PLAN: &str = "Our strongest point is health";

#[test]
fn competitive_mode_keeps_earlier_states_out_of_an_agents_prompt() {
    let (_, reqs) = run_recorded(&example("debate"), Some(Mode::Competitive), 0, &[]);
    let dan = act_prompts(&reqs, "Dan", "negative_prep");
    assert!(!dan.is_empty());
    for p in &dan {
        assert!(
            !p.contains(AFFIRMATIVE_PLAN),
            "the negative team saw the affirmative plan:\n{p}"
        );
        assert!(
            p.contains("How do we argue against the car ban"),
            "it sees its own state"
        );
    }
}

#[test]
fn cooperative_mode_shows_earlier_states() {
    let (_, reqs) = run_recorded(&example("debate"), Some(Mode::Cooperative), 0, &[]);
    let dan = act_prompts(&reqs, "Dan", "negative_prep");
    assert!(dan.iter().all(|p| p.contains(AFFIRMATIVE_PLAN)), "{dan:?}");
}

#[test]
fn the_mode_flag_overrides_the_scenario_and_is_reported() {
    let (outcome, _) = run_recorded(&example("debate"), Some(Mode::Cooperative), 0, &[]);
    assert_eq!(outcome.summary.mode, Mode::Cooperative);
}

fn long_chat(max_chat_history: usize, mode: Mode) -> sopsim::scenario::Scenario {
    ScenarioBuilder::new("chat")
        .mode(mode)
        .environment(|e| {
            e.max_chat_history = max_chat_history;
            e.top_k = 2;
        })
        .agent("A", |a| a.plays("one", "X").plays("two", "X"))
        .agent("B", |a| a.plays("one", "Y").plays("two", "Y"))
        .state(
            "one",
            StateBuilder::new(["X", "Y"]).max_turns(7).next(["two"]),
        )
        .state(
            "two",
            StateBuilder::new(["X", "Y"]).max_turns(7).next(["end"]),
        )
        .script(Script {
            summary: Some("SUMMARY@{turn}".into()),
            ..Script::default()
        })
        .build()
        .unwrap()
}

#[test]
fn a_summary_is_made_every_max_chat_history_messages_and_agents_see_it() {
    let (outcome, reqs) = run_recorded(&long_chat(3, Mode::Cooperative), None, 0, &[]);
    assert_eq!(outcome.summary.turns, 14);
    assert_eq!(outcome.summary.llm_calls["summary"], 14 / 3);
    let acts: Vec<&sopsim::llm::LlmRequest> = reqs
        .iter()
        .filter(|r| r.context.kind == CallKind::Act)
        .collect();
    assert!(
        !prompt_text(acts[2]).contains("SUMMARY@"),
        "no summary before the third message"
    );
    assert!(
        prompt_text(acts[3]).contains("SUMMARY@3"),
        "turn 4 sees the summary made at turn 3"
    );
    assert!(
        prompt_text(acts[13]).contains("SUMMARY@12"),
        "the latest summary replaces older ones"
    );
}

#[test]
fn competitive_summaries_restart_with_each_visit() {
    let (outcome, reqs) = run_recorded(&long_chat(3, Mode::Competitive), None, 0, &[]);
    assert_eq!(
        outcome.summary.llm_calls["summary"], 4,
        "7 turns per visit: 2 summaries each"
    );
    let first_of_two = reqs
        .iter()
        .find(|r| r.context.kind == CallKind::Act && r.context.state == "two")
        .unwrap();
    assert!(
        !prompt_text(first_of_two).contains("SUMMARY@"),
        "a new visit starts without the old summary"
    );
}

fn routed(route: &[&str]) -> sopsim::scenario::Scenario {
    ScenarioBuilder::new("routed")
        .agent("A", |a| a.plays("s", "Host"))
        .agent("B", |a| a.plays("s", "Left"))
        .agent("C", |a| a.plays("s", "Right"))
        .state(
            "s",
            StateBuilder::new(["Host", "Left", "Right"])
                .begin("Host", "Who goes first?")
                .speaker(SpeakerRule::Llm {
                    system_prompt: None,
                    last_prompt: None,
                    extract_words: None,
                })
                .max_turns(3)
                .next(["end"]),
        )
        .script(Script {
            route: route.iter().map(|s| s.to_string()).collect(),
            ..Script::default()
        })
        .build()
        .unwrap()
}

#[test]
fn a_controller_answer_naming_no_offered_role_falls_back_to_order_with_a_warning() {
    let (outcome, reqs) = run_recorded(&routed(&["nobody", "<end>Left</end>"]), None, 0, &[]);
    let speakers: Vec<&str> = outcome.transcript.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(speakers, ["Host", "Left", "Right"], "fallback after Host is Left (order); then the script says Left again, which is not offered, so order again");
    let routes: Vec<_> = reqs
        .iter()
        .filter(|r| r.context.kind == CallKind::Route)
        .collect();
    assert_eq!(routes.len(), 2, "one closed choice per decision");
    assert_eq!(
        routes[0].options.as_deref(),
        Some(&["Left".to_string(), "Right".to_string()][..])
    );
    assert_eq!(
        routes[0].context.choices,
        ["Left", "Right"],
        "the last speaker is not offered"
    );
    assert_eq!(outcome.summary.warnings.len(), 2);
    assert!(
        outcome.summary.warnings[0].contains("falling back to order: Left"),
        "{:?}",
        outcome.summary.warnings
    );
}

#[test]
fn a_valid_controller_answer_is_followed() {
    let (outcome, _) = run_recorded(&routed(&["Right", "the Host should speak"]), None, 0, &[]);
    let speakers: Vec<&str> = outcome.transcript.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(speakers, ["Host", "Right", "Host"]);
    assert!(outcome.summary.warnings.is_empty());
}

#[test]
fn an_invalid_judge_answer_means_stay_with_a_warning() {
    let scenario = ScenarioBuilder::new("judged")
        .agent("A", |a| a.plays("talk", "R").plays("wrap", "R"))
        .state(
            "talk",
            StateBuilder::new(["R"])
                .judge(JudgePrompts::default())
                .next(["wrap"]),
        )
        .state("wrap", StateBuilder::new(["R"]).max_turns(1).next(["end"]))
        .script(Script {
            transit: vec!["banana".into(), "stay".into(), "wrap".into()],
            ..Script::default()
        })
        .build()
        .unwrap();
    let (outcome, reqs) = run_recorded(&scenario, None, 0, &[]);
    let states: Vec<&str> = outcome
        .transcript
        .iter()
        .map(|m| m.state.as_str())
        .collect();
    assert_eq!(states, ["talk", "talk", "talk", "wrap"]);
    assert_eq!(outcome.summary.warnings.len(), 1);
    assert!(outcome.summary.warnings[0].contains("staying in talk"));
    let judge = reqs
        .iter()
        .find(|r| r.context.kind == CallKind::Transit)
        .unwrap();
    assert_eq!(judge.context.choices, ["stay", "wrap"]);
}

#[test]
fn no_prompt_exceeds_the_budget() {
    for budget in [120, 200, 400] {
        let mut s = example("design_review");
        s.environment.prompt_token_budget = budget;
        for comps in s
            .sop
            .states
            .values_mut()
            .flat_map(|st| st.components.values_mut())
        {
            comps.output = None;
        }
        let (_, reqs) = run_recorded(&s, None, 1, &[]);
        assert!(!reqs.is_empty());
        for r in &reqs {
            let tokens: usize = r
                .messages
                .iter()
                .map(|m| {
                    sopsim::llm::TokenCounter::count(&sopsim::llm::Estimator, &m.content)
                        + sopsim::llm::MESSAGE_OVERHEAD
                })
                .sum();
            assert!(
                tokens <= budget,
                "{:?} prompt of {tokens} tokens over {budget}",
                r.context.kind
            );
        }
    }
}

#[test]
fn the_turn_limit_ends_the_run() {
    let s = example("debate");
    let outcome = run_on(
        s.clone(),
        &services_with(Arc::new(ScriptedBackend::new(s.script.clone()))),
        |o| RunOptions {
            max_turns: Some(4),
            ..o
        },
        RunIo::default(),
    )
    .unwrap();
    assert_eq!(
        (outcome.summary.turns, outcome.summary.ended_by.as_str()),
        (4, "max_turns")
    );
    assert_eq!(outcome.transcript.len(), 4);
}

#[test]
fn human_input_ending_ends_the_run_cleanly() {
    let (outcome, _) = run_recorded(&example("customer_service"), None, 0, &["Hello?"]);
    assert_eq!(outcome.summary.ended_by.as_str(), "input_closed");
    assert_eq!(
        outcome.transcript.len(),
        3,
        "opening, the human's line, the reply; then input ended"
    );
    assert!(outcome.error.is_none());
}

#[test]
fn an_unknown_human_is_bad_input() {
    let s = example("debate");
    let err = run_on(
        s.clone(),
        &services_with(Arc::new(ScriptedBackend::new(None))),
        |o| RunOptions {
            humans: vec!["Zed".into()],
            ..o
        },
        RunIo::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, sopsim::RunError::Sim(sopsim::error::SimError::UnknownHuman { name, .. }) if name == "Zed"),
        "{err}"
    );
    assert!(err.is_bad_input());
}

/// A model that draws four candidates a reply: the first candidate of Ben's first
/// reply carries Mia's label, every other candidate is clean and says which it is.
struct FourCandidates {
    asked: std::sync::Mutex<Vec<(String, u32)>>,
}

impl sopsim::llm::LlmBackend for FourCandidates {
    fn describe(&self) -> String {
        "four candidates".into()
    }
    fn candidates(&self) -> u32 {
        4
    }
    fn complete<'a>(
        &'a self,
        request: sopsim::llm::LlmRequest,
        _stream: Option<sopsim::llm::TokenSink>,
    ) -> futures::future::BoxFuture<'a, Result<sopsim::llm::Completion, sopsim::llm::LlmError>>
    {
        let agent = request.context.agent.clone().unwrap_or_default();
        let mut asked = self.asked.lock().unwrap();
        let first_of_ben = agent == "Ben" && !asked.iter().any(|(a, _)| a == "Ben");
        let text = if first_of_ben && request.candidate == 0 {
            "Mia: cars must go from the old town.".to_string()
        } else if request.context.kind == CallKind::Act {
            format!(
                "Candidate {} of {agent} says the streets are full.",
                request.candidate
            )
        } else {
            "Ada".to_string()
        };
        if request.context.kind == CallKind::Act {
            asked.push((agent, request.candidate));
        }
        Box::pin(async move {
            Ok(sopsim::llm::Completion::text(
                text,
                Default::default(),
                "m".into(),
            ))
        })
    }
}

/// A reply's first candidate is drawn alone and kept when it has no flaw; when it has
/// one, the other three are drawn and the first of them without a flaw is kept.
#[test]
fn the_other_candidates_are_drawn_only_when_the_first_is_flawed() {
    let backend = Arc::new(FourCandidates {
        asked: Default::default(),
    });
    let services = services_with(backend.clone());
    let outcome = run_on(
        example("debate"),
        &services,
        |o| RunOptions {
            max_turns: Some(3),
            ..o
        },
        RunIo::default(),
    )
    .unwrap();
    let replies: Vec<&str> = outcome
        .transcript
        .iter()
        .skip(1) // The debate's opening line.
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        replies,
        [
            "Candidate 1 of Ben says the streets are full.",
            "Candidate 0 of Ada says the streets are full."
        ]
    );
    let asked = backend.asked.lock().unwrap().clone();
    let of = |agent: &str| -> Vec<u32> {
        asked
            .iter()
            .filter(|(a, _)| a == agent)
            .map(|(_, c)| *c)
            .collect()
    };
    assert_eq!(of("Ben"), [0, 1, 2, 3]);
    assert_eq!(of("Ada"), [0]);
}
