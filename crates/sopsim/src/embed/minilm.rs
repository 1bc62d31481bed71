//! The MiniLM embedder (`--embedder minilm`, the default): sentence-transformers'
//! all-MiniLM-L6-v2 on sopsim's own BERT encoder (`sopsim_infer::bert`: no padding, one
//! thread for a single message), mean pooling, then L2 normalisation, as
//! sentence-transformers computes it. The weights are read one tensor at a time, F16 and
//! BF16 converted to f32 (`safetensors.rs`).

use std::path::{Path, PathBuf};

use sopsim_infer::bert::{Bert, BertShape, Words};
use tokenizers::{Tokenizer, TruncationParams};

use super::{EmbedError, Embedder};

/// sentence-transformers' `max_seq_length` for this model.
const MAX_TOKENS: usize = 256;
/// Texts per forward pass: a pass holds every text's activations at once.
const CHUNK: usize = 64;

/// The all-MiniLM-L6-v2 sentence embedder with its tokenizer.
pub struct MiniLm {
    model: Bert,
    tokenizer: Tokenizer,
    dim: usize,
}

/// Why the MiniLM files cannot be used: the file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub(super) enum MiniLmError {
    #[error("{}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config.json")]
    ConfigJson(#[source] serde_json::Error),
    #[error("config.json")]
    Config(#[source] ConfigError),
    #[error("{}", .path.display())]
    Encoder {
        path: PathBuf,
        #[source]
        source: sopsim_infer::bert::WeightError,
    },
    #[error("tokenizer.json")]
    Tokenizer(#[source] tokenizers::Error),
    #[error("tokenizing")]
    Tokenizing(#[source] tokenizers::Error),
}

/// A `config.json` value the model code cannot build with.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConfigError {
    #[error("{name} is {value}; expected 1 to {max}")]
    OutOfRange {
        name: &'static str,
        value: usize,
        max: usize,
    },
    #[error("hidden_size {hidden} is not a multiple of num_attention_heads {heads}")]
    Heads { hidden: usize, heads: usize },
    #[error("layer_norm_eps is {0}")]
    Epsilon(f64),
}

fn failed(e: MiniLmError) -> EmbedError {
    EmbedError::failed("minilm", e)
}

/// What the encoder reads of a BERT `config.json` (Hugging Face's names; the rest of
/// the file, such as `hidden_act`, is the encoder's own and not read).
#[derive(Debug, serde::Deserialize)]
struct Config {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f64,
}

/// A BERT config the model code can build without dividing by zero or allocating
/// without bound (a real MiniLM: 384 wide, 6 layers, 12 heads, 30,522 tokens).
fn check_config(c: &Config) -> Result<(), ConfigError> {
    let within = |name: &'static str, value: usize, max: usize| {
        if (1..=max).contains(&value) {
            Ok(())
        } else {
            Err(ConfigError::OutOfRange { name, value, max })
        }
    };
    within("hidden_size", c.hidden_size, 8192)?;
    within("num_attention_heads", c.num_attention_heads, 256)?;
    within("num_hidden_layers", c.num_hidden_layers, 128)?;
    within("intermediate_size", c.intermediate_size, 65_536)?;
    within("vocab_size", c.vocab_size, 1 << 20)?;
    within(
        "max_position_embeddings",
        c.max_position_embeddings,
        1 << 16,
    )?;
    within("type_vocab_size", c.type_vocab_size, 1024)?;
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(ConfigError::Heads {
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
        });
    }
    if !(c.layer_norm_eps.is_finite() && c.layer_norm_eps >= 0.0) {
        return Err(ConfigError::Epsilon(c.layer_norm_eps));
    }
    Ok(())
}

/// A `tokenizer.json`'s tokenizer, set up as sentence-transformers runs it.
pub fn tokenizer_from_json(bytes: &[u8]) -> Result<Tokenizer, tokenizers::Error> {
    super::tokenizer_file::check(bytes)?;
    let mut tokenizer = Tokenizer::from_bytes(bytes)?;
    // The shipped tokenizer.json pads every text to 128 tokens and truncates at 128;
    // sentence-transformers truncates at 256, and the encoder needs no padding.
    tokenizer.with_padding(None);
    tokenizer.with_truncation(Some(TruncationParams {
        max_length: MAX_TOKENS,
        ..Default::default()
    }))?;
    Ok(tokenizer)
}

