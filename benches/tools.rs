//! Tools: the decision loop's own cost and the Elysia store at scale.
//!
//! - `decision_loop/turns_without_tools` and `decision_loop/turns_with_3_tool_steps`:
//!   the same 10-turn run with the scripted backend, without tools and with three
//!   calculator calls and an answer before every reply. The difference divided by the
//!   30 tool steps is what one step costs sopsim: a decision prompt, the call, its
//!   checks, the store, the events and two memory messages.
//! - `store/add_100k_as_results_of_50`: 100,000 product-like objects (Elysia's harness:
//!   6 fields, ~250 bytes) added as 2,000 results of 50 under one key, as a tree adds
//!   a query's results (Elysia 0.2.8: 355.8 s on this machine).
//! - `store/to_json_100k`: the store with those objects copied out as JSON (Elysia's
//!   `Environment.to_json`: 1.12 s).

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Map, Value};
use sopsim::scenario::Scenario;
use sopsim::simulation::Services;
use sopsim::tools::{ResultObject, Store};
use sopsim::{run_async, RunIo, RunOptions};

const TURNS: usize = 10;
const STEPS: usize = 3;

fn worker(with_tools: bool) -> Scenario {
    let mut decisions = Vec::new();
    for t in 0..TURNS {
        for s in 0..STEPS {
            decisions.push(json!({"tool": "calculator", "arguments": {"expression": format!("{t} * 10 + {s}")}}));
        }
        decisions.push(json!("answer"));
    }
    let tools: Vec<&str> = if with_tools {
        vec!["calculator"]
    } else {
        vec![]
    };
    let doc = json!({
        "name": "loop",
        "environment": {"top_k": 0},
        "agents": {"Ada": {"roles": {"work": "Worker"}}},
        "tools": {"calculator": {"kind": "calculator", "description": "Arithmetic."}},
        "sop": {"start": "work", "max_turns": TURNS, "states": {"work": {
            "roles": ["Worker"],
            "components": {"Worker": {"task": "Add things up.", "tools": tools, "max_tool_steps": STEPS + 1}},
            "transition": {"max_turns": TURNS}, "next": ["end"]
        }}},
        "script": {"default": "{name} reports a sum at turn {turn}.", "decisions": {"Ada": decisions}}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loop.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    sopsim::load(path.as_path(), &[]).unwrap().scenario
}

fn bench_loop(c: &mut Criterion) {
    let system = actix::System::new();
    let mut group = c.benchmark_group("decision_loop");
    for (name, with_tools) in [
        ("turns_without_tools", false),
        ("turns_with_3_tool_steps", true),
    ] {
        let scenario = Arc::new(worker(with_tools));
        let services = Services::scripted(&scenario);
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = system
                    .block_on(run_async(RunOptions::new(scenario.clone()), on(&services)))
                    .unwrap();
                assert_eq!(outcome.summary.turns as usize, TURNS);
            })
        });
    }
    group.finish();
}

fn object(i: usize) -> Map<String, Value> {
    let category = ["tools", "garden", "kitchen", "toys"][i % 4];
    let v = json!({
        "uuid": format!("00000000-0000-0000-0000-{i:012}"),
        "name": format!("Product {i}"),
        "description": format!("Product {i} is a sturdy item with several features. ").repeat(4),
        "price": ((1.5 + (i % 997) as f64 * 0.37) * 100.0).round() / 100.0,
        "category": category,
        "rating": (i % 50) as f64 / 10.0,
    });
    match v {
        Value::Object(o) => o,
        _ => unreachable!(),
    }
}

fn results() -> Vec<ResultObject> {
    (0..2_000)
        .map(|r| ResultObject::new("Products", (r * 50..r * 50 + 50).map(object).collect()))
        .collect()
}

fn bench_store(c: &mut Criterion) {
    let results = results();
    let mut group = c.benchmark_group("store");
    group.sample_size(10);
    group.throughput(Throughput::Elements(100_000));
    group.bench_function("add_100k_as_results_of_50", |b| {
        b.iter(|| {
            let mut store = Store::new();
            for r in &results {
                store.add("query", r, false);
            }
            store
        })
    });
    let mut store = Store::new();
    for r in &results {
        store.add("query", r, false);
    }
    group.bench_function("to_json_100k", |b| b.iter(|| store.to_json()));
    group.finish();
}

/// The caller's side of a run on `services`.
fn on(services: &Services) -> RunIo {
    RunIo {
        services: Some(services.clone()),
        ..RunIo::default()
    }
}

criterion_group!(benches, bench_loop, bench_store);
criterion_main!(benches);
