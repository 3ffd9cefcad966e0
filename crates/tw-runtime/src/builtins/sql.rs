//! `sql_query` (seed 002's `execute_ckvs_query`): one read-only SQL statement against a
//! database the config names (`[databases.NAME]`: a SQLite file or PostgreSQL), with bind
//! parameters, capped in rows, bytes and time.
//!
//! Read-only is the database's own doing, never a reading of the SQL: SQLite opens the file
//! read-only with no database attachable (so `ATTACH` and `VACUUM INTO` cannot write elsewhere)
//! and no extension loadable; PostgreSQL runs the statement in a `READ ONLY` transaction whose
//! snapshot is taken first (so the statement cannot make it read-write), on a session whose
//! transactions default to read-only, always rolled back. A write hidden in a CTE, a function,
//! a `DO` block or a procedure is refused by the database. One statement per call: both
//! drivers prepare the text, which refuses a second statement.
//!
//! The tool needs the teams tier and is not allowed by the built-in policy: reading a
//! database is the administrator's choice, per database, like naming it. PostgreSQL is reached
//! directly, not through the egress gatekeeper: the administrator wrote its address.

mod postgres;
mod sqlite;

use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{
    ErrorCode, IsolationLevel, LicenseTier, RiskLevel, ToolCategory, ToolDefinition, ToolStatus,
};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit, output};
use crate::config::{Database, DatabaseSettings, DatabaseSource};

/// The longest statement, in characters.
const MAX_SQL_CHARS: u64 = 100_000;
/// The most bind parameters.
const MAX_PARAMS: u64 = 100;
/// The code of a write the database refused.
const READ_ONLY: &str = "read_only";
/// The code of a statement the database could not run.
const QUERY_FAILED: &str = "query_failed";
/// The code when the config names no database.
const NOT_CONFIGURED: &str = "not_configured";
/// Bytes of the answer kept for its envelope (columns, counts) besides the rows.
const ENVELOPE_BYTES: usize = 4 << 10;

/// What a query read.
pub(crate) struct Table {
    columns: Vec<String>,
    rows: Vec<Value>,
    /// Why reading stopped early: `rows` or `bytes`.
    truncated: Option<&'static str>,
}

/// Collects rows up to the row cap and the byte budget.
pub(crate) struct Collect {
    max_rows: u64,
    budget: usize,
    used: usize,
    table: Table,
}

impl Collect {
    fn new(columns: Vec<String>, max_rows: u64, budget: usize) -> Self {
        Self {
            max_rows,
            budget,
            used: 0,
            table: Table {
                columns,
                rows: Vec::new(),
                truncated: None,
            },
        }
    }

    /// Adds a row; `false` once no more may come (the cap was reached: the row is not kept).
    fn push(&mut self, row: Vec<Value>) -> bool {
        if self.table.rows.len() as u64 >= self.max_rows {
            self.table.truncated = Some("rows");
            return false;
        }
        let row = Value::Array(row);
        let size = row.to_string().len() + 1;
        if self.used + size > self.budget {
            self.table.truncated = Some("bytes");
            return false;
        }
        self.used += size;
        self.table.rows.push(row);
        true
    }
}

/// A database's refusal or failure, as the tool reports it.
pub(crate) fn refused(read_only: bool, message: String) -> ToolFailure {
    if read_only {
        ToolFailure {
            status: ToolStatus::PermissionDenied,
            code: READ_ONLY.to_owned(),
            message: format!("the database refused a write (sql_query is read-only): {message}"),
        }
    } else {
        ToolFailure::failed(QUERY_FAILED, message)
    }
}

/// A statement over its time cap.
pub(crate) fn too_slow(timeout_ms: u64) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::Timeout,
        code: ErrorCode::TIMEOUT.to_owned(),
        message: format!(
            "the statement ran past the database's {timeout_ms} ms ([databases.NAME] timeout_ms)"
        ),
    }
}

/// A second statement in the text.
pub(crate) fn one_statement() -> ToolFailure {
    ToolFailure {
        status: ToolStatus::ValidationError,
        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
        message: "/sql: one statement per call (the text holds more than one)".to_owned(),
    }
}

/// Bytes as PostgreSQL writes them: `\x` and hex.
pub(crate) fn hex(bytes: &[u8]) -> Value {
    let mut s = String::with_capacity(2 + 2 * bytes.len());
    s.push_str("\\x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    Value::String(s)
}

/// A float as JSON: a number when finite, else its name.
pub(crate) fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
}

pub(super) struct SqlQuery {
    databases: Arc<DatabaseSettings>,
}

impl SqlQuery {
    pub(super) fn new(databases: Arc<DatabaseSettings>) -> Self {
        Self { databases }
    }

