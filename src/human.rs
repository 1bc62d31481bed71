//! Human turns: a person types an agent's lines. When input ends, the run ends cleanly.

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

/// Where human turns come from.
pub trait HumanInput: Send + Sync {
    /// The next line for `name` playing `role`; `None` when input has ended.
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>>;
}

/// Lines typed on standard input, read by a dedicated thread so no actor blocks on it.
pub struct StdinInput {
    lines: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Default for StdinInput {
    fn default() -> Self {
        Self {
            lines: tokio::sync::Mutex::new(None),
        }
    }
}

impl StdinInput {
    fn start() -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("sopsim-stdin".into())
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut buf = Vec::new();
                // Bytes, not `lines()`: a stray non-UTF-8 byte is replaced, not fatal.
                while matches!(stdin.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
                    let line = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    buf.clear();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .expect("spawning the stdin reader thread");
        rx
    }
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

/// Lines given up front (tests and scripts); ends when they run out.
#[derive(Default)]
pub struct LinesInput(Mutex<VecDeque<String>>);

impl LinesInput {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(lines: I) -> Self {
        Self(Mutex::new(lines.into_iter().map(Into::into).collect()))
    }
}

impl HumanInput for LinesInput {
    fn read_turn<'a>(&'a self, _name: &'a str, _role: &'a str) -> BoxFuture<'a, Option<String>> {
        let next = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        Box::pin(async move { next })
    }
}
