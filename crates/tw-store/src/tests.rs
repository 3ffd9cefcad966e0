//! The store against real SQLite files: group commit under concurrency, durability rules (append
//! only, newer schemas refused, foreign files untouched), queries, exports, violations and custom
//! tools. The policy engine's state has its own file, `policy_tests`.

use std::os::unix::fs::PermissionsExt as _;

use pretty_assertions::assert_eq;
use serde_json::json;
use sqlx::SqlitePool;
use tw_core::{DefinitionFormat, ToolStatus, load_tool_specs};

use super::*;

/// A record; denied calls, and some invalid ones, carry a violation.
pub(crate) fn record(i: i64, tool: &str, status: ToolStatus) -> AuditRecord {
    let violation = |kind: &str, severity| {
        Some(AuditViolation {
            kind: kind.to_owned(),
            severity,
        })
    };
    AuditRecord {
        execution_id: format!("exec-{i:05}"),
        trace_id: format!("trace-{}", i / 2),
        tool: tool.to_owned(),
        agent_id: if i % 3 == 0 { "agent-b" } else { "agent-a" }.to_owned(),
        skill: (i % 2 == 0).then(|| "reviewer".to_owned()),
        user_id: None,
        arguments: json!({"path": format!("file-{i}.txt")}),
        decision: Some(
            if status == ToolStatus::PermissionDenied {
                "deny"
            } else {
                "allow"
            }
            .to_owned(),
        ),
        explanation: Some(json!([{"layer": "tool_policy", "decision": "allow"}]).into()),
        status,
        error_code: (status != ToolStatus::Success).then(|| status.as_str().to_owned()),
        error_message: (status != ToolStatus::Success).then(|| format!("call {i} did not succeed")),
        violation: match status {
            ToolStatus::PermissionDenied => violation("policy_denied", Severity::Error),
            ToolStatus::ValidationError if i % 2 == 1 => {
                violation("schema_violation", Severity::Warning)
            }
            _ => None,
        },
        output: (status == ToolStatus::Success).then(|| json!({"n": i})),
        output_bytes: 8,
        truncated: false,
        started_at: 1_700_000_000_000_000 + i * 1_000_000,
        completed_at: 1_700_000_000_000_000 + i * 1_000_000 + 250,
        duration_us: 250,
        metadata: json!({}).into(),
    }
}

pub(crate) async fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(StoreOptions::new(dir.path().join("tw.db")))
        .await
        .unwrap()
}

/// A pool on the store's file from outside the store, with the tail's file attached as the
/// store attaches it.
pub(crate) async fn raw(dir: &tempfile::TempDir) -> SqlitePool {
    let db = dir.path().join("tw.db");
    let tail = crate::tail::path(&db).display().to_string();
    sqlx::sqlite::SqlitePoolOptions::new()
        .after_connect(move |conn, _| {
            let tail = tail.clone();
            Box::pin(async move {
                sqlx::query("ATTACH DATABASE ?1 AS tail")
                    .bind(tail)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_new_file_is_private_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    // The audit tail's file holds the newest records whole: as private as the store's.
    store
        .append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let tail = crate::tail::path(store.path());
    for file in [
        store.path().to_owned(),
        tail.clone(),
        crate::beside(&tail, "-wal"),
    ] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }
    let pool = raw(&dir).await;
    for schema in ["main", "tail"] {
        let journal: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("PRAGMA {schema}.journal_mode")))
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(journal, "wal", "{schema}");
    }
    store.close().await;
}

#[tokio::test]
async fn appended_rows_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let rec = record(1, "read_file", ToolStatus::Success);
    let id = store.append(rec.clone()).await.unwrap();
    let row = store.get("exec-00001").await.unwrap().unwrap();
    let expect = AuditRow {
        id,
        execution_id: rec.execution_id,
        trace_id: rec.trace_id,
        tool: rec.tool,
        agent_id: rec.agent_id,
        skill: rec.skill,
        user_id: rec.user_id,
        arguments: rec.arguments,
        decision: rec.decision,
        explanation: rec.explanation.map(|e| e.to_value()),
        status: rec.status,
        error_code: rec.error_code,
        error_message: rec.error_message,
        violation: rec.violation,
        output_sha256: rec.output.as_ref().map(output_digest),
        output: rec.output,
        output_bytes: rec.output_bytes,
        truncated: rec.truncated,
        started_at: rec.started_at,
        completed_at: rec.completed_at,
        duration_us: rec.duration_us,
        metadata: rec.metadata.to_value(),
        // The first record links to the genesis hash.
        prev: Some("0".repeat(64)),
        hash: row.hash.clone(),
    };
    assert_eq!(row.hash.as_ref().map(String::len), Some(64));
    assert_eq!(row, expect);
    assert_eq!(store.get("exec-99999").await.unwrap(), None);
    store.close().await;
    // And after a reopen.
    let store = open(&dir).await;
    assert_eq!(store.get("exec-00001").await.unwrap(), Some(expect));
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_commits_and_every_caller_gets_its_own_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut tasks = Vec::new();
    for i in 0..2000 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let id = store
                .append(record(i, "echo", ToolStatus::Success))
                .await
                .unwrap();
            (i, id)
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        let (i, id) = t.await.unwrap();
        // The id the caller got is the row holding its record.
        let row = store.get(&format!("exec-{i:05}")).await.unwrap().unwrap();
        assert_eq!(row.id, id);
        ids.push(id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2000);
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 2000);
    let batches = store.batches_committed();
    assert!(
        batches < 2000,
        "group commit should merge concurrent appends, got {batches} commits"
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_abandoned_mid_commit_do_not_strand_the_others() {
    // Whoever holds the write connection commits for everyone queued; if that caller goes away
    // mid-commit, the others must still get answers and the store must keep working.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut tasks = Vec::new();
    for i in 0..300 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.append(record(i, "echo", ToolStatus::Success)).await
        }));
    }
    for (i, t) in tasks.iter().enumerate() {
        if i % 3 == 0 {
            t.abort();
        }
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let mut acknowledged = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await {
            Ok(answer) => acknowledged.push((i, answer.unwrap())),
            Err(e) => assert!(e.is_cancelled() && i % 3 == 0, "call {i}: {e}"),
        }
    }
    // Every caller that stayed got its answer: 200 of them at least.
    assert!(acknowledged.len() >= 200, "{}", acknowledged.len());
    // Every acknowledged append is in the file under the id its caller was given.
    for (i, id) in &acknowledged {
        let row = store.get(&format!("exec-{i:05}")).await.unwrap().unwrap();
        assert_eq!(row.id, *id);
    }
    assert!(store.is_healthy());
    store
        .append(record(1000, "echo", ToolStatus::Success))
        .await
        .unwrap();
    store.close().await;
}

