//! A run's files: `transcript.jsonl` (appended and flushed turn by turn), then
//! `summary.json` and `environment.json` at the end, each written whole or not at all;
//! and the lock that keeps two processes out of one output folder.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::output_folder::{Entry, FolderFileError, OutputFolder};
use sopsim_core::run_state::EndReason;

/// Appends each finished turn as one JSON line, written with one call before the next
/// turn, so an interrupted or killed run keeps every finished turn and no torn line
/// (a `write` to a regular file is not split by a signal).
///
/// A resumed run's writer holds the killed run's lines: the run's first messages must
/// be those lines byte for byte (they are checked, not written again), the next ones
/// are appended after them.
pub(crate) struct TranscriptWriter {
    path: PathBuf,
    file: File,
    /// The bytes of whole lines in the file.
    written: u64,
    line: Vec<u8>,
    resumed: Option<Resumed>,
}

/// What a resumed run does once it has said all of the killed run's lines again: until
/// then, a resume that is refused leaves the folder's other files as they were.
pub(crate) type CaughtUp = Box<dyn FnOnce() -> Result<(), SimError> + Send>;

/// The killed run's lines, and how far the resumed run has come through them.
struct Resumed {
    lines: Vec<u8>,
    at: usize,
    line: u64,
    caught_up: Option<CaughtUp>,
}

/// The largest transcript a resume reads back.
const MAX_TRANSCRIPT_BYTES: u64 = 1 << 30;

impl TranscriptWriter {
    /// A new transcript, `name` in `folder`.
    pub(crate) fn create(folder: &OutputFolder, name: &str) -> Result<Self, SimError> {
        let file = folder.create(name)?;
        Ok(Self {
            path: folder.path(name),
            file,
            written: 0,
            line: Vec::new(),
            resumed: None,
        })
    }

    /// The writer of a resumed run: the transcript `name` in `folder` keeps its whole
    /// lines (a torn last one is cut off) and the run's messages are checked against
    /// them. `caught_up` runs once the run has said them all.
    pub(crate) fn resume(
        folder: &OutputFolder,
        name: &str,
        caught_up: CaughtUp,
    ) -> Result<Self, SimError> {
        let path = folder.path(name);
        let bytes = folder.read(name, MAX_TRANSCRIPT_BYTES)?;
        let lines = sopsim_core::files::whole_lines(&bytes).to_vec();
        let mut file = folder.reopen(name)?;
        let io = |source| SimError::Io {
            what: path.display().to_string(),
            source,
        };
        file.set_len(lines.len() as u64).map_err(io)?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(io)?;
        let caught_up = if lines.is_empty() {
            caught_up()?;
            None
        } else {
            Some(caught_up)
        };
        Ok(Self {
            path,
            file,
            written: lines.len() as u64,
            line: Vec::new(),
            resumed: Some(Resumed {
                lines,
                at: 0,
                line: 0,
                caught_up,
            }),
        })
    }

    /// Whether this writer continues a killed run's transcript.
    pub(crate) fn is_resumed(&self) -> bool {
        self.resumed.is_some()
    }

    /// Whether the run has said all of the killed run's lines again (always, for a
    /// run that was not resumed).
    pub(crate) fn caught_up(&self) -> bool {
        self.resumed.as_ref().is_none_or(|r| r.at >= r.lines.len())
    }

    /// How many of the killed run's lines the run has not said again yet.
    pub(crate) fn lines_ahead(&self) -> u64 {
        self.resumed.as_ref().map_or(0, |r| {
            r.lines[r.at..].iter().filter(|b| **b == b'\n').count() as u64
        })
    }

