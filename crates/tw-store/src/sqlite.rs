//! The embedded store: one SQLite file in WAL mode, opened one process at a time up to its
//! migrated schema, with the audit writer, the text index and the background tasks (the tail's
//! move, checkpoints, retention) that serve it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Row as _, SqlitePool};

use crate::checkpoint::{self, Checkpoint};
use crate::error::{Result, StoreError};
use crate::options::{StoreOptions, Synchronous};
use crate::writer::{self, Writer};
use crate::{ArchiveSummary, archive, chain, search, tail};

/// How long records wait in the audit tail for company before a background move takes them
/// (a batch waiting moves at once).
const MOVE_AFTER: Duration = Duration::from_millis(50);

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// An open SQLite store.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    pub(crate) pool: SqlitePool,
    pub(crate) writer: Writer,
    /// The text index's builder, when the store keeps one.
    pub(crate) indexer: Option<search::Indexer>,
    pub(crate) checkpoints: checkpoint::Schedule,
    /// `keep_days` and where archives go.
    pub(crate) retention: Option<(u32, PathBuf)>,
}

impl Inner {
    /// Opens (creating and migrating as needed) the database at `options.path`.
    pub(crate) async fn open(options: StoreOptions) -> Result<Arc<Self>> {
        let path = options.path.clone();
        create_private(&path)?;
        // Several processes may open a new data directory at once (an agent's CLI and the desktop
        // app). Switching a new file to WAL fails at once with "database is locked" while another
        // connection has it open, and sqlx's migrator takes no lock either: so opening, up to the
        // migrated schema and the write connection, is done one process at a time.
        let _lock = open_lock(&path).await?;
        let connect = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match options.synchronous {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
            })
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true);
        // The text index is attached to every read connection, so one statement can join it to the
        // log.
        // Derived data: a store whose index cannot be made (a read-only directory, say) opens
        // without it, and its searches read the log.
        let index = options
            .text_index
            .then(|| search::prepare(&path))
            .and_then(|made| {
                made.map_err(|e| {
                    tracing::warn!(error = %e, "no audit text index; text searches read the log");
                })
                .ok()
            });
        let attach = index.as_ref().map(|p| p.to_string_lossy().into_owned());
        // The audit tail's file, attached to every read connection too (see `tail`).
        let tail = tail::prepare(&path)?;
        let tail_file = tail.to_string_lossy().into_owned();
        let pool = SqlitePoolOptions::new()
            .after_connect(move |conn, _| {
                let attach = attach.clone();
                let tail_file = tail_file.clone();
                Box::pin(async move {
                    let sql = format!("ATTACH DATABASE ?1 AS {}", tail::SCHEMA);
                    // Built from constants only; the file name is bound.
                    sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(tail_file)
                        .execute(&mut *conn)
                        .await?;
                    if let Some(file) = attach {
                        let sql = format!("ATTACH DATABASE ?1 AS {}", search::SCHEMA);
                        // Built from constants only; the file name is bound.
                        sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(file)
                            .execute(conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .max_connections(4)
            .min_connections(0)
            .idle_timeout(Some(Duration::from_secs(60)))
            .connect_with(connect.clone())
            .await
            .map_err(|e| classify(&path, e))?;
        refuse_newer_schema(&pool, &path).await?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|cause| StoreError::Migrate {
                path: path.clone(),
                cause,
            })?;
        // Why this checkpoint interval: see `writer`.
        let conn = connect
            .clone()
            .pragma(
                "wal_autocheckpoint",
                writer::WAL_AUTOCHECKPOINT_PAGES.to_string(),
            )
            .connect()
            .await
            .map_err(|e| classify(&path, e))?;
        let audit = writer::AuditConnection {
            path: &path,
            tail: &tail,
            synchronous: match options.synchronous {
                Synchronous::Normal => "NORMAL",
                Synchronous::Full => "FULL",
            },
            busy_timeout: options.busy_timeout,
        };
        let writer = Writer::open(&audit, conn, options.max_batch.clamp(1, 1000))?;
        // Records a process left in the tail (it was killed before moving them) move now; then
        // rows from before the hash chain, if any, are sealed, before anything else is written.
        writer.settle().await?;
        writer.write_in_place(chain::seal).await?;
        // An archive's removal a crash cut short is finished.
        archive::finish_cut(&writer, &path).await?;
        let indexer = index.and_then(|index| {
            search::Indexer::start(&path, &index, writer.commit_counter())
                .map_err(|e| {
                    tracing::warn!(error = %e, "no audit text index; text searches read the log");
                })
                .ok()
        });
        let inner = Arc::new(Self {
            path,
            pool,
            writer,
            indexer,
            checkpoints: checkpoint::Schedule::new(
                options.checkpoint_every,
                options.checkpoint_interval,
            ),
            retention: options.keep_days.map(|d| (d, options.archive_dir.clone())),
        });
        start_checkpointing(&inner);
        if inner.retention.is_some() {
            start_retention(&inner);
        }
        Ok(inner)
    }

    /// Makes a checkpoint if the logs moved since the last one and it is due: `every` records
    /// or `interval` since it (or there is none yet); with `force`, now.
    pub(crate) async fn checkpoint(&self, force: bool) -> Result<Option<Checkpoint>> {
        (self.checkpoints)
            .make(&self.writer, &self.pool, &self.path, force)
            .await
    }

    /// See [`crate::Store::archive`].
    pub(crate) async fn archive(&self, before: i64, out: &Path) -> Result<Option<ArchiveSummary>> {
        archive::run(&self.writer, &self.path, before, out).await
    }

    /// The store a background task serves, unless it was dropped or closed.
    pub(crate) fn live(weak: &std::sync::Weak<Inner>) -> Option<Arc<Self>> {
        let inner = weak.upgrade()?;
        let closed = inner
            .checkpoints
            .closed
            .load(std::sync::atomic::Ordering::Acquire);
        (!closed).then_some(inner)
    }

    /// Appends a record (checked and encoded) and returns its id once it is committed.
    pub(crate) async fn append(
        self: &Arc<Self>,
        record: Box<crate::record::Encoded>,
    ) -> Result<i64> {
        let id = self.writer.append(record).await?;
        if self.writer.note_tail(1) {
            start_moving(self);
        }
        let c = &self.checkpoints;
        if c.since.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == c.every {
            c.wake.notify_one();
        }
        Ok(id)
    }

    /// Moves the audit tail into the indexed log, so a query that follows sees every record
    /// committed so far.
    pub(crate) async fn settled(&self) -> Result<&SqlitePool> {
        self.writer.settle().await?;
        Ok(&self.pool)
    }

    /// Writes everything queued, stops the writer and closes the file.
    pub(crate) async fn close(&self) {
        // What this process appended is covered now if a checkpoint is due; otherwise by the
        // next process's.
        let c = &self.checkpoints;
        if !c.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            if let Err(e) = self.checkpoint(false).await {
                tracing::warn!(error = %e, "no audit checkpoint was made on close");
            }
            c.wake.notify_one();
        }
        if let Some(indexer) = &self.indexer {
            indexer.close().await;
        }
        self.writer.close().await;
        self.pool.close().await;
    }
}

/// Makes a signed checkpoint whenever one is due (see [`StoreOptions::checkpoint_every`]),
/// until the store is dropped or closed.
fn start_checkpointing(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let (wake, interval) = (inner.checkpoints.wake.clone(), inner.checkpoints.interval);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(interval) => {}
            }
            let Some(inner) = Inner::live(&weak) else {
                return;
            };
            match inner.checkpoint(false).await {
                Ok(_) => {}
                Err(StoreError::WriterClosed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "no audit checkpoint was made; the next try is in {interval:?}")
                }
            }
        }
    });
}

