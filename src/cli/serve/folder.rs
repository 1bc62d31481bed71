//! `sopsim serve DIR`: a finished run folder or a bench folder, read and never written.
//! Only files the folder's own manifest or listing names are served, only runs whose
//! ids are the plain `SCENARIO/MODE/seed-N` of their job, and only files that lie
//! inside the folder once every link is resolved: no manifest line and no symlink
//! reaches outside it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use sopsim::bench::job::Job;
use sopsim::files::read_bounded;

/// The largest file served from a folder (an events.jsonl of a very long run).
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// What a folder holds.
pub enum Folder {
    /// One run: `events.jsonl`, `summary.json`.
    Run(PathBuf),
    /// A benchmark: `manifest.jsonl`, `report.json`, `plots/`, `runs/<id>/`.
    Bench { dir: PathBuf, runs: Vec<String> },
}

/// Why a folder cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("{0}: no such folder")]
    Missing(PathBuf),
    #[error("{0}: neither a run folder (events.jsonl) nor a bench folder (manifest.jsonl)")]
    Unknown(PathBuf),
    #[error("{path}: {source}")]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Folder {
    pub fn open(dir: &Path) -> Result<Self, FolderError> {
        if !dir.is_dir() {
            return Err(FolderError::Missing(dir.to_path_buf()));
        }
        // Every file served must resolve inside this path.
        let dir = &dir.canonicalize().map_err(|source| FolderError::Resolve {
            path: dir.to_path_buf(),
            source,
        })?;
        let manifest = dir.join("manifest.jsonl");
        if manifest.is_file() {
            let text = read_text(dir, &manifest)?;
            let runs = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Job>(l).ok())
                .filter(|job| job.check().is_ok())
                .map(|job| job.id)
                .collect();
            return Ok(Folder::Bench {
                dir: dir.to_path_buf(),
                runs,
            });
        }
        if dir.join("events.jsonl").is_file() {
            return Ok(Folder::Run(dir.to_path_buf()));
        }
        Err(FolderError::Unknown(dir.to_path_buf()))
    }

    fn root(&self) -> &Path {
        match self {
            Folder::Run(dir) | Folder::Bench { dir, .. } => dir,
        }
    }

    /// What `/api/state` says about the folder.
    pub fn state(&self) -> Value {
        match self {
            Folder::Run(dir) => json!({
                "mode": "run",
                "summary": read_json(dir, &dir.join("summary.json")),
            }),
            Folder::Bench { dir, runs } => json!({
                "mode": "bench",
                "report": read_json(dir, &dir.join("report.json")),
                "runs": runs,
                "plots": plots(dir),
            }),
        }
    }

    /// The folder of run `id` (`None` for the bench's own folder), if there is one.
    fn run_dir(&self, id: Option<&str>) -> Option<PathBuf> {
        match (self, id) {
            (Folder::Run(dir), None) => Some(dir.clone()),
            (Folder::Bench { dir, runs }, Some(id)) if runs.iter().any(|r| r == id) => {
                Some(dir.join("runs").join(id))
            }
            _ => None,
        }
    }

    /// A run's events, as a JSON array of its payloads.
    pub fn events(&self, id: Option<&str>) -> Option<Value> {
        let path = self.run_dir(id)?.join("events.jsonl");
        let text = read_text(self.root(), &path).ok()?;
        Some(Value::Array(
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        ))
    }

    /// A run's summary.
    pub fn summary(&self, id: Option<&str>) -> Option<Value> {
        read_json(self.root(), &self.run_dir(id)?.join("summary.json"))
    }

    /// A run's networks (`network.json`, written for runs with populations).
    pub fn network(&self, id: Option<&str>) -> Option<Value> {
        read_json(self.root(), &self.run_dir(id)?.join("network.json"))
    }

    /// A plot's bytes and content type, if `name` is one of the bench's plots.
    pub fn plot(&self, name: &str) -> Option<(Vec<u8>, &'static str)> {
        let Folder::Bench { dir, .. } = self else {
            return None;
        };
        if !plots(dir).iter().any(|p| p == name) {
            return None;
        }
        let kind = if name.ends_with(".svg") {
            "image/svg+xml"
        } else {
            "image/png"
        };
        read_inside(dir, &dir.join("plots").join(name))
            .ok()
            .map(|b| (b, kind))
    }
}

/// The bytes of `path` if it resolves to a file inside `root` (a canonical path).
fn read_inside(root: &Path, path: &Path) -> std::io::Result<Vec<u8>> {
    let real = path.canonicalize()?;
    if !real.starts_with(root) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "leads outside the folder served",
        ));
    }
    read_bounded(&real, MAX_FILE_BYTES)
}

fn read_text(root: &Path, path: &Path) -> Result<String, FolderError> {
    read_inside(root, path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|source| FolderError::Read {
            path: path.to_path_buf(),
            source,
        })
}

fn read_json(root: &Path, path: &Path) -> Option<Value> {
    serde_json::from_str(&read_text(root, path).ok()?).ok()
}

/// The plot files of a bench folder, by name.
fn plots(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("plots"))
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
