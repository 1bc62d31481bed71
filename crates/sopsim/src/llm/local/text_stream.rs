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
/// a partial UTF-8 character.
#[derive(Default)]
pub(super) struct TextStream {
    text: String,
    sent: usize,
}

impl TextStream {
    pub(super) fn push(
        &mut self,
        tokenizer: &Tokenizer,
        generated: &[u32],
    ) -> Result<String, tokenizers::Error> {
        self.text = tokenizer.decode(generated, true)?;
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
