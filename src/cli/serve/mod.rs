//! The web viewer: `sopsim run --serve` shows a run live in a browser, with pause,
//! step, resume and stop, and input boxes for people's turns; `sopsim serve DIR` shows
//! a finished run or a benchmark. It is a face beside the terminal: the library knows
//! nothing of HTTP, and this module only calls it (event sinks, [`RunControl`], human
//! input).
//!
//! Transport: server-sent events on `GET /events` (each kept event's `id` is its
//! sequence number, so a reconnecting browser resumes with `Last-Event-ID`), JSON on
//! `GET /api/state`, and the controls on `POST /api/{pause,resume,step,stop,input}`
//! with a JSON body. The page is plain HTML, CSS and JS compiled into the binary.

mod folder;
mod hub;
mod stream;
mod web_input;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use sopsim::runner::{Control, RunControl};
use sopsim::scenario::Scenario;

pub(super) use folder::Folder;
pub(super) use hub::Hub;
pub(super) use web_input::{Inbox, Refused, WebInput};

const INDEX: &str = include_str!("assets/index.html");
/// The page's modules, each loaded by the browser as it is (no build step); `main.js`
/// imports the others.
const SCRIPTS: &[(&str, &str)] = &[
    ("main.js", include_str!("assets/js/main.js")),
    ("dom.js", include_str!("assets/js/dom.js")),
    ("state.js", include_str!("assets/js/state.js")),
    ("draw.js", include_str!("assets/js/draw.js")),
    ("transcript.js", include_str!("assets/js/transcript.js")),
    ("world.js", include_str!("assets/js/world.js")),
    ("population.js", include_str!("assets/js/population.js")),
    ("panel.js", include_str!("assets/js/panel.js")),
    ("live.js", include_str!("assets/js/live.js")),
    ("replay.js", include_str!("assets/js/replay.js")),
    ("bench.js", include_str!("assets/js/bench.js")),
    ("measures.js", include_str!("assets/js/measures.js")),
];
const STYLE: &str = include_str!("assets/style.css");

/// Scripts and styles only from the page's own origin; nothing inline, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How often an idle event stream carries a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The longest a stopped server waits for the files it is reading for browsers.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(500);

/// The name of the cookie that carries the token after the first visit.
const TOKEN_COOKIE: &str = "sopsim_token";

/// The largest request body: a control's `{}` or a person's line of at most 64 KiB.
const BODY_LIMIT: usize = 256 * 1024;

/// What the server shows.
pub(super) enum Source {
    Live(Live),
    Folder(Folder),
}

/// A run in progress and its handles.
pub(super) struct Live {
    pub hub: Arc<Hub>,
    pub control: RunControl,
    /// Where the page's lines for the people the run waits for go.
    pub inbox: Arc<Inbox>,
    /// The SOP graph and the agents, for the side panel.
    pub scenario: Value,
    /// The populations' networks of the run (as `network.json` keeps them).
    pub network: Option<Value>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub(super) enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the web server: {0}")]
    Start(std::io::Error),
}

