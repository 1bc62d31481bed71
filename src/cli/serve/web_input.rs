//! People's turns from the page or the terminal, whichever comes first: while the run
//! waits for a person, the page shows an input box for that agent and the terminal
//! keeps its prompt.

use std::sync::Arc;

use futures::future::{BoxFuture, Either};
use tokio::sync::{mpsc, Mutex};

use sopsim::human::HumanInput;

use super::hub::{Hub, Waiting};

/// A line typed in the page, for the agent it names.
#[derive(Debug)]
pub struct Typed {
    pub name: String,
    pub text: String,
}

pub struct WebInput {
    hub: Arc<Hub>,
    typed: Mutex<mpsc::Receiver<Typed>>,
    terminal: Arc<dyn HumanInput>,
}

impl WebInput {
    /// Lines the page sends arrive on the returned sender.
    pub fn new(hub: Arc<Hub>, terminal: Arc<dyn HumanInput>) -> (Self, mpsc::Sender<Typed>) {
        let (tx, rx) = mpsc::channel(16);
        let input = Self {
            hub,
            typed: Mutex::new(rx),
            terminal,
        };
        (input, tx)
    }
}

impl HumanInput for WebInput {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            self.hub.set_waiting(Some(Waiting {
                name: name.to_string(),
                role: role.to_string(),
            }));
            let mut typed = self.typed.lock().await;
            let from_page = async {
                loop {
                    match typed.recv().await {
                        // A line for somebody else (a stale page) is not this turn.
                        Some(t) if t.name == name && !t.text.trim().is_empty() => {
                            return Some(t.text.trim().to_string())
                        }
                        Some(_) => continue,
                        None => return None,
                    }
                }
            };
            let from_terminal = self.terminal.read_turn(name, role);
            let line = match futures::future::select(Box::pin(from_page), from_terminal).await {
                Either::Left((Some(line), _)) | Either::Right((Some(line), _)) => Some(line),
                // One source ended (the terminal's input is closed, say): wait for the other.
                Either::Left((None, terminal)) => terminal.await,
                Either::Right((None, page)) => page.await,
            };
            self.hub.set_waiting(None);
            line
        })
    }
}
