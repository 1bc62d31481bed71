//! What probes add to a run: a population of 10,000 members choosing a contribution
//! each round for 10 rounds on the scripted backend, with and without a probe that
//! asks a seeded sample of 100 members a closed question after every round
//! (`probes/population_10000/without` and `/with`, side by side). The probes should add
//! at most a tenth to the run's time.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use sopsim::scenario::Scenario;
use sopsim::simulation::Services;
use sopsim::{run_async, RunIo, RunOptions, ScenarioSource};

fn population(probed: bool) -> Scenario {
    let mut doc = json!({
        "name": "citizens",
        "environment": {"max_chat_history": 4, "top_k": 0},
        "populations": {"citizens": {"count": 10000, "name": "citizen {i}",
            "style": "A citizen of a small town.", "roles": {"give": "Citizen"},
            "network": {"kind": "ring", "k": 2}}},
        "sop": {"start": "give", "max_turns": 200000, "states": {"give": {
            "roles": ["Citizen"], "turns": "simultaneous",
            "environment_prompt": "Each citizen gives from 0 to 10 tokens to the town's fund.",
            "components": {"Citizen": {"choice": {"range": [0, 10, 1], "after": "instead"}}},
            "transition": {"max_rounds": 10}, "next": ["end"]
        }}}
    });
    if probed {
        doc["probes"] = json!({"trust": {
            "question": "How far do you trust the other citizens to give?",
            "ask": {"population": "citizens", "sample": 100},
            "when": [{"after": "give"}],
            "answer": {"choice": {"options": ["not at all", "a little", "mostly", "fully"]}}
        }});
    }
    let source = ScenarioSource::Document {
        origin: "citizens.json".into(),
        document: doc,
    };
    sopsim::load(source, &[]).unwrap().scenario
}

fn bench_probes(c: &mut Criterion) {
    let system = actix::System::new();
    let mut group = c.benchmark_group("probes/population_10000");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(60));
    for (name, probed) in [("without", false), ("with", true)] {
        let scenario = Arc::new(population(probed));
        let services = Services::scripted(&scenario);
        group.bench_function(name, |b| {
            b.iter(|| {
                let io = RunIo {
                    services: Some(services.clone()),
                    ..RunIo::default()
                };
                let out = system
                    .block_on(run_async(RunOptions::new(scenario.clone()), io))
                    .unwrap();
                assert_eq!(out.summary.turns, 100_000);
                assert_eq!(out.probes.len(), if probed { 1000 } else { 0 });
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_probes);
criterion_main!(benches);
