//! Local model speed: MiniLM sentences per second by batch size; prompt and decode
//! tokens per second of the default chat model (Qwen2.5-Coder-0.5B) and SmolLM2; the
//! default model's aggregate decode rate with 1–8 sequences batched together; an agent
//! turn with and without prompt-prefix reuse; and a closed choice against a 20-token
//! reply. Needs the models (`sopsim models fetch minilm qwen05 smollm2`). Threads follow
//! `SOPSIM_THREADS` (default: one per core).
//!
//! The anchors: PyTorch + sentence-transformers (`benches/anchors/st_embed.py`, the same
//! sentences), and llama.cpp's own `llama-bench` (`benches/anchors/llama_bench.sh`):
//! `anchor_shape/*` measures sopsim in its shape, a 512-token prompt (pp512) and 128
//! generated tokens (tg128), for qwen05, qwen15 and gemma3 (when fetched), and after each tg128
//! prints decode's roofline: the weight bytes a token reads over the read bandwidth
//! measured right then (`read_bandwidth` measures that bandwidth on its own).
//! `anchor_speculative/*` is qwen15's tg128 alone and with qwen05 drafting, against
//! `llama-speculative` on the same prompt.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use sopsim::embed::{Embedder, MiniLm};
use sopsim::llm::local::{LocalBackend, LocalModel, LocalOptions};
use sopsim::llm::{CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};
use sopsim::models::{ModelSpec, Quiet, GEMMA3, MINILM, QWEN05, QWEN15, SMOLLM2};
use sopsim::scenario::LlmSettings;

/// Where the benchmarks find the models: `$SOPSIM_MODELS`, else the checkout's `models/`.
fn models_dir() -> std::path::PathBuf {
    match std::env::var_os("SOPSIM_MODELS").filter(|d| !d.is_empty()) {
        Some(d) => d.into(),
        None => {
            sopsim::models::default_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), &|k| {
                std::env::var(k).ok()
            })
        }
    }
}

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
    let model = MiniLm::load(
        &MINILM
            .ensure(&models_dir(), &Default::default(), &Quiet)
            .unwrap(),
    )
    .unwrap();
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
    story_told(5)
}

/// "Summarise this story" with the village story told `times` times.
fn story_told(times: usize) -> String {
    let s = "In Millbrook, a village of a hundred people beside a slow river, the baker opens her shop at six every morning. \
The miller brings flour across the old stone bridge, the children run to the school by the church, and the fishermen \
argue about the weather. ";
    format!(
        "Summarise this story in three sentences.\n\n{}",
        s.repeat(times)
    )
}

fn settings(max_tokens: u32) -> LlmSettings {
    LlmSettings {
        temperature: Some(0.0),
        max_tokens: Some(max_tokens),
        ..LlmSettings::default()
    }
}

fn context(index: u64) -> CallContext {
    CallContext {
        kind: CallKind::Act,
        state: "bench".into(),
        turn: 1,
        agent: None,
        role: None,
        index,
        choices: vec![],
        run_seed: index,
    }
}

const SYSTEM: &str = "You are a helpful assistant.";

fn request(user: &str, max_tokens: u32) -> LlmRequest {
    request_at(user, max_tokens, 0.0)
}

/// A request sampled at `temperature` (seeded, so every iteration draws the same reply).
fn request_at(user: &str, max_tokens: u32, temperature: f32) -> LlmRequest {
    LlmRequest::chat(
        vec![ChatMessage::system(SYSTEM), ChatMessage::user(user)],
        LlmSettings {
            temperature: Some(temperature),
            ..settings(max_tokens)
        },
        context(0),
    )
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// The time `iters` generations of `tokens` tokens after `prompt` take, the prompt read
/// from the prefix cache: each is timed as one call of `tokens + 1` tokens less one of a
/// single token over the same prompt (which primes the cache, then reads it).
fn decode_time(backend: &LocalBackend, prompt: &str, tokens: u32, iters: u64) -> Duration {
    decode_time_at(backend, prompt, tokens, 0.0, iters)
}

fn decode_time_at(
    backend: &LocalBackend,
    prompt: &str,
    tokens: u32,
    temperature: f32,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t0 = Instant::now();
        block_on(backend.complete(request_at(prompt, 1, temperature), None)).unwrap();
        let t1 = Instant::now();
        block_on(backend.complete(request_at(prompt, tokens + 1, temperature), None)).unwrap();
        total += t1.elapsed().saturating_sub(t1 - t0);
    }
    total
}

