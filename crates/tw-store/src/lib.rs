//! Toolwarden's durable state in one SQLite file: the append-only audit log, written by a single
//! group-commit writer, the persisted custom tools, and what the policy engine must share between
//! processes and keep across restarts: settings, the append-only admin log, confirmation
//! requests, grants, rate-limit counts and the tools switched off per license tier.
//!
//! The file runs in WAL mode so readers (the CLI, the desktop app's log viewer) never block the
//! writer. Every write goes through the one write connection the audit writer holds (see
//! `writer`); reads use a small pool. The schema is migrated forward on open; a file from a newer
//! build is refused rather than touched.

mod admin;
mod archive;
mod capabilities;
mod chain;
mod chains;
mod changes;
mod checkpoint;
mod codec;
mod confirmations;
mod doctor;
mod error;
mod filter;
mod grants;
mod options;
mod pins;
mod query;
mod rate;
mod record;
mod search;
mod settings;
mod switches;
mod timeline;
mod tokens;
mod tools;
mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Row as _, SqlitePool};
use tokio::io::AsyncWrite;
use tw_core::ToolSpec;

pub use admin::{AdminEvent, AdminEventRow, AdminQuery};
pub use archive::{ArchiveHeader, ArchiveReport, ArchiveSummary, verify_file as verify_archive};
pub use capabilities::{
    CapabilityScore, ClassificationRow, ClassificationSource, OverrideAction, SkillOverrideRow,
    SkillUsageRow,
};
pub use chains::{ChainRunEnd, ChainRunQuery, ChainRunRow, NewChainRun, RunningChainRun};
pub use changes::{ChangeCounters, WATCHED_TABLES};
pub use checkpoint::{Checkpoint, read_file as read_checkpoints};
pub use confirmations::{
    ConfirmationQuery, ConfirmationRow, ConfirmationState, NewConfirmation, Resolution,
    ResolveOutcome,
};
pub use doctor::StoreReport;
pub use error::{Result, StoreError};
pub use filter::{AuditFilter, DEFAULT_PAGE};
pub use grants::{GrantQuery, GrantRow, GrantScope, NewGrant};
pub use options::{StoreOptions, Synchronous};
pub use pins::{PinRow, PinState, SeenDefinition};
pub use query::{
    AuditExportFormat, AuditPage, AuditQuery, MAX_PAGE, TEXT_INDEX_WINDOW, TEXT_SCAN_WINDOW,
    UsageReport, UsageRow,
};
pub use rate::{RateCheck, RateOutcome, RateWindow};
pub use record::{AuditRecord, AuditRow, AuditViolation, Severity, output_digest, sha256_hex};
pub use search::TextIndexStatus;
pub use settings::Setting;
pub use switches::{SwitchChange, SwitchOutcome, ToolSwitchRow};
pub use timeline::{DEFAULT_SPAN_US, MAX_BUCKETS, TimelineCell, TimelineWindow};
pub use tokens::{ApiTokenRow, NewApiToken};
pub use tools::StoredTool;
pub use verify::{Head, MAX_PROBLEMS, Problem, ProblemKind, VerifyReport};

use record::Encoded;
use writer::Writer;

/// How long records wait in the audit tail for company before a background move takes them
/// (a batch waiting moves at once).
const MOVE_AFTER: Duration = Duration::from_millis(50);

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// An open store. Cheap to clone; all clones share the writer and the read pool.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    pool: SqlitePool,
    writer: Writer,
    /// The text index's builder, when the store keeps one.
    indexer: Option<search::Indexer>,
    checkpoints: checkpoint::Schedule,
    /// `keep_days` and where archives go.
    retention: Option<(u32, PathBuf)>,
}

