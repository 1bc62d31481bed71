//! The live run as the viewer sees it: the newest events kept in order with their
//! sequence numbers (so a late or reconnecting browser gets the run so far), fanned out
//! to the connected browsers. Memory stays bounded however long the run and however
//! many browsers: at most [`MAX_KEPT`] events are kept (a browser that asks for older
//! ones is told how many it missed), at most [`MAX_CLIENTS`] browsers are connected,
//! each is sent its backlog only as fast as it reads, and one more than
//! [`CLIENT_BUFFER`] events behind is dropped with a reload marker; the run never
//! waits for a browser.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::json;
#[cfg(test)]
use serde_json::Value;
use tokio::sync::mpsc;

use sopsim::events::{to_return_in, EventSink, Progress, Rounds, SimEvent};

/// Live events a browser may be behind before it is dropped.
pub(super) const CLIENT_BUFFER: usize = 256;
/// Browsers connected at once; one more is answered 503.
pub(super) const MAX_CLIENTS: usize = 64;
/// Events kept for browsers that connect later.
pub(super) const MAX_KEPT: usize = 20_000;

/// One event as a browser is sent it: its server-sent event name, its sequence number
/// when it is kept, and its JSON.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub name: &'static str,
    pub id: Option<u64>,
    pub data: Arc<str>,
}

/// One kept event: its sequence number, its SSE event name and its JSON.
struct Kept {
    id: u64,
    name: &'static str,
    data: Arc<str>,
}

struct Client {
    tx: mpsc::Sender<Frame>,
    dropped: Arc<AtomicBool>,
}

/// What `/api/state` reports besides the scenario.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LiveState {
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
pub(crate) struct Waiting {
    pub name: String,
    pub role: String,
}

#[derive(Default)]
struct HubState {
    /// The newest kept events, their ids consecutive.
    kept: VecDeque<Kept>,
    /// The id the next kept event gets, less one.
    last_id: u64,
    clients: Vec<Client>,
    live: LiveState,
    rounds: Rounds,
}

/// The live run's events and the browsers watching them.
pub(crate) struct Hub {
    inner: Mutex<HubState>,
    conversation: String,
    started: std::time::Instant,
}

