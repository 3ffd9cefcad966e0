//! `sql_query` on a SQLite file: opened read-only (the library refuses every write, whatever
//! the SQL), with no database attachable (`ATTACH` and `VACUUM INTO` would write or read other
//! files), no extension loadable, defensive mode on and the schema's own functions untrusted;
//! run on the blocking pool and interrupted at the time cap or on cancellation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode as Sqlite, OpenFlags};
use serde_json::Value;

use super::{Collect, Table, float, hex, one_statement, refused, too_slow};
use crate::builtins::ToolFailure;

/// Opens the file the way every query reads it.
fn open(path: &std::path::Path) -> Result<Connection, ToolFailure> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        ToolFailure::failed(
            super::QUERY_FAILED,
            format!("cannot open the database {}: {e}", path.display()),
        )
    })?;
    let setup = || -> rusqlite::Result<()> {
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
        conn.busy_timeout(Duration::from_millis(1_000))?;
        Ok(())
    };
    setup().map_err(|e| {
        ToolFailure::failed(
            super::QUERY_FAILED,
            format!("cannot prepare the database connection: {e}"),
        )
    })?;
    Ok(conn)
}

/// A parameter as SQLite binds it.
fn param(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Null => V::Null,
        Value::Bool(b) => V::Integer(i64::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(V::Integer)
            .unwrap_or_else(|| V::Real(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => V::Text(s.clone()),
        other => V::Text(other.to_string()),
    }
}

fn cell(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => float(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => hex(b),
    }
}

fn failure(e: rusqlite::Error, timeout_ms: u64) -> ToolFailure {
    match &e {
        rusqlite::Error::MultipleStatement => one_statement(),
        rusqlite::Error::SqliteFailure(f, _) if f.code == Sqlite::OperationInterrupted => {
            too_slow(timeout_ms)
        }
        rusqlite::Error::SqliteFailure(f, _) => refused(
            matches!(
                f.code,
                Sqlite::ReadOnly | Sqlite::AuthorizationForStatementDenied
            ),
            e.to_string(),
        ),
        _ => refused(false, e.to_string()),
    }
}

fn run(
    conn: &Connection,
    sql: &str,
    params: &[Value],
    max_rows: u64,
    budget: usize,
    timeout_ms: u64,
    deadline: Instant,
) -> Result<Table, ToolFailure> {
    let fail = |e| failure(e, timeout_ms);
    // The time cap interrupts a running statement; one that had not started by then stops here.
    if Instant::now() >= deadline {
        return Err(too_slow(timeout_ms));
    }
    let mut stmt = conn.prepare(sql).map_err(fail)?;
    let columns: Vec<String> = stmt
        .column_names()
        .iter()
        .map(|c| (*c).to_owned())
        .collect();
    let n = columns.len();
    let mut collect = Collect::new(columns, max_rows, budget);
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params.iter().map(param)))
        .map_err(fail)?;
    while let Some(row) = rows.next().map_err(fail)? {
        let values = (0..n)
            .map(|i| row.get_ref(i).map(cell))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(fail)?;
        if !collect.push(values) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(too_slow(timeout_ms));
        }
    }
    Ok(collect.table)
}

/// Runs one statement against the file at `path`.
pub(super) async fn query(
    path: PathBuf,
    sql: String,
    params: Vec<Value>,
    max_rows: u64,
    budget: usize,
    timeout_ms: u64,
) -> Result<Table, ToolFailure> {
    let conn = crate::builtins::blocking("opening the database", move || open(&path)).await?;
    let interrupt = conn.get_interrupt_handle();
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut task = tokio::task::spawn_blocking(move || {
        run(&conn, &sql, &params, max_rows, budget, timeout_ms, deadline)
    });
    // Interrupting also stops a query whose caller went away: the select above drops this
    // future, and the guard interrupts the statement still running on the blocking pool.
    struct Interrupt(Option<rusqlite::InterruptHandle>);
    impl Drop for Interrupt {
        fn drop(&mut self) {
            if let Some(h) = self.0.take() {
                h.interrupt();
            }
        }
    }
    let mut guard = Interrupt(Some(interrupt));
    let done = tokio::select! {
        r = &mut task => {
            guard.0 = None;
            r
        }
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => {
            if let Some(h) = guard.0.take() {
                h.interrupt();
            }
            task.await
        }
    };
    done.map_err(|e| ToolFailure::failed(super::QUERY_FAILED, format!("the query failed: {e}")))?
}
