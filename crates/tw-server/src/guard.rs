//! The one gate in front of every route: `Host` (against DNS rebinding), `Origin` (against web
//! pages in the user's browser) and the bearer token, in that order, then which routes the
//! token's holder may reach. Refusals are JSON bodies that say what to fix, with 403 for a
//! request from the wrong place and 401 for a missing or unknown token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tw_mcp::SessionOwner;
use tw_runtime::{Runtime, ServeSettings, TokenHolder};

/// The names a loopback endpoint is always reachable by.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// What the guard checks requests against.
pub struct Guard {
    rt: Runtime,
    /// The administrator's token's SHA-256 (hashed once, not per request).
    admin_sha256: String,
    /// `(host, port)`: `None` matches any port.
    hosts: Vec<(String, Option<u16>)>,
    /// Normalized `scheme://host:port`.
    origins: Vec<String>,
}

/// Who a request that passed the guard came from (in the request's extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// The administrator's token.
    Admin,
    /// An agent's token.
    Agent(String),
}

impl Guard {
    /// A guard for an endpoint bound to `addr`, with the administrator's `admin_token`.
    pub fn new(
        rt: Runtime,
        admin_token: String,
        addr: SocketAddr,
        settings: &ServeSettings,
    ) -> Self {
        let mut hosts: Vec<(String, Option<u16>)> = LOOPBACK_HOSTS
            .iter()
            .map(|h| ((*h).to_owned(), None))
            .collect();
        // The bound address itself: an IP literal in `Host` cannot be a rebound name.
        if !addr.ip().is_unspecified() {
            hosts.push((host_literal(addr), None));
        }
        for h in &settings.allowed_hosts {
            hosts.push(split_host(h).unwrap_or_else(|| (h.clone(), None)));
        }
        let port = addr.port();
        let mut origins: Vec<String> = LOOPBACK_HOSTS
            .iter()
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        origins.extend(
            settings
                .allowed_origins
                .iter()
                .filter_map(|o| normalize_origin(o)),
        );
        Self {
            rt,
            admin_sha256: tw_runtime::tokens::token_sha256(&admin_token),
            hosts,
            origins,
        }
    }

    fn host_allowed(&self, headers: &HeaderMap) -> Result<(), String> {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return Err("the request has no Host header".to_owned());
        };
        let Some((name, port)) = split_host(&host.to_ascii_lowercase()) else {
            return Err(format!("Host {host:?} is not a host name"));
        };
        let ok = self
            .hosts
            .iter()
            .any(|(h, p)| *h == name && (p.is_none() || *p == port));
        if ok {
            Ok(())
        } else {
            Err(format!(
                "Host {host:?} is not this endpoint's name (a web page may be trying DNS \
                 rebinding); add it to `[serve] allowed_hosts` if it is yours"
            ))
        }
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> Result<(), String> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let text = origin.to_str().unwrap_or("");
        match normalize_origin(text) {
            Some(o) if self.origins.contains(&o) => Ok(()),
            _ => Err(format!(
                "Origin {text:?} may not use this endpoint (a web page in a browser may be \
                 trying to); add it to `[serve] allowed_origins` if it is yours"
            )),
        }
    }

    /// Who holds the request's token, and the token as a session owner (sessions are counted
    /// and bound per token, see `tw_mcp::sessions`).
    async fn holder(&self, headers: &HeaderMap) -> Result<(Access, SessionOwner), Response> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized(
                "no token: send `Authorization: Bearer <token>` (the administrator's token is in \
                 the data directory's serve-token file; `toolwarden serve token` prints it)",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or("");
        if token.is_empty() {
            return Err(unauthorized(
                "the Authorization header is not `Bearer <token>`",
            ));
        }
        let owner = |name: String| SessionOwner::new(tw_runtime::tokens::token_sha256(token), name);
        match self
            .rt
            .tokens()
            .token_holder(token, &self.admin_sha256)
            .await
        {
            Ok(Some(TokenHolder::Admin)) => {
                Ok((Access::Admin, owner("the administrator's token".to_owned())))
            }
            Ok(Some(TokenHolder::Agent(a))) => {
                let name = format!("agent {a}'s token");
                Ok((Access::Agent(a), owner(name)))
            }
            Ok(None) => Err(unauthorized("the token is not valid (or was revoked)")),
            Err(e) => {
                tracing::error!(error = %e, "cannot check a token");
                Err(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "tokens cannot be checked right now",
                ))
            }
        }
    }
}

