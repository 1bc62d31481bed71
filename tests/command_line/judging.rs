//! Judged outcomes through the command line: a scripted judge's answers become the
//! scores exactly; a benchmark judged again changes no run file but the judgements and
//! the report; blinded items go out and ratings come back, refused by line when
//! wrong; bad judges and interviews are refused naming what is wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common::root;

fn sopsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The README's debate judged on two of Sotopia's dimensions by a scripted judge that
/// answers 7, 3, 9 in turn.
fn judged_debate(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["judge"] = json!({"rubric": "sotopia", "leave_out": ["relationship", "knowledge", "secret",
        "social_rules", "financial_and_material_benefits"]});
    doc["script"]["judge"] = json!(["7", "3", "9"]);
    let path = dir.join("debate.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_scripted_judges_answers_become_the_scores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = judged_debate(dir.path());
    let out = dir.path().join("run");
    let (code, _, err) = sopsim(&[
        "run",
        scenario.to_str().unwrap(),
        "-q",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let j = read(&out.join("judgement.json"));
    assert_eq!(j["rubric"], "sotopia");
    assert_eq!(j["shares_a_model"], true);
    // Items in order: each agent (Mia, Ada, Ben, Cleo, Dan) on believability, then goal;
    // the answers go round 7, 3, 9.
    let mut expected = [7.0, 3.0, 9.0].into_iter().cycle();
    for agent in ["Mia", "Ada", "Ben", "Cleo", "Dan"] {
        for dimension in ["believability", "goal"] {
            let s = &j["scores"][agent][dimension];
            assert_eq!(
                s["score"].as_f64(),
                expected.next(),
                "{agent} {dimension}: {s}"
            );
            assert_eq!(s["samples"].as_array().unwrap().len(), 1);
        }
    }
    assert_eq!(j["calls"], 10);
    assert_eq!(j["scales"]["goal"], json!([0, 10]));
}

/// Every file under `dir`, by its path inside it.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn a_benchmark_judged_again_changes_only_its_judgements_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = judged_debate(dir.path());
    let out = dir.path().join("bench");
    let (code, _, err) = sopsim(&[
        "bench",
        scenario.to_str().unwrap(),
        "--seeds",
        "2",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report = read(&out.join("report.json"));
    let figure = &report["scenarios"][0]["figures"]["judge.goal"];
    assert_eq!(figure["by_mode"]["cooperative"]["n"], 2, "{figure}");
    let before = tree(&out);
    // Again, with believability alone and three samples an item.
    let judge = dir.path().join("judge.json");
    std::fs::write(
        &judge,
        json!({"rubric": "sotopia", "samples": 3, "leave_out": ["relationship", "knowledge",
            "secret", "social_rules", "financial_and_material_benefits", "goal"]})
        .to_string(),
    )
    .unwrap();
    let (code, said, err) = sopsim(&[
        "judge",
        out.to_str().unwrap(),
        "--judge",
        judge.to_str().unwrap(),
        "--llm",
        "scripted",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("judged 4 run(s) again"), "{said}");
    let after = tree(&out);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (file, bytes) in &before {
        let changed = after[file] != *bytes;
        let may = file.ends_with("judgement.json")
            || file.starts_with("report.")
            || file.starts_with("timing.json")
            || file.starts_with("plots");
        assert!(!changed || may, "{file} changed");
        if file.ends_with("judgement.json") {
            assert!(changed, "{file} was not judged again");
        }
    }
    let report = read(&out.join("report.json"));
    let figures = report["scenarios"][0]["figures"].as_object().unwrap();
    assert!(figures.contains_key("judge.believability"));
    assert!(!figures.contains_key("judge.goal"), "{:?}", figures.keys());
}

#[test]
fn a_judge_file_judges_a_run_and_every_run_of_a_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    // The README's debate has no judge of its own; the file gives one, with a rubric
    // of its own beside it.
    let judges = dir.path().join("judges");
    std::fs::create_dir_all(&judges).unwrap();
    std::fs::write(
        judges.join("clarity.json"),
        json!({"name": "clarity", "dimensions": {"clarity": {"min": 1, "max": 5,
            "description": "How clearly the agent argued."}},
            "prompts": {"system": "You rate debates.", "item": "{transcript}\nRate {agent}'s {dimension} from {min} to {max}."}})
        .to_string(),
    )
    .unwrap();
    let judge = judges.join("judge.json");
    std::fs::write(&judge, json!({"rubric": "clarity.json"}).to_string()).unwrap();
    let debate = root().join("scenarios/debate.json");
    let out = dir.path().join("run");
    let (code, _, err) = sopsim(&[
        "run",
        debate.to_str().unwrap(),
        "--judge",
        judge.to_str().unwrap(),
        "-q",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let j = read(&out.join("judgement.json"));
    assert_eq!(j["rubric"], "clarity");
    assert_eq!(j["scales"]["clarity"], json!([1, 5]));
    // The shipped judge of the measuring guide's debate, beside the first judgement.
    let shipped = root().join("scenarios/judges/sotopia_debate.json");
    let (code, _, err) = sopsim(&[
        "judge",
        out.to_str().unwrap(),
        "--judge",
        shipped.to_str().unwrap(),
        "--llm",
        "scripted",
        "--into",
        "sotopia.json",
    ]);
    assert_eq!(code, 0, "{err}");
    let scales = read(&out.join("sotopia.json"))["scales"].clone();
    let dimensions: Vec<&String> = scales.as_object().unwrap().keys().collect();
    assert_eq!(
        dimensions,
        [
            "believability",
            "relationship",
            "knowledge",
            "social_rules",
            "goal"
        ]
    );
    let bench = dir.path().join("bench");
    let judged_bench = || {
        sopsim(&[
            "bench",
            debate.to_str().unwrap(),
            "--judge",
            judge.to_str().unwrap(),
            "--seeds",
            "1",
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "-q",
            "--out",
            bench.to_str().unwrap(),
        ])
    };
    let (code, _, err) = judged_bench();
    assert_eq!(code, 0, "{err}");
    let report = read(&bench.join("report.json"));
    let figure = &report["scenarios"][0]["figures"]["judge.clarity"];
    assert_eq!(figure["by_mode"]["competitive"]["n"], 1, "{figure}");
    // The same folder with another judge is another benchmark.
    std::fs::write(&judge, json!({"rubric": "sotopia"}).to_string()).unwrap();
    let (code, _, err) = judged_bench();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("judged by"), "{err}");
    std::fs::write(&judge, "{\"rubric\": \"sotopia\", \"samples\": 0}").unwrap();
    let (code, _, err) = sopsim(&[
        "run",
        debate.to_str().unwrap(),
        "--judge",
        judge.to_str().unwrap(),
        "--llm",
        "scripted",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--judge") && err.contains("samples"), "{err}");
}

#[test]
fn bad_judges_ratings_and_interviews_are_refused_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = judged_debate(dir.path());
    let out = dir.path().join("run");
    let (code, _, err) = sopsim(&[
        "run",
        scenario.to_str().unwrap(),
        "-q",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let judge = dir.path().join("bad.json");
    for (spec, says) in [
        (
            json!({"rubric": "sotopia", "leave_out": ["charm"]}),
            "leave_out[0]: \"charm\" is no dimension",
        ),
        (
            json!({"dimensions": {"wit": {"min": 5, "max": 1, "description": "Wit."}}}),
            "dimensions.wit.max: 1: must be above min (5)",
        ),
        (json!({"rubric": "missing.json"}), "missing.json"),
        (json!({"rubric": "sotopia", "sample": 2}), "unknown field"),
    ] {
        std::fs::write(&judge, spec.to_string()).unwrap();
        let (code, _, err) = sopsim(&[
            "judge",
            out.to_str().unwrap(),
            "--judge",
            judge.to_str().unwrap(),
            "--llm",
            "scripted",
        ]);
        assert_eq!(code, 2, "{says}: {err}");
        assert!(err.contains(says), "expected {says:?} in {err}");
    }
    let items = dir.path().join("items");
    let (code, said, err) = sopsim(&[
        "judge",
        "export",
        out.to_str().unwrap(),
        "--out",
        items.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("10 item(s)"), "{said}");
    let form = std::fs::read_to_string(items.join("form.html")).unwrap();
    assert!(
        !form.contains("Ada") && !form.contains("Cleo"),
        "the form names an agent"
    );
    let ratings = dir.path().join("ratings.csv");
    std::fs::write(&ratings, "rater,item,score\nme,item-0001,12\n").unwrap();
    let (code, _, err) = sopsim(&[
        "judge",
        "agreement",
        items.to_str().unwrap(),
        "--ratings",
        ratings.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 2: 12 is off item-0001's scale (0 to 10)"),
        "{err}"
    );
    for (args, says) in [
        (
            vec!["--agent", "Zed", "Why?"],
            "\"Zed\" is not an agent of this run",
        ),
        (
            vec!["--agent", "Ada", "--at", "99", "Why?"],
            "the run has no round 99",
        ),
    ] {
        let mut all = vec!["interview", out.to_str().unwrap(), "--llm", "scripted"];
        all.extend(args);
        let (code, _, err) = sopsim(&all);
        assert_eq!(code, 2, "{says}: {err}");
        assert!(err.contains(says), "expected {says:?} in {err}");
    }
    let (code, said, err) = sopsim(&[
        "interview",
        out.to_str().unwrap(),
        "--agent",
        "Ada",
        "--llm",
        "scripted",
        "What now?",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.starts_with("Ada: "), "{said}");
}
