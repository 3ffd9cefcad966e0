//! Calls in flight over the admin API, against a real runtime whose policy asks before
//! `write_file`: a call waiting for a person is listed as `toolwarden running` lists it, a cancel
//! finds it and it ends `cancelled` with its audit record, and a call nobody runs is 404.

use axum::http::{Method, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::{Caller, ToolStatus};

use crate::tests::{ASKS_BEFORE_WRITING, admin, code, fixture_configured};

#[tokio::test]
async fn a_call_waiting_for_a_person_is_listed_and_cancelled_and_ends_cancelled() {
    let f = fixture_configured(ASKS_BEFORE_WRITING).await;
    let (status, none) = admin(&f, Method::GET, "/api/v1/running", None).await;
    assert_eq!((status, none), (StatusCode::OK, json!([])));

    let call = f.rt.call(
        "write_file",
        json!({"path": "held.txt", "content": "x"}),
        Caller::agent("agent-7"),
    );
    let id = call.execution_id.to_string();
    let rt = f.rt.clone();
    let waiting = tokio::spawn(async move { rt.execute(call).await });
    // Listed once it asks (it is in flight from the start, but the request shows it is held).
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
    let (_, running) = admin(&f, Method::GET, "/api/v1/running", None).await;
    let own = f.rt.running_calls();
    assert_eq!(own.len(), 1);
    assert_eq!(
        running,
        json!([{
            "pid": std::process::id(),
            "execution_id": id,
            "trace_id": own[0].trace_id,
            "tool": "write_file",
            "agent_id": "agent-7",
            "started_at": own[0].started_at,
        }])
    );

    let (status, body) = admin(
        &f,
        Method::POST,
        &format!("/api/v1/running/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({"execution_id": id, "cancel_requested": true})
        )
    );
    let r = waiting.await.unwrap();
    assert_eq!(r.status, ToolStatus::Cancelled, "{:?}", r.error);
    let record = f.rt.store().get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, ToolStatus::Cancelled);
    assert!(
        !f._dir.path().join("ws/held.txt").exists(),
        "the cancelled call wrote nothing"
    );

    let (_, none) = admin(&f, Method::GET, "/api/v1/running", None).await;
    assert_eq!(none, json!([]));
    let (status, body) = admin(
        &f,
        Method::POST,
        &format!("/api/v1/running/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "not_running")
    );
    let (status, body) = admin(&f, Method::POST, "/api/v1/running/a%20b/cancel", None).await;
    assert_eq!(
        (
            status,
            code(&body),
            body["error"]["message"]
                .as_str()
                .map(|m| m.starts_with("execution_id: "))
        ),
        (StatusCode::BAD_REQUEST, "bad_request", Some(true)),
        "{body}"
    );
}
