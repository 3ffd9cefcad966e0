//! `sql_query` on PostgreSQL: a connection of its own per query, whose transactions default to
//! read-only; the statement runs in a `REPEATABLE READ READ ONLY` transaction whose snapshot is
//! taken before it (a transaction that has run a query cannot be made read-write, so `SET
//! TRANSACTION READ WRITE` in the statement fails), under a server-side `statement_timeout`, and
//! the transaction is always rolled back (undoing any `SET` the statement made).
//!
//! The statement is prepared with the parameters' types as the agent's JSON gives them (text,
//! bigint, double precision, boolean), which also gives the columns of an empty result; a prepared
//! statement is one statement. Values are read from the binary format by type; a type not read
//! here is refused naming the column and the cast that reads it.

use std::time::Duration;

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgRow, PgTypeInfo, PgValueRef};
use sqlx::{Column as _, Connection as _, Executor as _, Row as _, Statement as _, TypeInfo as _};
use sqlx::{PgConnection, SqlSafeStr as _, ValueRef as _};

use super::{Collect, Table, float, hex, one_statement, refused, too_slow};
use crate::builtins::ToolFailure;

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// Days from the Unix epoch to PostgreSQL's.
const PG_EPOCH_DAYS: i64 = 10_957;

fn failure(e: sqlx::Error, timeout_ms: u64) -> ToolFailure {
    match &e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            let message = db.message();
            if message.contains("multiple commands") {
                return one_statement();
            }
            match code.as_ref() {
                // query_canceled: the statement_timeout.
                "57014" => too_slow(timeout_ms),
                // read_only_sql_transaction.
                "25006" => refused(true, format!("{message} (SQLSTATE 25006)")),
                c => refused(false, format!("{message} (SQLSTATE {c})")),
            }
        }
        _ => refused(false, format!("the database failed: {e}")),
    }
}

/// The type a parameter is prepared with, from its JSON.
fn param_type(v: &Value) -> PgTypeInfo {
    PgTypeInfo::with_name(match v {
        Value::Bool(_) => "BOOL",
        Value::Number(n) if n.is_i64() || n.is_u64() => "INT8",
        Value::Number(_) => "FLOAT8",
        _ => "TEXT",
    })
}

/// Reads `n` big-endian bytes at `at`.
fn be<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

/// A `numeric` in its binary form (base-10000 digits) as its exact decimal text.
fn numeric(b: &[u8]) -> Option<String> {
    let word = |at: usize| be::<2>(b, at).map(i16::from_be_bytes);
    let (n, weight, sign, scale) = (word(0)?, word(2)?, word(4)? as u16, word(6)?);
    match sign {
        0xC000 => return Some("NaN".into()),
        0xD000 => return Some("Infinity".into()),
        0xF000 => return Some("-Infinity".into()),
        _ => {}
    }
    let digits: Vec<i16> = (0..usize::try_from(n).ok()?)
        .map(|k| word(8 + 2 * k))
        .collect::<Option<_>>()?;
    let digit = |k: i32| {
        usize::try_from(k)
            .ok()
            .and_then(|k| digits.get(k))
            .copied()
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        for k in 0..=i32::from(weight) {
            let d = digit(k);
            out.push_str(&if k == 0 {
                d.to_string()
            } else {
                format!("{d:04}")
            });
        }
    }
    let scale = usize::try_from(scale).ok()?;
    if scale > 0 {
        let mut frac = String::new();
        let mut k = i32::from(weight) + 1;
        while frac.len() < scale {
            frac.push_str(&format!("{:04}", digit(k)));
            k += 1;
        }
        frac.truncate(scale);
        out.push('.');
        out.push_str(&frac);
    }
    Some(out)
}

/// The civil date of a day count from the Unix epoch (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn date(days_from_unix: i64) -> String {
    let (y, m, d) = civil(days_from_unix);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A time of day in µs as `HH:MM:SS[.ffffff]`.
