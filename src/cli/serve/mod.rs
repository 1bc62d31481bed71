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
mod web_input;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use actix_web_lab::sse;
use serde::Deserialize;
use serde_json::{json, Value};

use sopsim::runner::{Control, RunControl};
use sopsim::scenario::Scenario;

pub use folder::Folder;
pub use hub::Hub;
pub use web_input::{Inbox, Refused, WebInput};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// Scripts and styles only from the page's own origin; nothing inline, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How often an idle event stream carries a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The name of the cookie that carries the token after the first visit.
const TOKEN_COOKIE: &str = "sopsim_token";

/// What the server shows.
pub enum Source {
    Live(Live),
    Folder(Folder),
}

/// A run in progress and its handles.
pub struct Live {
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
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the web server: {0}")]
    Start(std::io::Error),
}

/// A server running on a thread of its own.
pub struct Server {
    pub url: String,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Stops accepting requests and waits for the server's thread.
    pub fn stop(mut self) {
        futures::executor::block_on(self.handle.stop(false));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The scenario as the page draws it: states with their roles and edges, the agents.
pub fn scenario_json(s: &Scenario) -> Value {
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
pub fn start(
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
    let state = web::Data::new(AppState {
        source,
        token,
        port: local.port(),
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("sopsim-web".into())
        .spawn(move || {
            let system = actix_web::rt::System::new();
            system.block_on(async move {
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(state.clone())
                        .app_data(web::JsonConfig::default().limit(256 * 1024).error_handler(
                            |e, _| {
                                let message = e.to_string();
                                actix_web::error::InternalError::from_response(
                                    e,
                                    HttpResponse::BadRequest().json(json!({ "error": message })),
                                )
                                .into()
                            },
                        ))
                        .wrap(
                            actix_web::middleware::DefaultHeaders::new()
                                .add((header::CONTENT_SECURITY_POLICY, CSP))
                                .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
                                .add((header::REFERRER_POLICY, "no-referrer")),
                        )
                        .wrap(actix_web::middleware::from_fn(check_token))
                        .wrap(actix_web::middleware::from_fn(check_origin))
                        .route("/", web::get().to(index))
                        .route("/app.js", web::get().to(script))
                        .route("/style.css", web::get().to(style))
                        .route("/events", web::get().to(events))
                        .route("/api/state", web::get().to(state_json))
                        .route("/api/input", web::post().to(input))
                        .route("/api/{control}", web::post().to(control))
                        .route("/api/runs/{id:.*}/events", web::get().to(run_events))
                        .route("/api/runs/{id:.*}/summary", web::get().to(run_summary))
                        .route("/api/events", web::get().to(folder_events))
                        .route("/api/network", web::get().to(network))
                        .route("/api/runs/{id:.*}/network", web::get().to(run_network))
                        .route("/plots/{name}", web::get().to(plot))
                        .default_service(web::to(not_found))
                })
                .workers(1)
                .disable_signals()
                .listen(listener);
                let server = match server {
                    Ok(s) => s.run(),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let _ = tx.send(Ok(server.handle()));
                let _ = server.await;
            });
        })
        .map_err(ServeError::Start)?;
    let handle = rx
        .recv()
        .map_err(|_| ServeError::Start(std::io::Error::other("the server thread ended")))?
        .map_err(ServeError::Start)?;
    Ok(Server {
        url,
        handle,
        thread: Some(thread),
    })
}

struct AppState {
    source: Source,
    token: Option<String>,
    /// The port the server listens on, which a loopback Host must name.
    port: u16,
}

/// Whether `host` (a Host header) names this machine on `port`: `127.0.0.1`,
/// `localhost` or `[::1]`, with the port (which browsers leave out only for port 80).
fn is_loopback_host(host: &str, port: u16) -> bool {
    let (name, given) = match host.rsplit_once(':') {
        Some((name, p)) if !p.contains(']') => (name, p.parse::<u16>().ok()),
        _ => (host, Some(80)),
    };
    given == Some(port)
        && ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
}

/// Refuses what a page of another site could make a browser send. Without a token the
/// Host must be a loopback name (a site whose own name resolves to 127.0.0.1, DNS
/// rebinding, sends its own name and is refused); with a token any Host may reach the
/// token check. Either way a request whose `Origin` is not the viewer's own is refused,
/// so a cross-site page cannot step, stop or type into a run.
async fn check_origin(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return next.call(req).await.map(|r| r.map_into_boxed_body());
    };
    let header = |name| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let host = header(header::HOST).unwrap_or_default();
    if state.token.is_none() && !is_loopback_host(&host, state.port) {
        let response = HttpResponse::Forbidden().json(json!({
            "error": format!("this viewer answers only at 127.0.0.1:{0}, localhost:{0} or [::1]:{0}", state.port)
        }));
        return Ok(req.into_response(response));
    }
    if let Some(origin) = header(header::ORIGIN) {
        if origin != format!("http://{host}") {
            let response = HttpResponse::Forbidden()
                .json(json!({ "error": "requests from other sites are refused" }));
            return Ok(req.into_response(response));
        }
    }
    next.call(req).await.map(|r| r.map_into_boxed_body())
}

/// With a token set, every request carries it: as `?token=`, as a bearer token, or in
/// the cookie the page gets on its first visit.
async fn check_token(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let expected = req
        .app_data::<web::Data<AppState>>()
        .and_then(|s| s.token.clone());
    let Some(expected) = expected else {
        return next.call(req).await.map(|r| r.map_into_boxed_body());
    };
    let query = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .unwrap_or_default();
    let from_query = query.iter().any(|(k, v)| k == "token" && *v == expected);
    let from_header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t == expected);
    let from_cookie = req
        .cookie(TOKEN_COOKIE)
        .is_some_and(|c| c.value() == expected);
    if !(from_query || from_header || from_cookie) {
        let response = HttpResponse::Unauthorized()
            .json(json!({ "error": "this server needs its token (the URL it printed has it)" }));
        return Ok(req.into_response(response));
    }
    let mut response = next.call(req).await?.map_into_boxed_body();
    if from_query {
        let cookie = actix_web::cookie::Cookie::build(TOKEN_COOKIE, expected)
            .path("/")
            .http_only(true)
            .same_site(actix_web::cookie::SameSite::Strict)
            .finish();
        let _ = response.response_mut().add_cookie(&cookie);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn only_this_machines_names_on_the_port_are_loopback_hosts() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost:8080",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(host, 8080), "{host}");
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
            assert!(!is_loopback_host(host, 8080), "{host}");
        }
        assert!(is_loopback_host("localhost", 80));
        assert!(is_loopback_host("[::1]", 80));
    }
}

async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(INDEX)
}

