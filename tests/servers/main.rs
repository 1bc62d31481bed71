//! OpenAI-compatible servers on 127.0.0.1: the HTTP backend, simultaneous rounds against a server, tools and decisions. One test binary: each file is a module.

#[path = "../common/mod.rs"]
mod common;

mod openai;
mod simultaneous;
mod tools;
