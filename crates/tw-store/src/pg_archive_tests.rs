//! Retention on the team store, against a real PostgreSQL: an archive holds a prefix of every
//! writer's chain and exactly the records it removes; the store and the archive verify across the
//! cut; a chain whose records were all archived goes on where its archive ends; the schema
//! refuses any other removal; and an edited archive, a forged or re-signed archive record, and a
//! removal cut short are each named or finished.

use pretty_assertions::assert_eq;
use tw_core::ToolStatus;

use super::*;
use crate::backends_tests::{Backend, Place};
use crate::pg_verify_tests::{tamper, two_replicas};
use crate::tests::record;

/// When `record(i)` started.
fn started(i: i64) -> i64 {
    1_700_000_000_000_000 + i * 1_000_000
}

fn kinds(r: &VerifyReport) -> Vec<(String, ProblemKind)> {
    r.problems.iter().map(|p| (p.log.clone(), p.kind)).collect()
}

/// Runs `sql` straight on the database (triggers on) and returns its error.
async fn refused(place: &Place, sql: &str) -> String {
    let pool = sqlx::PgPool::connect(place.url.as_deref().unwrap())
        .await
        .unwrap();
    let err = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&pool)
        .await
        .unwrap_err()
        .to_string();
    pool.close().await;
    err
}

async fn count(place: &Place, sql: &'static str) -> i64 {
    place.scalar(sql, "").await
}