    /// Appends one line (a message of the transcript, a round of `world.jsonl`).
    pub(crate) fn append<T: serde::Serialize>(&mut self, item: &T) -> Result<(), SimError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, item).map_err(|e| SimError::Io {
            what: self.path.display().to_string(),
            source: e.into(),
        })?;
        self.line.push(b'\n');
        if let Some(r) = self.resumed.as_mut().filter(|r| r.at < r.lines.len()) {
            r.line += 1;
            let end = r.at + self.line.len();
            if r.lines.get(r.at..end) != Some(&self.line[..]) {
                return Err(SimError::ResumeDiverged {
                    path: self.path.display().to_string(),
                    line: r.line,
                });
            }
            r.at = end;
            if r.at == r.lines.len() {
                r.lines = Vec::new();
                r.at = 0;
                if let Some(caught_up) = r.caught_up.take() {
                    caught_up()?;
                }
            }
            return Ok(());
        }
        match self.file.write_all(&self.line) {
            Ok(()) => {
                self.written += self.line.len() as u64;
                Ok(())
            }
            Err(source) => {
                // A line written in part (a full disk) is taken back: every line kept
                // is a whole turn.
                let _ = self.file.set_len(self.written);
                Err(SimError::Io {
                    what: self.path.display().to_string(),
                    source,
                })
            }
        }
    }

    /// The error of a resumed run that ended by its own course (`ended_by`) before
    /// saying all of the killed run's lines, which it would leave unsaid: at the turn
    /// limit, the limit (`max_turns`) is below the killed run's.
    pub(crate) fn shortfall(&self, ended_by: EndReason, max_turns: u64) -> Option<SimError> {
        let left = self.lines_ahead();
        if left == 0 || !ended_by.ends_the_course() {
            return None;
        }
        let path = self.path.display().to_string();
        Some(match ended_by {
            EndReason::MaxTurns => SimError::ResumeBelowLimit {
                path,
                left,
                max_turns,
            },
            _ => SimError::ResumeEnded { path, left },
        })
    }
}

/// The event log a resumed run writes until it has caught up; it then replaces
/// `events.jsonl`.
pub(crate) const EVENTS_RESUMING: &str = "events.resuming.jsonl";

/// The files a run writes at its end, which a resumed run writes again.
const FINAL_FILES: [&str; 5] = [
    "environment.json",
    JUDGEMENT_FILE,
    "summary.json",
    "error.json",
    "network.json",
];

/// The world's values after each round, for a scenario with a `world`.
pub const WORLD_FILE: &str = crate::resume_check::WORLD_FILE;

/// The judge's scores, for a scenario with a judge.
pub const JUDGEMENT_FILE: &str = "judgement.json";

/// The probes' answers, for a scenario with `probes`.
pub const PROBES_FILE: &str = crate::resume_check::PROBES_FILE;

/// The files a run writes into its folder.
pub(crate) const RUN_FILES: [&str; 12] = [
    "transcript.jsonl",
    JUDGEMENT_FILE,
    WORLD_FILE,
    PROBES_FILE,
    "events.jsonl",
    EVENTS_RESUMING,
    "environment.json",
    "summary.json",
    "error.json",
    "network.json",
    RUN_FILE,
    crate::journal::JOURNAL_FILE,
];

/// What the run in a folder is (`run.json`), written when it starts.
pub const RUN_FILE: &str = "run.json";

/// What makes a run the run it is, as a resume checks it: the same scenario file, seed,
/// mode and models give the same turns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunIdentity {
    /// The version of sopsim that started the run (told, not compared: the resumed
    /// run's lines are checked against the transcript instead).
    pub sopsim: String,
    /// The scenario file as the run was given it, when it was a file (told, not
    /// compared: `sopsim interview` finds the scenario by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    pub scenario_sha256: String,
    pub seed: u64,
    pub mode: crate::scenario::Mode,
    /// The model backend and the embedder, as `summary.json` names them.
    pub llm: String,
    pub embedder: String,
}

