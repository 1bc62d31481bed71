//! A benchmark from its options to its report: the scenarios loaded and checked, the
//! plan made and recorded, the unfinished runs run, every run read back and the report
//! written.

use std::collections::HashMap;
use std::path::Path as StdPath;
use std::path::PathBuf;
use std::sync::Arc;

use sopsim::error::CancelToken;
use sopsim::runner::OutputFolder;
use sopsim::scenario::aiwaves::Imported;
use sopsim::scenario::judge::{built_in, JudgeSpec};
use sopsim::scenario::people::PeopleReference;
use sopsim::scenario::{CommandConsent, Mode, OutcomeRules, Scenario};
use sopsim::setup::{self, ModelOptions, Setting, SetupError};

use crate::exec::{self, Executed, JobResult, Prepared};
use crate::plan::{self, Job, Settings};
use crate::read_back::{self, RunStatus};
use crate::report::{self, Report, ScenarioRuns};
use crate::shard::{Shard, ShardPlan};
use crate::{job, outputs, people, BenchError};

/// Seeds one benchmark may plan: each is a run folder per scenario and mode.
pub const MAX_SEEDS: u64 = 1_000_000;

/// Told how a benchmark goes (the command line draws a progress bar).
pub trait BenchObserver: Sync {
    /// `total` runs to do this time; `done` were finished by earlier invocations.
    fn planned(&self, _total: usize, _done: usize) {}
    /// A run ended.
    fn run_done(&self, _job: &Job, _result: &JobResult) {}
}

/// Observes nothing.
pub struct Unobserved;

impl BenchObserver for Unobserved {}

/// What `sopsim bench` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The scenario files to run, each under its own scenario name.
    pub scenarios: Vec<PathBuf>,
    /// The modes each scenario runs in, in order.
    pub modes: Vec<Mode>,
    /// How many seeds each scenario runs in each mode (at most `MAX_SEEDS`).
    pub seeds: u64,
    /// The first seed; the others follow it one by one.
    pub first_seed: u64,
    /// How many runs go at once, at most.
    pub jobs: usize,
    /// The benchmark's output folder.
    pub out: PathBuf,
    /// The turn limit of every run, when set.
    pub max_turns: Option<u64>,
    /// The model and embedding backends the runs use.
    pub models: ModelOptions,
    /// Folders besides each scenario's own that its files may be in.
    pub allowed_paths: Vec<PathBuf>,
    /// Run only this shard of the plan.
    pub shard: Option<Shard>,
    /// The programs the scenarios' tools may start (none unless the user allows them).
    pub allowed_commands: CommandConsent,
    /// A judge for every run in the scenarios' own judges' place: its spec, and the
    /// folder its rubric file is read from.
    pub judge: Option<(JudgeSpec, PathBuf)>,
    /// People's data to set beside every scenario's figures (a `reference` file).
    pub reference: Option<PathBuf>,
}

/// What a benchmark invocation ran and concluded.
pub struct BenchRun {
    /// The report it wrote, of every run the plan holds.
    pub report: Report,
    /// What this invocation ran.
    pub executed: Executed,
    /// Runs already finished by an earlier invocation.
    pub skipped: usize,
    /// The process's peak resident memory, when the OS tells.
    pub peak_rss_mib: Option<f64>,
}

impl BenchRun {
    /// Runs this invocation finished or failed, per second of its wall time.
    pub fn runs_per_s(&self) -> f64 {
        let runs = (self.executed.finished + self.executed.failed) as f64;
        runs / self.executed.wall.as_secs_f64().max(1e-9)
    }

    /// Turns of the runs this invocation finished, per second of its wall time.
    pub fn turns_per_s(&self) -> f64 {
        self.executed.turns as f64 / self.executed.wall.as_secs_f64().max(1e-9)
    }

    /// Failed and unfinished runs across the report.
    pub fn incomplete(&self) -> (usize, usize) {
        self.report
            .scenarios
            .iter()
            .flat_map(|s| s.runs.values())
            .fold((0, 0), |(f, u), c| (f + c.failed, u + c.unfinished))
    }
}

