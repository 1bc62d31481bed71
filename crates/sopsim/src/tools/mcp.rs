//! The `mcp` tool kind: one tool of a Model Context Protocol server that sopsim starts
//! as a child process and talks to over stdio, through the official Rust SDK (`rmcp`).
//! A simulation starts each distinct server once, lists its tools (their description
//! and argument schema become the sopsim tool's when the scenario gives none), calls
//! them, and stops the server when the simulation ends. A server's standard error is
//! read here, never passed to the terminal: its last lines go into error messages.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, Tool as McpTool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::{json, Map, Value};
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;

use futures::future::BoxFuture;
use sopsim_core::scenario::tool_settings::McpSettings;
use sopsim_core::scenario::McpCommand;

use super::kind::{Kind, Start};
use super::{
    ResultObject, RunsIn, SettingsError, Setup, SetupCause, Tool, ToolFailure, ToolSetupError,
};

/// One tool of a running server.
struct ServerTool {
    server: Arc<Server>,
    tool: String,
    timeout: Duration,
}

impl Start for McpSettings {
    /// Starts the server, unless one with the same command runs already, if the user's
    /// consent allows its program; the server must have the tool named.
    async fn start(self, setup: &mut Setup<'_>) -> Result<Box<dyn Kind>, ToolSetupError> {
        let command = self
            .command()
            .map_err(|e| setup.error(&["config"], SettingsError::from(e)))?;
        if !setup.consent.allows(&command.program) {
            let program = command.program;
            return Err(setup.error(&["config", "command"], SetupCause::NotAllowed { program }));
        }
        let timeout = Duration::from_millis(self.timeout_ms.0);
        let server = match setup.servers.start(&command, timeout).await {
            Ok(server) => server,
            Err(e) => return Err(setup.error(&["config", "command"], e)),
        };
        let tool = command.tool;
        if server.describe(&tool).is_none() {
            let names = server.names();
            return Err(setup.error(&["config", "tool"], SetupCause::NoSuchTool { tool, names }));
        }
        Ok(Box::new(ServerTool {
            server,
            tool,
            timeout,
        }))
    }
}

impl Kind for ServerTool {
    fn parameters(&self) -> Value {
        self.server
            .describe(&self.tool)
            .map(|(_, schema)| schema)
            .unwrap_or_else(|| json!({"type": "object"}))
    }

    fn description(&self) -> Option<String> {
        self.server.describe(&self.tool).map(|(text, _)| text)
    }

    fn runs_in(&self) -> RunsIn<'_> {
        RunsIn::Outside
    }

    fn payload_type(&self) -> &'static str {
        "response"
    }

    fn run_outside<'a>(
        &'a self,
        tool: &'a Tool,
        args: &'a Map<String, Value>,
    ) -> Option<BoxFuture<'a, Result<ResultObject, ToolFailure>>> {
        Some(Box::pin(async move {
            let o = self.server.call(&self.tool, args, self.timeout).await?;
            // The server's answer is the message.
            let mut r = tool.result(vec![o.clone()], 1);
            // The text goes in through a placeholder: braces in it stay text.
            r.metadata.insert("text".into(), o["text"].clone());
            r.llm_message = Some("{text}".into());
            Ok(r)
        }))
    }
}

/// Characters of a result's text kept.
const MAX_TEXT: usize = 64 * 1024;

/// Lines of a server's standard error kept for messages.
const STDERR_LINES: usize = 20;

/// Why a server could not be started; each names the program, and what the server
/// last wrote to its standard error, when it wrote anything.
#[derive(Debug, Error)]
pub enum StartError {
    /// The server's process could not be started.
    #[error("{program}: could not start")]
    Spawn {
        /// The program the server runs.
        program: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// The server did not finish the MCP handshake in time.
    #[error("{program}: no MCP handshake within {ms} ms{stderr}")]
    HandshakeTimeout {
        /// The program the server runs.
        program: String,
        /// The time allowed, in milliseconds.
        ms: u128,
        /// The last lines of the server's standard error.
        stderr: StderrTail,
    },
    /// The MCP handshake failed.
    #[error("{program}: the MCP handshake failed{stderr}")]
    Handshake {
        /// The program the server runs.
        program: String,
        /// The last lines of the server's standard error.
        stderr: StderrTail,
        /// Why the handshake failed.
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
    },
    /// The server did not list its tools in time.
    #[error("{program}: listing its tools took longer than {ms} ms{stderr}")]
    ListTimeout {
        /// The program the server runs.
        program: String,
        /// The time allowed, in milliseconds.
        ms: u128,
        /// The last lines of the server's standard error.
        stderr: StderrTail,
    },
    /// Listing the server's tools failed.
    #[error("{program}: listing its tools failed{stderr}")]
    List {
        /// The program the server runs.
        program: String,
        /// The last lines of the server's standard error.
        stderr: StderrTail,
        /// Why listing failed.
        #[source]
        source: Box<rmcp::ServiceError>,
    },
}

/// The last lines a server wrote to its standard error, shown after a message
/// (` (its stderr: …)`), or nothing.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Vec<String>);

impl std::fmt::Display for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        write!(f, " (its stderr: {})", self.0.join(" | "))
    }
}

