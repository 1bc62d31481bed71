//! SentencePiece BPE (`tokenizer.ggml.model` = `llama`: Gemma's, Llama 2's) as a
//! Hugging Face tokenizer: spaces become `▁`, adjacent pieces merge highest score
//! first when their join is a piece (the merges are made from the scores, as
//! Hugging Face converts such a model), and text no piece covers falls back to its
//! bytes (`<0x0A>`).

use std::collections::HashMap;

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{Prepend, Replace};
use tokenizers::{NormalizerWrapper, Tokenizer};

use super::{GgufError, GgufFile, Value};

/// ggml's type of an ordinary piece.
const NORMAL: i64 = 1;

pub(super) fn tokenizer(
    f: &GgufFile,
    tokens: &[String],
    types: &[i64],
) -> Result<Tokenizer, GgufError> {
    let key = "tokenizer.ggml.scores";
    let scores = f
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| GgufError::meta(key, "missing or not an array"))?;
    if scores.len() != tokens.len() {
        return Err(GgufError::meta(
            key,
            format!("{} scores for {} tokens", scores.len(), tokens.len()),
        ));
    }
    let scores = scores
        .iter()
        .enumerate()
        .map(|(i, v)| match v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(GgufError::meta(
                key,
                format!("item {i} is not a finite number"),
            )),
        })
        .collect::<Result<Vec<f64>, _>>()?;
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| types[*i] == NORMAL)
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    // Every way an ordinary piece splits into two ordinary pieces is a merge, ranked by
    // the joined piece's score (highest first), then by the left part's length (the
    // order is then total: equal scores come out the same on every run).
    let mut merges: Vec<(f64, usize, usize, &str, &str)> = Vec::new();
    for (piece, &id) in &ids {
        for (at, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(at);
            if ids.contains_key(left) && ids.contains_key(right) {
                merges.push((scores[id], id, at, left, right));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let merges = merges
        .into_iter()
        .map(|(_, _, _, l, r)| (l.to_string(), r.to_string()))
        .collect();
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let unknown = f
        .get("tokenizer.ggml.unknown_token_id")
        .and_then(Value::as_u64)
        .and_then(|i| tokens.get(i as usize))
        .cloned()
        .unwrap_or_else(|| "<unk>".into());
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .unk_token(unknown)
        .fuse_unk(true)
        .byte_fallback(true)
        .build()
        .map_err(|e| GgufError::meta("tokenizer.ggml.tokens", e.to_string()))?;
    let mut tok = Tokenizer::new(bpe);
    let space = Replace::new(" ", "▁")
        .map_err(|e| GgufError::meta("tokenizer.ggml.model", e.to_string()))?;
    let prefix = f
        .get("tokenizer.ggml.add_space_prefix")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if prefix {
        normalizers.push(Prepend::new("▁".into()).into());
    }
    normalizers.push(space.into());
    tok.with_normalizer(Some(tokenizers::normalizers::Sequence::new(normalizers)))
        .map_err(|e| GgufError::meta("tokenizer.ggml.model", e.to_string()))?;
    let mut decoders = vec![
        Replace::new("▁", " ")
            .map_err(|e| GgufError::meta("tokenizer.ggml.model", e.to_string()))?
            .into(),
        ByteFallback::default().into(),
        Fuse::default().into(),
    ];
    if prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    tok.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tok)
}
