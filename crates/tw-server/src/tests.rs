//! The endpoint's router driven without a socket: the guard's refusals (attack tests: no token,
//! a forged token, a rebinding Host, a foreign Origin, an agent reaching for the admin API), the
//! OpenAPI document against the routes, the admin API against a real runtime on a fresh
//! data directory, and MCP's sessions: closed by DELETE, closed when idle, capped per token and
//! bound to the token that opened them (attack tests: a token past its cap, another token's
//! session id).

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;
use tw_runtime::{Config, Runtime, RuntimeOptions, ServeSettings};

use super::*;

const ADDR: &str = "127.0.0.1:8790";

pub(crate) struct Fixture {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) rt: Runtime,
    pub(crate) admin: String,
    pub(crate) router: Router,
}

pub(crate) async fn fixture() -> Fixture {
    fixture_with(tw_runtime::SessionLimits::default(), "").await
}

/// A policy that lets the file tools run but asks a person before `write_file` runs.
pub(crate) const ASKS_BEFORE_WRITING: &str =
    "[policy]\nallow = [\"group:fs\"]\n[policy.modes.normal]\nask = [\"write_file\"]\n";

/// A fixture whose configuration also says `config` (a policy that asks, say).
pub(crate) async fn fixture_configured(config: &str) -> Fixture {
    fixture_with(tw_runtime::SessionLimits::default(), config).await
}

async fn fixture_with(limits: tw_runtime::SessionLimits, config: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "one\n").unwrap();
    let mut config = Config::parse(
        &format!("license_tier = \"pro\"\n{config}"),
        std::path::Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    // scripts/test runs these tests again on a team store.
    config.store_url = tw_store::testing::suite_database().await;
    let rt = Runtime::open(RuntimeOptions::new(
        dir.path().join("data"),
        vec![ws],
        config,
    ))
    .await
    .unwrap();
    let (admin, _) = rt.tokens().admin_token().unwrap();
    let addr: SocketAddr = ADDR.parse().unwrap();
    let guard = Guard::new(rt.clone(), admin.clone(), addr, &ServeSettings::default());
    let router = app(rt.clone(), guard, limits, CancellationToken::new());
    Fixture {
        _dir: dir,
        rt,
        admin,
        router,
    }
}

/// A request as a local client sends it: `Host` the endpoint's address, no `Origin`.
pub(crate) fn request(
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", ADDR);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    b.body(body.map_or_else(Body::empty, |s| Body::from(s.to_owned())))
        .unwrap()
}

pub(crate) async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

/// A request with the administrator's token and `body` as JSON, if any: the status and the answer.
pub(crate) async fn admin(
    f: &Fixture,
    method: Method,
    uri: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let text = body.map(Value::to_string);
    send(
        &f.router,
        request(method, uri, Some(&f.admin), text.as_deref()),
    )
    .await
}