async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .body(SCRIPT)
}

async fn style() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .body(STYLE)
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(json!({ "error": "no such page" }))
}

fn bad_request(message: impl Into<String>) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": message.into() }))
}

async fn events(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let Source::Live(live) = &state.source else {
        return not_found().await;
    };
    let last_id = req
        .headers()
        .get("Last-Event-ID")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let Some(events) = live.hub.subscribe(last_id) else {
        return HttpResponse::ServiceUnavailable()
            .insert_header(("Retry-After", "5"))
            .body(format!(
                "{} browsers are watching this run, the most it serves at once",
                hub::MAX_CLIENTS
            ));
    };
    let stream = futures::StreamExt::map(events, Ok::<_, std::convert::Infallible>);
    use actix_web::Responder;
    sse::Sse::from_stream(stream)
        .with_keep_alive(KEEP_ALIVE)
        .with_retry_duration(Duration::from_secs(1))
        .respond_to(&req)
        .map_into_boxed_body()
}

async fn state_json(state: web::Data<AppState>) -> HttpResponse {
    match &state.source {
        Source::Live(live) => HttpResponse::Ok().json(json!({
            "mode": "live",
            "scenario": live.scenario,
            "live": live.hub.live(),
            "paused": live.control.is_paused(),
        })),
        Source::Folder(folder) => HttpResponse::Ok().json(folder.state()),
    }
}

async fn control(
    path: web::Path<String>,
    body: web::Json<Value>,
    state: web::Data<AppState>,
) -> HttpResponse {
    let Source::Live(live) = &state.source else {
        return bad_request("this server shows a finished run; there is nothing to control");
    };
    if !body.is_object() {
        return bad_request("the body must be a JSON object, such as {}");
    }
    let control = match path.as_str() {
        "pause" => Control::Pause,
        "resume" => Control::Resume,
        "step" => Control::Step,
        "stop" => Control::Stop,
        _ => return not_found().await,
    };
    live.control.send(control);
    HttpResponse::Ok().json(json!({ "sent": path.as_str() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    name: String,
    text: String,
}

async fn input(body: web::Json<Input>, state: web::Data<AppState>) -> HttpResponse {
    let Source::Live(live) = &state.source else {
        return bad_request("this server shows a finished run; nobody is typing");
    };
    let Input { name, text } = body.into_inner();
    if text.trim().is_empty() {
        return bad_request("text: empty");
    }
    if text.len() > 64 * 1024 {
        return bad_request("text: over 64 KiB");
    }
    match live.inbox.deliver(&name, text) {
        Ok(()) => HttpResponse::Ok().json(json!({ "sent": true })),
        Err(Refused::NotWaiting) => HttpResponse::Conflict()
            .json(json!({ "error": format!("it is not {name}'s turn to type") })),
        Err(Refused::Gone) => HttpResponse::Conflict()
            .json(json!({ "error": format!("{name}'s turn was already answered") })),
    }
}

fn folder(state: &AppState) -> Option<&Folder> {
    match &state.source {
        Source::Folder(f) => Some(f),
        Source::Live(_) => None,
    }
}

fn json_or_404(value: Option<Value>) -> HttpResponse {
    match value {
        Some(v) => HttpResponse::Ok().json(v),
        None => HttpResponse::NotFound().json(json!({ "error": "no such run" })),
    }
}

async fn folder_events(state: web::Data<AppState>) -> HttpResponse {
    json_or_404(folder(&state).and_then(|f| f.events(None)))
}

async fn run_events(path: web::Path<String>, state: web::Data<AppState>) -> HttpResponse {
    json_or_404(folder(&state).and_then(|f| f.events(Some(&path))))
}

/// The run's networks; 404 for a run without populations.
async fn network(state: web::Data<AppState>) -> HttpResponse {
    match &state.source {
        Source::Live(live) => json_or_404(live.network.clone()),
        Source::Folder(f) => json_or_404(f.network(None)),
    }
}

async fn run_network(path: web::Path<String>, state: web::Data<AppState>) -> HttpResponse {
    json_or_404(folder(&state).and_then(|f| f.network(Some(&path))))
}

async fn run_summary(path: web::Path<String>, state: web::Data<AppState>) -> HttpResponse {
    json_or_404(folder(&state).and_then(|f| f.summary(Some(&path))))
}

async fn plot(path: web::Path<String>, state: web::Data<AppState>) -> HttpResponse {
    match folder(&state).and_then(|f| f.plot(&path)) {
        Some((bytes, kind)) => HttpResponse::Ok().content_type(kind).body(bytes),
        None => not_found().await,
    }
}
