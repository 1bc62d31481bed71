//! People's data beside the models': a scenario's `design` (the experiment it plays:
//! group size, rounds, payoffs, treatment) and its `reference` section, or a
//! `--reference` file of the same form: series of a measure that people produced in a
//! published experiment, by round or overall, each with its source. A series is only
//! compared with a scenario of the same design; the checks here say what differs.
//! Pure: the file is read at the edges.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::path::FieldPath;

/// People's series from one experiment, and the design they played.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeopleReference {
    /// The design the people played, as the scenario's `design` must state it too:
    /// the same keys with the same values (`group_size`, `rounds`, `payoffs`,
    /// `treatment`…).
    pub design: IndexMap<String, Value>,
    /// The series by name.
    pub series: IndexMap<String, PeopleSeries>,
}

/// One measure of people's play.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeopleSeries {
    /// The benchmark's figure the models' values come from: a per-round series
    /// (`share.COOPERATE`, `mean_decision`, `world.fish`…) for `by_round`, a figure
    /// (`cooperation_rate`, `measure.NAME`…) for `overall`.
    pub figure: String,
    /// The people's value in each round, from round 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_round: Vec<PeoplePoint>,
    /// The people's value over the whole game.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<PeoplePoint>,
    /// Where the numbers were read: the paper's table, or the replication data and
    /// how they were computed from it. Never a figure read by eye.
    pub source: String,
}

/// People's mean of a measure, with its spread and how many it is over.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeoplePoint {
    /// The people's mean.
    pub mean: f64,
    /// The standard deviation across the `n` observations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<f64>,
    /// The mean's 95% interval, where the source gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// The observations the mean is over (subjects, or groups).
    pub n: i64,
}

/// Every problem of a scenario's own `reference` section.
pub fn check_scenario(s: &super::Scenario) -> Vec<(FieldPath, String)> {
    match &s.reference {
        Some(r) => check(
            r,
            &s.design,
            &FieldPath::root().key("reference"),
            &FieldPath::root().key("design"),
        ),
        None => Vec::new(),
    }
}

/// Every problem of `reference` read at `at`, against the scenario's `design` (from
/// `design_at`): a series without a source or values, a point that cannot be, and a
/// design that is not the scenario's.
pub fn check(
    reference: &PeopleReference,
    design: &IndexMap<String, Value>,
    at: &FieldPath,
    design_at: &FieldPath,
) -> Vec<(FieldPath, String)> {
    let mut out = Vec::new();
    if reference.series.is_empty() {
        out.push((at.key("series"), "names no series".into()));
    }
    for (key, people) in &reference.design {
        match design.get(key) {
            None => out.push((
                design_at.key(key),
                format!(
                    "the people's design has {key} {people}; the scenario states none, so \
                     the designs cannot be matched"
                ),
            )),
            Some(own) if own != people => out.push((
                at.key("design").key(key),
                format!("the people played {key} {people}; the scenario plays {own}"),
            )),
            Some(_) => {}
        }
    }
    for key in design.keys() {
        if !reference.design.contains_key(key) {
            out.push((
                at.key("design").key(key),
                format!("the scenario's design has {key}; the people's does not say"),
            ));
        }
    }
    let rounds = design.get("rounds").and_then(Value::as_u64);
    for (name, series) in &reference.series {
        let sat = at.key("series").key(name);
        if series.source.trim().is_empty() {
            out.push((
                sat.key("source"),
                "must say where the numbers were read".into(),
            ));
        }
        if series.figure.trim().is_empty() {
            out.push((sat.key("figure"), "must name a figure".into()));
        }
        if series.by_round.is_empty() && series.overall.is_none() {
            out.push((sat.clone(), "gives neither `by_round` nor `overall`".into()));
        }
        if let Some(rounds) = rounds.filter(|r| series.by_round.len() as u64 > *r) {
            out.push((
                sat.key("by_round"),
                format!(
                    "{} rounds, beyond the {rounds} the scenario plays",
                    series.by_round.len()
                ),
            ));
        }
        for (i, p) in series.by_round.iter().enumerate() {
            point(&mut out, p, sat.key("by_round").index(i));
        }
        if let Some(p) = &series.overall {
            point(&mut out, p, sat.key("overall"));
        }
    }
    out
}

fn point(out: &mut Vec<(FieldPath, String)>, p: &PeoplePoint, at: FieldPath) {
    if !p.mean.is_finite() {
        out.push((at.key("mean"), format!("{}: must be a number", p.mean)));
    }
    if p.n < 1 {
        out.push((at.key("n"), format!("{}: must be at least 1", p.n)));
    }
    if let Some(sd) = p.sd.filter(|sd| !(sd.is_finite() && *sd >= 0.0)) {
        out.push((at.key("sd"), format!("{sd}: must be 0 or more")));
    }
    if let Some([lo, hi]) = p.ci95 {
        if !(lo <= p.mean && p.mean <= hi) {
            out.push((
                at.key("ci95"),
                format!("[{lo}, {hi}] does not hold the mean {}", p.mean),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(design: Value, series: Value) -> PeopleReference {
        serde_json::from_value(json!({"design": design, "series": series})).unwrap()
    }

    fn design(v: Value) -> IndexMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    fn problems(r: &PeopleReference, d: &IndexMap<String, Value>) -> Vec<String> {
        check(
            r,
            d,
            &FieldPath::root().key("reference"),
            &FieldPath::root().key("design"),
        )
        .into_iter()
        .map(|(p, m)| format!("{p}: {m}"))
        .collect()
    }

    #[test]
    fn a_matching_design_and_sound_series_pass() {
        let r = reference(
            json!({"group_size": 2, "rounds": 3}),
            json!({"coop": {"figure": "share.COOPERATE", "source": "Table 2.",
                "by_round": [{"mean": 0.6, "n": 30}, {"mean": 0.5, "sd": 0.5, "n": 30}],
                "overall": {"mean": 0.55, "ci95": [0.4, 0.7], "n": 30}}}),
        );
        assert!(problems(&r, &design(json!({"rounds": 3, "group_size": 2}))).is_empty());
    }

    #[test]
    fn each_problem_names_its_field() {
        let r = reference(
            json!({"group_size": 4, "rounds": 2, "payoffs": "R=3"}),
            json!({"coop": {"figure": "share.C", "source": " ",
                "by_round": [{"mean": 0.6, "n": -3}, {"mean": 0.5, "sd": -1.0, "n": 1},
                             {"mean": 0.4, "n": 2}],
                "overall": {"mean": 0.9, "ci95": [0.1, 0.2], "n": 3}},
                "empty": {"figure": "x", "source": "Table 1."}}),
        );
        let said = problems(
            &r,
            &design(json!({"group_size": 2, "rounds": 2, "treatment": "P"})),
        );
        for expected in [
            "reference.design.group_size: the people played group_size 4; the scenario plays 2",
            "design.payoffs: the people's design has payoffs \"R=3\"; the scenario states none",
            "reference.design.treatment: the scenario's design has treatment; the people's does not say",
            "reference.series.coop.source: must say where the numbers were read",
            "reference.series.coop.by_round: 3 rounds, beyond the 2 the scenario plays",
            "reference.series.coop.by_round[0].n: -3: must be at least 1",
            "reference.series.coop.by_round[1].sd: -1: must be 0 or more",
            "reference.series.coop.overall.ci95: [0.1, 0.2] does not hold the mean 0.9",
            "reference.series.empty: gives neither `by_round` nor `overall`",
        ] {
            assert!(
                said.iter().any(|s| s.starts_with(expected)),
                "{expected:?} not in {said:#?}"
            );
        }
    }
}
