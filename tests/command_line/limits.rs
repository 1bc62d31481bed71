//! Templates and worlds that cannot take the machine down, each finding tried as an
//! attacker would: templates that would render gigabytes refused by `validate` under
//! a memory limit, or stopped at the render limit naming the field, the round and the
//! limit (and resumed once the file is fixed); model paths checked where they are
//! named, a FIFO never opened; infinity in an `end_if`; a world update stopped by
//! SIGTERM within the grace with its files written; a resume refused before it writes.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

/// `sopsim ARGS` with at most `limit` bytes of address space: its exit code and what it
/// printed.
fn within(args: &[&str], limit: u64) -> (i32, String) {
    let mut cmd = sopsim();
    cmd.args(args).stdin(Stdio::null());
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

const GIB: u64 = 1 << 30;

/// A lake fished by Ann (a scripted model) and Bo (a strategy) for up to `months`.
fn lake(months: u32) -> Value {
    json!({
        "name": "lake",
        "agents": {
            "Ann": {"roles": {"fish": "Fisher A"}},
            "Bo": {"roles": {"fish": "Fisher B"}, "strategy": {"rule": "always_cooperate", "cooperate": "5"}}
        },
        "world": {
            "variables": {
                "fish": {"initial": 100, "min": 0, "max": 100, "state": "fish",
                         "update": "[100, 2 * ([0, world.fish - sum] | max)] | min"}
            }
        },
        "sop": {"start": "fish", "max_turns": 100, "states": {"fish": {
            "roles": ["Fisher A", "Fisher B"], "turns": "simultaneous",
            "environment_prompt": "The lake holds {{ world.fish }} tons in month {{ round }}.",
            "components": {
                "Fisher A": {"choice": {"range": [0, 20, 1], "after": "instead"}},
                "Fisher B": {"choice": {"range": [0, 20, 1], "after": "instead"}}
            },
            "transition": {"max_rounds": 1, "on_max_turns": "fish", "max_visits": months,
                           "on_max_visits": "end"},
            "next": ["fish", "end"]
        }}},
        "script": {"choices": {"Ann": ["10"]}}
    })
}

fn write(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn scripted_run(path: &Path, out: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        "run",
        path.to_str().unwrap(),
        "-q",
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    within(&args, 4 * GIB)
}

#[test]
fn templates_that_would_make_gigabytes_are_refused_by_validate_within_a_gigabyte() {
    let dir = tempfile::tempdir().unwrap();
    let a_tilde = format!("{{{{ a{} }}}}", "~a".repeat(60));
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "agents.Bo.strategy.say",
            Box::new(move |d: &mut Value| {
                d["agents"]["Bo"]["strategy"]["say"] =
                    json!(format!("{{% set a='x'*100000000 %}}{a_tilde}"))
            }),
            "`{% set %}` is not allowed",
        ),
        (
            "sop.states.fish.environment_prompt",
            Box::new(|d: &mut Value| {
                d["sop"]["states"]["fish"]["environment_prompt"] = json!("{{ 'x' * 100000000 }}")
            }),
            "`'x' * 100000000` can make a value of up to 100000000 bytes",
        ),
        (
            "sop.states.fish.environment_prompt",
            Box::new(|d: &mut Value| {
                d["sop"]["states"]["fish"]["environment_prompt"] =
                    json!("{{ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) }}")
            }),
            "over the limit of 1048576 bytes",
        ),
        (
            "world.variables.fish.update",
            Box::new(|d: &mut Value| {
                d["world"]["variables"]["fish"]["update"] =
                    json!("(('x' * 90000000) ~ ('x' * 90000000)) | length")
            }),
            "can make a value of up to",
        ),
        (
            "sop.states.fish.components[\"Fisher A\"].task",
            Box::new(|d: &mut Value| {
                d["sop"]["states"]["fish"]["components"]["Fisher A"]["task"] =
                    json!("{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}")
            }),
            "`{% macro %}` is not allowed",
        ),
        (
            "sop.states.fish.begin_query",
            Box::new(|d: &mut Value| {
                d["sop"]["states"]["fish"]["begin_query"] = json!("{% include 'x' %}")
            }),
            "`{% include %}` is not allowed",
        ),
    ];
    for (i, (field, edit, says)) in cases.into_iter().enumerate() {
        let mut doc = lake(3);
        edit(&mut doc);
        let path = write(dir.path(), &format!("bad-{i}.json"), &doc);
        let (code, text) = within(&["validate", path.to_str().unwrap()], GIB);
        assert_eq!(code, 2, "{field}: {text}");
        assert!(
            text.contains(field) && text.contains(says),
            "expected {field} and {says:?} in: {text}"
        );
    }
}

