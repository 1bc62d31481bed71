//! `sopsim run` and `sopsim bench`: the library's runs with the terminal attached
//! (live view, people's input, progress, Ctrl-C).

use std::sync::Arc;

use sopsim::error::CancelToken;
use sopsim::events::EventSink;
use sopsim::human::HumanInput;
use sopsim::runner::{self, Existing, RunError, RunIo, RunOptions, ScenarioSource};
use sopsim::scenario::Mode;
use sopsim::simulation::EndReason;
use sopsim_bench::{BenchOptions, Shard};

use super::args::{BenchAction, BenchArgs, BenchCommand, RunArgs};
use super::cluster;
use super::failure::Failure;
use super::progress::{BenchProgress, FetchProgress};
use super::say;
use super::signals::StopSignals;
use super::stdin::StdinInput;
use super::terminal::TerminalSink;
use super::view::{self, RunViewer};

/// A `--judge` file's spec and the folder its rubric is read from.
fn judge_file(
    path: &std::path::Path,
) -> Result<(sopsim::scenario::judge::JudgeSpec, std::path::PathBuf), Failure> {
    sopsim_bench::judged_items::read_judge_file(path)
        .map_err(|e| Failure::BadInput(format!("--judge: {}", sopsim::error::chain(&e))))
}

pub(super) fn run(args: RunArgs) -> Result<(), Failure> {
    let mut opts = RunOptions {
        out: args.out,
        mode: args.mode.map(Mode::from),
        seed: args.seed,
        max_turns: args.max_turns,
        models: args.models.options(Arc::new(FetchProgress::default())),
        humans: args.humans,
        budget_usd: args.budget_usd,
        max_total_tokens: args.max_total_tokens,
        allowed_paths: args.allowed_paths,
        allowed_commands: args.consent.consent(),
        existing: match (args.overwrite, args.resume) {
            (true, _) => Existing::Replace,
            (_, true) => Existing::Resume,
            _ => Existing::Refuse,
        },
        judge: args.judge.as_deref().map(judge_file).transpose()?,
        ..RunOptions::new(args.scenario.clone())
    };
    let cancel = CancelToken::new();
    let signals = StopSignals::watch(
        cancel.clone(),
        "interrupted: stopping now, keeping every finished turn",
    );
    let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
    if !args.quiet {
        let terminal = TerminalSink::stdout();
        sinks.push(Arc::new(if args.resume {
            terminal.resuming()
        } else {
            terminal
        }));
        sinks.push(Arc::new(super::progress::RoundBar::default()));
    }
    // Read only once a person's turn comes (the scenario may mark agents human).
    let mut human_input: Arc<dyn HumanInput> = Arc::new(StdinInput::new());
    let mut control = None;
    let viewer = match args.serve.serve {
        Some(addr) => {
            let token = view::token("--serve", addr, args.serve.serve_token)?;
            // Loaded once, for the viewer's side panel and the run.
            let loaded = sopsim::load(args.scenario.as_path(), &opts.allowed_paths).ok();
            let viewer = RunViewer::start(
                addr,
                token,
                loaded.as_ref().map(|l| &l.scenario),
                human_input,
                args.start_paused,
                (opts.mode, opts.seed),
            )?;
            sinks.push(viewer.hub.clone());
            human_input = viewer.input.clone();
            control = Some(viewer.control.clone());
            if let Some(loaded) = loaded {
                opts.scenario = ScenarioSource::Loaded {
                    origin: args.scenario.clone(),
                    scenario: Arc::new(loaded.scenario),
                    imported: loaded.imported,
                    sha256: loaded.sha256,
                };
            }
            Some(viewer)
        }
        None => None,
    };
    let result = runner::run(
        &opts,
        RunIo {
            sinks,
            human_input: Some(human_input),
            cancel: cancel.clone(),
            control,
            services: None,
        },
    );
    if let Some(viewer) = viewer {
        signals.set_notice("stopping the viewer");
        viewer.linger(&cancel);
    }
    let outcome = match result {
        // Stopped by a signal while retracing the killed run: an interruption still.
        Err(e @ RunError::ResumeStopped { .. }) if cancel.is_cancelled() => {
            return Err(Failure::Interrupted(
                sopsim::error::chain(&e),
                signals.exit_status(),
            ))
        }
        other => other?,
    };
    let s = &outcome.summary;
    if args.quiet {
        say(&format!(
            "{}: {} turns, ended by {}, final state {}",
            s.scenario,
            s.turns,
            s.ended_by.as_str(),
            s.final_state
        ));
    }
    if s.ended_by == EndReason::Interrupted {
        let kept = match &opts.out {
            Some(out) => format!("; {} finished turn(s) are in {}", s.turns, out.display()),
            None => String::new(),
        };
        return Err(Failure::Interrupted(
            format!("interrupted after {} turn(s){kept}", s.turns),
            signals.exit_status(),
        ));
    }
    Ok(())
}

