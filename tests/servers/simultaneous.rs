//! Simultaneous rounds: every role acts on the same information, with its call in
//! flight at the same time as the others', and the round is committed in the order of
//! the state's roles whatever order the replies came back in — with retrieval,
//! summaries and choices too, with tools, and replayed at any number of jobs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::server::{mark_of, role_of, GatedServer};
use crate::common::*;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use sopsim::events::{EventSink, SimEvent};
use sopsim::llm::openai::{OpenAiBackend, OpenAiOptions, RetryPolicy};
use sopsim::llm::{
    CallKind, Completion, LlmBackend, LlmError, LlmRequest, ScriptedBackend, TokenSink,
};
use sopsim::scenario::{FieldPath, OutcomeRules, Scenario, ScenarioBuilder, StateBuilder, Turns};
use sopsim::simulation::RunOutcome;
use sopsim::RunIo;

fn game() -> Scenario {
    let mut s = ScenarioBuilder::new("rounds")
        .agent("Ada", |a| a.plays("round", "North"))
        .agent("Bo", |a| a.plays("round", "South"))
        .state(
            "round",
            StateBuilder::new(["North", "South"])
                .environment_prompt("A game of two, three rounds.")
                .max_turns(2)
                .next(["round", "end"]),
        )
        .build()
        .unwrap();
    let st = &mut s.sop.states["round"];
    st.turns = Turns::Simultaneous;
    st.transition.on_max_turns = Some("round".into());
    st.transition.max_visits = Some(3);
    st.transition.on_max_visits = Some("end".into());
    s.environment.max_chat_history = 50;
    s.environment.top_k = 0;
    s
}

/// A scenario from a JSON document, loaded as a file is.
fn load(doc: Value) -> Scenario {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    sopsim::load(path.as_path(), &[])
        .unwrap_or_else(|e| panic!("{}", sopsim::error::chain(&e)))
        .scenario
}

/// Four rounds with retrieval (`top_k`), a summary due every three messages, and a
/// choice after each reply.
fn game_with_memory() -> Scenario {
    let component = |name: &str| {
        json!({ "task": "Say in one sentence how you play.",
                "choice": { "values": ["LEFT", "RIGHT"], "prompt": format!("{name}, choose.") } })
    };
    load(json!({
        "name": "rounds_with_memory",
        "environment": { "type": "cooperative", "max_chat_history": 3, "top_k": 2 },
        "agents": {
            "Ada": { "roles": { "round": "North" } },
            "Bo": { "roles": { "round": "South" } }
        },
        "sop": { "start": "round", "states": { "round": {
            "roles": ["North", "South"],
            "turns": "simultaneous",
            "environment_prompt": "A game of two, four rounds.",
            "components": { "North": component("Ada"), "South": component("Bo") },
            "transition": { "max_turns": 2, "on_max_turns": "round", "max_visits": 4, "on_max_visits": "end" },
            "next": ["round", "end"]
        } } }
    }))
}

fn backend(base: &str) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiOptions {
        base_url: base.into(),
        api_key: None,
        model: Some("test-model".into()),
        stream: false,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(600),
        retry: RetryPolicy {
            attempts: 1,
            base: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
        },
        concurrency: 8,
    })
    .unwrap()
}

/// Plays `scenario` against a server that answers each round's requests in `order` of
/// the roles; checks the replies went out in that order.
fn play_against(scenario: Scenario, order: &[&str]) -> (RunOutcome, GatedServer) {
    let server = GatedServer::start(2, order);
    let outcome = run_on(
        scenario,
        &services_with(Arc::new(backend(&server.base))),
        |o| o,
        RunIo::default(),
    )
    .unwrap();
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(*server.lonely.lock().unwrap(), 0, "every group filled");
    let completed = server.completed.lock().unwrap().clone();
    for group in completed.chunks(2) {
        assert_eq!(group, order, "the replies went out in the order asked");
    }
    (outcome, server)
}

fn play(order: &[&str]) -> (String, GatedServer) {
    let (outcome, server) = play_against(game(), order);
    assert_eq!(outcome.summary.turns, 6, "three rounds of two turns");
    (jsonl(&outcome), server)
}

