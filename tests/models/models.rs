//! The local models: MiniLM against sentence-transformers, the GGUF tokenizers and the
//! forward passes (llama: SmolLM2; qwen2: Qwen2.5-Coder-0.5B; qwen3 and Llama 3 on tiny
//! files in `tiny_models.rs`) against llama.cpp's ids
//! and logits, generation (determinism, stops, streaming, prefix reuse, batching) and
//! choices. These need the model files; the helpers fetch them on first use (one fetch
//! however many tests ask at once).

use std::sync::{Arc, Mutex, OnceLock};

use crate::common::*;
use sopsim::embed::{Embedder, MiniLm};
use sopsim::llm::local::{LocalBackend, LocalModel, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::models::{ModelSpec, Quiet, MINILM, QWEN05, SMOLLM2};
use sopsim::scenario::LlmSettings;

/// Where the tests find the models: `$SOPSIM_MODELS`, else the checkout's `models/`.
fn models_dir() -> std::path::PathBuf {
    match std::env::var_os("SOPSIM_MODELS").filter(|d| !d.is_empty()) {
        Some(d) => d.into(),
        None => sopsim::models::default_dir(&root(), &|k| std::env::var(k).ok()),
    }
}

fn minilm() -> &'static MiniLm {
    static M: OnceLock<MiniLm> = OnceLock::new();
    M.get_or_init(|| {
        MiniLm::load(
            &MINILM
                .ensure(&models_dir(), &Default::default(), &Quiet)
                .unwrap(),
        )
        .unwrap()
    })
}

fn model_path(spec: &ModelSpec) -> std::path::PathBuf {
    spec.ensure(&models_dir(), &Default::default(), &Quiet)
        .unwrap();
    spec.main_file(&models_dir())
}

fn gguf_path() -> std::path::PathBuf {
    model_path(&SMOLLM2)
}

/// SmolLM2: small and fast, for the behaviour of generation.
fn backend() -> &'static LocalBackend {
    static B: OnceLock<LocalBackend> = OnceLock::new();
    B.get_or_init(|| LocalBackend::start(&gguf_path(), LocalOptions::default()).unwrap())
}

/// Qwen2.5-Coder-0.5B: the smaller chat model, twice as fast as the default.
fn qwen() -> &'static LocalBackend {
    static B: OnceLock<LocalBackend> = OnceLock::new();
    B.get_or_init(|| LocalBackend::start(&model_path(&QWEN05), LocalOptions::default()).unwrap())
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
    let model = LocalModel::load(&gguf_path()).unwrap();
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

/// Both GGUF tokenizers against llama.cpp's ids on texts off the plain-English path:
/// digits, contractions, accents, other scripts, CJK, emoji sequences, whitespace runs
/// and control tokens (`tests/reference/tokenizer_ids.py`). Only the tokenizer is used.
#[test]
fn gguf_tokenizers_match_llama_cpp_beyond_plain_english() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/reference/tokenizer_ids.json")).unwrap(),
    )
    .unwrap();
    let texts = reference["texts"].as_array().unwrap();
    for spec in [&QWEN05, &SMOLLM2] {
        let want = reference["models"][spec.name]["ids"].as_array().unwrap();
        assert_eq!(want.len(), texts.len());
        let model = LocalModel::load(&model_path(spec)).unwrap();
        for (text, want) in texts.iter().zip(want) {
            let text = text.as_str().unwrap();
            let want: Vec<u32> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(
                model.encode(text).unwrap(),
                want,
                "{}: {text:?} is tokenized as llama.cpp does not",
                spec.name
            );
        }
    }
}

fn context(seed: u64) -> CallContext {
    CallContext {
        kind: CallKind::Act,
        state: "t".into(),
        turn: 1,
        agent: None,
        role: None,
        index: 0,
        choices: vec![],
        run_seed: seed,
    }
}

