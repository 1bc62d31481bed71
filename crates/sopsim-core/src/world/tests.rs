use std::sync::Arc;

use serde_json::{json, Value};

use super::strategy::{decide, Situation};
use super::*;
use crate::memory::{Decision, Message, MessageKind};
use crate::scenario::Scenario;

fn scenario(doc: Value) -> Scenario {
    crate::scenario::from_document(std::path::Path::new("t.json"), doc).unwrap()
}

/// Two fishers on a lake of 100 tons that doubles after each month's catch, capped
/// at 100; it collapses below 5.
fn lake() -> Scenario {
    scenario(json!({
        "name": "lake",
        "agents": {
            "Ann": {"roles": {"fish": "Fisher A"}},
            "Bo": {"roles": {"fish": "Fisher B"}}
        },
        "world": {
            "variables": {
                "fish": {"initial": 100, "min": 0, "max": 100, "state": "fish",
                         "update": "[100, 2 * (world.fish - sum)] | min"},
                "catch": {"per_agent": true, "initial": 0, "state": "fish", "update": "own"},
                "wallet": {"per_agent": true, "initial": 0, "state": "fish",
                           "update": "me.wallet + own"}
            },
            "end_if": {"collapse": "world.fish < 5"}
        },
        "sop": {"start": "fish", "states": {"fish": {
            "roles": ["Fisher A", "Fisher B"], "turns": "simultaneous",
            "environment_prompt": "The lake holds {{ world.fish }} tons.",
            "components": {
                "Fisher A": {"choice": {"range": [0, 100, 1], "after": "instead", "at_most": "world.fish"}},
                "Fisher B": {"choice": {"range": [0, 100, 1], "after": "instead", "at_most": "world.fish"}}
            },
            "transition": {"max_rounds": 1, "on_max_turns": "fish", "max_visits": 12,
                           "on_max_visits": "end"},
            "next": ["fish", "end"]
        }}}
    }))
}

fn said(name: &str, value: &str) -> Arc<Message> {
    Arc::new(Message {
        seq: 0,
        state: "fish".into(),
        visit: 1,
        role: "Fisher".into(),
        name: name.into(),
        content: value.into(),
        kind: MessageKind::Choice,
        decision: Some(Decision {
            value: value.into(),
            probabilities: None,
        }),
    })
}

fn round(world: &mut World, moves: &[(&str, &str)]) -> Result<Closed, RoundError> {
    let messages: Vec<Arc<Message>> = moves.iter().map(|(n, v)| said(n, v)).collect();
    Ok(world.close_round("fish", 1, &messages, &|| false)?.unwrap())
}

#[test]
fn a_commons_keeps_its_fish_and_wallets_from_round_to_round_and_collapses() {
    let mut w = World::new(&lake(), 0, &[]).unwrap();
    // 100 - 50 left, doubled: 100 again; each wallet its catch.
    let r1 = round(&mut w, &[("Ann", "20"), ("Bo", "30")]).unwrap();
    assert_eq!(r1.line.world["fish"], 100.0);
    assert_eq!(*r1.line.agents["wallet"], [20.0, 30.0]);
    assert_eq!(r1.ended_if, None);
    // 100 - 80 = 20, doubled: 40.
    let r2 = round(&mut w, &[("Ann", "40"), ("Bo", "40")]).unwrap();
    assert_eq!((r2.line.round, r2.line.world["fish"]), (2, 40.0));
    assert_eq!(*r2.line.agents["catch"], [40.0, 40.0]);
    assert_eq!(*r2.line.agents["wallet"], [60.0, 70.0]);
    // 40 - 38 = 2, doubled: 4, under 5: the lake has collapsed.
    let r3 = round(&mut w, &[("Ann", "20"), ("Bo", "18")]).unwrap();
    assert_eq!(r3.line.world["fish"], 4.0);
    assert_eq!(r3.ended_if.as_deref(), Some("collapse"));
    let summary = w.summary();
    assert_eq!(
        (summary.rounds, summary.ended_if.as_deref()),
        (3, Some("collapse"))
    );
    assert_eq!(summary.agents["wallet"].max, 88.0);
}

#[test]
fn each_update_sees_the_values_from_before_its_own_step() {
    let mut s = lake();
    let w = s.world.as_mut().unwrap();
    // Declared after fish: sees this round's fish, not last round's.
    w.variables.insert(
        "seen".into(),
        serde_json::from_value(json!({"initial": 0, "state": "fish", "update": "world.fish"}))
            .unwrap(),
    );
    let mut world = World::new(&s, 0, &[]).unwrap();
    let r = round(&mut world, &[("Ann", "40"), ("Bo", "40")]).unwrap();
    assert_eq!((r.line.world["fish"], r.line.world["seen"]), (40.0, 40.0));
}

