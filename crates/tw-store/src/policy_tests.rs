//! The policy engine's state against real SQLite files: settings and grants shared between two
//! stores on one file (as the CLI and the desktop app share a data directory), the append-only
//! admin log, confirmations answered exactly once, and rate limits that stay exact under
//! concurrency, across processes and across restarts.

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::ToolStatus;

use super::*;
use crate::backends_tests::Place;
use crate::tests::{open, raw};

const MINUTE: i64 = 60_000_000;
const T0: i64 = 1_700_000_000_000_000;

on_both! {
#[tokio::test]
async fn settings_are_shared_between_processes_and_kept_across_restarts(backend: Backend) {
        let dir = Place::new(backend).await;
        let cli = dir.open().await;
        let desktop = dir.open().await;
        assert_eq!(cli.get_setting("mode").await.unwrap(), None);
        cli.set_setting("mode", "lockdown", "alice", T0)
            .await
            .unwrap();
        desktop
            .set_setting("license_tier", "pro", "bob", T0 + 1)
            .await
            .unwrap();
        let mode = |value: &str, by: &str, at| Setting {
            key: "mode".to_owned(),
            value: value.to_owned(),
            updated_at: at,
            updated_by: by.to_owned(),
        };
        assert_eq!(
            desktop.get_setting("mode").await.unwrap(),
            Some(mode("lockdown", "alice", T0))
        );
        desktop
            .set_setting("mode", "normal", "bob", T0 + 2)
            .await
            .unwrap();
        let tier = Setting {
            key: "license_tier".to_owned(),
            value: "pro".to_owned(),
            updated_at: T0 + 1,
            updated_by: "bob".to_owned(),
        };
        assert_eq!(
            cli.settings().await.unwrap(),
            vec![tier.clone(), mode("normal", "bob", T0 + 2)]
        );
        cli.close().await;
        desktop.close().await;
        let err = cli
            .set_setting("mode", "normal", "alice", T0 + 3)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::WriterClosed), "{err}");

        let store = dir.open().await;
        assert_eq!(
            store.settings().await.unwrap(),
            vec![tier, mode("normal", "bob", T0 + 2)]
        );
        store.close().await;
}
}

fn admin_event(i: i64) -> AdminEvent {
    let (kind, summary) = match i % 3 {
        0 => ("mode_changed", format!("mode: normal -> lockdown ({i})")),
        1 => ("policy_reloaded", format!("policy: +{i} rules")),
        _ => ("grant_created", format!("grant g-{i} for write_file")),
    };
    AdminEvent {
        at: T0 + i,
        actor: if i % 2 == 0 { "alice" } else { "system" }.to_owned(),
        kind: kind.to_owned(),
        summary,
        details: json!({"n": i, "nested": {"ok": true}}),
    }
}

fn admin_ids(rows: &[AdminEventRow]) -> Vec<i64> {
    rows.iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn the_admin_log_pages_newest_first_and_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for i in 0..8 {
        let id = store.append_admin_event(admin_event(i)).await.unwrap();
        assert_eq!(id, i + 1);
    }
    let first = admin_event(0);
    let rows = store.admin_events(&AdminQuery::default()).await.unwrap();
    assert_eq!(admin_ids(&rows), (1..=8).rev().collect::<Vec<_>>());
    assert_eq!(
        rows.last(),
        Some(&AdminEventRow {
            id: 1,
            at: first.at,
            actor: first.actor,
            kind: first.kind,
            summary: first.summary,
            details: first.details,
        })
    );

    let q = |f: fn(&mut AdminQuery)| {
        let mut q = AdminQuery::default();
        f(&mut q);
        q
    };
    let cases: Vec<(AdminQuery, Vec<i64>)> = vec![
        (q(|q| q.kind = Some("mode_changed".into())), vec![7, 4, 1]),
        (q(|q| q.since = Some(T0 + 5)), vec![8, 7, 6]),
        (
            q(|q| {
                q.kind = Some("policy_reloaded".into());
                q.cursor = Some(8);
            }),
            vec![5, 2],
        ),
        (q(|q| q.limit = 0), vec![8]),
    ];
    for (query, expect) in cases {
        let rows = store.admin_events(&query).await.unwrap();
        assert_eq!(admin_ids(&rows), expect, "{query:?}");
    }
    // Pages of 3 walk every event once.
    let mut q = AdminQuery {
        limit: 3,
        ..AdminQuery::default()
    };
    let mut seen = Vec::new();
    loop {
        let rows = store.admin_events(&q).await.unwrap();
        seen.extend(admin_ids(&rows));
        match rows.last() {
            Some(last) if rows.len() == 3 => q.cursor = Some(last.id),
            _ => break,
        }
    }
    assert_eq!(seen, (1..=8).rev().collect::<Vec<_>>());

    let pool = raw(&dir).await;
    for sql in [
        "UPDATE admin_log SET actor = 'mallory'",
        "DELETE FROM admin_log",
    ] {
        let err = sqlx::query(sql)
            .execute(&pool)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("the admin log is append-only"), "{sql}: {err}");
    }
    store.close().await;
}

