//! People's data beside a benchmark's figures: a scenario's `reference` section and a
//! `--reference` file, checked against the scenario's design and the figures it
//! reports before anything runs, then set beside the models' series in the report.
//! Each series gets, per mode, its distance from the people's (RMSE over the rounds
//! both have, NRMSE over the people's range) and, round by round, whether the models'
//! 95% interval covers the people's mean.

use std::path::Path;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use sopsim::scenario::people::{self, PeoplePoint, PeopleReference, PeopleSeries};
use sopsim::scenario::{FieldPath, Mode, OutcomeRules, Scenario};
use sopsim::setup::Setting;

use crate::stats::Summary;
use crate::BenchError;

/// The largest reference file read.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Reads a `--reference` file: JSON of the form of a scenario's `reference` section.
pub fn read_file(path: &Path) -> Result<PeopleReference, BenchError> {
    let bad = |why: String| BenchError::Reference {
        setting: Setting::Reference,
        path: path.to_path_buf(),
        problems: vec![why],
    };
    let text = sopsim_core::files::read_text_bounded(path, MAX_FILE_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    let value = sopsim_core::user_json::parse(&text).map_err(|e| bad(e.to_string()))?;
    serde_path_to_error::deserialize(value).map_err(|e| bad(e.to_string()))
}

/// Every problem of the file's `reference` against `scenario`: its design, and figures
/// the scenario's runs do not report.
pub fn check(
    reference: &PeopleReference,
    scenario: &Scenario,
    rules: Option<&OutcomeRules>,
) -> Vec<String> {
    let mut problems: Vec<String> = people::check(
        reference,
        &scenario.design,
        &FieldPath::root(),
        &FieldPath::root().key("design"),
    )
    .into_iter()
    .map(|(at, why)| match at.to_string().as_str() {
        "" => why,
        at if at.starts_with("design.") => format!("{}: scenario {at}: {why}", scenario.name),
        at => format!("{at}: {why}"),
    })
    .collect();
    problems.extend(unknown_figures(reference, scenario, rules));
    problems
}

/// Series whose figure the scenario's runs do not report.
pub fn unknown_figures(
    reference: &PeopleReference,
    scenario: &Scenario,
    rules: Option<&OutcomeRules>,
) -> Vec<String> {
    let (overall, by_round) = figure_names(scenario, rules);
    let mut out = Vec::new();
    for (name, s) in &reference.series {
        let judged = s.figure.starts_with("judge.") && scenario.judge.is_some();
        if !s.by_round.is_empty() && !by_round.contains(&s.figure) {
            out.push(format!(
                "series.{name}.figure: {} has no series by round in {} (it has: {})",
                s.figure,
                scenario.name,
                by_round.join(", ")
            ));
        }
        if s.overall.is_some() && !overall.contains(&s.figure) && !judged {
            out.push(format!(
                "series.{name}.figure: {} is no figure {} reports",
                s.figure, scenario.name
            ));
        }
    }
    out
}

/// The figures a benchmark reports of `scenario`'s runs (its outcomes', its probes'
/// and those every run has), and its series by round, by name: what a `reference`
/// series may name. A judge's figures are the `judge.` ones its rubric makes.
fn figure_names(
    scenario: &sopsim::scenario::Scenario,
    rules: Option<&OutcomeRules>,
) -> (Vec<String>, Vec<String>) {
    let every_run = crate::summary_figures::generic_figures(&Default::default());
    let mut overall: Vec<String> = every_run.into_keys().collect();
    let mut by_round = Vec::new();
    if let Some(rules) = rules {
        overall.extend(rules.figure_names());
        if let Some(d) = &rules.decision {
            match d.rule.values.is_empty() {
                true => by_round.push("mean_decision".to_string()),
                false => by_round.extend(
                    d.rule
                        .values
                        .iter()
                        .map(|v| format!("share.{}", sopsim::scenario::choice_key(v))),
                ),
            }
        }
        if rules.payoff.is_some() {
            by_round.push("gini".into());
        }
        if let Some(w) = &rules.world {
            by_round.extend(w.variables.iter().map(|(name, _)| format!("world.{name}")));
        }
    }
    let probes = sopsim::scenario::probes::figure_names(&scenario.probes);
    overall.extend(probes.iter().cloned());
    by_round.extend(probes);
    (overall, by_round)
}

/// One series of people's data beside the models'.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The benchmark's figure (or per-round series) the people's values are set beside.
    pub figure: String,
    /// Where the people's numbers were read, as the reference says.
    pub source: String,
    /// The design both played.
    pub design: IndexMap<String, Value>,
    /// Each round the people's data has, from round 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_round: Vec<RoundComparison>,
    /// The whole game, where the people's data has a value for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall: Option<OverallComparison>,
    /// Per mode: how far the models' series is from the people's.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub distance: IndexMap<Mode, Distance>,
}

