//! Group commit without a writer task: every append queues its record, then waits its turn for the
//! write connections. Whoever holds them commits everything queued so far (in transactions of at
//! most `max_batch` rows) and answers each record's owner. An owner whose record a previous holder
//! already committed finds its answer waiting and leaves at once. Under load many calls share one
//! commit; alone, a call pays for one small commit and no hand-off to any other thread.
//!
//! The audit append runs on its own connection to the tail's own file (`tail`), opened with
//! rusqlite on the same bundled SQLite library sqlx links, and is called in place on the caller's
//! thread: a one-row commit in WAL is a few microseconds of work, less than the two thread hops
//! sqlx's SQLite driver makes per statement (it runs every connection on a worker thread of its
//! own). Decision 0033 has the measurements. The tail's moves into audit_log run on a second
//! rusqlite connection, to the store's file, so appends go on while a move writes; only the
//! delete that ends a move takes the tail's connection, for a moment.
//! The connection never sleeps in SQLite's busy handler (that would stall a runtime worker
//! thread): when another process holds the write lock the batch goes back to the head of the
//! queue and the holder waits asynchronously, up to the store's busy timeout.
//!
//! The write connections checkpoint the WAL themselves, every [`WAL_AUTOCHECKPOINT_PAGES`] pages
//! (16 MiB) rather than SQLite's default 1,000. A checkpoint run in the background on another
//! connection looked tempting but never caught up with a steady stream of commits, so the WAL
//! never restarted and grew without bound (every commit then paid for new file blocks); a larger
//! in-commit interval keeps the WAL bounded, writes each hot index page back once per interval
//! instead of several times, and measured p99 append latency fell from about 550 us to about
//! 180 us (`cargo bench -p tw-store --bench append`).
//!
//! Every other write the store makes (settings, the admin log, confirmations, grants, rate-limit
//! events, custom tools) runs on sqlx's connection, under the same lock as the moves
//! ([`Writer::with_conn`], [`Writer::transaction`]), so a process writes each file through one
//! connection at a time; whoever needs both locks takes the store file's first. Writes from two
//! connections at once in the same process would fight for SQLite's file lock and lose whole
//! milliseconds in the busy handler's sleeps; taking turns on a tokio mutex costs microseconds.
//! Other processes are kept in order by SQLite's lock and the busy timeout.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{ErrorCode, OpenFlags};
use sqlx::Connection as _;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::oneshot;

use crate::error::{Result, StoreError};
use crate::record::Encoded;

/// WAL pages between two checkpoints on the write connections.
pub(crate) const WAL_AUTOCHECKPOINT_PAGES: u32 = 4096;

type Pending = (Box<Encoded>, oneshot::Sender<Result<i64>>);

/// Why a write waited out the busy timeout.
const LOCK_HELD: &str = "another process held the database's write lock";

#[derive(Default)]
struct Queue {
    items: Vec<Pending>,
    closed: bool,
}

/// The connection that writes the tail's file: the audit append's.
struct TailConn {
    /// The tail's file as its main database, the store's attached (see `tail`).
    audit: rusqlite::Connection,
    /// The audit log's last record (id and hash) as this connection last saw it; `None` until
    /// read, and after a write that may not have gone in.
    head: Option<Head>,
}

/// The two connections that write the store's file, used one at a time.
struct StoreConns {
    /// The tail's move into audit_log, and the small writes on a call's path
    /// ([`Writer::write_in_place`]); the store's file as its main database, the tail attached.
    log: rusqlite::Connection,
    /// Every other write's.
    other: SqliteConnection,
    /// Whether `other` may be inside a transaction [`Writer::transaction`] began and did not
    /// end (its caller went away midway): the next one rolls it back first.
    other_in_tx: bool,
}

/// Ends whatever transaction `conn` is in; SQLite may have ended it already (a failed COMMIT
/// on a full disk rolls back by itself).
async fn rollback(conn: &mut SqliteConnection) {
    if let Err(e) = sqlx::query("ROLLBACK").execute(&mut *conn).await
        && !e.to_string().contains("no transaction is active")
    {
        tracing::warn!(error = %e, "rolling back a failed write failed");
    }
}

