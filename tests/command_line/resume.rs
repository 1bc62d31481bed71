//! `sopsim run --resume` after a real SIGKILL: while a model answers, inside a
//! simultaneous round (a person's move awaited), and during a tool step (an HTTP call
//! in flight). The resumed run asks no model, person or tool again for what the killed
//! run's journal holds, and its files are those of a run that was never killed.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::server::{ok, Reply, Server};
use crate::common::{root, run_with_input};

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Waits until the run's transcript has `n` lines, then a little longer (so the run is
/// well inside what comes next), and kills it with SIGKILL.
fn kill_after(mut child: Child, out: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while lines(&out.join("transcript.jsonl")) < n {
        assert!(Instant::now() < deadline, "the run never wrote {n} lines");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.join("summary.json").exists(), "killed before its end");
}

/// Runs `args` to its end with `stdin` typed in; fails the test unless it exits 0.
fn finish(args: &[&str], stdin: &str) -> String {
    let (code, stdout, stderr) = run_with_input(args, stdin);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    stdout
}

fn same_files(a: &Path, b: &Path) {
    for file in ["transcript.jsonl", "environment.json"] {
        assert!(
            std::fs::read(a.join(file)).unwrap() == std::fs::read(b.join(file)).unwrap(),
            "{file} differs"
        );
    }
    let summary = |dir: &Path| {
        let mut s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        let fields = s.as_object_mut().unwrap();
        fields.remove("wall_ms");
        fields.remove("llm_latency_ms");
        s
    };
    assert_eq!(summary(a), summary(b));
}

#[test]
fn a_run_killed_while_a_model_answers_resumes_without_asking_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("debate");
    let server = Server::start(vec![
        ok(&["Our first point is about health."]),
        ok(&["Our reply is about freedom."]),
        Reply::Slow(Duration::from_millis(5000)),
    ]);
    let scenario = root().join("scenarios/debate.json");
    let args = |resume: bool| {
        let mut a = vec!["run", scenario.to_str().unwrap(), "-q", "--out"];
        a.push(out.to_str().unwrap());
        a.extend(["--llm", "openai", "--model", "m", "--embedder", "hash"]);
        a.extend(["--base-url", &server.base, "--max-turns", "6"]);
        if resume {
            a.push("--resume");
        }
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let child = sopsim()
        .args(args(false))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_after(child, &out, 2);
    let before = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    let asked_before = server.requests().len();
    let answered = lines(&out.join("calls.jsonl"));
    assert!(answered >= 2, "{answered} answers kept");

    let resumed = args(true);
    let resumed: Vec<&str> = resumed.iter().map(String::as_str).collect();
    let said = finish(&resumed, "");
    assert!(said.contains("6 turns"), "{said}");
    let after = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert!(
        after.starts_with(&before),
        "the killed run's turns are kept"
    );
    assert_eq!(after.lines().count(), 6);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let calls = summary["llm_calls"]["total"].as_u64().unwrap() as usize;
    // The slow call was in flight when the run was killed; it is asked again, the
    // answers in the journal are not.
    assert_eq!(server.requests().len() - asked_before, calls - answered);
}

#[test]
fn a_run_killed_inside_a_simultaneous_round_resumes_to_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = root().join("scenarios/prisoners_dilemma.json");
    let args = |out: &Path, extra: &[&str]| {
        let mut a = vec!["run".to_string(), scenario.display().to_string()];
        a.extend(
            [
                "--human",
                "Alice",
                "--llm",
                "scripted",
                "--embedder",
                "hash",
            ]
            .map(String::from),
        );
        a.extend(["--seed", "3", "--out"].map(String::from));
        a.push(out.display().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let moves = ["COOPERATE", "DEFECT", "COOPERATE", "COOPERATE", "DEFECT"];
    let typed = |m: &[&str]| m.iter().map(|m| format!("{m}\n")).collect::<String>();
    let whole = dir.path().join("whole");
    let whole_args = args(&whole, &[]);
    finish(
        &whole_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &typed(&moves),
    );

    let out = dir.path().join("killed");
    let mut child = sopsim()
        .args(args(&out, &[]))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Two rounds' moves; the third round waits for Alice while Bob's move is drafted.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed(&moves[..2]).as_bytes()).unwrap();
    kill_after(child, &out, 4);
    drop(stdin);

    let resumed = args(&out, &["--resume"]);
    let shown = finish(
        &resumed.iter().map(String::as_str).collect::<Vec<_>>(),
        &typed(&moves[2..]),
    );
    assert!(shown.contains("resumed after 4 message(s)"), "{shown}");
    same_files(&whole, &out);
}

/// A JSON service on 127.0.0.1 that answers every call but the `hang`th (1-based),
/// which it reads and never answers; counts the calls. Its answers depend on the
/// path only.
fn weather_service(hang: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut conn in listener.incoming().flatten() {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            if n == hang {
                held.push(conn);
                continue;
            }
            let day = if request.contains("/api/today") {
                "today"
            } else {
                "tomorrow"
            };
            let body = format!("{{\"forecast\": \"rain\", \"day\": \"{day}\"}}");
            let _ = conn.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                    .as_bytes(),
            );
        }
    });
    (base, count)
}

/// Two forecasts, each looked up with the `http` tool.
fn forecaster(dir: &Path, base: &str) -> String {
    let doc = serde_json::json!({
        "name": "forecast",
        "agents": {"Wes": {"roles": {"brief": "Forecaster"}}},
        "tools": {"weather": {"kind": "http", "description": "The weather service.", "config": {"allow": [format!("{base}/api/")]}}},
        "sop": {"start": "brief", "states": {"brief": {
            "roles": ["Forecaster"],
            "components": {"Forecaster": {"tools": ["weather"], "max_tool_steps": 2}},
            "transition": {"max_turns": 2}, "next": ["end"]
        }}},
        "script": {
            "agents": {"Wes": ["Rain today.", "Rain tomorrow."]},
            "decisions": {"Wes": [
                {"tool": "weather", "arguments": {"url": format!("{base}/api/today")}},
                "answer",
                {"tool": "weather", "arguments": {"url": format!("{base}/api/tomorrow")}},
                "answer"
            ]}
        }
    });
    let path = dir.join(format!("forecast-{}.json", base.len()));
    std::fs::write(&path, doc.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn a_run_killed_during_a_tool_step_resumes_without_calling_the_tool_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = |scenario: &str, out: &Path, extra: &[&str]| {
        let mut a = vec![
            "run",
            scenario,
            "-q",
            "--llm",
            "scripted",
            "--embedder",
            "hash",
        ];
        a.push("--out");
        let out = out.display().to_string();
        let mut a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        a.push(out);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    // The second call hangs: the run is killed inside its second turn's tool step.
    let (base, calls) = weather_service(2);
    let scenario = forecaster(dir.path(), &base);
    let out = dir.path().join("killed");
    let child = sopsim()
        .args(run(&scenario, &out, &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while calls.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the second call never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_after(child, &out, 1);
    let resumed = run(&scenario, &out, &["--resume"]);
    finish(&resumed.iter().map(String::as_str).collect::<Vec<_>>(), "");
    // The first call came from the journal; the one that hung was made again.
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // The same scenario uninterrupted (the service answers every call from now on).
    let whole = dir.path().join("whole");
    let whole_args = run(&scenario, &whole, &[]);
    finish(
        &whole_args.iter().map(String::as_str).collect::<Vec<_>>(),
        "",
    );
    same_files(&whole, &out);
}
