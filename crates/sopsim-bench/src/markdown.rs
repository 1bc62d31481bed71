//! `report.md`: the benchmark report for people, its figures as tables with their
//! intervals and paired differences, the timing, and the plots.

use super::report::*;
use super::stats::{Difference, Summary};
use indexmap::IndexMap;
use sopsim::scenario::Mode;
use std::fmt::Write as _;

/// Up to three decimals (one from 100 up), without trailing zeros.
fn fmt_num(v: f64) -> String {
    let text = if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.to_string()
    }
}

fn fmt_summary(s: &Option<Summary>) -> String {
    match s {
        None => "–".into(),
        Some(s) => match s.ci95 {
            Some([lo, hi]) => format!("{} [{}, {}]", fmt_num(s.mean), fmt_num(lo), fmt_num(hi)),
            None => format!("{} (n={})", fmt_num(s.mean), s.n),
        },
    }
}

fn fmt_difference(d: &Option<Difference>) -> String {
    match d {
        None => "–".into(),
        Some(d) => {
            let ci = d
                .ci95
                .map(|[lo, hi]| format!(" [{}, {}]", fmt_num(lo), fmt_num(hi)))
                .unwrap_or_default();
            let p =
                d.p.map(|p| {
                    if p < 0.001 {
                        ", p < 0.001".to_string()
                    } else {
                        format!(", p {p:.3}")
                    }
                })
                .unwrap_or_default();
            format!("{}{ci}{p}", fmt_num(d.mean))
        }
    }
}

/// People's data beside the models': each series' distance per mode, then its rounds.
fn people(out: &mut String, sc: &ScenarioReport, modes: &[Mode]) {
    for (name, c) in &sc.people {
        let _ = writeln!(
            out,
            "\nPeople: `{name}` ({}), from {}\n",
            c.figure, c.source
        );
        for (mode, d) in &c.distance {
            let nrmse = d
                .nrmse
                .map(|n| format!(", NRMSE {}", fmt_num(n)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- {}: RMSE {}{nrmse} over {} rounds; the models' interval holds the people's mean in {} of them.",
                mode.as_str(),
                fmt_num(d.rmse),
                d.rounds,
                d.covered
            );
        }
        if let Some(o) = &c.overall {
            for mode in modes {
                let model = o.model.get(mode).cloned().flatten();
                let _ = writeln!(
                    out,
                    "- {} over the game: people {} (n={}), models {}.",
                    mode.as_str(),
                    fmt_num(o.people.mean),
                    o.people.n,
                    fmt_summary(&model)
                );
            }
        }
        if c.by_round.is_empty() {
            continue;
        }
        let heads: Vec<&str> = modes.iter().map(|m| m.as_str()).collect();
        let _ = writeln!(out, "\n| round | people | {} |", heads.join(" | "));
        let _ = writeln!(out, "|---|---|{}", "---|".repeat(modes.len()));
        for r in &c.by_round {
            let cells: Vec<String> = modes
                .iter()
                .map(|m| fmt_summary(&r.model.get(m).cloned().flatten()))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} (n={}) | {} |",
                r.round,
                fmt_num(r.people.mean),
                r.people.n,
                cells.join(" | ")
            );
        }
    }
}

fn table(
    out: &mut String,
    modes: &[Mode],
    figures: &[(&String, &FigureReport)],
    with_difference: bool,
) {
    let _ = write!(out, "| figure |");
    for m in modes {
        let _ = write!(out, " {} |", m.as_str());
    }
    if with_difference {
        let _ = write!(out, " difference |");
    }
    let _ = write!(out, "\n|---|");
    for _ in modes {
        let _ = write!(out, "---|");
    }
    if with_difference {
        let _ = write!(out, "---|");
    }
    out.push('\n');
    for (name, f) in figures {
        let _ = write!(out, "| {name} |");
        for m in modes {
            let _ = write!(
                out,
                " {} |",
                f.by_mode.get(m).map_or("–".into(), fmt_summary)
            );
        }
        if with_difference {
            let _ = write!(out, " {} |", fmt_difference(&f.difference));
        }
        out.push('\n');
    }
}

