//! The skills operations of the admin API against a real runtime, skills directory and store:
//! each answers what the CLI's skills commands show, a change is recorded as `api`, and a refusal
//! carries the kind's status, a stable code and the field at fault.

use axum::http::{Method, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::tests::{Fixture, code, fixture, request, send};

const READER: &str = "---\nname: reader\ndescription: Reads files.\ntools: [read_file]\n---\n";

async fn with_reader() -> Fixture {
    let f = fixture().await;
    let (status, body) = send(&f.router, put_md(&f, "reader", READER)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    f
}

fn put_md(f: &Fixture, name: &str, text: &str) -> axum::http::Request<axum::body::Body> {
    request(
        Method::PUT,
        &format!("/api/v1/skills/{name}/skill-md"),
        Some(&f.admin),
        Some(text),
    )
}

async fn get(f: &Fixture, uri: &str) -> (StatusCode, Value) {
    send(&f.router, request(Method::GET, uri, Some(&f.admin), None)).await
}

async fn post(f: &Fixture, uri: &str, body: &Value) -> (StatusCode, Value) {
    let text = body.to_string();
    send(
        &f.router,
        request(Method::POST, uri, Some(&f.admin), Some(&text)),
    )
    .await
}

#[tokio::test]
async fn a_skill_is_saved_listed_shown_and_resolved() {
    let f = with_reader().await;
    let (status, list) = get(&f, "/api/v1/skills").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (
            list[0]["name"].clone(),
            list[0]["loaded"].clone(),
            list[0]["tools"].clone()
        ),
        (json!("reader"), json!(true), json!(["read_file"]))
    );
    let (_, shown) = get(&f, "/api/v1/skills/reader").await;
    assert_eq!(shown["manifest"]["description"], "Reads files.");
    let (_, resolved) = get(&f, "/api/v1/skills/reader/resolved-tools").await;
    assert_eq!(resolved["tools"][0]["name"], "read_file", "{resolved}");
    let resp = f
        .router
        .clone()
        .oneshot(request(
            Method::GET,
            "/api/v1/skills/reader/skill-md",
            Some(&f.admin),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "text/markdown; charset=utf-8"
    );
    let text = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&text), READER);
    let (_, check) = get(&f, "/api/v1/skills/check").await;
    assert_eq!(
        check,
        json!({"findings": [], "errors": 0, "loaded": 1, "total": 1})
    );
    let (status, metrics) = get(&f, "/api/v1/skills/lifecycle/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(metrics["skills"][0]["skill"], "reader", "{metrics}");
}

#[tokio::test]
async fn an_override_is_recorded_as_api_and_changes_what_the_skill_reaches() {
    let f = with_reader().await;
    let (status, body) = post(
        &f,
        "/api/v1/skills/reader/override",
        &json!({"tool": "echo", "action": "add", "access_level": "standard", "reason": "demo"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["override"]["action"].clone(),
            body["override"]["created_by"].clone(),
            body["previous"].clone()
        ),
        (json!("add"), json!("api"), Value::Null)
    );
    let (_, resolved) = get(&f, "/api/v1/skills/reader/resolved-tools").await;
    let tools: Vec<&str> = resolved["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"echo"), "{tools:?}");
    let (_, overrides) = get(&f, "/api/v1/skills/reader/overrides").await;
    assert_eq!(overrides.as_array().unwrap().len(), 1);
    let (status, body) = post(
        &f,
        "/api/v1/skills/reader/override",
        &json!({"tool": "echo", "action": "clear"}),
    )
    .await;
    assert_eq!(
        (status, body["previous"]["tool"].clone()),
        (StatusCode::OK, json!("echo"))
    );
}

/// A request and what it must be refused with: status, code, field.
type Case = (
    Method,
    String,
    Option<String>,
    StatusCode,
    &'static str,
    Option<&'static str>,
);

#[tokio::test]
async fn refusals_carry_the_kind_the_code_and_the_field() {
    let f = with_reader().await;
    let reason = "x".repeat(1001);
    let cases: Vec<Case> = vec![
        // The request's shape: 400 from the body's reader.
        (
            Method::POST,
            "/api/v1/skills/reader/override".into(),
            Some(json!({"tool": "echo", "action": "grant"}).to_string()),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            Method::POST,
            "/api/v1/skills/reader/override".into(),
            Some(json!({"tool": "echo", "action": "remove", "access_level": "admin"}).to_string()),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            Method::POST,
            "/api/v1/skills/classify/echo".into(),
            Some(json!({"clear": true, "again": true}).to_string()),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        // The service's rules: the runtime's kind, code and field.
        (
            Method::POST,
            "/api/v1/skills/reader/override".into(),
            Some(json!({"tool": "echo", "action": "remove", "reason": reason}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("reason"),
        ),
        (
            Method::POST,
            "/api/v1/skills/Reader/override".into(),
            Some(json!({"tool": "echo", "action": "remove"}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("skill"),
        ),
        (
            Method::POST,
            "/api/v1/skills/nobody/override".into(),
            Some(json!({"tool": "echo", "action": "remove"}).to_string()),
            StatusCode::NOT_FOUND,
            "unknown_skill",
            None,
        ),
        (
            Method::POST,
            "/api/v1/skills/reader/override".into(),
            Some(json!({"tool": "no_such_tool", "action": "add"}).to_string()),
            StatusCode::NOT_FOUND,
            "unknown_tool",
            None,
        ),
        (
            Method::GET,
            "/api/v1/skills/nobody".into(),
            None,
            StatusCode::NOT_FOUND,
            "unknown_skill",
            None,
        ),
        (
            Method::GET,
            "/api/v1/skills/capabilities?tool=nope".into(),
            None,
            StatusCode::NOT_FOUND,
            "unknown_tool",
            None,
        ),
        (
            Method::POST,
            "/api/v1/skills/classify/echo".into(),
            Some(json!({"set": ["telepathy"]}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("capabilities"),
        ),
        (
            Method::PUT,
            "/api/v1/skills/reader/skill-md".into(),
            Some("---\nname: reader\n---\n".into()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("text"),
        ),
    ];
    for (method, uri, body, status, want_code, field) in cases {
        let (got, answer) = send(
            &f.router,
            request(method.clone(), &uri, Some(&f.admin), body.as_deref()),
        )
        .await;
        assert_eq!(
            (got, code(&answer), answer["error"]["field"].as_str()),
            (status, want_code, field),
            "{method} {uri}: {answer}"
        );
    }
    // The refused save wrote nothing.
    let (_, shown) = get(&f, "/api/v1/skills/reader").await;
    assert_eq!(shown["manifest"]["description"], "Reads files.");
}

#[tokio::test]
async fn an_unreadable_skills_directory_is_503_not_an_empty_list() {
    let f = fixture().await;
    let dir = f.rt.skills().dir().to_path_buf();
    std::fs::write(&dir, "not a directory").unwrap();
    f.rt.skills().reload();
    let (status, body) = get(&f, "/api/v1/skills").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{body}"
    );
}

/// The admin API's whole mapping of runtime errors to statuses.
#[test]
fn each_error_kind_has_its_status() {
    use tw_runtime::ErrorKind;
    let got: Vec<(ErrorKind, u16)> = ErrorKind::ALL
        .iter()
        .map(|k| (*k, crate::api::status_of(*k).as_u16()))
        .collect();
    assert_eq!(
        got,
        vec![
            (ErrorKind::NotFound, 404),
            (ErrorKind::Conflict, 409),
            (ErrorKind::Invalid, 422),
            (ErrorKind::Denied, 403),
            (ErrorKind::Unavailable, 503),
            (ErrorKind::Internal, 500),
        ]
    );
}