#[tokio::test]
async fn kinds_that_are_not_snake_case_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for kind in ["Mode Switch", "", "1st", "mode-switch", &"a".repeat(65)] {
        let err = store
            .append_admin_event(AdminEvent {
                kind: kind.to_owned(),
                ..admin_event(0)
            })
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid admin event kind {kind:?}: expected snake_case: a lowercase letter, \
                 then lowercase letters, digits and underscores, at most 64 characters"
            )
        );
    }
    // The same rule guards audit records' violation types, and the schema enforces it too.
    let mut record = crate::tests::record(1, "echo", ToolStatus::PermissionDenied);
    record.violation = Some(AuditViolation {
        kind: "Policy Denied".to_owned(),
        severity: Severity::Error,
    });
    let err = store.append(record).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid { what, .. } if what == "violation type \"Policy Denied\""),
        "{err}"
    );
    let pool = raw(&dir).await;
    let err = sqlx::query(
        "INSERT INTO admin_log (at, actor, kind, summary, details, prev, hash) \
         VALUES (0, 'a', 'Bad', '', '{}', zeroblob(32), zeroblob(32))",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(err.to_string().contains("CHECK constraint failed"), "{err}");
    assert_eq!(
        store.admin_events(&AdminQuery::default()).await.unwrap(),
        vec![]
    );
    assert!(store.is_healthy());
    store.close().await;
}

pub(crate) fn confirmation(id: &str, created_at: i64, expires_at: i64) -> NewConfirmation {
    NewConfirmation {
        id: id.to_owned(),
        execution_id: format!("exec-{id}"),
        tool: "write_file".to_owned(),
        arguments: json!({"path": "notes.txt", "token": "[REDACTED]"}),
        agent_id: "agent-a".to_owned(),
        skill: Some("reviewer".to_owned()),
        user_id: Some("u-1".to_owned()),
        reason: "write_file asks before writing".to_owned(),
        explanation: json!([{"layer": "tool_policy", "decision": "ask"}]),
        context: Some(json!({"page": "http://site.test/form", "element": "the button \"Send\""})),
        created_at,
        expires_at,
    }
}

/// The row a fresh request reads back as.
fn pending(c: &NewConfirmation) -> ConfirmationRow {
    ConfirmationRow {
        id: c.id.clone(),
        execution_id: c.execution_id.clone(),
        tool: c.tool.clone(),
        arguments: c.arguments.clone(),
        agent_id: c.agent_id.clone(),
        skill: c.skill.clone(),
        user_id: c.user_id.clone(),
        reason: c.reason.clone(),
        explanation: c.explanation.clone(),
        context: c.context.clone(),
        created_at: c.created_at,
        expires_at: c.expires_at,
        state: ConfirmationState::Pending,
        resolved_at: None,
        resolved_by: None,
        note: None,
        grant_id: None,
    }
}

pub(crate) fn new_grant(id: &str, scope: GrantScope) -> NewGrant {
    NewGrant {
        id: id.to_owned(),
        tool: "write_file".to_owned(),
        scope,
        agent_id: Some("agent-a".to_owned()),
        skill: None,
        created_by: "alice".to_owned(),
        expires_at: None,
        confirmation_id: None,
    }
}

pub(crate) fn approve(by: &str, grant: Option<NewGrant>) -> Resolution {
    Resolution {
        approve: true,
        by: by.to_owned(),
        note: Some("fine".to_owned()),
        grant,
    }
}

