//! sopsim's local inference core: what it takes to run a GGUF chat model on the CPU,
//! without any of sopsim's simulation types.
//!
//! # Layout
//!
//! - [`gguf`]: the file (a bounded parser over a memory map), the architecture's shape,
//!   the tokenizer and the chat template, every metadata value checked.
//! - [`quant`]: quantised matrix products whose results do not depend on the batch
//!   (AVX-512 VNNI, AVX2 and AVX-VNNI kernels matching a scalar reference bit for bit).
//! - [`transformer`]: the llama, qwen2, qwen3 and gemma3 forward pass over rows of many sequences, each with
//!   its own [`kv::KvCache`]; attention per row and head.
//! - [`choice`]: choosing among options by their probability (a trie of tokens).
//! - [`penalties`], [`sampling`], [`chat_template`]: what a sequence's context does to its
//!   next token's logits (repeat, frequency, presence, DRY); the draw; the prompt text.
//! - `bf16x3`: f32 products as three bf16 products on AMX tiles (the sentence encoder's,
//!   where the CPU has AMX-BF16).
//! - `panels`: f32 products over a matrix laid out once for AVX2 and FMA (the sentence
//!   encoder's, where the CPU has neither AVX-512 nor AMX).
//! - [`bert`] and [`safetensors`]: the sentence encoder's forward pass and the reader of
//!   its weights (one tensor at a time, as f32).
//! - [`compute`]: the one place that decides how many threads model work uses.
//! - [`math`]: float functions in a fixed order (exp, sums, the MLP's activation, the
//!   softmax of attention, choices and draws), the same bits on every CPU.
//! - [`error`]: what can go wrong once a model is loaded.
//!
//! The scheduler that batches requests from many simulations lives in sopsim
//! (`sopsim::llm::local`); this crate is compiled optimised even in debug builds,
//! since model code unoptimised is far too slow for tests.

mod attention;
pub mod bert;
#[cfg(target_arch = "x86_64")]
pub mod bf16x3;
pub mod chat_template;
pub mod choice;
pub mod compute;
pub mod error;
pub mod gguf;
pub mod kv;
pub mod math;
mod panels;
pub mod penalties;
pub mod quant;
pub mod safetensors;
pub mod sampling;
pub mod transformer;
