//! Questions put to a finished run's agent afterwards (`sopsim interview`): the agent
//! answers from its memory and persona as they were at the end, or after a round,
//! where the run's files allow, without running anything again. The run's folder is
//! only read; the answer goes to the caller.

use std::path::PathBuf;
use std::sync::Arc;

use crate::finished_run::FinishedRunError;
use crate::llm::{CallKind, LlmClient, LlmRequest};
use crate::output::WORLD_FILE;
use crate::output_folder::{FolderFileError, OutputFolder};
use crate::scenario::Persona;
use crate::setup::{EmbedderChoice, ModelOptions, SetupError};
use sopsim_core::memory::{Message, Summary};
use sopsim_core::prompt::{self, ProbePut};

/// What to ask whom, in which run.
#[derive(Debug, Clone)]
pub struct InterviewOptions {
    /// The run's folder (`sopsim run --out`).
    pub folder: PathBuf,
    /// The agent to ask.
    pub agent: String,
    /// The question put to the agent.
    pub question: String,
    /// Ask the agent as it was after this round of the run's world (without a world:
    /// after this visit of a state); `None`: at the end.
    pub at: Option<u32>,
    /// The scenario file, when `run.json` does not name it or it has moved; it must
    /// be the file the run was made from.
    pub scenario: Option<PathBuf>,
    /// The model that answers (the local default unless told otherwise).
    pub models: ModelOptions,
}

/// An interview's answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Interview {
    /// The agent asked.
    pub agent: String,
    /// The question put to it.
    pub question: String,
    /// The agent's answer, trimmed.
    pub answer: String,
    /// The model that answered, and the one the run was made with.
    pub model: String,
    /// The model the run was made with, as `run.json` names it.
    pub run_model: String,
    /// The last message of the run the agent remembers.
    pub through_seq: Option<u64>,
    /// Prompt tokens of the call that answered.
    pub prompt_tokens: u64,
    /// Completion tokens of the call that answered.
    pub completion_tokens: u64,
}

