//! `sopsim judge`: finished runs judged again, blinded items exported for people to
//! rate, and agreement measured between people and judges.

use std::sync::Arc;

use super::args::{JudgeAction, JudgeArgs, JudgeCommand};
use super::failure::Failure;
use super::progress::FetchProgress;

pub(super) fn judge(command: JudgeCommand) -> Result<(), Failure> {
    match command.action {
        None => again(command.again),
        Some(JudgeAction::Export {
            folder,
            out,
            judgement,
            seed,
        }) => super::judge_items::export(&folder, &out, &judgement, seed),
        Some(JudgeAction::Agreement {
            items,
            ratings,
            judgement,
            second,
            format,
        }) => super::judge_items::agreement(
            &items,
            ratings.as_deref(),
            &judgement,
            second.as_deref(),
            format,
        ),
    }
}

fn again(args: JudgeArgs) -> Result<(), Failure> {
    let folder = args.folder.unwrap_or_default();
    let judge = match &args.judge {
        Some(file) => Some(
            sopsim_bench::judged_items::read_judge_file(file)
                .map_err(|e| Failure::BadInput(sopsim::error::chain(&e)))?,
        ),
        None => None,
    };
    let opts = sopsim::JudgeOptions {
        judge,
        scenario: args.scenario,
        models: args.models.options(Arc::new(FetchProgress::default())),
        into: args.into,
    };
    if folder.join("bench.json").is_file() {
        let done = sopsim_bench::rejudge(&folder, &opts, &[])?;
        for (id, why) in &done.failed {
            super::note(&format!("{id}: not judged: {why}"));
        }
        println!(
            "judged {} run(s) again in {}",
            done.judged,
            folder.display()
        );
        if done.run.is_some() {
            println!("report: {}", folder.join("report.md").display());
        }
        return match done.failed.is_empty() {
            true => Ok(()),
            false => Err(Failure::Runtime(format!(
                "{} run(s) could not be judged",
                done.failed.len()
            ))),
        };
    }
    let judged = sopsim::judge_again(&opts, std::slice::from_ref(&folder))
        .pop()
        .unwrap_or_else(|| Err(sopsim::JudgeError::NoJudge(folder.display().to_string())))?;
    println!(
        "{} judged by {} ({} calls):",
        folder.display(),
        judged.judge,
        judged.calls
    );
    for (subject, dims) in &judged.scores {
        let scores: Vec<String> = dims
            .iter()
            .map(|(d, s)| format!("{d} {}", s.score))
            .collect();
        println!("  {subject}: {}", scores.join(", "));
    }
    for f in &judged.failed {
        super::note(&format!(
            "{} on {}: not scored: {}",
            f.subject, f.dimension, f.error
        ));
    }
    if judged.shares_a_model {
        super::note("the judge shares a model with the run's agents: it may prefer their replies");
    }
    Ok(())
}
