//! `sopsim run` as a library call: load the scenario, build the services the flags ask
//! for, run with live output and files, and classify failures for the exit code.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use thiserror::Error;

use crate::embed::{EmbedService, HashEmbedder};
use crate::error::SimError;
use crate::events::{EventSink, FrontendLog, TerminalSink};
use crate::llm::{LlmBackend, ScriptedBackend};
use crate::output::{RunDir, TranscriptWriter};
use crate::scenario::{self, Mode, Scenario};
use crate::sim::{self, EndReason, RunConfig, RunOutcome, Services};
use crate::tokens::Estimator;

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmChoice {
    /// Replies from the scenario's `script`.
    Scripted,
}

/// Which embedder indexes messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// Feature hashing: no model, microseconds per message.
    Hash,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub scenario: PathBuf,
    pub out: Option<PathBuf>,
    pub mode: Option<Mode>,
    pub seed: u64,
    pub max_turns: Option<u64>,
    pub llm: LlmChoice,
    pub embedder: EmbedderChoice,
    pub humans: Vec<String>,
    /// No live transcript on stdout.
    pub quiet: bool,
}

/// A failed command, by exit code.
#[derive(Debug, Error)]
pub enum CommandError {
    /// Exit code 2: the scenario or the flags are wrong.
    #[error("{0}")]
    BadInput(String),
    /// Exit code 1: the run failed; everything finished is on disk.
    #[error("{0}")]
    Runtime(String),
}

impl CommandError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::BadInput(_) => 2,
            CommandError::Runtime(_) => 1,
        }
    }
}

impl From<SimError> for CommandError {
    fn from(e: SimError) -> Self {
        match e {
            SimError::BadInput(m) => CommandError::BadInput(m),
            other => CommandError::Runtime(other.to_string()),
        }
    }
}

/// Loads and validates a scenario file.
pub fn load(path: &std::path::Path) -> Result<Scenario, CommandError> {
    scenario::load(path).map_err(|e| CommandError::BadInput(e.to_string()))
}

fn services(scenario: &Scenario, opts: &RunOptions) -> Services {
    let llm: Arc<dyn LlmBackend> = match opts.llm {
        LlmChoice::Scripted => Arc::new(ScriptedBackend::new(scenario.script.clone())),
    };
    let embed = match opts.embedder {
        EmbedderChoice::Hash => EmbedService::start(Arc::new(HashEmbedder::default()), 1, 1),
    };
    Services {
        llm,
        embed,
        counter: Arc::new(Estimator),
    }
}

/// Runs a scenario file as `sopsim run` does.
pub fn run(opts: &RunOptions) -> Result<RunOutcome, CommandError> {
    let scenario = Arc::new(load(&opts.scenario)?);
    let services = services(&scenario, opts);
    let mode = opts.mode.unwrap_or(scenario.environment.mode);
    let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
    if !opts.quiet {
        sinks.push(Arc::new(TerminalSink::stdout()));
    }
    let (dir, transcript, events) = match &opts.out {
        Some(out) => {
            let dir = RunDir::create(out).map_err(|e| {
                CommandError::BadInput(format!(
                    "--out {}: cannot use it as the output folder: {e}",
                    out.display()
                ))
            })?;
            let transcript = TranscriptWriter::create(&dir.path("transcript.jsonl"))?;
            let conversation = format!("{}-{}-{}", scenario.name, mode.as_str(), opts.seed);
            let events = FrontendLog::create(&dir.path("events.jsonl"), conversation, opts.seed)
                .map_err(|source| SimError::Io {
                    what: dir.path("events.jsonl").display().to_string(),
                    source,
                })?;
            let events = Arc::new(events);
            sinks.push(events.clone());
            (Some(dir), Some(transcript), Some(events))
        }
        None => (None, None, None),
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let config = RunConfig {
        mode: opts.mode,
        seed: opts.seed,
        max_turns: opts.max_turns,
        humans: opts.humans.clone(),
        human_input: None,
        sinks,
        transcript,
        cancel: Some(cancel.clone()),
    };
    let outcome = actix::System::new().block_on(async {
        let interrupt = cancel.clone();
        actix::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupted: stopping after the current turn (press Ctrl-C again to quit now)");
                interrupt.store(true, Ordering::Relaxed);
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
        sim::run(scenario.clone(), &services, config).await
    })?;
    if let Some(dir) = &dir {
        dir.write_final(&outcome)?;
    }
    if let Some(e) = events.as_ref().and_then(|e| e.error()) {
        return Err(CommandError::Runtime(format!("writing events.jsonl: {e}")));
    }
    if outcome.summary.ended_by == EndReason::Error {
        let cause = outcome.summary.error.clone().unwrap_or_default();
        let kept = match &opts.out {
            Some(out) => format!(
                "; {} finished turn(s) are in {}",
                outcome.summary.turns,
                out.display()
            ),
            None => String::new(),
        };
        return Err(CommandError::Runtime(format!("{cause}{kept}")));
    }
    Ok(outcome)
}
