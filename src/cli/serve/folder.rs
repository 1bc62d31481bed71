//! `sopsim serve DIR`: a finished run folder or a bench folder, read and never written.
//! Only files the folder's own manifest or listing names are served, only runs whose
//! ids are the plain `SCENARIO/MODE/seed-N` of their job, and only regular files inside
//! the folder, opened through `OutputFolder`: no manifest line and no link reaches
//! outside it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use sopsim::bench::job::Job;
use sopsim::runner::{Entry, FolderFileError, OutputFolder};

/// The largest file served from a folder (an events.jsonl of a very long run).
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// What a folder holds.
pub enum Folder {
    /// One run: `events.jsonl`, `summary.json`.
    Run(OutputFolder),
    /// A benchmark: `manifest.jsonl`, `report.json`, `plots/`, `runs/<id>/`.
    Bench {
        files: OutputFolder,
        runs: Vec<String>,
    },
}

/// Why a folder cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("{0}: no such folder")]
    Missing(PathBuf),
    #[error("{0}: a file, not a run or bench folder")]
    NotAFolder(PathBuf),
    #[error("{0}: neither a run folder (events.jsonl) nor a bench folder (manifest.jsonl)")]
    Unknown(PathBuf),
    #[error(transparent)]
    Read(FolderFileError),
}

impl Folder {
    pub fn open(dir: &Path) -> Result<Self, FolderError> {
        if dir.is_file() {
            return Err(FolderError::NotAFolder(dir.to_path_buf()));
        }
        if !dir.is_dir() {
            return Err(FolderError::Missing(dir.to_path_buf()));
        }
        let files = OutputFolder::new(dir);
        if files
            .entry("manifest.jsonl")
            .is_ok_and(|e| e != Entry::Nothing)
        {
            let text = read_text(&files, "manifest.jsonl")?;
            let runs = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Job>(l).ok())
                .filter(|job| job.check().is_ok())
                .map(|job| job.id)
                .collect();
            return Ok(Folder::Bench { files, runs });
        }
        if files
            .entry("events.jsonl")
            .is_ok_and(|e| e != Entry::Nothing)
        {
            return Ok(Folder::Run(files));
        }
        Err(FolderError::Unknown(dir.to_path_buf()))
    }

    fn files(&self) -> &OutputFolder {
        match self {
            Folder::Run(files) | Folder::Bench { files, .. } => files,
        }
    }

    /// What `/api/state` says about the folder.
    pub fn state(&self) -> Value {
        match self {
            Folder::Run(files) => json!({
                "mode": "run",
                "summary": read_json(files, "summary.json"),
            }),
            Folder::Bench { files, runs } => json!({
                "mode": "bench",
                "report": read_json(files, "report.json"),
                "runs": runs,
                "plots": plots(files),
            }),
        }
    }

    /// The name of `file` of run `id` (`None` for the run folder's own), if there is
    /// such a run.
    fn run_file(&self, id: Option<&str>, file: &str) -> Option<String> {
        match (self, id) {
            (Folder::Run(_), None) => Some(file.to_string()),
            (Folder::Bench { runs, .. }, Some(id)) if runs.iter().any(|r| r == id) => {
                Some(format!("runs/{id}/{file}"))
            }
            _ => None,
        }
    }

    /// A run's events, as a JSON array of its payloads.
    pub fn events(&self, id: Option<&str>) -> Option<Value> {
        let text = read_text(self.files(), &self.run_file(id, "events.jsonl")?).ok()?;
        Some(Value::Array(
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        ))
    }

    /// A run's summary.
    pub fn summary(&self, id: Option<&str>) -> Option<Value> {
        read_json(self.files(), &self.run_file(id, "summary.json")?)
    }

    /// A run's networks (`network.json`, written for runs with populations).
    pub fn network(&self, id: Option<&str>) -> Option<Value> {
        read_json(self.files(), &self.run_file(id, "network.json")?)
    }

    /// A plot's bytes and content type, if `name` is one of the bench's plots.
    pub fn plot(&self, name: &str) -> Option<(Vec<u8>, &'static str)> {
        let Folder::Bench { files, .. } = self else {
            return None;
        };
        if !plots(files).iter().any(|p| p == name) {
            return None;
        }
        let kind = if name.ends_with(".svg") {
            "image/svg+xml"
        } else {
            "image/png"
        };
        files
            .read(&format!("plots/{name}"), MAX_FILE_BYTES)
            .ok()
            .map(|b| (b, kind))
    }
}

fn read_text(files: &OutputFolder, name: &str) -> Result<String, FolderError> {
    files
        .read(name, MAX_FILE_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(FolderError::Read)
}

fn read_json(files: &OutputFolder, name: &str) -> Option<Value> {
    serde_json::from_str(&read_text(files, name).ok()?).ok()
}

/// The plot files of a bench folder, by name.
fn plots(files: &OutputFolder) -> Vec<String> {
    let Ok(dir) = files.sub("plots") else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(dir.root())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.ends_with(".svg") || n.ends_with(".png"))
        .collect();
    names.sort();
    names
}
