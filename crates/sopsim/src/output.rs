//! A run's files: `transcript.jsonl` (appended and flushed turn by turn), then
//! `summary.json` and `environment.json` at the end, each written whole or not at all.

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

/// The output folder of one run.
pub struct RunDir {
    pub dir: PathBuf,
}

impl RunDir {
    /// Creates the folder (and parents) if needed.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
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
