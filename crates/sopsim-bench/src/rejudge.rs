//! A benchmark's finished runs judged again (`sopsim judge BENCH_FOLDER`): each run's
//! `judgement.json` is made anew by another judge or rubric, and the report is written
//! again from the folders. No other file of a run changes, and nothing runs again.

use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::exec::Executed;
use crate::run::{load, lock_folder, report_folder, BenchRun, ReportInput};

/// What judging a benchmark again did.
pub struct Rejudged {
    /// The report written again (none when the judgements went to another file than
    /// the one the report reads).
    pub run: Option<BenchRun>,
    /// How many finished runs were judged again.
    pub judged: usize,
    /// The runs that could not be judged, with why.
    pub failed: Vec<(String, String)>,
}

/// Judges every finished run of the benchmark in `out` again with `opts` and, when
/// the judgements go to `judgement.json`, writes the report again.
pub fn rejudge(
    out: &Path,
    opts: &sopsim::JudgeOptions,
    allowed: &[PathBuf],
) -> Result<Rejudged, BenchError> {
    let _lock = lock_folder(out)?;
    let settings = crate::plan::read_settings(out)?;
    let jobs = crate::plan::read_jobs(out)?;
    let finished: Vec<&crate::job::Job> = jobs
        .iter()
        .filter(|j| crate::plan::is_finished(&out.join(j.rel_dir())))
        .collect();
    let folders: Vec<PathBuf> = finished.iter().map(|j| out.join(j.rel_dir())).collect();
    let judged = sopsim::judge_again(opts, &folders);
    let mut failed = Vec::new();
    for (job, result) in finished.iter().zip(&judged) {
        if let Err(e) = result {
            failed.push((job.id.clone(), sopsim::error::chain(e)));
        }
    }
    let judged = judged.iter().filter(|r| r.is_ok()).count();
    if opts.into != sopsim::runner::JUDGEMENT_FILE {
        return Ok(Rejudged {
            run: None,
            judged,
            failed,
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for job in &jobs {
        if !names.contains(&job.scenario.as_str()) {
            names.push(&job.scenario);
        }
    }
    let mut loaded = Vec::new();
    for name in names {
        let Some(job) = jobs.iter().find(|j| j.scenario == name) else {
            continue;
        };
        let l = load(Path::new(&job.file), allowed)?;
        if l.sha256 != job.sha256 {
            return Err(BenchError::ScenarioChanged {
                file: job.file.clone(),
                id: job.id.clone(),
                out: out.to_path_buf(),
                runs: out.join("runs").join(name),
            });
        }
        loaded.push(l);
    }
    let mut modes = Vec::new();
    let mut seeds = Vec::new();
    for job in &jobs {
        if !modes.contains(&job.mode) {
            modes.push(job.mode);
        }
        if !seeds.contains(&job.seed) {
            seeds.push(job.seed);
        }
    }
    let inputs: Vec<ReportInput> = loaded.iter().map(ReportInput::of).collect();
    let run = report_folder(
        out,
        &inputs,
        &settings,
        &modes,
        &seeds,
        &jobs,
        Executed::default(),
        finished.len(),
    )?;
    Ok(Rejudged {
        run: Some(run),
        judged,
        failed,
    })
}