#[test]
fn every_role_acts_on_the_same_information_with_its_call_in_flight_at_once() {
    let (transcript, server) = play(&["North", "South"]);
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 6);
    for round in requests.chunks(2) {
        let marks: Vec<String> = round.iter().map(mark_of).collect();
        for r in round {
            let text = r["messages"].to_string();
            for m in &marks {
                assert!(
                    !text.contains(m.as_str()),
                    "a request holds a reply of its own round: {text}"
                );
            }
        }
    }
    // Later rounds see the earlier ones (cooperative mode).
    assert!(requests[2]["messages"]
        .to_string()
        .contains(&mark_of(&requests[0])));
    let roles: Vec<String> = transcript
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["role"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        roles,
        ["North", "South", "North", "South", "North", "South"],
        "each round in the order of roles"
    );
}

#[test]
fn a_round_is_the_same_bytes_when_the_replies_come_back_in_reverse() {
    let (forward, _) = play(&["North", "South"]);
    let (reverse, _) = play(&["South", "North"]);
    assert_eq!(forward, reverse);
}

/// Each reply of the transcript: (visit, role, content).
fn replies(outcome: &RunOutcome) -> Vec<(u32, String, String)> {
    outcome
        .transcript
        .iter()
        .map(|m| (m.visit, m.role.clone(), m.content.clone()))
        .collect()
}

/// No request of a round holds anything of that round: neither a reply of the round's
/// other roles nor a summary made from one; and a summary is made from whole rounds.
fn assert_no_same_round_leak(requests: &[Value], outcome: &RunOutcome) {
    let replies = replies(outcome);
    let held = |text: &str| -> Vec<(u32, String)> {
        replies
            .iter()
            .filter(|(_, _, content)| text.contains(content.as_str()))
            .map(|(v, role, _)| (*v, role.clone()))
            .collect()
    };
    // Each summary's mark, and the last round it was made from.
    let mut summaries = BTreeMap::new();
    for r in requests.iter().filter(|r| role_of(r).is_none()) {
        let seen = held(&r["messages"].to_string());
        let last = seen
            .iter()
            .map(|(v, _)| *v)
            .max()
            .expect("a summary of something");
        let whole = replies
            .iter()
            .filter(|(v, _, _)| *v == last)
            .all(|(v, role, _)| seen.contains(&(*v, role.clone())));
        assert!(
            whole,
            "a summary made in the middle of round {last}: {seen:?}"
        );
        summaries.insert(format!("Summary {}.", mark_of(r)), last);
    }
    assert!(!summaries.is_empty(), "a summary fell due during the game");
    for r in requests {
        let Some(role) = role_of(r) else { continue };
        let text = r["messages"].to_string();
        let seen = held(&text);
        // A reply carries its request's mark; a choice shows the role's own reply.
        let round = replies
            .iter()
            .find(|(_, _, content)| content.contains(&mark_of(r)))
            .map(|(v, _, _)| *v)
            .or_else(|| {
                seen.iter()
                    .filter(|(_, who)| *who == role)
                    .map(|(v, _)| *v)
                    .max()
            })
            .unwrap_or(1);
        for (v, who) in &seen {
            assert!(
                !(*v == round && *who != role),
                "{role}'s request in round {round} holds {who}'s reply of that round"
            );
        }
        for (summary, last) in &summaries {
            if text.contains(summary.as_str()) {
                assert!(
                    *last < round,
                    "{role} saw in round {round} a summary of round {last}"
                );
            }
        }
    }
}

#[test]
fn retrieval_summaries_and_choices_see_nothing_of_their_own_round_in_either_order() {
    let (forward, server) = play_against(game_with_memory(), &["North", "South"]);
    let requests = server.requests.lock().unwrap().clone();
    assert_no_same_round_leak(&requests, &forward);
    let choices = requests
        .iter()
        .filter(|r| r.get("response_format").is_some())
        .count();
    assert_eq!(choices, 8, "a choice per turn");
    assert!(forward.transcript.iter().all(|m| m.decision.is_some()));
    let (reverse, server) = play_against(game_with_memory(), &["South", "North"]);
    assert_no_same_round_leak(&server.requests.lock().unwrap(), &reverse);
    assert_eq!(jsonl(&forward), jsonl(&reverse));
    assert_eq!(forward.environment, reverse.environment);
}

