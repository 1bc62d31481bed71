//! The Environment actor: each message embedded exactly once. (Tool returns landing in
//! the Elysia store are the actor's own unit test.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::common::*;
use sopsim::embed::{EmbedError, EmbedService, Embedder, HashEmbedder};
use sopsim::llm::Estimator;
use sopsim::llm::ScriptedBackend;
use sopsim::simulation::Services;
use sopsim::RunIo;

/// A model-like embedder (runs on the worker pool) that counts the texts it embeds.
struct Counting {
    texts: AtomicUsize,
    inner: HashEmbedder,
}

impl Embedder for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

#[test]
fn each_message_is_embedded_exactly_once() {
    let s = example("debate");
    let counting = Arc::new(Counting {
        texts: AtomicUsize::new(0),
        inner: HashEmbedder::default(),
    });
    let services = Services {
        llm: Arc::new(ScriptedBackend::new(s.script.clone())),
        embed: EmbedService::start(counting.clone(), 1, 32).unwrap(),
        counter: Arc::new(Estimator),
        prices: Default::default(),
    };
    let outcome = run_on(s, &services, |o| o, RunIo::default()).unwrap();
    assert_eq!(
        counting.texts.load(Ordering::SeqCst) as u64,
        outcome.summary.turns
    );
    assert_eq!(outcome.summary.embedder, "counting");
}