pub(crate) fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn no_token_or_a_forged_one_is_401_and_says_how_to_authenticate() {
    let f = fixture().await;
    let resp = f
        .router
        .clone()
        .oneshot(request(Method::GET, "/api/v1/tools", None, None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Bearer realm=\"toolwarden\""
    );
    for token in [
        "tw_0000000000000000000000000000000000000000000000000000000000000000".to_owned(),
        format!("{}x", f.admin),
        f.admin[..f.admin.len() - 1].to_owned(),
    ] {
        let (status, body) = send(
            &f.router,
            request(Method::GET, "/api/v1/tools", Some(&token), None),
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNAUTHORIZED, "unauthorized")
        );
    }
    // MCP is behind the same gate.
    let (status, _) = send(&f.router, request(Method::POST, "/mcp", None, Some("{}"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A scheme other than Bearer is no token.
    let mut basic = request(Method::GET, "/api/v1/tools", None, None);
    basic.headers_mut().insert(
        "authorization",
        format!("Basic {}", f.admin).parse().unwrap(),
    );
    assert_eq!(send(&f.router, basic).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_foreign_origin_or_a_rebound_host_is_403_even_with_the_token() {
    let f = fixture().await;
    for origin in [
        "http://evil.example",
        "http://localhost:9999",
        "null",
        "https://127.0.0.1:8790",
    ] {
        let mut req = request(Method::GET, "/api/v1/tools", Some(&f.admin), None);
        req.headers_mut().insert("origin", origin.parse().unwrap());
        let (status, body) = send(&f.router, req).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "origin_not_allowed"),
            "{origin}"
        );
    }
    for host in [
        "evil.example:8790",
        "evil.example",
        "127.0.0.1.evil.example",
    ] {
        let mut req = request(Method::POST, "/mcp", Some(&f.admin), Some("{}"));
        req.headers_mut().insert("host", host.parse().unwrap());
        let (status, body) = send(&f.router, req).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "host_not_allowed"),
            "{host}"
        );
    }
    // The endpoint's own origin and the loopback names pass.
    for (host, origin) in [
        ("localhost:8790", Some("http://localhost:8790")),
        ("[::1]:8790", None),
        ("127.0.0.1", Some("http://127.0.0.1:8790")),
    ] {
        let mut req = request(Method::GET, "/api/v1/tools", Some(&f.admin), None);
        req.headers_mut().insert("host", host.parse().unwrap());
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().unwrap());
        }
        assert_eq!(send(&f.router, req).await.0, StatusCode::OK, "{host}");
    }
}

