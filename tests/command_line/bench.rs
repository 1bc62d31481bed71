//! `sopsim bench`: outcomes read from transcripts and paid out as hand-computed, the
//! report's determinism, resuming an interrupted benchmark, and failed runs counted.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::root;
use sopsim::scenario::{FieldPath, OutcomeRules};
use sopsim::simulation::{Decision, Message, MessageKind};
use sopsim_bench::extract::outcome_figures;

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

fn scenario_path(name: &str) -> String {
    root()
        .join("scenarios")
        .join(format!("{name}.json"))
        .display()
        .to_string()
}

fn rules(name: &str) -> OutcomeRules {
    let s = crate::common::load(Path::new(&scenario_path(name)));
    OutcomeRules::compile(
        s.outcomes.as_ref().unwrap(),
        &s,
        &FieldPath::root().key("outcomes"),
    )
    .unwrap()
}

/// A transcript of `(visit, name, content)` in the state `round`.
fn transcript(lines: &[(u32, &str, &str)]) -> Vec<Message> {
    lines
        .iter()
        .enumerate()
        .map(|(i, (visit, name, content))| Message {
            seq: i as u64,
            state: "round".into(),
            visit: *visit,
            role: "Player".into(),
            name: name.to_string(),
            content: content.to_string(),
            kind: MessageKind::Reply,
            decision: None,
        })
        .collect()
}

/// One turn with a choice: `(visit, name, decision, probabilities)`.
type ChoiceLine<'a> = (u32, &'a str, &'a str, &'a [(&'a str, f64)]);

/// A transcript of turns with a choice.
fn choices(lines: &[ChoiceLine]) -> Vec<Message> {
    lines
        .iter()
        .enumerate()
        .map(|(i, (visit, name, value, probabilities))| Message {
            seq: i as u64,
            state: "round".into(),
            visit: *visit,
            role: "Player".into(),
            name: name.to_string(),
            content: format!("{name} speaks."),
            kind: MessageKind::Reply,
            decision: Some(Decision {
                value: value.to_string(),
                probabilities: (!probabilities.is_empty()).then(|| {
                    probabilities
                        .iter()
                        .map(|(v, p)| (v.to_string(), *p))
                        .collect()
                }),
            }),
        })
        .collect()
}

fn figure(f: &sopsim_bench::extract::Figures, name: &str) -> Option<f64> {
    *f.get(name).unwrap_or_else(|| panic!("no figure {name}"))
}

#[test]
fn prisoners_dilemma_pays_each_round_from_the_choices() {
    let t = choices(&[
        (
            1,
            "Alice",
            "COOPERATE",
            &[("COOPERATE", 0.9), ("DEFECT", 0.1)],
        ),
        (
            1,
            "Bob",
            "COOPERATE",
            &[("COOPERATE", 0.6), ("DEFECT", 0.4)],
        ),
        (
            2,
            "Alice",
            "COOPERATE",
            &[("COOPERATE", 0.7), ("DEFECT", 0.3)],
        ),
        (2, "Bob", "DEFECT", &[("COOPERATE", 0.2), ("DEFECT", 0.8)]),
        (3, "Alice", "DEFECT", &[("COOPERATE", 0.4), ("DEFECT", 0.6)]),
        (3, "Bob", "DEFECT", &[]),
    ]);
    let f = outcome_figures(&rules("prisoners_dilemma"), &t, 0).unwrap();
    // (C,C) 3/3, (C,D) 0/5, (D,D) 1/1
    assert_eq!(figure(&f, "payoff.Alice"), Some(4.0));
    assert_eq!(figure(&f, "payoff.Bob"), Some(9.0));
    assert_eq!(figure(&f, "welfare"), Some(13.0));
    // Gini of [4, 9]: |4 − 9|·2 / (2·2·13) = 10/52
    let equality = figure(&f, "equality").unwrap();
    assert!((equality - (1.0 - 10.0 / 52.0)).abs() < 1e-12, "{equality}");
    // Moves: Alice C C D, Bob C D D → 3 of 6 cooperate
    assert_eq!(figure(&f, "cooperation_rate"), Some(0.5));
    assert_eq!(figure(&f, "rounds"), Some(3.0));
    assert_eq!(figure(&f, "decision_failures"), Some(0.0));
    // The model's probability of cooperating, over the five choices that have one.
    let p = figure(&f, "p.COOPERATE").unwrap();
    assert!(
        (p - (0.9 + 0.6 + 0.7 + 0.2 + 0.4) / 5.0).abs() < 1e-12,
        "{p}"
    );
    assert!((figure(&f, "p.DEFECT").unwrap() - (1.0 - p)).abs() < 1e-12);
}

#[test]
fn moves_are_read_from_the_text_when_no_choice_was_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        serde_json::json!({
            "players": ["Alice", "Bob"],
            "decision": { "pattern": "\\b(cooperate|defect)\\b", "state": "round",
                          "values": ["COOPERATE", "DEFECT"], "cooperative": ["COOPERATE"] },
            "payoff": { "table": { "COOPERATE,COOPERATE": [3, 3], "COOPERATE,DEFECT": [0, 5],
                                   "DEFECT,COOPERATE": [5, 0], "DEFECT,DEFECT": [1, 1] } }
        }),
    );
    let s = crate::common::load(&path);
    let rules = OutcomeRules::compile(
        s.outcomes.as_ref().unwrap(),
        &s,
        &FieldPath::root().key("outcomes"),
    )
    .unwrap();
    let t = transcript(&[
        (1, "Alice", "I COOPERATE."),
        (1, "Bob", "cooperate, then."),
        // The last readable move counts.
        (2, "Alice", "Tempted to defect, but I COOPERATE."),
        (2, "Bob", "I DEFECT."),
        // Bob names no move: the round pays nothing and counts one failure.
        (3, "Alice", "COOPERATE"),
        (3, "Bob", "I am not sure."),
    ]);
    let f = outcome_figures(&rules, &t, 0).unwrap();
    assert_eq!(figure(&f, "payoff.Alice"), Some(3.0));
    assert_eq!(figure(&f, "payoff.Bob"), Some(8.0));
    assert_eq!(figure(&f, "decision_failures"), Some(1.0));
    assert!(
        f.get("p.COOPERATE").is_none(),
        "no choice component, no probabilities"
    );
}