#[tokio::test]
async fn an_archive_holds_a_prefix_of_every_chain_and_both_sides_verify_across_the_cut() {
    let (place, a, b) = two_replicas().await;
    // The checkpoint covers all 12; archiving goes past it.
    a.checkpoint().await.unwrap().unwrap();
    let first = place.dir.path().join("first.jsonl");
    // Records 0 to 6 started before record 7: 4 of a's chain (0, 2, 4, 6), 3 of b's.
    let s = a.archive(started(7), &first).await.unwrap().unwrap();
    assert_eq!(
        (s.header.toolwarden_archive, s.header.records, s.removed),
        (2, 7, 7)
    );
    let parts: Vec<(i64, i64, u64)> = s
        .header
        .chains
        .iter()
        .map(|c| (c.first_seq, c.last_seq, c.records))
        .collect();
    let mut expected = vec![(1, 4, 4), (1, 3, 3)];
    let mut got = parts.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{parts:?}");
    let report = verify_archive(&first).unwrap();
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.header, s.header);
    // Owner-only, like the database's own files.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&first).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        count(&place, "SELECT COUNT(*) FROM audit_log WHERE $1 = $1").await,
        5
    );
    assert_eq!(b.get("exec-00003").await.unwrap(), None);
    assert!(b.get("exec-00007").await.unwrap().is_some());
    let v = b.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    assert_eq!((v.audit_records, v.archives), (5, 1));

    // The writers go on; a second cut goes on from the first, on each chain.
    for i in 12..16 {
        let s = if i % 2 == 0 { &a } else { &b };
        s.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    let second = place.dir.path().join("second.jsonl");
    let s2 = b.archive(started(13), &second).await.unwrap().unwrap();
    assert_eq!((s2.header.records, s2.removed), (6, 6));
    for c in &s2.header.chains {
        let before = s.header.chains.iter().find(|x| x.chain == c.chain).unwrap();
        assert_eq!(
            (c.first_seq, &c.prev),
            (before.last_seq + 1, &before.last_hash)
        );
    }
    assert!(verify_archive(&second).unwrap().ok);
    // Nothing that old is left.
    let none = place.dir.path().join("none.jsonl");
    assert_eq!(a.archive(started(13), &none).await.unwrap(), None);
    assert!(!none.exists());
    let v = a.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    assert_eq!((v.audit_records, v.archives), (3, 2));
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_chain_wholly_archived_goes_on_where_its_archive_ends() {
    let place = Place::new(Backend::Postgres).await;
    let a = place.open().await;
    for i in 0..5 {
        a.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    let c = a.checkpoint().await.unwrap().unwrap();
    let out = place.dir.path().join("all.jsonl");
    let s = a.archive(started(100), &out).await.unwrap().unwrap();
    assert_eq!((s.header.records, s.removed), (5, 5));
    a.close().await;
    // The next writer adopts the chain and goes on at its record 6, linked to the archive.
    let a = place.open().await;
    a.append(record(5, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let seq = count(
        &place,
        "SELECT seq FROM audit_log WHERE execution_id = 'exec-00005' OR $1 = 'x'",
    )
    .await;
    assert_eq!(seq, 6);
    // A checkpoint made now still names the chain's head; the old one is inside the archive.
    let next = a.checkpoint().await.unwrap().unwrap();
    assert_eq!(next.chains.len(), 1);
    assert_eq!(next.chains[0].seq, 6);
    let v = a.verify(vec![c]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    assert_eq!((v.audit_records, v.archives, v.audit_uncovered), (1, 1, 0));
    a.close().await;
}

#[tokio::test]
async fn the_schema_removes_only_what_an_archive_holds_and_keeps_archives_as_written() {
    let (place, a, b) = two_replicas().await;
    let s = a
        .archive(started(4), &place.dir.path().join("cut.jsonl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.removed, 4);
    let err = refused(&place, "DELETE FROM audit_log WHERE seq = 5").await;
    assert!(
        err.contains("only records in a written, verified archive"),
        "{err}"
    );
    let err = refused(&place, "UPDATE audit_log SET tool = 'x' WHERE seq = 5").await;
    assert!(err.contains("append-only"), "{err}");
    for sql in [
        "DELETE FROM audit_archive_chains",
        "UPDATE audit_archives SET records = 1",
        "DELETE FROM audit_archives",
    ] {
        let err = refused(&place, sql).await;
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    let v = b.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn an_edited_archive_and_a_forged_archive_record_are_named_and_remove_nothing() {
    let (place, a, b) = two_replicas().await;
    let out = place.dir.path().join("cut.jsonl");
    a.archive(started(6), &out).await.unwrap().unwrap();
    // The file edited: one record's tool changed. On its own and from the store, it is named.
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::write(
        &out,
        text.replacen("\"tool\":\"echo\"", "\"tool\":\"rm\"", 1),
    )
    .unwrap();
    let report = verify_archive(&out).unwrap();
    assert!(!report.ok);
    assert!(
        report.problems.iter().any(|p| p.contains("was edited")),
        "{:?}",
        report.problems
    );
    let v = b.verify(vec![]).await.unwrap();
    assert_eq!(kinds(&v), vec![("archive".to_owned(), ProblemKind::Edited)]);
    std::fs::write(&out, &text).unwrap();
    assert!(b.verify(vec![]).await.unwrap().ok());

    // An archive record put in by hand past the chain's records, with the signature of the
    // real one (which then does not verify): it removes nothing, and verify names it.
    let chain: String = {
        let pool = sqlx::PgPool::connect(place.url.as_deref().unwrap())
            .await
            .unwrap();
        let c = sqlx::query_scalar("SELECT chain FROM audit_archive_chains LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        c
    };
    tamper(
        &place,
        &format!(
            "INSERT INTO audit_archives (format, created_at, before, first_id, last_id, records, \
             public_key, signature, host, file) SELECT 2, created_at + 1, before, first_id, \
             last_id + 100, 100, public_key, signature, host, 'forged' FROM audit_archives; \
             INSERT INTO audit_archive_chains (archive, chain, first_seq, last_seq, records, prev, \
             last_hash) SELECT (SELECT MAX(id) FROM audit_archives), chain, last_seq + 1, \
             last_seq + 100, 100, last_hash, last_hash FROM audit_archive_chains WHERE chain = '{chain}'"
        ),
    )
    .await;
    let before = count(&place, "SELECT COUNT(*) FROM audit_log WHERE $1 = $1").await;
    b.close().await;
    // Opening finishes cuts: the forged one removes nothing.
    let b = place.open().await;
    assert_eq!(
        count(&place, "SELECT COUNT(*) FROM audit_log WHERE $1 = $1").await,
        before
    );
    let v = b.verify(vec![]).await.unwrap();
    assert!(
        kinds(&v).contains(&("archive".to_owned(), ProblemKind::BadCheckpoint)),
        "{:#?}",
        v.problems
    );
    assert_eq!(v.archives, 1);
    // And the schema would let such a row remove records: the signature is what stops it.
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn an_archive_signed_by_another_key_is_foreign_and_a_removal_cut_short_is_finished() {
    let (place, a, b) = two_replicas().await;
    // The log as it was, to put records back as if their removal had stopped midway.
    tamper(&place, "CREATE TABLE saved AS SELECT * FROM audit_log").await;
    let s = a
        .archive(started(8), &place.dir.path().join("cut.jsonl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.removed, 8);
    let columns = format!(
        "id, chain, seq, prev, hash, {}, output",
        crate::chain::AUDIT_COLUMNS
    );
    tamper(
        &place,
        &format!(
            "INSERT INTO audit_log ({columns}) OVERRIDING SYSTEM VALUE SELECT {columns} FROM saved \
             WHERE started_at < {} AND seq > 2",
            started(8)
        ),
    )
    .await;
    // Meanwhile the log verifies: its first records are inside the archive.
    assert_eq!(
        count(&place, "SELECT COUNT(*) FROM audit_log WHERE $1 = $1").await,
        8
    );
    let v = b.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    // The next store to open removes them.
    let c = place.open().await;
    assert_eq!(
        count(&place, "SELECT COUNT(*) FROM audit_log WHERE $1 = $1").await,
        4
    );
    assert!(c.verify(vec![]).await.unwrap().ok());

    // The archive re-signed with a key no writer of this store recorded: foreign.
    let other =
        crate::checkpoint::SigningKey::read_or_create(&place.dir.path().join("other.key")).unwrap();
    let mut forged = s.header.clone();
    forged.sign(&other).unwrap();
    assert!(forged.check().is_ok());
    tamper(
        &place,
        &format!(
            "UPDATE audit_archives SET public_key = decode('{}', 'hex'), \
             signature = decode('{}', 'hex')",
            forged.public_key, forged.signature
        ),
    )
    .await;
    let v = c.verify(vec![]).await.unwrap();
    assert!(
        kinds(&v).contains(&("archive".to_owned(), ProblemKind::ForeignKey)),
        "{:#?}",
        v.problems
    );
    // Without a trusted archive, the chains' first records no longer follow anything.
    assert!(
        kinds(&v).contains(&("audit".to_owned(), ProblemKind::Deleted)),
        "{:#?}",
        v.problems
    );
    for s in [a, b, c] {
        s.close().await;
    }
}

#[tokio::test]
async fn keep_days_on_a_team_store_archives_what_is_older_into_the_archive_directory() {
    let place = Place::new(Backend::Postgres).await;
    let mut options = place.options();
    options.keep_days = Some(30);
    let store = Store::open(options.clone()).await.unwrap();
    for i in 0..3 {
        store
            .append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    // What the hourly pass does: `record`'s calls started in 2023, long past 30 days.
    crate::archive::keep_days_pass(30, &options.archive_dir, async |before, out| {
        store.archive(before, out).await
    })
    .await;
    let files: Vec<_> = std::fs::read_dir(&options.archive_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let report = verify_archive(&files[0]).unwrap();
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.header.records, 3);
    let v = store.verify(vec![]).await.unwrap();
    assert!(v.ok(), "{:#?}", v.problems);
    assert_eq!((v.audit_records, v.archives), (0, 1));
    store.close().await;
}
