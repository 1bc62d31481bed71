//! What a running simulation reports, and where it goes: the live terminal view and
//! `events.jsonl`, one Elysia frontend payload per line.
//!
//! A simultaneous round's messages come between its `RoundStarted` and `RoundEnded`;
//! [`Rounds`] follows that, so each message's payload can say which round it is in.

pub use sopsim_core::quality::{RedrawCause, ReplyQuality};
pub use sopsim_core::world::{Spread, WorldSummary};

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

use sopsim_core::memory::Message;
use sopsim_core::tool_results::Return;

/// Something that happened in a run.
#[derive(Debug, Clone)]
pub enum SimEvent {
    /// The run entered a state for a new visit.
    StateEntered {
        /// The state entered.
        state: String,
        /// The 1-based number of this visit within the run.
        visit: u32,
    },
    /// An agent's turn begins (not told for the turns of a simultaneous round).
    TurnStarted {
        /// The agent whose turn it is.
        name: String,
        /// The role it plays in this turn.
        role: String,
        /// Whether a person plays the agent.
        human: bool,
    },
    /// A streamed piece of the current reply.
    Token {
        /// The agent replying.
        name: String,
        /// The piece of text.
        text: String,
    },
    /// The reply streamed so far is dropped: it is being drawn again (`cause`: what was
    /// wrong with it), and its next draw streams from the start.
    Redrawn {
        /// The agent replying.
        name: String,
        /// Why the reply is drawn again.
        cause: sopsim_core::quality::RedrawCause,
    },
    /// A message committed to the run's transcript.
    Message(Arc<Message>),
    /// A simultaneous round begins: every one of `roles` acts on the same information.
    RoundStarted {
        /// The state the round is in.
        state: String,
        /// The 1-based number of the visit within the run.
        visit: u32,
        /// The 1-based number of the round within the run.
        round: u32,
        /// The roles acting in the round.
        roles: Vec<String>,
    },
    /// A simultaneous round's messages are all in (they were sent just before).
    RoundEnded {
        /// The state the round is in.
        state: String,
        /// The 1-based number of the visit within the run.
        visit: u32,
        /// The 1-based number of the round within the run.
        round: u32,
        /// The roles that acted in the round.
        roles: Vec<String>,
    },
    /// How many of a simultaneous round's turns are in (`done` of `of`), told about a
    /// hundred times a round, for a progress bar; the turns' messages come with
    /// [`SimEvent::RoundEnded`].
    RoundProgress {
        /// Turns of the round drafted so far.
        done: u64,
        /// Turns in the round.
        of: u64,
    },
    /// A warning about the run, to show to the user.
    Warning {
        /// The warning's text.
        text: String,
    },
    /// At each turn boundary and on pause or resume: how far the run is and what it
    /// spent so far.
    Progress(Box<Progress>),
    /// What a tool returned, or the decision agent decided, in an agent's turn: an
    /// Elysia `result`, `self_healing_error`, `status` or `tree_update` payload.
    Tool {
        /// The agent whose turn it is.
        name: String,
        /// The 1-based number of the visit within the run.
        visit: u32,
        /// What the tool returned or the decision agent decided.
        ret: Box<Return>,
    },
    /// A resumed run has said again the `messages` its killed run had said (from its
    /// journal, asking no model); what follows is new.
    Resumed {
        /// How many messages were said again.
        messages: u64,
    },
    /// The world after a round: its global variables, each per-agent variable's
    /// spread, and the condition that ends the run, if one holds (a round's every
    /// per-agent value is in `world.jsonl`, not in events).
    World {
        /// The state the round was in.
        state: String,
        /// The 1-based number of the visit within the run.
        visit: u32,
        /// The world's rounds closed so far, this one included.
        round: u32,
        /// Each global variable's value.
        world: indexmap::IndexMap<String, f64>,
        /// Each per-agent variable's mean, least and largest value.
        agents: indexmap::IndexMap<String, Spread>,
        /// The name of the end condition that holds, if one does.
        ended_if: Option<String>,
    },
    /// The run ended; `ended_by` as in `summary.json`.
    Finished {
        /// How the run ended.
        ended_by: String,
        /// Turns taken in the run.
        turns: u64,
    },
}

/// The running totals of [`SimEvent::Progress`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Progress {
    /// Turns taken so far.
    pub turns: u64,
    /// Whether the run is paused.
    pub paused: bool,
    /// Prompt tokens of every model call so far.
    pub prompt_tokens: u64,
    /// Completion tokens of every model call so far.
    pub completion_tokens: u64,
    /// `None` while some model has no known price.
    pub cost_usd: Option<f64>,
    /// Model calls by kind (`act`, `route`, `transit`, `summary`, …).
    pub calls: std::collections::BTreeMap<String, u64>,
    /// The replies' quality so far.
    pub reply_quality: sopsim_core::quality::ReplyQuality,
}

