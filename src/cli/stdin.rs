//! People's turns typed on standard input, read by a thread of their own so no actor
//! blocks on the terminal. A line longer than [`MAX_LINE_BYTES`] is split into pieces of
//! at most that size, so a pasted file or an endless pipe cannot fill the memory.
//!
//! The people of a simultaneous round share the screen and type one after another, in
//! the order of the state's roles. So that the second does not read the first's move,
//! a move is typed with the terminal's echo off (as a password is) and stands as
//! `[hidden until the round is in]`; the terminal shows the round's messages once
//! every move is in.

use std::io::{BufRead, IsTerminal, Write};

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use sopsim::human::HumanInput;

/// The longest turn a person can type, in bytes.
pub(super) const MAX_LINE_BYTES: usize = 64 * 1024;

/// Lines typed on standard input.
pub(super) struct StdinInput {
    lines: tokio::sync::Mutex<Option<mpsc::Receiver<String>>>,
}

impl StdinInput {
    pub(super) fn new() -> Self {
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
pub(super) fn read_line(input: &mut impl BufRead, limit: usize) -> Option<String> {
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

/// What the terminal shows in place of a round's move.
pub(super) const HIDDEN: &str = "[hidden until the round is in]";

impl StdinInput {
    /// The next non-empty line, after a prompt when a person is typing; with `hide`,
    /// typed without echo and shown as [`HIDDEN`].
    async fn read(&self, name: &str, role: &str, hide: bool) -> Option<String> {
        // Whoever asked first is served first (the lock is fair).
        let mut guard = self.lines.lock().await;
        let rx = guard.get_or_insert_with(Self::start);
        let interactive = std::io::stdin().is_terminal();
        loop {
            let hidden = (hide && interactive).then(echo::Hidden::start).flatten();
            if interactive {
                let hint = if hidden.is_some() { ", hidden" } else { "" };
                eprint!("{name} ({role}{hint})> ");
                let _ = std::io::stderr().flush();
            }
            let line = rx.recv().await;
            if hidden.is_some() {
                drop(hidden);
                eprintln!("{HIDDEN}");
            }
            let line = line?;
            if !line.trim().is_empty() {
                return Some(line.trim().to_string());
            }
        }
    }
}

impl HumanInput for StdinInput {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(name, role, false))
    }

    fn read_move<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(name, role, true))
    }
}

/// Turning the terminal's echo off while a move is typed.
#[cfg(unix)]
mod echo {
    use std::sync::Mutex;

    /// The terminal's settings from before the echo was turned off, for a quick exit
    /// (a second Ctrl-C) to put back.
    static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);

    /// The echo is off until this is dropped.
    pub(super) struct Hidden;

    impl Hidden {
        /// `None` when standard input is not a terminal whose settings can be changed.
        pub(super) fn start() -> Option<Self> {
            // SAFETY: tcgetattr and tcsetattr only read and write the termios given.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(libc::STDIN_FILENO, &mut t) != 0 {
                    return None;
                }
                let saved = t;
                t.c_lflag &= !(libc::ECHO | libc::ECHONL);
                if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) != 0 {
                    return None;
                }
                *SAVED.lock().unwrap_or_else(|p| p.into_inner()) = Some(saved);
            }
            Some(Self)
        }
    }

    impl Drop for Hidden {
        fn drop(&mut self) {
            restore();
        }
    }

    /// Puts the echo back if a move is being typed.
    pub(super) fn restore() {
        if let Some(saved) = SAVED.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // SAFETY: as above; `saved` came from tcgetattr.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved);
            }
        }
    }
}

/// Elsewhere a move is typed with the echo on; the terminal still shows the round's
/// messages only once every move is in.
#[cfg(not(unix))]
mod echo {
    pub struct Hidden;

    impl Hidden {
        pub fn start() -> Option<Self> {
            None
        }
    }

    pub fn restore() {}
}

/// Puts the terminal's echo back (for an exit in the middle of a hidden move).
pub(super) fn restore_terminal() {
    echo::restore();
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