#[test]
fn a_render_past_its_limit_stops_the_run_naming_the_field_the_round_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    // Each value is small, the loop writes 100 MB: seen only when it renders, in the
    // second month.
    let mut doc = lake(3);
    doc["sop"]["states"]["fish"]["environment_prompt"] = json!(
        "The lake holds {{ world.fish }} tons.{% if round > 1 %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endif %}"
    );
    let path = write(dir.path(), "lake.json", &doc);
    let (code, text) = within(&["validate", path.to_str().unwrap()], GIB);
    assert_eq!(code, 0, "{text}");
    let out = dir.path().join("run");
    let (code, text) = scripted_run(&path, &out, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("sop.states.fish.environment_prompt: round 2")
            && text.contains("renders more than 1048576 bytes"),
        "{text}"
    );
    let kept = std::fs::read_to_string(out.join("transcript.jsonl")).unwrap();
    assert_eq!(kept.lines().count(), 2, "the first month's turns are kept");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["error_field"], "sop.states.fish.environment_prompt");

    // Fixed, the file resumes from the run's turns, to what a fresh run of it says.
    doc["sop"]["states"]["fish"]["environment_prompt"] =
        json!("The lake holds {{ world.fish }} tons.");
    write(dir.path(), "lake.json", &doc);
    let (code, text) = scripted_run(&path, &out, &["--resume"]);
    assert_eq!(code, 0, "{text}");
    let fresh = dir.path().join("fresh");
    let (code, text) = scripted_run(&path, &fresh, &[]);
    assert_eq!(code, 0, "{text}");
    for file in ["transcript.jsonl", "world.jsonl"] {
        assert_eq!(
            std::fs::read(out.join(file)).unwrap(),
            std::fs::read(fresh.join(file)).unwrap(),
            "{file}"
        );
    }
    // The resumed run is now the fixed file's: resuming it again is not refused.
    let (code, text) = scripted_run(&path, &out, &["--resume"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_model_path_is_checked_where_it_is_named_and_a_fifo_is_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.gguf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut doc = lake(2);
    doc["agents"]["Ann"]["llm"] = json!({"model": fifo.to_str().unwrap()});
    let path = write(dir.path(), "fifo.json", &doc);
    let started = Instant::now();
    let (code, text) = within(&["validate", path.to_str().unwrap()], GIB);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("agents.Ann.llm.model") && text.contains("FIFO"),
        "{text}"
    );
    let (code, text) = within(
        &["run", path.to_str().unwrap(), "-q", "--embedder", "hash"],
        4 * GIB,
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("agents.Ann.llm.model"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(60), "it waited");

    // Not there yet: a note for validate, an error for a run, naming the field and
    // never a flag that was not given.
    let later = dir.path().join("later.gguf");
    doc["agents"]["Ann"]["llm"] = json!({"backend": "local", "model": later.to_str().unwrap()});
    let path = write(dir.path(), "later.json", &doc);
    let (code, text) = within(&["validate", path.to_str().unwrap()], GIB);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("agents.Ann.llm.model") && text.contains("not there yet"),
        "{text}"
    );
    let (code, text) = scripted_run(&path, &dir.path().join("run"), &[]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("agents.Ann.llm.model") && !text.contains("--model"),
        "{text}"
    );
}