impl RunIdentity {
    /// How `self` (a run about to resume) differs from `folder`'s run, said for each
    /// difference.
    pub(crate) fn differences(&self, folder: &RunIdentity) -> Vec<String> {
        let mut d = Vec::new();
        if self.scenario_sha256 != folder.scenario_sha256 {
            d.push(format!(
                "the scenario file changed (SHA-256 {} now, {} then)",
                &self.scenario_sha256[..self.scenario_sha256.len().min(12)],
                &folder.scenario_sha256[..folder.scenario_sha256.len().min(12)]
            ));
        }
        let mut differ = |what: &str, now: String, then: String| {
            if now != then {
                d.push(format!("{what} {now} now, {then} then"));
            }
        };
        differ("seed", self.seed.to_string(), folder.seed.to_string());
        differ(
            "mode",
            self.mode.as_str().into(),
            folder.mode.as_str().into(),
        );
        differ("model", self.llm.clone(), folder.llm.clone());
        differ("embedder", self.embedder.clone(), folder.embedder.clone());
        d
    }
}

/// The lock file in an output folder.
const LOCK_FILE: &str = ".sopsim.lock";

/// Why a folder cannot take a run's or a benchmark's files.
#[derive(Debug, thiserror::Error)]
pub enum OutFolderError {
    /// Another sopsim process holds the folder's lock.
    #[error("another sopsim process is writing into it")]
    Busy,
    /// The path is a file, not a folder.
    #[error("it is a file")]
    IsAFile,
    /// The folder holds a benchmark's `bench.json`.
    #[error("it holds a benchmark (its bench.json)")]
    HoldsABenchmark,
    /// The folder already holds a run: the named file has something in it.
    #[error("it holds a run already (its {0})")]
    HoldsARun(&'static str),
    /// The named run file is a link, a folder or a device, not a regular file.
    #[error("its {0} is a link, a folder or a device, not a file sopsim wrote")]
    NotAFile(&'static str),
    /// A resume found no `run.json` in the folder.
    #[error("it holds no run to resume (no {RUN_FILE})")]
    NoRun,
    /// A resume found no `transcript.jsonl` in the folder.
    #[error("it holds no transcript to resume (no transcript.jsonl)")]
    NoTranscript,
    /// The run to resume differs from the folder's run in each of the listed ways.
    #[error("its run is another run: {}", .0.join("; "))]
    OtherRun(Vec<String>),
    /// A file a resume reads back is not as the run wrote it.
    #[error(transparent)]
    Unreadable(crate::resume_check::BadLine),
    /// `run.json` could not be parsed.
    #[error("{RUN_FILE}")]
    Identity(#[source] serde_json::Error),
    /// The run's journal could not be reopened for a resume.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// A file of the folder could not be opened, read or written.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// The folder could not be created or locked.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What to do with a run already in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Existing {
    /// Refuse the folder ([`OutFolderError::HoldsARun`]).
    #[default]
    Refuse,
    /// Remove the run's files first, and only those: the transcript, the event logs,
    /// the final files, `run.json` and the journal.
    Replace,
    /// Continue the run in the folder (the caller checks it is the same run).
    Resume,
}

/// An output folder's advisory lock (`flock`), held until dropped; the kernel
/// releases it when its holder dies, so a killed run leaves no stale lock.
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
}

impl FolderLock {
    /// Creates `dir` (and parents) if needed and locks it, or fails at once with
    /// [`OutFolderError::Busy`] while another process holds it.
    pub fn take(dir: &Path) -> Result<Self, OutFolderError> {
        if dir.is_file() {
            return Err(OutFolderError::IsAFile);
        }
        std::fs::create_dir_all(dir)?;
        let file = OutputFolder::new(dir).reopen(LOCK_FILE)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(OutFolderError::Busy),
            Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
        }
    }
}

/// The output folder of one run, locked while it is written.
pub(crate) struct RunDir {
    files: OutputFolder,
    _lock: FolderLock,
}

impl RunDir {
    /// Creates and locks the folder; a run already in it is refused or replaced as
    /// `existing` says.
    pub(crate) fn create(dir: &Path, existing: Existing) -> Result<Self, OutFolderError> {
        let lock = FolderLock::take(dir)?;
        let files = OutputFolder::new(dir);
        if files.entry("bench.json")? != Entry::Nothing {
            return Err(OutFolderError::HoldsABenchmark);
        }
        if existing == Existing::Resume && files.entry(RUN_FILE)? == Entry::Nothing {
            return Err(OutFolderError::NoRun);
        }
        if existing == Existing::Resume && files.entry("transcript.jsonl")? == Entry::Nothing {
            return Err(OutFolderError::NoTranscript);
        }
        for name in RUN_FILES {
            match (existing, files.entry(name)?) {
                (Existing::Replace, Entry::File(_) | Entry::Other) => files.remove(name)?,
                // Only a file with something in it is a run to lose.
                (Existing::Refuse, Entry::File(len)) if len > 0 => {
                    return Err(OutFolderError::HoldsARun(name))
                }
                (Existing::Refuse | Existing::Resume, Entry::Other) => {
                    return Err(OutFolderError::NotAFile(name))
                }
                _ => {}
            }
        }
        Ok(Self { files, _lock: lock })
    }