/// Prompt and decode tokens per second, single stream, for one model file.
fn bench_model(c: &mut Criterion, name: &str, spec: &ModelSpec) {
    let path = spec.main_file(&models_dir());
    spec.ensure(&models_dir(), &Default::default(), &Quiet)
        .unwrap();
    let fresh = LocalBackend::start(
        &path,
        LocalOptions {
            cache_bytes: 0,
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
    let prompt_tokens = block_on(fresh.complete(request(&story, 1), None))
        .unwrap()
        .usage
        .prompt_tokens;
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(prompt_tokens));
    group.bench_function(BenchmarkId::new("prompt_tokens", prompt_tokens), |b| {
        b.iter(|| block_on(fresh.complete(request(&story, 1), None)).unwrap())
    });
    const DECODE: u32 = 128;
    group.throughput(Throughput::Elements(u64::from(DECODE)));
    group.bench_function(BenchmarkId::new("decode_tokens", DECODE), |b| {
        b.iter_custom(|iters| decode_time(&reuse, &story, DECODE, iters))
    });
    group.finish();
}

/// Aggregate decode tokens per second with 1, 2, 4 and 8 sequences decoding together
/// (continuous batching across simulations), each after its own cached prompt.
fn bench_batched_decode(c: &mut Criterion) {
    let path = QWEN05.main_file(&models_dir());
    let backend = LocalBackend::start(
        &path,
        LocalOptions {
            ignore_eos: true,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    const DECODE: u32 = 64;
    let ask = |k: usize, max_tokens: u32| {
        let reqs = (0..k).map(|i| {
            LlmRequest::chat(
                vec![
                    ChatMessage::system(SYSTEM),
                    ChatMessage::user(format!("Tell story number {i} about a bridge.")),
                ],
                settings(max_tokens),
                context(i as u64),
            )
        });
        block_on(futures::future::join_all(
            reqs.map(|r| backend.complete(r, None)),
        ))
    };
    let mut group = c.benchmark_group("qwen05_batched_decode");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for k in [1usize, 2, 4, 8] {
        ask(k, 1); // the prompts are cached from here on
        group.throughput(Throughput::Elements(k as u64 * u64::from(DECODE)));
        group.bench_function(BenchmarkId::new("sequences", k), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    ask(k, 1);
                    let t1 = Instant::now();
                    ask(k, DECODE + 1);
                    total += t1.elapsed().saturating_sub(t1 - t0);
                }
                total
            })
        });
    }
    group.finish();
}