#[tokio::test]
async fn a_bad_record_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    store
        .append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap();
    // Queue a repeat of exec-00001 between two good records so they land in one batch.
    let (a, b, c) = tokio::join!(
        store.append(record(2, "echo", ToolStatus::Success)),
        store.append(record(1, "echo", ToolStatus::Success)),
        store.append(record(3, "echo", ToolStatus::Success)),
    );
    assert!(a.is_ok() && c.is_ok(), "{a:?} {c:?}");
    let err = b.unwrap_err().to_string();
    assert!(err.contains("UNIQUE"), "{err}");
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 3);
    assert!(
        store.is_healthy(),
        "a record's own fault must not mark the store unhealthy"
    );
    store.close().await;
}

/// A new file at `db` with the migrations up to `version` only: as an older build left it.
async fn migrated_to(db: &std::path::Path, version: i64) -> SqlitePool {
    let pool = SqlitePool::connect_with(
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal),
    )
    .await
    .unwrap();
    sqlite::MIGRATOR.run_to(version, &pool).await.unwrap();
    pool
}

/// (rows in audit_tail, rows in audit_log) read straight from the file.
async fn tail_and_log(pool: &SqlitePool) -> (i64, i64) {
    let count = |table: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(pool)
            .await
            .unwrap()
    };
    (count("audit_tail").await, count("audit_log").await)
}

#[tokio::test]
async fn records_reach_the_indexed_log_in_batches_under_the_ids_their_callers_got() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pool = raw(&dir).await;
    // Committed into the tail first: the caller has its id before the indexes are touched.
    let first = store
        .append(record(0, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(store.get("exec-00000").await.unwrap().unwrap().id, first);
    // More than one move's worth: the background moves take them without any read.
    let n = writer::MOVE_BATCH as i64 + 100;
    let mut ids = vec![first];
    for i in 1..n {
        ids.push(
            store
                .append(record(i, "echo", ToolStatus::Success))
                .await
                .unwrap(),
        );
    }
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids keep the order of the commits"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while tail_and_log(&pool).await != (0, n) {
        assert!(
            std::time::Instant::now() < deadline,
            "the tail was not moved: {:?}",
            tail_and_log(&pool).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for (i, id) in ids.iter().enumerate() {
        let row = store.get(&format!("exec-{i:05}")).await.unwrap().unwrap();
        assert_eq!(row.id, *id);
    }
    store.close().await;
}

#[tokio::test]
async fn records_a_killed_process_left_in_the_tail_move_when_the_store_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let moved = store
        .append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap();
    store.close().await;
    // What a process killed between its commit and the move leaves behind.
    let pool = raw(&dir).await;
    sqlx::query(
        "INSERT INTO audit_tail (id, execution_id, trace_id, tool, agent_id, arguments, status, \
         output_bytes, truncated, started_at, completed_at, duration_us, metadata, prev, hash) \
         VALUES (?, 'exec-left', 't', 'echo', 'a', '{}', 'success', 0, 0, 1, 2, 1, '{}', \
         zeroblob(32), zeroblob(32))",
    )
    .bind(moved + 1)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(tail_and_log(&pool).await, (1, 1));
    let store = open(&dir).await;
    assert_eq!(tail_and_log(&pool).await, (0, 2));
    assert_eq!(store.get("exec-left").await.unwrap().unwrap().id, moved + 1);
    // The next record is numbered after it.
    let next = store
        .append(record(2, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(next, moved + 2);
    // A record already in the indexed log cannot come in again through the tail.
    let err = store
        .append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("UNIQUE"), "{err}");
    store.close().await;
}

#[tokio::test]
async fn records_a_move_cut_short_left_in_both_files_are_read_once_and_leave_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(
            store
                .append(record(i, "echo", ToolStatus::Success))
                .await
                .unwrap(),
        );
    }
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 3);
    store.close().await;
    // A process killed between a move's two commits: the rows are in audit_log and still in
    // the tail's file.
    let pool = raw(&dir).await;
    sqlx::query(
        "INSERT INTO tail.audit_tail (id, prev, hash, execution_id, trace_id, tool, agent_id, \
         skill, user_id, arguments, decision, explanation, status, error_code, error_message, \
         output, output_sha256, output_bytes, truncated, started_at, completed_at, duration_us, \
         metadata, violation_type, violation_severity) \
         SELECT id, prev, hash, execution_id, trace_id, tool, agent_id, skill, user_id, \
         arguments, decision, explanation, status, error_code, error_message, output, \
         output_sha256, output_bytes, truncated, started_at, completed_at, duration_us, \
         metadata, violation_type, violation_severity FROM main.audit_log WHERE id >= ?",
    )
    .bind(ids[1])
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(tail_and_log(&pool).await, (2, 3));
    // Verified as it is: each record once, the chain whole.
    let report = crate::verify::verify(&dir.path().join("tw.db"), &[]).unwrap();
    assert!(report.ok(), "{report:?}");
    let store = open(&dir).await;
    // Opening moved nothing twice and emptied the tail; the next record follows the last.
    assert_eq!(tail_and_log(&pool).await, (0, 3));
    assert_eq!(store.get("exec-00002").await.unwrap().unwrap().id, ids[1]);
    let next = store
        .append(record(4, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(next, ids[2] + 1);
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 4);
    store.close().await;
}

