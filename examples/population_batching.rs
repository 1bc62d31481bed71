//! A population on the default local model, batched and not: the spatial dilemma cut
//! to ROUNDS rounds (64 villagers on a torus), run once with the engine decoding up to
//! 16 sequences together and once one sequence at a time, each as the only simulation.
//! Prints each run's wall time and tokens per second, and whether the two transcripts
//! are byte-identical; the engine's own account of each run (forward-pass time spent
//! reading prompts and decoding, rows of each) follows each run on standard error.
//!
//! `cargo run --release --example population_batching [ROUNDS]` (default 3; needs
//! `sopsim models fetch qwen05`)

use std::sync::Arc;
use std::time::Instant;

use sopsim::embed::{EmbedService, HashEmbedder};
use sopsim::llm::local::{LocalBackend, LocalOptions};
use sopsim::llm::Estimator;
use sopsim::models::{Quiet, QWEN05};
use sopsim::scenario;
use sopsim::simulation::{RunOutcome, Services};
use sopsim::{RunIo, RunOptions};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The checkout's `models/`, where `sopsim models fetch` puts them.
fn models_dir() -> std::path::PathBuf {
    sopsim::models::default_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), &|k| {
        std::env::var(k).ok()
    })
}

fn run(scenario: &Arc<scenario::Scenario>, max_batch: usize) -> (RunOutcome, f64) {
    let path = QWEN05.main_file(&models_dir());
    let llm = LocalBackend::start(
        &path,
        LocalOptions {
            max_batch,
            ..LocalOptions::default()
        },
    )
    .expect("the default model loads");
    let services = Services {
        llm: Arc::new(llm),
        embed: EmbedService::inline(Arc::new(HashEmbedder::default())),
        counter: Arc::new(Estimator),
        prices: Default::default(),
    };
    let start = Instant::now();
    let io = RunIo {
        services: Some(services),
        ..RunIo::default()
    };
    let outcome = sopsim::run(&RunOptions::new(scenario.clone()), io).expect("the run finishes");
    (outcome, start.elapsed().as_secs_f64())
}

fn transcript(outcome: &RunOutcome) -> String {
    outcome
        .transcript
        .iter()
        .map(|m| serde_json::to_string(m.as_ref()).unwrap() + "\n")
        .collect()
}

fn main() {
    // The local engine reports its load (prompt and decode rows and seconds) at debug
    // level when its worker stops, at the end of each run.
    let engine = tracing_subscriber::filter::Targets::new()
        .with_target("sopsim_llm::local::engine", tracing::Level::DEBUG);
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(engine)
        .init();
    let rounds: u32 = std::env::args()
        .nth(1)
        .map_or(3, |r| r.parse().expect("ROUNDS is a number"));
    QWEN05
        .ensure(&models_dir(), &Default::default(), &Quiet)
        .expect("the default model is fetched");
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/spatial_dilemma.json");
    let mut s = sopsim::load(file.as_path(), &[])
        .expect("the example loads")
        .scenario;
    if let Some(round) = s.sop.states.get_mut("round") {
        round.transition.max_visits = Some(rounds);
    }
    let s = Arc::new(s);
    let mut results = Vec::new();
    for max_batch in [16, 1] {
        let (outcome, wall) = run(&s, max_batch);
        let decoded = outcome.summary.completion_tokens;
        println!(
            "max_batch {max_batch:>2}: {} turns in {wall:.1} s, {decoded} completion tokens, {:.1} tokens/s",
            outcome.summary.turns,
            decoded as f64 / wall
        );
        results.push((transcript(&outcome), wall));
    }
    println!(
        "batched {:.2}x the rate of one sequence at a time; transcripts {}",
        results[1].1 / results[0].1,
        if results[0].0 == results[1].0 {
            "byte-identical"
        } else {
            "DIFFER"
        }
    );
}
