//! Worlds and strategy players through the command line: a scripted commons whose lake
//! after each round, collapse round and `ended_by` are computed here by hand, and so
//! are GovSim's pasture and river; a
//! strategy against a scripted opponent; a killed run that resumes to the same world;
//! bad worlds refused naming their fields; a world that breaks mid-run keeping every
//! finished turn; and the benchmark's world figures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::common::run_with_input;

fn sopsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Two fishers on a lake of 100 tons that doubles after each month's catch (capped at
/// 100) and collapses below 5; their catches are scripted, month by month.
fn commons(dir: &Path, ann: &[u32], bo: &[u32]) -> PathBuf {
    let list = |c: &[u32]| c.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let doc = json!({
        "name": "commons",
        "agents": {
            "Ann": {"roles": {"fish": "Fisher A"}},
            "Bo": {"roles": {"fish": "Fisher B"}}
        },
        "world": {
            "variables": {
                "fish": {"initial": 100, "min": 0, "max": 100, "state": "fish",
                         "update": "[100, 2 * ([0, world.fish - sum] | max)] | min"},
                "caught": {"per_agent": true, "initial": 0, "state": "fish",
                           "update": "me.caught + own"}
            },
            "end_if": {"collapse": "world.fish < 10"}
        },
        "sop": {"start": "fish", "max_turns": 100, "states": {"fish": {
            "roles": ["Fisher A", "Fisher B"], "turns": "simultaneous",
            "environment_prompt": "The lake holds {{ world.fish }} tons in month {{ round }}.",
            "components": {
                "Fisher A": {"choice": {"range": [0, 100, 1], "after": "instead", "at_most": "world.fish"}},
                "Fisher B": {"choice": {"range": [0, 100, 1], "after": "instead", "at_most": "world.fish"}}
            },
            "transition": {"max_rounds": 1, "on_max_turns": "fish", "max_visits": 12,
                           "on_max_visits": "end"},
            "next": ["fish", "end"]
        }}},
        "outcomes": {"decision": {"state": "fish", "range": [0, 100]}, "payoff": {"formula": "own"},
                     "measures": {"share_left": "final.fish / initial.fish"}},
        "script": {"choices": {"Ann": list(ann), "Bo": list(bo)}}
    });
    let path = dir.join("commons.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_scripted_commons_keeps_its_lake_as_computed_by_hand_and_ends_on_collapse() {
    let dir = tempfile::tempdir().unwrap();
    // 100 - 30 = 70 → 100; 100 - 60 = 40 → 80; 80 - 70 = 10 → 20; 20 - 16 = 4 → 8.
    let path = commons(dir.path(), &[10, 30, 40, 8], &[20, 30, 30, 8]);
    let out = dir.path().join("run");
    let done = sopsim(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let world = lines(&out.join("world.jsonl"));
    let fish: Vec<f64> = world
        .iter()
        .map(|l| l["world"]["fish"].as_f64().unwrap())
        .collect();
    assert_eq!(fish, [100.0, 80.0, 20.0, 8.0]);
    assert_eq!(world[3]["agents"]["caught"], json!([88.0, 88.0]));
    assert_eq!(world[3]["ended_if"], "collapse");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "end_if");
    assert_eq!(summary["ended_if"], "collapse");
    assert_eq!(summary["world"]["rounds"], 4);
    assert_eq!(
        summary["turns"], 8,
        "the collapse round's turns, and no more"
    );
    // Prompts showed the lake as it stood: month 3 opened with 80 tons.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(events.contains("World after round 3: fish 20"), "{events}");
}

#[test]
fn a_benchmark_reports_the_worlds_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = commons(dir.path(), &[10, 30, 40, 8], &[20, 30, 30, 8]);
    let out = dir.path().join("bench");
    let done = sopsim(&[
        "bench",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--seeds",
        "2",
        "--modes",
        "cooperative",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let figure = |name: &str| {
        report["scenarios"][0]["figures"][name]["by_mode"]["cooperative"]["mean"].clone()
    };
    assert_eq!(figure("rounds_survived"), json!(4.0));
    assert_eq!(figure("ended_early"), json!(1.0));
    assert_eq!(figure("world.fish.final"), json!(8.0));
    assert_eq!(figure("world.fish.min"), json!(8.0));
    assert_eq!(figure("world.caught.final"), json!(88.0));
    assert_eq!(figure("measure.share_left"), json!(0.08));
    assert_eq!(figure("welfare"), json!(176.0));
    let rounds = &report["scenarios"][0]["rounds"]["world.fish"]["cooperative"];
    assert_eq!(rounds.as_array().unwrap().len(), 4, "the lake by round");
}

/// A prisoner's dilemma: `You` scripted, `Other` playing `strategy`.
fn dilemma(dir: &Path, you: &[&str], strategy: Value) -> PathBuf {
    let doc = json!({
        "name": "dilemma",
        "agents": {
            "You": {"roles": {"play": "Player 1"}},
            "Other": {"roles": {"play": "Player 2"}, "strategy": strategy}
        },
        "sop": {"start": "play", "states": {"play": {
            "roles": ["Player 1", "Player 2"], "turns": "simultaneous",
            "components": {
                "Player 1": {"choice": {"values": ["C", "D"], "after": "instead"}},
                "Player 2": {"choice": {"values": ["C", "D"], "after": "instead"}}
            },
            "transition": {"max_rounds": 1, "on_max_turns": "play", "max_visits": you.len(),
                           "on_max_visits": "end"},
            "next": ["play", "end"]
        }}},
        "outcomes": {"players": ["You", "Other"],
                     "decision": {"state": "play", "values": ["C", "D"], "cooperative": ["C"]},
                     "payoff": {"table": {"C,C": [8, 8], "C,D": [0, 10], "D,C": [10, 0], "D,D": [5, 5]}}},
        "script": {"choices": {"You": you}}
    });
    let path = dir.join("dilemma.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

/// The strategy's moves in a run against `you`.
fn strategy_moves(you: &[&str], strategy: Value) -> (Vec<String>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dilemma(dir.path(), you, strategy);
    let out = dir.path().join("run");
    let done = sopsim(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let moves = lines(&out.join("transcript.jsonl"))
        .iter()
        .filter(|m| m["name"] == "Other")
        .map(|m| m["decision"]["value"].as_str().unwrap().to_string())
        .collect();
    let summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    (moves, summary)
}

#[test]
fn strategies_answer_a_scripted_opponent_exactly_and_ask_no_model() {
    let you = ["C", "D", "C", "C", "D", "C"];
    let (tft, summary) = strategy_moves(
        &you,
        json!({"rule": "tit_for_tat", "say": "I play {{ choice }}."}),
    );
    assert_eq!(tft, ["C", "C", "D", "C", "C", "D"], "copies your last move");
    assert!(
        summary["by_agent"].get("Other").is_none(),
        "no model call: {}",
        summary["by_agent"]
    );
    let (grim, _) = strategy_moves(&you, json!({"rule": "grim_trigger"}));
    assert_eq!(
        grim,
        ["C", "C", "D", "D", "D", "D"],
        "never cooperates again"
    );
    let (once, _) = strategy_moves(&you, json!({"rule": "defect_once_then_cooperate"}));
    assert_eq!(once, ["D", "C", "C", "C", "C", "C"]);
}

#[test]
fn bad_worlds_and_strategies_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(commons(dir.path(), &[1], &[1])).unwrap())
            .unwrap();
    type Edit = fn(&mut Value);
    let cases: Vec<(Edit, &str)> = vec![
        (
            |d| d["world"]["variables"]["fish"]["update"] = json!("world.fsh - sum"),
            "world.variables.fish.update: world.fsh: no such global variable (globals: fish)",
        ),
        (
            |d| d["world"]["variables"]["fish"]["update"] = json!("me.caught"),
            "world.variables.fish.update: me.caught: no agent is speaking here, so there is no `me`",
        ),
        (
            |d| {
                d["world"]["variables"]["fish"]["update"] = json!("world.quota - sum");
                d["world"]["variables"]["quota"] =
                    json!({"initial": 10, "state": "fish", "update": "world.fish / 10"});
            },
            "world.variables.fish.update: fish → quota → fish read each other in the same round",
        ),
        (
            |d| d["world"]["end_if"]["collapse"] = json!("world.fish <"),
            "world.end_if.collapse: not a valid expression",
        ),
        (
            |d| d["world"]["end_if"]["collapse"] = json!("'low'"),
            "world.end_if.collapse: gives a value of type string, not true or false",
        ),
        (
            |d| {
                d["sop"]["states"]["fish"]["components"]["Fisher A"]["choice"]["at_most"] =
                    json!("world.lake")
            },
            "sop.states.fish.components[\"Fisher A\"].choice.at_most: world.lake: no such global variable",
        ),
        (
            |d| d["world"]["variables"]["fish"]["max"] = json!(-1),
            "world.variables.fish.max: -1: must be above min (0)",
        ),
        (
            |d| d["agents"]["Bo"]["strategy"] = json!({"formula": "'C' if"}),
            "agents.Bo.strategy.formula: not a valid expression",
        ),
        (
            |d| {
                d["sop"]["states"]["fish"]["environment_prompt"] = json!("{{ world.fish }")
            },
            "sop.states.fish.environment_prompt: not a template that can be filled",
        ),
    ];
    for (i, (edit, says)) in cases.into_iter().enumerate() {
        let mut doc = base.clone();
        edit(&mut doc);
        let path = dir.path().join(format!("bad-{i}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        let out = sopsim(&["validate", path.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{says}: {err}");
        assert!(err.contains(says), "expected {says:?} in: {err}");
    }
}

#[test]
fn a_world_that_breaks_mid_run_stops_it_naming_the_round_and_keeps_the_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = commons(dir.path(), &[10, 30, 40, 8], &[20, 30, 30, 8]);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // Divides by zero when both fishers take 30 in month 2.
    doc["world"]["variables"]["caught"]["update"] = json!("me.caught + own / (60 - sum)");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = dir.path().join("run");
    let done = sopsim(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&done);
    assert_eq!(done.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "world.variables.caught.update: round 2, agent Ann: `own / (60 - sum)` gives inf"
        ),
        "{err}"
    );
    let transcript = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(transcript.lines().count(), 4, "both rounds' turns are kept");
    assert_eq!(
        lines(&out.join("world.jsonl")).len(),
        1,
        "the first round's world"
    );
}

#[test]
fn a_killed_run_resumes_to_the_same_world() {
    let dir = tempfile::tempdir().unwrap();
    let path = commons(dir.path(), &[10, 30, 40, 8], &[20, 30, 30, 8]);
    let args = |out: &Path, extra: &[&str]| {
        let mut a = vec!["run".to_string(), path.display().to_string()];
        a.extend(
            [
                "--human",
                "Ann",
                "--llm",
                "scripted",
                "--embedder",
                "hash",
                "--out",
            ]
            .map(String::from),
        );
        a.push(out.display().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let typed = |m: &[u32]| m.iter().map(|m| format!("{m}\n")).collect::<String>();
    let moves = [10, 30, 40, 8];
    let whole = dir.path().join("whole");
    let a = args(&whole, &[]);
    let (code, _, err) = run_with_input(
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        &typed(&moves),
    );
    assert_eq!(code, 0, "{err}");

    let out = dir.path().join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args(&out, &[]))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed(&moves[..2]).as_bytes()).unwrap();
    // Two rounds, then the third waits for Ann: killed there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(out.join("world.jsonl")).map_or(0, |t| t.lines().count()) < 2 {
        assert!(std::time::Instant::now() < deadline, "no second round");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    let resumed = args(&out, &["--resume"]);
    let (code, _, err) = run_with_input(
        &resumed.iter().map(String::as_str).collect::<Vec<_>>(),
        &typed(&moves[2..]),
    );
    assert_eq!(code, 0, "{err}");
    for file in ["world.jsonl", "transcript.jsonl"] {
        assert_eq!(
            std::fs::read(whole.join(file)).unwrap(),
            std::fs::read(out.join(file)).unwrap(),
            "{file}"
        );
    }
}

/// The prisoner's dilemma of `dilemma`, `You` on the script labelled `alpha` and
/// `Other` on the script labelled `beta`, over `rounds` rounds.
fn two_models(dir: &Path, rounds: usize) -> PathBuf {
    let path = dilemma(dir, &vec!["C"; rounds], json!({"rule": "always_cooperate"}));
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let agents = doc["agents"].as_object_mut().unwrap();
    agents["You"]["llm"] = json!({"backend": "scripted", "model": "alpha"});
    agents["Other"] = json!({"roles": {"play": "Player 2"},
                             "llm": {"backend": "scripted", "model": "beta"}});
    doc["script"]["choices"]["Other"] = json!(["{one_of:C|D}"]);
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

#[test]
fn two_models_play_each_other_with_figures_by_model_whatever_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_models(dir.path(), 4);
    let out = dir.path().join("run");
    let done = sopsim(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let by_model = summary["tokens_by_model"].as_object().unwrap();
    // The run's own backend made the summary.
    assert_eq!(
        by_model.keys().collect::<Vec<_>>(),
        ["scripted", "scripted:alpha", "scripted:beta"],
        "{summary}"
    );
    assert_eq!(by_model["scripted:alpha"]["calls"], 4);
    assert!(summary["llm"].as_str().unwrap().contains("scripted:alpha"));

    let bench = |jobs: &str| {
        let out = dir.path().join(format!("bench-{jobs}"));
        let done = sopsim(&[
            "bench",
            path.to_str().unwrap(),
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            "4",
            "--jobs",
            jobs,
            "-q",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(done.status.success(), "{}", stderr(&done));
        out
    };
    let (one, four) = (bench("1"), bench("4"));
    for seed in 0..4 {
        let t = |dir: &Path| {
            std::fs::read(dir.join(format!(
                "runs/dilemma/cooperative/seed-{seed}/transcript.jsonl"
            )))
            .unwrap()
        };
        assert_eq!(t(&one), t(&four), "seed {seed}");
    }
    let report: Value =
        serde_json::from_slice(&std::fs::read(one.join("report.json")).unwrap()).unwrap();
    let figures = &report["scenarios"][0]["figures"];
    assert_eq!(
        figures["cooperation_rate.by.scripted:alpha"]["by_mode"]["cooperative"]["mean"], 1.0,
        "You always cooperate"
    );
    assert!(figures["payoff.by.scripted:beta"]["by_mode"]["cooperative"]["mean"].is_number());
}

/// A shipped GovSim commons with its first member's amounts scripted month by month
/// and the others' fixed, run to its end: its world's lines.
fn scripted_commons(dir: &Path, file: &str, first: &[u32], others: u32) -> Vec<Value> {
    let text = std::fs::read_to_string(crate::common::root().join(file)).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let roles: Vec<String> = doc["script"]["choices"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for (i, role) in roles.iter().enumerate() {
        let amounts: Vec<String> = match i {
            0 => first.iter().map(u32::to_string).collect(),
            _ => vec![others.to_string()],
        };
        doc["script"]["choices"][role] = json!(amounts);
    }
    let path = dir.join("commons.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = dir.join("run");
    let done = sopsim(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        (&summary["ended_by"], &summary["ended_if"]),
        (&json!("end_if"), &json!("collapse"))
    );
    lines(&out.join("world.jsonl"))
}

#[test]
fn govsims_pasture_and_river_run_as_computed_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // The pasture: the first shepherd grazes 30 then 40 flocks, the others 10 each.
    // Month 1: 100 − (30 + 40) = 30 left → 60 hectares; month 2: 60 − (40 + 40) < 0,
    // nothing left: the pasture collapses.
    let world = scripted_commons(
        dir.path(),
        "scenarios/experiments/govsim_pasture.json",
        &[30, 40],
        10,
    );
    let at = |state: &str, key: &str| -> Vec<f64> {
        world
            .iter()
            .filter(|l| l["state"] == state)
            .map(|l| l["world"][key].as_f64().unwrap())
            .collect()
    };
    assert_eq!(at("graze", "left"), [30.0, 0.0]);
    assert_eq!(at("talk", "grass"), [60.0]);
    let last = world.last().unwrap();
    assert_eq!(
        last["agents"]["income"],
        json!([70.0, 20.0, 20.0, 20.0, 20.0])
    );
    // Over a tenth of the pasture at the month's start (10, then 6): 30 and 40, and
    // the others' 10 in month 2.
    assert_eq!(last["agents"]["overused"], json!([2.0, 1.0, 1.0, 1.0, 1.0]));

    // The river: the first owner makes 25 and 45 pallets in turn, the others 5 each.
    // 100 − 45 = 55 → 100%; 100 − 65 = 35 → 70%; 70 − 45 = 25 → 50%; 50 − 65 < 0:
    // the river collapses in month 4.
    let dir = tempfile::tempdir().unwrap();
    let world = scripted_commons(
        dir.path(),
        "scenarios/experiments/govsim_pollution.json",
        &[25, 45],
        5,
    );
    let at = |state: &str, key: &str| -> Vec<f64> {
        world
            .iter()
            .filter(|l| l["state"] == state)
            .map(|l| l["world"][key].as_f64().unwrap())
            .collect()
    };
    assert_eq!(at("produce", "left"), [55.0, 35.0, 25.0, 0.0]);
    assert_eq!(at("talk", "water"), [100.0, 70.0, 50.0]);
    let last = world.last().unwrap();
    assert_eq!(
        last["agents"]["income"],
        json!([140.0, 20.0, 20.0, 20.0, 20.0])
    );
    // Over a tenth of the river (10, 10, 7 and 5) every month; 5 is not over 5.
    assert_eq!(last["agents"]["overused"], json!([4.0, 0.0, 0.0, 0.0, 0.0]));
}
