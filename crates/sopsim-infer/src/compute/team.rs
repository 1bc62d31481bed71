//! The compute team: helper threads that wait for work by spinning, so that spreading
//! a product over the cores costs a cache line's trip rather than a thread's wake-up.
//!
//! A decode step runs about 170 small products one after another, each a few hundred
//! microseconds of reading weights. A pool whose idle threads sleep (rayon's) pays a
//! futex wake-up of 15–35 µs per product: a tenth of the step. The team's helpers spin
//! for [`SPIN_FOR`] after each job before they park, so back-to-back jobs find them
//! awake, and a program that stops computing stops spending CPU soon after.
//!
//! One job at a time: the caller publishes it, takes pieces like any helper, and
//! returns once every piece is done and no helper can still read the job. A caller
//! that finds the team busy (another thread's job, or a piece that spreads work of its
//! own) runs its pieces itself.
//!
//! The job's protocol, with every step sequentially consistent:
//! - the caller writes the job while it is closed and no helper is inside, then opens
//!   it and moves the epoch on;
//! - a helper that sees a new epoch counts itself in (`inside`), and reads the job
//!   only if it is still open;
//! - the caller, after the last piece, closes the job and waits until nobody is inside.
//!
//! So a helper that read "open" was counted in before the caller closed it, and the
//! caller waits for it: the job (which borrows the caller's stack) outlives every read.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

/// How long a helper keeps spinning after a job before it parks.
const SPIN_FOR: Duration = Duration::from_micros(200);

/// A job's work, its borrow's lifetime erased while it is published.
type Work = dyn Fn(usize) + Sync + 'static;

const NOTHING: &Work = &|_| {};

struct Job {
    work: *const Work,
    pieces: usize,
}

struct Shared {
    epoch: AtomicU64,
    open: AtomicBool,
    inside: AtomicUsize,
    /// Written only by the caller holding the team, while the job is closed and
    /// nobody is inside (see the module docs).
    job: UnsafeCell<Job>,
    next: AtomicUsize,
    unfinished: AtomicUsize,
    /// One flag per helper: set while it is parked (or about to park).
    parked: Vec<AtomicBool>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `job` is read and written only under the protocol in the module docs; the
// work it points to is `Sync`.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

pub(super) struct Team {
    shared: Arc<Shared>,
    helpers: Vec<Thread>,
    busy: Mutex<()>,
}

impl Team {
    /// A team of the caller and `helpers` threads. Helpers that cannot be started are
    /// left out.
    pub(super) fn new(helpers: usize) -> Team {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            open: AtomicBool::new(false),
            inside: AtomicUsize::new(0),
            job: UnsafeCell::new(Job {
                work: NOTHING,
                pieces: 0,
            }),
            next: AtomicUsize::new(0),
            unfinished: AtomicUsize::new(0),
            parked: (0..helpers).map(|_| AtomicBool::new(false)).collect(),
            panic: Mutex::new(None),
        });
        let helpers = (0..helpers)
            .filter_map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("sopsim-compute-{i}"))
                    .spawn(move || help(&shared, i))
                    .ok()
                    .map(|h| h.thread().clone())
            })
            .collect();
        Team {
            shared,
            helpers,
            busy: Mutex::new(()),
        }
    }

    /// Calls `work(i)` for every `i` in `0..pieces`, on the caller and the helpers,
    /// and returns when all are done. A panic in a piece is raised here once every
    /// other piece has finished.
    pub(super) fn run(&self, pieces: usize, work: &(dyn Fn(usize) + Sync)) {
        let guard = match self.busy.try_lock() {
            Ok(guard) if pieces > 1 && !self.helpers.is_empty() => guard,
            _ => return (0..pieces).for_each(work),
        };
        let s = &*self.shared;
        // SAFETY: the job is closed and nobody is inside (the last `run` waited for
        // that before it returned), and `busy` keeps other callers out. The lifetime
        // is erased only while this call waits for every reader.
        unsafe {
            *s.job.get() = Job {
                work: std::mem::transmute::<&(dyn Fn(usize) + Sync), &Work>(work),
                pieces,
            };
        }
        s.next.store(0, SeqCst);
        s.unfinished.store(pieces, SeqCst);
        s.open.store(true, SeqCst);
        s.epoch.fetch_add(1, SeqCst);
        for (helper, parked) in self.helpers.iter().zip(&s.parked) {
            if parked.load(SeqCst) {
                helper.unpark();
            }
        }
        take_pieces(s, work, pieces);
        let backoff = Backoff::new();
        while s.unfinished.load(SeqCst) > 0 {
            backoff.snooze();
        }
        s.open.store(false, SeqCst);
        let backoff = Backoff::new();
        while s.inside.load(SeqCst) > 0 {
            backoff.snooze();
        }
        let panic = s.panic.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(guard);
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }
}

/// Takes pieces until none is left, keeping the first panic for the caller.
fn take_pieces(s: &Shared, work: &(dyn Fn(usize) + Sync), pieces: usize) {
    loop {
        let i = s.next.fetch_add(1, SeqCst);
        if i >= pieces {
            return;
        }
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| work(i))) {
            s.panic
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(payload);
        }
        s.unfinished.fetch_sub(1, SeqCst);
    }
}

/// Helper `me`'s life: wait for a new epoch, join the job if it is still open.
fn help(s: &Shared, me: usize) {
    let mut seen = 0;
    loop {
        seen = wait_for_epoch(s, me, seen);
        s.inside.fetch_add(1, SeqCst);
        if s.open.load(SeqCst) {
            // SAFETY: counted in while the job was open, so the caller waits for this
            // helper before the job or its work goes away.
            let job = unsafe { &*s.job.get() };
            take_pieces(s, unsafe { &*job.work }, job.pieces);
        }
        s.inside.fetch_sub(1, SeqCst);
    }
}

/// Spins until the epoch moves past `seen` (parking after [`SPIN_FOR`]), and returns
/// the new epoch.
fn wait_for_epoch(s: &Shared, me: usize, seen: u64) -> u64 {
    let mut since = Instant::now();
    let mut spins = 0u32;
    loop {
        let epoch = s.epoch.load(SeqCst);
        if epoch != seen {
            return epoch;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(256) && since.elapsed() > SPIN_FOR {
            s.parked[me].store(true, SeqCst);
            // The caller moves the epoch before it reads the flag, so either this
            // sees the new epoch or the caller sees the flag and unparks.
            if s.epoch.load(SeqCst) == seen {
                std::thread::park();
            }
            s.parked[me].store(false, SeqCst);
            since = Instant::now();
        } else {
            std::hint::spin_loop();
        }
    }
}
