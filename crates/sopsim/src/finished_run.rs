//! A finished run's folder read back for work done on it afterwards (an interview, a
//! judgement made again): its identity, the scenario it was made from (found by
//! `run.json`, or given, and checked against the run's digest) and its transcript.
//! The folder is only read.
//!
//! A tournament's run plays a document made from the game file and the roster, not the
//! file: the tournament writes it as [`GAME_SCENARIO_FILE`] in the game's folder, two
//! levels above each of its runs, where it is found when no scenario is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::output::{RunIdentity, RUN_FILE};
use crate::output_folder::{FolderFileError, OutputFolder};
use crate::scenario::aiwaves::Imported;
use crate::scenario::Scenario;
use crate::setup::SetupError;
use sopsim_core::memory::Message;

/// Why a finished run's folder cannot be worked on.
#[derive(Debug, thiserror::Error)]
pub enum FinishedRunError {
    /// A file of the run's folder could not be read.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// No scenario was given and `run.json` names no scenario file.
    #[error(
        "{RUN_FILE} names no scenario file (the run was made from a document or in code): give the scenario"
    )]
    NoScenario,
    /// The scenario's SHA-256 differs from that of the scenario the run was made from.
    #[error("{path}: not the scenario this run was made from (its SHA-256 {now} differs from the run's {then})")]
    OtherScenario {
        /// The scenario file's path.
        path: PathBuf,
        /// The first 12 hex digits of the file's SHA-256 now.
        now: String,
        /// The first 12 hex digits of the SHA-256 the run recorded.
        then: String,
    },
    /// The scenario could not be loaded.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// A tournament game's scenario document, beside the game's runs (`runs/<game>/`).
pub const GAME_SCENARIO_FILE: &str = "scenario.json";

/// A tournament's settings, in its output folder.
pub const TOURNAMENT_FILE: &str = "tournament.json";

/// What a finished run's folder holds for work done on it afterwards.
pub(crate) struct FinishedRun {
    pub folder: OutputFolder,
    pub identity: RunIdentity,
    pub scenario: Scenario,
    pub imported: Imported,
    /// The scenario file's path.
    pub path: PathBuf,
    pub transcript: Vec<Arc<Message>>,
}

/// The most a run's transcript may hold when it is read back.
const MAX_TRANSCRIPT_BYTES: u64 = 1 << 30;

/// Reads the run in `dir`, with its scenario from `scenario` when given, else from the
/// file `run.json` names.
pub(crate) fn read(dir: &Path, scenario: Option<&Path>) -> Result<FinishedRun, FinishedRunError> {
    let folder = OutputFolder::new(dir);
    let identity: RunIdentity = folder.read_json(RUN_FILE, 64 * 1024)?;
    let path = scenario
        .map(Path::to_path_buf)
        .or_else(|| identity.scenario.clone().map(PathBuf::from))
        .ok_or(FinishedRunError::NoScenario)?;
    // A tournament game's own document first, when no scenario is given: the game
    // file it was made from may have moved, or be named relative to another folder.
    let game = match scenario {
        None => game_document(dir, &path, &identity.scenario_sha256),
        Some(_) => None,
    };
    let loaded = match game {
        Some(game) => game,
        None => crate::source::load(path.as_path(), &[])?,
    };
    if loaded.sha256 != identity.scenario_sha256 {
        let short = |s: &str| s[..12.min(s.len())].to_string();
        return Err(FinishedRunError::OtherScenario {
            path,
            now: short(&loaded.sha256),
            then: short(&identity.scenario_sha256),
        });
    }
    let transcript = folder.read_json_lines("transcript.jsonl", MAX_TRANSCRIPT_BYTES)?;
    Ok(FinishedRun {
        folder,
        identity,
        scenario: loaded.scenario,
        imported: loaded.imported,
        path,
        transcript,
    })
}

/// The tournament game's document the run in `dir` (`OUT/runs/GAME/MODE/seed-N`)
/// played, when the game's folder holds one with the run's digest and the tournament's
/// settings sit in `OUT`; its files are looked up beside `origin`, the game file.
fn game_document(dir: &Path, origin: &Path, sha256: &str) -> Option<crate::Loaded> {
    let game = dir.parent()?.parent()?;
    let runs = game.parent()?;
    let out = runs.parent()?;
    if runs.file_name()? != "runs" || !out.join(TOURNAMENT_FILE).is_file() {
        return None;
    }
    let document: serde_json::Value = OutputFolder::new(game)
        .read_json(GAME_SCENARIO_FILE, 8 << 20)
        .ok()?;
    let source = crate::ScenarioSource::Document {
        origin: origin.to_path_buf(),
        document,
    };
    crate::source::load(source, &[])
        .ok()
        .filter(|loaded| loaded.sha256 == sha256)
}