#[tokio::test]
async fn records_the_tail_held_inside_the_store_move_into_the_log_when_it_gets_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tw.db");
    // A store as a build before migration 0018 left it, a record still in its tail.
    let old = migrated_to(&db, 17).await;
    sqlx::query(
        "INSERT INTO audit_tail (id, execution_id, trace_id, tool, agent_id, arguments, status, \
         output_bytes, truncated, started_at, completed_at, duration_us, metadata, prev, hash) \
         VALUES (1, 'exec-old', 't', 'echo', 'a', '{}', 'success', 0, 0, 1, 2, 1, '{}', \
         zeroblob(32), zeroblob(32))",
    )
    .execute(&old)
    .await
    .unwrap();
    old.close().await;
    let store = open(&dir).await;
    assert_eq!(store.get("exec-old").await.unwrap().unwrap().id, 1);
    let pool = raw(&dir).await;
    let inside: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM main.sqlite_schema WHERE name = 'audit_tail'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((inside, tail_and_log(&pool).await), (0, (0, 1)));
    let next = store
        .append(record(2, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(next, 2);
    store.close().await;
}

#[tokio::test]
async fn the_log_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    store
        .append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let pool = raw(&dir).await;
    // Fresh, the record is in the tail, which takes no updates either.
    let err = sqlx::query("UPDATE audit_tail SET tool = 'x'")
        .execute(&pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("append-only"), "{err}");
    // Once moved into the indexed log (a read moves it), neither updates nor deletes.
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 1);
    for sql in ["UPDATE audit_log SET tool = 'x'", "DELETE FROM audit_log"] {
        let err = sqlx::query(sql)
            .execute(&pool)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(store.get("exec-00001").await.unwrap().unwrap().tool, "echo");
    store.close().await;
}

#[tokio::test]
async fn a_database_from_a_newer_build_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    open(&dir).await.close().await;
    let pool = raw(&dir).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (20990101000000, 'from the future', 1, x'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let err = Store::open(StoreOptions::new(dir.path().join("tw.db")))
        .await
        .unwrap_err();
    let path = dir.path().join("tw.db");
    assert_eq!(
        err.to_string(),
        format!(
            "{} has schema version 20990101000000, newer than this build supports ({}); upgrade Toolwarden to use it",
            path.display(),
            sqlite::MIGRATOR.iter().map(|m| m.version).max().unwrap()
        )
    );
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let content = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).unwrap();
    let err = Store::open(StoreOptions::new(&path)).await.unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}

#[tokio::test]
async fn close_writes_what_is_queued_then_refuses_more() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pending: Vec<_> = (0..50)
        .map(|i| {
            let s = store.clone();
            tokio::spawn(async move { s.append(record(i, "echo", ToolStatus::Success)).await })
        })
        .collect();
    tokio::task::yield_now().await;
    store.close().await;
    let mut ok = 0;
    for p in pending {
        match p.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert!(matches!(e, StoreError::WriterClosed), "{e}"),
        }
    }
    let err = store
        .append(record(99, "echo", ToolStatus::Success))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::WriterClosed), "{err}");
    assert!(!store.is_healthy());
    store.close().await; // twice is fine
    let store = open(&dir).await;
    // Every append that was acknowledged is in the file; nothing else is.
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), ok);
    store.close().await;
}

async fn sample(store: &Store) {
    let statuses = [
        ToolStatus::Success,
        ToolStatus::Failed,
        ToolStatus::PermissionDenied,
        ToolStatus::ValidationError,
        ToolStatus::Success,
    ];
    for i in 0..20 {
        let tool = if i % 4 == 0 {
            "write_file"
        } else {
            "read_file"
        };
        store
            .append(record(i, tool, statuses[(i % 5) as usize]))
            .await
            .unwrap();
    }
}

