//! Tools and the decision agent, end to end: the example scenarios' golden transcripts
//! with scripted decisions, the loop against an OpenAI-compatible server on 127.0.0.1
//! (native tool calls whole and streamed, JSON decisions, errors that heal, the step
//! and retry limits), the loopback-only `http` tool, record and replay of its results,
//! and what each team may see of the store in competitive and cooperative mode.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::server::*;
use crate::common::*;
use serde_json::{json, Value};
use sopsim::llm::openai::{OpenAiBackend, OpenAiOptions, RetryPolicy};
use sopsim::llm::record::{Recorder, Replayer};
use sopsim::llm::{LlmBackend, ScriptedBackend};
use sopsim::scenario::{self, Mode, Scenario};
use sopsim::simulation::MessageKind;
use sopsim::simulation::RunOutcome;
use sopsim::{RunIo, RunOptions};

fn scenario_from(doc: Value) -> Scenario {
    scenario_with(doc, &[])
}

/// A scenario in a folder of its own that lives as long as the test, with `files`
/// copied in beside it.
fn scenario_with(doc: Value, files: &[(&str, std::path::PathBuf)]) -> Scenario {
    let dir = tempfile::tempdir().unwrap().keep();
    for (name, from) in files {
        let to = dir.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
    let path = dir.join("s.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    sopsim::load(path.as_path(), &[])
        .unwrap_or_else(|e| panic!("{}", sopsim::error::chain(&e)))
        .scenario
}

/// One worker with a calculator and dice, `steps` decisions per turn.
fn worker(steps: u32, llm: Value) -> Scenario {
    scenario_from(json!({
        "name": "tool_loop",
        "llm": llm,
        "agents": {"Ada": {"roles": {"work": "Worker"}}},
        "tools": {
            "calculator": {"kind": "calculator", "description": "Arithmetic."},
            "dice": {"kind": "dice", "description": "Roll dice."}
        },
        "sop": {"start": "work", "max_turns": 1, "states": {"work": {
            "roles": ["Worker"],
            "components": {"Worker": {"task": "Compute 6 times 7.", "tools": ["calculator", "dice"], "max_tool_steps": steps}},
            "transition": {"max_turns": 1},
            "next": ["end"]
        }}}
    }))
}

fn openai(server: &Server, stream: bool) -> Arc<dyn LlmBackend> {
    Arc::new(
        OpenAiBackend::new(OpenAiOptions {
            base_url: server.base.clone(),
            api_key: None,
            model: Some("test-model".into()),
            stream,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(600),
            retry: RetryPolicy {
                attempts: 1,
                base: Duration::from_millis(10),
                max_delay: Duration::from_millis(50),
            },
            concurrency: 4,
        })
        .unwrap(),
    )
}

fn run(scenario: Scenario, llm: Arc<dyn LlmBackend>) -> RunOutcome {
    run_on(scenario, &services_with(llm), |o| o, RunIo::default()).unwrap()
}

fn call(name: &str, args: &str) -> Reply {
    Reply::Calls(vec![(name.to_string(), args.to_string())])
}

/// The chat requests the server saw (not embeddings or model lists).
fn chats(server: &Server) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|(head, _)| head.starts_with("POST /v1/chat/completions"))
        .map(|(_, body)| body)
        .collect()
}

fn all_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_counts(outcome: &RunOutcome, tool: &str) -> Value {
    json!(outcome.summary.tools.calls.get(tool))
}

fn heals(stream: bool) {
    let server = Server::start(vec![
        call("calculator", r#"{"expr": "6*7"}"#),
        call("calculator", r#"{"expression": "6/0"}"#),
        call("calculator", r#"{"expression": "6*7"}"#),
        ok(&["I have what I need."]),
        ok(&["It is 42."]),
    ]);
    let outcome = run(worker(5, json!({})), openai(&server, stream));
    let reqs = chats(&server);
    assert_eq!(reqs.len(), 5, "four decisions and the reply");
    let offered: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["calculator", "dice"]);
    assert!(
        reqs[0].get("tool_choice").is_none(),
        "tool_choice is sent only when set"
    );
    // The invalid call comes back as an avoidable error, to the decision and as a
    // `tool` message answering its call.
    let second = all_text(&reqs[1]);
    assert!(second.contains("Previous errors:"), "{second}");
    assert!(
        second.contains("Avoidable error: the arguments do not match the schema"),
        "{second}"
    );
    let tool_msg = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(tool_msg["tool_call_id"], "call_0");
    assert!(reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["tool_calls"][0]["id"] == "call_0"));
    assert!(all_text(&reqs[2]).contains("has no finite value"));
    // The success clears the tool's errors.
    assert!(
        !all_text(&reqs[3]).contains("Previous errors:"),
        "{}",
        all_text(&reqs[3])
    );
    assert!(
        all_text(&reqs[4]).contains("6*7 = 42"),
        "the reply sees the result"
    );
    assert_eq!(outcome.transcript.last().unwrap().content, "It is 42.");
    assert_eq!(
        tool_counts(&outcome, "calculator"),
        json!({"invalid_arguments": 1, "failed": 1, "ok": 1})
    );
    assert_eq!(outcome.summary.tools.errors, 2);
    assert_eq!(outcome.summary.tools.retries, 2);
    assert_eq!(outcome.summary.llm_calls["decide"], 4);
    let kinds: Vec<MessageKind> = outcome.transcript.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == MessageKind::ToolCall)
            .count(),
        3
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == MessageKind::ToolResult)
            .count(),
        3
    );
    assert!(outcome
        .summary
        .warnings
        .iter()
        .any(|w| w.contains("tool calculator")));
}

