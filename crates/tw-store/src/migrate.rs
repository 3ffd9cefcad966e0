//! `toolwarden store migrate --from sqlite:PATH --to postgres://...`: copies a single-user
//! history into a new team store. The source must verify first (a damaged log is not carried
//! into a store others will trust), the target must be empty, and the copy is checked after:
//! every table's rows counted on both sides, and `audit verify` on the target.
//!
//! The audit log keeps its ids, hashes and links: it becomes one chain of the team store
//! (`seq` = id), named after the file it came from; the admin log keeps its single chain. The
//! source's archives are recorded as that chain's, so it starts where they end. The
//! source's signing key is recorded as a writer's key, so the checkpoints it signed still count;
//! the target signs a checkpoint of its own over the copy.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, QueryBuilder, Row as _, SqlitePool};

use crate::error::{Result, StoreError};
use crate::{Store, StoreOptions, VerifyReport};

/// What a migration copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateReport {
    /// Rows copied per table, in the order copied.
    pub tables: Vec<(String, u64)>,
    /// The target's `audit verify` after the copy.
    pub verified: VerifyReport,
}

/// A column's kind, as both schemas store it.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Int,
    Blob,
}
use Kind::{Blob, Int, Text};

/// The tables copied, in an order their references allow, with their columns.
const TABLES: &[(&str, &[(&str, Kind)])] = &[
    (
        "settings",
        &[
            ("key", Text),
            ("value", Text),
            ("updated_at", Int),
            ("updated_by", Text),
        ],
    ),
    (
        "custom_tools",
        &[
            ("name", Text),
            ("spec", Text),
            ("created_at", Int),
            ("updated_at", Int),
        ],
    ),
    (
        "tool_switches",
        &[
            ("tool", Text),
            ("tier", Text),
            ("disabled_at", Int),
            ("disabled_by", Text),
        ],
    ),
    (
        "tool_classifications",
        &[
            ("tool", Text),
            ("definition_hash", Text),
            ("source", Text),
            ("capabilities", Text),
            ("detail", Text),
            ("classified_at", Int),
            ("classified_by", Text),
        ],
    ),
    (
        "skill_overrides",
        &[
            ("skill", Text),
            ("tool", Text),
            ("action", Text),
            ("access_level", Text),
            ("reason", Text),
            ("created_at", Int),
            ("created_by", Text),
        ],
    ),
    (
        "api_tokens",
        &[
            ("id", Int),
            ("agent_id", Text),
            ("token_sha256", Text),
            ("label", Text),
            ("created_at", Int),
            ("created_by", Text),
            ("revoked_at", Int),
            ("revoked_by", Text),
        ],
    ),
    (
        "upstream_pins",
        &[
            ("server", Text),
            ("tool", Text),
            ("definition_hash", Text),
            ("definition", Text),
            ("pinned_at", Int),
            ("pinned_by", Text),
            ("pending_hash", Text),
            ("pending_definition", Text),
            ("pending_since", Int),
        ],
    ),
    // Without their grants first: the two tables name each other (grant_id is set after).
    (
        "confirmations",
        &[
            ("id", Text),
            ("execution_id", Text),
            ("tool", Text),
            ("arguments", Text),
            ("agent_id", Text),
            ("skill", Text),
            ("user_id", Text),
            ("reason", Text),
            ("explanation", Text),
            ("context", Text),
            ("created_at", Int),
            ("expires_at", Int),
            ("state", Text),
            ("resolved_at", Int),
            ("resolved_by", Text),
            ("note", Text),
        ],
    ),
    (
        "memory",
        &[
            ("agent", Text),
            ("skill", Text),
            ("key", Text),
            ("value", Text),
            ("body", Text),
            ("tags", Text),
            ("bytes", Int),
            ("created_at", Int),
            ("updated_at", Int),
            ("expires_at", Int),
        ],
    ),
    (
        "knowledge_entities",
        &[
            ("id", Int),
            ("kind", Text),
            ("name", Text),
            ("description", Text),
            ("properties", Text),
            ("body", Text),
            ("created_at", Int),
            ("created_by", Text),
            ("updated_at", Int),
            ("updated_by", Text),
        ],
    ),
    (
        "knowledge_relations",
        &[
            ("source", Int),
            ("relation", Text),
            ("target", Int),
            ("created_at", Int),
            ("created_by", Text),
        ],
    ),
    (
        "grants",
        &[
            ("id", Text),
            ("tool", Text),
            ("scope", Text),
            ("arguments", Text),
            ("agent_id", Text),
            ("skill", Text),
            ("created_at", Int),
            ("created_by", Text),
            ("expires_at", Int),
            ("revoked_at", Int),
            ("revoked_by", Text),
            ("confirmation_id", Text),
        ],
    ),
    ("rate_events", &[("key", Text), ("at", Int)]),
    (
        "chain_runs",
        &[
            ("id", Text),
            ("chain", Text),
            ("trace_id", Text),
            ("agent_id", Text),
            ("skill", Text),
            ("user_id", Text),
            ("status", Text),
            ("input", Text),
            ("output", Text),
            ("error", Text),
            ("steps", Text),
            ("started_at", Int),
            ("completed_at", Int),
            ("owner", Text),
        ],
    ),
    (
        "admin_log",
        &[
            ("id", Int),
            ("at", Int),
            ("actor", Text),
            ("kind", Text),
            ("summary", Text),
            ("details", Text),
            ("prev", Blob),
            ("hash", Blob),
        ],
    ),
    (
        "audit_log",
        &[
            ("id", Int),
            ("execution_id", Text),
            ("trace_id", Text),
            ("tool", Text),
            ("agent_id", Text),
            ("skill", Text),
            ("user_id", Text),
            ("arguments", Text),
            ("decision", Text),
            ("explanation", Text),
            ("status", Text),
            ("error_code", Text),
            ("error_message", Text),
            ("output", Text),
            ("output_sha256", Text),
            ("output_bytes", Int),
            ("truncated", Int),
            ("started_at", Int),
            ("completed_at", Int),
            ("duration_us", Int),
            ("metadata", Text),
            ("violation_type", Text),
            ("violation_severity", Text),
            ("prev", Blob),
            ("hash", Blob),
        ],
    ),
];

