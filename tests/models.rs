//! The local models: MiniLM against sentence-transformers, the GGUF tokenizer against
//! known ids, and generation (determinism, stops, streaming, prefix reuse). These need
//! the model files; `.ci/run` fetches them and the helpers fetch them on first use.

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::*;
use sopsim::embed::{Embedder, MiniLm};
use sopsim::llm::local::{LocalBackend, LocalModel, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::models::{models_dir, MINILM, SMOLLM2};
use sopsim::scenario::LlmSettings;

fn minilm() -> &'static MiniLm {
    static M: OnceLock<MiniLm> = OnceLock::new();
    M.get_or_init(|| MiniLm::load(&MINILM.ensure(&models_dir()).unwrap()).unwrap())
}

fn gguf_path() -> std::path::PathBuf {
    SMOLLM2
        .ensure(&models_dir())
        .unwrap()
        .join(SMOLLM2.files[0].name)
}

fn backend() -> &'static LocalBackend {
    static B: OnceLock<LocalBackend> = OnceLock::new();
    B.get_or_init(|| LocalBackend::start(&gguf_path(), LocalOptions::default()).unwrap())
}

#[test]
fn minilm_matches_sentence_transformers() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/reference/minilm.json")).unwrap(),
    )
    .unwrap();
    let pairs = reference["pairs"].as_array().unwrap();
    let texts: Vec<&str> = pairs
        .iter()
        .flat_map(|p| [p["a"].as_str().unwrap(), p["b"].as_str().unwrap()])
        .collect();
    let vectors = minilm().embed(&texts).unwrap();
    let cos = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum::<f64>()
    };
    let mut worst = 0.0f64;
    for (i, p) in pairs.iter().enumerate() {
        let delta =
            (cos(&vectors[2 * i], &vectors[2 * i + 1]) - p["cosine"].as_f64().unwrap()).abs();
        worst = worst.max(delta);
    }
    eprintln!(
        "max |Δcosine| against sentence-transformers over {} pairs: {worst:e}",
        pairs.len()
    );
    assert!(worst <= 1e-5, "max |Δcosine| = {worst:e}");
    for v in reference["vectors"].as_array().unwrap() {
        let text = v["text"].as_str().unwrap();
        let ours = &minilm().embed(&[text]).unwrap()[0];
        let norm: f64 = v["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap().powi(2))
            .sum::<f64>()
            .sqrt();
        for (a, b) in ours.iter().zip(v["embedding"].as_array().unwrap()) {
            assert!(
                (f64::from(*a) - b.as_f64().unwrap() / norm).abs() <= 1e-5,
                "{text}: element differs"
            );
        }
    }
}

