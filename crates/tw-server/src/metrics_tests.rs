//! `/metrics` through the whole router: what the calls a process ran add up to, scraped as
//! Prometheus does (with the administrator's token), and refused to an agent's token; and the
//! check that these tests run on the store they were asked to.

use axum::http::{Method, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use crate::tests::{fixture, fixture_configured, request, send};

#[tokio::test]
async fn the_suite_runs_on_the_store_it_was_asked_for() {
    // scripts/test runs these tests a second time with TOOLWARDEN_TEST_STORE=postgres.
    let fx = fixture().await;
    assert_eq!(fx.rt.is_team_store(), tw_store::testing::on_team_store());
}

/// The scrape's lines that start with `prefix`.
fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[tokio::test]
async fn metrics_count_calls_by_tool_status_and_caller_and_refusals_by_the_layer_that_refused() {
    let f =
        fixture_configured("[policy]\nallow = [\"group:fs\", \"echo\"]\ndeny = [\"write_file\"]\n")
            .await;
    let run = |tool: &'static str, args: Value, agent: &'static str| {
        let rt = f.rt.clone();
        async move { rt.execute(rt.call(tool, args, Caller::agent(agent))).await }
    };
    for _ in 0..2 {
        assert_eq!(
            run("echo", json!({"n": 1}), "ana").await.status,
            ToolStatus::Success
        );
    }
    let denied = run("write_file", json!({"path": "x.txt", "content": "x"}), "bo").await;
    assert_eq!(denied.status, ToolStatus::PermissionDenied);
    let invalid = run("read_file", json!({"nope": 1}), "bo").await;
    assert_eq!(invalid.status, ToolStatus::ValidationError);
    // A tool nobody registered is counted, under one label whatever its name.
    let unknown = run("no_such_tool_7f3a", json!({}), "bo").await;
    assert_eq!(unknown.status, ToolStatus::NotFound);

    let resp = tower::ServiceExt::oneshot(
        f.router.clone(),
        request(Method::GET, "/metrics", Some(&f.admin), None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let kind = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(bytes.to_vec()).unwrap();

    let calls = lines(&text, "toolwarden_tool_calls_total{");
    for expected in [
        r#"toolwarden_tool_calls_total{tool="echo",status="success",caller="ana"} 2"#,
        r#"toolwarden_tool_calls_total{tool="write_file",status="permission_denied",caller="bo"} 1"#,
        r#"toolwarden_tool_calls_total{tool="read_file",status="validation_error",caller="bo"} 1"#,
        r#"toolwarden_tool_calls_total{tool="(unknown)",status="not_found",caller="bo"} 1"#,
    ] {
        assert!(calls.contains(&expected), "{expected} not in {calls:#?}");
    }
    assert!(!text.contains("no_such_tool_7f3a"), "{text}");
    let refused = lines(&text, "toolwarden_tool_calls_refused_total{");
    assert_eq!(refused.len(), 3, "{refused:#?}");
    assert!(
        refused.iter().any(|l| l
            .starts_with(r#"toolwarden_tool_calls_refused_total{layer="tools","#)
            && l.ends_with(" 1")),
        "{refused:#?}"
    );
    assert!(
        refused.iter().any(|l| l.contains(r#"layer="validation""#)),
        "{refused:#?}"
    );
    assert!(
        refused.iter().any(|l| l.contains(r#"layer="lookup""#)),
        "{refused:#?}"
    );
    // Latency by tool: every call observed once.
    assert_eq!(
        lines(
            &text,
            r#"toolwarden_tool_call_duration_seconds_count{tool="echo"}"#
        ),
        vec![r#"toolwarden_tool_call_duration_seconds_count{tool="echo"} 2"#]
    );
    assert!(
        text.contains(r#"toolwarden_mode{mode="normal"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"toolwarden_mode{mode="lockdown"} 0"#),
        "{text}"
    );
    assert!(text.contains("toolwarden_tool_calls_in_flight 0"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");

    // An agent's token reaches /mcp only.
    let (agent, _) =
        f.rt.tokens()
            .issue_api_token("ci-bot", None, "ana")
            .await
            .unwrap();
    let (status, body) = send(
        &f.router,
        request(Method::GET, "/metrics", Some(&agent), None),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = send(&f.router, request(Method::GET, "/metrics", None, None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
