//! The simulator through the library: behaviour, golden transcripts, the Environment, the library API, the documentation and the layering. One test binary: each file is a module.

#[path = "../common/mod.rs"]
mod common;

mod behaviour;
mod concurrency;
mod docs;
mod environment;
mod golden;
mod layers;
mod library;
mod populations;
mod probes;
mod resume;
mod shipped;
