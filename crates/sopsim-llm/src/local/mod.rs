//! The local chat model (`--llm local`): a llama- or qwen2-architecture GGUF file run by
//! sopsim's own kernels on a worker thread that owns the model. Actors only await
//! replies.
//!
//! The model itself — the GGUF file, kernels, forward pass, tokenizer, template — is
//! the `sopsim-infer` crate; here are the backend handle, `engine`, the worker
//! that batches every simulation's requests, reuses prompt prefixes and answers
//! choices, and `draw_settings`, a request's settings as the engine draws with them.

mod admit;
mod constrain;
mod decode;
mod draw_settings;
mod engine;
mod prefix_tree;
mod sequence;
mod speculate;
mod text_stream;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokenizers::Tokenizer;
use tokio::sync::oneshot;

use super::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink};
use engine::Worker;
use sequence::{Job, Text};
use sopsim_core::tokens::TokenCounter;
use sopsim_infer::chat_template::ChatTemplate;
use sopsim_infer::gguf;
use sopsim_infer::transformer::{self, Model};

pub use sopsim_infer::gguf::{GgufError, SpecialTokens};
pub use sopsim_infer::quant::Kernels;

/// The token ids of `text`, without special tokens added.
fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, tokenizers::Error> {
    tokenizer.encode(text, false).map(|e| e.get_ids().to_vec())
}

/// How the local model runs.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Memory for the KV caches of finished sequences kept for prefix reuse (0: none).
    pub cache_bytes: usize,
    /// Sequences decoded together in one step at most.
    pub max_batch: usize,
    /// Tokens generated when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Generate `max_tokens` even past the end-of-text token (for benchmarks).
    pub ignore_eos: bool,
    /// A smaller model of the same vocabulary that drafts replies ahead, which this
    /// one checks (speculative decoding).
    pub draft_model: Option<PathBuf>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            cache_bytes: 256 << 20,
            max_batch: 16,
            default_max_tokens: 256,
            ignore_eos: false,
            draft_model: None,
        }
    }
}

/// A GGUF file that could not be loaded, named with the key or tensor at fault.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct LoadError {
    /// The file that could not be loaded.
    pub path: PathBuf,
    /// What went wrong with it.
    #[source]
    pub source: LoadProblem,
}

/// Why a GGUF model could not be loaded or started.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// The file could not be read, or its metadata or tensors are not a model sopsim runs.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The model's chat template could not be used.
    #[error(transparent)]
    Template(sopsim_infer::error::InferError),
    /// The worker thread that runs the model could not be started.
    #[error("cannot start the model thread")]
    Thread(#[source] std::io::Error),
    /// The draft model cannot serve this model, e.g. its vocabulary differs.
    #[error("the draft model {draft}: {why}")]
    Draft {
        /// The draft model's file.
        draft: PathBuf,
        /// Why it cannot serve.
        why: String,
    },
}

/// Why a loaded model could not tokenize or compute.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The tokenizer failed on the text.
    #[error("the tokenizer")]
    Tokenizer(#[source] tokenizers::Error),
    /// The model's computation failed.
    #[error(transparent)]
    Infer(#[from] sopsim_infer::error::InferError),
}

/// A loaded model with its tokenizer and chat template.
pub struct LocalModel {
    model: Model,
    text: Text,
    name: String,
}

impl LocalModel {
    /// Loads the GGUF file at `path` with its tokenizer and chat template.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let err = |source: LoadProblem| LoadError {
            path: path.to_path_buf(),
            source,
        };
        let model = Model::load(path).map_err(|e| err(e.into()))?;
        let (tokenizer, special) =
            gguf::tokenizer(model.file(), model.vocab).map_err(|e| err(e.into()))?;
        let template = ChatTemplate::new(
            gguf::chat_template(model.file()),
            special.bos.clone(),
            special.eos.clone(),
        )
        .map_err(|e| err(LoadProblem::Template(e)))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            model,
            text: Text {
                tokenizer,
                special,
                template,
            },
            name,
        })
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.text.tokenizer
    }

    /// The prompt text the model's chat template makes of `messages` (role, content),
    /// ending where the assistant's reply begins, with thinking off (as agents have it
    /// unless their settings turn it on).
    pub fn render(&self, messages: &[(&str, &str)]) -> Result<String, LocalError> {
        Ok(self.text.template.render(messages, false)?)
    }

    /// The token ids of `text` (control tokens such as `<|im_start|>` are single ids).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        encode(&self.text.tokenizer, text).map_err(LocalError::Tokenizer)
    }

    /// Every logit after each of `positions` of `tokens`, run as one sequence from an
    /// empty cache (for comparing with other engines).
    pub fn logits(&self, tokens: &[u32], positions: &[usize]) -> Result<Vec<Vec<f32>>, LocalError> {
        let mut cache = self.model.new_cache();
        let mut segment = [transformer::Segment {
            cache: &mut cache,
            tokens,
            wants: positions
                .iter()
                .map(|p| (*p, transformer::Want::All))
                .collect(),
        }];
        let _lock = sopsim_infer::compute::compute_lock();
        let mut out = self
            .model
            .forward(&mut transformer::Scratch::default(), &mut segment)?;
        Ok(out.pop().unwrap_or_default())
    }

    /// The weight bytes one token of single-stream decode reads (its roofline's
    /// denominator; see [`Model::decode_bytes`]).
    pub fn decode_bytes(&self) -> usize {
        self.model.decode_bytes()
    }

    /// The architecture and the kernels in use, for logs and benchmarks.
    pub fn describe(&self) -> String {
        let s = &self.model.shape;
        format!(
            "{} ({}, {} layers, {} dims, {} kernels)",
            self.name,
            s.arch.name(),
            s.layers,
            s.dim,
            self.model.kernels().name()
        )
    }
}

