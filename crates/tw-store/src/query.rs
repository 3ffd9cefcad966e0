//! Reading the audit log back: filtered pages, counts, exports (JSON Lines, CSV) and usage reports.
//!
//! A page picks its ids first and reads whole rows only for those: `SELECT cols FROM audit_log
//! WHERE id IN (SELECT id FROM audit_log WHERE <filters> ORDER BY id DESC LIMIT n + 1) ORDER BY id
//! DESC`. The inner query is mostly answered from an index alone (every index on the log holds
//! the id); see migration 0004 for the indexes and the figures.
//!
//! A time range is the exception: no index gives the ids of a time range newest first, and
//! neither reading ids down from the cursor until the range shows up nor sorting every id of the
//! range is cheap when the range is wide or far down the log (hundreds of ms on 1,000,000 rows).
//! So the log is cut into blocks of [`BLOCK_IDS`] consecutive ids, and the block indexes of 0004
//! key on the block first and `started_at` second: one seek finds a block's rows in the range. A
//! page walks the blocks down from its cursor, counting each one's matches (at most `n + 1`
//! each), stops at the block that makes `n + 1`, and sorts only the ids of the blocks it walked.
//! Every id of a block is above every id of the blocks below it, so those ids hold the page's:
//! the page is exact whatever order the calls started in (a long call is written after shorter
//! ones that started later). See [`push_ids`].
//!
//! A text search cannot use an index (`LIKE '%text%'` over four columns), so a page of one reads
//! at most [`TEXT_SCAN_WINDOW`] ids, counted down from the newest row below its cursor that the
//! other filters let through, and stops there even if the page is not full: a search for text in
//! no row would otherwise read the whole log for each page. The page then says how far it
//! searched (`scanned_to`) and its `next_cursor` goes on below that.

use serde::{Deserialize, Serialize};
use sqlx::{QueryBuilder, Row as _, Sqlite, SqlitePool};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tw_core::ToolStatus;

use self::sqlite::push_filter;
use crate::codec;
use crate::error::{Result, StoreError};
use crate::record::sqlite::decode_row;
use crate::record::{AuditRow, COLUMNS};
use crate::search;

/// Which records to read. Every field narrows the selection; the default selects everything,
/// newest first, 50 to a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    /// Only calls to this tool.
    pub tool: Option<String>,
    /// Only calls that ended this way.
    pub status: Option<ToolStatus>,
    /// Only calls from this agent.
    pub agent_id: Option<String>,
    /// Only calls made under this skill.
    pub skill: Option<String>,
    /// Only calls started at or after this time (µs since the epoch).
    pub since: Option<i64>,
    /// Only calls started before this time (µs since the epoch).
    pub until: Option<i64>,
    /// Only calls whose tool, arguments, error or output contain this text (case-insensitive for
    /// ASCII). A page of such a search reads at most [`TEXT_SCAN_WINDOW`] ids and may end short
    /// of `limit` without being the last (see [`AuditPage::scanned_to`]).
    pub text: Option<String>,
    /// Only calls that broke a rule (those with a violation).
    pub violations_only: bool,
    /// Continue below this id (a previous page's `next_cursor`).
    pub cursor: Option<i64>,
    /// Page size, 1 to 1000.
    pub limit: u32,
}

impl Default for AuditQuery {
    fn default() -> Self {
        Self {
            tool: None,
            status: None,
            agent_id: None,
            skill: None,
            since: None,
            until: None,
            text: None,
            violations_only: false,
            cursor: None,
            limit: 50,
        }
    }
}

/// Largest page a query returns.
pub const MAX_PAGE: u32 = 1000;

/// Ids one page of a text search reads at most, down from the newest row below its cursor that
/// the other filters let through. On the 1,000,000-row log of `benches/audit_query.rs` a window
/// with no match takes 17 ms (p95 20 ms) at the top of the log and 23 ms in the middle, 1 to
/// 1.5 µs a row: well inside the viewer's 50 ms a page, with room for the other filters' lookups
/// (with a 1-day range: 21 ms) and a slower machine. Smaller means more pages to click through.
pub const TEXT_SCAN_WINDOW: i64 = 16_000;

