//! The embedding service shared by every simulation in a process.
//!
//! Model embedders run on dedicated worker threads that drain the request queue into
//! batches, so an actor only awaits a reply and never runs a forward pass. Embedders
//! that declare themselves cheap (the hash embedder) run inline: the thread hop would
//! cost more than the work.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use tokio::sync::oneshot;

use super::{EmbedError, Embedder};

type Reply = oneshot::Sender<Result<Vec<f32>, EmbedError>>;

struct Job {
    text: String,
    reply: Reply,
}

/// Embeds texts for any number of simulations; clone it freely.
#[derive(Clone)]
pub struct EmbedService {
    embedder: Arc<dyn Embedder>,
    queue: Option<mpsc::Sender<Job>>,
}

impl EmbedService {
    /// An embedder that runs on the caller's thread, which suits the cheap ones: the
    /// thread hop would cost more than the work.
    pub fn inline(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            embedder,
            queue: None,
        }
    }

    /// Starts `workers` threads (for model embedders) that batch up to `max_batch` texts;
    /// a cheap embedder runs [`inline`](Self::inline). Fails when the system refuses a
    /// thread (the threads already started then stop).
    pub fn start(
        embedder: Arc<dyn Embedder>,
        workers: usize,
        max_batch: usize,
    ) -> Result<Self, EmbedError> {
        if embedder.is_cheap() {
            return Ok(Self::inline(embedder));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..workers.max(1) {
            let rx = rx.clone();
            let worker_embedder = embedder.clone();
            let max_batch = max_batch.max(1);
            thread::Builder::new()
                .name(format!("sopsim-embed-{i}"))
                .spawn(move || worker(worker_embedder, rx, max_batch))
                .map_err(|e| EmbedError::failed(embedder.name(), e))?;
        }
        Ok(Self {
            embedder,
            queue: Some(tx),
        })
    }

    /// The name of the embedder behind the service.
    pub fn name(&self) -> &str {
        self.embedder.name()
    }

    /// The embedding of one text.
    pub async fn embed(&self, text: String) -> Result<Vec<f32>, EmbedError> {
        let Some(queue) = &self.queue else {
            return self
                .embedder
                .embed(&[&text])?
                .pop()
                .ok_or(EmbedError::Closed);
        };
        let (reply, rx) = oneshot::channel();
        queue
            .send(Job { text, reply })
            .map_err(|_| EmbedError::Closed)?;
        rx.await.map_err(|_| EmbedError::Closed)?
    }
}

fn worker(
    embedder: Arc<dyn Embedder>,
    rx: Arc<std::sync::Mutex<mpsc::Receiver<Job>>>,
    max_batch: usize,
) {
    loop {
        let batch = {
            let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
            let Ok(first) = rx.recv() else { return };
            let mut batch = vec![first];
            while batch.len() < max_batch {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        let texts: Vec<&str> = batch.iter().map(|j| j.text.as_str()).collect();
        match embedder.embed(&texts) {
            Ok(vectors) => {
                for (job, v) in batch.into_iter().zip(vectors) {
                    let _ = job.reply.send(Ok(v));
                }
            }
            Err(e) => {
                for job in batch {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A model-like embedder that records batch sizes and is not cheap.
    struct Counting {
        batches: Mutex<Vec<usize>>,
        calls: AtomicUsize,
    }
    use std::sync::Mutex;

    impl Embedder for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn dim(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.batches.lock().unwrap().push(texts.len());
            std::thread::sleep(std::time::Duration::from_millis(5));
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[test]
    fn concurrent_requests_are_batched_off_the_caller_thread() {
        let e = Arc::new(Counting {
            batches: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
        });
        let svc = EmbedService::start(e.clone(), 1, 64).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let results = rt.block_on(futures::future::join_all(
            (0..50).map(|i| svc.embed("x".repeat(i))),
        ));
        for (i, r) in results.into_iter().enumerate() {
            assert_eq!(r.unwrap(), vec![i as f32, 1.0]);
        }
        let batches = e.batches.lock().unwrap();
        assert_eq!(batches.iter().sum::<usize>(), 50);
        assert!(batches.len() < 50, "requests were batched: {batches:?}");
    }
}
