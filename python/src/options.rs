//! The options Python sends, as JSON text, read into the library's option structs.
//! Python has checked names and types already (`sopsim/_options.py`); what is left to
//! refuse here is a value the library would not take.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use sopsim::llm::ApiKey;
use sopsim::runner::{Existing, RunOptions, ScenarioSource};
use sopsim::scenario::{CommandConsent, Mode};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim_bench::BenchOptions;

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn path(v: &Value, key: &str) -> Option<PathBuf> {
    text(v, key).map(PathBuf::from)
}

/// A whole number the library takes (0 to 2⁶⁴ − 1), or `None` when not given; a value
/// out of that range is refused rather than replaced by a default.
fn number(v: &Value, key: &str) -> Result<Option<u64>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key}: {n} is not a whole number from 0 to 2**64-1")),
    }
}

fn mode(name: &str) -> Result<Mode, String> {
    name.parse()
        .map_err(|e: sopsim::scenario::UnknownMode| format!("mode: {e}"))
}

/// The model settings every call shares.
fn models(v: &Value) -> Result<ModelOptions, String> {
    let llm = match text(v, "llm") {
        None | Some("local") => LlmChoice::Local,
        Some("openai") => LlmChoice::OpenAi,
        Some("scripted") => LlmChoice::Scripted,
        Some(other) => return Err(format!("llm: {other:?} is not local, openai or scripted")),
    };
    let embedder = match text(v, "embedder") {
        None | Some("minilm") => EmbedderChoice::MiniLm,
        Some("openai") => EmbedderChoice::OpenAi,
        Some("hash") => EmbedderChoice::Hash,
        Some(other) => return Err(format!("embedder: {other:?} is not minilm, openai or hash")),
    };
    let defaults = ModelOptions::default();
    let (models_dir, pip) = models_place();
    Ok(ModelOptions {
        models_dir,
        pip,
        llm,
        model: path(v, "model"),
        base_url: text(v, "base_url").map(String::from),
        api_key: text(v, "api_key").and_then(ApiKey::new),
        timeout: v
            .get("timeout")
            .and_then(Value::as_f64)
            .map_or(defaults.timeout, Duration::from_secs_f64),
        concurrency: number(v, "concurrency")?.map_or(defaults.concurrency, |c| c as usize),
        record: path(v, "record"),
        replay: path(v, "replay"),
        embedder,
        ..defaults
    })
}

/// A variable of the environment, when it is set to something.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where the local models live, and the Python that fetches them
/// ([`sopsim::models::place`] over the environment). The bindings are the library's
/// edge in Python, as the command line is in a shell.
pub(crate) fn models_place() -> (PathBuf, sopsim::models::Pip) {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    sopsim::models::place(&var, &here)
}

/// How local model work runs, from `SOPSIM_THREADS` and `SOPSIM_KERNELS`.
pub(crate) fn compute_settings() {
    sopsim::setup::set_compute_from(&var);
}

/// A run's options: `scenario` (a path), `document` (the scenario as JSON, when it was
/// made from a dict), `mode`, `seed`, `max_turns`, `out`, `overwrite`, `resume` and the
/// model settings.
pub(crate) fn run_options(json: &str) -> Result<RunOptions, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let file = path(&v, "scenario").ok_or("scenario: missing")?;
    let scenario = match v.get("document").filter(|d| !d.is_null()) {
        Some(document) => ScenarioSource::Document {
            origin: file,
            document: document.clone(),
        },
        None => ScenarioSource::File(file),
    };
    Ok(RunOptions {
        out: path(&v, "out"),
        mode: text(&v, "mode").map(mode).transpose()?,
        seed: number(&v, "seed")?.unwrap_or(0),
        max_turns: number(&v, "max_turns")?,
        models: models(&v)?,
        allowed_commands: CommandConsent::Nothing,
        existing: match (v.get("overwrite"), v.get("resume")) {
            (Some(Value::Bool(true)), _) => Existing::Replace,
            (_, Some(Value::Bool(true))) => Existing::Resume,
            _ => Existing::Refuse,
        },
        ..RunOptions::new(scenario)
    })
}

/// The scenario's name and the mode its file sets (`name`, `file_mode`), which name a
/// run's events as the command line names them.
pub(crate) fn identity(json: &str) -> Result<(String, Mode), String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let name = text(&v, "name").ok_or("name: missing")?.to_string();
    Ok((name, mode(text(&v, "file_mode").unwrap_or("cooperative"))?))
}

/// A benchmark's options: `scenarios` (paths), `seeds`, `first_seed`, `modes`, `jobs`,
/// `out`, `max_turns` and the model settings.
pub(crate) fn bench_options(json: &str) -> Result<BenchOptions, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let scenarios = v
        .get("scenarios")
        .and_then(Value::as_array)
        .ok_or("scenarios: missing")?
        .iter()
        .map(|s| s.as_str().map(PathBuf::from).ok_or("scenarios: paths only"))
        .collect::<Result<Vec<_>, _>>()?;
    let modes = v
        .get("modes")
        .and_then(Value::as_array)
        .ok_or("modes: missing")?
        .iter()
        .map(|m| mode(m.as_str().unwrap_or_default()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BenchOptions {
        scenarios,
        modes,
        seeds: number(&v, "seeds")?.unwrap_or(8),
        first_seed: number(&v, "first_seed")?.unwrap_or(0),
        jobs: usize::try_from(number(&v, "jobs")?.unwrap_or(4))
            .map_err(|_| "jobs: too many for this machine".to_string())?,
        out: path(&v, "out").ok_or("out: missing")?,
        max_turns: number(&v, "max_turns")?,
        models: models(&v)?,
        allowed_paths: Vec::new(),
        shard: None,
        judge: None,
        reference: None,
        allowed_commands: CommandConsent::Nothing,
    })
}
