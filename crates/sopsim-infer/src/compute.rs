//! The one place that decides how many threads model work uses, and the lock that
//! makes the model workers (the chat model, the embedder) take turns on the cores.
//!
//! Model passes use every core. Two passes at once would make their thread pools fight
//! over the cores and both run several times slower, so passes take turns: a chat
//! model step (one forward over every sequence in flight) or an embedding batch holds
//! [`compute_lock`] while it runs, and the other slips in between.

use std::sync::{Mutex, MutexGuard, OnceLock};

/// Threads for model work: `SOPSIM_THREADS` if set to a positive number, else one per
/// core.
pub fn threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("SOPSIM_THREADS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// The thread pool the chat model's kernels run on ([`threads`] threads; idle threads
/// sleep rather than spin). `None` when no thread could be started (or one thread is
/// asked for): the work then runs on the caller's thread.
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        if threads() == 1 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads())
            .thread_name(|i| format!("sopsim-compute-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `work` on one of the pool's threads (or here, without a pool), so that the
/// tasks it spreads start without waking a thread from outside the pool each time.
pub fn install<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// Runs every task, spread over the pool when there is one.
pub fn run_all<T: FnOnce() + Send>(tasks: Vec<T>) {
    match pool() {
        Some(pool) if tasks.len() > 1 => pool.scope(|s| {
            for task in tasks {
                s.spawn(move |_| task());
            }
        }),
        _ => tasks.into_iter().for_each(|t| t()),
    }
}

/// Held by a model worker for each forward pass (see the module docs).
pub fn compute_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
