//! Pausing, stepping and stopping a run from outside it (a viewer's buttons, a test):
//! the caller keeps a [`RunControl`] and hands a clone to the run; the Director
//! receives each [`Control`] as an actor message and alone decides when the next turn
//! starts. [`Pacer`] is that decision, free of actors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

/// What a run can be told between turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// No new turn starts until `Resume` or `Step`; the turn in flight finishes.
    Pause,
    /// Lifts a pause so turns start again one after another.
    Resume,
    /// While paused: run exactly one more turn (a simultaneous round counts as one).
    Step,
    /// End the run at the next turn boundary (cancelling ends it at once).
    Stop,
}

/// A handle on one run's controls. Clones share the run.
#[derive(Debug, Clone)]
pub struct RunControl {
    tx: mpsc::UnboundedSender<Control>,
    rx: Arc<Mutex<Option<mpsc::UnboundedReceiver<Control>>>>,
    paused: Arc<AtomicBool>,
}

impl Default for RunControl {
    fn default() -> Self {
        Self::new()
    }
}

impl RunControl {
    /// A handle on a run that starts unpaused.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            tx,
            rx: Arc::new(Mutex::new(Some(rx))),
            paused: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A handle on a run that starts paused: nothing happens until `Step` or `Resume`.
    pub fn paused() -> Self {
        let control = Self::new();
        control.set_paused(true);
        control
    }

    /// Sends `control` to the run (kept until the run starts; dropped once it ended).
    pub fn send(&self, control: Control) {
        let _ = self.tx.send(control);
    }

    /// Whether the run is paused, as the Director last set it.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// The receiving end, for the one Director that runs; `None` once taken.
    pub(crate) fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<Control>> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }
}

/// When the next turn may start, given the controls received so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Pacer {
    paused: bool,
    /// Turns granted by `Step` while paused and not yet started.
    steps: u32,
    /// The run is waiting at a turn boundary for a control.
    parked: bool,
    stopped: bool,
}

/// What the Director does after a control arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Nothing: the run was not waiting.
    Nothing,
    /// Take the step it was waiting for (it may now stop, if told to).
    Continue,
}

impl Pacer {
    /// A pacer that starts paused or running.
    pub(crate) fn starting(paused: bool) -> Self {
        Self {
            paused,
            ..Self::default()
        }
    }

    pub(crate) fn paused(&self) -> bool {
        self.paused
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// At a turn boundary: whether the turn may start now. If not, the run waits
    /// until [`Pacer::receive`] says `Continue`.
    pub(crate) fn may_start_turn(&mut self) -> bool {
        if self.stopped || !self.paused {
            return true;
        }
        if self.steps > 0 {
            self.steps -= 1;
            return true;
        }
        self.parked = true;
        false
    }

    /// Takes a control; says whether a waiting run should go on.
    pub(crate) fn receive(&mut self, control: Control) -> Wake {
        match control {
            Control::Pause => self.paused = true,
            Control::Resume => self.paused = false,
            Control::Step if self.paused => self.steps = self.steps.saturating_add(1),
            Control::Step => {}
            Control::Stop => self.stopped = true,
        }
        if self.parked && (self.stopped || !self.paused || self.steps > 0) {
            self.parked = false;
            Wake::Continue
        } else {
            Wake::Nothing
        }
    }

    /// Whether the run waits at a turn boundary (it checks for cancellation now and then).
    pub(crate) fn parked(&self) -> bool {
        self.parked
    }

    /// Cancellation reached a waiting run: it goes on to end.
    pub(crate) fn unpark(&mut self) {
        self.parked = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_run_waits_and_each_step_grants_one_turn() {
        let mut p = Pacer::default();
        assert!(p.may_start_turn());
        assert_eq!(p.receive(Control::Pause), Wake::Nothing);
        assert!(!p.may_start_turn(), "paused at the boundary");
        assert_eq!(p.receive(Control::Step), Wake::Continue);
        assert!(p.may_start_turn(), "the granted turn");
        assert!(!p.may_start_turn(), "and only one");
        assert_eq!(p.receive(Control::Resume), Wake::Continue);
        assert!(p.may_start_turn());
    }

    #[test]
    fn steps_sent_ahead_are_kept_and_stop_ends_a_paused_run() {
        let mut p = Pacer::default();
        p.receive(Control::Pause);
        p.receive(Control::Step);
        p.receive(Control::Step);
        assert!(p.may_start_turn() && p.may_start_turn());
        assert!(!p.may_start_turn());
        assert_eq!(p.receive(Control::Stop), Wake::Continue);
        assert!(p.stopped() && p.may_start_turn());
    }

    #[test]
    fn a_step_while_running_changes_nothing() {
        let mut p = Pacer::default();
        assert_eq!(p.receive(Control::Step), Wake::Nothing);
        p.receive(Control::Pause);
        assert!(!p.may_start_turn());
    }
}
