//! Probes through the library: questions put to agents during a run leave no trace
//! in it (the transcript is byte for byte the run's without them, and the run's own
//! calls and tokens are unchanged), their answers go to `probes.jsonl` in the order
//! they were asked, closed answers come back in the question's order, and a killed
//! run resumes to the same answers.

use std::path::Path;

use serde_json::{json, Value};
use sopsim::runner::{self, Existing, RunIo, RunOptions, ScenarioSource};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};

use crate::common::root;

/// The README's debate with three probes: a shuffled closed question to two agents at
/// the start, after the first state and at the end; free text to the leads every four
/// turns; the SVO slider to the supporters at the start and the end.
fn with_probes() -> Value {
    let text = std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["probes"] = json!({
        "stance": {"question": "How sure are you that the car ban is right?",
                   "ask": {"agents": ["Ada", "Cleo"]},
                   "when": ["start", {"after": "affirmative_prep"}, "end"],
                   "answer": {"choice": {"options": ["not at all", "somewhat", "very"]}}},
        "mood": {"question": "What do you make of the debate so far?",
                 "ask": {"roles": ["Lead"]}, "when": [{"every": 4}],
                 "answer": {"text": {}}},
        "svo": {"question": "You divide money between yourself and a stranger.",
                "ask": {"roles": ["Support"]}, "when": ["start", "end"],
                "answer": {"svo_slider": {}}}
    });
    doc
}

