//! Which committed messages are embedded, and the paraphrase verdict on each reply.
//!
//! An embedding costs a MiniLM forward pass, so a message is embedded only when
//! something reads its vector: retrieval and knowledge lookups (every message), the
//! stake check (every reply), or the paraphrase check, whose [`ParaphraseScreen`] picks
//! the few replies that share their words with an earlier message, and those messages.
//! The caller embeds what [`Meaning::plan`] lists, in one batch, and hands the vectors
//! back to [`Meaning::settle`].

use std::sync::Arc;

use super::paraphrase::{ParaphraseScreen, Suspect};
use crate::memory::{Message, MessageKind};

/// What a run's committed messages are embedded for.
#[derive(Debug, Clone)]
pub struct Meaning {
    /// Every message, for retrieval or a knowledge lookup.
    every_message: bool,
    /// Every reply, for the stake check.
    every_reply: bool,
    screen: Option<ParaphraseScreen>,
}

/// The embeddings one commit needs.
#[derive(Debug)]
pub struct Plan {
    /// Each committed message's place in the screen, when the screen keeps it.
    ids: Vec<Option<u64>>,
    suspects: Vec<Option<Suspect>>,
    /// Whether each committed message is embedded.
    own: Vec<bool>,
    /// Earlier messages a suspect is compared with, still to be embedded.
    earlier: Vec<(u64, Arc<str>)>,
}

impl Plan {
    /// The texts to embed, in the order [`Meaning::settle`] takes their vectors.
    pub fn texts(&self, messages: &[&Message]) -> Vec<String> {
        let own = messages
            .iter()
            .zip(&self.own)
            .filter(|(_, e)| **e)
            .map(|(m, _)| m.content.clone());
        own.chain(self.earlier.iter().map(|(_, t)| t.to_string()))
            .collect()
    }
}

impl Meaning {
    /// `every_message` when anything retrieves by meaning, `every_reply` when replies
    /// are checked against stakes, `paraphrases` when they are counted.
    pub fn new(every_message: bool, every_reply: bool, paraphrases: bool) -> Self {
        Self {
            every_message,
            every_reply,
            screen: paraphrases.then(ParaphraseScreen::default),
        }
    }

    /// Whether any message may need an embedding.
    pub fn embeds(&self) -> bool {
        self.every_message || self.every_reply || self.screen.is_some()
    }

    /// Takes in one commit's messages, in order: what must be embedded.
    pub fn plan(&mut self, messages: &[&Message]) -> Plan {
        let mut plan = Plan {
            ids: Vec::with_capacity(messages.len()),
            suspects: Vec::with_capacity(messages.len()),
            own: Vec::with_capacity(messages.len()),
            earlier: Vec::new(),
        };
        for m in messages {
            let reply = m.kind == MessageKind::Reply;
            let (id, suspect) = match &mut self.screen {
                Some(screen) if !m.kind.is_tool() => {
                    let (id, suspect) = screen.add(&m.content, reply);
                    (Some(id), suspect)
                }
                _ => (None, None),
            };
            plan.own
                .push(self.every_message || (reply && self.every_reply) || suspect.is_some());
            plan.ids.push(id);
            plan.suspects.push(suspect);
        }
        if let Some(screen) = &self.screen {
            // This commit's own messages are embedded above when they are suspects;
            // an earlier message of the same commit is embedded here.
            let own: Vec<u64> = plan
                .ids
                .iter()
                .zip(&plan.own)
                .filter_map(|(id, e)| id.filter(|_| *e))
                .collect();
            plan.earlier = screen
                .unembedded(plan.suspects.iter().flatten())
                .into_iter()
                .filter(|(id, _)| !own.contains(id))
                .collect();
        }
        plan
    }

    /// Takes the vectors of `plan.texts()`, in order: each committed message's vector
    /// (empty where none was made) and whether each restates an earlier message.
    pub fn settle(&mut self, plan: Plan, vectors: Vec<Vec<f32>>) -> (Vec<Vec<f32>>, Vec<bool>) {
        let mut vectors = vectors.into_iter();
        let own: Vec<Vec<f32>> = plan
            .own
            .iter()
            .map(|e| match e {
                true => vectors.next().unwrap_or_default(),
                false => Vec::new(),
            })
            .collect();
        let Some(screen) = &mut self.screen else {
            return (own, vec![false; plan.ids.len()]);
        };
        for (id, v) in plan.ids.iter().zip(&own) {
            if let Some(id) = id.filter(|_| !v.is_empty()) {
                screen.embedded(id, v.as_slice().into());
            }
        }
        for ((id, _), v) in plan.earlier.iter().zip(vectors) {
            screen.embedded(*id, v.into());
        }
        let restates = plan
            .suspects
            .iter()
            .map(|s| s.as_ref().is_some_and(|s| screen.restates(s)))
            .collect();
        (own, restates)
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
    fn only_a_suspect_and_what_it_may_restate_are_embedded() {
        let mut meaning = Meaning::new(false, false, true);
        let said = message(
            MessageKind::Opening,
            "The car park becomes a safe park for children.",
        );
        let plan = meaning.plan(&[&said]);
        assert!(plan.texts(&[&said]).is_empty(), "nothing to compare yet");
        let (vectors, restates) = meaning.settle(plan, Vec::new());
        assert_eq!((vectors, restates), (vec![Vec::new()], vec![false]));

        let other = message(MessageKind::Reply, "Buses on Sunday are my worry.");
        let again = message(
            MessageKind::Reply,
            "A safe park for children instead of the car park.",
        );
        let plan = meaning.plan(&[&other, &again]);
        assert_eq!(
            plan.texts(&[&other, &again]),
            vec![again.content.clone(), said.content.clone()],
            "the suspect first, then the earlier message it shares words with"
        );
        let (vectors, restates) = meaning.settle(plan, vec![vec![0.6, 0.8], vec![0.8, 0.6]]);
        assert_eq!(vectors, vec![Vec::new(), vec![0.6, 0.8]]);
        assert_eq!(restates, vec![false, true], "cosine 0.96");

        let third = message(
            MessageKind::Reply,
            "Children need the safe park, not the car park.",
        );
        let plan = meaning.plan(&[&third]);
        assert_eq!(
            plan.texts(&[&third]),
            vec![third.content.clone()],
            "earlier messages are embedded once"
        );
        let (_, restates) = meaning.settle(plan, vec![vec![0.0, -1.0]]);
        assert_eq!(restates, vec![false]);
    }

    #[test]
    fn retrieval_and_stakes_embed_what_they_read() {
        let opening = message(MessageKind::Opening, "Welcome.");
        let reply = message(MessageKind::Reply, "Cars must go.");
        let plan = Meaning::new(true, false, false).plan(&[&opening, &reply]);
        assert_eq!(plan.texts(&[&opening, &reply]).len(), 2);
        let mut staked = Meaning::new(false, true, false);
        let plan = staked.plan(&[&opening, &reply]);
        assert_eq!(
            plan.texts(&[&opening, &reply]),
            vec!["Cars must go.".to_string()]
        );
        let (vectors, restates) = staked.settle(plan, vec![vec![1.0]]);
        assert_eq!(
            (vectors, restates),
            (vec![Vec::new(), vec![1.0]], vec![false, false])
        );
        assert!(!Meaning::new(false, false, false).embeds());
    }
}