on_both! {
#[tokio::test]
async fn an_approval_settles_a_request_once_and_links_its_grant(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let c = confirmation("c-1", T0, T0 + MINUTE);
        store.create_confirmation(c.clone()).await.unwrap();
        assert_eq!(store.confirmation("c-1").await.unwrap(), Some(pending(&c)));

        // The grant comes with the approval: made by the approver, tied to the request.
        let offered = NewGrant {
            created_by: "whoever".to_owned(),
            ..new_grant("g-1", GrantScope::Exact(json!({"path": "notes.txt"})))
        };
        let outcome = store
            .resolve_confirmation("c-1", approve("alice", Some(offered)), T0 + 10)
            .await
            .unwrap();
        let grant = GrantRow {
            id: "g-1".to_owned(),
            tool: "write_file".to_owned(),
            scope: GrantScope::Exact(json!({"path": "notes.txt"})),
            agent_id: Some("agent-a".to_owned()),
            skill: None,
            created_at: T0 + 10,
            created_by: "alice".to_owned(),
            expires_at: None,
            revoked_at: None,
            revoked_by: None,
            confirmation_id: Some("c-1".to_owned()),
        };
        let approved = ConfirmationRow {
            state: ConfirmationState::Approved,
            resolved_at: Some(T0 + 10),
            resolved_by: Some("alice".to_owned()),
            note: Some("fine".to_owned()),
            grant_id: Some("g-1".to_owned()),
            ..pending(&c)
        };
        assert_eq!(
            outcome,
            ResolveOutcome::Resolved {
                confirmation: Box::new(approved.clone()),
                grant: Some(Box::new(grant.clone())),
            }
        );
        assert_eq!(store.confirmation("c-1").await.unwrap(), Some(approved));
        assert_eq!(store.grant("g-1").await.unwrap(), Some(grant));

        // A second answer changes nothing and learns who answered first.
        let deny = Resolution {
            approve: false,
            by: "bob".to_owned(),
            note: None,
            grant: None,
        };
        let already = ResolveOutcome::AlreadyResolved {
            state: ConfirmationState::Approved,
            by: Some("alice".to_owned()),
            at: T0 + 10,
        };
        assert_eq!(
            store
                .resolve_confirmation("c-1", deny.clone(), T0 + 20)
                .await
                .unwrap(),
            already
        );
        assert_eq!(
            store
                .resolve_confirmation("nope", deny.clone(), T0 + 20)
                .await
                .unwrap(),
            ResolveOutcome::NotFound
        );

        // A denial cannot carry a grant; nothing is touched.
        store
            .create_confirmation(confirmation("c-2", T0, T0 + MINUTE))
            .await
            .unwrap();
        let err = store
            .resolve_confirmation(
                "c-2",
                Resolution {
                    grant: Some(new_grant("g-2", GrantScope::Tool)),
                    ..deny.clone()
                },
                T0 + 30,
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid resolution of confirmation c-2: a grant can only come with an approval"
        );
        let outcome = store
            .resolve_confirmation("c-2", deny, T0 + 40)
            .await
            .unwrap();
        let ResolveOutcome::Resolved {
            confirmation,
            grant,
        } = outcome
        else {
            panic!("{outcome:?}");
        };
        assert_eq!(
            (confirmation.state, confirmation.resolved_by, grant),
            (ConfirmationState::Denied, Some("bob".to_owned()), None)
        );
        assert_eq!(store.grant("g-2").await.unwrap(), None);
        store.close().await;
}
}

on_both! {
#[tokio::test]
async fn a_failed_grant_leaves_the_request_pending(backend: Backend) {
        // The approval and its grant are one transaction: if the grant cannot be stored (here its
        // id is taken), the request must not end up approved without it.
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        store
            .create_grant(new_grant("g-1", GrantScope::Tool), T0)
            .await
            .unwrap();
        let c = confirmation("c-1", T0, T0 + MINUTE);
        store.create_confirmation(c.clone()).await.unwrap();
        let err = store
            .resolve_confirmation(
                "c-1",
                approve("alice", Some(new_grant("g-1", GrantScope::Tool))),
                T0 + 1,
            )
            .await
            .unwrap_err();
        // SQLite says "UNIQUE constraint failed", PostgreSQL "violates unique constraint".
        assert!(err.to_string().to_lowercase().contains("unique"), "{err}");
        assert_eq!(store.confirmation("c-1").await.unwrap(), Some(pending(&c)));
        // And the write connection is usable afterwards: no transaction was left open.
        assert!(matches!(
            store
                .resolve_confirmation("c-1", approve("alice", None), T0 + 2)
                .await
                .unwrap(),
            ResolveOutcome::Resolved { .. }
        ));
        store
            .append(crate::tests::record(1, "echo", ToolStatus::Success))
            .await
            .unwrap();
        store.close().await;
        let store = dir.open().await;
        assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 1);
        assert_eq!(
            store.confirmation("c-1").await.unwrap().map(|c| c.state),
            Some(ConfirmationState::Approved)
        );
        store.close().await;
}
}

