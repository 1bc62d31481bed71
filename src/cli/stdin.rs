//! People's turns typed on standard input, read by a thread of their own so no actor
//! blocks on the terminal. A line longer than [`MAX_LINE_BYTES`] is split into pieces of
//! at most that size, so a pasted file or an endless pipe cannot fill the memory.

use std::io::{BufRead, IsTerminal, Write};

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use sopsim::human::HumanInput;

/// The longest turn a person can type, in bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Lines typed on standard input.
pub struct StdinInput {
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<String>>>,
}

impl StdinInput {
    pub fn new() -> Self {
        Self {
            lines: tokio::sync::Mutex::new(None),
        }
    }

    fn start() -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel(16);
        let reader = std::thread::Builder::new()
            .name("sopsim-stdin".into())
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                while let Some(line) = read_line(&mut stdin, MAX_LINE_BYTES) {
                    if tx.blocking_send(line).is_err() {
                        break;
                    }
                }
            });
        if let Err(e) = reader {
            // The receiver sees a closed channel: input has ended, and the run ends cleanly.
            tracing::warn!("cannot read standard input: {e}");
        }
        rx
    }
}

/// The next line without its ending, or its next `limit` bytes when it is longer;
/// invalid UTF-8 is replaced, not fatal. `None` at the end of input or on a read error.
pub fn read_line(input: &mut impl BufRead, limit: usize) -> Option<String> {
    let mut line = Vec::new();
    let mut ended = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if chunk.is_empty() {
            ended = true;
            break;
        }
        let room = limit.saturating_sub(line.len());
        let (part, used, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) if i <= room => (&chunk[..i], i + 1, true),
            _ => {
                let n = chunk.len().min(room);
                (&chunk[..n], n, n == room)
            }
        };
        line.extend_from_slice(part);
        input.consume(used);
        if complete {
            break;
        }
    }
    if ended && line.is_empty() {
        return None;
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

impl HumanInput for StdinInput {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let mut guard = self.lines.lock().await;
            let rx = guard.get_or_insert_with(Self::start);
            let interactive = std::io::stdin().is_terminal();
            loop {
                if interactive {
                    eprint!("{name} ({role})> ");
                    let _ = std::io::stderr().flush();
                }
                let line = rx.recv().await?;
                if !line.trim().is_empty() {
                    return Some(line.trim().to_string());
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_come_in_pieces_and_endings_are_dropped() {
        let mut input = std::io::BufReader::with_capacity(4, &b"hello world\r\nok\nxyz"[..]);
        assert_eq!(read_line(&mut input, 5).as_deref(), Some("hello"));
        assert_eq!(read_line(&mut input, 5).as_deref(), Some(" worl"));
        assert_eq!(read_line(&mut input, 5).as_deref(), Some("d"));
        assert_eq!(read_line(&mut input, 5).as_deref(), Some("ok"));
        assert_eq!(read_line(&mut input, 5).as_deref(), Some("xyz"));
        assert_eq!(read_line(&mut input, 5), None);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let mut input = &b"caf\xe9\n"[..];
        assert_eq!(read_line(&mut input, 100).as_deref(), Some("caf\u{fffd}"));
    }
}
