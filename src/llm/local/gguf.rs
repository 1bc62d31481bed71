//! Reading a GGUF file's metadata: the model's shape, its tokenizer and its chat template.

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

/// The architecture facts the forward pass needs.
#[derive(Debug, Clone)]
pub struct LlamaShape {
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    pub context: usize,
}

pub(crate) fn meta<'a>(ct: &'a Content, key: &str) -> Result<&'a Value, String> {
    ct.metadata
        .get(key)
        .ok_or_else(|| format!("GGUF metadata has no {key}"))
}

fn meta_usize(ct: &Content, key: &str) -> Result<usize, String> {
    let v = meta(ct, key)?;
    v.to_u32()
        .map(|v| v as usize)
        .or_else(|_| v.to_u64().map(|v| v as usize))
        .map_err(|e| format!("{key}: {e}"))
}

impl LlamaShape {
    pub fn read(ct: &Content) -> Result<Self, String> {
        let arch = meta(ct, "general.architecture")?
            .to_string()
            .map_err(|e| e.to_string())?
            .clone();
        if arch != "llama" {
            return Err(format!(
                "architecture {arch:?} is not supported (llama-architecture GGUF files only)"
            ));
        }
        let dim = meta_usize(ct, "llama.embedding_length")?;
        let heads = meta_usize(ct, "llama.attention.head_count")?;
        let kv_heads = meta_usize(ct, "llama.attention.head_count_kv").unwrap_or(heads);
        let head_dim = meta_usize(ct, "llama.rope.dimension_count").unwrap_or(dim / heads);
        let f = |key: &str, default: f32| {
            meta(ct, key)
                .and_then(|v| v.to_f32().map_err(|e| e.to_string()))
                .unwrap_or(default)
        };
        Ok(Self {
            layers: meta_usize(ct, "llama.block_count")?,
            heads,
            kv_heads,
            head_dim,
            rms_eps: f("llama.attention.layer_norm_rms_epsilon", 1e-5),
            rope_base: f("llama.rope.freq_base", 10_000.0),
            context: meta_usize(ct, "llama.context_length").unwrap_or(2048),
        })
    }
}

/// The special tokens generation needs.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    pub bos: Option<String>,
    pub eos: String,
    pub eos_id: u32,
    /// Every control token (`<|im_end|>`…): generation stops at any of them.
    pub stop_ids: Vec<u32>,
}

/// Builds the tokenizer from `tokenizer.ggml.*`. For GPT-2-style BPE vocabularies the
/// pre-tokenizer follows `tokenizer.ggml.pre` (candle's own GGUF tokenizer ignores it and
/// adds a prefix space, which gives wrong ids for SmolLM2); others use candle's.
pub fn tokenizer(ct: &Content) -> Result<(Tokenizer, SpecialTokens), String> {
    let tokens: Vec<String> = meta(ct, "tokenizer.ggml.tokens")?
        .to_vec()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let types: Vec<i32> = meta(ct, "tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().map_err(|e| e.to_string()))
        .map(|v| v.iter().map(|t| t.to_i32().unwrap_or(1)).collect())
        .unwrap_or_default();
    let model = meta(ct, "tokenizer.ggml.model")?
        .to_string()
        .map_err(|e| e.to_string())?
        .clone();
    let mut tok = if model == "gpt2" {
        let merges: Vec<(String, String)> = meta(ct, "tokenizer.ggml.merges")?
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .filter_map(|v| {
                v.to_string()
                    .ok()?
                    .split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
            })
            .collect();
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| e.to_string())?;
        let mut tok = Tokenizer::new(bpe);
        let pre = meta(ct, "tokenizer.ggml.pre")
            .and_then(|v| v.to_string().map_err(|e| e.to_string()).cloned())
            .unwrap_or_default();
        let byte_level = ByteLevel::new(false, true, true);
        if pre == "smollm" {
            tok.with_pre_tokenizer(Some(Sequence::new(vec![
                Digits::new(true).into(),
                byte_level.into(),
            ])));
        } else {
            tok.with_pre_tokenizer(Some(byte_level));
        }
        tok.with_decoder(Some(ByteLevelDecoder::default()));
        tok
    } else {
        <Tokenizer as candle_core::quantized::tokenizer::TokenizerFromGguf>::from_gguf(ct)
            .map_err(|e| e.to_string())?
    };
    let control: Vec<u32> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| **t == 3)
        .map(|(i, _)| i as u32)
        .collect();
    tok.add_special_tokens(
        control
            .iter()
            .map(|&i| AddedToken::from(tokens[i as usize].clone(), true)),
    )
    .map_err(|e| e.to_string())?;
    let id = |key: &str| meta(ct, key).ok().and_then(|v| v.to_u32().ok());
    let eos_id = id("tokenizer.ggml.eos_token_id")
        .ok_or("GGUF metadata has no tokenizer.ggml.eos_token_id")?;
    let name = |i: u32| tokens.get(i as usize).cloned();
    let mut stop_ids = control.clone();
    if !stop_ids.contains(&eos_id) {
        stop_ids.push(eos_id);
    }
    let special = SpecialTokens {
        bos: id("tokenizer.ggml.bos_token_id").and_then(name),
        eos: name(eos_id).unwrap_or_default(),
        eos_id,
        stop_ids,
    };
    Ok((tok, special))
}

/// The model's chat template (Jinja), if the file has one.
pub fn chat_template(ct: &Content) -> Option<String> {
    meta(ct, "tokenizer.chat_template")
        .ok()?
        .to_string()
        .ok()
        .cloned()
}
