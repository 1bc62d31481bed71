//! How a command fails: the message the user sees (with the flag at fault, where one
//! is) and the exit code: 2 for bad input, 1 for a failure while running, 130 when
//! interrupted.

use std::process::ExitCode;

use sopsim::bench::BenchError;
use sopsim::error::{chain, SimError};
use sopsim::runner::RunError;
use sopsim::setup::{Setting, SetupError};

/// A command's failure, ready to print.
#[derive(Debug)]
pub enum Failure {
    /// The user's input is at fault: exit 2.
    BadInput(String),
    /// Something failed while running: exit 1.
    Runtime(String),
    /// Ctrl-C stopped it: exit 130.
    Interrupted(String),
}

impl Failure {
    pub fn runtime(e: &dyn std::error::Error) -> Self {
        Failure::Runtime(chain(e))
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Failure::BadInput(_) => 2,
            Failure::Runtime(_) => 1,
            Failure::Interrupted(_) => 130,
        })
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::BadInput(m) | Failure::Runtime(m) | Failure::Interrupted(m) => m,
        }
    }
}

/// The command-line spelling of a library setting.
pub fn flag(setting: Setting) -> Option<&'static str> {
    Some(match setting {
        // The scenario errors name the file and the field already.
        Setting::Scenario => return None,
        Setting::Model => "--model",
        Setting::BaseUrl => "--base-url",
        Setting::Embedder => "--embedder",
        Setting::EmbedderModel => "--embedder-model",
        Setting::Prices => "--prices",
        Setting::Record => "--record",
        Setting::Replay => "--replay",
        Setting::Out => "--out",
        Setting::Seeds => "--seeds",
        Setting::Jobs => "--jobs",
    })
}

fn classify(bad_input: bool, setting: Option<Setting>, error: &dyn std::error::Error) -> Failure {
    let text = match setting.and_then(flag) {
        Some(flag) => format!("{flag} {}", chain(error)),
        None => chain(error),
    };
    if bad_input {
        Failure::BadInput(text)
    } else {
        Failure::Runtime(text)
    }
}

impl From<SetupError> for Failure {
    fn from(e: SetupError) -> Self {
        classify(e.is_bad_input(), e.setting(), &e)
    }
}

impl From<SimError> for Failure {
    fn from(e: SimError) -> Self {
        match &e {
            SimError::UnknownHuman { name, known } => {
                Failure::BadInput(format!("--human {name:?}: no such agent (agents: {known})"))
            }
            _ => classify(e.is_bad_input(), None, &e),
        }
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Setup(e) => e.into(),
            RunError::Sim(e) => e.into(),
            e @ RunError::Failed { .. } => Failure::runtime(&e),
        }
    }
}

impl From<BenchError> for Failure {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Setup(e) => e.into(),
            e => classify(e.is_bad_input(), e.setting(), &e),
        }
    }
}

impl From<sopsim::models::ModelError> for Failure {
    fn from(e: sopsim::models::ModelError) -> Self {
        SetupError::from(e).into()
    }
}
