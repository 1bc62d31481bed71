//! The Director's decisions, one branch a test, each told as the story of events a
//! run emits: who entered which state, who said what, how the run ended. Each runs a
//! small scenario on the scripted backend, in milliseconds.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::error::CancelToken;
use crate::events::{EventSink, SimEvent, SinkFailure};
use crate::human::LinesInput;
use crate::scenario::Scenario;
use crate::simulation::{RunConfig, RunOutcome, Services};
use sopsim_core::tool_results::Return;

/// The events of a run as lines: `enter STATE/VISIT`, `NAME: TEXT`, `round N [ROLES]`,
/// `end of round N`, `tool NAME: result` or `error` (a tool's), `warning: TEXT` and
/// `ENDED_BY after TURNS`.
#[derive(Default)]
struct Story {
    lines: Mutex<Vec<String>>,
    /// Cancelled when the first message is shown, when set.
    cancel_at_first: Option<CancelToken>,
    /// Given once, as a sink whose file could not be written.
    failure: Mutex<Option<SinkFailure>>,
}

impl EventSink for Story {
    fn emit(&self, event: &SimEvent) {
        let line = match event {
            SimEvent::StateEntered { state, visit } => format!("enter {state}/{visit}"),
            SimEvent::Message(m) => {
                if let Some(cancel) = &self.cancel_at_first {
                    cancel.cancel();
                }
                format!("{}: {}", m.name, m.content)
            }
            SimEvent::RoundStarted { round, roles, .. } => {
                format!("round {round} [{}]", roles.join(", "))
            }
            SimEvent::RoundEnded { round, .. } => format!("end of round {round}"),
            SimEvent::Tool { name, ret, .. } => match **ret {
                Return::Result(_) => format!("tool {name}: result"),
                Return::Error { .. } => format!("tool {name}: error"),
                _ => return,
            },
            SimEvent::Warning { text } => format!("warning: {text}"),
            SimEvent::Finished { ended_by, turns } => format!("{ended_by} after {turns}"),
            _ => return,
        };
        self.lines.lock().unwrap().push(line);
    }

    fn wants_tokens(&self) -> bool {
        false
    }

    fn take_failure(&self) -> Option<SinkFailure> {
        self.failure.lock().unwrap().take()
    }
}

/// A scenario in which Ann plays X and Bo plays Y in every state of `states`, which
/// starts at `start`; `script` is the scripted backend's.
fn document(start: &str, states: Value, script: Value) -> Value {
    let names: Vec<&String> = states.as_object().unwrap().keys().collect();
    let roles =
        |role: &str| -> Value { names.iter().map(|s| ((*s).clone(), json!(role))).collect() };
    json!({
        "name": "director",
        "agents": {
            "Ann": { "roles": roles("X") },
            "Bo": { "roles": roles("Y") },
        },
        "sop": { "start": start, "states": states },
        "script": script,
    })
}

fn loaded(doc: Value) -> Scenario {
    sopsim_core::scenario::from_document(std::path::Path::new("director.json"), doc).unwrap()
}

fn scenario(start: &str, states: Value, script: Value) -> Scenario {
    loaded(document(start, states, script))
}

/// Runs `scenario` with `config` (its sinks replaced by the story): the outcome and
/// the story.
fn run(scenario: Scenario, story: Story, mut config: RunConfig) -> (RunOutcome, Vec<String>) {
    let scenario = Arc::new(scenario);
    let story = Arc::new(story);
    config.sinks = vec![story.clone()];
    let services = Services::scripted(&scenario);
    let outcome = actix::System::new()
        .block_on(crate::simulation::run(scenario, &services, config))
        .unwrap();
    let lines = std::mem::take(&mut *story.lines.lock().unwrap());
    (outcome, lines)
}

fn told(scenario: Scenario) -> Vec<String> {
    run(scenario, Story::default(), RunConfig::default()).1
}

