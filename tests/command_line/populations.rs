//! Populations from the command line: persona tables and edge lists read from the
//! scenario's folder, and every kind of bad population refused with exit 2 naming the
//! field.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

/// A game of `population` members in one simultaneous state, written into `dir`.
fn game(dir: &Path, population: Value) -> String {
    let doc = json!({
        "name": "crowd",
        "populations": {"crowd": population},
        "sop": {"start": "play", "max_turns": 1_000_000, "states": {"play": {
            "roles": ["Player"], "turns": "simultaneous",
            "transition": {"max_rounds": 1}, "next": ["end"]
        }}},
        "script": {"roles": {"Player": ["Round {n}: I am {name}."]}}
    });
    let path = dir.join("crowd.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path.display().to_string()
}

fn with(base: &Value, key: &str, value: Value) -> Value {
    let mut v = base.clone();
    v[key] = value;
    v
}

fn validate(path: &str) -> (i32, String) {
    let out = sopsim().args(["validate", path]).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn bad_populations_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("people.csv"), "temper\ncalm\n").unwrap();
    std::fs::write(dir.path().join("two.csv"), "temper\ncalm\nbold\n").unwrap();
    std::fs::write(dir.path().join("ragged.csv"), "temper,age\ncalm\n").unwrap();
    std::fs::write(dir.path().join("edges.csv"), "P1,P2\nP2,P9\n").unwrap();
    let base = json!({"name": "P{i}", "count": 3, "roles": {"play": "Player"}});
    let link = |n: &Path| {
        let rel = pathdiff(n, dir.path());
        rel.display().to_string()
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&base, "count", json!(0)), "populations.crowd.count"),
        (
            // Refused for the memory it needs first, on any machine with less than
            // about 570 GiB free; for being above the maximum on any other.
            with(&base, "count", json!(100_000_001)),
            "100000001",
        ),
        (
            with(&base, "name", json!("P")),
            "populations.crowd.name: \"P\" has no {i}",
        ),
        (
            with(&base, "personas", json!("missing.csv")),
            "populations.crowd.personas: no such file",
        ),
        (
            with(
                &base,
                "personas",
                json!(link(&outside.path().join("people.csv"))),
            ),
            "is outside the scenario's folder",
        ),
        (
            with(&base, "personas", json!("two.csv")),
            "populations.crowd.personas: 2 row(s) for 3 members",
        ),
        (
            with(&base, "personas", json!("ragged.csv")),
            "line 2: 1 field(s) where the header has 2",
        ),
        (
            with(&base, "draw", json!({"age": {"normal": [1, 2]}})),
            "populations.crowd.draw.age",
        ),
        (
            with(&base, "draw", json!({"age": {"integers": [9, 1]}})),
            "populations.crowd.draw.age",
        ),
        (
            with(&base, "network", json!({"kind": "ring", "k": 4})),
            "populations.crowd.network.k: 4: must be below count (3)",
        ),
        (
            with(&base, "network", json!({"kind": "random", "p": 1.5})),
            "populations.crowd.network.p",
        ),
        (
            with(
                &base,
                "network",
                json!({"kind": "file", "path": "edges.csv"}),
            ),
            "line 2: \"P9\" is not a member of this population",
        ),
        (
            with(&base, "network", json!({"kind": "web"})),
            "populations.crowd.network",
        ),
        (
            with(&base, "roles", json!({"play": "Judge"})),
            "populations.crowd.roles.play: role \"Judge\" is not among the roles",
        ),
        (
            with(&base, "roles", json!({"vote": "Player"})),
            "populations.crowd.roles.vote: unknown state",
        ),
        (
            with(&base, "style", json!("{mood}")),
            "populations.crowd.style: unknown placeholder {mood}",
        ),
    ];
    let named = {
        let path = game(dir.path(), base.clone());
        let mut doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        doc["agents"] = json!({"crowd": {"roles": {"play": "Player"}}});
        std::fs::write(&path, doc.to_string()).unwrap();
        validate(&path)
    };
    assert_eq!(named.0, 2);
    assert!(
        named
            .1
            .contains("populations.crowd: \"crowd\" names an agent too"),
        "{}",
        named.1
    );
    for (population, expected) in cases {
        let path = game(dir.path(), population.clone());
        let (code, text) = validate(&path);
        assert_eq!(code, 2, "{population}: {text}");
        assert!(
            text.contains(expected),
            "{population}: expected {expected:?} in:\n{text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
}

/// `target` relative to `base` (`../other/people.csv`).
fn pathdiff(target: &Path, base: &Path) -> std::path::PathBuf {
    let depth = base.components().count();
    let mut rel = std::path::PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.join(target.strip_prefix("/").unwrap())
}

#[test]
fn a_persona_table_and_an_edge_list_come_from_the_scenarios_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("people.csv"),
        "temper,age\ncalm,30\nbold,41\nshy,25\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("edges.csv"), "P1,P2\nP2,P3\n").unwrap();
    let path = game(
        dir.path(),
        json!({"name": "P{i}", "count": 3, "roles": {"play": "Player"},
               "style": "{temper}, {age}.", "personas": "people.csv",
               "network": {"kind": "file", "path": "edges.csv"}}),
    );
    let out_dir = dir.path().join("out");
    let out = sopsim()
        .args(["run", &path, "--llm", "scripted", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transcript = std::fs::read_to_string(out_dir.join("transcript.jsonl")).unwrap();
    let names: Vec<String> = transcript
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["P1", "P2", "P3"]);
}

#[test]
fn a_population_bench_is_the_same_at_one_and_four_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = ["spatial_dilemma", "networked_public_goods"]
        .map(|s| crate::common::root().join(format!("scenarios/{s}.json")));
    let bench = |out: &Path, jobs: &str| {
        let status = sopsim()
            .arg("bench")
            .args(&scenarios)
            .args([
                "--llm", "scripted", "--seeds", "2", "--quiet", "--jobs", jobs, "--out",
            ])
            .arg(out)
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    bench(&a, "1");
    bench(&b, "4");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&a.join("report.json")), read(&b.join("report.json")));
    let run = "runs/spatial_dilemma/competitive/seed-1";
    for file in ["transcript.jsonl", "network.json"] {
        assert_eq!(
            read(&a.join(run).join(file)),
            read(&b.join(run).join(file)),
            "{file}"
        );
    }
    let report: Value = serde_json::from_str(&read(&a.join("report.json"))).unwrap();
    let rounds = &report["scenarios"][0]["rounds"]["share.COOPERATE"]["cooperative"];
    assert_eq!(rounds.as_array().unwrap().len(), 5, "a summary per round");
    assert!(a
        .join("plots/spatial_dilemma-by-round-share_COOPERATE.png")
        .is_file());
}

