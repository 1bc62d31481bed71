//! Counting tokens for a server's model: OpenAI's own tokenizers (through tiktoken-rs)
//! for OpenAI's models, else the conservative [`Estimator`].

use std::sync::Arc;

use crate::tokens::{Estimator, TokenCounter};

/// Exact counts with one of OpenAI's tokenizers.
struct Tiktoken(&'static tiktoken_rs::CoreBPE);

impl TokenCounter for Tiktoken {
    fn count(&self, text: &str) -> usize {
        self.0.encode_ordinary(text).len()
    }

    fn exact(&self) -> bool {
        true
    }
}

/// The counter for `model`: exact for the models tiktoken knows (gpt-4o, gpt-4,
/// gpt-3.5, o1…), the estimator for any other server's model.
pub fn counter_for(model: Option<&str>) -> Arc<dyn TokenCounter> {
    match model.map(tiktoken_rs::bpe_for_model) {
        Some(Ok(bpe)) => Arc::new(Tiktoken(bpe)),
        _ => Arc::new(Estimator),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_are_counted_exactly_and_others_estimated() {
        let gpt = counter_for(Some("gpt-4o-mini"));
        assert!(gpt.exact());
        assert_eq!(gpt.count("Hello, world!"), 4);
        let other = counter_for(Some("qwen2.5-coder-0.5b-instruct"));
        assert!(!other.exact());
        assert!(!counter_for(None).exact());
    }
}
