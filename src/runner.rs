//! `sopsim run` as a library call: load the scenario, build the services the flags ask
//! for, run with live output and files, and classify failures for the exit code.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use thiserror::Error;

use crate::embed::{EmbedService, Embedder, HashEmbedder, MiniLm, OpenAiEmbedder};
use crate::error::SimError;
use crate::events::{EventSink, FrontendLog, TerminalSink};
use crate::llm::cost::PriceTable;
use crate::llm::local::{LocalBackend, LocalOptions};
use crate::llm::openai::{OpenAiBackend, OpenAiOptions, RetryPolicy};
use crate::llm::record::{Recorder, Replayer};
use crate::llm::{LlmBackend, ScriptedBackend};
use crate::models::{self, ModelError};
use crate::output::{RunDir, TranscriptWriter};
use crate::scenario::aiwaves::Imported;
use crate::scenario::{self, Mode, Scenario};
use crate::sim::{self, EndReason, RunConfig, RunOutcome, Services};
use crate::tokens::Estimator;
use crate::tokens::TokenCounter;

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmChoice {
    /// A llama-architecture GGUF model run by candle (default: SmolLM2-135M-Instruct).
    Local,
    /// An OpenAI-compatible server.
    OpenAi,
    /// Replies from the scenario's `script`.
    Scripted,
}

/// Which embedder indexes messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// all-MiniLM-L6-v2 through candle.
    MiniLm,
    /// `POST {base}/embeddings` on an OpenAI-compatible server.
    OpenAi,
    /// Feature hashing: no model, microseconds per message.
    Hash,
}

/// Which models to use and where they are.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    pub llm: LlmChoice,
    /// A GGUF file for `--llm local` (default: the fetched SmolLM2), or the model name
    /// for `--llm openai`.
    pub model: Option<PathBuf>,
    /// The server for `--llm openai` (default: `OPENAI_BASE_URL`, else OpenAI's).
    pub base_url: Option<String>,
    /// `--llm openai`: attempts per call, response timeout, calls in flight per server.
    pub max_attempts: u32,
    pub timeout: std::time::Duration,
    pub concurrency: usize,
    /// Prices to add to or override the built-in table (JSON, USD per 1M tokens).
    pub prices: Option<PathBuf>,
    /// Store every model request and response in this folder.
    pub record: Option<PathBuf>,
    /// Answer every model request from this recording, with no model or server.
    pub replay: Option<PathBuf>,
    pub embedder: EmbedderChoice,
    /// A folder with config.json, model.safetensors and tokenizer.json (default: the
    /// fetched MiniLM).
    pub embedder_model: Option<PathBuf>,
    /// Told about fetching a missing model.
    pub fetch_observer: Observer,
}

/// A shared [`models::FetchObserver`].
#[derive(Clone)]
pub struct Observer(pub Arc<dyn models::FetchObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl Default for Observer {
    fn default() -> Self {
        Self(Arc::new(models::Quiet))
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub scenario: PathBuf,
    pub out: Option<PathBuf>,
    pub mode: Option<Mode>,
    pub seed: u64,
    pub max_turns: Option<u64>,
    pub models: ModelOptions,
    pub humans: Vec<String>,
    /// Stop at a turn boundary once the run has cost this many US dollars.
    pub budget_usd: Option<f64>,
    /// Stop at a turn boundary once this many tokens were used.
    pub max_total_tokens: Option<u64>,
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

impl Default for ModelOptions {
    /// The local models, and the HTTP settings `sopsim run` defaults to.
    fn default() -> Self {
        Self {
            llm: LlmChoice::Local,
            model: None,
            base_url: None,
            max_attempts: 5,
            timeout: std::time::Duration::from_secs(120),
            concurrency: 8,
            prices: None,
            record: None,
            replay: None,
            embedder: EmbedderChoice::MiniLm,
            embedder_model: None,
            fetch_observer: Observer::default(),
        }
    }
}

/// Loads and validates a scenario file: native, or an aiwaves config translated.
pub fn load(path: &std::path::Path) -> Result<Scenario, CommandError> {
    load_with_notes(path).map(|(s, _)| s)
}

/// [`load`], with what an imported aiwaves config could not carry over.
pub fn load_with_notes(
    path: &std::path::Path,
) -> Result<(Scenario, Option<Imported>), CommandError> {
    scenario::load_any(path).map_err(|e| CommandError::BadInput(e.to_string()))
}

impl From<ModelError> for CommandError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Unknown { .. } => CommandError::BadInput(e.to_string()),
            other => CommandError::Runtime(other.to_string()),
        }
    }
}

