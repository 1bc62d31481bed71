//! `sopsim tournament`: the command line over `sopsim_bench::tournament`.

use std::sync::Arc;

use sopsim::error::CancelToken;

use super::args::TournamentArgs;
use super::failure::Failure;
use super::progress::{BenchProgress, FetchProgress};
use super::signals::StopSignals;

pub(super) fn tournament(args: TournamentArgs) -> Result<(), Failure> {
    let opts = sopsim_bench::tournament::TournamentOptions {
        game: args.game,
        roster: args.players,
        out: args.out,
        seeds: args.seeds,
        jobs: args.jobs as usize,
        models: args.models.options(Arc::new(FetchProgress::default())),
        noise: args.noise,
    };
    let cancel = CancelToken::new();
    let signals = StopSignals::watch(
        cancel.clone(),
        "interrupted: stopping every game now, keeping every finished one",
    );
    let progress = BenchProgress::new(args.quiet);
    let result = sopsim_bench::tournament::run(&opts, &progress, cancel);
    progress.finish();
    let run = match result {
        Err(e @ sopsim_bench::BenchError::Interrupted) => {
            return Err(Failure::Interrupted(
                format!("{e}; run the same command again to finish the games"),
                signals.exit_status(),
            ))
        }
        other => other?,
    };
    let r = &run.report;
    println!(
        "{} games ({} run this time, {} already finished); ranking:",
        r.games,
        run.executed.finished + run.executed.failed,
        run.skipped
    );
    for (i, p) in r.ranking.iter().enumerate() {
        let score = r.ratings[p]
            .mean_payoff_per_round
            .or(r.ratings[p].mean_payoff)
            .map_or("-".to_string(), |e| format!("{:.3}", e.value));
        println!("  {}. {p}  {score}", i + 1);
    }
    println!("report: {}", opts.out.join("report.md").display());
    if !r.failed.is_empty() {
        return Err(Failure::Runtime(format!(
            "{} game(s) gave no payoffs; report.md lists them; run the same command again to retry them",
            r.failed.len()
        )));
    }
    Ok(())
}
