//! The verifiable audit log against a real SQLite file tampered with directly: each kind of edit
//! (update, delete, insert, reorder, truncate, unlink, re-sign with another key) is detected and
//! located, an untouched log verifies, and a log from before the chain is sealed on upgrade.

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::ToolStatus;

use super::*;
use crate::tests::{open, record};

/// A store with `n` records (every third with a text output) and two admin entries, closed.
async fn filled(dir: &tempfile::TempDir, n: i64, checkpoint_at: Option<i64>) -> Option<Checkpoint> {
    let store = open(dir).await;
    let mut made = None;
    for i in 1..=n {
        let mut r = record(i, "echo", ToolStatus::Success);
        if i % 3 == 0 {
            r.output = Some(json!(format!("line {i}\nwith \"quotes\"")));
        }
        store.append(r).await.unwrap();
        if i == 2 {
            for kind in ["mode_changed", "policy_reloaded"] {
                store
                    .append_admin_event(AdminEvent {
                        at: i,
                        actor: "alice".into(),
                        kind: kind.into(),
                        summary: format!("{kind} by alice"),
                        details: json!({"i": i}),
                    })
                    .await
                    .unwrap();
            }
        }
        if Some(i) == checkpoint_at {
            made = store.checkpoint().await.unwrap();
        }
    }
    store.close().await;
    made
}

/// A connection that can do what an attacker with the file can: every trigger dropped.
fn attacker(dir: &tempfile::TempDir) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.path().join("tw.db")).unwrap();
    let triggers: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for t in triggers {
        conn.execute_batch(&format!("DROP TRIGGER {t}")).unwrap();
    }
    conn
}

/// Links audit row `id` after `prev` as the store would (its `prev` and `hash` rewritten);
/// returns its new hash.
fn relink(conn: &rusqlite::Connection, id: i64, prev: &[u8; 32]) -> [u8; 32] {
    let sql = format!(
        "SELECT {} FROM audit_log WHERE id = ?1",
        chain::AUDIT_COLUMNS
    );
    let fields: Vec<rusqlite::types::Value> = conn
        .query_row(&sql, [id], |r| {
            (0..chain::AUDIT_COLUMN_COUNT).map(|i| r.get(i)).collect()
        })
        .unwrap();
    let hash = chain::link(
        chain::Log::Audit,
        prev,
        fields
            .iter()
            .map(|v| chain::Field::from(rusqlite::types::ValueRef::from(v))),
    );
    conn.execute(
        "UPDATE audit_log SET prev = ?1, hash = ?2 WHERE id = ?3",
        rusqlite::params![prev.as_slice(), hash.as_slice(), id],
    )
    .unwrap();
    hash
}

async fn verify(dir: &tempfile::TempDir, saved: Vec<Checkpoint>) -> VerifyReport {
    let store = open(dir).await;
    let report = store.verify(saved).await.unwrap();
    store.close().await;
    report
}

/// Every problem's id and kind, in order.
fn found(report: &VerifyReport) -> Vec<(Option<i64>, ProblemKind)> {
    report.problems.iter().map(|p| (p.id, p.kind)).collect()
}

/// The first problem's log, id and kind, and its message.
fn first(report: &VerifyReport) -> (&str, Option<i64>, ProblemKind, &str) {
    let p = report
        .problems
        .first()
        .unwrap_or_else(|| panic!("no problem found: {report:?}"));
    (p.log.as_str(), p.id, p.kind, p.message.as_str())
}

#[tokio::test]
async fn an_untouched_log_verifies_and_says_what_no_checkpoint_covers_yet() {
    let dir = tempfile::tempdir().unwrap();
    let made = filled(&dir, 25, Some(20)).await.unwrap();
    assert_eq!((made.audit_head_id, made.audit_count), (20, 20));
    assert_eq!((made.admin_head_id, made.admin_count), (2, 2));
    let report = verify(&dir, vec![]).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!((report.audit_records, report.admin_entries), (25, 2));
    assert_eq!(report.audit_head.as_ref().unwrap().id, 25);
    assert_eq!(report.latest_checkpoint.as_ref().unwrap().audit_head_id, 20);
    assert_eq!(report.audit_uncovered, 5);
    // The checkpoint is in the file beside the database too, and the key is owner-only.
    let file = checkpoint::read_file(&checkpoint::file_path(&dir.path().join("tw.db"))).unwrap();
    assert_eq!(file, vec![made]);
    use std::os::unix::fs::PermissionsExt as _;
    let key = std::fs::metadata(checkpoint::key_path(&dir.path().join("tw.db"))).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
}

