//! Capability classifications, skill overrides and per-skill usage against real SQLite files: an
//! administrator's classification is never replaced by a machine's, even from another process;
//! every administrative change leaves exactly one admin-log entry, written with it; the schema
//! itself refuses words it does not know; and everything is still there after a restart.

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::ToolStatus;
use tw_core::policy::access::AccessLevel;

use super::*;
use crate::backends_tests::Place;
use crate::tests::{open, raw, record};

const T0: i64 = 1_700_000_000_000_000;

fn score(capability: &str, confidence: f32) -> CapabilityScore {
    CapabilityScore {
        capability: capability.to_owned(),
        confidence,
    }
}

fn classified(
    tool: &str,
    source: ClassificationSource,
    capabilities: &[(&str, f32)],
    by: &str,
    at: i64,
) -> ClassificationRow {
    ClassificationRow {
        tool: tool.to_owned(),
        definition_hash: format!("sha256-of-{tool}"),
        source,
        capabilities: capabilities.iter().map(|(c, n)| score(c, *n)).collect(),
        detail: (source == ClassificationSource::Llm).then(|| "model-x".to_owned()),
        classified_at: at,
        classified_by: by.to_owned(),
    }
}

fn over(
    skill: &str,
    tool: &str,
    action: OverrideAction,
    level: Option<AccessLevel>,
    by: &str,
    at: i64,
) -> SkillOverrideRow {
    SkillOverrideRow {
        skill: skill.to_owned(),
        tool: tool.to_owned(),
        action,
        access_level: level,
        reason: Some(format!("{by} said so")),
        created_at: at,
        created_by: by.to_owned(),
    }
}

/// The admin log, oldest first, as (kind, actor, summary).
async fn logged(store: &Store) -> Vec<(String, String, String)> {
    let mut rows = store.admin_events(&AdminQuery::default()).await.unwrap();
    rows.reverse();
    rows.into_iter()
        .map(|e| (e.kind, e.actor, e.summary))
        .collect()
}

fn entry(kind: &str, actor: &str, summary: &str) -> (String, String, String) {
    (kind.to_owned(), actor.to_owned(), summary.to_owned())
}

on_both! {
#[tokio::test]
async fn classifications_round_trip_in_tool_order(backend: Backend) {
        use ClassificationSource::{Heuristic, Llm, Static};
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let rows = [
            classified(
                "web_fetch",
                Llm,
                &[("web_read", 0.93), ("net", 0.5)],
                "classifier",
                T0,
            ),
            classified("echo", Heuristic, &[], "classifier", T0 + 1),
            classified(
                "read_file",
                Static,
                &[("fs_read", 1.0)],
                "classifier",
                T0 + 2,
            ),
        ];
        for row in &rows {
            assert!(store.put_classification(row).await.unwrap());
        }
        let [web_fetch, echo, read_file] = rows.clone();
        assert_eq!(
            store.classifications().await.unwrap(),
            vec![echo.clone(), read_file.clone(), web_fetch.clone()]
        );
        assert_eq!(
            store.classification("web_fetch").await.unwrap(),
            Some(web_fetch.clone())
        );
        assert_eq!(store.classification("nope").await.unwrap(), None);
        // A machine replaces a machine (a changed definition, classified again).
        let mut again = classified("echo", Llm, &[("text", 0.7)], "classifier", T0 + 3);
        again.definition_hash = "sha256-of-echo-v2".to_owned();
        assert!(store.put_classification(&again).await.unwrap());
        assert_eq!(store.classification("echo").await.unwrap(), Some(again));
        // Removing a tool's row without an actor (the tool is gone) is not an administrative change.
        assert!(
            store
                .delete_classification("echo", None, T0 + 4)
                .await
                .unwrap()
        );
        assert!(
            !store
                .delete_classification("echo", None, T0 + 5)
                .await
                .unwrap()
        );
        assert_eq!(
            store.classifications().await.unwrap(),
            vec![read_file, web_fetch]
        );
        assert_eq!(logged(&store).await, []);
        store.close().await;
}
}

