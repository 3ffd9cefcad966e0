//! Toolwarden's durable state: the append-only audit log, the persisted custom tools, and what
//! the policy engine must share between processes and keep across restarts: settings, the
//! append-only admin log, confirmation requests, grants, rate-limit counts and the tools switched
//! off per license tier.
//!
//! Two backends behind one [`Store`]: one SQLite file (the embedded default; see `sqlite`), or a
//! PostgreSQL database that several replicas share (the team store; see `pg`). The SQL for the
//! shared state is written once for both (see `dual`); the pipeline does not know which it has.

#[macro_use]
mod dual;
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
mod knowledge;
mod memory;
mod migrate;
mod options;
mod pg;
mod pg_append;
mod pg_archive;
mod pg_chain;
mod pg_live;
mod pg_verify;
mod pins;
mod query;
mod rate;
mod record;
mod search;
mod settings;
mod sqlite;
mod switches;
mod tail;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod timeline;
mod tokens;
mod tools;
mod verify;
mod writer;

use std::path::Path;
use std::sync::Arc;

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
pub use checkpoint::{ChainHead, Checkpoint, read_file as read_checkpoints};
pub use confirmations::{
    ConfirmationQuery, ConfirmationRow, ConfirmationState, NewConfirmation, Resolution,
    ResolveOutcome,
};
pub use doctor::StoreReport;
pub use error::{Result, StoreError};
pub use filter::{AuditFilter, DEFAULT_PAGE};
pub use grants::{GrantQuery, GrantRow, GrantScope, NewGrant};
pub use knowledge::{
    EntityOutcome, EntityRef, EntityRow, KnowledgeSearch, MAX_RELATIONS_SHOWN, NewEntity,
    RelationRow, valid_word as valid_knowledge_word,
};
pub use memory::{
    MAX_QUERY_TERMS as MAX_MEMORY_QUERY_TERMS, MemoryEntry, MemoryQuota, MemoryScope, MemorySearch,
    NewMemory, PutOutcome, QuotaKind, valid_tag as valid_memory_tag,
};
pub use migrate::{MigrateReport, to_team_store as migrate_to_team_store};
pub use options::{StoreOptions, Synchronous};
pub use pg::StoreNotice;
pub use pg_live::{MAX_MESSAGE as MAX_LIVE_MESSAGE, TeamChannel};
pub use pins::{PinRow, PinState, SeenDefinition};
pub use query::{
    AuditExportFormat, AuditPage, AuditQuery, MAX_PAGE, TEXT_INDEX_WINDOW, TEXT_SCAN_WINDOW,
    UsageReport, UsageRow,
};
pub use rate::{RateCheck, RateOutcome, RateWindow};
pub use record::{
    AuditRecord, AuditRow, AuditViolation, JsonText, Severity, output_digest, sha256_hex,
};
pub use search::TextIndexStatus;
pub use settings::Setting;
pub use switches::{SwitchChange, SwitchOutcome, ToolSwitchRow};
pub use timeline::{DEFAULT_SPAN_US, MAX_BUCKETS, TimelineCell, TimelineWindow};
pub use tokens::{ApiTokenRow, NewApiToken};
pub use tools::StoredTool;
pub use verify::{Head, MAX_PROBLEMS, Problem, ProblemKind, VerifyReport};

use record::Encoded;
use sqlite::Inner;
pub(crate) use sqlite::{beside, create_private};

/// An open store. Cheap to clone; all clones share the writer and the read pool.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
    /// The database file, or for a team store the path its local files are named after (the
    /// signing key, `<path>.audit-key`).
    path: Arc<Path>,
}

#[derive(Debug, Clone)]
enum Db {
    Sqlite(Arc<Inner>),
    Pg(Arc<pg::PgStore>),
}

