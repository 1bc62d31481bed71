//! Choosing the next token: temperature, top-k, top-p and a seed from the request's
//! settings, plus llama.cpp's default repeat penalty, which very small models need to
//! avoid loops.

use std::hash::Hasher;

use candle_core::{Result, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use xxhash_rust::xxh3::Xxh3;

use crate::llm::CallContext;
use crate::scenario::LlmSettings;

const REPEAT_PENALTY: f32 = 1.1;
const REPEAT_WINDOW: usize = 64;

pub struct Sampler {
    processor: LogitsProcessor,
}

impl Sampler {
    /// The seed is the request's own `seed` if set, else the run's seed mixed with the
    /// prompt, so a seeded run samples the same way every time it sends the same prompt.
    pub fn new(settings: &LlmSettings, context: &CallContext, prompt: &str) -> Self {
        let seed = settings.seed.unwrap_or_else(|| {
            let mut h = Xxh3::new();
            h.write_u64(context.run_seed);
            h.write(prompt.as_bytes());
            h.finish()
        });
        let temperature = f64::from(settings.temperature.unwrap_or(0.7));
        let sampling = if temperature <= 0.0 {
            Sampling::ArgMax
        } else {
            match (settings.top_k, settings.top_p) {
                (Some(k), Some(p)) => Sampling::TopKThenTopP {
                    k: k as usize,
                    p: f64::from(p),
                    temperature,
                },
                (Some(k), None) => Sampling::TopK {
                    k: k as usize,
                    temperature,
                },
                (None, Some(p)) => Sampling::TopP {
                    p: f64::from(p),
                    temperature,
                },
                (None, None) => Sampling::All { temperature },
            }
        };
        Self {
            processor: LogitsProcessor::from_sampling(seed, sampling),
        }
    }

    pub fn sample(&mut self, logits: &Tensor, prompt: &[u32], generated: &[u32]) -> Result<u32> {
        let recent: Vec<u32> = prompt
            .iter()
            .chain(generated)
            .rev()
            .take(REPEAT_WINDOW)
            .copied()
            .collect();
        let logits =
            candle_transformers::utils::apply_repeat_penalty(logits, REPEAT_PENALTY, &recent)?;
        self.processor.sample(&logits)
    }
}
