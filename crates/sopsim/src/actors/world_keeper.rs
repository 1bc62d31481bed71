//! The Director's hold on the run's world: the messages of the visit under way, the
//! round they make when the visit ends, the line that round adds to `world.jsonl`
//! (appended and flushed before the next turn, as the transcript is) and the view
//! the next turns are given.

use std::sync::Arc;

use actix::Addr;

use super::environment::EnvironmentActor;
use super::messages::SetWorld;
use crate::error::CancelToken;
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::output::TranscriptWriter;
use sopsim_core::memory::Message;
use sopsim_core::world::{RoundError, World, WorldSummary, WorldView};

pub(super) struct WorldKeeper {
    world: World,
    /// `world.jsonl`, when the run has a folder and the scenario a `world`.
    log: Option<TranscriptWriter>,
    /// The visit under way: its state, number and messages so far.
    state: String,
    visit: u32,
    said: Vec<Arc<Message>>,
    view: Arc<WorldView>,
}

impl WorldKeeper {
    pub(super) fn new(world: World, log: Option<TranscriptWriter>) -> Self {
        let view = Arc::new(world.view());
        Self {
            world,
            log,
            state: String::new(),
            visit: 0,
            said: Vec::new(),
            view,
        }
    }

    /// A visit of `state` begins.
    pub(super) fn entered(&mut self, state: &str, visit: u32) {
        self.state = state.to_string();
        self.visit = visit;
        self.said.clear();
    }

    /// Messages of the visit under way were committed.
    pub(super) fn heard(&mut self, said: &[Arc<Message>]) {
        self.said.extend(said.iter().cloned());
    }

    /// `text` (state `state`'s opening line) with the world's values as the next turns
    /// see them.
    pub(super) fn shown(&self, state: &str, text: &str) -> Result<String, SimError> {
        sopsim_core::world::render(text, &self.view, None, &[])
            .map(std::borrow::Cow::into_owned)
            .map_err(|why| {
                SimError::World(sopsim_core::world::WorldError {
                    field: format!("sop.states.{state}.begin_query"),
                    round: self.view.rounds + 1,
                    agent: None,
                    why,
                })
            })
    }

    /// The view the next turns see.
    pub(super) fn view(&self) -> Arc<WorldView> {
        self.view.clone()
    }

    /// Ends the visit under way as a round: the world's update, its line in
    /// `world.jsonl`, the event that tells `sinks`, the Environment's new view. The
    /// name of the condition that ends the run, if one holds.
    /// A stop (`cancel`) during the update leaves the world as it was, and is an error
    /// that says the run was cancelled.
    pub(super) fn close(
        &mut self,
        sinks: &Sinks,
        env: &Addr<EnvironmentActor>,
        cancel: &CancelToken,
    ) -> Result<Option<String>, SimError> {
        let said = std::mem::take(&mut self.said);
        let stopped = || cancel.is_cancelled();
        let closed = match self
            .world
            .close_round(&self.state, self.visit, &said, &stopped)
        {
            Ok(closed) => closed,
            Err(RoundError::World(e)) => return Err(SimError::World(e)),
            Err(RoundError::Stopped) => return Err(SimError::Stopped),
        };
        let Some(closed) = closed else {
            return Ok(None);
        };
        if let Some(log) = &mut self.log {
            log.append(&closed.line)?;
        }
        self.view = Arc::new(self.world.view());
        let summary = self.world.summary();
        sinks.emit(SimEvent::World {
            state: closed.line.state,
            visit: closed.line.visit,
            round: closed.line.round,
            world: summary.world,
            agents: summary.agents,
            ended_if: closed.ended_if.clone(),
        });
        env.do_send(SetWorld(self.view.clone()));
        Ok(closed.ended_if)
    }

    /// Whether the visit under way has messages no round has taken yet.
    pub(super) fn open(&self) -> bool {
        !self.said.is_empty()
    }

    pub(super) fn summary(&self) -> WorldSummary {
        self.world.summary()
    }
}