#[test]
fn an_end_if_that_gives_infinity_stops_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = lake(3);
    doc["world"]["end_if"] = json!({"overflow": "world.fish / (world.fish - world.fish) > 1"});
    let path = write(dir.path(), "lake.json", &doc);
    let (code, text) = scripted_run(&path, &dir.path().join("run"), &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("world.end_if.overflow: round 1")
            && text.contains("`world.fish / (world.fish - world.fish)` gives inf"),
        "{text}"
    );
}

/// Every file of a run folder, by name.
fn folder_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
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
fn a_resume_is_refused_before_it_writes_when_a_file_was_added_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "lake.json", &lake(4));
    let out = dir.path().join("run");
    let (code, text) = scripted_run(&path, &out, &["--max-turns", "4"]);
    assert_eq!(code, 0, "{text}");
    // A copy of the last round appended, and a huge line appended.
    let world = std::fs::read_to_string(out.join("world.jsonl")).unwrap();
    let last = world.lines().last().unwrap().to_string();
    for (added, says) in [
        (format!("{last}\n"), "a second round of visit"),
        (format!("{}\n", "x".repeat(3 << 20)), "longer than"),
    ] {
        std::fs::write(out.join("world.jsonl"), format!("{world}{added}")).unwrap();
        let before = folder_files(&out);
        let (code, text) = within(
            &[
                "run",
                path.to_str().unwrap(),
                "-q",
                "--llm",
                "scripted",
                "--embedder",
                "hash",
                "--out",
                out.to_str().unwrap(),
                "--max-turns",
                "8",
                "--resume",
            ],
            GIB,
        );
        assert_eq!(code, 2, "{text}");
        assert!(
            text.contains("world.jsonl, line 3") && text.contains(says),
            "{text}"
        );
        assert!(
            before == folder_files(&out),
            "the refused resume changed the folder"
        );
    }
}

#[test]
fn sigterm_during_a_large_world_update_exits_within_the_grace_with_the_files_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut vars = serde_json::Map::new();
    for v in 0..200 {
        vars.insert(
            format!("v{v}"),
            json!({"per_agent": true, "initial": 1, "state": "give",
                   "update": format!("me.v{v} + own * 2 + sum / n")}),
        );
    }
    let members = 20_000;
    let doc = json!({
        "name": "crowd",
        "populations": {"citizens": {"count": members, "name": "citizen {i}",
            "roles": {"give": "Citizen"}, "strategy": {"rule": "always_cooperate"}}},
        "world": {"variables": vars},
        "sop": {"start": "give", "max_turns": members * 4, "states": {"give": {
            "roles": ["Citizen"], "turns": "simultaneous",
            "components": {"Citizen": {"choice": {"range": [0, 2, 1], "after": "instead"}}},
            "transition": {"max_rounds": 1, "on_max_turns": "give", "max_visits": 3,
                           "on_max_visits": "end"},
            "next": ["give", "end"]
        }}}
    });
    let path = write(dir.path(), "crowd.json", &doc);
    let out = dir.path().join("run");
    let child = sopsim()
        .args([
            "run",
            path.to_str().unwrap(),
            "-q",
            "--llm",
            "scripted",
            "--embedder",
            "hash",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first round's turns are written: its update is under way.
    let transcript = out.join("transcript.jsonl");
    let deadline = Instant::now() + Duration::from_secs(120);
    let round_done = || {
        std::fs::read(&transcript)
            .is_ok_and(|t| t.iter().filter(|b| **b == b'\n').count() >= members)
    };
    while !round_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(round_done(), "the first round never finished");
    let signalled = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let done = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(143), "{err}");
    // The update alone takes longer than this: it is stopped, not waited for.
    assert!(took < Duration::from_secs(5), "took {took:?}: {err}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ended_by"], "interrupted", "{summary}");
    assert!(out.join("environment.json").is_file());
    // The round's update was abandoned whole: no round written, every value as before.
    assert_eq!(std::fs::read(out.join("world.jsonl")).unwrap(), b"");
    assert_eq!(
        summary["world"]["agents"]["v199"]["max"], 1.0,
        "{}",
        summary["world"]
    );
}
