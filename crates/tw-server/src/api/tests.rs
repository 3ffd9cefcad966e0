//! The admin API's mode, usage report, admin log, sandbox report and audit verification against a
//! real runtime: each answers what the CLI shows (`mode`, `audit report --json`, `audit changes
//! --json`, `sandbox doctor --json`, `audit verify --json`, `audit checkpoint`), a mode switched
//! over the API is the runtime's and is recorded as `api`, and a query or body that makes no
//! sense is 400 with its field.

use axum::http::{Method, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, OperationalMode, ToolStatus};
use tw_store::{AdminQuery, AuditQuery};

use crate::tests::{admin, code, fixture};

#[tokio::test]
async fn the_mode_switched_over_the_api_is_the_runtimes_and_is_recorded_as_api() {
    let f = fixture().await;
    let (status, body) = admin(&f, Method::GET, "/api/v1/mode", None).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({"mode": "normal", "modes": ["normal", "alert", "degraded", "lockdown", "recovery"]})
        )
    );

    let (status, body) = admin(
        &f,
        Method::PUT,
        "/api/v1/mode",
        Some(&json!({"mode": "lockdown"})),
    )
    .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"from": "normal", "to": "lockdown"}))
    );
    assert_eq!(f.rt.settings().mode(), OperationalMode::Lockdown);
    let (_, body) = admin(&f, Method::GET, "/api/v1/mode", None).await;
    assert_eq!(body["mode"], "lockdown");
    let mut write = f.rt.call(
        "write_file",
        json!({"path": "e.txt", "content": "x"}),
        Caller::agent("agent-7"),
    );
    write.no_wait = true;
    let r = f.rt.execute(write).await;
    assert_eq!(
        (r.status, r.error.map(|e| e.code)),
        (
            ToolStatus::PermissionDenied,
            Some("mode_forbidden".to_owned())
        )
    );
    let last =
        f.rt.store()
            .admin_events(&AdminQuery::default())
            .await
            .unwrap()
            .remove(0);
    assert_eq!(
        (
            last.actor.as_str(),
            last.kind.as_str(),
            last.summary.as_str()
        ),
        ("api", "mode_changed", "operational mode normal -> lockdown")
    );

    // A mode that does not exist, or no body, changes nothing.
    for body in [Some(json!({"mode": "panic"})), Some(json!({})), None] {
        let (status, answer) = admin(&f, Method::PUT, "/api/v1/mode", body.as_ref()).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{body:?}: {answer}"
        );
    }
    assert_eq!(f.rt.settings().mode(), OperationalMode::Lockdown);
}

