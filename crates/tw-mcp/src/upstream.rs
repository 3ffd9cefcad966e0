//! The MCP client side: other MCP servers ("upstream" servers, `[upstream.NAME]` in the config)
//! imported into the runtime. A stdio server is started inside the sandbox
//! (`Runtime::start_upstream_process`, standard isolation at least); an HTTP one is reached with
//! its configured headers. Their tools are registered as `NAME__tool` (`Runtime::register_upstream`)
//! and every call goes through the pipeline, then through this client.
//!
//! One supervisor task per server keeps it connected: a server that exits or drops its
//! connection is marked down (its tools fail at once with `upstream_unavailable`) and started
//! again after a back-off that doubles from half a second to 30 seconds, and starts over once a
//! connection has lasted a minute. A server's `tools/list_changed` makes the supervisor list
//! its tools again, so a changed definition is pinned-checked at once.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request, ServerResult, Tool as McpTool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tw_core::{
    ParameterSchema, RiskLevel, ToolCategory, ToolDefinition, ToolGroup, ToolName, ToolStatus,
};
use tw_runtime::builtins::{ToolFailure, ToolFuture};
use tw_runtime::upstream::UPSTREAM_ERROR;
use tw_runtime::{ImportedTool, Runtime, UpstreamClient, UpstreamServer, UpstreamTransport};

/// The first wait before a restart; doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lasted this long resets the back-off.
const STABLE: Duration = Duration::from_secs(60);
/// How long the first connection of each server may take before the host goes on without it.
pub const FIRST_CONNECT_LIMIT: Duration = Duration::from_secs(20);

/// The client side's handler: it only needs to hear that the server's tools changed.
#[derive(Clone, Default)]
struct Handler {
    changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info =
            rmcp::model::Implementation::new("toolwarden", env!("CARGO_PKG_VERSION"));
        info
    }
}

/// Calls into one connected server.
struct Client {
    peer: Peer<RoleClient>,
}

impl UpstreamClient for Client {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: &'a Value,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let failed = |code: &str, message: String| ToolFailure {
                status: ToolStatus::Failed,
                code: code.to_owned(),
                message,
            };
            let mut params = CallToolRequestParams::new(tool.to_owned());
            if let Value::Object(m) = arguments {
                params = params.with_arguments(m.clone());
            }
            let request = ClientRequest::CallToolRequest(Request::new(params));
            let handle = self
                .peer
                .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
                .await
                .map_err(|e| {
                    failed(
                        tw_runtime::upstream::UNAVAILABLE,
                        format!("the upstream server cannot be reached: {e}"),
                    )
                })?;
            let peer = handle.peer.clone();
            let id = handle.id.clone();
            let answer = tokio::select! {
                r = handle.await_response() => r,
                () = cancel.cancelled() => {
                    // Tell the server, so it stops too; the call has ended here either way.
                    let _ = peer
                        .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                            Some(id),
                            Some("cancelled by Toolwarden".into()),
                        ))
                        .await;
                    return Err(failed(tw_core::ErrorCode::CANCELLED, "the call was cancelled".into()));
                }
            };
            let result = match answer {
                Ok(ServerResult::CallToolResult(r)) => r,
                Ok(other) => {
                    return Err(failed(
                        UPSTREAM_ERROR,
                        format!("the upstream server answered a tool call with {other:?}"),
                    ));
                }
                // The connection dropped (the server died, say): it is not there to answer.
                Err(e) => {
                    return Err(failed(
                        tw_runtime::upstream::UNAVAILABLE,
                        format!("the upstream server did not answer: {e}"),
                    ));
                }
            };
            let content = serde_json::to_value(&result.content).unwrap_or(Value::Null);
            if result.is_error == Some(true) {
                return Err(failed(UPSTREAM_ERROR, content_text(&content)));
            }
            Ok(match result.structured_content {
                Some(s) => s,
                None => json!({ "content": content }),
            })
        })
    }
}