impl Store {
    /// Opens (creating and migrating as needed) the database at `options.path`.
    pub async fn open(options: StoreOptions) -> Result<Self> {
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
        let pool = SqlitePoolOptions::new()
            .after_connect(move |conn, _| {
                let attach = attach.clone();
                Box::pin(async move {
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
        let store = Self {
            inner: Arc::new(Inner {
                path,
                pool,
                writer,
                indexer,
                checkpoints: checkpoint::Schedule::new(
                    options.checkpoint_every,
                    options.checkpoint_interval,
                ),
                retention: options.keep_days.map(|d| (d, options.archive_dir.clone())),
            }),
        };
        store.start_checkpointing();
        if store.inner.retention.is_some() {
            store.start_retention();
        }
        Ok(store)
    }

    /// Makes a signed checkpoint whenever one is due (see [`StoreOptions::checkpoint_every`]),
    /// until the store is dropped or closed.
    fn start_checkpointing(&self) {
        let weak = Arc::downgrade(&self.inner);
        let (wake, interval) = (
            self.inner.checkpoints.wake.clone(),
            self.inner.checkpoints.interval,
        );
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep(interval) => {}
                }
                let Some(store) = Store::live(&weak) else {
                    return;
                };
                match store.checkpoint_if_due().await {
                    Ok(_) => {}
                    Err(StoreError::WriterClosed) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "no audit checkpoint was made; the next try is in {interval:?}")
                    }
                }
            }
        });
    }

    /// Makes a checkpoint if the logs moved since the last one and it is due: `every` records
    /// or `interval` since it (or there is none yet).
    async fn checkpoint_if_due(&self) -> Result<Option<Checkpoint>> {
        let inner = &self.inner;
        (inner.checkpoints)
            .make(&inner.writer, &inner.pool, &inner.path, false)
            .await
    }

    /// Makes a signed checkpoint of both logs' heads now and returns it (it goes into the
    /// database and into `<database>.checkpoints`); if nothing was appended since the last one,
    /// returns that one. `None` while both logs are empty.
    pub async fn checkpoint(&self) -> Result<Option<Checkpoint>> {
        let inner = &self.inner;
        (inner.checkpoints)
            .make(&inner.writer, &inner.pool, &inner.path, true)
            .await
    }

    /// Archives the audit records that started before `before` (µs since the epoch) into
    /// `out`, which must not exist; reads the file back and verifies it; records it; and only
    /// then removes those records from the log. `None` if no record is that old.
    pub async fn archive(&self, before: i64, out: &Path) -> Result<Option<ArchiveSummary>> {
        archive::run(&self.inner.writer, &self.inner.path, before, out).await
    }

    /// Every hour (the first time a minute after opening), archives what `keep_days` no longer
    /// keeps into `archive_dir/audit-<time>.jsonl`.
    fn start_retention(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut wait = Duration::from_secs(60);
            loop {
                tokio::time::sleep(wait).await;
                wait = Duration::from_secs(3600);
                let Some(store) = Store::live(&weak) else {
                    return;
                };
                let Some((days, dir)) = store.inner.retention.clone() else {
                    return;
                };
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    tracing::warn!(error = %e, dir = %dir.display(), "audit retention: no archive directory");
                    continue;
                }
                let now = checkpoint::now_us();
                let before = now - i64::from(days) * 86_400_000_000;
                match store
                    .archive(before, &dir.join(format!("audit-{now}.jsonl")))
                    .await
                {
                    Ok(Some(s)) => {
                        tracing::info!(file = %s.path.display(), records = s.header.records, removed = s.removed, "audit records past keep_days archived")
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "audit retention: nothing was archived or removed")
                    }
                }
            }
        });
    }

    /// The store a background task serves, unless it was dropped or closed.
    fn live(weak: &std::sync::Weak<Inner>) -> Option<Self> {
        let inner = weak.upgrade()?;
        let closed = inner
            .checkpoints
            .closed
            .load(std::sync::atomic::Ordering::Acquire);
        (!closed).then_some(Self { inner })
    }

    /// What `toolwarden store doctor` reports: where the store is, whether it answers and how
    /// fast, its schema against this build's, and how far the tail's move, the text index and
    /// the signed checkpoints are behind the newest record.
    pub async fn doctor(&self) -> Result<StoreReport> {
        let known = doctor::Known {
            writable: self.is_healthy(),
            build_schema_version: MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0),
            text_index: self.text_index().await?,
        };
        doctor::report(&self.inner.pool, &self.inner.path, known).await
    }

    /// Recomputes both logs' hash chains, checks every output against its digest and every
    /// checkpoint (the database's, `<database>.checkpoints`, and `saved`) against its signature,
    /// this store's key and the logs; says where each break is.
    pub async fn verify(&self, saved: Vec<Checkpoint>) -> Result<VerifyReport> {
        let path = self.inner.path.clone();
        tokio::task::spawn_blocking(move || verify::verify(&path, &saved))
            .await
            .map_err(|e| StoreError::Database(format!("the verifier stopped: {e}")))?
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Appends a record and returns its id once it is committed.
    pub async fn append(&self, record: AuditRecord) -> Result<i64> {
        // Checked before queueing so a bad kind is refused as such, alone, and never reaches a
        // batch.
        if let Some(v) = &record.violation {
            codec::check_kind("violation type", &v.kind)?;
        }
        let id = self.inner.writer.append(Encoded::new(record)).await?;
        if self.inner.writer.note_tail(1) {
            self.start_moving();
        }
        let c = &self.inner.checkpoints;
        if c.since.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == c.every {
            c.wake.notify_one();
        }
        Ok(id)
    }

    /// Moves the audit tail into the indexed log in the background, a batch at a time, until it
    /// is empty: at once while a whole batch waits, otherwise after [`MOVE_AFTER`] (so that a
    /// quiet stream of calls still moves in batches).
    fn start_moving(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to move on: the next query, open or close moves the tail.
            self.inner.writer.move_done();
            return;
        };
        let store = Arc::downgrade(&self.inner);
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

    /// Moves the audit tail into the indexed log, so a query that follows sees every record
    /// committed so far.
    async fn settled(&self) -> Result<&SqlitePool> {
        self.inner.writer.settle().await?;
        Ok(&self.inner.pool)
    }

    /// Whether the store takes records and its last commit succeeded.
    pub fn is_healthy(&self) -> bool {
        self.inner.writer.is_healthy()
    }

    /// Commits made so far (each holds one or more records).
    pub fn batches_committed(&self) -> u64 {
        self.inner.writer.batches()
    }

    /// The record for an execution id.
    pub async fn get(&self, execution_id: &str) -> Result<Option<AuditRow>> {
        query::get(&self.inner.pool, execution_id).await
    }

    /// One page of records, newest first. A text search reads the rows its text index has not
    /// reached yet directly, at most [`TEXT_SCAN_WINDOW`] ids a page, and at most
    /// [`TEXT_INDEX_WINDOW`] of the index's candidates below them; so it may return a short (even
    /// empty) page that is not the last: follow `next_cursor` until it is absent to see every
    /// match (see [`AuditPage::scanned_to`]).
    pub async fn query(&self, q: &AuditQuery) -> Result<AuditPage> {
        query::page(self.settled().await?, q, self.inner.indexer.is_some()).await
    }

    /// How far the audit log's text index reaches, if the store keeps one (it is built in the
    /// background, from the oldest record up, and follows new records within a second).
    pub async fn text_index(&self) -> Result<Option<TextIndexStatus>> {
        if self.inner.indexer.is_none() {
            return Ok(None);
        }
        Ok(Some(search::status(&self.inner.pool).await?))
    }

    /// How many records match (the cursor applies; the limit does not).
    pub async fn count(&self, q: &AuditQuery) -> Result<u64> {
        query::count(self.settled().await?, q, self.inner.indexer.is_some()).await
    }

    /// Writes every matching record, oldest first, and returns how many.
    pub async fn export<W: AsyncWrite + Unpin + ?Sized>(
        &self,
        q: &AuditQuery,
        format: AuditExportFormat,
        out: &mut W,
    ) -> Result<u64> {
        query::export(self.settled().await?, q, format, out).await
    }

    /// Calls per tool, per caller and per skill among the matching records.
    pub async fn usage_report(&self, q: &AuditQuery) -> Result<UsageReport> {
        query::usage(self.settled().await?, q).await
    }

    /// Calls per tool and per bucket of the window, with the denials among them (only
    /// non-zero cells are listed).
    pub async fn timeline(&self, w: &TimelineWindow) -> Result<Vec<TimelineCell>> {
        timeline::timeline(self.settled().await?, w.since, w.until, w.bucket_us).await
    }

    /// Saves (or replaces) a custom tool.
    pub async fn save_custom_tool(&self, spec: &ToolSpec, now_us: i64) -> Result<()> {
        let tool = tools::encode(spec)?;
        self.inner
            .writer
            .with_conn(async |conn| tools::save(conn, &tool, now_us).await)
            .await
    }

    /// Replaces custom tool `old` with `spec` in one transaction: the old row goes and the new one
    /// is saved together, or neither happens. `spec` may rename the tool; a new name already
    /// taken by another stored tool is refused (`Invalid`), and so is an `old` that is not stored.
    pub async fn replace_custom_tool(&self, old: &str, spec: &ToolSpec, now_us: i64) -> Result<()> {
        let tool = tools::encode(spec)?;
        self.inner
            .writer
            .transaction(async |conn| tools::replace(conn, old, &tool, now_us).await)
            .await
    }

    /// Deletes a custom tool; returns whether it existed.
    pub async fn delete_custom_tool(&self, name: &str) -> Result<bool> {
        self.inner
            .writer
            .with_conn(async |conn| tools::delete(conn, name).await)
            .await
    }

    /// Every stored custom tool, by name. A spec that no longer loads is returned as its error.
    pub async fn custom_tools(&self) -> Result<Vec<StoredTool>> {
        tools::list(&self.inner.pool).await
    }

    /// How many times each table other processes' runtimes follow has changed (see
    /// [`WATCHED_TABLES`]): one query of a few rows, for polling.
    pub async fn change_counters(&self) -> Result<ChangeCounters> {
        changes::read(&self.inner.pool).await
    }

    /// A setting, if it was ever set.
    pub async fn get_setting(&self, key: &str) -> Result<Option<Setting>> {
        settings::get(&self.inner.pool, key).await
    }

    /// Every setting, by key.
    pub async fn settings(&self) -> Result<Vec<Setting>> {
        settings::list(&self.inner.pool).await
    }

    /// Sets (or replaces) a setting, recording who changed it and when.
    pub async fn set_setting(&self, key: &str, value: &str, by: &str, now_us: i64) -> Result<()> {
        let setting = Setting {
            key: key.to_owned(),
            value: value.to_owned(),
            updated_at: now_us,
            updated_by: by.to_owned(),
        };
        self.inner
            .writer
            .with_conn(async |conn| settings::set(conn, &setting).await)
            .await
    }

    /// Appends an administrative change to the admin log and returns its id once committed.
    pub async fn append_admin_event(&self, event: AdminEvent) -> Result<i64> {
        let details = admin::encode(&event)?;
        self.inner
            .writer
            .transaction(async |conn| admin::append(conn, &event, details).await)
            .await
    }

    /// Administrative changes, newest first. For the next page pass the last row's id as
    /// `cursor`; a page shorter than `limit` is the last.
    pub async fn admin_events(&self, q: &AdminQuery) -> Result<Vec<AdminEventRow>> {
        admin::list(&self.inner.pool, q).await
    }

    /// Every tool switched off for a tier, by tool and then tier.
    pub async fn tool_switches(&self) -> Result<Vec<ToolSwitchRow>> {
        switches::list(&self.inner.pool).await
    }

    /// Switches a tool on or off for one tier, atomically across processes, and appends `event`
    /// to the admin log in the same transaction if (and only if) that changed anything.
    pub async fn switch_tool(
        &self,
        change: &SwitchChange,
        event: &AdminEvent,
    ) -> Result<SwitchOutcome> {
        let details = admin::encode(event)?;
        self.inner
            .writer
            .transaction(async |conn| switches::apply(conn, change, event, details).await)
            .await
    }

    /// Records the definition an upstream server gives for a tool now: pinned if it is new,
    /// quarantined (kept as pending) if it differs from the pin.
    pub async fn observe_upstream_tool(&self, seen: &SeenDefinition) -> Result<PinState> {
        self.inner
            .writer
            .transaction(async |conn| pins::observe(conn, seen).await)
            .await
    }

    /// Accepts a quarantined tool's new definition as its pin, with `event` in the admin log;
    /// `None` when nothing waited for review.
    pub async fn accept_upstream_tool(
        &self,
        server: &str,
        tool: &str,
        by: &str,
        event: &AdminEvent,
    ) -> Result<Option<PinRow>> {
        let details = admin::encode(event)?;
        self.inner
            .writer
            .transaction(async |conn| pins::accept(conn, server, tool, by, event, details).await)
            .await
    }

    /// Every pinned upstream tool, by server and tool.
    pub async fn upstream_pins(&self) -> Result<Vec<PinRow>> {
        pins::list(&self.inner.pool).await
    }

    /// Stores an agent's token (its hash) with the admin-log entry `event`, in one transaction.
    pub async fn issue_api_token(
        &self,
        token: &NewApiToken,
        event: &AdminEvent,
    ) -> Result<ApiTokenRow> {
        let details = admin::encode(event)?;
        self.inner
            .writer
            .transaction(async |conn| tokens::insert(conn, token, event, details).await)
            .await
    }

    /// Revokes every live token of `agent` (with `event` in the admin log if any was).
    pub async fn revoke_api_tokens(
        &self,
        agent: &str,
        at: i64,
        by: &str,
        event: &AdminEvent,
    ) -> Result<Vec<ApiTokenRow>> {
        let details = admin::encode(event)?;
        self.inner
            .writer
            .transaction(async |conn| tokens::revoke(conn, agent, at, by, event, details).await)
            .await
    }

    /// Agents' tokens, oldest first; revoked ones too if asked.
    pub async fn api_tokens(&self, include_revoked: bool) -> Result<Vec<ApiTokenRow>> {
        tokens::list(&self.inner.pool, include_revoked).await
    }

    /// The agent the live token with this SHA-256 stands for, if any.
    pub async fn api_token_agent(&self, token_sha256: &str) -> Result<Option<String>> {
        tokens::agent(&self.inner.pool, token_sha256).await
    }

    /// Every tool's capability classification, by tool.
    pub async fn classifications(&self) -> Result<Vec<ClassificationRow>> {
        capabilities::classifications(&self.inner.pool).await
    }

    /// One tool's capability classification.
    pub async fn classification(&self, tool: &str) -> Result<Option<ClassificationRow>> {
        capabilities::classification(&self.inner.pool, tool).await
    }

    /// Writes (inserts or replaces) a tool's classification. A machine's (static, llm,
    /// heuristic) never replaces an administrator's: then nothing is written and the answer is
    /// `false`, atomically across processes. An administrator's replaces anything and is
    /// appended to the admin log (`tool_classified`) in the same transaction.
    pub async fn put_classification(&self, row: &ClassificationRow) -> Result<bool> {
        let encoded = capabilities::encode_classification(row)?;
        self.inner
            .writer
            .transaction(async |conn| capabilities::put_classification(conn, row, encoded).await)
            .await
    }

    /// Removes a tool's classification (an administrator clearing it, or the tool gone); returns
    /// whether there was one. With an `actor`, a removal is appended to the admin log
    /// (`tool_classification_cleared`, at `at`) in the same transaction.
    pub async fn delete_classification(
        &self,
        tool: &str,
        actor: Option<&str>,
        at: i64,
    ) -> Result<bool> {
        self.inner
            .writer
            .transaction(async |conn| {
                capabilities::delete_classification(conn, tool, actor, at).await
            })
            .await
    }

    /// Every administrator's skill override, by skill and then tool.
    pub async fn skill_overrides(&self) -> Result<Vec<SkillOverrideRow>> {
        capabilities::overrides(&self.inner.pool).await
    }

    /// Sets (inserts or replaces) a skill override and appends it to the admin log
    /// (`skill_override_set`) in the same transaction; returns the override it replaced.
    pub async fn put_skill_override(
        &self,
        row: &SkillOverrideRow,
    ) -> Result<Option<SkillOverrideRow>> {
        capabilities::check_override(row)?;
        self.inner
            .writer
            .transaction(async |conn| capabilities::put_override(conn, row).await)
            .await
    }

    /// Removes a skill override and, if there was one, appends its removal to the admin log
    /// (`skill_override_cleared`) in the same transaction; returns it.
    pub async fn delete_skill_override(
        &self,
        skill: &str,
        tool: &str,
        actor: &str,
        at: i64,
    ) -> Result<Option<SkillOverrideRow>> {
        self.inner
            .writer
            .transaction(async |conn| {
                capabilities::delete_override(conn, skill, tool, actor, at).await
            })
            .await
    }

    /// Calls recorded under each skill, with those the skill's envelope refused and the latest
    /// call's start, by skill. Calls made under no skill are not counted.
    pub async fn skill_usage(&self) -> Result<Vec<SkillUsageRow>> {
        capabilities::skill_usage(self.settled().await?).await
    }

    /// Holds a call for approval.
    pub async fn create_confirmation(&self, c: NewConfirmation) -> Result<()> {
        self.inner
            .writer
            .with_conn(async |conn| confirmations::create(conn, &c).await)
            .await
    }

    /// A confirmation request by id.
    pub async fn confirmation(&self, id: &str) -> Result<Option<ConfirmationRow>> {
        confirmations::get(&self.inner.pool, id).await
    }

    /// Confirmation requests: pending ones oldest first, then settled ones newest first. A
    /// pending request past its deadline is listed as pending until
    /// [`expire_confirmations`](Self::expire_confirmations) or an answer marks it expired.
    pub async fn confirmations(&self, q: &ConfirmationQuery) -> Result<Vec<ConfirmationRow>> {
        confirmations::list(&self.inner.pool, q).await
    }

    /// Answers a request, atomically: it changes only if it is still pending and its deadline is
    /// after `now_us`, and the grant, if any, is created in the same transaction. When two
    /// answers race (in this process or another), exactly one gets
    /// [`ResolveOutcome::Resolved`]; the other learns who answered first and when.
    pub async fn resolve_confirmation(
        &self,
        id: &str,
        resolution: Resolution,
        now_us: i64,
    ) -> Result<ResolveOutcome> {
        confirmations::check(id, &resolution)?;
        self.inner
            .writer
            .transaction(async |conn| confirmations::resolve(conn, id, resolution, now_us).await)
            .await
    }

    /// Marks every pending request whose deadline is at or before `now_us` expired, and returns
    /// their ids, sorted.
    pub async fn expire_confirmations(&self, now_us: i64) -> Result<Vec<String>> {
        self.inner
            .writer
            .with_conn(async |conn| confirmations::expire(conn, None, now_us).await)
            .await
    }

    /// Creates a standing approval given at `now_us`.
    pub async fn create_grant(&self, grant: NewGrant, now_us: i64) -> Result<GrantRow> {
        self.inner
            .writer
            .with_conn(async |conn| grants::create(conn, grant, now_us).await)
            .await
    }

    /// A grant by id, revoked or not.
    pub async fn grant(&self, id: &str) -> Result<Option<GrantRow>> {
        grants::get(&self.inner.pool, id).await
    }

    /// Grants, oldest first.
    pub async fn grants(&self, q: &GrantQuery) -> Result<Vec<GrantRow>> {
        grants::list(&self.inner.pool, q).await
    }

    /// Revokes a grant; false if there is no such grant or it was already revoked.
    pub async fn revoke_grant(&self, id: &str, by: &str, now_us: i64) -> Result<bool> {
        self.inner
            .writer
            .with_conn(async |conn| grants::revoke(conn, id, by, now_us).await)
            .await
    }

    /// Counts a call against every check's key if each key is under all its limits at `now_us`;
    /// otherwise counts nothing and says which limit was hit. Exact under concurrency and across
    /// processes sharing the file, and kept across restarts.
    pub async fn rate_acquire(&self, checks: &[RateCheck], now_us: i64) -> Result<RateOutcome> {
        rate::check(checks)?;
        if checks.is_empty() {
            return Ok(RateOutcome::Admitted);
        }
        self.inner
            .writer
            .transaction(async |conn| rate::acquire(conn, checks, now_us).await)
            .await
    }

    /// Records a chain run as started.
    pub async fn start_chain_run(&self, run: NewChainRun) -> Result<()> {
        self.inner
            .writer
            .write_in_place(|conn| chains::start(conn, &run))
            .await
    }

    /// Records how a run ended; false if it was not running (already ended or unknown).
    pub async fn finish_chain_run(&self, id: &str, end: ChainRunEnd) -> Result<bool> {
        chains::check_end(&end)?;
        self.inner
            .writer
            .write_in_place(|conn| chains::finish(conn, id, &end))
            .await
    }

    /// The chain runs held as running (live in some process, or cut short by a crash).
    pub async fn running_chain_runs(&self) -> Result<Vec<RunningChainRun>> {
        chains::running(&self.inner.pool).await
    }

    /// A chain run by id.
    pub async fn chain_run(&self, id: &str) -> Result<Option<ChainRunRow>> {
        chains::get(&self.inner.pool, id).await
    }

    /// Chain runs, newest first.
    pub async fn chain_runs(&self, q: &ChainRunQuery) -> Result<Vec<ChainRunRow>> {
        chains::list(&self.inner.pool, q).await
    }

    /// The audit rows of a run's steps, oldest first.
    pub async fn chain_step_rows(&self, run_id: &str) -> Result<Vec<AuditRow>> {
        chains::step_rows(self.settled().await?, run_id).await
    }

    /// Writes everything queued, stops the writer and closes the file. Appends after this fail
    /// with [`StoreError::WriterClosed`]. Safe to call more than once.
    pub async fn close(&self) {
        // What this process appended is covered now if a checkpoint is due; otherwise by the
        // next process's.
        let c = &self.inner.checkpoints;
        if !c.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            if let Err(e) = self.checkpoint_if_due().await {
                tracing::warn!(error = %e, "no audit checkpoint was made on close");
            }
            c.wake.notify_one();
        }
        if let Some(indexer) = &self.inner.indexer {
            indexer.close().await;
        }
        self.inner.writer.close().await;
        self.inner.pool.close().await;
    }
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
/// (`<database>.lock`, `.search`, `.audit-key`, `.checkpoints`, `-wal`).
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

#[cfg(test)]
mod archive_tests;
#[cfg(test)]
mod capabilities_tests;
#[cfg(test)]
mod changes_tests;
#[cfg(test)]
mod pins_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tokens_tests;
#[cfg(test)]
mod verify_tests;
