//! The Director's decisions that are neither the SOP's (`sop`) nor the run's counters'
//! (`run_state`): how a round's result, an error and the run's end are settled, which
//! seats a turn takes, what the transition is checked on, and when the probes of a
//! visit's end and of the run's end are asked. Pure: the actor does what these say.

use std::sync::Arc;

use crate::error::SimError;
use crate::scenario::Turns;
use sopsim_core::memory::Message;
use sopsim_core::run_state::EndReason;
use sopsim_core::sop::Transition;

/// What a round of turns came to.
#[derive(Debug)]
pub(super) enum RoundEnd<T> {
    /// Every turn was drafted and committed.
    Committed(T),
    /// A turn failed: the run ends in error.
    Failed(SimError),
    /// The run was stopped while the round was in flight.
    Interrupted,
    /// A person's input ended during their turn.
    InputClosed,
}

/// Settles a round: `played` is what `turns::play_round` gave (`None` when the round
/// was abandoned), `cancelled` whether the run was stopped by then.
pub(super) fn round_end<T>(played: Result<Option<T>, SimError>, cancelled: bool) -> RoundEnd<T> {
    match played {
        Ok(Some(committed)) => RoundEnd::Committed(committed),
        Err(e) if !e.is_cancelled() => RoundEnd::Failed(e),
        // A read or a turn a stop cut short ends the run as interrupted.
        _ if cancelled => RoundEnd::Interrupted,
        _ => RoundEnd::InputClosed,
    }
}

/// How an error ends the run: a call the stop abandoned interrupts it; anything else
/// is the run's error.
pub(super) fn ended_by_error(error: SimError) -> (EndReason, Option<SimError>) {
    match error.is_cancelled() {
        true => (EndReason::Interrupted, None),
        false => (EndReason::Error, Some(error)),
    }
}

/// Whether ending the run closes the world's round first: a round the turn limit or a
/// budget ended before its visit did still counts.
pub(super) fn closes_round(ended_by: EndReason, world_round_open: bool) -> bool {
    world_round_open && matches!(ended_by, EndReason::MaxTurns | EndReason::Budget)
}

/// The end once the world's round was closed (`closed`): as it was, unless closing was
/// stopped (interrupted) or failed (the run's error).
pub(super) fn after_closing(
    (ended_by, error): (EndReason, Option<SimError>),
    closed: Result<(), SimError>,
) -> (EndReason, Option<SimError>) {
    match closed {
        Ok(()) => (ended_by, error),
        Err(e) => ended_by_error(e),
    }
}

/// The end of a resumed run that ended by its own course short of the killed run's
/// transcript (`short`): an error, unless the run already ended in one.
pub(super) fn with_shortfall(
    (ended_by, error): (EndReason, Option<SimError>),
    short: Option<SimError>,
) -> (EndReason, Option<SimError>) {
    match short {
        Some(e) if error.is_none() => (EndReason::Error, Some(e)),
        _ => (ended_by, error),
    }
}

/// Whether the run's end asks the probes due at the end: not when it was stopped.
pub(super) fn asks_end_probes(ended_by: EndReason, cancelled: bool) -> bool {
    ended_by != EndReason::Interrupted && !cancelled
}

/// The seats a turn takes: every seat of a simultaneous round, the first of a
/// sequential turn (whose state validation gave its role one player).
pub(super) fn seats_to_play<T>(mut seats: Vec<T>, simultaneous: bool) -> Vec<T> {
    if !simultaneous {
        seats.truncate(1);
    }
    seats
}

/// What the transition is checked on after the turns.
#[derive(Debug, PartialEq)]
pub(super) enum CheckOn<'a> {
    /// A simultaneous round: every reply of it, in the order of the roles.
    Round(Vec<&'a str>),
    /// A sequential turn: its last reply.
    Reply(&'a str),
    /// A sequential turn that said nothing, which no backend should give.
    NothingSaid,
}

/// What a finished round's transition is checked on: `said` holds its messages
/// without their tool results.
pub(super) fn check_on(simultaneous_round: bool, said: &[Arc<Message>]) -> CheckOn<'_> {
    match (simultaneous_round, said.last()) {
        (true, _) => CheckOn::Round(said.iter().map(|m| m.content.as_str()).collect()),
        (false, Some(reply)) => CheckOn::Reply(&reply.content),
        (false, None) => CheckOn::NothingSaid,
    }
}

/// Whether leaving by `t` asks the probes of the end of a round: a sequential state's
/// visit is a round of it (a simultaneous state's rounds were asked as they were
/// committed), and staying leaves nothing.
pub(super) fn probes_after_visit(t: &Transition, turns: Turns) -> bool {
    *t != Transition::Stay && turns != Turns::Simultaneous
}

#[cfg(test)]
mod tests {
    use super::*;
    use sopsim_core::memory::MessageKind;

