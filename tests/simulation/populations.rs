//! Populations through the library: who sees whom on a network, and outcomes of games
//! played on it.

use std::collections::BTreeSet;
use std::fmt::Write;

use sopsim::llm::CallKind;
use sopsim::scenario::{Mode, Scenario};

use crate::common::*;

/// A host opens, then six members on a ring play three simultaneous rounds.
fn ring_of_six() -> Scenario {
    load_document(
        std::path::Path::new("ring.json"),
        serde_json::json!({
            "name": "ring",
            "environment": {"max_chat_history": 20, "top_k": 0},
            "agents": {"Host": {"roles": {"open": "Host"}}},
            "populations": {"ring": {
                "name": "P{i}", "count": 6, "roles": {"play": "Player"},
                "network": {"kind": "ring", "k": 2}
            }},
            "sop": {"start": "open", "states": {
                "open": {"roles": ["Host"], "begin_query": "Host: play three rounds.",
                         "transition": {"max_turns": 1}, "next": ["play"]},
                "play": {"roles": ["Player"], "turns": "simultaneous",
                         "transition": {"max_rounds": 1, "on_max_turns": "play",
                                        "max_visits": 3, "on_max_visits": "end"},
                         "next": ["play", "end"]}
            }},
            "script": {"roles": {"Player": ["Round {n}: hello from {name}."]}}
        }),
    )
    .expect("the ring scenario is valid")
}

/// Every speaker named in a request's conversation (its system text aside).
fn speakers_seen(request: &sopsim::llm::LlmRequest) -> BTreeSet<String> {
    let names = regex::Regex::new(r"\b(P[1-6]|Host)\b").unwrap();
    request
        .messages
        .iter()
        .skip(1)
        .flat_map(|m| names.find_iter(&m.content).map(|n| n.as_str().to_string()))
        .collect()
}

fn ring_neighbours(i: usize) -> [String; 2] {
    [format!("P{}", (i + 4) % 6 + 1), format!("P{}", i % 6 + 1)]
}

#[test]
fn on_a_ring_of_six_no_member_sees_a_message_outside_its_neighbourhood() {
    let mut golden = String::new();
    for mode in [Mode::Cooperative, Mode::Competitive] {
        let (outcome, requests) = run_recorded(&ring_of_six(), Some(mode), 0, &[]);
        assert_eq!(outcome.summary.ended_by.as_str(), "end");
        writeln!(golden, "# {}", mode.as_str()).unwrap();
        for r in requests.iter().filter(|r| r.context.kind == CallKind::Act) {
            let me = r.context.agent.clone().unwrap();
            let i: usize = me[1..].parse().unwrap();
            let seen = speakers_seen(r);
            let mut allowed: BTreeSet<String> = [me.clone(), "Host".to_string()].into();
            if mode == Mode::Cooperative {
                allowed.extend(ring_neighbours(i));
            }
            assert!(
                seen.is_subset(&allowed),
                "{mode:?}: {me} saw {seen:?}, outside {allowed:?}"
            );
            let seen: Vec<String> = seen.into_iter().collect();
            writeln!(
                golden,
                "turn {:>2} {me}: {}",
                r.context.turn,
                seen.join(", ")
            )
            .unwrap();
        }
    }
    assert_golden("ring_of_six_views.txt", &golden);
}

#[test]
fn every_member_plays_each_round_and_the_transcript_says_so() {
    let (outcome, _) = run_recorded(&ring_of_six(), None, 0, &[]);
    assert_eq!(outcome.summary.turns, 1 + 3 * 6);
    let lines = jsonl(&outcome);
    assert_golden("ring_of_six.jsonl", &lines);
}

#[test]
fn a_population_run_is_the_same_at_any_concurrency() {
    let scenario = example("spatial_dilemma");
    let a = run_recorded(&scenario, None, 5, &[]).0;
    let b = run_recorded(&scenario, None, 5, &[]).0;
    assert_eq!(jsonl(&a), jsonl(&b));
    assert_eq!(a.summary.turns, 64 * 5);
}