/// Rows read and written per statement.
const BATCH: i64 = 500;

/// A value on its way across.
enum Value {
    Text(Option<String>),
    Int(Option<i64>),
    Blob(Option<Vec<u8>>),
}

/// Copies the SQLite store at `from` into the empty team store at `to` (its local files named
/// after `local`), and verifies the copy.
pub async fn to_team_store(from: &Path, to: &str, local: &Path) -> Result<MigrateReport> {
    if !from.exists() {
        return Err(StoreError::Invalid {
            what: format!("source {}", from.display()),
            message: "there is no such file".to_owned(),
        });
    }
    let source = Store::open(StoreOptions::new(from)).await?;
    let checked = source.verify(Vec::new()).await?;
    if !checked.ok() {
        source.close().await;
        return Err(StoreError::Invalid {
            what: format!("source {}", from.display()),
            message: format!(
                "its audit log does not verify ({} problems, the first: {}); nothing was copied",
                checked.problem_count,
                checked.problems.first().map_or("", |p| p.message.as_str())
            ),
        });
    }
    let key = checked.public_key.clone();
    let pool = match &source.db {
        crate::Db::Sqlite(inner) => inner.settled().await?.clone(),
        crate::Db::Pg(_) => unreachable!("opened from a file"),
    };
    let mut options = StoreOptions::new(local);
    options.url = Some(to.to_owned());
    let target = Store::open(options).await?;
    let crate::Db::Pg(pg) = &target.db else {
        unreachable!("opened from a URL")
    };
    let copied = pg
        .transaction(async |conn| copy(&pool, conn, from, key.as_deref()).await)
        .await;
    source.close().await;
    let tables = match copied {
        Ok(t) => t,
        Err(e) => {
            target.close().await;
            return Err(e);
        }
    };
    target.checkpoint().await?;
    let verified = target.verify(Vec::new()).await?;
    target.close().await;
    let audit = tables
        .iter()
        .find(|(t, _)| t == "audit_log")
        .map_or(0, |(_, n)| *n);
    if !verified.ok() || verified.audit_records != audit {
        return Err(StoreError::Corrupt {
            what: format!("the copy in {}", crate::pg::redact(to)),
            message: format!(
                "it does not verify: {} of {audit} records read, {} problems",
                verified.audit_records, verified.problem_count
            ),
        });
    }
    Ok(MigrateReport { tables, verified })
}

/// Copies every table inside the target's transaction; refuses a target that holds anything.
async fn copy(
    from: &SqlitePool,
    to: &mut PgConnection,
    path: &Path,
    key: Option<&str>,
) -> Result<Vec<(String, u64)>> {
    for (table, _) in TABLES {
        let n: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(&mut *to)
                .await?;
        if n > 0 {
            return Err(StoreError::Invalid {
                what: "target team store".to_owned(),
                message: format!("its {table} table has {n} rows; migrate into an empty database"),
            });
        }
    }
    let chain = format!("sqlite:{}", path.display());
    sqlx::query("INSERT INTO audit_chains (chain, started_at, host) VALUES ($1, $2, 'migrated')")
        .bind(&chain)
        .bind(crate::checkpoint::now_us())
        .execute(&mut *to)
        .await?;
    if let Some(key) = key.and_then(crate::chain::unhex) {
        sqlx::query(
            "INSERT INTO audit_keys (public_key, host, first_seen) VALUES ($1, 'migrated', $2) \
             ON CONFLICT (public_key) DO NOTHING",
        )
        .bind(key)
        .bind(crate::checkpoint::now_us())
        .execute(&mut *to)
        .await?;
    }
    let mut copied = Vec::with_capacity(TABLES.len());
    for (table, columns) in TABLES {
        let n = copy_table(from, to, table, columns, &chain).await?;
        let source: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(from)
                .await?;
        if i64::try_from(n).ok() != Some(source) {
            return Err(StoreError::Corrupt {
                what: format!("the copy of {table}"),
                message: format!("{n} rows copied of {source}"),
            });
        }
        copied.push(((*table).to_owned(), n));
    }
    copy_archives(from, to, &chain).await?;
    // The references between confirmations and grants, and the ids' sequences past the copy
    // (and past the archived records: an id is never given twice).
    let links: Vec<(String, String)> =
        sqlx::query_as("SELECT id, grant_id FROM confirmations WHERE grant_id IS NOT NULL")
            .fetch_all(from)
            .await?;
    for (id, grant) in links {
        sqlx::query("UPDATE confirmations SET grant_id = $1 WHERE id = $2")
            .bind(grant)
            .bind(id)
            .execute(&mut *to)
            .await?;
    }
    for (table, past) in [
        ("audit_log", "(SELECT MAX(last_id) FROM audit_archives)"),
        ("api_tokens", "1"),
        ("knowledge_entities", "1"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
             GREATEST((SELECT MAX(id) FROM {table}), {past}, 1))"
        )))
        .execute(&mut *to)
        .await?;
    }
    Ok(copied)
}