#[test]
fn public_goods_pays_by_formula_over_every_contribution_of_the_round() {
    let t = choices(&[
        (1, "Ana", "10", &[("10", 0.5), ("8", 0.5)]),
        (1, "Ben", "5", &[]),
        (1, "Cleo", "0", &[]),
        (1, "Dev", "5", &[]),
        // Round 2: Dev's 12 is outside [0, 10]: unreadable, so the round pays nothing.
        (2, "Ana", "10", &[]),
        (2, "Ben", "10", &[]),
        (2, "Cleo", "10", &[]),
        (2, "Dev", "12", &[]),
    ]);
    let f = outcome_figures(&rules("public_goods"), &t, 0).unwrap();
    // Round 1: pot 20 × 1.6 / 4 = 8 each; payoff = 10 − own + 8
    assert_eq!(figure(&f, "payoff.Ana"), Some(8.0));
    assert_eq!(figure(&f, "payoff.Ben"), Some(13.0));
    assert_eq!(figure(&f, "payoff.Cleo"), Some(18.0));
    assert_eq!(figure(&f, "payoff.Dev"), Some(13.0));
    assert_eq!(figure(&f, "welfare"), Some(52.0));
    assert_eq!(figure(&f, "decision_failures"), Some(1.0));
    // Readable contributions 10 5 0 5 10 10 10 over the range 0..10
    let rate = figure(&f, "cooperation_rate").unwrap();
    assert!((rate - 50.0 / 70.0).abs() < 1e-12, "{rate}");
    // The expected contribution under the model: 0.5·10 + 0.5·8.
    assert_eq!(figure(&f, "expected_decision"), Some(9.0));
    // And the probability of each contribution the range offers, over the one choice
    // that has probabilities.
    assert_eq!(figure(&f, "p.10"), Some(0.5));
    assert_eq!(figure(&f, "p.8"), Some(0.5));
    assert_eq!(figure(&f, "p.0"), Some(0.0));
    let offered: Vec<String> = (0..=10).map(|v| format!("p.{v}")).collect();
    let named: Vec<&String> = f.keys().filter(|k| k.starts_with("p.")).collect();
    assert_eq!(
        named,
        offered.iter().collect::<Vec<_>>(),
        "one per value, in order"
    );
}