on_both! {
#[tokio::test]
async fn requests_expire_at_their_deadline(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        for (id, created, expires) in [
            ("c-a", T0, T0 + 50),
            ("c-b", T0 + 1, T0 + 150),
            ("c-c", T0 + 2, T0 + 300),
            ("c-d", T0 + 3, T0 + 400),
        ] {
            store
                .create_confirmation(confirmation(id, created, expires))
                .await
                .unwrap();
        }
        // An answer at the deadline is too late, even before any sweep ran; the request is marked
        // expired there and then, with its deadline as the time.
        assert_eq!(
            store
                .resolve_confirmation("c-a", approve("alice", None), T0 + 50)
                .await
                .unwrap(),
            ResolveOutcome::AlreadyResolved {
                state: ConfirmationState::Expired,
                by: None,
                at: T0 + 50,
            }
        );
        assert_eq!(
            store.expire_confirmations(T0 + 150).await.unwrap(),
            vec!["c-b".to_owned()]
        );
        assert_eq!(
            store.expire_confirmations(T0 + 150).await.unwrap(),
            Vec::<String>::new()
        );
        assert!(matches!(
            store
                .resolve_confirmation("c-d", approve("alice", None), T0 + 399)
                .await
                .unwrap(),
            ResolveOutcome::Resolved { .. }
        ));
        let expired = |id: &str, created, expires| ConfirmationRow {
            state: ConfirmationState::Expired,
            resolved_at: Some(expires),
            ..pending(&confirmation(id, created, expires))
        };
        assert_eq!(
            store
                .confirmations(&ConfirmationQuery {
                    state: Some(ConfirmationState::Expired),
                    limit: 10,
                })
                .await
                .unwrap(),
            vec![
                expired("c-b", T0 + 1, T0 + 150),
                expired("c-a", T0, T0 + 50)
            ]
        );
        // Everything: the pending queue oldest first, then the settled history newest first.
        let all: Vec<(String, ConfirmationState)> = store
            .confirmations(&ConfirmationQuery {
                state: None,
                limit: 10,
            })
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.id, c.state))
            .collect();
        let s = |id: &str, state| (id.to_owned(), state);
        assert_eq!(
            all,
            vec![
                s("c-c", ConfirmationState::Pending),
                s("c-d", ConfirmationState::Approved),
                s("c-b", ConfirmationState::Expired),
                s("c-a", ConfirmationState::Expired),
            ]
        );
        assert_eq!(
            store
                .confirmations(&ConfirmationQuery::default())
                .await
                .unwrap(),
            vec![pending(&confirmation("c-c", T0 + 2, T0 + 300))]
        );
        store.close().await;
}
}

