//! sopsim: an actor-based multi-agent simulator.
//!
//! A scenario file describes agents, the roles they play, and an SOP: a graph of
//! states that routes turns between roles. Every agent and the shared Environment is an
//! actix actor; a Director decides who speaks; memory keeps a long-term log, short-term
//! summaries and an embedding index for relevant-history retrieval.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sopsim::scenario::{ScenarioBuilder, StateBuilder};
//! use sopsim::sim::{run_blocking, RunConfig, Services};
//!
//! let scenario = ScenarioBuilder::new("interview")
//!     .agent("Ada", |a| a.plays("talk", "Interviewer"))
//!     .agent("Bob", |a| a.plays("talk", "Candidate"))
//!     .state("talk", StateBuilder::new(["Interviewer", "Candidate"])
//!         .begin("Interviewer", "Tell me about yourself.")
//!         .max_turns(4)
//!         .next(["end"]))
//!     .build()?;
//! let services = Services::scripted(&scenario);
//! let outcome = run_blocking(Arc::new(scenario), &services, RunConfig::default())?;
//! for m in &outcome.transcript {
//!     println!("{}: {}", m.name, m.content);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A scenario file runs as `sopsim run` runs it, with the caller's event sinks and a
//! token that stops it at the next turn boundary (from another thread, a web handler…).
//! The library never prints, exits or installs signal handlers; errors are typed and
//! name the setting at fault ([`setup::SetupError::setting`]).
//!
//! ```no_run
//! use sopsim::error::CancelToken;
//! use sopsim::runner::{run, RunIo, RunOptions};
//! use sopsim::setup::{LlmChoice, ModelOptions};
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
//! [`runner::run_async`] instead. `examples/run_file.rs` is a complete program.
//!
//! # The public API
//!
//! Twelve modules are the front door: [`scenario`] (the format), [`sim`] (one simulation
//! in memory), [`runner`] (a scenario file run into a folder), [`setup`] (model
//! options), [`bench`](mod@bench), [`events`], [`human`], [`error`], [`llm`], [`embed`],
//! [`models`] and [`tools`]. Everything else is private to the crate; the few of its
//! types a caller meets are re-exported where the caller meets them: the transcript's
//! [`sim::Message`], the reply budget [`llm::ReplyBudget`], a run folder's
//! [`runner::OutputFolder`], the quality figures [`events::ReplyQuality`].
//!
//! # Layout
//!
//! Pure logic, free of I/O and actors, unit-tested directly:
//! - [`scenario`]: the native file format, its JSON Schema, validation with field paths,
//!   loading, and a builder for scenarios made in code.
//! - `sop`: the SOP engine: speaker rules (order, seeded random, llm) and transition
//!   rules (max turns, keywords, judge).
//! - `prompt`: what each kind of model call sends, fitted to the token budget.
//! - `memory`: messages, the embedding index, shared memory and the two modes, and
//!   what each population member may see of it.
//! - `network`: who is linked to whom in a population.
//! - `action`: `Action::process`, a turn's output becoming a `Message`.
//! - `tool_results`: the keyed result store and Elysia's return objects.
//! - `environment`: a simulation's Environment as data (memory, store, tool
//!   records, rounds): the Environment actor's state and rules.
//! - [`tools`]: the built-in tool kinds, and the decision agent's logic (what a
//!   decision sees, reading it, self-healing errors).
//! - `quality`: reply quality (copies, labels, narration, echoes, empty replies).
//! - `template`, `tokens`: placeholder templates and token counting;
//!   `sentence`: where sentences end, and the reply budget built on it.
//! - `digest`: SHA-256 digests as hex.
//! - `files`: bounded reads of users' files, whole-or-nothing writes;
//!   `output_folder`: the only way the files of a run's or a benchmark's folder are
//!   opened (regular files inside it, never through a link, every read bounded).
//! - `user_json`: JSON users write, parsed with duplicate keys refused.
//!
//! Services shared by every simulation in a process:
//! - [`llm`]: the `LlmBackend` trait, the scripted backend, per-simulation accounting.
//! - [`embed`]: the `Embedder` trait, the hash embedder, the batching worker service.
//! - `knowledge`: knowledge bases for the `knowledge` component, embedded once.
//!
//! Running:
//! - `actors`: Director, Agent and Environment actors and their messages.
//! - [`sim`]: wiring one simulation, running it, its summary; `run_state`: the
//!   Director's pure state between turns (counters, limits, budgets, catch-up).
//! - [`events`], `output`, [`human`]: the event stream and `events.jsonl`, run
//!   files, where people's turns come from; `journal`: every answer a run got, which
//!   a resumed run answers from.
//! - [`setup`]: typed model options → backends, embedder, prices; errors naming the
//!   setting at fault.
//! - [`runner`]: `sopsim run` as a library call; [`error`]: run errors, the
//!   cancellation token, error chains.
//! - [`models`]: the local models sopsim knows, fetched from PyPI and checked.
//! - [`bench`](mod@bench): `sopsim bench`: scenario × mode × seed, run many at once, outcomes,
//!   statistics, report and plots.

pub(crate) mod action;
pub(crate) mod actors;
pub mod bench;
pub(crate) mod control;
pub(crate) mod digest;
pub mod embed;
pub(crate) mod environment;
pub mod error;
pub(crate) mod error_chain;
pub mod events;
pub(crate) mod files;
pub mod human;
pub(crate) mod journal;
pub(crate) mod knowledge;
pub mod llm;
pub(crate) mod memory;
pub mod models;
pub(crate) mod network;
pub(crate) mod output;
pub(crate) mod output_folder;
pub(crate) mod prompt;
pub(crate) mod quality;
pub(crate) mod run_state;
pub mod runner;
pub mod scenario;
pub(crate) mod sentence;
pub mod setup;
pub mod sim;
pub(crate) mod sop;
pub(crate) mod template;
pub(crate) mod tokens;
pub(crate) mod tool_results;
pub mod tools;
pub(crate) mod user_json;

/// Internals the fuzz targets drive directly (`cargo fuzz` builds with `--cfg fuzzing`).
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::template::{placeholders, render};
    pub use crate::user_json::parse;
}
