//! Simulator throughput with the scripted backend and the hash embedder, where the
//! framework's own cost is all there is to measure.
//!
//! - `debate/full_run`: the example debate (16 turns, 5 states, an LLM-routed state),
//!   reported in turns per second.
//! - `per_turn/at_10` and `per_turn/at_1000`: the cost of one turn early and late in a
//!   1,021-turn single-state run (summaries every 8 messages, top-3 retrieval). The two
//!   should be about equal: nothing a turn does grows with the length of the run except
//!   the retrieval scan, one dot product per earlier message.
//! - `crowd_per_turn/100_agents` and `/10000_agents`: a turn in a scenario of 100 and
//!   of 10,000 agents; a turn's cost should not depend on the number of agents.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sopsim::events::{EventSink, SimEvent};
use sopsim::scenario::{Mode, Scenario, ScenarioBuilder, Script, StateBuilder};
use sopsim::simulation::Services;
use sopsim::{run_async, RunIo, RunOptions};

fn debate() -> Scenario {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/debate.json");
    sopsim::load(file.as_path(), &[]).unwrap().scenario
}

fn marathon(turns: u32) -> Scenario {
    ScenarioBuilder::new("marathon")
        .mode(Mode::Cooperative)
        .environment(|e| {
            e.max_chat_history = 8;
            e.top_k = 3;
        })
        .agent("Ann", |a| a.plays("talk", "A"))
        .agent("Bo", |a| a.plays("talk", "B"))
        .state("talk", StateBuilder::new(["A", "B"]).begin("A", "Let us talk about rivers.").max_turns(turns).next(["end"]))
        .max_turns(u64::from(turns))
        .script(Script {
            default: Some("{name} adds point {n} about the river, its floods and its bridges, at turn {turn}.".into()),
            ..Script::default()
        })
        .build()
        .unwrap()
}

/// Records when each turn's message was emitted.
#[derive(Default)]
struct TurnClock(Mutex<Vec<Instant>>);

impl EventSink for TurnClock {
    fn emit(&self, event: &SimEvent) {
        if let SimEvent::Message(_) = event {
            self.0.lock().unwrap().push(Instant::now());
        }
    }
}

/// The mean time of a turn between turns `from` and `to` of one run, from the times
/// its messages were emitted.
fn turn_time(
    system: &actix::SystemRunner,
    scenario: &Arc<Scenario>,
    services: &Services,
    (from, to): (usize, usize),
) -> Duration {
    let clock = Arc::new(TurnClock::default());
    let io = RunIo {
        sinks: vec![clock.clone()],
        ..on(services)
    };
    system
        .block_on(run_async(RunOptions::new(scenario.clone()), io))
        .unwrap();
    let t = clock.0.lock().unwrap();
    (t[to] - t[from]) / (to - from) as u32
}

fn bench_debate(c: &mut Criterion) {
    let scenario = Arc::new(debate());
    let services = Services::scripted(&scenario);
    let system = actix::System::new();
    let mut group = c.benchmark_group("debate");
    group.throughput(Throughput::Elements(16));
    group.bench_function("full_run", |b| {
        b.iter(|| {
            let out = system
                .block_on(run_async(RunOptions::new(scenario.clone()), on(&services)))
                .unwrap();
            assert_eq!(out.summary.turns, 16);
        })
    });
    group.finish();
}

fn bench_per_turn(c: &mut Criterion) {
    const TURNS: u32 = 1021;
    let scenario = Arc::new(marathon(TURNS));
    let services = Services::scripted(&scenario);
    let system = actix::System::new();
    let mut group = c.benchmark_group("per_turn");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for (name, from) in [("at_10", 10usize), ("at_1000", 1000usize)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| turn_time(&system, &scenario, &services, (from, from + 10)))
                    .sum()
            })
        });
    }
    group.finish();
}

/// One state whose roles are played by `agents` agents, one after another.
fn crowd(agents: usize) -> Scenario {
    let roles: Vec<String> = (0..agents).map(|i| format!("R{i}")).collect();
    let mut builder = ScenarioBuilder::new("crowd")
        .mode(Mode::Cooperative)
        .environment(|e| {
            e.max_chat_history = 8;
            e.top_k = 0;
        });
    for (i, role) in roles.iter().enumerate() {
        builder = builder.agent(format!("P{i}"), |a| a.plays("talk", role));
    }
    builder
        .state(
            "talk",
            StateBuilder::new(roles.clone())
                .max_turns(100)
                .next(["end"]),
        )
        .max_turns(100)
        .script(Script {
            default: Some("{name} says point {n} at turn {turn}.".into()),
            ..Script::default()
        })
        .build()
        .unwrap()
}

/// The cost of a turn does not grow with the number of agents in the scenario: turns
/// 50 to 100 of a run among 100 and among 10,000 agents, per turn (starting the
/// agents' actors is not a turn's cost).
fn bench_crowd(c: &mut Criterion) {
    let system = actix::System::new();
    let mut group = c.benchmark_group("crowd_per_turn");
    group.sample_size(10);
    for agents in [100, 10_000] {
        let scenario = Arc::new(crowd(agents));
        let services = Services::scripted(&scenario);
        group.bench_function(format!("{agents}_agents"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| turn_time(&system, &scenario, &services, (49, 99)))
                    .sum()
            })
        });
    }
    group.finish();
}

/// The caller's side of a run on `services`.
fn on(services: &Services) -> RunIo {
    RunIo {
        services: Some(services.clone()),
        ..RunIo::default()
    }
}

criterion_group!(benches, bench_debate, bench_per_turn, bench_crowd);
criterion_main!(benches);
