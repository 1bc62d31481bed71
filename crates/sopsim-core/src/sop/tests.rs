use super::*;
use crate::scenario::{JudgePrompts, ScenarioBuilder, SpeakerRule, StateBuilder};

fn three_roles(rule: SpeakerRule) -> Arc<Scenario> {
    let s = ScenarioBuilder::new("t")
        .agent("A", |a| a.plays("talk", "Host").plays("vote", "Host"))
        .agent("B", |a| a.plays("talk", "Pro").plays("vote", "Pro"))
        .agent("C", |a| a.plays("talk", "Con"))
        .state(
            "talk",
            StateBuilder::new(["Host", "Pro", "Con"])
                .begin("Pro", "Let us start.")
                .speaker(rule)
                .max_turns(5)
                .keyword("VOTE NOW", "vote")
                .next(["vote", "end"]),
        )
        .state(
            "vote",
            StateBuilder::new(["Host", "Pro"])
                .max_turns(2)
                .next(["talk", "end"]),
        )
        .build()
        .unwrap();
    Arc::new(s)
}

fn take(engine: &mut SopEngine) -> String {
    let role = match engine.next_speaker() {
        Speaker::Opening { role, .. } | Speaker::Role(role) => role,
        Speaker::Ask { .. } | Speaker::Round { .. } => panic!("unexpected question"),
    };
    engine.record_turn(&role);
    role
}

#[test]
fn order_is_round_robin_from_the_begin_role() {
    let mut e = SopEngine::new(three_roles(SpeakerRule::Order), 1);
    assert_eq!(
        e.next_speaker(),
        Speaker::Opening {
            role: "Pro".into(),
            query: "Let us start.".into()
        }
    );
    let order: Vec<String> = (0..5).map(|_| take(&mut e)).collect();
    assert_eq!(order, ["Pro", "Con", "Host", "Pro", "Con"]);
}