#[test]
fn a_population_too_large_for_memory_is_refused_before_it_starts() {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    let free_kib: u64 = info
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    // 100,000 members of one round, with a turn limit of ten rounds, are estimated at
    // about 1.8 GiB a run: more runs at once than fit.
    let jobs = (free_kib / (1 << 20) + 1).to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = game(
        dir.path(),
        json!({"name": "P{i}", "count": 100_000, "roles": {"play": "Player"}}),
    );
    let out = sopsim()
        .args([
            "bench", &path, "--llm", "scripted", "--quiet", "--jobs", &jobs, "--seeds", &jobs,
            "--out",
        ])
        .arg(dir.path().join("bench"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("100000 agents need about"), "{stderr}");
    assert!(
        stderr.contains("or fewer runs at once (--jobs sets how many run at once)"),
        "{stderr}"
    );
    assert!(!dir.path().join("bench/runs").exists(), "nothing started");
}

/// Members that would not fit in memory are counted before any is made: `validate`
/// refuses the file naming `populations`, in its JSON verdict too.
#[test]
fn validate_refuses_members_that_would_not_fit_naming_the_populations() {
    let dir = tempfile::tempdir().unwrap();
    let path = game(
        dir.path(),
        json!({"name": "P{i}", "count": 100_000_000, "roles": {"play": "Player"}}),
    );
    let validate = |flags: &[&str]| {
        let out = sopsim()
            .args(["validate", &path])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        out
    };
    let stderr = String::from_utf8_lossy(&validate(&[]).stderr).to_string();
    assert!(stderr.contains("100000000 agents need about"), "{stderr}");
    let out = validate(&["--format", "json"]);
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdict["valid"], false);
    assert_eq!(verdict["problems"][0]["path"], "populations");
    let message = verdict["problems"][0]["message"].as_str().unwrap();
    assert!(message.contains("use fewer members"), "{message}");
}

#[test]
fn replicas_share_a_round_and_a_server_that_dies_is_left_out_with_a_warning() {
    use crate::common::server::{Behaviour, Server};
    let dir = tempfile::tempdir().unwrap();
    let path = game(
        dir.path(),
        json!({"name": "P{i}", "count": 90, "roles": {"play": "Player"}}),
    );
    let run = |urls: &str, folder: &str| {
        let out = sopsim()
            .args([
                "run",
                &path,
                "--llm",
                "openai",
                "--model",
                "m",
                "--max-attempts",
                "2",
            ])
            .args(["--base-url", urls, "--concurrency", "4", "--quiet", "--out"])
            .arg(dir.path().join(folder))
            .env_remove("OPENAI_BASE_URL")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(folder).join("summary.json")).unwrap(),
        )
        .unwrap();
        summary["warnings"].to_string()
    };
    let servers: Vec<Server> = (0..3).map(|_| Server::start(Vec::new())).collect();
    let urls: Vec<&str> = servers.iter().map(|s| s.base.as_str()).collect();
    // Each member's turn, and whatever else the run asks (the minutes), counted by server.
    let turns = |s: &Server| {
        let said = |b: &Value| b.to_string().contains("You are P");
        s.requests().iter().filter(|(_, b)| said(b)).count()
    };
    let warnings = run(&urls.join(","), "three");
    let calls: Vec<usize> = servers.iter().map(|s| s.requests().len()).collect();
    assert_eq!(servers.iter().map(turns).sum::<usize>(), 90);
    assert!(
        calls.iter().all(|&n| (20..=40).contains(&n)),
        "about a third each: {calls:?}"
    );
    assert!(!warnings.contains("left out"), "{warnings}");

    // A server that dies after ten answers: the rest of the round goes to the others.
    let dying = Server::start_with(
        Vec::new(),
        Behaviour {
            dies_after: Some(10),
            ..Behaviour::default()
        },
    );
    let before = [turns(&servers[0]), turns(&servers[1])];
    let warnings = run(&format!("{},{},{}", urls[0], dying.base, urls[1]), "two");
    let after = [turns(&servers[0]), turns(&servers[1])];
    assert_eq!(dying.requests().len(), 10, "ten answers, then nothing");
    assert_eq!(
        after[0] + after[1] - before[0] - before[1] + turns(&dying),
        90,
        "every member's turn answered once, by one server or another"
    );
    assert!(warnings.contains("left out"), "{warnings}");
    assert!(
        warnings.contains(&dying.base.replace("http://", "")),
        "{warnings}"
    );
}
