//! `toolwarden store doctor`: what the store is and how it is doing, in one report: where it is,
//! whether it answers and how fast, its schema against this build's, and how far each thing that
//! follows the audit log behind its newest record is (the tail's move, the text index, the last
//! signed checkpoint).

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sqlx::{Row as _, SqlitePool};

use crate::error::Result;
use crate::search::TextIndexStatus;

/// The store's state, as `store doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreReport {
    /// `sqlite`.
    pub backend: String,
    /// The database file.
    pub location: String,
    /// Bytes on disk, the write-ahead log included.
    pub size_bytes: u64,
    /// SQLite's journal mode (`wal`).
    pub journal_mode: String,
    /// Median time of a trivial query on the read pool, over five (µs).
    pub read_latency_us: u64,
    /// Whether the last write succeeded and the store takes records.
    pub writable: bool,
    /// The newest migration applied to the file.
    pub schema_version: i64,
    /// The newest migration this build knows (the file is migrated on open, so these agree).
    pub build_schema_version: i64,
    /// The newest audit record's id (0: none).
    pub newest_record: i64,
    /// Records committed but not yet moved into the indexed log.
    pub tail_records: u64,
    /// How far the text index reaches, if the store keeps one.
    pub text_index: Option<TextIndexStatus>,
    /// The newest signed checkpoint: when, and the audit record it covers up to.
    pub last_checkpoint: Option<(i64, i64)>,
    /// Records after it (linked, not yet signed).
    pub unsigned_records: u64,
    /// Archives recorded (their records left the log).
    pub archives: u64,
    /// The signing key's public half (hex), if the store has made one.
    pub public_key: Option<String>,
}

impl StoreReport {
    /// Whether nothing needs a person: the store takes records and runs this build's schema.
    pub fn ok(&self) -> bool {
        self.writable && self.schema_version == self.build_schema_version
    }
}

/// What the store knows of itself besides the pool.
pub(crate) struct Known {
    pub(crate) writable: bool,
    pub(crate) build_schema_version: i64,
    pub(crate) text_index: Option<TextIndexStatus>,
}

pub(crate) async fn report(pool: &SqlitePool, db: &Path, known: Known) -> Result<StoreReport> {
    let mut samples = Vec::with_capacity(5);
    for _ in 0..5 {
        let t = Instant::now();
        sqlx::query("SELECT 1").fetch_one(pool).await?;
        samples.push(t.elapsed());
    }
    samples.sort_unstable();
    let row = sqlx::query(
        "SELECT (SELECT MAX(version) FROM _sqlx_migrations WHERE success = 1), \
         MAX((SELECT IFNULL(MAX(id), 0) FROM audit_log), (SELECT IFNULL(MAX(id), 0) FROM audit_tail), \
             (SELECT IFNULL(MAX(last_id), 0) FROM audit_archives)), \
         (SELECT COUNT(*) FROM audit_tail), \
         (SELECT created_at FROM audit_checkpoints ORDER BY id DESC LIMIT 1), \
         (SELECT audit_head_id FROM audit_checkpoints ORDER BY id DESC LIMIT 1), \
         (SELECT COUNT(*) FROM audit_archives)",
    )
    .fetch_one(pool)
    .await?;
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await?;
    let newest: i64 = row.try_get(1)?;
    let checkpoint: Option<(i64, i64)> = row
        .try_get::<Option<i64>, _>(3)?
        .zip(row.try_get::<Option<i64>, _>(4)?);
    let size_bytes = ["", "-wal", ".tail", ".tail-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(crate::beside(db, suffix)).ok())
        .map(|m| m.len())
        .sum();
    let public_key = crate::checkpoint::SigningKey::read(&crate::checkpoint::key_path(db))
        .ok()
        .flatten()
        .map(|k| k.public_hex());
    Ok(StoreReport {
        backend: "sqlite".to_owned(),
        location: db.display().to_string(),
        size_bytes,
        journal_mode,
        read_latency_us: samples[2].as_micros() as u64,
        writable: known.writable,
        schema_version: row.try_get::<Option<i64>, _>(0)?.unwrap_or(0),
        build_schema_version: known.build_schema_version,
        newest_record: newest,
        tail_records: crate::codec::count(row.try_get(2)?),
        text_index: known.text_index,
        unsigned_records: crate::codec::count(newest - checkpoint.map_or(0, |(_, head)| head)),
        last_checkpoint: checkpoint,
        archives: crate::codec::count(row.try_get(5)?),
        public_key,
    })
}
