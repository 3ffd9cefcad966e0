//! `audit verify` on the team store, against tampering done straight in PostgreSQL's tables (with
//! the append-only triggers switched off, as someone with the database's own rights could):
//! each edit, deletion, insertion, reordering, cut and re-signing is found and located.

use pretty_assertions::assert_eq;
use tw_core::ToolStatus;

use super::*;
use crate::backends_tests::{Backend, Place};
use crate::tests::record;

/// Two replicas on one database, each appending to its own chain, interleaved: 6 records each.
pub(crate) async fn two_replicas() -> (Place, Store, Store) {
    let place = Place::new(Backend::Postgres).await;
    let (a, b) = (place.open().await, place.open().await);
    for i in 0..12 {
        let s = if i % 2 == 0 { &a } else { &b };
        s.append(record(i, "echo", ToolStatus::Success))
            .await
            .unwrap();
    }
    (place, a, b)
}

/// Runs `sql` straight on the database with the triggers off.
pub(crate) async fn tamper(place: &Place, sql: &str) {
    let pool = sqlx::PgPool::connect(place.url.as_deref().unwrap())
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    pool.close().await;
}

fn kinds(r: &VerifyReport) -> Vec<(Option<i64>, ProblemKind)> {
    r.problems.iter().map(|p| (p.id, p.kind)).collect()
}

/// The id of record `seq` of the chain `store` appends to (the chain of its first record).
pub(crate) async fn id_of(place: &Place, first_exec: &str, seq: i64) -> i64 {
    let sql: &'static str = "SELECT id FROM audit_log WHERE seq = $2::bigint \
        AND chain = (SELECT chain FROM audit_log WHERE execution_id = $1)";
    let pool = sqlx::PgPool::connect(place.url.as_deref().unwrap())
        .await
        .unwrap();
    let id = sqlx::query_scalar(sql)
        .bind(first_exec)
        .bind(seq)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

#[tokio::test]
async fn replicas_chains_and_checkpoints_verify_and_an_edit_is_located() {
    let (place, a, b) = two_replicas().await;
    let c = a.checkpoint().await.unwrap().unwrap();
    assert_eq!(c.chains.len(), 2, "{c:?}");
    assert_eq!(c.audit_count, 12);
    let r = b.verify(vec![]).await.unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!((r.audit_records, r.checkpoints), (12, 1));
    assert_eq!(r.latest_checkpoint.as_ref(), Some(&c));

    let edited = id_of(&place, "exec-00000", 3).await;
    tamper(
        &place,
        &format!("UPDATE audit_log SET arguments = '{{\"path\": \"x\"}}' WHERE id = {edited}"),
    )
    .await;
    let r = b.verify(vec![]).await.unwrap();
    assert_eq!(kinds(&r), vec![(Some(edited), ProblemKind::Edited)]);

    let output = id_of(&place, "exec-00001", 2).await;
    tamper(
        &place,
        &format!("UPDATE audit_log SET output = '{{\"n\": 99}}' WHERE id = {output}"),
    )
    .await;
    let r = b.verify(vec![]).await.unwrap();
    assert!(
        kinds(&r).contains(&(Some(output), ProblemKind::Edited)),
        "{:?}",
        r.problems
    );
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn deletions_insertions_and_moves_are_located() {
    let (place, a, b) = two_replicas().await;
    // A record from the middle of a's chain: the next one names the gap.
    let gone = id_of(&place, "exec-00000", 3).await;
    let next = id_of(&place, "exec-00000", 4).await;
    tamper(&place, &format!("DELETE FROM audit_log WHERE id = {gone}")).await;
    let r = a.verify(vec![]).await.unwrap();
    assert_eq!(kinds(&r), vec![(Some(next), ProblemKind::Deleted)]);
    assert!(
        r.problems[0].message.contains("1 record"),
        "{:?}",
        r.problems
    );

    // Two of b's records trade places in its chain.
    let (x, y) = (
        id_of(&place, "exec-00001", 2).await,
        id_of(&place, "exec-00001", 3).await,
    );
    tamper(
        &place,
        &format!(
            "UPDATE audit_log SET seq = seq + 100 WHERE id IN ({x}, {y}); \
             UPDATE audit_log SET seq = 3 WHERE id = {x}; UPDATE audit_log SET seq = 2 WHERE id = {y}"
        ),
    )
    .await;
    let r = a.verify(vec![]).await.unwrap();
    let found = kinds(&r);
    assert!(
        found.contains(&(Some(y), ProblemKind::Reordered)),
        "{:?}",
        r.problems
    );

    // A record forged on a chain no writer opened.
    tamper(
        &place,
        "INSERT INTO audit_log (chain, seq, execution_id, trace_id, tool, agent_id, arguments, \
         status, output_bytes, truncated, started_at, completed_at, duration_us, metadata, prev, hash) \
         VALUES ('forged', 1, 'exec-forged', 't', 'echo', 'mallory', '{}', 'success', 0, 0, 1, 1, 0, \
         '{}', decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'))",
    )
    .await;
    let r = a.verify(vec![]).await.unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.kind == ProblemKind::Inserted && p.message.contains("forged")),
        "{:?}",
        r.problems
    );
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_cut_at_a_chains_end_and_a_re_signed_history_show_against_checkpoints() {
    let (place, a, b) = two_replicas().await;
    let saved = a.checkpoint().await.unwrap().unwrap();
    // The last two records of b's chain go, and the checkpoints in the table with them.
    let last = id_of(&place, "exec-00001", 6).await;
    let before = id_of(&place, "exec-00001", 5).await;
    tamper(
        &place,
        &format!(
            "DELETE FROM audit_log WHERE id IN ({last}, {before}); DELETE FROM audit_checkpoints"
        ),
    )
    .await;
    // The replica's own checkpoint file still has it; so does the copy saved elsewhere.
    let r = a.verify(vec![saved.clone()]).await.unwrap();
    assert!(
        r.problems.iter().any(|p| p.kind == ProblemKind::Truncated
            && p.message.contains("ends at its record 4")),
        "{:?}",
        r.problems
    );
    // A history re-signed with a key no writer recorded.
    let other = tempfile::tempdir().unwrap();
    let key = checkpoint::SigningKey::read_or_create(&other.path().join("k")).unwrap();
    let heads = saved.check().unwrap();
    let mut resigned = key.sign(saved.created_at + 1, &heads);
    resigned.chains = saved.chains.clone();
    let r = a.verify(vec![resigned]).await.unwrap();
    assert!(
        r.problems.iter().any(|p| p.kind == ProblemKind::ForeignKey),
        "{:?}",
        r.problems
    );
    // An edited checkpoint does not verify with its own key.
    let mut edited = saved;
    edited.audit_count += 1;
    let r = a.verify(vec![edited]).await.unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.kind == ProblemKind::BadCheckpoint),
        "{:?}",
        r.problems
    );
    a.close().await;
    b.close().await;
}

