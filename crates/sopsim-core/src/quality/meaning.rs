//! Which committed messages are embedded. An embedding costs a MiniLM forward pass, so
//! a message is embedded only when something reads its vector: retrieval and knowledge
//! lookups (every message) or the stake check (every reply). The caller embeds what
//! [`Meaning::plan`] lists, in one batch, and hands the vectors back to
//! [`Plan::settle`].

use crate::memory::{Message, MessageKind};

/// What a run's committed messages are embedded for.
#[derive(Debug, Clone, Copy)]
pub struct Meaning {
    /// Every message, for retrieval or a knowledge lookup.
    every_message: bool,
    /// Every reply, for the stake check.
    every_reply: bool,
}

/// The embeddings one commit needs.
#[derive(Debug)]
pub struct Plan {
    /// Whether each committed message is embedded.
    own: Vec<bool>,
}

impl Plan {
    /// The texts to embed, in the order [`Plan::settle`] takes their vectors.
    pub fn texts(&self, messages: &[&Message]) -> Vec<String> {
        messages
            .iter()
            .zip(&self.own)
            .filter(|(_, e)| **e)
            .map(|(m, _)| m.content.clone())
            .collect()
    }

    /// Takes the vectors of [`Plan::texts`], in order: each committed message's vector
    /// (empty where none was made).
    pub fn settle(self, vectors: Vec<Vec<f32>>) -> Vec<Vec<f32>> {
        let mut vectors = vectors.into_iter();
        self.own
            .iter()
            .map(|e| match e {
                true => vectors.next().unwrap_or_default(),
                false => Vec::new(),
            })
            .collect()
    }
}

impl Meaning {
    /// `every_message` when anything retrieves by meaning, `every_reply` when replies
    /// are checked against stakes.
    pub fn new(every_message: bool, every_reply: bool) -> Self {
        Self {
            every_message,
            every_reply,
        }
    }

    /// What one commit's messages, in order, need embedded.
    pub fn plan(&self, messages: &[&Message]) -> Plan {
        Plan {
            own: messages
                .iter()
                .map(|m| self.every_message || (m.kind == MessageKind::Reply && self.every_reply))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: MessageKind, content: &str) -> Message {
        Message {
            seq: 0,
            state: "talk".into(),
            visit: 1,
            role: "Speaker".into(),
            name: "Ada".into(),
            content: content.into(),
            kind,
            decision: None,
        }
    }

    #[test]
    fn retrieval_and_stakes_embed_what_they_read() {
        let opening = message(MessageKind::Opening, "Welcome.");
        let reply = message(MessageKind::Reply, "Cars must go.");
        let plan = Meaning::new(true, false).plan(&[&opening, &reply]);
        assert_eq!(plan.texts(&[&opening, &reply]).len(), 2);
        let staked = Meaning::new(false, true);
        let plan = staked.plan(&[&opening, &reply]);
        assert_eq!(
            plan.texts(&[&opening, &reply]),
            vec!["Cars must go.".to_string()]
        );
        assert_eq!(plan.settle(vec![vec![1.0]]), vec![Vec::new(), vec![1.0]]);
        let plan = Meaning::new(false, false).plan(&[&opening, &reply]);
        assert!(plan.texts(&[&opening, &reply]).is_empty());
    }
}
