//! A benchmark split into shards run by separate processes, then merged: the report is
//! byte-identical to the unsharded one (scripted, and replaying a recording), a killed
//! shard resumes, shards that do not belong together are refused, and the cluster
//! templates are what the engines expect (golden files, the YAML parsed).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::root;
use serde::Deserialize;

fn sopsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) {
    let out = sopsim(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scenarios() -> (String, String) {
    let s = |n: &str| {
        root()
            .join(format!("scenarios/{n}.json"))
            .display()
            .to_string()
    };
    (s("prisoners_dilemma"), s("public_goods"))
}

fn report(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("report.json")).unwrap()
}

#[test]
fn three_shards_merged_give_the_unsharded_report_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, pg) = scenarios();
    let common = [
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--seeds",
        "7",
        "-q",
    ];
    let bench = |out: &str, extra: &[&str]| {
        let mut args = vec!["bench", &pd, &pg];
        args.extend(common);
        args.extend(["--out", out]);
        args.extend(extra);
        ok(&args);
    };
    bench(&d("whole"), &[]);
    for i in 0..3 {
        bench(&d(&format!("shard-{i}")), &["--shard", &format!("{i}/3")]);
    }
    ok(&[
        "bench",
        "merge",
        &d("merged"),
        &d("shard-0"),
        &d("shard-1"),
        &d("shard-2"),
    ]);
    assert_eq!(
        report(&dir.path().join("whole")),
        report(&dir.path().join("merged"))
    );
    // Merging again changes nothing.
    ok(&[
        "bench",
        "merge",
        &d("merged"),
        &d("shard-2"),
        &d("shard-0"),
        &d("shard-1"),
    ]);
    assert_eq!(
        report(&dir.path().join("whole")),
        report(&dir.path().join("merged"))
    );
}

#[test]
fn shards_replaying_a_recording_merge_to_the_recorded_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, _) = scenarios();
    let common = ["--embedder", "hash", "--seeds", "4", "-q"];
    let mut args = vec!["bench", &pd, "--llm", "scripted", "--record"];
    let rec = d("rec");
    args.push(&rec);
    args.extend(common);
    let whole = d("whole");
    args.extend(["--out", &whole]);
    ok(&args);
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = d(&format!("shard-{i}"));
        let shard = format!("{i}/3");
        let mut args = vec!["bench", &pd, "--replay", &rec];
        args.extend(common);
        args.extend(["--out", &out, "--shard", &shard]);
        ok(&args);
        shards.push(out);
    }
    let merged = d("merged");
    let mut args = vec!["bench", "merge", &merged];
    args.extend(shards.iter().map(String::as_str));
    ok(&args);
    // The replayed runs describe their backend as a replay, so compare the figures.
    #[derive(Deserialize, PartialEq, Debug)]
    struct Figures {
        scenarios: serde_json::Value,
    }
    let read = |p: &str| -> Figures { serde_json::from_slice(&report(Path::new(p))).unwrap() };
    assert_eq!(read(&whole), read(&merged));
}

