//! The grants of the admin API against a real runtime whose policy asks before `write_file`: a
//! grant given over the API lets the calls it covers run without asking (and releases one that
//! waits) until it is revoked, the list is what `toolwarden grants list [--all] --json` prints,
//! and what the confirmation service refuses comes back with its kind, code and field.

use axum::http::{Method, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};
use tw_runtime::Runtime;

use crate::tests::{ASKS_BEFORE_WRITING, admin, code, fixture_configured};

/// A `write_file` call by `agent-7` that does not wait for a person: it runs, or is refused,
/// or comes back `requires_confirmation` at once.
async fn write(rt: &Runtime, path: &str) -> tw_core::ToolResult {
    let mut call = rt.call(
        "write_file",
        json!({"path": path, "content": "x"}),
        Caller::agent("agent-7"),
    );
    call.no_wait = true;
    rt.execute(call).await
}

/// The grants as the CLI's `grants list [--all] --json` prints them.
async fn cli_list(rt: &Runtime, all: bool) -> Value {
    serde_json::to_value(rt.confirmations().grants(all).await.unwrap()).unwrap()
}

#[tokio::test]
async fn a_grant_given_over_the_api_covers_calls_until_it_is_revoked() {
    let f = fixture_configured(ASKS_BEFORE_WRITING).await;
    assert_eq!(
        write(&f.rt, "g1.txt").await.status,
        ToolStatus::RequiresConfirmation
    );

    let (status, grant) = admin(
        &f,
        Method::POST,
        "/api/v1/grants",
        Some(&json!({
            "tool": "write_file",
            "remember": {"pattern": {"path": "g*.txt"}},
            "duration_secs": 3600,
        })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{grant}");
    // Who it covers was not said: a grant made on its own covers anyone.
    assert_eq!(
        (
            grant["tool"].clone(),
            grant["scope"].clone(),
            grant["arguments"].clone(),
            grant["agent_id"].clone(),
            grant["created_by"].clone(),
        ),
        (
            json!("write_file"),
            json!("pattern"),
            json!({"path": "g*.txt"}),
            Value::Null,
            json!("api"),
        ),
        "{grant}"
    );
    // An hour from when it was given (the two instants are read a moment apart).
    let lasts = grant["expires_at"].as_i64().unwrap() - grant["created_at"].as_i64().unwrap();
    assert!(
        (3_599_000_000..=3_600_000_000).contains(&lasts),
        "{lasts} µs"
    );
    let id = grant["id"].as_str().unwrap().to_owned();
    let (status, listed) = admin(&f, Method::GET, "/api/v1/grants", None).await;
    assert_eq!(
        (status, listed.clone()),
        (StatusCode::OK, cli_list(&f.rt, false).await)
    );
    assert_eq!(listed, json!([grant]));

    // Calls the pattern covers run without asking, and the grant is in their trace; others ask.
    let r = write(&f.rt, "g1.txt").await;
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    assert_eq!(
        r.decision.unwrap().trace.last().unwrap().layer,
        tw_core::policy::Layer::Grant
    );
    assert_eq!(
        write(&f.rt, "other.txt").await.status,
        ToolStatus::RequiresConfirmation
    );

    let (status, body) = admin(
        &f,
        Method::POST,
        &format!("/api/v1/grants/{id}/revoke"),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"id": id, "revoked": true}))
    );
    assert_eq!(
        write(&f.rt, "g2.txt").await.status,
        ToolStatus::RequiresConfirmation,
        "a revoked grant covers nothing"
    );
    let (_, listed) = admin(&f, Method::GET, "/api/v1/grants", None).await;
    assert_eq!(listed, json!([]));
    let (_, all) = admin(&f, Method::GET, "/api/v1/grants?all=true", None).await;
    assert_eq!(all, cli_list(&f.rt, true).await);
    assert_eq!(
        (all[0]["id"].as_str(), all[0]["revoked_by"].as_str()),
        (Some(id.as_str()), Some("api"))
    );
    let (status, body) = admin(
        &f,
        Method::POST,
        &format!("/api/v1/grants/{id}/revoke"),
        None,
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_grant")
    );

    let changes: Vec<(String, String)> =
        f.rt.store()
            .admin_events(&tw_store::AdminQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.actor, e.kind))
            .collect();
    assert_eq!(
        changes,
        [("api", "grant_revoked"), ("api", "grant_created")]
            .map(|(a, k)| (a.to_owned(), k.to_owned()))
    );
}

#[tokio::test]
async fn a_grant_with_nothing_but_a_tool_covers_its_every_call_and_releases_a_waiting_one() {
    let f = fixture_configured(ASKS_BEFORE_WRITING).await;
    let rt = f.rt.clone();
    let waiting = tokio::spawn(async move {
        rt.execute(rt.call(
            "write_file",
            json!({"path": "held.txt", "content": "x"}),
            Caller::agent("agent-7"),
        ))
        .await
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f
        .rt
        .confirmations()
        .pending_confirmations()
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "the call never asked");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let (status, grant) = admin(
        &f,
        Method::POST,
        "/api/v1/grants",
        Some(&json!({"tool": "write_file"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{grant}");
    assert_eq!(
        (
            grant["scope"].clone(),
            grant["agent_id"].clone(),
            grant["expires_at"].clone()
        ),
        (json!("tool"), Value::Null, Value::Null),
        "{grant}"
    );
    let r = waiting.await.unwrap();
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    assert_eq!(write(&f.rt, "any.txt").await.status, ToolStatus::Success);
}

#[tokio::test]
async fn a_grant_the_service_refuses_is_not_given() {
    let f = fixture_configured(ASKS_BEFORE_WRITING).await;
    // The body, what it must be refused with (status, code, field).
    let cases: Vec<(Value, StatusCode, &str, Option<&str>)> = vec![
        (
            json!({"tol": "write_file"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            json!({"tool": "write_file", "remember": "everything"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            json!({"tool": "write_file", "duration_secs": -1}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
        ),
        (
            json!({"tool": "no_such_tool"}),
            StatusCode::NOT_FOUND,
            "unknown_tool",
            None,
        ),
        (
            json!({"tool": "write_file", "duration_secs": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("duration"),
        ),
        (
            json!({"tool": "write_file", "remember": "exact"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("remember"),
        ),
        (
            json!({"tool": "write_file", "remember": {"pattern": {}}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("remember"),
        ),
        (
            json!({"tool": "write_file", "who": "same_caller"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("who"),
        ),
        (
            json!({"tool": "write_file", "who": {"agent": " "}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            Some("who"),
        ),
    ];
    for (body, status, want_code, field) in cases {
        let (got, answer) = admin(&f, Method::POST, "/api/v1/grants", Some(&body)).await;
        assert_eq!(
            (got, code(&answer), answer["error"]["field"].as_str()),
            (status, want_code, field),
            "{body}: {answer}"
        );
    }
    let (status, answer) = admin(&f, Method::POST, "/api/v1/grants", None).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
    let (status, answer) = admin(&f, Method::GET, "/api/v1/grants?all=maybe", None).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
    assert_eq!(
        cli_list(&f.rt, true).await,
        json!([]),
        "nothing was granted"
    );
}
