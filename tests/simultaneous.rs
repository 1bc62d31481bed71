//! Simultaneous rounds: every role acts on the same information, with its call in
//! flight at the same time as the others', and the round is committed in the order of
//! the state's roles whatever order the replies came back in.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::server::{mark_of, GatedServer};
use common::*;
use sopsim::llm::openai::{OpenAiBackend, OpenAiOptions, RetryPolicy};
use sopsim::scenario::{ScenarioBuilder, StateBuilder, Turns};
use sopsim::sim::{run_blocking, RunConfig};

fn game() -> sopsim::scenario::Scenario {
    let mut s = ScenarioBuilder::new("rounds")
        .agent("Ada", |a| a.plays("round", "North"))
        .agent("Bo", |a| a.plays("round", "South"))
        .state(
            "round",
            StateBuilder::new(["North", "South"])
                .environment_prompt("A game of two, three rounds.")
                .max_turns(2)
                .next(["round", "end"]),
        )
        .build()
        .unwrap();
    let st = &mut s.sop.states["round"];
    st.turns = Turns::Simultaneous;
    st.transition.on_max_turns = Some("round".into());
    st.transition.max_visits = Some(3);
    st.transition.on_max_visits = Some("end".into());
    s.environment.max_chat_history = 50;
    s.environment.top_k = 0;
    s
}

fn backend(base: &str) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiOptions {
        base_url: base.into(),
        api_key: None,
        model: Some("test-model".into()),
        stream: false,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            attempts: 1,
            base: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
        },
        concurrency: 8,
    })
    .unwrap()
}

fn play(reverse: bool) -> (String, GatedServer) {
    let server = GatedServer::start(2, reverse);
    let outcome = run_blocking(
        Arc::new(game()),
        &services_with(Arc::new(backend(&server.base))),
        RunConfig::default(),
    )
    .unwrap();
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(outcome.summary.turns, 6, "three rounds of two turns");
    (jsonl(&outcome), server)
}

#[test]
fn every_role_acts_on_the_same_information_with_its_call_in_flight_at_once() {
    let (transcript, server) = play(false);
    assert_eq!(
        *server.lonely.lock().unwrap(),
        0,
        "both calls of every round were in flight together"
    );
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 6);
    for round in requests.chunks(2) {
        let marks: Vec<String> = round.iter().map(mark_of).collect();
        for r in round {
            let text = r["messages"].to_string();
            for m in &marks {
                assert!(
                    !text.contains(m.as_str()),
                    "a request holds a reply of its own round: {text}"
                );
            }
        }
    }
    // Later rounds see the earlier ones (cooperative mode).
    assert!(requests[2]["messages"]
        .to_string()
        .contains(&mark_of(&requests[0])));
    let lines: Vec<&str> = transcript.lines().collect();
    let roles: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["role"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        roles,
        ["North", "South", "North", "South", "North", "South"],
        "each round in the order of roles"
    );
}

#[test]
fn a_round_is_the_same_bytes_when_the_replies_come_back_in_reverse() {
    let (forward, _) = play(false);
    let (reverse, _) = play(true);
    assert_eq!(forward, reverse);
}

#[test]
fn the_scripted_games_are_simultaneous_and_pay_from_every_choice_of_the_round() {
    for name in ["prisoners_dilemma", "public_goods"] {
        let scenario = example(name);
        let (outcome, requests) = run_recorded(&scenario, None, 1, &[]);
        // No request of a round holds another player's message of that round.
        for r in &requests {
            let (Some(agent), Some(visit)) = (
                r.context.agent.as_deref(),
                visit_of(&outcome, r.context.turn),
            ) else {
                continue;
            };
            let prompt: String = r.messages.iter().map(|x| x.content.as_str()).collect();
            for other in outcome
                .transcript
                .iter()
                .filter(|o| o.visit == visit && o.name != agent)
            {
                assert!(
                    !prompt.contains(&other.render()),
                    "{name}: {agent} saw {:?} in its own round",
                    other.render()
                );
            }
        }
        assert_eq!(outcome.summary.ended_by.as_str(), "end");
        assert!(
            outcome.transcript.iter().all(|m| m.decision.is_some()),
            "{name}: every turn chose"
        );
    }
}

/// The visit a turn number belongs to.
fn visit_of(outcome: &sopsim::sim::RunOutcome, turn: u64) -> Option<u32> {
    outcome
        .transcript
        .get(turn.checked_sub(1)? as usize)
        .map(|m| m.visit)
}