/// The payoffs of the golden run of `name`, by hand: for every round (visit), each
/// player's payoff from all the round's choices.
fn payoffs_by_hand(name: &str, pay: impl Fn(&str, &[String]) -> f64) -> BTreeMap<String, f64> {
    let golden =
        std::fs::read_to_string(root().join("tests/golden").join(format!("{name}.jsonl"))).unwrap();
    let mut rounds: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new();
    for line in golden.lines() {
        let m: Value = serde_json::from_str(line).unwrap();
        let value = m["decision"]["value"].as_str().expect("every turn chose");
        rounds
            .entry(m["visit"].as_u64().unwrap())
            .or_default()
            .push((m["name"].as_str().unwrap().to_string(), value.to_string()));
    }
    let mut total = BTreeMap::new();
    for round in rounds.values() {
        let all: Vec<String> = round.iter().map(|(_, v)| v.clone()).collect();
        for (name, own) in round {
            *total.entry(name.clone()).or_insert(0.0) += pay(own, &all);
        }
    }
    total
}

fn rules(name: &str) -> OutcomeRules {
    let s = example(name);
    OutcomeRules::compile(
        s.outcomes.as_ref().unwrap(),
        &s,
        &FieldPath::root().key("outcomes"),
    )
    .unwrap()
}

#[test]
fn the_scripted_games_are_simultaneous_and_pay_from_every_choice_of_the_round() {
    for name in ["prisoners_dilemma", "public_goods"] {
        let scenario = example(name);
        let (outcome, requests) = run_recorded(&scenario, None, 0, &[]);
        // No request of a round holds another player's message of that round.
        for r in &requests {
            let (Some(agent), Some(visit)) = (
                r.context.agent.as_deref(),
                visit_of(&outcome, r.context.turn),
            ) else {
                continue;
            };
            let prompt: String = r.messages.iter().map(|x| x.content.as_str()).collect();
            for other in outcome
                .transcript
                .iter()
                .filter(|o| o.visit == visit && o.name != agent)
            {
                assert!(
                    !prompt.contains(&other.render()),
                    "{name}: {agent} saw {:?} in its own round",
                    other.render()
                );
            }
        }
        assert_eq!(outcome.summary.ended_by.as_str(), "end");
        // The golden run is this run.
        let golden =
            std::fs::read_to_string(root().join("tests/golden").join(format!("{name}.jsonl")))
                .unwrap();
        assert_eq!(
            jsonl(&outcome),
            golden,
            "{name}: tests/golden is out of date"
        );
        let transcript: Vec<_> = outcome.transcript.iter().map(|m| (**m).clone()).collect();
        let figures = sopsim_bench::extract::outcome_figures(&rules(name), &transcript, 0).unwrap();
        let expected = match name {
            "prisoners_dilemma" => payoffs_by_hand(name, |own, all| {
                let other = all.iter().find(|v| *v != own).unwrap_or(&all[0]);
                match (own, other.as_str()) {
                    ("COOPERATE", "COOPERATE") => 3.0,
                    ("COOPERATE", _) => 0.0,
                    (_, "COOPERATE") => 5.0,
                    _ => 1.0,
                }
            }),
            _ => payoffs_by_hand(name, |own, all| {
                let sum: f64 = all.iter().map(|v| v.parse::<f64>().unwrap()).sum();
                10.0 - own.parse::<f64>().unwrap() + 1.6 * sum / all.len() as f64
            }),
        };
        assert_eq!(
            expected.len(),
            scenario.agents.len(),
            "{name}: everyone played"
        );
        for (player, pay) in &expected {
            let got = figures[&format!("payoff.{player}")].unwrap();
            assert!(
                (got - pay).abs() < 1e-9,
                "{name}: {player} got {got}, by hand {pay}"
            );
        }
        assert_eq!(figures["decision_failures"], Some(0.0), "{name}");
    }
}

/// The visit a turn number belongs to.
fn visit_of(outcome: &RunOutcome, turn: u64) -> Option<u32> {
    outcome
        .transcript
        .get(turn.checked_sub(1)? as usize)
        .map(|m| m.visit)
}

/// The scripted backend with one agent's calls slowed down, so the other's turn of a
/// round finishes first.
struct Slowed {
    inner: ScriptedBackend,
    slow: String,
    requests: Mutex<Vec<LlmRequest>>,
}