/// A record's id and hash.
type Head = (i64, [u8; 32]);

/// How the rusqlite write connections (the tail's and the store file's) are opened.
pub(crate) struct AuditConnection<'a> {
    pub(crate) path: &'a Path,
    /// The tail's file ([`crate::tail::prepare`] made it).
    pub(crate) tail: &'a Path,
    /// `NORMAL` or `FULL`.
    pub(crate) synchronous: &'static str,
    /// How long a commit waits for another process's write lock.
    pub(crate) busy_timeout: Duration,
}

/// The write side of the store.
pub(crate) struct Writer {
    queue: Mutex<Queue>,
    /// The tail's writer; `None` once closed. Taken after `store` by whoever needs both.
    tail_conn: tokio::sync::Mutex<Option<TailConn>>,
    /// The store file's writers; `None` once closed.
    store: tokio::sync::Mutex<Option<StoreConns>>,
    max_batch: usize,
    busy_timeout: Duration,
    /// False after a write failed for a reason other than the record itself, until one succeeds.
    healthy: AtomicBool,
    /// Commits made so far (shared with the text indexer, which waits for a quiet spell).
    batches: Arc<AtomicU64>,
    /// Records this process has put in the tail since its last move.
    tail: AtomicU64,
    /// Whether a background move is scheduled or running.
    moving: AtomicBool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("max_batch", &self.max_batch)
            .field("batches", &self.batches)
            .finish_non_exhaustive()
    }
}

/// What one commit attempt came to.
enum Commit {
    /// A batch was committed (or failed, and its owners were told).
    Done,
    /// Nothing was queued.
    Empty,
    /// Another process holds the write lock; the batch is back at the head of the queue.
    Busy,
}