/// A server's standard error, read as it comes (so the library never writes to the
/// terminal, and a full pipe never blocks the server), the last lines kept.
#[derive(Clone, Default)]
struct Stderr {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Set once the pipe has closed (the server has exited).
    closed: Arc<tokio::sync::Notify>,
}

impl Stderr {
    fn read(pipe: Option<ChildStderr>) -> Self {
        let stderr = Stderr::default();
        let Some(pipe) = pipe else {
            stderr.closed.notify_one();
            return stderr;
        };
        let keep = stderr.clone();
        // `AsyncBufReadExt` is tokio's `io-util`, which rmcp's child-process transport
        // turns on.
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = keep.lines.lock().unwrap_or_else(|p| p.into_inner());
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(super::cut(line.trim_end(), 300));
            }
            keep.closed.notify_one();
        });
        stderr
    }

    /// The lines so far.
    fn tail(&self) -> StderrTail {
        let kept = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        StderrTail(
            kept.iter()
                .filter(|l| !l.trim().is_empty())
                .cloned()
                .collect(),
        )
    }

    /// The lines once the server has exited (a failed start usually means it has),
    /// waiting a moment for the pipe to be read to its end.
    async fn tail_at_exit(&self) -> StderrTail {
        let _ = tokio::time::timeout(Duration::from_millis(500), self.closed.notified()).await;
        self.tail()
    }
}

/// A running server: its client session, the tools it listed, and its stderr.
pub struct Server {
    session: RunningService<RoleClient, ()>,
    tools: Vec<McpTool>,
    stderr: Stderr,
    /// Told when the server sent a message over [`MAX_MESSAGE_BYTES`].
    oversized: Arc<tokio::sync::Notify>,
    _child: tokio::process::Child,
    _group: ProcessGroup,
}

