//! How a command fails: the message the user sees (with the flag at fault, where one
//! is) and the exit code: 2 for bad input, 1 for a failure while running, 128 + the
//! signal's number when a stop signal ended it (130 for Ctrl-C, 143 for SIGTERM).

use std::process::ExitCode;

use sopsim::error::chain;
use sopsim::error::SimError;
use sopsim::models::ModelError;
use sopsim::runner::OutFolderError;
use sopsim::runner::RunError;
use sopsim::setup::{Setting, SetupError};
use sopsim_bench::merge::ShardFolderError;
use sopsim_bench::BenchError;

/// A command's failure, ready to print.
#[derive(Debug)]
pub(super) enum Failure {
    /// The user's input is at fault: exit 2.
    BadInput(String),
    /// Something failed while running: exit 1.
    Runtime(String),
    /// A stop signal ended it: exit with the status given (see [`super::signals`]).
    Interrupted(String, u8),
}

impl Failure {
    pub(super) fn runtime(e: &(dyn std::error::Error + 'static)) -> Self {
        Failure::Runtime(describe(e))
    }

    pub(super) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Failure::BadInput(_) => 2,
            Failure::Runtime(_) => 1,
            Failure::Interrupted(_, status) => *status,
        })
    }

    pub(super) fn message(&self) -> &str {
        match self {
            Failure::BadInput(m) | Failure::Runtime(m) | Failure::Interrupted(m, _) => m,
        }
    }
}

/// The command-line spelling of a library setting.
pub(super) fn flag(setting: Setting) -> Option<&'static str> {
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
        Setting::Modes => "--modes",
        Setting::MaxTurns => "--max-turns",
        Setting::DraftModel => "--draft-model",
        Setting::Reference => "--reference",
    })
}

/// What the user can do about an error, in the command line's terms: the library's
/// errors name no commands or flags. Said after the innermost cause, which it is about.
fn hint(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        // A setup error shows a fetch's error transparently, so it is not a cause.
        let fetch = match e.downcast_ref() {
            Some(SetupError::Fetch(m)) => Some(m),
            _ => e.downcast_ref::<ModelError>(),
        };
        if let Some(ModelError::Checksum { .. }) = fetch {
            return Some(" (run `sopsim models fetch` again)");
        }
        if let Some(ShardFolderError::NotAShard) = e.downcast_ref() {
            return Some(" (run with --shard)");
        }
        match e.downcast_ref() {
            Some(OutFolderError::HoldsARun(_)) => {
                return Some(
                    " (pass --resume to continue it, --overwrite to replace it, or choose another --out)",
                )
            }
            Some(OutFolderError::NoRun) => return Some(" (run without --resume to start one)"),
            _ => {}
        }
        if let Some(SetupError::TooBig { runs: 2.., .. }) = e.downcast_ref() {
            return Some(" (--jobs sets how many run at once)");
        }
        cause = e.source();
    }
    None
}

/// An error with its causes and, where there is one, the hint.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    chain(error) + hint(error).unwrap_or_default()
}

fn classify(
    bad_input: bool,
    setting: Option<Setting>,
    error: &(dyn std::error::Error + 'static),
) -> Failure {
    let text = match setting.and_then(flag) {
        Some(flag) => format!("{flag} {}", describe(error)),
        None => describe(error),
    };
    if bad_input {
        Failure::BadInput(text)
    } else {
        Failure::Runtime(text)
    }
}

impl From<SetupError> for Failure {
    fn from(e: SetupError) -> Self {
        if let SetupError::NotAllowed { path, refused } = &e {
            return Failure::BadInput(format!(
                "{}: {refused}; a scenario file starts no program unless you allow it: \
                 add --allow-command {} (or --allow-mcp for every MCP server it names)",
                path.display(),
                shlex::try_quote(&refused.0.program).unwrap_or_default()
            ));
        }
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
            RunError::Setup(e) => (*e).into(),
            RunError::Sim(e) => e.into(),
            e @ (RunError::Failed { .. } | RunError::ResumeStopped { .. }) => {
                classify(e.is_bad_input(), None, &e)
            }
        }
    }
}

impl From<sopsim::InterviewError> for Failure {
    fn from(e: sopsim::InterviewError) -> Self {
        match e {
            sopsim::InterviewError::Setup(e) => e.into(),
            e => classify(e.is_bad_input(), None, &e),
        }
    }
}

impl From<sopsim::JudgeError> for Failure {
    fn from(e: sopsim::JudgeError) -> Self {
        match e {
            sopsim::JudgeError::Setup(e) => (*e).into(),
            e => classify(e.is_bad_input(), None, &e),
        }
    }
}

impl From<BenchError> for Failure {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Setup(e) => e.into(),
            BenchError::MissingRuns { count, of, ids } => Failure::Runtime(format!(
                "{count} of {of} planned runs are in no shard (run their shards again, or merge with --allow-missing): {}",
                ids.join(", ")
            )),
            e => classify(e.is_bad_input(), e.setting(), &e),
        }
    }
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Self {
        SetupError::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_adds_its_hints_to_the_librarys_messages() {
        let damaged = ModelError::Checksum {
            what: "model.gguf of qwen05".into(),
            expected: "ab".into(),
            actual: "cd".into(),
        };
        assert_eq!(
            Failure::from(damaged).message(),
            "model.gguf of qwen05: SHA-256 is cd, expected ab; the download is damaged or \
             not the expected release (run `sopsim models fetch` again)"
        );
        let whole = BenchError::ShardFolder {
            path: "out".into(),
            source: ShardFolderError::NotAShard,
        };
        let failure = Failure::from(whole);
        assert_eq!(
            failure.message(),
            "out: a whole benchmark, not a shard (run with --shard)"
        );
        assert!(matches!(failure, Failure::BadInput(_)));
        let missing = BenchError::MissingRuns {
            count: 1,
            of: 4,
            ids: vec!["pd/cooperative/seed-3".into()],
        };
        let failure = Failure::from(missing);
        assert_eq!(
            failure.message(),
            "1 of 4 planned runs are in no shard (run their shards again, or merge with \
             --allow-missing): pd/cooperative/seed-3"
        );
        assert!(matches!(failure, Failure::Runtime(_)));
    }
}
