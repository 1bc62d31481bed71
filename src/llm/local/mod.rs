//! The local chat model (`--llm local`): any llama-architecture GGUF file, run by candle
//! on a worker thread that owns the model. Actors only await replies.
//!
//! Prompt prefixes are reused: finished sequences keep their KV cache in a small pool,
//! and a new prompt continues from the cached sequence that shares the longest prefix
//! with it (an agent's system prompt, a scenario's fixed text), so only the new tokens
//! are processed. `Usage::cached_prompt_tokens` reports how many were reused.
//!
//! A reply never depends on what the cache held: prompts are processed in blocks that
//! start at multiples of [`BLOCK`] tokens, and only whole blocks are cached, so every
//! prompt token goes through exactly the same arithmetic with or without reuse.

mod gguf;
mod model;
mod sampling;
mod template;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokenizers::Tokenizer;
use tokio::sync::oneshot;

use super::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink, Usage};
use crate::tokens::TokenCounter;
use model::{KvCache, Llama, Pass};
use sampling::Sampler;
use template::ChatTemplate;

pub use gguf::SpecialTokens;

/// How the local model runs.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Finished sequences whose KV caches are kept for prefix reuse.
    pub cache_slots: usize,
    /// Keep a dense f32 copy of the weights for fast prompt processing (+~4 bytes per
    /// parameter of memory).
    pub dense_prefill: bool,
    /// Tokens generated when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Generate `max_tokens` even past the end-of-text token (for benchmarks).
    pub ignore_eos: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            cache_slots: 16,
            dense_prefill: true,
            default_max_tokens: 256,
            ignore_eos: false,
        }
    }
}

/// A loaded GGUF model with its tokenizer and chat template.
pub struct LocalModel {
    llama: Llama,
    tokenizer: Tokenizer,
    special: SpecialTokens,
    template: ChatTemplate,
    name: String,
}

fn load_error(path: &Path, message: impl std::fmt::Display) -> LlmError {
    LlmError::Backend {
        backend: "local".into(),
        message: format!("{}: {message}", path.display()),
    }
}

impl LocalModel {
    pub fn load(path: &Path, options: &LocalOptions) -> Result<Self, LlmError> {
        let mut file = std::fs::File::open(path).map_err(|e| load_error(path, e))?;
        let ct = candle_core::quantized::gguf_file::Content::read(&mut file)
            .map_err(|e| load_error(path, format!("not a GGUF file: {e}")))?;
        let (tokenizer, special) = gguf::tokenizer(&ct).map_err(|e| load_error(path, e))?;
        let template = ChatTemplate::new(
            gguf::chat_template(&ct),
            special.bos.clone(),
            special.eos.clone(),
        )
        .map_err(|e| load_error(path, e))?;
        let llama = Llama::load(&ct, &mut file, path, options.dense_prefill)
            .map_err(|e| load_error(path, e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            llama,
            tokenizer,
            special,
            template,
            name,
        })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| e.to_string())
    }
}

/// Exact token counts with the model's own tokenizer.
pub struct TokenizerCounter(pub Tokenizer);

impl TokenCounter for TokenizerCounter {
    fn count(&self, text: &str) -> usize {
        self.0
            .encode(text, false)
            .map(|e| e.len())
            .unwrap_or_else(|_| crate::tokens::Estimator.count(text))
    }
    fn exact(&self) -> bool {
        true
    }
}

/// Prompt tokens are processed, and cached, in blocks of this many tokens.
pub const BLOCK: usize = 64;

struct Job {
    request: LlmRequest,
    stream: Option<TokenSink>,
    reply: oneshot::Sender<Result<Completion, LlmError>>,
}

/// The local backend: a handle on the model's worker thread.
pub struct LocalBackend {
    queue: mpsc::Sender<Job>,
    name: String,
    tokenizer: Tokenizer,
}

