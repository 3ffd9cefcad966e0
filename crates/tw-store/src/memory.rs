//! Agents' memory (migrations 0016 and PostgreSQL's 0004): values an agent keeps between calls,
//! by key, in a namespace per agent and skill, with full-text search over them (FTS5 on SQLite,
//! a `tsvector` on PostgreSQL) and entries that expire when asked.
//!
//! The quotas are the caller's numbers, checked here, in the transaction that writes, under a
//! lock on the namespace: two writers racing for the last slot cannot both get it, and a write
//! that does not fit changes nothing. What search reads of a value ([`body`]) is decided here too,
//! once for both backends.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::codec;
use crate::error::{Result, StoreError};

/// Words of a search query that count; more are ignored.
pub const MAX_QUERY_TERMS: usize = 32;

/// Whose memory: an agent's, under one skill (`""` for calls made under none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryScope {
    /// The agent.
    pub agent: String,
    /// The skill, or `""`.
    pub skill: String,
}

/// How much one namespace may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryQuota {
    /// Entries.
    pub max_entries: u64,
    /// Bytes over all entries (each entry's key, value and tags).
    pub max_bytes: u64,
}

/// An entry to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// The key (1 to 256 characters).
    pub key: String,
    /// The value.
    pub value: Value,
    /// Tags: lowercase words without spaces, used to filter searches.
    pub tags: Vec<String>,
    /// When it expires (µs since the epoch); `None`: kept until deleted.
    pub expires_at: Option<i64>,
}

impl NewMemory {
    /// What the entry counts against the namespace's byte quota: its key, its value's JSON and
    /// its tags.
    pub fn bytes(&self) -> u64 {
        let value = self.value.to_string().len();
        let tags: usize = self.tags.iter().map(|t| t.len() + 1).sum();
        (self.key.len() + value + tags) as u64
    }
}

/// An entry as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Its tags.
    pub tags: Vec<String>,
    /// What it counts against the quota.
    pub bytes: u64,
    /// When it was first written (µs since the epoch).
    pub created_at: i64,
    /// When it was last written.
    pub updated_at: i64,
    /// When it expires.
    pub expires_at: Option<i64>,
    /// How well it matched a search (higher is better; comparable within one search only).
    pub score: Option<f64>,
    /// The matching passage of its text, matched words in `[` `]`.
    pub snippet: Option<String>,
}

/// Which quota a write did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaKind {
    /// The number of entries.
    Entries,
    /// The bytes.
    Bytes,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PutOutcome {
    /// Written.
    Stored {
        /// Whether the key was new (or its old entry had expired).
        created: bool,
        /// The namespace's entries after the write.
        entries: u64,
        /// The namespace's bytes after the write.
        bytes: u64,
    },
    /// Not written: it would not fit.
    OverQuota {
        /// Which quota.
        quota: QuotaKind,
        /// The quota.
        limit: u64,
        /// What the namespace would hold with the write.
        needed: u64,
    },
}

/// A search of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySearch {
    /// Words to look for (any of them; entries with more of them rank higher). `None` or no
    /// words: the most recently written entries.
    pub query: Option<String>,
    /// Only entries carrying every one of these tags.
    pub tags: Vec<String>,
    /// Only keys starting with this.
    pub prefix: Option<String>,
    /// At most this many.
    pub limit: u32,
}

/// What search reads of a value: a string itself; otherwise every string, number and object key
/// in it, in order, a space between each.
pub(crate) fn body(value: &Value) -> String {
    fn push(out: &mut String, s: &str) {
        if !out.is_empty() {
            out.push(' ');
        }
        // PostgreSQL's text holds no NUL (the value's JSON escapes it; its body drops it).
        out.extend(s.chars().map(|c| if c == '\0' { ' ' } else { c }));
    }
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => push(out, s),
            Value::Number(n) => push(out, &n.to_string()),
            Value::Bool(_) | Value::Null => {}
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => {
                for (k, v) in map {
                    push(out, k);
                    walk(v, out);
                }
            }
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// A query's words: runs of letters and digits, at most [`MAX_QUERY_TERMS`]. Everything else
/// separates them, so nothing an agent writes is read as the engines' query syntax.
pub(crate) fn terms(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(MAX_QUERY_TERMS)
        .map(str::to_lowercase)
        .collect()
}

/// Words as one full-text query that reads none of the engine's syntax: each quoted, any of
/// them matching (`or` for PostgreSQL's `websearch_to_tsquery`, which never fails on its input;
/// `OR` for FTS5's `MATCH`).
pub(crate) fn any_of(words: &[String], pg: bool) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    quoted.join(if pg { " or " } else { " OR " })
}

/// Tags as stored: each between spaces, so one is found by `LIKE '% tag %'`.
fn tags_column(tags: &[String]) -> String {
    let mut s = String::from(" ");
    for t in tags {
        s.push_str(t);
        s.push(' ');
    }
    s
}

