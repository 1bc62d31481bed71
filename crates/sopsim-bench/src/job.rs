//! One run of a benchmark: a scenario in a mode with a seed, and where its folder is.
//! A leaf of the bench module: the plan, the shards and the executor all use it.
//!
//! A run's id becomes a path (`runs/SCENARIO/MODE/seed-N`), and ids are read back from
//! files a user may hand over (a shard's `manifest.jsonl`): a name that could climb out
//! of the folder or name another one is refused wherever an id is read or made.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use sopsim::scenario::Mode;

/// One simulation of the benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// `scenario/mode/seed-N`, also the run folder under `runs/`.
    pub id: String,
    /// The scenario's name, the first folder of the id.
    pub scenario: String,
    /// The scenario file as given on the command line.
    pub file: String,
    /// SHA-256 of the scenario file, so a changed file is not mixed with old runs.
    pub sha256: String,
    /// The mode the scenario runs in: cooperative or competitive.
    pub mode: Mode,
    /// The run's seed.
    pub seed: u64,
}

/// Why a name cannot be one folder of a run's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeName {
    /// The name is empty.
    #[error("is empty")]
    Empty,
    /// The name is `.` or `..`.
    #[error("is `.` or `..`")]
    Dots,
    /// The name contains a path separator, `/` or `\`.
    #[error("contains a path separator ({0:?})")]
    Separator(char),
    /// The name contains a control character.
    #[error("contains a control character")]
    Control,
    /// The id is not the one its scenario, mode and seed make.
    #[error("is not {expected:?}, the id of its scenario, mode and seed")]
    NotItsRun {
        /// The id its scenario, mode and seed make.
        expected: String,
    },
}

/// Checks that `name` is one plain folder name: not empty, not `.` or `..`, with no
/// path separator and no control character (so never absolute either).
pub fn check_folder_name(name: &str) -> Result<(), UnsafeName> {
    if name.is_empty() {
        return Err(UnsafeName::Empty);
    }
    if name == "." || name == ".." {
        return Err(UnsafeName::Dots);
    }
    if let Some(c) = name.chars().find(|c| matches!(c, '/' | '\\')) {
        return Err(UnsafeName::Separator(c));
    }
    if name.chars().any(char::is_control) {
        return Err(UnsafeName::Control);
    }
    Ok(())
}

impl Job {
    /// The run of `scenario` (from `file`, of digest `sha256`) in `mode` with `seed`,
    /// its id made from the three.
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

    /// Checks a job read from a file: its scenario is a plain folder name and its id is
    /// the one its scenario, mode and seed make, so its folder lies inside `runs/`.
    pub fn check(&self) -> Result<(), UnsafeName> {
        check_folder_name(&self.scenario)?;
        let expected = format!(
            "{}/{}/seed-{}",
            self.scenario,
            self.mode.as_str(),
            self.seed
        );
        if self.id != expected {
            return Err(UnsafeName::NotItsRun { expected });
        }
        Ok(())
    }

    /// The run's folder inside the benchmark's output folder.
    pub fn dir(&self, out: &Path) -> PathBuf {
        out.join(self.rel_dir())
    }

    /// The run's folder relative to the benchmark's output folder.
    pub fn rel_dir(&self) -> String {
        format!("runs/{}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_leave_the_folder_are_refused() {
        assert_eq!(check_folder_name("debate"), Ok(()));
        assert_eq!(check_folder_name("Debate: cars (v2)"), Ok(()));
        assert_eq!(check_folder_name(""), Err(UnsafeName::Empty));
        assert_eq!(check_folder_name(".."), Err(UnsafeName::Dots));
        assert_eq!(check_folder_name("/etc"), Err(UnsafeName::Separator('/')));
        assert_eq!(check_folder_name("a/../b"), Err(UnsafeName::Separator('/')));
        assert_eq!(check_folder_name("..\\x"), Err(UnsafeName::Separator('\\')));
        assert_eq!(check_folder_name("a\nb"), Err(UnsafeName::Control));
    }

    #[test]
    fn a_job_whose_id_is_not_its_own_run_is_refused() {
        let job = Job::new("debate", Path::new("d.json"), "00", Mode::Cooperative, 3);
        assert_eq!(job.check(), Ok(()));
        for id in [
            "/tmp/victim",
            "debate/cooperative/seed-3/../../..",
            "x/cooperative/seed-3",
        ] {
            let forged = Job {
                id: id.into(),
                ..job.clone()
            };
            assert!(
                matches!(forged.check(), Err(UnsafeName::NotItsRun { .. })),
                "{id}"
            );
        }
        let climbing = Job {
            scenario: "..".into(),
            id: "../cooperative/seed-3".into(),
            ..job
        };
        assert_eq!(climbing.check(), Err(UnsafeName::Dots));
    }
}