fn options(doc: Value, out: &Path) -> RunOptions {
    RunOptions {
        out: Some(out.to_path_buf()),
        seed: 3,
        models: ModelOptions {
            llm: LlmChoice::Scripted,
            embedder: EmbedderChoice::Hash,
            ..ModelOptions::default()
        },
        ..RunOptions::new(ScenarioSource::Document {
            origin: root().join("scenarios/debate.json"),
            document: doc,
        })
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn probes_leave_no_trace_in_the_run_and_answer_in_the_questions_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (probed, plain) = (tmp.path().join("probed"), tmp.path().join("plain"));
    let text = std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap();
    let without: Value = serde_json::from_str(&text).unwrap();
    let a = runner::run(&options(with_probes(), &probed), RunIo::default()).unwrap();
    let b = runner::run(&options(without, &plain), RunIo::default()).unwrap();
    assert_eq!(
        std::fs::read(probed.join("transcript.jsonl")).unwrap(),
        std::fs::read(plain.join("transcript.jsonl")).unwrap()
    );
    // The run's own calls and tokens are the same; the probes' are counted apart.
    assert_eq!(a.summary.llm_calls, b.summary.llm_calls);
    assert_eq!(a.summary.prompt_tokens, b.summary.prompt_tokens);
    let counted = a.summary.probes.as_ref().unwrap();
    // stance: 2 agents × 3; mood: 2 leads × 4 (turns 4, 8, 12, 16); svo: 2 × 2 × 6 items.
    assert_eq!(counted.calls, 6 + 8 + 24);
    assert!(counted.failed.is_empty());
    assert!(b.summary.probes.is_none());

    let answers = lines(&probed.join("probes.jsonl"));
    assert_eq!(answers.len(), 6 + 8 + 4);
    assert_eq!(
        serde_json::to_value(&a.probes).unwrap(),
        Value::Array(answers.clone())
    );
    let of =
        |probe: &str| -> Vec<&Value> { answers.iter().filter(|l| l["probe"] == probe).collect() };
    let stance = of("stance");
    let whens: Vec<&str> = stance.iter().map(|l| l["when"].as_str().unwrap()).collect();
    assert_eq!(
        whens,
        [
            "start",
            "start",
            "after:affirmative_prep",
            "after:affirmative_prep",
            "end",
            "end"
        ]
    );
    let askings: Vec<u64> = stance
        .iter()
        .map(|l| l["asking"].as_u64().unwrap())
        .collect();
    assert_eq!(askings, [0, 0, 1, 1, 2, 2]);
    for l in &stance {
        let options = ["not at all", "somewhat", "very"];
        // The option chosen, its place and the probabilities in the question's order,
        // and each agent's own order of showing them.
        let value = l["value"].as_f64().unwrap() as usize;
        assert_eq!(l["answer"], options[value]);
        let p: Vec<&str> = l["probabilities"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(p, options);
        let mut shown: Vec<u64> = l["shown"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        shown.sort_unstable();
        assert_eq!(shown, [0, 1, 2]);
    }
    assert_eq!(
        stance[0]["shown"], stance[2]["shown"],
        "an agent keeps its order"
    );
    let mood: Vec<u64> = of("mood")
        .iter()
        .map(|l| l["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(mood, [4, 4, 8, 8, 12, 12, 16, 16]);
    for l in of("svo") {
        let angle = l["value"].as_f64().unwrap();
        assert!((-16.3..=61.4).contains(&angle), "{l}");
        assert_eq!(l["items"].as_array().unwrap().len(), 6);
        assert!(
            ["altruistic", "prosocial", "individualistic", "competitive"]
                .contains(&l["answer"].as_str().unwrap())
        );
    }
}

#[test]
fn a_run_killed_with_probes_resumes_to_the_same_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    runner::run(&options(with_probes(), &whole), RunIo::default()).unwrap();
    let transcript = std::fs::read_to_string(whole.join("transcript.jsonl")).unwrap();
    let probes = std::fs::read(whole.join("probes.jsonl")).unwrap();
    let said: Vec<&str> = transcript.lines().collect();
    let answers = String::from_utf8(probes.clone()).unwrap();
    let answers: Vec<&str> = answers.lines().collect();
    for keep in [0, 3, 9] {
        let dir = tmp.path().join(format!("killed-{keep}"));
        std::fs::create_dir(&dir).unwrap();
        for file in ["run.json", "calls.jsonl"] {
            std::fs::copy(whole.join(file), dir.join(file)).unwrap();
        }
        let kept: String = said[..keep].iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join("transcript.jsonl"), kept).unwrap();
        // The answers asked before the kill, the last one torn.
        let before = answers.iter().filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["turn"].as_u64().unwrap() <= keep as u64 && v["when"] != "end"
        });
        let mut kept: String = before.map(|l| format!("{l}\n")).collect();
        kept.push_str("{\"probe\":\"sto");
        std::fs::write(dir.join("probes.jsonl"), kept).unwrap();
        let resumed = RunOptions {
            existing: Existing::Resume,
            ..options(with_probes(), &dir)
        };
        runner::run(&resumed, RunIo::default()).unwrap_or_else(|e| panic!("killed at {keep}: {e}"));
        assert_eq!(
            std::fs::read(dir.join("probes.jsonl")).unwrap(),
            probes,
            "killed at {keep}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("transcript.jsonl")).unwrap(),
            transcript
        );
    }
}

#[test]
fn bad_probes_are_refused_naming_the_field() {
    let cases = [
        (
            json!({"question": "?", "ask": {}, "when": ["end"], "answer": {"text": {}}}),
            "probes.p.ask: names no one to ask",
        ),
        (
            json!({"question": "?", "ask": {"agents": ["Zed"]}, "when": ["end"], "answer": {"text": {}}}),
            "probes.p.ask.agents: no agent is named \"Zed\"",
        ),
        (
            json!({"question": "?", "ask": {"roles": ["Lead"]}, "when": ["end"],
                "answer": {"number": {"min": 10, "max": 0}}}),
            "probes.p.answer.number.max: 0: must be above min (10)",
        ),
        (
            json!({"question": "?", "ask": {"roles": ["Lead"]}, "when": [{"after": "nowhere"}],
                "answer": {"text": {}}}),
            "probes.p.when[0]: no state is named \"nowhere\"",
        ),
        (
            json!({"question": "?", "ask": {"roles": ["Lead"]}, "when": ["end"],
                "answer": {"choice": {"options": ["yes", "yes"]}}}),
            "probes.p.answer.choice.options[1]: \"yes\" is listed twice",
        ),
    ];
    for (probe, says) in cases {
        let mut doc = with_probes();
        doc["probes"] = json!({ "p": probe });
        let e = sopsim::load(
            ScenarioSource::Document {
                origin: "debate.json".into(),
                document: doc,
            },
            &[],
        )
        .err()
        .unwrap_or_else(|| panic!("{says}: accepted"));
        let text = sopsim::error::chain(&e);
        assert!(text.contains(says), "expected {says:?} in {text}");
    }
}