#[test]
fn probabilities_of_a_range_are_averaged_per_value() {
    let t = choices(&[
        (1, "Ana", "2", &[("0", 0.2), ("2", 0.8)]),
        (1, "Ben", "10", &[("10", 0.6), ("9", 0.4)]),
        (1, "Cleo", "0", &[]),
        (1, "Dev", "5", &[("5", 1.0)]),
    ]);
    let f = outcome_figures(&rules("public_goods"), &t, 0).unwrap();
    let close = |name: &str, want: f64| {
        let got = figure(&f, name).unwrap();
        assert!((got - want).abs() < 1e-12, "{name}: {got} against {want}");
    };
    // Three decisions have probabilities: each value's mean over them.
    close("p.0", 0.2 / 3.0);
    close("p.2", 0.8 / 3.0);
    close("p.5", 1.0 / 3.0);
    close("p.9", 0.4 / 3.0);
    close("p.10", 0.6 / 3.0);
    close("p.7", 0.0);
    close("expected_decision", (1.6 + 9.6 + 5.0) / 3.0);
}

/// The prisoner's dilemma with other outcome rules, its moves read from the text (its
/// choice components removed).
fn write_scenario(dir: &Path, outcomes: serde_json::Value) -> std::path::PathBuf {
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scenario_path("prisoners_dilemma")).unwrap())
            .unwrap();
    for comps in s["sop"]["states"]["round"]["components"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        comps.as_object_mut().unwrap().remove("choice");
    }
    s["outcomes"] = outcomes;
    let path = dir.join("game.json");
    std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    path
}

#[test]
fn defaults_scores_and_formulas_over_choices() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        serde_json::json!({
            "decision": { "pattern": "(cooperate|defect)", "state": "round", "take": "first",
                          "values": ["COOPERATE", "DEFECT"], "default": "DEFECT" },
            "payoff": { "formula": "(2 if own == 'COOPERATE' else 3) + counts.COOPERATE" },
            "scores": {
                "words": { "pattern": "words: (\\d+)", "reduce": "sum" },
                "exclaims": { "pattern": "!", "reduce": "count", "agents": ["Bob"] }
            }
        }),
    );
    let s = crate::common::load(&path);
    let rules =
        OutcomeRules::compile(s.outcomes.as_ref().unwrap(), &s, &FieldPath::root()).unwrap();
    let t = transcript(&[
        (1, "Alice", "COOPERATE first, DEFECT later. words: 4"),
        (1, "Bob", "Hmm! words: 2"),
        (2, "Alice", "words: 1"),
        (2, "Bob", "DEFECT!"),
    ]);
    let f = outcome_figures(&rules, &t, 0).unwrap();
    // Round 1: Alice C (first match), Bob defaults to D → C count 1: Alice 2+1, Bob 3+1.
    // Round 2: Alice defaults to D, Bob D → C count 0: 3 each.
    assert_eq!(figure(&f, "payoff.Alice"), Some(6.0));
    assert_eq!(figure(&f, "payoff.Bob"), Some(7.0));
    assert_eq!(figure(&f, "decision_failures"), Some(2.0));
    assert_eq!(figure(&f, "score.words.Alice"), Some(5.0));
    assert_eq!(figure(&f, "score.words.Bob"), Some(2.0));
    assert_eq!(figure(&f, "score.words"), Some(7.0));
    assert_eq!(figure(&f, "score.exclaims.Bob"), Some(2.0));
}

