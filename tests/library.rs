//! `runner::run` as a library user calls it: its own event sink, and a cancellation
//! token that stops the run at a turn boundary with every finished turn kept.

mod common;

use std::sync::{Arc, Mutex};

use sopsim::error::CancelToken;
use sopsim::events::{EventSink, SimEvent};
use sopsim::runner::{self, RunIo, RunOptions};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim::sim::EndReason;

/// Cancels the run once `after` messages have been said; keeps their text.
struct CancelAfter {
    token: CancelToken,
    after: usize,
    said: Mutex<Vec<String>>,
}

impl EventSink for CancelAfter {
    fn emit(&self, event: &SimEvent) {
        if let SimEvent::Message(m) = event {
            let mut said = self.said.lock().unwrap();
            said.push(m.content.clone());
            if said.len() == self.after {
                self.token.cancel();
            }
        }
    }
}

#[test]
fn a_cancelled_run_stops_at_a_turn_boundary_and_keeps_its_turns() {
    let dir = tempfile::tempdir().unwrap();
    let token = CancelToken::new();
    let sink = Arc::new(CancelAfter {
        token: token.clone(),
        after: 3,
        said: Mutex::new(Vec::new()),
    });
    let opts = RunOptions {
        out: Some(dir.path().to_path_buf()),
        seed: 0,
        models: ModelOptions {
            llm: LlmChoice::Scripted,
            embedder: EmbedderChoice::Hash,
            ..ModelOptions::default()
        },
        ..RunOptions::new(common::root().join("scenarios/debate.json"))
    };
    let io = RunIo {
        sinks: vec![sink.clone()],
        human_input: None,
        cancel: token,
    };
    let outcome = runner::run(&opts, io).unwrap();
    assert_eq!(outcome.summary.ended_by, EndReason::Interrupted);
    assert_eq!(outcome.summary.turns, 3);
    let written = std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap();
    assert_eq!(written.lines().count(), 3);
    let said = sink.said.lock().unwrap();
    for (line, text) in written.lines().zip(said.iter()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["content"].as_str(), Some(text.as_str()));
    }
    assert!(dir.path().join("summary.json").exists());
}