/// Receives a run's events. Implementations must be cheap: they are called inline.
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn emit(&self, event: &SimEvent);

    /// Whether this sink does anything with [`SimEvent::Token`]. A run whose sinks all
    /// say no makes no token events: a streamed reply is dozens of pieces a turn.
    fn wants_tokens(&self) -> bool {
        true
    }

    /// The first write this sink could not make (`what`: the file), given once; the
    /// run stops at its next turn boundary with this error.
    fn take_failure(&self) -> Option<SinkFailure> {
        None
    }
}

/// A write an event sink could not make.
#[derive(Debug)]
pub struct SinkFailure {
    /// The file that could not be written.
    pub what: String,
    /// The I/O error.
    pub source: std::io::Error,
}

/// A list of sinks, called in order.
#[derive(Clone, Default)]
pub struct Sinks(Arc<Vec<Arc<dyn EventSink>>>);

impl Sinks {
    /// Sinks that receive each event in the order given.
    pub fn new(sinks: Vec<Arc<dyn EventSink>>) -> Self {
        Self(Arc::new(sinks))
    }

    /// Gives `event` to every sink, in order.
    pub fn emit(&self, event: SimEvent) {
        for s in self.0.iter() {
            s.emit(&event);
        }
    }

    /// Whether any sink does anything with `SimEvent::Token`.
    pub fn wants_tokens(&self) -> bool {
        self.0.iter().any(|s| s.wants_tokens())
    }

    /// The first failure of any sink, if one failed since last asked.
    pub fn take_failure(&self) -> Option<SinkFailure> {
        self.0.iter().find_map(|s| s.take_failure())
    }
}

/// Writes each event as an Elysia frontend payload to a JSONL file, one `write` per
/// line. After a failed write it writes nothing more, and cuts the file back to its
/// last whole line.
pub struct FrontendLog {
    inner: Mutex<FrontendState>,
    path: std::path::PathBuf,
}

struct FrontendState {
    file: std::fs::File,
    /// The bytes of whole lines written so far.
    written: u64,
    line: Vec<u8>,
    payloads: Payloads,
    failed: Failed,
}

/// Turns a run's events into the payloads `events.jsonl` holds, one by one: ids from the
/// run's seed, the round each event is in, the time since the run began.
pub struct Payloads {
    conversation_id: String,
    started: Instant,
    ids: ChaCha8Rng,
    rounds: Rounds,
}

impl Payloads {
    /// Ids come from `seed`, so seeded runs have the same ids.
    pub fn new(conversation_id: String, seed: u64) -> Self {
        Self {
            conversation_id,
            started: Instant::now(),
            ids: ChaCha8Rng::seed_from_u64(seed ^ 0x05ee_d1d5),
            rounds: Rounds::default(),
        }
    }

    /// The payload of `event`, if it has one (streamed tokens and progress do not).
    pub fn next(&mut self, event: &SimEvent) -> Option<Value> {
        let elapsed = self.started.elapsed().as_millis() as u64;
        let round = self.rounds.see(event);
        let (ret, query_id) = to_return_in(event, elapsed, round)?;
        let mut bytes = [0u8; 16];
        self.ids.fill_bytes(&mut bytes);
        let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        ret.to_frontend_with_id("sopsim", &self.conversation_id, &query_id, id)
    }
}

/// Whether a write failed, and whether the failure was told.
enum Failed {
    No,
    Untold(std::io::Error),
    Told,
}

impl FrontendLog {
    /// Ids come from `seed`, so seeded runs write the same ids.
    pub fn create(
        folder: &crate::output_folder::OutputFolder,
        name: &str,
        conversation_id: String,
        seed: u64,
    ) -> Result<Self, crate::output_folder::FolderFileError> {
        let path = folder.path(name);
        let file = folder.create(name)?;
        Ok(Self {
            inner: Mutex::new(FrontendState {
                file,
                written: 0,
                line: Vec::new(),
                payloads: Payloads::new(conversation_id, seed),
                failed: Failed::No,
            }),
            path,
        })
    }

    /// The first write error, if it was not told yet.
    fn take_error(&self) -> Option<std::io::Error> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut st.failed, Failed::Told) {
            Failed::Untold(e) => Some(e),
            Failed::No => {
                st.failed = Failed::No;
                None
            }
            Failed::Told => None,
        }
    }
}

/// Which simultaneous round the events of a run are in, followed event by event.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rounds {
    current: Option<u32>,
}

impl Rounds {
    /// Takes in `event`; returns the round it belongs to (a round's start and end
    /// belong to it).
    pub fn see(&mut self, event: &SimEvent) -> Option<u32> {
        match event {
            SimEvent::RoundStarted { round, .. } => {
                self.current = Some(*round);
                self.current
            }
            SimEvent::RoundEnded { round, .. } => {
                self.current = None;
                Some(*round)
            }
            _ => self.current,
        }
    }
}

