//! tw-mcp serves Toolwarden's governed tools over the Model Context Protocol (with rmcp, the
//! official Rust SDK), so any MCP client (an agent, an IDE, a desktop assistant) reaches them
//! through the same pipeline as the CLI.
//!
//! Architecture invariant: this crate is a transport. `tools/list` shows what policy lets the
//! caller call (`Runtime::tool_decision`), `tools/call` builds a `ToolCall` and hands it to
//! `Runtime::execute_with_cancel`; it never judges, validates or audits a call itself. Every
//! outcome the pipeline can produce (denied, invalid, timed out, unknown tool...) is relayed as a
//! tool result with `isError: true`, never as a protocol error, so the agent sees the reason
//! and the audit log has the call.
//!
//! Who calls: the client's `clientInfo.name` from `initialize` becomes the agent id
//! `mcp:<name>`, unless the server was started with a configured agent id (`--agent`); either
//! way it lands in every audit row.

mod convert;
mod server;
pub mod sessions;
pub mod upstream;

use tokio_util::sync::CancellationToken;
use tw_runtime::{Runtime, SessionLimits};

pub use server::{Identity, TokenAgent, ToolwardenServer};
pub use sessions::{SessionOwner, SessionSlot, Sessions, SlotTicket};

/// The streamable HTTP transport's tower service, for the HTTP endpoint to mount.
pub type HttpService = rmcp::transport::StreamableHttpService<ToolwardenServer, Sessions>;

/// The governed tools over MCP's streamable HTTP transport: one [`ToolwardenServer`] per
/// session, calling as `identity` (or as the agent of the request's [`TokenAgent`]), and the
/// [`Sessions`] it runs on, bounded by `limits`. The caller mounts it behind its own checks:
/// this service checks neither `Host` nor `Origin` nor tokens, and it is the caller that asks
/// [`Sessions`] before a request opens, uses or closes a session. `shutdown` ends every session.
pub fn http_service(
    rt: Runtime,
    identity: Identity,
    limits: SessionLimits,
    shutdown: CancellationToken,
) -> (HttpService, Sessions) {
    use rmcp::transport::StreamableHttpServerConfig;

    let mut config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins();
    config.cancellation_token = shutdown;
    let sessions = Sessions::new(limits);
    let service = rmcp::transport::StreamableHttpService::new(
        move || Ok(ToolwardenServer::new(rt.clone(), identity.clone())),
        std::sync::Arc::new(sessions.clone()),
        config,
    );
    (service, sessions)
}

/// Why an MCP session could not run.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The client never completed the handshake (or the transport failed before it did).
    #[error("the MCP session did not start")]
    Start(#[from] Box<rmcp::service::ServerInitializeError>),
    /// The session's task failed.
    #[error("the MCP session failed")]
    Session(#[from] tokio::task::JoinError),
    /// A token asked for one more session than it may have open.
    #[error(
        "{owner} already has {limit} open MCP sessions, the most one token may have \
         ([serve] max_sessions_per_token); close one (an HTTP DELETE with its Mcp-Session-Id, \
         which MCP clients send when they close) or wait until one has had no request for \
         {idle_secs} s ([serve] session_idle_timeout_secs)"
    )]
    TooManySessions {
        /// Whose token.
        owner: String,
        /// The cap.
        limit: usize,
        /// The idle timeout, in seconds.
        idle_secs: u64,
    },
    /// A request named a session that is not open for its token.
    #[error(
        "no open MCP session {0} for this token: it was closed, it expired after being idle, or \
         it was never opened with this token; start a new session (initialize)"
    )]
    NoSuchSession(String),
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, McpError>;

/// How long a session that ended waits for its calls still in flight (cancelled when the session
/// ended) to write their audit records before the caller closes the runtime.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the runtime's tools to one MCP client on stdin/stdout until the client closes the
/// stream or `shutdown` fires. Calls still running then are cancelled, and this returns once
/// their audit records are written (or after [`DRAIN_LIMIT`]). Nothing but protocol messages is
/// written to stdout.
pub async fn serve_stdio(
    rt: Runtime,
    identity: Identity,
    shutdown: CancellationToken,
) -> Result<()> {
    use rmcp::ServiceExt as _;

    let server = ToolwardenServer::new(rt.clone(), identity);
    let stop = server.stop_token();
    let running = match server
        .serve_with_ct(rmcp::transport::stdio_pipes(), shutdown.child_token())
        .await
    {
        Ok(running) => running,
        Err(e) => {
            stop.cancel();
            return Err(McpError::Start(Box::new(e)));
        }
    };
    let ended = running.waiting().await;
    stop.cancel();
    drain(&rt).await;
    let reason = ended?;
    tracing::info!(?reason, "the MCP session ended");
    Ok(())
}

/// Waits until no call of this runtime is in flight (cancelled calls writing their audit
/// records), at most [`DRAIN_LIMIT`]. For any host that ends a session.
pub async fn drain(rt: &Runtime) {
    let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
    while !rt.pipeline().running().is_empty() {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                calls = rt.pipeline().running().len(),
                "calls still in flight after the MCP session ended"
            );
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