fn existing(flag: &str, path: &std::path::Path) -> Result<(), CommandError> {
    if path.exists() {
        Ok(())
    } else {
        Err(CommandError::BadInput(format!(
            "{flag} {}: no such file or folder",
            path.display()
        )))
    }
}

/// The chat model sopsim fetches and runs when none is named.
pub const DEFAULT_CHAT_MODEL: &models::ModelSpec = &models::QWEN05;

/// Loads the chat model the options name — a GGUF file, or a known model's name —
/// fetching a known model on first use.
pub fn local_backend(opts: &ModelOptions) -> Result<LocalBackend, CommandError> {
    let observer = opts.fetch_observer.0.as_ref();
    let known = |spec: &models::ModelSpec| -> Result<PathBuf, CommandError> {
        let root = models::models_dir();
        spec.ensure(&root, observer)?;
        Ok(spec.main_file(&root))
    };
    let path = match &opts.model {
        Some(p) => match models::find(&p.to_string_lossy()) {
            Ok(spec) if spec.name != models::MINILM.name => known(spec)?,
            _ => {
                existing("--model", p)?;
                p.clone()
            }
        },
        None => known(DEFAULT_CHAT_MODEL)?,
    };
    LocalBackend::start(&path, LocalOptions::default()).map_err(|e| match &opts.model {
        Some(p) => CommandError::BadInput(format!("--model {}: {e}", p.display())),
        None => CommandError::Runtime(e.to_string()),
    })
}

/// The OpenAI-compatible backend for the options and the environment. When no model
/// is named (`--model`, `OPENAI_MODEL`, the scenario's top-level `llm.model`), the server
/// is asked which one it serves.
pub fn openai_backend(opts: &ModelOptions, scenario_model: Option<&str>) -> Result<OpenAiBackend, CommandError> {
    let mut o = OpenAiOptions::from_env();
    if let Some(base) = &opts.base_url {
        o.base_url = base.clone();
    }
    if let Some(model) = &opts.model {
        o.model = Some(model.display().to_string());
    }
    o.retry.attempts = opts.max_attempts;
    o.read_timeout = opts.timeout;
    o.concurrency = opts.concurrency;
    let unnamed = o.model.is_none() && scenario_model.is_none();
    let mut backend = OpenAiBackend::new(o).map_err(|e| CommandError::BadInput(format!("--base-url: {e}")))?;
    if unnamed {
        backend.discover_model().map_err(|e| CommandError::Runtime(e.to_string()))?;
    }
    Ok(backend)
}

/// Loads the embedder the options name, fetching the default model on first use.
pub fn embedder(opts: &ModelOptions) -> Result<Arc<dyn Embedder>, CommandError> {
    Ok(match opts.embedder {
        EmbedderChoice::Hash => Arc::new(HashEmbedder::default()),
        EmbedderChoice::OpenAi => {
            let mut o = OpenAiOptions::from_env();
            if let Some(base) = &opts.base_url {
                o.base_url = base.clone();
            }
            let model = opts
                .embedder_model
                .as_ref()
                .map(|m| m.display().to_string())
                .or_else(|| {
                    std::env::var("OPENAI_EMBEDDING_MODEL")
                        .ok()
                        .filter(|m| !m.is_empty())
                })
                .unwrap_or_else(|| "text-embedding-3-small".into());
            let retry = RetryPolicy {
                attempts: opts.max_attempts,
                ..RetryPolicy::default()
            };
            Arc::new(
                OpenAiEmbedder::new(&o.base_url, o.api_key, model, opts.timeout, retry)
                    .map_err(|e| CommandError::BadInput(format!("--embedder openai: {e}")))?,
            )
        }
        EmbedderChoice::MiniLm => {
            let dir = match &opts.embedder_model {
                Some(d) => {
                    existing("--embedder-model", d)?;
                    d.clone()
                }
                None => models::MINILM.ensure(&models::models_dir(), opts.fetch_observer.0.as_ref())?,
            };
            Arc::new(MiniLm::load(&dir).map_err(|e| match &opts.embedder_model {
                Some(d) => CommandError::BadInput(format!("--embedder-model {}: {e}", d.display())),
                None => CommandError::Runtime(e.to_string()),
            })?)
        }
    })
}