#[tokio::test]
async fn configured_hosts_and_origins_are_let_in() {
    let f = fixture().await;
    let settings = ServeSettings {
        allowed_hosts: vec!["tw.lan:8790".into()],
        allowed_origins: vec!["https://console.example".into()],
        ..ServeSettings::default()
    };
    let guard = Guard::new(
        f.rt.clone(),
        f.admin.clone(),
        ADDR.parse().unwrap(),
        &settings,
    );
    let router = app(
        f.rt.clone(),
        guard,
        tw_runtime::SessionLimits::default(),
        CancellationToken::new(),
    );
    let mut req = request(Method::GET, "/api/v1/tools", Some(&f.admin), None);
    req.headers_mut()
        .insert("host", "tw.lan:8790".parse().unwrap());
    req.headers_mut()
        .insert("origin", "https://console.example:443".parse().unwrap());
    assert_eq!(send(&router, req).await.0, StatusCode::OK);
    // Only on the port named.
    let mut req = request(Method::GET, "/api/v1/tools", Some(&f.admin), None);
    req.headers_mut()
        .insert("host", "tw.lan:80".parse().unwrap());
    assert_eq!(send(&router, req).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_agents_token_reaches_mcp_but_not_the_admin_api_and_stops_when_revoked() {
    let f = fixture().await;
    let (token, row) =
        f.rt.tokens()
            .issue_api_token("ci-bot", Some("pipeline".into()), "ana")
            .await
            .unwrap();
    assert_eq!(row.agent_id, "ci-bot");
    for (method, uri) in [
        (Method::GET, "/api/v1/tools"),
        (Method::GET, "/api/v1/confirmations"),
        (Method::POST, "/api/v1/confirmations/x/approve"),
        (Method::GET, "/api/v1/openapi.json"),
    ] {
        let (status, body) = send(&f.router, request(method, uri, Some(&token), None)).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "admin_only"),
            "{uri}"
        );
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}})
    .to_string();
    let mut req = request(Method::POST, "/mcp", Some(&token), Some(&init));
    req.headers_mut().insert(
        "accept",
        "application/json, text/event-stream".parse().unwrap(),
    );
    let (status, body) = send(&f.router, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.to_string().contains("toolwarden"), "{body}");

    f.rt.tokens()
        .revoke_api_tokens("ci-bot", "ana")
        .await
        .unwrap();
    let (status, _) = send(
        &f.router,
        request(Method::POST, "/mcp", Some(&token), Some(&init)),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn every_operation_in_the_openapi_document_is_served() {
    let f = fixture().await;
    let ops = openapi::operations();
    assert!(ops.len() >= 40, "{ops:?}");
    for (method, path) in ops {
        let uri = format!(
            "/api/v1{}",
            path.replace("{name}", "read_file")
                .replace("{id}", "x")
                .replace("{execution_id}", "x")
                .replace("{tool}", "no__such")
        );
        // No side effects: an unknown tool for the writes (POST too: switching a tool off takes
        // no body), so they fail before changing anything; unknown ids; no body.
        let uri = match method.as_str() {
            "GET" => uri,
            _ => uri.replace("read_file", "no_such_tool"),
        };
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let resp = f
            .router
            .clone()
            .oneshot(request(method.clone(), &uri, Some(&f.admin), Some("")))
            .await
            .unwrap();
        let status = resp.status();
        if uri.ends_with("/events") {
            // A stream that never ends by itself: its head says it is served.
            assert_eq!(status, StatusCode::OK);
            assert_eq!(resp.headers()["content-type"], "text/event-stream");
            continue;
        }
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await;
        let body: Value = bytes
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert_ne!(
            code(&body),
            "not_found",
            "{method} {uri}: the router does not serve it"
        );
    }
    // Nothing was changed: no grant given, the mode as it was, every tool still on, and the
    // admin log holds only the policy reload's outcome (the fixture's config file is not on
    // disk, so the reload fails and the policy in force stays).
    assert_eq!(f.rt.confirmations().grants(true).await.unwrap(), []);
    assert_eq!(f.rt.settings().mode(), tw_core::OperationalMode::Normal);
    assert_eq!(f.rt.store().tool_switches().await.unwrap(), []);
    let changes: Vec<String> =
        f.rt.store()
            .admin_events(&tw_store::AdminQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
    assert_eq!(changes, ["policy_reload_failed"]);
    // And something the document does not list is not served.
    let (status, body) = send(
        &f.router,
        request(Method::GET, "/api/v1/secrets", Some(&f.admin), None),
    )
    .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}

const CUSTOM: &str = r#"{
  "name": "say_hello",
  "description": "Says hello.",
  "category": "system",
  "group": "custom",
  "parameters": [{"name": "who", "type": "string", "description": "Whom", "required": true}],
  "command": {"argv": ["echo", "hello {who}"]}
}"#;

#[tokio::test]
async fn custom_tools_are_created_read_replaced_switched_and_deleted() {
    let f = fixture().await;
    let r = &f.router;
    let a = Some(f.admin.as_str());
    let (status, body) = send(r, request(Method::POST, "/api/v1/tools", a, Some(CUSTOM))).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::CREATED,
            json!({"name": "say_hello", "created": true})
        )
    );
    let (status, body) = send(r, request(Method::POST, "/api/v1/tools", a, Some(CUSTOM))).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "exists"));
    let (status, body) = send(r, request(Method::GET, "/api/v1/tools/say_hello", a, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["kind"], "custom");
    assert_eq!(
        body["custom"]["argv"],
        json!(["echo", "hello {who}"]),
        "{body}"
    );

    // A malformed definition says where.
    let broken = CUSTOM.replace("\"parameters\": [", "\"parameters\": [,");
    let (status, body) = send(r, request(Method::POST, "/api/v1/tools", a, Some(&broken))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("request body:6:"),
        "{body}"
    );
    // The path names the tool a PUT replaces.
    let (status, _) = send(
        r,
        request(Method::PUT, "/api/v1/tools/other", a, Some(CUSTOM)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = send(
        r,
        request(Method::PUT, "/api/v1/tools/say_hello", a, Some(CUSTOM)),
    )
    .await;
    assert_eq!(
        (status, body["created"].clone()),
        (StatusCode::OK, json!(false))
    );

    // Switched off, policy denies it; on again, it does not.
    let (status, body) = send(
        r,
        request(Method::POST, "/api/v1/tools/say_hello/disable", a, None),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({"tool": "say_hello", "tier": "pro", "enabled": false, "changed": true})
        )
    );
    let explain = json!({"tool": "say_hello", "arguments": {"who": "ana"}}).to_string();
    let (_, body) = send(
        r,
        request(Method::POST, "/api/v1/policy/explain", a, Some(&explain)),
    )
    .await;
    assert_eq!(body["decision"], "deny", "{body}");
    let (_, body) = send(
        r,
        request(
            Method::POST,
            "/api/v1/tools/say_hello/enable",
            a,
            Some(r#"{"tier": "pro"}"#),
        ),
    )
    .await;
    assert_eq!(body["changed"], true);
    let (_, body) = send(
        r,
        request(Method::POST, "/api/v1/policy/explain", a, Some(&explain)),
    )
    .await;
    assert_ne!(body["decision"], "deny", "{body}");

    let (status, _) = send(
        r,
        request(Method::DELETE, "/api/v1/tools/say_hello", a, None),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = send(r, request(Method::GET, "/api/v1/tools/say_hello", a, None)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_tool")
    );
    let (status, body) = send(
        r,
        request(Method::DELETE, "/api/v1/tools/read_file", a, None),
    )
    .await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "builtin"));

    // Every change is in the admin log, as made by `api`.
    let kinds: Vec<(String, String)> =
        f.rt.store()
            .admin_events(&tw_store::AdminQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.actor, e.kind))
            .collect();
    assert_eq!(
        kinds,
        [
            ("api", "custom_tool_removed"),
            ("api", "tool_enabled"),
            ("api", "tool_disabled"),
            ("api", "custom_tool_updated"),
            ("api", "custom_tool_added"),
        ]
        .map(|(a, k)| (a.to_owned(), k.to_owned()))
    );
}