#[test]
fn native_tool_calls_heal_invalid_arguments_and_errors() {
    heals(false);
}

#[test]
fn streamed_tool_call_deltas_are_assembled() {
    heals(true);
}

#[test]
fn json_decisions_call_tools_without_the_tools_field() {
    let server = Server::start(vec![
        ok(&["```json\n{\"tool\": \"calculator\", \"arguments\": {\"expression\": \"1+2\"}}\n```"]),
        ok(&["{\"tool\": \"answer\"}"]),
        ok(&["The answer is three."]),
    ]);
    let outcome = run(
        worker(3, json!({"decision": "json"})),
        openai(&server, false),
    );
    let reqs = chats(&server);
    assert!(reqs[0].get("tools").is_none());
    assert!(all_text(&reqs[0]).contains("Answer with one JSON object"));
    assert_eq!(tool_counts(&outcome, "calculator"), json!({"ok": 1}));
    assert_eq!(
        outcome.transcript.last().unwrap().content,
        "The answer is three."
    );
}

#[test]
fn the_step_limit_makes_the_agent_reply() {
    let server = Server::start(vec![
        call("calculator", r#"{"expression": "1+1"}"#),
        call("calculator", r#"{"expression": "2+2"}"#),
        ok(&["I made two sums."]),
    ]);
    let outcome = run(worker(2, json!({})), openai(&server, false));
    assert!(all_text(&chats(&server)[1]).contains("Decision 2 of 2 (this is the last decision"));
    assert_eq!(outcome.summary.llm_calls["decide"], 2);
    assert_eq!(
        outcome.transcript.last().unwrap().content,
        "I made two sums."
    );
}

#[test]
fn unknown_tools_get_two_more_tries_then_the_agent_replies() {
    let server = Server::start(vec![
        call("search", "{}"),
        call("search", "{}"),
        call("search", "{}"),
        ok(&["I could not look it up."]),
    ]);
    let outcome = run(
        worker(6, json!({"tool_choice": "auto"})),
        openai(&server, false),
    );
    let reqs = chats(&server);
    assert_eq!(reqs[0]["tool_choice"], "auto");
    assert!(all_text(&reqs[1]).contains("there is no tool `search`; call one of: calculator, dice"));
    assert_eq!(outcome.summary.llm_calls["decide"], 3);
    assert_eq!(tool_counts(&outcome, "search"), json!({"unknown_tool": 3}));
    assert_eq!(
        outcome.transcript.last().unwrap().content,
        "I could not look it up."
    );
}

#[test]
fn shop_assistant_golden_with_ref_ids_in_the_store() {
    let (outcome, _) = run_recorded(&example("shop_assistant"), None, 0, &[]);
    assert_golden("shop_assistant.jsonl", &jsonl(&outcome));
    let store = &outcome.environment.store;
    assert_eq!(
        store["catalogue"]["products"][0]["objects"][0]["_REF_ID"],
        "catalogue_products_0_0"
    );
    assert_eq!(
        store["catalogue"]["products"][0]["objects"][0]["name"],
        "Summit Boot"
    );
    assert_eq!(
        store["catalogue"]["products"][0]["metadata"]["_agent"],
        "Mia"
    );
    assert_eq!(
        store["calculator"]["calculator"][0]["objects"][0]["value"],
        269
    );
    assert_eq!(tool_counts(&outcome, "catalogue"), json!({"ok": 3}));
    let results: Vec<&str> = outcome
        .transcript
        .iter()
        .filter(|m| m.kind == MessageKind::ToolResult)
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        results[0].contains("[catalogue_products_0_0, catalogue_products_0_1]"),
        "{results:?}"
    );
}

#[test]
fn competitive_teams_do_not_see_each_others_results() {
    let seen = |mode| {
        let (outcome, _) = run_recorded(&example("rival_buyers"), Some(mode), 0, &[]);
        let bram: Vec<String> = outcome
            .transcript
            .iter()
            .filter(|m| m.name == "Bram" && m.kind == MessageKind::ToolResult)
            .map(|m| m.content.clone())
            .collect();
        (outcome, bram[0].clone())
    };
    let (competitive, found) = seen(Mode::Competitive);
    assert!(
        found.starts_with("findings: store_query: nothing matched"),
        "{found}"
    );
    assert_golden("rival_buyers.jsonl", &jsonl(&competitive));
    let (_, found) = seen(Mode::Cooperative);
    assert!(found.contains("2 shown of 2 matching"), "{found}");
}

/// A JSON service on 127.0.0.1 that counts the connections it accepts.
fn weather_service() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            c.fetch_add(1, Ordering::SeqCst);
            let mut line = String::new();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let _ = reader.read_line(&mut line);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let body = if line.starts_with("GET /api/weather") {
                json!({"forecast": "rain", "mm": 12}).to_string()
            } else {
                "{}".into()
            };
            let _ = conn.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                    .as_bytes(),
            );
        }
    });
    (base, count)
}