/// A closed choice between the two prisoner's-dilemma moves (one pass over the prompt,
/// the options scored from the logits) against a free reply of 20 tokens, same prompt.
fn bench_choice(c: &mut Criterion) {
    let path = QWEN05.main_file(&models_dir());
    let backend = LocalBackend::start(
        &path,
        LocalOptions {
            cache_bytes: 0,
            ignore_eos: true,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let messages = vec![
        ChatMessage::system("You are Alice in a repeated prisoner's dilemma against Bob. Both cooperating pays 3 each; both defecting 1 each; a defector against a cooperator gets 5 and the cooperator 0."),
        ChatMessage::user("Round 3. Last round Bob cooperated and you cooperated. Choose your move."),
    ];
    let mut group = c.benchmark_group("qwen05_decision");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("choice_of_two", |b| {
        b.iter(|| {
            let r = LlmRequest::choice(
                messages.clone(),
                vec!["COOPERATE".into(), "DEFECT".into()],
                settings(1),
                context(0),
            );
            block_on(backend.complete(r, None)).unwrap()
        })
    });
    group.bench_function("free_reply_20_tokens", |b| {
        b.iter(|| {
            block_on(backend.complete(
                LlmRequest::chat(messages.clone(), settings(20), context(0)),
                None,
            ))
            .unwrap()
        })
    });
    group.finish();
}

fn bench_generate(c: &mut Criterion) {
    bench_model(c, "qwen05", &QWEN05);
    bench_model(c, "smollm2", &SMOLLM2);
    let path = QWEN05.main_file(&models_dir());
    let fresh = LocalBackend::start(
        &path,
        LocalOptions {
            cache_bytes: 0,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let reuse = LocalBackend::start(&path, LocalOptions::default()).unwrap();

    // An agent's turn: a shared 180-token system prompt, a changing conversation.
    let system = "A town council debates a new bridge over the river. You are Ada, the town engineer. Your style: calm, precise, \
fond of numbers. Your task: explain what the bridge costs, how long it takes, and what it changes for the people who cross \
the river every day. Rules: answer in two sentences; never invent figures; say when you are unsure. Examples: - The steel \
alone costs two million. - Building takes eighteen months if the river stays low. - Farmers on the east bank save an hour \
each market day. The council meets on Tuesday evenings in the old mill.";
    let turn = |i: usize| {
        LlmRequest::chat(
            vec![ChatMessage::system(system), ChatMessage::user(format!("Conversation:\nMayor: Question {i}: what does the bridge change for the market?\nReply as Ada."))],
            settings(16),
            context(0),
        )
    };
    let mut group = c.benchmark_group("qwen05_agent_turn");
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
                block_on(backend.complete(turn(i), None)).unwrap()
            })
        });
    }
    group.finish();
}

/// Decode tokens per second on qwen05 after the 326-token story, drawing at temperature
/// 0.7 with the engine's default penalties, and with every sampler on over the whole
/// context (repeat, frequency, presence, DRY, min-p, top-k, top-p): what the samplers
/// cost per generated token, side by side.
fn bench_samplers(c: &mut Criterion) {
    use sopsim::scenario::{AllTokens, TokenWindow};
    let path = QWEN05.main_file(&models_dir());
    QWEN05
        .ensure(&models_dir(), &Default::default(), &Quiet)
        .unwrap();
    let backend = LocalBackend::start(
        &path,
        LocalOptions {
            ignore_eos: true,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let all = TokenWindow::All(AllTokens::All);
    let samplers = [
        ("default", LlmSettings::default()),
        (
            "every_sampler",
            LlmSettings {
                repeat_penalty: Some(1.1),
                repeat_window: Some(all),
                frequency_penalty: Some(0.2),
                presence_penalty: Some(0.2),
                dry_multiplier: Some(0.8),
                dry_window: Some(all),
                min_p: Some(0.05),
                top_k: Some(40),
                top_p: Some(0.95),
                ..LlmSettings::default()
            },
        ),
    ];
    let story = story();
    const DECODE: u32 = 128;
    let mut group = c.benchmark_group("qwen05_samplers");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(u64::from(DECODE)));
    for (name, extra) in samplers {
        let req = |max_tokens: u32| {
            let mut r = request(&story, max_tokens);
            r.settings = LlmSettings {
                temperature: Some(0.7),
                max_tokens: Some(max_tokens),
                ..extra.clone()
            };
            r
        };
        group.bench_function(BenchmarkId::new("decode_tokens", name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    block_on(backend.complete(req(1), None)).unwrap();
                    let t1 = Instant::now();
                    block_on(backend.complete(req(DECODE + 1), None)).unwrap();
                    total += t1.elapsed().saturating_sub(t1 - t0);
                }
                total
            })
        });
    }
    group.finish();
}