#[tokio::test]
async fn bad_requests_say_which_field() {
    let f = fixture().await;
    let r = &f.router;
    let a = Some(f.admin.as_str());
    let cases = [
        (
            Method::GET,
            "/api/v1/audit?status=fine",
            None,
            "status: unknown status \"fine\"",
        ),
        (
            Method::GET,
            "/api/v1/audit?limit=0",
            None,
            "limit: between 1 and 1000",
        ),
        (
            Method::GET,
            "/api/v1/audit?colour=red",
            None,
            "unknown field `colour`",
        ),
        (
            Method::GET,
            "/api/v1/audit/export?format=xml",
            None,
            "format: \"xml\" is not jsonl or csv",
        ),
        (
            Method::GET,
            "/api/v1/confirmations?state=maybe",
            None,
            "state: \"maybe\" is not one of",
        ),
        (
            Method::POST,
            "/api/v1/policy/explain",
            Some("{\"tol\": 1}"),
            "unknown field `tol`",
        ),
        (
            Method::POST,
            "/api/v1/tools/read_file/disable",
            Some("{\"tier\": \"gold\"}"),
            "the request body: unknown license tier \"gold\"",
        ),
        (
            Method::POST,
            "/api/v1/confirmations/x/deny",
            Some("{\"remember\": \"tool\"}"),
            "only go with approve",
        ),
    ];
    for (method, uri, body, want) in cases {
        let (status, got) = send(r, request(method, uri, a, body)).await;
        let message = got["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            status == StatusCode::BAD_REQUEST && message.contains(want),
            "{uri}: {status} {message}"
        );
    }
    let (status, body) = send(
        r,
        request(
            Method::POST,
            "/api/v1/policy/explain",
            a,
            Some("{\"tool\": \"nope\"}"),
        ),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_tool")
    );
    let (status, body) = send(
        r,
        request(Method::POST, "/api/v1/confirmations/x/approve", a, None),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_confirmation")
    );
}