/// Runs a dual module's function (see `dual`) on this store's backend: `read` on the read pool,
/// `conn` on a write connection, `tx` in one write transaction.
macro_rules! on_backend {
    ($store:ident, read $m:ident :: $f:ident ( $($a:expr),* $(,)? )) => {
        match &$store.db {
            Db::Sqlite(s) => $m::sqlite::$f(&s.pool $(, $a)*).await,
            Db::Pg(p) => p.read(async |pool| $m::pg::$f(pool $(, $a)*).await).await,
        }
    };
    ($store:ident, conn $m:ident :: $f:ident ( $($a:expr),* $(,)? )) => {
        match &$store.db {
            Db::Sqlite(s) => {
                s.writer.with_conn(async |conn| $m::sqlite::$f(conn $(, $a)*).await).await
            }
            Db::Pg(p) => p.with_conn(async |conn| $m::pg::$f(conn $(, $a)*).await).await,
        }
    };
    ($store:ident, tx $m:ident :: $f:ident ( $($a:expr),* $(,)? )) => {
        match &$store.db {
            Db::Sqlite(s) => {
                s.writer.transaction(async |conn| $m::sqlite::$f(conn $(, $a)*).await).await
            }
            Db::Pg(p) => p.transaction(async |conn| $m::pg::$f(conn $(, $a)*).await).await,
        }
    };
}

impl Store {
    /// Opens the store `options` names: the PostgreSQL database at `options.url` if set (a team
    /// store), otherwise the SQLite file at `options.path` (created and migrated as needed).
    pub async fn open(options: StoreOptions) -> Result<Self> {
        let path: Arc<Path> = Arc::from(options.path.as_path());
        let db = match &options.url {
            Some(url) => {
                let store = Arc::new(pg::PgStore::open(url, &options).await?);
                pg::PgStore::start_checkpointing(&store);
                pg::PgStore::start_probing(&store);
                if let Some(days) = options.keep_days {
                    pg_archive::start_retention(&store, days, options.archive_dir.clone());
                }
                Db::Pg(store)
            }
            None => Db::Sqlite(Inner::open(options).await?),
        };
        Ok(Self { db, path })
    }

