//! Shared memory of one simulation: the long-term log, its embedding index, the
//! short-term summary, and the visibility rules of the two modes.
//!
//! Cooperative: an agent's observation, retrieval and the summary draw on the whole run.
//! Competitive: only on messages since the current state's visit began; the summary is
//! restarted at every visit.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::audience::Audience;
use super::index::EmbeddingIndex;
use super::message::Message;
use crate::scenario::Mode;

/// The short-term summary and how far it reaches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The summary's text.
    pub text: String,
    /// The `seq` of the last message it covers.
    pub through_seq: u64,
}

/// What an agent sees before it speaks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The short-term summary, when there is one and the viewer may read it.
    pub summary: Option<String>,
    /// Older messages relevant to the latest one, most relevant first.
    pub relevant: Vec<Arc<Message>>,
    /// The latest messages, oldest first; the last is the one to answer.
    pub recent: Vec<Arc<Message>>,
    /// The recent messages' embeddings, where they were embedded (else empty).
    pub recent_vectors: Vec<Vec<f32>>,
    /// Values agents' `extract` steps stored, for `template` components.
    pub shared: BTreeMap<String, String>,
}

/// What a summary call needs: the summary so far and the messages since.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The summary so far, if there is one.
    pub previous: Option<String>,
    /// The messages recorded since the last summary, oldest first.
    pub messages: Vec<Arc<Message>>,
}

/// The memory shared by a simulation's agents.
#[derive(Debug)]
pub struct SharedMemory {
    mode: Mode,
    max_chat_history: usize,
    top_k: usize,
    log: Vec<Arc<Message>>,
    index: EmbeddingIndex,
    summary: Option<Summary>,
    /// Every summary made, in order, for `environment.json`.
    summaries: Vec<Summary>,
    /// Log position where the current visit began.
    visit_start: usize,
    /// Messages recorded since the last summary (within the visible window).
    since_summary: usize,
    /// What each population member may see, when the scenario has populations.
    audience: Option<Audience>,
}

impl SharedMemory {
    /// An empty memory for `mode`, summarising in blocks of `max_chat_history` messages
    /// (at least 1) and retrieving the `top_k` most relevant older ones.
    pub fn new(mode: Mode, max_chat_history: usize, top_k: usize) -> Self {
        Self {
            mode,
            max_chat_history: max_chat_history.max(1),
            top_k,
            log: Vec::new(),
            index: EmbeddingIndex::default(),
            summary: None,
            summaries: Vec::new(),
            visit_start: 0,
            since_summary: 0,
            audience: None,
        }
    }

    /// Narrows what population members see to what `audience` lets them.
    pub fn set_audience(&mut self, audience: Audience) {
        self.audience = Some(audience);
    }

    /// Every message recorded, in order.
    pub fn log(&self) -> &[Arc<Message>] {
        &self.log
    }

    /// The current short-term summary, if there is one.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// Every summary made, oldest first.
    pub fn summaries(&self) -> &[Summary] {
        &self.summaries
    }

    /// The log position the next message gets.
    pub fn next_seq(&self) -> u64 {
        self.log.len() as u64
    }

    /// A new visit begins; in competitive mode the window and the summary restart.
    pub fn begin_visit(&mut self) {
        self.visit_start = self.log.len();
        if self.mode == Mode::Competitive {
            self.summary = None;
            self.since_summary = 0;
        }
    }

    /// First log position an agent may see now.
    fn window_start(&self) -> usize {
        match self.mode {
            Mode::Cooperative => 0,
            Mode::Competitive => self.visit_start,
        }
    }

    /// Appends a message with its embedding (computed once, by the caller). Returns the
    /// stored message, and the summary request when this message completes a batch of
    /// `max_chat_history`.
    #[cfg(test)]
    pub fn record(
        &mut self,
        memory: Message,
        embedding: &[f32],
    ) -> (Arc<Message>, Option<SummaryRequest>) {
        let (mut stored, due) = self.record_all(vec![(memory, embedding)]);
        (stored.remove(0), due)
    }

