//! The `mcp` tool kind against an MCP server written here with the SDK's server side:
//! this test binary serves MCP over stdio when started with `--serve-mcp`, and the
//! scenarios start it as their server. Listing (description and schema), calls, a
//! tool's own error, a server that dies mid-run, consent to start a server, and servers
//! that never outlive their run (one that never answers, one busy in a slow call).
//! (A harness-less test: the same binary is the server, and a test harness would
//! write to the protocol's stdout.)

use std::sync::Arc;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{schemars, tool, tool_router, ServiceExt};
use serde_json::json;
use sopsim::llm::{CallKind, LlmBackend, LlmRequest, ScriptedBackend};
use sopsim::scenario::{CommandConsent, Scenario};
use sopsim::simulation::MessageKind;
use sopsim::simulation::{RunOutcome, Services};
use sopsim::{RunError, RunIo, RunOptions};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// the first number
    a: i64,
    /// the second number
    b: i64,
}

#[derive(Debug, Clone, Default)]
struct Server;

#[tool_router(server_handler)]
impl Server {
    #[tool(description = "Add two whole numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Always fails")]
    fn fail(&self) -> Result<String, String> {
        Err("the flux capacitor is offline".into())
    }

    #[tool(description = "Takes a minute")]
    fn slow(&self) -> String {
        std::thread::sleep(std::time::Duration::from_secs(60));
        "done".into()
    }

    #[tool(description = "Answers with 20 MiB of text")]
    fn huge(&self) -> String {
        "x".repeat(20 << 20)
    }

    #[tool(description = "Stops the server")]
    fn quit(&self) -> String {
        std::process::exit(0)
    }
}

fn serve() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let running = Server.serve(rmcp::transport::stdio()).await.unwrap();
        let _ = running.waiting().await;
    });
}

