//! `sopsim serve DIR`: a finished run folder or a bench folder, read and never written.
//! Only files the folder's own manifest or listing names are served, only runs whose
//! ids are the plain `SCENARIO/MODE/seed-N` of their job, and only regular files inside
//! the folder, opened through `OutputFolder`: no manifest line and no link reaches
//! outside it.

use std::path::{Path, PathBuf};

use serde_json::json;

use sopsim::runner::{Entry, FolderFileError, OutputFolder};
use sopsim_bench::job::Job;

/// The largest manifest read whole (a million runs' lines). Everything but the
/// manifest and the plots is sent as it is read (`stream.rs`).
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The largest plot served: a plot of many series is some hundreds of kilobytes.
const MAX_PLOT_BYTES: u64 = 16 * 1024 * 1024;

/// What a folder holds.
pub(crate) enum Folder {
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
pub(crate) enum FolderError {
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
    pub(crate) fn open(dir: &Path) -> Result<Self, FolderError> {
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

    /// What `/api/state` says about the folder, around the document it carries
    /// (a run's `summary.json`, a bench's `report.json`): the JSON before and after it,
    /// and the file, or `None` with what is said in its place.
    pub(crate) fn state(&self) -> (String, String, Option<std::fs::File>) {
        let (document, opened) = match self {
            Folder::Run(files) => ("summary.json", files.open_to_read("summary.json")),
            Folder::Bench { files, .. } => ("report.json", files.open_to_read("report.json")),
        };
        let problem = opened.as_ref().err().map(|e| unreadable(document, e));
        let head = match self {
            Folder::Run(_) => json!({ "mode": "run", "problem": problem }),
            Folder::Bench { files, runs } => json!({
                "mode": "bench",
                "runs": runs,
                "plots": plots(files),
                "problem": problem,
            }),
        };
        let key = if matches!(self, Folder::Run(_)) {
            "summary"
        } else {
            "report"
        };
        // The object's fields, then the document as its last field.
        let head = head.to_string();
        let before = format!("{},\"{key}\":", &head[..head.len() - 1]);
        (before, "}".into(), opened.ok())
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

    /// `file` of run `id` opened to be sent; `None` when there is no such run.
    pub(crate) fn open_file(
        &self,
        id: Option<&str>,
        file: &str,
    ) -> Option<Result<std::fs::File, FolderFileError>> {
        Some(self.files().open_to_read(&self.run_file(id, file)?))
    }

    /// A plot's bytes and content type, if `name` is one of the bench's plots.
    pub(crate) fn plot(&self, name: &str) -> Option<(Vec<u8>, &'static str)> {
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
            .read(&format!("plots/{name}"), MAX_PLOT_BYTES)
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

/// Why `name` is not shown, in words for the page (the folder's own path left out).
pub(super) fn unreadable(name: &str, e: &FolderFileError) -> String {
    match e {
        e if e.is_missing() => format!("{name}: not written (the run has not finished)"),
        FolderFileError::Link { .. } => format!(
            "{name} is a symbolic link; the viewer shows only regular files inside the folder"
        ),
        FolderFileError::NotRegular { .. } => format!("{name} is not a regular file"),
        _ => format!("{name} cannot be read"),
    }
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