impl Writer {
    /// Opens the tail's connection, and the store file's rusqlite connection beside `other` under
    /// one lock.
    pub(crate) fn open(
        audit: &AuditConnection<'_>,
        other: SqliteConnection,
        max_batch: usize,
    ) -> Result<Self> {
        let io = |path: &Path, e: rusqlite::Error| StoreError::Io {
            path: path.to_owned(),
            source: std::io::Error::other(e),
        };
        let conn =
            open_write(audit, audit.tail, audit.path, "store").map_err(|e| io(audit.tail, e))?;
        let log = open_write(audit, audit.path, audit.tail, crate::tail::SCHEMA)
            .map_err(|e| io(audit.path, e))?;
        log.pragma_update(None, "foreign_keys", true)
            .map_err(|e| io(audit.path, e))?;
        Ok(Self {
            queue: Mutex::new(Queue::default()),
            tail_conn: tokio::sync::Mutex::new(Some(TailConn {
                audit: conn,
                head: None,
            })),
            store: tokio::sync::Mutex::new(Some(StoreConns {
                log,
                other,
                other_in_tx: false,
            })),
            max_batch: max_batch.max(1),
            busy_timeout: audit.busy_timeout,
            healthy: AtomicBool::new(true),
            batches: Arc::new(AtomicU64::new(0)),
            tail: AtomicU64::new(0),
            moving: AtomicBool::new(false),
        })
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_healthy(&self) -> bool {
        !self.queue().closed && self.healthy.load(Ordering::Acquire)
    }

    /// The counter of commits, for a watcher that wants to know when the log is quiet.
    pub(crate) fn commit_counter(&self) -> Arc<AtomicU64> {
        self.batches.clone()
    }

    pub(crate) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Runs `work` on the write connection, alone: audit commits and other writes wait their turn.
    pub(crate) async fn with_conn<T>(
        &self,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.store.lock().await;
        let conns = guard.as_mut().ok_or(StoreError::WriterClosed)?;
        work(&mut conns.other).await
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction on the write connection: committed if it
    /// returns `Ok`, rolled back otherwise, also when the commit itself fails (a full disk), and
    /// before the next transaction if the caller went away midway.
    ///
    /// The statements are issued here rather than through sqlx's `Transaction`: when COMMIT
    /// failed, that one still counted the transaction open and refused every later BEGIN on the
    /// connection ("non-zero transaction depth"), so one full disk stopped every later write
    /// until a restart.
    ///
    /// Why IMMEDIATE: a deferred transaction that reads and then writes has to upgrade its lock,
    /// and when another process wrote in between SQLite fails the upgrade at once
    /// (`SQLITE_BUSY_SNAPSHOT`) instead of waiting. Taking the write lock up front makes the
    /// read-then-write sequences here (rate counts, confirmation state) wait their turn instead.
    pub(crate) async fn transaction<T>(
        &self,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.store.lock().await;
        let conns = guard.as_mut().ok_or(StoreError::WriterClosed)?;
        let conn = &mut conns.other;
        if conns.other_in_tx {
            rollback(conn).await;
        }
        conns.other_in_tx = true;
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        let result = match work(conn).await {
            Ok(out) => sqlx::query("COMMIT")
                .execute(&mut *conn)
                .await
                .map(|_| out)
                .map_err(StoreError::from),
            Err(e) => Err(e),
        };
        if result.is_err() {
            rollback(conn).await;
        }
        conns.other_in_tx = false;
        result
    }

    /// Runs `work` (one statement, or a transaction it makes itself) on the store file's rusqlite
    /// connection, in place and alone, as the audit append does: no hop to sqlx's worker
    /// thread. For the small
    /// writes on a call's path that belong to its record, such as a chain run's row. Another
    /// process's write lock is waited out asynchronously, `work` being tried again, up to the
    /// busy timeout; `work` must leave nothing behind when it fails.
    pub(crate) async fn write_in_place<T>(
        &self,
        mut work: impl FnMut(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let mut guard = self.store.lock().await;
        let mut busy = Backoff::new(self.busy_timeout);
        loop {
            let conns = guard.as_mut().ok_or(StoreError::WriterClosed)?;
            match work(&conns.log) {
                Ok(out) => return Ok(out),
                Err(e) if is_busy(&e) => {
                    if !busy.wait().await {
                        return Err(StoreError::Database(self.held_too_long(LOCK_HELD)));
                    }
                }
                Err(e) => return Err(StoreError::Database(e.to_string())),
            }
        }
    }

    /// Appends a record and returns its id once it is committed.
    pub(crate) async fn append(&self, record: Box<Encoded>) -> Result<i64> {
        let (reply, answer) = oneshot::channel();
        let execution_id = record.record.execution_id.clone();
        {
            let mut queue = self.queue();
            if queue.closed {
                return Err(StoreError::WriterClosed);
            }
            queue.items.push((record, reply));
        }
        self.answer(answer, &execution_id).await
    }

    /// Waits for the write connections, then either finds the record already committed by an
    /// earlier holder or commits the queue up to and including it.
    async fn answer(
        &self,
        mut answer: oneshot::Receiver<Result<i64>>,
        execution_id: &str,
    ) -> Result<i64> {
        // A first look registers nothing to be woken. Most appends find the connections free;
        // waiting on the reply and the lock together (below) would leave the task's waker with
        // the reply, and the owner's own commit would then answer it: a wake of the running
        // task, which tokio turns into a yield at the task's next wait (a spurious poll of all
        // it waits on, and a parked worker woken to steal it). Decision 0033 has what it cost.
        let mut guard = match answer.try_recv() {
            Ok(done) => return done,
            // Dropped unanswered: the file says (below).
            Err(oneshot::error::TryRecvError::Closed) => self.tail_conn.lock().await,
            Err(oneshot::error::TryRecvError::Empty) => match self.tail_conn.try_lock() {
                Ok(guard) => guard,
                // An owner whose record a holder commits meanwhile leaves with its answer
                // without ever taking the connections: under load, owners queued for the lock
                // would otherwise be woken one after another, each holding the lock only to
                // find its answer there.
                Err(_) => tokio::select! {
                    biased;
                    done = &mut answer => match done {
                        Ok(done) => return done,
                        // Dropped unanswered: the file says (below).
                        Err(_) => self.tail_conn.lock().await,
                    },
                    guard = self.tail_conn.lock() => guard,
                },
            },
        };
        let mut busy = Backoff::new(self.busy_timeout);
        loop {
            let Some(conns) = guard.as_mut() else {
                return Err(StoreError::WriterClosed);
            };
            // A holder before us may have committed our record while we waited.
            match answer.try_recv() {
                Ok(done) => return done,
                Err(oneshot::error::TryRecvError::Closed) => {
                    // Only a panic mid-commit drops a reply unanswered (a holder that waits
                    // puts its batch back first), so the file says whether the record is in.
                    return committed_id(&conns.audit, execution_id);
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            match self.commit_queued(&conns.audit, &mut conns.head) {
                Commit::Done => busy = Backoff::new(self.busy_timeout),
                // Our record was queued before we took the connection, so only a commit can
                // have taken it, and that commit answered or dropped our reply.
                Commit::Empty => return Err(StoreError::WriterClosed),
                Commit::Busy => {
                    if !busy.wait().await {
                        self.fail_next_batch(LOCK_HELD);
                    }
                }
            }
        }
    }

    /// Takes one transaction's worth of records from the head of the queue.
    fn take_batch(&self) -> Vec<Pending> {
        let mut queue = self.queue();
        let n = queue.items.len().min(self.max_batch);
        queue.items.drain(..n).collect()
    }

    /// Commits one transaction's worth of queued records.
    fn commit_queued(&self, conn: &rusqlite::Connection, head: &mut Option<Head>) -> Commit {
        let batch = self.take_batch();
        if batch.is_empty() {
            return Commit::Empty;
        }
        match insert(conn, head, &batch) {
            Ok(answers) => {
                self.committed();
                for ((_, reply), answer) in batch.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
                Commit::Done
            }
            Err(e) if is_busy(&e) => {
                // Back to the head of the queue, in order: the next attempt (ours after a wait,
                // or the next holder's if we are cancelled meanwhile) takes it again.
                self.queue().items.splice(0..0, batch);
                Commit::Busy
            }
            Err(e) => {
                self.healthy.store(false, Ordering::Release);
                tracing::error!(error = %e, records = batch.len(), "audit records could not be written");
                let message = e.to_string();
                for (_, reply) in batch {
                    let _ = reply.send(Err(StoreError::WriteFailed(message.clone())));
                }
                Commit::Done
            }
        }
    }

    /// Why a write gave up: `why`, for longer than the busy timeout.
    fn held_too_long(&self, why: &str) -> String {
        format!("{why} for longer than {:?}", self.busy_timeout)
    }

    /// Answers the records of the next batch with `why`: the database stayed locked.
    fn fail_next_batch(&self, why: &str) {
        let batch = self.take_batch();
        tracing::error!(
            records = batch.len(),
            why,
            "audit records could not be written"
        );
        let message = self.held_too_long(why);
        for (_, reply) in batch {
            let _ = reply.send(Err(StoreError::WriteFailed(message.clone())));
        }
    }

    /// Refuses new records, commits what is queued, moves the tail and closes the connections.
    pub(crate) async fn close(&self) {
        self.queue().closed = true;
        if let Some(conns) = self.tail_conn.lock().await.as_mut() {
            let mut busy = Backoff::new(self.busy_timeout);
            loop {
                match self.commit_queued(&conns.audit, &mut conns.head) {
                    Commit::Done => {}
                    Commit::Empty => break,
                    Commit::Busy => {
                        if !busy.wait().await {
                            self.fail_next_batch(LOCK_HELD);
                        }
                    }
                }
            }
        }
        if let Err(e) = self.settle().await {
            // Still in the tail, which the next store to open moves.
            tracing::warn!(error = %e, "moving the audit tail on close failed");
        }
        let mut store = self.store.lock().await;
        if let Some(conns) = self.tail_conn.lock().await.take()
            && let Err((_, e)) = conns.audit.close()
        {
            tracing::warn!(error = %e, "closing the audit writer's connection failed");
        }
        if let Some(conns) = store.take() {
            if let Err((_, e)) = conns.log.close() {
                tracing::warn!(error = %e, "closing the audit log's write connection failed");
            }
            if let Err(e) = conns.other.close().await {
                tracing::warn!(error = %e, "closing the store's write connection failed");
            }
        }
        self.healthy.store(false, Ordering::Release);
    }

    /// Moves the whole tail into audit_log, [`MOVE_BATCH`] rows a transaction, letting appends
    /// in between; returns how many rows moved. Rows another process appended move too.
    pub(crate) async fn settle(&self) -> Result<usize> {
        let mut moved = 0;
        loop {
            match self.move_some().await? {
                0 => return Ok(moved),
                n => moved += n,
            }
        }
    }

    /// Moves up to [`MOVE_BATCH`] of the oldest tail rows into audit_log, then deletes what was
    /// moved from the tail; returns how many rows moved. Appends go on meanwhile: only the
    /// delete takes the tail's connection, for a moment.
    pub(crate) async fn move_some(&self) -> Result<usize> {
        let mut busy = Backoff::new(self.busy_timeout);
        loop {
            let mut guard = self.store.lock().await;
            let conns = guard.as_mut().ok_or(StoreError::WriterClosed)?;
            match move_tail(&conns.log, MOVE_BATCH) {
                Ok((n, moved_to)) => {
                    if let Some(upto) = moved_to {
                        // The store's lock is still held: whoever takes both takes it first.
                        self.forget_moved(upto).await;
                    }
                    drop(guard);
                    let n64 = n as u64;
                    let _ = self
                        .tail
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                            Some(if n == 0 { 0 } else { t.saturating_sub(n64) })
                        });
                    return Ok(n);
                }
                Err(e) if is_busy(&e) => {
                    drop(guard);
                    if !busy.wait().await {
                        return Err(StoreError::WriteFailed(format!(
                            "the newest audit records could not be moved into the indexed log: \
                             another process held the database's write lock for longer than {:?}",
                            self.busy_timeout
                        )));
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "moving the audit tail failed");
                    return Err(StoreError::WriteFailed(format!(
                        "the newest audit records could not be moved into the indexed log: {e}"
                    )));
                }
            }
        }
    }

    /// Deletes the tail's rows up to `upto`, which audit_log (or an archive) holds now. When
    /// that fails (another process writes the tail) they stay in both until the next move.
    async fn forget_moved(&self, upto: i64) {
        let guard = self.tail_conn.lock().await;
        let Some(conns) = guard.as_ref() else { return };
        let done = conns
            .audit
            .prepare_cached("DELETE FROM audit_tail WHERE id <= ?1")
            .and_then(|mut delete| delete.execute([upto]));
        if let Err(e) = done {
            tracing::debug!(
                error = %e,
                upto,
                "moved audit records stay in the tail until the next move"
            );
        }
    }

    /// Counts `n` more records in the tail; returns whether the caller should start a
    /// background move (none is running and there is something to move).
    pub(crate) fn note_tail(&self, n: u64) -> bool {
        self.tail.fetch_add(n, Ordering::Relaxed);
        !self.moving.swap(true, Ordering::AcqRel)
    }

    /// Records this process put in the tail and has not moved yet.
    pub(crate) fn tail_len(&self) -> u64 {
        self.tail.load(Ordering::Relaxed)
    }

    /// Ends a background move; returns whether another must start (rows came in meanwhile and
    /// no other move took over).
    pub(crate) fn move_done(&self) -> bool {
        self.moving.store(false, Ordering::Release);
        self.tail_len() > 0 && !self.moving.swap(true, Ordering::AcqRel)
    }

    fn committed(&self) {
        self.healthy.store(true, Ordering::Release);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits between attempts on a database another process keeps locked, as SQLite's own busy
/// handler would, but without holding a thread.
struct Backoff {
    deadline: Instant,
    next: Duration,
}

impl Backoff {
    fn new(limit: Duration) -> Self {
        Self {
            deadline: Instant::now() + limit,
            next: Duration::from_micros(500),
        }
    }

    /// Sleeps before the next attempt; false once the time is up (and then starts over).
    async fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            *self = Self::new(self.deadline.saturating_duration_since(now));
            return false;
        }
        tokio::time::sleep(self.next.min(self.deadline - now)).await;
        self.next = (self.next * 2).min(Duration::from_millis(50));
        true
    }
}

/// A write connection on `main`, with `attached` attached as `alias` (the store's file and the
/// tail's, one way round or the other).
fn open_write(
    how: &AuditConnection<'_>,
    main: &Path,
    attached: &Path,
    alias: &str,
) -> rusqlite::Result<rusqlite::Connection> {
    // The schemas exist (sqlx's migrator and `tail::prepare` made them): no CREATE, no URI
    // parsing.
    let conn = rusqlite::Connection::open_with_flags(
        main,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Never sleep in SQLite: a BUSY answer comes back at once and is waited out asynchronously.
    conn.busy_timeout(Duration::ZERO)?;
    conn.pragma_update(None, "synchronous", how.synchronous)?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "the database is in journal mode {mode}, not WAL"
        )));
    }
    conn.execute(
        &format!("ATTACH DATABASE ?1 AS {alias}"),
        [attached.to_string_lossy()],
    )?;
    Ok(conn)
}

