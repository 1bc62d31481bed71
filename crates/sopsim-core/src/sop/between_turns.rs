//! The Director's decisions between turns, as functions of what the engine and the
//! model answered: which turns to play for the engine's speaker, what the controller's
//! and the judge's answers mean (and what stands when they gave none), and where a
//! transition leads the run. The Director's handlers call these and only carry out
//! what they return.

use super::{Speaker, Transition};
use crate::scenario::JudgePrompts;

/// What the Director does for the engine's next speaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextTurns {
    /// Play these roles' turns: one role's, with its visit's opening line when it
    /// opens, or every role's at once (a simultaneous round).
    Play {
        /// The roles whose turns are played.
        roles: Vec<String>,
        /// The visit's opening line, said verbatim, when the turn opens the visit.
        opening: Option<String>,
        /// Whether the turns are a simultaneous round.
        simultaneous: bool,
    },
    /// Ask the speaker controller to choose among these roles first.
    AskController {
        /// The roles the controller may choose.
        choices: Vec<String>,
    },
    /// End the run at its turn limit: a round is all or nothing, and this one would
    /// pass the limit.
    EndAtTurnLimit,
}

/// The turns to play for `speaker`; `round_fits` says whether a simultaneous round of
/// these roles fits under the turn limit.
pub fn next_turns(speaker: Speaker, round_fits: impl FnOnce(&[String]) -> bool) -> NextTurns {
    match speaker {
        Speaker::Opening { role, query } => NextTurns::Play {
            roles: vec![role],
            opening: Some(query),
            simultaneous: false,
        },
        Speaker::Role(role) => NextTurns::Play {
            roles: vec![role],
            opening: None,
            simultaneous: false,
        },
        Speaker::Ask { choices } => NextTurns::AskController { choices },
        Speaker::Round { roles } if !round_fits(&roles) => NextTurns::EndAtTurnLimit,
        Speaker::Round { roles } => NextTurns::Play {
            roles,
            opening: None,
            simultaneous: true,
        },
    }
}

/// The role the controller chose, if its answer was one of `choices`.
pub fn controller_choice(chosen: Option<usize>, choices: &[String]) -> Option<&str> {
    chosen.and_then(|i| choices.get(i)).map(String::as_str)
}

/// What the judge is offered for `choices` (staying, then each next state): the
/// judge's labels when it gives one for each, else the choices themselves.
pub fn judge_options(judge: Option<&JudgePrompts>, choices: &[String]) -> Vec<String> {
    match judge {
        Some(j) if j.labels.len() == choices.len() => j.labels.clone(),
        _ => choices.to_vec(),
    }
}

/// Where the run goes after a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterTransit {
    /// The next turn of the same visit.
    NextTurn,
    /// A new visit of this state.
    Enter(String),
    /// The run reaches the SOP's end.
    End,
    /// One of the world's `end_if` conditions ends the run.
    WorldEnded,
}

/// Where `t` leads, given whether one of the world's `end_if` conditions held when the
/// visit it leaves closed its round.
pub fn after_transit(t: Transition, world_ended: bool) -> AfterTransit {
    match t {
        Transition::Stay => AfterTransit::NextTurn,
        Transition::End => AfterTransit::End,
        Transition::Move(_) if world_ended => AfterTransit::WorldEnded,
        Transition::Move(state) => AfterTransit::Enter(state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ScenarioBuilder, StateBuilder};

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_opening_and_a_role_are_one_turn_each_and_a_round_plays_every_role_at_once() {
        let opening = Speaker::Opening {
            role: "Mia".into(),
            query: "Welcome.".into(),
        };
        assert_eq!(
            next_turns(opening, |_| true),
            NextTurns::Play {
                roles: roles(&["Mia"]),
                opening: Some("Welcome.".into()),
                simultaneous: false
            }
        );
        assert_eq!(
            next_turns(Speaker::Role("Ada".into()), |_| false),
            NextTurns::Play {
                roles: roles(&["Ada"]),
                opening: None,
                simultaneous: false
            },
            "a single turn is not held to a round's limit"
        );
        let round = || Speaker::Round {
            roles: roles(&["P1", "P2"]),
        };
        assert_eq!(
            next_turns(round(), |r| r.len() == 2),
            NextTurns::Play {
                roles: roles(&["P1", "P2"]),
                opening: None,
                simultaneous: true
            }
        );
        assert_eq!(
            next_turns(round(), |_| false),
            NextTurns::EndAtTurnLimit,
            "a round the turn limit would cut short does not start"
        );
        assert_eq!(
            next_turns(
                Speaker::Ask {
                    choices: roles(&["Ada", "Ben"])
                },
                |_| true
            ),
            NextTurns::AskController {
                choices: roles(&["Ada", "Ben"])
            }
        );
    }

    #[test]
    fn a_controller_answer_outside_the_choices_is_no_answer() {
        let choices = roles(&["Ada", "Ben"]);
        assert_eq!(controller_choice(Some(1), &choices), Some("Ben"));
        assert_eq!(controller_choice(Some(2), &choices), None);
        assert_eq!(controller_choice(None, &choices), None);
    }

    #[test]
    fn the_judge_is_offered_its_labels_only_when_there_is_one_for_each_choice() {
        let choices = roles(&["debate", "verdict", "end"]);
        let judge = |labels: &[&str]| JudgePrompts {
            labels: roles(labels),
            ..JudgePrompts::default()
        };
        assert_eq!(
            judge_options(Some(&judge(&["0", "1", "2"])), &choices),
            roles(&["0", "1", "2"])
        );
        assert_eq!(judge_options(Some(&judge(&["0", "1"])), &choices), choices);
        assert_eq!(judge_options(None, &choices), choices);
    }

    #[test]
    fn the_judge_rules_to_stay_move_or_end_and_a_missing_answer_rules_nothing() {
        let scenario = ScenarioBuilder::new("t")
            .agent("A", |a| a.plays("talk", "Host").plays("vote", "Host"))
            .state(
                "talk",
                StateBuilder::new(["Host"])
                    .max_turns(5)
                    .next(["vote", "end"]),
            )
            .state(
                "vote",
                StateBuilder::new(["Host"]).max_turns(1).next(["end"]),
            )
            .build()
            .unwrap();
        let engine = crate::sop::SopEngine::new(std::sync::Arc::new(scenario), 0);
        let choices = roles(&["talk", "vote", "end"]);
        assert_eq!(
            engine.judge_ruling(Some(0), &choices),
            Some(Transition::Stay)
        );
        assert_eq!(
            engine.judge_ruling(Some(1), &choices),
            Some(Transition::Move("vote".into()))
        );
        assert_eq!(
            engine.judge_ruling(Some(2), &choices),
            Some(Transition::End)
        );
        assert_eq!(engine.judge_ruling(Some(3), &choices), None);
        assert_eq!(engine.judge_ruling(None, &choices), None);
    }

    #[test]
    fn a_move_enters_its_state_unless_the_world_ended_the_run() {
        assert_eq!(
            after_transit(Transition::Stay, true),
            AfterTransit::NextTurn
        );
        assert_eq!(after_transit(Transition::End, false), AfterTransit::End);
        assert_eq!(
            after_transit(Transition::Move("vote".into()), false),
            AfterTransit::Enter("vote".into())
        );
        assert_eq!(
            after_transit(Transition::Move("vote".into()), true),
            AfterTransit::WorldEnded
        );
    }
}