on_both! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_answering_at_once_settle_each_request_exactly_once(backend: Backend) {
        let dir = Place::new(backend).await;
        let cli = dir.open().await;
        let desktop = dir.open().await;
        let n = 40;
        for i in 0..n {
            cli.create_confirmation(confirmation(&format!("c-{i:02}"), T0, T0 + MINUTE))
                .await
                .unwrap();
        }
        let mut tasks = Vec::new();
        for i in 0..n {
            let id = format!("c-{i:02}");
            let (a, b) = (cli.clone(), desktop.clone());
            let approve_with_grant = approve(
                "alice",
                Some(new_grant(&format!("g-{i:02}"), GrantScope::Tool)),
            );
            let deny = Resolution {
                approve: false,
                by: "bob".to_owned(),
                note: None,
                grant: None,
            };
            let (id_a, id_b) = (id.clone(), id.clone());
            let first = tokio::spawn(async move {
                a.resolve_confirmation(&id_a, approve_with_grant, T0 + 1)
                    .await
            });
            let second = tokio::spawn(async move { b.resolve_confirmation(&id_b, deny, T0 + 2).await });
            tasks.push((id, first, second));
        }
        for (id, first, second) in tasks {
            let outcomes = [
                first.await.unwrap().unwrap(),
                second.await.unwrap().unwrap(),
            ];
            let winners: Vec<&ResolveOutcome> = outcomes
                .iter()
                .filter(|o| matches!(o, ResolveOutcome::Resolved { .. }))
                .collect();
            assert_eq!(winners.len(), 1, "{id}: {outcomes:?}");
            let ResolveOutcome::Resolved { confirmation, .. } = winners[0] else {
                unreachable!()
            };
            // The loser is told exactly what the winner did, and the file agrees.
            let loser = outcomes
                .iter()
                .find(|o| !matches!(o, ResolveOutcome::Resolved { .. }));
            assert_eq!(
                loser,
                Some(&ResolveOutcome::AlreadyResolved {
                    state: confirmation.state,
                    by: confirmation.resolved_by.clone(),
                    at: confirmation.resolved_at.unwrap(),
                }),
                "{id}"
            );
            let stored = desktop.confirmation(&id).await.unwrap().unwrap();
            assert_eq!(&stored, confirmation.as_ref());
            // A grant exists exactly when the approval won.
            let grant = cli.grant(&format!("g-{}", &id[2..])).await.unwrap();
            assert_eq!(
                grant.map(|g| g.id),
                stored.grant_id,
                "{id}: the grant must come with the approval and only with it"
            );
        }
        cli.close().await;
        desktop.close().await;
}
}

#[tokio::test]
async fn grants_are_listed_by_tool_time_and_revocation() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let exact = store
        .create_grant(
            new_grant("g-exact", GrantScope::Exact(json!({"path": "a.txt"}))),
            T0,
        )
        .await
        .unwrap();
    let pattern = store
        .create_grant(
            NewGrant {
                skill: Some("reviewer".to_owned()),
                expires_at: Some(T0 + 100),
                ..new_grant(
                    "g-pattern",
                    GrantScope::Pattern(json!({"path": "docs/**"}).as_object().unwrap().clone()),
                )
            },
            T0 + 1,
        )
        .await
        .unwrap();
    let tool = store
        .create_grant(
            NewGrant {
                tool: "read_file".to_owned(),
                agent_id: None,
                ..new_grant("g-tool", GrantScope::Tool)
            },
            T0 + 2,
        )
        .await
        .unwrap();
    assert_eq!(
        pattern,
        GrantRow {
            id: "g-pattern".to_owned(),
            tool: "write_file".to_owned(),
            scope: GrantScope::Pattern(json!({"path": "docs/**"}).as_object().unwrap().clone()),
            agent_id: Some("agent-a".to_owned()),
            skill: Some("reviewer".to_owned()),
            created_at: T0 + 1,
            created_by: "alice".to_owned(),
            expires_at: Some(T0 + 100),
            revoked_at: None,
            revoked_by: None,
            confirmation_id: None,
        }
    );
    assert!(store.revoke_grant("g-exact", "bob", T0 + 50).await.unwrap());
    assert!(!store.revoke_grant("g-exact", "bob", T0 + 60).await.unwrap());
    assert!(!store.revoke_grant("g-nope", "bob", T0 + 60).await.unwrap());
    let revoked = GrantRow {
        revoked_at: Some(T0 + 50),
        revoked_by: Some("bob".to_owned()),
        ..exact
    };

    let q = |f: fn(&mut GrantQuery)| {
        let mut q = GrantQuery::default();
        f(&mut q);
        q
    };
    let cases: Vec<(GrantQuery, Vec<&GrantRow>)> = vec![
        (GrantQuery::default(), vec![&pattern, &tool]),
        (
            q(|q| q.include_revoked = true),
            vec![&revoked, &pattern, &tool],
        ),
        (q(|q| q.tool = Some("write_file".into())), vec![&pattern]),
        // In force before the revocation, then after it, then after the pattern's expiry.
        (
            q(|q| q.active_at = Some(T0 + 49)),
            vec![&revoked, &pattern, &tool],
        ),
        (q(|q| q.active_at = Some(T0 + 50)), vec![&pattern, &tool]),
        (q(|q| q.active_at = Some(T0 + 100)), vec![&tool]),
    ];
    for (query, expect) in cases {
        let got = store.grants(&query).await.unwrap();
        assert_eq!(got.iter().collect::<Vec<_>>(), expect, "{query:?}");
    }
    // What reads back after a restart is what was written.
    store.close().await;
    let store = open(&dir).await;
    assert_eq!(
        store
            .grants(&GrantQuery {
                include_revoked: true,
                ..GrantQuery::default()
            })
            .await
            .unwrap(),
        vec![revoked, pattern, tool]
    );
    // The schema keeps a scope and its arguments consistent.
    let pool = raw(&dir).await;
    let err = sqlx::query(
        "INSERT INTO grants (id, tool, scope, arguments, created_at, created_by) \
         VALUES ('g-bad', 'x', 'tool', '{}', 0, 'a')",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(err.to_string().contains("CHECK constraint failed"), "{err}");
    store.close().await;
}

