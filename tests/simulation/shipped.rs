//! Every scenario the repository ships, experiments included, runs clean on the
//! scripted backend over many seeds: scripts keep within the bounds their worlds set,
//! and no seed ends a run by an error.

use std::path::PathBuf;
use std::sync::Arc;

use sopsim::human::LinesInput;
use sopsim::runner::{self, RunIo, RunOptions, ScenarioSource};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim::simulation::EndReason;

use crate::common::root;

/// Seeds each shipped scenario is run with.
const SEEDS: u64 = 24;

fn shipped() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["scenarios", "scenarios/experiments"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_scenario_runs_clean_on_the_scripted_backend_for_many_seeds() {
    let files = shipped();
    assert!(files.len() >= 15, "{files:?}");
    for path in files {
        let started = std::time::Instant::now();
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        scripted_everywhere(&mut doc);
        let loaded = sopsim::load(
            ScenarioSource::Document {
                origin: path.clone(),
                document: doc,
            },
            &[],
        )
        .unwrap();
        let source = ScenarioSource::Loaded {
            origin: path.clone(),
            scenario: Arc::new(loaded.scenario),
            imported: loaded.imported,
            sha256: loaded.sha256,
        };
        for seed in 0..SEEDS {
            let opts = RunOptions {
                seed,
                models: ModelOptions {
                    llm: LlmChoice::Scripted,
                    embedder: EmbedderChoice::Hash,
                    ..ModelOptions::default()
                },
                ..RunOptions::new(source.clone())
            };
            // A person's turns (the customer service's customer) get typed lines.
            let io = RunIo {
                human_input: Some(Arc::new(LinesInput::new(
                    (0..64).map(|i| format!("Line {i} from the person.")),
                ))),
                ..RunIo::default()
            };
            let outcome = runner::run(&opts, io).unwrap_or_else(|e| {
                panic!(
                    "{} seed {seed}: {}",
                    path.display(),
                    sopsim::error::chain(&e)
                )
            });
            assert_ne!(
                outcome.summary.ended_by,
                EndReason::Error,
                "{} seed {seed}: {:?}",
                path.display(),
                outcome.summary.error
            );
        }
        eprintln!("{}: {:?}", path.display(), started.elapsed());
    }
}

/// `doc` with every model it names taken by the scripted backend: a model-against-
/// model file plays its script too (its figures by model, named by backend, are left
/// out of its report).
fn scripted_everywhere(doc: &mut serde_json::Value) {
    if let Some(report) = doc
        .pointer_mut("/outcomes/report")
        .and_then(|r| r.as_array_mut())
    {
        report.retain(|figure| !figure.as_str().is_some_and(|f| f.contains(".by.")));
    }
    match doc {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(llm)) = map.get_mut("llm") {
                if llm.contains_key("backend") {
                    llm.insert("backend".into(), "scripted".into());
                }
            }
            map.values_mut().for_each(scripted_everywhere);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(scripted_everywhere),
        _ => {}
    }
}
