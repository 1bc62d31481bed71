//! Local model speed: MiniLM sentences per second by batch size, and SmolLM2 prompt and
//! decode tokens per second, with and without prompt-prefix reuse. Needs the models
//! (`sopsim models fetch`). Thread count follows `RAYON_NUM_THREADS` (default: one per
//! core); run once with `RAYON_NUM_THREADS=1` to compare.
//!
//! The anchors (PyTorch + sentence-transformers; llama.cpp) are measured by
//! `benches/anchors/*.py` on the same sentences and prompt.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sopsim::embed::{Embedder, MiniLm};
use sopsim::llm::local::{LocalBackend, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::models::{models_dir, MINILM, SMOLLM2};
use sopsim::scenario::LlmSettings;

/// Thirteen-word sentences, as in the anchors' measurements.
fn sentences(n: usize) -> Vec<String> {
    let subjects = [
        "The council",
        "A farmer",
        "The engineer",
        "Our team",
        "The mayor",
        "A student",
        "The river",
        "This bridge",
    ];
    let verbs = [
        "debated",
        "measured",
        "questioned",
        "approved",
        "described",
        "ignored",
        "praised",
        "rebuilt",
    ];
    (0..n)
        .map(|i| {
            format!(
                "{} {} the plan for the old stone bridge on market day number {} near town.",
                subjects[i % 8],
                verbs[(i / 8) % 8],
                i
            )
        })
        .collect()
}

fn bench_embed(c: &mut Criterion) {
    let model = MiniLm::load(&MINILM.ensure(&models_dir()).unwrap()).unwrap();
    let mut group = c.benchmark_group("minilm");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for batch in [1usize, 8, 32, 128] {
        let texts = sentences(batch);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_with_input(BenchmarkId::new("batch", batch), &refs, |b, refs| {
            b.iter(|| model.embed(refs).unwrap())
        });
    }
    group.finish();
}

/// The 326-token summarisation prompt of the anchors' measurements: a long story.
fn story() -> String {
    let s = "In Millbrook, a village of a hundred people beside a slow river, the baker opens her shop at six every morning. \
The miller brings flour across the old stone bridge, the children run to the school by the church, and the fishermen \
argue about the weather. ";
    format!(
        "Summarise this story in three sentences.\n\n{}",
        s.repeat(5)
    )
}

fn request(user: &str, max_tokens: u32) -> LlmRequest {
    LlmRequest {
        messages: vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user(user),
        ],
        settings: LlmSettings {
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            ..LlmSettings::default()
        },
        context: CallContext {
            kind: CallKind::Act,
            state: "bench".into(),
            turn: 1,
            agent: None,
            role: None,
            index: 0,
            choices: vec![],
            run_seed: 0,
        },
    }
}

fn bench_generate(c: &mut Criterion) {
    let path = SMOLLM2
        .ensure(&models_dir())
        .unwrap()
        .join(SMOLLM2.files[0].name);
    let fresh = LocalBackend::start(
        &path,
        LocalOptions {
            cache_slots: 0,
            ignore_eos: true,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let reuse = LocalBackend::start(
        &path,
        LocalOptions {
            ignore_eos: true,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let story = story();
    let prompt_tokens = futures::executor::block_on(fresh.complete(request(&story, 1), None))
        .unwrap()
        .usage
        .prompt_tokens;
    let mut group = c.benchmark_group("smollm2");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(prompt_tokens));
    group.bench_function(BenchmarkId::new("prompt_tokens", prompt_tokens), |b| {
        b.iter(|| futures::executor::block_on(fresh.complete(request(&story, 1), None)).unwrap())
    });
    const DECODE: u32 = 128;
    group.throughput(Throughput::Elements(u64::from(DECODE)));
    group.bench_function(BenchmarkId::new("decode_tokens", DECODE), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                futures::executor::block_on(reuse.complete(request(&story, 1), None)).unwrap();
                let t1 = Instant::now();
                futures::executor::block_on(reuse.complete(request(&story, DECODE + 1), None))
                    .unwrap();
                total += t1.elapsed().saturating_sub(t1 - t0);
            }
            total
        })
    });
    group.finish();

    // An agent's turn: a shared 180-token system prompt, a changing conversation.
    let system = "A town council debates a new bridge over the river. You are Ada, the town engineer. Your style: calm, precise, \
fond of numbers. Your task: explain what the bridge costs, how long it takes, and what it changes for the people who cross \
the river every day. Rules: answer in two sentences; never invent figures; say when you are unsure. Examples: - The steel \
alone costs two million. - Building takes eighteen months if the river stays low. - Farmers on the east bank save an hour \
each market day. The council meets on Tuesday evenings in the old mill.";
    let turn = |i: usize| {
        LlmRequest {
        messages: vec![ChatMessage::system(system), ChatMessage::user(format!("Conversation:\nMayor: Question {i}: what does the bridge change for the market?\nReply as Ada."))],
        ..request("", 16)
    }
    };
    let mut group = c.benchmark_group("agent_turn");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, backend) in [
        ("without_prefix_reuse", &fresh),
        ("with_prefix_reuse", &reuse),
    ] {
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                futures::executor::block_on(backend.complete(turn(i), None)).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_embed, bench_generate);
criterion_main!(benches);