/// Whether another connection holds the file, so the same work can be tried again later.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Whether an error is caused by the record rather than by the database being unusable.
fn is_record_fault(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ConstraintViolation | ErrorCode::TooBig | ErrorCode::TypeMismatch)
    ) || matches!(e, rusqlite::Error::ToSqlConversionFailure(_))
}

/// The id of a record whose commit went unanswered, or `WriterClosed` if it is not in the log.
fn committed_id(conn: &rusqlite::Connection, execution_id: &str) -> Result<i64> {
    use rusqlite::OptionalExtension as _;
    let id: Option<i64> = conn
        .query_row(
            "SELECT id FROM audit_tail WHERE execution_id = ?1 \
             UNION ALL SELECT id FROM audit_log WHERE execution_id = ?1",
            [execution_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| StoreError::WriteFailed(e.to_string()))?;
    id.ok_or(StoreError::WriterClosed)
}

fn int(what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| StoreError::Encode {
        what: what.to_owned(),
        message: format!("{v} does not fit in a signed 64-bit integer"),
    })
}

/// The columns audit_log and audit_tail share, in this order.
macro_rules! columns {
    () => {
        "execution_id, trace_id, tool, agent_id, skill, user_id, arguments, decision, \
         explanation, status, error_code, error_message, output, output_sha256, output_bytes, \
         truncated, started_at, completed_at, duration_us, metadata, violation_type, \
         violation_severity"
    };
}

