//! A benchmark's report files: `report.json`, `timing.json`, `report.md` and the
//! plots, written whole into its folder.

use std::path::Path as StdPath;

use super::report::{self, Report};
#[cfg(feature = "plots")]
use super::{plot, stats};
use super::{BenchError, BenchRun};
use sopsim::runner::OutputFolder;
#[cfg(feature = "plots")]
use sopsim::scenario::Mode;

pub(super) fn write_outputs(
    out: &StdPath,
    run: &BenchRun,
    timing: &report::Timing,
) -> Result<(), BenchError> {
    let folder = OutputFolder::new(out);
    // Its figures are rounded as they are made: it is written as it is serialized.
    folder.replace_json("report.json", &run.report)?;
    let timing_json = serde_json::json!({
        "this_invocation": {
            "runs": run.executed.finished + run.executed.failed,
            "already_finished": run.skipped,
            "turns": run.executed.turns,
            "wall_s": run.executed.wall.as_secs_f64(),
            "runs_per_s": run.runs_per_s(),
            "turns_per_s": run.turns_per_s(),
            "jobs": run.executed.concurrency,
            "threads": run.executed.workers,
            "peak_rss_mib": run.peak_rss_mib,
        },
        "by_scenario": timing.scenarios,
    });
    folder.replace_json("timing.json", &report::to_json(&timing_json))?;
    let plots = draw_plots(out, &run.report)?;
    let md = super::markdown::markdown(&run.report, timing, run, &plots);
    Ok(folder.replace("report.md", md.as_bytes())?)
}

/// Without the `plots` feature the report has no pictures.
#[cfg(not(feature = "plots"))]
fn draw_plots(_out: &StdPath, _report: &Report) -> Result<Vec<(String, Vec<String>)>, BenchError> {
    Ok(Vec::new())
}

/// Draws each scenario's headline figures and its tokens per turn; returns the PNG
/// paths (relative to `out`) per scenario.
#[cfg(feature = "plots")]
fn draw_plots(out: &StdPath, report: &Report) -> Result<Vec<(String, Vec<String>)>, BenchError> {
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut all = Vec::new();
    for sc in &report.scenarios {
        let mut files = Vec::new();
        let safe = |s: &str| s.replace(|c: char| !c.is_alphanumeric() && c != '-' && c != '_', "_");
        for figure in &sc.headline {
            let Some(f) = sc.figures.get(figure) else {
                continue;
            };
            let series: Vec<plot::Series> = report
                .modes
                .iter()
                .map(|m| plot::Series {
                    mode: *m,
                    values: f
                        .values
                        .get(m)
                        .map_or(Vec::new(), |v| v.iter().flatten().copied().collect()),
                    summary: f.by_mode.get(m).and_then(Option::as_ref),
                })
                .collect();
            let stem = dir.join(format!("{}-{}", safe(&sc.scenario), safe(figure)));
            plot::distribution(
                &stem,
                &format!("{}: {figure}", sc.scenario),
                figure,
                &series,
            )?;
            files.push(format!("plots/{}-{}.png", safe(&sc.scenario), safe(figure)));
        }
        for (name, by_mode) in &sc.rounds {
            if by_mode.values().all(|v| v.len() < 2) {
                continue;
            }
            let series: Vec<(Mode, Vec<Option<stats::Summary>>)> =
                by_mode.iter().map(|(m, v)| (*m, v.clone())).collect();
            let people: Vec<f64> = sc
                .people
                .values()
                .find(|c| &c.figure == name && !c.by_round.is_empty())
                .map(|c| c.by_round.iter().map(|r| r.people.mean).collect())
                .unwrap_or_default();
            let file = format!("{}-by-round-{}", safe(&sc.scenario), safe(name));
            plot::by_round(
                &dir.join(&file),
                &format!("{}: {name} by round", sc.scenario),
                name,
                &series,
                &people,
            )?;
            files.push(format!("plots/{file}.png"));
        }
        let tokens: Vec<(Mode, Vec<f64>)> = sc
            .prompt_tokens_by_turn
            .iter()
            .map(|(m, v)| (*m, v.clone()))
            .collect();
        let stem = dir.join(format!("{}-tokens-by-turn", safe(&sc.scenario)));
        plot::tokens_per_turn(
            &stem,
            &format!("{}: prompt tokens per turn", sc.scenario),
            &tokens,
        )?;
        files.push(format!("plots/{}-tokens-by-turn.png", safe(&sc.scenario)));
        all.push((sc.scenario.clone(), files));
    }
    Ok(all)
}