    fn said(contents: &[&str]) -> Vec<Arc<Message>> {
        contents
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Arc::new(Message {
                    seq: i as u64,
                    state: "talk".into(),
                    visit: 1,
                    role: format!("R{i}"),
                    name: format!("A{i}"),
                    content: c.to_string(),
                    kind: MessageKind::Reply,
                    decision: None,
                })
            })
            .collect()
    }

    fn failed() -> SimError {
        SimError::Internal("a turn said nothing")
    }

    #[test]
    fn a_round_is_committed_failed_interrupted_or_ended_by_input() {
        assert!(matches!(
            round_end(Ok(Some(3)), false),
            RoundEnd::Committed(3)
        ));
        assert!(matches!(
            round_end::<u8>(Err(failed()), false),
            RoundEnd::Failed(_)
        ));
        // A stopped call is no failure, whether or not the token says so yet.
        for cancelled in [false, true] {
            let stopped = round_end::<u8>(Err(SimError::Stopped), cancelled);
            let expected = match cancelled {
                true => matches!(stopped, RoundEnd::Interrupted),
                false => matches!(stopped, RoundEnd::InputClosed),
            };
            assert!(expected, "{cancelled}: {stopped:?}");
        }
        assert!(matches!(
            round_end::<u8>(Ok(None), true),
            RoundEnd::Interrupted
        ));
        assert!(matches!(
            round_end::<u8>(Ok(None), false),
            RoundEnd::InputClosed
        ));
    }

    #[test]
    fn an_error_ends_the_run_unless_the_stop_caused_it() {
        assert!(matches!(
            ended_by_error(failed()),
            (EndReason::Error, Some(_))
        ));
        assert!(matches!(
            ended_by_error(SimError::Stopped),
            (EndReason::Interrupted, None)
        ));
    }

    #[test]
    fn a_limit_or_budget_closes_the_open_round_and_its_failure_ends_the_run() {
        for (ended_by, open, closes) in [
            (EndReason::MaxTurns, true, true),
            (EndReason::Budget, true, true),
            (EndReason::MaxTurns, false, false),
            (EndReason::End, true, false),
            (EndReason::EndIf, true, false),
            (EndReason::Interrupted, true, false),
            (EndReason::Error, true, false),
        ] {
            assert_eq!(closes_round(ended_by, open), closes, "{ended_by:?} {open}");
        }
        let budget = (EndReason::Budget, None);
        assert!(matches!(
            after_closing(budget, Ok(())),
            (EndReason::Budget, None)
        ));
        assert!(matches!(
            after_closing((EndReason::Budget, None), Err(SimError::Stopped)),
            (EndReason::Interrupted, None)
        ));
        assert!(matches!(
            after_closing((EndReason::MaxTurns, None), Err(failed())),
            (EndReason::Error, Some(_))
        ));
    }

    #[test]
    fn a_resumed_run_short_of_its_transcript_ends_in_error_unless_it_already_did() {
        assert!(matches!(
            with_shortfall((EndReason::End, None), Some(failed())),
            (EndReason::Error, Some(_))
        ));
        assert!(matches!(
            with_shortfall((EndReason::End, None), None),
            (EndReason::End, None)
        ));
        let (ended_by, error) = with_shortfall(
            (EndReason::Error, Some(SimError::Internal("first"))),
            Some(SimError::Internal("second")),
        );
        assert_eq!(ended_by, EndReason::Error);
        assert_eq!(
            error.unwrap().to_string(),
            SimError::Internal("first").to_string()
        );
    }

    #[test]
    fn a_stopped_run_asks_no_end_probes() {
        assert!(asks_end_probes(EndReason::End, false));
        assert!(asks_end_probes(EndReason::Budget, false));
        assert!(asks_end_probes(EndReason::Error, false));
        assert!(!asks_end_probes(EndReason::Interrupted, false));
        assert!(!asks_end_probes(EndReason::MaxTurns, true));
    }

    #[test]
    fn a_sequential_turn_takes_one_seat_and_a_round_all() {
        assert_eq!(seats_to_play(vec!["a", "b", "c"], true), ["a", "b", "c"]);
        assert_eq!(seats_to_play(vec!["a", "b", "c"], false), ["a"]);
        assert!(seats_to_play(Vec::<&str>::new(), false).is_empty());
    }

    #[test]
    fn a_round_is_checked_on_every_reply_and_a_turn_on_its_last() {
        let round = said(&["Cooperate", "Defect"]);
        assert_eq!(
            check_on(true, &round),
            CheckOn::Round(vec!["Cooperate", "Defect"])
        );
        assert_eq!(check_on(false, &round), CheckOn::Reply("Defect"));
        assert_eq!(check_on(false, &[]), CheckOn::NothingSaid);
        assert_eq!(check_on(true, &[]), CheckOn::Round(Vec::new()));
    }

    #[test]
    fn leaving_a_sequential_visit_asks_the_round_probes() {
        let go = Transition::Move("vote".into());
        assert!(probes_after_visit(&go, Turns::Sequential));
        assert!(probes_after_visit(&Transition::End, Turns::Sequential));
        assert!(!probes_after_visit(&Transition::Stay, Turns::Sequential));
        assert!(!probes_after_visit(&go, Turns::Simultaneous));
    }
}
