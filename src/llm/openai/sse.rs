//! Server-sent events as OpenAI-compatible servers stream them: `data: {json}` events
//! separated by blank lines, ending with `data: [DONE]`. Pure and incremental: bytes go
//! in as they arrive, whole events come out.

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Data(String),
    Done,
}

/// Accumulates bytes and yields complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    /// Adds received bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some((end, sep)) = find_boundary(&self.buffer) {
            let raw: Vec<u8> = self.buffer.drain(..end + sep).collect();
            let text = std::str::from_utf8(&raw[..end])
                .map_err(|e| format!("the event stream is not UTF-8: {e}"))?;
            if let Some(event) = parse_event(text) {
                events.push(event);
            }
        }
        Ok(events)
    }

    /// Bytes received after the last complete event (a cut-off stream leaves some).
    pub fn pending(&self) -> &[u8] {
        &self.buffer
    }
}

fn find_boundary(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_event(text: &str) -> Option<Event> {
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None; // comments (": keep-alive") and other fields
    }
    let data = data.join("\n");
    Some(if data.trim() == "[DONE]" {
        Event::Done
    } else {
        Event::Data(data)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(p.pending().is_empty());
    }

    #[test]
    fn a_cut_off_stream_leaves_pending_bytes() {
        let mut p = SseParser::default();
        p.push(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel")
            .unwrap();
        assert!(!p.pending().is_empty());
    }

    #[test]
    fn multi_line_data_is_joined() {
        let mut p = SseParser::default();
        assert_eq!(
            p.push(b"data: line one\ndata: line two\n\n").unwrap(),
            vec![Event::Data("line one\nline two".into())]
        );
    }
}
