//! The team store's PostgreSQL side: the pool every replica's store reads and writes through,
//! its own migrations (`migrations-postgres/`, kept in step with SQLite's), the audit append on
//! this writer's own hash chain, and the notices other replicas' changes push (LISTEN/NOTIFY).
//!
//! Each store appends to a chain of its own (`audit_log.chain`, named when it opens), linked
//! record to record exactly as SQLite's one chain is (see `chain`), so replicas appending at once
//! never wait on one head and the chain never forks; signed checkpoints join the chains
//! (docs/decisions/0036-team-store.md).

use std::str::FromStr as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool, QueryBuilder, Row as _};
use tokio::sync::broadcast;

use crate::chain;
use crate::error::{Result, StoreError};
use crate::query::{AuditPage, AuditQuery, MAX_PAGE};
use crate::record::{AuditRow, COLUMNS, Encoded};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations-postgres");

/// How long a store waits for a connection before it says the database is unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// This writer's chain and its head (last seq and hash).
    chain: String,
    head: tokio::sync::Mutex<(i64, [u8; 32])>,
    healthy: AtomicBool,
    notices: broadcast::Sender<StoreNotice>,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PgStore {
    /// Connects, brings the schema up to date (refusing a newer one), names this writer's chain
    /// and starts listening for other replicas' changes.
    pub(crate) async fn open(url: &str) -> Result<Self> {
        let shown_url = redact(url);
        let options = PgConnectOptions::from_str(url).map_err(|e| StoreError::Invalid {
            what: format!("store url {shown_url}"),
            message: e.to_string(),
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(Some(Duration::from_secs(60)))
            .connect_with(options)
            .await
            .map_err(|e| unreachable(&shown_url, &e))?;
        refuse_newer_schema(&pool, &shown_url).await?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|cause| StoreError::Migrate {
                path: shown_url.clone().into(),
                cause,
            })?;
        let chain = format!("{}-{}-{:016x}", hostname(), std::process::id(), rand_u64());
        sqlx::query("INSERT INTO audit_chains (chain, started_at, host) VALUES ($1, $2, $3)")
            .bind(&chain)
            .bind(crate::checkpoint::now_us())
            .bind(hostname())
            .execute(&pool)
            .await?;
        let (notices, _) = broadcast::channel(1024);
        let listener = tokio::spawn(listen(pool.clone(), notices.clone()));
        Ok(Self {
            pool,
            shown_url,
            chain,
            head: tokio::sync::Mutex::new((0, chain::GENESIS)),
            healthy: AtomicBool::new(true),
            notices,
            listener,
        })
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
    fn note<T>(&self, r: Result<T>) -> Result<T> {
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

    /// Appends a record to this writer's chain and returns its id once it is committed.
    pub(crate) async fn append(&self, e: Encoded) -> Result<i64> {
        let r = &e.record;
        let size = i64::try_from(r.output_bytes).map_err(|_| StoreError::Invalid {
            what: format!("audit record {}, output_bytes", r.execution_id),
            message: format!("{} does not fit a 64-bit signed integer", r.output_bytes),
        })?;
        let mut head = self.head.lock().await;
        let (seq, prev) = (head.0 + 1, head.1);
        let hash = chain::audit_link(&prev, &e, size);
        let inserted = sqlx::query_scalar(
            "INSERT INTO audit_log (chain, seq, execution_id, trace_id, tool, agent_id, skill, \
             user_id, arguments, decision, explanation, status, error_code, error_message, \
             output, output_sha256, output_bytes, truncated, started_at, completed_at, \
             duration_us, metadata, violation_type, violation_severity, prev, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23, $24, $25, $26) RETURNING id",
        )
        .bind(&self.chain)
        .bind(seq)
        .bind(&r.execution_id)
        .bind(&r.trace_id)
        .bind(&r.tool)
        .bind(&r.agent_id)
        .bind(&r.skill)
        .bind(&r.user_id)
        .bind(&e.arguments)
        .bind(&r.decision)
        .bind(&e.explanation)
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
        .bind(&e.metadata)
        .bind(r.violation.as_ref().map(|v| v.kind.as_str()))
        .bind(r.violation.as_ref().map(|v| v.severity.as_str()))
        .bind(prev.as_slice())
        .bind(hash.as_slice())
        .fetch_one(&self.pool)
        .await;
        let id = self.note(inserted.map_err(|e| match e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                StoreError::WriteFailed(format!(
                    "UNIQUE constraint failed: audit_log.execution_id ({})",
                    r.execution_id
                ))
            }
            other => StoreError::Sqlx(other),
        }))?;
        *head = (seq, hash);
        Ok(id)
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
        self.listener.abort();
        self.pool.close().await;
    }
}

/// Forwards the database's notices until the store goes. A lost connection is re-established by
/// the listener; what was missed meanwhile is announced as [`StoreNotice::Resync`].
async fn listen(pool: PgPool, notices: broadcast::Sender<StoreNotice>) {
    let mut listener = loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut l) => match l
                .listen_all(["toolwarden_changes", "toolwarden_confirmations"])
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

fn hostname() -> String {
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
