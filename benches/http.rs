//! The HTTP path's own cost: the debate scenario against an OpenAI-compatible server
//! that answers instantly (in this process, keep-alive, streamed replies), next to the
//! scripted backend; and how many requests per second one process sustains with 100
//! simulations in parallel.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sopsim::embed::{EmbedService, HashEmbedder};
use sopsim::llm::openai::{OpenAiBackend, OpenAiOptions};
use sopsim::llm::Estimator;
use sopsim::scenario::Scenario;
use sopsim::simulation::Services;
use sopsim::{run_async, RunIo, RunOptions};

/// An instant server: every request gets the same reply (streamed when the request
/// asks for a stream), connections kept alive.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut body = String::new();
    for piece in ["Car-free ", "centres ", "are ", "quieter ", "and safer."] {
        body.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{piece}\"}}}}]}}\n\n"
        ));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n");
    let streamed = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let whole = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Car-free centres are quieter and safer."},"finish_reason":"stop"}],"usage":{"prompt_tokens":300,"completion_tokens":5}}"#;
    let plain = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{whole}",
        whole.len()
    );
    let responses = Arc::new((streamed, plain));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let responses = responses.clone();
            std::thread::spawn(move || {
                let _ = conn.set_nodelay(true);
                let mut writer = conn.try_clone().unwrap();
                let mut reader = BufReader::new(conn);
                loop {
                    let mut len = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let stream = String::from_utf8_lossy(&body).contains("\"stream\":true");
                    let response = if stream { &responses.0 } else { &responses.1 };
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    base
}

fn debate() -> Arc<Scenario> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/debate.json");
    Arc::new(sopsim::load(file.as_path(), &[]).unwrap().scenario)
}

fn http_services(base: &str, concurrency: usize) -> Services {
    let o = OpenAiOptions {
        base_url: base.to_string(),
        api_key: None,
        model: Some("bench".into()),
        concurrency,
        read_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    Services {
        llm: Arc::new(OpenAiBackend::new(o).unwrap()),
        embed: EmbedService::inline(Arc::new(HashEmbedder::default())),
        counter: Arc::new(Estimator),
        prices: Default::default(),
    }
}

fn bench_turns(c: &mut Criterion) {
    let scenario = debate();
    let base = serve();
    let system = actix::System::new();
    let mut group = c.benchmark_group("debate_turns");
    for (name, services) in [
        ("scripted", Services::scripted(&scenario)),
        ("openai_http", http_services(&base, 8)),
    ] {
        let turns = system
            .block_on(run_async(RunOptions::new(scenario.clone()), on(&services)))
            .unwrap()
            .summary
            .turns;
        group.throughput(Throughput::Elements(turns));
        group.bench_function(name, |b| {
            b.iter(|| {
                assert_eq!(
                    system
                        .block_on(run_async(RunOptions::new(scenario.clone()), on(&services)))
                        .unwrap()
                        .summary
                        .turns,
                    turns
                )
            })
        });
    }
    group.finish();
}

fn bench_parallel(c: &mut Criterion) {
    const SIMS: usize = 100;
    let scenario = debate();
    let base = serve();
    let services = http_services(&base, 64);
    let system = actix::System::new();
    let calls_per_run = system
        .block_on(run_async(RunOptions::new(scenario.clone()), on(&services)))
        .unwrap()
        .summary
        .llm_calls["total"];
    let mut group = c.benchmark_group("parallel");
    group
        .sample_size(10)
        .throughput(Throughput::Elements(calls_per_run * SIMS as u64));
    group.bench_function("100_simulations_requests", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let runs = (0..SIMS).map(|i| {
                    run_async(
                        RunOptions {
                            seed: i as u64,
                            ..RunOptions::new(scenario.clone())
                        },
                        on(&services),
                    )
                });
                for r in system.block_on(futures::future::join_all(runs)) {
                    assert_eq!(r.unwrap().summary.ended_by.as_str(), "end");
                }
            }
            start.elapsed()
        })
    });
    group.finish();
}

/// The caller's side of a run on `services`.
fn on(services: &Services) -> RunIo {
    RunIo {
        services: Some(services.clone()),
        ..RunIo::default()
    }
}

criterion_group!(benches, bench_turns, bench_parallel);
criterion_main!(benches);
