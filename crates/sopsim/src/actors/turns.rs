//! The Director's turns: who takes them (one role's player, or every player of a
//! simultaneous round), sending `TakeTurn` to each, and committing what they drafted,
//! in the order of the state's roles, to the transcript and the events before the
//! transition is checked.

use std::sync::Arc;

use actix::prelude::*;

use super::agent::AgentActor;
use super::director::Director;
use super::messages::*;
use super::steps::Play;
use crate::error::SimError;
use crate::events::SimEvent;
use crate::memory::Message;
use crate::run_state::{Begun, EndReason};

/// The most turns of a round in flight at once: enough to keep a server's every slot
/// and a local model's batch full, while a turn's state (about 12 KiB) is held for
/// only this many of a population's members, not all of them.
const ROUND_IN_FLIGHT: usize = 4096;

impl Director {
    /// Appends finished turns to the transcript and the events, in order.
    pub(super) fn commit(
        &mut self,
        memories: &[Arc<Message>],
        vectors: &[Vec<f32>],
        restates: &[bool],
    ) -> Result<(), SimError> {
        for (i, memory) in memories.iter().enumerate() {
            if let Some(t) = &mut self.transcript {
                t.append(memory)?;
            }
            let vector = vectors.get(i).filter(|v| !v.is_empty());
            let restates = restates.get(i).copied().unwrap_or(false);
            self.quality
                .record(memory, vector.map(Vec::as_slice), restates);
            self.cast.sinks.emit(SimEvent::Message(memory.clone()));
            if let Some(messages) = self.state.committed(self.transcript_caught_up()) {
                self.cast.sinks.emit(SimEvent::Resumed { messages });
            }
            if !memory.kind.is_tool() {
                self.engine.record_turn(&memory.role);
            }
        }
        Ok(())
    }

    /// The agents who play `role` in the current state: one, or a population's members.
    pub(super) fn players(&self, role: &str) -> &[String] {
        let state = self.engine.current_state();
        self.players
            .get(state)
            .and_then(|p| p.get(role))
            .map_or(&[], Vec::as_slice)
    }

    /// How many turns a round of `roles` takes: one per player.
    pub(super) fn seat_count(&self, roles: &[String]) -> u64 {
        roles.iter().map(|r| self.players(r).len() as u64).sum()
    }

    /// Each turn of `roles`, in order: the role, its player's name and actor.
    pub(super) fn seats(
        &self,
        roles: &[String],
    ) -> Result<Vec<(String, String, Addr<AgentActor>)>, SimError> {
        let state = self.engine.current_state();
        let no_agent = |role: &str| SimError::NoAgent {
            state: state.to_string(),
            role: role.to_string(),
        };
        let mut seats = Vec::new();
        for role in roles {
            let players = self.players(role);
            if players.is_empty() {
                return Err(no_agent(role));
            }
            for name in players {
                let agent = self
                    .cast
                    .agents
                    .get(name)
                    .cloned()
                    .ok_or_else(|| no_agent(role))?;
                seats.push((role.clone(), name.clone(), agent));
            }
        }
        Ok(seats)
    }
}

impl Handler<Play> for Director {
    type Result = ();
    fn handle(&mut self, msg: Play, ctx: &mut Context<Self>) {
        // A sequential turn is one role's, whose state validation gave one player.
        let seats = match self.seats(&msg.roles) {
            Ok(seats) if msg.simultaneous => seats,
            Ok(mut seats) => {
                seats.truncate(1);
                seats
            }
            Err(e) => return self.fail(e, ctx),
        };
        let (state, visit) = (self.engine.current_state().to_string(), self.engine.visit());
        let names: Vec<String> = seats.iter().map(|(_, name, _)| name.clone()).collect();
        let n = seats.len() as u64;
        let Begun {
            first_turn: first,
            round,
        } = self.state.begin(n, msg.simultaneous);
        if let Some(round) = round {
            self.cast.sinks.emit(SimEvent::RoundStarted {
                state: state.clone(),
                visit,
                round,
                roles: msg.roles.clone(),
            });
        }
        tracing::debug!(turn = first, %state, roles = ?msg.roles, turns = n, opening = msg.opening.is_some(), "take turns");
        // Each turn's message is made when it is sent, so a population's round holds
        // only the turns in flight.
        let (turn_state, opening, live) = (state.clone(), msg.opening.clone(), !msg.simultaneous);
        let world = self.world_view();
        let turns = seats
            .into_iter()
            .enumerate()
            .map(move |(i, (role, _, agent))| {
                agent.send(TakeTurn {
                    state: turn_state.clone(),
                    visit,
                    role,
                    turn: first + i as u64,
                    opening: opening.clone(),
                    live,
                    world: world.clone(),
                })
            });
        let env = self.cast.env.clone();
        let sinks = self.cast.sinks.clone();
        let cancel = self.limits.cancel.clone();
        async move {
            use futures::StreamExt;
            env.send(BeginRound { agents: names }).await?;
            // The turns are asked in the order of the roles, up to ROUND_IN_FLIGHT at
            // once; each observes the memory as it stood when the round began, since
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
            // their retries' waits): what is unfinished is taken again on a resume.
            let drafted = match cancel.unless_cancelled(drafting).await {
                Some(Ok(Some(drafted))) => drafted,
                Some(Err(e)) if !e.is_cancelled() => return Err(e),
                _ => return Ok(None),
            };
            Ok::<_, SimError>(Some(env.send(Commit(drafted)).await??))
        }
        .into_actor(self)
        .map(move |res, act, ctx| {
            let committed = match res {
                Ok(Some(c)) => c,
                other => {
                    act.state.abandon(n); // nothing of the turns was committed
                    return match other {
                        Err(e) if !e.is_cancelled() => act.fail(e, ctx),
                        // A read or a turn a Ctrl-C cut short ends the run as
                        // interrupted.
                        _ if act.limits.cancel.is_cancelled() => {
                            act.finish(EndReason::Interrupted, None, ctx)
                        }
                        _ => act.finish(EndReason::InputClosed, None, ctx),
                    };
                }
            };
            // Each turn shows its held tool events, then its messages.
            let mut said = Vec::new();
            for turn in committed {
                for ret in turn.events {
                    act.cast.sinks.emit(SimEvent::Tool {
                        name: turn.name.clone(),
                        visit,
                        ret: Box::new(ret),
                    });
                }
                if let Err(e) = act.commit(&turn.messages, &turn.vectors, &turn.restates) {
                    return act.fail(e, ctx);
                }
                said.extend(turn.messages.into_iter().filter(|m| !m.kind.is_tool()));
            }
            if let Some(world) = &mut act.world {
                world.heard(&said);
            }
            let check = match round {
                Some(round) => {
                    act.cast.sinks.emit(SimEvent::RoundEnded {
                        state,
                        visit,
                        round,
                        roles: msg.roles,
                    });
                    let texts: Vec<&str> = said.iter().map(|m| m.content.as_str()).collect();
                    act.engine.record_round();
                    act.engine.check_round(&texts)
                }
                None => match said.last() {
                    Some(reply) => act.engine.check_transition(&reply.content),
                    None => return act.fail(SimError::Internal("a turn said nothing"), ctx),
                },
            };
            act.transit_after(check, ctx);
        })
        .wait(ctx);
    }
}