pub(crate) fn ids(page: &AuditPage) -> Vec<i64> {
    page.rows.iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn filters_narrow_and_cursors_walk_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    let q = |f: fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 1000,
            ..AuditQuery::default()
        };
        f(&mut q);
        q
    };
    let cases: Vec<(AuditQuery, Vec<i64>)> = vec![
        (
            q(|q| q.tool = Some("write_file".into())),
            vec![17, 13, 9, 5, 1],
        ),
        (
            q(|q| q.status = Some(ToolStatus::Failed)),
            vec![17, 12, 7, 2],
        ),
        (
            q(|q| q.agent_id = Some("agent-b".into())),
            vec![19, 16, 13, 10, 7, 4, 1],
        ),
        (
            q(|q| q.skill = Some("reviewer".into())),
            vec![19, 17, 15, 13, 11, 9, 7, 5, 3, 1],
        ),
        (
            q(|q| {
                q.since = Some(1_700_000_000_000_000 + 5_000_000);
                q.until = Some(1_700_000_000_000_000 + 8_000_000);
            }),
            vec![8, 7, 6],
        ),
        (q(|q| q.text = Some("FILE-12.txt".into())), vec![13]),
        (q(|q| q.text = Some("call 7 did".into())), vec![8]),
        (q(|q| q.text = Some("%".into())), vec![]),
        (q(|q| q.cursor = Some(4)), vec![3, 2, 1]),
    ];
    for (query, expect) in cases {
        let page = store.query(&query).await.unwrap();
        assert_eq!(ids(&page), expect, "{query:?}");
        assert_eq!(
            store.count(&query).await.unwrap(),
            expect.len() as u64,
            "{query:?}"
        );
    }
    // Pages of 6: 20 rows, newest first, no gaps, no repeats.
    let mut q = AuditQuery {
        limit: 6,
        ..AuditQuery::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = store.query(&q).await.unwrap();
        seen.extend(ids(&page));
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, (1..=20).rev().collect::<Vec<_>>());
    // Limits are clamped rather than trusted.
    let page = store
        .query(&AuditQuery {
            limit: 0,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    store.close().await;
}

#[tokio::test]
async fn combined_filters_select_the_same_rows_with_the_same_cursors() {
    // Pins the rows and cursors of combined filters, which the page query's indexes serve (see
    // migration 0004): the same as a filter over every row would give.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    let at = |s: i64| Some(1_700_000_000_000_000 + s * 1_000_000);
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 1000,
            ..AuditQuery::default()
        };
        f(&mut q);
        q
    };
    let cases: Vec<(AuditQuery, Vec<i64>)> = vec![
        (
            q(&|q| {
                q.tool = Some("read_file".into());
                q.status = Some(ToolStatus::Failed);
            }),
            vec![12, 7, 2],
        ),
        (
            q(&|q| {
                q.tool = Some("write_file".into());
                q.status = Some(ToolStatus::Failed);
            }),
            vec![17],
        ),
        (
            q(&|q| {
                q.tool = Some("read_file".into());
                q.status = Some(ToolStatus::Failed);
                q.cursor = Some(12);
            }),
            vec![7, 2],
        ),
        (
            q(&|q| {
                q.skill = Some("reviewer".into());
                q.status = Some(ToolStatus::PermissionDenied);
            }),
            vec![13, 3],
        ),
        (
            q(&|q| {
                q.skill = Some("reviewer".into());
                q.agent_id = Some("agent-b".into());
            }),
            vec![19, 13, 7, 1],
        ),
        (q(&|q| q.skill = Some("onboarding".into())), vec![]),
        (
            q(&|q| {
                q.since = at(5);
                q.until = at(15);
                q.tool = Some("read_file".into());
            }),
            vec![15, 14, 12, 11, 10, 8, 7, 6],
        ),
        (
            q(&|q| {
                q.since = at(5);
                q.until = at(15);
                q.agent_id = Some("agent-b".into());
            }),
            vec![13, 10, 7],
        ),
        (
            q(&|q| {
                q.since = at(5);
                q.until = at(15);
                q.status = Some(ToolStatus::Success);
            }),
            vec![15, 11, 10, 6],
        ),
        (
            q(&|q| {
                q.since = at(5);
                q.until = at(15);
                q.tool = Some("read_file".into());
                q.cursor = Some(11);
            }),
            vec![10, 8, 7, 6],
        ),
        (
            q(&|q| {
                q.text = Some("did not".into());
                q.tool = Some("read_file".into());
                q.skill = Some("reviewer".into());
            }),
            vec![19, 7, 3],
        ),
    ];
    for (query, expect) in &cases {
        let page = store.query(query).await.unwrap();
        assert_eq!(ids(&page), *expect, "{query:?}");
        assert_eq!(
            (page.next_cursor, page.scanned_to),
            (None, None),
            "{query:?}"
        );
    }
    // Pages of 2 over a combined filter: each page's cursor is its last row, the last page has
    // none.
    let mut q = q(&|q| {
        q.since = at(5);
        q.until = at(15);
        q.tool = Some("read_file".into());
        q.limit = 2;
    });
    let mut pages = Vec::new();
    loop {
        let page = store.query(&q).await.unwrap();
        pages.push((ids(&page), page.next_cursor));
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        pages,
        vec![
            (vec![15, 14], Some(14)),
            (vec![12, 11], Some(11)),
            (vec![10, 8], Some(8)),
            (vec![7, 6], None),
        ]
    );
    store.close().await;
}

/// Walks a query's pages with a scan window of `window` ids, checking each page's promises, and
/// returns every row's id and each page's (rows, next_cursor, scanned_to).
async fn walk(
    store: &Store,
    mut q: AuditQuery,
    window: i64,
) -> (Vec<i64>, Vec<(usize, Option<i64>, Option<i64>)>) {
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    loop {
        let page = query::page_in_windows(store.inner().settled().await.unwrap(), &q, window, None)
            .await
            .unwrap();
        let got = ids(&page);
        assert!(got.len() <= q.limit as usize, "{q:?}: {got:?}");
        if let Some(to) = page.scanned_to {
            // A page cut at its window goes on right below it.
            assert_eq!(page.next_cursor, Some(to), "{q:?}");
        }
        seen.extend(&got);
        pages.push((got.len(), page.next_cursor, page.scanned_to));
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
        assert!(pages.len() < 1000, "{q:?} does not end");
    }
    (seen, pages)
}

