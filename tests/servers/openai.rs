//! The OpenAI-compatible backend against a server started here on 127.0.0.1 that speaks
//! the protocol as real servers do: SSE `data:` chunks ending in `[DONE]`, usage in the
//! last chunk or absent, `Retry-After`, server errors, cut-off streams, slow replies,
//! malformed JSON. Nothing leaves the machine.

use std::time::Duration;

use crate::common::server::*;
use crate::common::*;
use serde_json::{json, Value};
use sopsim::llm::openai::{ApiKey, OpenAiBackend, OpenAiOptions, RetryPolicy};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::scenario::LlmSettings;

const KEY: &str = "sk-test-7f3a9c-do-not-leak";

fn backend(server: &Server, stream: bool, attempts: u32, timeout_ms: u64) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiOptions {
        base_url: server.base.clone(),
        api_key: ApiKey::new(KEY),
        model: Some("test-model".into()),
        stream,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_millis(timeout_ms),
        deadline: Duration::from_secs(600),
        retry: RetryPolicy {
            attempts,
            base: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
        },
        concurrency: 4,
    })
    .unwrap()
}

fn ask(b: &OpenAiBackend) -> Result<sopsim::llm::Completion, sopsim::llm::LlmError> {
    let req = LlmRequest {
        messages: vec![
            ChatMessage::system("You are terse."),
            ChatMessage::user("Say hi."),
        ],
        settings: LlmSettings {
            temperature: Some(0.2),
            max_tokens: Some(16),
            ..LlmSettings::default()
        },
        context: CallContext {
            kind: CallKind::Act,
            state: "s".into(),
            turn: 3,
            agent: Some("Ada".into()),
            role: None,
            index: 0,
            choices: vec![],
            run_seed: 0,
        },
        options: None,
        tools: None,
        redraw: None,
        candidate: 0,
        screen: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(b.complete(req, None))
}

#[test]
fn a_streamed_reply_with_usage_in_the_last_chunk() {
    let server = Server::start(vec![ok(&["Hel", "lo", " there."])]);
    let c = ask(&backend(&server, true, 1, 2000)).unwrap();
    assert_eq!(c.text, "Hello there.");
    assert_eq!(
        (
            c.usage.prompt_tokens,
            c.usage.completion_tokens,
            c.usage.estimated
        ),
        (42, 3, false)
    );
    let (head, body) = &server.requests()[0];
    assert!(head.starts_with("POST /v1/chat/completions"), "{head}");
    assert!(
        head.contains(&format!("authorization: Bearer {KEY}"))
            || head.contains(&format!("Authorization: Bearer {KEY}"))
    );
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][1]["content"], "Say hi.");
    // A streamed reply's max_tokens is a budget: the server is asked for the hard cap.
    assert_eq!(body["max_tokens"], sopsim::llm::ReplyBudget::of(16).hard);
}

#[test]
fn usage_left_out_is_counted_and_marked_estimated_and_done_is_optional() {
    let server = Server::start(vec![Reply::Stream {
        pieces: vec!["Hi.".into()],
        usage: false,
        done: false,
    }]);
    let c = ask(&backend(&server, true, 1, 2000)).unwrap();
    assert_eq!(c.text, "Hi.");
    assert!(c.usage.estimated && c.usage.prompt_tokens > 0);
}

#[test]
fn non_streaming_requests_work_too() {
    let server = Server::start(vec![ok(&["Plain ", "reply."])]);
    let c = ask(&backend(&server, false, 1, 2000)).unwrap();
    assert_eq!(c.text, "Plain reply.");
    assert_eq!(server.requests()[0].1["stream"], false);
}