fn clock(us: i64) -> String {
    let (s, frac) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000));
    let hms = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    if frac == 0 {
        hms
    } else {
        format!("{hms}.{frac:06}")
    }
}

/// A `timestamp` (µs from PostgreSQL's epoch) in ISO 8601, `Z` when it is `timestamptz`.
fn timestamp(us: i64, zone: bool) -> String {
    match us {
        i64::MAX => "infinity".into(),
        i64::MIN => "-infinity".into(),
        _ => {
            let unix = us.saturating_add(PG_EPOCH_US);
            let (day, time) = (
                unix.div_euclid(86_400_000_000),
                unix.rem_euclid(86_400_000_000),
            );
            format!(
                "{}T{}{}",
                date(day),
                clock(time),
                if zone { "Z" } else { "" }
            )
        }
    }
}

/// One value, by its type.
fn cell(v: PgValueRef<'_>, column: &str) -> Result<Value, ToolFailure> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let ty = v.type_info().name().to_owned();
    let b = v.as_bytes().unwrap_or_default();
    let bad = || {
        ToolFailure::failed(
            super::QUERY_FAILED,
            format!("column {column:?}: a {ty} value this tool could not read"),
        )
    };
    let int = |n: usize| -> Result<i64, ToolFailure> {
        match n {
            2 => be::<2>(b, 0).map(|x| i64::from(i16::from_be_bytes(x))),
            4 => be::<4>(b, 0).map(|x| i64::from(i32::from_be_bytes(x))),
            _ => be::<8>(b, 0).map(i64::from_be_bytes),
        }
        .ok_or_else(bad)
    };
    Ok(match ty.as_str() {
        "BOOL" => Value::Bool(b.first().ok_or_else(bad)? != &0),
        "INT2" => Value::from(int(2)?),
        "INT4" => Value::from(int(4)?),
        "INT8" => Value::from(int(8)?),
        "OID" => Value::from(be::<4>(b, 0).map(u32::from_be_bytes).ok_or_else(bad)?),
        "FLOAT4" => float(f64::from(
            be::<4>(b, 0).map(f32::from_be_bytes).ok_or_else(bad)?,
        )),
        "FLOAT8" => float(be::<8>(b, 0).map(f64::from_be_bytes).ok_or_else(bad)?),
        "NUMERIC" => Value::String(numeric(b).ok_or_else(bad)?),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CHAR" | "CITEXT" | "XML" | "UNKNOWN" => {
            Value::String(String::from_utf8_lossy(b).into_owned())
        }
        "JSON" => serde_json::from_slice(b).map_err(|_| bad())?,
        "JSONB" => serde_json::from_slice(b.get(1..).ok_or_else(bad)?).map_err(|_| bad())?,
        "UUID" => Value::String(uuid::Uuid::from_slice(b).map_err(|_| bad())?.to_string()),
        "BYTEA" => hex(b),
        "DATE" => match int(4)? {
            d if d == i64::from(i32::MAX) => Value::String("infinity".into()),
            d if d == i64::from(i32::MIN) => Value::String("-infinity".into()),
            d => Value::String(date(d + PG_EPOCH_DAYS)),
        },
        "TIME" => Value::String(clock(int(8)?)),
        "TIMESTAMP" => Value::String(timestamp(int(8)?, false)),
        "TIMESTAMPTZ" => Value::String(timestamp(int(8)?, true)),
        _ => {
            return Err(ToolFailure::failed(
                super::QUERY_FAILED,
                format!(
                    "column {column:?} has type {}, which sql_query does not read; cast it in \
                     the query ({column}::text)",
                    ty.to_lowercase()
                ),
            ));
        }
    })
}

fn row(r: &PgRow, columns: &[String]) -> Result<Vec<Value>, ToolFailure> {
    columns
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let v = r.try_get_raw(i).map_err(|e| {
                ToolFailure::failed(super::QUERY_FAILED, format!("column {name:?}: {e}"))
            })?;
            cell(v, name)
        })
        .collect()
}

