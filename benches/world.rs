//! The world's cost at a population's scale, and validation's at many variables.
//!
//! - `update/100000_members_10_variables`: one round of a public-goods world closed for
//!   100,000 members, each with 10 per-agent variables updated from the round's
//!   contributions (one compiled formula a variable, evaluated once a member).
//! - `validate/variables/N`: `validate` of a world of N global variables updated in one
//!   state, each reading the one before: linear in N.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use sopsim_core::memory::{Decision, Message, MessageKind};
use sopsim_core::scenario::{from_document, Scenario};
use sopsim_core::world::World;

/// A population of `members` contributing 0–20 a round, with `variables` per-agent
/// variables updated after each round.
fn commons(members: usize, variables: usize) -> Scenario {
    let mut vars = serde_json::Map::new();
    vars.insert(
        "pool".into(),
        json!({"initial": 0, "state": "give", "update": "sum * 1.6"}),
    );
    for v in 0..variables {
        vars.insert(
            format!("v{v}"),
            json!({"per_agent": true, "initial": 10, "state": "give",
                   "update": format!("me.v{v} + 20 - own + 1.6 * sum / n")}),
        );
    }
    let doc = json!({
        "name": "commons",
        "populations": {"citizens": {"count": members, "name": "citizen {i}",
            "roles": {"give": "Citizen"}}},
        "world": {"variables": vars},
        "sop": {"start": "give", "max_turns": members * 2, "states": {"give": {
            "roles": ["Citizen"], "turns": "simultaneous",
            "components": {"Citizen": {"choice": {"range": [0, 20, 1], "after": "instead"}}},
            "transition": {"max_rounds": 1}, "next": ["end"]
        }}}
    });
    from_document(std::path::Path::new("commons.json"), doc).unwrap()
}

fn round_of(scenario: &Scenario) -> Vec<Arc<Message>> {
    scenario
        .agents
        .keys()
        .enumerate()
        .map(|(i, name)| {
            let value = (i % 21).to_string();
            Arc::new(Message {
                seq: i as u64,
                state: "give".into(),
                visit: 1,
                role: "Citizen".into(),
                name: name.clone(),
                content: value.clone(),
                kind: MessageKind::Choice,
                decision: Some(Decision {
                    value,
                    probabilities: None,
                }),
            })
        })
        .collect()
}

fn update(c: &mut Criterion) {
    let scenario = commons(100_000, 10);
    let said = round_of(&scenario);
    let mut group = c.benchmark_group("update");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("100000_members_10_variables", |b| {
        b.iter_batched(
            || World::new(&scenario, 0, &[]).unwrap(),
            |mut world| world.close_round("give", 1, &said, &|| false).unwrap(),
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// A world of `n` global variables updated in one state, each reading the one before.
fn chained(n: usize) -> serde_json::Value {
    let mut vars = serde_json::Map::new();
    for v in 0..n {
        let update = match v {
            0 => "sum".to_string(),
            v => format!("world.x{} + 1", v - 1),
        };
        vars.insert(
            format!("x{v}"),
            json!({"initial": 0, "state": "give", "update": update}),
        );
    }
    json!({
        "name": "chained",
        "agents": {"Ann": {"roles": {"give": "A"}}},
        "world": {"variables": vars},
        "sop": {"start": "give", "states": {"give": {
            "roles": ["A"],
            "components": {"A": {"choice": {"range": [0, 20, 1], "after": "instead"}}},
            "transition": {"max_turns": 1},
            "next": ["end"]
        }}}
    })
}

fn validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate/variables");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for n in [1_000, 10_000] {
        let doc = chained(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &doc, |b, doc| {
            b.iter(|| from_document(std::path::Path::new("chained.json"), doc.clone()).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, update, validate);
criterion_main!(benches);
