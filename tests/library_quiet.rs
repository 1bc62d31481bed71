//! The library never prints and never exits the process: runs, benchmarks and failures
//! (an MCP server writing to its stderr among them) through the library API, in a child
//! process whose stdout and stderr must stay empty. (A harness-less test, so no test
//! harness writes to stdout either.)

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use sopsim::error::CancelToken;
use sopsim::runner::{self, RunIo, RunOptions};
use sopsim::scenario::Mode;
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim_bench::{self as bench, BenchOptions, Unobserved};

const CHILD: &str = "SOPSIM_LIBRARY_QUIET_CHILD";

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.json"))
}

fn scripted() -> ModelOptions {
    ModelOptions {
        llm: LlmChoice::Scripted,
        embedder: EmbedderChoice::Hash,
        ..ModelOptions::default()
    }
}

/// What the child does: everything a library user might, success and failure.
fn use_the_library() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let opts = RunOptions {
        out: Some(dir.path().join("run")),
        seed: 3,
        models: scripted(),
        ..RunOptions::new(scenario("debate"))
    };
    let outcome = runner::run(&opts, RunIo::default()).expect("the debate runs");
    assert!(outcome.summary.turns > 0);

    // Failures come back as values: a missing file, a person with no input, an
    // unreachable server.
    let missing = RunOptions {
        scenario: dir.path().join("nowhere.json").into(),
        ..opts.clone()
    };
    assert!(runner::run(&missing, RunIo::default()).is_err());
    let human = RunOptions {
        humans: vec!["Alice".into()],
        out: None,
        ..opts.clone()
    };
    assert!(runner::run(&human, RunIo::default()).is_err());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let offline = RunOptions {
        out: None,
        models: ModelOptions {
            llm: LlmChoice::OpenAi,
            model: Some("m".into()),
            base_url: Some(format!("http://127.0.0.1:{port}")),
            max_attempts: 2,
            timeout: std::time::Duration::from_millis(500),
            ..scripted()
        },
        ..opts.clone()
    };
    assert!(runner::run(&offline, RunIo::default()).is_err());

    #[cfg(feature = "mcp")]
    a_noisy_mcp_server_is_heard_only_in_the_error(&dir, &opts);

    let bench_opts = BenchOptions {
        scenarios: vec![scenario("prisoners_dilemma")],
        modes: vec![Mode::Cooperative, Mode::Competitive],
        seeds: 2,
        first_seed: 0,
        jobs: 2,
        out: dir.path().join("bench"),
        max_turns: None,
        models: scripted(),
        allowed_paths: Vec::new(),
        allowed_commands: Default::default(),
        shard: None,
        judge: None,
        reference: None,
    };
    let twice = BenchOptions {
        modes: vec![Mode::Cooperative, Mode::Cooperative],
        ..bench_opts.clone()
    };
    let Err(err) = bench::run(&twice, &Unobserved, CancelToken::new()) else {
        panic!("a benchmark given a mode twice ran");
    };
    assert!(err.is_bad_input(), "{err}");
    assert!(err.to_string().contains("cooperative twice"), "{err}");
    let run = bench::run(&bench_opts, &Unobserved, CancelToken::new()).expect("the benchmark runs");
    assert_eq!(run.executed.finished, 4);
    let _ = Arc::new(run);
}

/// An MCP server that writes to its stderr and dies: what it wrote is in the error,
/// not on the terminal.
#[cfg(feature = "mcp")]
fn a_noisy_mcp_server_is_heard_only_in_the_error(dir: &tempfile::TempDir, opts: &RunOptions) {
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("debate")).unwrap()).unwrap();
    doc["tools"] = serde_json::json!({"add": {"kind": "mcp", "config": {
        "command": "sh",
        "args": ["-c", "echo the server is noisy >&2; exit 3"],
        "tool": "add",
    }}});
    let file = dir.path().join("noisy.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let noisy = RunOptions {
        scenario: file.into(),
        out: None,
        allowed_commands: sopsim::scenario::CommandConsent::Programs(vec!["sh".into()]),
        ..opts.clone()
    };
    let err = runner::run(&noisy, RunIo::default()).expect_err("the server dies");
    let text = sopsim::error::chain(&err);
    assert!(text.contains("the server is noisy"), "{text}");
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        use_the_library();
        return;
    }
    let me = std::env::current_exe().expect("the test's own path");
    let out = Command::new(me)
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child failed: {}\n{stderr}",
        out.status
    );
    assert!(
        stdout.is_empty(),
        "the library printed to stdout:\n{stdout}"
    );
    assert!(
        stderr.is_empty(),
        "the library printed to stderr:\n{stderr}"
    );
    println!("library_quiet: runs, failures and a benchmark printed nothing");
}
