//! The door to `/mcp`'s sessions: asks tw-mcp's session table (`tw_mcp::Sessions`, where the
//! rules live) before a request opens, uses or closes a session, and turns its answers into HTTP.
//!
//! - A POST without `Mcp-Session-Id` may open a session: it reserves a place for the token first,
//!   and past `[serve] max_sessions_per_token` it is refused with **429 Too Many Requests**. 429
//!   because the client asked for more than its allowance and can succeed later by closing a
//!   session or letting one expire; 403 would say the token may never do this, 503 that the
//!   server is at fault, and 409 names no conflict with the request itself. No live session is
//!   closed to make room: evicting someone's working session to admit a new one would let a
//!   leaking client knock out its own healthy sessions (or another agent's, on a shared token)
//!   without anyone being told.
//! - A DELETE closes the token's session at once: **204 No Content** (RFC 9110: the deletion was
//!   enacted and there is nothing to add). rmcp answers 202 ("accepted, not yet done"), which the
//!   MCP SDKs log as a failed termination; they accept 200 and 204.
//! - A request naming a session that is not an open session of its token gets **404 Not Found**,
//!   the status the MCP specification gives for a terminated session (the client starts a new
//!   one). Another token's session is answered the same way: a session id is not a credential.
//!
//! Refusals carry a JSON-RPC error body, which MCP clients read and show (the Python SDK raises
//! it to the caller), rather than the admin API's error shape.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tw_mcp::{McpError, SessionOwner, Sessions};

/// The header MCP's streamable HTTP transport names a session with.
const SESSION_ID: &str = "mcp-session-id";

/// The gate itself, as axum middleware over `/mcp` (inside the guard, which has put the token's
/// [`SessionOwner`] in the request).
pub(crate) async fn gate(
    State(sessions): State<Sessions>,
    mut req: Request,
    next: Next,
) -> Response {
    let owner = req
        .extensions()
        .get::<SessionOwner>()
        .cloned()
        .unwrap_or_else(SessionOwner::unidentified);
    let id = req
        .headers()
        .get(SESSION_ID)
        .map(|v| v.to_str().unwrap_or("").to_owned());
    match (req.method(), id) {
        (&Method::DELETE, None) => refusal(
            StatusCode::BAD_REQUEST,
            "session_id_required",
            "DELETE closes a session: name it with the Mcp-Session-Id header",
        ),
        (&Method::DELETE, Some(id)) => match sessions.close(&id, &owner).await {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => refused(&e),
        },
        (_, Some(id)) if !sessions.owns(&id, &owner) => refused(&McpError::NoSuchSession(id)),
        (&Method::POST, None) => match sessions.reserve(&owner) {
            Ok(slot) => {
                req.extensions_mut().insert(slot.ticket());
                let response = next.run(req).await;
                // A handshake that opened a session took the place over; otherwise it is free
                // again.
                drop(slot);
                response
            }
            Err(e) => refused(&e),
        },
        _ => next.run(req).await,
    }
}

/// The status an answer of the session table stands for.
fn refused(e: &McpError) -> Response {
    let (status, reason) = match e {
        McpError::TooManySessions { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_sessions"),
        McpError::NoSuchSession(_) => (StatusCode::NOT_FOUND, "no_such_session"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    refusal(status, reason, &e.to_string())
}

/// A refusal as a JSON-RPC error (no request id: the body was not read).
fn refusal(status: StatusCode, reason: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32000, "message": message, "data": {"reason": reason}},
        })),
    )
        .into_response()
}