on_both! {
#[tokio::test]
async fn a_machine_classification_never_replaces_an_administrators(backend: Backend) {
        use ClassificationSource::{Admin, Heuristic, Llm, Static};
        let dir = Place::new(backend).await;
        // Two processes on one data directory: the desktop app where the administrator works, the
        // CLI whose classifier runs on its own.
        let desktop = dir.open().await;
        let cli = dir.open().await;
        let machine = classified("exec", Llm, &[("exec_shell", 0.8)], "classifier", T0);
        assert!(cli.put_classification(&machine).await.unwrap());
        let admin = classified(
            "exec",
            Admin,
            &[("exec_shell", 1.0), ("fs_write", 1.0)],
            "ann",
            T0 + 1,
        );
        assert!(desktop.put_classification(&admin).await.unwrap());
        for source in [Static, Llm, Heuristic] {
            let late = classified("exec", source, &[("text", 0.9)], "classifier", T0 + 2);
            assert!(!cli.put_classification(&late).await.unwrap(), "{source}");
        }
        assert_eq!(cli.classification("exec").await.unwrap(), Some(admin));
        assert_eq!(
            logged(&cli).await,
            [entry(
                "tool_classified",
                "ann",
                "set tool exec's capabilities to exec_shell, fs_write"
            )]
        );
        let details = cli.admin_events(&AdminQuery::default()).await.unwrap()[0]
            .details
            .clone();
        assert_eq!(
            details,
            json!({
                "tool": "exec",
                "definition_hash": "sha256-of-exec",
                "capabilities": [
                    {"capability": "exec_shell", "confidence": 1.0},
                    {"capability": "fs_write", "confidence": 1.0},
                ],
                "detail": null,
                "previous": {
                    "source": "llm",
                    "definition_hash": "sha256-of-exec",
                    "capabilities": [{"capability": "exec_shell", "confidence": 0.8}],
                    "detail": "model-x",
                    "classified_at": T0,
                    "classified_by": "classifier",
                },
            })
        );
        // An administrator replaces an administrator, and may take every capability away.
        let none = classified("exec", Admin, &[], "bob", T0 + 3);
        assert!(desktop.put_classification(&none).await.unwrap());
        assert_eq!(cli.classification("exec").await.unwrap(), Some(none));
        // Cleared by an administrator: logged, and the classifier may answer again.
        assert!(
            desktop
                .delete_classification("exec", Some("ann"), T0 + 4)
                .await
                .unwrap()
        );
        assert!(
            !desktop
                .delete_classification("exec", Some("ann"), T0 + 5)
                .await
                .unwrap()
        );
        assert!(cli.put_classification(&machine).await.unwrap());
        assert_eq!(
            logged(&desktop).await,
            [
                entry(
                    "tool_classified",
                    "ann",
                    "set tool exec's capabilities to exec_shell, fs_write"
                ),
                entry(
                    "tool_classified",
                    "bob",
                    "set tool exec's capabilities to none"
                ),
                entry(
                    "tool_classification_cleared",
                    "ann",
                    "cleared tool exec's capabilities (were none, from admin)"
                ),
            ]
        );
        cli.close().await;
        desktop.close().await;
}
}

