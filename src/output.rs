//! A run's files: `transcript.jsonl` (appended and flushed turn by turn), then
//! `summary.json` and `environment.json` at the end, each written whole or not at all.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::memory::Message;

/// Appends each finished turn as one JSON line and flushes it before the next turn, so
/// an interrupted run keeps every finished turn.
#[derive(Debug)]
pub struct TranscriptWriter {
    path: PathBuf,
    file: BufWriter<File>,
}

impl TranscriptWriter {
    pub fn create(path: &Path) -> Result<Self, SimError> {
        let file = File::create(path).map_err(|source| SimError::Io {
            what: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
        })
    }

    pub fn append(&mut self, memory: &Message) -> Result<(), SimError> {
        let io = |source| SimError::Io {
            what: self.path.display().to_string(),
            source,
        };
        serde_json::to_writer(&mut self.file, memory).map_err(|e| io(e.into()))?;
        self.file.write_all(b"\n").map_err(io)?;
        self.file.flush().map_err(io)
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
    let tmp = path.with_extension("json.tmp");
    let mut text = serde_json::to_string_pretty(value).map_err(|e| io(e.into()))?;
    text.push('\n');
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
