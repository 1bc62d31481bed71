//! The live run as the viewer sees it: every event kept in order with its sequence
//! number (so a late or reconnecting browser gets the run so far), fanned out to the
//! connected browsers. A browser that cannot keep up is dropped with a reload marker;
//! the run never waits for one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use actix_web_lab::sse;
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::json;
#[cfg(test)]
use serde_json::Value;
use tokio::sync::mpsc;

use sopsim::events::{to_return_in, EventSink, Progress, Rounds, SimEvent};

/// Events a browser may be behind before it is dropped.
const CLIENT_BUFFER: usize = 4096;

/// One kept event: its sequence number, its SSE event name and its JSON.
struct Kept {
    id: u64,
    name: &'static str,
    data: Arc<str>,
}

struct Client {
    tx: mpsc::Sender<sse::Event>,
    dropped: Arc<AtomicBool>,
}

/// What `/api/state` reports besides the scenario.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveState {
    pub state: Option<String>,
    pub visit: u32,
    pub progress: Progress,
    /// `ended_by`, once the run ended.
    pub ended_by: Option<String>,
    /// The first of `waiting` (kept for pages that read only one).
    pub waiting_for: Option<Waiting>,
    /// The people the run waits for, in the order it asked them: one for a turn, each
    /// person of a simultaneous round for a round.
    pub waiting: Vec<Waiting>,
    pub clients: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Waiting {
    pub name: String,
    pub role: String,
}

#[derive(Default)]
struct HubState {
    kept: Vec<Kept>,
    clients: Vec<Client>,
    live: LiveState,
    rounds: Rounds,
}

/// The live run's events and the browsers watching them.
pub struct Hub {
    inner: Mutex<HubState>,
    conversation: String,
    started: std::time::Instant,
}