impl LocalBackend {
    /// Loads the model and starts its worker thread.
    pub fn start(path: &Path, options: LocalOptions) -> Result<Self, LlmError> {
        let model = LocalModel::load(path, &options)?;
        let name = model.name.clone();
        let tokenizer = model.tokenizer.clone();
        let (queue, jobs) = mpsc::channel::<Job>();
        let path: PathBuf = path.to_path_buf();
        std::thread::Builder::new()
            .name("sopsim-llm".into())
            .spawn(move || {
                Worker {
                    model,
                    pool: Vec::new(),
                    clock: 0,
                    options,
                }
                .run(jobs)
            })
            .map_err(|e| load_error(&path, e))?;
        Ok(Self {
            queue,
            name,
            tokenizer,
        })
    }

    /// A token counter with this model's tokenizer.
    pub fn counter(&self) -> Arc<dyn TokenCounter> {
        Arc::new(TokenizerCounter(self.tokenizer.clone()))
    }
}

impl LlmBackend for LocalBackend {
    fn describe(&self) -> String {
        format!("local:{}", self.name)
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.queue
                .send(Job {
                    request,
                    stream,
                    reply,
                })
                .map_err(|_| LlmError::Backend {
                    backend: "local".into(),
                    message: "the model thread has stopped".into(),
                })?;
            rx.await.map_err(|_| LlmError::Backend {
                backend: "local".into(),
                message: "the model thread stopped mid-request".into(),
            })?
        })
    }
}

struct Slot {
    cache: KvCache,
    used: u64,
}

struct Worker {
    model: LocalModel,
    pool: Vec<Slot>,
    clock: u64,
    options: LocalOptions,
}