/// `report.md`: the headline table per scenario, every figure, failed runs, plots and
/// timing.
pub(crate) fn markdown(
    report: &Report,
    timing: &Timing,
    run: &super::BenchRun,
    plots: &[(String, Vec<String>)],
) -> String {
    let mut out = String::new();
    let s = &report.settings;
    let _ = writeln!(out, "# sopsim bench report\n");
    let seeds = match (report.seeds.first(), report.seeds.last()) {
        (Some(a), Some(b)) => format!("{} seeds ({a}–{b})", report.seeds.len()),
        _ => "no seeds".into(),
    };
    let _ = writeln!(
        out,
        "LLM `{}`, embedder `{}`, {seeds} per mode. Each cell: mean [95% confidence interval] over the finished runs: a bootstrap percentile interval for rates, shares, probabilities, indices and scores on a scale (judged dimensions, probes' answers), which stays within their bounds, Student-t for the rest.",
        s.llm, s.embedder
    );
    if let Some(d) = &report.difference {
        let _ = writeln!(
            out,
            "Difference: {d}, with its 95% interval and p: a paired sign-flip permutation test for rates, shares, probabilities and indices, the paired t-test for the rest."
        );
    }
    let with_difference = report.difference.is_some();
    for sc in &report.scenarios {
        let _ = writeln!(out, "\n## {} (`{}`)\n", sc.scenario, sc.file);
        let counts: Vec<String> = sc
            .runs
            .iter()
            .map(|(m, c)| {
                let ends: Vec<String> =
                    c.ended_by.iter().map(|(k, v)| format!("{v} {k}")).collect();
                let ends = match ends.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", ends.join(", ")),
                };
                format!(
                    "{}: {} of {} finished{ends}, {} failed, {} unfinished",
                    m.as_str(),
                    c.finished,
                    c.planned,
                    c.failed,
                    c.unfinished
                )
            })
            .collect();
        let _ = writeln!(out, "Runs — {}.\n", counts.join("; "));
        if let Some(brief) = super::brief::paragraph(sc, &report.modes) {
            let _ = writeln!(out, "{brief}\n");
        }
        let headline: Vec<(&String, &FigureReport)> = sc
            .headline
            .iter()
            .filter_map(|h| sc.figures.get_key_value(h))
            .collect();
        table(&mut out, &report.modes, &headline, with_difference);
        let quality: Vec<(&String, &FigureReport)> = sopsim::scenario::QUALITY_FIGURES
            .iter()
            .filter_map(|f| sc.figures.get_key_value(*f))
            .filter(|(_, f)| f.by_mode.values().any(Option::is_some))
            .collect();
        if !quality.is_empty() {
            let _ = writeln!(
                out,
                "\nReply quality: the share of replies that copy an earlier message, carry a speaker label, narrate in the third person, echo the instructions or are empty, and the share of distinct word bigrams.\n"
            );
            table(&mut out, &report.modes, &quality, with_difference);
        }
        people(&mut out, sc, &report.modes);
        if !sc.failed_runs.is_empty() {
            let _ = writeln!(out, "\nFailed runs:\n");
            for f in &sc.failed_runs {
                let _ = writeln!(out, "- `{}`: {}", f.id, f.error);
            }
        }
        if let Some((_, files)) = plots.iter().find(|(name, _)| name == &sc.scenario) {
            let _ = writeln!(out);
            for f in files {
                let _ = writeln!(out, "![{f}]({f})");
            }
        }
        let _ = writeln!(out, "\n<details><summary>Every figure</summary>\n");
        let all: Vec<(&String, &FigureReport)> = sc.figures.iter().collect();
        table(&mut out, &report.modes, &all, with_difference);
        let _ = writeln!(out, "\n</details>");
    }
    let _ = writeln!(
        out,
        "\n## Timing (this invocation's machine; not part of report.json)\n"
    );
    let _ = writeln!(
        out,
        "{} runs in {:.1} s this invocation ({} at once over {} threads): {:.1} runs/s, {:.0} turns/s; peak memory {}.\n",
        run.executed.finished + run.executed.failed,
        run.executed.wall.as_secs_f64(),
        run.executed.concurrency,
        run.executed.workers,
        run.runs_per_s(),
        run.turns_per_s(),
        run.peak_rss_mib
            .map_or("unknown".to_string(), |m| format!("{m:.0} MiB")),
    );
    for (name, figures) in &timing.scenarios {
        let _ = writeln!(out, "{name}:\n");
        let rows: Vec<(String, FigureReport)> = figures
            .iter()
            .map(|(f, by_mode)| {
                (
                    f.clone(),
                    FigureReport {
                        by_mode: by_mode.clone(),
                        values: IndexMap::new(),
                        difference: None,
                    },
                )
            })
            .collect();
        let refs: Vec<(&String, &FigureReport)> = rows.iter().map(|(a, b)| (a, b)).collect();
        table(&mut out, &report.modes, &refs, false);
        out.push('\n');
    }
    out
}
