//! `sopsim bench merge`: the shards of one benchmark gathered into one folder with the
//! report an unsharded run would have written. The shards must share their settings,
//! their plan and their scenario files, and cover the plan exactly once; run folders
//! are hard-linked (copied where links cannot be made). Rerunning a merge gives the
//! same folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::exec::Executed;
use super::plan::{self, Job, Settings};
use super::shard::{ids_digest, ShardPlan};
pub use crate::error::ShardFolderError;
use crate::run::{load, lock_folder, report_folder, Loaded, ReportInput};
use crate::{BenchError, BenchRun};
use sopsim::runner::OutputFolder;

/// What to merge, and where.
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// The folder the shards are merged into.
    pub out: PathBuf,
    /// The shards' folders, one for each shard of the benchmark.
    pub shards: Vec<PathBuf>,
    /// Write the report even when runs are missing (they count as unfinished).
    pub allow_missing: bool,
    /// Folders besides each scenario's own that its files may be in.
    pub allowed_paths: Vec<PathBuf>,
}

/// What a merge gathered.
pub struct Merged {
    /// The report written into the merged folder (the merge itself runs nothing).
    pub run: BenchRun,
    /// Runs gathered from the shards.
    pub gathered: usize,
    /// Planned runs no shard finished, by id.
    pub missing: Vec<String>,
}

struct ShardFolder {
    dir: PathBuf,
    settings: Settings,
    plan: ShardPlan,
    jobs: Vec<Job>,
}

fn read_shard(dir: &Path) -> Result<ShardFolder, BenchError> {
    let unusable = |source: ShardFolderError| BenchError::ShardFolder {
        path: dir.to_path_buf(),
        source,
    };
    let unreadable = |e: BenchError| unusable(ShardFolderError::Unreadable(Box::new(e)));
    if !dir.is_dir() {
        return Err(unusable(ShardFolderError::Missing));
    }
    let settings = plan::read_settings(dir).map_err(unreadable)?;
    let plan = settings
        .shard
        .clone()
        .ok_or_else(|| unusable(ShardFolderError::NotAShard))?;
    for name in &plan.scenarios {
        super::job::check_folder_name(name).map_err(|source| {
            unusable(ShardFolderError::UnsafeScenario {
                name: name.clone(),
                source,
            })
        })?;
    }
    let jobs = plan::read_jobs(dir).map_err(unreadable)?;
    Ok(ShardFolder {
        dir: dir.to_path_buf(),
        settings,
        plan,
        jobs,
    })
}

/// Checks the shards, gathers their runs into `opts.out` and writes its report.
pub fn merge(opts: &MergeOptions) -> Result<Merged, BenchError> {
    let shards = opts
        .shards
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = shards.first() else {
        return Err(BenchError::ShardFolder {
            path: opts.out.clone(),
            source: ShardFolderError::NoShards,
        });
    };
    let by_index = by_index(&shards)?;
    let _lock = lock_folder(&opts.out)?;
    let settings = Settings {
        shard: None,
        ..first.settings.clone()
    };
    let plan = &first.plan;
    let seeds: Vec<u64> = (0..plan.seeds).map(|i| plan.first_seed + i).collect();
    let ids = planned_ids(first, &seeds)?;
    let Gathered {
        jobs,
        sources,
        missing,
    } = gather_jobs(&shards, &by_index, plan, &seeds, &ids);
    if !missing.is_empty() && !opts.allow_missing {
        return Err(BenchError::MissingRuns {
            count: missing.len(),
            of: ids.len(),
            ids: missing,
        });
    }
    // A finished run whose files disagree is not merged into a report as if it held.
    for (shard, job) in &sources {
        if let Err(why) = super::read_back::check_run(&OutputFolder::new(shard), job) {
            return Err(BenchError::ShardFolder {
                path: shard.clone(),
                source: ShardFolderError::RunEdited {
                    id: job.id.clone(),
                    why,
                },
            });
        }
    }
    let loaded = load_scenarios(plan, &jobs, opts)?;
    if opts.out.join("bench.json").exists() {
        let earlier = plan::read_settings(&opts.out)?;
        if earlier != settings {
            return Err(BenchError::OtherSettings {
                out: opts.out.clone(),
                earlier: plan::describe(&earlier),
                now: plan::describe(&settings),
            });
        }
    }
    std::fs::create_dir_all(&opts.out).map_err(|source| BenchError::Io {
        path: opts.out.clone(),
        source,
    })?;
    let out = OutputFolder::new(&opts.out);
    for (shard, job) in &sources {
        gather(&OutputFolder::new(shard), &out, &job.rel_dir())?;
    }
    plan::write(&opts.out, &settings, &jobs)?;
    let inputs: Vec<ReportInput> = loaded.iter().map(ReportInput::of).collect();
    let run = report_folder(
        &opts.out,
        &inputs,
        &settings,
        &plan.modes,
        &seeds,
        &jobs,
        Executed::default(),
        sources.len(),
    )?;
    Ok(Merged {
        run,
        gathered: sources.len(),
        missing,
    })
}