#[test]
fn grant_scopes_serialize_beside_their_arguments() {
    let grant = new_grant("g-1", GrantScope::Exact(json!({"path": "a.txt"})));
    let value = serde_json::to_value(&grant).unwrap();
    assert_eq!(value["scope"], json!("exact"));
    assert_eq!(value["arguments"], json!({"path": "a.txt"}));
    assert_eq!(serde_json::from_value::<NewGrant>(value).unwrap(), grant);
    let tool = serde_json::to_value(new_grant("g-2", GrantScope::Tool)).unwrap();
    assert_eq!(
        (tool["scope"].clone(), tool.get("arguments")),
        (json!("tool"), None)
    );
}

fn per_minute(key: &str, limit: u32) -> RateCheck {
    RateCheck {
        key: key.to_owned(),
        rule: tw_core::RuleRef::new("test", "test"),
        windows: vec![RateWindow {
            window_us: MINUTE,
            limit,
        }],
    }
}

async fn events(place: &Place, key: &str) -> i64 {
    place
        .scalar("SELECT COUNT(*) FROM rate_events WHERE key = $1", key)
        .await
}

on_both! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_admits_exactly_its_limit_under_concurrency(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let checks = vec![per_minute("tool:write_file", 100)];
        let mut tasks = Vec::new();
        let mut appends = Vec::new();
        for i in 0..1000 {
            let (s, checks) = (store.clone(), checks.clone());
            tasks.push(tokio::spawn(async move {
                s.rate_acquire(&checks, T0 + i).await
            }));
            // Audit appends compete for the same write connection meanwhile.
            if i % 10 == 0 {
                let s = store.clone();
                appends.push(tokio::spawn(async move {
                    s.append(crate::tests::record(i, "echo", ToolStatus::Success))
                        .await
                }));
            }
        }
        let mut admitted = 0;
        for t in tasks {
            match t.await.unwrap().unwrap() {
                RateOutcome::Admitted => admitted += 1,
                RateOutcome::Limited {
                    key,
                    window_us,
                    limit,
                    count,
                    retry_after_us,
                } => {
                    assert_eq!(
                        (key.as_str(), window_us, limit, count),
                        ("tool:write_file", MINUTE, 100, 100)
                    );
                    // Calls are timed T0 to T0 + 999 µs but run in any order, so the oldest counted
                    // call may be a little after this one's `now`.
                    assert!(
                        (1..MINUTE + 1000).contains(&retry_after_us),
                        "{retry_after_us}"
                    );
                }
            }
        }
        assert_eq!(admitted, 100);
        assert_eq!(events(&dir, "tool:write_file").await, 100);
        for a in appends {
            a.await.unwrap().unwrap();
        }
        assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 100);
        store.close().await;
}
}

on_both! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_racing_for_one_rate_limit_admit_exactly_its_limit(backend: Backend) {
        // Each store has its own write connection, as two processes would: here SQLite's lock, taken
        // up front by BEGIN IMMEDIATE, is what keeps the count exact.
        let dir = Place::new(backend).await;
        let stores = [dir.open().await, dir.open().await];
        let checks = vec![per_minute("tool:write_file", 50)];
        let mut tasks = Vec::new();
        for i in 0..400 {
            let (s, checks) = (stores[i % 2].clone(), checks.clone());
            tasks.push(tokio::spawn(async move {
                s.rate_acquire(&checks, T0 + i as i64).await
            }));
        }
        let mut admitted = [0, 0];
        for (i, t) in tasks.into_iter().enumerate() {
            if t.await.unwrap().unwrap() == RateOutcome::Admitted {
                admitted[i % 2] += 1;
            }
        }
        assert_eq!(admitted[0] + admitted[1], 50, "{admitted:?}");
        assert_eq!(events(&dir, "tool:write_file").await, 50);
        for s in stores {
            s.close().await;
        }
}
}