#[test]
fn bad_outcomes_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_scenario(
        dir.path(),
        serde_json::json!({
            "players": ["Alice", "Carol"],
            "decision": { "pattern": "(cooperate", "state": "rounds", "values": ["C", "D"], "cooperative": ["X"] },
            "payoff": { "table": { "C,C": [3, 3], "C,D": [0] } },
            "report": ["welfare", "happiness"]
        }),
    );
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "outcomes.players[1]: unknown agent \"Carol\"",
        "outcomes.decision.state: unknown state \"rounds\"",
        "outcomes.decision.cooperative[0]: \"X\" is not one of values",
        "outcomes.decision.pattern: not a valid regular expression",
        "outcomes.payoff.table[\"C,D\"]: 1 payoffs for 2 players",
        "outcomes.report[1]: unknown figure \"happiness\"",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    assert!(
        !err.contains("unknown figure \"welfare\""),
        "a broken payoff's figures are not unknown too:\n{err}"
    );
    let path = write_scenario(
        dir.path(),
        serde_json::json!({
            "decision": { "pattern": "(c|d)", "values": ["C", "D"] },
            "payoff": { "table": { "C,C": [3, 3], "C,D": [0, 5], "D,C": [5, 0] } }
        }),
    );
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("outcomes.payoff.table: missing combinations: D,D"),
        "{err}"
    );
    let path = write_scenario(
        dir.path(),
        serde_json::json!({ "decision": { "pattern": "(\\d+)" }, "payoff": { "formula": "own * bonus" } }),
    );
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("outcomes.payoff.formula: unknown name(s) bonus (known: own, sum"),
        "{err}"
    );
}

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = sopsim()
        .arg("bench")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn scripted_bench(out: &Path, seeds: &str, jobs: &str) -> (i32, String, String) {
    let pd = scenario_path("prisoners_dilemma");
    let pg = scenario_path("public_goods");
    bench(&[
        &pd,
        &pg,
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--seeds",
        seeds,
        "--jobs",
        jobs,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_report_is_byte_identical_for_the_same_seeds_whatever_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (code, stdout, stderr) = scripted_bench(&a, "4", "1");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("16 runs this time (0 already finished)"),
        "{stdout}"
    );
    let (code, _, stderr) = scripted_bench(&b, "4", "8");
    assert_eq!(code, 0, "{stderr}");
    let report = read(&a.join("report.json"));
    assert_eq!(report, read(&b.join("report.json")));

    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        json["difference"],
        "competitive - cooperative, paired by seed"
    );
    let pd = &json["scenarios"][0];
    assert_eq!(pd["scenario"], "prisoners_dilemma");
    assert_eq!(pd["runs"]["cooperative"]["finished"], 4);
    assert_eq!(pd["runs"]["competitive"]["ended_by"]["end"], 4);
    // Scripted moves depend on the seed only, so the modes pay the same...
    let welfare = &pd["figures"]["welfare"];
    assert_eq!(welfare["difference"]["mean"], 0.0);
    assert_eq!(
        welfare["values"]["cooperative"],
        welfare["values"]["competitive"]
    );
    let per_seed: Vec<f64> = welfare["values"]["cooperative"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(
        per_seed.windows(2).any(|w| w[0] != w[1]),
        "seeds should differ: {per_seed:?}"
    );
    // ...but competitive prompts see only the current round.
    assert!(
        pd["figures"]["prompt_tokens_per_turn"]["difference"]["mean"]
            .as_f64()
            .unwrap()
            < 0.0
    );
    let ci = &welfare["by_mode"]["cooperative"]["ci95"];
    assert!(ci[0].as_f64().unwrap() <= ci[1].as_f64().unwrap());

    let md = read(&a.join("report.md"));
    assert!(
        md.contains("## prisoners_dilemma") && md.contains("| welfare |"),
        "{md}"
    );
    for file in [
        "prisoners_dilemma-welfare",
        "public_goods-cooperation_rate",
        "public_goods-tokens-by-turn",
    ] {
        for ext in ["svg", "png"] {
            let p = a.join("plots").join(format!("{file}.{ext}"));
            assert!(
                std::fs::metadata(&p)
                    .map(|m| m.len() > 1000)
                    .unwrap_or(false),
                "{}",
                p.display()
            );
        }
    }
    let timing: serde_json::Value = serde_json::from_str(&read(&a.join("timing.json"))).unwrap();
    assert_eq!(timing["this_invocation"]["runs"], 16);
    // What the model's cache held depends on what else ran beside: the share of prompt
    // tokens read from it, over the run and by state, is timing, not the report.
    let figures = &timing["by_scenario"]["prisoners_dilemma"];
    for figure in ["prompt_cache_share", "prompt_cache_share.round"] {
        assert!(
            figures[figure]["cooperative"]["n"].as_u64() == Some(4),
            "{figures}"
        );
    }
    assert!(!read(&a.join("report.json")).contains("prompt_cache_share"));
    // Each run's folder is a run's, as `sopsim run --out` writes it, less the journal a
    // resume reads: a benchmark runs a killed run again from its start.
    let run = a.join("runs/prisoners_dilemma/competitive/seed-2");
    let identity: serde_json::Value = serde_json::from_str(&read(&run.join("run.json"))).unwrap();
    assert_eq!(
        (identity["seed"].as_u64(), identity["mode"].as_str()),
        (Some(2), Some("competitive"))
    );
    assert!(run.join("summary.json").is_file() && !run.join("calls.jsonl").exists());
}

#[test]
fn a_rerun_resumes_unfinished_runs_and_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b");
    let (code, _, stderr) = scripted_bench(&out, "3", "2");
    assert_eq!(code, 0, "{stderr}");
    let full = read(&out.join("report.json"));

    // Rerun: nothing to do.
    let (code, stdout, _) = scripted_bench(&out, "3", "2");
    assert_eq!(code, 0);
    assert!(
        stdout.contains("0 runs this time (12 already finished)"),
        "{stdout}"
    );
    assert_eq!(read(&out.join("report.json")), full);

    // A run killed mid-way leaves a partial transcript and no summary; another was
    // never started. Both run again; the report comes out the same.
    let killed = out.join("runs/prisoners_dilemma/competitive/seed-1");
    std::fs::remove_file(killed.join("summary.json")).unwrap();
    let transcript = read(&killed.join("transcript.jsonl"));
    let first_line = transcript.lines().next().unwrap();
    std::fs::write(
        killed.join("transcript.jsonl"),
        format!("{first_line}\n{{\"seq\":1,\"sta"),
    )
    .unwrap();
    std::fs::remove_dir_all(out.join("runs/public_goods/cooperative/seed-2")).unwrap();
    std::fs::remove_file(out.join("report.json")).unwrap();
    let (code, stdout, stderr) = scripted_bench(&out, "3", "2");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("2 runs this time (10 already finished)"),
        "{stdout}"
    );
    assert_eq!(read(&out.join("report.json")), full);
    assert_eq!(read(&killed.join("transcript.jsonl")), transcript);

    // More seeds extend the same folder; other settings are refused.
    let (code, stdout, _) = scripted_bench(&out, "4", "2");
    assert_eq!(code, 0);
    assert!(
        stdout.contains("4 runs this time (12 already finished)"),
        "{stdout}"
    );
    let pd = scenario_path("prisoners_dilemma");
    let (code, _, stderr) = bench(&[
        &pd,
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--max-turns",
        "3",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--out") && stderr.contains("at most 3 turns"),
        "{stderr}"
    );
}