#[tokio::test]
async fn the_audit_log_is_queried_read_and_exported() {
    let f = fixture().await;
    for who in ["a", "b", "c"] {
        let call = f.rt.call(
            "read_file",
            json!({"path": "notes.txt"}),
            tw_core::Caller::agent(who),
        );
        f.rt.execute(call).await;
    }
    let r = &f.router;
    let a = Some(f.admin.as_str());
    let (status, page) = send(r, request(Method::GET, "/api/v1/audit?limit=2", a, None)).await;
    assert_eq!(status, StatusCode::OK);
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["agent_id"], "c");
    let cursor = page["next_cursor"].as_i64().unwrap();
    let (_, rest) = send(
        r,
        request(
            Method::GET,
            &format!("/api/v1/audit?limit=2&cursor={cursor}"),
            a,
            None,
        ),
    )
    .await;
    assert_eq!(rest["rows"][0]["agent_id"], "a");
    let id = rows[0]["execution_id"].as_str().unwrap();
    let (status, one) = send(
        r,
        request(Method::GET, &format!("/api/v1/audit/{id}"), a, None),
    )
    .await;
    assert_eq!(
        (status, one["agent_id"].clone()),
        (StatusCode::OK, json!("c"))
    );
    let (status, body) = send(r, request(Method::GET, "/api/v1/audit/nope", a, None)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_record")
    );

    let (status, text) = send(
        r,
        request(Method::GET, "/api/v1/audit/export?agent=b", a, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let text = text
        .as_str()
        .map_or_else(|| text.to_string(), str::to_owned);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["agent_id"], "b");
    let (_, csv) = send(
        r,
        request(Method::GET, "/api/v1/audit/export?format=csv", a, None),
    )
    .await;
    assert_eq!(csv.as_str().unwrap().lines().count(), 4, "{csv}");
}

#[test]
fn only_loopback_addresses_are_bound_unless_allowed() {
    for addr in ["127.0.0.1:8790", "[::1]:0", "127.0.0.2:1"] {
        assert!(check_listen(addr.parse().unwrap(), false).is_ok(), "{addr}");
    }
    for addr in ["0.0.0.0:8790", "[::]:8790", "192.168.1.10:8790"] {
        let e = check_listen(addr.parse().unwrap(), false).unwrap_err();
        assert!(e.to_string().contains("allow_non_loopback"), "{e}");
        assert!(check_listen(addr.parse().unwrap(), true).is_ok());
    }
}

#[tokio::test]
async fn start_refuses_a_non_loopback_address_before_binding() {
    let f = fixture().await;
    let settings = ServeSettings {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..ServeSettings::default()
    };
    let e = start(f.rt.clone(), &settings, CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert!(matches!(e, ServerError::NotLoopback(_)), "{e}");
}

#[tokio::test]
async fn the_event_stream_carries_each_call_as_it_happens() {
    use futures_util::StreamExt as _;

    let f = fixture().await;
    let resp = f
        .router
        .clone()
        .oneshot(request(Method::GET, "/api/v1/events", Some(&f.admin), None))
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body().into_data_stream();
    let call = f.rt.call(
        "read_file",
        json!({"path": "notes.txt"}),
        tw_core::Caller::agent("watcher-test"),
    );
    let id = call.execution_id.to_string();
    f.rt.execute(call).await;
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !seen.contains("\"type\":\"completed\"") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("no completed event within 10 s")
            .expect("the stream ended")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: execution"), "{seen}");
    assert!(seen.contains(&id), "{seen}");
    assert!(seen.contains("\"type\":\"started\""), "{seen}");
}

/// An MCP POST to the endpoint (in session `session`, if any): the status, the session id the
/// answer names, and the body (an SSE answer as text).
async fn mcp_post(
    router: &Router,
    token: &str,
    session: Option<&str>,
    message: &Value,
) -> (StatusCode, Option<String>, Value) {
    let mut req = request(
        Method::POST,
        "/mcp",
        Some(token),
        Some(&message.to_string()),
    );
    req.headers_mut().insert(
        "accept",
        "application/json, text/event-stream".parse().unwrap(),
    );
    if let Some(id) = session {
        req.headers_mut()
            .insert("mcp-session-id", id.parse().unwrap());
    }
    let resp = router.clone().oneshot(req).await.unwrap();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, id, body)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}})
}

fn list_tools() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
}