    /// The folder's files, opened only as regular files inside it.
    pub(crate) fn files(&self) -> &OutputFolder {
        &self.files
    }

    /// The identity of the run in the folder (`run.json`).
    pub(crate) fn identity(&self) -> Result<RunIdentity, OutFolderError> {
        Ok(self.files.read_json(RUN_FILE, 64 * 1024)?)
    }

    /// What a resumed run does once it has caught up: it removes the files the run
    /// wrote at its end, and its event log replaces the killed run's.
    pub(crate) fn on_caught_up(&self) -> CaughtUp {
        let files = self.files.clone();
        Box::new(move || {
            for name in FINAL_FILES {
                files.remove(name)?;
            }
            // A transcript with no line yet catches up before the log is created.
            if files.entry(EVENTS_RESUMING)? != Entry::Nothing {
                files.rename(EVENTS_RESUMING, "events.jsonl")?;
            }
            Ok(())
        })
    }

    /// How many whole lines the transcript on disk holds, if it can be read.
    pub(crate) fn transcript_lines(&self) -> Option<u64> {
        let bytes = self
            .files
            .read("transcript.jsonl", MAX_TRANSCRIPT_BYTES)
            .ok()?;
        Some(bytes.iter().filter(|b| **b == b'\n').count() as u64)
    }

    /// Whether this is a resumed run that has not yet said all of the killed run's
    /// lines again (its event log is still beside the killed run's).
    pub(crate) fn is_retracing(&self) -> bool {
        self.files
            .entry(EVENTS_RESUMING)
            .is_ok_and(|e| e != Entry::Nothing)
    }

    /// After a refused resume: the folder is left as the killed run left it.
    pub(crate) fn drop_resume(&self) -> Result<(), FolderFileError> {
        self.files.remove(EVENTS_RESUMING)
    }

    /// Writes `environment.json`, `summary.json` and, for a run with populations,
    /// `network.json`. Each is tried even when another fails; the first failure is
    /// returned.
    pub(crate) fn write_final(
        &self,
        environment: &impl serde::Serialize,
        summary: &impl serde::Serialize,
        network: Option<&sopsim_core::network::NetworkRecord>,
        judgement: Option<&sopsim_core::judging::Judgement>,
    ) -> Result<(), SimError> {
        let environment = self
            .files
            .replace_json("environment.json", environment)
            .map_err(SimError::from);
        let judged = judgement.map_or(Ok(()), |j| {
            Ok(self.files.replace_json(JUDGEMENT_FILE, j)?)
        });
        let network = network.map_or(Ok(()), |n| {
            Ok(self.files.replace_json("network.json", n)?)
        });
        let summary = self
            .files
            .replace_json("summary.json", summary)
            .map_err(SimError::from);
        environment.and(network).and(judged).and(summary)
    }
}

/// A JSON object, as every file of a run holds (one per line in the `.jsonl` files):
/// JSON of another shape is refused as not what sopsim wrote.
pub(crate) type JsonObject = serde_json::Map<String, serde_json::Value>;

/// What a finished (or killed) run's folder holds, read back as JSON objects.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunFiles {
    /// `transcript.jsonl`: every message, in order.
    pub transcript: Vec<JsonObject>,
    /// `summary.json` (`null` for a run killed before its end).
    pub summary: Option<JsonObject>,
    /// `events.jsonl`'s payloads (empty when the folder has none).
    pub events: Vec<JsonObject>,
    /// `environment.json` (`null` when missing).
    pub environment: Option<JsonObject>,
    /// `network.json`, for runs with populations.
    pub network: Option<JsonObject>,
    /// `probes.jsonl`'s answers (empty without probes).
    pub probes: Vec<JsonObject>,
    /// `judgement.json`, for a judged run.
    pub judgement: Option<JsonObject>,
}

