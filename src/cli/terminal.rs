//! The live view of a run on the terminal: each role in its own colour, streamed
//! replies as they come, decisions with their probabilities. Text from models and
//! files is shown with its control characters made visible, so a reply cannot move
//! the cursor, change colours or retitle the terminal.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};

use sopsim::events::{EventSink, SimEvent};

/// Whether to colour a stream: a terminal, and `NO_COLOR` unset or empty
/// (<https://no-color.org>).
pub fn use_color(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `text` with every control character other than newline and tab replaced by its
/// `\u{..}` escape (ESC, BEL, backspace, carriage return, C1 controls, DEL).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out.into()
}

const PALETTE: [AnsiColor; 6] = [
    AnsiColor::Cyan,
    AnsiColor::Green,
    AnsiColor::Magenta,
    AnsiColor::Blue,
    AnsiColor::Yellow,
    AnsiColor::Red,
];

/// Prints the conversation as it happens, each role in its own colour on a terminal.
pub struct TerminalSink {
    out: Mutex<TerminalState>,
    color: bool,
}

struct TerminalState {
    roles: Vec<String>,
    streamed: bool,
    /// Inside a simultaneous round: its messages arrive together, each with its speaker.
    in_round: bool,
    /// The speaker label printed for the turn under way, while its reply has not begun.
    open_label: Option<(String, String)>,
    /// Tool lines came after that label: the reply starts on a new, labelled line.
    label_broken: bool,
}

/// One line for a tool event: a decision, a call starting, its result or its error.
fn tool_line(ret: &sopsim::elysia::Return) -> Option<String> {
    use sopsim::elysia::Return;
    match ret {
        Return::TreeUpdate {
            decision,
            tree_index,
            ..
        } => Some(format!("decision {tree_index}: {decision}")),
        Return::Status { text, .. } => Some(text.clone()),
        Return::Result(r) => Some(
            r.llm_parse()
                .unwrap_or_else(|_| format!("{}: {} objects", r.name, r.objects.len())),
        ),
        Return::Error { error_message, .. } => Some(format!("error: {error_message}")),
        _ => None,
    }
}

/// ` (COOPERATE 0.93, DEFECT 0.07)`: the most likely options (at most four shown),
/// or nothing when the backend gave no probabilities.
fn probabilities(d: &sopsim::memory::Decision) -> String {
    let Some(p) = &d.probabilities else {
        return String::new();
    };
    let mut ranked: Vec<(&String, &f64)> = p.iter().filter(|(_, x)| **x >= 0.005).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(a.1));
    let parts: Vec<String> = ranked
        .iter()
        .take(4)
        .map(|(v, x)| format!("{v} {x:.2}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

impl TerminalSink {
    /// Colour only when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Self {
        let color = use_color(std::io::stdout().is_terminal());
        Self {
            out: Mutex::new(TerminalState {
                roles: Vec::new(),
                streamed: false,
                in_round: false,
                open_label: None,
                label_broken: false,
            }),
            color,
        }
    }

    fn style_for(&self, st: &mut TerminalState, role: &str) -> Style {
        if !self.color {
            return Style::new();
        }
        let i = st.roles.iter().position(|r| r == role).unwrap_or_else(|| {
            st.roles.push(role.to_string());
            st.roles.len() - 1
        });
        Style::new()
            .fg_color(Some(PALETTE[i % PALETTE.len()].into()))
            .bold()
    }
}

impl EventSink for TerminalSink {
    fn emit(&self, event: &SimEvent) {
        let mut st = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let dim = if self.color {
            Style::new().dimmed()
        } else {
            Style::new()
        };
        let _ = match event {
            SimEvent::StateEntered { state, visit } => {
                writeln!(
                    out,
                    "{dim}── {} (visit {visit}) ──{dim:#}",
                    printable(state)
                )
            }
            SimEvent::TurnStarted { name, role, human } => {
                st.streamed = false;
                st.label_broken = false;
                if *human {
                    st.open_label = None;
                    Ok(())
                } else {
                    st.open_label = Some((name.clone(), role.clone()));
                    let s = self.style_for(&mut st, role);
                    write!(out, "{s}{} ({}):{s:#} ", printable(name), printable(role))
                }
            }
            SimEvent::Token { text, .. } => {
                st.streamed = true;
                if let Some((name, role)) = st.open_label.take().filter(|_| st.label_broken) {
                    let s = self.style_for(&mut st, &role);
                    let _ = write!(out, "{s}{} ({}):{s:#} ", printable(&name), printable(&role));
                }
                write!(out, "{}", printable(text))
            }
            SimEvent::Tool { ret, .. } => {
                if st.open_label.is_some() && !st.label_broken {
                    st.label_broken = true;
                    let _ = writeln!(out);
                }
                match tool_line(ret) {
                    Some(line) => writeln!(out, "{dim}  ⚙ {}{dim:#}", printable(&line)),
                    None => Ok(()),
                }
            }
            // Shown live as SimEvent::Tool; the transcript keeps them.
            SimEvent::Message(m) if m.kind.is_tool() => Ok(()),
            SimEvent::Message(m) => {
                if let Some((name, role)) = st
                    .open_label
                    .take()
                    .filter(|_| st.label_broken && !st.streamed)
                {
                    let s = self.style_for(&mut st, &role);
                    let _ = write!(out, "{s}{} ({}):{s:#} ", printable(&name), printable(&role));
                }
                st.open_label = None;
                let shown = if st.streamed {
                    writeln!(out)
                } else if st.in_round || m.kind == sopsim::memory::MessageKind::Human {
                    let s = self.style_for(&mut st, &m.role);
                    writeln!(
                        out,
                        "{s}{} ({}):{s:#} {}",
                        printable(&m.name),
                        printable(&m.role),
                        printable(&m.content)
                    )
                } else {
                    writeln!(out, "{}", printable(&m.content))
                };
                st.streamed = false;
                match &m.decision {
                    Some(d) => writeln!(
                        out,
                        "{dim}  → {}{}{dim:#}",
                        printable(&d.value),
                        printable(&probabilities(d))
                    ),
                    None => shown,
                }
            }
            SimEvent::RoundStarted { round, roles, .. } => {
                st.in_round = true;
                writeln!(
                    out,
                    "{dim}  round {round}: {} move at once…{dim:#}",
                    printable(&roles.join(", "))
                )
            }
            SimEvent::RoundEnded { .. } => {
                st.in_round = false;
                Ok(())
            }
            SimEvent::Warning { text } => {
                let w = if self.color {
                    Style::new().fg_color(Some(AnsiColor::Yellow.into()))
                } else {
                    Style::new()
                };
                writeln!(out, "{w}warning:{w:#} {}", printable(text))
            }
            SimEvent::Progress(_) => Ok(()),
            SimEvent::Finished { ended_by, turns } => writeln!(
                out,
                "{dim}── ended by {ended_by} after {turns} turns ──{dim:#}"
            ),
        };
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_cannot_reach_the_terminal() {
        assert_eq!(printable("plain\ttext\n"), "plain\ttext\n");
        let shown = printable("a\u{1b}]0;pwned\u{7}b\u{9b}c\rd");
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert_eq!(shown, "a\\u{1b}]0;pwned\\u{7}b\\u{9b}c\\u{d}d");
    }
}
