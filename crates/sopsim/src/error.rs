//! Errors of a running simulation and the cancellation token that stops one. Error
//! chains are written by [`chain`] (from the leaf module `error_chain`, re-exported here).

use thiserror::Error;

use crate::embed::EmbedError;
pub use sopsim_core::error_chain::chain;
pub use sopsim_llm::CancelToken;

/// Why a simulation could not start or went wrong while running.
#[derive(Debug, Error)]
pub enum SimError {
    /// A model call failed.
    #[error(transparent)]
    Llm(#[from] crate::llm::CallError),
    /// Texts could not be embedded.
    #[error("embedding failed")]
    Embed(#[from] EmbedError),
    /// A message to an actor could not be delivered or answered.
    #[error("an actor stopped unexpectedly")]
    Mailbox(#[from] actix::MailboxError),
    /// A file, or a tool's recording, could not be read or written.
    #[error("writing {what}")]
    Io {
        /// What was being read or written (mostly a file's path).
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the run's folder could not be opened, read or written.
    #[error(transparent)]
    File(#[from] crate::output_folder::FolderFileError),
    /// A knowledge base could not be loaded.
    #[error("the knowledge base {path}")]
    Knowledge {
        /// The knowledge base's path, as the lookup gives it.
        path: String,
        /// Why it could not be loaded.
        #[source]
        source: crate::knowledge::KnowledgeError,
    },
    /// A person was asked to play a name that is not one of the scenario's agents.
    #[error(
        "{name:?} is not an agent of this scenario (agents: {known}), so no person can play it"
    )]
    UnknownHuman {
        /// The name given for a person to play.
        name: String,
        /// The scenario's agent names, comma-separated.
        known: String,
    },
    /// An agent is played by a person, but the run has no input for people.
    #[error("a person plays {agent:?}, but the run was given no input for people")]
    NoHumanInput {
        /// An agent played by a person.
        agent: String,
    },
    /// No agent is seated in a role that a state needs.
    #[error("no agent plays role {role:?} in state {state:?}")]
    NoAgent {
        /// The state that needs the role.
        state: String,
        /// The role nobody plays.
        role: String,
    },
    /// The population's network could not be built.
    #[error("the population's network")]
    Network(#[source] sopsim_core::network::NetworkError),
    /// The scenario's tools could not be set up.
    #[error("the scenario's tools")]
    Tools(#[source] Box<crate::tools::ToolSetupError>),
    /// A resumed run said something else than the killed run's transcript at `line`.
    #[error("{path}, line {line}: the resumed run does not say what this line says (was the run made by another version of sopsim?)")]
    ResumeDiverged {
        /// The path of the killed run's file.
        path: String,
        /// The 1-based line number where the runs differ.
        line: u64,
    },
    /// A resumed run ended before it reached the end of the killed run's transcript.
    #[error(
        "the resumed run ended {left} line(s) before the end of {path} (was it given fewer turns?)"
    )]
    ResumeEnded {
        /// The path of the killed run's file.
        path: String,
        /// How many of its lines the resumed run did not say.
        left: u64,
    },
    /// A resumed run ended otherwise (interrupted, its people's input closed) before it
    /// had said all of the killed run's lines again.
    #[error("the resumed run ended ({ended_by}) before it had said every line of {path} again")]
    ResumeUnfinished {
        /// The path of the killed run's transcript.
        path: String,
        /// How the resumed run ended (the `ended_by` of the summary).
        ended_by: &'static str,
    },
    /// A resumed run reached its turn limit before the end of the killed run's
    /// transcript: the limit can only be raised on a resume.
    #[error(
        "the resumed run reached its turn limit ({max_turns}) {left} line(s) before the end of \
         {path}: a resumed run's turn limit can only be raised"
    )]
    ResumeBelowLimit {
        /// The path of the killed run's file.
        path: String,
        /// How many of its lines the resumed run did not say.
        left: u64,
        /// The resumed run's turn limit.
        max_turns: u64,
    },
    /// A world variable that cannot stand (not a number, out of bounds), or a
    /// condition or strategy formula that fails; the error names it and the round.
    #[error(transparent)]
    World(#[from] sopsim_core::world::WorldError),
    /// The judge's rubric could not be read.
    #[error("the judge")]
    Judge(#[source] Box<crate::scenario::judge::RubricError>),
    /// The run was stopped while its world's round was updated; the world is as it
    /// was before the round.
    #[error("stopped while the world's round was updated")]
    Stopped,
    /// The actors broke one of their own rules (a bug, reported rather than a panic).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl From<crate::tools::ToolSetupError> for SimError {
    /// Boxed: the setting's path and cause would make every result carrying a
    /// `SimError` large.
    fn from(e: crate::tools::ToolSetupError) -> Self {
        SimError::Tools(Box::new(e))
    }
}

impl SimError {
    /// Whether a model call was abandoned because the run was stopped: the run ends
    /// as interrupted, not failed.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, SimError::Stopped) || matches!(self, SimError::Llm(e) if e.is_cancelled())
    }

    /// Whether the run's settings, rather than something that happened while running,
    /// are at fault.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            SimError::UnknownHuman { .. }
                | SimError::Knowledge { .. }
                | SimError::NoHumanInput { .. }
                | SimError::Tools(_)
                | SimError::Judge(_)
                | SimError::ResumeDiverged { .. }
                | SimError::ResumeEnded { .. }
                | SimError::ResumeBelowLimit { .. }
        )
    }
}