#[tokio::test]
async fn an_edited_record_is_named() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 12, None).await;
    attacker(&dir)
        .execute("UPDATE audit_log SET status = 'failed' WHERE id = 7", [])
        .unwrap();
    let report = verify(&dir, vec![]).await;
    let (log, id, kind, message) = first(&report);
    assert_eq!(
        (log, id, kind),
        ("audit", Some(7), ProblemKind::Edited),
        "{message}"
    );
    assert_eq!(report.problem_count, 1, "{report:#?}");
}

#[tokio::test]
async fn an_edited_output_is_named_though_the_output_is_not_in_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 12, None).await;
    // A text output (id 6) and a JSON one (id 4).
    for (id, output) in [(6, "\"something else\""), (4, "{\"n\":5}")] {
        attacker(&dir)
            .execute(
                "UPDATE audit_log SET output = ?1 WHERE id = ?2",
                rusqlite::params![output, id],
            )
            .unwrap();
    }
    let report = verify(&dir, vec![]).await;
    assert_eq!(
        found(&report),
        vec![
            (Some(4), ProblemKind::Edited),
            (Some(6), ProblemKind::Edited)
        ]
    );
    assert!(report.problems[0].message.contains("output"), "{report:#?}");
}

#[tokio::test]
async fn a_deleted_record_is_named() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 12, None).await;
    attacker(&dir)
        .execute("DELETE FROM audit_log WHERE id IN (7, 8)", [])
        .unwrap();
    let report = verify(&dir, vec![]).await;
    let (log, id, kind, message) = first(&report);
    assert_eq!((log, id, kind), ("audit", Some(7), ProblemKind::Deleted));
    assert!(message.contains("7 to 8 were deleted"), "{message}");
    // The checkpoint the store made on close counted them too.
    assert_eq!(
        found(&report),
        vec![
            (Some(7), ProblemKind::Deleted),
            (Some(12), ProblemKind::Deleted)
        ]
    );
}

#[tokio::test]
async fn an_inserted_record_with_a_valid_link_is_named() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 12, None).await;
    let conn = attacker(&dir);
    // Room after 7, then a forged record linked to 7 exactly as the store would link it.
    conn.execute_batch(
        "UPDATE audit_log SET id = id + 1000 WHERE id > 7; UPDATE audit_log SET id = id - 999 WHERE id > 1000;",
    )
    .unwrap();
    let prev: Vec<u8> = conn
        .query_row("SELECT hash FROM audit_log WHERE id = 7", [], |r| r.get(0))
        .unwrap();
    let prev: [u8; 32] = prev.try_into().unwrap();
    conn.execute(
        &format!(
            "INSERT INTO audit_log (id, prev, hash, output, {}) \
             SELECT 8, ?1, ?2, output, {} FROM audit_log WHERE id = 2",
            chain::AUDIT_COLUMNS,
            chain::AUDIT_COLUMNS.replace("execution_id", "'forged'"),
        ),
        rusqlite::params![prev.as_slice(), [0u8; 32].as_slice()],
    )
    .unwrap();
    relink(&conn, 8, &prev);
    drop(conn);
    let report = verify(&dir, vec![]).await;
    let (log, id, kind, message) = first(&report);
    assert_eq!(
        (log, id, kind),
        ("audit", Some(8), ProblemKind::Inserted),
        "{report:#?}"
    );
    assert!(message.contains("9 links past it, to 7"), "{message}");
    // The checkpoint the store made on close no longer matches the row now numbered 12.
    assert_eq!(
        found(&report),
        vec![
            (Some(8), ProblemKind::Inserted),
            (Some(12), ProblemKind::Edited)
        ]
    );
}

