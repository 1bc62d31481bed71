//! What a hostile run folder or scenario file cannot do: a resumed or replaced run
//! never writes through a link to a file outside its folder, a population file cannot
//! take the machine's memory before it is checked, and limits that could never let a
//! round start, or that would cut a resumed run short, are refused with exit 2.

use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::root;

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

fn run(args: &[&str]) -> (i32, String) {
    let out = sopsim().args(args).stdin(Stdio::null()).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// The scripted debate into `out`, with `extra` flags.
fn debate(out: &Path, extra: &[&str]) -> (i32, String) {
    let scenario = root().join("scenarios/debate.json");
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "-q",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    run(&args)
}

#[test]
fn resume_and_overwrite_never_write_through_a_link() {
    for file in ["transcript.jsonl", "calls.jsonl", "events.jsonl"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let (code, text) = debate(&out, &["--max-turns", "3"]);
        assert_eq!(code, 0, "{text}");
        // The folder's file becomes a link to a file of someone else's.
        let outside = dir.path().join("precious.txt");
        std::fs::copy(out.join(file), &outside).unwrap();
        let precious = std::fs::read(&outside).unwrap();
        std::fs::remove_file(out.join(file)).unwrap();
        symlink(&outside, out.join(file)).unwrap();

        let (code, text) = debate(&out, &["--max-turns", "6", "--resume"]);
        assert_eq!(code, 2, "{file}: {text}");
        assert!(
            text.contains(file) && text.contains("link"),
            "{file}: {text}"
        );
        assert_eq!(
            std::fs::read(&outside).unwrap(),
            precious,
            "{file} was written through"
        );

        let (code, text) = debate(&out, &["--max-turns", "6", "--overwrite"]);
        assert_eq!(code, 0, "{file}: {text}");
        assert_eq!(
            std::fs::read(&outside).unwrap(),
            precious,
            "{file} was written through"
        );
        let replaced = std::fs::symlink_metadata(out.join(file)).unwrap();
        assert!(
            replaced.is_file(),
            "{file}: the run writes a file of its own"
        );
    }
}

/// `sopsim validate` with at most `limit` bytes of address space: a scenario that
/// would need more fails to allocate instead of passing.
fn validate_within(path: &Path, limit: u64) -> (i32, String) {
    let mut cmd = sopsim();
    cmd.args(["validate", path.to_str().unwrap()]);
    unsafe {
        cmd.pre_exec(move || {
            let rlim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rlim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn population_file(
    dir: &Path,
    populations: serde_json::Value,
    max_turns: u64,
) -> std::path::PathBuf {
    let doc = json!({
        "name": "crowd",
        "populations": populations,
        "sop": {"start": "play", "max_turns": max_turns, "states": {"play": {
            "roles": ["Player"], "turns": "simultaneous",
            "transition": {"max_rounds": 1}, "next": ["end"]
        }}},
        "script": {"roles": {"Player": ["I am {name}."]}}
    });
    let path = dir.join("crowd.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

#[test]
fn a_population_is_measured_before_any_member_is_made() {
    let dir = tempfile::tempdir().unwrap();
    // 7 KB of file: 3,000 members whose style would render to a megabyte each.
    let crowd = json!({"crowd": {
        "name": "P{i}", "count": 3000, "roles": {"play": "Player"},
        "style": "{a}".repeat(2000),
        "draw": {"a": {"one_of": ["x".repeat(500)]}}
    }});
    let path = population_file(dir.path(), crowd, 10_000);
    assert!(std::fs::metadata(&path).unwrap().len() < 8_000);
    let (code, text) = validate_within(&path, 1 << 30);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("populations.crowd.style") && text.contains("4096"),
        "{text}"
    );

    // Twelve populations of 100,000: more than a machine is asked to make at once.
    let many: serde_json::Map<String, serde_json::Value> = (0..12)
        .map(|k| {
            let pop = json!({
                "name": format!("G{k}-{{i}}"), "count": 100_000, "roles": {"play": "Player"},
                "style": format!("{{mood}} {}", "m".repeat(2000)),
                "draw": {"mood": {"one_of": ["calm", "bold"]}}
            });
            (format!("g{k}"), pop)
        })
        .collect();
    let path = population_file(dir.path(), many.into(), 10_000_000);
    let (code, text) = validate_within(&path, 1 << 30);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("members"), "{text}");
}

#[test]
fn a_uniform_draw_too_wide_to_sample_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let crowd = json!({"crowd": {
        "name": "P{i}", "count": 3, "roles": {"play": "Player"},
        "draw": {"wealth": {"uniform": [-1e308, 1e308]}}
    }});
    let path = population_file(dir.path(), crowd, 100);
    let (code, text) = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("populations.crowd.draw.wealth"), "{text}");
}

#[test]
fn a_turn_limit_below_one_round_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let crowd = json!({"crowd": {"name": "P{i}", "count": 50, "roles": {"play": "Player"}}});
    let path = population_file(dir.path(), crowd, 40);
    let (code, text) = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("sop.max_turns") && text.contains("50"),
        "{text}"
    );

    let crowd = json!({"crowd": {"name": "P{i}", "count": 50, "roles": {"play": "Player"}}});
    let path = population_file(dir.path(), crowd, 400);
    let (code, text) = run(&[
        "run",
        path.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--max-turns",
        "49",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--max-turns"), "{text}");
}

/// Every file of a run folder, by name.
fn folder_files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_resume_given_fewer_turns_is_refused_and_keeps_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = debate(&out, &["--max-turns", "6"]);
    assert_eq!(code, 0, "{text}");
    let before = folder_files(&out);
    assert!(before.contains_key("summary.json") && before.contains_key("events.jsonl"));
    let (code, text) = debate(&out, &["--max-turns", "3", "--resume"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("can only be raised"), "{text}");
    assert!(text.contains("is as it was"), "{text}");
    assert!(
        before == folder_files(&out),
        "the refused resume changed the folder"
    );
}

#[test]
fn a_run_and_a_benchmark_never_share_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (run_out, bench_out) = (dir.path().join("run"), dir.path().join("bench"));
    let (code, text) = debate(&run_out, &["--max-turns", "3"]);
    assert_eq!(code, 0, "{text}");
    let game = root().join("scenarios/prisoners_dilemma.json");
    let bench = |out: &Path| {
        run(&[
            "bench",
            game.to_str().unwrap(),
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            "1",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (code, text) = bench(&bench_out);
    assert_eq!(code, 0, "{text}");
    let (code, text) = bench(&run_out);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("it holds a run"), "{text}");
    for extra in [&[][..], &["--overwrite"][..]] {
        let (code, text) = debate(&bench_out, extra);
        assert_eq!(code, 2, "{extra:?}: {text}");
        assert!(text.contains("it holds a benchmark"), "{text}");
    }
    assert!(!bench_out.join("transcript.jsonl").exists());
}

#[test]
fn a_resume_without_its_transcript_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = debate(&out, &["--max-turns", "3"]);
    assert_eq!(code, 0, "{text}");
    std::fs::remove_file(out.join("transcript.jsonl")).unwrap();
    let (code, text) = debate(&out, &["--resume"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no transcript.jsonl"), "{text}");
}

/// A resume that ends for another reason before it has retraced the killed run (here
/// a person's input closes: `--human` may change on a resume) leaves it as it was.
#[test]
fn a_resume_that_ends_while_retracing_keeps_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = debate(&out, &["--max-turns", "6"]);
    assert_eq!(code, 0, "{text}");
    let before = folder_files(&out);
    let (code, text) = debate(&out, &["--max-turns", "8", "--resume", "--human", "Ben"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("is as it was"), "{text}");
    assert!(text.contains("input_closed"), "{text}");
    assert!(
        before == folder_files(&out),
        "the stopped resume changed the folder"
    );
}

#[test]
fn a_resume_of_an_edited_transcript_is_refused_and_keeps_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = debate(&out, &["--max-turns", "6"]);
    assert_eq!(code, 0, "{text}");
    let path = out.join("transcript.jsonl");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("health", "wealth", 1);
    std::fs::write(&path, edited).unwrap();
    let before = folder_files(&out);
    let (code, text) = debate(&out, &["--max-turns", "8", "--resume"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("does not say what this line says"), "{text}");
    assert!(
        before == folder_files(&out),
        "the refused resume changed the folder"
    );
}
