//! The Environment of one simulation, as data: its shared memory, its Elysia store,
//! what its tools did, the values `extract` steps read, and the turns under way. Pure:
//! no actors and no I/O, so rounds, `_REF_ID`s and visibility are unit-tested here;
//! the Environment actor owns one and does the embedding and summarising around it.
//!
//! Every turn is drafted inside a round and committed with it: `begin_round`, then the
//! turns' tool returns (`apply_return`) and extracted values (`set_shared`), then
//! `commit`, which settles each turn in the order of the roles, and `record`, which
//! appends the messages to memory. A sequential turn is a round of one.

mod draft;
mod record;
mod replay;
mod round;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use draft::{DraftMessage, DraftTurn, HeldEvent};
pub use record::EnvironmentRecord;
pub use replay::replayed;
pub use round::{ToolRecords, ToolReturn, ToolSummary};

use round::{store_result, Round, TurnView};

use crate::action::{Action, LogPlace};
use crate::memory::{Message, Observation, SharedMemory, SummaryRequest};
use crate::scenario::{Mode, Scenario};
use crate::tokens::TokenCounter;
use crate::tool_results::{
    listed, rename_refs, render_environment, tag_refs, Entry, Return, Store,
};

/// One simulation's Environment.
#[derive(Debug)]
pub struct Environment {
    mode: Mode,
    memory: SharedMemory,
    store: Store,
    records: ToolRecords,
    /// Values `extract` steps stored, by tag.
    shared: BTreeMap<String, String>,
    round: Round,
    state: String,
    visit: u32,
    /// Replies cut where they went on as another participant.
    cut_replies: u64,
    /// Messages recorded with an embedding (one embedding call each).
    embedded: u64,
}

/// What a decision prompt shows of the Environment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolView {
    /// This agent's standing errors, by tool.
    pub errors: indexmap::IndexMap<String, Vec<String>>,
    /// The entries this agent may see, rendered within the budget.
    pub environment: String,
    /// Tools that have returned a result in this run.
    pub ran: Vec<String>,
    /// Tool names the store holds results under.
    pub stored: Vec<String>,
}

/// One turn as committed: its tool events (with the `_REF_ID`s the store gave at the
/// commit) and its messages, numbered, not yet in memory.
#[derive(Debug, Clone)]
pub struct SettledTurn {
    /// The agent whose turn it is.
    pub name: String,
    /// Its tool events, with the `_REF_ID`s its stored results got at the commit.
    pub events: Vec<Return>,
    /// Its messages, numbered from the log's next position.
    pub messages: Vec<Message>,
}

/// The Environment's state for `environment.json` and the run's transcript.
#[derive(Debug, Clone)]
pub struct EnvironmentSnapshot {
    /// Every message in the run's log, in order.
    pub transcript: Vec<Arc<Message>>,
    /// What `environment.json` holds of the Environment.
    pub record: EnvironmentRecord,
    /// Replies cut where they went on as another participant.
    pub cut_replies: u64,
    /// Embedding calls the simulation made (one per message recorded with one).
    pub embeddings: u64,
    /// Tool use over the run, for `summary.json`.
    pub tools: ToolSummary,
}

impl Environment {
    /// An empty Environment for `scenario` in `mode`, at the SOP's start state.
    pub fn new(scenario: &Scenario, mode: Mode) -> Self {
        let env = &scenario.environment;
        Self {
            mode,
            memory: SharedMemory::new(mode, env.max_chat_history, env.top_k),
            store: Store::new(),
            records: ToolRecords::default(),
            shared: BTreeMap::new(),
            round: Round::default(),
            state: scenario.sop.start.clone(),
            visit: 0,
            cut_replies: 0,
            embedded: 0,
        }
    }

    /// A new visit of `state` begins.
    pub fn enter(&mut self, state: String, visit: u32) {
        self.state = state;
        self.visit = visit;
        self.memory.begin_visit();
    }

    /// The state being visited.
    pub fn state(&self) -> &str {
        &self.state
    }

    /// Narrows what population members see (their neighbourhoods).
    pub fn set_audience(&mut self, audience: crate::memory::Audience) {
        self.memory.set_audience(audience);
    }