/// The text blocks of a result's content, joined (what an error says).
fn content_text(content: &Value) -> String {
    let texts: Vec<&str> = content
        .as_array()
        .map(|a| a.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    if texts.is_empty() {
        "the upstream tool reported an error".to_owned()
    } else {
        texts.join("\n")
    }
}

/// `camelCase`, `kebab-case` and anything else as `snake_case` (the runtime's tool names).
fn snake(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            prev_lower = true;
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_matches('_').to_owned()
}

/// The name a server's tool is registered as: `server__tool`, the tool's name in snake_case.
pub fn registered_name(server: &str, tool: &str) -> String {
    format!("{server}__{}", snake(tool))
}

/// A pinned tool as the CLI's `mcp review --json` and the admin API show it for review: its
/// registered name, both definitions and since when it changed.
pub fn review_entry(pin: &tw_runtime::upstream::PinRow) -> Value {
    json!({
        "tool": registered_name(&pin.server, &pin.tool),
        "server": pin.server,
        "upstream_tool": pin.tool,
        "pinned": pin.definition,
        "pinned_at": pin.pinned_at,
        "pinned_by": pin.pinned_by,
        "now": pin.pending_definition,
        "changed_since": pin.pending_since,
    })
}

/// An upstream tool as a runtime definition, or why it cannot be imported. A schema the runtime
/// cannot check is refused: a tool whose arguments cannot be validated is not registered.
fn import(server: &str, tool: &McpTool) -> Result<ImportedTool, String> {
    let name = ToolName::new(&registered_name(server, &tool.name)).map_err(|e| e.to_string())?;
    let input = Value::Object((*tool.input_schema).clone());
    let parameters =
        ParameterSchema::parameters(input.clone()).map_err(|e| format!("its input schema: {e}"))?;
    let output = tool
        .output_schema
        .as_ref()
        .map(|o| Value::Object((**o).clone()));
    let output_schema = output
        .clone()
        .map(ParameterSchema::parameters)
        .transpose()
        .map_err(|e| format!("its output schema: {e}"))?;
    let mut description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default()
        .trim()
        .to_owned();
    if description.is_empty() {
        description = format!("Tool {} of MCP server {server}.", tool.name);
    }
    let description: String = description.chars().take(4096).collect();
    let group = ToolGroup::new(&format!("mcp_{server}")).map_err(|e| e.to_string())?;
    let mut def = ToolDefinition::new(
        name,
        description,
        ToolCategory::ExternalApi,
        group,
        parameters,
    );
    def.output_schema = output_schema;
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    // MCP's defaults: not read-only, destructive.
    let destructive = hints.and_then(|a| a.destructive_hint).unwrap_or(true);
    def.constraints.side_effects = !read_only;
    def.risk_level = match (read_only, destructive) {
        (true, _) => RiskLevel::Low,
        (false, false) => RiskLevel::Medium,
        (false, true) => RiskLevel::High,
    };
    def.metadata.insert("upstream_server".into(), json!(server));
    def.metadata
        .insert("upstream_tool".into(), json!(tool.name));
    Ok(ImportedTool {
        definition: def,
        upstream_name: tool.name.to_string(),
        pinned: json!({
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": input,
            "outputSchema": output,
        }),
    })
}

/// One live connection, and the sandboxed process behind it (stdio).
struct Connection {
    peer: Peer<RoleClient>,
    /// Ends the client's service loop.
    stop: CancellationToken,
    /// Fired when the service loop ended (the transport closed, or `stop`).
    ended: CancellationToken,
    changed: Arc<Notify>,
    process: Option<tw_runtime::Interactive>,
}

impl Connection {
    fn new(
        service: RunningService<RoleClient, Handler>,
        changed: Arc<Notify>,
        process: Option<tw_runtime::Interactive>,
    ) -> Self {
        let peer = service.peer().clone();
        let stop = CancellationToken::new();
        let token = service.cancellation_token();
        let on_stop = stop.clone();
        let ended = CancellationToken::new();
        let done = ended.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = service.waiting() => {}
                () = on_stop.cancelled() => token.cancel(),
            }
            done.cancel();
        });
        Self {
            peer,
            stop,
            ended,
            changed,
            process,
        }
    }

    /// Ends the session and the process behind it.
    async fn close(mut self) -> Option<String> {
        self.stop.cancel();
        self.ended.cancelled().await;
        match self.process.take() {
            Some(p) => p.stop().await.ok().map(|x| describe_exit(&x)),
            None => None,
        }
    }
}