#[tokio::test]
async fn text_search_walks_every_window_and_finds_each_match_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    // "did not" is in the error of every call that did not succeed; "file-1" in the arguments
    // of calls 1 and 10 to 19; "nowhere" in none.
    let texts: [(&str, Vec<i64>); 4] = [
        ("did not", vec![19, 18, 17, 14, 13, 12, 9, 8, 7, 4, 3, 2]),
        ("file-1", vec![20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 2]),
        ("nowhere", vec![]),
        (
            "READ_file",
            (1..=20).filter(|id| (id - 1) % 4 != 0).rev().collect(),
        ),
    ];
    for (text, expect) in &texts {
        for window in [1, 3, 7, 19, 20, 21, 1000] {
            for limit in [1, 2, 5, 50] {
                let q = AuditQuery {
                    text: Some((*text).to_owned()),
                    limit,
                    ..AuditQuery::default()
                };
                let (seen, pages) = walk(&store, q, window).await;
                assert_eq!(seen, *expect, "{text:?}, window {window}, limit {limit}");
                // A search within one window is paged as any other query.
                if window >= 20 {
                    assert!(pages.iter().all(|p| p.2.is_none()), "{pages:?}");
                }
            }
        }
    }
    // Pinned: "file-1" in windows of 7 ids, 5 to a page. Each window hangs from the cursor. The
    // first (ids 14 to 20) holds 7 matches: a full page. The second (9 to 15) holds the 5 left
    // below 16: a full page that still ends at its window. The third (2 to 8) holds one and the
    // last (1) none, and nothing is below it.
    let q = AuditQuery {
        text: Some("file-1".into()),
        limit: 5,
        ..AuditQuery::default()
    };
    assert_eq!(
        walk(&store, q.clone(), 7).await.1,
        vec![
            (5, Some(16), None),
            (5, Some(9), Some(9)),
            (1, Some(2), Some(2)),
            (0, None, None),
        ]
    );
    // A window without a match still hands out the cursor to search on: "call 1 did" is in row
    // 2 only, so the windows from the top (14 to 20, 7 to 13) come back empty.
    let q = AuditQuery {
        text: Some("call 1 did".into()),
        ..q
    };
    assert_eq!(
        walk(&store, q.clone(), 7).await.1,
        vec![
            (0, Some(14), Some(14)),
            (0, Some(7), Some(7)),
            (1, None, None)
        ]
    );
    // A cursor above the newest row searches from the newest row down, not through empty ids.
    let high = AuditQuery {
        cursor: Some(1_000_000),
        ..q.clone()
    };
    assert_eq!(walk(&store, high, 7).await.1, walk(&store, q, 7).await.1);
    store.close().await;
}

#[tokio::test]
async fn text_search_with_other_filters_searches_only_where_they_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    let at = |s: i64| Some(1_700_000_000_000_000 + s * 1_000_000);
    // Every text with every other filter, in every window and page size: the same rows as one
    // search of the whole log.
    let filters: [&dyn Fn(&mut AuditQuery); 6] = [
        &|_| {},
        &|q| q.tool = Some("read_file".into()),
        &|q| q.until = at(5),
        &|q| q.since = at(12),
        &|q| {
            q.agent_id = Some("agent-b".into());
            q.status = Some(ToolStatus::Failed);
        },
        &|q| q.skill = Some("reviewer".into()),
    ];
    for text in ["did not", "file-1", "nowhere", "n\"", "READ_file"] {
        for (f, filter) in filters.iter().enumerate() {
            let mut q = AuditQuery {
                text: Some(text.to_owned()),
                limit: 1000,
                ..AuditQuery::default()
            };
            filter(&mut q);
            let whole =
                query::page_in_windows(store.inner().settled().await.unwrap(), &q, i64::MAX, None)
                    .await
                    .unwrap();
            assert_eq!((whole.next_cursor, whole.scanned_to), (None, None));
            for window in [1, 2, 7, 20] {
                for limit in [1, 3, 50] {
                    let q = AuditQuery { limit, ..q.clone() };
                    let (seen, _) = walk(&store, q, window).await;
                    assert_eq!(
                        seen,
                        ids(&whole),
                        "{text:?}, filter {f}, window {window}, limit {limit}"
                    );
                }
            }
        }
    }
    // Pinned: the windows start at the newest row the other filters let through (row 5 for
    // calls before second 5), not at the newest row, and the search ends where they let no older
    // row through.
    let q = AuditQuery {
        text: Some("did not".into()),
        until: at(5),
        ..AuditQuery::default()
    };
    assert_eq!(
        walk(&store, q, 3).await.1,
        vec![(2, Some(3), Some(3)), (1, None, None)]
    );
    let q = AuditQuery {
        text: Some("did not".into()),
        skill: Some("onboarding".into()),
        ..AuditQuery::default()
    };
    assert_eq!(walk(&store, q, 3).await.1, vec![(0, None, None)]);
    store.close().await;
}

#[tokio::test]
async fn text_search_through_the_store_stops_at_its_window() {
    // The window the store really uses, over a log of two windows and a bit: only the top and
    // bottom windows hold a match, so the middle page is empty and still not the last. A store
    // without the text index, which would otherwise take the rows below its reach (see
    // search_tests).
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions::new(dir.path().join("tw.db"));
    options.text_index = false;
    let store = Store::open(options).await.unwrap();
    let rows = 2 * TEXT_SCAN_WINDOW + 100;
    let pool = raw(&dir).await;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) \
         INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, arguments, status, \
         error_message, output_bytes, truncated, started_at, completed_at, duration_us, metadata, \
         prev, hash) \
         SELECT 'exec-' || i, 't', 'echo', 'a', '{}', 'failed', \
         CASE WHEN i IN (3, 5, ?, ?) THEN 'disk full (ENOSPC)' ELSE 'nope' END, \
         0, 0, i, i, 0, '{}', zeroblob(32), zeroblob(32) FROM n",
    )
    .bind(rows)
    .bind(rows - 1)
    .bind(rows)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let mut q = AuditQuery {
        text: Some("enospc".into()),
        ..AuditQuery::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = store.query(&q).await.unwrap();
        pages.push((ids(&page), page.next_cursor, page.scanned_to));
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    let first = rows + 1 - TEXT_SCAN_WINDOW;
    let second = first - TEXT_SCAN_WINDOW;
    assert_eq!(
        pages,
        vec![
            (vec![rows, rows - 1], Some(first), Some(first)),
            (vec![], Some(second), Some(second)),
            (vec![5, 3], None, None),
        ]
    );
    store.close().await;
}

