//! GGUF model files: the container ([`GgufFile`]), and what the local model reads from
//! its metadata — the architecture's shape, the tokenizer and the chat template —
//! each value checked against sane limits before anything is allocated from it.

mod file;
mod sentencepiece;
mod tokenizer;

use std::path::PathBuf;

pub use file::{GgufFile, TensorInfo, Value};
pub use tokenizer::{tokenizer, SpecialTokens};

/// A GGUF file that cannot be used, with the key or tensor at fault.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be examined, opened or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file's path.
        path: PathBuf,
        /// What the system reported.
        source: std::io::Error,
    },
    /// The path names something other than a regular file (a directory, a FIFO, a device).
    #[error("{0}: not a regular file")]
    NotARegularFile(PathBuf),
    /// The bytes are not a well-formed GGUF file of a supported version.
    #[error("{0}")]
    Format(String),
    /// A metadata value that is missing, malformed or outside what sopsim supports.
    #[error("metadata {key}: {message}")]
    Meta {
        /// The metadata key.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A tensor that is missing, listed twice, or has the wrong dimensions, place or values.
    #[error("tensor {name}: {message}")]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tensor whose type or bytes cannot be computed with.
    #[error("tensor {name}")]
    Weight {
        /// The tensor's name (or "every weight" for their joint allocation).
        name: String,
        /// Why its bytes cannot be used.
        #[source]
        source: crate::error::WeightError,
    },
}

impl GgufError {
    /// A format error met while reading the value of `key`, named by that key.
    fn at_key(self, key: &str) -> Self {
        match self {
            GgufError::Format(message) => GgufError::Meta {
                key: key.to_string(),
                message,
            },
            other => other,
        }
    }

    pub(crate) fn meta(key: &str, message: impl Into<String>) -> Self {
        GgufError::Meta {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// The transformer families the forward pass implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama: rotary embedding on interleaved pairs (as GGUF stores llama's Q and K).
    Llama,
    /// Qwen2: biases on Q, K and V; rotary embedding on the two halves (NeoX style).
    Qwen2,
    /// Qwen3: as Qwen2 without the biases, with each head's Q and K RMS-normalised
    /// before the rotary embedding, and heads whose width need not divide the
    /// embedding.
    Qwen3,
    /// Gemma 3: the embedding scaled by √dim, Q/K norms as Qwen3, norms after attention
    /// and after the MLP too, a GELU-gated MLP, and five sliding-window layers (their own
    /// rotary base) to each global one.
    Gemma3,
}

impl Arch {
    /// The architecture's name in GGUF metadata (`general.architecture`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }
}

/// The largest number of positions sopsim runs a model at, whatever it was trained for.
pub const MAX_POSITIONS: usize = 32_768;

/// The architecture facts the forward pass needs, all checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelShape {
    /// The transformer family.
    pub arch: Arch,
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the embedding and the residual stream.
    pub dim: usize,
    /// Query heads per layer.
    pub heads: usize,
    /// Key and value heads per layer (a divisor of `heads`).
    pub kv_heads: usize,
    /// Width of each attention head.
    pub head_dim: usize,
    /// Width of the feed-forward layer.
    pub ffn: usize,
    /// The RMS norms' epsilon.
    pub rms_eps: f32,
    /// Rotary embedding base of the global-attention layers.
    pub rope_base: f32,
    /// Positions the model runs at: its trained context, at most [`MAX_POSITIONS`].
    pub positions: usize,
    /// Set where some layers attend only to the latest positions (Gemma 3).
    pub window: Option<Window>,
}

/// Sliding-window attention: which layers have it, how far they see, and their
/// rotary base.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Positions a windowed layer's row sees: its own and the `size − 1` before it.
    pub size: usize,
    /// Every `period`-th layer (the last of each group) is global; the rest windowed.
    pub period: usize,
    /// Rotary embedding base of the windowed layers.
    pub rope_base: f32,
}

impl Window {
    /// Whether layer `layer` (from 0) is a windowed one.
    pub fn covers(&self, layer: usize) -> bool {
        !(layer + 1).is_multiple_of(self.period)
    }
}

fn get_usize(
    f: &GgufFile,
    key: &str,
    default: Option<usize>,
    max: usize,
) -> Result<usize, GgufError> {
    let v = match (f.get(key), default) {
        (Some(v), _) => v
            .as_u64()
            .ok_or_else(|| GgufError::meta(key, format!("{v:?} is not a non-negative integer")))?,
        (None, Some(d)) => return Ok(d),
        (None, None) => return Err(GgufError::meta(key, "missing")),
    };
    match usize::try_from(v) {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(GgufError::meta(key, format!("{v} is outside 1..={max}"))),
    }
}

