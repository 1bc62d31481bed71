//! The paragraph `report.md` opens a population scenario with: who chose what, how it
//! moved from the first round to the last, in each mode, with the intervals. Pure:
//! built from a scenario's per-round summaries.

use indexmap::IndexMap;

use super::report::ScenarioReport;
use super::stats::Summary;
use sopsim::scenario::Mode;

/// A share as a percentage with its interval: `62% [55%, 70%]`.
fn percent(s: &Summary) -> String {
    let p = |v: f64| format!("{:.0}%", 100.0 * v);
    match s.ci95 {
        Some([lo, hi]) => format!("{} [{}, {}]", p(s.mean), p(lo), p(hi)),
        None => p(s.mean),
    }
}

/// A number with its interval: `5.2 [4.8, 5.6]`.
fn number(s: &Summary) -> String {
    match s.ci95 {
        Some([lo, hi]) => format!("{:.1} [{lo:.1}, {hi:.1}]", s.mean),
        None => format!("{:.1}", s.mean),
    }
}

/// The choices most chosen in round `r` (from 0), several when tied, and their share.
fn most_chosen<'a>(
    shares: &'a [(&'a str, &'a Vec<Option<Summary>>)],
    r: usize,
) -> Option<(Vec<&'a str>, &'a Summary)> {
    let at: Vec<(&str, &Summary)> = shares
        .iter()
        .filter_map(|(value, rounds)| Some((*value, rounds.get(r)?.as_ref()?)))
        .collect();
    let (_, top) = at.iter().max_by(|a, b| a.1.mean.total_cmp(&b.1.mean))?;
    // Shares summed in another order may differ in their last bits.
    let tied = at
        .iter()
        .filter(|(_, s)| (s.mean - top.mean).abs() < 1e-9)
        .map(|(value, _)| *value)
        .collect();
    Some((tied, top))
}

/// `A`, `A and B`, `A, B and C`.
fn listed(values: &[&str]) -> String {
    match values {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// One sentence for `mode`: the most chosen value in the first and the last round (for
/// named choices), and the mean decision then (for numbers).
fn sentence(
    mode: Mode,
    rounds: &IndexMap<String, IndexMap<Mode, Vec<Option<Summary>>>>,
) -> Option<String> {
    let shares: Vec<(&str, &Vec<Option<Summary>>)> = rounds
        .iter()
        .filter_map(|(name, by_mode)| Some((name.strip_prefix("share.")?, by_mode.get(&mode)?)))
        .collect();
    let mean = rounds.get("mean_decision").and_then(|m| m.get(&mode));
    let count = shares
        .iter()
        .map(|(_, r)| r.len())
        .chain(mean.map(Vec::len))
        .max()?;
    let last = count.checked_sub(1)?;
    let mut parts = Vec::new();
    if let Some((first, first_share)) = most_chosen(&shares, 0) {
        parts.push(match first.as_slice() {
            [value] => format!(
                "{value} was chosen most in round 1 ({} of decisions)",
                percent(first_share)
            ),
            tied => format!(
                "{} were chosen equally often in round 1 ({} of decisions each)",
                listed(tied),
                percent(first_share)
            ),
        });
        if let Some((then, share)) = most_chosen(&shares, last).filter(|_| last > 0) {
            parts.push(match then.as_slice() {
                [value] => {
                    let now = if first == then { "still" } else { "instead" };
                    format!(
                        "by round {}, {value} {now}, at {}",
                        last + 1,
                        percent(share)
                    )
                }
                tied => format!(
                    "by round {}, {} tied, at {} each",
                    last + 1,
                    listed(tied),
                    percent(share)
                ),
            });
        }
    }
    let at = |r: usize| mean.and_then(|m| m.get(r)?.as_ref());
    match (at(0), at(last)) {
        (Some(a), Some(b)) if last > 0 => parts.push(format!(
            "the mean decision went from {} in round 1 to {} in round {}",
            number(a),
            number(b),
            last + 1
        )),
        (Some(a), _) => parts.push(format!("the mean decision was {} in round 1", number(a))),
        _ => {}
    }
    (!parts.is_empty()).then(|| format!("In {} mode, {}.", mode.as_str(), parts.join("; ")))
}

/// The paragraph for a scenario whose runs made per-round choices; `None` for one
/// without rounds (a scenario of named agents).
pub(crate) fn paragraph(sc: &ScenarioReport, modes: &[Mode]) -> Option<String> {
    let sentences: Vec<String> = modes
        .iter()
        .filter_map(|m| sentence(*m, &sc.rounds))
        .collect();
    if sentences.is_empty() {
        return None;
    }
    let runs: Vec<String> = modes
        .iter()
        .filter_map(|m| Some(format!("{} {}", sc.runs.get(m)?.finished, m.as_str())))
        .collect();
    Some(format!(
        "In brief, over the finished runs ({}), with 95% intervals: {}",
        runs.join(", "),
        sentences.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{summarize, Method};

    fn at(values: &[f64]) -> Option<Summary> {
        summarize(values, Method::for_figure(true))
    }

    #[test]
    fn a_tie_names_every_choice_and_no_winner() {
        let mut sc = ScenarioReport::default();
        sc.runs.insert(Mode::Competitive, Default::default());
        sc.runs[&Mode::Competitive].finished = 1;
        for value in ["COOPERATE", "DEFECT"] {
            sc.rounds.insert(
                format!("share.{value}"),
                IndexMap::from([(Mode::Competitive, vec![at(&[0.5])])]),
            );
        }
        let text = paragraph(&sc, &[Mode::Competitive]).unwrap();
        assert!(
            text.contains(
                "COOPERATE and DEFECT were chosen equally often in round 1 (50% of decisions each)"
            ),
            "{text}"
        );
        assert!(!text.contains("chosen most"), "{text}");
    }

    #[test]
    fn says_what_was_chosen_most_and_how_it_moved_by_mode() {
        let mut sc = ScenarioReport::default();
        sc.runs.insert(Mode::Cooperative, Default::default());
        sc.runs[&Mode::Cooperative].finished = 3;
        let by_mode =
            |r1: &[f64], r2: &[f64]| IndexMap::from([(Mode::Cooperative, vec![at(r1), at(r2)])]);
        sc.rounds.insert(
            "share.SHARE".into(),
            by_mode(&[0.7, 0.6, 0.8], &[0.3, 0.2, 0.4]),
        );
        sc.rounds.insert(
            "share.KEEP".into(),
            by_mode(&[0.3, 0.4, 0.2], &[0.7, 0.8, 0.6]),
        );
        let text = paragraph(&sc, &[Mode::Cooperative, Mode::Competitive]).unwrap();
        assert!(
            text.starts_with("In brief, over the finished runs (3 cooperative)"),
            "{text}"
        );
        assert!(
            text.contains("SHARE was chosen most in round 1 (70% ["),
            "{text}"
        );
        assert!(
            text.contains("by round 2, KEEP instead, at 70% ["),
            "{text}"
        );
        assert!(!text.contains("competitive mode"), "{text}");
        assert_eq!(
            paragraph(&ScenarioReport::default(), &[Mode::Cooperative]),
            None
        );

        let mut amounts = ScenarioReport::default();
        amounts.rounds.insert(
            "mean_decision".into(),
            by_mode(&[5.0, 6.0, 7.0], &[3.0, 4.0, 5.0]),
        );
        let text = paragraph(&amounts, &[Mode::Cooperative]).unwrap();
        assert!(
            text.contains("In cooperative mode, the mean decision went from 6.0 [")
                && text.contains("in round 1 to 4.0 ["),
            "{text}"
        );
    }
}
