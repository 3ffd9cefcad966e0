//! The team store's PostgreSQL side: the pool every replica's store reads and writes through,
//! its own migrations (`migrations-postgres/`, kept in step with SQLite's), the audit append on
//! this writer's own hash chain, and the notices other replicas' changes push (LISTEN/NOTIFY).
//!
//! Each store appends to a chain of its own (`audit_log.chain`, named when it opens), linked
//! record to record exactly as SQLite's one chain is (see `chain`), so replicas appending at once
//! never wait on one head and the chain never forks; signed checkpoints join the chains
//! (docs/decisions/0036-team-store.md).

use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool, QueryBuilder, Row as _};
use tokio::sync::broadcast;

use crate::chain;
use crate::checkpoint::{self, Checkpoint, SigningKey};
use crate::doctor::StoreReport;
use crate::error::{Result, StoreError};
use crate::query::{AuditPage, AuditQuery, MAX_PAGE};
use crate::record::{AuditRow, COLUMNS, Encoded};
use crate::verify::VerifyReport;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations-postgres");

/// How long a store waits for a connection before it says the database is unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Live messages a replica's runtime may fall behind on before it is told it missed some.
const LIVE_CAPACITY: usize = 1024;

/// What another replica (or this one) changed, pushed by the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreNotice {
    /// A table runtimes follow changed (one of [`crate::WATCHED_TABLES`]).
    Changed(String),
    /// A confirmation request was settled (approved, denied or expired).
    ConfirmationSettled(String),
    /// The connection that listens was lost and is back: notices may have been missed, so
    /// whoever follows should read everything again.
    Resync,
}

