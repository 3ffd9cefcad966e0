//! Retention on the team store: `audit archive` and `[audit] keep_days` as on SQLite (see
//! `archive`), over the writers' chains. An archive (format 2) holds a prefix of every chain:
//! each chain's records that started before the cut, from where its last archive ended. It is
//! written from one snapshot, read back and verified, recorded (`audit_archives` and
//! `audit_archive_chains`, migration 0003), and only then are its records removed; the schema
//! refuses to remove any record no recorded archive holds. One replica archives at a time (an
//! advisory lock); a removal a crash cut short is finished by the next archive or open.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::TryStreamExt as _;
use serde_json::{Map, Value};
use sqlx::{Connection as _, PgConnection, Row as _};

use crate::archive::{self, ArchiveHeader, ArchiveSummary, ArchivedChain, Segment};
use crate::chain::{AUDIT_COLUMNS, hex};
use crate::checkpoint::SigningKey;
use crate::error::{Result, StoreError};
use crate::pg::PgStore;

/// Records removed per statement, so appends and reads go on between them.
const REMOVE_BATCH: i64 = 2000;

/// Archives the records that started before `before` into `out` (which must not exist), signed
/// with `key`; `host` is where the file is. `None` if no record is that old.
pub(crate) async fn run(
    store: &PgStore,
    key: &SigningKey,
    host: &str,
    before: i64,
    out: &Path,
) -> Result<Option<ArchiveSummary>> {
    let partial = archive::partial_for(out)?;
    // A session of its own: the lock is held as long as it is, and let go with it.
    let mut conn = store.pool.acquire().await?.detach();
    let result = async {
        sqlx::query("SELECT pg_advisory_lock(hashtextextended('toolwarden retention', 0))")
            .execute(&mut conn)
            .await?;
        finish_cut(&mut conn).await?;
        let created_at = crate::checkpoint::now_us();
        match write(&mut conn, key, created_at, before, &partial).await {
            Ok(Some(_)) => {}
            Ok(None) => return Ok(None),
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        }
        let report = archive::seal(&partial, out).await?;
        record(&mut conn, &report.header, host, out).await?;
        let removed = finish_cut(&mut conn).await?;
        // The removed rows' space made reusable now, not when autovacuum gets round to it: until
        // then every walk of the log (`audit verify`) still reads them.
        if let Err(e) = sqlx::query("VACUUM (ANALYZE) audit_log").execute(&mut conn).await {
            tracing::warn!(error = %e, "the audit log was not vacuumed after archiving; autovacuum will");
        }
        Ok(Some(ArchiveSummary {
            path: out.to_owned(),
            header: report.header,
            removed,
        }))
    }
    .await;
    let _ = conn.close().await;
    result
}

/// Where one chain is cut: its records `first` to `last` started before the cut.
struct Cut {
    chain: String,
    first: i64,
    last: i64,
}