#[test]
fn minilm_gives_the_same_vector_alone_and_in_a_padded_batch() {
    let alone = minilm().embed(&["short"]).unwrap().remove(0);
    let batch = minilm()
        .embed(&[
            "short",
            "a much longer sentence that forces padding of the short one in the batch",
        ])
        .unwrap();
    let diff = alone
        .iter()
        .zip(&batch[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-5, "padding leaked into the embedding: {diff}");
}

#[test]
fn the_gguf_tokenizer_gives_smollm2_ids() {
    let model = LocalModel::load(
        &gguf_path(),
        &LocalOptions {
            dense_prefill: false,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        model.encode("Hello").unwrap(),
        [19556],
        "no prefix space (candle's own GGUF tokenizer gives 38699)"
    );
    assert_eq!(
        model.encode("<|im_start|>user\nHi<|im_end|>\n").unwrap()[0],
        1,
        "control tokens are single ids"
    );
    let ids = model.encode("<|im_end|>\n").unwrap();
    assert_eq!(ids, [2, 198]);
    assert_eq!(
        model.encode("2026").unwrap().len(),
        4,
        "digits are split one by one"
    );
    let text = "Ünïcödé 🚲, tabs\tand  spaces\n";
    let ids = model.encode(text).unwrap();
    assert_eq!(
        model.tokenizer().decode(&ids, false).unwrap(),
        text,
        "decoding round-trips"
    );
}

fn request(system: &str, user: &str, settings: LlmSettings, seed: u64) -> LlmRequest {
    LlmRequest {
        messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
        settings,
        context: CallContext {
            kind: CallKind::Act,
            state: "t".into(),
            turn: 1,
            agent: None,
            role: None,
            index: 0,
            choices: vec![],
            run_seed: seed,
        },
    }
}

fn greedy(max_tokens: u32) -> LlmSettings {
    LlmSettings {
        temperature: Some(0.0),
        max_tokens: Some(max_tokens),
        ..LlmSettings::default()
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

const SYSTEM: &str = "You are a helpful assistant who answers in one or two sentences about rivers, bridges and the towns built around them.";

#[test]
fn generation_is_coherent_deterministic_and_bounded() {
    let a = block_on(backend().complete(
        request(SYSTEM, "What is a bridge for?", greedy(40), 0),
        None,
    ))
    .unwrap();
    let b = block_on(backend().complete(
        request(SYSTEM, "What is a bridge for?", greedy(40), 0),
        None,
    ))
    .unwrap();
    assert_eq!(a.text, b.text, "greedy decoding is deterministic");
    assert!(
        a.text.to_lowercase().contains("bridge") || a.text.to_lowercase().contains("river"),
        "{}",
        a.text
    );
    assert!(a.usage.completion_tokens <= 40 && a.usage.completion_tokens > 3);
    assert!(!a.usage.estimated);
    let sampled = |seed| {
        block_on(backend().complete(
            request(
                SYSTEM,
                "Name a river.",
                LlmSettings {
                    temperature: Some(1.0),
                    max_tokens: Some(12),
                    ..LlmSettings::default()
                },
                seed,
            ),
            None,
        ))
        .unwrap()
        .text
    };
    assert_eq!(sampled(5), sampled(5), "a seeded run samples the same way");
}

/// A scenario-sized system prompt (about 180 tokens), the part agents' prompts share.
const LONG_SYSTEM: &str = "A town council debates a new bridge over the river. You are Ada, the town engineer. \
Your style: calm, precise, fond of numbers. Your task: explain what the bridge costs, how long it takes to build, \
and what it changes for the people who cross the river every day. Rules: answer in two sentences; never invent \
figures you were not given; say when you are unsure. Examples of how you speak: - The steel alone costs two million. \
- Building takes eighteen months if the river stays low. - Farmers on the east bank save an hour each market day. \
The council meets every Tuesday evening in the old mill, and the mayor keeps time strictly.";

#[test]
fn reusing_a_cached_prefix_gives_exactly_the_same_reply() {
    let uncached = LocalBackend::start(
        &gguf_path(),
        LocalOptions {
            cache_slots: 0,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let questions = [
        "Why do towns grow near rivers?",
        "How long will the bridge take?",
        "Why do towns grow near rivers?",
    ];
    let mut reused = 0;
    for q in questions {
        let cached =
            block_on(backend().complete(request(LONG_SYSTEM, q, greedy(24), 0), None)).unwrap();
        let fresh =
            block_on(uncached.complete(request(LONG_SYSTEM, q, greedy(24), 0), None)).unwrap();
        assert_eq!(cached.text, fresh.text, "{q}");
        assert_eq!(fresh.usage.cached_prompt_tokens, 0);
        reused += cached.usage.cached_prompt_tokens;
    }
    assert!(
        reused >= 2 * 128,
        "the shared system prompt was reused ({reused} tokens)"
    );
}

#[test]
fn stop_sequences_cut_the_reply_and_streaming_matches_it() {
    let pieces = Arc::new(Mutex::new(String::new()));
    let sink_pieces = pieces.clone();
    let sink: sopsim::llm::TokenSink =
        Arc::new(move |t: &str| sink_pieces.lock().unwrap().push_str(t));
    let settings = LlmSettings {
        stop: Some(vec!["3.".into()]),
        ..greedy(80)
    };
    let reply = block_on(backend().complete(
        request(
            "You answer with numbered lists.",
            "List five fruits, numbered 1. to 5.",
            settings,
            0,
        ),
        Some(sink),
    ))
    .unwrap();
    assert!(!reply.text.contains("3."), "{}", reply.text);
    assert!(reply.text.contains("1."), "{}", reply.text);
    assert_eq!(
        pieces.lock().unwrap().trim(),
        reply.text,
        "streamed text is the reply"
    );
}

#[test]
fn a_scenario_runs_on_the_local_models() {
    let scenario = example("debate");
    let services = sopsim::sim::Services {
        llm: Arc::new(LocalBackend::start(&gguf_path(), LocalOptions::default()).unwrap()),
        embed: sopsim::embed::EmbedService::start(
            Arc::new(MiniLm::load(&MINILM.ensure(&models_dir()).unwrap()).unwrap()),
            1,
            64,
        ),
        counter: backend().counter(),
        prices: Default::default(),
    };
    let config = sopsim::sim::RunConfig {
        max_turns: Some(4),
        seed: 3,
        ..Default::default()
    };
    let outcome = sopsim::sim::run_blocking(Arc::new(scenario), &services, config).unwrap();
    assert_eq!(
        (outcome.summary.turns, outcome.summary.ended_by.as_str()),
        (4, "max_turns")
    );
    assert!(!outcome.summary.tokens_estimated);
    assert_eq!(outcome.summary.embedder, "minilm");
    assert_eq!(
        outcome.summary.cost_usd,
        Some(0.0),
        "a local model costs nothing"
    );
    assert!(
        outcome.transcript[1..]
            .iter()
            .all(|m| !m.content.is_empty()),
        "the model spoke"
    );
}
