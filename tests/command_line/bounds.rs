//! What grows is bounded and what is written is true: a network's links count in the
//! memory a population needs, a plan's runs in a benchmark's; a server's URL keeps its
//! query and never writes it into the run's files; a list of servers names each once;
//! token counts no request could have are not believed; and shards whose files were
//! edited are not merged.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::common::root;
use crate::common::server::{Reply, Server};

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

/// A one-round game of 100,000 members on `network`.
fn crowd(dir: &Path, network: Value) -> String {
    let doc = json!({
        "name": "crowd",
        "populations": {"crowd": {"name": "P{i}", "count": 100_000,
                                  "roles": {"play": "Player"}, "network": network}},
        "sop": {"start": "play", "max_turns": 100_000, "states": {"play": {
            "roles": ["Player"], "turns": "simultaneous",
            "transition": {"max_rounds": 1}, "next": ["end"]
        }}},
        "script": {"roles": {"Player": ["I am {name}."]}}
    });
    let path = dir.join("crowd.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn a_dense_network_of_many_members_is_refused_naming_its_links() {
    let dir = tempfile::tempdir().unwrap();
    for (network, kind) in [
        (json!({"kind": "groups", "size": 100_000}), "groups"),
        (json!({"kind": "random", "p": 1.0}), "random"),
    ] {
        let path = crowd(dir.path(), network);
        let out = sopsim(&["validate", &path]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "the {kind} network of population crowd makes about 4999950000 links"
            )),
            "{err}"
        );
        let folder = dir.path().join(format!("run-{kind}"));
        let out = sopsim(&[
            "run",
            &path,
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--out",
            folder.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(!folder.exists(), "nothing written");
    }
    // A sparse network of as many members is fine.
    let path = crowd(dir.path(), json!({"kind": "ring", "k": 4}));
    let out = sopsim(&["validate", &path]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_query_in_the_base_url_is_sent_and_never_written() {
    let server = Server::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let record = dir.path().join("tape");
    let url = format!("{}/v1/?token=SECRET", server.base);
    let done = sopsim(&[
        "run",
        root().join("scenarios/debate.json").to_str().unwrap(),
        "-q",
        "--llm",
        "openai",
        "--model",
        "m",
        "--embedder",
        "hash",
        "--max-turns",
        "3",
        "--base-url",
        &url,
        "--out",
        out.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let heads: Vec<String> = server.requests().into_iter().map(|(h, _)| h).collect();
    assert!(
        heads
            .iter()
            .all(|h| h.starts_with("POST /v1/chat/completions?token=SECRET ")),
        "{heads:?}"
    );
    for folder in [&out, &record] {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            assert!(!text.contains("SECRET"), "{}: {text}", path.display());
        }
    }
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["llm"]
            .as_str()
            .unwrap()
            .ends_with("/v1?[query hidden]"),
        "{}",
        summary["llm"]
    );
}

#[test]
fn a_list_of_servers_names_each_once_and_none_empty() {
    let server = Server::start(vec![]);
    let debate = root().join("scenarios/debate.json");
    for (list, says) in [
        (
            format!("{0}/v1,{0}/v1/", server.base),
            "entries 1 and 2 of the base URL list are the same server",
        ),
        (
            format!("{0},,{0}/other", server.base),
            "entry 2 of 3 in the base URL list is empty",
        ),
    ] {
        let out = sopsim(&[
            "run",
            debate.to_str().unwrap(),
            "--llm",
            "openai",
            "--model",
            "m",
            "--embedder",
            "hash",
            "--base-url",
            &list,
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--base-url") && err.contains(says), "{err}");
    }
}

#[test]
fn token_counts_no_request_could_have_are_estimated_with_a_warning() {
    let absurd = r#"{"choices": [{"message": {"role": "assistant", "content": "Fine."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 18446744073709551615, "completion_tokens": 3}}"#;
    let server = Server::start(vec![Reply::Plain {
        status: 200,
        body: absurd.into(),
        headers: vec![],
    }]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let done = sopsim(&[
        "run",
        root().join("scenarios/debate.json").to_str().unwrap(),
        "-q",
        "--llm",
        "openai",
        "--model",
        "gpt-4o",
        "--embedder",
        "hash",
        "--max-turns",
        "2",
        "--base-url",
        &server.base,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["prompt_tokens"].as_u64().unwrap() < 10_000,
        "{}",
        summary["prompt_tokens"]
    );
    assert!(summary["cost_usd"].as_f64().unwrap() < 1.0);
    assert!(
        summary["warnings"]
            .to_string()
            .contains("token counts no request"),
        "{}",
        summary["warnings"]
    );
}

#[test]
fn a_garbage_body_is_called_what_it_is() {
    let server = Server::start(vec![Reply::Plain {
        status: 200,
        body: "{not json at all".into(),
        headers: vec![],
    }]);
    let out = sopsim(&[
        "run",
        root().join("scenarios/debate.json").to_str().unwrap(),
        "-q",
        "--llm",
        "openai",
        "--model",
        "m",
        "--embedder",
        "hash",
        "--max-attempts",
        "1",
        "--base-url",
        &server.base,
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("malformed JSON in the response"), "{err}");
    assert!(!err.contains("cut off"), "{err}");
}

#[test]
fn a_shard_whose_summary_was_edited_is_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let pd = root().join("scenarios/prisoners_dilemma.json");
    for i in 0..2 {
        let out = sopsim(&[
            "bench",
            pd.to_str().unwrap(),
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            "2",
            "-q",
            "--shard",
            &format!("{i}/2"),
            "--out",
            &d(&format!("shard-{i}")),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let summary = dir
        .path()
        .join("shard-1/runs/prisoners_dilemma/cooperative/seed-1/summary.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    s["turns"] = json!(999);
    std::fs::write(&summary, s.to_string()).unwrap();
    let out = sopsim(&["bench", "merge", &d("merged"), &d("shard-0"), &d("shard-1")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("run prisoners_dilemma/cooperative/seed-1")
            && err.contains("summary.json counts 999 turns"),
        "{err}"
    );
}