    /// What `viewer` may see now (a controller or judge: what everyone sees), and the
    /// values `extract` steps stored.
    pub fn observe(&self, viewer: Option<&str>) -> Observation {
        let mut obs = match viewer {
            Some(v) => self.memory.observe_as(v),
            None => self.memory.observe(),
        };
        obs.shared = self.shared.clone();
        obs
    }

    /// Turns of `agents` begin, each from the Environment as it stands; with several,
    /// each keeps what its tools do to itself until the commit.
    pub fn begin_round(&mut self, agents: &[String]) {
        self.round = Round {
            turns: agents
                .iter()
                .map(|a| (a.clone(), TurnView::starting(a, &self.records)))
                .collect(),
            apart: agents.len() > 1,
        };
    }

    /// A tool's return in `ret.agent`'s turn; the stored objects' `_REF_ID`s as that
    /// turn sees them.
    pub fn apply_return(&mut self, ret: ToolReturn) -> Vec<String> {
        let (state, visit) = (self.state.clone(), self.visit);
        let apart = self.round.apart;
        let Some(turn) = self.round.turns.get_mut(&ret.agent) else {
            // Outside any turn (a caller driving the Environment by hand): at once.
            self.records.count(&ret);
            return store_result(&mut self.store, &ret, &state, visit);
        };
        let refs = if apart {
            turn.note(&ret);
            match (&ret.ret, ret.store) {
                (Return::Result(_), true) => {
                    let store = turn.store.get_or_insert_with(|| self.store.clone());
                    store_result(store, &ret, &state, visit)
                }
                _ => Vec::new(),
            }
        } else {
            self.records.count(&ret);
            turn.note(&ret);
            store_result(&mut self.store, &ret, &state, visit)
        };
        turn.returns.push((ret, refs.clone()));
        refs
    }

    /// Values `agent`'s `extract` step read: seen by later turns, and by the others of
    /// a round only once it is committed.
    pub fn set_shared(&mut self, agent: &str, values: Vec<(String, String)>) {
        match self.round.turns.get_mut(agent) {
            Some(turn) if self.round.apart => turn.shared.extend(values),
            _ => self.shared.extend(values),
        }
    }

    /// Whether an entry of the store may be seen now: in competitive mode only what was
    /// made in the current visit, in cooperative mode everything.
    pub fn visible(&self, entry: &Entry) -> bool {
        match self.mode {
            Mode::Cooperative => true,
            Mode::Competitive => {
                entry.metadata.get("_state").and_then(Value::as_str) == Some(self.state.as_str())
                    && entry.metadata.get("_visit").and_then(Value::as_u64)
                        == Some(u64::from(self.visit))
            }
        }
    }

    /// The store as `agent` sees it: its own view in a round of several.
    pub fn store_seen_by(&self, agent: &str) -> &Store {
        self.round
            .turns
            .get(agent)
            .and_then(|t| t.store.as_ref())
            .unwrap_or(&self.store)
    }

    /// What `agent`'s decision prompt shows: its standing errors, the tools that have
    /// run, and the entries it may see, rendered within `budget` tokens.
    pub fn view_tools(&self, agent: &str, budget: usize, counter: &dyn TokenCounter) -> ToolView {
        let (ran, errors) = match self.round.turns.get(agent) {
            Some(t) => (&t.ran, &t.errors),
            None => (&self.records.ran, &self.records.errors),
        };
        let entries: Vec<(&str, &str, &Entry)> = self
            .store_seen_by(agent)
            .entries()
            .filter(|(_, _, e)| self.visible(e))
            .collect();
        let mut stored: Vec<String> = entries.iter().map(|(t, _, _)| t.to_string()).collect();
        stored.sort();
        stored.dedup();
        ToolView {
            errors: errors.get(agent).cloned().unwrap_or_default(),
            environment: render_environment(&entries, budget, counter),
            ran: ran.iter().cloned().collect(),
            stored,
        }
    }