/// A round's people's mean beside the models' per mode.
#[derive(Debug, Clone, Serialize)]
pub struct RoundComparison {
    /// The round, from 1.
    pub round: usize,
    /// The people's value in the round.
    pub people: PeoplePoint,
    /// Per mode: the models' summary over the runs in the round, where they have one.
    pub model: IndexMap<Mode, Option<Summary>>,
    /// Whether the models' 95% interval holds the people's mean.
    pub covered: IndexMap<Mode, Option<bool>>,
}

/// The whole game's people's mean beside the models'.
#[derive(Debug, Clone, Serialize)]
pub struct OverallComparison {
    /// The people's value over the whole game.
    pub people: PeoplePoint,
    /// Per mode: the models' summary of the figure over the runs, where they have one.
    pub model: IndexMap<Mode, Option<Summary>>,
    /// The models' mean less the people's.
    pub difference: IndexMap<Mode, Option<f64>>,
    /// Whether the models' 95% interval holds the people's mean.
    pub covered: IndexMap<Mode, Option<bool>>,
}

/// The distance between the models' and the people's series over the rounds both have.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Distance {
    /// Rounds compared.
    pub rounds: usize,
    /// Root mean square of the models' mean less the people's.
    pub rmse: f64,
    /// RMSE over the people's range (their largest less their least mean); `null`
    /// where their series is flat.
    pub nrmse: Option<f64>,
    /// Rounds whose models' interval holds the people's mean.
    pub covered: usize,
}

