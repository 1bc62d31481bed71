//! The live view of a run on the terminal: each role in its own colour, decisions with
//! their probabilities. What stays on the screen is exactly what the transcript holds:
//! a reply being generated shows only on a provisional line (on a terminal), which the
//! finished message replaces — so a draw that is drawn again, or a speaker label cut
//! off the reply, is never left behind. Text from models and files is shown with its
//! control characters made visible, so a reply cannot move the cursor, change colours
//! or retitle the terminal.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};

use sopsim::events::{EventSink, SimEvent};

/// Whether to colour a stream: a terminal, and `NO_COLOR` unset or empty
/// (<https://no-color.org>).
pub(super) fn use_color(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `text` with every control character other than newline and tab replaced by its
/// `\u{..}` escape (ESC, BEL, backspace, carriage return, C1 controls, DEL), and the
/// bidirectional overrides and isolates too (U+202A–U+202E, U+2066–U+2069, and the
/// marks U+200E, U+200F, U+061C), which can make a line read as something else.
pub(super) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}')
    };
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
pub(super) struct TerminalSink {
    out: Mutex<TerminalState>,
    color: bool,
    /// Stdout is a terminal: replies being generated show on a provisional line.
    live: bool,
}

struct TerminalState {
    roles: Vec<String>,
    /// The reply under way: who speaks, and what it has said so far.
    draft: Option<Draft>,
    /// The provisional line is on the screen (and must be cleared before printing).
    shown: bool,
    /// A resumed run is saying again what its killed run said: only warnings show
    /// until it has.
    replaying: bool,
}

struct Draft {
    name: String,
    role: String,
    text: String,
}

