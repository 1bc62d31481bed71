//! An embedder made on its first use, so that a run that embeds nothing loads nothing.

use std::sync::{Arc, OnceLock};

use super::{EmbedError, Embedder};

type Make = Box<dyn Fn() -> Result<Arc<dyn Embedder>, EmbedError> + Send + Sync>;

/// Makes its embedder when the first texts come; every later call uses it. A failure
/// to make it is the answer to every call.
pub struct OnFirstUse {
    name: &'static str,
    dim: usize,
    make: Make,
    made: OnceLock<Result<Arc<dyn Embedder>, EmbedError>>,
}

impl OnFirstUse {
    /// An embedder named `name` of dimension `dim` that calls `make` on its first use.
    pub fn new(
        name: &'static str,
        dim: usize,
        make: impl Fn() -> Result<Arc<dyn Embedder>, EmbedError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            dim,
            make: Box::new(make),
            made: OnceLock::new(),
        }
    }
}

impl Embedder for OnFirstUse {
    fn name(&self) -> &str {
        self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.made.get_or_init(&self.make) {
            Ok(embedder) => embedder.embed(texts),
            Err(e) => Err(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_embedder_is_made_once_and_only_when_texts_come() {
        let made = Arc::new(AtomicUsize::new(0));
        let count = made.clone();
        let lazy = OnFirstUse::new("hash", 8, move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(super::super::HashEmbedder::default()))
        });
        assert_eq!(made.load(Ordering::SeqCst), 0);
        assert_eq!(lazy.embed(&["a", "b"]).unwrap().len(), 2);
        lazy.embed(&["c"]).unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failure_to_make_it_answers_every_call() {
        let lazy = OnFirstUse::new("broken", 8, || {
            Err(EmbedError::failed(
                "broken",
                std::io::Error::other("no weights"),
            ))
        });
        for _ in 0..2 {
            let e = lazy.embed(&["a"]).unwrap_err();
            assert!(e.to_string().contains("no weights"), "{e}");
        }
    }
}