fn read(dir: &Path, name: &str, limit: u64) -> Result<Vec<u8>, EmbedError> {
    let path = dir.join(name);
    sopsim_core::files::read_bounded(&path, limit)
        .map_err(|source| failed(MiniLmError::Read { path, source }))
}

fn read_config(dir: &Path) -> Result<Config, EmbedError> {
    let config: Config = serde_json::from_slice(&read(dir, "config.json", 1 << 20)?)
        .map_err(|e| failed(MiniLmError::ConfigJson(e)))?;
    check_config(&config).map_err(|e| failed(MiniLmError::Config(e)))?;
    Ok(config)
}

impl MiniLm {
    /// MiniLM from `dir`, read on its first use: a run that never embeds (no retrieval,
    /// no stakes) never reads the weights. Its `config.json` is checked now.
    pub fn on_first_use(dir: &Path) -> Result<super::OnFirstUse, EmbedError> {
        let dim = read_config(dir)?.hidden_size;
        let dir = dir.to_path_buf();
        Ok(super::OnFirstUse::new(super::MINILM_NAME, dim, move || {
            Ok(std::sync::Arc::new(MiniLm::load(&dir)?))
        }))
    }

    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let read = |name: &str, limit: u64| read(dir, name, limit);
        let config = read_config(dir)?;
        let weights = dir.join("model.safetensors");
        let weights_failed = |source: std::io::Error| {
            failed(MiniLmError::Read {
                path: weights.clone(),
                source,
            })
        };
        let f32s = sopsim_infer::safetensors::F32Tensors::open(&weights).map_err(weights_failed)?;
        // A tensor that is there but cannot be read is that error, not a missing tensor.
        let unreadable = std::cell::RefCell::new(None);
        let read_tensor = |name: &str| -> Option<Vec<f32>> {
            match f32s.read(name)? {
                Ok(values) => Some(values),
                Err(e) => {
                    unreadable.borrow_mut().get_or_insert(e);
                    None
                }
            }
        };
        let shape = BertShape {
            vocab: config.vocab_size,
            hidden: config.hidden_size,
            layers: config.num_hidden_layers,
            heads: config.num_attention_heads,
            intermediate: config.intermediate_size,
            positions: config.max_position_embeddings,
            type_vocab: config.type_vocab_size,
            eps: config.layer_norm_eps as f32,
        };
        // The word embeddings stay in the file, read a row at a time.
        #[cfg(unix)]
        let words = f32s
            .place("embeddings.word_embeddings.weight")
            .or_else(|| f32s.place("bert.embeddings.word_embeddings.weight"))
            .map(|(offset, values)| {
                let file = f32s.file().try_clone()?;
                Words::in_file(file, offset, values)
            })
            .transpose()
            .map_err(weights_failed)?;
        #[cfg(not(unix))]
        let words = None;
        let model = Bert::new(shape, read_tensor, words);
        if let Some(e) = unreadable.take() {
            return Err(weights_failed(e));
        }
        let model = model.map_err(|source| {
            failed(MiniLmError::Encoder {
                path: weights.clone(),
                source,
            })
        })?;
        let tokenizer = tokenizer_from_json(&read("tokenizer.json", 64 << 20)?)
            .map_err(|e| failed(MiniLmError::Tokenizer(e)))?;
        Ok(Self {
            model,
            tokenizer,
            dim: config.hidden_size,
        })
    }

    fn forward(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| failed(MiniLmError::Tokenizing(e)))?;
        let ids: Vec<&[u32]> = enc.iter().map(|e| e.get_ids()).collect();
        Ok(self.model.embed(&ids))
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &str {
        super::MINILM_NAME
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(CHUNK) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            let vectors = {
                let _lock = sopsim_infer::compute::compute_lock();
                self.forward(&batch)?
            };
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