impl Hub {
    pub(crate) fn new(conversation: String) -> Self {
        Self {
            inner: Mutex::new(HubState::default()),
            conversation,
            started: std::time::Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn live(&self) -> LiveState {
        let st = self.lock();
        let mut live = st.live.clone();
        live.clients = st.clients.len();
        live
    }

    /// Marks the run as waiting for `who` to type too, and tells the browsers.
    pub(crate) fn add_waiting(&self, who: Waiting) {
        let mut st = self.lock();
        st.live.waiting.retain(|w| w.name != who.name);
        st.live.waiting.push(who);
        Self::publish_waiting(&mut st);
    }

    /// `name` no longer has to type; tells the browsers.
    pub(crate) fn remove_waiting(&self, name: &str) {
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
        let data: Arc<str> = data.into();
        let mut frame = Frame {
            name,
            id: None,
            data: data.clone(),
        };
        if keep {
            st.last_id += 1;
            let id = st.last_id;
            frame.id = Some(id);
            if st.kept.len() == MAX_KEPT {
                st.kept.pop_front();
            }
            st.kept.push_back(Kept { id, name, data });
        }
        st.clients.retain(|c| match c.tx.try_send(frame.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                c.dropped.store(true, Ordering::Relaxed);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    /// A browser's stream: the kept events after `last_id`, read from the hub as the
    /// browser takes them, then every new one; `None` when [`MAX_CLIENTS`] browsers
    /// are connected already.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        last_id: u64,
    ) -> Option<impl Stream<Item = Frame> + Send + use<>> {
        let (tx, rx) = mpsc::channel(CLIENT_BUFFER);
        let dropped = Arc::new(AtomicBool::new(false));
        let upto = {
            let mut st = self.lock();
            st.clients.retain(|c| !c.tx.is_closed());
            if st.clients.len() >= MAX_CLIENTS {
                return None;
            }
            st.clients.push(Client {
                tx,
                dropped: dropped.clone(),
            });
            st.last_id
        };
        let hub = self.clone();
        let backlog = futures::stream::unfold(last_id, move |shown| {
            let next = (shown < upto).then(|| hub.kept_after(shown));
            futures::future::ready(next)
        });
        let reload = futures::stream::once(async move {
            dropped.load(Ordering::Relaxed).then(|| Frame {
                name: "reload",
                id: None,
                data: "{}".into(),
            })
        })
        .filter_map(futures::future::ready);
        Some(
            backlog
                .chain(futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|frame| (frame, rx))
                }))
                .chain(reload),
        )
    }

    /// The kept event after id `shown`, and its id; if the events after `shown` are no
    /// longer kept, a `forgotten` event saying how many, standing for them.
    fn kept_after(&self, shown: u64) -> (Frame, u64) {
        let st = self.lock();
        let first = st.kept.front().map_or(st.last_id + 1, |k| k.id);
        if shown + 1 < first {
            let data = json!({ "events": first - 1 - shown, "kept": MAX_KEPT }).to_string();
            let forgotten = Frame {
                name: "forgotten",
                id: None,
                data: data.into(),
            };
            return (forgotten, first - 1);
        }
        let k = &st.kept[(shown + 1 - first) as usize];
        let frame = Frame {
            name: k.name,
            id: Some(k.id),
            data: k.data.clone(),
        };
        (frame, k.id)
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
                st.live.progress = (**p).clone();
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
        let id = uuid::Uuid::from_u128(u128::from(st.last_id) + 1);
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

    fn hub() -> Arc<Hub> {
        Arc::new(Hub::new("c".into()))
    }

    #[tokio::test]
    async fn a_late_browser_gets_the_run_so_far_then_new_events() {
        let hub = hub();
        hub.emit(&warning("one"));
        hub.emit(&warning("two"));
        let stream = hub.subscribe(1).unwrap();
        hub.emit(&warning("three"));
        hub.lock().clients.clear();
        let events: Vec<Frame> = stream.collect().await;
        assert_eq!(events.len(), 2, "from id 2 on: {events:?}");
    }

    #[tokio::test]
    async fn a_browser_that_falls_behind_is_dropped_with_a_reload_marker() {
        let hub = hub();
        let stream = hub.subscribe(0).unwrap();
        for i in 0..CLIENT_BUFFER + 10 {
            hub.emit(&warning(&i.to_string()));
        }
        assert_eq!(hub.live().clients, 0, "dropped, and the run did not wait");
        assert_eq!(kept_payloads(&hub).len(), CLIENT_BUFFER + 10);
        let events: Vec<Frame> = stream.collect().await;
        assert_eq!(events.len(), CLIENT_BUFFER + 1);
        assert_eq!(events.last().unwrap().name, "reload");
    }

    #[tokio::test]
    async fn a_long_run_keeps_its_newest_events_and_says_how_many_it_forgot() {
        let hub = hub();
        for i in 0..MAX_KEPT + 5 {
            hub.emit(&warning(&i.to_string()));
        }
        assert_eq!(kept_payloads(&hub).len(), MAX_KEPT);
        let stream = hub.subscribe(0).unwrap();
        hub.lock().clients.clear();
        let events: Vec<Frame> = stream.collect().await;
        assert_eq!(events.len(), MAX_KEPT + 1);
        assert_eq!(events[0].name, "forgotten");
        assert!(events[0].data.contains("\"events\":5"), "{:?}", events[0]);
        assert!(
            events[1].data.contains("\"5\""),
            "the oldest kept is the sixth: {:?}",
            events[1]
        );
    }

    #[tokio::test]
    async fn browsers_beyond_the_limit_are_refused() {
        let hub = hub();
        let streams: Vec<_> = (0..MAX_CLIENTS)
            .map(|_| hub.subscribe(0).unwrap())
            .collect();
        assert!(hub.subscribe(0).is_none());
        drop(streams);
        assert!(
            hub.subscribe(0).is_some(),
            "a closed stream frees its place"
        );
    }
}