/// `one`, of two turns (X, Y), then `two`, of one (X), then the end: Ann says a1 and
/// a2, Bo b1.
fn one_then_two() -> Scenario {
    let script = json!({ "agents": { "Ann": ["a1", "a2"], "Bo": ["b1"] } });
    let states = json!({
        "one": { "roles": ["X", "Y"], "transition": { "max_turns": 2 }, "next": ["two"] },
        "two": { "roles": ["X", "Y"], "transition": { "max_turns": 1 }, "next": ["end"] },
    });
    scenario("one", states, script)
}

#[test]
fn a_state_gives_its_turns_in_order_then_moves_on_and_the_last_ends_the_run() {
    assert_eq!(
        told(one_then_two()),
        [
            "enter one/1",
            "Ann: a1",
            "Bo: b1",
            "enter two/2",
            "Ann: a2",
            "end after 3"
        ]
    );
}

#[test]
fn a_keyword_in_a_reply_moves_the_run_at_once() {
    let states = json!({
        "one": {
            "roles": ["X", "Y"],
            "transition": { "keywords": [{ "keyword": "done", "to": "end" }] },
            "next": ["end"],
        },
    });
    let script = json!({ "agents": { "Ann": ["go on"], "Bo": ["we are DONE"] } });
    assert_eq!(
        told(scenario("one", states, script)),
        [
            "enter one/1",
            "Ann: go on",
            "Bo: we are DONE",
            "end after 2"
        ]
    );
}

#[test]
fn the_judge_keeps_the_state_until_it_rules_to_move_and_a_bad_ruling_stays() {
    let states = json!({
        "one": { "roles": ["X", "Y"], "transition": { "judge": {} }, "next": ["two"] },
        "two": { "roles": ["X", "Y"], "transition": { "max_turns": 1 }, "next": ["end"] },
    });
    let script = json!({
        "agents": { "Ann": ["a1", "a2", "a3"], "Bo": ["b1"] },
        "transit": ["stay", "nowhere", "two"],
    });
    assert_eq!(
        told(scenario("one", states, script)),
        [
            "enter one/1",
            "Ann: a1",
            "Bo: b1",
            "warning: turn 2: the transition judge gave none of stay, two; staying in one",
            "Ann: a2",
            "enter two/2",
            "Ann: a3",
            "end after 4",
        ]
    );
}

#[test]
fn the_controller_picks_who_speaks_and_a_bad_pick_falls_back_to_the_order() {
    let states = json!({
        "one": {
            "roles": ["X", "Y", "Z"],
            "speaker": { "rule": "llm" },
            "transition": { "max_turns": 3 },
            "next": ["end"],
        },
    });
    // After Ann, the order would give Y; the controller picks Z. After Cy, it names
    // no role offered, and the order's next, X, speaks.
    let script = json!({
        "agents": { "Ann": ["a1", "a2"], "Bo": ["b1"], "Cy": ["c1"] },
        "route": ["Z", "Ann?"],
    });
    let mut doc = document("one", states, script);
    doc["agents"]["Cy"] = json!({ "roles": { "one": "Z" } });
    assert_eq!(
        told(loaded(doc)),
        [
            "enter one/1",
            "Ann: a1",
            "Cy: c1",
            "warning: turn 3: the speaker controller gave none of X, Y; falling back to order: X",
            "Ann: a2",
            "end after 3",
        ]
    );
}

#[test]
fn a_simultaneous_round_is_shown_together_in_the_order_of_the_roles() {
    let states = json!({
        "game": {
            "roles": ["X", "Y"],
            "turns": "simultaneous",
            "transition": { "max_rounds": 1, "on_max_turns": "game", "max_visits": 2 },
            "next": ["game", "end"],
        },
    });
    let script = json!({ "agents": { "Ann": ["a1", "a2"], "Bo": ["b1", "b2"] } });
    assert_eq!(
        told(scenario("game", states, script)),
        [
            "enter game/1",
            "round 1 [X, Y]",
            "Ann: a1",
            "Bo: b1",
            "end of round 1",
            "enter game/2",
            "round 2 [X, Y]",
            "Ann: a2",
            "Bo: b2",
            "end of round 2",
            "end after 4",
        ]
    );
}

