//! A run's files: `transcript.jsonl` (appended and flushed turn by turn), then
//! `summary.json` and `environment.json` at the end, each written whole or not at all;
//! and the lock that keeps two processes out of one output folder.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::memory::Message;

/// Appends each finished turn as one JSON line, written with one call before the next
/// turn, so an interrupted or killed run keeps every finished turn and no torn line
/// (a `write` to a regular file is not split by a signal).
#[derive(Debug)]
pub struct TranscriptWriter {
    path: PathBuf,
    file: File,
    line: Vec<u8>,
}

impl TranscriptWriter {
    pub fn create(path: &Path) -> Result<Self, SimError> {
        let file = File::create(path).map_err(|source| SimError::Io {
            what: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            line: Vec::new(),
        })
    }

    pub fn append(&mut self, memory: &Message) -> Result<(), SimError> {
        let io = |source| SimError::Io {
            what: self.path.display().to_string(),
            source,
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, memory).map_err(|e| io(e.into()))?;
        self.line.push(b'\n');
        self.file.write_all(&self.line).map_err(io)
    }
}

/// The files a run writes into its folder.
pub const RUN_FILES: [&str; 5] = [
    "transcript.jsonl",
    "events.jsonl",
    "environment.json",
    "summary.json",
    "error.json",
];

/// The lock file in an output folder.
const LOCK_FILE: &str = ".sopsim.lock";

/// Why a folder cannot take a run's or a benchmark's files.
#[derive(Debug, thiserror::Error)]
pub enum OutFolderError {
    #[error("another sopsim process is writing into it")]
    Busy,
    #[error("it holds a run already (its {0})")]
    HoldsARun(&'static str),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What to do with a run already in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Existing {
    /// Refuse the folder ([`OutFolderError::HoldsARun`]).
    #[default]
    Refuse,
    /// Remove the run's files first (only those: [`RUN_FILES`]).
    Replace,
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
        std::fs::create_dir_all(dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(OutFolderError::Busy),
            Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
        }
    }
}

/// The output folder of one run, locked while it is written.
pub struct RunDir {
    pub dir: PathBuf,
    _lock: FolderLock,
}

impl RunDir {
    /// Creates and locks the folder; a run already in it is refused or replaced as
    /// `existing` says.
    pub fn create(dir: &Path, existing: Existing) -> Result<Self, OutFolderError> {
        let lock = FolderLock::take(dir)?;
        for name in RUN_FILES {
            let path = dir.join(name);
            // Only a file with something in it is a run to lose.
            let holds = std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0);
            match existing {
                Existing::Refuse if holds => return Err(OutFolderError::HoldsARun(name)),
                Existing::Replace if std::fs::symlink_metadata(&path).is_ok() => {
                    std::fs::remove_file(&path)?
                }
                _ => {}
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Writes `environment.json` and `summary.json`.
    pub fn write_final(
        &self,
        environment: &serde_json::Value,
        summary: &impl serde::Serialize,
    ) -> Result<(), SimError> {
        write_json(&self.path("environment.json"), environment)?;
        write_json(&self.path("summary.json"), summary)
    }
}

/// Writes pretty JSON to a temporary file and renames it into place.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), SimError> {
    let io = |source| SimError::Io {
        what: path.display().to_string(),
        source,
    };
    let mut text = serde_json::to_string_pretty(value).map_err(|e| io(e.into()))?;
    text.push('\n');
    crate::files::replace_file(path, text.as_bytes()).map_err(io)
}