/// The chains each record of `execs` went on, in order.
async fn chains_of(place: &Place, execs: &[&str]) -> Vec<String> {
    let pool = sqlx::PgPool::connect(place.url.as_deref().unwrap())
        .await
        .unwrap();
    let mut out = Vec::new();
    for e in execs {
        out.push(
            sqlx::query_scalar("SELECT chain FROM audit_log WHERE execution_id = $1")
                .bind(*e)
                .fetch_one(&pool)
                .await
                .unwrap(),
        );
    }
    pool.close().await;
    out
}

#[tokio::test]
async fn a_writer_adopts_a_free_chain_and_one_that_lost_its_chain_never_forks_it() {
    let place = Place::new(Backend::Postgres).await;
    let first = place.open().await;
    first
        .append(record(0, "echo", ToolStatus::Success))
        .await
        .unwrap();
    first.close().await;
    // The next writer goes on where the last one that held the chain stopped.
    let a = place.open().await;
    a.append(record(1, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let c = chains_of(&place, &["exec-00000", "exec-00001"]).await;
    assert_eq!(c[0], c[1]);
    // Two writers open at once hold two chains.
    let b = place.open().await;
    b.append(record(2, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let c = chains_of(&place, &["exec-00001", "exec-00002"]).await;
    assert_ne!(c[0], c[1]);
    let held_by_a = c[0].clone();
    // a's lock goes with its connection (as when the database restarts under it); a writer
    // that opens now adopts a's chain and appends to it...
    tamper(
        &place,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
             AND ((classid::bigint << 32) | objid::bigint) \
                 = hashtextextended('toolwarden chain {held_by_a}', 0)"
        ),
    )
    .await;
    let d = place.open().await;
    d.append(record(3, "echo", ToolStatus::Success))
        .await
        .unwrap();
    // ...and a, which still believes it holds it, finds its next place taken: it claims a
    // chain again instead of forking this one.
    a.append(record(4, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let c = chains_of(&place, &["exec-00003", "exec-00004"]).await;
    assert_eq!(c[0], held_by_a, "the new writer adopted the chain a lost");
    assert_ne!(c[1], held_by_a, "a went on on another chain");
    let r = b.verify(vec![]).await.unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!(r.audit_records, 5);
    for s in [a, b, d] {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_commits_and_one_bad_record_fails_alone() {
    let place = Place::new(Backend::Postgres).await;
    let store = place.open().await;
    store
        .append(record(0, "echo", ToolStatus::Success))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..32i64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for i in 0..20 {
                // Writer 7's fourth record reuses the first record's execution id.
                let n = if w == 7 && i == 3 { 0 } else { 1 + w * 20 + i };
                answers.push(store.append(record(n, "echo", ToolStatus::Success)).await);
            }
            answers
        }));
    }
    let mut ok = 0;
    let mut refused = Vec::new();
    for t in tasks {
        for a in t.await.unwrap() {
            match a {
                Ok(_) => ok += 1,
                Err(e) => refused.push(e.to_string()),
            }
        }
    }
    assert_eq!(ok, 639);
    assert!(
        store.batches_committed() < 640,
        "records that waited went in together: {} commits",
        store.batches_committed()
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("exec-00000"), "{refused:?}");
    let r = store.verify(vec![]).await.unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!(r.audit_records, 640);
    store.close().await;
}