/// One page of the log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    /// The records.
    pub rows: Vec<AuditRow>,
    /// Pass as `cursor` to get the next (older) page; absent on the last page.
    pub next_cursor: Option<i64>,
    /// Set when a text search ended this page at its scan window ([`TEXT_SCAN_WINDOW`] ids)
    /// rather than after `limit` matches, while older rows remain: every row from the cursor down
    /// to this id was searched, and `next_cursor` (this same id) goes on below it. Such a page may
    /// hold fewer rows than the limit, even none, and still not be the last. Absent when the page
    /// ended after `limit` matches or at the end of the log, and for queries without text.
    #[serde(default)]
    pub scanned_to: Option<i64>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditExportFormat {
    /// One JSON object per line: every column, JSON columns as JSON.
    Jsonl,
    /// RFC 4180 CSV for spreadsheets: the scalar columns plus arguments as JSON text.
    Csv,
}

/// Call counts for one tool, caller or skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The tool name, agent id or skill name.
    pub key: String,
    /// All calls.
    pub calls: u64,
    /// Calls that succeeded.
    pub success: u64,
    /// Calls that ran and failed, timed out, were cancelled or could not be sandboxed.
    pub failed: u64,
    /// Calls refused by policy, tier or mode.
    pub denied: u64,
    /// Calls with invalid arguments or naming no tool.
    pub invalid: u64,
    /// Calls held for a person's confirmation.
    pub awaiting_confirmation: u64,
    /// Calls that broke a rule (every denied call, and any other call recorded with a
    /// violation).
    pub violations: u64,
    /// Mean wall time in µs.
    pub avg_duration_us: u64,
    /// The first call's start (µs since the epoch).
    pub first_at: i64,
    /// The last call's start (µs since the epoch).
    pub last_at: i64,
    /// How many different tools were called.
    pub distinct_tools: u64,
}

/// Usage grouped three ways.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// One row per tool, busiest first.
    pub by_tool: Vec<UsageRow>,
    /// One row per calling agent, busiest first.
    pub by_caller: Vec<UsageRow>,
    /// One row per skill, busiest first; calls made under no skill are not in this list.
    pub by_skill: Vec<UsageRow>,
}

/// The text to search for, if the query searches (an empty text matches every row).
fn text_of(q: &AuditQuery) -> Option<&str> {
    q.text.as_deref().filter(|t| !t.is_empty())
}

/// Escapes LIKE's wildcards so the text matches literally.
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub(crate) async fn page(pool: &SqlitePool, q: &AuditQuery, indexed: bool) -> Result<AuditPage> {
    page_in_windows(
        pool,
        q,
        TEXT_SCAN_WINDOW,
        indexed.then_some(TEXT_INDEX_WINDOW),
    )
    .await
}