#[tokio::test]
async fn exports_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for (i, status) in [
        ToolStatus::Success,
        ToolStatus::Success,
        ToolStatus::PermissionDenied,
    ]
    .into_iter()
    .enumerate()
    {
        store
            .append(record(i as i64, "read_file", status))
            .await
            .unwrap();
    }
    let mut hostile = record(3, "echo", ToolStatus::Failed);
    hostile.error_message =
        Some("=HYPERLINK(\"http://evil\",\"x\"), then \"quoted\"\nnext line".to_owned());
    hostile.agent_id = "@agent".to_owned();
    store.append(hostile).await.unwrap();
    let mut csv = Vec::new();
    let n = store
        .export(&AuditQuery::default(), AuditExportFormat::Csv, &mut csv)
        .await
        .unwrap();
    assert_eq!(n, 4);
    insta::assert_snapshot!("export_csv", String::from_utf8(csv).unwrap());
    let mut jsonl = Vec::new();
    let q = AuditQuery {
        tool: Some("read_file".into()),
        ..AuditQuery::default()
    };
    assert_eq!(
        store
            .export(&q, AuditExportFormat::Jsonl, &mut jsonl)
            .await
            .unwrap(),
        3
    );
    insta::assert_snapshot!("export_jsonl", String::from_utf8(jsonl).unwrap());
    store.close().await;
}

#[tokio::test]
async fn exports_stream_past_one_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let appends: Vec<_> = (0..1234)
        .map(|i| {
            let s = store.clone();
            tokio::spawn(async move { s.append(record(i, "echo", ToolStatus::Success)).await })
        })
        .collect();
    for a in appends {
        a.await.unwrap().unwrap();
    }
    let mut out = Vec::new();
    let n = store
        .export(&AuditQuery::default(), AuditExportFormat::Jsonl, &mut out)
        .await
        .unwrap();
    assert_eq!(n, 1234);
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1234);
    assert!(
        lines
            .windows(2)
            .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64())
    );
    store.close().await;
}

#[tokio::test]
async fn usage_report_counts_by_tool_and_caller() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    let report = store.usage_report(&AuditQuery::default()).await.unwrap();
    let row = |key: &str,
               [calls, success, failed, denied, invalid, violations]: [u64; 6],
               first: i64,
               last: i64,
               tools| {
        UsageRow {
            key: key.to_owned(),
            calls,
            success,
            failed,
            denied,
            invalid,
            awaiting_confirmation: 0,
            violations,
            avg_duration_us: 250,
            first_at: 1_700_000_000_000_000 + first * 1_000_000,
            last_at: 1_700_000_000_000_000 + last * 1_000_000,
            distinct_tools: tools,
        }
    };
    assert_eq!(
        report,
        UsageReport {
            by_tool: vec![
                row("read_file", [15, 6, 3, 3, 3, 5], 1, 19, 1),
                row("write_file", [5, 2, 1, 1, 1, 1], 0, 16, 1),
            ],
            by_caller: vec![
                row("agent-a", [13, 5, 3, 3, 2, 4], 1, 19, 2),
                row("agent-b", [7, 3, 1, 1, 2, 2], 0, 18, 2),
            ],
            // Calls made under no skill (the odd ones) are in no skill's row.
            by_skill: vec![row("reviewer", [10, 4, 2, 2, 2, 2], 0, 18, 2)],
        }
    );
    let only = store
        .usage_report(&AuditQuery {
            status: Some(ToolStatus::Success),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(only.by_tool.iter().map(|r| r.calls).sum::<u64>(), 8);
    store.close().await;
}

pub(crate) fn spec(description: &str) -> tw_core::ToolSpec {
    let text = json!({
        "name": "word_count",
        "description": description,
        "category": "file_system",
        "parameters": [{"name": "path", "type": "string", "required": true}],
        "command": {"argv": ["wc", "-w", "--", "{path}"]}
    })
    .to_string();
    load_tool_specs(&text, "wc.json", DefinitionFormat::Json)
        .unwrap()
        .remove(0)
}

#[tokio::test]
async fn custom_tools_round_trip_update_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    store
        .save_custom_tool(&spec("Count words"), 10)
        .await
        .unwrap();
    store
        .save_custom_tool(&spec("Count the words"), 20)
        .await
        .unwrap();
    store.close().await;

    let store = open(&dir).await;
    let tools = store.custom_tools().await.unwrap();
    assert_eq!(
        tools,
        vec![StoredTool {
            name: "word_count".to_owned(),
            spec: Ok(spec("Count the words")),
            created_at: 10,
            updated_at: 20,
        }]
    );
    assert!(store.delete_custom_tool("word_count").await.unwrap());
    assert!(!store.delete_custom_tool("word_count").await.unwrap());
    assert_eq!(store.custom_tools().await.unwrap(), vec![]);
    store.close().await;
}

#[tokio::test]
async fn a_damaged_stored_tool_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    store
        .save_custom_tool(&spec("Count words"), 10)
        .await
        .unwrap();
    let pool = raw(&dir).await;
    sqlx::query("INSERT INTO custom_tools VALUES ('broken', '{\"name\": \"broken\"}', 1, 1)")
        .execute(&pool)
        .await
        .unwrap();
    let tools = store.custom_tools().await.unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(
        tools[0].spec.as_ref().unwrap_err(),
        "stored custom tool broken:1:18: missing field `description`"
    );
    assert!(tools[1].spec.is_ok());
    store.close().await;
}