/// A round's start or end as a status with `{event, round, roles, state, visit}` in
/// its metadata.
fn round_status(
    text: String,
    event: &str,
    round: u32,
    roles: &[String],
    state: &str,
    visit: u32,
) -> Return {
    let metadata = json!({
        "event": event, "round": round, "roles": roles, "state": state, "visit": visit,
    });
    Return::Status {
        text,
        metadata: metadata.as_object().cloned().unwrap_or_default(),
    }
}

/// The frontend payload for an event, if it has one (streamed tokens do not).
pub fn to_return(event: &SimEvent, elapsed_ms: u64) -> Option<(Return, String)> {
    to_return_in(event, elapsed_ms, None)
}

/// As [`to_return`], for an event in simultaneous round `round` (from [`Rounds`]): a
/// message's metadata then carries `round`.
pub fn to_return_in(
    event: &SimEvent,
    elapsed_ms: u64,
    round: Option<u32>,
) -> Option<(Return, String)> {
    match event {
        SimEvent::StateEntered { state, visit } => Some((
            Return::status(format!("Entering {state} (visit {visit})")),
            format!("visit-{visit}"),
        )),
        SimEvent::Message(m) => {
            let mut meta: Map<String, Value> = json!({
                "seq": m.seq, "state": m.state, "visit": m.visit, "role": m.role, "name": m.name,
                "kind": m.kind, "elapsed_ms": elapsed_ms,
            })
            .as_object()
            .cloned()
            .unwrap_or_default();
            if let Some(d) = &m.decision {
                meta.insert("decision".into(), json!(d));
            }
            if let Some(round) = round {
                meta.insert("round".into(), json!(round));
            }
            Some((
                Return::response(m.content.clone(), meta),
                format!("visit-{}", m.visit),
            ))
        }
        SimEvent::RoundStarted {
            state,
            visit,
            round,
            roles,
        } => Some((
            round_status(
                format!(
                    "Round {round} of {state} begins: {} act at once",
                    roles.join(", ")
                ),
                "round_start",
                *round,
                roles,
                state,
                *visit,
            ),
            format!("visit-{visit}"),
        )),
        SimEvent::RoundEnded {
            state,
            visit,
            round,
            roles,
        } => Some((
            round_status(
                format!("Round {round} of {state} ends"),
                "round_end",
                *round,
                roles,
                state,
                *visit,
            ),
            format!("visit-{visit}"),
        )),
        SimEvent::World {
            state,
            visit,
            round,
            world,
            agents,
            ended_if,
        } => {
            let shown: Vec<String> = world.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let mut text = format!("World after round {round}: {}", shown.join(", "));
            if let Some(name) = ended_if {
                text.push_str(&format!("; {name}: the run ends"));
            }
            let metadata = json!({
                "event": "world", "round": round, "state": state, "visit": visit,
                "world": world, "agents": agents, "ended_if": ended_if,
            });
            Some((
                Return::Status {
                    text,
                    metadata: metadata.as_object().cloned().unwrap_or_default(),
                },
                format!("visit-{visit}"),
            ))
        }
        SimEvent::Warning { text } => Some((Return::Warning { text: text.clone() }, "run".into())),
        SimEvent::Tool { visit, ret, .. } => Some(((**ret).clone(), format!("visit-{visit}"))),
        SimEvent::Finished { .. } => Some((Return::Completed, "run".into())),
        SimEvent::TurnStarted { .. }
        | SimEvent::Token { .. }
        | SimEvent::Redrawn { .. }
        | SimEvent::Resumed { .. }
        | SimEvent::RoundProgress { .. }
        | SimEvent::Progress(_) => None,
    }
}

impl EventSink for FrontendLog {
    fn wants_tokens(&self) -> bool {
        false
    }

    fn emit(&self, event: &SimEvent) {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(payload) = st.payloads.next(event) else {
            return;
        };
        if !matches!(st.failed, Failed::No) {
            return;
        }
        let st = &mut *st;
        st.line.clear();
        let result = serde_json::to_writer(&mut st.line, &payload)
            .map_err(std::io::Error::from)
            .and_then(|_| {
                st.line.push(b'\n');
                st.file.write_all(&st.line)
            });
        match result {
            Ok(()) => st.written += st.line.len() as u64,
            Err(e) => {
                let _ = st.file.set_len(st.written);
                st.failed = Failed::Untold(e);
            }
        }
    }

    fn take_failure(&self) -> Option<SinkFailure> {
        self.take_error().map(|source| SinkFailure {
            what: self.path.display().to_string(),
            source,
        })
    }
}
