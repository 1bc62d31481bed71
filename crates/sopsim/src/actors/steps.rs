//! The Director's messages to itself: a run is a chain of `Step` (choose who speaks)
//! → `Play` (their turns) → `Transit` (apply the transition) → `Step`.

use actix::prelude::*;

use crate::sop::Transition;

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Step;

/// The next turns: one role's (with its visit's opening line, if it opens), or a
/// simultaneous round's.
#[derive(Message)]
#[rtype(result = "()")]
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

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Transit(pub(super) Transition);