/// Exact token counts with the model's own tokenizer.
pub struct TokenizerCounter(pub Tokenizer);

impl TokenCounter for TokenizerCounter {
    fn count(&self, text: &str) -> usize {
        self.0
            .encode(text, false)
            .map(|e| e.len())
            .unwrap_or_else(|_| sopsim_core::tokens::Estimator.count(text))
    }
    fn exact(&self) -> bool {
        true
    }
}

/// The local backend: a handle on the model's worker thread.
pub struct LocalBackend {
    queue: mpsc::Sender<Job>,
    name: String,
    tokenizer: Tokenizer,
}

impl LocalBackend {
    /// Loads the model (and its draft model, if the options name one) and starts its
    /// worker thread.
    pub fn start(path: &Path, options: LocalOptions) -> Result<Self, LoadError> {
        let loaded = LocalModel::load(path)?;
        let draft = match &options.draft_model {
            Some(d) => Some(Self::draft_for(&loaded, d)?),
            None => None,
        };
        Self::serve(loaded, options, draft).map_err(|e| LoadError {
            path: path.to_path_buf(),
            source: LoadProblem::Thread(e),
        })
    }

    /// The draft model at `path`, which must share `target`'s vocabulary.
    fn draft_for(target: &LocalModel, path: &Path) -> Result<Model, LoadError> {
        let draft = LocalModel::load(path)?;
        let refuse = |why: String| LoadError {
            path: path.to_path_buf(),
            source: LoadProblem::Draft {
                draft: path.to_path_buf(),
                why,
            },
        };
        let (a, b) = (
            target.text.tokenizer.get_vocab_size(true),
            draft.text.tokenizer.get_vocab_size(true),
        );
        if a != b || target.text.special.eos_id != draft.text.special.eos_id {
            return Err(refuse(format!(
                "its vocabulary ({b} tokens) is not the model's ({a} tokens)"
            )));
        }
        Ok(draft.model)
    }

    /// Starts a worker thread for a loaded model, with its draft model if any.
    pub fn serve(
        loaded: LocalModel,
        options: LocalOptions,
        draft: Option<Model>,
    ) -> std::io::Result<Self> {
        let name = loaded.name.clone();
        let tokenizer = loaded.text.tokenizer.clone();
        let (queue, jobs) = mpsc::channel::<Job>();
        let worker = Worker::new(loaded.model, loaded.text, options, loaded.name, draft);
        std::thread::Builder::new()
            .name("sopsim-llm".into())
            .spawn(move || worker.run(jobs))?;
        Ok(Self {
            queue,
            name,
            tokenizer,
        })
    }

    /// A token counter with this model's tokenizer.
    pub fn counter(&self) -> Arc<dyn TokenCounter> {
        Arc::new(sopsim_core::tokens::Cached::new(TokenizerCounter(
            self.tokenizer.clone(),
        )))
    }
}

impl LlmBackend for LocalBackend {
    fn describe(&self) -> String {
        format!("local:{}", self.name)
    }

    /// A reply's candidates are decoded in one batch, their prompt read once.
    fn candidates(&self) -> u32 {
        sopsim_core::quality::DEFAULT_CANDIDATES
    }

    fn forbids(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let stopped = || {
                LlmError::failed(
                    format!("local:{}", self.name),
                    "the model thread has stopped",
                )
            };
            let (reply, rx) = oneshot::channel();
            self.queue
                .send(Job {
                    request,
                    stream,
                    reply,
                })
                .map_err(|_| stopped())?;
            rx.await.map_err(|_| stopped())?
        })
    }
}