/// Clears the line the cursor is on.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// One line for a tool event: a decision, a call starting, its result or its error.
fn tool_line(ret: &sopsim::tools::Return) -> Option<String> {
    use sopsim::tools::Return;
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
fn probabilities(d: &sopsim::simulation::Decision) -> String {
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
    pub(super) fn stdout() -> Self {
        let live = std::io::stdout().is_terminal();
        Self {
            out: Mutex::new(TerminalState {
                roles: Vec::new(),
                draft: None,
                shown: false,
                replaying: false,
            }),
            color: use_color(live),
            live,
        }
    }

    /// For a resumed run: the turns its killed run finished are not shown again.
    pub(super) fn resuming(self) -> Self {
        self.out.lock().unwrap_or_else(|p| p.into_inner()).replaying = true;
        self
    }

    /// Clears the provisional line, if it is shown.
    fn clear(&self, st: &mut TerminalState, out: &mut impl Write) {
        if st.shown {
            let _ = write!(out, "{CLEAR_LINE}");
            st.shown = false;
        }
    }

    /// Shows the reply under way on the provisional line: its speaker and the end of
    /// what it has said, cut to the terminal's width.
    fn show_draft(&self, st: &mut TerminalState, out: &mut impl Write) {
        let Some(d) = &st.draft else {
            return;
        };
        let width = console::Term::stdout().size().1 as usize;
        let label = format!("{} ({}): ", d.name, d.role);
        let room = width.saturating_sub(label.chars().count() + 2).max(8);
        let flat = printable(&d.text).replace(['\n', '\t'], " ");
        let chars: Vec<char> = flat.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(room)..].iter().collect();
        let dim = if self.color {
            Style::new().dimmed()
        } else {
            Style::new()
        };
        let _ = write!(out, "{CLEAR_LINE}{dim}{}{tail}{dim:#}", printable(&label));
        st.shown = true;
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
    fn wants_tokens(&self) -> bool {
        self.live
    }

    fn emit(&self, event: &SimEvent) {
        let mut st = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let dim = if self.color {
            Style::new().dimmed()
        } else {
            Style::new()
        };
        if st.replaying && !matches!(event, SimEvent::Warning { .. } | SimEvent::Resumed { .. }) {
            return;
        }
        let _ = match event {
            SimEvent::Resumed { messages } => {
                st.replaying = false;
                writeln!(
                    out,
                    "{dim}── resumed after {messages} message(s) of the earlier run ──{dim:#}"
                )
            }
            SimEvent::StateEntered { state, visit } => {
                self.clear(&mut st, &mut out);
                writeln!(
                    out,
                    "{dim}── {} (visit {visit}) ──{dim:#}",
                    printable(state)
                )
            }
            SimEvent::TurnStarted { name, role, human } => {
                st.draft = (!*human).then(|| Draft {
                    name: name.clone(),
                    role: role.clone(),
                    text: String::new(),
                });
                Ok(())
            }
            SimEvent::Token { text, .. } => {
                if let (true, Some(d)) = (self.live, st.draft.as_mut()) {
                    d.text.push_str(text);
                    self.show_draft(&mut st, &mut out);
                }
                Ok(())
            }
            SimEvent::Redrawn { .. } => {
                if let Some(d) = st.draft.as_mut() {
                    d.text.clear();
                }
                if self.live {
                    self.show_draft(&mut st, &mut out);
                }
                Ok(())
            }
            SimEvent::Tool { ret, .. } => {
                self.clear(&mut st, &mut out);
                let shown = match tool_line(ret) {
                    Some(line) => writeln!(out, "{dim}  ⚙ {}{dim:#}", printable(&line)),
                    None => Ok(()),
                };
                if self.live && st.draft.as_ref().is_some_and(|d| !d.text.is_empty()) {
                    self.show_draft(&mut st, &mut out);
                }
                shown
            }
            // Shown live as SimEvent::Tool; the transcript keeps them.
            SimEvent::Message(m) if m.kind.is_tool() => Ok(()),
            SimEvent::Message(m) => {
                self.clear(&mut st, &mut out);
                st.draft = None;
                let s = self.style_for(&mut st, &m.role);
                let shown = writeln!(
                    out,
                    "{s}{} ({}):{s:#} {}",
                    printable(&m.name),
                    printable(&m.role),
                    printable(&m.content)
                );
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
                self.clear(&mut st, &mut out);
                writeln!(
                    out,
                    "{dim}  round {round}: {} move at once…{dim:#}",
                    printable(&roles.join(", "))
                )
            }
            SimEvent::RoundEnded { .. } | SimEvent::RoundProgress { .. } => Ok(()),
            SimEvent::World {
                round,
                world,
                agents,
                ended_if,
                ..
            } => {
                self.clear(&mut st, &mut out);
                let mut shown: Vec<String> =
                    world.iter().map(|(k, v)| format!("{k} {v}")).collect();
                shown.extend(
                    agents
                        .iter()
                        .map(|(k, s)| format!("{k} {:.1} on average", s.mean)),
                );
                let ends = ended_if
                    .as_ref()
                    .map(|n| format!(" — {n}: the run ends"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{dim}  world after round {round}: {}{ends}{dim:#}",
                    printable(&shown.join(", "))
                )
            }
            SimEvent::Warning { text } => {
                self.clear(&mut st, &mut out);
                let w = if self.color {
                    Style::new().fg_color(Some(AnsiColor::Yellow.into()))
                } else {
                    Style::new()
                };
                let said = writeln!(out, "{w}warning:{w:#} {}", printable(text));
                if self.live && st.draft.as_ref().is_some_and(|d| !d.text.is_empty()) {
                    self.show_draft(&mut st, &mut out);
                }
                said
            }
            SimEvent::Progress(_) => Ok(()),
            SimEvent::Finished { ended_by, turns } => {
                self.clear(&mut st, &mut out);
                writeln!(
                    out,
                    "{dim}── ended by {ended_by} after {turns} turns ──{dim:#}"
                )
            }
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
        // "approved" as it reads on screen, "devorppa" as it is.
        assert_eq!(
            printable("\u{202e}devorppa\u{202c} \u{2067}x\u{2069}"),
            "\\u{202e}devorppa\\u{202c} \\u{2067}x\\u{2069}"
        );
    }
}
