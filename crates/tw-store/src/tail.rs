//! The audit tail's own file, `<store>.tail`: where a call's record is committed before its caller
//! gets the answer, apart from the indexed log it then moves into.
//!
//! SQLite lets one connection at a time write a file. With the tail in the store's file, every
//! move of the tail into audit_log (about 10 us a row: audit_log's filter indexes) held the write
//! lock every append waits for, and moves were a third of the serialized work per record. In a
//! file of its own the tail takes appends while a move writes audit_log beside it: the append
//! path is the tail's two pages and nothing else. Decision 0033 has the measurements.
//!
//! A move is two commits, one per file: the rows go into audit_log, then leave the tail. A crash
//! between them leaves rows in both, which the next move deletes from the tail (every tail row
//! at or below the log's newest id is in the log or an archive: ids only grow, and rows move in
//! id order). So a record is always in at least one of them, as long as whoever reads both
//! takes its view of the tail first and of the log second ([`PIN`]): a view of the log taken
//! before a move and of the tail after it would miss the moved rows. The appender's connection
//! has the tail as its main database, which SQLite reads first in every statement; the store's
//! other connections pin the tail explicitly before they read both.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};

/// The name the tail's file is attached under on the store's connections. Table names are
/// unique across the two files, so statements name `audit_tail` unqualified.
pub(crate) const SCHEMA: &str = "tail";

/// Starts a read of the tail, so that a transaction's view of it is taken before its view of
/// audit_log (see the module docs).
pub(crate) const PIN: &str = "SELECT count(*) FROM (SELECT 1 FROM audit_tail LIMIT 1)";

/// The tail file's format (`PRAGMA user_version`). A file of another version is refused rather
/// than touched: the records in it may not have reached audit_log yet.
const VERSION: i64 = 1;

/// audit_log's columns and checks, and no index but the id and the unique execution id, so a
/// commit writes two pages. A migration that changes audit_log's columns changes these too (and
/// [`VERSION`]). Only the move deletes rows, after it has copied them.
const CREATE: &str = "
CREATE TABLE audit_tail (
    id                 INTEGER PRIMARY KEY,
    execution_id       TEXT    NOT NULL UNIQUE,
    trace_id           TEXT    NOT NULL,
    tool               TEXT    NOT NULL,
    agent_id           TEXT    NOT NULL,
    skill              TEXT,
    user_id            TEXT,
    arguments          TEXT    NOT NULL,
    decision           TEXT,
    explanation        TEXT,
    status             TEXT    NOT NULL,
    error_code         TEXT,
    error_message      TEXT,
    output             TEXT,
    output_sha256      TEXT,
    output_bytes       INTEGER NOT NULL,
    truncated          INTEGER NOT NULL,
    started_at         INTEGER NOT NULL,
    completed_at       INTEGER NOT NULL,
    duration_us        INTEGER NOT NULL,
    metadata           TEXT    NOT NULL,
    violation_type     TEXT    CHECK (
        length(violation_type) <= 64
        AND violation_type GLOB '[a-z]*'
        AND violation_type NOT GLOB '*[^a-z0-9_]*'
    ),
    violation_severity TEXT    CHECK (
        violation_severity IN ('warning', 'error', 'critical')
        AND (violation_type IS NULL) = (violation_severity IS NULL)
    ),
    prev               BLOB    NOT NULL CHECK (length(prev) = 32),
    hash               BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;
CREATE TRIGGER audit_tail_no_update BEFORE UPDATE ON audit_tail
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
";

/// Where the tail of the store at `db` lives.
pub(crate) fn path(db: &Path) -> PathBuf {
    crate::sqlite::beside(db, ".tail")
}

/// Makes the tail's file (owner-only, WAL) if it is missing, and checks its format; returns its
/// path. Called with the store's open lock held.
pub(crate) fn prepare(db: &Path) -> Result<PathBuf> {
    let path = path(db);
    crate::sqlite::create_private(&path)?;
    let fail = |e: rusqlite::Error| StoreError::Database(format!("{}: {e}", path.display()));
    let mut conn =
        Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(fail)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(fail)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Database(format!(
            "{}: journal mode {mode}, not WAL",
            path.display()
        )));
    }
    // Under the store's open lock no other process makes the table meanwhile: a file that has
    // it is only read, and one that has not gets it in one transaction (rolled back on drop if
    // it fails).
    let exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'audit_tail')",
            [],
            |r| r.get(0),
        )
        .map_err(fail)?;
    if !exists {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute_batch(CREATE).map_err(fail)?;
        tx.pragma_update(None, "user_version", VERSION)
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        return Ok(path);
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(fail)?;
    if version != VERSION {
        return Err(StoreError::Database(format!(
            "{}: audit tail of format {version}, not {VERSION}: written by another version of \
             Toolwarden, whose records it may still hold; open the store with that version once \
             (it moves them into the log), or with a newer one",
            path.display()
        )));
    }
    Ok(path)
}

/// Attaches the tail at `tail` to `conn` under [`SCHEMA`].
pub(crate) fn attach(conn: &Connection, tail: &Path) -> rusqlite::Result<()> {
    conn.execute(
        &format!("ATTACH DATABASE ?1 AS {SCHEMA}"),
        [tail.to_string_lossy()],
    )?;
    Ok(())
}