pub(super) fn bench(command: BenchCommand) -> Result<(), Failure> {
    match command.action {
        None => bench_run(command.run),
        Some(BenchAction::Merge {
            out,
            shards,
            allow_missing,
            allowed_paths,
        }) => cluster::merge(&out, &shards, allow_missing, allowed_paths),
        Some(BenchAction::Template {
            engine,
            shards,
            max_parallel,
            out,
            image,
            volume_claim,
            bench,
        }) => {
            let text = cluster::template(&cluster::Template {
                engine,
                shards,
                max_parallel,
                out: &out,
                image: &image,
                volume_claim: &volume_claim,
                bench: &bench,
            })?;
            print!("{text}");
            Ok(())
        }
    }
}

fn bench_run(args: BenchArgs) -> Result<(), Failure> {
    let shard = match args.shard.as_deref() {
        None => None,
        Some("env") => Some(
            Shard::from_env(args.shards, |k| std::env::var(k).ok())
                .map_err(|e| Failure::BadInput(format!("--shard env: {e}")))?,
        ),
        Some(text) => {
            Some(Shard::parse(text).map_err(|e| Failure::BadInput(format!("--shard: {e}")))?)
        }
    };
    let mut modes = Vec::new();
    for m in args.modes.into_iter().map(Mode::from) {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    let opts = BenchOptions {
        scenarios: args.scenarios,
        modes,
        seeds: args.seeds,
        first_seed: args.first_seed,
        jobs: args.jobs as usize,
        out: args.out,
        max_turns: args.max_turns,
        models: args.models.options(Arc::new(FetchProgress::default())),
        allowed_paths: args.allowed_paths,
        allowed_commands: args.consent.consent(),
        shard,
        judge: args.judge.as_deref().map(judge_file).transpose()?,
        reference: args.reference,
    };
    let cancel = CancelToken::new();
    let signals = StopSignals::watch(
        cancel.clone(),
        "interrupted: stopping every run now, keeping every finished turn",
    );
    let progress = BenchProgress::new(args.quiet);
    let result = sopsim_bench::run(&opts, &progress, cancel);
    progress.finish();
    let run = match result {
        Err(e @ sopsim_bench::BenchError::Interrupted) => {
            return Err(Failure::Interrupted(e.to_string(), signals.exit_status()))
        }
        other => other?,
    };
    let (failed, unfinished) = run.incomplete();
    if let Some(limit) = run.executed.capped_by_open_files {
        say(&format!(
            "ran {} at once rather than --jobs {}: the open-file limit is {limit} (ulimit -n)",
            run.executed.concurrency, opts.jobs
        ));
    }
    say(&format!(
        "{} runs this time ({} already finished) in {:.1} s: {:.1} runs/s, {:.0} turns/s; {failed} failed, {unfinished} unfinished",
        run.executed.finished + run.executed.failed,
        run.skipped,
        run.executed.wall.as_secs_f64(),
        run.runs_per_s(),
        run.turns_per_s(),
    ));
    say(&format!("report: {}", opts.out.join("report.md").display()));
    if run.executed.interrupted > 0 {
        return Err(Failure::Interrupted(
            format!("interrupted: {unfinished} run(s) unfinished; run the same command again to finish them"),
            signals.exit_status(),
        ));
    }
    if unfinished > 0 {
        return Err(Failure::Runtime(format!(
            "{unfinished} run(s) unfinished; run the same command again to finish them"
        )));
    }
    if failed > 0 {
        return Err(Failure::Runtime(format!(
            "{failed} run(s) failed; report.md lists them; run the same command again to retry them"
        )));
    }
    Ok(())
}
