//! The local models against their references, and the fuzzers' regressions. One test binary: each file is a module.

#[path = "../common/mod.rs"]
mod common;

mod fuzz_regressions;
mod gemma3;
mod llama_cpp;
mod models;
mod tiny_models;