/// A server running on a thread of its own.
pub(super) struct Server {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Stops accepting requests, closes the open event streams, and waits for the
    /// server's thread.
    pub(super) fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The scenario as the page draws it: states with their roles and edges, the agents.
pub(super) fn scenario_json(s: &Scenario) -> Value {
    json!({
        "name": s.name,
        "start": s.sop.start,
        "end": s.sop.end,
        "states": s.sop.states.iter().map(|(name, st)| json!({
            "name": name, "roles": st.roles, "next": st.next,
        })).collect::<Vec<_>>(),
        "agents": s.agents.iter().map(|(name, a)| json!({
            "name": name, "roles": a.roles, "human": a.human,
        })).collect::<Vec<_>>(),
    })
}

/// Binds `addr` now (so a port in use is reported before anything runs) and serves
/// `source` from a thread of its own.
pub(super) fn start(
    addr: SocketAddr,
    token: Option<String>,
    source: Source,
) -> Result<Server, ServeError> {
    let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(ServeError::Start)?;
    let url = match &token {
        Some(t) => format!("http://{local}/?token={t}"),
        None => format!("http://{local}/"),
    };
    let state = Arc::new(AppState {
        source,
        files: stream::FileSlots::default(),
        token,
        addr: local,
    });
    listener.set_nonblocking(true).map_err(ServeError::Start)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Start)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("sopsim-web".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let _ = tx.send(Ok(()));
                // Dropping the runtime when this returns ends the open event streams,
                // which a graceful shutdown would wait for forever.
                tokio::select! {
                    _ = axum::serve(listener, router(state)) => {}
                    _ = stopped => {}
                }
            });
            // Files still being read for browsers are left to end on their own: a
            // stop does not wait for them.
            runtime.shutdown_timeout(SHUTDOWN_WAIT);
        })
        .map_err(ServeError::Start)?;
    rx.recv()
        .map_err(|_| ServeError::Start(std::io::Error::other("the server thread ended")))?
        .map_err(ServeError::Start)?;
    Ok(Server {
        url,
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// The pages, the event stream and the API, behind the origin and token checks.
fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/js/{name}", get(script))
        .route("/style.css", get(style))
        .route("/events", get(events))
        .route("/api/state", get(state_json))
        .route("/api/input", post(input))
        .route("/api/{control}", post(control))
        .route("/api/events", get(folder_events))
        .route("/api/network", get(network))
        .route("/api/probes", get(folder_probes))
        .route("/api/judgement", get(folder_judgement))
        .route("/api/runs/{*rest}", get(run_part))
        .route("/plots/{name}", get(plot))
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), check_token))
        .layer(middleware::from_fn_with_state(state.clone(), check_origin))
        .layer(middleware::map_response(security_headers))
        .with_state(state)
}

struct AppState {
    source: Source,
    /// The slots of files being sent.
    files: stream::FileSlots,
    token: Option<String>,
    /// The address the server listens on, whose port a loopback Host must name.
    addr: SocketAddr,
}

