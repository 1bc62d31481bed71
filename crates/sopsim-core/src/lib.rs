//! sopsim's pure core: everything a simulation decides, with no actors, no model
//! calls and no threads, so that each rule is unit-tested directly.
//!
//! The `sopsim` crate runs simulations on this core (actors, model clients,
//! embedders, tools that reach out, run folders) and is the front door for users:
//! its modules re-export what a caller needs from here. This crate's own API serves
//! sopsim's crates and follows their version; it is not a stable interface of its own.
//!
//! # Layout
//!
//! - [`scenario`]: the native file format, its JSON Schema, validation with field
//!   paths, loading (bounded reads of the scenario and the files it names), and a
//!   builder for scenarios made in code.
//! - [`sop`]: the SOP engine: speaker rules (order, seeded random, llm) and
//!   transition rules (max turns, keywords, judge).
//! - [`prompt`]: what each kind of model call sends, fitted to the token budget.
//! - [`memory`]: messages, the embedding index, shared memory and the two modes, and
//!   what each population member may see of it.
//! - [`network`]: who is linked to whom in a population.
//! - [`action`]: `Action::process`, a turn's output becoming a `Message`.
//! - [`tool_results`]: the keyed result store, Elysia's return objects, how a call
//!   ended, and what a model is shown of them (the visible store, self-healing error
//!   lines).
//! - [`environment`]: a simulation's Environment as data (memory, store, tool
//!   records, rounds): the Environment actor's state and rules.
//! - [`run_state`]: the Director's state between turns (counters, limits, budgets,
//!   resume's catch-up).
//! - [`world`]: a run's world (variables carried from round to round, the last moves,
//!   the conditions that end a run) and strategy players.
//! - [`quality`]: reply quality (copies, labels, narration, echoes, stage
//!   directions, paraphrases…), the checks a reply is redrawn on.
//! - [`template`], [`tokens`], [`sentence`]: placeholder templates, token counting,
//!   where sentences end and the reply budget built on it.
//! - [`files`]: bounded reads of users' files, whole-or-nothing writes;
//!   [`user_json`]: JSON users write, parsed with duplicate keys refused;
//!   [`error_chain`]: an error and its sources as one line; [`digest`]: SHA-256
//!   digests as the hex run folders, settings, recordings and model files carry.

pub mod action;
pub mod digest;
pub mod environment;
pub mod error_chain;
pub mod files;
pub mod judging;
pub mod memory;
pub mod network;
pub mod noise;
pub mod prompt;
pub mod quality;
pub mod run_state;
pub mod scenario;
pub mod sentence;
pub mod sop;
pub mod template;
pub mod tokens;
pub mod tool_results;
pub mod user_json;
pub mod world;