impl LlmBackend for Slowed {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        self.requests.lock().unwrap().push(request.clone());
        Box::pin(async move {
            if request.context.agent.as_deref() == Some(self.slow.as_str()) {
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            self.inner.complete(request, stream).await
        })
    }
}

/// Every tool event and message, as shown.
#[derive(Default)]
struct Shown(Mutex<Vec<Value>>);

impl EventSink for Shown {
    fn emit(&self, event: &SimEvent) {
        let v = match event {
            SimEvent::Tool { name, ret, .. } => json!({ "tool_event": name, "ret": ret }),
            SimEvent::Message(m) => json!({ "message": m }),
            _ => return,
        };
        self.0.lock().unwrap().push(v);
    }
}

/// Two rounds in which both players use the calculator and look in the store.
fn calculating_game() -> Scenario {
    let tools = json!({ "task": "Report your number.", "tools": ["calculator", "store_query"] });
    let calc = |e: &str| json!({ "tool": "calculator", "arguments": { "expression": e } });
    let look = json!({ "tool": "store_query", "arguments": { "tool": "calculator" } });
    load(json!({
        "name": "calculating_round",
        "environment": { "type": "cooperative", "max_chat_history": 50, "top_k": 0 },
        "agents": {
            "Ada": { "roles": { "round": "North" } },
            "Bo": { "roles": { "round": "South" } }
        },
        "tools": {
            "calculator": { "kind": "calculator", "description": "Arithmetic." },
            "store_query": { "kind": "store_query", "description": "Results stored so far." }
        },
        "sop": { "start": "round", "states": { "round": {
            "roles": ["North", "South"],
            "turns": "simultaneous",
            "components": { "North": tools, "South": tools },
            "transition": { "max_turns": 2, "on_max_turns": "round", "max_visits": 2, "on_max_visits": "end" },
            "next": ["round", "end"]
        } } },
        "script": { "decisions": {
            // Round 1: a number each, and Bo looks in the store; round 2: Ada looks.
            "Ada": [calc("6007*7"), "answer", look, "answer"],
            "Bo": [calc("1111*3"), look, "answer", "answer"]
        } }
    }))
}

fn play_tools(slow: &str) -> (RunOutcome, Vec<Value>, Vec<LlmRequest>) {
    let scenario = calculating_game();
    let llm = Arc::new(Slowed {
        inner: ScriptedBackend::new(scenario.script.clone()),
        slow: slow.into(),
        requests: Mutex::default(),
    });
    let shown = Arc::new(Shown::default());
    let io = RunIo {
        sinks: vec![shown.clone()],
        ..RunIo::default()
    };
    let outcome = run_on(scenario, &services_with(llm.clone()), |o| o, io).unwrap();
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    let shown = shown.0.lock().unwrap().clone();
    let requests = llm.requests.lock().unwrap().clone();
    (outcome, shown, requests)
}