/// [`page`] with the text search's windows as parameters (the direct one, and the index's, when
/// the store keeps a text index), so tests can cross many windows with few rows.
///
/// A text search reads the rows above the text index's reach (`indexed_to`: the newest rows, all
/// of them when there is no index or the text is too short for one) directly, a window at a
/// time, and then goes on below them through the index (see [`indexed_page`]).
pub(crate) async fn page_in_windows(
    pool: &SqlitePool,
    q: &AuditQuery,
    window: i64,
    index_window: Option<i64>,
) -> Result<AuditPage> {
    let limit = q.limit.clamp(1, MAX_PAGE);
    let Some(text) = text_of(q) else {
        let (rows, next_cursor) = select_page(pool, q, q.cursor, None, limit).await?;
        return Ok(AuditPage {
            rows,
            next_cursor,
            scanned_to: None,
        });
    };
    let index = index_window.and_then(|w| Some((search::match_query(text)?, w.max(1))));
    let indexed_to = match &index {
        Some(_) => indexed_to(pool).await?,
        None => 0,
    };
    let short = |rows, scanned_to| AuditPage {
        rows,
        next_cursor: scanned_to,
        scanned_to,
    };
    let mut rows = Vec::new();
    // Above the index. The window hangs from the newest row below the cursor that the other
    // filters let through, so stretches of the log they rule out (the days after a time range,
    // say) are skipped, not searched a window at a time.
    let floor = (indexed_to > 0).then_some(indexed_to.saturating_add(1));
    if q.cursor.is_none_or(|c| c > indexed_to.saturating_add(1))
        && let Some(newest) = newest_candidate(pool, q, q.cursor, floor).await?
    {
        let below = newest.saturating_add(1);
        let from = below
            .saturating_sub(window.max(1))
            .max(indexed_to.saturating_add(1));
        let (found, next_cursor) = select_page(pool, q, Some(below), Some(from), limit).await?;
        if next_cursor.is_some() {
            return Ok(AuditPage {
                rows: found,
                next_cursor,
                scanned_to: None,
            });
        }
        if from > indexed_to.saturating_add(1) {
            // Short of a full page: the end of the log, or only of the window if a row the
            // other filters let through is older.
            let scanned_to = older_candidate(pool, q, from).await?.then_some(from);
            return Ok(short(found, scanned_to));
        }
        rows = found;
    }
    let Some((index, index_window)) = index.filter(|_| indexed_to > 0) else {
        return Ok(short(rows, None));
    };
    // Below: through the index.
    let below = q
        .cursor
        .map_or(indexed_to, |c| c.saturating_sub(1).min(indexed_to))
        .saturating_add(1);
    let need = limit.saturating_sub(u32::try_from(rows.len()).unwrap_or(u32::MAX));
    let (found, more, scanned_to) =
        indexed_page(pool, q, (&index, index_window), below, need).await?;
    rows.extend(found);
    Ok(AuditPage {
        next_cursor: if more {
            rows.last().map(|r| r.id)
        } else {
            scanned_to
        },
        rows,
        scanned_to,
    })
}

/// Candidates one page reads from the text index at most, newest first: each is a row the
/// index says may hold the text, read and checked against the text and the other filters. A
/// search whose candidates the other filters (or the check) mostly rule out ends its page here,
/// short, with `scanned_to` set, as a window of the direct search does. On the bench log the
/// index yields a common text's candidates at about 4-8 µs each (its trigrams' lists are long),
/// and each is a row read and checked: 1,024 keep such a page near 10 ms.
pub const TEXT_INDEX_WINDOW: i64 = 1_024;

/// The log's rows up to which the text index is complete (0: none, or an index that cannot be
/// read: the file removed or damaged under a running store, which the next open rebuilds; the
/// search then reads the log).
async fn indexed_to(pool: &SqlitePool) -> Result<i64> {
    let sql = format!("SELECT indexed_to FROM {}.audit_text_state", search::SCHEMA);
    // Built from constants only.
    match sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_optional(pool)
        .await
    {
        Ok(reach) => Ok(reach.unwrap_or(0)),
        Err(e) => {
            tracing::warn!(error = %e, "the audit text index cannot be read; searching the log");
            Ok(0)
        }
    }
}

/// Up to `need` rows below `below` that match the query, found through the text index (its
/// query, and how many candidates a page reads: [`TEXT_INDEX_WINDOW`]); whether there are more;
/// and where the page stopped if it read all its candidates without filling up.
async fn indexed_page(
    pool: &SqlitePool,
    q: &AuditQuery,
    (index, window): (&str, i64),
    below: i64,
    need: u32,
) -> Result<(Vec<AuditRow>, bool, Option<i64>)> {
    let candidates = |qb: &mut QueryBuilder<Sqlite>, n: i64| {
        qb.push(format!(
            "(SELECT rowid AS rid FROM {}.audit_text WHERE audit_text MATCH ",
            search::SCHEMA
        ))
        .push_bind(index.to_owned())
        .push(" AND rowid < ")
        .push_bind(below)
        .push(" ORDER BY rowid DESC LIMIT ")
        .push_bind(n)
        .push(")");
    };
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {COLUMNS} FROM audit_log WHERE id IN (SELECT a.id FROM "
    ));
    candidates(&mut qb, window);
    // The candidates drive the join newest first (CROSS JOIN keeps `m` the outer loop, and `m`
    // yields in its own order), each checked against every filter, the text's LIKE included; the
    // first `need + 1` that pass are the newest. No ORDER BY here: SQLite would sort every
    // candidate that passes rather than stop at `need + 1` (a common text: 52 ms a page on the
    // bench log, 1.7 ms without). The tests' small windows and pages would catch a wrong order.
    qb.push(" AS m CROSS JOIN audit_log AS a ON a.id = m.rid");
    push_filter(&mut qb, q, false);
    qb.push(" LIMIT ")
        .push_bind(i64::from(need) + 1)
        .push(") ORDER BY id DESC");
    let found = qb.build().fetch_all(pool).await?;
    let mut rows = Vec::with_capacity(found.len());
    for row in found.iter().take(need as usize) {
        rows.push(decode_row(row)?);
    }
    if found.len() > need as usize {
        return Ok((rows, true, None));
    }
    // Short: the end of the log, or of the candidates one page reads.
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT COUNT(*), MIN(rid) FROM ");
    candidates(&mut qb, window.saturating_add(1));
    let row = qb.build().fetch_one(pool).await?;
    let (read, lowest): (i64, Option<i64>) = (row.try_get(0)?, row.try_get(1)?);
    // Every id between the last candidate read and the first one not read was ruled out by the
    // index: the next page starts just above the one not read.
    let scanned_to = lowest
        .filter(|_| read > window)
        .map(|l| l.saturating_add(1));
    Ok((rows, false, scanned_to))
}