/// One record into the tail under the id and link the writer gives it (the next after the last
/// record it knows), unless that is no longer the log's last record: another process appended
/// since (the id is taken in the tail, or, moved, in audit_log; ids have no gaps, so a later
/// append took this very id) or archived since (an archived id is never given again). Nor when
/// audit_log already has its execution id (the tail's own UNIQUE covers the tail). A statement
/// that inserts nothing says which by the log's head: see [`insert`].
///
/// The taken id in the tail is found by its primary key (`ON CONFLICT DO NOTHING`) rather than
/// by reading the tail: an INSERT whose SELECT reads the table it inserts into goes through a
/// temporary table, whose making and dropping was a fifth of an append's work.
const INSERT: &str = concat!(
    "INSERT INTO audit_tail (id, prev, hash, ",
    columns!(),
    ") SELECT ?23, ?24, ?25, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
     ?16, ?17, ?18, ?19, ?20, ?21, ?22 \
     WHERE NOT EXISTS (SELECT 1 FROM audit_log WHERE id >= ?23) \
     AND NOT EXISTS (SELECT 1 FROM audit_archives WHERE last_id >= ?23) \
     AND NOT EXISTS (SELECT 1 FROM audit_log WHERE execution_id = ?1) \
     ON CONFLICT (id) DO NOTHING"
);