#[test]
fn runs_that_fail_are_counted_and_listed() {
    // Nothing listens on this port: every model call fails, so every run does.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b");
    let pd = scenario_path("prisoners_dilemma");
    let (code, stdout, stderr) = bench(&[
        &pd,
        "--llm",
        "openai",
        "--base-url",
        &format!("http://127.0.0.1:{port}/v1"),
        "--max-attempts",
        "1",
        "--model",
        "test-model",
        "--embedder",
        "hash",
        "--seeds",
        "2",
        "--modes",
        "competitive",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("2 run(s) failed"), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&read(&out.join("report.json"))).unwrap();
    let sc = &report["scenarios"][0];
    assert_eq!(sc["runs"]["competitive"]["failed"], 2);
    assert_eq!(sc["runs"]["competitive"]["finished"], 0);
    let failed = sc["failed_runs"].as_array().unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0]["id"], "prisoners_dilemma/competitive/seed-0");
    assert!(
        failed[0]["error"].as_str().unwrap().contains("127.0.0.1"),
        "{}",
        failed[0]
    );
    assert!(sc["figures"]["welfare"]["by_mode"]["competitive"].is_null());
    assert!(read(&out.join("report.md")).contains("Failed runs"));
}

#[test]
fn bad_bench_flags_exit_2_naming_the_flag() {
    let pd = scenario_path("prisoners_dilemma");
    for (args, expected) in [
        (vec![pd.as_str(), "--seeds", "0"], "--seeds"),
        (vec![pd.as_str(), "--jobs", "0"], "--jobs"),
        (vec![pd.as_str(), "--modes", "friendly"], "--modes"),
        (vec!["missing.json"], "missing.json"),
    ] {
        let (code, _, stderr) = bench(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let max = u64::MAX.to_string();
    for (args, expected) in [
        (
            vec!["--first-seed", max.as_str(), "--seeds", "2"],
            "--seeds",
        ),
        (vec!["--seeds", "100000000000"], "--seeds"),
        (vec!["--out", file.to_str().unwrap()], "--out"),
    ] {
        let mut all = vec![pd.as_str(), "--llm", "scripted", "--embedder", "hash"];
        all.extend(args);
        let (code, _, stderr) = bench(&all);
        assert_eq!(code, 2, "{all:?}: {stderr}");
        assert!(stderr.contains(expected), "{all:?}: {stderr}");
    }
    let human = scenario_path("customer_service");
    let (code, _, stderr) = bench(&[&human, "--llm", "scripted", "--embedder", "hash"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("human"), "{stderr}");
}

#[test]
fn loop_bounds_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let mut s: serde_json::Value =
        serde_json::from_str(&read(Path::new(&scenario_path("prisoners_dilemma")))).unwrap();
    let t = &mut s["sop"]["states"]["round"]["transition"];
    t["on_max_visits"] = "nowhere".into();
    t.as_object_mut().unwrap().remove("max_visits");
    let path = dir.path().join("loop.json");
    std::fs::write(&path, s.to_string()).unwrap();
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sop.states.round.transition.on_max_visits: set max_visits too"),
        "{err}"
    );
    assert!(
        err.contains(
            "sop.states.round.transition.on_max_visits: \"nowhere\" is not in this state's next"
        ),
        "{err}"
    );
    // Without the bound, a round that only loops back can never reach the end.
    let t = &mut s["sop"]["states"]["round"];
    t["transition"]
        .as_object_mut()
        .unwrap()
        .remove("on_max_visits");
    t["next"] = serde_json::json!(["round"]);
    std::fs::write(&path, s.to_string()).unwrap();
    let out = sopsim()
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sop.states.round: no way to the end"), "{err}");
}

#[test]
fn a_replayed_recording_gives_the_recorded_report_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let pd = scenario_path("prisoners_dilemma");
    let common = ["--embedder", "hash", "--seeds", "3", "--quiet"];
    let out = |name: &str| dir.path().join(name).display().to_string();
    let (code, _, stderr) = bench(
        &[
            &[
                pd.as_str(),
                "--llm",
                "scripted",
                "--record",
                rec.to_str().unwrap(),
                "--out",
                &out("a"),
            ][..],
            &common,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    // Every seed's calls are kept apart, even where two seeds send the same prompt.
    let (code, _, stderr) = bench(
        &[
            &[
                pd.as_str(),
                "--replay",
                rec.to_str().unwrap(),
                "--jobs",
                "1",
                "--out",
                &out("b"),
            ][..],
            &common,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        read(&dir.path().join("a/report.json")),
        read(&dir.path().join("b/report.json"))
    );
}

#[test]
fn a_low_open_file_limit_caps_the_runs_at_once_and_none_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sopsim = env!("CARGO_BIN_EXE_sopsim");
    let pd = scenario_path("prisoners_dilemma");
    let run = Command::new("sh")
        .args([
            "-c",
            "ulimit -n 100 && exec \"$@\"",
            "sh",
            sopsim,
            "bench",
            &pd,
        ])
        .args(["--llm", "scripted", "--embedder", "hash", "--seeds", "40"])
        .args(["--jobs", "2000", "--out", out.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("the open-file limit is 100"),
        "{stdout}{stderr}"
    );
    let report: serde_json::Value = serde_json::from_str(&read(&out.join("report.json"))).unwrap();
    for counts in report["scenarios"][0]["runs"].as_object().unwrap().values() {
        assert_eq!(counts["finished"], 40, "{counts}");
    }
}