/// Whether `host` (a Host header) names this machine where the server listens
/// (`addr`): `127.0.0.1`, `localhost`, `[::1]` or the loopback address it listens on,
/// with the port (which browsers leave out only for port 80).
fn is_loopback_host(host: &str, addr: SocketAddr) -> bool {
    let (name, given) = match host.rsplit_once(':') {
        Some((name, p)) if !p.contains(']') => (name, p.parse::<u16>().ok()),
        _ => (host, Some(80)),
    };
    let own = match addr.ip() {
        ip if !ip.is_loopback() => String::new(),
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    given == Some(addr.port())
        && ["127.0.0.1", "localhost", "[::1]", own.as_str()]
            .iter()
            .any(|n| !n.is_empty() && n.eq_ignore_ascii_case(name))
}

/// Refuses what a page of another site could make a browser send. Without a token the
/// Host must be a loopback name (a site whose own name resolves to 127.0.0.1, DNS
/// rebinding, sends its own name and is refused); with a token any Host may reach the
/// token check. Either way a request whose `Origin` is not the viewer's own is refused,
/// so a cross-site page cannot step, stop or type into a run.
async fn check_origin(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let host = header_text(req.headers(), header::HOST).unwrap_or_default();
    let origin = header_text(req.headers(), header::ORIGIN);
    if state.token.is_none() && !is_loopback_host(&host, state.addr) {
        let error = format!(
            "this viewer answers only at {1}, 127.0.0.1:{0}, localhost:{0} or [::1]:{0}",
            state.addr.port(),
            state.addr
        );
        return error_response(StatusCode::FORBIDDEN, error);
    }
    if origin.is_some_and(|origin| origin != format!("http://{host}")) {
        return error_response(
            StatusCode::FORBIDDEN,
            "requests from other sites are refused",
        );
    }
    next.run(req).await
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let value = headers.get(name)?;
    Some(value.to_str().unwrap_or_default().to_string())
}

/// With a token set, every request carries it: as `?token=`, as a bearer token, or in
/// the cookie the page gets on its first visit.
async fn check_token(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(expected) = state.token.as_deref() else {
        return next.run(req).await;
    };
    let from_query = Query::<Vec<(String, String)>>::try_from_uri(req.uri())
        .is_ok_and(|q| q.iter().any(|(k, v)| k == "token" && v == expected));
    let from_header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        // The scheme's name is case-insensitive (RFC 9110, 11.1).
        .is_some_and(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && t.trim() == expected);
    let from_cookie = cookie(req.headers(), TOKEN_COOKIE) == Some(expected);
    if !(from_query || from_header || from_cookie) {
        return error_response(
            StatusCode::UNAUTHORIZED,
            "this server needs its token (the URL it printed has it)",
        );
    }
    let mut response = next.run(req).await;
    if from_query {
        // Tokens are letters, digits, '-' and '_' (the command line checks), which a
        // cookie carries as they are.
        let cookie = format!("{TOKEN_COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The value of the cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The page's sources only from its own origin, no MIME sniffing, no referrer.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::{cookie, is_loopback_host, HeaderMap, HeaderValue};

    #[test]
    fn the_token_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append("cookie", HeaderValue::from_static("a=1; sopsim_token=abc"));
        headers.append("cookie", HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&headers, "sopsim_token"), Some("abc"));
        assert_eq!(cookie(&headers, "b"), Some("2"));
        assert_eq!(cookie(&headers, "sopsim"), None);
    }

    #[test]
    fn only_this_machines_names_on_the_port_are_loopback_hosts() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost:8080",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(host, at(8080)), "{host}");
        }
        for host in [
            "evil.example:8080",
            "127.0.0.1:8081",
            "127.0.0.1",
            "localhost.evil.example:8080",
            "127.0.0.1.nip.io:8080",
            "[::1]",
            "",
        ] {
            assert!(!is_loopback_host(host, at(8080)), "{host}");
        }
        assert!(is_loopback_host("localhost", at(80)));
        assert!(is_loopback_host("[::1]", at(80)));
        // Listening on another loopback address: that address names it too.
        let other: std::net::SocketAddr = "127.0.0.2:8080".parse().unwrap();
        assert!(is_loopback_host("127.0.0.2:8080", other));
        assert!(!is_loopback_host("127.0.0.3:8080", other));
    }

    fn at(port: u16) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The modules each page module imports.
    fn imports(source: &str) -> Vec<&str> {
        source
            .lines()
            .filter(|l| l.starts_with("import "))
            .filter_map(|l| l.split("from './").nth(1)?.split('\'').next())
            .collect()
    }

    #[test]
    fn the_page_modules_import_in_layers_without_a_circle() {
        let names: Vec<&str> = super::SCRIPTS.iter().map(|(n, _)| *n).collect();
        for (name, source) in super::SCRIPTS {
            for imported in imports(source) {
                assert!(
                    names.contains(&imported),
                    "{name} imports {imported}, not served"
                );
            }
        }
        // Modules are taken in layers: each once every module it imports is in.
        let mut placed: Vec<&str> = Vec::new();
        while placed.len() < names.len() {
            let next: Vec<&str> = super::SCRIPTS
                .iter()
                .filter(|(n, s)| {
                    !placed.contains(n) && imports(s).iter().all(|i| placed.contains(i))
                })
                .map(|(n, _)| *n)
                .collect();
            let left: Vec<&&str> = names.iter().filter(|n| !placed.contains(n)).collect();
            assert!(
                !next.is_empty(),
                "these modules import each other in a circle: {left:?}"
            );
            placed.extend(next);
        }
        assert_eq!(placed.last(), Some(&"main.js"), "{placed:?}");
        let at = |m: &str| placed.iter().position(|p| *p == m).unwrap();
        assert!(at("state.js") < at("transcript.js") && at("panel.js") < at("transcript.js"));
    }
}

async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

async fn script(Path(name): Path<String>) -> Response {
    match SCRIPTS.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => page("text/javascript; charset=utf-8", body),
        None => not_found().await,
    }
}

async fn style() -> Response {
    page("text/css; charset=utf-8", STYLE)
}

fn page(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn error_response(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "no such page")
}