/// The most a run's line files (`transcript.jsonl`, `events.jsonl`) may hold when they
/// are read back whole.
const MAX_LINES_FILE_BYTES: u64 = 1 << 30;
/// The most its JSON files may hold.
const MAX_JSON_FILE_BYTES: u64 = 256 << 20;

/// Reads the run the command line wrote into `dir` (`sopsim run --out`): only regular
/// files inside it, each within a limit. A folder without `transcript.jsonl` is not a
/// run's ([`FolderFileError::is_missing`]).
pub fn read_run_files(dir: &Path) -> Result<RunFiles, FolderFileError> {
    let folder = OutputFolder::new(dir);
    let lines = |name: &str| match folder.read_json_lines(name, MAX_LINES_FILE_BYTES) {
        Err(e) if e.is_missing() => Ok(Vec::new()),
        other => other,
    };
    let json = |name: &str| match folder.read_json(name, MAX_JSON_FILE_BYTES) {
        Err(e) if e.is_missing() => Ok(None),
        other => other.map(Some),
    };
    if folder.entry("transcript.jsonl")? == Entry::Nothing {
        return Err(FolderFileError::Io {
            path: folder.path("transcript.jsonl"),
            source: std::io::ErrorKind::NotFound.into(),
        });
    }
    Ok(RunFiles {
        transcript: lines("transcript.jsonl")?,
        summary: json("summary.json")?,
        events: lines("events.jsonl")?,
        environment: json("environment.json")?,
        network: json("network.json")?,
        probes: lines(PROBES_FILE)?,
        judgement: json(JUDGEMENT_FILE)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_written_when_the_environment_cannot_be() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path(), Existing::Refuse).unwrap();
        // A file cannot be renamed over a folder that holds something.
        std::fs::create_dir_all(tmp.path().join("environment.json").join("x")).unwrap();
        let e = dir
            .write_final(
                &serde_json::json!({}),
                &serde_json::json!({"turns": 1}),
                None,
                None,
            )
            .unwrap_err();
        assert!(e.to_string().contains("environment.json"), "{e}");
        assert!(tmp.path().join("summary.json").is_file());
    }

    #[test]
    fn a_resumed_transcript_drops_its_torn_last_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("transcript.jsonl");
        std::fs::write(&path, "{\"seq\":1}\n{\"se").unwrap();
        let folder = OutputFolder::new(tmp.path());
        let writer =
            TranscriptWriter::resume(&folder, "transcript.jsonl", Box::new(|| Ok(()))).unwrap();
        assert!(writer.is_resumed() && !writer.caught_up());
        assert_eq!(writer.lines_ahead(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"seq\":1}\n");
    }

    #[test]
    fn a_run_file_that_is_a_link_is_refused_or_replaced_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside.jsonl");
        std::fs::write(&outside, "kept\n").unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("transcript.jsonl")).unwrap();
        for existing in [Existing::Refuse, Existing::Resume] {
            std::fs::write(dir.join(RUN_FILE), "{}").unwrap();
            let e = RunDir::create(&dir, existing).err().unwrap();
            assert!(
                matches!(e, OutFolderError::NotAFile("transcript.jsonl")),
                "{e}"
            );
        }
        RunDir::create(&dir, Existing::Replace).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("transcript.jsonl")).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "kept\n");
    }
}