/// `LIKE`'s special characters escaped with `\`.
fn like_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The lock a namespace's writes take.
fn lock_name(scope: &MemoryScope) -> String {
    // PostgreSQL's text has no NUL: the agent's length keeps the two names apart.
    format!(
        "toolwarden memory {}:{}{}",
        scope.agent.len(),
        scope.agent,
        scope.skill
    )
}

const COLUMNS: &str = "m.key, m.value, m.tags, m.bytes, m.created_at, m.updated_at, m.expires_at";

dual! {
    /// Removes every expired entry, of every namespace (the expiry index finds them).
    async fn purge(conn: &mut Conn, now_us: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM memory WHERE expires_at IS NOT NULL AND expires_at <= $1")
            .bind(now_us)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }

    /// Writes `entry` if the namespace still fits its quota with it. Runs in the caller's
    /// transaction.
    pub(crate) async fn put(
        conn: &mut Conn,
        scope: &MemoryScope,
        entry: &NewMemory,
        quota: MemoryQuota,
        now_us: i64,
    ) -> Result<PutOutcome> {
        purge(conn, now_us).await?;
        conn.lock_key(&lock_name(scope)).await?;
        let (others, other_bytes): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM memory \
             WHERE agent = $1 AND skill = $2 AND key <> $3",
        )
        .bind(scope.agent.clone())
        .bind(scope.skill.clone())
        .bind(entry.key.clone())
        .fetch_one(&mut *conn)
        .await?;
        let (others, other_bytes) = (codec::count(others), codec::count(other_bytes));
        let bytes = entry.bytes();
        if others + 1 > quota.max_entries {
            return Ok(PutOutcome::OverQuota {
                quota: QuotaKind::Entries,
                limit: quota.max_entries,
                needed: others + 1,
            });
        }
        if other_bytes + bytes > quota.max_bytes {
            return Ok(PutOutcome::OverQuota {
                quota: QuotaKind::Bytes,
                limit: quota.max_bytes,
                needed: other_bytes + bytes,
            });
        }
        let existed: Option<i64> =
            sqlx::query_scalar("SELECT id FROM memory WHERE agent = $1 AND skill = $2 AND key = $3")
                .bind(scope.agent.clone())
                .bind(scope.skill.clone())
                .bind(entry.key.clone())
                .fetch_optional(&mut *conn)
                .await?;
        sqlx::query(
            "INSERT INTO memory (agent, skill, key, value, body, tags, bytes, created_at, \
             updated_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) \
             ON CONFLICT (agent, skill, key) DO UPDATE SET value = excluded.value, \
             body = excluded.body, tags = excluded.tags, bytes = excluded.bytes, \
             updated_at = excluded.updated_at, expires_at = excluded.expires_at",
        )
        .bind(scope.agent.clone())
        .bind(scope.skill.clone())
        .bind(entry.key.clone())
        .bind(entry.value.to_string())
        .bind(body(&entry.value))
        .bind(tags_column(&entry.tags))
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .bind(now_us)
        .bind(entry.expires_at)
        .execute(&mut *conn)
        .await?;
        Ok(PutOutcome::Stored {
            created: existed.is_none(),
            entries: others + 1,
            bytes: other_bytes + bytes,
        })
    }

    /// The entry under `key`, unless it is missing or expired.
    pub(crate) async fn get(
        pool: &Pool,
        scope: &MemoryScope,
        key: &str,
        now_us: i64,
    ) -> Result<Option<MemoryEntry>> {
        let mut qb = QueryBuilder::<Db>::new(format!(
            "SELECT {COLUMNS}, CAST(NULL AS DOUBLE PRECISION) AS score, CAST(NULL AS TEXT) AS snippet \
             FROM memory m WHERE m.key = "
        ));
        qb.push_bind(key.to_owned());
        visible(&mut qb, scope, now_us);
        let row = qb.build().fetch_optional(pool).await?;
        row.as_ref().map(decode).transpose()
    }

    /// Deletes the entry under `key`; whether there was one (an expired entry is not one).
    pub(crate) async fn delete(
        conn: &mut Conn,
        scope: &MemoryScope,
        key: &str,
        now_us: i64,
    ) -> Result<bool> {
        purge(conn, now_us).await?;
        let done = sqlx::query("DELETE FROM memory WHERE agent = $1 AND skill = $2 AND key = $3")
            .bind(scope.agent.clone())
            .bind(scope.skill.clone())
            .bind(key.to_owned())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The namespace's entries matching `q`: by relevance when it has words, else the most
    /// recently written first.
    pub(crate) async fn search(
        pool: &Pool,
        scope: &MemoryScope,
        q: &MemorySearch,
        now_us: i64,
    ) -> Result<Vec<MemoryEntry>> {
        let words = q.query.as_deref().map(terms).unwrap_or_default();
        let mut qb = if words.is_empty() {
            QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, CAST(NULL AS DOUBLE PRECISION) AS score, \
                 CAST(NULL AS TEXT) AS snippet FROM memory m WHERE 1 = 1"
            ))
        } else if PG {
            let mut qb = QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, CAST(ts_rank(m.search, q) AS DOUBLE PRECISION) AS score, \
                 ts_headline('simple', m.body, q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=8') \
                 AS snippet FROM memory m, websearch_to_tsquery('simple', "
            ));
            qb.push_bind(any_of(&words, PG))
                .push(") AS q WHERE m.search @@ q");
            qb
        } else {
            let mut qb = QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, -bm25(memory_text) AS score, \
                 snippet(memory_text, 1, '[', ']', '…', 16) AS snippet \
                 FROM memory_text JOIN memory m ON m.id = memory_text.rowid \
                 WHERE memory_text MATCH "
            ));
            qb.push_bind(any_of(&words, PG));
            qb
        };
        visible(&mut qb, scope, now_us);
        for tag in &q.tags {
            qb.push(" AND m.tags LIKE ")
                .push_bind(format!("% {} %", like_escaped(tag)))
                .push(" ESCAPE '\\'");
        }
        if let Some(prefix) = q.prefix.as_deref().filter(|p| !p.is_empty()) {
            let chars = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
            qb.push(" AND substr(m.key, 1, ")
                .push_bind(chars)
                .push(") = ")
                .push_bind(prefix.to_owned());
        }
        qb.push(if words.is_empty() {
            " ORDER BY m.updated_at DESC, m.key LIMIT "
        } else {
            " ORDER BY score DESC, m.updated_at DESC, m.key LIMIT "
        });
        qb.push_bind(i64::from(q.limit));
        let rows = qb.build().fetch_all(pool).await?;
        rows.iter().map(decode).collect()
    }

    /// The namespace's visible entries and their bytes.
    pub(crate) async fn usage(pool: &Pool, scope: &MemoryScope, now_us: i64) -> Result<(u64, u64)> {
        let (n, bytes): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM memory \
             WHERE agent = $1 AND skill = $2 AND (expires_at IS NULL OR expires_at > $3)",
        )
        .bind(scope.agent.clone())
        .bind(scope.skill.clone())
        .bind(now_us)
        .fetch_one(pool)
        .await?;
        Ok((codec::count(n), codec::count(bytes)))
    }

    /// Adds "in this namespace, not expired" to a statement over `memory m`.
    fn visible(qb: &mut QueryBuilder<Db>, scope: &MemoryScope, now_us: i64) {
        qb.push(" AND m.agent = ")
            .push_bind(scope.agent.clone())
            .push(" AND m.skill = ")
            .push_bind(scope.skill.clone())
            .push(" AND (m.expires_at IS NULL OR m.expires_at > ")
            .push_bind(now_us)
            .push(")");
    }

    fn decode(row: &DbRow) -> Result<MemoryEntry> {
        let key: String = row.try_get("key")?;
        let value: String = row.try_get("value")?;
        let tags: String = row.try_get("tags")?;
        let bytes: i64 = row.try_get("bytes")?;
        Ok(MemoryEntry {
            value: codec::json(|| format!("memory entry {key:?}, column value"), &value)?,
            tags: tags.split_whitespace().map(str::to_owned).collect(),
            bytes: codec::count(bytes),
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            expires_at: row.try_get("expires_at")?,
            score: row
                .try_get::<Option<f64>, _>("score")?
                .map(|s| (s * 1e4).round() / 1e4),
            snippet: row.try_get("snippet")?,
            key,
        })
    }
}

