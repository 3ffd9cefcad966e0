//! The rmcp `ServerHandler`: `initialize`, `tools/list` and `tools/call` over the runtime, the
//! progress notifications of a call that waits for a person, and `tools/list_changed` when what
//! the caller may call changes.
//!
//! The listing is recomputed on every `tools/list` (policy, mode and tools can change while a
//! session lasts) and compared once a second by a watcher that tells the client when it changed:
//! the runtime has no "policy changed" event, and computing the listing is a few hash lookups
//! per tool.
//!
//! Everything a session starts in the background (the watcher, a call's progress reports) ends
//! with it: the handler holds a guard that stops that work when rmcp drops the handler at the
//! session's end, and the tasks themselves hold only what they need, never the handler (a task
//! holding the handler would keep its own stop from ever firing: issue 15 found every HTTP
//! session's watcher, and its copy of the listing, alive forever).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Extensions, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};
use tw_core::{Caller, Decision, TraceId};
use tw_runtime::{EventKind, Received, Runtime, Subscription, new_trace_id};

use crate::convert;

/// How often a client that asked for progress hears that its call still waits for a person.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How often the watcher compares the listing with the one the client last had.
const LIST_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Who the calls of an MCP session are made as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// A configured agent id. `None`: `mcp:<clientInfo.name>` from the client's `initialize`.
    pub agent: Option<String>,
    /// The skill every call is made under, if any.
    pub skill: Option<String>,
    /// The person behind the agent, if known.
    pub user: Option<String>,
}

impl Identity {
    /// The caller for a client that introduced itself as `client` (if it did).
    pub fn caller(&self, client: Option<&str>) -> Caller {
        let mut caller = match (&self.agent, client) {
            (Some(agent), _) => Caller::agent(agent),
            (None, Some(name)) => Caller::agent(&format!("mcp:{name}")),
            (None, None) => Caller::agent("mcp:unknown"),
        };
        if let Some(s) = &self.skill {
            caller = caller.with_skill(s);
        }
        if let Some(u) = &self.user {
            caller = caller.with_user(u);
        }
        caller
    }
}

/// The MCP server for one session (one client): its handler methods relay to the runtime.
#[derive(Clone)]
pub struct ToolwardenServer {
    rt: Runtime,
    identity: Arc<Identity>,
    /// One trace per session, so the audit log groups what one agent session did.
    trace_id: TraceId,
    /// Stops the session's background work (the listing watcher, progress reports).
    stop: CancellationToken,
    /// Fires `stop` when the last copy of the handler goes, i.e. when the session ends.
    _stop_when_dropped: Arc<DropGuard>,
}

impl ToolwardenServer {
    /// A server for one session over `rt`, calling as `identity`.
    pub fn new(rt: Runtime, identity: Identity) -> Self {
        let stop = CancellationToken::new();
        Self {
            rt,
            identity: Arc::new(identity),
            trace_id: new_trace_id(),
            _stop_when_dropped: Arc::new(stop.clone().drop_guard()),
            stop,
        }
    }

    /// Cancelling this token stops the session's background work; it is cancelled when the
    /// last copy of this server is dropped.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The caller for a request: an agent token's agent (HTTP) beats the configured identity's
    /// agent, which beats the client's name.
    fn caller_for(&self, client: Option<&Implementation>, extensions: &Extensions) -> Caller {
        let caller = self.identity.caller(client.map(|c| c.name.as_str()));
        match token_agent(extensions) {
            Some(agent) => Caller {
                agent_id: Caller::agent(agent).agent_id,
                ..caller
            },
            None => caller,
        }
    }

    /// Tells the client when its listing changes, until the session ends. The task holds the
    /// runtime and the stop token, not the handler.
    fn watch_listing(&self, peer: Peer<RoleServer>, caller: Caller) {
        let rt = self.rt.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let mut last = listing(&rt, &caller);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(LIST_CHECK_EVERY) => {}
                }
                let now = listing(&rt, &caller);
                if now != last {
                    tracing::info!("the tool listing changed; telling the client");
                    if let Err(e) = peer.notify_tool_list_changed().await {
                        tracing::debug!(error = %e, "cannot send tools/list_changed");
                        return;
                    }
                    last = now;
                }
            }
        });
    }
}

/// The tools `caller` may call now (Ask included: those wait for a person), as listed.
fn listing(rt: &Runtime, caller: &Caller) -> Vec<Value> {
    callable(rt, caller)
        .iter()
        .map(|t| convert::tool_json(&t.definition))
        .collect()
}

fn callable(rt: &Runtime, caller: &Caller) -> Vec<Arc<tw_runtime::Entry>> {
    rt.registry()
        .list()
        .into_iter()
        .filter(|t| {
            let name = t.definition.name.as_str();
            // An upstream tool whose server is down is left out until it is back.
            rt.upstreams().tool_available(name)
                && rt
                    .tool_decision(name, caller)
                    .is_some_and(|d| d.decision != Decision::Deny)
        })
        .collect()
}

/// Aborts a task when dropped: a call's progress reports end with the call even when its future
/// is dropped rather than finished.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The agent an HTTP request's token stands for, put there by the HTTP endpoint's guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAgent(pub String);

fn token_agent(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<TokenAgent>())
        .map(|a| a.0.as_str())
}

