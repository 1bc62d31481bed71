//! People's data beside the models': the shipped Cooper et al. (1996) game with its
//! people's series, a `--reference` file, and each bad reference refused naming its
//! field before anything runs.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common::root;

fn sopsim(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bench(scenario: &Path, reference: Option<&Path>, out: &Path) -> (i32, String) {
    let mut args = vec![
        "bench",
        scenario.to_str().unwrap(),
        "--seeds",
        "3",
        "--modes",
        "cooperative",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ];
    if let Some(r) = reference {
        args.extend(["--reference", r.to_str().unwrap()]);
    }
    sopsim(&args)
}

#[test]
fn the_peoples_series_stands_beside_the_models_with_its_distance() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let game = root().join("scenarios/experiments/pd_cooper_1996.json");
    let (code, err) = bench(&game, None, &out);
    assert_eq!(code, 0, "{err}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let sc = &report["scenarios"][0];
    let c = &sc["people"]["cooperation_by_round"];
    assert_eq!(c["by_round"].as_array().unwrap().len(), 10);
    // The distance is that of the report's own series from the people's means.
    let people: Vec<f64> = c["by_round"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["people"]["mean"].as_f64().unwrap())
        .collect();
    let model: Vec<f64> = sc["rounds"]["share.OPTION J"]["cooperative"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["mean"].as_f64().unwrap())
        .collect();
    let squares: f64 = people
        .iter()
        .zip(&model)
        .map(|(p, m)| (m - p).powi(2))
        .sum();
    let rmse = (squares / 10.0).sqrt();
    let d = &c["distance"]["cooperative"];
    assert!(
        (d["rmse"].as_f64().unwrap() - rmse).abs() < 1e-6,
        "{d} against {rmse}"
    );
    let range = 0.667 - 0.2;
    assert!(
        (d["nrmse"].as_f64().unwrap() - rmse / range).abs() < 1e-5,
        "{d}"
    );
    let overall = &sc["people"]["cooperation"]["overall"];
    assert_eq!(overall["people"]["mean"], 0.523);
    let model_mean = sc["figures"]["cooperation_rate"]["by_mode"]["cooperative"]["mean"]
        .as_f64()
        .unwrap();
    let difference = overall["difference"]["cooperative"].as_f64().unwrap();
    assert!((difference - (model_mean - 0.523)).abs() < 1e-6);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("People: `cooperation_by_round`"), "{md}");
}

#[test]
fn bad_references_are_refused_naming_the_field_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let game = root().join("scenarios/experiments/pd_cooper_1996.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&game).unwrap()).unwrap();
    let good = doc["reference"].clone();
    let file = dir.path().join("people.json");
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut unknown = good.clone();
    unknown["series"]["cooperation"]["figure"] = json!("measure.trust");
    cases.push((
        unknown,
        "series.cooperation.figure: measure.trust is no figure",
    ));
    let mut beyond = good.clone();
    beyond["series"]["cooperation_by_round"]["by_round"]
        .as_array_mut()
        .unwrap()
        .push(json!({"mean": 0.1, "n": 30}));
    cases.push((
        beyond,
        "series.cooperation_by_round.by_round: 11 rounds, beyond the 10",
    ));
    let mut design = good.clone();
    design["design"]["group_size"] = json!(4);
    cases.push((
        design,
        "design.group_size: the people played group_size 4; the scenario plays 2",
    ));
    let mut negative = good.clone();
    negative["series"]["cooperation"]["overall"]["n"] = json!(-30);
    cases.push((
        negative,
        "series.cooperation.overall.n: -30: must be at least 1",
    ));
    let mut sourceless = good.clone();
    sourceless["series"]["cooperation"]
        .as_object_mut()
        .unwrap()
        .remove("source");
    cases.push((sourceless, "missing field `source`"));
    for (reference, says) in cases {
        std::fs::write(&file, reference.to_string()).unwrap();
        let out = dir.path().join("never");
        let (code, err) = bench(&game, Some(&file), &out);
        assert_eq!(code, 2, "{says}: {err}");
        assert!(err.contains("--reference"), "{err}");
        assert!(err.contains(says), "expected {says:?} in {err}");
        assert!(!out.exists(), "{says}: the benchmark ran");
    }
    // A scenario of another design: the prisoner's dilemma states none.
    std::fs::write(&file, good.to_string()).unwrap();
    let pd = root().join("scenarios/prisoners_dilemma.json");
    let (code, err) = bench(&pd, Some(&file), &dir.path().join("pd"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("scenario design.group_size") && err.contains("the scenario states none"),
        "{err}"
    );
}