fn request(system: &str, user: &str, settings: LlmSettings, seed: u64) -> LlmRequest {
    LlmRequest::chat(
        vec![ChatMessage::system(system), ChatMessage::user(user)],
        settings,
        context(seed),
    )
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
    // max_tokens is a budget: past it the reply ends at a sentence, within a hard cap.
    let budget = sopsim::llm::ReplyBudget::of(40);
    assert!(a.usage.completion_tokens <= budget.hard as u64 && a.usage.completion_tokens > 3);
    assert!(
        a.usage.completion_tokens < budget.soft as u64 || sopsim::llm::ends_sentence(&a.text),
        "a reply past its budget ends a sentence: {}",
        a.text
    );
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
            cache_bytes: 0,
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
        eprintln!(
            "{q}: {} of {} prompt tokens reused",
            cached.usage.cached_prompt_tokens, cached.usage.prompt_tokens
        );
        reused += cached.usage.cached_prompt_tokens;
    }
    assert!(
        reused >= 2 * 128,
        "the shared system prompt was reused ({reused} tokens)"
    );
}

#[test]
fn a_drafted_reply_at_temperature_zero_is_the_plain_one() {
    // qwen05 drafting for itself: every draft is the model's own best token, so the
    // check keeps them, and the reply must be the one plain decoding gives.
    let drafted = LocalBackend::start(
        &model_path(&QWEN05),
        LocalOptions {
            draft_model: Some(model_path(&QWEN05)),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    for (q, max) in [
        ("Why do towns grow near rivers?", 60),
        ("Name three bridges.", 30),
    ] {
        let plain = block_on(qwen().complete(request(SYSTEM, q, greedy(max), 3), None)).unwrap();
        let spec = block_on(drafted.complete(request(SYSTEM, q, greedy(max), 3), None)).unwrap();
        assert_eq!(spec.text, plain.text, "{q}");
        assert_eq!(spec.usage.completion_tokens, plain.usage.completion_tokens);
        assert!(spec.usage.draft_checks > 0, "{q}: the draft drafted");
        assert!(
            spec.usage.accepted_drafts * 10 >= spec.usage.drafted_tokens * 9,
            "{q}: a model's own drafts are kept ({} of {})",
            spec.usage.accepted_drafts,
            spec.usage.drafted_tokens
        );
    }
}

#[test]
fn stop_sequences_cut_the_reply_and_streaming_matches_it() {
    let ask = |stop: Option<Vec<String>>, sink| {
        let settings = LlmSettings { stop, ..greedy(40) };
        block_on(backend().complete(
            request(
                "You answer with numbered lists.",
                "List five fruits.",
                settings,
                0,
            ),
            sink,
        ))
        .unwrap()
    };
    let full = ask(None, None);
    let words: Vec<&str> = full.text.split_whitespace().collect();
    assert!(words.len() > 6, "{}", full.text);
    // Stop at a word from the middle of the reply the model gives without a stop.
    let stop = words[words.len() / 2].to_string();
    let pieces = Arc::new(Mutex::new(String::new()));
    let sink_pieces = pieces.clone();
    let sink: sopsim::llm::TokenSink =
        Arc::new(move |t: &str| sink_pieces.lock().unwrap().push_str(t));
    let cut = ask(Some(vec![stop.clone()]), Some(sink));
    let want = full.text[..full.text.find(&stop).unwrap()].trim();
    assert_eq!(cut.text, want);
    assert_eq!(cut.stopped_at.as_deref(), Some(stop.as_str()));
    assert_eq!(
        pieces.lock().unwrap().trim(),
        cut.text,
        "streamed text is the reply"
    );
}

/// A draw that another would replace if it were flawed stops at the word that settles
/// its flaw: here the tenth word of a run it copies from what was said before.
#[test]
fn a_screened_draw_stops_at_the_word_that_makes_it_a_copy() {
    use sopsim_core::memory::{Message, MessageKind};
    use sopsim_core::quality::{Checker, Instructions, RedrawCause};
    let ask = |screen: Option<sopsim::llm::Screen>| {
        let mut r = request(SYSTEM, "What is a bridge for?", greedy(40), 0);
        if let Some(screen) = screen {
            r = r.screened(screen);
        }
        block_on(backend().complete(r, None)).unwrap()
    };
    let full = ask(None);
    let first_line: Vec<&str> = full
        .text
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(first_line.len() > 12, "{}", full.text);
    let mut checker = Checker::new(Instructions::default());
    checker.see(&Message {
        seq: 1,
        state: "t".into(),
        visit: 1,
        role: "Engineer".into(),
        name: "Ben".into(),
        content: format!("{} and so on.", first_line[..10].join(" ")),
        kind: MessageKind::Reply,
        decision: None,
    });
    let cut = ask(Some(sopsim::llm::Screen::new(Arc::new(checker), "Ada")));
    assert_eq!(cut.abandoned, Some(RedrawCause::Copy), "{}", cut.text);
    assert!(
        full.text.starts_with(&cut.text),
        "{} / {}",
        cut.text,
        full.text
    );
    assert!(cut.text.split_whitespace().count() <= 11, "{}", cut.text);
    assert!(cut.usage.completion_tokens < full.usage.completion_tokens);
    assert_eq!(full.abandoned, None);
}

#[test]
fn a_reply_never_holds_a_forbidden_string() {
    let ask_of = |model: &LocalBackend, system: &str, user: &str, forbid: Option<Vec<String>>| {
        let settings = LlmSettings {
            forbid,
            ..greedy(40)
        };
        block_on(model.complete(request(system, user, settings, 0), None)).unwrap()
    };
    let ask = |system: &str, user: &str, forbid| ask_of(backend(), system, user, forbid);
    let lists = "You answer with numbered lists.";
    let free = ask(lists, "List five fruits.", None).text;
    assert!(free.contains('.') && free.contains('e'), "{free}");
    let held = ask(
        lists,
        "List five fruits.",
        Some(vec![".".into(), "e".into()]),
    )
    .text;
    assert!(held.split_whitespace().count() > 3, "{held}");
    assert!(!held.contains('.') && !held.contains('e'), "{held}");
    // The end of a turn is a special token: forbidding "<" and "|" leaves it be, so a
    // short answer still ends where it did.
    let one_word = "You answer with one word.";
    let sky = "What colour is the sky on a clear day?";
    let short = ask_of(qwen(), one_word, sky, None);
    let budget = sopsim::llm::ReplyBudget::of(40);
    assert!(
        short.usage.completion_tokens < budget.soft as u64,
        "{}",
        short.text
    );
    let ended = ask_of(qwen(), one_word, sky, Some(vec!["<".into(), "|".into()]));
    assert_eq!(ended.text, short.text);
    assert_eq!(ended.usage.completion_tokens, short.usage.completion_tokens);
}

#[test]
fn a_scenario_runs_on_the_local_models() {
    let scenario = example("debate");
    let services = sopsim::simulation::Services {
        llm: Arc::new(LocalBackend::start(&gguf_path(), LocalOptions::default()).unwrap()),
        embed: sopsim::embed::EmbedService::start(
            Arc::new(
                MiniLm::load(
                    &MINILM
                        .ensure(&models_dir(), &Default::default(), &Quiet)
                        .unwrap(),
                )
                .unwrap(),
            ),
            1,
            64,
        )
        .unwrap(),
        counter: backend().counter(),
        prices: Default::default(),
    };
    let outcome = run_on(
        scenario,
        &services,
        |o| sopsim::RunOptions {
            max_turns: Some(4),
            seed: 3,
            ..o
        },
        sopsim::RunIo::default(),
    )
    .unwrap();
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
    // Each state's share of prompt tokens read from the cache is its own tokens' share.
    let by_state = &outcome.summary.tokens_by_state;
    assert!(!by_state.is_empty());
    for (state, usage) in by_state {
        let share = usage.cached_prompt_tokens as f64 / usage.prompt_tokens as f64;
        assert_eq!(usage.prompt_cache_share, Some(share), "{state}");
    }
    assert!(
        outcome.summary.prompt_cache_share.is_some_and(|s| s > 0.0),
        "a later turn continues an earlier prompt"
    );
}

/// Our tokenizer and forward pass against llama.cpp on the same file: the prompt's ids,
/// and the highest logits at three positions (`tests/reference/llamacpp_logits.py`).
fn matches_llama_cpp(spec: &ModelSpec, reference: &str) {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/reference").join(reference)).unwrap(),
    )
    .unwrap();
    let model = LocalModel::load(&model_path(spec)).unwrap();
    let want_ids: Vec<u32> = reference["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    let ids = model.encode(reference["prompt"].as_str().unwrap()).unwrap();
    assert_eq!(
        ids, want_ids,
        "{}: token ids differ from llama.cpp's",
        spec.name
    );
    let positions: Vec<usize> = reference["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["position"].as_u64().unwrap() as usize)
        .collect();
    let logits = model.logits(&ids, &positions).unwrap();
    let mut worst = 0f32;
    for (ours, theirs) in logits
        .iter()
        .zip(reference["positions"].as_array().unwrap())
    {
        let top: Vec<(usize, f32)> = theirs["top"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e[0].as_u64().unwrap() as usize,
                    e[1].as_f64().unwrap() as f32,
                )
            })
            .collect();
        let best = ours
            .iter()
            .enumerate()
            .fold(0, |b, (i, v)| if *v > ours[b] { i } else { b });
        // The top two may swap when their logits are within the quantisation noise.
        let margin = top[0].1 - top[1].1;
        assert!(
            best == top[0].0 || margin < 0.2,
            "{}: position {}: our best token {best}, llama.cpp's {}",
            spec.name,
            theirs["position"],
            top[0].0
        );
        for (id, value) in &top {
            worst = worst.max((ours[*id] - value).abs());
        }
    }
    eprintln!(
        "{}: max |Δlogit| against llama.cpp over its top 20 at {} positions: {worst:.3}",
        spec.name,
        positions.len()
    );
    assert!(
        worst < 0.75,
        "{}: logits differ from llama.cpp's by up to {worst}",
        spec.name
    );
}

#[test]
fn qwen2_matches_llama_cpp() {
    matches_llama_cpp(&QWEN05, "qwen05_logits.json");
}

#[test]
fn llama_matches_llama_cpp() {
    matches_llama_cpp(&SMOLLM2, "smollm2_logits.json");
}

fn pd_choice(temperature: f32, seed: u64) -> LlmRequest {
    LlmRequest::choice(
        vec![
            ChatMessage::system("You are Alice in a repeated prisoner's dilemma against Bob."),
            ChatMessage::user("Last round Bob defected. Choose your move: COOPERATE or DEFECT."),
        ],
        vec!["COOPERATE".into(), "DEFECT".into()],
        LlmSettings {
            temperature: Some(temperature),
            ..LlmSettings::default()
        },
        context(seed),
    )
}

#[test]
fn choices_on_the_local_model_are_probabilities_and_seeded_draws() {
    let greedy = block_on(qwen().complete(pd_choice(0.0, 1), None)).unwrap();
    let chosen = greedy.chosen.clone().expect("a choice");
    let p = chosen
        .probabilities
        .clone()
        .expect("probabilities from the logits");
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{p:?}");
    assert!(p.iter().all(|x| (0.0..=1.0).contains(x)));
    let best = if p[0] >= p[1] { 0 } else { 1 };
    assert_eq!(chosen.index, best, "temperature 0 takes the most probable");
    assert_eq!(greedy.text, ["COOPERATE", "DEFECT"][best]);
    assert_eq!(
        greedy.usage.completion_tokens, 0,
        "no text is generated: the options' first tokens differ"
    );
    let draws = |seed: u64| {
        (0..6)
            .map(|i: u64| {
                block_on(qwen().complete(pd_choice(1.0, seed + i), None))
                    .unwrap()
                    .chosen
                    .unwrap()
                    .index
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(draws(10), draws(10), "seeded draws repeat");
    // And the seed matters: drawn at a temperature that flattens the two options
    // (p^(1/20) is above 0.5 for any p over 1e-6), sixteen seeds all giving the same
    // option would mean the seed is not used.
    let hot: Vec<usize> = (0..16)
        .map(|seed| {
            block_on(qwen().complete(pd_choice(20.0, 100 + seed), None))
                .unwrap()
                .chosen
                .unwrap()
                .index
        })
        .collect();
    assert!(
        hot.contains(&0) && hot.contains(&1),
        "different seeds gave the same option every time: {hot:?}"
    );
}

#[test]
fn replies_are_the_same_alone_and_in_batches_with_and_without_reuse() {
    let questions: Vec<String> = (0..8)
        .map(|i| format!("Give one reason number {i} to build a bridge."))
        .collect();
    let req = |i: usize| request(LONG_SYSTEM, &questions[i], greedy(10), i as u64);
    let fresh = LocalBackend::start(
        &model_path(&QWEN05),
        LocalOptions {
            cache_bytes: 0,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let alone: Vec<String> = (0..8)
        .map(|i| block_on(fresh.complete(req(i), None)).unwrap().text)
        .collect();
    for (backend, size) in [(qwen(), 2), (&fresh, 5), (qwen(), 8)] {
        let batch: Vec<String> = block_on(futures::future::join_all(
            (0..size).map(|i| backend.complete(req(i), None)),
        ))
        .into_iter()
        .map(|c| c.unwrap().text)
        .collect();
        assert_eq!(batch, alone[..size], "a batch of {size}");
    }
    // Mixed with other requests (a choice and a longer reply) in the same batches.
    let mixed = block_on(futures::future::join3(
        qwen().complete(req(3), None),
        qwen().complete(pd_choice(0.0, 2), None),
        qwen().complete(
            request(SYSTEM, "Describe a river in detail.", greedy(30), 9),
            None,
        ),
    ));
    assert_eq!(mixed.0.unwrap().text, alone[3]);
}

/// Every sampler keeps a reply's bytes the same alone and in a batch, with and without
/// prefix reuse: penalties and draws depend only on the sequence's own context and
/// seed.
#[test]
fn every_sampler_gives_the_same_reply_alone_and_in_batches() {
    use sopsim::events::RedrawCause;
    use sopsim::llm::Redraw;
    use sopsim::scenario::{AllTokens, TokenWindow};
    let sampled = |extra: LlmSettings| LlmSettings {
        temperature: Some(0.9),
        max_tokens: Some(12),
        ..extra
    };
    let samplers = [
        (
            "top-k, top-p, min-p",
            sampled(LlmSettings {
                top_k: Some(40),
                top_p: Some(0.9),
                min_p: Some(0.05),
                ..LlmSettings::default()
            }),
        ),
        (
            "repeat, frequency and presence over the whole prompt",
            sampled(LlmSettings {
                repeat_penalty: Some(1.3),
                repeat_window: Some(TokenWindow::All(AllTokens::All)),
                frequency_penalty: Some(0.5),
                presence_penalty: Some(0.3),
                ..LlmSettings::default()
            }),
        ),
        (
            "DRY",
            sampled(LlmSettings {
                dry_multiplier: Some(1.0),
                dry_allowed_length: Some(2),
                dry_window: Some(TokenWindow::All(AllTokens::All)),
                ..LlmSettings::default()
            }),
        ),
    ];
    let questions: Vec<String> = (0..5)
        .map(|i| format!("Repeat after me, then add a word: bridge number {i} is tall."))
        .collect();
    let fresh = LocalBackend::start(
        &model_path(&QWEN05),
        LocalOptions {
            cache_bytes: 0,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    for (name, settings) in samplers {
        let req = |i: usize| {
            let r = request(LONG_SYSTEM, &questions[i], settings.clone(), i as u64);
            // The last one is a redraw steering away from a span.
            if i == 4 {
                r.redrawn(Redraw {
                    attempt: 2,
                    cause: RedrawCause::Copy,
                    avoid: vec!["bridge number 4 is tall".into()],
                })
            } else {
                r
            }
        };
        let alone: Vec<String> = (0..5)
            .map(|i| block_on(fresh.complete(req(i), None)).unwrap().text)
            .collect();
        for backend in [&fresh, qwen()] {
            let batch: Vec<String> = block_on(futures::future::join_all(
                (0..5).map(|i| backend.complete(req(i), None)),
            ))
            .into_iter()
            .map(|c| c.unwrap().text)
            .collect();
            assert_eq!(batch, alone, "{name}");
        }
    }
}

/// Chat templates render as Hugging Face's `apply_chat_template` renders them
/// (`tests/reference/chat_templates.py`, jinja2 with trim_blocks and lstrip_blocks).
#[test]
fn chat_templates_render_as_hugging_face_does() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/reference/chat_templates.json")).unwrap(),
    )
    .unwrap();
    for (name, spec) in [("qwen05", &QWEN05), ("smollm2", &SMOLLM2)] {
        let model = LocalModel::load(&model_path(spec)).unwrap();
        for case in reference[name]["cases"].as_array().unwrap() {
            let messages: Vec<(&str, &str)> = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
                .collect();
            let rendered = model.render(&messages).unwrap();
            assert_eq!(
                rendered,
                case["rendered"].as_str().unwrap(),
                "{name}: {messages:?}"
            );
        }
    }
}

/// Templates written for the reference (`TEMPLATES` in the generator) render as
/// transformers renders them: its `tojson` with keyword arguments, `<`, `>`, `&` and
/// `'` as they are, non-ASCII text, messages' keys in their order. No model needed.
#[test]
fn tojson_in_templates_renders_as_transformers_does() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/reference/chat_templates.json")).unwrap(),
    )
    .unwrap();
    let templates = reference["templates"].as_object().unwrap();
    assert!(!templates.is_empty());
    for (name, spec) in templates {
        let source = spec["source"].as_str().unwrap().to_string();
        let template =
            sopsim_infer::chat_template::ChatTemplate::new(Some(source), None, "</s>".into())
                .unwrap();
        for case in spec["cases"].as_array().unwrap() {
            let messages: Vec<(&str, &str)> = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
                .collect();
            assert_eq!(
                template.render(&messages, false).unwrap(),
                case["rendered"].as_str().unwrap(),
                "{name}: {messages:?}"
            );
        }
    }
}

#[test]
fn qwen05_calls_json_lookup_with_schema_valid_arguments() {
    let scenario = example("shop_assistant");
    let services = sopsim::simulation::Services {
        llm: Arc::new(LocalBackend::start(&model_path(&QWEN05), LocalOptions::default()).unwrap()),
        ..sopsim::simulation::Services::scripted(&scenario)
    };
    let outcome = run_on(
        scenario,
        &services,
        |o| sopsim::RunOptions {
            max_turns: Some(2),
            seed: 1,
            ..o
        },
        sopsim::RunIo::default(),
    )
    .unwrap();
    let calls = &outcome.summary.tools.calls["catalogue"];
    // Decoded under the schema, every call parses and validates: none is refused.
    assert!(calls.get("ok").copied().unwrap_or(0) >= 1, "{calls:?}");
    assert_eq!(calls.get("invalid_arguments"), None, "{calls:?}");
}

/// A request that cannot run (here a prompt longer than the model's positions) fails
/// alone, with an error that says why; the requests batched with it finish with the
/// replies they give alone.
#[test]
fn a_request_that_cannot_run_fails_alone_in_its_batch() {
    let ask = |i: u64| request(SYSTEM, &format!("Name bridge number {i}."), greedy(8), i);
    let alone: Vec<String> = (0..2)
        .map(|i| block_on(backend().complete(ask(i), None)).unwrap().text)
        .collect();
    let too_long = request(SYSTEM, &"bridge ".repeat(9000), greedy(8), 5);
    let (a, bad, b) = block_on(futures::future::join3(
        backend().complete(ask(0), None),
        backend().complete(too_long, None),
        backend().complete(ask(1), None),
    ));
    let err = bad.unwrap_err().to_string();
    assert!(err.contains("the model takes at most"), "{err}");
    assert_eq!(
        [a.unwrap().text, b.unwrap().text],
        [alone[0].clone(), alone[1].clone()]
    );
}

/// Two local models at once, one agent each, in a run and in a benchmark at one and
/// at four runs at a time: figures by model, and the same transcripts whatever the
/// batching.
#[test]
fn two_local_models_play_each_other_the_same_way_at_any_jobs() {
    for spec in [&QWEN05, &SMOLLM2] {
        model_path(spec);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dilemma.json");
    let choice = serde_json::json!({"choice": {"values": ["COOPERATE", "DEFECT"], "after": "instead",
        "prompt": "Round {{ round }}. Do you COOPERATE or DEFECT?"}});
    let doc = serde_json::json!({
        "name": "dilemma",
        "environment": {"top_k": 0},
        "llm": {"temperature": 0.7, "max_tokens": 8},
        "agents": {
            "Ann": {"roles": {"play": "Player 1"}},
            "Bo": {"roles": {"play": "Player 2"}, "llm": {"backend": "local", "model": "smollm2"}}
        },
        "world": {"variables": {"rounds_played": {"initial": 0, "state": "play", "update": "world.rounds_played + 1"}}},
        "sop": {"start": "play", "states": {"play": {
            "roles": ["Player 1", "Player 2"], "turns": "simultaneous",
            "environment_prompt": "Two players play a repeated prisoner's dilemma.",
            "components": {"Player 1": choice, "Player 2": choice},
            "transition": {"max_rounds": 1, "on_max_turns": "play", "max_visits": 3, "on_max_visits": "end"},
            "next": ["play", "end"]
        }}},
        "outcomes": {"players": ["Ann", "Bo"],
                     "decision": {"state": "play", "values": ["COOPERATE", "DEFECT"], "cooperative": ["COOPERATE"]}}
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    let sopsim = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
            .args(args)
            .env("SOPSIM_MODELS", models_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let bench = |jobs: &str| {
        let out = dir.path().join(format!("bench-{jobs}"));
        sopsim(&[
            "bench",
            path.to_str().unwrap(),
            "--model",
            "qwen05",
            "--embedder",
            "hash",
            "--seeds",
            "2",
            "--modes",
            "cooperative",
            "--jobs",
            jobs,
            "-q",
            "--out",
            out.to_str().unwrap(),
        ]);
        out
    };
    let (one, four) = (bench("1"), bench("4"));
    for seed in 0..2 {
        let run = |dir: &std::path::Path, file: &str| {
            std::fs::read(dir.join(format!("runs/dilemma/cooperative/seed-{seed}/{file}"))).unwrap()
        };
        assert_eq!(
            run(&one, "transcript.jsonl"),
            run(&four, "transcript.jsonl")
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&run(&one, "summary.json")).unwrap();
        let models: Vec<&String> = summary["tokens_by_model"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(models.len(), 2, "{models:?}");
        assert!(models.iter().any(|m| m.contains("SmolLM2")), "{models:?}");
        assert!(models.iter().any(|m| m.contains("qwen2.5")), "{models:?}");
        assert_eq!(summary["by_agent"]["Bo"]["calls"], 3);
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one.join("report.json")).unwrap()).unwrap();
    let figures = report["scenarios"][0]["figures"].as_object().unwrap();
    assert!(
        figures.contains_key("cooperation_rate.by.local:smollm2"),
        "{:?}",
        figures.keys()
    );
    assert!(figures.contains_key("cooperation_rate.by.run"));
}

/// Probes on the local model: a debate with a closed and a free-text probe says, byte
/// for byte, what it says without them (the engine's replies do not depend on what
/// else it was asked), and `sopsim interview` answers from the finished run.
#[test]
fn probes_and_an_interview_leave_a_local_run_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(crate::common::root().join("scenarios/debate.json")).unwrap();
    let plain: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut probed = plain.clone();
    probed["probes"] = serde_json::json!({
        "stance": {"question": "How sure are you of your side?", "ask": {"roles": ["Lead"]},
                   "when": ["start", {"every": 2}], "answer": {"choice": {"options": ["unsure", "fairly sure", "certain"]}}},
        "view": {"question": "In one sentence: what is your main point?", "ask": {"agents": ["Ada"]},
                 "when": [{"every": 3}], "answer": {"text": {"max_tokens": 40}}}
    });
    let sopsim = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
            .args(args)
            .env("SOPSIM_MODELS", models_dir())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut runs = Vec::new();
    for (name, doc) in [("plain", &plain), ("probed", &probed)] {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, doc.to_string()).unwrap();
        let out = dir.path().join(name);
        sopsim(&[
            "run",
            file.to_str().unwrap(),
            "-q",
            "--model",
            "qwen05",
            "--embedder",
            "hash",
            "--max-turns",
            "6",
            "--out",
            out.to_str().unwrap(),
        ]);
        runs.push(out);
    }
    assert_eq!(
        std::fs::read(runs[0].join("transcript.jsonl")).unwrap(),
        std::fs::read(runs[1].join("transcript.jsonl")).unwrap()
    );
    let answers = std::fs::read_to_string(runs[1].join("probes.jsonl")).unwrap();
    assert!(answers.lines().count() >= 6, "{answers}");
    let answer = sopsim(&[
        "interview",
        runs[1].to_str().unwrap(),
        "--agent",
        "Ada",
        "--model",
        "qwen05",
        "What was the strongest point you made?",
    ]);
    assert!(
        answer.starts_with("Ada: ") && answer.trim().len() > 10,
        "{answer}"
    );
}

/// A mixed roster on the local models: two models and two strategies meet in a short
/// prisoner's dilemma, every model loaded once for all its games, and are rated.
#[test]
fn a_mixed_roster_plays_on_the_local_models() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(crate::common::root().join("scenarios/tournaments/ipd_10.json"))
            .unwrap();
    let mut game: serde_json::Value = serde_json::from_str(&text).unwrap();
    game["sop"]["states"]["play"]["transition"]["max_visits"] = serde_json::json!(2);
    let game_file = dir.path().join("ipd_2.json");
    std::fs::write(&game_file, game.to_string()).unwrap();
    let roster = dir.path().join("roster.json");
    std::fs::write(
        &roster,
        serde_json::json!({"players": {
            "qwen05": {"llm": {"backend": "local", "model": "qwen05"}},
            "qwen15": {"llm": {"backend": "local", "model": "qwen15"}},
            "tit_for_tat": {"strategy": {"rule": "tit_for_tat"}},
            "always_defect": {"strategy": {"rule": "always_defect"}}
        }})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let done = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "tournament",
            game_file.to_str().unwrap(),
            "--players",
            roster.to_str().unwrap(),
        ])
        .args(["-q", "--embedder", "hash", "--out", out.to_str().unwrap()])
        .env("SOPSIM_MODELS", models_dir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["games"], 6, "{report}");
    for player in ["qwen05", "qwen15", "tit_for_tat", "always_defect"] {
        assert_eq!(report["ratings"][player]["games"], 3, "{player}");
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/qwen05-vs-qwen15/cooperative/seed-0/summary.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["tokens_by_model"].as_object().unwrap().len(),
        2,
        "{summary}"
    );
}
