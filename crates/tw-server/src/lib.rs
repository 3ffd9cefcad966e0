//! tw-server is Toolwarden's HTTP endpoint, run by `toolwarden serve` and by the desktop app
//! while it is open: the governed tools over MCP's streamable HTTP transport at `/mcp`, and the
//! admin API the desktop's operations are also reachable by (`/api/v1`, described by the
//! OpenAPI document at `/api/v1/openapi.json`), and the calls' metrics for Prometheus at
//! `/metrics` (the administrator's token, like the admin API).
//!
//! Architecture invariants:
//! - **Nothing gets past the guard.** Every route sits behind one middleware ([`guard`]) that
//!   checks, in order, the `Host` header (DNS rebinding), the `Origin` header (a web page in the
//!   user's browser) and the bearer token. A route added later is guarded because the guard is
//!   a layer over the whole router, not a call each handler makes.
//! - **Loopback unless said otherwise.** [`start`] refuses a non-loopback address before it
//!   binds, unless the configuration says `allow_non_loopback`.
//! - **Agents reach MCP only.** An agent's token opens `/mcp`, and its calls are recorded as its
//!   agent; the admin API (approving confirmations, switching tools) takes the administrator's
//!   token.
//! - **A transport.** Tool calls go through `tw-mcp` into `Runtime::execute`; the admin API calls
//!   the same runtime methods the CLI and the desktop do. Nothing here judges a call.
//! - **Sessions are bounded per token.** A request to `/mcp` passes the `sessions` gate, which
//!   asks tw-mcp's session table whether it may open, use or close a session (a cap per token,
//!   an idle timeout, a session answering only the token that opened it) and translates.

mod api;
pub mod body;
mod events;
pub mod guard;
mod openapi;
mod sessions;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio_util::sync::CancellationToken;
use tw_runtime::{Runtime, ServeSettings, SessionLimits};

pub use api::tool_summary;
pub use guard::Guard;

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address is not loopback and the configuration does not allow that.
    #[error(
        "refusing to listen on {0}: it is not a loopback address, so anyone who can reach this \
         machine could try tokens; set `[serve] allow_non_loopback = true` to mean it"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound (in use, not ours).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The administrator's token could not be read or made.
    #[error(transparent)]
    Runtime(#[from] tw_runtime::RuntimeError),
    /// The server stopped with an error.
    #[error("the HTTP endpoint failed: {0}")]
    Serve(std::io::Error),
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, ServerError>;

/// Refuses a non-loopback address unless `allow_non_loopback`.
pub fn check_listen(addr: SocketAddr, allow_non_loopback: bool) -> Result<()> {
    if addr.ip().is_loopback() || allow_non_loopback {
        Ok(())
    } else {
        Err(ServerError::NotLoopback(addr))
    }
}

/// What the handlers share.
pub(crate) struct Gateway {
    pub(crate) rt: Runtime,
    /// Ends event streams (and MCP sessions) when the endpoint stops.
    pub(crate) shutdown: CancellationToken,
}

/// The whole endpoint as a router, behind `guard`; MCP sessions bounded by `limits`;
/// `shutdown` ends MCP sessions and event streams. Tests drive it without a socket.
pub fn app(
    rt: Runtime,
    guard: Guard,
    limits: SessionLimits,
    shutdown: CancellationToken,
) -> Router {
    let (mcp, table) = tw_mcp::http_service(
        rt.clone(),
        tw_mcp::Identity::default(),
        limits,
        shutdown.clone(),
    );
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(table, sessions::gate));
    let state = Arc::new(Gateway { rt, shutdown });
    Router::new()
        .merge(mcp)
        .route(
            "/metrics",
            axum::routing::get(metrics).with_state(Arc::clone(&state)),
        )
        .nest("/api/v1", api::routes(state))
        .fallback(guard::not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// `GET /metrics`: what the calls this process ran add up to, in the OpenMetrics text format
/// Prometheus scrapes (the runtime keeps and renders them; see `tw_runtime::metrics`).
async fn metrics(
    axum::extract::State(gateway): axum::extract::State<Arc<Gateway>>,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        gateway.rt.metrics_text(),
    )
        .into_response()
}

/// A running endpoint.
pub struct Endpoint {
    /// The address it listens on (with the port chosen when 0 was asked for).
    pub addr: SocketAddr,
    /// The administrator's token file.
    pub token_file: std::path::PathBuf,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Endpoint {
    /// The MCP URL agents connect to.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Waits until the endpoint stops (after `shutdown` fired and open requests finished).
    pub async fn wait(self) -> Result<()> {
        match self.task.await {
            Ok(r) => r.map_err(ServerError::Serve),
            Err(e) => Err(ServerError::Serve(std::io::Error::other(e))),
        }
    }
}

/// Binds `settings.listen` (after [`check_listen`]), makes the administrator's token if there is
/// none, and serves until `shutdown`.
pub async fn start(
    rt: Runtime,
    settings: &ServeSettings,
    shutdown: CancellationToken,
) -> Result<Endpoint> {
    check_listen(settings.listen, settings.allow_non_loopback)?;
    let (token, token_file) = rt.tokens().admin_token()?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: settings.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: settings.listen,
        source,
    })?;
    let guard = Guard::new(rt.clone(), token, addr, settings);
    let router = app(rt, guard, settings.sessions, shutdown.clone());
    tracing::info!(%addr, "HTTP endpoint listening");
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    });
    Ok(Endpoint {
        addr,
        token_file,
        task,
    })
}

#[cfg(test)]
mod metrics_tests;
#[cfg(test)]
mod tests;