/// Writes every chain's records that started before `before` (from one snapshot) to `out`,
/// created owner-only; `None` if there are none.
async fn write(
    conn: &mut PgConnection,
    key: &SigningKey,
    created_at: i64,
    before: i64,
    out: &Path,
) -> Result<Option<ArchiveHeader>> {
    let mut tx = conn
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    // Records finish out of order, so a chain may hold a record that started before the cut
    // after one that did not: each chain is cut before its first record that started after.
    let rows = sqlx::query(
        "SELECT chain, MIN(seq), \
         COALESCE(MIN(seq) FILTER (WHERE started_at >= $1) - 1, MAX(seq)) \
         FROM audit_log GROUP BY chain",
    )
    .bind(before)
    .fetch_all(&mut *tx)
    .await?;
    let mut cuts = Vec::new();
    for r in rows {
        let (chain, first, last): (String, i64, i64) =
            (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
        if last >= first {
            cuts.push(Cut { chain, first, last });
        }
    }
    // The header names the chains in byte order, whatever the database's collation.
    cuts.sort_by(|a, b| a.chain.cmp(&b.chain));
    if cuts.is_empty() {
        return Ok(None);
    }
    let (mut chains, mut ids) = (Vec::with_capacity(cuts.len()), (i64::MAX, i64::MIN));
    for c in &cuts {
        let r = sqlx::query(
            "SELECT MIN(id), MAX(id), \
             (SELECT prev FROM audit_log WHERE chain = $1 AND seq = $2), \
             (SELECT hash FROM audit_log WHERE chain = $1 AND seq = $3) \
             FROM audit_log WHERE chain = $1 AND seq BETWEEN $2 AND $3",
        )
        .bind(&c.chain)
        .bind(c.first)
        .bind(c.last)
        .fetch_one(&mut *tx)
        .await?;
        let missing = |seq: i64| StoreError::Corrupt {
            what: format!("audit log, record {seq} of chain {}", c.chain),
            message: "it is missing: run `toolwarden audit verify`".to_owned(),
        };
        let prev: Vec<u8> = r
            .try_get::<Option<_>, _>(2)?
            .ok_or_else(|| missing(c.first))?;
        let last_hash: Vec<u8> = r
            .try_get::<Option<_>, _>(3)?
            .ok_or_else(|| missing(c.last))?;
        ids = (
            ids.0
                .min(r.try_get::<Option<i64>, _>(0)?.unwrap_or(i64::MAX)),
            ids.1
                .max(r.try_get::<Option<i64>, _>(1)?.unwrap_or(i64::MIN)),
        );
        chains.push(ArchivedChain {
            chain: c.chain.clone(),
            first_seq: c.first,
            last_seq: c.last,
            prev: hex(&prev),
            last_hash: hex(&last_hash),
            records: crate::codec::count(c.last - c.first + 1),
        });
    }
    let mut header = ArchiveHeader {
        toolwarden_archive: 2,
        created_at,
        before,
        first_id: ids.0,
        last_id: ids.1,
        prev: String::new(),
        last_hash: String::new(),
        records: chains.iter().map(|c| c.records).sum(),
        chains,
        public_key: String::new(),
        signature: String::new(),
    };
    let mut file = archive::ArchiveFile::create(out, &mut header, key)?;
    let names = archive::columns(true);
    let ints = crate::pg_verify::integer_columns();
    let sql = format!(
        "SELECT id, chain, seq, prev, hash, {AUDIT_COLUMNS}, output FROM audit_log \
         WHERE chain = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq"
    );
    for c in &cuts {
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(&c.chain)
            .bind(c.first)
            .bind(c.last)
            .fetch(&mut *tx);
        while let Some(r) = rows.try_next().await? {
            let mut object = Map::with_capacity(names.len());
            object.insert("id".into(), r.try_get::<i64, _>(0)?.into());
            object.insert("chain".into(), r.try_get::<String, _>(1)?.into());
            object.insert("seq".into(), r.try_get::<i64, _>(2)?.into());
            object.insert("prev".into(), hex(&r.try_get::<Vec<u8>, _>(3)?).into());
            object.insert("hash".into(), hex(&r.try_get::<Vec<u8>, _>(4)?).into());
            for (i, (name, int)) in names[5..].iter().zip(&ints).enumerate() {
                let v: Value = if *int {
                    r.try_get::<i64, _>(5 + i)?.into()
                } else {
                    r.try_get::<Option<String>, _>(5 + i)?.into()
                };
                object.insert((*name).to_owned(), v);
            }
            let output: Option<String> = r.try_get(5 + ints.len())?;
            object.insert("output".into(), output.into());
            file.record(object)?;
        }
    }
    file.finish()?;
    tx.commit().await?;
    Ok(Some(header))
}

/// Records a verified archive: its header and the part of each chain it holds.
async fn record(conn: &mut PgConnection, h: &ArchiveHeader, host: &str, out: &Path) -> Result<()> {
    let blob = |text: &str| crate::chain::unhex(text).unwrap_or_default();
    let mut tx = conn.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO audit_archives (format, created_at, before, first_id, last_id, records, \
         public_key, signature, host, file) VALUES (2, $1, $2, $3, $4, $5, $6, $7, $8, $9) \
         RETURNING id",
    )
    .bind(h.created_at)
    .bind(h.before)
    .bind(h.first_id)
    .bind(h.last_id)
    .bind(i64::try_from(h.records).unwrap_or(i64::MAX))
    .bind(blob(&h.public_key))
    .bind(blob(&h.signature))
    .bind(host)
    .bind(out.to_string_lossy().into_owned())
    .fetch_one(&mut *tx)
    .await?;
    for c in &h.chains {
        sqlx::query(
            "INSERT INTO audit_archive_chains (archive, chain, first_seq, last_seq, records, \
             prev, last_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(&c.chain)
        .bind(c.first_seq)
        .bind(c.last_seq)
        .bind(i64::try_from(c.records).unwrap_or(i64::MAX))
        .bind(blob(&c.prev))
        .bind(blob(&c.last_hash))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// An archive recorded in the team store: its header, the host its file is on and the file.
pub(crate) struct Recorded {
    pub(crate) header: ArchiveHeader,
    pub(crate) host: String,
    pub(crate) file: String,
    /// A format 1 archive (SQLite's, brought by `store migrate`): the chain its records are on.
    pub(crate) chain: Option<String>,
}

/// The archives recorded, oldest first, as their headers.
pub(crate) async fn recorded(conn: &mut PgConnection) -> Result<Vec<Recorded>> {
    let rows = sqlx::query(
        "SELECT a.id, a.created_at, a.before, a.first_id, a.last_id, a.records, a.public_key, \
         a.signature, a.host, a.file, c.chain, c.first_seq, c.last_seq, c.records, c.prev, \
         c.last_hash, a.format FROM audit_archives a \
         JOIN audit_archive_chains c ON c.archive = a.id ORDER BY a.id",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut out: Vec<(i64, Recorded)> = Vec::new();
    for r in &rows {
        let id: i64 = r.try_get(0)?;
        let blob = |i| -> Result<String> { Ok(hex(&r.try_get::<Vec<u8>, _>(i)?)) };
        if out.last().is_none_or(|(last, _)| *last != id) {
            out.push((
                id,
                Recorded {
                    header: ArchiveHeader {
                        toolwarden_archive: 2,
                        created_at: r.try_get(1)?,
                        before: r.try_get(2)?,
                        first_id: r.try_get(3)?,
                        last_id: r.try_get(4)?,
                        prev: String::new(),
                        last_hash: String::new(),
                        records: crate::codec::count(r.try_get(5)?),
                        chains: Vec::new(),
                        public_key: blob(6)?,
                        signature: blob(7)?,
                    },
                    host: r.try_get(8)?,
                    file: r.try_get(9)?,
                    chain: None,
                },
            ));
        }
        let Some((_, a)) = out.last_mut() else {
            continue;
        };
        if r.try_get::<i16, _>(16)? == 1 {
            // SQLite's header: its one run by id, which is the chain's seq.
            a.header.toolwarden_archive = 1;
            a.header.prev = blob(14)?;
            a.header.last_hash = blob(15)?;
            a.chain = Some(r.try_get(10)?);
        } else {
            a.header.chains.push(ArchivedChain {
                chain: r.try_get(10)?,
                first_seq: r.try_get(11)?,
                last_seq: r.try_get(12)?,
                records: crate::codec::count(r.try_get(13)?),
                prev: blob(14)?,
                last_hash: blob(15)?,
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|(_, mut a)| {
            a.header.chains.sort_by(|x, y| x.chain.cmp(&y.chain));
            a
        })
        .collect())
}

/// The recorded archives whose header's signature verifies with a key some writer of this store
/// recorded, with the runs of records each holds; `bad` gets what is wrong with the others.
pub(crate) fn trusted<'a>(
    recorded: &'a [Recorded],
    keys: &dyn Fn(&str) -> bool,
    mut bad: impl FnMut(&'a Recorded, String),
) -> Vec<(&'a Recorded, Vec<Segment>)> {
    let mut good = Vec::new();
    for a in recorded {
        match a.header.check() {
            Err(why) => bad(a, why),
            Ok(_) if !keys(&a.header.public_key) => bad(
                a,
                format!(
                    "it was signed by key {}, which no writer of this store recorded",
                    crate::verify::short(&a.header.public_key)
                ),
            ),
            Ok(mut segments) => {
                for s in &mut segments {
                    s.chain = s.chain.take().or_else(|| a.chain.clone());
                }
                good.push((a, segments));
            }
        }
    }
    good
}

/// The keys writers of this store recorded (hex).
pub(crate) async fn keys(conn: &mut PgConnection) -> Result<std::collections::BTreeSet<String>> {
    Ok(
        sqlx::query_scalar::<_, Vec<u8>>("SELECT public_key FROM audit_keys")
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|k| hex(k))
            .collect(),
    )
}

/// Removes what trusted archives hold and the log still has (all of the newest one's records
/// after an archive, the rest after a crash midway), a batch at a time; returns how many. An
/// archive row whose signature does not verify with a writer's key removes nothing.
pub(crate) async fn finish_cut(conn: &mut PgConnection) -> Result<u64> {
    let recorded = recorded(conn).await?;
    if recorded.is_empty() {
        return Ok(0);
    }
    let keys = keys(conn).await?;
    let good = trusted(
        &recorded,
        &|k| keys.contains(&k.to_ascii_lowercase()),
        |a, why| {
            tracing::error!(
                file = %a.file,
                "an archive record that does not verify ({why}) removes nothing; run `toolwarden audit verify`"
            );
        },
    );
    let mut removed = 0;
    for (_, segments) in good {
        for s in segments {
            let chain = s.chain.as_deref().unwrap_or_default();
            loop {
                let n = sqlx::query(
                    "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log \
                     WHERE chain = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq LIMIT $4)",
                )
                .bind(chain)
                .bind(s.first)
                .bind(s.last)
                .bind(REMOVE_BATCH)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                removed += n;
                if n < REMOVE_BATCH as u64 {
                    break;
                }
            }
        }
    }
    Ok(removed)
}

/// Where each chain's archived part ends: the last seq and hash (from trusted archives).
pub(crate) fn archived_heads(
    good: &[(&Recorded, Vec<Segment>)],
) -> HashMap<String, BTreeMap<i64, Segment>> {
    let mut heads: HashMap<String, BTreeMap<i64, Segment>> = HashMap::new();
    for (_, segments) in good {
        for s in segments {
            heads
                .entry(s.chain.clone().unwrap_or_default())
                .or_default()
                .insert(s.last, s.clone());
        }
    }
    heads
}

/// Every hour (the first time a minute after opening), archives what `keep_days` no longer
/// keeps into `dir/audit-<time>.jsonl`, until the store is dropped.
pub(crate) fn start_retention(store: &Arc<PgStore>, days: u32, dir: std::path::PathBuf) {
    let weak: Weak<PgStore> = Arc::downgrade(store);
    tokio::spawn(async move {
        let mut wait = Duration::from_secs(60);
        loop {
            tokio::time::sleep(wait).await;
            wait = Duration::from_secs(3600);
            let Some(store) = weak.upgrade() else { return };
            if store.is_closed() {
                return;
            }
            archive::keep_days_pass(days, &dir, async |before, out| {
                store.archive(before, out).await
            })
            .await;
        }
    });
}