/// An open team store.
#[derive(Debug)]
pub(crate) struct PgStore {
    pub(crate) pool: PgPool,
    /// The URL without its password, for messages.
    pub(crate) shown_url: String,
    /// The chain this writer holds and its head; `None` once closed.
    pub(crate) head: tokio::sync::Mutex<Option<crate::pg_chain::Held>>,
    /// Statements that committed records (each one or more).
    pub(crate) commits: AtomicU64,
    /// Records waiting for the next commit.
    pub(crate) queue: std::sync::Mutex<Vec<crate::pg_append::Pending>>,
    host: String,
    healthy: AtomicBool,
    notices: broadcast::Sender<StoreNotice>,
    /// The team's live channel (`pg_live`): this replica's name and the messages it hears.
    pub(crate) replica: String,
    pub(crate) live: broadcast::Sender<std::sync::Arc<str>>,
    listener: tokio::task::JoinHandle<()>,
    /// This replica's signing key (`<path>.audit-key`) and checkpoint file
    /// (`<path>.team-checkpoints`).
    key: SigningKey,
    checkpoint_file: PathBuf,
    /// Records appended since the last checkpoint, and when one is due.
    pub(crate) since_checkpoint: AtomicU64,
    pub(crate) checkpoint_every: u64,
    pub(crate) checkpoint_wake: tokio::sync::Notify,
    pub(crate) checkpoint_interval: Duration,
    closed: AtomicBool,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PgStore {
    /// Connects, brings the schema up to date (refusing a newer one), names this writer's chain
    /// and starts listening for other replicas' changes.
    pub(crate) async fn open(url: &str, store: &crate::StoreOptions) -> Result<Self> {
        let shown_url = redact(url);
        let options = PgConnectOptions::from_str(url).map_err(|e| StoreError::Invalid {
            what: format!("store url {shown_url}"),
            message: e.to_string(),
        })?;
        let pool = match PgPoolOptions::new()
            .max_connections(16)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(Some(Duration::from_secs(60)))
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => pool,
            // The pool only says it timed out; one connection of our own says why (refused,
            // no such host, a certificate not trusted, a password wrong).
            Err(e @ sqlx::Error::PoolTimedOut) => {
                let cause = PgConnection::connect_with(&options)
                    .await
                    .err()
                    .unwrap_or(e);
                return Err(unreachable(&shown_url, &cause));
            }
            Err(e) => return Err(unreachable(&shown_url, &e)),
        };
        refuse_newer_schema(&pool, &shown_url).await?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|cause| StoreError::Migrate {
                path: shown_url.clone().into(),
                cause,
            })?;
        // This replica's key lives in its data directory, as SQLite's does beside the file.
        if let Some(dir) = store.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        let key = SigningKey::read_or_create(&checkpoint::key_path(&store.path))?;
        let host = hostname();
        sqlx::query(
            "INSERT INTO audit_keys (public_key, host, first_seen) VALUES ($1, $2, $3) \
             ON CONFLICT (public_key) DO NOTHING",
        )
        .bind(key.public_key())
        .bind(&host)
        .bind(checkpoint::now_us())
        .execute(&pool)
        .await?;
        // An archive's removal a crash cut short is finished (before a chain's head is read).
        let mut conn = pool.acquire().await?;
        crate::pg_archive::finish_cut(&mut conn).await?;
        drop(conn);
        let held = crate::pg_chain::claim(&pool, &host, rand_u64()).await?;
        let (notices, _) = broadcast::channel(1024);
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        let replica = replica_name(&host);
        let listener = tokio::spawn(listen(pool.clone(), notices.clone(), live.clone()));
        Ok(Self {
            pool,
            shown_url,
            head: tokio::sync::Mutex::new(Some(held)),
            queue: std::sync::Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            host,
            healthy: AtomicBool::new(true),
            notices,
            replica,
            live,
            listener,
            key,
            // Not SQLite's `<path>.checkpoints`: a data directory may hold both stores' (after
            // `store migrate`), and each file is read as its own store's.
            checkpoint_file: crate::beside(&store.path, ".team-checkpoints"),
            since_checkpoint: AtomicU64::new(0),
            checkpoint_every: store.checkpoint_every.max(1),
            checkpoint_wake: tokio::sync::Notify::new(),
            checkpoint_interval: store.checkpoint_interval,
            closed: AtomicBool::new(false),
        })
    }

    /// Signs every chain's head and the admin log's now (see `pg_verify::checkpoint`).
    pub(crate) async fn checkpoint(&self) -> Result<Option<Checkpoint>> {
        self.since_checkpoint.store(0, Ordering::Relaxed);
        self.with_conn(async |conn| {
            crate::pg_verify::checkpoint(conn, &self.key, &self.checkpoint_file).await
        })
        .await
    }

    /// Makes a checkpoint if the logs moved since the newest one (any replica's) and one is due:
    /// `checkpoint_every` records appended here, or `checkpoint_interval` since it, or none yet.
    pub(crate) async fn checkpoint_if_due(&self) -> Result<Option<Checkpoint>> {
        let row = self
            .read(async |pool| {
                Ok(sqlx::query(
                    "SELECT (SELECT COALESCE(MAX(id), 0) FROM audit_log), \
                     (SELECT COALESCE(MAX(id), 0) FROM admin_log), c.created_at, \
                     c.audit_head_id, c.admin_head_id \
                     FROM (SELECT 1) AS one LEFT JOIN \
                     (SELECT * FROM audit_checkpoints ORDER BY id DESC LIMIT 1) AS c ON true",
                )
                .fetch_one(pool)
                .await?)
            })
            .await?;
        let (audit, admin): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        let last: Option<(i64, i64, i64)> = row
            .try_get::<Option<i64>, _>(2)?
            .zip(row.try_get::<Option<i64>, _>(3)?)
            .zip(row.try_get::<Option<i64>, _>(4)?)
            .map(|((at, audit), admin)| (at, audit, admin));
        let due = match last {
            None => audit > 0 || admin > 0,
            Some((at, last_audit, last_admin)) => {
                (audit > last_audit || admin > last_admin)
                    && (self.since_checkpoint.load(Ordering::Relaxed) >= self.checkpoint_every
                        || checkpoint::now_us().saturating_sub(at)
                            >= i64::try_from(self.checkpoint_interval.as_micros())
                                .unwrap_or(i64::MAX))
            }
        };
        if due {
            self.checkpoint().await
        } else {
            Ok(None)
        }
    }

    /// While the database is out of reach, asks it every second whether it is back, so the
    /// store says it is healthy again before the next call (the pipeline refuses calls while it
    /// is not, and a refused call's own record would otherwise be the first to find out).
    pub(crate) fn start_probing(this: &std::sync::Arc<Self>) {
        let weak = std::sync::Arc::downgrade(this);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(store) = weak.upgrade() else { return };
                if store.closed.load(Ordering::Acquire) {
                    return;
                }
                if !store.is_healthy() {
                    let _ = store
                        .read(async |pool| Ok(sqlx::query("SELECT 1").execute(pool).await?))
                        .await;
                }
            }
        });
    }

    /// Checkpoints while the logs move (this replica's appends or another's), until the store
    /// is closed or dropped.
    pub(crate) fn start_checkpointing(this: &std::sync::Arc<Self>) {
        let weak = std::sync::Arc::downgrade(this);
        let interval = this.checkpoint_interval;
        tokio::spawn(async move {
            loop {
                let Some(store) = weak.upgrade() else { return };
                tokio::select! {
                    () = store.checkpoint_wake.notified() => {}
                    () = tokio::time::sleep(interval) => {}
                }
                if store.closed.load(Ordering::Acquire) {
                    return;
                }
                if let Err(e) = store.checkpoint_if_due().await {
                    tracing::warn!(error = %e, "no audit checkpoint was made; the next try is in {interval:?}");
                }
            }
        });
    }

    /// Whether the store was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// See [`crate::Store::archive`]: signed with this replica's key, the file on this host.
    pub(crate) async fn archive(
        &self,
        before: i64,
        out: &std::path::Path,
    ) -> Result<Option<crate::ArchiveSummary>> {
        let r = crate::pg_archive::run(self, &self.key, &self.host, before, out).await;
        self.note(r)
    }

    /// `audit verify` on the team store.
    pub(crate) async fn verify(&self, saved: &[Checkpoint]) -> Result<VerifyReport> {
        let mut report = self
            .with_conn(async |conn| {
                crate::pg_verify::verify(conn, &self.host, &self.checkpoint_file, saved).await
            })
            .await?;
        report.public_key = Some(self.key.public_hex());
        Ok(report)
    }

    /// What `store doctor` reports of the team store: where it is, how fast it answers, its
    /// schema against this build's, the newest record and how many records no checkpoint
    /// covers yet.
    pub(crate) async fn doctor(&self) -> Result<StoreReport> {
        let writable = self.is_healthy();
        self.read(async |pool| {
            let mut samples = Vec::with_capacity(5);
            for _ in 0..5 {
                let t = Instant::now();
                sqlx::query("SELECT 1").execute(pool).await?;
                samples.push(t.elapsed());
            }
            samples.sort_unstable();
            let row = sqlx::query(
                "SELECT (SELECT MAX(version) FROM _sqlx_migrations WHERE success), \
                 (SELECT COALESCE(MAX(id), 0) FROM audit_log), \
                 (SELECT created_at FROM audit_checkpoints ORDER BY id DESC LIMIT 1), \
                 (SELECT audit_count FROM audit_checkpoints ORDER BY id DESC LIMIT 1), \
                 (SELECT COUNT(*) FROM audit_log), \
                 pg_database_size(current_database()), \
                 (SELECT audit_head_id FROM audit_checkpoints ORDER BY id DESC LIMIT 1)",
            )
            .fetch_one(pool)
            .await?;
            let newest: i64 = row.try_get(1)?;
            let total: i64 = row.try_get(4)?;
            let signed: Option<i64> = row.try_get(3)?;
            Ok(StoreReport {
                backend: "postgresql".to_owned(),
                location: self.shown_url.clone(),
                size_bytes: crate::codec::count(row.try_get(5)?),
                journal_mode: "wal".to_owned(),
                read_latency_us: samples[2].as_micros() as u64,
                writable,
                schema_version: row.try_get::<Option<i64>, _>(0)?.unwrap_or(0),
                build_schema_version: Self::build_schema_version(),
                newest_record: newest,
                tail_records: 0,
                text_index: None,
                last_checkpoint: row
                    .try_get::<Option<i64>, _>(2)?
                    .zip(row.try_get::<Option<i64>, _>(6)?),
                unsigned_records: crate::codec::count(total - signed.unwrap_or(0)),
                archives: 0,
                public_key: Some(self.key.public_hex()),
            })
        })
        .await
    }

    /// The schema version this build brings.
    pub(crate) fn build_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// Notices from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<StoreNotice> {
        self.notices.subscribe()
    }

    /// Whether the last statement reached the database.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// Notes whether a statement reached the database; turns a lost connection into an error
    /// that says so.
    pub(crate) fn note<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(StoreError::Sqlx(sqlx::Error::PoolClosed)) => Err(StoreError::WriterClosed),
            Err(StoreError::Sqlx(e)) if is_connection_error(&e) => {
                self.healthy.store(false, Ordering::Release);
                Err(unreachable(&self.shown_url, &e))
            }
            other => {
                self.healthy.store(true, Ordering::Release);
                other
            }
        }
    }

    /// Runs `work` on a pooled connection.
    pub(crate) async fn with_conn<T>(
        &self,
        work: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
    ) -> Result<T> {
        let r = async {
            let mut conn = self.pool.acquire().await?;
            work(&mut conn).await
        }
        .await;
        self.note(r)
    }

    /// Runs `work` in one transaction: committed if it returns `Ok`, rolled back otherwise.
    pub(crate) async fn transaction<T>(
        &self,
        work: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
    ) -> Result<T> {
        self.with_conn(async |conn| {
            let mut tx = conn.begin().await?;
            let out = work(&mut tx).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    /// Runs a read on the pool, noting whether the database answered.
    pub(crate) async fn read<T>(&self, work: impl AsyncFnOnce(&PgPool) -> Result<T>) -> Result<T> {
        let r = work(&self.pool).await;
        self.note(r)
    }

    /// Appends a record to this writer's chain and returns its id once it is committed. Records
    /// that arrive while a commit is under way go in together with the next one, as one
    /// statement (see `pg_append`).
    pub(crate) async fn append(self: &std::sync::Arc<Self>, e: Encoded) -> Result<i64> {
        let r = &e.record;
        let size = i64::try_from(r.output_bytes).map_err(|_| StoreError::Invalid {
            what: format!("audit record {}, output_bytes", r.execution_id),
            message: format!("{} does not fit a 64-bit signed integer", r.output_bytes),
        })?;
        let id = crate::pg_append::append(self, e, size).await?;
        if self.since_checkpoint.fetch_add(1, Ordering::Relaxed) + 1 == self.checkpoint_every {
            self.checkpoint_wake.notify_one();
        }
        Ok(id)
    }

    /// Appends one record to the chain `held` (claiming another once if this writer lost it).
    pub(crate) async fn append_one(
        &self,
        guard: &mut Option<crate::pg_chain::Held>,
        e: &Encoded,
        size: i64,
    ) -> Result<i64> {
        let mut retried = false;
        loop {
            let held = guard.as_mut().ok_or(StoreError::WriterClosed)?;
            let (seq, prev) = (held.seq + 1, held.hash);
            let hash = chain::audit_link(&prev, e, size);
            match self.insert(e, size, &held.name, seq, &prev, &hash).await {
                Ok(id) => {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    (held.seq, held.hash) = (seq, hash);
                    return Ok(id);
                }
                Err(err) if !retried && crate::pg_append::lost_chain(&err) => {
                    retried = true;
                    self.reclaim(guard).await?;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Another writer holds this one's chain now (its lock went with a lost connection): lets
    /// it go and claims one again.
    pub(crate) async fn reclaim(&self, guard: &mut Option<crate::pg_chain::Held>) -> Result<()> {
        if let Some(lost) = guard.take() {
            lost.release().await;
        }
        *guard = Some(crate::pg_chain::claim(&self.pool, &self.host, rand_u64()).await?);
        Ok(())
    }

    /// Inserts one record as `seq` of `chain`; returns its id.
    pub(crate) async fn insert(
        &self,
        e: &Encoded,
        size: i64,
        chain: &str,
        seq: i64,
        prev: &[u8; 32],
        hash: &[u8; 32],
    ) -> Result<i64> {
        let r = &e.record;
        let inserted = sqlx::query_scalar(
            "INSERT INTO audit_log (chain, seq, execution_id, trace_id, tool, agent_id, skill, \
             user_id, arguments, decision, explanation, status, error_code, error_message, \
             output, output_sha256, output_bytes, truncated, started_at, completed_at, \
             duration_us, metadata, violation_type, violation_severity, prev, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23, $24, $25, $26) RETURNING id",
        )
        .bind(chain)
        .bind(seq)
        .bind(&r.execution_id)
        .bind(&r.trace_id)
        .bind(&r.tool)
        .bind(&r.agent_id)
        .bind(&r.skill)
        .bind(&r.user_id)
        .bind(&e.arguments)
        .bind(&r.decision)
        .bind(e.explanation())
        .bind(r.status.as_str())
        .bind(&r.error_code)
        .bind(&r.error_message)
        .bind(&e.output)
        .bind(&e.output_sha256)
        .bind(size)
        .bind(i64::from(r.truncated))
        .bind(r.started_at)
        .bind(r.completed_at)
        .bind(r.duration_us)
        .bind(e.metadata())
        .bind(r.violation.as_ref().map(|v| v.kind.as_str()))
        .bind(r.violation.as_ref().map(|v| v.severity.as_str()))
        .bind(prev.as_slice())
        .bind(hash.as_slice())
        .fetch_one(&self.pool)
        .await;
        self.note(inserted.map_err(|e| match e {
            sqlx::Error::Database(d) if d.constraint() == Some("audit_log_execution_id_key") => {
                StoreError::WriteFailed(format!(
                    "UNIQUE constraint failed: audit_log.execution_id ({})",
                    r.execution_id
                ))
            }
            other => StoreError::Sqlx(other),
        }))
    }

    /// The record for an execution id.
    pub(crate) async fn get(&self, execution_id: &str) -> Result<Option<AuditRow>> {
        self.read(async |pool| {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM audit_log WHERE execution_id = $1"
            )))
            .bind(execution_id)
            .fetch_optional(pool)
            .await?;
            row.as_ref().map(crate::record::pg::decode_row).transpose()
        })
        .await
    }

    /// One page of matching records, newest first. PostgreSQL plans the filter itself, so a
    /// text search needs no windows: a page is short only when it is the last.
    pub(crate) async fn page(&self, q: &AuditQuery) -> Result<AuditPage> {
        let limit = q.limit.clamp(1, MAX_PAGE);
        self.read(async |pool| {
            let mut qb = QueryBuilder::new(format!("SELECT {COLUMNS} FROM audit_log"));
            crate::query::pg::push_filter(&mut qb, q, true);
            qb.push(" ORDER BY id DESC LIMIT ")
                .push_bind(i64::from(limit) + 1);
            let rows = qb.build().fetch_all(pool).await?;
            let mut rows = rows
                .iter()
                .map(crate::record::pg::decode_row)
                .collect::<Result<Vec<_>>>()?;
            let more = rows.len() > limit as usize;
            rows.truncate(limit as usize);
            Ok(AuditPage {
                next_cursor: more.then(|| rows.last().map(|r| r.id)).flatten(),
                rows,
                scanned_to: None,
            })
        })
        .await
    }

    /// How many records match (the cursor applies; the limit does not).
    pub(crate) async fn count(&self, q: &AuditQuery) -> Result<u64> {
        self.read(async |pool| {
            let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM audit_log");
            crate::query::pg::push_filter(&mut qb, q, true);
            let n: i64 = qb.build().fetch_one(pool).await?.try_get(0)?;
            Ok(crate::codec::count(n))
        })
        .await
    }

    /// Closes the pool (waiting for statements under way).
    pub(crate) async fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            // What this replica appended is covered now if a checkpoint is due; otherwise by
            // the next one any replica makes.
            if self.since_checkpoint.load(Ordering::Relaxed) > 0
                && let Err(e) = self.checkpoint_if_due().await
            {
                tracing::warn!(error = %e, "no audit checkpoint was made on close");
            }
            self.checkpoint_wake.notify_one();
        }
        if let Some(held) = self.head.lock().await.take() {
            held.release().await;
        }
        self.listener.abort();
        self.pool.close().await;
    }
}

/// Forwards the database's notices until the store goes. A lost connection is re-established by
/// the listener; what was missed meanwhile is announced as [`StoreNotice::Resync`].
async fn listen(
    pool: PgPool,
    notices: broadcast::Sender<StoreNotice>,
    live: broadcast::Sender<std::sync::Arc<str>>,
) {
    let mut listener = loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut l) => match l
                .listen_all([
                    "toolwarden_changes",
                    "toolwarden_confirmations",
                    crate::pg_live::CHANNEL,
                ])
                .await
            {
                Ok(()) => break l,
                Err(e) => tracing::warn!(error = %e, "cannot listen for the team store's changes"),
            },
            Err(e) => tracing::warn!(error = %e, "cannot listen for the team store's changes"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                if n.channel() == crate::pg_live::CHANNEL {
                    // Nobody on this replica follows the live channel: nothing to do.
                    if live.receiver_count() > 0 {
                        let _ = live.send(n.payload().into());
                    }
                    continue;
                }
                let notice = match n.channel() {
                    "toolwarden_confirmations" => {
                        StoreNotice::ConfirmationSettled(n.payload().to_owned())
                    }
                    _ => StoreNotice::Changed(n.payload().to_owned()),
                };
                let _ = notices.send(notice);
            }
            Ok(None) => {
                let _ = notices.send(StoreNotice::Resync);
            }
            Err(e) => {
                tracing::warn!(error = %e, "lost the team store's change feed; reconnecting");
                let _ = notices.send(StoreNotice::Resync);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn refuse_newer_schema(pool: &PgPool, shown_url: &str) -> Result<()> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await
            .or_else(|e| match &e {
                // No migrations table yet: a new database.
                sqlx::Error::Database(d) if d.code().as_deref() == Some("42P01") => Ok(None),
                _ => Err(e),
            })?;
    let supported = PgStore::build_schema_version();
    match found {
        Some(found) if found > supported => Err(StoreError::NewerSchema {
            path: shown_url.into(),
            found,
            supported,
        }),
        _ => Ok(()),
    }
}

/// Whether an error means the database could not be reached (rather than refused a statement).
pub(crate) fn is_connection_error(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_)
    ) || matches!(e, sqlx::Error::Database(d)
        // admin_shutdown, crash_shutdown, cannot_connect_now
        if matches!(d.code().as_deref(), Some("57P01" | "57P02" | "57P03")))
}

fn unreachable(shown_url: &str, e: &sqlx::Error) -> StoreError {
    if is_connection_error(e) {
        StoreError::Unreachable {
            url: shown_url.to_owned(),
            cause: e.to_string(),
        }
    } else {
        StoreError::Database(format!("{shown_url}: {e}"))
    }
}

/// `url` with its password, if any, replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// A store's name on the team's live channel: its host and process, and which of the process's
/// stores it is after the first (tests open several).
fn replica_name(host: &str) -> String {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    match OPENED.fetch_add(1, Ordering::Relaxed) {
        0 => format!("{host}:{}", std::process::id()),
        n => format!("{host}:{}.{}", std::process::id(), n + 1),
    }
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned())
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    // The chain name only has to differ from other writers'; a clock fallback does.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).is_err() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    }
    u64::from_le_bytes(b)
}
