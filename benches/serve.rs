//! What the web viewer costs a run: the same scripted 1,000-turn run through the
//! binary with `--serve`, watched by no browser and by 10 connected event streams
//! (`serve/no_clients`, `serve/10_clients`; time from Resume to the run's end, reported
//! as turns per second), and the memory each connected stream takes (printed: resident
//! memory before and after 100 streams have read a finished run's events).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sopsim::scenario::{Mode, ScenarioBuilder, Script, StateBuilder};

const TURNS: u32 = 1000;

fn scenario_file(dir: &std::path::Path) -> std::path::PathBuf {
    let scenario = ScenarioBuilder::new("marathon")
        .mode(Mode::Cooperative)
        .environment(|e| {
            e.max_chat_history = 8;
            e.top_k = 3;
        })
        .agent("Ann", |a| a.plays("talk", "A"))
        .agent("Bo", |a| a.plays("talk", "B"))
        .state(
            "talk",
            StateBuilder::new(["A", "B"])
                .begin("A", "Let us talk about rivers.")
                .max_turns(TURNS)
                .next(["end"]),
        )
        .max_turns(u64::from(TURNS))
        .script(Script {
            default: Some("{name} adds point {n} about the river at turn {turn}.".into()),
            ..Script::default()
        })
        .build()
        .unwrap();
    let path = dir.join("marathon.json");
    std::fs::write(&path, serde_json::to_string(&scenario).unwrap()).unwrap();
    path
}

/// A paused `sopsim run --serve`: the process, its address, and its stdout lines.
struct Served {
    child: Child,
    addr: String,
    lines: mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(scenario: &std::path::Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .arg("run")
        .arg(scenario)
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--serve",
            "--start-paused",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("sopsim run --serve printed no address within 60 s");
    let url = &first[first.find("http://").unwrap()..];
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    Served {
        child,
        addr,
        lines: rx,
    }
}

/// An event stream read to its end (or until the server goes away) on its own thread.
fn stream(addr: &str) -> std::thread::JoinHandle<usize> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        let mut total = 0;
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    })
}

fn post(addr: &str, path: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(
        out.starts_with("HTTP/1.1 2"),
        "POST {path} was refused: {}",
        out.lines().next().unwrap_or("no answer")
    );
}

/// Waits for the run's end, bounded so that a run that never ends fails the bench
/// instead of holding CI until its time runs out.
fn wait_for_end(served: &Served) {
    loop {
        let line = served
            .lines
            .recv_timeout(Duration::from_secs(120))
            .expect("the run printed no end within 120 s");
        if line.contains("the run ended") {
            return;
        }
    }
}

/// Seconds from Resume to the end of the run, with `clients` streams connected.
fn timed_run(scenario: &std::path::Path, clients: usize) -> Duration {
    let served = serve(scenario);
    let streams: Vec<_> = (0..clients).map(|_| stream(&served.addr)).collect();
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    post(&served.addr, "/api/resume");
    wait_for_end(&served);
    let took = start.elapsed();
    drop(served);
    for s in streams {
        let _ = s.join();
    }
    took
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn memory_per_client(scenario: &std::path::Path) {
    let served = serve(scenario);
    post(&served.addr, "/api/resume");
    wait_for_end(&served);
    let before = rss_kib(served.child.id());
    let n = 100;
    let streams: Vec<_> = (0..n).map(|_| stream(&served.addr)).collect();
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib(served.child.id());
    eprintln!(
        "serve/memory: {before} KiB before, {after} KiB with {n} streams that read {TURNS} turns: {:.1} KiB per stream",
        (after.saturating_sub(before)) as f64 / n as f64
    );
    drop(served);
    for s in streams {
        let _ = s.join();
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path());
    let mut g = c.benchmark_group("serve");
    g.sample_size(10);
    g.throughput(Throughput::Elements(u64::from(TURNS)));
    for clients in [0, 10] {
        let name = if clients == 0 {
            "no_clients".to_string()
        } else {
            format!("{clients}_clients")
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| timed_run(&scenario, clients)).sum())
        });
    }
    g.finish();
    memory_per_client(&scenario);
}

criterion_group!(benches, bench);
criterion_main!(benches);