fn forecaster(base: &str) -> Scenario {
    scenario_from(json!({
        "name": "forecast",
        "agents": {"Wes": {"roles": {"brief": "Forecaster"}}},
        "tools": {"weather": {"kind": "http", "description": "The weather service.", "config": {"allow": [format!("{base}/api/")]}}},
        "sop": {"start": "brief", "states": {"brief": {
            "roles": ["Forecaster"],
            "components": {"Forecaster": {"tools": ["weather"], "max_tool_steps": 4}},
            "transition": {"max_turns": 1}, "next": ["end"]
        }}},
        "script": {
            "agents": {"Wes": ["Rain, 12 mm."]},
            "decisions": {"Wes": [
                {"tool": "weather", "arguments": {"url": format!("{base}/api/weather")}},
                {"tool": "weather", "arguments": {"url": "http://10.1.2.3/api/weather"}},
                {"tool": "weather", "arguments": {"url": format!("{base}/admin")}},
                "answer"
            ]}
        }
    }))
}

#[test]
fn http_reaches_allowed_loopback_urls_only_and_replays_from_the_recording() {
    let (base, connections) = weather_service();
    let scenario = forecaster(&base);
    let dir = tempfile::tempdir().unwrap();
    let scripted = Arc::new(ScriptedBackend::new(scenario.script.clone()));
    let recorder = Arc::new(Recorder::new(scripted, dir.path()).unwrap());
    let recorded = run(scenario.clone(), recorder);
    let results: Vec<&str> = recorded
        .transcript
        .iter()
        .filter(|m| m.kind == MessageKind::ToolResult)
        .map(|m| m.content.as_str())
        .collect();
    assert!(results[0].contains("1 shown of 1 matching"), "{results:?}");
    assert!(results[1].contains("is not on this machine"), "{results:?}");
    assert!(
        results[2].contains("is not under an allowed prefix"),
        "{results:?}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "refused calls open no connection"
    );
    assert_eq!(
        recorded.environment.store["weather"]["http"][0]["objects"][0]["forecast"],
        "rain"
    );
    let replayed = run(scenario, Arc::new(Replayer::new(dir.path()).unwrap()));
    assert_eq!(jsonl(&replayed), jsonl(&recorded));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "a replay does not call the service"
    );
}