/// Why an interview could not be held.
#[derive(Debug, thiserror::Error)]
pub enum InterviewError {
    /// The run's folder or its scenario could not be read.
    #[error(transparent)]
    Run(#[from] FinishedRunError),
    /// A file of the run's folder could not be read.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// The agent is not one of the run's agents, or plays no role.
    #[error("{name:?} is not an agent of this run (agents: {known})")]
    UnknownAgent {
        /// The agent asked for.
        name: String,
        /// The run's agents (the first 20, comma-separated), or why the agent cannot be asked.
        known: String,
    },
    /// The agent is played by a person.
    #[error("{name:?} is played by a person: ask them")]
    Person {
        /// The agent asked for.
        name: String,
    },
    /// The run has no such round of its world (without a world, no such visit).
    #[error("the run has no round {at}: it closed {rounds}")]
    NoSuchRound {
        /// The round (or visit) asked for.
        at: u32,
        /// How far the run went: its world's last round, or its last visit.
        rounds: u32,
    },
    /// The model could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The model call failed.
    #[error(transparent)]
    Call(#[from] crate::llm::CallError),
    /// The runtime that runs the model call could not be started.
    #[error("the model could not be run")]
    Runtime(#[source] std::io::Error),
}

impl InterviewError {
    /// Whether the user's input is at fault (exit 2), rather than the model.
    pub fn is_bad_input(&self) -> bool {
        match self {
            InterviewError::Setup(e) | InterviewError::Run(FinishedRunError::Setup(e)) => {
                e.is_bad_input()
            }
            InterviewError::Call(_) | InterviewError::Runtime(_) => false,
            _ => true,
        }
    }
}

/// The most a run's files may hold when an interview reads them.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// Puts the question to the agent and returns its answer (blocking).
pub fn interview(opts: &InterviewOptions) -> Result<Interview, InterviewError> {
    let run = crate::finished_run::read(&opts.folder, opts.scenario.as_deref())?;
    let (folder, identity, log) = (run.folder, run.identity, run.transcript);
    let mut scenario = run.scenario;
    let agent = scenario.agents.get(&opts.agent).ok_or_else(|| {
        let known: Vec<&str> = scenario
            .agents
            .keys()
            .map(String::as_str)
            .take(20)
            .collect();
        InterviewError::UnknownAgent {
            name: opts.agent.clone(),
            known: known.join(", "),
        }
    })?;
    if agent.human {
        return Err(InterviewError::Person {
            name: opts.agent.clone(),
        });
    }
    let summaries = read_summaries(&folder)?;
    let through = match opts.at {
        None => None,
        Some(at) => through_round(&folder, &log, at)?,
    };
    let env =
        sopsim_core::environment::replayed(&scenario, identity.mode, &log, &summaries, through);
    let obs = env.observe(Some(&opts.agent));
    let remembered = obs.recent.last().map(|m| m.seq);
    // The agent speaks as the role it played last, else its first.
    let last_state = log
        .iter()
        .rfind(|m| through.is_none_or(|t| m.seq <= t))
        .map(|m| m.state.clone());
    let (state_name, role) = last_state
        .and_then(|s| agent.roles.get_key_value(&s))
        .or_else(|| agent.roles.first())
        .map(|(s, r)| (s.clone(), r.clone()))
        .ok_or_else(|| InterviewError::UnknownAgent {
            name: opts.agent.clone(),
            known: "it plays no role".into(),
        })?;
    let mut models = opts.models.clone();
    // Nothing is embedded for an interview.
    models.embedder = EmbedderChoice::Hash;
    let imported = run.imported;
    let services = crate::setup::assemble(&models, [(&mut scenario, &imported)])?
        .pop()
        .ok_or(SetupError::NoScenarios)?;
    let agent = &scenario.agents[&opts.agent];
    let state = &scenario.sop.states[&state_name];
    let assembled = prompt::probe_prompt(
        &scenario,
        state,
        Persona {
            name: &opts.agent,
            role: &role,
            agent,
        },
        &obs,
        ProbePut {
            question: &opts.question,
            options: &[],
            number: None,
        },
        services.counter.as_ref(),
    );
    let mut settings = scenario.settings_for(&state_name, Some(&role), Some(&opts.agent));
    settings.max_tokens = Some(settings.max_tokens.unwrap_or(160));
    let llm = LlmClient::new(services.llm.clone(), identity.seed);
    let context = llm.context(
        CallKind::Probe,
        &state_name,
        through.map_or(log.len() as u64, |t| t + 1),
        Some((&opts.agent, &role)),
    );
    let request = LlmRequest::chat(assembled.messages, settings, context);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(InterviewError::Runtime)?;
    let completion = runtime.block_on(llm.call(request, None))?;
    Ok(Interview {
        agent: opts.agent.clone(),
        question: opts.question.clone(),
        answer: completion.text.trim().to_string(),
        model: services.llm.describe(),
        run_model: identity.llm,
        through_seq: remembered,
        prompt_tokens: completion.usage.prompt_tokens,
        completion_tokens: completion.usage.completion_tokens,
    })
}

/// Every summary the run made, from `environment.json` (none when it was not written).
fn read_summaries(folder: &OutputFolder) -> Result<Vec<Summary>, InterviewError> {
    let environment =
        match folder.read_json::<serde_json::Value>("environment.json", MAX_FILE_BYTES) {
            Ok(v) => v,
            Err(e) if e.is_missing() => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
    Ok(
        serde_json::from_value(environment["shared_memory"]["summaries"].clone())
            .unwrap_or_default(),
    )
}

/// The last message of round `at`: of the visit that closed the world's round `at`,
/// or, without a world, of visit `at`.
fn through_round(
    folder: &OutputFolder,
    log: &[Arc<Message>],
    at: u32,
) -> Result<Option<u64>, InterviewError> {
    let visit = match folder.read_json_lines::<serde_json::Value>(WORLD_FILE, MAX_FILE_BYTES) {
        Ok(rounds) => {
            let closed = rounds
                .iter()
                .filter_map(|l| Some((l["round"].as_u64()?, l["visit"].as_u64()?)))
                .filter(|(r, _)| *r == u64::from(at))
                .map(|(_, v)| v)
                .max();
            match closed {
                Some(v) => v as u32,
                None => {
                    let rounds = rounds.iter().filter_map(|l| l["round"].as_u64()).max();
                    return Err(InterviewError::NoSuchRound {
                        at,
                        rounds: rounds.unwrap_or(0) as u32,
                    });
                }
            }
        }
        Err(e) if e.is_missing() => at,
        Err(e) => return Err(e.into()),
    };
    let last = log.iter().filter(|m| m.visit <= visit).map(|m| m.seq).max();
    match last {
        Some(seq) if log.iter().any(|m| m.visit >= visit) => Ok(Some(seq)),
        _ => Err(InterviewError::NoSuchRound {
            at,
            rounds: log.iter().map(|m| m.visit).max().unwrap_or(0),
        }),
    }
}