/// A prompt of about 512 tokens: the summarisation prompt with the story told eight
/// times over.
fn prompt_512() -> String {
    story_told(8)
}

/// sopsim in llama-bench's shape: pp512 (the prompt read with nothing cached) and tg128
/// (128 tokens generated after a cached prompt), one sequence, for each model fetched.
fn bench_anchor_shape(c: &mut Criterion) {
    let mut group = c.benchmark_group("anchor_shape");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, spec) in [
        ("qwen05", &QWEN05),
        ("qwen15", &QWEN15),
        ("gemma3", &GEMMA3),
    ] {
        if !spec.is_present(&models_dir()) {
            eprintln!("anchor_shape/{name}: not fetched (sopsim models fetch {name}), skipped");
            continue;
        }
        let path = spec.main_file(&models_dir());
        let options = |cache_bytes| LocalOptions {
            cache_bytes,
            ignore_eos: true,
            ..LocalOptions::default()
        };
        let fresh = LocalBackend::start(&path, options(0)).unwrap();
        let loaded = LocalModel::load(&path).unwrap();
        let decode_bytes = loaded.decode_bytes();
        let reuse = LocalBackend::serve(loaded, options(256 << 20), None).unwrap();
        let prompt = prompt_512();
        let tokens = block_on(fresh.complete(request(&prompt, 1), None))
            .unwrap()
            .usage
            .prompt_tokens;
        group.throughput(Throughput::Elements(tokens));
        group.bench_function(BenchmarkId::new(format!("{name}_pp"), tokens), |b| {
            b.iter(|| block_on(fresh.complete(request(&prompt, 1), None)).unwrap())
        });
        const TG: u32 = 128;
        group.throughput(Throughput::Elements(u64::from(TG)));
        group.bench_function(BenchmarkId::new(format!("{name}_tg"), TG), |b| {
            b.iter_custom(|iters| decode_time(&reuse, &prompt, TG, iters))
        });
        print_roofline(name, decode_bytes);
    }
    group.finish();
}

/// Speculative decoding in the shape of llama.cpp's `llama-speculative` (see
/// `benches/anchors/llama_bench.sh`): qwen15 generates 128 tokens after the anchor's
/// cached prompt, alone and with qwen05 drafting, greedy and at temperature 0.7. The
/// prompt as the chat template renders it goes to `target/anchor_prompt.txt` for
/// llama.cpp to read.
fn bench_anchor_speculative(c: &mut Criterion) {
    if !QWEN15.is_present(&models_dir()) || !QWEN05.is_present(&models_dir()) {
        eprintln!("anchor_speculative: needs qwen05 and qwen15 fetched, skipped");
        return;
    }
    let target = QWEN15.main_file(&models_dir());
    let prompt = prompt_512();
    let loaded = LocalModel::load(&target).unwrap();
    let rendered = loaded
        .render(&[("system", SYSTEM), ("user", &prompt)])
        .unwrap();
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/anchor_prompt.txt");
    if let Err(e) = std::fs::write(&out, rendered) {
        eprintln!("anchor_speculative: could not write {}: {e}", out.display());
    }
    let options = |draft_model| LocalOptions {
        ignore_eos: true,
        draft_model,
        ..LocalOptions::default()
    };
    let plain = LocalBackend::serve(loaded, options(None), None).unwrap();
    let drafted =
        LocalBackend::start(&target, options(Some(QWEN05.main_file(&models_dir())))).unwrap();
    let mut group = c.benchmark_group("anchor_speculative");
    // One generation takes seconds: ten of them a case, not criterion's 55.
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    const TG: u32 = 128;
    group.throughput(Throughput::Elements(u64::from(TG)));
    for temperature in [0.0f32, 0.7] {
        for (name, backend) in [("plain", &plain), ("drafted", &drafted)] {
            let id = BenchmarkId::new(format!("qwen15_{name}"), format!("t{temperature}"));
            group.bench_function(id, |b| {
                b.iter_custom(|iters| decode_time_at(backend, &prompt, TG, temperature, iters))
            });
        }
    }
    group.finish();
}