impl Hub {
    pub fn new(conversation: String) -> Self {
        Self {
            inner: Mutex::new(HubState::default()),
            conversation,
            started: std::time::Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn live(&self) -> LiveState {
        let st = self.lock();
        let mut live = st.live.clone();
        live.clients = st.clients.len();
        live
    }

    /// Marks the run as waiting for `who` to type too, and tells the browsers.
    pub fn add_waiting(&self, who: Waiting) {
        let mut st = self.lock();
        st.live.waiting.retain(|w| w.name != who.name);
        st.live.waiting.push(who);
        Self::publish_waiting(&mut st);
    }

    /// `name` no longer has to type; tells the browsers.
    pub fn remove_waiting(&self, name: &str) {
        let mut st = self.lock();
        let before = st.live.waiting.len();
        st.live.waiting.retain(|w| w.name != name);
        if st.live.waiting.len() != before {
            Self::publish_waiting(&mut st);
        }
    }

    /// The `input` event: `waiting`, everyone the run waits for, and `waiting_for`,
    /// the first of them.
    fn publish_waiting(st: &mut HubState) {
        st.live.waiting_for = st.live.waiting.first().cloned();
        let data = json!({ "waiting_for": st.live.waiting_for, "waiting": st.live.waiting });
        Self::publish(st, "input", data.to_string(), true);
    }

    /// Sends an event to every browser; `keep` events are also given to later ones.
    fn publish(st: &mut HubState, name: &'static str, data: String, keep: bool) {
        let mut event = sse::Data::new(data.clone()).event(name);
        if keep {
            let id = st.kept.len() as u64 + 1;
            event = event.id(id.to_string());
            st.kept.push(Kept {
                id,
                name,
                data: data.into(),
            });
        }
        let event = sse::Event::Data(event);
        st.clients.retain(|c| match c.tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                c.dropped.store(true, Ordering::Relaxed);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    /// A browser's stream: the kept events after `last_id`, then every new one.
    pub fn subscribe(&self, last_id: u64) -> impl Stream<Item = sse::Event> + use<> {
        let (tx, rx) = mpsc::channel(CLIENT_BUFFER);
        let dropped = Arc::new(AtomicBool::new(false));
        let backlog: Vec<sse::Event> = {
            let mut st = self.lock();
            let backlog = st
                .kept
                .iter()
                .filter(|k| k.id > last_id)
                .map(|k| {
                    sse::Event::Data(
                        sse::Data::new(k.data.to_string())
                            .event(k.name)
                            .id(k.id.to_string()),
                    )
                })
                .collect();
            st.clients.push(Client {
                tx,
                dropped: dropped.clone(),
            });
            backlog
        };
        let reload = futures::stream::once(async move {
            dropped
                .load(Ordering::Relaxed)
                .then(|| sse::Event::Data(sse::Data::new("{}").event("reload")))
        })
        .filter_map(futures::future::ready);
        futures::stream::iter(backlog)
            .chain(tokio_stream::wrappers::ReceiverStream::new(rx))
            .chain(reload)
    }
}

impl EventSink for Hub {
    fn emit(&self, event: &SimEvent) {
        let elapsed = self.started.elapsed().as_millis() as u64;
        let mut st = self.lock();
        match event {
            SimEvent::StateEntered { state, visit } => {
                st.live.state = Some(state.clone());
                st.live.visit = *visit;
            }
            SimEvent::Progress(p) => {
                st.live.progress = p.clone();
                let data = serde_json::to_string(p).unwrap_or_default();
                return Self::publish(&mut st, "progress", data, true);
            }
            SimEvent::Token { name, text } => {
                let data = json!({ "name": name, "text": text }).to_string();
                return Self::publish(&mut st, "token", data, false);
            }
            SimEvent::Redrawn { name, cause } => {
                let data = json!({ "name": name, "cause": cause }).to_string();
                return Self::publish(&mut st, "redrawn", data, false);
            }
            SimEvent::TurnStarted { name, role, human } => {
                let data = json!({ "name": name, "role": role, "human": human }).to_string();
                return Self::publish(&mut st, "turn", data, false);
            }
            SimEvent::Finished { ended_by, turns } => {
                st.live.ended_by = Some(ended_by.clone());
                st.live.progress.turns = *turns;
                st.live.waiting_for = None;
                st.live.waiting.clear();
            }
            _ => {}
        }
        let round = st.rounds.see(event);
        let Some((ret, query_id)) = to_return_in(event, elapsed, round) else {
            return;
        };
        let id = uuid::Uuid::from_u128(st.kept.len() as u128 + 1);
        let Some(payload) = ret.to_frontend_with_id("sopsim", &self.conversation, &query_id, id)
        else {
            return;
        };
        let data = serde_json::to_string(&payload).unwrap_or_default();
        Self::publish(&mut st, "message", data, true);
        if let SimEvent::Finished { ended_by, turns } = event {
            let data = json!({ "ended_by": ended_by, "turns": turns }).to_string();
            Self::publish(&mut st, "end", data, true);
        }
    }
}

/// The JSON of a kept payload, for tests.
#[cfg(test)]
fn kept_payloads(hub: &Hub) -> Vec<Value> {
    hub.lock()
        .kept
        .iter()
        .filter(|k| k.name == "message")
        .filter_map(|k| serde_json::from_str(&k.data).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(text: &str) -> SimEvent {
        SimEvent::Warning { text: text.into() }
    }

    #[actix_web::test]
    async fn a_late_browser_gets_the_run_so_far_then_new_events() {
        let hub = Hub::new("c".into());
        hub.emit(&warning("one"));
        hub.emit(&warning("two"));
        let stream = hub.subscribe(1);
        hub.emit(&warning("three"));
        drop(hub);
        let events: Vec<sse::Event> = stream.collect().await;
        assert_eq!(events.len(), 2, "from id 2 on: {events:?}");
    }

    #[actix_web::test]
    async fn a_browser_that_falls_behind_is_dropped_with_a_reload_marker() {
        let hub = Hub::new("c".into());
        let stream = hub.subscribe(0);
        for i in 0..CLIENT_BUFFER + 10 {
            hub.emit(&warning(&i.to_string()));
        }
        assert_eq!(hub.live().clients, 0, "dropped, and the run did not wait");
        assert_eq!(kept_payloads(&hub).len(), CLIENT_BUFFER + 10);
        let events: Vec<sse::Event> = stream.collect().await;
        assert_eq!(events.len(), CLIENT_BUFFER + 1);
        let last = format!("{:?}", events.last().unwrap());
        assert!(last.contains("reload"), "{last}");
    }
}