/// The shards by index, once they are known to be shards of one benchmark, each once.
fn by_index(shards: &[ShardFolder]) -> Result<BTreeMap<u64, &ShardFolder>, BenchError> {
    let Some(first) = shards.first() else {
        return Ok(BTreeMap::new());
    };
    let settings = Settings {
        shard: None,
        ..first.settings.clone()
    };
    let mut by_index: BTreeMap<u64, &ShardFolder> = BTreeMap::new();
    for s in shards {
        let other = Settings {
            shard: None,
            ..s.settings.clone()
        };
        if other != settings || !s.plan.same_plan(&first.plan) {
            return Err(BenchError::ShardMismatch {
                first: first.dir.clone(),
                other: s.dir.clone(),
            });
        }
        if let Some(earlier) = by_index.insert(s.plan.shard.index, s) {
            return Err(BenchError::DoubledShard {
                index: s.plan.shard.index,
                first: earlier.dir.clone(),
                second: s.dir.clone(),
            });
        }
    }
    Ok(by_index)
}

/// The whole plan's run ids in its order, rebuilt from the names it is made of and
/// checked against the digest the shard recorded.
fn planned_ids(first: &ShardFolder, seeds: &[u64]) -> Result<Vec<String>, BenchError> {
    let plan = &first.plan;
    let mut ids: Vec<String> = Vec::new();
    for sc in &plan.scenarios {
        for m in &plan.modes {
            ids.extend(
                seeds
                    .iter()
                    .map(|s| format!("{sc}/{}/seed-{s}", m.as_str())),
            );
        }
    }
    if ids.len() != plan.runs || ids_digest(ids.iter().map(String::as_str)) != plan.ids_sha256 {
        return Err(BenchError::ShardFolder {
            path: first.dir.clone(),
            source: ShardFolderError::PlanEdited,
        });
    }
    Ok(ids)
}

/// The merged plan's jobs, the finished run folders to gather, and the runs no shard
/// finished.
struct Gathered {
    jobs: Vec<Job>,
    sources: Vec<(PathBuf, Job)>,
    missing: Vec<String>,
}

/// Finds each planned run in the shard that owns it (position k in shard k mod N).
fn gather_jobs(
    shards: &[ShardFolder],
    by_index: &BTreeMap<u64, &ShardFolder>,
    plan: &ShardPlan,
    seeds: &[u64],
    ids: &[String],
) -> Gathered {
    let known: BTreeMap<&str, &Job> = shards
        .iter()
        .flat_map(|s| s.jobs.iter())
        .map(|j| (j.id.as_str(), j))
        .collect();
    // Each shard's jobs by id: a plan of a million runs is looked up, not searched.
    let by_id: BTreeMap<u64, BTreeMap<&str, &Job>> = by_index
        .iter()
        .map(|(i, s)| (*i, s.jobs.iter().map(|j| (j.id.as_str(), j)).collect()))
        .collect();
    let mut gathered = Gathered {
        jobs: Vec::new(),
        sources: Vec::new(),
        missing: Vec::new(),
    };
    for (k, id) in ids.iter().enumerate() {
        let index = k as u64 % plan.shard.count;
        let owner = by_index.get(&index);
        let job = by_id
            .get(&index)
            .and_then(|jobs| jobs.get(id.as_str()).copied());
        match (owner, job) {
            (Some(s), Some(job)) if plan::is_finished(&job.dir(&s.dir)) => {
                gathered.sources.push((s.dir.clone(), job.clone()));
                gathered.jobs.push(job.clone());
            }
            _ => {
                gathered.missing.push(id.clone());
                // A run of a missing shard: its scenario's file from any other run.
                let scenario = id.split('/').next().unwrap_or_default();
                if let Some(like) = known.values().find(|j| j.scenario == scenario) {
                    let mode = plan.modes[(k / plan.seeds as usize) % plan.modes.len()];
                    let seed = seeds[k % plan.seeds as usize];
                    gathered.jobs.push(Job::new(
                        scenario,
                        Path::new(&like.file),
                        &like.sha256,
                        mode,
                        seed,
                    ));
                }
            }
        }
    }
    gathered
}

/// The plan's scenario files, each as the shards ran it (the same bytes).
fn load_scenarios(
    plan: &ShardPlan,
    jobs: &[Job],
    opts: &MergeOptions,
) -> Result<Vec<Loaded>, BenchError> {
    let mut loaded = Vec::new();
    for name in &plan.scenarios {
        let Some(job) = jobs.iter().find(|j| &j.scenario == name) else {
            continue;
        };
        let l = load(Path::new(&job.file), &opts.allowed_paths)?;
        if l.sha256 != job.sha256 {
            return Err(BenchError::ScenarioChanged {
                file: job.file.clone(),
                id: job.id.clone(),
                out: opts.out.clone(),
                runs: opts.out.join("runs").join(name),
            });
        }
        loaded.push(l);
    }
    Ok(loaded)
}

/// Puts the files of run `rel` of the shard folder `shard` at `rel` in `out`,
/// replacing what a previous merge put there. Both sides are opened through their
/// folders: a link on the way in either is refused, so nothing outside them is read,
/// removed or written.
fn gather(shard: &OutputFolder, out: &OutputFolder, rel: &str) -> Result<(), BenchError> {
    let io = |path: &Path, source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    };
    let from = shard.sub(rel)?;
    out.remove_tree(rel)?;
    let to = out.create_dirs(rel)?;
    for entry in std::fs::read_dir(from.root()).map_err(|e| io(from.root(), e))? {
        let entry = entry.map_err(|e| io(from.root(), e))?;
        if !entry.file_type().map_err(|e| io(from.root(), e))?.is_file() {
            continue;
        }
        let (src, dst) = (entry.path(), to.root().join(entry.file_name()));
        if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| io(&dst, e))?;
        }
    }
    Ok(())
}
