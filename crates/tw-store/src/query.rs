//! Reading the audit log back: filtered pages, counts, exports (JSON Lines, CSV) and usage reports.

use serde::{Deserialize, Serialize};
use sqlx::{QueryBuilder, Row as _, Sqlite, SqlitePool};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tw_core::ToolStatus;

use crate::codec;
use crate::error::{Result, StoreError};
use crate::record::{AuditRow, COLUMNS, decode_row};

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
    /// ASCII).
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

/// One page of the log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    /// The records.
    pub rows: Vec<AuditRow>,
    /// Pass as `cursor` to get the next (older) page; absent on the last page.
    pub next_cursor: Option<i64>,
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

/// Adds the query's filters as a WHERE clause.
fn push_filter(qb: &mut QueryBuilder<Sqlite>, q: &AuditQuery, with_cursor: bool) {
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
    if let Some(text) = q.text.as_deref().filter(|t| !t.is_empty()) {
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
                .push(" LIKE ")
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

pub(crate) async fn page(pool: &SqlitePool, q: &AuditQuery) -> Result<AuditPage> {
    let limit = q.limit.clamp(1, MAX_PAGE);
    let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM audit_log"));
    push_filter(&mut qb, q, true);
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(limit) + 1);
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
    Ok(AuditPage {
        rows: out,
        next_cursor,
    })
}

pub(crate) async fn count(pool: &SqlitePool, q: &AuditQuery) -> Result<u64> {
    let mut qb = QueryBuilder::<Sqlite>::new("SELECT COUNT(*) FROM audit_log");
    push_filter(&mut qb, q, true);
    let n: i64 = qb.build().fetch_one(pool).await?.try_get(0)?;
    Ok(codec::count(n))
}

pub(crate) async fn get(pool: &SqlitePool, execution_id: &str) -> Result<Option<AuditRow>> {
    let sql = format!("SELECT {COLUMNS} FROM audit_log WHERE execution_id = ");
    let mut qb = QueryBuilder::<Sqlite>::new(sql);
    qb.push_bind(execution_id.to_owned());
    let row = qb.build().fetch_optional(pool).await?;
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
];

/// Rows fetched per round trip while exporting, so memory stays flat for any log size.
const EXPORT_CHUNK: u32 = 500;

pub(crate) async fn export<W: AsyncWrite + Unpin + ?Sized>(
    pool: &SqlitePool,
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
        let mut qb = QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM audit_log"));
        push_filter(&mut qb, q, true);
        qb.push(" AND id > ").push_bind(after);
        qb.push(" ORDER BY id ASC LIMIT ")
            .push_bind(i64::from(EXPORT_CHUNK));
        let rows = qb.build().fetch_all(pool).await?;
        for row in &rows {
            let r = decode_row(row)?;
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

pub(crate) async fn usage(pool: &SqlitePool, q: &AuditQuery) -> Result<UsageReport> {
    Ok(UsageReport {
        by_tool: usage_by(pool, q, "tool").await?,
        by_caller: usage_by(pool, q, "agent_id").await?,
        by_skill: usage_by(pool, q, "skill").await?,
    })
}

async fn usage_by(pool: &SqlitePool, q: &AuditQuery, key: &'static str) -> Result<Vec<UsageRow>> {
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {key} AS key, COUNT(*) AS calls, \
         SUM(status = 'success') AS success, \
         SUM(status IN ('failed', 'timeout', 'cancelled', 'sandbox_error')) AS failed, \
         SUM(status = 'permission_denied') AS denied, \
         SUM(status IN ('validation_error', 'not_found')) AS invalid, \
         SUM(status = 'requires_confirmation') AS asked, \
         SUM(violation_type IS NOT NULL) AS violations, \
         CAST(AVG(duration_us) AS INTEGER) AS avg_duration_us, \
         MIN(started_at) AS first_at, MAX(started_at) AS last_at, \
         COUNT(DISTINCT tool) AS distinct_tools \
         FROM audit_log"
    ));
    push_filter(&mut qb, q, false);
    // Skill is the only nullable key; a call made under no skill belongs to no skill's row.
    qb.push(format!(" AND {key} IS NOT NULL"));
    qb.push(format!(" GROUP BY {key} ORDER BY calls DESC, key ASC"));
    let rows = qb.build().fetch_all(pool).await?;
    let n = |row: &sqlx::sqlite::SqliteRow, c: &str| -> Result<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