/// A scenario file of the benchmark, loaded once for all its runs.
pub(crate) struct Loaded {
    path: PathBuf,
    /// Its file's SHA-256, which every job of it records.
    pub(crate) sha256: String,
    scenario: Arc<Scenario>,
    rules: Option<OutcomeRules>,
    /// What an imported aiwaves config could not carry over.
    imported: Imported,
}

impl Loaded {
    /// The figures its runs give (its outcomes, compiled), if it has any.
    pub(crate) fn rules(&self) -> Option<&OutcomeRules> {
        self.rules.as_ref()
    }

    /// The scenario as loaded.
    pub(crate) fn scenario(&self) -> &Scenario {
        &self.scenario
    }
}

/// Locks a benchmark's output folder, or fails at once if another process holds it.
pub(crate) fn lock_folder(out: &StdPath) -> Result<sopsim::runner::FolderLock, BenchError> {
    sopsim::runner::FolderLock::take(out).map_err(|source| {
        SetupError::Out {
            path: out.to_path_buf(),
            source,
        }
        .into()
    })
}

pub(crate) fn load(path: &StdPath, allowed: &[PathBuf]) -> Result<Loaded, BenchError> {
    let sopsim::Loaded {
        scenario,
        imported,
        sha256,
    } = sopsim::load(path, allowed)?;
    if let Some((name, _)) = scenario.agents.iter().find(|(_, a)| a.human) {
        return Err(BenchError::Human {
            path: path.to_path_buf(),
            agent: name.clone(),
        });
    }
    // Validation compiled the outcomes already, so this succeeds for a loaded file.
    // A world's figures are outcomes too, with or without an `outcomes` section.
    let outcomes = match (&scenario.outcomes, &scenario.world) {
        (Some(o), _) => Some(o.clone()),
        (None, Some(_)) => Some(sopsim::scenario::Outcomes::default()),
        (None, None) => None,
    };
    let rules = outcomes.as_ref().and_then(|o| {
        OutcomeRules::compile(
            o,
            &scenario,
            &sopsim::scenario::FieldPath::root().key("outcomes"),
        )
        .ok()
    });
    Ok(Loaded {
        path: path.to_path_buf(),
        sha256,
        scenario: Arc::new(scenario),
        rules,
        imported,
    })
}

