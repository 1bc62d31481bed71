//! sopsim: an actor-based multi-agent simulator.
//!
//! A scenario file describes agents, the roles they play, and an SOP: a graph of
//! states that routes turns between roles. Every agent and the shared Environment is an
//! actix actor; a Director decides who speaks; memory keeps a long-term log, short-term
//! summaries and an embedding index for relevant-history retrieval.
//!
//! There is one way in: [`load`] a scenario (a file, a document made in code, or one
//! built in code), and [`run`] it — or await [`run_async`] in async code.
//!
//! ```
//! use sopsim::scenario::{ScenarioBuilder, StateBuilder};
//! use sopsim::simulation::Services;
//! use sopsim::{run, RunIo, RunOptions};
//!
//! let scenario = ScenarioBuilder::new("interview")
//!     .agent("Ada", |a| a.plays("talk", "Interviewer"))
//!     .agent("Bob", |a| a.plays("talk", "Candidate"))
//!     .state("talk", StateBuilder::new(["Interviewer", "Candidate"])
//!         .begin("Interviewer", "Tell me about yourself.")
//!         .max_turns(4)
//!         .next(["end"]))
//!     .build()?;
//! // Replies from the scenario's own script; without `services`, the options' models.
//! let services = Some(Services::scripted(&scenario));
//! let outcome = run(&RunOptions::new(scenario), RunIo { services, ..RunIo::default() })?;
//! for m in &outcome.transcript {
//!     println!("{}: {}", m.name, m.content);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A scenario file runs as `sopsim run` runs it, with the caller's event sinks and a
//! token that stops it at once, keeping every finished turn (from another thread, a web
//! handler…).
//! The library never prints, exits or installs signal handlers; errors are typed and
//! name the setting at fault ([`setup::SetupError::setting`]).
//!
//! ```no_run
//! use sopsim::error::CancelToken;
//! use sopsim::setup::{LlmChoice, ModelOptions};
//! use sopsim::{run, RunIo, RunOptions};
//!
//! let cancel = CancelToken::new();
//! let opts = RunOptions {
//!     out: Some("out/debate".into()),
//!     seed: 7,
//!     models: ModelOptions { llm: LlmChoice::Local, ..ModelOptions::default() },
//!     ..RunOptions::new("scenarios/debate.json")
//! };
//! let outcome = run(&opts, RunIo { cancel: cancel.clone(), ..RunIo::default() })?;
//! println!("{} turns, ended by {}", outcome.summary.turns, outcome.summary.ended_by.as_str());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `run` blocks on a runtime of its own; async code running in an actix `System` awaits
//! [`run_async`] instead. `examples/run_file.rs` is a complete program.
//!
//! # The public API
//!
//! The front door is [`load`], [`run`] and [`run_async`] with their options and
//! errors ([`runner`]). Behind it, ten modules: [`scenario`] (the format),
//! [`simulation`] (what a run gives back: transcript, summary, services), [`setup`]
//! (model options, and the services and checks of many runs at once), [`events`],
//! [`human`], [`error`], [`llm`], [`embed`], [`models`] and [`tools`]. Everything else
//! is private to the crate; the few of its types a caller meets are re-exported where the caller meets them: the
//! transcript's [`simulation::Message`], the reply budget [`llm::ReplyBudget`], a run
//! folder's [`runner::OutputFolder`], the quality figures [`events::ReplyQuality`].
//!
//! # Layout
//!
//! The pure logic (the scenario format, SOP routing, memory, prompts, the
//! Environment's rules, reply quality, the Director's state between turns) is the
//! `sopsim-core` crate, free of actors and model calls; its modules are used here
//! under their own names (`sopsim_core::memory`, `sopsim_core::prompt`…); [`scenario`] re-exports
//! the format's types, not the core's loaders. This crate runs simulations on it.
//!
//! - [`tools`]: the built-in tool kinds, and the decision agent's logic (what a
//!   decision sees, reading it).
//! - `output_folder`: the only way the files of a
//!   run's or a benchmark's folder are opened (regular files inside it, never through
//!   a link, every read bounded).
//!
//! Services shared by every simulation in a process:
//! - [`llm`]: the `sopsim-llm` crate: the `LlmBackend` trait, the OpenAI-compatible
//!   and local backends, recording, the scripted backend, per-simulation accounting.
//! - [`embed`]: the `Embedder` trait, the hash embedder, the batching worker service.
//! - `knowledge`: knowledge bases for the `knowledge` component, embedded once a run.
//!
//! Running:
//! - `actors`: Director, Agent and Environment actors and their messages.
//! - [`simulation`]: wiring one simulation, running it; what it gives back.
//! - [`events`], `output`, [`human`]: the event stream and `events.jsonl`, run
//!   files, where people's turns come from; `journal`: every answer a run got, which
//!   a resumed run answers from.
//! - [`setup`]: typed model options → backends, embedder, prices; errors naming the
//!   setting at fault.
//! - [`runner`]: the front door, `sopsim run` as a library call (`source`: what a run
//!   plays, and loading it); [`error`]: run errors, the
//!   cancellation token, error chains.
//! - [`models`]: the local models sopsim knows, fetched from PyPI and checked.
//!
//! The benchmark (`sopsim bench`: scenario × mode × seed, outcomes, statistics, report
//! and plots) is the `sopsim-bench` crate, built on this one's front door.

pub(crate) mod actors;
pub(crate) mod control;
pub mod embed;
pub mod error;
pub mod events;
pub(crate) mod finished_run;
pub mod human;
pub(crate) mod interview;
pub(crate) mod journal;
pub(crate) mod judge_again;
pub(crate) mod judgement;
pub(crate) mod knowledge;
pub use sopsim_llm as llm;
pub use sopsim_models as models;
pub(crate) mod output;
pub(crate) mod output_folder;
pub(crate) mod resume_check;
pub mod runner;
pub mod scenario;
pub mod setup;
pub mod simulation;
pub(crate) mod source;
pub mod tools;

pub use finished_run::{FinishedRunError, GAME_SCENARIO_FILE, TOURNAMENT_FILE};
pub use interview::{interview, Interview, InterviewError, InterviewOptions};
pub use judge_again::{judge_again, JudgeError, JudgeOptions};
pub use runner::{load, run, run_async, Loaded, RunError, RunIo, RunOptions, ScenarioSource};

/// Internals the fuzz targets drive directly (`cargo fuzz` builds with `--cfg fuzzing`).
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    pub use sopsim_core::memory::{Decision, Message, MessageKind};
    pub use sopsim_core::scenario::{from_document, import_aiwaves, parse_json};
    pub use sopsim_core::template::{placeholders, render};
    pub use sopsim_core::user_json::parse;
    pub use sopsim_core::world::view::{render_say, render_state};
    pub use sopsim_core::world::World;
}