#[test]
fn a_killed_shard_resumes_and_the_merge_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, _) = scenarios();
    let args = |out: &str, shard: Option<&str>| {
        let mut a: Vec<String> = ["bench", &pd, "--llm", "scripted", "--embedder", "hash"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--seeds", "150", "--jobs", "2", "-q", "--out", out].map(String::from));
        if let Some(s) = shard {
            a.extend(["--shard".to_string(), s.to_string()]);
        }
        a
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        ok(&refs);
    };
    run(args(&d("whole"), None));
    run(args(&d("s0"), Some("0/2")));
    let mut killed = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args(&d("s1"), Some("1/2")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once it has made its folder (a loaded machine may take longer than the
    // wait below to get there), at whatever run it is on.
    let plan = dir.path().join("s1").join("manifest.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !plan.is_file() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let incomplete = sopsim(&["bench", "merge", &d("merged"), &d("s0"), &d("s1")]);
    if incomplete.status.success() {
        // The shard had already finished when it was killed: nothing to resume.
        assert_eq!(
            report(&dir.path().join("whole")),
            report(&dir.path().join("merged"))
        );
    } else {
        assert_eq!(incomplete.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&incomplete.stderr).contains("in no shard"));
    }
    run(args(&d("s1"), Some("1/2")));
    ok(&["bench", "merge", &d("merged"), &d("s0"), &d("s1")]);
    assert_eq!(
        report(&dir.path().join("whole")),
        report(&dir.path().join("merged"))
    );
}

#[test]
fn shards_that_do_not_belong_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, pg) = scenarios();
    let bench = |out: &str, file: &str, seeds: &str, shard: &str| {
        ok(&[
            "bench",
            file,
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            seeds,
            "-q",
            "--out",
            out,
            "--shard",
            shard,
        ])
    };
    bench(&d("a0"), &pd, "4", "0/2");
    bench(&d("a1"), &pd, "4", "1/2");
    bench(&d("b1"), &pd, "5", "1/2");
    bench(&d("c1"), &pg, "4", "1/2");
    let changed = dir.path().join("pd.json");
    std::fs::copy(&pd, &changed).unwrap();
    bench(&d("e0"), changed.to_str().unwrap(), "4", "0/2");
    bench(&d("e1"), changed.to_str().unwrap(), "4", "1/2");
    std::fs::write(&changed, std::fs::read_to_string(&pd).unwrap() + " ").unwrap();
    for (shards, code, expected) in [
        (
            vec![d("a0"), d("b1")],
            2,
            "is not a shard of the same benchmark",
        ),
        (
            vec![d("a0"), d("c1")],
            2,
            "is not a shard of the same benchmark",
        ),
        (vec![d("a0"), d("a0")], 2, "are both shard 0"),
        (vec![d("a0")], 1, "4 of 8 planned runs are in no shard"),
        (vec![d("e0"), d("e1")], 2, "the file changed"),
        (vec![d("nowhere")], 2, "nowhere: no such folder"),
    ] {
        let mut args = vec!["bench".to_string(), "merge".into(), d("merged")];
        args.extend(shards);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sopsim(&refs);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let partial = sopsim(&["bench", "merge", &d("partial"), &d("a0"), "--allow-missing"]);
    assert!(partial.status.success());
    for (flag, expected) in [
        ("3/3", "shard 3 of 3 does not exist"),
        ("0/0", "at least one shard"),
        ("env", "SLURM_ARRAY_TASK_ID"),
        ("x", "is not I/N"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
            .args(["bench", &pd, "--llm", "scripted", "--shard", flag])
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains("--shard") && stderr.contains(expected),
            "{flag}: {stderr}"
        );
    }
}

fn template(engine: &str) -> String {
    let out = sopsim(&[
        "bench",
        "template",
        engine,
        "--shards",
        "8",
        "--max-parallel",
        "4",
        "--out",
        "/shared/pd-bench",
        "--",
        "scenarios/prisoners_dilemma.json",
        "--seeds",
        "1000",
        "--jobs",
        "4",
        "--llm",
        "openai",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn golden(name: &str, text: &str) {
    let path = root().join("tests/golden/templates").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    assert_eq!(
        text,
        std::fs::read_to_string(&path).unwrap(),
        "{name} (UPDATE_GOLDEN=1 to accept)"
    );
}

#[test]
fn the_slurm_template_is_an_array_of_shards() {
    let script = template("slurm");
    golden("slurm.sh", &script);
    assert!(script.contains("#SBATCH --array=0-7%4"));
    assert!(script.contains("--shard env --shards 8"));
    assert!(script.contains("sopsim bench merge /shared/pd-bench /shared/pd-bench/shard-*"));
}

#[test]
fn the_kubernetes_template_is_an_indexed_job_and_a_merge_job() {
    let yaml = template("k8s");
    golden("k8s.yaml", &yaml);
    let docs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde_json::Value::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    let job = &docs[0]["spec"];
    assert_eq!(job["completionMode"], "Indexed");
    // A folder given on the volume is not put under it twice.
    let out = sopsim(&[
        "bench",
        "template",
        "k8s",
        "--shards",
        "2",
        "--out",
        "/data/b",
        "--",
        "scenarios/prisoners_dilemma.json",
    ]);
    let on_volume = String::from_utf8_lossy(&out.stdout);
    assert!(on_volume.contains("/data/b/shard-"), "{on_volume}");
    assert!(!on_volume.contains("/data/data"), "{on_volume}");
    assert_eq!(job["completions"], 8);
    assert_eq!(job["parallelism"], 4);
    assert_eq!(job["backoffLimitPerIndex"], 2);
    let pod = &job["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.windows(2).any(|w| w == ["--shards", "8"]));
    assert!(args.contains(&"/data/shared/pd-bench/shard-$(JOB_COMPLETION_INDEX)"));
    let env: Vec<&str> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, ["SOPSIM_MODELS", "OPENAI_BASE_URL", "OPENAI_API_KEY"]);
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "sopsim-data"
    );
    assert_eq!(docs[1]["metadata"]["name"], "sopsim-bench-merge");
    let bad = sopsim(&[
        "bench", "template", "slurm", "--shards", "2", "--out", "x", "--", "pd.json", "--out", "y",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--out"));
}

/// A shard whose files were edited so that a run id names a folder outside the merge's
/// output (absolute, or climbing with `..`), with its digest recomputed to match.
/// A shard folder of the whole benchmark of `scenario`: one cooperative run, seed 0.
fn one_run_shard(scenario: &str, out: &str) {
    ok(&[
        "bench",
        scenario,
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--seeds",
        "1",
        "--modes",
        "cooperative",
        "-q",
        "--out",
        out,
        "--shard",
        "0/1",
    ]);
}

#[test]
fn a_merge_refuses_run_ids_that_leave_its_folder_and_removes_nothing_outside() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, _) = scenarios();
    let victim = dir.path().join("victim");
    // It looks like a finished run, so that a merge following the forged id would take
    // it as the run's source and its destination.
    std::fs::create_dir_all(victim.join("cooperative/seed-0")).unwrap();
    std::fs::write(
        victim.join("cooperative/seed-0/summary.json"),
        r#"{"ended_by":"end"}"#,
    )
    .unwrap();
    std::fs::write(victim.join("keep.txt"), "not the merge's to remove").unwrap();
    let forge = |shard: &str, scenario: &str, id: &str| {
        one_run_shard(&pd, shard);
        let manifest = Path::new(shard).join("manifest.jsonl");
        let mut job: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(&manifest).unwrap().trim()).unwrap();
        job["id"] = id.into();
        job["scenario"] = scenario.into();
        std::fs::write(&manifest, format!("{job}\n")).unwrap();
        let settings = Path::new(shard).join("bench.json");
        let mut bench: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        bench["shard"]["scenarios"] = serde_json::json!([scenario]);
        let digest: String = Sha256::digest(format!("{id}\n"))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        bench["shard"]["ids_sha256"] = digest.into();
        std::fs::write(&settings, bench.to_string()).unwrap();
    };
    let absolute = victim.display().to_string();
    let inside_victim = format!("{absolute}/cooperative/seed-0");
    let cases = [
        ("absolute", absolute.as_str(), inside_victim.as_str()),
        ("dots", "..", "../cooperative/seed-0"),
        ("id only", "prisoners_dilemma", inside_victim.as_str()),
    ];
    for (name, scenario, id) in cases {
        let shard = d(&format!("shard-{}", name.replace(' ', "-")));
        forge(&shard, scenario, id);
        let out = sopsim(&["bench", "merge", &d("merged"), &shard]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&shard), "{name}: names the shard: {stderr}");
        if name == "id only" {
            assert!(
                stderr.contains("line 1"),
                "{name}: names the line: {stderr}"
            );
        }
        assert!(
            victim.join("keep.txt").exists()
                && victim.join("cooperative/seed-0/summary.json").exists(),
            "{name}: the folder outside was touched"
        );
    }
}

/// A shard folder comes from elsewhere: its `manifest.jsonl` or `bench.json` as a link
/// to `/dev/zero` or as a FIFO is refused at once, naming the file, instead of filling
/// memory or waiting for a writer.
#[cfg(unix)]
#[test]
fn a_merge_reads_only_regular_shard_files_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (pd, _) = scenarios();
    for (name, file) in [
        ("zero-manifest", "manifest.jsonl"),
        ("fifo-manifest", "manifest.jsonl"),
        ("zero-settings", "bench.json"),
    ] {
        let shard = d(name);
        one_run_shard(&pd, &shard);
        let path = Path::new(&shard).join(file);
        std::fs::remove_file(&path).unwrap();
        if name.starts_with("fifo") {
            let made = std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap();
            assert!(made.success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        }
        let out = sopsim(&["bench", "merge", &d(&format!("merged-{name}")), &shard]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(file), "{name}: names the file: {stderr}");
        assert!(
            stderr.contains("not a regular file") || stderr.contains("symbolic link"),
            "{name}: says why: {stderr}"
        );
    }
}
