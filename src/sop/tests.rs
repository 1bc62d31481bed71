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
        Speaker::Ask { .. } => panic!("unexpected question"),
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
fn the_judge_chooses_among_stay_and_next_and_a_bad_answer_is_none() {
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
    assert_eq!(
        e.judge_answer("<end>t</end>", &choices),
        Some(Transition::Move("t".into()))
    );
    assert_eq!(e.judge_answer("3", &choices), Some(Transition::End));
    assert_eq!(
        e.judge_answer("stay here", &choices),
        Some(Transition::Stay)
    );
    assert_eq!(e.judge_answer("banana", &choices), None);
    e.apply(&Transition::End);
    assert!(e.is_finished());
}