/// Records the source's archives (format 1, signed by its key) as archives of the chain its log
/// became, so the copy's chain starts where they end and `audit verify` checks them; the files
/// stay where they are, on this host.
async fn copy_archives(from: &SqlitePool, to: &mut PgConnection, chain: &str) -> Result<()> {
    let rows = sqlx::query(
        "SELECT created_at, before, first_id, last_id, prev, last_hash, records, public_key, \
         signature, file FROM audit_archives ORDER BY last_id",
    )
    .fetch_all(from)
    .await?;
    let host = crate::pg::hostname();
    for r in &rows {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO audit_archives (format, created_at, before, first_id, last_id, records, \
             public_key, signature, host, file) VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8, $9) \
             RETURNING id",
        )
        .bind(r.try_get::<i64, _>("created_at")?)
        .bind(r.try_get::<i64, _>("before")?)
        .bind(r.try_get::<i64, _>("first_id")?)
        .bind(r.try_get::<i64, _>("last_id")?)
        .bind(r.try_get::<i64, _>("records")?)
        .bind(r.try_get::<Vec<u8>, _>("public_key")?)
        .bind(r.try_get::<Vec<u8>, _>("signature")?)
        .bind(&host)
        .bind(r.try_get::<String, _>("file")?)
        .fetch_one(&mut *to)
        .await?;
        sqlx::query(
            "INSERT INTO audit_archive_chains (archive, chain, first_seq, last_seq, records, \
             prev, last_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(chain)
        .bind(r.try_get::<i64, _>("first_id")?)
        .bind(r.try_get::<i64, _>("last_id")?)
        .bind(r.try_get::<i64, _>("records")?)
        .bind(r.try_get::<Vec<u8>, _>("prev")?)
        .bind(r.try_get::<Vec<u8>, _>("last_hash")?)
        .execute(&mut *to)
        .await?;
    }
    Ok(())
}

/// Copies one table in batches of [`BATCH`] rows, by rowid.
async fn copy_table(
    from: &SqlitePool,
    to: &mut PgConnection,
    table: &str,
    columns: &[(&str, Kind)],
    chain: &str,
) -> Result<u64> {
    let names: Vec<&str> = columns.iter().map(|(c, _)| *c).collect();
    let list = names.join(", ");
    let audit = table == "audit_log";
    let mut after = i64::MIN;
    let mut copied = 0u64;
    loop {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT rowid AS _rowid, {list} FROM {table} WHERE rowid > $1 ORDER BY rowid LIMIT $2"
        )))
        .bind(after)
        .bind(BATCH)
        .fetch_all(from)
        .await?;
        let Some(last) = rows.last() else {
            return Ok(copied);
        };
        after = last.try_get("_rowid")?;
        let mut values = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut row = Vec::with_capacity(columns.len());
            for (c, kind) in columns {
                row.push(match kind {
                    Text => Value::Text(r.try_get(*c)?),
                    Int => Value::Int(r.try_get(*c)?),
                    Blob => Value::Blob(r.try_get(*c)?),
                });
            }
            values.push(row);
        }
        let mut qb = QueryBuilder::new(format!(
            "INSERT INTO {table} ({list}{}) {}",
            if audit { ", chain, seq" } else { "" },
            if audit {
                "OVERRIDING SYSTEM VALUE "
            } else {
                ""
            }
        ));
        qb.push_values(&values, |mut b, row| {
            let mut id = None;
            for v in row {
                match v {
                    Value::Text(t) => b.push_bind(t.clone()),
                    Value::Int(i) => {
                        id = id.or(*i);
                        b.push_bind(*i)
                    }
                    Value::Blob(x) => b.push_bind(x.clone()),
                };
            }
            if audit {
                // The whole log is one chain, its ids its places (the log starts at 1).
                b.push_bind(chain.to_owned()).push_bind(id);
            }
        });
        qb.build().execute(&mut *to).await?;
        copied += rows.len() as u64;
    }
}