#[tokio::test]
async fn violations_read_back_and_narrow_queries() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sample(&store).await;
    let mut critical = record(20, "read_file", ToolStatus::PermissionDenied);
    critical.violation = Some(AuditViolation {
        kind: "path_forbidden".to_owned(),
        severity: Severity::Critical,
    });
    store.append(critical.clone()).await.unwrap();
    assert_eq!(
        store.get("exec-00020").await.unwrap().unwrap().violation,
        critical.violation
    );
    assert_eq!(
        store.get("exec-00000").await.unwrap().unwrap().violation,
        None
    );
    // Denied calls (ids 3, 8, 13, 18, 21) and the invalid ones recorded with a violation (4, 14).
    let q = AuditQuery {
        violations_only: true,
        limit: 1000,
        ..AuditQuery::default()
    };
    assert_eq!(
        ids(&store.query(&q).await.unwrap()),
        vec![21, 18, 14, 13, 8, 4, 3]
    );
    assert_eq!(store.count(&q).await.unwrap(), 7);
    let q = AuditQuery {
        tool: Some("read_file".into()),
        ..q
    };
    let kinds: Vec<(String, Severity)> = store
        .query(&q)
        .await
        .unwrap()
        .rows
        .into_iter()
        .filter_map(|r| r.violation.map(|v| (v.kind, v.severity)))
        .collect();
    let v = |kind: &str, severity| (kind.to_owned(), severity);
    assert_eq!(
        kinds,
        vec![
            v("path_forbidden", Severity::Critical),
            v("policy_denied", Severity::Error),
            v("schema_violation", Severity::Warning),
            v("policy_denied", Severity::Error),
            v("schema_violation", Severity::Warning),
            v("policy_denied", Severity::Error),
        ]
    );
    // The schema keeps the two columns together and the severity in its set.
    let pool = raw(&dir).await;
    for (kind, severity) in [
        ("'policy_denied'", "NULL"),
        ("NULL", "'error'"),
        ("'policy_denied'", "'fatal'"),
    ] {
        let sql = format!(
            "INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, arguments, status, \
             output_bytes, truncated, started_at, completed_at, duration_us, metadata, \
             violation_type, violation_severity, prev, hash) \
             VALUES ('x', 't', 'echo', 'a', '{{}}', 'success', 0, 0, 0, 0, 0, '{{}}', {kind}, \
             {severity}, zeroblob(32), zeroblob(32))"
        );
        let err = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("CHECK constraint failed"),
            "{kind} {severity}: {err}"
        );
    }
    store.close().await;
}

#[tokio::test]
async fn a_log_written_by_the_first_schema_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    // Build the file as the previous release did: only the first migration.
    {
        let pool = migrated_to(&path, 1).await;
        sqlx::query(
            "INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, arguments, status, \
             output_bytes, truncated, started_at, completed_at, duration_us, metadata) \
             VALUES ('old', 't', 'echo', 'a', '{}', 'permission_denied', 0, 0, 5, 6, 1, '{}')",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let store = open(&dir).await;
    let old = store.get("old").await.unwrap().unwrap();
    assert_eq!(
        (old.status, old.violation),
        (ToolStatus::PermissionDenied, None)
    );
    store
        .set_setting("mode", "normal", "alice", 7)
        .await
        .unwrap();
    assert_eq!(
        store.get_setting("mode").await.unwrap().map(|s| s.value),
        Some("normal".to_owned())
    );
    store.close().await;
}

/// A record of `tool` that started `start_s` seconds after the sample's epoch.
fn started(i: i64, tool: &str, status: ToolStatus, start_s: f64) -> AuditRecord {
    let start = 1_700_000_000_000_000 + (start_s * 1e6) as i64;
    AuditRecord {
        started_at: start,
        completed_at: start + 250,
        ..record(i, tool, status)
    }
}

/// Seconds after the sample's epoch, as a bound of a time range.
fn at_s(s: f64) -> Option<i64> {
    Some(1_700_000_000_000_000 + (s * 1e6) as i64)
}

/// Follows a query's cursors to the end: each page's ids and `next_cursor`.
async fn pages_of(store: &Store, mut q: AuditQuery) -> Vec<(Vec<i64>, Option<i64>)> {
    let mut pages = Vec::new();
    loop {
        let page = store.query(&q).await.unwrap();
        pages.push((ids(&page), page.next_cursor));
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return pages,
        }
        assert!(pages.len() < 10_000, "{q:?} does not end");
    }
}