/// Every hour (the first time a minute after opening), archives what `keep_days` no longer
/// keeps into `archive_dir/audit-<time>.jsonl`.
fn start_retention(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    tokio::spawn(async move {
        let mut wait = Duration::from_secs(60);
        loop {
            tokio::time::sleep(wait).await;
            wait = Duration::from_secs(3600);
            let Some(inner) = Inner::live(&weak) else {
                return;
            };
            let Some((days, dir)) = inner.retention.clone() else {
                return;
            };
            archive::keep_days_pass(days, &dir, async |before, out| {
                inner.archive(before, out).await
            })
            .await;
        }
    });
}

/// Moves the audit tail into the indexed log in the background, a batch at a time, until it
/// is empty: at once while a whole batch waits, otherwise after [`MOVE_AFTER`] (so that a
/// quiet stream of calls still moves in batches).
fn start_moving(inner: &Arc<Inner>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        // No runtime to move on: the next query, open or close moves the tail.
        inner.writer.move_done();
        return;
    };
    let store = Arc::downgrade(inner);
    runtime.spawn(async move {
        loop {
            let Some(inner) = store.upgrade() else { return };
            if inner.writer.tail_len() < writer::MOVE_BATCH as u64 {
                drop(inner);
                tokio::time::sleep(MOVE_AFTER).await;
            }
            let Some(inner) = store.upgrade() else { return };
            let again = match inner.writer.move_some().await {
                Ok(n) if n > 0 && inner.writer.tail_len() > 0 => true,
                Ok(_) => inner.writer.move_done(),
                Err(StoreError::WriterClosed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "the audit tail was not moved; the next read or move tries again");
                    inner.writer.move_done()
                }
            };
            if !again {
                return;
            }
        }
    });
}

/// Creates the file with owner-only permissions if it does not exist: the log holds what agents
/// sent and received.
pub(crate) fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| StoreError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// `path` with `suffix` added to its file name: the files kept beside the database
/// (`<database>.lock`, `.tail`, `.search`, `.audit-key`, `.checkpoints`, `-wal`).
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Takes the exclusive lock on `<database>.lock` (created owner-only beside the database), waiting
/// for another process that holds it. Released when the returned file is dropped.
async fn open_lock(db: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = beside(db, ".lock");
    let io = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io)?;
    tokio::task::spawn_blocking(move || file.lock().map(|()| file))
        .await
        .map_err(|e| io(std::io::Error::other(e)))?
        .map_err(io)
}

fn classify(path: &Path, e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        // SQLITE_NOTADB
        if db.code().as_deref() == Some("26") || db.message().contains("file is not a database") {
            return StoreError::NotADatabase {
                path: path.to_owned(),
            };
        }
    }
    StoreError::Sqlx(e)
}

async fn refuse_newer_schema(pool: &SqlitePool, path: &Path) -> Result<()> {
    let has_table: Option<i64> = sqlx::query(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(pool)
    .await
    .map_err(|e| classify(path, e))?
    .map(|r| r.try_get(0))
    .transpose()?;
    if has_table.is_none() {
        return Ok(());
    }
    let found: Option<i64> =
        sqlx::query("SELECT MAX(version) FROM _sqlx_migrations WHERE success = 1")
            .fetch_one(pool)
            .await?
            .try_get(0)?;
    let supported = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    match found {
        Some(found) if found > supported => Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found,
            supported,
        }),
        _ => Ok(()),
    }
}
