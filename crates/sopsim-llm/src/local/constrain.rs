//! Decoding under a JSON Schema with llguidance (the constrained-decoding library
//! llama.cpp uses): at each step, tokens the schema cannot continue with are masked
//! out, so even a small model's tool decision parses and validates.
//!
//! The token trie is built once per model from its byte-level BPE vocabulary: each
//! token's bytes (GPT-2's byte-to-character map undone), special tokens marked as
//! llguidance expects, and the rows past the vocabulary never allowed.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use tokenizers::Tokenizer;

/// Why decoding under a schema failed. A matcher's own complaint about a schema is
/// text (llguidance's `get_error`); its other errors are kept with their causes.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConstrainError {
    #[error("the schema could not be compiled")]
    SchemaPanicked,
    #[error("{0}")]
    Schema(String),
    #[error("the constraint failed")]
    Panicked,
    #[error("the model has no stop token within its vocabulary")]
    NoStopToken,
    #[error("the vocabulary could not be made into a token trie")]
    Trie,
    #[error("the parser could not be built over the vocabulary")]
    Factory(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Matcher(Box<dyn std::error::Error + Send + Sync>),
}

/// What a model needs to decode under schemas: the parser factory over its vocabulary.
pub(super) struct Constraints {
    factory: Arc<ParserFactory>,
}

struct Env {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.tokenizer
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default()
        })
    }
}

/// GPT-2's printable character for each byte, reversed.
fn byte_of_char() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut next = 0x100u32;
    for b in 0..=255u8 {
        let c = b as char;
        if matches!(c, '!'..='~' | '\u{A1}'..='\u{AC}' | '\u{AE}'..='\u{FF}') {
            map.insert(c, b);
        } else if let Some(c) = char::from_u32(next) {
            map.insert(c, b);
            next += 1;
        }
    }
    map
}

impl Constraints {
    /// Builds the trie for a byte-level BPE `tokenizer` whose logits have `vocab_rows`
    /// entries; `stop_ids` end a reply.
    pub(super) fn new(
        tokenizer: &Tokenizer,
        vocab_rows: usize,
        stop_ids: &[u32],
    ) -> Result<Self, ConstrainError> {
        let bytes = byte_of_char();
        let added = tokenizer.get_added_tokens_decoder();
        let words: Vec<Vec<u8>> = (0..vocab_rows as u32)
            .map(|id| match (added.get(&id), tokenizer.id_to_token(id)) {
                (Some(t), _) if t.special => {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(t.content.as_bytes());
                    w
                }
                (Some(t), _) => t.content.as_bytes().to_vec(),
                (None, Some(token)) => token
                    .chars()
                    .map(|c| bytes.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_default(),
                // A row past the vocabulary: a special token nothing can produce.
                (None, None) => {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(format!("<[{id}]>").as_bytes());
                    w
                }
            })
            .collect();
        let stops: Vec<u32> = stop_ids
            .iter()
            .copied()
            .filter(|&s| (s as usize) < vocab_rows)
            .collect();
        let Some(&eos) = stops.first() else {
            return Err(ConstrainError::NoStopToken);
        };
        let built = catch_unwind(|| {
            let info = TokRxInfo::new(vocab_rows as u32, eos);
            TokTrie::from(&info, &words).with_eos_tokens(&stops)
        })
        .map_err(|_| ConstrainError::Trie)?;
        let env: TokEnv = Arc::new(Env {
            trie: built,
            tokenizer: tokenizer.clone(),
        });
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| ConstrainError::Factory(e.into()))?;
        factory.quiet();
        Ok(Self {
            factory: Arc::new(factory),
        })
    }

    /// A matcher for one generation under `schema`, compact JSON (no free whitespace,
    /// which small models fill with newlines).
    pub(super) fn matcher(&self, schema: &Value) -> Result<Matcher, ConstrainError> {
        let mut schema = schema.clone();
        if let Value::Object(o) = &mut schema {
            o.insert(
                "x-guidance".into(),
                json!({"whitespace_flexible": false, "lenient": true}),
            );
        }
        let factory = self.factory.clone();
        let m = catch_unwind(AssertUnwindSafe(|| {
            Matcher::new(factory.create_parser(TopLevelGrammar::from_json_schema(schema)))
        }))
        .map_err(|_| ConstrainError::SchemaPanicked)?;
        match m.get_error() {
            Some(e) => Err(ConstrainError::Schema(e)),
            None => Ok(m),
        }
    }
}

/// Sets the logits of tokens `m` does not allow next to −∞.
pub(super) fn mask(m: &mut Matcher, logits: &mut [f32]) -> Result<(), ConstrainError> {
    let allowed = catch_unwind(AssertUnwindSafe(|| m.compute_mask()))
        .map_err(|_| ConstrainError::Panicked)?
        .map_err(|e| ConstrainError::Matcher(e.into()))?;
    let n = logits.len();
    allowed.iter_unset_entries(|i| {
        if i < n {
            logits[i] = f32::NEG_INFINITY;
        }
    });
    Ok(())
}

/// Commits a sampled token; `Ok(true)` when the grammar is complete.
pub(super) fn consume(m: &mut Matcher, token: u32) -> Result<bool, ConstrainError> {
    catch_unwind(AssertUnwindSafe(|| m.consume_token(token)))
        .map_err(|_| ConstrainError::Panicked)?
        .map_err(|e| ConstrainError::Matcher(e.into()))?;
    Ok(m.is_stopped())
}