fn bad_request(message: impl Into<String>) -> Response {
    error_response(StatusCode::BAD_REQUEST, message)
}

/// The request's body as JSON of type `T`, or the status and the error that say why it
/// is not.
fn json_body<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, (StatusCode, String)> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        let error = "the body must be JSON, sent as application/json".to_string();
        return Err((StatusCode::BAD_REQUEST, error));
    }
    let body = body.map_err(|e| (e.status(), e.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| (StatusCode::BAD_REQUEST, format!("the body: {e}")))
}

/// Each kept event carries its sequence number as its id, so a reconnecting browser
/// resumes after the last one it saw.
fn sse_event(frame: hub::Frame) -> Event {
    let event = Event::default().event(frame.name).data(&*frame.data);
    match frame.id {
        Some(id) => event.id(id.to_string()),
        None => event,
    }
}

async fn events(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let Source::Live(live) = &state.source else {
        return not_found().await;
    };
    let last_id = headers
        .get("Last-Event-ID")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let Some(frames) = live.hub.subscribe(last_id) else {
        let message = format!(
            "{} browsers are watching this run, the most it serves at once",
            hub::MAX_CLIENTS
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            message,
        )
            .into_response();
    };
    let retry = Event::default().retry(Duration::from_secs(1));
    let stream = futures::stream::once(futures::future::ready(retry))
        .chain(frames.map(sse_event))
        .map(Ok::<_, Infallible>);
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

async fn state_json(State(state): State<Arc<AppState>>) -> Response {
    match &state.source {
        Source::Live(live) => Json(json!({
            "mode": "live",
            "scenario": live.scenario,
            "live": live.hub.live(),
            "paused": live.control.is_paused(),
        }))
        .into_response(),
        Source::Folder(folder) => {
            let Some(slot) = state.files.take() else {
                return stream::busy();
            };
            match folder.state() {
                (before, after, Some(file)) => stream::json_document(slot, file, before, after),
                (before, after, None) => (
                    [(header::CONTENT_TYPE, "application/json")],
                    format!("{before}null{after}"),
                )
                    .into_response(),
            }
        }
    }
}

async fn control(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Source::Live(live) = &state.source else {
        return bad_request("this server shows a finished run; there is nothing to control");
    };
    let body: Value = match json_body(&headers, body) {
        Ok(body) => body,
        Err((status, error)) => return error_response(status, error),
    };
    if !body.is_object() {
        return bad_request("the body must be a JSON object, such as {}");
    }
    let control = match name.as_str() {
        "pause" => Control::Pause,
        "resume" => Control::Resume,
        "step" => Control::Step,
        "stop" => Control::Stop,
        _ => return not_found().await,
    };
    if let Some(ended_by) = live.hub.live().ended_by {
        return error_response(
            StatusCode::CONFLICT,
            format!("the run has ended ({ended_by}); there is nothing to {name}"),
        );
    }
    live.control.send(control);
    Json(json!({ "sent": name })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    name: String,
    text: String,
}

async fn input(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Source::Live(live) = &state.source else {
        return bad_request("this server shows a finished run; nobody is typing");
    };
    let Input { name, text } = match json_body(&headers, body) {
        Ok(input) => input,
        Err((status, error)) => return error_response(status, error),
    };
    if text.trim().is_empty() {
        return bad_request("text: empty");
    }
    if text.len() > 64 * 1024 {
        return bad_request("text: over 64 KiB");
    }
    match live.inbox.deliver(&name, text) {
        Ok(()) => Json(json!({ "sent": true })).into_response(),
        Err(Refused::NotWaiting) => error_response(
            StatusCode::CONFLICT,
            format!("it is not {name}'s turn to type"),
        ),
        Err(Refused::Gone) => error_response(
            StatusCode::CONFLICT,
            format!("{name}'s turn was already answered"),
        ),
    }
}

fn folder(state: &AppState) -> Option<&Folder> {
    match &state.source {
        Source::Folder(f) => Some(f),
        Source::Live(_) => None,
    }
}

/// `value`, or 404 saying what is `missing`.
fn json_or_404(value: Option<Value>, missing: &str) -> Response {
    match value {
        Some(v) => Json(v).into_response(),
        None => error_response(StatusCode::NOT_FOUND, missing),
    }
}

/// Which of a run's files a request is for.
#[derive(Clone, Copy)]
enum Part {
    Events,
    Summary,
    Network,
    Probes,
    Judgement,
}

impl Part {
    fn file(self) -> &'static str {
        match self {
            Part::Events => "events.jsonl",
            Part::Summary => "summary.json",
            Part::Network => "network.json",
            Part::Probes => "probes.jsonl",
            Part::Judgement => "judgement.json",
        }
    }

    fn missing(self) -> &'static str {
        match self {
            Part::Events => "no such run",
            Part::Summary => "no such run, or it has no summary",
            Part::Network => NO_NETWORK,
            Part::Probes => "no probes: the run asked none, or no such run",
            Part::Judgement => "no judgement: the run was not judged, or no such run",
        }
    }
}