/// Up to `limit` matching rows with ids below `below` and at or above `from`, newest first, and
/// the cursor of the next page if there are more. The ids are chosen first (see [`push_ids`]),
/// and only those rows are read whole.
async fn select_page(
    pool: &SqlitePool,
    q: &AuditQuery,
    below: Option<i64>,
    from: Option<i64>,
    limit: u32,
) -> Result<(Vec<AuditRow>, Option<i64>)> {
    let mut qb =
        QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM audit_log WHERE id IN ("));
    push_ids(&mut qb, q, below, from, i64::from(limit) + 1);
    qb.push(") ORDER BY id DESC");
    let rows = qb.build().fetch_all(pool).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows.iter().take(limit as usize) {
        out.push(decode_row(row)?);
    }
    let next_cursor = if rows.len() > limit as usize {
        out.last().map(|r| r.id)
    } else {
        None
    };
    Ok((out, next_cursor))
}

/// The id of the newest row below `below` (and at or above `from`) that every filter but the text
/// lets through.
async fn newest_candidate(
    pool: &SqlitePool,
    q: &AuditQuery,
    below: Option<i64>,
    from: Option<i64>,
) -> Result<Option<i64>> {
    let others = AuditQuery {
        text: None,
        ..q.clone()
    };
    let mut qb = QueryBuilder::<Sqlite>::new("");
    push_ids(&mut qb, &others, below, from, 1);
    Ok(qb.build_query_scalar().fetch_optional(pool).await?)
}

/// A block of the log is the ids that agree but for their last `BLOCK_BITS` bits. The block
/// indexes of migration 0004 key on `id >> 12`, and [`BLOCK`] must say the same, or SQLite cannot
/// use them (`INDEXED BY` then fails the query rather than reading the log). 4096 ids a block
/// make 245 blocks of the 1,000,000-row log: an empty block costs one seek, a full one is
/// counted only up to the page's size, and the blocks that hold a page put at most a few
/// thousand ids in its sort.
const BLOCK_BITS: u32 = 12;

dual! {
    /// Adds the query's filters as a WHERE clause.
    pub(crate) fn push_filter(qb: &mut QueryBuilder<Db>, q: &AuditQuery, with_cursor: bool) {
        qb.push(" WHERE 1 = 1");
        if let Some(tool) = &q.tool {
            qb.push(" AND tool = ").push_bind(tool.clone());
        }
        if let Some(status) = q.status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(agent) = &q.agent_id {
            qb.push(" AND agent_id = ").push_bind(agent.clone());
        }
        if let Some(skill) = &q.skill {
            qb.push(" AND skill = ").push_bind(skill.clone());
        }
        if let Some(since) = q.since {
            qb.push(" AND started_at >= ").push_bind(since);
        }
        if let Some(until) = q.until {
            qb.push(" AND started_at < ").push_bind(until);
        }
        if let Some(text) = text_of(q) {
            let pattern = format!("%{}%", like_escape(text));
            qb.push(" AND (");
            for (i, column) in ["tool", "arguments", "error_message", "output"]
                .iter()
                .enumerate()
            {
                if i > 0 {
                    qb.push(" OR ");
                }
                qb.push(*column)
                    // SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE does what it does.
                    .push(if PG { " ILIKE " } else { " LIKE " })
                    .push_bind(pattern.clone())
                    .push(" ESCAPE '\\'");
            }
            qb.push(")");
        }
        if q.violations_only {
            qb.push(" AND violation_type IS NOT NULL");
        }
        if let (true, Some(cursor)) = (with_cursor, q.cursor) {
            qb.push(" AND id < ").push_bind(cursor);
        }
    }

    pub(crate) async fn export<W: AsyncWrite + Unpin + ?Sized>(
        pool: &Pool,
        q: &AuditQuery,
        format: AuditExportFormat,
        out: &mut W,
    ) -> Result<u64> {
        let mut buf = Vec::with_capacity(64 * 1024);
        if format == AuditExportFormat::Csv {
            csv_line(&mut buf, CSV_HEADER.iter().map(|h| (*h).to_owned()));
        }
        // Oldest first, walking ids upward in chunks.
        let mut after = 0i64;
        let mut written = 0u64;
        loop {
            let mut qb = QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM audit_log"));
            push_filter(&mut qb, q, true);
            qb.push(" AND id > ").push_bind(after);
            qb.push(" ORDER BY id ASC LIMIT ")
                .push_bind(i64::from(EXPORT_CHUNK));
            let rows = qb.build().fetch_all(pool).await?;
            for row in &rows {
                let r = on::record::decode_row(row)?;
                after = r.id;
                match format {
                    AuditExportFormat::Jsonl => {
                        serde_json::to_writer(&mut buf, &r).map_err(|e| StoreError::Encode {
                            what: format!("audit row {}", r.id),
                            message: e.to_string(),
                        })?;
                        buf.push(b'\n');
                    }
                    AuditExportFormat::Csv => csv_line(&mut buf, csv_fields(&r)),
                }
                written += 1;
            }
            out.write_all(&buf).await.map_err(StoreError::Export)?;
            buf.clear();
            if rows.len() < EXPORT_CHUNK as usize {
                break;
            }
        }
        out.flush().await.map_err(StoreError::Export)?;
        Ok(written)
    }

    pub(crate) async fn usage(pool: &Pool, q: &AuditQuery) -> Result<UsageReport> {
        Ok(UsageReport {
            by_tool: usage_by(pool, q, "tool").await?,
            by_caller: usage_by(pool, q, "agent_id").await?,
            by_skill: usage_by(pool, q, "skill").await?,
        })
    }

    async fn usage_by(pool: &Pool, q: &AuditQuery, key: &'static str) -> Result<Vec<UsageRow>> {
        let mut qb = QueryBuilder::<Db>::new(format!(
            "SELECT {key} AS key, COUNT(*) AS calls, \
             COUNT(*) FILTER (WHERE status = 'success') AS success, \
             COUNT(*) FILTER (WHERE status IN ('failed', 'timeout', 'cancelled', 'sandbox_error')) \
             AS failed, \
             COUNT(*) FILTER (WHERE status = 'permission_denied') AS denied, \
             COUNT(*) FILTER (WHERE status IN ('validation_error', 'not_found')) AS invalid, \
             COUNT(*) FILTER (WHERE status = 'requires_confirmation') AS asked, \
             COUNT(*) FILTER (WHERE violation_type IS NOT NULL) AS violations, \
             CAST(AVG(duration_us) AS BIGINT) AS avg_duration_us, \
             MIN(started_at) AS first_at, MAX(started_at) AS last_at, \
             COUNT(DISTINCT tool) AS distinct_tools \
             FROM audit_log"
        ));
        push_filter(&mut qb, q, false);
        // Skill is the only nullable key; a call made under no skill belongs to no skill's row.
        qb.push(format!(" AND {key} IS NOT NULL"));
        qb.push(format!(" GROUP BY {key} ORDER BY calls DESC, key ASC"));
        let rows = qb.build().fetch_all(pool).await?;
        let n = |row: &DbRow, c: &str| -> Result<u64> {
            let v: Option<i64> = row.try_get(c)?;
            Ok(codec::count(v.unwrap_or(0)))
        };
        rows.iter()
            .map(|row| {
                Ok(UsageRow {
                    key: row.try_get("key")?,
                    calls: n(row, "calls")?,
                    success: n(row, "success")?,
                    failed: n(row, "failed")?,
                    denied: n(row, "denied")?,
                    invalid: n(row, "invalid")?,
                    awaiting_confirmation: n(row, "asked")?,
                    violations: n(row, "violations")?,
                    avg_duration_us: n(row, "avg_duration_us")?,
                    first_at: row.try_get("first_at")?,
                    last_at: row.try_get("last_at")?,
                    distinct_tools: n(row, "distinct_tools")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
/// Ids in one block (the tests size their logs by it).
pub(crate) const BLOCK_IDS: i64 = 1 << BLOCK_BITS;

/// A row's block, as the block indexes of migration 0004 spell it.
const BLOCK: &str = "(id >> 12)";

/// The block index that serves the query's filters, if it has a time range and every other
/// filter is in that index: the range alone, or with one of a tool, a caller or a status. Any
/// other filter would have to be read from the rows of every block walked, which the plain
/// indexes do better.
fn block_index(q: &AuditQuery, from: Option<i64>) -> Option<&'static str> {
    let ranged = q.since.is_some() || q.until.is_some();
    let others = q.skill.is_some() || q.violations_only || text_of(q).is_some() || from.is_some();
    if !ranged || others {
        return None;
    }
    match (&q.tool, &q.agent_id, &q.status) {
        (None, None, None) => Some("audit_log_block_started"),
        (Some(_), None, None) => Some("audit_log_tool_block"),
        (None, Some(_), None) => Some("audit_log_agent_block"),
        (None, None, Some(_)) => Some("audit_log_status_block"),
        _ => None,
    }
}

/// Pushes a statement selecting the ids of up to `n` rows that match the query's filters (its
/// cursor aside) below `below` and at or above `from`, newest first.
///
/// Most filters are one index seek and a walk down it in id order. A time range (alone or with a
/// tool or a caller) walks the log's blocks instead, newest first: `walk` counts each block's
/// matches, from one seek into the block index, until they make `n` or the log ends; then the
/// ids of those blocks are sorted and the newest `n` kept. The blocks below hold older ids only,
/// so none of theirs could be on the page.
fn push_ids(
    qb: &mut QueryBuilder<Sqlite>,
    q: &AuditQuery,
    below: Option<i64>,
    from: Option<i64>,
    n: i64,
) {
    let Some(index) = block_index(q, from) else {
        qb.push("SELECT id FROM audit_log");
        push_filter(qb, q, false);
        push_bounds(qb, below, from);
        qb.push(" ORDER BY id DESC LIMIT ").push_bind(n);
        return;
    };
    // walk(block, found): `found` matches in `block` and the blocks above it. It starts one block
    // above the newest so that every block it yields has been counted.
    qb.push("WITH RECURSIVE walk(block, found) AS (SELECT ");
    match below {
        Some(below) => qb.push_bind((below.saturating_sub(1) >> BLOCK_BITS).saturating_add(1)),
        None => qb.push(format!(
            "((SELECT MAX(id) FROM audit_log) >> {BLOCK_BITS}) + 1"
        )),
    };
    qb.push(
        ", 0 UNION ALL SELECT block - 1, found + (SELECT COUNT(*) FROM (SELECT 1 FROM audit_log \
         INDEXED BY ",
    )
    .push(index);
    push_filter(qb, q, false);
    push_bounds(qb, below, from);
    qb.push(format!(" AND {BLOCK} = walk.block - 1 LIMIT "))
        .push_bind(n)
        .push(")) FROM walk WHERE found < ")
        .push_bind(n)
        .push(format!(
            " AND block > (SELECT MIN(id) FROM audit_log) >> {BLOCK_BITS}) SELECT id FROM \
             audit_log INDEXED BY "
        ))
        .push(index);
    push_filter(qb, q, false);
    push_bounds(qb, below, from);
    qb.push(format!(
        " AND {BLOCK} IN (SELECT block FROM walk) ORDER BY id DESC LIMIT "
    ))
    .push_bind(n);
}

/// Adds the id bounds of a page: below its cursor (or a text search's window) and at or above
/// the window's bottom.
fn push_bounds(qb: &mut QueryBuilder<Sqlite>, below: Option<i64>, from: Option<i64>) {
    if let Some(below) = below {
        qb.push(" AND id < ").push_bind(below);
    }
    if let Some(from) = from {
        qb.push(" AND id >= ").push_bind(from);
    }
}

/// Whether any row below `below` gets through every filter but the text. Any such row will do, in
/// whatever order an index finds it: cheaper than the newest one when the filters are a time
/// range, whose index does not give ids in order.
async fn older_candidate(pool: &SqlitePool, q: &AuditQuery, below: i64) -> Result<bool> {
    let mut qb = candidates(q, Some(below));
    qb.push(" LIMIT 1");
    let found: Option<i64> = qb.build_query_scalar().fetch_optional(pool).await?;
    Ok(found.is_some())
}

/// The ids of rows below `below` that every filter but the text lets through.
fn candidates(q: &AuditQuery, below: Option<i64>) -> QueryBuilder<Sqlite> {
    let others = AuditQuery {
        text: None,
        cursor: below,
        ..q.clone()
    };
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT id FROM audit_log");
    push_filter(&mut qb, &others, true);
    qb
}

pub(crate) async fn count(pool: &SqlitePool, q: &AuditQuery, indexed: bool) -> Result<u64> {
    if indexed
        && let Some(index) = text_of(q).and_then(search::match_query)
        && indexed_to(pool).await? > 0
    {
        // Above the text index's reach every row is read; below it only the rows it names.
        let reach = format!(
            "(SELECT indexed_to FROM {}.audit_text_state)",
            search::SCHEMA
        );
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT (SELECT COUNT(*) FROM audit_log");
        push_filter(&mut qb, q, true);
        qb.push(format!(
            " AND id > {reach}) + (SELECT COUNT(*) FROM audit_log"
        ));
        push_filter(&mut qb, q, true);
        qb.push(format!(
            " AND id <= {reach} AND id IN (SELECT rowid FROM {}.audit_text WHERE audit_text \
             MATCH ",
            search::SCHEMA
        ))
        .push_bind(index)
        .push("))");
        let n: i64 = qb.build().fetch_one(pool).await?.try_get(0)?;
        return Ok(codec::count(n));
    }
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT COUNT(*) FROM audit_log");
    match block_index(q, None) {
        // A time range with a tool or a caller: one seek into each block's part of the range,
        // rather than reading every row of the tool (caller) to check its start.
        Some(index) if q.tool.is_some() || q.agent_id.is_some() => {
            qb.push(" INDEXED BY ").push(index);
            push_filter(&mut qb, q, true);
            qb.push(format!(
                " AND {BLOCK} IN (WITH RECURSIVE blocks(block) AS (SELECT (SELECT MIN(id) \
                 FROM audit_log) >> {BLOCK_BITS} UNION ALL SELECT block + 1 FROM blocks WHERE \
                 block < (SELECT MAX(id) FROM audit_log) >> {BLOCK_BITS}) SELECT block FROM blocks)"
            ));
        }
        // A time range alone is counted from `audit_log_started`, whose rows in the range are
        // next to each other.
        _ => push_filter(&mut qb, q, true),
    }
    let n: i64 = qb.build().fetch_one(pool).await?.try_get(0)?;
    Ok(codec::count(n))
}

pub(crate) async fn get(pool: &SqlitePool, execution_id: &str) -> Result<Option<AuditRow>> {
    // The record is in the tail or, moved, in the log (or in both for a moment). The tail is
    // seen first, the log second, so a move in between cannot hide it from both (`tail`).
    let sql = format!(
        "SELECT {COLUMNS} FROM audit_tail WHERE execution_id = ?1 \
         UNION ALL SELECT {COLUMNS} FROM audit_log WHERE execution_id = ?1"
    );
    let mut tx = pool.begin().await?;
    sqlx::query(crate::tail::PIN).fetch_one(&mut *tx).await?;
    // Built from constants only.
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(execution_id)
        .fetch_optional(&mut *tx)
        .await?;
    tx.rollback().await?;
    row.as_ref().map(decode_row).transpose()
}

/// Columns of the CSV export, in order.
const CSV_HEADER: &[&str] = &[
    "id",
    "execution_id",
    "trace_id",
    "started_at",
    "completed_at",
    "duration_us",
    "tool",
    "agent_id",
    "skill",
    "user_id",
    "status",
    "decision",
    "error_code",
    "error_message",
    "arguments",
    "output_bytes",
    "truncated",
    "output_sha256",
    "violation_type",
    "violation_severity",
    "prev",
    "hash",
];

/// Rows fetched per round trip while exporting, so memory stays flat for any log size.
const EXPORT_CHUNK: u32 = 500;

fn csv_fields(r: &AuditRow) -> impl Iterator<Item = String> {
    let opt = |s: &Option<String>| s.clone().unwrap_or_default();
    [
        r.id.to_string(),
        r.execution_id.clone(),
        r.trace_id.clone(),
        rfc3339(r.started_at),
        rfc3339(r.completed_at),
        r.duration_us.to_string(),
        r.tool.clone(),
        r.agent_id.clone(),
        opt(&r.skill),
        opt(&r.user_id),
        r.status.as_str().to_owned(),
        opt(&r.decision),
        opt(&r.error_code),
        opt(&r.error_message),
        r.arguments.to_string(),
        r.output_bytes.to_string(),
        r.truncated.to_string(),
        opt(&r.output_sha256),
        r.violation
            .as_ref()
            .map(|v| v.kind.clone())
            .unwrap_or_default(),
        r.violation
            .as_ref()
            .map(|v| v.severity.as_str().to_owned())
            .unwrap_or_default(),
        opt(&r.prev),
        opt(&r.hash),
    ]
    .into_iter()
}

/// RFC 3339 in UTC with microseconds.
fn rfc3339(us: i64) -> String {
    match u64::try_from(us) {
        Ok(us) => humantime::format_rfc3339_micros(
            std::time::UNIX_EPOCH + std::time::Duration::from_micros(us),
        )
        .to_string(),
        Err(_) => us.to_string(),
    }
}

/// Appends one RFC 4180 record. Fields that a spreadsheet would run as a formula get a leading
/// apostrophe: the log holds text chosen by agents, which must not become code when opened.
fn csv_line(buf: &mut Vec<u8>, fields: impl Iterator<Item = String>) {
    for (i, field) in fields.enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let risky =
            field.starts_with(['=', '+', '-', '@', '\t', '\r']) && field.parse::<f64>().is_err();
        let quote = risky || field.contains([',', '"', '\n', '\r']);
        if quote {
            buf.push(b'"');
        }
        if risky {
            buf.push(b'\'');
        }
        for b in field.bytes() {
            if b == b'"' {
                buf.push(b'"');
            }
            buf.push(b);
        }
        if quote {
            buf.push(b'"');
        }
    }
    buf.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_expression_matches_the_block_size() {
        assert_eq!(BLOCK, format!("(id >> {BLOCK_BITS})"));
    }

    fn line(fields: &[&str]) -> String {
        let mut buf = Vec::new();
        csv_line(&mut buf, fields.iter().map(|f| (*f).to_owned()));
        String::from_utf8(buf).unwrap_or_default()
    }

    #[test]
    fn csv_quotes_per_rfc4180_and_defuses_formulas() {
        assert_eq!(
            line(&["a", "b,c", "say \"hi\"", "x\ny"]),
            "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\"\r\n"
        );
        assert_eq!(
            line(&["=HYPERLINK(\"http://x\")", "-5", "@SUM(A1)"]),
            "\"'=HYPERLINK(\"\"http://x\"\")\",-5,\"'@SUM(A1)\"\r\n"
        );
    }

    #[test]
    fn like_wildcards_match_literally() {
        assert_eq!(like_escape("50%_a\\b"), "50\\%\\_a\\\\b");
    }

    #[test]
    fn timestamps_are_rfc3339_with_microseconds() {
        assert_eq!(
            rfc3339(1_700_000_000_123_456),
            "2023-11-14T22:13:20.123456Z"
        );
    }
}
