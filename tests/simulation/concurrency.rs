//! Many simulations in one process share the model backend and the embedding service,
//! and nothing else: no message, prompt or summary of one may reach another.

use std::sync::Arc;

use crate::common::*;
use sopsim::llm::{CallKind, ScriptedBackend};
use sopsim::scenario::{Mode, ScenarioBuilder, Script, StateBuilder};
use sopsim::{run_async, RunIo, RunOptions};

const SIMS: usize = 200;

fn scenario(i: usize) -> sopsim::scenario::Scenario {
    let (a, b) = (format!("Ann{i}"), format!("Bo{i}"));
    ScenarioBuilder::new(format!("sim{i}"))
        .mode(if i.is_multiple_of(2) {
            Mode::Cooperative
        } else {
            Mode::Competitive
        })
        .environment(|e| {
            e.max_chat_history = 3;
            e.top_k = 2;
        })
        .agent(&a, |x| x.plays("one", "X").plays("two", "X"))
        .agent(&b, |x| x.plays("one", "Y").plays("two", "Y"))
        .state(
            "one",
            StateBuilder::new(["X", "Y"])
                .begin("X", format!("opening of sim{i}"))
                .max_turns(4 + (i % 3) as u32)
                .next(["two"]),
        )
        .state(
            "two",
            StateBuilder::new(["X", "Y"]).max_turns(3).next(["end"]),
        )
        .build()
        .unwrap()
}

#[test]
fn two_hundred_simulations_run_at_once_without_mixing_memories() {
    let shared = ScriptedBackend::new(Some(Script {
        summary: Some("summary of {state} at {turn}".into()),
        ..Script::default()
    }));
    let rec = Recording::new(Arc::new(shared));
    let services = services_with(rec.clone());
    let scenarios: Vec<_> = (0..SIMS).map(|i| Arc::new(scenario(i))).collect();
    let outcomes = actix::System::new().block_on(async {
        let runs = scenarios.iter().enumerate().map(|(i, s)| {
            run_async(
                RunOptions {
                    seed: i as u64,
                    ..RunOptions::new(s.clone())
                },
                RunIo {
                    services: Some(services.clone()),
                    ..RunIo::default()
                },
            )
        });
        futures::future::join_all(runs).await
    });
    let names_of = |i: usize| [format!("Ann{i}"), format!("Bo{i}")];
    let foreign = |text: &str, i: usize| {
        (0..SIMS).filter(|j| *j != i).find(|j| {
            let [a, b] = names_of(*j);
            text.contains(&format!("{a} "))
                || text.contains(&format!("{b} "))
                || text.contains(&format!("sim{j}\n"))
                || text.ends_with(&format!("sim{j}"))
        })
    };
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.unwrap();
        assert_eq!(outcome.summary.ended_by.as_str(), "end", "sim {i}");
        assert_eq!(outcome.summary.turns as usize, 4 + i % 3 + 3, "sim {i}");
        let [a, b] = names_of(i);
        for (seq, m) in outcome.transcript.iter().enumerate() {
            assert_eq!(m.seq as usize, seq, "sim {i}: its own sequence");
            assert!(
                m.name == a || m.name == b,
                "sim {i} has a message from {}",
                m.name
            );
            assert_eq!(foreign(&m.content, i), None, "sim {i}: {:?}", m.content);
        }
    }
    let requests = rec.take();
    assert!(requests.len() >= SIMS * 6);
    for r in &requests {
        let Some(agent) = &r.context.agent else {
            continue;
        };
        let i: usize = agent
            .trim_start_matches(|c: char| c.is_alphabetic())
            .parse()
            .unwrap();
        assert_eq!(
            foreign(&prompt_text(r), i),
            None,
            "a prompt of {agent} holds another simulation's text"
        );
    }
    assert!(
        requests.iter().any(|r| r.context.kind == CallKind::Summary),
        "summaries were made"
    );
}