impl Worker {
    fn run(mut self, jobs: mpsc::Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            let result = self.generate(&job.request, job.stream.as_ref());
            let _ = job.reply.send(result.map_err(|message| LlmError::Backend {
                backend: format!("local:{}", self.model.name),
                message,
            }));
        }
    }

    /// The cached sequence sharing the longest prefix with `ids`, cut back to the last
    /// block boundary within that prefix, and short of the last prompt token, which
    /// must run to give the logits.
    fn take_cache(&mut self, ids: &[u32]) -> KvCache {
        let common = |c: &KvCache| {
            c.tokens()
                .iter()
                .zip(ids)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let best = self
            .pool
            .iter()
            .enumerate()
            .map(|(i, s)| (common(&s.cache), i))
            .max();
        let mut cache = match best {
            Some((n, i)) if n.min(ids.len() - 1) >= BLOCK => {
                let mut c = self.pool.swap_remove(i).cache;
                c.truncate(n.min(ids.len() - 1) / BLOCK * BLOCK);
                c
            }
            _ if self.pool.len() >= self.options.cache_slots.max(1) => {
                let oldest = self
                    .pool
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.used)
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                let mut c = self.pool.swap_remove(oldest).cache;
                c.truncate(0);
                c
            }
            _ => self.model.llama.new_cache(),
        };
        if cache.tokens().len() > ids.len() {
            cache.truncate(0);
        }
        cache
    }

    fn put_cache(&mut self, cache: KvCache) {
        self.clock += 1;
        if self.options.cache_slots > 0 {
            self.pool.push(Slot {
                cache,
                used: self.clock,
            });
        }
    }

    fn generate(
        &mut self,
        request: &LlmRequest,
        stream: Option<&TokenSink>,
    ) -> Result<Completion, String> {
        let prompt = self.model.template.render(&request.messages)?;
        let ids = self.model.encode(&prompt)?;
        if ids.is_empty() {
            return Err("the prompt is empty".into());
        }
        let max_tokens = request
            .settings
            .max_tokens
            .unwrap_or(self.options.default_max_tokens) as usize;
        let room = self.model.llama.max_positions();
        if ids.len() >= room {
            return Err(format!(
                "the prompt is {} tokens; the model takes at most {room}",
                ids.len()
            ));
        }
        let max_tokens = max_tokens.min(room - ids.len());
        let mut cache = self.take_cache(&ids);
        let cached = cache.tokens().len();
        let mut sampler = Sampler::new(&request.settings, &request.context, &prompt);
        let mut text = TextStream::default();
        let stops = request.settings.stop.clone().unwrap_or_default();
        let mut generated: Vec<u32> = Vec::new();
        let result = (|| -> Result<(), String> {
            let mut logits = None;
            for block in ids[cached..].chunks(BLOCK) {
                let _lock = crate::models::compute_lock();
                logits = Some(
                    self.model
                        .llama
                        .forward(&mut cache, block, Pass::Prompt)
                        .map_err(|e| e.to_string())?,
                );
            }
            let mut logits = logits.ok_or("nothing to run")?;
            while generated.len() < max_tokens {
                let next = sampler
                    .sample(&logits, &ids, &generated)
                    .map_err(|e| e.to_string())?;
                if self.model.special.stop_ids.contains(&next) && !self.options.ignore_eos {
                    break;
                }
                generated.push(next);
                let piece = text.push(&self.model.tokenizer, &generated)?;
                if let Some(cut) = stop_position(text.full(), &stops) {
                    text.truncate(cut);
                    break;
                }
                if let (Some(sink), false) = (stream, piece.is_empty()) {
                    sink(&piece);
                }
                let _lock = crate::models::compute_lock();
                logits = self
                    .model
                    .llama
                    .forward(&mut cache, &[next], Pass::Generated)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })();
        // Keep whole prompt blocks only: a partial block, and the generated tokens, were
        // computed differently from how a later prompt would compute them.
        cache.truncate(ids.len() / BLOCK * BLOCK);
        self.put_cache(cache);
        result?;
        if let Some(sink) = stream {
            let rest = text.unsent();
            if !rest.is_empty() {
                sink(&rest);
            }
        }
        Ok(Completion {
            model: format!("local:{}", self.model.name),
            text: text.full().trim().to_string(),
            usage: Usage {
                prompt_tokens: ids.len() as u64,
                completion_tokens: generated.len() as u64,
                cached_prompt_tokens: cached as u64,
                estimated: false,
            },
        })
    }
}

/// Where the first stop sequence starts in `text`, if any.
fn stop_position(text: &str, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

/// Decoded text of the generated tokens, and how much of it was streamed. Text is
/// streamed only up to a point that no stop sequence could still claim and that is not
/// a partial UTF-8 character.
#[derive(Default)]
struct TextStream {
    text: String,
    sent: usize,
}

impl TextStream {
    fn push(&mut self, tokenizer: &Tokenizer, generated: &[u32]) -> Result<String, String> {
        self.text = tokenizer
            .decode(generated, true)
            .map_err(|e| e.to_string())?;
        // Hold back a trailing replacement character (a multi-byte character cut in two)
        // and a trailing partial line, where a stop sequence such as "\nBob:" may begin.
        let safe = self.text.trim_end_matches('\u{fffd}').len();
        let safe = self.text[..safe]
            .rfind('\n')
            .filter(|_| safe > 0)
            .map_or(safe, |nl| nl.max(self.sent));
        if safe <= self.sent || !self.text.is_char_boundary(safe) {
            return Ok(String::new());
        }
        let piece = self.text[self.sent..safe].to_string();
        self.sent = safe;
        Ok(piece)
    }

    fn full(&self) -> &str {
        &self.text
    }

    fn truncate(&mut self, at: usize) {
        self.text.truncate(at);
        self.sent = self.sent.min(at);
    }

    fn unsent(&mut self) -> String {
        let end = self.text.trim_end().len();
        let piece = if end > self.sent {
            self.text[self.sent..end].to_string()
        } else {
            String::new()
        };
        self.sent = self.text.len();
        piece
    }
}