on_both! {
#[tokio::test]
async fn rate_counts_are_shared_between_processes_and_kept_across_restarts(backend: Backend) {
        let dir = Place::new(backend).await;
        let cli = dir.open().await;
        let desktop = dir.open().await;
        let checks = [per_minute("agent:claude", 3)];
        assert_eq!(
            cli.rate_acquire(&checks, T0).await.unwrap(),
            RateOutcome::Admitted
        );
        assert_eq!(
            desktop.rate_acquire(&checks, T0 + 10).await.unwrap(),
            RateOutcome::Admitted
        );
        assert_eq!(
            cli.rate_acquire(&checks, T0 + 20).await.unwrap(),
            RateOutcome::Admitted
        );
        let limited = |count, retry_after_us| RateOutcome::Limited {
            key: "agent:claude".to_owned(),
            window_us: MINUTE,
            limit: 3,
            count,
            retry_after_us,
        };
        assert_eq!(
            desktop.rate_acquire(&checks, T0 + 30).await.unwrap(),
            limited(3, MINUTE - 30)
        );
        cli.close().await;
        desktop.close().await;

        let store = dir.open().await;
        assert_eq!(
            store.rate_acquire(&checks, T0 + 40).await.unwrap(),
            limited(3, MINUTE - 40)
        );
        // The first call leaves the window exactly one window after it was made.
        assert_eq!(
            store.rate_acquire(&checks, T0 + MINUTE - 1).await.unwrap(),
            limited(3, 1)
        );
        assert_eq!(
            store.rate_acquire(&checks, T0 + MINUTE).await.unwrap(),
            RateOutcome::Admitted
        );
        // Events no window can see are gone: the one at T0 was pruned on the way.
        assert_eq!(events(&dir, "agent:claude").await, 3);
        assert_eq!(
            store.rate_acquire(&checks, T0 + 10 * MINUTE).await.unwrap(),
            RateOutcome::Admitted
        );
        assert_eq!(events(&dir, "agent:claude").await, 1);
        store.close().await;
}
}

on_both! {
#[tokio::test]
async fn every_window_of_every_key_must_have_room_or_nothing_is_counted(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let second = 1_000_000;
        let burst = RateCheck {
            key: "tool:shell".to_owned(),
            rule: tw_core::RuleRef::new("test", "test"),
            windows: vec![
                RateWindow {
                    window_us: MINUTE,
                    limit: 5,
                },
                RateWindow {
                    window_us: second,
                    limit: 2,
                },
            ],
        };
        let agent = per_minute("agent:a", 100);
        let checks = [agent.clone(), burst];
        for t in [T0, T0 + 1] {
            assert_eq!(
                store.rate_acquire(&checks, t).await.unwrap(),
                RateOutcome::Admitted
            );
        }
        // The one-second window is full; the agent's key must not be charged for a refused call.
        assert_eq!(
            store.rate_acquire(&checks, T0 + 2).await.unwrap(),
            RateOutcome::Limited {
                key: "tool:shell".to_owned(),
                window_us: second,
                limit: 2,
                count: 2,
                retry_after_us: second - 2,
            }
        );
        assert_eq!(events(&dir, "agent:a").await, 2);
        for t in [T0 + second, T0 + second + 1, T0 + 2 * second + 1] {
            assert_eq!(
                store.rate_acquire(&checks, t).await.unwrap(),
                RateOutcome::Admitted,
                "{t}"
            );
        }
        // Five in the minute now: the minute window is what stops the next one.
        assert_eq!(
            store.rate_acquire(&checks, T0 + 4 * second).await.unwrap(),
            RateOutcome::Limited {
                key: "tool:shell".to_owned(),
                window_us: MINUTE,
                limit: 5,
                count: 5,
                retry_after_us: MINUTE - 4 * second,
            }
        );
        // A limit lowered below what is already counted waits for enough calls to leave.
        assert_eq!(
            store
                .rate_acquire(&[per_minute("tool:shell", 2)], T0 + 4 * second)
                .await
                .unwrap(),
            RateOutcome::Limited {
                key: "tool:shell".to_owned(),
                window_us: MINUTE,
                limit: 2,
                count: 5,
                // The fourth call (at T0 + 1 s + 1) must leave for the count to drop to 1.
                retry_after_us: MINUTE - 3 * second + 1,
            }
        );
        assert_eq!(
            store.rate_acquire(&[], T0).await.unwrap(),
            RateOutcome::Admitted
        );
        let err = store
            .rate_acquire(
                &[RateCheck {
                    key: "k".to_owned(),
                    rule: tw_core::RuleRef::new("test", "test"),
                    windows: vec![RateWindow {
                        window_us: 0,
                        limit: 1,
                    }],
                }],
                T0,
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid rate limit window for key \"k\": 0 µs: a window must be positive"
        );
        store.close().await;
}
}

