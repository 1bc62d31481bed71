//! People's turns from the page or the terminal, whichever comes first: while the run
//! waits for a person, the page shows an input box for that agent and the terminal
//! keeps its prompt. In a simultaneous round several people wait at once: the page
//! shows a box for each, and each typed line goes to its own person's turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, Either};
use tokio::sync::oneshot;

use sopsim::human::HumanInput;

use super::hub::{Hub, Waiting};

/// Why the page's line was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Nobody of that name is waiting to type.
    NotWaiting,
    /// The turn ended as the line arrived (the terminal answered first).
    Gone,
}

/// The people waiting for a line from the page, each with where their line goes.
pub(crate) struct Inbox {
    hub: Arc<Hub>,
    waiting: Mutex<HashMap<String, oneshot::Sender<String>>>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<String>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives `text` to the turn waiting for `name`; from then on the page shows
    /// `name` as no longer waiting.
    pub(crate) fn deliver(&self, name: &str, text: String) -> Result<(), Refused> {
        let tx = self.lock().remove(name).ok_or(Refused::NotWaiting)?;
        tx.send(text).map_err(|_| Refused::Gone)?;
        self.hub.remove_waiting(name);
        Ok(())
    }
}

pub(crate) struct WebInput {
    hub: Arc<Hub>,
    inbox: Arc<Inbox>,
    terminal: Arc<dyn HumanInput>,
}

impl WebInput {
    /// Lines the page sends go through the returned inbox.
    pub(crate) fn new(hub: Arc<Hub>, terminal: Arc<dyn HumanInput>) -> (Self, Arc<Inbox>) {
        let inbox = Arc::new(Inbox {
            hub: hub.clone(),
            waiting: Mutex::default(),
        });
        let input = Self {
            hub,
            inbox: inbox.clone(),
            terminal,
        };
        (input, inbox)
    }

    async fn read(&self, name: &str, role: &str, hide: bool) -> Option<String> {
        let (tx, rx) = oneshot::channel();
        self.inbox.lock().insert(name.to_string(), tx);
        self.hub.add_waiting(Waiting {
            name: name.to_string(),
            role: role.to_string(),
        });
        // Whatever ends this read (a line, closed input, a cancelled run), the person
        // stops waiting.
        let _waiting = StopWaiting { input: self, name };
        let from_page = async { rx.await.ok().map(|t| t.trim().to_string()) };
        let from_terminal = if hide {
            self.terminal.read_move(name, role)
        } else {
            self.terminal.read_turn(name, role)
        };
        match futures::future::select(Box::pin(from_page), from_terminal).await {
            Either::Left((Some(line), _)) | Either::Right((Some(line), _)) => Some(line),
            // One source ended (the terminal's input is closed, say): wait for the other.
            Either::Left((None, terminal)) => terminal.await,
            Either::Right((None, page)) => page.await,
        }
    }
}

/// Takes a person off the waiting list when their read ends.
struct StopWaiting<'a> {
    input: &'a WebInput,
    name: &'a str,
}

impl Drop for StopWaiting<'_> {
    fn drop(&mut self) {
        self.input.inbox.lock().remove(self.name);
        self.input.hub.remove_waiting(self.name);
    }
}

impl HumanInput for WebInput {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(name, role, false))
    }

    fn read_move<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.read(name, role, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sopsim::human::LinesInput;

    #[tokio::test]
    async fn two_people_of_a_round_wait_at_once_and_each_gets_their_own_line() {
        let hub = Arc::new(Hub::new("c".into()));
        // The terminal's input is closed: only the page answers.
        let (input, inbox) = WebInput::new(hub.clone(), Arc::new(LinesInput::default()));
        let input = Arc::new(input);
        let (a, b) = (input.clone(), input.clone());
        let ada = tokio::spawn(async move { a.read_move("Ada", "North").await });
        let bo = tokio::spawn(async move { b.read_move("Bo", "South").await });
        while hub.live().waiting.len() < 2 {
            tokio::task::yield_now().await;
        }
        let names: Vec<String> = hub.live().waiting.into_iter().map(|w| w.name).collect();
        assert_eq!(names, ["Ada", "Bo"]);
        assert_eq!(inbox.deliver("Zed", "hi".into()), Err(Refused::NotWaiting));
        // The second person answers first; nothing of it reaches the first.
        inbox.deliver("Bo", "DEFECT".into()).unwrap();
        assert_eq!(bo.await.unwrap().as_deref(), Some("DEFECT"));
        assert_eq!(hub.live().waiting.len(), 1);
        assert_eq!(
            inbox.deliver("Bo", "again".into()),
            Err(Refused::NotWaiting),
            "a turn takes one line"
        );
        inbox.deliver("Ada", " COOPERATE ".into()).unwrap();
        assert_eq!(ada.await.unwrap().as_deref(), Some("COOPERATE"));
        assert!(hub.live().waiting.is_empty());
        assert_eq!(hub.live().waiting_for, None);
    }
}