on_both! {
#[tokio::test]
async fn bad_classifications_are_refused_before_the_file(backend: Backend) {
        use ClassificationSource::{Admin, Llm};
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let long = "t".repeat(129);
        let cases: [(ClassificationRow, &str); 6] = [
            (
                classified("", Llm, &[], "classifier", T0),
                "invalid tool name \"\": expected 1 to 128 characters, got 0",
            ),
            (
                classified(&long, Llm, &[], "classifier", T0),
                "invalid tool name \"ttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt\": expected 1 to 128 characters, got 129",
            ),
            (
                classified("exec", Llm, &[("web_read", 1.5)], "classifier", T0),
                "invalid capabilities of tool exec: confidence of web_read is 1.5: expected 0 to 1",
            ),
            (
                classified("exec", Admin, &[("web_read", f32::NAN)], "ann", T0),
                "invalid capabilities of tool exec: confidence of web_read is NaN: expected 0 to 1",
            ),
            (
                classified(
                    "exec",
                    Llm,
                    &[("web_read", 0.5), ("web_read", 0.6)],
                    "classifier",
                    T0,
                ),
                "invalid capabilities of tool exec: web_read is listed twice",
            ),
            (
                classified("exec", Admin, &[("Web Read", 1.0)], "ann", T0),
                "invalid capability name \"Web Read\": expected snake_case: a lowercase letter, then \
                 lowercase letters, digits and underscores, at most 64 characters",
            ),
        ];
        for (row, expected) in cases {
            let err = store.put_classification(&row).await.unwrap_err();
            assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
            assert_eq!(err.to_string(), expected);
        }
        assert_eq!(store.classifications().await.unwrap(), []);
        assert_eq!(logged(&store).await, []);
        store.close().await;
}
}

#[tokio::test]
async fn damaged_rows_are_reported_with_their_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pool = raw(&dir).await;
    // Valid JSON arrays, so the schema lets them in, but not lists of scores.
    sqlx::query(
        "INSERT INTO tool_classifications VALUES ('exec', 'h', 'llm', '[1]', NULL, 0, 'x')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let err = store.classifications().await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "stored tool classification exec, column capabilities is damaged: invalid type: \
         integer `1`, expected struct CapabilityScore at line 1 column 2"
    );
    assert_eq!(
        store.classification("exec").await.unwrap_err().to_string(),
        err.to_string()
    );
    // An administrator can still clear it, and the log keeps what was there.
    assert!(
        store
            .delete_classification("exec", Some("ann"), T0)
            .await
            .unwrap()
    );
    assert_eq!(store.classifications().await.unwrap(), []);
    let cleared = store.admin_events(&AdminQuery::default()).await.unwrap();
    assert_eq!(
        cleared
            .iter()
            .map(|e| (e.summary.as_str(), e.details.clone()))
            .collect::<Vec<_>>(),
        [(
            "cleared tool exec's capabilities (were none, from llm)",
            json!({
                "tool": "exec",
                "removed": {
                    "source": "llm",
                    "definition_hash": "h",
                    "capabilities": [1],
                    "detail": null,
                    "classified_at": 0,
                    "classified_by": "x",
                },
            })
        )]
    );
    pool.close().await;
    store.close().await;
}

#[tokio::test]
async fn the_schema_refuses_what_the_store_would_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pool = raw(&dir).await;
    let classification = |tool: &str, source: &str, capabilities: &str| {
        format!(
            "INSERT INTO tool_classifications VALUES \
             ('{tool}', 'h', '{source}', '{capabilities}', NULL, 0, 'x')"
        )
    };
    let overriding = |skill: &str, action: &str, level: &str| {
        format!(
            "INSERT INTO skill_overrides VALUES ('{skill}', 'exec', '{action}', {level}, NULL, 0, 'x')"
        )
    };
    let long_skill = "s".repeat(65);
    let long_tool = "t".repeat(129);
    let refused = [
        classification("exec", "guess", "[]"),
        classification("exec", "llm", "{}"),
        classification("exec", "llm", "not json"),
        classification("", "llm", "[]"),
        classification(&long_tool, "llm", "[]"),
        overriding("reviewer", "grant", "NULL"),
        overriding("reviewer", "add", "'read'"),
        overriding("reviewer", "remove", "'standard'"),
        overriding("", "add", "NULL"),
        overriding(&long_skill, "add", "NULL"),
    ];
    for sql in &refused {
        let err = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .execute(&pool)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("CHECK constraint failed"),
            "{sql}: {err}"
        );
    }
    // The same statements with good values go in: it was the value the schema refused.
    let accepted = [
        classification("exec", "heuristic", "[]"),
        classification(
            &"t".repeat(128),
            "admin",
            r#"[{"capability":"a","confidence":1}]"#,
        ),
        overriding("reviewer", "add", "'elevated'"),
        overriding(&"s".repeat(64), "remove", "NULL"),
    ];
    for sql in &accepted {
        sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    store.close().await;
}

