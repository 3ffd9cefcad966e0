//! The audit and admin logs as hash chains: how a row's link is computed (the audit writer
//! computes it before the insert, from the last link it knows, and the insert only goes in if
//! that is still the log's last row), and the one-time sealing of rows written before the chain.
//!
//! A row's `hash` is SHA-256 over, in order:
//! - the log's domain line, `toolwarden audit v1\n` or `toolwarden admin v1\n`;
//! - `prev`, the previous row's hash (32 zero bytes for the first row);
//! - each hashed column in [`AUDIT_COLUMNS`] or [`ADMIN_COLUMNS`] order, as stored: `0x00` for
//!   NULL; `0x01` and the 8-byte big-endian integer; `0x02`, the 8-byte big-endian length and
//!   the UTF-8 text; `0x03` and the 8-byte big-endian bits of a real; `0x04`, length and bytes
//!   of a blob.
//!
//! An audit row's output is not hashed itself: its SHA-256 (`output_sha256`) is, and the
//! verifier checks the output against it. So a 16 KiB output costs the chain nothing extra, and
//! an outside verifier needs nothing but SHA-256. docs/decisions/0035-verifiable-audit-log.md
//! says why the chain is one sequence per store.

use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::record::Encoded;

/// The link before the first row.
pub(crate) const GENESIS: [u8; 32] = [0; 32];

/// The audit columns a link covers, in order (every column but `id` and `output`).
pub(crate) const AUDIT_COLUMNS: &str = "execution_id, trace_id, tool, agent_id, skill, user_id, \
     arguments, decision, explanation, status, error_code, error_message, output_sha256, \
     output_bytes, truncated, started_at, completed_at, duration_us, metadata, violation_type, \
     violation_severity";

/// The audit log's last record, its id and hash: the tail's newest, else audit_log's, else the
/// last one the newest archive holds (after a cut both tables can be empty); no row for a log
/// never written. One b-tree seek each.
pub(crate) const AUDIT_HEAD: &str = "SELECT id, hash FROM \
     (SELECT id, hash FROM audit_tail ORDER BY id DESC LIMIT 1) \
     UNION ALL SELECT id, hash FROM (SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1) \
     UNION ALL SELECT id, hash FROM (SELECT last_id AS id, last_hash AS hash \
     FROM audit_archives ORDER BY last_id DESC LIMIT 1) \
     ORDER BY id DESC LIMIT 1";

/// How many columns [`AUDIT_COLUMNS`] names.
pub(crate) const AUDIT_COLUMN_COUNT: usize = 21;

/// The admin columns a link covers, in order.
pub(crate) const ADMIN_COLUMNS: &str = "at, actor, kind, summary, details";

/// Which log a link belongs to (each has its own domain line, so a row of one can never pass
/// for a row of the other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Log {
    Audit,
    Admin,
}

impl Log {
    fn domain(self) -> &'static [u8] {
        match self {
            Self::Audit => b"toolwarden audit v1\n",
            Self::Admin => b"toolwarden admin v1\n",
        }
    }
}

/// One column's value as the link encodes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Real(f64),
    Blob(&'a [u8]),
}

impl<'a> From<ValueRef<'a>> for Field<'a> {
    fn from(v: ValueRef<'a>) -> Self {
        match v {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(i) => Self::Int(i),
            ValueRef::Real(r) => Self::Real(r),
            // STRICT tables keep TEXT columns valid UTF-8 as written through the API; bytes that
            // are not (written around it) are hashed as a blob, which cannot match the text's
            // link, so the edit shows.
            ValueRef::Text(t) => std::str::from_utf8(t).map_or(Self::Blob(t), Self::Text),
            ValueRef::Blob(b) => Self::Blob(b),
        }
    }
}

/// The link of a row whose predecessor's hash is `prev`.
pub(crate) fn link<'a>(
    log: Log,
    prev: &[u8; 32],
    fields: impl IntoIterator<Item = Field<'a>>,
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(log.domain());
    h.update(prev);
    for f in fields {
        match f {
            Field::Null => h.update([0]),
            Field::Int(i) => {
                h.update([1]);
                h.update(i.to_be_bytes());
            }
            Field::Text(t) => {
                h.update([2]);
                h.update((t.len() as u64).to_be_bytes());
                h.update(t.as_bytes());
            }
            Field::Real(r) => {
                h.update([3]);
                h.update(r.to_bits().to_be_bytes());
            }
            Field::Blob(b) => {
                h.update([4]);
                h.update((b.len() as u64).to_be_bytes());
                h.update(b);
            }
        }
    }
    h.finalize().into()
}

/// A 32-byte hash read from a column, if it is one.
pub(crate) fn hash32(v: ValueRef<'_>) -> Option<[u8; 32]> {
    match v {
        ValueRef::Blob(b) => b.try_into().ok(),
        _ => None,
    }
}

/// Lowercase hex, the form hashes take in messages and files.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// A 32-byte hash from hex.
pub(crate) fn hash_from_hex(text: &str) -> Option<[u8; 32]> {
    unhex(text).and_then(|b| b.try_into().ok())
}

/// Bytes from lowercase or uppercase hex.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn text(t: &Option<String>) -> Field<'_> {
    t.as_deref().map_or(Field::Null, Field::Text)
}

