//! `sopsim::run` as a library user calls it: a file, a document or a built scenario;
//! its own event sink, a cancellation token that stops the run at a turn boundary with
//! every finished turn kept, and controls that pause, step and stop it.

use std::sync::{Arc, Mutex};

use sopsim::error::CancelToken;
use sopsim::events::{EventSink, SimEvent};
use sopsim::runner::{self, RunIo, RunOptions};
use sopsim::runner::{Control, RunControl};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};
use sopsim::simulation::EndReason;

/// The debate example on the scripted backend and hash embeddings.
fn scripted_debate() -> RunOptions {
    RunOptions {
        models: ModelOptions {
            llm: LlmChoice::Scripted,
            embedder: EmbedderChoice::Hash,
            ..ModelOptions::default()
        },
        ..RunOptions::new(crate::common::root().join("scenarios/debate.json"))
    }
}

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
        ..scripted_debate()
    };
    let io = RunIo {
        sinks: vec![sink.clone()],
        human_input: None,
        cancel: token,
        control: None,
        services: None,
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

/// Counts messages said.
#[derive(Default)]
struct Count(Mutex<usize>);

impl EventSink for Count {
    fn emit(&self, event: &SimEvent) {
        if let SimEvent::Message(_) = event {
            *self.0.lock().unwrap() += 1;
        }
    }
}

#[test]
fn a_paused_run_takes_one_turn_per_step_and_stops_when_told() {
    let count = Arc::new(Count::default());
    let control = RunControl::paused();
    let opts = scripted_debate();
    let io = RunIo {
        sinks: vec![count.clone()],
        control: Some(control.clone()),
        ..RunIo::default()
    };
    let run = std::thread::spawn(move || runner::run(&opts, io).unwrap());
    let said = || *count.0.lock().unwrap();
    let wait_for = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while said() != n {
            assert!(
                std::time::Instant::now() < deadline,
                "{} said, not {n}",
                said()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(said(), 0, "nothing happens while paused");
    assert!(control.is_paused());
    for n in 1..=3 {
        control.send(Control::Step);
        wait_for(n);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(said(), 3, "each step is one turn");
    control.send(Control::Stop);
    let outcome = run.join().unwrap();
    assert_eq!(outcome.summary.ended_by, EndReason::Interrupted);
    assert_eq!(outcome.summary.turns, 3);
}

#[test]
fn async_code_awaits_run_async_inside_its_actix_system() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions {
        out: Some(dir.path().to_path_buf()),
        seed: 2,
        ..scripted_debate()
    };
    let blocking = runner::run(&opts, RunIo::default()).unwrap();
    let transcript = std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap();
    // As a web handler or `#[actix::main]` would: the system is already running.
    let again = RunOptions {
        existing: runner::Existing::Replace,
        ..opts
    };
    let awaited = actix::System::new()
        .block_on(runner::run_async(again, RunIo::default()))
        .unwrap();
    assert_eq!(awaited.summary.turns, blocking.summary.turns);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap(),
        transcript
    );
    assert!(dir.path().join("summary.json").exists());
}

/// Counts the streamed pieces and the messages it is given; `wants`: whether it asks
/// for the pieces.
struct Pieces {
    wants: bool,
    counts: Mutex<(usize, usize)>,
}

impl EventSink for Pieces {
    fn wants_tokens(&self) -> bool {
        self.wants
    }

    fn emit(&self, event: &SimEvent) {
        let mut counts = self.counts.lock().unwrap();
        match event {
            SimEvent::Token { .. } => counts.0 += 1,
            SimEvent::Message(_) => counts.1 += 1,
            _ => {}
        }
    }
}

#[test]
fn streamed_pieces_reach_only_a_run_whose_sinks_ask_for_them() {
    let pieces_and_messages = |wants: bool| {
        let sink = Arc::new(Pieces {
            wants,
            counts: Mutex::new((0, 0)),
        });
        let opts = scripted_debate();
        let io = RunIo {
            sinks: vec![sink.clone()],
            ..RunIo::default()
        };
        runner::run(&opts, io).unwrap();
        let counts = *sink.counts.lock().unwrap();
        counts
    };
    let (streamed, said) = pieces_and_messages(true);
    assert!(streamed > said, "{streamed} pieces for {said} messages");
    assert_eq!(pieces_and_messages(false), (0, said));
}

/// The one way in takes a file, a document made in code or a built scenario, and gives
/// the same run for each; a built scenario's folder names it by its JSON's digest.
#[test]
fn a_file_a_document_and_a_built_scenario_run_the_same_way() {
    let file = crate::common::root().join("scenarios/debate.json");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let built = sopsim::load(file.as_path(), &[]).unwrap().scenario;
    let sources = [
        sopsim::ScenarioSource::File(file.clone()),
        sopsim::ScenarioSource::Document {
            origin: file.clone(),
            document,
        },
        sopsim::ScenarioSource::Built(Arc::new(built.clone())),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut transcripts = Vec::new();
    for (i, source) in sources.into_iter().enumerate() {
        let out = dir.path().join(i.to_string());
        let opts = RunOptions {
            scenario: source,
            out: Some(out.clone()),
            max_turns: Some(5),
            ..scripted_debate()
        };
        let outcome = runner::run(&opts, RunIo::default()).unwrap();
        assert_eq!(outcome.summary.turns, 5);
        let written = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
        assert_eq!(written.lines().count(), 5);
        transcripts.push(written);
    }
    assert_eq!(transcripts[0], transcripts[1]);
    assert_eq!(transcripts[0], transcripts[2]);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("2/run.json")).unwrap())
            .unwrap();
    let digest = sha256_hex(serde_json::to_string(&built).unwrap().as_bytes());
    assert_eq!(run["scenario_sha256"], digest.as_str());
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