#[test]
fn tools_of_a_round_are_invisible_to_its_other_turns_and_land_in_the_order_of_roles() {
    let (ada_last, shown, requests) = play_tools("Ada");
    let (bo_last, shown_too, _) = play_tools("Bo");
    // Whoever finished first, the same bytes: transcript, store and what was shown.
    assert_eq!(jsonl(&ada_last), jsonl(&bo_last));
    assert_eq!(ada_last.environment, bo_last.environment);
    assert_eq!(shown, shown_too);

    // In round 1 (turns 1 and 2) neither saw the other's number, in any prompt.
    for r in requests.iter().filter(|r| r.context.turn <= 2) {
        let (own, other) = match r.context.agent.as_deref() {
            Some("Ada") => ("42049", "3333"),
            Some("Bo") => ("3333", "42049"),
            _ => continue,
        };
        let text = prompt_text(r);
        assert!(
            !text.contains(other),
            "{:?} saw {other}: {text}",
            r.context.agent
        );
        if r.context.kind == CallKind::Act {
            assert!(
                text.contains(own),
                "the reply is built on its own result: {text}"
            );
        }
    }
    // Bo's look in round 1 found only its own result; Ada's in round 2 found both.
    let looks: Vec<&Value> = shown
        .iter()
        .filter(|e| e["ret"]["kind"] == "result" && e["ret"]["name"] != "calculator")
        .filter(|e| e["ret"]["objects"].to_string().contains("expression"))
        .collect();
    let values = |e: &Value| -> Vec<String> {
        e["ret"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].to_string())
            .collect()
    };
    assert_eq!(looks.len(), 2, "{looks:?}");
    assert_eq!(looks[0]["tool_event"], "Bo");
    assert_eq!(values(looks[0]), ["3333"]);
    assert_eq!(looks[1]["tool_event"], "Ada");
    assert_eq!(values(looks[1]), ["42049", "3333"]);

    // Committed in the order of roles: Ada's result is the first entry, Bo's the
    // second, and every line and event names Bo's object by its id in the store.
    let stored = &ada_last.environment.store["calculator"];
    let (key, entries) = stored.as_object().unwrap().iter().next().unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["metadata"]["_agent"], "Ada");
    assert_eq!(entries[1]["metadata"]["_agent"], "Bo");
    let bo_ref = entries[1]["objects"][0]["_REF_ID"].as_str().unwrap();
    assert_eq!(bo_ref, format!("calculator_{key}_1_0"));
    let bo_line = ada_last
        .transcript
        .iter()
        .find(|m| m.name == "Bo" && m.content.starts_with("calculator:"))
        .unwrap();
    assert!(
        bo_line.content.ends_with(&format!("[{bo_ref}]")),
        "{}",
        bo_line.content
    );
    assert_eq!(
        looks[0]["ret"]["objects"][0]["_REF_ID"], bo_ref,
        "renamed in Bo's look"
    );
    let bo_result = shown
        .iter()
        .find(|e| e["tool_event"] == "Bo" && e["ret"]["kind"] == "result")
        .unwrap();
    assert_eq!(bo_result["ret"]["objects"][0]["_REF_ID"], bo_ref);
    // Each turn's tool events come just before its messages, in the order of roles.
    let who: Vec<String> = shown
        .iter()
        .map(|e| {
            e["tool_event"]
                .as_str()
                .or(e["message"]["name"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    let first_bo = who.iter().position(|n| n == "Bo").unwrap();
    assert!(who[..first_bo].iter().all(|n| n == "Ada"));
    assert!(who[first_bo..].iter().take_while(|n| *n == "Bo").count() > 1);
}

fn sopsim() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

/// Every run's transcript under a bench folder, by run.
fn transcripts(out: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![out.join("runs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "transcript.jsonl") {
                let run = p.parent().unwrap().strip_prefix(out).unwrap();
                found.insert(
                    run.display().to_string(),
                    std::fs::read_to_string(&p).unwrap(),
                );
            }
        }
    }
    found
}

#[test]
fn a_recorded_simultaneous_bench_replays_byte_for_byte_at_one_and_four_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let pd = root().join("scenarios/prisoners_dilemma.json");
    let rec = dir.path().join("rec");
    // Answered as they come: what is recorded is whatever order the server saw.
    let server = GatedServer::start(1, &[]);
    let bench = |base: &str, tape: &str, jobs: &str, out: &str| {
        let o = sopsim()
            .arg("bench")
            .arg(&pd)
            .args([
                "--llm",
                "openai",
                "--model",
                "test-model",
                "--base-url",
                base,
            ])
            .args([
                "--embedder",
                "hash",
                "--seeds",
                "2",
                "--quiet",
                "--jobs",
                jobs,
            ])
            .arg(tape)
            .arg(&rec)
            .arg("--out")
            .arg(dir.path().join(out))
            .env("OPENAI_API_KEY", "sk-test")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let report = std::fs::read_to_string(dir.path().join(out).join("report.md"));
        assert!(
            o.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&o.stderr),
            report.unwrap_or_default()
        );
        transcripts(&dir.path().join(out))
    };
    let recorded = bench(&server.base, "--record", "2", "recorded");
    assert_eq!(
        recorded.len(),
        4,
        "two seeds in two modes: {:?}",
        recorded.keys()
    );
    assert!(
        recorded.values().all(|t| t.lines().count() == 10),
        "five rounds of two"
    );
    let asked = server.requests.lock().unwrap().len();
    for jobs in ["1", "4"] {
        let replayed = bench(
            "http://127.0.0.1:9",
            "--replay",
            jobs,
            &format!("jobs-{jobs}"),
        );
        assert_eq!(replayed, recorded, "--jobs {jobs}");
    }
    assert_eq!(
        server.requests.lock().unwrap().len(),
        asked,
        "the replays asked nothing"
    );
}
