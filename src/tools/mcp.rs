//! The `mcp` tool kind: one tool of a Model Context Protocol server that sopsim starts
//! as a child process and talks to over stdio, through the official Rust SDK (`rmcp`).
//! A simulation starts each distinct server once, lists its tools (their description
//! and argument schema become the sopsim tool's when the scenario gives none), calls
//! them, and stops the server when the simulation ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, Tool as McpTool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Map, Value};

use super::Failure;
use crate::scenario::McpCommand;

const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Characters of a result's text kept.
const MAX_TEXT: usize = 64 * 1024;

/// A running server: its client session and the tools it listed.
pub struct Server {
    session: RunningService<RoleClient, ()>,
    tools: Vec<McpTool>,
}

/// The servers of one simulation, started once each.
#[derive(Default)]
pub struct Servers {
    running: HashMap<(String, Vec<String>), Arc<Server>>,
}

impl Servers {
    /// The server for `command`, started (and its tools listed) on first use.
    pub async fn start(&mut self, command: &McpCommand) -> Result<Arc<Server>, String> {
        let key = (command.program.clone(), command.args.clone());
        if let Some(s) = self.running.get(&key) {
            return Ok(s.clone());
        }
        let transport = TokioChildProcess::new(
            tokio::process::Command::new(&command.program).configure(|c| {
                c.args(&command.args);
            }),
        )
        .map_err(|e| format!("{}: could not start: {e}", command.program))?;
        let session = tokio::time::timeout(
            Duration::from_millis(DEFAULT_TIMEOUT_MS),
            ().serve(transport),
        )
        .await
        .map_err(|_| {
            format!(
                "{}: no MCP handshake within {DEFAULT_TIMEOUT_MS} ms",
                command.program
            )
        })?
        .map_err(|e| format!("{}: the MCP handshake failed: {e}", command.program))?;
        let tools = tokio::time::timeout(
            Duration::from_millis(DEFAULT_TIMEOUT_MS),
            session.list_all_tools(),
        )
        .await
        .map_err(|_| {
            format!(
                "{}: listing its tools took longer than {DEFAULT_TIMEOUT_MS} ms",
                command.program
            )
        })?
        .map_err(|e| format!("{}: listing its tools failed: {e}", command.program))?;
        let server = Arc::new(Server { session, tools });
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
    ) -> Result<Map<String, Value>, Failure> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.clone());
        let result = tokio::time::timeout(timeout, self.session.call_tool(params))
            .await
            .map_err(|_| {
                Failure::unknown(format!(
                    "the MCP server did not answer within {} ms",
                    timeout.as_millis()
                ))
            })?
            .map_err(|e| Failure::unknown(format!("the MCP server failed: {e}")))?;
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        let text = super::cut(&text, MAX_TEXT);
        if result.is_error == Some(true) {
            return Err(Failure::avoidable(format!(
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

/// An `mcp` tool's timeout (`config.timeout_ms`).
pub fn timeout(config: &Map<String, Value>) -> Duration {
    Duration::from_millis(
        config
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_TIMEOUT_MS),
    )
}