/// The guard itself, as axum middleware over the whole router.
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Err(m) = guard.host_allowed(req.headers()) {
        return error(StatusCode::FORBIDDEN, "host_not_allowed", &m);
    }
    if let Err(m) = guard.origin_allowed(req.headers()) {
        return error(StatusCode::FORBIDDEN, "origin_not_allowed", &m);
    }
    let (access, owner) = match guard.holder(req.headers()).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    if let Access::Agent(agent) = &access {
        if !req.uri().path().starts_with("/mcp") {
            return error(
                StatusCode::FORBIDDEN,
                "admin_only",
                &format!(
                    "this token is agent {agent}'s: it reaches /mcp only; the admin API takes \
                     the administrator's token"
                ),
            );
        }
        req.extensions_mut()
            .insert(tw_mcp::TokenAgent(agent.clone()));
    }
    req.extensions_mut().insert(access);
    req.extensions_mut().insert(owner);
    next.run(req).await
}

/// Anything no route serves.
pub(crate) async fn not_found(req: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!(
            "nothing at {} {}; MCP is at /mcp, metrics at /metrics and the admin API under /api/v1 \
             (GET /api/v1/openapi.json describes it)",
            req.method(),
            req.uri().path()
        ),
    )
}

/// A refusal or failure as the API's JSON error body.
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": { "code": code, "message": message } })),
    )
        .into_response()
}

fn unauthorized(message: &str) -> Response {
    let mut r = error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"toolwarden\""),
    );
    r
}

/// `addr`'s IP as it appears in a `Host` header.
fn host_literal(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}

/// `host[:port]` (IPv6 in brackets) as its lowercase name and port.
fn split_host(s: &str) -> Option<(String, Option<u16>)> {
    let s = s.trim();
    let (name, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (format!("[{v6}]"), port)
    } else {
        match s.rsplit_once(':') {
            Some((n, p)) => (n.to_owned(), Some(p.parse().ok()?)),
            None => (s.to_owned(), None),
        }
    };
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    ok.then(|| (name.to_ascii_lowercase(), port))
}

/// `scheme://host[:port]` as `scheme://host:port` (the scheme's default port filled in), or
/// `None` for anything else (`null`, a path, another scheme).
fn normalize_origin(s: &str) -> Option<String> {
    let s = s.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = s.split_once("://")?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if rest.contains('/') {
        return None;
    }
    let (name, port) = split_host(rest)?;
    Some(format!("{scheme}://{name}:{}", port.unwrap_or(default)))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn hosts_split_into_name_and_port() {
        let cases = [
            ("localhost:8790", Some(("localhost", Some(8790)))),
            ("LOCALHOST", Some(("localhost", None))),
            ("[::1]:8790", Some(("[::1]", Some(8790)))),
            ("[::1]", Some(("[::1]", None))),
            ("127.0.0.1:99999", None),
            ("evil.com:80/x", None),
            ("a b", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                split_host(input),
                want.map(|(n, p)| (n.to_owned(), p)),
                "{input}"
            );
        }
    }

    #[test]
    fn origins_are_compared_with_their_default_ports() {
        let cases = [
            ("http://localhost:8790", Some("http://localhost:8790")),
            (
                "https://Console.Example",
                Some("https://console.example:443"),
            ),
            ("http://x.test/", Some("http://x.test:80")),
            ("null", None),
            ("file://", None),
            ("http://x.test/path", None),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_origin(input).as_deref(), want, "{input}");
        }
    }
}