/// The audit log's last record ([`crate::chain::AUDIT_HEAD`]), or the genesis link.
fn read_head(conn: &rusqlite::Connection) -> rusqlite::Result<Head> {
    use rusqlite::OptionalExtension as _;
    let row = conn
        .prepare_cached(crate::chain::AUDIT_HEAD)?
        .query_row([], |r| {
            Ok((r.get::<_, i64>(0)?, crate::chain::hash32(r.get_ref(1)?)))
        })
        .optional()?;
    match row {
        None => Ok((0, crate::chain::GENESIS)),
        Some((id, Some(hash))) => Ok((id, hash)),
        Some((id, None)) => Err(rusqlite::Error::InvalidColumnType(
            1,
            format!("hash of audit record {id}"),
            rusqlite::types::Type::Null,
        )),
    }
}

/// The id up to which the tail's rows are in audit_log or an archive: every tail row at or below
/// it has been moved (ids only grow, and rows move in id order).
const MOVED_TO: &str = "SELECT MAX(IFNULL((SELECT MAX(id) FROM audit_log), 0), \
     IFNULL((SELECT MAX(last_id) FROM audit_archives), 0))";

/// Up to `?2` of the tail's rows above `?1` into audit_log, in id order, ids kept.
const MOVE: &str = concat!(
    "INSERT INTO audit_log (id, prev, hash, ",
    columns!(),
    ") SELECT id, prev, hash, ",
    columns!(),
    " FROM audit_tail WHERE id > ?1 ORDER BY id LIMIT ?2"
);

