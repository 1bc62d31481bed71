//! The architectures without real weights in CI — qwen3, and llama with Llama 3's
//! per-pair rotary factors — on tiny random-weight files, against llama.cpp's logits
//! and greedy decoding on the same files (`tests/reference/tiny_models.py`).

use crate::common::*;
use crate::llama_cpp::{argmax, gap, ids};
use sopsim::llm::local::{LocalBackend, LocalModel, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, Completion, LlmBackend, LlmRequest};
use sopsim::scenario::LlmSettings;

fn reference(name: &str) -> (LocalModel, serde_json::Value) {
    let dir = root().join("tests/reference/tiny");
    let model = LocalModel::load(&dir.join(format!("{name}.gguf"))).unwrap();
    let text = std::fs::read_to_string(dir.join(format!("{name}_logits.json"))).unwrap();
    (model, serde_json::from_str(&text).unwrap())
}

/// The prompt's ids, the 20 highest logits at every position within `tolerance`, and
/// 64 greedy tokens, as llama.cpp gives them.
fn matches_llama_cpp(name: &str, tolerance: f32) {
    let (model, reference) = reference(name);
    let tokens = ids(&reference["tokens"]);
    let ours = model.encode(reference["prompt"].as_str().unwrap()).unwrap();
    assert_eq!(ours, tokens, "{name}: token ids differ from llama.cpp's");
    let positions: Vec<usize> = (0..tokens.len()).collect();
    let logits = model.logits(&tokens, &positions).unwrap();
    let worst = logits
        .iter()
        .zip(reference["positions"].as_array().unwrap())
        .map(|(row, theirs)| gap(row, &theirs["top"]))
        .fold(0f32, f32::max);
    eprintln!("{name}: max |Δlogit| against llama.cpp's top 20 at every position: {worst:.5}");
    assert!(worst < tolerance, "{name}: logits differ by up to {worst}");

    // Random weights make near ties: where the two engines' best tokens differ, ours
    // must rate llama.cpp's within the noise of its best, and decoding goes on from
    // llama.cpp's, so every one of the 64 steps is still compared.
    let want = ids(&reference["greedy"]);
    let mut context = tokens;
    let mut ties = 0;
    for (i, &theirs) in want.iter().enumerate() {
        let last = context.len() - 1;
        let row = &model.logits(&context, &[last]).unwrap()[0];
        let best = argmax(row);
        if best != theirs {
            let gap = row[best as usize] - row[theirs as usize];
            assert!(
                gap < tolerance / 4.0,
                "{name}: greedy token {i}: ours {best}, llama.cpp's {theirs}, {gap} apart"
            );
            ties += 1;
        }
        context.push(theirs);
    }
    assert!(
        ties <= 2,
        "{name}: {ties} of 64 greedy tokens were near ties"
    );
}

#[test]
fn qwen3_matches_llama_cpp() {
    matches_llama_cpp("qwen3", 0.02);
}

#[test]
fn llama3_scaled_positions_match_llama_cpp() {
    matches_llama_cpp("llama3", 0.02);
}

fn backend(name: &str) -> LocalBackend {
    let path = root().join(format!("tests/reference/tiny/{name}.gguf"));
    LocalBackend::start(&path, LocalOptions::default()).unwrap()
}

fn request(settings: LlmSettings, options: Option<&[&str]>, seed: u64) -> LlmRequest {
    let messages = vec![
        ChatMessage::system("You are Ada, a careful engineer."),
        ChatMessage::user(format!(
            "Ben says the bridge costs too much ({seed}). Answer him."
        )),
    ];
    let context = CallContext::new(CallKind::Act, "t", 1, seed);
    match options {
        None => LlmRequest::chat(messages, settings, context),
        Some(o) => {
            let options = o.iter().map(|s| s.to_string()).collect();
            LlmRequest::choice(messages, options, settings, context)
        }
    }
}

fn ask(
    backend: &LocalBackend,
    settings: LlmSettings,
    options: Option<&[&str]>,
    seed: u64,
) -> Completion {
    futures::executor::block_on(backend.complete(request(settings, options, seed), None)).unwrap()
}

#[test]
fn a_qwen3_model_thinks_only_when_its_settings_say_so() {
    let qwen3 = backend("qwen3");
    let settings = |thinking: Option<bool>| LlmSettings {
        temperature: Some(0.0),
        max_tokens: Some(12),
        thinking,
        ..LlmSettings::default()
    };
    // Off, the template closes an empty thinking block before the reply: the prompt is
    // longer by it, and nothing is thinking.
    let off = ask(&qwen3, settings(None), None, 1);
    let on = ask(&qwen3, settings(Some(true)), None, 1);
    assert_eq!(off.usage.thinking_tokens, 0);
    assert!(
        on.usage.prompt_tokens < off.usage.prompt_tokens,
        "thinking on leaves the block open: {} against {} prompt tokens",
        on.usage.prompt_tokens,
        off.usage.prompt_tokens
    );
    // The random weights never close their thinking in 12 tokens: all of it is
    // thinking, and none of it is the reply.
    assert_eq!(on.usage.thinking_tokens, on.usage.completion_tokens);
    assert!(on.usage.completion_tokens > 0);
    assert_eq!(on.text, "");
    // A choice never thinks: it is asked after the closed block, as with thinking off.
    let options = ["COOPERATE", "DEFECT"];
    let chose_off = ask(&qwen3, settings(None), Some(&options), 1);
    let chose_on = ask(&qwen3, settings(Some(true)), Some(&options), 1);
    assert_eq!(chose_on.usage.prompt_tokens, chose_off.usage.prompt_tokens);
    assert_eq!(
        chose_on.chosen.unwrap().probabilities,
        chose_off.chosen.unwrap().probabilities
    );
}

#[test]
fn replies_on_the_new_architectures_are_the_same_alone_and_in_a_batch() {
    for name in ["qwen3", "llama3"] {
        let settings = LlmSettings {
            temperature: Some(0.8),
            max_tokens: Some(16),
            ..LlmSettings::default()
        };
        let fresh = backend(name);
        let alone: Vec<String> = (0..4)
            .map(|seed| ask(&fresh, settings.clone(), None, seed).text)
            .collect();
        let batched = backend(name);
        let together: Vec<String> = futures::executor::block_on(futures::future::join_all(
            (0..4).map(|seed| batched.complete(request(settings.clone(), None, seed), None)),
        ))
        .into_iter()
        .map(|c| c.unwrap().text)
        .collect();
        assert_eq!(together, alone, "{name}");
        assert!(alone.iter().any(|t| !t.is_empty()), "{name}: {alone:?}");
    }
}

/// A whole run on each new architecture, twice: the same transcript byte for byte.
#[test]
fn a_run_on_the_new_architectures_repeats_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["qwen3", "llama3"] {
        let model = root().join(format!("tests/reference/tiny/{name}.gguf"));
        let run = |out: &str| {
            let out = dir.path().join(format!("{name}-{out}"));
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
                .args([
                    "run",
                    "-q",
                    "--seed",
                    "3",
                    "--max-turns",
                    "5",
                    "--embedder",
                    "hash",
                ])
                .arg(root().join("scenarios/debate.json"))
                .arg("--model")
                .arg(&model)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap();
            assert!(status.status.success(), "{name}: {status:?}");
            std::fs::read(out.join("transcript.jsonl")).unwrap()
        };
        let first = run("a");
        assert_eq!(first, run("b"), "{name}: the runs differ");
        assert_eq!(first.iter().filter(|b| **b == b'\n').count(), 5, "{name}");
    }
}
