//! The one place that decides how many threads model work uses, spreads that work
//! over them (`team`), and holds the lock that makes the model workers (the chat
//! model, the embedder) take turns on the cores.
//!
//! Model passes use every core. Two passes at once would make their thread pools fight
//! over the cores and both run several times slower, so passes take turns: a chat
//! model step (one forward over every sequence in flight) or an embedding batch holds
//! [`compute_lock`] while it runs, and the other slips in between.

use std::sync::{Mutex, MutexGuard, OnceLock};

use team::Team;

mod team;

static THREADS: OnceLock<usize> = OnceLock::new();

/// Threads for model work: what the program set with [`set_threads`] before any model
/// work, else one per core.
pub fn threads() -> usize {
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Sets how many threads model work uses (at least one), before any model work; once
/// model work has started, the count stays and `false` is returned. The program's
/// edge decides (the command line reads `SOPSIM_THREADS`).
pub fn set_threads(n: usize) -> bool {
    THREADS.set(n.max(1)).is_ok()
}

/// The rayon pool the sentence encoder's float products (`gemm`) run on ([`threads`]
/// threads; idle threads sleep). `None` when no thread could be started (or one thread
/// is asked for).
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        if threads() == 1 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads())
            .thread_name(|i| format!("sopsim-gemm-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs every task, spread over the caller and the compute team's helpers.
pub fn run_all<T: FnOnce() + Send>(tasks: Vec<T>) {
    static TEAM: OnceLock<Team> = OnceLock::new();
    if tasks.len() < 2 || threads() == 1 {
        return tasks.into_iter().for_each(|t| t());
    }
    let slots: Vec<TaskSlot<T>> = tasks
        .into_iter()
        .map(|t| TaskSlot(Mutex::new(Some(t))))
        .collect();
    let team = TEAM.get_or_init(|| Team::new(threads() - 1));
    team.run(slots.len(), &|i| {
        let task = slots[i].0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            task()
        }
    });
}

/// One task, taken by whichever thread claims its index (each index is claimed once,
/// so its lock is never contended).
struct TaskSlot<T>(Mutex<Option<T>>);

/// Held by a model worker for each forward pass (see the module docs).
pub fn compute_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