/// Rows moved from the tail into audit_log in one transaction: about 10 us a row (the filter
/// indexes), on the store's file, while appends go on in the tail's.
pub(crate) const MOVE_BATCH: usize = 512;

/// Copies up to `limit` of the oldest unmoved tail rows into audit_log in one transaction on
/// the store's file (`conn` is the log connection); returns how many, and, when the tail holds
/// rows audit_log now has (these, or ones a move cut short left), the id up to which to delete
/// them.
fn move_tail(conn: &rusqlite::Connection, limit: usize) -> rusqlite::Result<(usize, Option<i64>)> {
    let moved_to = |conn: &rusqlite::Connection| -> rusqlite::Result<i64> {
        conn.prepare_cached(MOVED_TO)?.query_row([], |r| r.get(0))
    };
    // Deferred: IMMEDIATE would take the tail's write lock too. The first statement reads the
    // store's file, the INSERT then takes its write lock (or fails busy if another process
    // wrote it since) and reads the tail: the log's view first, the tail's second, so rows
    // another process moved meanwhile are seen in the log (see `tail`).
    let moved = in_transaction(conn, false, |tx| {
        let from = moved_to(tx)?;
        tx.prepare_cached(MOVE)?
            .execute(rusqlite::params![from, limit as i64])
    })?;
    let upto = moved_to(conn)?;
    let oldest: Option<i64> = conn
        .prepare_cached("SELECT MIN(id) FROM audit_tail")?
        .query_row([], |r| r.get(0))?;
    Ok((moved, oldest.filter(|&o| o <= upto).map(|_| upto)))
}

