//! The stop contract: after SIGTERM a run, a benchmark or the viewer ends within the
//! grace (`--stop-grace`, 10 s by default) with every finished turn and its summary
//! written and exit status 143, whatever it was waiting on: a reply that never comes, a
//! stream of keep-alive comments, a tool call with the longest timeout allowed, a
//! server's `Retry-After`, a plan of 100,000 seeds. And the waits themselves are
//! bounded: keep-alives are not progress, a reply that never ends is cut near its
//! tokens, and a server asking to wait longer than a call waits is not waited for.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::root;
use crate::common::server::{ok, Behaviour, Reply, Server};

/// The grace every test here gives, the default.
const GRACE: Duration = Duration::from_secs(10);

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

fn debate() -> PathBuf {
    root().join("scenarios/debate.json")
}

/// The chat requests `server` has been sent.
fn chat_requests(server: &Server) -> usize {
    server
        .requests()
        .iter()
        .filter(|(head, _)| head.starts_with("POST") && head.contains("chat/completions"))
        .count()
}

/// Waits (at most 30 s) until `ready()`, then sends SIGTERM to `child`: its exit
/// status, stderr, and how long it took to exit after the signal.
fn terminate_when(child: Child, ready: impl Fn() -> bool) -> (Option<i32>, String, Duration) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ready(), "the run never reached the point to stop it at");
    let signalled = Instant::now();
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        took,
    )
}

/// A run of `scenario` into `out` against `server`, with `extra` flags.
fn against(server: &str, scenario: &Path, out: &Path, extra: &[&str]) -> Child {
    sopsim()
        .args(["run", scenario.to_str().unwrap(), "-q", "--out"])
        .arg(out)
        .args(["--llm", "openai", "--model", "m", "--embedder", "hash"])
        .args(["--base-url", server])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn summary(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).unwrap()
}

/// A stopped run exited 143 within the grace, its summary says it was interrupted
/// after `turns` turns, and its transcript holds each of them. (The debate's first
/// turn is its moderator's opening line, which asks no model.)
fn stopped_in_time(out: &Path, (code, stderr, took): (Option<i32>, String, Duration), turns: u64) {
    assert_eq!(code, Some(143), "{stderr}");
    assert!(took < GRACE, "took {took:?} to stop: {stderr}");
    assert!(!stderr.contains("still not stopped"), "{stderr}");
    let s = summary(out);
    assert_eq!(s["ended_by"], "interrupted", "{s}");
    assert_eq!(s["turns"], turns, "{s}");
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(transcript.lines().count() as u64, turns, "{transcript}");
}