on_both! {
#[tokio::test]
async fn skill_overrides_return_what_they_replace_and_log_every_change(backend: Backend) {
        use AccessLevel::Elevated;
        use OverrideAction::{Add, Remove};
        let dir = Place::new(backend).await;
        let cli = dir.open().await;
        let desktop = dir.open().await;
        let add = over("reviewer", "exec", Add, Some(Elevated), "ann", T0);
        assert_eq!(desktop.put_skill_override(&add).await.unwrap(), None);
        let remove = over("reviewer", "exec", Remove, None, "bob", T0 + 1);
        assert_eq!(
            cli.put_skill_override(&remove).await.unwrap(),
            Some(add.clone())
        );
        let other = over("auditor", "web_fetch", Add, None, "ann", T0 + 2);
        let other_reviewer = over("reviewer", "echo", Remove, None, "ann", T0 + 3);
        assert_eq!(desktop.put_skill_override(&other).await.unwrap(), None);
        assert_eq!(
            desktop.put_skill_override(&other_reviewer).await.unwrap(),
            None
        );
        assert_eq!(
            cli.skill_overrides().await.unwrap(),
            vec![other.clone(), other_reviewer.clone(), remove.clone()]
        );
        assert_eq!(
            cli.delete_skill_override("reviewer", "exec", "cy", T0 + 4)
                .await
                .unwrap(),
            Some(remove.clone())
        );
        // Nothing to clear: nothing is logged.
        assert_eq!(
            cli.delete_skill_override("reviewer", "exec", "cy", T0 + 5)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            desktop.skill_overrides().await.unwrap(),
            vec![other, other_reviewer]
        );
        assert_eq!(
            logged(&desktop).await,
            [
                entry(
                    "skill_override_set",
                    "ann",
                    "added tool exec to skill reviewer at access level elevated"
                ),
                entry(
                    "skill_override_set",
                    "bob",
                    "removed tool exec from skill reviewer"
                ),
                entry(
                    "skill_override_set",
                    "ann",
                    "added tool web_fetch to skill auditor"
                ),
                entry(
                    "skill_override_set",
                    "ann",
                    "removed tool echo from skill reviewer"
                ),
                entry(
                    "skill_override_cleared",
                    "cy",
                    "cleared the removal of tool exec for skill reviewer"
                ),
            ]
        );
        let events = desktop.admin_events(&AdminQuery::default()).await.unwrap();
        let second = events
            .iter()
            .find(|e| e.actor == "bob")
            .map(|e| (e.at, e.details.clone()));
        assert_eq!(
            second,
            Some((
                T0 + 1,
                json!({
                    "skill": "reviewer",
                    "tool": "exec",
                    "action": "remove",
                    "access_level": null,
                    "reason": "bob said so",
                    "previous": {
                        "skill": "reviewer",
                        "tool": "exec",
                        "action": "add",
                        "access_level": "elevated",
                        "reason": "ann said so",
                        "created_at": T0,
                        "created_by": "ann",
                    },
                })
            ))
        );
        cli.close().await;
        desktop.close().await;
}
}