async fn connect(rt: &Runtime, server: &UpstreamServer) -> Result<Connection, String> {
    let handler = Handler::default();
    let changed = Arc::clone(&handler.changed);
    match &server.transport {
        UpstreamTransport::Stdio { .. } => {
            let mut process = rt
                .upstreams()
                .start_upstream_process(server)
                .await
                .map_err(|e| format!("it could not be started: {e}"))?;
            let (Some(stdout), Some(stdin)) = (process.take_stdout(), process.take_stdin()) else {
                return Err("its standard streams are not available".to_owned());
            };
            match rmcp::serve_client(handler, (stdout, stdin)).await {
                Ok(service) => Ok(Connection::new(service, changed, Some(process))),
                Err(e) => {
                    let exit = process.stop().await.ok();
                    Err(format!(
                        "it did not complete the MCP handshake ({e}){}",
                        exit.map(|x| describe_exit(&x)).unwrap_or_default()
                    ))
                }
            }
        }
        UpstreamTransport::Http { url, .. } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            // Through the egress gatekeeper: only the endpoint's host, at addresses checked
            // for it, no redirects.
            let client = rt
                .upstreams()
                .upstream_http_client(server)
                .await
                .map_err(|e| e.to_string())?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.clone()),
            );
            let service = rmcp::serve_client(handler, transport).await.map_err(|e| {
                // The gatekeeper's refusal is deep in the causes: say all of them.
                let mut why = format!("it did not complete the MCP handshake: {e}");
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    why.push_str(&format!(": {s}"));
                    source = s.source();
                }
                why
            })?;
            Ok(Connection::new(service, changed, None))
        }
    }
}

fn describe_exit(x: &tw_runtime::InteractiveExit) -> String {
    let how = match (x.exit.code, x.exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".to_owned(),
    };
    let tail = String::from_utf8_lossy(&x.stderr_tail);
    let last = tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if last.is_empty() {
        format!("; it ended with {how}")
    } else {
        format!(
            "; it ended with {how}: {}",
            last.chars().take(300).collect::<String>()
        )
    }
}

/// Lists the server's tools and registers them; returns how many were registered.
async fn register(rt: &Runtime, server: &str, conn: &Connection) -> Result<usize, String> {
    let tools = conn
        .peer
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let mut imported = Vec::new();
    for t in &tools {
        match import(server, t) {
            Ok(i) => imported.push(i),
            Err(e) => {
                tracing::warn!(server, tool = %t.name, error = %e, "an upstream tool was not imported")
            }
        }
    }
    let client = Arc::new(Client {
        peer: conn.peer.clone(),
    });
    let registered = rt
        .upstreams()
        .register_upstream(server, imported, client)
        .await
        .map_err(|e| format!("its tools could not be registered: {e}"))?;
    Ok(registered.len())
}

/// Keeps `server` connected until `shutdown`; `first` hears when the first attempt ended.
async fn supervise(
    rt: Runtime,
    server: UpstreamServer,
    shutdown: CancellationToken,
    mut first: Option<tokio::sync::oneshot::Sender<()>>,
) {
    let name = server.name.clone();
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = tokio::time::Instant::now();
        let why = match connect(&rt, &server).await {
            Err(e) => e,
            Ok(mut conn) => match register(&rt, &name, &conn).await {
                Err(e) => {
                    let exit = conn.close().await;
                    format!("{e}{}", exit.unwrap_or_default())
                }
                Ok(n) => {
                    tracing::info!(server = %name, tools = n, "upstream MCP server connected");
                    if let Some(tx) = first.take() {
                        let _ = tx.send(());
                    }
                    let why = serve_until_closed(&rt, &name, &mut conn, &shutdown).await;
                    rt.upstreams().upstream_down(&name, why.clone());
                    let exit = conn.close().await;
                    if shutdown.is_cancelled() {
                        return;
                    }
                    format!("{why}{}", exit.unwrap_or_default())
                }
            },
        };
        tracing::warn!(server = %name, error = %why, retry_in = ?backoff, "upstream MCP server is down");
        rt.upstreams().upstream_down(&name, why);
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        if started.elapsed() >= STABLE {
            backoff = FIRST_BACKOFF;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Serves calls until the connection ends (or `shutdown`), listing again on `list_changed`.
async fn serve_until_closed(
    rt: &Runtime,
    name: &str,
    conn: &mut Connection,
    shutdown: &CancellationToken,
) -> String {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return "Toolwarden is shutting down".into(),
            () = conn.ended.cancelled() => return "the connection closed".into(),
            () = conn.changed.notified() => {
                if let Err(e) = register(rt, name, conn).await {
                    return e;
                }
            }
        }
    }
}