#[tokio::test]
async fn tool_switches_are_shared_atomic_with_their_admin_entry_and_no_ops_write_nothing() {
    use tw_core::LicenseTier::{Enterprise, Pro};
    let dir = tempfile::tempdir().unwrap();
    let cli = open(&dir).await;
    let desktop = open(&dir).await;
    let change = |tool: &str, tier, enabled, by: &str, at| SwitchChange {
        tool: tool.to_owned(),
        tier,
        enabled,
        by: by.to_owned(),
        at,
    };
    let event = |summary: &str| AdminEvent {
        at: T0,
        actor: "ann".to_owned(),
        kind: "tool_disabled".to_owned(),
        summary: summary.to_owned(),
        details: json!({}),
    };
    let row = |tool: &str, tier, at, by: &str| ToolSwitchRow {
        tool: tool.to_owned(),
        tier,
        disabled_at: at,
        disabled_by: by.to_owned(),
    };
    let off = cli
        .switch_tool(&change("exec", Pro, false, "ann", T0), &event("1"))
        .await
        .unwrap();
    assert_eq!(
        off,
        SwitchOutcome {
            changed: true,
            off: Some(row("exec", Pro, T0, "ann")),
        }
    );
    // Already off: nothing changes and nothing is logged; the earlier switch is reported.
    let again = desktop
        .switch_tool(&change("exec", Pro, false, "bob", T0 + 5), &event("2"))
        .await
        .unwrap();
    assert_eq!(
        again,
        SwitchOutcome {
            changed: false,
            off: Some(row("exec", Pro, T0, "ann")),
        }
    );
    desktop
        .switch_tool(
            &change("exec", Enterprise, false, "bob", T0 + 6),
            &event("3"),
        )
        .await
        .unwrap();
    desktop
        .switch_tool(&change("echo", Pro, false, "bob", T0 + 7), &event("4"))
        .await
        .unwrap();
    assert_eq!(
        cli.tool_switches().await.unwrap(),
        vec![
            row("echo", Pro, T0 + 7, "bob"),
            row("exec", Pro, T0, "ann"),
            row("exec", Enterprise, T0 + 6, "bob"),
        ]
    );
    let on = cli
        .switch_tool(&change("exec", Pro, true, "ann", T0 + 8), &event("5"))
        .await
        .unwrap();
    assert_eq!(on, off.clone());
    let on_again = cli
        .switch_tool(&change("exec", Pro, true, "ann", T0 + 9), &event("6"))
        .await
        .unwrap();
    assert_eq!(
        on_again,
        SwitchOutcome {
            changed: false,
            off: None
        }
    );
    let logged: Vec<String> = desktop
        .admin_events(&AdminQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.summary)
        .collect();
    assert_eq!(logged, ["5", "4", "3", "1"]);
    // A bad entry refuses the switch too: the change and its record go together.
    let mut bad = event("7");
    bad.kind = "Tool Off".to_owned();
    assert!(
        cli.switch_tool(&change("read_file", Pro, false, "ann", T0), &bad)
            .await
            .is_err()
    );
    // The schema refuses a tier it does not know.
    let pool = raw(&dir).await;
    let err = sqlx::query(
        "INSERT INTO tool_switches (tool, tier, disabled_at, disabled_by) \
         VALUES ('x', 'platinum', 0, 'a')",
    )
    .execute(&pool)
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("CHECK constraint failed"), "{err}");
    pool.close().await;
    assert_eq!(desktop.tool_switches().await.unwrap().len(), 2);
    cli.close().await;
    desktop.close().await;
}