/// What decode's roofline is right after the decode bench: the `bytes` a token reads
/// over the read bandwidth measured now (the bandwidth of a shared machine drifts).
fn print_roofline(name: &str, bytes: usize) {
    let buffer = bandwidth_buffer();
    let bandwidth = bandwidth_now(&buffer);
    eprintln!(
        "anchor_shape/{name}: a decode token reads {:.1} MB of weights; read bandwidth \
         now {:.2} GB/s on {} threads, so the roofline is {:.1} tok/s",
        bytes as f64 / 1e6,
        bandwidth / 1e9,
        threads(),
        bandwidth / bytes as f64
    );
}

/// Threads for model work, as the engine counts them.
fn threads() -> usize {
    std::env::var("SOPSIM_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Bytes summed to measure the read bandwidth: far more than the caches hold.
const BANDWIDTH_BYTES: usize = 1 << 30;

/// The buffer the read bandwidth is measured on, [`BANDWIDTH_BYTES`] long, asked to be
/// on huge pages as the engine's weights are: on 4-KiB pages a virtual machine's reads
/// pay nested page walks (20 against 31 GB/s on the 2-core Xeon guest of 2026-11-26),
/// and the roofline is what the memory can give.
fn bandwidth_buffer() -> Vec<u64> {
    let n = BANDWIDTH_BYTES / 8;
    let mut buffer: Vec<u64> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let start = (buffer.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
        let end = (buffer.as_ptr() as usize + BANDWIDTH_BYTES) / HUGE_PAGE * HUGE_PAGE;
        // SAFETY: the range lies inside the allocation just made and not yet written;
        // the advice only changes which pages back it.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    // No byte is 0xFF, so a scan for one reads all of it.
    buffer.resize(n, 0x0101_0101_0101_0101);
    buffer
}

/// Scans `buffer` for a byte it does not hold, split between `threads` threads:
/// memchr's vector loop (optimised as a dependency even when the bench is not) reads
/// faster than memory delivers, so the time is the memory's.
fn scan_in_parallel(buffer: &[u64], threads: usize) -> u64 {
    let part = buffer.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let found: Vec<_> = buffer
            .chunks(part)
            .map(|chunk| {
                scope.spawn(move || {
                    // SAFETY: any u64 slice is a valid byte slice of eight times its length.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(chunk.as_ptr().cast::<u8>(), chunk.len() * 8)
                    };
                    memchr::memchr(0xFF, bytes).map_or(0, |at| at as u64)
                })
            })
            .collect();
        found
            .into_iter()
            .map(|h| h.join().unwrap_or(0))
            .fold(0u64, u64::wrapping_add)
    })
}

/// The read bandwidth right now, in bytes per second: the median of five scans of
/// `buffer`.
fn bandwidth_now(buffer: &[u64]) -> f64 {
    let mut rates: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(scan_in_parallel(buffer, threads()));
            std::mem::size_of_val(buffer) as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[2]
}

/// The machine's read bandwidth on the threads the engine uses: a scan of 1 GiB, far
/// larger than the caches, split between the threads. Single-stream decode reads every
/// weight once per token, so this over the bytes a token reads is its roofline.
fn bench_read_bandwidth(c: &mut Criterion) {
    let buffer = bandwidth_buffer();
    let mut group = c.benchmark_group("read_bandwidth");
    group
        .sample_size(10)
        .throughput(Throughput::Bytes(BANDWIDTH_BYTES as u64));
    group.bench_function(BenchmarkId::new("threads", threads()), |b| {
        b.iter(|| scan_in_parallel(&buffer, threads()))
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_read_bandwidth,
    bench_anchor_shape,
    bench_anchor_speculative,
    bench_embed,
    bench_generate,
    bench_batched_decode,
    bench_choice,
    bench_samplers
);
criterion_main!(benches);
