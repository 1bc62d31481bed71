//! The tokenizer from `tokenizer.ggml.*`: GPT-2-style byte-level BPE with the
//! pre-tokenizer the file names (`tokenizer.ggml.pre`), as llama.cpp builds it, or
//! SentencePiece BPE (`llama`, Gemma's) from the pieces' scores.
//! (candle's own GGUF tokenizer ignores `pre` for SmolLM2 and adds a prefix space,
//! which gives wrong ids.)

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::tokenizer::SplitDelimiterBehavior;
use tokenizers::{AddedToken, Tokenizer};

use super::{GgufError, GgufFile, Value};

/// Qwen2's split pattern (its `tokenizer.json`), digits one by one.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's, digits in groups of up to three.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// ggml token types.
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

/// The special tokens generation needs.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    /// The beginning-of-sequence token's text, if the file names one.
    pub bos: Option<String>,
    /// The end-of-sequence token's text.
    pub eos: String,
    /// The end-of-sequence token's id.
    pub eos_id: u32,
    /// Every control token (`<|im_end|>`…): generation stops at any of them.
    pub stop_ids: Vec<u32>,
    /// `</think>`, in a model that thinks before it answers (Qwen3).
    pub think_end: Option<u32>,
}

fn strings(f: &GgufFile, key: &str) -> Result<Vec<String>, GgufError> {
    let items = f
        .get(key)
        .ok_or_else(|| GgufError::meta(key, "missing"))?
        .as_array()
        .ok_or_else(|| GgufError::meta(key, "not an array"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| GgufError::meta(key, format!("item {i} is not a string")))
        })
        .collect()
}

fn split(pattern: &str) -> Result<PreTokenizerWrapper, GgufError> {
    let s = Split::new(
        SplitPattern::Regex(pattern.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| GgufError::meta("tokenizer.ggml.pre", e.to_string()))?;
    Ok(s.into())
}

/// Builds the tokenizer, and reads the special tokens. `vocab_rows` is the number of
/// rows of the token embedding: every token id must have one.
pub fn tokenizer(f: &GgufFile, vocab_rows: usize) -> Result<(Tokenizer, SpecialTokens), GgufError> {
    let model_key = "tokenizer.ggml.model";
    let sentencepiece = match f.get(model_key).and_then(Value::as_str) {
        Some("gpt2") => false,
        Some("llama") => true,
        Some(other) => {
            return Err(GgufError::meta(
                model_key,
                format!(
                    "{other:?} is not supported (GPT-2-style byte-level BPE, \"gpt2\", and SentencePiece BPE, \"llama\", are; {})",
                    super::ANY_MODEL
                ),
            ))
        }
        None => return Err(GgufError::meta(model_key, "missing or not a string")),
    };
    let tokens = strings(f, "tokenizer.ggml.tokens")?;
    if tokens.is_empty() || tokens.len() > vocab_rows {
        return Err(GgufError::meta(
            "tokenizer.ggml.tokens",
            format!(
                "{} tokens for an embedding of {vocab_rows} rows",
                tokens.len()
            ),
        ));
    }
    let types_key = "tokenizer.ggml.token_type";
    let types: Vec<i64> = match f.get(types_key) {
        None => vec![1; tokens.len()],
        Some(v) => {
            let items = v
                .as_array()
                .ok_or_else(|| GgufError::meta(types_key, "not an array"))?;
            if items.len() != tokens.len() {
                return Err(GgufError::meta(
                    types_key,
                    format!("{} entries for {} tokens", items.len(), tokens.len()),
                ));
            }
            items.iter().map(|t| t.as_i64().unwrap_or(1)).collect()
        }
    };
    let mut tok = match sentencepiece {
        true => super::sentencepiece::tokenizer(f, &tokens, &types)?,
        false => byte_level(f, &tokens)?,
    };
    // Control and user-defined tokens are matched whole in the text (the chat template
    // writes them); control tokens also end a generation.
    let special: Vec<u32> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| **t == CONTROL || **t == USER_DEFINED)
        .map(|(i, _)| i as u32)
        .collect();
    tok.add_special_tokens(
        special
            .iter()
            .map(|&i| AddedToken::from(tokens[i as usize].clone(), true)),
    )
    .map_err(|e| GgufError::meta(types_key, e.to_string()))?;
    let id = |key: &str| -> Result<Option<u32>, GgufError> {
        match f.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().and_then(|i| u32::try_from(i).ok()) {
                Some(i) if (i as usize) < tokens.len() => Ok(Some(i)),
                _ => Err(GgufError::meta(key, format!("{v:?} is not a token id"))),
            },
        }
    };
    let eos_key = "tokenizer.ggml.eos_token_id";
    let eos_id = id(eos_key)?.ok_or_else(|| GgufError::meta(eos_key, "missing"))?;
    let mut stop_ids: Vec<u32> = special
        .iter()
        .copied()
        .filter(|&i| types[i as usize] == CONTROL)
        .collect();
    if !stop_ids.contains(&eos_id) {
        stop_ids.push(eos_id);
    }
    let name = |i: u32| tokens[i as usize].clone();
    let special = SpecialTokens {
        bos: id("tokenizer.ggml.bos_token_id")?.map(name),
        eos: name(eos_id),
        eos_id,
        stop_ids,
        think_end: special
            .iter()
            .copied()
            .find(|&i| tokens[i as usize] == "</think>"),
    };
    Ok((tok, special))
}

/// GPT-2-style byte-level BPE from the file's merges, with the pre-tokenizer it names.
fn byte_level(f: &GgufFile, tokens: &[String]) -> Result<Tokenizer, GgufError> {
    let merges_key = "tokenizer.ggml.merges";
    let merges = strings(f, merges_key)?
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| GgufError::meta(merges_key, format!("item {i} is not two tokens")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| GgufError::meta(merges_key, e.to_string()))?;
    let mut tok = Tokenizer::new(bpe);
    let pre = f
        .get("tokenizer.ggml.pre")
        .and_then(Value::as_str)
        .unwrap_or("gpt2");
    let gpt2_bytes = ByteLevel::new(false, true, true);
    let raw_bytes = ByteLevel::new(false, false, false);
    let pre_tokenizer: PreTokenizerWrapper = match pre {
        "smollm" => Sequence::new(vec![Digits::new(true).into(), gpt2_bytes.into()]).into(),
        "qwen2" => {
            tok.with_normalizer(Some(NFC))
                .map_err(|e| GgufError::meta("tokenizer.ggml.pre", e.to_string()))?;
            Sequence::new(vec![split(QWEN2)?, raw_bytes.into()]).into()
        }
        "llama3" | "llama-bpe" | "smaug-bpe" => {
            Sequence::new(vec![split(LLAMA3)?, raw_bytes.into()]).into()
        }
        _ => gpt2_bytes.into(),
    };
    tok.with_pre_tokenizer(Some(pre_tokenizer));
    tok.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(tok)
}