/// The running supervisors of [`start`].
#[must_use = "await `stopped` after cancelling the shutdown token, or the servers may outlive the host"]
pub struct Supervisors(Vec<tokio::task::JoinHandle<()>>);

impl Supervisors {
    /// Waits until every supervisor has stopped its server (after `shutdown` was cancelled).
    pub async fn stopped(self) {
        for task in self.0 {
            let _ = task.await;
        }
    }
}

/// Starts a supervisor for each upstream server and returns once each has connected or failed
/// once (at most [`FIRST_CONNECT_LIMIT`]), so a host's first `tools/list` already has their
/// tools. The supervisors keep going until `shutdown`.
pub async fn start(
    rt: &Runtime,
    servers: Vec<UpstreamServer>,
    shutdown: CancellationToken,
) -> Supervisors {
    let mut firsts = Vec::new();
    let mut tasks = Vec::new();
    for server in servers {
        let (tx, rx) = tokio::sync::oneshot::channel();
        firsts.push(rx);
        tasks.push(tokio::spawn(supervise(
            rt.clone(),
            server,
            shutdown.clone(),
            Some(tx),
        )));
    }
    // They run at once; waiting for each in turn waits for the slowest.
    let all = async {
        for rx in firsts {
            let _ = rx.await;
        }
    };
    let _ = tokio::time::timeout(FIRST_CONNECT_LIMIT, all).await;
    Supervisors(tasks)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn upstream_names_become_snake_case() {
        let cases = [
            ("read_text_file", "read_text_file"),
            ("getTinyImage", "get_tiny_image"),
            ("get-sum", "get_sum"),
            (
                "trigger-long-running-operation",
                "trigger_long_running_operation",
            ),
            ("GZIP file", "gzip_file"),
            ("x.y", "x_y"),
        ];
        for (input, want) in cases {
            assert_eq!(snake(input), want, "{input}");
        }
    }

    #[test]
    fn a_tool_is_imported_with_its_schemas_and_hints_and_pinned() {
        let tool: McpTool = serde_json::from_value(json!({
            "name": "readFile",
            "description": "Reads a file.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            "annotations": {"readOnlyHint": true}
        }))
        .unwrap();
        let i = import("fs", &tool).unwrap();
        assert_eq!(i.definition.name.as_str(), "fs__read_file");
        assert_eq!(i.definition.group.as_str(), "mcp_fs");
        assert_eq!(i.definition.risk_level, RiskLevel::Low);
        assert!(i.definition.is_read_only());
        assert_eq!(i.upstream_name, "readFile");
        assert_eq!(i.pinned["description"], "Reads a file.");
        // Not read-only, no hints: MCP's default is destructive.
        let tool: McpTool = serde_json::from_value(json!({
            "name": "rm", "inputSchema": {"type": "object"}
        }))
        .unwrap();
        let i = import("fs", &tool).unwrap();
        assert_eq!(
            (i.definition.risk_level, i.definition.description.as_str()),
            (RiskLevel::High, "Tool rm of MCP server fs.")
        );
        // A schema that is not an object cannot be validated against: refused.
        let tool: McpTool = serde_json::from_value(json!({
            "name": "odd", "inputSchema": {"type": "string"}
        }))
        .unwrap();
        assert!(
            import("fs", &tool)
                .unwrap_err()
                .starts_with("its input schema")
        );
    }
}
