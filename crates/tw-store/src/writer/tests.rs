//! The writer's own tests against a real SQLite file: a busy database, a record whose committer
//! vanished, a chain run written in place, and an uncontended append that never wakes its task.

use super::*;
use crate::{Store, StoreOptions};
use tw_core::ToolStatus;

/// The store tests' record, under `id`, encoded.
fn record(id: &str) -> Encoded {
    let mut record = crate::tests::record(1, "echo", ToolStatus::Success);
    record.execution_id = id.to_owned();
    Encoded::new(record)
}

/// Another process's connection holding the write lock of the file at `path` (until COMMIT or
/// ROLLBACK).
async fn hold_write_lock(path: &Path) -> sqlx::SqliteConnection {
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    other
}

/// A store at `path` that gives up on another process's write lock after 300 ms.
async fn quick_to_give_up(path: &Path) -> Store {
    let mut options = StoreOptions::new(path);
    options.busy_timeout = Duration::from_millis(300);
    Store::open(options).await.unwrap()
}

/// A waker that counts its wakes.
struct Counted(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn an_append_that_finds_the_connections_free_never_wakes_its_own_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("tw.db")))
        .await
        .unwrap();
    let writer = &store.inner().writer;
    let wakes = Arc::new(Counted(std::sync::atomic::AtomicUsize::new(0)));
    let waker = std::task::Waker::from(Arc::clone(&wakes));
    let mut cx = std::task::Context::from_waker(&waker);
    for id in ["first", "second", "third"] {
        let mut append = std::pin::pin!(writer.append(Box::new(record(id))));
        // Nobody else writes: the record is committed in this one poll.
        let std::task::Poll::Ready(done) = append.as_mut().poll(&mut cx) else {
            panic!("an uncontended append waited");
        };
        assert!(done.unwrap() > 0);
    }
    // A wake of a task that is running makes the runtime poll it again at its next wait,
    // as a yield, and hand it to another worker thread to steal: a call's own reply must
    // not be waited on when its owner commits it.
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_record_whose_committer_vanished_is_answered_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let store = Store::open(StoreOptions::new(&path)).await.unwrap();
    let writer = &store.inner().writer;
    // Another process holds the write lock, so the next commit has to wait.
    let mut other = hold_write_lock(&crate::tail::path(&path)).await;
    // Two records queued; the holder finds the file locked and is abandoned while it waits.
    let mut answers = Vec::new();
    for id in ["first", "second"] {
        let (reply, answer) = oneshot::channel();
        writer.queue().items.push((Box::new(record(id)), reply));
        answers.push((id, answer));
    }
    let (reply, answer) = oneshot::channel();
    writer
        .queue()
        .items
        .push((Box::new(record("holder")), reply));
    let abandoned =
        tokio::time::timeout(Duration::from_millis(200), writer.answer(answer, "holder")).await;
    assert!(abandoned.is_err(), "the commit should still be waiting");
    // Nothing was lost: the batch went back to the queue, in order.
    let queued: Vec<String> = writer
        .queue()
        .items
        .iter()
        .map(|(r, _)| r.record.execution_id.clone())
        .collect();
    assert_eq!(queued, ["first", "second", "holder"]);
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    // The next owner to take the connection commits them all.
    for (id, answer) in answers {
        let got = writer.answer(answer, id).await.unwrap();
        let row = store.get(id).await.unwrap().unwrap();
        assert_eq!(row.id, got);
    }
    assert!(store.get("holder").await.unwrap().is_some());
    // A record that never reached the file is reported as not written.
    let (reply, answer) = oneshot::channel();
    drop(reply);
    let err = writer.answer(answer, "never-written").await.unwrap_err();
    assert!(matches!(err, StoreError::WriterClosed), "{err}");
    assert!(writer.is_healthy());
    store.close().await;
}

#[tokio::test]
async fn a_database_locked_past_the_busy_timeout_fails_the_waiting_records_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let store = quick_to_give_up(&path).await;
    let mut other = hold_write_lock(&crate::tail::path(&path)).await;
    let started = Instant::now();
    let err = store
        .append(crate::tests::record(1, "echo", ToolStatus::Success))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("write lock"), "{err}");
    assert!(store.get("exec-00001").await.unwrap().is_none());
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    let id = store
        .append(crate::tests::record(2, "echo", ToolStatus::Success))
        .await
        .unwrap();
    assert_eq!(store.get("exec-00002").await.unwrap().unwrap().id, id);
    assert!(store.is_healthy());
    store.close().await;
}

#[tokio::test]
async fn a_chain_run_written_in_place_waits_out_another_process_and_fails_closed_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let store = quick_to_give_up(&path).await;
    let run = |id: &str| crate::NewChainRun {
        id: id.to_owned(),
        chain: "c".to_owned(),
        trace_id: "t".to_owned(),
        agent_id: "a".to_owned(),
        skill: None,
        user_id: None,
        input: serde_json::json!({"q": 1}),
        steps: serde_json::json!([]),
        started_at: 1,
        owner: None,
    };
    // Locked past the busy timeout: the write fails with the reason, nothing is in the file.
    let mut other = hold_write_lock(&path).await;
    let started = Instant::now();
    let err = store.start_chain_run(run("r1")).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(err.to_string().contains("write lock"), "{err}");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    assert!(store.chain_run("r1").await.unwrap().is_none());
    // Locked for less than the timeout: the write waits (without holding a thread) and lands.
    let mut other = hold_write_lock(&path).await;
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    });
    store.start_chain_run(run("r2")).await.unwrap();
    release.await.unwrap();
    let end = crate::ChainRunEnd {
        status: "completed".to_owned(),
        output: Some(serde_json::json!("done")),
        error: None,
        steps: serde_json::json!([]),
        completed_at: 2,
    };
    assert!(store.finish_chain_run("r2", end.clone()).await.unwrap());
    // Ended once: a second end changes nothing; an end that is no end is refused.
    assert!(!store.finish_chain_run("r2", end.clone()).await.unwrap());
    let bad = crate::ChainRunEnd {
        status: "running".to_owned(),
        ..end
    };
    let err = store.finish_chain_run("r2", bad).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidQuery { .. }), "{err}");
    let row = store.chain_run("r2").await.unwrap().unwrap();
    assert_eq!(
        (row.status.as_str(), row.output),
        ("completed", Some(serde_json::json!("done")))
    );
    assert_eq!(row.input, serde_json::json!({"q": 1}));
    store.close().await;
}

#[tokio::test]
async fn appends_go_on_while_the_store_file_is_locked_and_move_once_it_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tw.db");
    let store = quick_to_give_up(&path).await;
    // Another process (or a move of the tail) holds the store file's write lock: records are
    // committed into the tail's file all the same, each under the next id.
    let mut other = hold_write_lock(&path).await;
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(
            store
                .append(crate::tests::record(i, "echo", ToolStatus::Success))
                .await
                .unwrap(),
        );
    }
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    // A move cannot take them meanwhile, and says why once the timeout is up.
    let err = store.inner().writer.settle().await.unwrap_err();
    assert!(err.to_string().contains("write lock"), "{err}");
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    // Free again: every record reaches the indexed log, and the tail is emptied.
    assert_eq!(store.inner().writer.settle().await.unwrap(), 3);
    let pool = crate::tests::raw(&dir).await;
    let counts: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM audit_tail), (SELECT COUNT(*) FROM audit_log)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(counts, (0, 3));
    for (i, id) in ids.iter().enumerate() {
        let row = store
            .get(&format!("exec-{:05}", i + 1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.id, *id);
    }
    store.close().await;
}
