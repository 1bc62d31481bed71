//! One benchmark split over many processes or machines: shard I of N runs the planned
//! runs at positions k with k mod N = I, into a folder of its own whose `bench.json`
//! records the shard and the whole plan, so `merge` can check that the shards belong
//! together and cover the plan exactly once.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::job::Job;
use sopsim::scenario::Mode;

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard's index, from 0.
    pub index: u64,
    /// How many shards the benchmark is split into.
    pub count: u64,
}

/// Why a shard was not understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    /// The text given is not `I/N`.
    #[error("{0:?} is not I/N (shard I of N, from 0)")]
    Syntax(String),
    /// The index is not below the shard count.
    #[error("shard {index} of {count} does not exist (shards count from 0 to {})", .count.saturating_sub(1))]
    OutOfRange {
        /// The index given.
        index: u64,
        /// The shard count given.
        count: u64,
    },
    /// The shard count is 0.
    #[error("there must be at least one shard")]
    NoShards,
    /// Neither a Slurm array task's nor a Kubernetes Indexed Job's variable is set.
    #[error("none of SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX is set: not inside a Slurm array task or a Kubernetes Indexed Job")]
    NoEngine,
    /// An environment variable's value is not a whole number.
    #[error("{var}={value:?} is not a shard number")]
    BadVariable {
        /// The variable's name.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// No shard count was given, and the environment does not tell it.
    #[error("the shard count is not known: give it (SLURM_ARRAY_TASK_COUNT is not set)")]
    NoCount,
}

impl Shard {
    /// Shard `index` of `count`, refused unless `index` is below a `count` of at least 1.
    pub fn new(index: u64, count: u64) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index >= count {
            return Err(ShardError::OutOfRange { index, count });
        }
        Ok(Self { index, count })
    }

    /// `I/N`.
    pub fn parse(text: &str) -> Result<Self, ShardError> {
        let bad = || ShardError::Syntax(text.to_string());
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse().map_err(|_| bad())?;
        let n = n.trim().parse().map_err(|_| bad())?;
        Self::new(i, n)
    }

    /// From the engine's environment (`var` looks a variable up): a Slurm array task
    /// (`SLURM_ARRAY_TASK_ID`, with `SLURM_ARRAY_TASK_COUNT` unless `count` is given)
    /// or a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`, with `count`).
    pub fn from_env(
        count: Option<u64>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ShardError> {
        let number = |name: &'static str, value: String| {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| ShardError::BadVariable { var: name, value })
        };
        if let Some(id) = var("SLURM_ARRAY_TASK_ID") {
            let index = number("SLURM_ARRAY_TASK_ID", id)?;
            let count = match count {
                Some(n) => n,
                None => number(
                    "SLURM_ARRAY_TASK_COUNT",
                    var("SLURM_ARRAY_TASK_COUNT").ok_or(ShardError::NoCount)?,
                )?,
            };
            // Arrays may start at 1 (`--array=1-N`); SLURM_ARRAY_TASK_MIN says so.
            let min = match var("SLURM_ARRAY_TASK_MIN") {
                Some(m) => number("SLURM_ARRAY_TASK_MIN", m)?,
                None => 0,
            };
            return Self::new(index.saturating_sub(min), count);
        }
        if let Some(id) = var("JOB_COMPLETION_INDEX") {
            let index = number("JOB_COMPLETION_INDEX", id)?;
            return Self::new(index, count.ok_or(ShardError::NoCount)?);
        }
        Err(ShardError::NoEngine)
    }

    /// The jobs of this shard, in plan order.
    pub fn select(&self, jobs: &[Job]) -> Vec<Job> {
        jobs.iter()
            .enumerate()
            .filter(|(k, _)| *k as u64 % self.count == self.index)
            .map(|(_, j)| j.clone())
            .collect()
    }
}

/// What a shard's `bench.json` records about the whole benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardPlan {
    /// Which shard of the plan the folder holds.
    pub shard: Shard,
    /// Scenario names in plan order, the modes in order, and the seeds.
    pub scenarios: Vec<String>,
    /// The modes, in plan order.
    pub modes: Vec<Mode>,
    /// The first seed; the others follow it one by one.
    pub first_seed: u64,
    /// How many seeds each scenario runs in each mode.
    pub seeds: u64,
    /// Runs in the whole plan, and a digest of their ids in plan order.
    pub runs: usize,
    /// The SHA-256 of the whole plan's run ids in plan order, one a line.
    pub ids_sha256: String,
}

impl ShardPlan {
    /// The plan of `jobs` (the whole plan's, in order) as `shard` of it records it.
    pub fn new(shard: Shard, jobs: &[Job], modes: &[Mode], first_seed: u64, seeds: u64) -> Self {
        let mut scenarios: Vec<String> = Vec::new();
        for j in jobs {
            if !scenarios.contains(&j.scenario) {
                scenarios.push(j.scenario.clone());
            }
        }
        Self {
            shard,
            scenarios,
            modes: modes.to_vec(),
            first_seed,
            seeds,
            runs: jobs.len(),
            ids_sha256: ids_digest(jobs.iter().map(|j| j.id.as_str())),
        }
    }

    /// The same plan, another shard of it.
    pub fn same_plan(&self, other: &ShardPlan) -> bool {
        ShardPlan {
            shard: other.shard,
            ..self.clone()
        } == *other
    }
}

/// A digest of run ids in order.
pub fn ids_digest<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    for id in ids {
        h.update(id.as_bytes());
        h.update(b"\n");
    }
    sopsim_core::digest::hex(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn shards_parse_and_refuse_what_does_not_exist() {
        assert_eq!(Shard::parse("1/3"), Ok(Shard { index: 1, count: 3 }));
        assert_eq!(
            Shard::parse("3/3"),
            Err(ShardError::OutOfRange { index: 3, count: 3 })
        );
        assert_eq!(Shard::parse("0/0"), Err(ShardError::NoShards));
        assert!(matches!(Shard::parse("a/b"), Err(ShardError::Syntax(_))));
    }

    #[test]
    fn the_engine_environment_names_the_shard() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            Shard::from_env(
                None,
                env(&[
                    ("SLURM_ARRAY_TASK_ID", "2"),
                    ("SLURM_ARRAY_TASK_COUNT", "4")
                ])
            ),
            Ok(Shard { index: 2, count: 4 })
        );
        assert_eq!(
            Shard::from_env(
                Some(4),
                env(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_MIN", "1")])
            ),
            Ok(Shard { index: 3, count: 4 })
        );
        assert_eq!(
            Shard::from_env(Some(5), env(&[("JOB_COMPLETION_INDEX", "0")])),
            Ok(Shard { index: 0, count: 5 })
        );
        assert_eq!(
            Shard::from_env(None, env(&[("JOB_COMPLETION_INDEX", "0")])),
            Err(ShardError::NoCount)
        );
        assert_eq!(
            Shard::from_env(Some(2), env(&[])),
            Err(ShardError::NoEngine)
        );
    }

    #[test]
    fn the_shards_cover_the_plan_exactly_once() {
        let jobs: Vec<Job> = (0..10)
            .map(|s| Job::new("pd", Path::new("pd.json"), "x", Mode::Cooperative, s))
            .collect();
        let mut seen: Vec<String> = (0..3)
            .flat_map(|i| Shard::new(i, 3).unwrap().select(&jobs))
            .map(|j| j.id)
            .collect();
        seen.sort();
        let mut all: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        all.sort();
        assert_eq!(seen, all);
    }
}