#[test]
fn a_rate_limit_is_retried_after_the_servers_delay() {
    let limited = Reply::Plain {
        status: 429,
        body: r#"{"error":{"message":"Rate limit reached"}}"#.into(),
        headers: vec![("Retry-After".into(), "0".into())],
    };
    let server = Server::start(vec![limited.clone(), limited, ok(&["Made it."])]);
    assert_eq!(
        ask(&backend(&server, true, 5, 2000)).unwrap().text,
        "Made it."
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_server_that_always_fails_gives_up_after_the_attempts_naming_the_cause() {
    let fail = Reply::Plain {
        status: 500,
        body: r#"{"error":{"message":"CUDA out of memory"}}"#.into(),
        headers: vec![],
    };
    let server = Server::start(vec![fail; 10]);
    let err = ask(&backend(&server, true, 3, 2000))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gave up after 3 attempt")
            && err.contains("HTTP 500")
            && err.contains("CUDA out of memory"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_cut_off_stream_is_retried() {
    let server = Server::start(vec![Reply::Cut, ok(&["Whole reply."])]);
    assert_eq!(
        ask(&backend(&server, true, 3, 2000)).unwrap().text,
        "Whole reply."
    );
    let server = Server::start(vec![Reply::Cut; 5]);
    let err = ask(&backend(&server, true, 2, 2000))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cut off"), "{err}");
}

#[test]
fn a_slow_server_trips_the_timeout() {
    let server = Server::start(vec![Reply::Slow(Duration::from_millis(1500)); 3]);
    let err = ask(&backend(&server, true, 1, 200))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no response within") || err.contains("stalled"),
        "{err}"
    );
}

#[test]
fn malformed_json_is_an_error_not_a_panic() {
    let server = Server::start(vec![Reply::Garbage; 3]);
    let err = ask(&backend(&server, true, 2, 2000))
        .unwrap_err()
        .to_string();
    assert!(err.contains("malformed JSON"), "{err}");
}

#[test]
fn unauthorized_and_not_found_are_explained_without_retrying() {
    let server = Server::start(vec![Reply::Plain {
        status: 401,
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
        headers: vec![],
    }]);
    let err = ask(&backend(&server, true, 5, 2000))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("check the API key") && err.contains("Incorrect API key provided"),
        "{err}"
    );
    assert!(!err.contains(KEY));
    assert_eq!(server.requests().len(), 1);
    let server = Server::start(vec![Reply::Plain {
        status: 404,
        body: r#"{"error":{"message":"model not found"}}"#.into(),
        headers: vec![],
    }]);
    let err = ask(&backend(&server, true, 5, 2000))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"test-model\"") && err.contains("/v1/chat/completions"),
        "{err}"
    );
}

fn sopsim(args: &[&str], base: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .args([
            "--llm",
            "openai",
            "--embedder",
            "hash",
            "--base-url",
            base,
            "--model",
            "test-model",
            "-q",
        ])
        .env("OPENAI_API_KEY", KEY)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn all_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    text
}

#[test]
fn record_then_replay_with_the_server_gone_reproduces_the_transcript() {
    let debate = root().join("scenarios/debate.json").display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (out1, out2, rec) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("rec"),
    );
    let server = Server::start(vec![]);
    let base = {
        let o = sopsim(
            &[
                "run",
                &debate,
                "--max-turns",
                "8",
                "--out",
                out1.to_str().unwrap(),
                "--record",
                rec.to_str().unwrap(),
            ],
            &server.base,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(server.requests().len() >= 5);
        server.base.clone()
    };
    let recorded = server.requests().len();
    let o = sopsim(
        &[
            "run",
            &debate,
            "--max-turns",
            "8",
            "--out",
            out2.to_str().unwrap(),
            "--replay",
            rec.to_str().unwrap(),
        ],
        "http://127.0.0.1:9",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        server.requests().len(),
        recorded,
        "the replay made no request"
    );
    let t1 = std::fs::read_to_string(out1.join("transcript.jsonl")).unwrap();
    assert_eq!(
        t1,
        std::fs::read_to_string(out2.join("transcript.jsonl")).unwrap()
    );
    assert_eq!(t1.lines().count(), 8);
    for d in [&out1, &out2, &rec] {
        assert!(
            !all_text(d).contains(KEY),
            "the API key leaked into {}",
            d.display()
        );
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out1.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["llm"].as_str().unwrap().contains(&base[7..]),
        "{}",
        summary["llm"]
    );
    let o = sopsim(
        &[
            "run",
            &debate,
            "--max-turns",
            "9",
            "--replay",
            rec.to_str().unwrap(),
        ],
        "http://127.0.0.1:9",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("turn 9") && err.contains("not in the recording"),
        "{err}"
    );
}

