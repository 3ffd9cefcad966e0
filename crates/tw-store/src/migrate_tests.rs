//! `store migrate`: a single-user SQLite store copied into a new team store keeps everything a
//! runtime reads and an audit log that verifies, refuses a target that holds anything, and
//! refuses a source whose log does not verify; its archives come along.

use pretty_assertions::assert_eq;
use tw_core::ToolStatus;

use super::*;
use crate::backends_tests::{Backend, Place};
use crate::policy_tests::{approve, confirmation, new_grant};
use crate::tests::{raw, record, spec};

const T0: i64 = 1_700_000_000_000_000;

#[tokio::test]
async fn a_single_user_store_moves_into_a_team_store_whole_and_verified() {
    let lite = Place::new(Backend::Sqlite).await;
    let s = lite.open().await;
    for i in 0..30 {
        s.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    s.set_setting("mode", "alert", "alice", T0).await.unwrap();
    s.save_custom_tool(&spec("lint the tree"), T0)
        .await
        .unwrap();
    s.create_confirmation(confirmation("c-1", T0, T0 + 60_000_000))
        .await
        .unwrap();
    s.resolve_confirmation(
        "c-1",
        approve("bob", Some(new_grant("g-1", GrantScope::Tool))),
        T0 + 1,
    )
    .await
    .unwrap();
    let scope = crate::memory_tests::scope("agent-a", "");
    let note = crate::memory_tests::entry("note", serde_json::json!("the build uses sccache"));
    s.memory_put(&scope, &note, crate::memory_tests::ROOMY, T0)
        .await
        .unwrap();
    s.checkpoint().await.unwrap();
    s.close().await;

    let team = Place::new(Backend::Postgres).await;
    let url = team.url.clone().unwrap();
    let local = team.dir.path().join("tw.db");
    let report = migrate_to_team_store(&lite.dir.path().join("tw.db"), &url, &local)
        .await
        .unwrap();
    let rows = |t: &str| report.tables.iter().find(|(n, _)| n == t).unwrap().1;
    assert_eq!(
        (
            rows("audit_log"),
            rows("settings"),
            rows("grants"),
            rows("memory")
        ),
        (30, 1, 1, 1)
    );
    assert!(report.verified.ok(), "{:?}", report.verified.problems);

    // The team store reads back what the file held, and goes on from it.
    let t = team.open().await;
    assert_eq!(
        t.get_setting("mode").await.unwrap().map(|s| s.value),
        Some("alert".to_owned())
    );
    assert_eq!(t.custom_tools().await.unwrap().len(), 1);
    let c = t.confirmation("c-1").await.unwrap().unwrap();
    assert_eq!(c.grant_id.as_deref(), Some("g-1"));
    // The memory's full-text index is the team store's own, built from the copied rows.
    let q = MemorySearch {
        query: Some("sccache".into()),
        limit: 5,
        ..MemorySearch::default()
    };
    let found = t.memory_search(&scope, &q, T0).await.unwrap();
    assert_eq!(
        found.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
        ["note"]
    );
    assert_eq!(t.get("exec-00007").await.unwrap().unwrap().id, 8);
    let next = t
        .append(record(30, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(next, 31, "ids go on after the copied ones");
    assert!(t.verify(vec![]).await.unwrap().ok());
    t.close().await;

    // A second copy into the same database is refused, and nothing changes.
    let err = migrate_to_team_store(&lite.dir.path().join("tw.db"), &url, &local)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("migrate into an empty database"),
        "{err}"
    );
}

#[tokio::test]
async fn a_source_that_does_not_verify_is_not_copied() {
    let lite = Place::new(Backend::Sqlite).await;
    let s = lite.open().await;
    for i in 0..5 {
        s.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    s.close().await;
    let pool = raw(&lite.dir).await;
    sqlx::raw_sql(
        "DROP TRIGGER audit_log_no_update; \
         UPDATE audit_log SET tool = 'rm' WHERE id = 3",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let team = Place::new(Backend::Postgres).await;
    let err = migrate_to_team_store(
        &lite.dir.path().join("tw.db"),
        team.url.as_deref().unwrap(),
        &team.dir.path().join("tw.db"),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("does not verify"), "{err}");
    let t = team.open().await;
    assert_eq!(t.count(&AuditQuery::default()).await.unwrap(), 0);
    t.close().await;
}

#[tokio::test]
async fn a_store_with_archives_moves_with_them_and_verifies_across_the_cut() {
    let lite = Place::new(Backend::Sqlite).await;
    let s = lite.open().await;
    for i in 0..20 {
        s.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    s.checkpoint().await.unwrap();
    // Records 0 to 7 (ids 1 to 8) into an archive beside the file.
    let file = lite.dir.path().join("old.jsonl");
    let a = s.archive(T0 + 8_000_000, &file).await.unwrap().unwrap();
    assert_eq!((a.header.first_id, a.header.last_id), (1, 8));
    s.close().await;

    let team = Place::new(Backend::Postgres).await;
    let report = migrate_to_team_store(
        &lite.dir.path().join("tw.db"),
        team.url.as_deref().unwrap(),
        &team.dir.path().join("tw.db"),
    )
    .await
    .unwrap();
    assert!(report.verified.ok(), "{:?}", report.verified.problems);
    assert_eq!(
        (report.verified.audit_records, report.verified.archives),
        (12, 1)
    );
    // The team store goes on after both, and the archive's file still checks against its record.
    let t = team.open().await;
    let next = t
        .append(record(20, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(next, 21);
    assert!(t.verify(vec![]).await.unwrap().ok());
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replacen("\"tool\":\"echo\"", "\"tool\":\"rm\"", 1),
    )
    .unwrap();
    let v = t.verify(vec![]).await.unwrap();
    assert_eq!(
        v.problems
            .iter()
            .map(|p| (p.log.as_str(), p.kind))
            .collect::<Vec<_>>(),
        vec![("archive", crate::verify::ProblemKind::Edited)],
        "{:#?}",
        v.problems
    );
    // Its records are removed from nowhere: a cut of the team store goes on from the copy.
    std::fs::write(&file, text).unwrap();
    let cut = t
        .archive(T0 + 12_000_000, &team.dir.path().join("cut.jsonl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            cut.header.chains[0].first_seq,
            cut.header.chains[0].last_seq
        ),
        (9, 12)
    );
    assert!(t.verify(vec![]).await.unwrap().ok());
    t.close().await;
}
