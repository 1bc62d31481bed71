//! Gemma 3 270M (the real weights, `sopsim models fetch gemma3`) against llama.cpp on
//! the same file (`tests/reference/gemma3_reference.py`): SentencePiece ids, logits
//! at every position of a prompt in Gemma's turn format and at the end of one longer
//! than the sliding window, 64 greedy tokens, and the same replies alone and in a
//! batch.

use crate::common::*;
use crate::llama_cpp::{argmax, gap, ids};
use sopsim::llm::local::{LocalBackend, LocalModel, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::models::{Quiet, GEMMA3};
use sopsim::scenario::LlmSettings;

fn gemma3_path() -> std::path::PathBuf {
    let dir = match std::env::var_os("SOPSIM_MODELS").filter(|d| !d.is_empty()) {
        Some(d) => d.into(),
        None => sopsim::models::default_dir(&root(), &|k| std::env::var(k).ok()),
    };
    GEMMA3.ensure(&dir, &Default::default(), &Quiet).unwrap();
    GEMMA3.main_file(&dir)
}

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("tests/reference/gemma3_logits.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn gemma3_matches_llama_cpp() {
    let model = LocalModel::load(&gemma3_path()).unwrap();
    let reference = reference();
    for case in reference["texts"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(
            model.encode(text).unwrap(),
            ids(&case["tokens"]),
            "{text:?}"
        );
    }
    let tokens = ids(&reference["tokens"]);
    assert_eq!(
        model.encode(reference["prompt"].as_str().unwrap()).unwrap(),
        tokens
    );
    let positions: Vec<usize> = (0..tokens.len()).collect();
    let logits = model.logits(&tokens, &positions).unwrap();
    // Per position, the largest gap over llama.cpp's 20 best tokens. Quantisation
    // noise is larger at Gemma's turn markers, where its activations are hundreds of
    // times the usual: the bound is on the median position and on the worst.
    let mut gaps: Vec<f32> = Vec::new();
    for (row, theirs) in logits
        .iter()
        .zip(reference["positions"].as_array().unwrap())
    {
        let top = theirs["top"].as_array().unwrap();
        let value = |i: usize| top[i][1].as_f64().unwrap() as f32;
        gaps.push(gap(row, &theirs["top"]));
        if value(0) - value(1) > 0.5 {
            assert_eq!(
                u64::from(argmax(row)),
                top[0][0].as_u64().unwrap(),
                "{}",
                theirs["position"]
            );
        }
    }
    gaps.sort_by(f32::total_cmp);
    let (median, worst) = (gaps[gaps.len() / 2], gaps[gaps.len() - 1]);
    eprintln!(
        "gemma3: |Δlogit| over llama.cpp's top 20: median position {median:.3}, worst {worst:.3}"
    );
    assert!(
        median < 0.5 && worst < 2.5,
        "median {median}, worst {worst}"
    );

    // Past the sliding window (512 positions), where the windowed layers no longer see
    // the prompt's start.
    let long = &reference["long"];
    let long_tokens = ids(&long["tokens"]);
    assert!(long_tokens.len() > 512);
    assert_eq!(
        model.encode(long["prompt"].as_str().unwrap()).unwrap(),
        long_tokens
    );
    let at: Vec<usize> = long["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["position"].as_u64().unwrap() as usize)
        .collect();
    let rows = model.logits(&long_tokens, &at).unwrap();
    for (row, theirs) in rows.iter().zip(long["positions"].as_array().unwrap()) {
        let gap = gap(row, &theirs["top"]);
        eprintln!("gemma3: position {}: |Δlogit| {gap:.3}", theirs["position"]);
        assert!(gap < 1.0, "position {}: {gap}", theirs["position"]);
    }

    // Greedy decoding from the prompt, token by token as llama.cpp chose: where the
    // best tokens differ, ours must rate llama.cpp's within the quantisation noise.
    let mut context = tokens;
    let mut differ = Vec::new();
    for (i, &theirs) in ids(&reference["greedy"]).iter().enumerate() {
        let row = &model.logits(&context, &[context.len() - 1]).unwrap()[0];
        let best = argmax(row);
        if best != theirs {
            differ.push((i, row[best as usize] - row[theirs as usize]));
        }
        context.push(theirs);
    }
    assert!(
        differ.is_empty(),
        "greedy tokens that differ (step, gap): {differ:?}"
    );
}

fn request(seed: u64) -> LlmRequest {
    LlmRequest::chat(
        vec![
            ChatMessage::system("You are Ada, a careful engineer."),
            ChatMessage::user(format!(
                "Ben says bridge {seed} costs too much. Answer him."
            )),
        ],
        LlmSettings {
            temperature: Some(0.8),
            max_tokens: Some(12),
            ..LlmSettings::default()
        },
        CallContext::new(CallKind::Act, "t", 1, seed),
    )
}

#[test]
fn gemma3_replies_are_the_same_alone_and_in_a_batch() {
    let path = gemma3_path();
    let alone_backend = LocalBackend::start(&path, LocalOptions::default()).unwrap();
    let alone: Vec<String> = (0..3)
        .map(|seed| {
            futures::executor::block_on(alone_backend.complete(request(seed), None))
                .unwrap()
                .text
        })
        .collect();
    let batched = LocalBackend::start(&path, LocalOptions::default()).unwrap();
    let together: Vec<String> = futures::executor::block_on(futures::future::join_all(
        (0..3).map(|seed| batched.complete(request(seed), None)),
    ))
    .into_iter()
    .map(|c| c.unwrap().text)
    .collect();
    assert_eq!(together, alone);
    assert!(alone.iter().any(|t| !t.is_empty()), "{alone:?}");
}

/// A run on Gemma 3 killed (SIGKILL) after its second message and resumed ends with
/// the same transcript, byte for byte, as the run that was never killed.
#[test]
fn a_killed_gemma3_run_resumes_to_the_same_transcript() {
    let model = gemma3_path();
    let dir = tempfile::tempdir().unwrap();
    let args = |out: &std::path::Path| {
        let mut a: Vec<std::ffi::OsString> = ["run", "-q", "--seed", "5", "--max-turns", "6"]
            .map(Into::into)
            .to_vec();
        a.extend([
            root().join("scenarios/debate.json").into_os_string(),
            "--model".into(),
            model.clone().into_os_string(),
            "--embedder".into(),
            "hash".into(),
            "--out".into(),
            out.as_os_str().to_owned(),
        ]);
        a
    };
    let sopsim = || std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"));
    let whole = dir.path().join("whole");
    assert!(sopsim().args(args(&whole)).status().unwrap().success());

    let killed = dir.path().join("killed");
    let mut child = sopsim()
        .args(args(&killed))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let transcript = killed.join("transcript.jsonl");
    let lines = || std::fs::read_to_string(&transcript).map_or(0, |t| t.lines().count());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lines() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never wrote 2 lines"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !killed.join("summary.json").exists(),
        "killed before its end"
    );

    let mut resume = args(&killed);
    resume.push("--resume".into());
    assert!(sopsim().args(resume).status().unwrap().success());
    assert_eq!(
        std::fs::read(whole.join("transcript.jsonl")).unwrap(),
        std::fs::read(&transcript).unwrap(),
        "the resumed run's transcript differs from the whole run's"
    );
}