/// Peak resident memory of this process, from `/proc/self/status` (Linux).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Runs the benchmark and writes its report, telling `observer` how it goes and
/// stopping every run at once when `cancel` is cancelled.
pub fn run(
    opts: &BenchOptions,
    observer: &dyn BenchObserver,
    cancel: CancelToken,
) -> Result<BenchRun, BenchError> {
    check_counts(opts)?;
    let mut loaded = load_all(&opts.scenarios, &opts.allowed_paths)?;
    // The judge given takes each scenario's judge's place before the services it names
    // are made, its rubric file named from its own folder.
    let judge = opts.judge.as_ref().map(|(spec, folder)| {
        let mut spec = spec.clone();
        spec.rubric = spec.rubric.map(|r| match built_in(&r) {
            Some(_) => r,
            None => folder.join(&r).display().to_string(),
        });
        spec
    });
    if let Some(spec) = &judge {
        for l in &mut loaded {
            Arc::make_mut(&mut l.scenario).judge = Some(spec.clone());
        }
    }
    let reference = check_references(&loaded, opts.reference.as_deref())?;
    for l in &loaded {
        opts.allowed_commands
            .check(&l.scenario)
            .map_err(|refused| SetupError::NotAllowed {
                path: l.path.clone(),
                refused,
            })?;
    }
    let stopped = || {
        if cancel.is_cancelled() {
            Err(BenchError::Interrupted)
        } else {
            Ok(())
        }
    };
    let seeds = plan_seeds(opts)?;
    let runs_each = seeds.len() * opts.modes.len();
    // A shard keeps its own share of the plan.
    let planned = (runs_each as u64).saturating_mul(loaded.len() as u64);
    setup::check_plan_fits(planned / opts.shard.map_or(1, |s| s.count.max(1)))?;
    for l in &loaded {
        setup::check_memory(&l.path, &l.scenario, opts.jobs.min(runs_each).max(1))?;
        setup::check_round_fits(&l.scenario, opts.max_turns)?;
    }
    let files: Vec<(&str, &StdPath, &str)> = loaded
        .iter()
        .map(|l| {
            (
                l.scenario.name.as_str(),
                l.path.as_path(),
                l.sha256.as_str(),
            )
        })
        .collect();
    let mut jobs = plan::expand(&files, &opts.modes, &seeds);
    stopped()?;
    let (prepared, embedder) = prepare(&mut loaded, opts)?;
    stopped()?;
    let llm_name = prepared
        .values()
        .next()
        .map(|p| p.services.llm.describe())
        .unwrap_or_default();
    let shard_plan = opts
        .shard
        .map(|shard| ShardPlan::new(shard, &jobs, &opts.modes, opts.first_seed, opts.seeds));
    if let Some(shard) = opts.shard {
        jobs = shard.select(&jobs);
    }
    let settings = Settings {
        llm: llm_name,
        embedder,
        max_turns: opts.max_turns,
        shard: shard_plan,
        judge: judge.map(|spec| serde_json::to_string(&spec).unwrap_or_default()),
        reference: reference.map(|r| serde_json::to_string(&r).unwrap_or_default()),
    };
    // Held until the report is written: two benchmarks into one folder would run the
    // same jobs into the same run folders.
    let _lock = lock_folder(&opts.out)?;
    plan::record(&opts.out, &settings, &jobs)?;

    // Which runs are finished is read from their folders: a check of the token every
    // few thousand keeps a plan of a million runs stoppable.
    let mut pending: Vec<Job> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        if i % 4096 == 0 {
            stopped()?;
        }
        if !plan::is_finished(&job.dir(&opts.out)) {
            pending.push(job.clone());
        }
    }
    let skipped = jobs.len() - pending.len();
    observer.planned(pending.len(), skipped);
    let executed = exec::execute(&opts.out, pending, &prepared, opts.jobs, observer, cancel);

    let report_inputs: Vec<ReportInput> = loaded.iter().map(ReportInput::of).collect();
    report_folder(
        &opts.out,
        &report_inputs,
        &settings,
        &opts.modes,
        &seeds,
        &jobs,
        executed,
        skipped,
    )
}

/// The `--reference` file read, and it and each scenario's own `reference` checked
/// against the scenarios they are set beside, before anything runs.
fn check_references(
    loaded: &[Loaded],
    file: Option<&StdPath>,
) -> Result<Option<PeopleReference>, BenchError> {
    for l in loaded {
        if let Some(own) = &l.scenario.reference {
            let problems = people::unknown_figures(own, &l.scenario, l.rules.as_ref());
            if !problems.is_empty() {
                return Err(BenchError::Reference {
                    setting: Setting::Scenario,
                    path: l.path.clone(),
                    problems: problems.iter().map(|p| format!("reference.{p}")).collect(),
                });
            }
        }
    }
    let Some(path) = file else {
        return Ok(None);
    };
    let reference = people::read_file(path)?;
    for l in loaded {
        let problems = people::check(&reference, &l.scenario, l.rules.as_ref());
        if !problems.is_empty() {
            return Err(BenchError::Reference {
                setting: Setting::Reference,
                path: path.to_path_buf(),
                problems,
            });
        }
    }
    Ok(Some(reference))
}

/// Refuses a benchmark of nothing: no scenario, no seed, no run at a time.
fn check_counts(opts: &BenchOptions) -> Result<(), BenchError> {
    if opts.scenarios.is_empty() {
        return Err(SetupError::NoScenarios.into());
    }
    if opts.seeds == 0 {
        return Err(SetupError::Count {
            setting: Setting::Seeds,
            what: "the number of seeds",
        }
        .into());
    }
    if opts.jobs == 0 {
        return Err(SetupError::Count {
            setting: Setting::Jobs,
            what: "the number of runs at once",
        }
        .into());
    }
    let repeated = opts
        .modes
        .iter()
        .enumerate()
        .find(|(i, m)| opts.modes[..*i].contains(m));
    if let Some((_, m)) = repeated {
        return Err(SetupError::Repeated {
            setting: Setting::Modes,
            what: "the list of modes",
            repeated: m.as_str().to_string(),
        }
        .into());
    }
    Ok(())
}