on_both! {
#[tokio::test]
async fn bad_overrides_are_refused_before_the_file(backend: Backend) {
        use OverrideAction::{Add, Remove};
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let cases = [
            (
                over(
                    "reviewer",
                    "exec",
                    Remove,
                    Some(AccessLevel::Admin),
                    "ann",
                    T0,
                ),
                "invalid override of tool exec for skill reviewer: a removal grants nothing, so it \
                 takes no access level (got admin)",
            ),
            (
                over("", "exec", Add, None, "ann", T0),
                "invalid skill name \"\": expected 1 to 64 characters, got 0",
            ),
            (
                over("reviewer", "", Add, None, "ann", T0),
                "invalid tool name \"\": expected 1 to 128 characters, got 0",
            ),
        ];
        for (row, expected) in cases {
            let err = store.put_skill_override(&row).await.unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
        assert_eq!(store.skill_overrides().await.unwrap(), []);
        assert_eq!(logged(&store).await, []);
        store.close().await;
}
}

/// A call under `skill` (or none), refused by the skill layer if `denied`.
fn call(i: i64, skill: Option<&str>, denied: bool) -> AuditRecord {
    let status = if denied {
        ToolStatus::PermissionDenied
    } else {
        ToolStatus::Success
    };
    let mut rec = record(i, "exec", status);
    rec.skill = skill.map(str::to_owned);
    if denied {
        rec.error_code = Some("skill_denied".to_owned());
    }
    rec
}

#[tokio::test]
async fn skill_usage_counts_calls_and_refusals_from_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    assert_eq!(store.skill_usage().await.unwrap(), []);
    // Denied by policy, not by the skill: a call, not a skill refusal.
    let mut by_policy = record(8, "exec", ToolStatus::PermissionDenied);
    by_policy.skill = Some("auditor".to_owned());
    let calls = [
        call(1, Some("reviewer"), false),
        call(2, Some("reviewer"), true),
        call(3, None, true),
        call(4, Some("auditor"), false),
        call(5, Some("reviewer"), true),
        call(6, None, false),
        call(7, Some("reviewer"), false),
        by_policy,
    ];
    for rec in calls {
        store.append(rec).await.unwrap();
    }
    let usage = |skill: &str, calls, skill_denied, last: i64| SkillUsageRow {
        skill: skill.to_owned(),
        calls,
        skill_denied,
        last_call_at: Some(T0 + last * 1_000_000),
    };
    assert_eq!(
        store.skill_usage().await.unwrap(),
        vec![usage("auditor", 2, 0, 8), usage("reviewer", 4, 2, 7)]
    );
    // Grouped along migration 0004's skill index, not by a scan and a sort.
    let pool = raw(&dir).await;
    let plan: Vec<String> = sqlx::query(concat!("EXPLAIN QUERY PLAN ", capabilities::usage_sql!()))
        .bind("skill_denied")
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|r| sqlx::Row::get(r, "detail"))
        .collect();
    assert_eq!(
        plan,
        ["SEARCH audit_log USING INDEX audit_log_skill (skill>?)"]
    );
    pool.close().await;
    store.close().await;
}

on_both! {
#[tokio::test]
async fn everything_survives_reopening_the_file(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let admin = classified(
            "exec",
            ClassificationSource::Admin,
            &[("exec_shell", 1.0)],
            "ann",
            T0,
        );
        let machine = classified(
            "web_fetch",
            ClassificationSource::Llm,
            &[("web_read", 0.25)],
            "classifier",
            T0 + 1,
        );
        let added = over(
            "reviewer",
            "exec",
            OverrideAction::Add,
            Some(AccessLevel::Standard),
            "ann",
            T0 + 2,
        );
        store.put_classification(&admin).await.unwrap();
        store.put_classification(&machine).await.unwrap();
        store.put_skill_override(&added).await.unwrap();
        store.append(call(1, Some("reviewer"), true)).await.unwrap();
        let log = logged(&store).await;
        assert_eq!(log.len(), 2);
        store.close().await;

        let store = dir.open().await;
        assert_eq!(store.classifications().await.unwrap(), vec![admin, machine]);
        assert_eq!(store.skill_overrides().await.unwrap(), vec![added]);
        assert_eq!(
            store.skill_usage().await.unwrap(),
            vec![SkillUsageRow {
                skill: "reviewer".to_owned(),
                calls: 1,
                skill_denied: 1,
                last_call_at: Some(T0 + 1_000_000),
            }]
        );
        assert_eq!(logged(&store).await, log);
        store.close().await;
}
}