/// Sends a progress notification every [`PROGRESS_EVERY`] while the call waits for a person.
/// Runs until aborted (when the call ends), the session stops or the event bus closes.
async fn report_waiting(
    mut events: Subscription,
    peer: Peer<RoleServer>,
    token: ProgressToken,
    stop: CancellationToken,
) {
    let mut waiting: Option<String> = None;
    let mut sent = 0_u32;
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            received = events.recv() => match received {
                None => return,
                Some(Received::Event(e)) => match &e.kind {
                    EventKind::ConfirmationRequested { confirmation_id, reason, .. } => {
                        waiting = Some(format!(
                            "waiting for confirmation ({reason}); approve: toolwarden confirm approve {confirmation_id}"
                        ));
                        tick.reset_immediately();
                    }
                    EventKind::ConfirmationResolved { .. } => waiting = None,
                    _ => {}
                },
                Some(Received::Missed(_)) => {}
            },
            _ = tick.tick(), if waiting.is_some() => {
                sent += 1;
                let mut progress = ProgressNotificationParam::new(token.clone(), f64::from(sent));
                progress.message = waiting.clone();
                if let Err(e) = peer.notify_progress(progress).await {
                    tracing::debug!(error = %e, "cannot send a progress notification");
                    return;
                }
            }
        }
    }
}

impl ServerHandler for ToolwardenServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        info.server_info = Implementation::new("toolwarden", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Toolwarden's governed tools: every call is checked against policy, validated, \
             sandboxed and audited. A refused call comes back as an error result that says why; \
             a call that needs a person's approval waits for it."
                .into(),
        );
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let client = &request.client_info;
        tracing::info!(
            client = %client.name,
            version = %client.version,
            agent = %self.caller_for(Some(client), &context.extensions).agent_id,
            "MCP client connected"
        );
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let caller = self.caller_for(
            context
                .peer
                .peer_info()
                .map(|info| info.client_info.clone())
                .as_ref(),
            &context.extensions,
        );
        self.watch_listing(context.peer, caller);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller_for(context.client_info().as_ref(), &context.extensions);
        let tools = callable(&self.rt, &caller)
            .iter()
            .filter_map(|t| convert::tool(&t.definition))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller_for(context.client_info().as_ref(), &context.extensions);
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let mut call = self.rt.call(&request.name, arguments, caller);
        call.trace_id = self.trace_id.clone();
        let progress = context.meta.get_progress_token().map(|token| {
            let events = self
                .rt
                .events()
                .subscribe_execution(call.execution_id.clone());
            AbortOnDrop(tokio::spawn(report_waiting(
                events,
                context.peer.clone(),
                token,
                self.stop.clone(),
            )))
        });
        let result = self.rt.execute_with_cancel(call, context.ct.clone()).await;
        drop(progress);
        let entry = self.rt.registry().get(&result.tool);
        let structured = entry
            .as_ref()
            .is_some_and(|t| convert::object_output_schema(&t.definition).is_some());
        let upstream = entry
            .as_ref()
            .is_some_and(|t| matches!(t.kind, tw_runtime::ToolKind::Upstream(_)));
        Ok(convert::call_result(&result, structured, upstream && !structured).into())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_agent_id_is_the_configured_one_else_the_client_name() {
        let configured = Identity {
            agent: Some("ci-bot".into()),
            skill: Some("retrieval".into()),
            user: Some("ana".into()),
        };
        let plain = Identity::default();
        assert_eq!(
            [
                configured.caller(Some("claude-code")),
                plain.caller(Some("claude-code")),
                plain.caller(Some("evil\nclient")),
                plain.caller(None),
            ],
            [
                Caller::agent("ci-bot")
                    .with_skill("retrieval")
                    .with_user("ana"),
                Caller::agent("mcp:claude-code"),
                Caller::agent("mcp:evilclient"),
                Caller::agent("mcp:unknown"),
            ]
        );
    }

    /// Issue 15: every HTTP session's listing watcher (and its copy of the listing) outlived
    /// the session, because the watcher held the handler. A real session over an in-memory
    /// pipe: once the client has initialized (the watcher runs) and gone, the session's stop
    /// token fires.
    #[tokio::test]
    async fn a_sessions_background_work_stops_when_the_session_ends() {
        use rmcp::ServiceExt as _;

        let dir = tempfile::tempdir().unwrap();
        let mut config = tw_runtime::Config::parse(
            "license_tier = \"pro\"\n",
            std::path::Path::new("/etc/tw/config.toml"),
            None,
        )
        .unwrap();
        // scripts/test runs these tests again on a team store.
        config.store_url = tw_runtime::testing::suite_database().await;
        let rt = Runtime::open(tw_runtime::RuntimeOptions::new(
            dir.path().join("data"),
            vec![dir.path().to_owned()],
            config,
        ))
        .await
        .unwrap();
        let server = ToolwardenServer::new(rt.clone(), Identity::default());
        let stop = server.stop_token();
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn(server.serve(server_io));
        let client = ().serve(client_io).await.unwrap();
        let listed = client.list_all_tools().await.unwrap();
        assert!(!listed.is_empty());
        let session = serving.await.unwrap().unwrap();
        // The watcher started with the client's `initialized` and runs past a check or two.
        tokio::time::sleep(LIST_CHECK_EVERY * 2).await;
        assert!(!stop.is_cancelled(), "stopped while the session was open");
        client.cancel().await.unwrap();
        session.waiting().await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !stop.is_cancelled() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the session ended 5 s ago and its background work still runs"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.close().await;
    }
}