/// Loads every scenario; a benchmark tells them apart by name, so names must differ.
fn load_all(paths: &[PathBuf], allowed: &[PathBuf]) -> Result<Vec<Loaded>, BenchError> {
    let loaded = paths
        .iter()
        .map(|p| load(p, allowed))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, a) in loaded.iter().enumerate() {
        job::check_folder_name(&a.scenario.name).map_err(|source| BenchError::UnsafeName {
            path: a.path.clone(),
            name: a.scenario.name.clone(),
            source,
        })?;
        if let Some(b) = loaded[..i]
            .iter()
            .find(|b| b.scenario.name == a.scenario.name)
        {
            return Err(BenchError::SameName {
                first: b.path.clone(),
                second: a.path.clone(),
                name: a.scenario.name.clone(),
            });
        }
    }
    Ok(loaded)
}

/// The seeds to run, once the output folder is known to be usable.
fn plan_seeds(opts: &BenchOptions) -> Result<Vec<u64>, BenchError> {
    if opts.seeds > MAX_SEEDS {
        return Err(SetupError::TooMany {
            setting: Setting::Seeds,
            what: "the number of seeds",
            max: MAX_SEEDS,
        }
        .into());
    }
    let last_seed =
        opts.first_seed
            .checked_add(opts.seeds - 1)
            .ok_or(SetupError::SeedsOverflow {
                first: opts.first_seed,
                count: opts.seeds,
            })?;
    if opts.out.exists() && !opts.out.is_dir() {
        return Err(SetupError::Out {
            path: opts.out.clone(),
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it is a file").into(),
        }
        .into());
    }
    Ok((opts.first_seed..=last_seed).collect())
}

/// Each scenario with the services its runs share: one model backend and one
/// embedding service for every run (the scripted backend answers from each scenario's
/// own script). Also the embedder's name.
fn prepare(
    loaded: &mut [Loaded],
    opts: &BenchOptions,
) -> Result<(HashMap<String, Prepared>, String), BenchError> {
    // The one shared backend takes the first config's server. Each scenario has only
    // just been loaded, so `make_mut` copies nothing.
    let services = setup::assemble(
        &opts.models,
        loaded
            .iter_mut()
            .map(|l| (Arc::make_mut(&mut l.scenario), &l.imported)),
    )?;
    let embedder = services
        .first()
        .map(|s| s.embed.name().to_string())
        .unwrap_or_default();
    let mut prepared = HashMap::new();
    for (l, services) in loaded.iter().zip(services) {
        prepared.insert(
            l.scenario.name.clone(),
            Prepared {
                scenario: l.scenario.clone(),
                services,
                max_turns: opts.max_turns,
                imported: l.imported.clone(),
                sha256: l.sha256.clone(),
                commands: opts.allowed_commands.clone(),
            },
        );
    }
    Ok((prepared, embedder))
}

/// What the report needs of one scenario.
pub(crate) struct ReportInput<'a> {
    name: String,
    path: &'a StdPath,
    sha256: &'a str,
    rules: Option<&'a OutcomeRules>,
    probes: &'a sopsim::scenario::probes::Probes,
    /// The scenario's own people's data.
    people: Option<&'a PeopleReference>,
}

impl<'a> ReportInput<'a> {
    pub(crate) fn of(l: &'a Loaded) -> Self {
        Self {
            name: l.scenario.name.clone(),
            path: &l.path,
            sha256: &l.sha256,
            rules: l.rules.as_ref(),
            probes: &l.scenario.probes,
            people: l.scenario.reference.as_ref(),
        }
    }
}