#[test]
fn a_failing_server_stops_the_run_with_exit_1_and_keeps_finished_turns() {
    let debate = root().join("scenarios/debate.json").display().to_string();
    let fail = Reply::Plain {
        status: 503,
        body: r#"{"error":{"message":"overloaded"}}"#.into(),
        headers: vec![],
    };
    let server = Server::start(vec![
        ok(&["Clean air is worth a short walk."]),
        fail.clone(),
        fail.clone(),
        fail,
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = sopsim(
        &[
            "run",
            &debate,
            "--out",
            out.to_str().unwrap(),
            "--max-attempts",
            "3",
        ],
        &server.base,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("HTTP 503")
            && err.contains("overloaded")
            && err.contains("2 finished turn(s)"),
        "{err}"
    );
    assert!(!err.contains(KEY));
    assert_eq!(
        std::fs::read_to_string(out.join("transcript.jsonl"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "error");
}

fn summary_of(out: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// `sopsim run` on the debate against a fresh server, with extra flags.
fn run_debate(extra: &[&str], model: &str) -> (std::process::Output, Value, tempfile::TempDir) {
    let server = Server::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let debate = root().join("scenarios/debate.json").display().to_string();
    let mut args = vec![
        "run",
        debate.as_str(),
        "--out",
        out.to_str().unwrap(),
        "--max-turns",
        "8",
    ];
    args.extend(extra);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(&args)
        .args([
            "--llm",
            "openai",
            "--embedder",
            "hash",
            "--base-url",
            &server.base,
            "--model",
            model,
            "-q",
        ])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_of(&out);
    (o, s, dir)
}

#[test]
fn cost_is_counted_by_model_with_tokens_by_state_and_role() {
    let (_, s, _dir) = run_debate(&[], "gpt-4o-mini");
    let prompt = s["prompt_tokens"].as_f64().unwrap();
    let completion = s["completion_tokens"].as_f64().unwrap();
    let expected = (prompt * 0.15 + completion * 0.60) / 1e6;
    assert!(
        (s["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-12,
        "{s}"
    );
    assert!(
        s["tokens_by_state"]["affirmative_prep"]["calls"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert!(s["tokens_by_role"]["Support"]["calls"].as_u64().unwrap() >= 1);
    assert_eq!(s["tokens_estimated"], false, "the server reported usage");
}

#[test]
fn an_unknown_model_has_a_null_cost_unless_a_price_file_names_it() {
    let (_, s, _dir) = run_debate(&["--budget-usd", "1"], "my-finetune");
    assert!(
        s["cost_usd"].is_null(),
        "never $0 for an unknown price: {s}"
    );
    assert!(
        s["warnings"][0]
            .as_str()
            .unwrap()
            .contains("no price for my-finetune"),
        "{s}"
    );
    let prices = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        prices.path(),
        r#"{"my-finetune": {"input": 1.0, "output": 2.0}}"#,
    )
    .unwrap();
    let (_, s, _dir) = run_debate(
        &["--prices", prices.path().to_str().unwrap()],
        "my-finetune",
    );
    let expected = (s["prompt_tokens"].as_f64().unwrap()
        + 2.0 * s["completion_tokens"].as_f64().unwrap())
        / 1e6;
    assert!(
        (s["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-12,
        "{s}"
    );
}

#[test]
fn budgets_stop_the_run_cleanly_at_a_turn_boundary() {
    let (_, s, dir) = run_debate(&["--max-total-tokens", "100"], "gpt-4o-mini");
    assert_eq!(s["ended_by"], "budget");
    assert!(
        s["stop_reason"]
            .as_str()
            .unwrap()
            .contains("max_total_tokens 100 reached"),
        "{s}"
    );
    let turns = s["turns"].as_u64().unwrap();
    assert!((2..8).contains(&turns), "{s}");
    let lines = std::fs::read_to_string(dir.path().join("run/transcript.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, turns, "every finished turn is on disk");
    let (_, s, _dir) = run_debate(&["--budget-usd", "0.000001"], "gpt-4o-mini");
    assert_eq!(s["ended_by"], "budget");
    assert!(
        s["stop_reason"]
            .as_str()
            .unwrap()
            .contains("budget of $0.000001 reached"),
        "{s}"
    );
}

#[test]
fn embeddings_can_come_from_the_server_one_per_message() {
    let server = Server::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let debate = root().join("scenarios/debate.json").display().to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            &debate,
            "--out",
            out.to_str().unwrap(),
            "--max-turns",
            "6",
            "-q",
        ])
        .args([
            "--llm",
            "openai",
            "--embedder",
            "openai",
            "--embedder-model",
            "emb-test",
            "--base-url",
            &server.base,
        ])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let embedded: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|(h, _)| h.starts_with("POST /v1/embeddings"))
        .map(|(_, b)| b)
        .collect();
    let texts: usize = embedded
        .iter()
        .map(|b| b["input"].as_array().unwrap().len())
        .sum();
    assert_eq!(texts, 6, "each of the six messages embedded exactly once");
    assert_eq!(embedded[0]["model"], "emb-test");
    assert_eq!(summary_of(&out)["embedder"], "openai");
}

#[test]
fn the_server_and_key_can_come_from_the_environment() {
    let server = Server::start(vec![]);
    let debate = root().join("scenarios/debate.json").display().to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            &debate,
            "--max-turns",
            "3",
            "-q",
            "--llm",
            "openai",
            "--embedder",
            "hash",
        ])
        .env("OPENAI_BASE_URL", format!("{}/v1/", server.base))
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_MODEL", "env-model")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (head, body) = &server.requests()[0];
    assert!(head.starts_with("POST /v1/chat/completions"), "{head}");
    assert_eq!(body["model"], "env-model");
}

fn choose(b: &OpenAiBackend) -> sopsim::llm::Completion {
    let req = LlmRequest::choice(
        vec![ChatMessage::user("Your move?")],
        vec!["COOPERATE".into(), "DEFECT".into()],
        LlmSettings::default(),
        CallContext {
            kind: CallKind::Choice,
            state: "round".into(),
            turn: 1,
            agent: Some("Ada".into()),
            role: None,
            index: 0,
            choices: vec![],
            run_seed: 0,
        },
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(b.complete(req, None)).unwrap()
}

#[test]
fn a_choice_asks_for_structured_output_and_reads_the_probabilities() {
    let server = Server::start(vec![Reply::Choice {
        content: r#"{"choice": "DEFECT"}"#.into(),
        top: vec![
            ("DE".into(), (0.75f64).ln()),
            ("CO".into(), (0.2f64).ln()),
            ("XY".into(), (0.05f64).ln()),
        ],
    }]);
    let c = choose(&backend(&server, false, 3, 2000));
    let chosen = c.chosen.unwrap();
    assert_eq!((chosen.index, c.text.as_str()), (1, "DEFECT"));
    assert_eq!(chosen.method, sopsim::llm::ChoiceMethod::Structured);
    let p = chosen.probabilities.unwrap();
    assert!(
        (p[1] - 0.75 / 0.95).abs() < 1e-9 && (p[0] - 0.2 / 0.95).abs() < 1e-9,
        "{p:?}"
    );
    let (_, body) = &server.requests()[0];
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["enum"],
        json!(["COOPERATE", "DEFECT"])
    );
    assert_eq!(body["logprobs"], true);
}

#[test]
fn a_server_that_rejects_structured_output_is_asked_in_text_from_then_on() {
    let server = Server::start(vec![
        Reply::Plain {
            status: 400,
            body: r#"{"error": {"message": "response_format is not supported"}}"#.into(),
            headers: vec![],
        },
        ok(&["I will DEFECT."]),
        ok(&["<end>COOPERATE</end>"]),
    ]);
    let b = backend(&server, false, 3, 2000);
    let first = choose(&b);
    let chosen = first.chosen.unwrap();
    assert_eq!(
        (chosen.index, chosen.method, chosen.probabilities),
        (1, sopsim::llm::ChoiceMethod::Text, None)
    );
    assert_eq!(choose(&b).chosen.unwrap().index, 0);
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        3,
        "the refusal is remembered, not asked again"
    );
    assert!(requests[0].1.get("response_format").is_some());
    assert!(
        requests[1].1.get("response_format").is_none()
            && requests[2].1.get("response_format").is_none()
    );
}

#[test]
fn an_answer_outside_the_options_is_retried_then_read_as_text_never_a_crash() {
    let server = Server::start(vec![
        Reply::Choice {
            content: r#"{"choice": "MAYBE"}"#.into(),
            top: vec![],
        },
        Reply::Choice {
            content: "not json at all".into(),
            top: vec![],
        },
        Reply::Choice {
            content: r#"{"choice": "PASS"}"#.into(),
            top: vec![],
        },
        ok(&["whatever"]),
    ]);
    let c = choose(&backend(&server, false, 3, 2000));
    assert!(
        c.chosen.is_none(),
        "a text answer naming no option is no choice: {c:?}"
    );
    assert_eq!(
        server.requests().len(),
        4,
        "three structured attempts, then plain text"
    );
}

/// A job script may start `llama-server` and sopsim together: a server still loading
/// its model (503) is asked again, as a model call would be.
#[test]
fn a_server_still_loading_its_model_is_asked_again_which_model_it_serves() {
    let server = Server::start_with(
        vec![],
        Behaviour {
            loading_for: 2,
            ..Behaviour::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .arg("run")
        .arg(root().join("scenarios/debate.json"))
        .arg("--out")
        .arg(&out)
        .args(["--max-turns", "1", "--llm", "openai", "--embedder", "hash"])
        .args(["--base-url", &server.base, "-q"])
        .env_remove("OPENAI_MODEL")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(summary_of(&out)["llm"]
        .as_str()
        .unwrap()
        .contains("served-model-a"));
    let asked = server
        .requests()
        .iter()
        .filter(|(h, _)| h.starts_with("GET /v1/models"))
        .count();
    assert_eq!(asked, 3, "two 503s, then the list");
}

#[test]
fn with_no_model_named_the_server_is_asked_and_an_unknown_model_is_not_priced() {
    let server = Server::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let debate = root().join("scenarios/debate.json").display().to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            &debate,
            "--out",
            out.to_str().unwrap(),
            "--max-turns",
            "3",
            "--llm",
            "openai",
            "--embedder",
            "hash",
            "--base-url",
            &server.base,
            "-q",
        ])
        .env_remove("OPENAI_MODEL")
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_of(&out);
    assert!(s["llm"].as_str().unwrap().contains("served-model-a"), "{s}");
    assert!(
        s["cost_usd"].is_null(),
        "no price for a served model sopsim does not know: {s}"
    );
    assert!(
        s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("serves 2 models")),
        "{s}"
    );
    let chat = server
        .requests()
        .into_iter()
        .find(|(h, _)| h.starts_with("POST"))
        .unwrap();
    assert_eq!(chat.1["model"], "served-model-a");
}

#[test]
fn a_server_echoing_the_key_does_not_get_it_into_errors() {
    for status in [401, 400, 500] {
        let echo = Reply::Plain {
            status,
            body: format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. Header was: Authorization: Bearer {KEY}"}}}}"#
            ),
            headers: vec![],
        };
        let server = Server::start(vec![echo; 3]);
        let err = ask(&backend(&server, true, 2, 2000)).unwrap_err();
        let shown = sopsim::error::chain(&err);
        assert!(!shown.contains("7f3a9c"), "{status}: {shown}");
        assert!(shown.contains("[redacted]"), "{status}: {shown}");
    }
}

/// `--out` folder's `events.jsonl` lines that mention `text`.
fn events_mentioning(out: &std::path::Path, text: &str) -> usize {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

#[test]
fn a_server_refusing_structured_output_is_warned_about_once_per_run() {
    // The prisoner's dilemma's moves are `choice` components, made by the agents (not
    // the Director), two at a time in each simultaneous round.
    let server = Server::start_with(
        vec![],
        Behaviour {
            refuse_structured: true,
            otherwise: Some(ok(&["I will COOPERATE."])),
            ..Behaviour::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let pd = root().join("scenarios/prisoners_dilemma.json");
    let o = sopsim(
        &[
            "run",
            pd.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--max-turns",
            "6",
        ],
        &server.base,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_of(&out);
    let said = "refused structured outputs";
    let warned: Vec<&Value> = s["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains(said))
        .collect();
    assert_eq!(warned.len(), 1, "{s}");
    assert_eq!(events_mentioning(&out, said), 1);
    // The moves were still made, read from the text answers.
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(transcript.lines().count(), 6);
    for line in transcript.lines() {
        let m: Value = serde_json::from_str(line).unwrap();
        assert_eq!(m["decision"]["value"], "COOPERATE", "{line}");
    }
    let structured = server
        .requests()
        .iter()
        .filter(|(_, b)| b.get("response_format").is_some())
        .count();
    assert!(
        (1..=2).contains(&structured),
        "asked with structured output only until the first refusal (or the two of a \
         round in flight at once): {structured}"
    );
}

#[test]
fn after_unusable_structured_answers_choices_are_asked_in_text_and_say_so() {
    let bad = Reply::Choice {
        content: r#"{"choice": "MAYBE"}"#.into(),
        top: vec![],
    };
    let server = Server::start(vec![
        bad.clone(),
        bad.clone(),
        bad,
        ok(&["DEFECT"]),
        ok(&["COOPERATE"]),
    ]);
    let b = backend(&server, false, 3, 2000);
    let chosen = choose(&b).chosen.unwrap();
    assert_eq!(
        (chosen.index, chosen.method),
        (1, sopsim::llm::ChoiceMethod::TextAfterUnusable)
    );
    // The next choice is asked in plain text at once, not retried as structured again.
    let chosen = choose(&b).chosen.unwrap();
    assert_eq!(
        (chosen.index, chosen.method),
        (0, sopsim::llm::ChoiceMethod::TextAfterUnusable)
    );
    let structured: Vec<bool> = server
        .requests()
        .iter()
        .map(|(_, body)| body.get("response_format").is_some())
        .collect();
    assert_eq!(structured, [true, true, true, false, false]);
}

/// The debate for two turns against a server whose first reply (Ben's) goes on as Ada,
/// over the library so that replies can come whole or streamed.
fn debate_where_ben_goes_on_as_ada(
    stream: bool,
    honour_stops: bool,
) -> (sopsim::simulation::RunOutcome, Vec<(String, Value)>) {
    let server = Server::start_with(
        vec![ok(&[
            "Streets without cars are safer.\nAda: ",
            "Thanks, Ben.",
        ])],
        Behaviour {
            honour_stops,
            ..Behaviour::default()
        },
    );
    let services = services_with(std::sync::Arc::new(backend(&server, stream, 2, 5000)));
    let outcome = run_on(
        example("debate"),
        &services,
        |o| sopsim::RunOptions {
            max_turns: Some(2),
            ..o
        },
        sopsim::RunIo::default(),
    )
    .unwrap();
    (outcome, server.requests())
}

#[test]
fn replies_going_on_as_another_participant_are_cut_by_the_server_or_here_and_counted() {
    for stream in [true, false] {
        for honour_stops in [true, false] {
            let (outcome, requests) = debate_where_ben_goes_on_as_ada(stream, honour_stops);
            let case = format!("stream {stream}, server stops {honour_stops}");
            let ben = outcome
                .transcript
                .iter()
                .find(|m| m.name == "Ben")
                .unwrap_or_else(|| panic!("{case}: Ben spoke"));
            assert_eq!(ben.content, "Streets without cars are safer.", "{case}");
            let summary = serde_json::to_value(&outcome.summary).unwrap();
            assert_eq!(summary["cut_replies"], 1, "{case}: {summary}");
            // Every other participant's label reaches a server that is not OpenAI's,
            // more than the four OpenAI's API takes.
            let (_, body) = requests
                .iter()
                .find(|(h, _)| h.starts_with("POST /v1/chat/completions"))
                .unwrap();
            let stops: Vec<&str> = body["stop"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            for label in ["\nMia:", "\nAda:", "\nCleo:", "\nDan:", "\nLead:"] {
                assert!(stops.contains(&label), "{case}: {label:?} not in {stops:?}");
            }
        }
    }
}

#[test]
fn run_and_bench_call_the_model_the_options_name_over_the_scenarios() {
    // The scenario names a model at its top level; `--model` names another, which both
    // commands must call (a bench once called the scenario's).
    let dir = tempfile::tempdir().unwrap();
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap(),
    )
    .unwrap();
    doc["llm"]["model"] = json!("scenario-model");
    let scenario = dir.path().join("debate.json");
    std::fs::write(&scenario, doc.to_string()).unwrap();
    let scenario = scenario.display().to_string();
    let models_called = |command: &[&str]| {
        let server = Server::start(vec![]);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
            .args(command)
            .args([
                scenario.as_str(),
                "--max-turns",
                "2",
                "--llm",
                "openai",
                "--model",
                "flag-model",
                "--base-url",
                &server.base,
                "--embedder",
                "hash",
                "-q",
            ])
            .env_remove("OPENAI_MODEL")
            .env("OPENAI_API_KEY", KEY)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut models: Vec<String> = server
            .requests()
            .iter()
            .map(|(_, body)| body["model"].as_str().unwrap_or_default().to_string())
            .collect();
        models.dedup();
        models
    };
    let out = dir.path().join("run").display().to_string();
    assert_eq!(models_called(&["run", "--out", &out]), ["flag-model"]);
    let bench = dir.path().join("bench").display().to_string();
    assert_eq!(
        models_called(&[
            "bench",
            "--seeds",
            "1",
            "--modes",
            "cooperative",
            "--out",
            &bench
        ]),
        ["flag-model"]
    );
}

/// The sampling settings reach the server under its names; a server that refuses the
/// extra fields is asked again without them, and the run warns once.
#[test]
fn sampling_settings_reach_the_server_and_a_refusal_is_warned_about_once() {
    for refuse in [false, true] {
        let server = Server::start_with(
            vec![],
            Behaviour {
                refuse_extra_fields: refuse,
                otherwise: Some(ok(&["A reply of a few words."])),
                ..Behaviour::default()
            },
        );
        let dir = tempfile::tempdir().unwrap();
        let mut doc: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap(),
        )
        .unwrap();
        doc["llm"]["frequency_penalty"] = json!(0.5);
        doc["llm"]["presence_penalty"] = json!(0.25);
        doc["llm"]["repeat_penalty"] = json!(1.2);
        doc["llm"]["repeat_window"] = json!("all");
        doc["llm"]["dry_multiplier"] = json!(0.8);
        doc["llm"]["min_p"] = json!(0.05);
        let file = dir.path().join("debate.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        let out = dir.path().join("run");
        let o = sopsim(
            &[
                "run",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--max-turns",
                "4",
            ],
            &server.base,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let chats: Vec<Value> = server
            .requests()
            .into_iter()
            .filter(|(head, _)| head.starts_with("POST /v1/chat"))
            .map(|(_, b)| b)
            .collect();
        let first = &chats[0];
        assert_eq!(first["frequency_penalty"], 0.5);
        assert_eq!(first["presence_penalty"], 0.25);
        assert_eq!(first["repeat_penalty"], json!(1.2f32));
        assert_eq!(first["repeat_last_n"], -1);
        assert_eq!(first["dry_multiplier"], json!(0.8f32));
        let last = chats.last().unwrap();
        assert_eq!(last["frequency_penalty"], 0.5, "always sent");
        assert_eq!(last.get("dry_multiplier").is_some(), !refuse);
        let warned = summary_of(&out)["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| {
                w.as_str()
                    .unwrap()
                    .contains("does not take the sampling settings")
            })
            .count();
        assert_eq!(warned, usize::from(refuse), "refused: {refuse}");
    }
}
