//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub(crate) mod server;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use sopsim::embed::{EmbedService, HashEmbedder};
use sopsim::human::LinesInput;
use sopsim::llm::Estimator;
use sopsim::llm::{Completion, LlmBackend, LlmError, LlmRequest, ScriptedBackend, TokenSink};
use sopsim::scenario::{Mode, Scenario};
use sopsim::simulation::{RunOutcome, Services};
use sopsim::{RunIo, RunOptions};

/// Runs the `sopsim` binary with `input` on stdin: its exit code, stdout and stderr.
pub(crate) fn run_with_input(args: &[&str], input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn example(name: &str) -> Scenario {
    load(&root().join("scenarios").join(format!("{name}.json")))
}

/// Loads a scenario file as `sopsim run` does.
pub(crate) fn load(path: &Path) -> Scenario {
    sopsim::load(path, &[]).expect("scenario loads").scenario
}

/// Loads a scenario document made in code, its files looked up beside `origin`.
pub(crate) fn load_document(
    origin: &Path,
    document: serde_json::Value,
) -> Result<Scenario, sopsim::setup::SetupError> {
    let source = sopsim::ScenarioSource::Document {
        origin: origin.to_path_buf(),
        document,
    };
    sopsim::load(source, &[]).map(|l| l.scenario)
}

/// Runs a scenario on `services` (the library's one way in), with `opts` and `io` as
/// the caller sets them.
pub(crate) fn run_on(
    scenario: impl Into<Arc<Scenario>>,
    services: &Services,
    opts: impl FnOnce(RunOptions) -> RunOptions,
    io: RunIo,
) -> Result<RunOutcome, sopsim::RunError> {
    let opts = opts(RunOptions::new(scenario.into()));
    let io = RunIo {
        services: Some(services.clone()),
        ..io
    };
    sopsim::run(&opts, io)
}

/// Wraps a backend and keeps every request it sees.
pub(crate) struct Recording {
    pub inner: Arc<dyn LlmBackend>,
    pub requests: Mutex<Vec<LlmRequest>>,
}

impl Recording {
    pub(crate) fn new(inner: Arc<dyn LlmBackend>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            requests: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn take(&self) -> Vec<LlmRequest> {
        std::mem::take(&mut self.requests.lock().unwrap())
    }
}

impl LlmBackend for Recording {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn draws(&self) -> bool {
        self.inner.draws()
    }
    fn candidates(&self) -> u32 {
        self.inner.candidates()
    }
    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request, stream)
    }
}

pub(crate) fn services_with(llm: Arc<dyn LlmBackend>) -> Services {
    Services {
        llm,
        embed: EmbedService::inline(Arc::new(HashEmbedder::default())),
        counter: Arc::new(Estimator),
        prices: Default::default(),
    }
}

/// Runs a scenario with its script, recording every model request.
pub(crate) fn run_recorded(
    scenario: &Scenario,
    mode: Option<Mode>,
    seed: u64,
    human_lines: &[&str],
) -> (RunOutcome, Vec<LlmRequest>) {
    let rec = Recording::new(Arc::new(ScriptedBackend::new(scenario.script.clone())));
    let services = services_with(rec.clone());
    let io = RunIo {
        human_input: Some(Arc::new(LinesInput::new(human_lines.iter().copied()))),
        ..RunIo::default()
    };
    let outcome = run_on(
        scenario.clone(),
        &services,
        |o| RunOptions { mode, seed, ..o },
        io,
    )
    .expect("run completes");
    (outcome, rec.take())
}

/// The transcript as `transcript.jsonl` text.
pub(crate) fn jsonl(outcome: &RunOutcome) -> String {
    outcome
        .transcript
        .iter()
        .map(|m| serde_json::to_string(m.as_ref()).unwrap() + "\n")
        .collect()
}

/// Compares with `tests/golden/<name>`, or rewrites it when `UPDATE_GOLDEN=1`.
pub(crate) fn assert_golden(name: &str, actual: &str) {
    let path: &Path = &root().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_GOLDEN=1", path.display()));
    if expected != actual {
        panic!("{} differs from this run; review the diff and rerun with UPDATE_GOLDEN=1 if intended.\n--- expected\n{expected}\n--- actual\n{actual}", path.display());
    }
}

/// All text sent to the model in one request.
pub(crate) fn prompt_text(req: &LlmRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
