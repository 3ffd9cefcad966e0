//! Retention against a real SQLite file: an archive holds exactly the records it removes, both
//! the store and the archive verify across the cut, an edited archive is named, and records
//! removed any other way are refused by the schema or named by `audit verify`.

use pretty_assertions::assert_eq;
use tw_core::ToolStatus;

use super::*;
use crate::tests::{open, record};

/// When `record(i)` started.
fn started(i: i64) -> i64 {
    1_700_000_000_000_000 + i * 1_000_000
}

async fn store_with(dir: &tempfile::TempDir, n: i64) -> Store {
    let store = open(dir).await;
    for i in 1..=n {
        store
            .append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
        if i == 20 {
            store.checkpoint().await.unwrap().unwrap();
        }
    }
    store
}

#[tokio::test]
async fn an_archive_holds_what_it_removes_and_both_sides_verify() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(&dir, 30).await;
    let first = dir.path().join("first.jsonl");
    // Records 1 to 10 started before record 11 did.
    let s = store.archive(started(11), &first).await.unwrap().unwrap();
    assert_eq!(
        (
            s.header.first_id,
            s.header.last_id,
            s.header.records,
            s.removed
        ),
        (1, 10, 10, 10)
    );
    let report = verify_archive(&first).unwrap();
    assert!(report.ok, "{report:#?}");
    let v = store.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{v:#?}");
    assert_eq!((v.audit_records, v.archives), (20, 1));
    assert_eq!(store.get("exec-00005").await.unwrap(), None);
    assert!(store.get("exec-00011").await.unwrap().is_some());
    // A second cut goes on from the first; the checkpoint at 20 is now inside an archive.
    let second = dir.path().join("second.jsonl");
    let s = store.archive(started(21), &second).await.unwrap().unwrap();
    assert_eq!((s.header.first_id, s.header.last_id), (11, 20));
    assert_eq!(s.header.prev, report.header.last_hash);
    let v = store.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{v:#?}");
    assert_eq!((v.audit_records, v.archives), (10, 2));
    // Nothing that old is left; new records go on after the cut.
    assert_eq!(
        store
            .archive(started(21), &dir.path().join("none.jsonl"))
            .await
            .unwrap(),
        None
    );
    let id = store
        .append(record(31, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(id, 31);
    store.close().await;
    let store = open(&dir).await;
    assert!(store.verify(vec![]).await.unwrap().ok());
    // Records the archives do not hold stay as the schema keeps them.
    let conn = rusqlite::Connection::open(dir.path().join("tw.db")).unwrap();
    let err = conn
        .execute("DELETE FROM audit_log WHERE id = 25", [])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("only records in a written, verified archive"),
        "{err}"
    );
    store.close().await;
}

#[tokio::test]
async fn an_edited_archive_is_named_and_an_archive_never_overwrites_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(&dir, 12).await;
    let file = dir.path().join("a.jsonl");
    std::fs::write(&file, "keep me").unwrap();
    // An existing file is refused and nothing leaves the log.
    let err = store.archive(started(6), &file).await.unwrap_err();
    assert!(err.to_string().contains("exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert!(store.get("exec-00001").await.unwrap().is_some());
    std::fs::remove_file(&file).unwrap();
    store.archive(started(6), &file).await.unwrap().unwrap();
    // Record 3's tool changed in the file.
    let text = std::fs::read_to_string(&file).unwrap();
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.contains("\"exec-00003\"") {
                l.replace("\"tool\":\"echo\"", "\"tool\":\"rm\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let report = verify_archive(&file).unwrap();
    assert!(!report.ok);
    assert_eq!(
        report.problems,
        vec!["record 3 was edited: its content no longer matches its hash".to_owned()]
    );
    // The store finds its archive edited too (the file is where it was written).
    let v = store.verify(vec![]).await.unwrap();
    assert_eq!(
        (v.problems[0].log.as_str(), v.problems[0].kind),
        ("archive", ProblemKind::Edited),
        "{v:#?}"
    );
    store.close().await;
}

#[tokio::test]
async fn records_removed_under_a_forged_archive_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(&dir, 12).await;
    store.close().await;
    // Someone with the file records an "archive" of records 1 to 4 without the key, and removes
    // them.
    let conn = rusqlite::Connection::open(dir.path().join("tw.db")).unwrap();
    conn.execute_batch(
        "INSERT INTO audit_archives (created_at, before, first_id, last_id, prev, last_hash, \
         records, public_key, signature, file) SELECT 1, 1, 1, 4, zeroblob(32), hash, 4, \
         zeroblob(32), zeroblob(64), '/nowhere' FROM audit_log WHERE id = 4;",
    )
    .unwrap();
    // The schema cannot tell a forged archive record from a real one, but the store can: opening
    // it removes nothing on the strength of this one.
    let store = open(&dir).await;
    assert!(store.get("exec-00001").await.unwrap().is_some());
    store.close().await;
    conn.execute_batch("DELETE FROM audit_log WHERE id <= 4;")
        .unwrap();
    drop(conn);
    let store = open(&dir).await;
    let v = store.verify(vec![]).await.unwrap();
    store.close().await;
    let found: Vec<_> = v
        .problems
        .iter()
        .map(|p| (p.log.as_str(), p.id, p.kind))
        .collect();
    assert_eq!(
        found,
        vec![
            ("audit", Some(1), ProblemKind::Deleted),
            // The checkpoint made on close counted 12 records up to 12.
            ("audit", Some(12), ProblemKind::Deleted),
            ("archive", Some(1), ProblemKind::BadCheckpoint),
        ],
        "{v:#?}"
    );
}

#[tokio::test]
async fn after_everything_is_archived_new_records_go_on_from_the_archive_and_stay() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(&dir, 5).await;
    let s = store
        .archive(i64::MAX, &dir.path().join("all.jsonl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.header.last_id, s.removed), (5, 5));
    store.close().await;
    // Another process, whose idea of the head comes from the file alone.
    let store = open(&dir).await;
    let id = store
        .append(record(6, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(id, 6);
    store.checkpoint().await.unwrap().unwrap();
    store.close().await;
    // Opening again finishes no cut that would take it.
    let store = open(&dir).await;
    assert!(store.get("exec-00006").await.unwrap().is_some());
    let v = store.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{v:#?}");
    assert_eq!(v.latest_checkpoint.unwrap().audit_count, 6);
    store.close().await;
}

#[tokio::test]
async fn a_key_that_cannot_be_read_keeps_the_store_open_and_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(&dir, 6).await;
    store
        .archive(started(4), &dir.path().join("a.jsonl"))
        .await
        .unwrap()
        .unwrap();
    store.close().await;
    let key = crate::checkpoint::key_path(&dir.path().join("tw.db"));
    std::fs::write(&key, b"not a key").unwrap();
    // Opens (calls go on being recorded); verify names the key.
    let store = open(&dir).await;
    store
        .append(record(7, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let v = store.verify(vec![]).await.unwrap();
    assert!(
        v.problems.iter().any(|p| p.kind == ProblemKind::MissingKey),
        "{v:#?}"
    );
    store.close().await;
}