fn scenario(decisions: serde_json::Value) -> Scenario {
    let me = std::env::current_exe().unwrap();
    let tool = |name: &str| json!({"kind": "mcp", "config": {"command": me.display().to_string(), "args": ["--serve-mcp"], "tool": name}});
    let doc = json!({
        "name": "mcp",
        "agents": {"Max": {"roles": {"work": "Worker"}}},
        "tools": {"add": tool("add"), "fail": tool("fail"), "quit": tool("quit")},
        "sop": {"start": "work", "states": {"work": {
            "roles": ["Worker"],
            "components": {"Worker": {"tools": ["add", "fail", "quit"], "max_tool_steps": 5}},
            "transition": {"max_turns": 1}, "next": ["end"]
        }}},
        "script": {"agents": {"Max": ["Done."]}, "decisions": {"Max": decisions}}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    sopsim::load(path.as_path(), &[]).unwrap().scenario
}

/// Keeps the decision requests.
struct Decisions {
    inner: ScriptedBackend,
    seen: std::sync::Mutex<Vec<LlmRequest>>,
}

impl LlmBackend for Decisions {
    fn describe(&self) -> String {
        "scripted".into()
    }
    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<sopsim::llm::TokenSink>,
    ) -> futures::future::BoxFuture<'a, Result<sopsim::llm::Completion, sopsim::llm::LlmError>>
    {
        if request.context.kind == CallKind::Decide {
            self.seen.lock().unwrap().push(request.clone());
        }
        self.inner.complete(request, stream)
    }
}

/// Runs `s` on `services`, allowing the programs `consent` names.
fn run_with(
    s: impl Into<Arc<Scenario>>,
    services: &Services,
    consent: CommandConsent,
) -> Result<RunOutcome, RunError> {
    let opts = RunOptions {
        allowed_commands: consent,
        ..RunOptions::new(s.into())
    };
    let io = RunIo {
        services: Some(services.clone()),
        ..RunIo::default()
    };
    sopsim::run(&opts, io)
}

/// A run that may start any MCP server.
fn allowed() -> CommandConsent {
    CommandConsent::AnyMcpServer
}

fn run(s: Scenario) -> (RunOutcome, Vec<LlmRequest>) {
    let backend = Arc::new(Decisions {
        inner: ScriptedBackend::new(s.script.clone()),
        seen: Default::default(),
    });
    let services = Services {
        llm: backend.clone(),
        ..Services::scripted(&s)
    };
    let outcome = run_with(s, &services, allowed()).unwrap();
    let seen = backend.seen.lock().unwrap().clone();
    (outcome, seen)
}

fn results(outcome: &RunOutcome) -> Vec<String> {
    outcome
        .transcript
        .iter()
        .filter(|m| m.kind == MessageKind::ToolResult)
        .map(|m| m.content.clone())
        .collect()
}

fn lists_and_calls_tools() {
    let (outcome, decisions) = run(scenario(json!([
        {"tool": "add", "arguments": {"a": 2, "b": 3}},
        {"tool": "fail", "arguments": {}},
        "answer"
    ])));
    let tools = &decisions[0].tools.as_ref().unwrap().tools;
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(
        add.description, "Add two whole numbers",
        "the server's description"
    );
    assert_eq!(
        add.parameters["properties"]["a"]["type"], "integer",
        "the server's schema"
    );
    let got = results(&outcome);
    assert!(got[0].starts_with("add: 5 ["), "{got:?}");
    assert!(
        got[1]
            .contains("Avoidable error: the tool reported an error: the flux capacitor is offline"),
        "{got:?}"
    );
    assert_eq!(
        outcome.environment.store["add"]["mcp"][0]["objects"][0]["text"],
        "5"
    );
    println!("ok: lists and calls tools");
}

fn arguments_are_checked_against_the_servers_schema() {
    let (outcome, _) = run(scenario(
        json!([{"tool": "add", "arguments": {"a": "two", "b": 3}}, "answer"]),
    ));
    let got = results(&outcome);
    assert!(
        got[0].contains("do not match the schema of `add`"),
        "{got:?}"
    );
    println!("ok: arguments are checked against the server's schema");
}

fn a_dead_server_is_an_error_and_the_run_goes_on() {
    let (outcome, _) = run(scenario(json!([
        {"tool": "quit", "arguments": {}},
        {"tool": "add", "arguments": {"a": 1, "b": 1}},
        "answer"
    ])));
    let got = results(&outcome);
    assert!(got.iter().all(|r| r.contains("Unknown error")), "{got:?}");
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(outcome.transcript.last().unwrap().content, "Done.");
    println!("ok: a dead server is an error and the run goes on");
}

fn an_answer_too_long_to_read_is_a_clear_error_and_the_server_goes_on() {
    let mut s = scenario(json!([
        {"tool": "huge", "arguments": {}},
        {"tool": "add", "arguments": {"a": 1, "b": 2}},
        "answer"
    ]));
    let mut huge = s.tools["add"].clone();
    huge.config.insert("tool".into(), json!("huge"));
    s.tools.insert("huge".into(), huge);
    s.sop.states["work"].components["Worker"]
        .tools
        .push("huge".into());
    let (outcome, _) = run(s);
    let got = results(&outcome);
    assert!(
        got[0].contains("the MCP server's answer is over 8 MiB"),
        "not a timeout: {got:?}"
    );
    assert!(got[1].starts_with("add: 3 ["), "{got:?}");
    println!("ok: an answer too long to read is a clear error");
}

fn a_missing_server_is_a_setup_error_naming_the_field() {
    let mut s = scenario(json!([]));
    s.tools["add"]
        .config
        .insert("command".into(), json!("/no/such/mcp-server"));
    let services = Services::scripted(&s);
    let err = run_with(s, &services, allowed()).unwrap_err();
    let text = sopsim::error::chain(&err);
    assert!(err.is_bad_input(), "{text}");
    assert!(text.contains("tools.add.config.command"), "{text}");
    println!("ok: a missing server is a setup error naming the field");
}

fn no_server_starts_without_consent() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let mut s = scenario(json!([]));
    for tool in ["add", "fail", "quit"] {
        s.tools.shift_remove(tool);
    }
    s.sop.states["work"].components["Worker"].tools.clear();
    s.tools.insert(
        "touch".into(),
        serde_json::from_value(json!({"kind": "mcp", "config": {
            "command": "sh", "args": ["-c", format!("touch '{}'", marker.display())], "tool": "t"
        }}))
        .unwrap(),
    );
    let s = Arc::new(s);
    let services = Services::scripted(&s);
    for consent in [
        CommandConsent::Nothing,
        CommandConsent::Programs(vec!["/bin/sh".into()]),
    ] {
        let err = run_with(s.clone(), &services, consent.clone()).unwrap_err();
        let text = sopsim::error::chain(&err);
        assert!(
            err.is_bad_input() && text.contains("tools.touch.config.command"),
            "{consent:?}: {text}"
        );
        assert!(text.contains("not allowed"), "{consent:?}: {text}");
        assert!(!marker.exists(), "{consent:?}: the program ran");
    }
    // Allowed, it runs (and, being no MCP server, fails its handshake).
    let _ = run_with(s, &services, CommandConsent::Programs(vec!["sh".into()]));
    assert!(marker.exists(), "the allowed program ran");
    println!("ok: no server starts without consent");
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped: it runs nothing).
fn is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn gone_soon(pid: &str) -> bool {
    for _ in 0..100 {
        if is_gone(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// The servers run through `sh`, which writes its process id first and then becomes
/// the server (`exec`), so the id is the server's.
fn servers_never_outlive_their_run() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let pid_file = dir.path().join("pid");
    let through_sh = |server: String| {
        json!({"kind": "mcp", "config": {
            "command": "sh",
            "args": ["-c", format!("echo $$ > '{}'; exec {server}", pid_file.display())],
            "tool": "slow", "timeout_ms": 300
        }})
    };
    // One that never answers the handshake and ignores its closed stdin; one busy in a
    // call that outlasts its timeout when the run ends.
    let cases = [
        ("silent", through_sh("sleep 1000".into()), json!([])),
        (
            "busy",
            through_sh(format!("'{}' --serve-mcp", me.display())),
            json!([{"tool": "slow", "arguments": {}}, "answer"]),
        ),
    ];
    for (name, tool, decisions) in cases {
        let _ = std::fs::remove_file(&pid_file);
        let mut s = scenario(decisions);
        s.tools
            .insert("slow".into(), serde_json::from_value(tool).unwrap());
        for t in ["add", "fail", "quit"] {
            s.tools.shift_remove(t);
        }
        s.sop.states["work"].components["Worker"].tools = vec!["slow".into()];
        let s = Arc::new(s);
        let services = Services::scripted(&s);
        let _ = run_with(s, &services, allowed());
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        assert!(gone_soon(pid.trim()), "{name}: the server outlived its run");
    }
    println!("ok: servers never outlive their run");
}

fn main() {
    if std::env::args().any(|a| a == "--serve-mcp") {
        serve();
        return;
    }
    lists_and_calls_tools();
    arguments_are_checked_against_the_servers_schema();
    a_dead_server_is_an_error_and_the_run_goes_on();
    an_answer_too_long_to_read_is_a_clear_error_and_the_server_goes_on();
    a_missing_server_is_a_setup_error_naming_the_field();
    no_server_starts_without_consent();
    servers_never_outlive_their_run();
}