/// A file of run `id` of the served folder (`None`: the run folder's own), sent as it
/// is read: 404 when there is no such run or file, 503 when too many files are being
/// sent.
fn run_file(state: &AppState, id: Option<&str>, part: Part) -> Response {
    let Some(folder) = folder(state) else {
        return error_response(StatusCode::NOT_FOUND, part.missing());
    };
    let file = match folder.open_file(id, part.file()) {
        Some(Ok(file)) => file,
        Some(Err(e)) if !e.is_missing() => {
            return error_response(StatusCode::NOT_FOUND, folder::unreadable(part.file(), &e))
        }
        _ => return error_response(StatusCode::NOT_FOUND, part.missing()),
    };
    let Some(slot) = state.files.take() else {
        return stream::busy();
    };
    match part {
        Part::Events | Part::Probes => stream::json_lines_array(slot, file),
        Part::Summary | Part::Network | Part::Judgement => {
            stream::json_document(slot, file, String::new(), String::new())
        }
    }
}

async fn folder_events(State(state): State<Arc<AppState>>) -> Response {
    run_file(&state, None, Part::Events)
}

/// A served run's probes' answers; 404 for a run without probes (or a live run).
async fn folder_probes(State(state): State<Arc<AppState>>) -> Response {
    run_file(&state, None, Part::Probes)
}

/// A served run's `judgement.json`; 404 for a run not judged (or a live run).
async fn folder_judgement(State(state): State<Arc<AppState>>) -> Response {
    run_file(&state, None, Part::Judgement)
}

/// What a run without populations has instead of a network.
const NO_NETWORK: &str = "no network: the run has no populations, or no such run";

/// The run's networks; 404 for a run without populations.
async fn network(State(state): State<Arc<AppState>>) -> Response {
    match &state.source {
        Source::Live(live) => json_or_404(live.network.clone(), NO_NETWORK),
        Source::Folder(_) => run_file(&state, None, Part::Network),
    }
}

/// `/api/runs/{id}/events`, `/summary`, `/network`, `/probes` or `/judgement` of a
/// benchmark's run, whose id may
/// hold slashes.
async fn run_part(State(state): State<Arc<AppState>>, Path(rest): Path<String>) -> Response {
    let Some((id, part)) = rest.rsplit_once('/') else {
        return not_found().await;
    };
    let part = match part {
        "events" => Part::Events,
        "summary" => Part::Summary,
        "network" => Part::Network,
        "probes" => Part::Probes,
        "judgement" => Part::Judgement,
        _ => return not_found().await,
    };
    run_file(&state, Some(id), part)
}

/// A bench's plot, read whole (plots are small) off the server's thread.
async fn plot(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    if folder(&state).is_none() {
        return not_found().await;
    }
    let Some(slot) = state.files.take() else {
        return stream::busy();
    };
    let read = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        folder(&state).and_then(|f| f.plot(&name))
    });
    match read.await {
        Ok(Some((bytes, kind))) => ([(header::CONTENT_TYPE, kind)], bytes).into_response(),
        _ => not_found().await,
    }
}