#[tokio::test]
async fn swapped_records_are_named() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 12, None).await;
    attacker(&dir)
        .execute_batch(
            "UPDATE audit_log SET id = -1 WHERE id = 5; UPDATE audit_log SET id = 5 WHERE id = 6; \
             UPDATE audit_log SET id = 6 WHERE id = -1;",
        )
        .unwrap();
    let report = verify(&dir, vec![]).await;
    let (log, id, kind, message) = first(&report);
    assert_eq!(
        (log, id, kind),
        ("audit", Some(5), ProblemKind::Reordered),
        "{report:#?}"
    );
    assert!(
        message.contains("links to 6, which comes after it"),
        "{message}"
    );
}

#[tokio::test]
async fn a_cut_at_the_end_is_seen_through_the_file_when_the_table_lost_its_checkpoints_too() {
    let dir = tempfile::tempdir().unwrap();
    let made = filled(&dir, 20, Some(20)).await.unwrap();
    // Without checkpoints a cut at the end leaves a valid, shorter chain...
    let conn = attacker(&dir);
    conn.execute_batch("DELETE FROM audit_log WHERE id > 16; DELETE FROM audit_checkpoints;")
        .unwrap();
    drop(conn);
    let report = verify(&dir, vec![]).await;
    let (log, id, kind, message) = first(&report);
    assert_eq!(
        (log, id, kind),
        ("audit", Some(17), ProblemKind::Truncated),
        "{report:#?}"
    );
    assert!(message.contains("17 to 20 were removed"), "{message}");
    // ...and with the file gone too, a checkpoint saved elsewhere still shows it.
    std::fs::remove_file(checkpoint::file_path(&dir.path().join("tw.db"))).unwrap();
    assert!(verify(&dir, vec![]).await.ok());
    let report = verify(&dir, vec![made]).await;
    assert_eq!(first(&report).2, ProblemKind::Truncated, "{report:#?}");
}

#[tokio::test]
async fn a_rewritten_history_resigned_with_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let saved = filled(&dir, 10, Some(10)).await.unwrap();
    let made_key = saved.public_key.clone();
    let db = dir.path().join("tw.db");
    // The attacker rewrites record 3 with a valid chain from there on, and signs new
    // checkpoints with a key of their own, in the table and the file.
    let conn = attacker(&dir);
    conn.execute("UPDATE audit_log SET tool = 'rm' WHERE id = 3", [])
        .unwrap();
    let mut prev: [u8; 32] = conn
        .query_row("SELECT hash FROM audit_log WHERE id = 2", [], |r| {
            Ok(r.get::<_, Vec<u8>>(0)?.try_into().unwrap())
        })
        .unwrap();
    for id in 3..=10 {
        let hash = relink(&conn, id, &prev);
        prev = hash;
    }
    conn.execute_batch("DELETE FROM audit_checkpoints").unwrap();
    drop(conn);
    std::fs::remove_file(checkpoint::file_path(&db)).unwrap();
    let other = dir.path().join("other.db");
    let theirs = checkpoint::SigningKey::read_or_create(&checkpoint::key_path(&other)).unwrap();
    let store = open(&dir).await;
    let (heads, _) = checkpoint::heads(&store.inner().pool, theirs.public_key())
        .await
        .unwrap();
    let forged = theirs.sign(checkpoint::now_us(), &heads);
    checkpoint::insert(&store.inner().writer, &forged)
        .await
        .unwrap();
    store.close().await;
    // The chain itself is consistent now, but the forged checkpoint is not this store's...
    let report = verify(&dir, vec![]).await;
    let kinds: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
    assert!(kinds.contains(&ProblemKind::ForeignKey), "{report:#?}");
    // ...and the checkpoint saved before the rewrite says the history changed.
    let report = verify(&dir, vec![saved.clone()]).await;
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::Edited && p.id == Some(10)),
        "{report:#?}"
    );
    // With the store's own key replaced by the attacker's, the saved checkpoint's key differs.
    std::fs::copy(checkpoint::key_path(&other), checkpoint::key_path(&db)).unwrap();
    let report = verify(&dir, vec![saved]).await;
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::ForeignKey && p.message.contains(&made_key[..16])),
        "{report:#?}"
    );
}

