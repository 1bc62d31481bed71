//! aiwaves "Agents" 1.x configs, unchanged: all five examples in `scenarios/aiwaves/`
//! validate, translate to native files that validate, and run to their end with the
//! scripted backend and against an OpenAI-compatible server on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::common::server::Server;
use crate::common::{load, root, run_on, run_with_input};
use serde_json::Value;
use sopsim::human::LinesInput;
use sopsim::scenario::{self, Mode, Script};
use sopsim::simulation::Services;
use sopsim::RunIo;

const CONFIGS: [&str; 5] = [
    "debate/config.json",
    "software_company/config.json",
    "chat_bot/config.json",
    "oculist_agent/config.json",
    "customer_service/customer_websearch.json",
];

fn config(name: &str) -> PathBuf {
    root().join("scenarios/aiwaves").join(name)
}

fn sopsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sopsim"))
}

#[test]
fn every_example_validates_and_imports_to_a_native_file_that_validates() {
    let dir = tempfile::tempdir().unwrap();
    for name in CONFIGS {
        let path = config(name);
        let out = sopsim()
            .args(["validate", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = sopsim()
            .args(["import", "aiwaves", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The native file lives next to the config, where its knowledge base is; the
        // import says so for a config that names one.
        let names_a_file = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .any(|f| f.file_name() == "database.json");
        if names_a_file {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("database.json is named relative to"),
                "{name}: {stderr}"
            );
        }
        let copy = dir.path().join(name.replace('/', "_"));
        std::fs::create_dir_all(&copy).unwrap();
        for f in std::fs::read_dir(path.parent().unwrap()).unwrap().flatten() {
            std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
        }
        let native = copy.join("native.json");
        std::fs::write(&native, &out.stdout).unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            doc.get("relations").is_none(),
            "{name}: the output is native"
        );
        let out = sopsim()
            .args(["validate", native.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_translation_keeps_what_the_original_means() {
    let debate = load(&config("debate/config.json"));
    // "competive" (sic) is the original's spelling of competitive.
    assert_eq!(debate.environment.mode, Mode::Competitive);
    assert_eq!(debate.environment.max_chat_history, 5);
    assert_eq!(debate.environment.top_k, 0);
    let order = &debate.sop.states["Affirmative_Task_Allocation_state"];
    assert_eq!(order.transition.max_turns, Some(7));
    assert_eq!(
        order.transition.on_max_turns.as_deref(),
        Some("Negative_Task_Allocation_state")
    );
    let judge = order.transition.judge.as_ref().unwrap();
    assert_eq!(judge.labels, ["0", "1"]);
    let free = &debate.sop.states["Debate_Random_state"];
    assert!(matches!(free.speaker, scenario::SpeakerRule::Llm { .. }));
    assert_eq!(debate.sop.states["Judge_state"].next, ["end"]);

    let oculist = load(&config("oculist_agent/config.json"));
    assert!(oculist.agents["Agod"].human);
    let kb = oculist.sop.states["knowledge_response"].components["Oculist"]
        .knowledge
        .as_ref()
        .unwrap();
    assert!(
        kb.path.ends_with("database.json") && Path::new(&kb.path).is_file(),
        "{}",
        kb.path
    );

    let company = load(&config("software_company/config.json"));
    let dev = &company.sop.states["develop_state"].components;
    assert_eq!(dev["Developer_2"].extract.as_ref().unwrap().words, ["code"]);
    assert!(dev["Developer_1"]
        .template
        .as_deref()
        .unwrap()
        .contains("{system}"));
}

#[test]
fn the_shipped_multi_agent_sops_run_to_their_end_with_the_original_turn_counts() {
    // The original runs these in 34 and 26 turns when the judge always stays
    // (benches/anchors/aiwaves/README.md, the as-is rows).
    for (name, turns) in [
        ("debate/config.json", 34),
        ("software_company/config.json", 26),
    ] {
        let s = Arc::new(load(&config(name)));
        let outcome = run_on(s.clone(), &Services::scripted(&s), |o| o, RunIo::default()).unwrap();
        assert_eq!(outcome.summary.ended_by.as_str(), "end", "{name}");
        assert_eq!(outcome.summary.turns, turns, "{name}");
    }
}

#[test]
fn the_single_agent_configs_run_to_their_end_with_a_person_typing() {
    // The oculist moves on when its judge answers "1", as its prompts ask it to.
    let mut oculist = load(&config("oculist_agent/config.json"));
    oculist.script = Some(Script {
        transit: vec!["<end>0</end>".into(), "<end>1</end>".into()],
        ..Script::default()
    });
    let oculist = Arc::new(oculist);
    let config_with = |lines: usize| RunIo {
        human_input: Some(Arc::new(LinesInput::new(
            (0..lines).map(|i| format!("question {i}")),
        ))),
        ..RunIo::default()
    };
    let outcome = run_on(
        oculist.clone(),
        &Services::scripted(&oculist),
        |o| o,
        config_with(10),
    )
    .unwrap();
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(outcome.summary.final_state, "knowledge_response_book_card");
    // A state that only loops ends after max_chat_nums (1000) turns instead of never.
    let chat = Arc::new(load(&config("chat_bot/config.json")));
    let outcome = run_on(
        chat.clone(),
        &Services::scripted(&chat),
        |o| o,
        config_with(600),
    )
    .unwrap();
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(outcome.summary.turns, 1000);
    // (customer_websearch shows all 1000 messages verbatim, MAX_CHAT_HISTORY 1000, so a
    // full run is slow in a debug build; its translation is the same.)
    let service = load(&config("customer_service/customer_websearch.json"));
    let t = &service.sop.states["response_state"].transition;
    assert_eq!(
        (t.max_turns, t.on_max_turns.as_deref()),
        (Some(1000), Some("end"))
    );
}

#[test]
fn skipped_components_are_reported_once_per_run_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = config("customer_service/customer_websearch.json");
    let (code, _, stderr) = run_with_input(
        &[
            "run",
            path.to_str().unwrap(),
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--out",
            dir.path().to_str().unwrap(),
        ],
        "hi\n",
    );
    assert_eq!(code, 0, "{stderr}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    let warnings: Vec<&str> = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let web: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("WebSearchComponent"))
        .collect();
    assert_eq!(web.len(), 1, "{warnings:?}");
    assert!(web[0].contains("skipped"), "{}", web[0]);
}

#[test]
fn all_five_run_to_their_end_against_an_openai_compatible_server() {
    let server = Server::start(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    for (name, input, ended_by) in [
        ("debate/config.json", "", "end"),
        ("software_company/config.json", "", "end"),
        ("chat_bot/config.json", "hello\n", "input_closed"),
        ("oculist_agent/config.json", "hello\n", "input_closed"),
        (
            "customer_service/customer_websearch.json",
            "hello\n",
            "input_closed",
        ),
    ] {
        let out = dir.path().join(name.replace('/', "_"));
        let (code, _, stderr) = run_with_input(
            &[
                "run",
                config(name).to_str().unwrap(),
                "--llm",
                "openai",
                "--base-url",
                &server.base,
                "--embedder",
                "hash",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ],
            input,
        );
        assert_eq!(code, 0, "{name}: {stderr}");
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["ended_by"], ended_by, "{name}");
    }
    // The configs' own model names reach the server.
    let models: std::collections::HashSet<String> = server
        .requests()
        .iter()
        .filter_map(|(_, body)| body["model"].as_str().map(String::from))
        .collect();
    assert!(models.contains("gpt-3.5-turbo-16k-0613"), "{models:?}");
}

#[test]
fn each_message_is_embedded_once_and_only_when_something_reads_it() {
    let input = || RunIo {
        human_input: Some(Arc::new(LinesInput::new(
            (0..5).map(|i| format!("question {i}")),
        ))),
        ..RunIo::default()
    };
    // TOP_K 3: retrieval reads embeddings, one per message.
    let chat = Arc::new(load(&config("chat_bot/config.json")));
    let outcome = run_on(chat.clone(), &Services::scripted(&chat), |o| o, input()).unwrap();
    assert_eq!(outcome.summary.embeddings, outcome.transcript.len() as u64);
    // TOP_K 0 and no knowledge base: nothing reads them, so none are made.
    let debate = Arc::new(load(&config("debate/config.json")));
    let outcome = run_on(
        debate.clone(),
        &Services::scripted(&debate),
        |o| o,
        RunIo::default(),
    )
    .unwrap();
    assert_eq!(outcome.summary.embeddings, 0);
    // The oculist's knowledge base reuses the message's embedding: still one each.
    let oculist = Arc::new(load(&config("oculist_agent/config.json")));
    let outcome = run_on(
        oculist.clone(),
        &Services::scripted(&oculist),
        |o| o,
        input(),
    )
    .unwrap();
    assert_eq!(outcome.summary.embeddings, outcome.transcript.len() as u64);
}

#[test]
fn the_imported_native_file_runs_the_same_way_as_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = config("debate/config.json");
    let out = sopsim()
        .args(["import", "aiwaves", path.to_str().unwrap()])
        .output()
        .unwrap();
    let native = dir.path().join("debate.json");
    std::fs::write(&native, &out.stdout).unwrap();
    let transcript = |file: &Path, name: &str| {
        let out_dir = dir.path().join(name);
        let o = sopsim()
            .args([
                "run",
                file.to_str().unwrap(),
                "--llm",
                "scripted",
                "--embedder",
                "hash",
                "--quiet",
                "--out",
                out_dir.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read_to_string(out_dir.join("transcript.jsonl")).unwrap()
    };
    let a = transcript(&path, "config");
    assert_eq!(a.lines().count(), 34);
    assert_eq!(a, transcript(&native, "native"));
}

#[test]
fn relations_and_user_names_the_original_ignores_are_warned_about() {
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(config("debate/config.json")).unwrap())
            .unwrap();
    doc["relations"]["Ghost_state"] = serde_json::json!({"0": "Judge_state"});
    doc["relations"]["Judge_state"]["next"] = serde_json::json!("end_state");
    doc["config"]["User_Names"] = serde_json::json!("[\"Nobody\"]");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let imported = sopsim::load(path.as_path(), &[]).unwrap().imported;
    let notes = imported.notes.join("\n");
    for expected in [
        "relations.Ghost_state: there is no state \"Ghost_state\"",
        "relations.Judge_state.next: relation keys are numbers",
        "config.User_Names: \"Nobody\" is not an agent that speaks",
    ] {
        assert!(
            notes.contains(expected),
            "missing {expected:?} in:\n{notes}"
        );
    }
}