#[tokio::test]
async fn the_usage_report_counts_the_calls_made_as_the_cli_reports_them() {
    let f = fixture().await;
    for (agent, arguments) in [
        ("a", json!({"path": "notes.txt"})),
        ("a", json!({"path": "notes.txt"})),
        ("b", json!({"path": "notes.txt"})),
        ("b", json!({})),
    ] {
        let call = f.rt.call("read_file", arguments, Caller::agent(agent));
        f.rt.execute(call).await;
    }
    let (status, report) = admin(&f, Method::GET, "/api/v1/audit/report", None).await;
    assert_eq!(status, StatusCode::OK);
    let cli =
        f.rt.store()
            .usage_report(&AuditQuery::default())
            .await
            .unwrap();
    assert_eq!(report, serde_json::to_value(&cli).unwrap());
    let counts = |rows: &Value| -> Vec<(String, u64, u64, u64)> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_owned(),
                    r["calls"].as_u64().unwrap(),
                    r["success"].as_u64().unwrap(),
                    r["invalid"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        counts(&report["by_tool"]),
        [("read_file".to_owned(), 4, 3, 1)]
    );
    assert_eq!(
        counts(&report["by_caller"]),
        [("a".to_owned(), 2, 2, 0), ("b".to_owned(), 2, 1, 1)]
    );
    assert_eq!(report["by_skill"], json!([]));

    // The same filters as the audit log's.
    let (_, only_a) = admin(&f, Method::GET, "/api/v1/audit/report?agent=a", None).await;
    assert_eq!(counts(&only_a["by_caller"]), [("a".to_owned(), 2, 2, 0)]);
    let (_, invalid) = admin(
        &f,
        Method::GET,
        "/api/v1/audit/report?status=validation_error",
        None,
    )
    .await;
    assert_eq!(
        counts(&invalid["by_tool"]),
        [("read_file".to_owned(), 1, 0, 1)]
    );
    // What the filter refuses, and what only pages have, are 400 with the field.
    for (query, field) in [
        ("since=20&until=10", Some("until")),
        ("status=fine", Some("status")),
        ("limit=5", None),
        ("colour=red", None),
    ] {
        let (status, answer) = admin(
            &f,
            Method::GET,
            &format!("/api/v1/audit/report?{query}"),
            None,
        )
        .await;
        assert_eq!(
            (status, answer["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, field),
            "{query}: {answer}"
        );
    }
}

#[tokio::test]
async fn the_admin_log_is_paged_newest_first_as_the_cli_shows_it() {
    let f = fixture().await;
    for mode in ["lockdown", "normal"] {
        let (status, _) = admin(
            &f,
            Method::PUT,
            "/api/v1/mode",
            Some(&json!({ "mode": mode })),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = admin(
        &f,
        Method::POST,
        "/api/v1/grants",
        Some(&json!({"tool": "read_file"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let cli =
        f.rt.store()
            .admin_events(&AdminQuery::default())
            .await
            .unwrap();
    let kinds: Vec<(&str, &str)> = cli
        .iter()
        .map(|e| (e.actor.as_str(), e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("api", "grant_created"),
            ("api", "mode_changed"),
            ("api", "mode_changed")
        ]
    );

    let (status, first) = admin(&f, Method::GET, "/api/v1/audit/changes?limit=2", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["rows"], serde_json::to_value(&cli[..2]).unwrap());
    assert_eq!(first["next_cursor"], json!(cli[1].id));
    let (_, rest) = admin(
        &f,
        Method::GET,
        &format!("/api/v1/audit/changes?limit=2&cursor={}", cli[1].id),
        None,
    )
    .await;
    assert_eq!(
        rest,
        json!({"rows": serde_json::to_value(&cli[2..]).unwrap(), "next_cursor": null})
    );
    let (_, all) = admin(&f, Method::GET, "/api/v1/audit/changes", None).await;
    assert_eq!(
        all,
        json!({"rows": serde_json::to_value(&cli).unwrap(), "next_cursor": null})
    );
    let (_, modes) = admin(
        &f,
        Method::GET,
        &format!(
            "/api/v1/audit/changes?kind=mode_changed&since={}",
            cli[2].at
        ),
        None,
    )
    .await;
    assert_eq!(modes["rows"], serde_json::to_value(&cli[1..]).unwrap());

    for (query, field) in [
        ("limit=0", Some("limit")),
        ("limit=1001", Some("limit")),
        ("cursor=0", Some("cursor")),
        ("limit=many", None),
        ("colour=red", None),
    ] {
        let (status, answer) = admin(
            &f,
            Method::GET,
            &format!("/api/v1/audit/changes?{query}"),
            None,
        )
        .await;
        assert_eq!(
            (status, answer["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, field),
            "{query}: {answer}"
        );
    }
}

#[tokio::test]
async fn the_sandbox_report_is_the_doctors() {
    let f = fixture().await;
    let (status, report) = admin(&f, Method::GET, "/api/v1/sandbox/doctor", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        report,
        serde_json::to_value(f.rt.sandbox_doctor().await).unwrap()
    );
    let levels: Vec<&str> = report["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["standard", "strict", "restricted"]);
}

#[tokio::test]
async fn a_chain_file_is_checked_over_the_api_and_a_run_is_found_by_its_id() {
    let f = crate::tests::fixture_configured("[policy]\ndefault = \"allow\"\n").await;
    let text = "name: twice\nsteps:\n  - id: a\n    tool: read_file\n    arguments: {path: notes.txt}\n  - id: b\n    tool: read_file\n    arguments: {path: $a.nope}\n";
    let (status, body) = crate::tests::send(
        &f.router,
        crate::tests::request(
            Method::POST,
            "/api/v1/chains/check",
            Some(&f.admin),
            Some(text),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["valid"], json!([]));
    assert_eq!(body["diagnostics"][0]["line"], 8, "{body}");
    assert_eq!(
        body["diagnostics"][0]["field"], "steps[1].arguments.path",
        "{body}"
    );

    // Installed, it is a tool; its run is found by the chain call's execution id.
    let good = text.replace("$a.nope", "notes.txt");
    let (chains, found) = f.rt.chains().check_text(&good, None);
    assert_eq!(found, vec![]);
    f.rt.chains().install(
        chains
            .into_iter()
            .map(|chain| tw_runtime::chains::ChainEntry {
                chain,
                origin: "api test".to_owned(),
                skill: None,
            })
            .collect(),
        Vec::new(),
    );
    let (_, listed) = admin(&f, Method::GET, "/api/v1/chains", None).await;
    assert_eq!(listed["chains"][0]["tool"], "chain__twice");
    let r =
        f.rt.execute(f.rt.call("chain__twice", json!({}), Caller::agent("agent-7")))
            .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let (status, run) = admin(
        &f,
        Method::GET,
        &format!("/api/v1/chains/runs/{}", r.execution_id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["run"]["status"], "completed");
    assert_eq!(run["calls"].as_array().unwrap().len(), 2);
    let (status, body) = admin(&f, Method::GET, "/api/v1/chains/runs/nope", None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("unknown_chain_run"))
    );
}

#[tokio::test]
async fn the_audit_log_is_verified_and_checkpointed_over_the_api_as_the_cli_does() {
    let f = fixture().await;
    let call =
        f.rt.call("echo", json!({"message": "hi"}), Caller::agent("a"));
    f.rt.execute(call).await;
    let (status, made) = admin(&f, Method::POST, "/api/v1/audit/checkpoint", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(made["audit_head_id"], 1, "{made}");
    // Nothing since: the same checkpoint again.
    let (_, again) = admin(&f, Method::POST, "/api/v1/audit/checkpoint", None).await;
    assert_eq!(again, made);
    let (status, report) = admin(&f, Method::GET, "/api/v1/audit/verify", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&report["problem_count"], &report["audit_records"]),
        (&json!(0), &json!(1)),
        "{report}"
    );
    // Against a checkpoint kept elsewhere, edited: named.
    let mut edited = made.clone();
    edited["audit_count"] = json!(2);
    let (status, report) = admin(
        &f,
        Method::POST,
        "/api/v1/audit/verify",
        Some(&json!({"checkpoints": [made, edited]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["problem_count"], 1, "{report}");
    assert_eq!(report["problems"][0]["kind"], "bad_checkpoint");
    let (status, error) = admin(
        &f,
        Method::POST,
        "/api/v1/audit/verify",
        Some(&json!({"checkpoint": []})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
}
