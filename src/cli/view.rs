//! The viewer's command-line side: checking `--serve`/`--serve-token`, starting the
//! server beside a run (`sopsim run --serve`) or on a folder (`sopsim serve DIR`), and
//! keeping it up until Ctrl-C.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sopsim::error::CancelToken;
use sopsim::human::HumanInput;
use sopsim::runner::RunControl;
use sopsim::scenario::Scenario;

use super::failure::Failure;
use super::say;
use super::serve::{self, Folder, Hub, Live, Server, Source, WebInput};
use super::signals::StopSignals;

/// The token requests must carry: none on a loopback address unless asked; required
/// on any other, where `auto` makes one up. `flag` is the one that gave `addr`.
pub(super) fn token(
    flag: &str,
    addr: SocketAddr,
    given: Option<String>,
) -> Result<Option<String>, Failure> {
    match given.as_deref() {
        Some("auto") => Ok(Some(format!("{:032x}", rand::random::<u128>()))),
        Some(t) if t.len() < 16 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') => {
            Err(Failure::BadInput(
                "--serve-token: use at least 16 letters, digits, '-' or '_' (or `auto`)".into(),
            ))
        }
        Some(t) => Ok(Some(t.to_string())),
        None if addr.ip().is_loopback() => Ok(None),
        None => Err(Failure::BadInput(format!(
            "{flag} {addr}: listening beyond this machine needs --serve-token TOKEN (or --serve-token auto)"
        ))),
    }
}

/// The viewer beside a run: its sink, input, controls and server.
pub(super) struct RunViewer {
    pub hub: Arc<Hub>,
    pub input: Arc<dyn HumanInput>,
    pub control: RunControl,
    server: Server,
}

impl RunViewer {
    /// The viewer of a run of `scenario`, which its side panel draws (with a
    /// population's network); none for a file that does not load, which fails the run
    /// itself a moment later with its own message.
    pub(super) fn start(
        addr: SocketAddr,
        token: Option<String>,
        scenario: Option<&Scenario>,
        terminal: Arc<dyn HumanInput>,
        start_paused: bool,
        (mode, seed): (Option<sopsim::scenario::Mode>, u64),
    ) -> Result<Self, Failure> {
        let network = scenario.and_then(|s| {
            let mode = mode.unwrap_or(s.environment.mode);
            let drawn = sopsim::simulation::draw_networks(s.populations.values(), seed).ok()?;
            let document = sopsim::simulation::network_document(s, mode, seed, &drawn)?;
            serde_json::to_value(document).ok()
        });
        let scenario = scenario.map(serve::scenario_json).unwrap_or_default();
        let name = scenario["name"].as_str().unwrap_or("run").to_string();
        let hub = Arc::new(Hub::new(name));
        let (input, inbox) = WebInput::new(hub.clone(), terminal);
        let control = if start_paused {
            RunControl::paused()
        } else {
            RunControl::new()
        };
        let live = Live {
            hub: hub.clone(),
            control: control.clone(),
            inbox,
            scenario,
            network,
        };
        let server = serve::start(addr, token, Source::Live(live)).map_err(bind_failure)?;
        say(&format!("watch it at {}", server.url));
        Ok(Self {
            hub,
            input: Arc::new(input),
            control,
            server,
        })
    }

    /// After the run: the page stays up until a stop signal cancels `cancel` (at once
    /// if a stop signal is what ended the run).
    pub(super) fn linger(self, cancel: &CancelToken) {
        if !cancel.is_cancelled() {
            say(&format!(
                "the run ended; still serving {} — press Ctrl-C to stop",
                self.server.url
            ));
            wait_until(cancel);
        }
        self.server.stop();
    }
}

fn bind_failure(e: serve::ServeError) -> Failure {
    match e {
        serve::ServeError::Bind { .. } => Failure::BadInput(format!("--serve: {e}")),
        serve::ServeError::Start(_) => Failure::runtime(&e),
    }
}

/// `sopsim serve DIR`.
pub(super) fn serve_folder(
    dir: &Path,
    addr: SocketAddr,
    token: Option<String>,
) -> Result<(), Failure> {
    let token = self::token("--addr", addr, token)?;
    let folder = Folder::open(dir).map_err(|e| Failure::BadInput(e.to_string()))?;
    let server = serve::start(addr, token, Source::Folder(folder)).map_err(|e| match e {
        serve::ServeError::Bind { .. } => Failure::BadInput(format!("--addr: {e}")),
        serve::ServeError::Start(_) => Failure::runtime(&e),
    })?;
    say(&format!(
        "serving {} at {} — press Ctrl-C to stop",
        dir.display(),
        server.url
    ));
    wait_for_a_stop_signal();
    server.stop();
    Ok(())
}

fn wait_for_a_stop_signal() {
    let stop = CancelToken::new();
    StopSignals::watch(stop.clone(), "stopping the server");
    wait_until(&stop);
}

fn wait_until(token: &CancelToken) {
    while !token.is_cancelled() {
        std::thread::sleep(Duration::from_millis(100));
    }
}