/// The distance of `model` (a summary a round, from round 1) from `people`; `None`
/// when no round has both.
pub fn distance(people: &[PeoplePoint], model: &[Option<Summary>]) -> Option<Distance> {
    let pairs: Vec<(f64, &Summary)> = people
        .iter()
        .zip(model)
        .filter_map(|(p, m)| Some((p.mean, m.as_ref()?)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let rmse = (pairs.iter().map(|(p, m)| (m.mean - p).powi(2)).sum::<f64>() / n).sqrt();
    let means: Vec<f64> = pairs.iter().map(|(p, _)| *p).collect();
    let range = means.iter().copied().fold(f64::MIN, f64::max)
        - means.iter().copied().fold(f64::MAX, f64::min);
    Some(Distance {
        rounds: pairs.len(),
        rmse: r6(rmse),
        nrmse: (range > 0.0).then(|| r6(rmse / range)),
        covered: pairs
            .iter()
            .filter(|(p, m)| covers(m, *p) == Some(true))
            .count(),
    })
}

/// Whether `m`'s interval holds `x`; `None` without an interval.
fn covers(m: &Summary, x: f64) -> Option<bool> {
    m.ci95.map(|[lo, hi]| lo <= x && x <= hi)
}

fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// A scenario's series by round in a report: series → mode → each round's summary.
pub type RoundSummaries = IndexMap<String, IndexMap<Mode, Vec<Option<Summary>>>>;

/// Every series of `reference` beside the models': their series by round (`rounds`)
/// and each figure's summary per mode (`figure`).
pub fn compare(
    reference: &PeopleReference,
    rounds: &RoundSummaries,
    figure: &dyn Fn(&str, Mode) -> Option<Summary>,
    modes: &[Mode],
) -> IndexMap<String, Comparison> {
    reference
        .series
        .iter()
        .map(|(name, s)| {
            let c = compare_one(s, &reference.design, rounds, figure, modes);
            (name.clone(), c)
        })
        .collect()
}

fn compare_one(
    s: &PeopleSeries,
    design: &IndexMap<String, Value>,
    rounds: &RoundSummaries,
    figure: &dyn Fn(&str, Mode) -> Option<Summary>,
    modes: &[Mode],
) -> Comparison {
    let rounds = rounds.get(&s.figure);
    let at =
        |mode: &Mode, r: usize| -> Option<Summary> { rounds?.get(mode)?.get(r).cloned().flatten() };
    let by_round: Vec<RoundComparison> = s
        .by_round
        .iter()
        .enumerate()
        .map(|(r, p)| RoundComparison {
            round: r + 1,
            people: *p,
            model: modes.iter().map(|m| (*m, at(m, r))).collect(),
            covered: modes
                .iter()
                .map(|m| (*m, at(m, r).and_then(|s| covers(&s, p.mean))))
                .collect(),
        })
        .collect();
    let distance = if s.by_round.is_empty() {
        IndexMap::new()
    } else {
        modes
            .iter()
            .filter_map(|m| {
                let model: Vec<Option<Summary>> = (0..s.by_round.len()).map(|r| at(m, r)).collect();
                Some((*m, distance(&s.by_round, &model)?))
            })
            .collect()
    };
    let overall = s.overall.map(|p| {
        let model: IndexMap<Mode, Option<Summary>> =
            modes.iter().map(|m| (*m, figure(&s.figure, *m))).collect();
        OverallComparison {
            people: p,
            difference: model
                .iter()
                .map(|(m, s)| (*m, s.as_ref().map(|s| r6(s.mean - p.mean))))
                .collect(),
            covered: model
                .iter()
                .map(|(m, s)| (*m, s.as_ref().and_then(|s| covers(s, p.mean))))
                .collect(),
            model,
        }
    });
    Comparison {
        figure: s.figure.clone(),
        source: s.source.clone(),
        design: design.clone(),
        by_round,
        overall,
        distance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Method;

    fn point(mean: f64) -> PeoplePoint {
        PeoplePoint {
            mean,
            sd: None,
            ci95: None,
            n: 10,
        }
    }

    fn summary(mean: f64, lo: f64, hi: f64) -> Option<Summary> {
        Some(Summary {
            n: 8,
            mean,
            sd: Some(0.1),
            ci95: Some([lo, hi]),
            min: lo,
            max: hi,
            method: Method::Bootstrap,
        })
    }

    #[test]
    fn the_distance_of_a_hand_made_series_is_as_computed_by_hand() {
        // People 0.6, 0.5, 0.2 (range 0.4); models 0.7, 0.5, 0.5 and nothing in
        // round 4. Differences 0.1, 0, 0.3: RMSE = sqrt(0.1 / 3) = 0.182574, NRMSE =
        // 0.182574 / 0.4 = 0.456435. The intervals hold 0.6 and 0.5, not 0.2.
        let people = [point(0.6), point(0.5), point(0.2), point(0.1)];
        let model = [
            summary(0.7, 0.55, 0.85),
            summary(0.5, 0.4, 0.6),
            summary(0.5, 0.3, 0.7),
            None,
        ];
        let d = distance(&people, &model).unwrap();
        assert_eq!(d.rounds, 3);
        assert_eq!(d.rmse, 0.182574);
        assert_eq!(d.nrmse, Some(0.456435));
        assert_eq!(d.covered, 2);
    }

    #[test]
    fn a_flat_series_has_no_nrmse_and_no_common_round_no_distance() {
        let d = distance(
            &[point(0.5), point(0.5)],
            &[summary(0.5, 0.4, 0.6), summary(0.7, 0.6, 0.8)],
        )
        .unwrap();
        assert_eq!((d.rmse, d.nrmse, d.covered), (0.141421, None, 1));
        assert!(distance(&[point(0.5)], &[None]).is_none());
    }
}
