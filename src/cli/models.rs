//! `sopsim models fetch|list` and `sopsim embed`.

use serde_json::json;

use sopsim::models::{self, ModelStatus};
use sopsim::setup::{self, LlmChoice, ModelOptions};

use super::args::{from_environment, EmbedderArg, Format};
use super::failure::Failure;
use super::progress::FetchProgress;
use super::say;

pub fn fetch(names: &[String]) -> Result<(), Failure> {
    let root = models::models_dir();
    let specs: Vec<_> = if names.is_empty() {
        models::KNOWN.iter().filter(|m| m.by_default).collect()
    } else {
        names
            .iter()
            .map(|n| models::find(n))
            .collect::<Result<_, _>>()?
    };
    for spec in specs {
        if spec.is_present(&root) {
            say(&format!(
                "{}: already in {}",
                spec.name,
                spec.folder(&root).display()
            ));
        } else {
            spec.ensure(&root, &FetchProgress::default())?;
        }
    }
    Ok(())
}

pub fn list(format: Format) -> Result<(), Failure> {
    let root = models::models_dir();
    let mut rows = Vec::new();
    for spec in models::KNOWN {
        rows.push((spec, spec.status(&root)?));
    }
    if format == Format::Json {
        let listed: Vec<_> = rows
            .iter()
            .map(|(spec, status)| {
                json!({
                    "name": spec.name,
                    "status": status.as_str(),
                    "folder": spec.folder(&root).display().to_string(),
                    "bytes": spec.bytes(),
                    "fetched_by_default": spec.by_default,
                    "description": spec.description,
                })
            })
            .collect();
        let doc = json!({"folder": root.display().to_string(), "models": listed});
        say(&serde_json::to_string_pretty(&doc).map_err(|e| Failure::runtime(&e))?);
        return Ok(());
    }
    say(&format!(
        "model folder: {} (set SOPSIM_MODELS to change it)",
        root.display()
    ));
    for (spec, status) in rows {
        let state = match status {
            ModelStatus::Ready => "ok",
            ModelStatus::Missing => "missing (sopsim models fetch)",
            ModelStatus::Damaged => "damaged (sopsim models fetch again)",
        };
        say(&format!(
            "{:8} {:>6.1} MB  {:36} {}",
            spec.name,
            spec.bytes() as f64 / 1e6,
            state,
            spec.description
        ));
    }
    Ok(())
}

pub fn embed(
    texts: &[String],
    embedder: EmbedderArg,
    embedder_model: Option<std::path::PathBuf>,
    base_url: Option<String>,
) -> Result<(), Failure> {
    let opts = from_environment(ModelOptions {
        llm: LlmChoice::Scripted,
        embedder: embedder.into(),
        embedder_model,
        base_url,
        fetch_observer: std::sync::Arc::new(FetchProgress::default()),
        ..ModelOptions::default()
    });
    let e = setup::embedder(&opts)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = e.embed(&refs).map_err(|e| Failure::runtime(&e))?;
    let out: Vec<_> = texts
        .iter()
        .zip(vectors)
        .map(|(t, v)| json!({"text": t, "embedding": v}))
        .collect();
    say(&serde_json::to_string(&out).map_err(|e| Failure::runtime(&e))?);
    Ok(())
}
