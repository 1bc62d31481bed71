//! Running a scenario file from Rust as `sopsim run` runs it: typed options in, a typed
//! outcome or error out, your own event sink, and a token any thread may cancel to stop
//! the run at once, its finished turns kept (here a timer does).
//!
//! `cargo run --example run_file [SCENARIO] [OUT_DIR]` (default: the debate, on the
//! scripted backend, so it needs no model)

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sopsim::error::CancelToken;
use sopsim::events::{EventSink, SimEvent};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim::{RunIo, RunOptions};

/// Prints each message as it is said.
struct Print;

impl EventSink for Print {
    fn emit(&self, event: &SimEvent) {
        if let SimEvent::Message(m) = event {
            println!("[{}] {}: {}", m.state, m.name, m.content);
        }
    }
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let scenario = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/debate.json"),
        PathBuf::from,
    );
    let cancel = CancelToken::new();
    let timer = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        timer.cancel();
    });
    let opts = RunOptions {
        out: args.next().map(PathBuf::from),
        seed: 7,
        max_turns: Some(12),
        models: ModelOptions {
            // `LlmChoice::Local` runs the default local model (fetched on first use);
            // `LlmChoice::OpenAi` a server (`base_url`, `api_key`, `model`).
            llm: LlmChoice::Scripted,
            embedder: EmbedderChoice::Hash,
            ..ModelOptions::default()
        },
        ..RunOptions::new(scenario)
    };
    let io = RunIo {
        sinks: vec![Arc::new(Print)],
        cancel,
        ..RunIo::default()
    };
    match sopsim::run(&opts, io) {
        Ok(outcome) => {
            println!(
                "{} turns, ended by {}",
                outcome.summary.turns,
                outcome.summary.ended_by.as_str()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            // The error and its causes; `setting()` of a setup error names the option.
            eprintln!("{}", sopsim::error::chain(&e));
            std::process::ExitCode::from(if e.is_bad_input() { 2 } else { 1 })
        }
    }
}
