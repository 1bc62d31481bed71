//! The Director's messages to itself: a run is a chain of `Step` (choose who speaks)
//! → `Play` (their turns) → `Transit` (apply the transition) → `Step`.

use sopsim_core::sop::Transition;

pub(super) struct Step;

/// The next turns: one role's (with its visit's opening line, if it opens), or a
/// simultaneous round's.
pub(super) struct Play {
    pub(super) roles: Vec<String>,
    pub(super) opening: Option<String>,
    pub(super) simultaneous: bool,
}

impl Play {
    pub(super) fn one(role: String, opening: Option<String>) -> Self {
        Self {
            roles: vec![role],
            opening,
            simultaneous: false,
        }
    }
}

pub(super) struct Transit(pub(super) Transition);

answered_with! {
    Step => ();
    Play => ();
    Transit => ();
}