/// Opens a session as a client does (initialize, then `initialized`) and returns its id, or the
/// refusal's status and body.
async fn open_session(
    router: &Router,
    token: &str,
) -> std::result::Result<String, (StatusCode, Value)> {
    let (status, id, body) = mcp_post(router, token, None, &initialize()).await;
    let Some(id) = id.filter(|_| status == StatusCode::OK) else {
        return Err((status, body));
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = mcp_post(router, token, Some(&id), &initialized).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    Ok(id)
}

async fn delete_session(
    router: &Router,
    token: &str,
    session: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = request(Method::DELETE, "/mcp", Some(token), None);
    if let Some(id) = session {
        req.headers_mut()
            .insert("mcp-session-id", id.parse().unwrap());
    }
    send(router, req).await
}

/// Whether `session` answers `tools/list` for `token` (200), or is unknown to it (404).
async fn lists(router: &Router, token: &str, session: &str) -> StatusCode {
    let (status, _, body) = mcp_post(router, token, Some(session), &list_tools()).await;
    if status == StatusCode::OK {
        assert!(body.to_string().contains("read_file"), "{body}");
    }
    status
}

fn reason(body: &Value) -> &str {
    body["error"]["data"]["reason"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_deleted_session_is_closed_at_once_and_answered_204() {
    let f = fixture().await;
    let id = open_session(&f.router, &f.admin).await.unwrap();
    assert_eq!(lists(&f.router, &f.admin, &id).await, StatusCode::OK);

    let (status, body) = delete_session(&f.router, &f.admin, Some(&id)).await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, json!("")));
    // Gone: the MCP specification's answer for a terminated session is 404.
    let (status, _, body) = mcp_post(&f.router, &f.admin, Some(&id), &list_tools()).await;
    assert_eq!(
        (status, reason(&body)),
        (StatusCode::NOT_FOUND, "no_such_session"),
        "{body}"
    );
    let (status, body) = delete_session(&f.router, &f.admin, Some(&id)).await;
    assert_eq!(
        (status, reason(&body)),
        (StatusCode::NOT_FOUND, "no_such_session")
    );
    let (status, body) = delete_session(&f.router, &f.admin, None).await;
    assert_eq!(
        (status, reason(&body)),
        (StatusCode::BAD_REQUEST, "session_id_required")
    );
}

#[tokio::test]
async fn a_token_past_its_session_cap_is_refused_with_429_and_no_open_session_is_evicted() {
    let f = fixture_with(
        tw_runtime::SessionLimits {
            idle_timeout: std::time::Duration::from_secs(600),
            max_per_token: 2,
        },
        "",
    )
    .await;
    let (agent, _) =
        f.rt.tokens()
            .issue_api_token("ci-bot", None, "ana")
            .await
            .unwrap();
    let (other_agent_token, _) =
        f.rt.tokens()
            .issue_api_token("ci-bot", None, "ana")
            .await
            .unwrap();

    let a = open_session(&f.router, &f.admin).await.unwrap();
    let b = open_session(&f.router, &f.admin).await.unwrap();
    let (status, body) = open_session(&f.router, &f.admin).await.unwrap_err();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(
        body["error"]["message"],
        "the administrator's token already has 2 open MCP sessions, the most one token may have \
         ([serve] max_sessions_per_token); close one (an HTTP DELETE with its Mcp-Session-Id, \
         which MCP clients send when they close) or wait until one has had no request for 600 s \
         ([serve] session_idle_timeout_secs)"
    );
    assert_eq!(reason(&body), "too_many_sessions");
    // The sessions already open were left alone.
    assert_eq!(lists(&f.router, &f.admin, &a).await, StatusCode::OK);
    assert_eq!(lists(&f.router, &f.admin, &b).await, StatusCode::OK);

    // Each token has its own allowance: an agent's, and a second token of the same agent.
    let c = open_session(&f.router, &agent).await.unwrap();
    open_session(&f.router, &agent).await.unwrap();
    let (status, body) = open_session(&f.router, &agent).await.unwrap_err();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("agent ci-bot's token already has 2 open MCP sessions"),
        "{body}"
    );
    open_session(&f.router, &other_agent_token).await.unwrap();

    // Requests that open no session give their place back: refused (no Accept header), not a
    // handshake, or a handshake from a client that is not listening any more.
    let mut refused = request(Method::POST, "/mcp", Some(&agent), Some("{}"));
    refused.headers_mut().remove("accept");
    assert_eq!(
        send(&f.router, refused).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let (status, _) = delete_session(&f.router, &agent, Some(&c)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for _ in 0..5 {
        let (status, id, _) = mcp_post(&f.router, &agent, None, &list_tools()).await;
        assert!(status.is_client_error() && id.is_none(), "{status}");
        let mut no_accept = request(
            Method::POST,
            "/mcp",
            Some(&agent),
            Some(&initialize().to_string()),
        );
        no_accept.headers_mut().remove("accept");
        assert_eq!(
            send(&f.router, no_accept).await.0,
            StatusCode::NOT_ACCEPTABLE
        );
    }
    // The place the DELETE freed is still there for a real session, and only one.
    open_session(&f.router, &agent).await.unwrap();
    assert_eq!(
        open_session(&f.router, &agent).await.unwrap_err().0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn another_tokens_session_id_opens_nothing() {
    let f = fixture().await;
    let (agent, _) =
        f.rt.tokens()
            .issue_api_token("ci-bot", None, "ana")
            .await
            .unwrap();
    let admins = open_session(&f.router, &f.admin).await.unwrap();
    let (status, _, body) = mcp_post(&f.router, &agent, Some(&admins), &list_tools()).await;
    assert_eq!(
        (status, reason(&body)),
        (StatusCode::NOT_FOUND, "no_such_session")
    );
    let (status, _) = delete_session(&f.router, &agent, Some(&admins)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut stream = request(Method::GET, "/mcp", Some(&agent), None);
    stream
        .headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    stream
        .headers_mut()
        .insert("mcp-session-id", admins.parse().unwrap());
    assert_eq!(send(&f.router, stream).await.0, StatusCode::NOT_FOUND);
    // The administrator's session is untouched.
    assert_eq!(lists(&f.router, &f.admin, &admins).await, StatusCode::OK);
}

#[tokio::test]
async fn a_session_nobody_uses_is_closed_after_the_idle_timeout_and_one_listening_is_not() {
    let idle = std::time::Duration::from_millis(400);
    let f = fixture_with(
        tw_runtime::SessionLimits {
            idle_timeout: idle,
            max_per_token: 1,
        },
        "",
    )
    .await;
    // With room for one session per token, a token can open another only once its first is
    // closed: asking does not touch the first, so this watches it expire.
    let wait_until_closed = |token: String| {
        let router = f.router.clone();
        async move {
            let began = tokio::time::Instant::now();
            loop {
                match open_session(&router, &token).await {
                    Ok(id) => return (began.elapsed(), id),
                    Err((status, _)) => assert_eq!(status, StatusCode::TOO_MANY_REQUESTS),
                }
                assert!(began.elapsed() < idle * 20, "never closed");
                tokio::time::sleep(idle / 8).await;
            }
        }
    };
    let first = open_session(&f.router, &f.admin).await.unwrap();
    let (after, second) = wait_until_closed(f.admin.clone()).await;
    assert!(after >= idle / 2, "closed after {after:?}");
    assert_eq!(
        lists(&f.router, &f.admin, &first).await,
        StatusCode::NOT_FOUND
    );

    // A client holding the session's notification stream is using it, however quiet.
    let mut get = request(Method::GET, "/mcp", Some(&f.admin), None);
    get.headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    get.headers_mut()
        .insert("mcp-session-id", second.parse().unwrap());
    let listening = f.router.clone().oneshot(get).await.unwrap();
    assert_eq!(listening.status(), StatusCode::OK);
    tokio::time::sleep(idle * 3).await;
    assert_eq!(lists(&f.router, &f.admin, &second).await, StatusCode::OK);
    // Once it hangs up, the clock runs from then.
    drop(listening);
    let (after, _) = wait_until_closed(f.admin.clone()).await;
    assert!(after >= idle / 2, "closed after {after:?}");
}