    /// Appends messages together (a simultaneous round), each with its embedding. A
    /// summary due within them is asked for once, after the last, and covers them all.
    pub fn record_all(
        &mut self,
        messages: Vec<(Message, &[f32])>,
    ) -> (Vec<Arc<Message>>, Option<SummaryRequest>) {
        let before = self.since_summary / self.max_chat_history;
        let mut stored = Vec::with_capacity(messages.len());
        for (memory, embedding) in messages {
            debug_assert_eq!(memory.seq, self.next_seq());
            let m = Arc::new(memory);
            if let Some(a) = &mut self.audience {
                a.record(self.log.len(), &m.name);
            }
            self.log.push(m.clone());
            self.index.push(embedding);
            self.since_summary += 1;
            stored.push(m);
        }
        let unread = self.audience.as_ref().is_some_and(|a| !a.summary_read());
        if unread || self.since_summary / self.max_chat_history == before {
            return (stored, None);
        }
        let from = self.log.len() - self.since_summary;
        let due = SummaryRequest {
            previous: self.summary.as_ref().map(|s| s.text.clone()),
            messages: self.log[from..].to_vec(),
        };
        (stored, Some(due))
    }

    /// Stores a new summary covering the log up to its last message.
    pub fn set_summary(&mut self, text: String) {
        let through_seq = self.log.len().saturating_sub(1) as u64;
        let summary = Summary { text, through_seq };
        self.summaries.push(summary.clone());
        self.summary = Some(summary);
        self.since_summary = 0;
    }

    /// The stored embedding of the latest message, normalised.
    pub fn latest_vector(&self) -> Option<&[f32]> {
        self.index.vector(self.index.len().checked_sub(1)?)
    }

    /// What `viewer` sees now: [`Self::observe`], or for a population member whose view
    /// is narrower, the latest messages it may see and the `top_k` older ones it may
    /// see most similar to the latest of them. The latest move a block of
    /// `max_chat_history` at a time, as in [`Self::observe`], so the member's prompt only
    /// grows between moves. The summary covers messages it may not see, so it is left
    /// out.
    pub fn observe_as(&self, viewer: &str) -> Observation {
        let start = self.window_start();
        let Some((audience, count)) = self
            .audience
            .as_ref()
            .and_then(|a| Some((a, a.visible_count(viewer, start)?)))
        else {
            return self.observe();
        };
        let recent_len = latest_len(count, self.max_chat_history);
        let limit = if self.top_k == 0 {
            recent_len
        } else {
            usize::MAX
        };
        let Some(seen) = audience.visible(viewer, start, limit) else {
            return self.observe();
        };
        let (older, recent) = seen.split_at(seen.len().saturating_sub(recent_len));
        let relevant = match recent.last().and_then(|&p| self.index.vector(p)) {
            Some(q) if !older.is_empty() => self
                .index
                .nearest_in(q, older.iter().copied(), self.top_k)
                .into_iter()
                .map(|hit| self.log[hit.position].clone())
                .collect(),
            _ => Vec::new(),
        };
        Observation {
            summary: None,
            relevant,
            recent: recent.iter().map(|&p| self.log[p].clone()).collect(),
            recent_vectors: Vec::new(),
            shared: BTreeMap::new(),
        }
    }

    /// What any agent sees now: the summary, the latest visible messages, and the
    /// `top_k` older visible messages most similar to the latest.
    ///
    /// The latest messages start at a whole number of `max_chat_history` blocks into
    /// the window and move a block at a time, when a summary is due: between
    /// `max_chat_history` and twice that many. Between moves an agent's prompt only
    /// grows at its end, so the model reads again only what is new.
    pub fn observe(&self) -> Observation {
        let start = self.window_start();
        let end = self.log.len();
        let recent_from = end - latest_len(end - start.min(end), self.max_chat_history);
        let relevant = if end > start && recent_from > start {
            self.index
                .top_k(end - 1, start..recent_from, self.top_k)
                .into_iter()
                .map(|hit| self.log[hit.position].clone())
                .collect()
        } else {
            Vec::new()
        };
        Observation {
            summary: self.summary.as_ref().map(|s| s.text.clone()),
            relevant,
            recent: self.log[recent_from..end].to_vec(),
            recent_vectors: (recent_from..end)
                .map(|p| {
                    self.index
                        .vector(p)
                        .map(<[f32]>::to_vec)
                        .unwrap_or_default()
                })
                .collect(),
            shared: BTreeMap::new(),
        }
    }
}

