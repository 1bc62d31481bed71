//! Resuming a killed run: whatever line a kill left the transcript and the journal at,
//! the resumed run's `transcript.jsonl`, `environment.json` and `summary.json` (times
//! aside) are byte for byte those of the run that was never killed.
//!
//! A run's folder is written append-only until its end, so the folder a SIGKILL leaves
//! is a prefix of each file, perhaps with a torn last line: each kill point is made
//! here by cutting an uninterrupted run's files there (the command line's tests kill
//! real processes).

use std::path::{Path, PathBuf};

use sopsim::runner::OutFolderError;
use sopsim::runner::{self, Existing, RunError, RunIo, RunOptions};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions, SetupError};

fn options(scenario: &str, out: &Path) -> RunOptions {
    RunOptions {
        out: Some(out.to_path_buf()),
        seed: 7,
        models: ModelOptions {
            llm: LlmChoice::Scripted,
            embedder: EmbedderChoice::Hash,
            ..ModelOptions::default()
        },
        ..RunOptions::new(crate::common::root().join(scenario))
    }
}

/// `summary.json` without the figures that are times.
fn summary_without_times(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let mut summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fields = summary.as_object_mut().unwrap();
    fields.remove("wall_ms");
    fields.remove("llm_latency_ms");
    summary
}

/// The first `keep` of `lines`, and half of the next one (torn by the kill).
fn cut(lines: &[&str], keep: usize) -> String {
    let mut text: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
    if let Some(next) = lines.get(keep) {
        text.push_str(&next[..next.len() / 2]);
    }
    text
}

/// A copy of the finished run in `whole` as a kill after its transcript's `keep`th line
/// would have left it: both logs cut, no final files.
fn killed_copy(whole: &Path, keep: usize, into: &Path) -> PathBuf {
    let transcript = std::fs::read_to_string(whole.join("transcript.jsonl")).unwrap();
    let transcript: Vec<&str> = transcript.lines().collect();
    let journal = std::fs::read_to_string(whole.join("calls.jsonl")).unwrap();
    let journal: Vec<&str> = journal.lines().collect();
    let events = std::fs::read_to_string(whole.join("events.jsonl")).unwrap();
    let events: Vec<&str> = events.lines().collect();
    let share = |n: usize| n * keep / transcript.len().max(1);
    let dir = into.join(format!("killed-{keep}"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(whole.join("run.json"), dir.join("run.json")).unwrap();
    std::fs::write(dir.join("transcript.jsonl"), cut(&transcript, keep)).unwrap();
    std::fs::write(dir.join("calls.jsonl"), cut(&journal, share(journal.len()))).unwrap();
    std::fs::write(dir.join("events.jsonl"), cut(&events, share(events.len()))).unwrap();
    dir
}

/// Kills `scenario`'s run after every line of its transcript, resumes it, and compares.
fn resumes_at_every_line(scenario: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    runner::run(&options(scenario, &whole), RunIo::default()).unwrap();
    let expected = std::fs::read(whole.join("transcript.jsonl")).unwrap();
    let environment = std::fs::read(whole.join("environment.json")).unwrap();
    let summary = summary_without_times(&whole);
    let lines = expected.iter().filter(|b| **b == b'\n').count();
    assert!(lines >= 8, "{scenario}: {lines} lines");
    for keep in 0..=lines {
        let dir = killed_copy(&whole, keep, tmp.path());
        let resumed = RunOptions {
            existing: Existing::Resume,
            ..options(scenario, &dir)
        };
        runner::run(&resumed, RunIo::default())
            .unwrap_or_else(|e| panic!("{scenario}, killed after line {keep}: {e}"));
        let transcript = std::fs::read(dir.join("transcript.jsonl")).unwrap();
        assert!(
            transcript == expected,
            "{scenario}, killed after line {keep}: the transcripts differ"
        );
        assert!(
            std::fs::read(dir.join("environment.json")).unwrap() == environment,
            "{scenario}, killed after line {keep}: environment.json differs"
        );
        assert_eq!(
            summary_without_times(&dir),
            summary,
            "{scenario}, killed after line {keep}"
        );
    }
}

#[test]
fn a_run_killed_after_any_line_of_a_simultaneous_round_resumes_to_the_same_files() {
    resumes_at_every_line("scenarios/prisoners_dilemma.json");
}

#[test]
fn a_run_killed_after_any_line_of_a_tool_step_resumes_to_the_same_files() {
    resumes_at_every_line("scenarios/rival_buyers.json");
}

#[test]
fn a_folder_of_another_run_is_refused_naming_what_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let scenario = "scenarios/debate.json";
    runner::run(
        &RunOptions {
            max_turns: Some(2),
            ..options(scenario, &dir)
        },
        RunIo::default(),
    )
    .unwrap();
    let other = RunOptions {
        seed: 8,
        existing: Existing::Resume,
        ..options(scenario, &dir)
    };
    match runner::run(&other, RunIo::default()) {
        Err(RunError::Setup(e)) => match *e {
            SetupError::Out {
                source: OutFolderError::OtherRun(differences),
                ..
            } => assert_eq!(differences, ["seed 8 now, 7 then"]),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let empty = tmp.path().join("empty");
    let nothing = RunOptions {
        existing: Existing::Resume,
        ..options(scenario, &empty)
    };
    let e = runner::run(&nothing, RunIo::default()).unwrap_err();
    assert!(e.is_bad_input());
    let said = sopsim::error::chain(&e);
    assert!(said.contains("no run to resume"), "{said}");
    // The interrupted run, resumed with more turns, goes on to the end.
    let more = RunOptions {
        existing: Existing::Resume,
        ..options(scenario, &dir)
    };
    let outcome = runner::run(&more, RunIo::default()).unwrap();
    let full = tmp.path().join("full");
    let uninterrupted = runner::run(&options(scenario, &full), RunIo::default()).unwrap();
    assert_eq!(outcome.summary.turns, uninterrupted.summary.turns);
    assert_eq!(
        std::fs::read(dir.join("transcript.jsonl")).unwrap(),
        std::fs::read(full.join("transcript.jsonl")).unwrap()
    );
}
