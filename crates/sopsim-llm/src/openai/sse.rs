//! Server-sent events as OpenAI-compatible servers stream them: `data: {json}` events
//! separated by blank lines, ending with `data: [DONE]`. Parsed as the HTML standard
//! says (lines end in CRLF, LF or a lone CR; a leading byte-order mark is dropped;
//! `:` starts a comment), incrementally: bytes go in as they arrive, whole events
//! come out, and each byte is looked at once.
//!
//! Hand-written rather than `eventsource-stream` (the parser most Rust clients of these
//! servers use): that crate offers no bound on a line or an event, which a server that
//! never ends a line must not get past ([`MAX_EVENT_BYTES`]), and it wraps a byte
//! stream where the stream reader here also times out idle servers and closes a reply
//! at the word that settles a flaw.

use thiserror::Error;

/// The longest line or event sopsim holds while waiting for its end.
pub(super) const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An event's data, its lines joined with newlines.
    Data(String),
    /// `data: [DONE]`: the stream is over.
    Done,
}

/// A stream that is not a usable event stream.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SseError {
    #[error("the event stream is not UTF-8")]
    NotUtf8,
    #[error("an event in the stream is over {MAX_EVENT_BYTES} bytes")]
    TooLong,
}

/// Accumulates bytes and yields complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The line being received.
    line: Vec<u8>,
    /// The data lines of the event being received, each followed by a newline.
    data: String,
    has_data: bool,
    /// Whether the first line (which may start with a byte-order mark) has ended.
    past_first_line: bool,
    /// The last byte received was a CR: a LF right after it belongs to the same ending.
    after_cr: bool,
}

impl SseParser {
    /// Adds received bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, SseError> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        self.after_cr = false;
        while let Some(i) = memchr::memchr2(b'\n', b'\r', rest) {
            self.take(&rest[..i])?;
            let cr = rest[i] == b'\r';
            rest = &rest[i + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            self.end_line(&mut events)?;
        }
        self.take(rest)?;
        Ok(events)
    }

    /// Whether the stream stopped inside an event (a cut-off stream does).
    pub fn is_mid_event(&self) -> bool {
        self.has_data || !self.line.iter().all(u8::is_ascii_whitespace)
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + bytes.len() > MAX_EVENT_BYTES {
            return Err(SseError::TooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Reads the line gathered so far, keeping its buffer for the next.
    fn end_line(&mut self, events: &mut Vec<Event>) -> Result<(), SseError> {
        let mut raw = std::mem::take(&mut self.line);
        let read = self.read_line(&raw, events);
        raw.clear();
        self.line = raw;
        read
    }

    fn read_line(&mut self, raw: &[u8], events: &mut Vec<Event>) -> Result<(), SseError> {
        let mut raw = raw;
        if !self.past_first_line {
            self.past_first_line = true;
            raw = raw.strip_prefix("\u{feff}".as_bytes()).unwrap_or(raw);
        }
        let line = std::str::from_utf8(raw).map_err(|_| SseError::NotUtf8)?;
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // the newline after the last data line
                events.push(if data.trim() == "[DONE]" {
                    Event::Done
                } else {
                    Event::Data(data)
                });
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (": keep-alive")
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
            self.has_data = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &mut SseParser, pieces: &[&[u8]]) -> Vec<Event> {
        pieces.iter().flat_map(|b| p.push(b).unwrap()).collect()
    }

    #[test]
    fn events_split_across_reads_come_out_whole() {
        let mut p = SseParser::default();
        assert_eq!(p.push(b"data: {\"a\":").unwrap(), vec![]);
        assert_eq!(
            p.push(b"1}\n\n: keep-alive\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n")
                .unwrap(),
            vec![
                Event::Data("{\"a\":1}".into()),
                Event::Data("{\"b\":2}".into()),
                Event::Done
            ]
        );
        assert!(!p.is_mid_event());
    }

    #[test]
    fn a_cut_off_stream_is_mid_event() {
        let mut p = SseParser::default();
        p.push(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel")
            .unwrap();
        assert!(p.is_mid_event());
    }

    #[test]
    fn multi_line_data_is_joined() {
        let mut p = SseParser::default();
        assert_eq!(
            p.push(b"data: line one\ndata: line two\n\n").unwrap(),
            vec![Event::Data("line one\nline two".into())]
        );
    }

    #[test]
    fn lone_cr_endings_and_a_byte_order_mark_are_understood() {
        let mut p = SseParser::default();
        let got = all(
            &mut p,
            &[
                b"\xef\xbb\xbfdata: a\r\rdata: b\r",
                b"\n\r\n",
                b"data:c\r\r",
            ],
        );
        assert_eq!(
            got,
            vec![
                Event::Data("a".into()),
                Event::Data("b".into()),
                Event::Data("c".into())
            ]
        );
    }

    #[test]
    fn a_crlf_split_between_reads_is_one_ending() {
        let mut p = SseParser::default();
        // Were the LF after the split taken as a second ending, the blank line would
        // end the event early and "x" would be lost to an event of its own.
        let got = all(&mut p, &[b"data: a\r", b"\ndata: x\r\n\r\n"]);
        assert_eq!(got, vec![Event::Data("a\nx".into())]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::default();
        let chunk = vec![b'x'; 1 << 20];
        let mut result = Ok(vec![]);
        for _ in 0..=MAX_EVENT_BYTES >> 20 {
            result = p.push(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::TooLong));
    }
}