/// A model backend and its token counter.
pub type Llm = (Arc<dyn LlmBackend>, Arc<dyn TokenCounter>);

/// The model backend the options name (the scripted one answers from `scenario`'s
/// script), behind the recorder when `--record` is given.
pub fn llm(scenario: &Scenario, opts: &ModelOptions) -> Result<Llm, CommandError> {
    let (llm, counter): (Arc<dyn LlmBackend>, Arc<dyn TokenCounter>) =
        match (&opts.replay, opts.llm) {
            (Some(dir), _) => (
                Arc::new(Replayer::new(dir).map_err(CommandError::BadInput)?),
                Arc::new(Estimator),
            ),
            (None, LlmChoice::Scripted) => (
                Arc::new(ScriptedBackend::new(scenario.script.clone())),
                Arc::new(Estimator),
            ),
            (None, LlmChoice::Local) => {
                let backend = local_backend(opts)?;
                let counter = backend.counter();
                (Arc::new(backend), counter)
            }
            (None, LlmChoice::OpenAi) => (
                Arc::new(openai_backend(opts, scenario.llm.model.as_deref())?),
                Arc::new(Estimator),
            ),
        };
    let llm: Arc<dyn LlmBackend> = match &opts.record {
        Some(dir) => Arc::new(
            Recorder::new(llm, dir)
                .map_err(|e| CommandError::BadInput(format!("--record {}: {e}", dir.display())))?,
        ),
        None => llm,
    };
    Ok((llm, counter))
}

/// The price table: built in, plus `--prices`.
pub fn prices(opts: &ModelOptions) -> Result<Arc<PriceTable>, CommandError> {
    Ok(Arc::new(match &opts.prices {
        Some(file) => PriceTable::with_file(file).map_err(CommandError::BadInput)?,
        None => PriceTable::built_in(),
    }))
}

/// The embedding service for the options (one worker, batches of up to 64), or none
/// loaded at all when no scenario to run reads an embedding.
pub fn embed_service(opts: &ModelOptions, needed: bool) -> Result<EmbedService, CommandError> {
    if !needed {
        return Ok(EmbedService::start(
            Arc::new(crate::embed::NoEmbedder),
            1,
            1,
        ));
    }
    Ok(EmbedService::start(embedder(opts)?, 1, 64))
}

/// The services a run needs: one model backend and one embedding service (none is
/// loaded for a scenario that never reads an embedding).
pub fn services(scenario: &Scenario, opts: &ModelOptions) -> Result<Services, CommandError> {
    let (llm, counter) = llm(scenario, opts)?;
    Ok(Services {
        llm,
        embed: embed_service(opts, scenario.needs_embeddings())?,
        counter,
        prices: prices(opts)?,
    })
}

/// Runs a scenario file as `sopsim run` does.
pub fn run(opts: &RunOptions) -> Result<RunOutcome, CommandError> {
    let (mut scenario, imported) = load_with_notes(&opts.scenario)?;
    let imported = imported.unwrap_or_default();
    let mut models = opts.models.clone();
    if models.base_url.is_none() {
        // An aiwaves config's API_BASE names its server; only --base-url overrides it.
        models.base_url = imported.base_url.clone();
    }
    if opts.models.llm == LlmChoice::OpenAi && opts.models.model.is_some() {
        // --model names the server's model for the whole run; only agent, role and
        // state settings are more specific.
        scenario.llm.model = None;
    }
    let scenario = Arc::new(scenario);
    let services = services(&scenario, &models)?;
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
        budget_usd: opts.budget_usd,
        max_total_tokens: opts.max_total_tokens,
        notes: imported.notes,
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
        dir.write_final(&outcome.environment, &outcome.summary)?;
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