    /// The SQLite store's parts, for tests that reach into them.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Inner {
        match &self.db {
            Db::Sqlite(inner) => inner,
            Db::Pg(_) => panic!("a test reached for SQLite's parts on a team store"),
        }
    }

    /// Whether this is a team store (PostgreSQL).
    pub fn is_team_store(&self) -> bool {
        matches!(self.db, Db::Pg(_))
    }

    /// What other replicas change, pushed as it happens: `None` on SQLite, whose processes on
    /// one data directory look for changes themselves (the change counters, the confirmation
    /// rows).
    pub fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<StoreNotice>> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Pg(p) => Some(p.subscribe()),
        }
    }

    /// The team's live channel, on which replicas show each other the calls they run: `None` on
    /// SQLite, whose processes on one data directory watch each other through its live sockets.
    pub fn team_channel(&self) -> Option<TeamChannel> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Pg(p) => Some(TeamChannel {
                store: std::sync::Arc::clone(p),
            }),
        }
    }

    /// Makes a signed checkpoint of both logs' heads now and returns it (it goes into the
    /// database and into `<database>.checkpoints`); if nothing was appended since the last one,
    /// returns that one. `None` while both logs are empty.
    pub async fn checkpoint(&self) -> Result<Option<Checkpoint>> {
        match &self.db {
            Db::Sqlite(inner) => inner.checkpoint(true).await,
            Db::Pg(p) => p.checkpoint().await,
        }
    }

    /// Archives the audit records that started before `before` (µs since the epoch) into
    /// `out`, which must not exist; reads the file back and verifies it; records it; and only
    /// then removes those records from the log. `None` if no record is that old.
    pub async fn archive(&self, before: i64, out: &Path) -> Result<Option<ArchiveSummary>> {
        match &self.db {
            Db::Sqlite(inner) => inner.archive(before, out).await,
            Db::Pg(p) => p.archive(before, out).await,
        }
    }

    /// What `toolwarden store doctor` reports: where the store is, whether it answers and how
    /// fast, its schema against this build's, and how far the tail's move, the text index and
    /// the signed checkpoints are behind the newest record.
    pub async fn doctor(&self) -> Result<StoreReport> {
        let inner = match &self.db {
            Db::Sqlite(inner) => inner,
            Db::Pg(p) => return p.doctor().await,
        };
        let known = doctor::Known {
            writable: self.is_healthy(),
            build_schema_version: sqlite::MIGRATOR
                .iter()
                .map(|m| m.version)
                .max()
                .unwrap_or(0),
            text_index: self.text_index().await?,
        };
        doctor::report(&inner.pool, &inner.path, known).await
    }

    /// Recomputes both logs' hash chains, checks every output against its digest and every
    /// checkpoint (the database's, `<database>.checkpoints`, and `saved`) against its signature,
    /// this store's key and the logs; says where each break is.
    pub async fn verify(&self, saved: Vec<Checkpoint>) -> Result<VerifyReport> {
        let path = match &self.db {
            Db::Sqlite(inner) => inner.path.clone(),
            Db::Pg(p) => return p.verify(&saved).await,
        };
        tokio::task::spawn_blocking(move || verify::verify(&path, &saved))
            .await
            .map_err(|e| StoreError::Database(format!("the verifier stopped: {e}")))?
    }

    /// The database file (for a team store, the path its local files are named after).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a record and returns its id once it is committed.
    ///
    /// The record is checked and encoded when this is called, and the future that waits for the
    /// commit holds it on the heap: every governed call's own future (itself moved to the heap
    /// whole when the call starts) carries this one's size.
    pub fn append(
        &self,
        record: AuditRecord,
    ) -> impl std::future::Future<Output = Result<i64>> + Send + '_ {
        // Checked before queueing so a bad kind is refused as such, alone, and never reaches a
        // batch.
        let encoded = match &record.violation {
            Some(v) => codec::check_kind("violation type", &v.kind),
            None => Ok(()),
        }
        .map(|()| Box::new(Encoded::new(record)));
        async move {
            let encoded = encoded?;
            match &self.db {
                Db::Sqlite(inner) => inner.append(encoded).await,
                Db::Pg(p) => p.append(*encoded).await,
            }
        }
    }

    /// Whether the store takes records and its last commit succeeded (on a team store: whether
    /// the database answered the last statement).
    pub fn is_healthy(&self) -> bool {
        match &self.db {
            Db::Sqlite(inner) => inner.writer.is_healthy(),
            Db::Pg(p) => p.is_healthy(),
        }
    }

    /// Commits made so far by this store (each holds one or more records).
    pub fn batches_committed(&self) -> u64 {
        match &self.db {
            Db::Sqlite(inner) => inner.writer.batches(),
            Db::Pg(p) => p.commits.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The record for an execution id.
    pub async fn get(&self, execution_id: &str) -> Result<Option<AuditRow>> {
        match &self.db {
            Db::Sqlite(inner) => query::get(&inner.pool, execution_id).await,
            Db::Pg(p) => p.get(execution_id).await,
        }
    }

    /// One page of records, newest first. A text search reads the rows its text index has not
    /// reached yet directly, at most [`TEXT_SCAN_WINDOW`] ids a page, and at most
    /// [`TEXT_INDEX_WINDOW`] of the index's candidates below them; so it may return a short (even
    /// empty) page that is not the last: follow `next_cursor` until it is absent to see every
    /// match (see [`AuditPage::scanned_to`]).
    pub async fn query(&self, q: &AuditQuery) -> Result<AuditPage> {
        match &self.db {
            Db::Sqlite(inner) => {
                query::page(inner.settled().await?, q, inner.indexer.is_some()).await
            }
            Db::Pg(p) => p.page(q).await,
        }
    }

    /// How far the audit log's text index reaches, if the store keeps one (it is built in the
    /// background, from the oldest record up, and follows new records within a second). A team
    /// store keeps none: PostgreSQL searches the log itself.
    pub async fn text_index(&self) -> Result<Option<TextIndexStatus>> {
        match &self.db {
            Db::Sqlite(inner) if inner.indexer.is_some() => {
                Ok(Some(search::status(&inner.pool).await?))
            }
            _ => Ok(None),
        }
    }

    /// How many records match (the cursor applies; the limit does not).
    pub async fn count(&self, q: &AuditQuery) -> Result<u64> {
        match &self.db {
            Db::Sqlite(inner) => {
                query::count(inner.settled().await?, q, inner.indexer.is_some()).await
            }
            Db::Pg(p) => p.count(q).await,
        }
    }

    /// Writes every matching record, oldest first, and returns how many.
    pub async fn export<W: AsyncWrite + Unpin + ?Sized>(
        &self,
        q: &AuditQuery,
        format: AuditExportFormat,
        out: &mut W,
    ) -> Result<u64> {
        match &self.db {
            Db::Sqlite(inner) => {
                query::sqlite::export(inner.settled().await?, q, format, out).await
            }
            Db::Pg(p) => query::pg::export(&p.pool, q, format, out).await,
        }
    }

    /// Calls per tool, per caller and per skill among the matching records.
    pub async fn usage_report(&self, q: &AuditQuery) -> Result<UsageReport> {
        match &self.db {
            Db::Sqlite(inner) => query::sqlite::usage(inner.settled().await?, q).await,
            Db::Pg(p) => p.read(async |pool| query::pg::usage(pool, q).await).await,
        }
    }

    /// Calls per tool and per bucket of the window, with the denials among them (only
    /// non-zero cells are listed).
    pub async fn timeline(&self, w: &TimelineWindow) -> Result<Vec<TimelineCell>> {
        let (since, until, width) = (w.since, w.until, w.bucket_us);
        match &self.db {
            Db::Sqlite(inner) => {
                timeline::sqlite::timeline(inner.settled().await?, since, until, width).await
            }
            Db::Pg(p) => {
                p.read(async |pool| timeline::pg::timeline(pool, since, until, width).await)
                    .await
            }
        }
    }

    /// Saves (or replaces) a custom tool.
    pub async fn save_custom_tool(&self, spec: &ToolSpec, now_us: i64) -> Result<()> {
        let tool = tools::encode(spec)?;
        on_backend!(self, conn tools::save(&tool, now_us))
    }

    /// Replaces custom tool `old` with `spec` in one transaction: the old row goes and the new one
    /// is saved together, or neither happens. `spec` may rename the tool; a new name already
    /// taken by another stored tool is refused (`Invalid`), and so is an `old` that is not stored.
    pub async fn replace_custom_tool(&self, old: &str, spec: &ToolSpec, now_us: i64) -> Result<()> {
        let tool = tools::encode(spec)?;
        on_backend!(self, tx tools::replace(old, &tool, now_us))
    }

    /// Deletes a custom tool; returns whether it existed.
    pub async fn delete_custom_tool(&self, name: &str) -> Result<bool> {
        on_backend!(self, conn tools::delete(name))
    }

    /// Every stored custom tool, by name. A spec that no longer loads is returned as its error.
    pub async fn custom_tools(&self) -> Result<Vec<StoredTool>> {
        on_backend!(self, read tools::list())
    }

    /// How many times each table other processes' runtimes follow has changed (see
    /// [`WATCHED_TABLES`]): one query of a few rows, for polling.
    pub async fn change_counters(&self) -> Result<ChangeCounters> {
        on_backend!(self, read changes::read())
    }

    /// A setting, if it was ever set.
    pub async fn get_setting(&self, key: &str) -> Result<Option<Setting>> {
        on_backend!(self, read settings::get(key))
    }

    /// Every setting, by key.
    pub async fn settings(&self) -> Result<Vec<Setting>> {
        on_backend!(self, read settings::list())
    }

    /// Sets (or replaces) a setting, recording who changed it and when.
    pub async fn set_setting(&self, key: &str, value: &str, by: &str, now_us: i64) -> Result<()> {
        let setting = Setting {
            key: key.to_owned(),
            value: value.to_owned(),
            updated_at: now_us,
            updated_by: by.to_owned(),
        };
        on_backend!(self, conn settings::set(&setting))
    }

    /// Appends an administrative change to the admin log and returns its id once committed.
    pub async fn append_admin_event(&self, event: AdminEvent) -> Result<i64> {
        let details = admin::encode(&event)?;
        on_backend!(self, tx admin::append(&event, details))
    }

    /// Administrative changes, newest first. For the next page pass the last row's id as
    /// `cursor`; a page shorter than `limit` is the last.
    pub async fn admin_events(&self, q: &AdminQuery) -> Result<Vec<AdminEventRow>> {
        on_backend!(self, read admin::list(q))
    }

    /// Every tool switched off for a tier, by tool and then tier.
    pub async fn tool_switches(&self) -> Result<Vec<ToolSwitchRow>> {
        on_backend!(self, read switches::list())
    }

    /// Switches a tool on or off for one tier, atomically across processes, and appends `event`
    /// to the admin log in the same transaction if (and only if) that changed anything.
    pub async fn switch_tool(
        &self,
        change: &SwitchChange,
        event: &AdminEvent,
    ) -> Result<SwitchOutcome> {
        let details = admin::encode(event)?;
        on_backend!(self, tx switches::apply(change, event, details))
    }

    /// Records the definition an upstream server gives for a tool now: pinned if it is new,
    /// quarantined (kept as pending) if it differs from the pin.
    pub async fn observe_upstream_tool(&self, seen: &SeenDefinition) -> Result<PinState> {
        on_backend!(self, tx pins::observe(seen))
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
        on_backend!(self, tx pins::accept(server, tool, by, event, details))
    }

    /// Every pinned upstream tool, by server and tool.
    pub async fn upstream_pins(&self) -> Result<Vec<PinRow>> {
        on_backend!(self, read pins::list())
    }

    /// Stores an agent's token (its hash) with the admin-log entry `event`, in one transaction.
    pub async fn issue_api_token(
        &self,
        token: &NewApiToken,
        event: &AdminEvent,
    ) -> Result<ApiTokenRow> {
        let details = admin::encode(event)?;
        on_backend!(self, tx tokens::insert(token, event, details))
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
        on_backend!(self, tx tokens::revoke(agent, at, by, event, details))
    }

    /// Agents' tokens, oldest first; revoked ones too if asked.
    pub async fn api_tokens(&self, include_revoked: bool) -> Result<Vec<ApiTokenRow>> {
        on_backend!(self, read tokens::list(include_revoked))
    }

    /// The agent the live token with this SHA-256 stands for, if any.
    pub async fn api_token_agent(&self, token_sha256: &str) -> Result<Option<String>> {
        on_backend!(self, read tokens::agent(token_sha256))
    }

    /// Every tool's capability classification, by tool.
    pub async fn classifications(&self) -> Result<Vec<ClassificationRow>> {
        on_backend!(self, read capabilities::classifications())
    }

    /// One tool's capability classification.
    pub async fn classification(&self, tool: &str) -> Result<Option<ClassificationRow>> {
        on_backend!(self, read capabilities::classification(tool))
    }

    /// Writes (inserts or replaces) a tool's classification. A machine's (static, llm,
    /// heuristic) never replaces an administrator's: then nothing is written and the answer is
    /// `false`, atomically across processes. An administrator's replaces anything and is
    /// appended to the admin log (`tool_classified`) in the same transaction.
    pub async fn put_classification(&self, row: &ClassificationRow) -> Result<bool> {
        let encoded = capabilities::encode_classification(row)?;
        on_backend!(self, tx capabilities::put_classification(row, encoded))
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
        on_backend!(self, tx capabilities::delete_classification(tool, actor, at))
    }

    /// Every administrator's skill override, by skill and then tool.
    pub async fn skill_overrides(&self) -> Result<Vec<SkillOverrideRow>> {
        on_backend!(self, read capabilities::overrides())
    }

    /// Sets (inserts or replaces) a skill override and appends it to the admin log
    /// (`skill_override_set`) in the same transaction; returns the override it replaced.
    pub async fn put_skill_override(
        &self,
        row: &SkillOverrideRow,
    ) -> Result<Option<SkillOverrideRow>> {
        capabilities::check_override(row)?;
        on_backend!(self, tx capabilities::put_override(row))
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
        on_backend!(self, tx capabilities::delete_override(skill, tool, actor, at))
    }

    /// Calls recorded under each skill, with those the skill's envelope refused and the latest
    /// call's start, by skill. Calls made under no skill are not counted.
    pub async fn skill_usage(&self) -> Result<Vec<SkillUsageRow>> {
        match &self.db {
            Db::Sqlite(inner) => capabilities::sqlite::skill_usage(inner.settled().await?).await,
            Db::Pg(p) => {
                p.read(async |pool| capabilities::pg::skill_usage(pool).await)
                    .await
            }
        }
    }

    /// Holds a call for approval.
    pub async fn create_confirmation(&self, c: NewConfirmation) -> Result<()> {
        on_backend!(self, conn confirmations::create(&c))
    }

    /// A confirmation request by id.
    pub async fn confirmation(&self, id: &str) -> Result<Option<ConfirmationRow>> {
        on_backend!(self, read confirmations::get(id))
    }

    /// Confirmation requests: pending ones oldest first, then settled ones newest first. A
    /// pending request past its deadline is listed as pending until
    /// [`expire_confirmations`](Self::expire_confirmations) or an answer marks it expired.
    pub async fn confirmations(&self, q: &ConfirmationQuery) -> Result<Vec<ConfirmationRow>> {
        on_backend!(self, read confirmations::list(q))
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
        on_backend!(self, tx confirmations::resolve(id, resolution, now_us))
    }

    /// Marks every pending request whose deadline is at or before `now_us` expired, and returns
    /// their ids, sorted.
    pub async fn expire_confirmations(&self, now_us: i64) -> Result<Vec<String>> {
        on_backend!(self, conn confirmations::expire(None, now_us))
    }

    /// Creates a standing approval given at `now_us`.
    pub async fn create_grant(&self, grant: NewGrant, now_us: i64) -> Result<GrantRow> {
        on_backend!(self, conn grants::create(grant, now_us))
    }

    /// A grant by id, revoked or not.
    pub async fn grant(&self, id: &str) -> Result<Option<GrantRow>> {
        on_backend!(self, read grants::get(id))
    }

    /// Grants, oldest first.
    pub async fn grants(&self, q: &GrantQuery) -> Result<Vec<GrantRow>> {
        on_backend!(self, read grants::list(q))
    }

    /// Revokes a grant; false if there is no such grant or it was already revoked.
    pub async fn revoke_grant(&self, id: &str, by: &str, now_us: i64) -> Result<bool> {
        on_backend!(self, conn grants::revoke(id, by, now_us))
    }

    /// Counts a call against every check's key if each key is under all its limits at `now_us`;
    /// otherwise counts nothing and says which limit was hit. Exact under concurrency and across
    /// processes (and replicas) sharing the store, and kept across restarts.
    pub async fn rate_acquire(&self, checks: &[RateCheck], now_us: i64) -> Result<RateOutcome> {
        rate::check(checks)?;
        if checks.is_empty() {
            return Ok(RateOutcome::Admitted);
        }
        on_backend!(self, tx rate::acquire(checks, now_us))
    }

    /// Writes an agent's memory entry if its namespace still fits `quota` with it; expired
    /// entries (of every namespace) are removed first and count for nothing.
    pub async fn memory_put(
        &self,
        scope: &MemoryScope,
        entry: &NewMemory,
        quota: MemoryQuota,
        now_us: i64,
    ) -> Result<PutOutcome> {
        memory::check(scope, &entry.key, &entry.tags)?;
        on_backend!(self, tx memory::put(scope, entry, quota, now_us))
    }

    /// An agent's memory entry, unless missing or expired at `now_us`.
    pub async fn memory_get(
        &self,
        scope: &MemoryScope,
        key: &str,
        now_us: i64,
    ) -> Result<Option<MemoryEntry>> {
        on_backend!(self, read memory::get(scope, key, now_us))
    }

    /// Deletes an agent's memory entry; whether there was one.
    pub async fn memory_delete(&self, scope: &MemoryScope, key: &str, now_us: i64) -> Result<bool> {
        on_backend!(self, tx memory::delete(scope, key, now_us))
    }

    /// Searches an agent's memory (see [`MemorySearch`]).
    pub async fn memory_search(
        &self,
        scope: &MemoryScope,
        q: &MemorySearch,
        now_us: i64,
    ) -> Result<Vec<MemoryEntry>> {
        memory::check(scope, "-", &q.tags)?;
        on_backend!(self, read memory::search(scope, q, now_us))
    }

    /// How many entries and bytes an agent's memory namespace holds at `now_us`.
    pub async fn memory_usage(&self, scope: &MemoryScope, now_us: i64) -> Result<(u64, u64)> {
        on_backend!(self, read memory::usage(scope, now_us))
    }

    /// Writes an entity of the knowledge store and its relations as `agent`, merging into one
    /// that exists; nothing when a relation names an entity that does not exist.
    pub async fn knowledge_put(
        &self,
        entity: &NewEntity,
        agent: &str,
        now_us: i64,
    ) -> Result<EntityOutcome> {
        knowledge::check(entity)?;
        on_backend!(self, tx knowledge::put(entity, agent, now_us))
    }

    /// Searches the knowledge store (see [`KnowledgeSearch`]).
    pub async fn knowledge_search(&self, q: &KnowledgeSearch) -> Result<Vec<EntityRow>> {
        on_backend!(self, read knowledge::search(q))
    }

    /// Records a chain run as started.
    pub async fn start_chain_run(&self, run: NewChainRun) -> Result<()> {
        match &self.db {
            Db::Sqlite(inner) => {
                inner
                    .writer
                    .write_in_place(|conn| chains::start(conn, &run))
                    .await
            }
            Db::Pg(p) => {
                p.with_conn(async |conn| chains::pg::start_run(conn, &run).await)
                    .await
            }
        }
    }

    /// Records how a run ended; false if it was not running (already ended or unknown).
    pub async fn finish_chain_run(&self, id: &str, end: ChainRunEnd) -> Result<bool> {
        chains::check_end(&end)?;
        match &self.db {
            Db::Sqlite(inner) => {
                inner
                    .writer
                    .write_in_place(|conn| chains::finish(conn, id, &end))
                    .await
            }
            Db::Pg(p) => {
                p.with_conn(async |conn| chains::pg::finish_run(conn, id, &end).await)
                    .await
            }
        }
    }

    /// The chain runs held as running (live in some process, or cut short by a crash).
    pub async fn running_chain_runs(&self) -> Result<Vec<RunningChainRun>> {
        on_backend!(self, read chains::running())
    }

    /// A chain run by id.
    pub async fn chain_run(&self, id: &str) -> Result<Option<ChainRunRow>> {
        on_backend!(self, read chains::get(id))
    }

    /// Chain runs, newest first.
    pub async fn chain_runs(&self, q: &ChainRunQuery) -> Result<Vec<ChainRunRow>> {
        on_backend!(self, read chains::list(q))
    }

    /// The audit rows of a run's steps, oldest first.
    pub async fn chain_step_rows(&self, run_id: &str) -> Result<Vec<AuditRow>> {
        match &self.db {
            Db::Sqlite(inner) => chains::sqlite::step_rows(inner.settled().await?, run_id).await,
            Db::Pg(p) => {
                p.read(async |pool| chains::pg::step_rows(pool, run_id).await)
                    .await
            }
        }
    }

    /// Writes everything queued, stops the writer and closes the file (or the pool). Appends
    /// after this fail with [`StoreError::WriterClosed`]. Safe to call more than once.
    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite(inner) => inner.close().await,
            Db::Pg(p) => p.close().await,
        }
    }
}

#[cfg(test)]
mod archive_tests;
#[cfg(test)]
#[macro_use]
mod backends_tests;
#[cfg(test)]
mod capabilities_tests;
#[cfg(test)]
mod changes_tests;
#[cfg(test)]
mod knowledge_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod migrate_tests;
#[cfg(test)]
mod pg_archive_tests;
#[cfg(test)]
mod pg_verify_tests;
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
