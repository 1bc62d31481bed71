//! A reply's decoded text as it grows, and how much of it was streamed.

use tokenizers::Tokenizer;

/// Where the first stop sequence starts in `text`, and which it is.
pub(super) fn stop_position(text: &str, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
        .min()
}

/// Decoded text of the generated tokens, and how much of it was streamed. Text is
/// streamed only up to a point that no stop sequence could still claim and that is not
/// a partial UTF-8 character. A model's thinking is not text: only what follows its
/// end is.
#[derive(Default)]
pub(super) struct TextStream {
    text: String,
    sent: usize,
    /// Set while the model may think: the token that ends its thinking.
    think_end: Option<u32>,
    /// The tokens the thinking took (its end included), once it has ended.
    thought: Option<usize>,
}

impl TextStream {
    /// A reply that begins with the model's thinking, ended by `think_end`.
    pub(super) fn thinking(think_end: u32) -> Self {
        Self {
            think_end: Some(think_end),
            ..Self::default()
        }
    }

    /// Generated tokens that were thinking: all of them until it ends.
    pub(super) fn thinking_tokens(&self, generated: usize) -> usize {
        match self.think_end {
            None => 0,
            Some(_) => self.thought.unwrap_or(generated),
        }
    }

    pub(super) fn push(
        &mut self,
        tokenizer: &Tokenizer,
        generated: &[u32],
    ) -> Result<String, tokenizers::Error> {
        let answer = match (self.think_end, self.thought) {
            (None, _) => generated,
            (Some(_), Some(thought)) => &generated[thought.min(generated.len())..],
            (Some(end), None) => match generated.iter().position(|t| *t == end) {
                Some(at) => {
                    self.thought = Some(at + 1);
                    &generated[at + 1..]
                }
                None => return Ok(String::new()),
            },
        };
        self.text = tokenizer.decode(answer, true)?;
        if self.think_end.is_some() {
            // The answer starts after the blank lines that close the thinking.
            self.text = self.text.trim_start().to_string();
        }
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

    pub(super) fn full(&self) -> &str {
        &self.text
    }

    pub(super) fn truncate(&mut self, at: usize) {
        self.text.truncate(at);
        self.sent = self.sent.min(at);
    }

    pub(super) fn unsent(&mut self) -> String {
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

#[cfg(test)]
mod tests {
    use super::TextStream;

    /// The tiny Qwen3-style model's tokenizer (`tests/reference/tiny_models.py`).
    fn tokenizer() -> (tokenizers::Tokenizer, u32) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/reference/tiny/qwen3.gguf");
        let file = sopsim_infer::gguf::GgufFile::open(&path).unwrap();
        let (tokenizer, special) = sopsim_infer::gguf::tokenizer(&file, 1 << 10).unwrap();
        (
            tokenizer,
            special.think_end.expect("the model has </think>"),
        )
    }

    #[test]
    fn thinking_is_neither_streamed_nor_kept_but_counted() {
        let (tok, end) = tokenizer();
        let ids = |text: &str| tok.encode(text, false).unwrap().get_ids().to_vec();
        let thought = ids("Ben wants it cheap.\n");
        let mut generated = Vec::new();
        let mut stream = TextStream::thinking(end);
        let mut streamed = String::new();
        for token in thought
            .iter()
            .chain(&[end])
            .chain(&ids("\n\nIt pays.\nNext"))
        {
            generated.push(*token);
            streamed += &stream.push(&tok, &generated).unwrap();
        }
        streamed += &stream.unsent();
        assert_eq!(streamed, "It pays.\nNext");
        assert_eq!(stream.full(), "It pays.\nNext");
        assert_eq!(stream.thinking_tokens(generated.len()), thought.len() + 1);

        // Thinking that never ends leaves no text, and every token was thinking.
        let mut unfinished = TextStream::thinking(end);
        assert_eq!(unfinished.push(&tok, &thought).unwrap(), "");
        assert_eq!(unfinished.full(), "");
        assert_eq!(unfinished.thinking_tokens(thought.len()), thought.len());

        // Without thinking, the same tokens are all text.
        let mut plain = TextStream::default();
        plain.push(&tok, &thought).unwrap();
        assert_eq!(plain.full(), "Ben wants it cheap.\n");
        assert_eq!(plain.thinking_tokens(thought.len()), 0);
    }
}