/// Inserts `batch` in one `BEGIN IMMEDIATE` transaction; returns each record's answer, in order.
/// A record the database refuses (a repeated execution id, say) is answered with its own error
/// and the others still go in: a failed statement undoes only itself. An error for the whole
/// transaction (busy, I/O, a full disk) comes back as `Err` and nothing is in.
///
/// Each record is linked to `head`, the last record this connection knows, and goes in as the next
/// id only while that is still the log's last record. When another process appended meanwhile
/// the insert changes nothing; the head is read again and the record linked anew. So the usual
/// append reads nothing extra, and the chain never forks.
fn insert(
    conn: &rusqlite::Connection,
    head: &mut Option<Head>,
    batch: &[Pending],
) -> rusqlite::Result<Vec<Result<i64>>> {
    // The head is read before the transaction: a transaction's first statement must be the
    // INSERT, which takes the tail's write lock and then reads the store's file (see `tail`).
    if head.is_none() {
        *head = Some(read_head(conn)?);
    }
    // One record is one statement, which SQLite commits by itself.
    let done = in_transaction(conn, batch.len() == 1, |tx| {
        let mut answers = Vec::with_capacity(batch.len());
        let mut stmt = tx.prepare_cached(INSERT)?;
        for (e, _) in batch {
            let r = &e.record;
            let size = match int("output_bytes", r.output_bytes) {
                Ok(size) => size,
                Err(refused) => {
                    answers.push(Err(refused));
                    continue;
                }
            };
            let answer = loop {
                let (last, prev) = match *head {
                    Some(known) => known,
                    None => *head.insert(read_head(tx)?),
                };
                let (id, hash) = (last + 1, crate::chain::audit_link(&prev, e, size));
                let done = stmt.execute(rusqlite::params![
                    r.execution_id,
                    r.trace_id,
                    r.tool,
                    r.agent_id,
                    r.skill,
                    r.user_id,
                    e.arguments,
                    r.decision,
                    e.explanation(),
                    r.status.as_str(),
                    r.error_code,
                    r.error_message,
                    e.output,
                    e.output_sha256,
                    size,
                    r.truncated,
                    r.started_at,
                    r.completed_at,
                    r.duration_us,
                    e.metadata(),
                    r.violation.as_ref().map(|v| v.kind.as_str()),
                    r.violation.as_ref().map(|v| v.severity.as_str()),
                    id,
                    prev.as_slice(),
                    hash.as_slice(),
                ]);
                match done {
                    Ok(0) => {
                        // Another process appended (link anew), or the execution id is taken.
                        let now = read_head(tx)?;
                        if now != (last, prev) {
                            *head = Some(now);
                            continue;
                        }
                        break Err(StoreError::WriteFailed(format!(
                            "UNIQUE constraint failed: audit_log.execution_id ({})",
                            r.execution_id
                        )));
                    }
                    Ok(_) => {
                        *head = Some((id, hash));
                        break Ok(id);
                    }
                    Err(refused) if is_record_fault(&refused) => {
                        break Err(StoreError::WriteFailed(refused.to_string()));
                    }
                    Err(e) => return Err(e),
                }
            };
            answers.push(answer);
        }
        Ok(answers)
    });
    if done.is_err() {
        // Rolled back: what this connection wrote may not be there.
        *head = None;
    }
    done
}

/// Runs `work` in one transaction, committed if it returns `Ok` and rolled back otherwise; with
/// `single`, `work` is one statement and runs as its own transaction. The transaction is
/// deferred: both write connections have the other file attached, and `BEGIN IMMEDIATE` would
/// take its write lock too; `work`'s first write takes the lock of the file it writes. Cached
/// statements throughout: rusqlite's `Transaction` parses its BEGIN and COMMIT anew every time,
/// which a one-row commit notices.
fn in_transaction<T>(
    conn: &rusqlite::Connection,
    single: bool,
    work: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    if single {
        return work(conn);
    }
    conn.prepare_cached("BEGIN")?.execute([])?;
    let done = work(conn).and_then(|out| {
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(out)
    });
    if done.is_err()
        && !conn.is_autocommit()
        && let Err(e) = conn.execute_batch("ROLLBACK")
    {
        tracing::warn!(error = %e, "rolling back a failed audit write failed");
    }
    done
}

#[cfg(test)]
mod tests;