    /// Commits the round's turns in the given order (the state's roles): each turn's
    /// queued returns and extracted values, then its messages, numbered from the log's
    /// next position, with its results' lines listing the `_REF_ID`s they got.
    pub fn commit(&mut self, turns: Vec<DraftTurn>) -> Vec<SettledTurn> {
        let mut round = std::mem::take(&mut self.round);
        let mut seq = self.memory.next_seq();
        turns
            .into_iter()
            .map(|draft| {
                let own = round.turns.remove(&draft.name).unwrap_or_default();
                let settled = self.settle(own, draft, round.apart, seq);
                seq += settled.messages.len() as u64;
                settled
            })
            .collect()
    }

    /// One turn of the commit.
    fn settle(
        &mut self,
        own: TurnView,
        draft: DraftTurn,
        apart: bool,
        first_seq: u64,
    ) -> SettledTurn {
        // The ids each return got now; in a round of one, the ids it got when it came.
        let committed: Vec<Vec<String>> = if apart {
            own.returns
                .iter()
                .map(|(ret, _)| {
                    self.records.count(ret);
                    store_result(&mut self.store, ret, &self.state, self.visit)
                })
                .collect()
        } else {
            own.returns.iter().map(|(_, refs)| refs.clone()).collect()
        };
        // What the turn's own objects were called in its view, and are called now: a
        // `store_query` in the turn may have shown them.
        let renamed: HashMap<&str, &str> = own
            .returns
            .iter()
            .zip(&committed)
            .flat_map(|((_, seen), now)| seen.iter().zip(now))
            .filter(|(seen, now)| seen != now)
            .map(|(seen, now)| (seen.as_str(), now.as_str()))
            .collect();
        let events = draft
            .events
            .into_iter()
            .map(|e| match e.stored.and_then(|i| committed.get(i)) {
                Some(refs) if !refs.is_empty() => tag_refs(e.ret, refs),
                _ => rename_refs(e.ret, &renamed),
            })
            .collect();
        self.shared.extend(own.shared);
        let messages = draft
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let response = match m.stored.and_then(|k| committed.get(k)) {
                    Some(refs) => listed(&m.response, refs),
                    None => m.response,
                };
                let processed = Action {
                    name: m.name,
                    role: m.role,
                    response,
                    kind: m.kind,
                    decision: m.decision,
                    others: m.others,
                }
                .process(LogPlace {
                    seq: first_seq + i as u64,
                    state: &self.state,
                    visit: self.visit,
                });
                self.cut_replies += u64::from(processed.cut || m.stopped_at_speaker);
                processed.memory
            })
            .collect();
        SettledTurn {
            name: draft.name,
            events,
            messages,
        }
    }

    /// Appends committed messages to memory, each with its embedding (empty when
    /// nothing reads them); returns them as kept, and the summary call due, if one is.
    pub fn record(
        &mut self,
        messages: Vec<(Message, &[f32])>,
    ) -> (Vec<Arc<Message>>, Option<SummaryRequest>) {
        self.embedded += messages.iter().filter(|(_, v)| !v.is_empty()).count() as u64;
        self.memory.record_all(messages)
    }

    /// Stores a new short-term summary, covering the log up to its latest message.
    pub fn set_summary(&mut self, text: String) {
        self.memory.set_summary(text);
    }

    /// The latest message's embedding, if it has one.
    pub fn latest_vector(&self) -> Option<&[f32]> {
        self.memory.latest_vector()
    }

    /// The Environment for `environment.json`, and the transcript.
    pub fn snapshot(&self) -> EnvironmentSnapshot {
        let mut store = self.store.to_json();
        let record = EnvironmentRecord {
            store: store["environment"].take(),
            hidden_store: store["hidden_environment"].take(),
            tool_errors: self.records.errors.clone(),
            extracted: self.shared.clone(),
            log: self.memory.log().to_vec(),
            summary: self.memory.summary().cloned(),
            summaries: self.memory.summaries().to_vec(),
        };
        EnvironmentSnapshot {
            transcript: self.memory.log().to_vec(),
            record,
            cut_replies: self.cut_replies,
            embeddings: self.embedded,
            tools: self.records.summary(),
        }
    }
}

#[cfg(test)]
mod tests;