/// Runs one statement on the database at `url`.
pub(super) async fn query(
    url: &str,
    sql: &str,
    params: &[Value],
    max_rows: u64,
    budget: usize,
    timeout_ms: u64,
) -> Result<Table, ToolFailure> {
    // The URL may hold a password: no message quotes it.
    let options: PgConnectOptions = url.parse().map_err(|_| {
        ToolFailure::failed(
            super::NOT_CONFIGURED,
            "the database's URL is not a valid postgres:// URL",
        )
    })?;
    let timeout = timeout_ms.to_string();
    let options = options.application_name("toolwarden sql_query").options([
        ("default_transaction_read_only", "on"),
        ("statement_timeout", timeout.as_str()),
    ]);
    let wait = Duration::from_millis(timeout_ms);
    let mut conn = tokio::time::timeout(wait, PgConnection::connect_with(&options))
        .await
        .map_err(|_| {
            ToolFailure::failed(
                super::QUERY_FAILED,
                format!("the database did not answer within {timeout_ms} ms"),
            )
        })?
        .map_err(|e| ToolFailure::failed(super::QUERY_FAILED, format!("cannot connect: {e}")))?;
    let fail = |e| failure(e, timeout_ms);
    let ran = async {
        sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut conn)
            .await
            .map_err(fail)?;
        // A query, so the snapshot is taken: from here the transaction stays read-only.
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(timeout.clone())
            .execute(&mut conn)
            .await
            .map_err(fail)?;
        let types: Vec<PgTypeInfo> = params.iter().map(param_type).collect();
        let stmt = (&mut conn)
            .prepare_with(sqlx::AssertSqlSafe(sql.to_owned()).into_sql_str(), &types)
            .await
            .map_err(fail)?;
        let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
        let mut q = stmt.query();
        for p in params {
            q = match p {
                Value::Bool(b) => q.bind(*b),
                Value::Number(n) if n.is_i64() => q.bind(n.as_i64()),
                Value::Number(n) if n.is_u64() => {
                    q.bind(i64::try_from(n.as_u64().unwrap_or(0)).ok())
                }
                Value::Number(n) => q.bind(n.as_f64()),
                Value::String(s) => q.bind(s.clone()),
                _ => q.bind(None::<String>),
            };
        }
        let mut collect = Collect::new(columns, max_rows, budget);
        let mut rows = q.fetch(&mut conn);
        use futures_util::TryStreamExt as _;
        while let Some(r) = rows.try_next().await.map_err(fail)? {
            if !collect.push(row(&r, &collect.table.columns)?) {
                break;
            }
        }
        drop(rows);
        Ok::<_, ToolFailure>(collect.table)
    };
    // The server stops the statement at its timeout; this bounds a server that does not answer.
    let out = tokio::time::timeout(wait + Duration::from_secs(5), ran)
        .await
        .unwrap_or_else(|_| Err(too_slow(timeout_ms)));
    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut conn).await;
    let _ = conn.close().await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerics_dates_and_times_read_as_postgresql_writes_them() {
        // 12345.678 = digits [1, 2345, 6780], weight 1, scale 3.
        let n = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C];
        assert_eq!(numeric(&n).as_deref(), Some("12345.678"));
        // -0.0005 = digits [5], weight -1, scale 4.
        let n = [0, 1, 0xFF, 0xFF, 0x40, 0, 0, 4, 0, 5];
        assert_eq!(numeric(&n).as_deref(), Some("-0.0005"));
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(PG_EPOCH_DAYS + 9_132), "2025-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(timestamp(0, true), "2000-01-01T00:00:00Z");
        assert_eq!(timestamp(-1, false), "1999-12-31T23:59:59.999999");
        assert_eq!(clock(3_723_000_001), "01:02:03.000001");
    }
}