#[test]
fn a_persons_turn_takes_their_line_and_input_that_closes_ends_the_run() {
    let states = json!({
        "one": { "roles": ["X", "Y"], "transition": { "max_turns": 6 }, "next": ["end"] },
    });
    let script = json!({ "agents": { "Bo": ["b1", "b2"] } });
    let config = RunConfig {
        humans: vec!["Ann".into()],
        human_input: Some(Arc::new(LinesInput::new(["hello"]))),
        ..RunConfig::default()
    };
    let (outcome, lines) = run(scenario("one", states, script), Story::default(), config);
    assert_eq!(
        lines,
        [
            "enter one/1",
            "Ann: hello",
            "Bo: b1",
            "input_closed after 2"
        ]
    );
    assert_eq!(outcome.transcript.len(), 2, "finished turns are kept");
}

#[test]
fn a_tool_call_and_its_error_are_shown_before_the_reply_they_led_to() {
    let mut scenario = super::super::tests::shipped("shop_assistant.json");
    let script = scenario.script.get_or_insert_with(Default::default);
    script.decisions = [(
        "Mia".to_string(),
        serde_json::from_value(json!([
            { "tool": "calculator", "arguments": { "expression": "2 * 21" } },
            { "tool": "calculator", "arguments": { "expression": "2 *" } },
            "answer",
        ]))
        .unwrap(),
    )]
    .into();
    let config = RunConfig {
        max_turns: Some(2),
        ..RunConfig::default()
    };
    let (outcome, lines) = run(scenario, Story::default(), config);
    let mia: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("tool Mia") || l.starts_with("Mia:"))
        .collect();
    assert_eq!(
        mia[..2],
        ["tool Mia: result", "tool Mia: error"],
        "{lines:?}"
    );
    assert!(mia[2].starts_with("Mia: "), "{lines:?}");
    assert_eq!(lines.last().unwrap(), "max_turns after 2");
    assert!(outcome.transcript.iter().any(|m| m.kind.is_tool()));
}

#[test]
fn a_cancelled_run_ends_interrupted_and_keeps_the_turn_it_finished() {
    let cancel = CancelToken::default();
    let story = Story {
        cancel_at_first: Some(cancel.clone()),
        ..Story::default()
    };
    let config = RunConfig {
        cancel: Some(cancel),
        ..RunConfig::default()
    };
    let (outcome, lines) = run(one_then_two(), story, config);
    assert_eq!(lines, ["enter one/1", "Ann: a1", "interrupted after 1"]);
    assert_eq!(outcome.transcript.len(), 1);
}

#[test]
fn a_spent_token_budget_stops_the_run_at_the_next_turn_boundary() {
    let config = RunConfig {
        max_total_tokens: Some(1),
        ..RunConfig::default()
    };
    let (outcome, lines) = run(one_then_two(), Story::default(), config);
    assert_eq!(lines[..2], ["enter one/1", "Ann: a1"]);
    assert_eq!(lines.last().unwrap(), "budget after 1");
    assert_eq!(outcome.transcript.len(), 1);
}

#[test]
fn the_turn_limit_ends_a_run_that_would_go_on() {
    let config = RunConfig {
        max_turns: Some(2),
        ..RunConfig::default()
    };
    let (_, lines) = run(one_then_two(), Story::default(), config);
    assert_eq!(
        lines,
        [
            "enter one/1",
            "Ann: a1",
            "Bo: b1",
            "enter two/2",
            "max_turns after 2"
        ]
    );
}

#[test]
fn a_record_that_cannot_be_written_stops_the_run_with_its_error() {
    let story = Story {
        failure: Mutex::new(Some(SinkFailure {
            what: "events.jsonl".into(),
            source: std::io::Error::other("disk full"),
        })),
        ..Story::default()
    };
    let (outcome, lines) = run(one_then_two(), story, RunConfig::default());
    assert_eq!(lines, ["enter one/1", "error after 0"]);
    let error = outcome.error.expect("the write's error").to_string();
    assert!(error.contains("events.jsonl"), "{error}");
}
