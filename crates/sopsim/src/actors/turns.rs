//! A round's turns in flight: the Environment begins the round, each seat drafts its
//! turn on the memory as it stood when the round began, and the Environment commits
//! them together, in the order of the state's roles. A sequential turn is a round of
//! one.

use std::future::Future;

use actix::{Addr, MailboxError};

use super::environment::EnvironmentActor;
use super::messages::{BeginRound, Commit, CommittedTurn, TurnDone};
use crate::error::{CancelToken, SimError};
use crate::events::{SimEvent, Sinks};

/// The most turns of a round in flight at once: enough to keep a server's every slot
/// and a local model's batch full, while a turn's state (about 12 KiB) is held for
/// only this many of a population's members, not all of them.
const ROUND_IN_FLIGHT: usize = 4096;

/// Plays the `n` turns of a round of `names`' agents: their turns committed, or `None`
/// when a person's input ended or the run was stopped (whatever was unfinished is
/// abandoned, and taken again on a resume).
pub(super) async fn play_round<T>(
    turns: impl IntoIterator<Item = T>,
    n: u64,
    names: Vec<String>,
    env: Addr<EnvironmentActor>,
    (sinks, cancel): (Sinks, CancelToken),
) -> Result<Option<Vec<CommittedTurn>>, SimError>
where
    T: Future<Output = Result<Result<TurnDone, SimError>, MailboxError>>,
{
    use futures::StreamExt;
    env.send(BeginRound { agents: names }).await?;
    // The turns are asked in the order of the roles, up to ROUND_IN_FLIGHT at once;
    // nothing of the round is committed until all are in.
    let drafting = async {
        let mut in_flight = futures::stream::iter(turns).buffered(ROUND_IN_FLIGHT);
        let mut drafted = Vec::with_capacity(n as usize);
        let told_every = (n / 100).max(1);
        while let Some(done) = in_flight.next().await {
            match done?? {
                TurnDone::Drafted(d) => drafted.push(d),
                TurnDone::InputClosed => return Ok(None),
            }
            let done = drafted.len() as u64;
            if n > 1 && (done.is_multiple_of(told_every) || done == n) {
                sinks.emit(SimEvent::RoundProgress { done, of: n });
            }
        }
        Ok::<_, SimError>(Some(drafted))
    };
    // A stopped run abandons the turns in progress (their model and tool calls,
    // their retries' waits).
    let drafted = match cancel.unless_cancelled(drafting).await {
        Some(Ok(Some(drafted))) => drafted,
        Some(Err(e)) if !e.is_cancelled() => return Err(e),
        _ => return Ok(None),
    };
    Ok(Some(env.send(Commit(drafted)).await??))
}

/// A round's ends other than its commit, on a real Environment.
#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;

    use actix::MailboxError;

    use super::play_round;
    use crate::actors::messages::TurnDone;
    use crate::error::{CancelToken, SimError};
    use crate::events::Sinks;

    type Turn = Pin<Box<dyn Future<Output = Result<Result<TurnDone, SimError>, MailboxError>>>>;

    /// Plays `turns` as one round of the debate's Ada and Ben, with `cancel`: `Ok(true)`
    /// when it committed, `Ok(false)` when it ended without.
    fn round(turns: Vec<Turn>, cancel: CancelToken) -> Result<bool, SimError> {
        let scenario = Arc::new(crate::actors::tests::shipped("debate.json"));
        actix::System::new().block_on(async {
            let (env, _) = crate::actors::tests::start(&scenario);
            let n = turns.len() as u64;
            let names = vec!["Ada".to_string(), "Ben".to_string()];
            let sinks = Sinks::new(Vec::new());
            play_round(turns, n, names, env, (sinks, cancel))
                .await
                .map(|c| c.is_some())
        })
    }

    fn input_closed() -> Turn {
        Box::pin(async { Ok(Ok(TurnDone::InputClosed)) })
    }

    fn never() -> Turn {
        Box::pin(futures::future::pending())
    }

    #[test]
    fn a_person_whose_input_closed_ends_the_round_uncommitted() {
        // Turns are taken in the roles' order: Ada's input closes before Ben's turn,
        // which never finishes, is waited on.
        assert!(!round(vec![input_closed(), never()], CancelToken::new()).unwrap());
    }

    #[test]
    fn a_stopped_run_abandons_the_turns_it_waits_on() {
        let cancel = CancelToken::new();
        cancel.cancel();
        assert!(!round(vec![never(), never()], cancel).unwrap());
    }

    #[test]
    fn a_turn_that_failed_fails_the_round() {
        let failed: Turn = Box::pin(async { Err(MailboxError::Closed) });
        assert!(round(vec![failed, never()], CancelToken::new()).is_err());
    }
}