/// Reads every job's run folder back and writes the report files.
#[allow(clippy::too_many_arguments)]
pub(crate) fn report_folder(
    out: &StdPath,
    scenarios: &[ReportInput],
    settings: &Settings,
    modes: &[Mode],
    seeds: &[u64],
    jobs: &[Job],
    executed: Executed,
    skipped: usize,
) -> Result<BenchRun, BenchError> {
    let scenario_runs: Vec<ScenarioRuns> = scenarios
        .iter()
        .map(|l| ScenarioRuns {
            name: l.name.clone(),
            file: l.path.display().to_string(),
            sha256: l.sha256.to_string(),
            rules: l.rules,
            probes: l.probes,
            runs: jobs
                .iter()
                .filter(|j| j.scenario == l.name)
                .map(|j| {
                    let folder = OutputFolder::new(out);
                    let status = match read_back::read_run(&folder, j, l.rules, l.probes) {
                        RunStatus::Unfinished if executed.failures.contains_key(&j.id) => {
                            RunStatus::Failed {
                                error: executed.failures[&j.id].clone(),
                            }
                        }
                        status => status,
                    };
                    (j.clone(), status)
                })
                .collect(),
        })
        .collect();
    let (mut report, timing) = report::build(settings, modes, seeds, &scenario_runs);
    // People's data beside the figures: the scenario's own, then the file's.
    let file: Option<PeopleReference> = settings
        .reference
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok());
    for (sc, input) in report.scenarios.iter_mut().zip(scenarios) {
        for reference in input.people.into_iter().chain(file.as_ref()) {
            let figure = |name: &str, mode: Mode| {
                let f = sc.figures.get(name)?;
                f.by_mode.get(&mode).cloned().flatten()
            };
            let compared = people::compare(reference, &sc.rounds, &figure, modes);
            sc.people.extend(compared);
        }
    }
    let run = BenchRun {
        report,
        executed,
        skipped,
        peak_rss_mib: peak_rss_mib(),
    };
    outputs::write_outputs(out, &run, &timing)?;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(seeds: u64, first_seed: u64) -> BenchOptions {
        BenchOptions {
            scenarios: vec![PathBuf::from("scenarios/prisoners_dilemma.json")],
            modes: vec![Mode::Cooperative, Mode::Competitive],
            seeds,
            first_seed,
            jobs: 2,
            out: PathBuf::from("/nonexistent/bench"),
            max_turns: None,
            models: ModelOptions::default(),
            allowed_paths: Vec::new(),
            shard: None,
            judge: None,
            reference: None,
            allowed_commands: CommandConsent::Nothing,
        }
    }

    fn setting(r: Result<impl std::fmt::Debug, BenchError>) -> Option<Setting> {
        r.expect_err("refused").setting()
    }

    /// A benchmark of nothing is refused before any file is read, naming the setting.
    #[test]
    fn no_scenario_seed_or_run_at_once_and_a_repeated_mode_are_refused() {
        assert!(check_counts(&options(3, 0)).is_ok());
        let none = BenchOptions {
            scenarios: Vec::new(),
            ..options(3, 0)
        };
        assert!(matches!(
            check_counts(&none),
            Err(BenchError::Setup(SetupError::NoScenarios))
        ));
        assert_eq!(setting(check_counts(&options(0, 0))), Some(Setting::Seeds));
        let no_jobs = BenchOptions {
            jobs: 0,
            ..options(3, 0)
        };
        assert_eq!(setting(check_counts(&no_jobs)), Some(Setting::Jobs));
        let twice = BenchOptions {
            modes: vec![Mode::Cooperative, Mode::Cooperative],
            ..options(3, 0)
        };
        assert_eq!(setting(check_counts(&twice)), Some(Setting::Modes));
    }

    #[test]
    fn seeds_run_from_the_first_and_stay_within_their_bounds() {
        assert_eq!(plan_seeds(&options(3, 7)).unwrap(), vec![7, 8, 9]);
        assert_eq!(
            plan_seeds(&options(1, u64::MAX)).unwrap(),
            vec![u64::MAX],
            "the last seed there is"
        );
        assert!(matches!(
            plan_seeds(&options(2, u64::MAX)),
            Err(BenchError::Setup(SetupError::SeedsOverflow { .. }))
        ));
        assert_eq!(
            setting(plan_seeds(&options(MAX_SEEDS + 1, 0))),
            Some(Setting::Seeds)
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        let into_a_file = BenchOptions {
            out: file.path().to_path_buf(),
            ..options(3, 0)
        };
        assert_eq!(setting(plan_seeds(&into_a_file)), Some(Setting::Out));
    }
}