/// Whether `tag` is one: 1 to 64 of lowercase ASCII letters, digits and `_ . : -`, starting with
/// a letter or digit.
pub fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    tag.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.:-".contains(c))
}

/// Refuses a scope, key or tags the schema would, before the write connection is taken.
pub(crate) fn check(scope: &MemoryScope, key: &str, tags: &[String]) -> Result<()> {
    let invalid = |what: &str, message: String| {
        Err(StoreError::Invalid {
            what: what.to_owned(),
            message,
        })
    };
    if scope.agent.is_empty() || scope.agent.chars().count() > 128 {
        return invalid(
            "memory agent",
            format!("{:?} must have 1 to 128 characters", scope.agent),
        );
    }
    if scope.skill.chars().count() > 128 {
        return invalid(
            "memory skill",
            format!("{:?} has more than 128 characters", scope.skill),
        );
    }
    let n = key.chars().count();
    if n == 0 || n > 256 {
        return invalid(
            "memory key",
            format!("a key has 1 to 256 characters, not {n}"),
        );
    }
    if key.chars().any(char::is_control) {
        return invalid("memory key", format!("{key:?} has a control character"));
    }
    if let Some(t) = tags.iter().find(|t| !valid_tag(t)) {
        return invalid(
            "memory tag",
            format!("{t:?}: a tag is 1 to 64 lowercase letters, digits and _ . : -"),
        );
    }
    Ok(())
}