#[test]
fn a_value_that_cannot_stand_names_the_variable_the_round_and_the_value() {
    let mut s = lake();
    let fish = s.world.as_mut().unwrap().variables.get_mut("fish").unwrap();
    fish.update = Some("world.fish / (100 - sum)".into());
    let mut w = World::new(&s, 0, &[]).unwrap();
    let Err(RoundError::World(e)) = round(&mut w, &[("Ann", "50"), ("Bo", "50")]) else {
        panic!("a world error")
    };
    assert_eq!(e.field, "world.variables.fish.update");
    assert_eq!(e.round, 1);
    assert!(e.why.contains("inf"), "{e}");
    let mut s = lake();
    let fish = s.world.as_mut().unwrap().variables.get_mut("fish").unwrap();
    fish.update = Some("world.fish - 2 * sum".into());
    let mut w = World::new(&s, 0, &[]).unwrap();
    let e = round(&mut w, &[("Ann", "30"), ("Bo", "30")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "world.variables.fish.update: round 1: gives -20, below its min 0"
    );
}

#[test]
fn prompts_show_the_world_as_it_stands() {
    let s = lake();
    let mut w = World::new(&s, 0, &[]).unwrap();
    round(&mut w, &[("Ann", "40"), ("Bo", "40")]).unwrap();
    let view = w.view();
    let text = "Lake: {{ world.fish }} tons. You have {{ me.wallet }}. Month {{ round }}.";
    assert_eq!(
        render(text, &view, Some(1), &[]).unwrap(),
        "Lake: 40 tons. You have 40. Month 2."
    );
    assert_eq!(
        render("No braces here.", &view, None, &[]).unwrap(),
        "No braces here."
    );
}

/// A prisoner's dilemma between `A` (a model, here scripted) and `B` (a strategy).
fn dilemma(strategy: Value) -> Scenario {
    scenario(json!({
        "name": "pd",
        "agents": {
            "A": {"roles": {"play": "Player A"}},
            "B": {"roles": {"play": "Player B"}, "strategy": strategy}
        },
        "sop": {"start": "play", "states": {"play": {
            "roles": ["Player A", "Player B"], "turns": "simultaneous",
            "components": {
                "Player A": {"choice": {"values": ["COOPERATE", "DEFECT"], "after": "instead"}},
                "Player B": {"choice": {"values": ["COOPERATE", "DEFECT"], "after": "instead"}}
            },
            "transition": {"max_rounds": 1, "on_max_turns": "play", "max_visits": 10, "on_max_visits": "end"},
            "next": ["play", "end"]
        }}},
        "outcomes": {"decision": {"state": "play", "values": ["COOPERATE", "DEFECT"],
                                  "cooperative": ["COOPERATE"]}}
    }))
}

/// B's moves against A's scripted `moves`, round by round.
fn play(s: &Scenario, a_moves: &[&str]) -> Vec<String> {
    let mut w = World::new(s, 7, &[]).unwrap();
    let spec = s.agents["B"].strategy.clone().unwrap();
    let (c, d) = crate::scenario::strategy_moves(s, "B", &spec);
    let options = ["COOPERATE".to_string(), "DEFECT".to_string()];
    let mut played = Vec::new();
    for a in a_moves {
        let view = w.view();
        let situation = Situation {
            view: &view,
            state: "play",
            agent: 1,
            name: "B",
            options: &options,
            cooperate: c.as_deref(),
            defect: d.as_deref(),
            seed: 7,
        };
        let b = decide(&spec, &situation).unwrap();
        let msgs = vec![
            Arc::new(Message {
                state: "play".into(),
                ..(*said("A", a)).clone()
            }),
            Arc::new(Message {
                state: "play".into(),
                ..(*said("B", &b.value)).clone()
            }),
        ];
        w.close_round("play", 1, &msgs, &|| false).unwrap();
        played.push(b.value);
    }
    played
}

#[test]
fn tit_for_tat_copies_the_last_move_and_grim_trigger_never_forgives() {
    let a = ["COOPERATE", "DEFECT", "COOPERATE", "COOPERATE", "DEFECT"];
    let tft = play(&dilemma(json!({"rule": "tit_for_tat"})), &a);
    assert_eq!(
        tft,
        ["COOPERATE", "COOPERATE", "DEFECT", "COOPERATE", "COOPERATE"]
    );
    let grim = play(&dilemma(json!({"rule": "grim_trigger"})), &a);
    assert_eq!(
        grim,
        ["COOPERATE", "COOPERATE", "DEFECT", "DEFECT", "DEFECT"]
    );
    let once = play(&dilemma(json!({"rule": "defect_once_then_cooperate"})), &a);
    assert_eq!(
        once,
        ["DEFECT", "COOPERATE", "COOPERATE", "COOPERATE", "COOPERATE"]
    );
    let alternate = play(&dilemma(json!({"rule": "alternate"})), &a[..3]);
    assert_eq!(alternate, ["COOPERATE", "DEFECT", "COOPERATE"]);
    let formula = play(
        &dilemma(json!({"formula": "defect if opponent_last == defect else cooperate"})),
        &a,
    );
    assert_eq!(formula, tft, "tit-for-tat written as a formula");
}

#[test]
fn a_random_strategy_draws_from_the_seed_and_says_its_odds() {
    let s = dilemma(json!({"rule": "random", "p": 0.3}));
    let a = ["COOPERATE"; 40];
    let first = play(&s, &a);
    assert_eq!(first, play(&s, &a), "the same seed, the same moves");
    let cooperated = first.iter().filter(|m| *m == "COOPERATE").count();
    assert!((4..=20).contains(&cooperated), "{cooperated} of 40");
    let w = World::new(&s, 7, &[]).unwrap();
    let spec = s.agents["B"].strategy.clone().unwrap();
    let view = w.view();
    let options = ["COOPERATE".to_string(), "DEFECT".to_string()];
    let m = decide(
        &spec,
        &Situation {
            view: &view,
            state: "play",
            agent: 1,
            name: "B",
            options: &options,
            cooperate: Some("COOPERATE"),
            defect: Some("DEFECT"),
            seed: 7,
        },
    )
    .unwrap();
    assert_eq!(m.probabilities["COOPERATE"], 0.3);
    assert!((m.probabilities["DEFECT"] - 0.7).abs() < 1e-12);
}