fn get_f32(
    f: &GgufFile,
    key: &str,
    default: f32,
    range: std::ops::RangeInclusive<f32>,
) -> Result<f32, GgufError> {
    let Some(v) = f.get(key) else {
        return Ok(default);
    };
    match v.as_f64().map(|v| v as f32) {
        Some(x) if x.is_finite() && range.contains(&x) => Ok(x),
        _ => Err(GgufError::meta(
            key,
            format!(
                "{v:?} is not a number in {}..={}",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// What a refusal of an architecture or tokenizer adds: where such a model runs.
pub(crate) const ANY_MODEL: &str =
    "an OpenAI-compatible server, such as llama.cpp's, runs any model";

impl ModelShape {
    /// Reads the shape from `f`'s metadata, refusing an unsupported architecture, an
    /// inconsistent or out-of-range value, and scaled rotary positions.
    pub fn read(f: &GgufFile) -> Result<Self, GgufError> {
        let key = "general.architecture";
        let arch = match f.get(key).and_then(Value::as_str) {
            Some("llama") => Arch::Llama,
            Some("qwen2") => Arch::Qwen2,
            Some("qwen3") => Arch::Qwen3,
            Some("gemma3") => Arch::Gemma3,
            Some(other) => {
                return Err(GgufError::meta(
                    key,
                    format!(
                    "{other:?} is not supported (llama, qwen2, qwen3 and gemma3 are; {ANY_MODEL})"
                ),
                ))
            }
            None => return Err(GgufError::meta(key, "missing or not a string")),
        };
        let a = arch.name();
        let k = |name: &str| format!("{a}.{name}");
        let dim = get_usize(f, &k("embedding_length"), None, 1 << 16)?;
        let heads = get_usize(f, &k("attention.head_count"), None, 1024)?;
        let kv_heads = get_usize(f, &k("attention.head_count_kv"), Some(heads), heads)?;
        if heads % kv_heads != 0 {
            return Err(GgufError::meta(
                &k("attention.head_count_kv"),
                format!("{kv_heads} does not divide the {heads} query heads"),
            ));
        }
        let head_dim = match f.get(&k("attention.key_length")) {
            Some(_) => {
                let key_length = get_usize(f, &k("attention.key_length"), None, 1 << 12)?;
                let value_key = k("attention.value_length");
                if get_usize(f, &value_key, Some(key_length), 1 << 12)? != key_length {
                    return Err(GgufError::meta(
                        &value_key,
                        "differs from attention.key_length (not supported)",
                    ));
                }
                key_length
            }
            None if dim % heads != 0 => {
                return Err(GgufError::meta(
                    &k("attention.head_count"),
                    format!("{heads} heads do not divide the embedding length {dim}"),
                ));
            }
            None => dim / heads,
        };
        let rope_key = k("rope.dimension_count");
        let rope_dims = get_usize(f, &rope_key, Some(head_dim), 1 << 16)?;
        if rope_dims != head_dim || head_dim % 2 != 0 {
            return Err(GgufError::meta(
                &rope_key,
                format!("{rope_dims} rotary dimensions for heads of {head_dim} (only full, even rotary dimensions are supported)"),
            ));
        }
        let context = get_usize(f, &k("context_length"), Some(2048), usize::MAX)?;
        refuse_scaled_positions(f, a)?;
        Ok(Self {
            arch,
            layers: get_usize(f, &k("block_count"), None, 1024)?,
            dim,
            heads,
            kv_heads,
            head_dim,
            ffn: get_usize(f, &k("feed_forward_length"), None, 1 << 20)?,
            rms_eps: get_f32(f, &k("attention.layer_norm_rms_epsilon"), 1e-5, 0.0..=1.0)?,
            rope_base: get_f32(f, &k("rope.freq_base"), 10_000.0, 1.0..=1e12)?,
            positions: context.min(MAX_POSITIONS),
            window: match arch {
                // llama.cpp's pattern for Gemma 3: five windowed layers, then a global one.
                Arch::Gemma3 => Some(Window {
                    size: get_usize(f, &k("attention.sliding_window"), None, MAX_POSITIONS)?,
                    period: 6,
                    rope_base: 10_000.0,
                }),
                _ => None,
            },
        })
    }
}

/// Refuses a file whose rotary positions are scaled by a rule the forward pass does
/// not apply (linear, YaRN): such a model would run with every position computed
/// wrongly, without a word. Llama 3's per-pair factors (`rope_freqs`) are applied.
fn refuse_scaled_positions(f: &GgufFile, arch: &str) -> Result<(), GgufError> {
    let scaling = format!("{arch}.rope.scaling.type");
    match f.get(&scaling).and_then(Value::as_str) {
        None | Some("none") => {}
        Some(other) => {
            return Err(GgufError::meta(
                &scaling,
                format!("{other:?}: scaled rotary positions are not supported yet"),
            ))
        }
    }
    for key in [
        format!("{arch}.rope.scaling.factor"),
        format!("{arch}.rope.scale_linear"),
    ] {
        if let Some(v) = f.get(&key) {
            if v.as_f64().is_some_and(|x| x != 0.0 && x != 1.0) {
                return Err(GgufError::meta(
                    &key,
                    format!("{v:?}: scaled rotary positions are not supported yet"),
                ));
            }
        }
    }
    Ok(())
}

/// The model's chat template (Jinja), if the file has one; Gemma's turns for a Gemma
/// file without one (its pretrained models carry none, but know the turn tokens).
pub fn chat_template(f: &GgufFile) -> Option<String> {
    match f.get("tokenizer.chat_template").and_then(Value::as_str) {
        Some(t) => Some(t.to_string()),
        None if f.get("general.architecture").and_then(Value::as_str) == Some("gemma3") => {
            Some(GEMMA_TURNS.to_string())
        }
        None => None,
    }
}

/// Gemma's chat format: the system message opens the first user turn; the assistant
/// is `model`.
const GEMMA_TURNS: &str = "{{ bos_token }}\
{% set first = messages[0]['content'] + '\\n\\n' if messages[0]['role'] == 'system' else '' %}\
{% for m in (messages[1:] if messages[0]['role'] == 'system' else messages) %}\
<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n\
{{ (first if loop.first else '') + m['content'] | trim }}<end_of_turn>\n\
{% endfor %}\
{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";

/// Hostile files, each a few hundred bytes of metadata: every one is refused with the
/// key or tensor at fault, never a panic, an abort or a huge allocation.
#[cfg(test)]
mod hostile {
    use super::file::tests::write_gguf;
    use super::*;

    fn shape_metadata() -> Vec<(&'static str, Value)> {
        vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.embedding_length", Value::U32(64)),
            ("llama.attention.head_count", Value::U32(8)),
            ("llama.block_count", Value::U32(1)),
            ("llama.feed_forward_length", Value::U32(128)),
        ]
    }

    fn with(key: &'static str, value: Value) -> Vec<(&'static str, Value)> {
        let mut m: Vec<_> = shape_metadata()
            .into_iter()
            .filter(|(k, _)| *k != key)
            .collect();
        m.push((key, value));
        m
    }

    fn file(
        metadata: &[(&str, Value)],
        tensors: &[(&str, Vec<u64>, u32, Vec<u8>)],
    ) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, write_gguf(metadata, tensors)).unwrap();
        (dir, path)
    }

    fn shape_error(metadata: &[(&str, Value)]) -> String {
        let (_dir, path) = file(metadata, &[]);
        ModelShape::read(&GgufFile::open(&path).unwrap())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn impossible_shapes_are_refused_by_key() {
        assert!(
            ModelShape::read(&GgufFile::open(&file(&shape_metadata(), &[]).1).unwrap()).is_ok()
        );
        for (key, value) in [
            ("llama.attention.head_count", Value::U32(0)),
            ("llama.attention.head_count_kv", Value::U32(0)),
            ("llama.block_count", Value::U64(1 << 40)),
            ("llama.block_count", Value::U64(1 << 60)),
            ("llama.rope.dimension_count", Value::U64(1 << 31)),
            ("llama.embedding_length", Value::U64(u64::MAX)),
            ("llama.feed_forward_length", Value::I64(-1)),
            (
                "llama.attention.layer_norm_rms_epsilon",
                Value::F32(f32::NAN),
            ),
        ] {
            let e = shape_error(&with(key, value.clone()));
            assert!(e.contains(key), "{key} = {value:?}: {e}");
        }
    }

    #[test]
    fn scaled_rotary_positions_are_refused_rather_than_run_wrongly() {
        for (key, value) in [
            ("llama.rope.scaling.type", Value::String("yarn".into())),
            ("llama.rope.scaling.factor", Value::F32(8.0)),
        ] {
            let e = shape_error(&with(key, value));
            assert!(e.contains(key) && e.contains("not supported"), "{e}");
        }
        let none = with("llama.rope.scaling.type", Value::String("none".into()));
        let (_dir, path) = file(&none, &[]);
        assert!(ModelShape::read(&GgufFile::open(&path).unwrap()).is_ok());
    }

    #[test]
    fn another_architecture_or_tokenizer_is_refused_saying_what_runs_it() {
        let e = shape_error(&with("general.architecture", Value::String("phi3".into())));
        for says in [
            "general.architecture",
            "\"phi3\"",
            "llama, qwen2, qwen3 and gemma3",
            "OpenAI-compatible",
        ] {
            assert!(e.contains(says), "{says}: {e}");
        }
        let (_dir, path) = file(
            &[("tokenizer.ggml.model", Value::String("bert".into()))],
            &[],
        );
        let e = tokenizer(&GgufFile::open(&path).unwrap(), 10)
            .unwrap_err()
            .to_string();
        for says in [
            "tokenizer.ggml.model",
            "\"bert\"",
            "\"gpt2\"",
            "\"llama\"",
            "OpenAI-compatible",
        ] {
            assert!(e.contains(says), "{says}: {e}");
        }
    }

    #[test]
    fn a_token_type_list_longer_than_the_tokens_is_refused() {
        let tokens = Value::Array(vec![Value::String("a".into()), Value::String("b".into())]);
        let types = Value::Array(vec![Value::I32(1); 5]);
        let (_dir, path) = file(
            &[
                ("tokenizer.ggml.model", Value::String("gpt2".into())),
                ("tokenizer.ggml.tokens", tokens),
                ("tokenizer.ggml.token_type", types),
                (
                    "tokenizer.ggml.merges",
                    Value::Array(vec![Value::String("a b".into())]),
                ),
            ],
            &[],
        );
        let e = tokenizer(&GgufFile::open(&path).unwrap(), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokenizer.ggml.token_type"), "{e}");
    }

    #[test]
    fn a_tensor_of_impossible_size_is_refused_by_name() {
        let huge = vec![1u64 << 62, 1u64 << 62];
        let (_dir, path) = file(
            &shape_metadata(),
            &[("token_embd.weight", huge, 0, vec![0u8; 32])],
        );
        let e = crate::transformer::Model::load(&path)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("token_embd.weight"), "{e}");
    }

    /// The tiny Qwen3 file (`tests/reference/tiny_models.py`) written again with
    /// `change` applied to its metadata.
    fn tiny_qwen3_with(change: impl Fn(&mut Vec<(String, Value)>)) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/reference/tiny/qwen3.gguf");
        let f = GgufFile::open(&path).unwrap();
        let mut metadata: Vec<(String, Value)> = f
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        metadata.sort_by(|a, b| a.0.cmp(&b.0));
        change(&mut metadata);
        let tensors: Vec<(&str, Vec<u64>, u32, Vec<u8>)> = f
            .order
            .iter()
            .map(|name| {
                let t = &f.tensors[name];
                let ty = crate::quant::WeightType::from_ggml(t.ggml_type).unwrap();
                let rows: u64 = t.dims[1..].iter().product();
                let len = ty.row_bytes(t.dims[0] as usize) * rows as usize;
                let data = f.slice(t.start, len).unwrap().to_vec();
                (name.as_str(), t.dims.clone(), t.ggml_type, data)
            })
            .collect();
        let metadata: Vec<(&str, Value)> = metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        write_gguf(&metadata, &tensors)
    }

    fn load_error(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).unwrap();
        match crate::transformer::Model::load(&path) {
            Ok(model) => tokenizer(model.file(), model.vocab)
                .map(|_| ())
                .expect_err("refused")
                .to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_damaged_model_is_refused_naming_what_is_wrong() {
        let whole = tiny_qwen3_with(|_| {});
        assert!(crate::transformer::Model::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/reference/tiny/qwen3.gguf")
        )
        .is_ok());
        // Cut short: the tensors run past the end.
        let e = load_error(&whole[..whole.len() * 2 / 3]);
        assert!(e.contains("past the end") || e.contains("truncated"), "{e}");
        // Tensors that do not fit the shape the metadata gives.
        let e = load_error(&tiny_qwen3_with(|m| {
            for (k, v) in m.iter_mut() {
                if k == "qwen3.feed_forward_length" {
                    *v = Value::U32(96);
                }
            }
        }));
        assert!(
            e.contains("blk.0.ffn_gate.weight") && e.contains("dimensions"),
            "{e}"
        );
        // More tokens than the embedding has rows.
        let e = load_error(&tiny_qwen3_with(|m| {
            for (k, v) in m.iter_mut() {
                if let (
                    "tokenizer.ggml.tokens" | "tokenizer.ggml.token_type",
                    Value::Array(items),
                ) = (k.as_str(), v)
                {
                    let extra = items[0].clone();
                    items.extend(std::iter::repeat_n(extra, 40));
                }
            }
        }));
        assert!(
            e.contains("tokenizer.ggml.tokens") && e.contains("rows"),
            "{e}"
        );
    }
}