    fn database(&self, name: &str) -> Result<&Database, ToolFailure> {
        self.databases.databases.get(name).ok_or_else(|| {
            if self.databases.databases.is_empty() {
                ToolFailure::failed(
                    NOT_CONFIGURED,
                    "no database is configured: add [databases.NAME] to the config (sqlite = a \
                     file, or url_env = a variable holding a postgres:// URL)",
                )
            } else {
                let known: Vec<&str> = self
                    .databases
                    .databases
                    .keys()
                    .map(String::as_str)
                    .collect();
                ToolFailure {
                    status: ToolStatus::ValidationError,
                    code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
                    message: format!(
                        "/database: no database named {name:?}; the config has {}",
                        known.join(", ")
                    ),
                }
            }
        })
    }
}

#[derive(Deserialize)]
struct Args {
    database: String,
    sql: String,
    #[serde(default)]
    params: Vec<Value>,
    max_rows: Option<u64>,
}

impl BuiltinTool for SqlQuery {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let names: Vec<&str> = self
            .databases
            .databases
            .keys()
            .map(String::as_str)
            .collect();
        let database = if names.is_empty() {
            json!({"type": "string", "minLength": 1,
                   "description": "A database's name. None is configured yet: the administrator adds [databases.NAME] to the config."})
        } else {
            json!({"type": "string", "enum": names, "description": "The database to read, as the config names it."})
        };
        let mut d = ToolDefinition::new(
            lit::name("sql_query")?,
            "Run one read-only SQL statement (SELECT, WITH, EXPLAIN, SHOW...) against a database \
             the administrator configured (SQLite or PostgreSQL), with $1-style bind parameters \
             (?1 on SQLite). The database itself refuses writes. Rows come back as arrays in \
             column order, capped in number, bytes and time; numeric values as exact strings, \
             times as ISO 8601, bytes as \\x hex.",
            ToolCategory::Database,
            lit::group("database")?,
            lit::params(json!({
                "type": "object",
                "properties": {
                    "database": database,
                    "sql": {"type": "string", "minLength": 1, "maxLength": MAX_SQL_CHARS, "description": "One SQL statement."},
                    "params": {
                        "type": "array", "maxItems": MAX_PARAMS,
                        "items": {"type": ["string", "number", "boolean", "null"]},
                        "description": "Values for the statement's parameters, in order. On PostgreSQL a string is text: cast it where another type is needed ($1::date)."
                    },
                    "max_rows": {"type": "integer", "minimum": 1, "description": "Return at most this many rows (the database's own cap applies too)."}
                },
                "required": ["database", "sql"],
                "additionalProperties": false
            }))?,
        );
        d.output_schema = lit::output(json!({
            "type": "object",
            "properties": {
                "database": {"type": "string"},
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "array"}},
                "row_count": {"type": "integer"},
                "truncated": {"enum": [null, "rows", "bytes"]},
                "elapsed_ms": {"type": "integer"}
            },
            "required": ["database", "columns", "rows", "row_count", "truncated", "elapsed_ms"]
        }))?;
        d.constraints.isolation = IsolationLevel::None;
        // Above every database's own cap, so the database's is the one a person sees.
        d.constraints.max_execution_time_ms = Database::MAX_TIMEOUT_MS + 15_000;
        d.constraints.max_output_bytes = 1 << 20;
        d.risk_level = RiskLevel::Medium;
        d.license_tier = LicenseTier::Teams;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: Args = args(raw)?;
            let db = self.database(&a.database)?;
            let max_rows = a.max_rows.unwrap_or(db.max_rows).min(db.max_rows);
            let budget = usize::try_from(ctx.max_output_bytes)
                .unwrap_or(usize::MAX)
                .saturating_sub(ENVELOPE_BYTES);
            let started = Instant::now();
            let run = async {
                match &db.source {
                    DatabaseSource::Sqlite(path) => {
                        sqlite::query(
                            path.clone(),
                            a.sql,
                            a.params,
                            max_rows,
                            budget,
                            db.timeout_ms,
                        )
                        .await
                    }
                    DatabaseSource::Postgres(url) => {
                        postgres::query(url, &a.sql, &a.params, max_rows, budget, db.timeout_ms)
                            .await
                    }
                    DatabaseSource::PostgresFromEnv(var) => {
                        let url = std::env::var(var).map_err(|_| {
                            ToolFailure::failed(
                                NOT_CONFIGURED,
                                format!(
                                    "database {:?}: the environment variable {var} holding its URL is not set",
                                    a.database
                                ),
                            )
                        })?;
                        postgres::query(&url, &a.sql, &a.params, max_rows, budget, db.timeout_ms)
                            .await
                    }
                }
            };
            let table = tokio::select! {
                t = run => t?,
                () = ctx.cancel.cancelled() => {
                    return Err(ToolFailure {
                        status: ToolStatus::Cancelled,
                        code: ErrorCode::CANCELLED.to_owned(),
                        message: "the query was cancelled".to_owned(),
                    });
                }
            };
            output(&json!({
                "database": a.database,
                "columns": table.columns,
                "row_count": table.rows.len(),
                "rows": table.rows,
                "truncated": table.truncated,
                "elapsed_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            }))
        })
    }
}