#[tokio::test]
async fn an_edited_or_unlinked_admin_entry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    filled(&dir, 4, None).await;
    attacker(&dir)
        .execute("UPDATE admin_log SET actor = 'mallory' WHERE id = 1", [])
        .unwrap();
    let report = verify(&dir, vec![]).await;
    assert_eq!(
        (first(&report).0, first(&report).1, first(&report).2),
        ("admin", Some(1), ProblemKind::Edited)
    );
    attacker(&dir)
        .execute("UPDATE admin_log SET hash = NULL WHERE id = 1", [])
        .unwrap();
    // Not sealed on open (it is not a row from before the chain): named instead.
    let report = verify(&dir, vec![]).await;
    assert_eq!(first(&report).2, ProblemKind::Unlinked, "{report:#?}");
}

#[tokio::test]
async fn a_log_from_before_the_chain_is_sealed_on_upgrade_and_then_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    {
        let pool = sqlx::SqlitePool::connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true),
        )
        .await
        .unwrap();
        let before = sqlx::migrate::Migrator {
            migrations: std::borrow::Cow::Owned(
                sqlite::MIGRATOR
                    .iter()
                    .filter(|m| m.version < 13)
                    .cloned()
                    .collect(),
            ),
            ..sqlx::migrate::Migrator::DEFAULT
        };
        before.run(&pool).await.unwrap();
        for i in 1..=3 {
            sqlx::query(
                "INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, arguments, status, \
                 output, output_sha256, output_bytes, truncated, started_at, completed_at, \
                 duration_us, metadata) VALUES (?, 't', 'echo', 'a', '{}', 'success', '\"hi\"', ?, \
                 2, 0, 5, 6, 1, '{}')",
            )
            .bind(format!("old-{i}"))
            .bind(sha256_hex(b"hi"))
            .execute(&pool)
            .await
            .unwrap();
        }
        sqlx::query(
            "INSERT INTO admin_log (at, actor, kind, summary, details) \
             VALUES (1, 'a', 'mode_changed', 's', '{}')",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let store = open(&dir).await;
    store
        .append(record(9, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let report = store.verify(vec![]).await.unwrap();
    assert!(report.ok(), "{report:#?}");
    assert_eq!((report.audit_records, report.admin_entries), (4, 1));
    store.close().await;
    // Sealed once: the rows keep their links, and no other column may change.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let err = conn
        .execute("UPDATE audit_log SET hash = zeroblob(32) WHERE id = 1", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = conn
        .execute("UPDATE audit_log SET tool = 'x' WHERE id = 1", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_appending_at_once_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    // Two stores on one file: each has its own connections and its own idea of the head, as two
    // processes would. Taking turns, each one's head is out of date at every append...
    let (a, b) = (open(&dir).await, open(&dir).await);
    for i in 0..40 {
        let store = if i % 2 == 0 { &a } else { &b };
        let id = store
            .append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
        assert_eq!(id, i + 1);
    }
    // ...and at once, from several tasks each.
    let mut tasks = tokio::task::JoinSet::new();
    for (n, store) in [(1, a.clone()), (2, b.clone())] {
        for k in 0..4 {
            let store = store.clone();
            tasks.spawn(async move {
                for i in 0..25 {
                    let id = 10_000 * n + 1_000 * k + i;
                    store
                        .append(record(id, "echo", ToolStatus::Success))
                        .await
                        .unwrap();
                }
            });
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    a.close().await;
    b.close().await;
    let report = verify(&dir, vec![]).await;
    assert!(report.ok(), "{report:#?}");
    assert_eq!(report.audit_records, 240);
    assert_eq!(report.audit_head.unwrap().id, 240);
}