#[test]
fn sigterm_abandons_a_reply_that_never_comes_and_keeps_the_finished_turn() {
    let server = Server::start(vec![
        ok(&["Our first point is about health."]),
        Reply::Slow(Duration::from_secs(3600)),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = against(&server.base, &debate(), &out, &[]);
    let stopped = terminate_when(child, || chat_requests(&server) >= 2);
    stopped_in_time(&out, stopped, 2);
}

#[test]
fn sigterm_abandons_a_stream_of_keep_alives() {
    let server = Server::start(vec![
        ok(&["Our first point is about health."]),
        Reply::KeepAlive(Duration::from_millis(200)),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = against(&server.base, &debate(), &out, &[]);
    let stopped = terminate_when(child, || chat_requests(&server) >= 2);
    stopped_in_time(&out, stopped, 2);
}

#[test]
fn keep_alive_comments_are_not_progress() {
    // A server that only keeps the stream alive has stalled: with a second of silence
    // allowed and two attempts, the run fails within seconds, saying so.
    let server = Server::start_with(
        vec![],
        Behaviour {
            otherwise: Some(Reply::KeepAlive(Duration::from_millis(100))),
            ..Behaviour::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = against(
        &server.base,
        &debate(),
        &out,
        &["--timeout", "1", "--max-attempts", "2"],
    );
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no event for 1s"), "{stderr}");
    assert_eq!(chat_requests(&server), 2, "one call, two attempts");

    // Beside a healthy server, the stalled one is left out and the run goes on.
    let healthy = Server::start(vec![]);
    let out = dir.path().join("replicas");
    let urls = format!("{},{}", server.base, healthy.base);
    let flags = ["--timeout", "1", "--max-attempts", "1", "--max-turns", "6"];
    let run = against(&urls, &debate(), &out, &flags);
    let done = run.wait_with_output().unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(summary(&out)["warnings"].to_string().contains("left out"));
}

#[test]
fn a_reply_that_never_ends_is_cut_near_its_tokens() {
    // Pieces of a reply every 10 ms, forever: the debate asks at most 70 tokens, so
    // each draw ends at the hard cap, 105 pieces, and the run goes on.
    let server = Server::start_with(
        vec![],
        Behaviour {
            otherwise: Some(Reply::Endless(Duration::from_millis(10))),
            ..Behaviour::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = against(&server.base, &debate(), &out, &["--max-turns", "2"]);
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    let reply: Value = serde_json::from_str(transcript.lines().nth(1).unwrap()).unwrap();
    let pieces = reply["content"]
        .as_str()
        .unwrap()
        .matches("and more")
        .count();
    assert!((70..=105).contains(&pieces), "{pieces} pieces");
}

/// A scenario whose one agent calls an http tool at `url` (allowed under `base`) with
/// the longest timeout validation allows.
fn tool_caller(dir: &Path, base: &str, url: &str) -> PathBuf {
    let scenario = json!({
        "name": "caller",
        "agents": {"Wes": {"roles": {"brief": "Forecaster"}}},
        "tools": {"weather": {"kind": "http", "description": "The weather service.",
                  "config": {"allow": [format!("{base}/")], "timeout_ms": 600_000}}},
        "sop": {"start": "brief", "states": {"brief": {
            "roles": ["Forecaster"],
            "components": {"Forecaster": {"tools": ["weather"], "max_tool_steps": 2}},
            "transition": {"max_turns": 1}, "next": ["end"]
        }}},
        "script": {
            "agents": {"Wes": ["Rain."]},
            "decisions": {"Wes": [{"tool": "weather", "arguments": {"url": url}}, "answer"]}
        }
    });
    let path = dir.join("caller.json");
    std::fs::write(&path, scenario.to_string()).unwrap();
    path
}

#[test]
fn sigterm_abandons_a_tool_call_with_the_longest_timeout() {
    let server = Server::start(vec![Reply::Slow(Duration::from_secs(3600))]);
    let dir = tempfile::tempdir().unwrap();
    let path = tool_caller(dir.path(), &server.base, &format!("{}/hang", server.base));
    let out = dir.path().join("run");
    let child = sopsim()
        .args(["run", path.to_str().unwrap(), "-q", "--out"])
        .arg(&out)
        .args(["--llm", "scripted", "--embedder", "hash"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stopped = terminate_when(child, || !server.requests().is_empty());
    stopped_in_time(&out, stopped, 0);
}

#[test]
fn tool_settings_beyond_their_largest_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = tool_caller(dir.path(), "http://127.0.0.1:9", "http://127.0.0.1:9/x");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["tools"]["weather"]["config"]["max_bytes"] = json!(18446744073709551615u64);
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tools.weather.config")
            && stderr.contains("max_bytes: expected a whole number from 1 to 67108864"),
        "{stderr}"
    );
}

/// A server that answers every chat request with 429 and `Retry-After: after`.
fn busy(after: &str) -> Server {
    Server::start_with(
        vec![],
        Behaviour {
            otherwise: Some(Reply::Plain {
                status: 429,
                body: r#"{"error": {"message": "slow down"}}"#.into(),
                headers: vec![("Retry-After".into(), after.into())],
            }),
            ..Behaviour::default()
        },
    )
}

#[test]
fn sigterm_abandons_a_retry_wait() {
    let server = busy("25");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = against(&server.base, &debate(), &out, &[]);
    let stopped = terminate_when(child, || chat_requests(&server) >= 1);
    stopped_in_time(&out, stopped, 1);
}

#[test]
fn a_wait_longer_than_a_call_waits_stops_the_run_or_moves_the_call() {
    let server = busy("999999");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("alone");
    let done = against(&server.base, &debate(), &out, &[])
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("asks to wait 999999 s before another attempt, longer than the 30 s"),
        "{stderr}"
    );
    assert_eq!(chat_requests(&server), 1, "not asked again");

    // Beside an idle server, a busy one's calls go to the idle one at once, and it is
    // left out once it has refused as many as a call may try.
    let busy = busy("20");
    let idle = Server::start(vec![]);
    let out = dir.path().join("replicas");
    let urls = format!("{},{}", busy.base, idle.base);
    let done = against(&urls, &debate(), &out, &["--max-turns", "6"])
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    assert!(chat_requests(&busy) <= 5, "{}", chat_requests(&busy));
    assert_eq!(summary(&out)["turns"], 6);
}

#[test]
fn sigterm_stops_a_benchmark_planning_100000_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let child = sopsim()
        .args([
            "bench",
            root()
                .join("scenarios/prisoners_dilemma.json")
                .to_str()
                .unwrap(),
        ])
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            "100000",
            "-q",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr, took) = terminate_when(child, || out.join("bench.json").exists());
    assert_eq!(code, Some(143), "{stderr}");
    assert!(took < GRACE, "took {took:?}: {stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}