/// An audit record's link after `prev`: its fields as the insert binds them, so as they are
/// stored and as `audit verify` reads them back.
pub(crate) fn audit_link(prev: &[u8; 32], e: &Encoded, output_bytes: i64) -> [u8; 32] {
    let r = &e.record;
    let violation = r.violation.as_ref();
    link(
        Log::Audit,
        prev,
        [
            Field::Text(&r.execution_id),
            Field::Text(&r.trace_id),
            Field::Text(&r.tool),
            Field::Text(&r.agent_id),
            text(&r.skill),
            text(&r.user_id),
            Field::Text(&e.arguments),
            text(&r.decision),
            e.explanation().map_or(Field::Null, Field::Text),
            Field::Text(r.status.as_str()),
            text(&r.error_code),
            text(&r.error_message),
            text(&e.output_sha256),
            Field::Int(output_bytes),
            Field::Int(i64::from(r.truncated)),
            Field::Int(r.started_at),
            Field::Int(r.completed_at),
            Field::Int(r.duration_us),
            Field::Text(e.metadata()),
            violation.map_or(Field::Null, |v| Field::Text(&v.kind)),
            violation.map_or(Field::Null, |v| Field::Text(v.severity.as_str())),
        ],
    )
}

/// Seals the rows written before the chain existed (`hash` empty), in id order, continuing from
/// the last sealed row; returns how many rows of each log it sealed. One transaction: a crash
/// leaves every row as it was.
pub(crate) fn seal(conn: &rusqlite::Connection) -> rusqlite::Result<(usize, usize)> {
    let unsealed = |table: &str| -> rusqlite::Result<bool> {
        conn.query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE hash IS NULL)"),
            [],
            |r| r.get(0),
        )
    };
    if !unsealed("audit_log")? && !unsealed("admin_log")? {
        return Ok((0, 0));
    }
    // Rows from before the chain come before every linked row. An unlinked row among linked
    // ones was written or changed around Toolwarden: sealing it would hide that, so nothing is
    // sealed and `audit verify` names it.
    for table in ["audit_log", "admin_log"] {
        let among: bool = conn.query_row(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE hash IS NULL AND id < \
                 (SELECT MAX(id) FROM {table} WHERE hash IS NOT NULL))"
            ),
            [],
            |r| r.get(0),
        )?;
        if among {
            tracing::error!(
                table,
                "rows without a chain link among linked ones: not sealed; run `toolwarden audit verify`"
            );
            return Ok((0, 0));
        }
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let done = seal_table(conn, Log::Audit, "audit_log", AUDIT_COLUMNS).and_then(|audit| {
        let admin = seal_table(conn, Log::Admin, "admin_log", ADMIN_COLUMNS)?;
        conn.execute_batch("COMMIT")?;
        Ok((audit, admin))
    });
    if done.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    done
}

fn seal_table(
    conn: &rusqlite::Connection,
    log: Log,
    table: &str,
    columns: &str,
) -> rusqlite::Result<usize> {
    use rusqlite::OptionalExtension as _;
    // Sealing goes in id order, so unsealed rows all come after the sealed ones.
    let mut prev: [u8; 32] = conn
        .query_row(
            &format!("SELECT hash FROM {table} WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1"),
            [],
            |r| Ok(hash32(r.get_ref(0)?)),
        )
        .optional()?
        .flatten()
        .unwrap_or(GENESIS);
    let mut read = conn.prepare(&format!(
        "SELECT id, {columns} FROM {table} WHERE hash IS NULL ORDER BY id"
    ))?;
    let mut update = conn.prepare(&format!(
        "UPDATE {table} SET prev = ?1, hash = ?2 WHERE id = ?3"
    ))?;
    let mut rows = read.query([])?;
    let mut sealed = 0;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let n = row.as_ref().column_count();
        let fields = (1..n)
            .map(|i| row.get_ref(i).map(Field::from))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let hash = link(log, &prev, fields);
        update.execute(rusqlite::params![prev.as_slice(), hash.as_slice(), id])?;
        prev = hash;
        sealed += 1;
    }
    if sealed > 0 {
        tracing::info!(
            table,
            rows = sealed,
            "sealed rows written before the hash chain"
        );
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_covers_every_field_its_order_its_kind_and_the_previous_link() {
        let base = [Field::Text("a"), Field::Int(1), Field::Null];
        let h = link(Log::Audit, &GENESIS, base);
        assert_eq!(h, link(Log::Audit, &GENESIS, base));
        let other_prev = link(Log::Audit, &[1; 32], base);
        let other_log = link(Log::Admin, &GENESIS, base);
        let reordered = link(
            Log::Audit,
            &GENESIS,
            [Field::Int(1), Field::Text("a"), Field::Null],
        );
        // "1" as text is not 1 as an integer; an empty text is not NULL; "ab" + "" is not
        // "a" + "b".
        let kinds = link(
            Log::Audit,
            &GENESIS,
            [Field::Text("a"), Field::Text("1"), Field::Null],
        );
        let empty = link(
            Log::Audit,
            &GENESIS,
            [Field::Text("a"), Field::Int(1), Field::Text("")],
        );
        let split = link(Log::Audit, &GENESIS, [Field::Text("ab"), Field::Text("")]);
        let split2 = link(Log::Audit, &GENESIS, [Field::Text("a"), Field::Text("b")]);
        for other in [other_prev, other_log, reordered, kinds, empty] {
            assert_ne!(h, other);
        }
        assert_ne!(split, split2);
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(hex(&bytes), "0001abff");
        assert_eq!(unhex("0001ABff").unwrap(), bytes);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é1"), None);
    }
}