#[tokio::test]
async fn time_range_pages_keep_id_order_when_a_long_call_is_written_late() {
    // Call 9 started at second 2.5 and ran long: it is written (and numbered) after calls that
    // started later. A time range's page is still newest id first, as a filter over every row
    // would give, and its cursors go on from there.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let starts = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 2.5, 10.0, 9.5, 12.0];
    for (i, s) in (1..).zip(starts) {
        let tool = if i % 3 == 0 { "exec" } else { "read_file" };
        store
            .append(started(i, tool, ToolStatus::Success, s))
            .await
            .unwrap();
    }
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 2,
            ..AuditQuery::default()
        };
        f(&mut q);
        q
    };
    type Pages = Vec<(Vec<i64>, Option<i64>)>;
    let cases: Vec<(AuditQuery, Pages)> = vec![
        (
            q(&|q| q.until = at_s(6.0)),
            vec![
                (vec![9, 5], Some(5)),
                (vec![4, 3], Some(3)),
                (vec![2, 1], None),
            ],
        ),
        (
            q(&|q| {
                q.since = at_s(3.0);
                q.until = at_s(9.0);
            }),
            vec![
                (vec![8, 7], Some(7)),
                (vec![6, 5], Some(5)),
                (vec![4, 3], None),
            ],
        ),
        (
            q(&|q| {
                q.since = at_s(2.5);
                q.until = at_s(3.0);
            }),
            vec![(vec![9], None)],
        ),
        (
            q(&|q| q.since = at_s(9.0)),
            vec![(vec![12, 11], Some(11)), (vec![10], None)],
        ),
        (
            q(&|q| {
                q.until = at_s(6.0);
                q.tool = Some("exec".into());
            }),
            vec![(vec![9, 3], None)],
        ),
        (
            q(&|q| {
                q.until = at_s(6.0);
                q.agent_id = Some("agent-a".into());
            }),
            vec![(vec![5, 4], Some(4)), (vec![2, 1], None)],
        ),
        (
            q(&|q| {
                q.until = at_s(6.0);
                q.cursor = Some(9);
            }),
            vec![
                (vec![5, 4], Some(4)),
                (vec![3, 2], Some(2)),
                (vec![1], None),
            ],
        ),
        (
            q(&|q| {
                q.since = at_s(13.0);
            }),
            vec![(vec![], None)],
        ),
    ];
    for (query, expect) in cases {
        assert_eq!(pages_of(&store, query.clone()).await, expect, "{query:?}");
        let rows = expect.iter().map(|(ids, _)| ids.len() as u64).sum::<u64>();
        assert_eq!(store.count(&query).await.unwrap(), rows, "{query:?}");
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_range_pages_across_many_blocks_match_a_filter_over_every_row() {
    // A time range's page walks the log in blocks of `BLOCK_IDS` ids (query.rs); this log spans
    // four blocks, its appends race so ids come in commit order, and every 97th call started
    // 3,000 s before its neighbours (a long call written late). Every page, cursor and count
    // must be what a filter over every row, newest id first, gives.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let n = 3 * query::BLOCK_IDS + 300;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let store = store.clone();
        tasks.spawn(async move {
            let tool = if i % 5 == 0 { "exec" } else { "read_file" };
            let status = if i % 4 == 0 {
                ToolStatus::Failed
            } else {
                ToolStatus::Success
            };
            let s = if i % 97 == 0 { i - 3000 } else { i } as f64;
            let r = started(i, tool, status, s);
            let row = (0, r.started_at, r.tool.clone(), r.agent_id.clone(), status);
            let id = store.append(r).await.unwrap();
            (id, row.1, row.2, row.3, row.4)
        });
    }
    let mut log = Vec::new();
    while let Some(row) = tasks.join_next().await {
        log.push(row.unwrap());
    }
    let expect = |q: &AuditQuery| -> Vec<(Vec<i64>, Option<i64>)> {
        let mut hits: Vec<i64> = log
            .iter()
            .filter(|(id, at, tool, agent, status)| {
                q.since.is_none_or(|s| *at >= s)
                    && q.until.is_none_or(|u| *at < u)
                    && q.tool.as_ref().is_none_or(|t| t == tool)
                    && q.agent_id.as_ref().is_none_or(|a| a == agent)
                    && q.status.is_none_or(|s| s == *status)
                    && q.cursor.is_none_or(|c| *id < c)
            })
            .map(|row| row.0)
            .collect();
        hits.sort_unstable_by(|a, b| b.cmp(a));
        let chunks: Vec<Vec<i64>> = hits.chunks(q.limit as usize).map(<[i64]>::to_vec).collect();
        let last = chunks.len().saturating_sub(1);
        let mut pages: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(i, ids)| {
                let next = (i < last).then(|| ids[ids.len() - 1]);
                (ids, next)
            })
            .collect();
        if pages.is_empty() {
            pages.push((Vec::new(), None));
        }
        pages
    };
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery::default();
        f(&mut q);
        q
    };
    let queries = [
        q(&|q| q.until = at_s(6000.0)),
        q(&|q| q.until = at_s(200.0)),
        q(&|q| q.since = at_s(12_000.0)),
        q(&|q| q.since = at_s(-5000.0)),
        q(&|q| {
            q.since = at_s(4000.0);
            q.until = at_s(4100.0);
        }),
        q(&|q| {
            q.since = at_s(100.0);
            q.until = at_s(9000.0);
        }),
        q(&|q| {
            q.until = at_s(6000.0);
            q.tool = Some("exec".into());
        }),
        q(&|q| {
            q.since = at_s(3000.0);
            q.agent_id = Some("agent-b".into());
        }),
        q(&|q| {
            q.until = at_s(6000.0);
            q.status = Some(ToolStatus::Failed);
        }),
        q(&|q| {
            q.until = at_s(6000.0);
            q.cursor = Some(9500);
        }),
        q(&|q| {
            q.since = at_s(20_000.0);
        }),
    ];
    for query in queries {
        let want = expect(&query);
        assert_eq!(pages_of(&store, query.clone()).await, want, "{query:?}");
        let rows = want.iter().map(|(ids, _)| ids.len() as u64).sum::<u64>();
        assert_eq!(store.count(&query).await.unwrap(), rows, "{query:?}");
        // A text search in every row under the same filters walks its windows to the same rows.
        let text = AuditQuery {
            text: Some("file-".into()),
            ..query.clone()
        };
        let want_ids: Vec<i64> = want.into_iter().flat_map(|(ids, _)| ids).collect();
        assert_eq!(walk(&store, text, 1000).await.0, want_ids, "{query:?}");
    }
    store.close().await;
}