/// The largest message sopsim reads from a server (below the SDK's own limit, which
/// drops a longer message without telling the call waiting for it).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The server's messages as the SDK reads them: whole lines passed on one by one; a
/// line over [`MAX_MESSAGE_BYTES`] is dropped as it comes (never held in memory) and
/// `oversized` told, so the call waiting for it fails at once with a clear error.
fn answers(
    stdout: tokio::process::ChildStdout,
    oversized: Arc<tokio::sync::Notify>,
) -> tokio::io::DuplexStream {
    use tokio::io::{AsyncBufRead, AsyncWriteExt};
    let (sdk_side, mut ours) = tokio::io::duplex(64 * 1024);
    /// One line into `line`; `Ok(false)` at the end of the stream.
    async fn next_line(
        from: &mut (impl AsyncBufRead + Unpin),
        line: &mut Vec<u8>,
        too_long: &mut bool,
    ) -> std::io::Result<bool> {
        line.clear();
        *too_long = false;
        loop {
            let buf = from.fill_buf().await?;
            if buf.is_empty() {
                return Ok(!line.is_empty() || *too_long);
            }
            let (n, ends) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !*too_long && line.len() + n > MAX_MESSAGE_BYTES {
                *too_long = true;
                *line = Vec::new();
            }
            if !*too_long {
                line.extend_from_slice(&buf[..n]);
            }
            from.consume(n);
            if ends {
                return Ok(true);
            }
        }
    }
    tokio::spawn(async move {
        let mut from = BufReader::new(stdout);
        let (mut line, mut too_long) = (Vec::new(), false);
        while let Ok(true) = next_line(&mut from, &mut line, &mut too_long).await {
            if too_long {
                oversized.notify_waiters();
            } else if ours.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    sdk_side
}

/// A server's process group (the server and whatever it started), killed when dropped:
/// when the run that started it ends, and when it fails to start. A server that ignores
/// its closed stdin, or is busy in a slow call, never outlives the run.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.0.and_then(|id| libc::pid_t::try_from(id).ok()) {
            // SAFETY: killpg only sends a signal; the group is the server's own
            // (started with process_group(0)), never this process's.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

/// The servers of one simulation, started once each.
#[derive(Default)]
pub struct Servers {
    running: HashMap<(String, Vec<String>), Arc<Server>>,
}

impl Servers {
    /// The server for `command`, started (and its tools listed, each step within
    /// `limit`) on first use.
    pub async fn start(
        &mut self,
        command: &McpCommand,
        limit: Duration,
    ) -> Result<Arc<Server>, StartError> {
        let key = (command.program.clone(), command.args.clone());
        if let Some(s) = self.running.get(&key) {
            return Ok(s.clone());
        }
        let program = || command.program.clone();
        let mut server = tokio::process::Command::new(&command.program);
        server
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own, so that ending the group ends what the server started.
        #[cfg(unix)]
        server.process_group(0);
        let mut child = server.spawn().map_err(|source| StartError::Spawn {
            program: program(),
            source,
        })?;
        let group = ProcessGroup(child.id());
        let stderr = Stderr::read(child.stderr.take());
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(StartError::Spawn {
                program: program(),
                source: std::io::Error::other("its standard input and output are not pipes"),
            });
        };
        let oversized = Arc::new(tokio::sync::Notify::new());
        let transport = (answers(stdout, oversized.clone()), stdin);

        let session = match tokio::time::timeout(limit, ().serve(transport)).await {
            Err(_) => {
                return Err(StartError::HandshakeTimeout {
                    program: program(),
                    ms: limit.as_millis(),
                    stderr: stderr.tail(),
                })
            }
            Ok(Err(source)) => {
                return Err(StartError::Handshake {
                    program: program(),
                    stderr: stderr.tail_at_exit().await,
                    source: Box::new(source),
                })
            }
            Ok(Ok(session)) => session,
        };
        let tools = match tokio::time::timeout(limit, session.list_all_tools()).await {
            Err(_) => {
                return Err(StartError::ListTimeout {
                    program: program(),
                    ms: limit.as_millis(),
                    stderr: stderr.tail(),
                })
            }
            Ok(Err(source)) => {
                return Err(StartError::List {
                    program: program(),
                    stderr: stderr.tail_at_exit().await,
                    source: Box::new(source),
                })
            }
            Ok(Ok(tools)) => tools,
        };
        let server = Arc::new(Server {
            session,
            tools,
            stderr,
            oversized,
            _child: child,
            _group: group,
        });
        self.running.insert(key, server.clone());
        Ok(server)
    }
}

impl Server {
    /// The listed tool called `name`: its description and input schema.
    pub fn describe(&self, name: &str) -> Option<(String, Value)> {
        self.tools.iter().find(|t| t.name == name).map(|t| {
            (
                t.description.as_deref().unwrap_or_default().to_string(),
                Value::Object((*t.input_schema).clone()),
            )
        })
    }

    /// The names of the tools the server listed.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }

    /// Calls `tool`; a result becomes one object with its text (and its structured
    /// content, when the server gives one).
    pub async fn call(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Map<String, Value>, ToolFailure> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.clone());
        let oversized = self.oversized.notified();
        tokio::pin!(oversized);
        oversized.as_mut().enable();
        let answered = tokio::select! {
            answered = tokio::time::timeout(timeout, self.session.call_tool(params)) => answered,
            () = oversized => {
                return Err(ToolFailure::avoidable(format!(
                    "the MCP server's answer is over {} MiB, more than sopsim reads; ask for less",
                    MAX_MESSAGE_BYTES >> 20
                )))
            }
        };
        let result = answered
            .map_err(|_| {
                ToolFailure::unknown(format!(
                    "the MCP server did not answer within {} ms",
                    timeout.as_millis()
                ))
            })?
            .map_err(|e| {
                ToolFailure::unknown(format!("the MCP server failed: {e}{}", self.stderr.tail()))
            })?;
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        let text = super::cut(&text, MAX_TEXT);
        if result.is_error == Some(true) {
            return Err(ToolFailure::avoidable(format!(
                "the tool reported an error: {text}"
            )));
        }
        let mut obj = Map::new();
        obj.insert("text".into(), json!(text));
        if let Some(s) = result.structured_content {
            obj.insert("structured".into(), s);
        }
        Ok(obj)
    }
}
