//! One run of a benchmark: a scenario in a mode with a seed, and where its folder is.
//! A leaf of the bench module: the plan, the shards and the executor all use it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::scenario::Mode;

/// One simulation of the benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// `scenario/mode/seed-N`, also the run folder under `runs/`.
    pub id: String,
    pub scenario: String,
    /// The scenario file as given on the command line.
    pub file: String,
    /// SHA-256 of the scenario file, so a changed file is not mixed with old runs.
    pub sha256: String,
    pub mode: Mode,
    pub seed: u64,
}

impl Job {
    pub fn new(scenario: &str, file: &Path, sha256: &str, mode: Mode, seed: u64) -> Self {
        Self {
            id: format!("{scenario}/{}/seed-{seed}", mode.as_str()),
            scenario: scenario.to_string(),
            file: file.display().to_string(),
            sha256: sha256.to_string(),
            mode,
            seed,
        }
    }

    /// The run's folder inside the benchmark's output folder.
    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join("runs").join(&self.id)
    }
}