#[test]
fn http_reaches_localhost_on_the_port_its_url_names() {
    let (base, connections) = weather_service();
    let base = base.replace("127.0.0.1", "localhost");
    let scenario = forecaster(&base);
    let outcome = run(
        scenario.clone(),
        Arc::new(ScriptedBackend::new(scenario.script.clone())),
    );
    assert_eq!(
        outcome.environment.store["weather"]["http"][0]["objects"][0]["forecast"],
        "rain"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

fn rules_scenario() -> Scenario {
    let knowledge = root().join("scenarios/aiwaves/oculist_agent/database.json");
    scenario_with(
        json!({
            "name": "rules",
            "agents": {"Ivy": {"roles": {"desk": "Nurse"}}, "Pat": {"roles": {"desk": "Patient"}}},
            "tools": {
                "roll": {"kind": "dice", "description": "A die.", "run_if": {"every_turn": true, "arguments": {"sides": 20}}},
                "lookup": {"kind": "knowledge", "description": "The clinic's notes.",
                           "config": {"path": "notes.json", "top_k": 1},
                           "run_if": {"last_message_matches": "(?i)eye", "arguments": {"query": "{last_message}"}}},
                "total": {"kind": "calculator", "description": "Sums.",
                          "available_if": {"after_tool": "ledger", "description": "once the ledger has been read"}},
                "ledger": {"kind": "calculator", "description": "Reads the ledger."}
            },
            "sop": {"start": "desk", "max_turns": 2, "states": {"desk": {
                "roles": ["Patient", "Nurse"],
                "begin_role": "Patient", "begin_query": "My eye hurts after surgery.",
                "components": {"Nurse": {"tools": ["roll", "lookup", "total", "ledger"], "max_tool_steps": 1}},
                "transition": {"max_turns": 2}, "next": ["end"]
            }}},
            "script": {"default": "{name} answers.", "decisions": {"Ivy": ["answer"]}}
        }),
        &[("notes.json", knowledge)],
    )
}

#[test]
fn run_if_tools_run_before_the_decision_and_unavailable_ones_say_why() {
    let scenario = rules_scenario();
    let rec = Recording::new(Arc::new(ScriptedBackend::new(scenario.script.clone())));
    let outcome = run(scenario, rec.clone());
    let calls: Vec<String> = outcome
        .transcript
        .iter()
        .filter(|m| m.kind == MessageKind::ToolCall)
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(
        calls,
        [
            r#"calls roll with {"sides":20}"#,
            r#"calls lookup with {"query":"My eye hurts after surgery."}"#
        ]
    );
    let roll = &outcome.environment.store["roll"]["dice"][0]["objects"][0];
    let value = roll["total"].as_u64().unwrap();
    assert!((1..=20).contains(&value), "{roll}");
    let found = &outcome.environment.store["lookup"]["knowledge"][0]["objects"][0]["found"];
    assert!(
        !found.as_str().unwrap().is_empty(),
        "the knowledge base answered"
    );
    let decide = rec
        .take()
        .into_iter()
        .find(|r| r.context.kind == sopsim::llm::CallKind::Decide)
        .unwrap();
    let text = prompt_text(&decide);
    assert!(
        text.contains("- total: Sums. (unavailable: once the ledger has been read)"),
        "{text}"
    );
    assert!(text.contains("Tasks completed this turn:"), "{text}");
    let offered: Vec<String> = decide
        .tools
        .unwrap()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(offered, ["roll", "lookup", "ledger"]);
}

#[test]
fn dice_replay_by_seed_and_differ_between_seeds() {
    let totals = |seed| {
        let s = rules_scenario();
        let services = services_with(Arc::new(ScriptedBackend::new(s.script.clone())));
        let o = run_on(s, &services, |o| RunOptions { seed, ..o }, RunIo::default()).unwrap();
        o.environment.store["roll"]["dice"][0]["objects"][0]["rolls"].clone()
    };
    assert_eq!(totals(7), totals(7));
    assert!(
        (0..8).any(|s| totals(s) != totals(7)),
        "seeds change the dice"
    );
}

#[test]
fn the_cli_writes_tool_payloads_and_counts() {
    let out = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            "scenarios/shop_assistant.json",
            "--llm",
            "scripted",
            "--out",
        ])
        .arg(out.path())
        .current_dir(root())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let events: Vec<Value> = std::fs::read_to_string(out.path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    assert_eq!(of("tree_update"), 6, "one per decision");
    assert_eq!(of("result"), 5, "one per successful call");
    let product = events.iter().find(|e| e["type"] == "result").unwrap();
    assert_eq!(product["payload"]["type"], "product");
    let first = &product["payload"]["objects"][0];
    assert_eq!(first["name"], "Summit Boot");
    assert!(
        first.get("subcategory").is_none(),
        "the mapping leaves unmapped fields out"
    );
    assert_eq!(first["_REF_ID"], "catalogue_products_0_0");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["tools"]["calls"]["catalogue"]["ok"], 3);
    assert_eq!(summary["llm_calls"]["decide"], 6);
}

#[test]
fn a_tool_no_role_lists_is_pointed_out() {
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/shop_assistant.json")).unwrap(),
    )
    .unwrap();
    doc["tools"]["spare"] = json!({"kind": "dice"});
    let s = scenario_with(
        doc,
        &[(
            "data/products.jsonl",
            root().join("scenarios/data/products.jsonl"),
        )],
    );
    let notes: Vec<String> = scenario::advice(&s).iter().map(|p| p.to_string()).collect();
    assert_eq!(
        notes,
        ["tools.spare: no state or role lists this tool, so it is never offered"]
    );
}