#[test]
fn random_is_reproducible_per_seed_and_never_repeats_the_last_speaker() {
    let run = |seed| {
        let mut e = SopEngine::new(three_roles(SpeakerRule::Random), seed);
        (0..40).map(|_| take(&mut e)).collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    let seq = run(7);
    assert!(seq.windows(2).all(|w| w[0] != w[1]));
    for role in ["Host", "Pro", "Con"] {
        assert!(seq.iter().any(|r| r == role), "{role} never spoke");
    }
}

#[test]
fn llm_rule_offers_everyone_but_the_last_speaker() {
    let rule = SpeakerRule::Llm {
        system_prompt: None,
        last_prompt: None,
        extract_words: None,
    };
    let mut e = SopEngine::new(three_roles(rule), 1);
    take(&mut e);
    assert_eq!(
        e.next_speaker(),
        Speaker::Ask {
            choices: vec!["Host".into(), "Con".into()]
        }
    );
    assert_eq!(
        e.in_order(),
        "Con",
        "the fallback continues the round robin"
    );
}

#[test]
fn max_turns_moves_to_the_first_next_state_and_starts_a_new_visit() {
    let mut e = SopEngine::new(three_roles(SpeakerRule::Order), 1);
    for _ in 0..4 {
        take(&mut e);
        assert_eq!(
            e.check_transition("hello"),
            Check::Decided(Transition::Stay, Cause::Nothing)
        );
    }
    take(&mut e);
    let check = e.check_transition("hello");
    assert_eq!(
        check,
        Check::Decided(Transition::Move("vote".into()), Cause::MaxTurns(5))
    );
    e.apply(&Transition::Move("vote".into()));
    assert_eq!(
        (e.current_state(), e.visit(), e.turns_in_visit()),
        ("vote", 2, 0)
    );
    assert_eq!(
        e.next_speaker(),
        Speaker::Role("Host".into()),
        "no begin_query: the begin role speaks first"
    );
}

#[test]
fn keyword_fires_case_insensitively_before_max_turns() {
    let mut e = SopEngine::new(three_roles(SpeakerRule::Order), 1);
    take(&mut e);
    assert_eq!(
        e.check_transition("ok, vote now please"),
        Check::Decided(
            Transition::Move("vote".into()),
            Cause::Keyword("VOTE NOW".into())
        )
    );
}

#[test]
fn reentering_a_state_resets_its_turns_and_replays_the_opening() {
    let mut e = SopEngine::new(three_roles(SpeakerRule::Order), 1);
    take(&mut e);
    e.apply(&Transition::Move("vote".into()));
    take(&mut e);
    take(&mut e);
    assert_eq!(
        e.check_transition("x"),
        Check::Decided(Transition::Move("talk".into()), Cause::MaxTurns(2))
    );
    e.apply(&Transition::Move("talk".into()));
    assert_eq!(e.visit(), 3);
    assert!(matches!(e.next_speaker(), Speaker::Opening { .. }));
}

#[test]
fn the_judge_is_offered_stay_and_the_next_states() {
    let s = ScenarioBuilder::new("j")
        .agent("A", |a| a.plays("s", "R"))
        .state(
            "s",
            StateBuilder::new(["R"])
                .judge(JudgePrompts::default())
                .next(["t", "end"]),
        )
        .state("t", StateBuilder::new(["R"]).max_turns(1).next(["end"]))
        .agent("B", |a| a.plays("t", "R"))
        .build()
        .unwrap();
    let mut e = SopEngine::new(Arc::new(s), 0);
    take(&mut e);
    let Check::AskJudge { choices } = e.check_transition("x") else {
        panic!("expected a judge question")
    };
    assert_eq!(choices, ["stay", "t", "end"]);
    assert_eq!(e.move_to(&choices[1]), Transition::Move("t".into()));
    assert_eq!(e.move_to(&choices[2]), Transition::End);
    e.apply(&Transition::End);
    assert!(e.is_finished());
}

fn rounds(max_visits: u32) -> Arc<Scenario> {
    let s = ScenarioBuilder::new("game")
        .agent("A", |a| a.plays("round", "Row").plays("wrap", "Row"))
        .agent("B", |a| a.plays("round", "Column"))
        .state(
            "round",
            StateBuilder::new(["Row", "Column"])
                .max_turns(2)
                .on_max_turns("round")
                .max_visits(max_visits, "wrap")
                .next(["round", "wrap"]),
        )
        .state(
            "wrap",
            StateBuilder::new(["Row"]).max_turns(1).next(["end"]),
        )
        .build()
        .unwrap();
    Arc::new(s)
}

/// Plays one turn and applies the transition it triggers.
fn step(e: &mut SopEngine) -> (String, Transition) {
    let role = take(e);
    let Check::Decided(t, _) = e.check_transition("") else {
        panic!("no judge here")
    };
    e.apply(&t);
    (role, t)
}

#[test]
fn moving_to_the_current_state_starts_a_new_round_until_max_visits() {
    let mut e = SopEngine::new(rounds(3), 1);
    let mut seen = Vec::new();
    while !e.is_finished() {
        let visit = e.visit();
        let state = e.current_state().to_string();
        let (role, t) = step(&mut e);
        seen.push((state, visit, role, t));
    }
    let round = |v: u32, role: &str, t: Transition| ("round".to_string(), v, role.to_string(), t);
    let again = Transition::Move("round".into());
    assert_eq!(
        seen,
        [
            round(1, "Row", Transition::Stay),
            round(1, "Column", again.clone()),
            round(2, "Row", Transition::Stay),
            round(2, "Column", again.clone()),
            round(3, "Row", Transition::Stay),
            // The fourth visit is over the limit: on to "wrap" instead.
            round(3, "Column", Transition::Move("wrap".into())),
            ("wrap".to_string(), 4, "Row".to_string(), Transition::End),
        ]
    );
}

#[test]
fn a_used_up_state_redirects_to_the_end_by_default() {
    let mut s = (*rounds(1)).clone();
    s.sop.states["round"].transition.on_max_visits = None;
    let mut e = SopEngine::new(Arc::new(s), 1);
    step(&mut e);
    assert_eq!(step(&mut e).1, Transition::End);
}

/// A simultaneous game state of three roles, `max_turns` per visit, with keywords.
fn simultaneous(max_turns: u32, opening: bool) -> Arc<Scenario> {
    let mut state = StateBuilder::new(["North", "East", "South"])
        .max_turns(max_turns)
        .keyword("FOLD", "end")
        .keyword("RAISE", "raise")
        .next(["raise", "end"]);
    if opening {
        state = state.begin("East", "Cards are dealt.");
    }
    let mut s = ScenarioBuilder::new("table")
        .agent("A", |a| a.plays("play", "North").plays("raise", "North"))
        .agent("B", |a| a.plays("play", "East"))
        .agent("C", |a| a.plays("play", "South"))
        .state("play", state)
        .state(
            "raise",
            StateBuilder::new(["North"]).max_turns(1).next(["end"]),
        )
        .build()
        .unwrap();
    s.sop.states["play"].turns = crate::scenario::Turns::Simultaneous;
    Arc::new(s)
}

/// Plays one round as the Director does: every role's turn recorded, in order.
fn play_round(e: &mut SopEngine) -> Vec<String> {
    let Speaker::Round { roles } = e.next_speaker() else {
        panic!("expected a round")
    };
    for role in &roles {
        e.record_turn(role);
    }
    roles
}

#[test]
fn a_simultaneous_state_is_all_of_its_roles_every_step() {
    let mut e = SopEngine::new(simultaneous(12, false), 1);
    for _ in 0..3 {
        assert_eq!(play_round(&mut e), ["North", "East", "South"]);
        assert_eq!(
            e.check_round(&["a", "b", "c"]),
            Check::Decided(Transition::Stay, Cause::Nothing)
        );
    }
    assert_eq!(e.turns_in_visit(), 9, "a round counts one turn per role");
}

#[test]
fn a_rounds_keywords_are_read_in_the_order_of_roles() {
    let e = SopEngine::new(simultaneous(9, false), 1);
    // North says nothing, East raises, South folds: East comes first in the roles.
    assert_eq!(
        e.check_round(&["I wait.", "I RAISE.", "I fold."]),
        Check::Decided(
            Transition::Move("raise".into()),
            Cause::Keyword("RAISE".into())
        )
    );
    // Within one message, the first keyword listed.
    assert_eq!(
        e.check_round(&["raise, or fold?", "", ""]),
        Check::Decided(Transition::End, Cause::Keyword("FOLD".into()))
    );
}

#[test]
fn max_turns_counts_whole_rounds() {
    // 4 turns with three roles: the first round (3) stays, the second (6) moves.
    let mut e = SopEngine::new(simultaneous(4, false), 1);
    play_round(&mut e);
    assert_eq!(
        e.check_round(&["", "", ""]),
        Check::Decided(Transition::Stay, Cause::Nothing)
    );
    play_round(&mut e);
    assert_eq!(e.turns_in_visit(), 6);
    assert_eq!(
        e.check_round(&["", "", ""]),
        Check::Decided(Transition::Move("raise".into()), Cause::MaxTurns(4))
    );
}

#[test]
fn a_visits_opening_is_a_turn_of_its_own_before_the_first_round() {
    let mut e = SopEngine::new(simultaneous(4, true), 1);
    assert_eq!(
        e.next_speaker(),
        Speaker::Opening {
            role: "East".into(),
            query: "Cards are dealt.".into()
        }
    );
    e.record_turn("East");
    // The transition is checked after the opening, as after any turn.
    assert_eq!(
        e.check_transition("Cards are dealt."),
        Check::Decided(Transition::Stay, Cause::Nothing)
    );
    assert_eq!(play_round(&mut e), ["North", "East", "South"]);
    // The opening and one round: 4 turns.
    assert_eq!(
        e.check_round(&["", "", ""]),
        Check::Decided(Transition::Move("raise".into()), Cause::MaxTurns(4))
    );
    // An opening that names a keyword leaves before any round.
    let mut e = SopEngine::new(simultaneous(4, true), 1);
    e.next_speaker();
    e.record_turn("East");
    assert_eq!(
        e.check_transition("Fold now."),
        Check::Decided(Transition::End, Cause::Keyword("FOLD".into()))
    );
}