/// How many of `count` messages are the latest an agent sees: all of them until there
/// are twice `block`, then from a whole number of blocks in: between `block` and twice
/// that less one.
fn latest_len(count: usize, block: usize) -> usize {
    let block = block.max(1);
    match count / block {
        0 => count,
        _ => block + count % block,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MessageKind;

    fn msg(seq: u64, state: &str, content: &str) -> Message {
        Message {
            seq,
            state: state.into(),
            visit: 1,
            role: "R".into(),
            name: "N".into(),
            content: content.into(),
            kind: MessageKind::Reply,
            decision: None,
        }
    }

    fn fill(mem: &mut SharedMemory, state: &str, n: usize) -> Vec<SummaryRequest> {
        (0..n)
            .filter_map(|i| {
                let seq = mem.next_seq();
                mem.record(msg(seq, state, &format!("{state} {i}")), &[1.0, i as f32])
                    .1
            })
            .collect()
    }

    #[test]
    fn competitive_hides_earlier_states_and_cooperative_does_not() {
        for (mode, sees_first_state) in [(Mode::Cooperative, true), (Mode::Competitive, false)] {
            let mut mem = SharedMemory::new(mode, 3, 5);
            mem.begin_visit();
            fill(&mut mem, "a", 4);
            mem.begin_visit();
            fill(&mut mem, "b", 4);
            let obs = mem.observe();
            let seen: Vec<&str> = obs
                .relevant
                .iter()
                .chain(&obs.recent)
                .map(|m| m.state.as_str())
                .collect();
            assert_eq!(seen.contains(&"a"), sees_first_state, "{mode:?}: {seen:?}");
            // Cooperative: 8 messages, the window from the second block of 3 on;
            // competitive: the visit's 4, one whole block and one more.
            let expected = if sees_first_state { 5 } else { 4 };
            assert_eq!(obs.recent.len(), expected, "{mode:?}");
        }
    }

    #[test]
    fn the_latest_messages_move_a_block_at_a_time_so_a_prompt_only_grows_between() {
        let mut mem = SharedMemory::new(Mode::Cooperative, 3, 0);
        mem.begin_visit();
        let mut firsts = Vec::new();
        for i in 0..12 {
            let seq = mem.next_seq();
            mem.record(msg(seq, "a", &format!("m{i}")), &[]);
            let obs = mem.observe();
            assert!(
                (1..=5).contains(&obs.recent.len()),
                "{i}: {}",
                obs.recent.len()
            );
            assert_eq!(obs.recent.last().unwrap().content, format!("m{i}"));
            firsts.push(obs.recent[0].content.clone());
        }
        // The window's first message changes once per block of three, when a summary
        // is due.
        assert_eq!(
            firsts,
            ["m0", "m0", "m0", "m0", "m0", "m3", "m3", "m3", "m6", "m6", "m6", "m9"]
        );
    }

    #[test]
    fn a_summary_is_due_every_max_chat_history_messages_and_competitive_restarts_it() {
        let mut mem = SharedMemory::new(Mode::Competitive, 3, 0);
        mem.begin_visit();
        let due = fill(&mut mem, "a", 7);
        assert_eq!(due.len(), 2, "due after 3 and 6 messages");
        assert_eq!(due[0].messages.len(), 3);
        mem.set_summary("first".into());
        assert_eq!(mem.observe().summary.as_deref(), Some("first"));
        let due = fill(&mut mem, "a", 3);
        assert_eq!(due[0].previous.as_deref(), Some("first"));
        mem.begin_visit();
        assert_eq!(
            mem.observe().summary,
            None,
            "competitive: a new visit starts without a summary"
        );
    }

    #[test]
    fn a_new_competitive_visit_shows_nothing_until_someone_speaks() {
        let mut mem = SharedMemory::new(Mode::Competitive, 4, 2);
        mem.begin_visit();
        fill(&mut mem, "a", 5);
        mem.begin_visit();
        assert_eq!(mem.observe(), Observation::default());
    }

    #[test]
    fn the_latest_are_all_up_to_a_block_then_between_one_block_and_two() {
        let lens: Vec<usize> = (0..10).map(|n| latest_len(n, 3)).collect();
        assert_eq!(lens, [0, 1, 2, 3, 4, 5, 3, 4, 5, 3]);
        assert_eq!(latest_len(4, 0), 1, "a block of at least one");
    }

    #[test]
    fn a_members_latest_messages_move_a_block_at_a_time_too() {
        let scenario = crate::scenario::from_document(
            std::path::Path::new("t.json"),
            serde_json::json!({
                "name": "ring",
                "agents": {"Host": {"roles": {"open": "Host"}}},
                "populations": {"crowd": {
                    "name": "P{i}", "count": 6, "roles": {"play": "Player"},
                    "network": {"kind": "ring"}
                }},
                "sop": {"start": "open", "states": {
                    "open": {"roles": ["Host"], "transition": {"max_turns": 1}, "next": ["play"]},
                    "play": {"roles": ["Player"], "turns": "simultaneous",
                             "transition": {"max_rounds": 4}, "next": ["end"]}
                }}
            }),
        )
        .unwrap();
        let drawn = crate::network::draw_all(scenario.populations.values(), 0).unwrap();
        let audience = Audience::of(&scenario, Mode::Cooperative, &drawn).unwrap();
        let mut mem = SharedMemory::new(Mode::Cooperative, 3, 0);
        mem.set_audience(audience);
        mem.begin_visit();
        let speak = |mem: &mut SharedMemory, name: &str| {
            let seq = mem.next_seq();
            let mut m = msg(seq, "play", &format!("{name} {seq}"));
            m.name = name.into();
            mem.record(m, &[]);
        };
        speak(&mut mem, "Host");
        // P1 sees the host, itself and its neighbours P2 and P6: 13 messages in 4 rounds.
        let mut firsts: Vec<u64> = Vec::new();
        let mut before: Vec<u64> = Vec::new();
        for _ in 0..4 {
            for i in 1..=6 {
                speak(&mut mem, &format!("P{i}"));
                let now: Vec<u64> = mem.observe_as("P1").recent.iter().map(|m| m.seq).collect();
                if firsts.last() != now.first() {
                    firsts.push(now[0]);
                } else {
                    assert!(now.starts_with(&before), "{before:?} then {now:?}");
                }
                assert!(now.len() <= 5, "{now:?}");
                before = now;
            }
        }
        // The latest move when the 6th, 9th and 12th message P1 sees comes.
        assert_eq!(firsts, [0, 6, 12, 18]);
    }

    #[test]
    fn only_replies_embedded_keeps_each_vector_beside_its_message() {
        // A round of choices nothing reads by meaning, then a reply that is embedded,
        // then more choices: as a simultaneous round with the paraphrase check runs.
        let mut mem = SharedMemory::new(Mode::Cooperative, 10, 2);
        mem.begin_visit();
        for (content, vector) in [("3", &[][..]), ("We fish less.", &[1.0, 0.0]), ("1", &[])] {
            let seq = mem.next_seq();
            mem.record(msg(seq, "a", content), vector);
        }
        let obs = mem.observe();
        assert_eq!(obs.recent.len(), 3);
        assert_eq!(obs.recent_vectors, vec![vec![], vec![1.0, 0.0], vec![]]);
        assert_eq!(mem.latest_vector(), None);
    }
}
