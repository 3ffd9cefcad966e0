//! The audit log's text index, so that the viewer's text search finds rare text on a big log in
//! milliseconds instead of reading every row.
//!
//! It is an FTS5 trigram index (`detail=none`: which rows hold a trigram, no positions) of the
//! four columns the search looks in: tool, arguments, error message and output. It lives in a
//! file of its own next to the store, `<store>.search`, written by one background thread of
//! lowest CPU priority (nice 19):
//!
//! - Indexing costs about as much CPU per byte of text as the rest of a call's record put
//!   together. In the store's file its write transactions would hold the write lock that every
//!   call's audit record waits for; in a file of its own it never touches the audit path. It
//!   works when the log has been quiet for [`QUIET`] (no commit by this process). While calls
//!   are being recorded it works only once it has fallen [`MAX_LAG`] rows behind, and then for
//!   at most [`BUSY_SHARE`] of the time, in short chunks, at nice 19: two cores shared with the
//!   calls showed that nice alone does not keep it off their path (a governed call's p99 went
//!   from 73 to 181 us while it indexed 4 KiB outputs as fast as it could).
//! - It is derived data. A missing, damaged or older-format file is rebuilt from the log; nothing
//!   is lost with it.
//!
//! The index covers the log's rows up to an id (`indexed_to`, kept in the same file and
//! committed with the rows it covers); the rows above it are the newest ones (ids only grow, and
//! the writer moves the tail into the log in id order), which a search reads directly, within its
//! scan window, as it did before there was an index. A search uses the index as a sieve only:
//! every trigram of the text must be in a row for it to be read, and the row is then checked with
//! the same `LIKE` as an unindexed one, so both give the same answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, params};

use crate::error::{Result, StoreError};

/// The index file's format; a file of another version is rebuilt.
const VERSION: i64 = 1;

/// Rows one indexing transaction takes at most.
const CHUNK_ROWS: usize = 256;

/// Text one indexing transaction takes at most, so a run of big outputs is not read into memory
/// all at once.
const CHUNK_BYTES: usize = 4 << 20;

/// How long the indexer sleeps when it has caught up (the writer's moves do not wake it: new rows
/// wait at most this long, and searches read them directly meanwhile).
const IDLE: Duration = Duration::from_millis(500);

/// How long the log must have been quiet (no commit by this process) before the indexer works:
/// it yields to the calls, so a burst of calls does not share the CPU and the disk with it.
const QUIET: Duration = Duration::from_millis(100);

/// How far the index may fall behind before it works through the calls anyway: a search reads
/// the rows above the index directly, and this keeps them within about half of one page's direct
/// window (`TEXT_SCAN_WINDOW`) while the calls leave it the time.
const MAX_LAG: i64 = 8_000;

/// The share of the time the indexer works while calls are being recorded: after a chunk that
/// took `d` it rests `d * (1 / BUSY_SHARE - 1)`. Under a sustained stream of calls heavier than
/// this share can index, the index falls behind and searches read the newest rows directly (as
/// correct, slower); it catches up in the next quiet spell.
const BUSY_SHARE: f64 = 0.1;

/// Text one indexing transaction takes at most while calls are being recorded, so each piece of
/// work it does between them is short (a few milliseconds of tokenizing).
const BUSY_CHUNK_BYTES: usize = 256 << 10;

/// How long it waits after a failure (another process holding the index, a full disk).
const RETRY: Duration = Duration::from_secs(5);

/// Trigrams of a search text the index is asked for at most, spread over the text. Every
/// trigram ANDed in costs a walk of its list of rows, and the rows the index lets through are
/// checked in full anyway. On the bench log (1,000,000 rows): a page of "postgres deadlock" took
/// 7.3 ms with all 15 of its trigrams, 4.5 ms with 8 and 1.6 ms with 4, for 2,497 candidates in
/// all three cases; "cargo test" 6.2 ms with its 8 and 3.4 ms with 4, 7,207 candidates each.
const MAX_TRIGRAMS: usize = 4;

/// The name the index file is attached under on the store's read connections.
pub(crate) const SCHEMA: &str = "search";

/// The index file of a store.
pub(crate) fn index_path(store: &Path) -> PathBuf {
    crate::beside(store, ".search")
}

/// Makes sure the index file exists in the current format, rebuilding it (empty, to be filled by
/// the indexer) when it is missing, damaged or of another version. A file another process holds
/// locked just now is left as it is: it is in use, so not to be pulled from under that process.
pub(crate) fn prepare(store: &Path) -> Result<PathBuf> {
    let path = index_path(store);
    match check(&path) {
        Ok(()) => {}
        Err(e) if is_busy(&e) => {
            tracing::debug!(path = %path.display(), "the audit text index is busy; using it as it is");
        }
        Err(e) => {
            if path.exists() {
                tracing::warn!(path = %path.display(), error = %e, "rebuilding the audit text index");
            }
            remove(&path)?;
            create(&path).map_err(|e| sqlite_error(&path, e))?;
        }
    }
    Ok(path)
}

/// Whether the file at `path` is an index of this version that SQLite can read, or why not.
fn check(path: &Path) -> rusqlite::Result<()> {
    if !path.exists() {
        return Err(rusqlite::Error::InvalidPath(path.to_owned()));
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.query_row("SELECT indexed_to FROM audit_text_state", [], |r| {
        r.get::<_, i64>(0)
    })?;
    conn.query_row("SELECT count(*) FROM audit_text WHERE rowid = 0", [], |r| {
        r.get::<_, i64>(0)
    })?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version == VERSION {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some(format!("index format {version}, not {VERSION}")),
        ))
    }
}

fn remove(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(StoreError::Io {
                    path: name.into(),
                    source,
                });
            }
        }
    }
    Ok(())
}

fn create(path: &Path) -> rusqlite::Result<()> {
    crate::create_private(path).map_err(|_| rusqlite::Error::InvalidPath(path.to_owned()))?;
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE;
         CREATE VIRTUAL TABLE audit_text USING fts5(
             tool, arguments, error_message, output,
             content = '', detail = none, tokenize = 'trigram');
         CREATE TABLE audit_text_state (
             one        INTEGER PRIMARY KEY CHECK (one = 1),
             indexed_to INTEGER NOT NULL);
         INSERT INTO audit_text_state VALUES (1, 0);
         PRAGMA user_version = {VERSION};
         COMMIT;"
    ))
}

fn sqlite_error(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    }
}

/// The index's query for a search text: its distinct trigrams (at most [`MAX_TRIGRAMS`], spread
/// over the text), quoted so FTS5 reads them as plain strings, ANDed. `None` for a text of
/// fewer than three characters, which has no trigram to look up.
pub(crate) fn match_query(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut seen: Vec<String> = Vec::new();
    for w in chars.windows(3) {
        let t: String = w.iter().collect();
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    if seen.is_empty() {
        return None;
    }
    // Spread over the text rather than its start, when there are more than enough.
    let step = seen.len().div_ceil(MAX_TRIGRAMS);
    let terms: Vec<String> = seen
        .iter()
        .step_by(step)
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    Some(terms.join(" AND "))
}

/// How far the audit log's text index reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TextIndexStatus {
    /// Every record up to this id is in the index (0: none yet).
    pub indexed_to: i64,
    /// The newest record's id (0: an empty log). Searches read the records above `indexed_to`
    /// directly.
    pub newest: i64,
}

/// The index's reach on the store's read pool.
pub(crate) async fn status(pool: &sqlx::SqlitePool) -> Result<TextIndexStatus> {
    let sql = format!(
        "SELECT (SELECT indexed_to FROM {SCHEMA}.audit_text_state), \
         MAX((SELECT IFNULL(MAX(id), 0) FROM audit_log), (SELECT IFNULL(MAX(id), 0) FROM audit_tail))"
    );
    // Built from constants only.
    let (indexed_to, newest) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await?;
    Ok(TextIndexStatus { indexed_to, newest })
}

/// The background indexer of one store. Stops when dropped or closed.
#[derive(Debug)]
pub(crate) struct Indexer {
    stop: Arc<AtomicBool>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Indexer {
    /// Starts indexing the log of `store` into `index`; `commits` counts this process's commits
    /// to the log (the indexer waits for it to stand still).
    pub(crate) fn start(store: &Path, index: &Path, commits: Arc<AtomicU64>) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (store, index, flag) = (store.to_owned(), index.to_owned(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("tw-audit-text".into())
            .spawn(move || run(&store, &index, &flag, &commits))
            .map_err(|source| StoreError::Io {
                path: PathBuf::from("tw-audit-text thread"),
                source,
            })?;
        Ok(Self {
            stop,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }

    /// Asks the thread to stop after its current transaction and returns it, to be joined.
    fn signal(&self) -> Option<JoinHandle<()>> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.lock().ok()?.take()?;
        thread.thread().unpark();
        Some(thread)
    }

    /// Stops the thread and waits for it (at most one transaction).
    pub(crate) async fn close(&self) {
        if let Some(thread) = self.signal() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        let _ = self.signal();
    }
}

fn run(store: &Path, index: &Path, stop: &AtomicBool, commits: &AtomicU64) {
    // Lowest priority for this thread only (on Linux, a thread id names one thread): the calls
    // come first. Failing to lower it only makes indexing compete as an equal.
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), 19) {
        tracing::debug!(error = %e, "the audit text indexer runs at normal priority");
    }
    let mut conns: Option<(Connection, Connection)> = None;
    let mut seen = commits.load(Ordering::Relaxed);
    while !stop.load(Ordering::Acquire) {
        if conns.is_none() {
            match connect(store, index) {
                Ok(c) => conns = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "the audit text index is not updated; retrying");
                    std::thread::park_timeout(RETRY);
                    continue;
                }
            }
        }
        let Some((log, text)) = conns.as_mut() else {
            continue;
        };
        // Calls are being recorded: wait for a quiet spell, unless the index is too far behind;
        // then work in short chunks and rest in between.
        let now = commits.load(Ordering::Relaxed);
        let busy = now != seen;
        if busy {
            seen = now;
            match lag(log, text) {
                Ok(behind) if behind < MAX_LAG => {
                    std::thread::park_timeout(QUIET);
                    continue;
                }
                _ => {}
            }
        }
        let budget = if busy { BUSY_CHUNK_BYTES } else { CHUNK_BYTES };
        let started = Instant::now();
        let pause = match index_some(log, text, stop, budget) {
            Ok(0) => IDLE,
            Ok(_) if busy => started.elapsed().mul_f64(1.0 / BUSY_SHARE - 1.0),
            Ok(_) => Duration::ZERO,
            Err(e) if is_busy(&e) => IDLE,
            Err(e) => {
                tracing::warn!(error = %e, "the audit text index is not updated; retrying");
                conns = None;
                RETRY
            }
        };
        if !pause.is_zero() {
            std::thread::park_timeout(pause);
        }
    }
}

fn connect(store: &Path, index: &Path) -> rusqlite::Result<(Connection, Connection)> {
    let log = Connection::open_with_flags(
        store,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let text = Connection::open_with_flags(
        index,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Another process indexing the same log holds the lock: skip a round rather than wait.
    text.busy_timeout(Duration::ZERO)?;
    text.pragma_update(None, "synchronous", "NORMAL")?;
    Ok((log, text))
}

/// How many ids the log is ahead of the index.
fn lag(log: &Connection, text: &Connection) -> rusqlite::Result<i64> {
    let newest: i64 =
        log.query_row("SELECT IFNULL(MAX(id), 0) FROM audit_log", [], |r| r.get(0))?;
    let reach: i64 = text.query_row("SELECT indexed_to FROM audit_text_state", [], |r| r.get(0))?;
    Ok(newest - reach)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A row's text as the index takes it.
struct Row {
    id: i64,
    tool: String,
    arguments: String,
    error_message: Option<String>,
    output: Option<String>,
}

/// Indexes the next rows of the log past `indexed_to` (at most [`CHUNK_ROWS`], and only past
/// `max_bytes` of text for the row that crosses it), in one transaction; returns how many.
fn index_some(
    log: &Connection,
    text: &mut Connection,
    stop: &AtomicBool,
    max_bytes: usize,
) -> rusqlite::Result<usize> {
    let from: i64 = text.query_row("SELECT indexed_to FROM audit_text_state", [], |r| r.get(0))?;
    // Read first and let go of the log's snapshot before the slow part, so a long index run never
    // holds back the log's checkpoints.
    let rows = {
        let mut stmt = log.prepare_cached(
            "SELECT id, tool, arguments, error_message, output FROM audit_log \
             WHERE id > ?1 ORDER BY id LIMIT ?2",
        )?;
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut it = stmt.query(params![from, CHUNK_ROWS as i64])?;
        while let Some(r) = it.next()? {
            let row = Row {
                id: r.get(0)?,
                tool: r.get(1)?,
                arguments: r.get(2)?,
                error_message: r.get(3)?,
                output: r.get(4)?,
            };
            bytes += row.arguments.len()
                + row.error_message.as_ref().map_or(0, String::len)
                + row.output.as_ref().map_or(0, String::len);
            rows.push(row);
            if bytes >= max_bytes {
                break;
            }
        }
        rows
    };
    let Some(last) = rows.last().map(|r| r.id) else {
        return Ok(0);
    };
    let started = Instant::now();
    let tx = text.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Another process may have indexed these rows since they were read.
    let now: i64 = tx.query_row("SELECT indexed_to FROM audit_text_state", [], |r| r.get(0))?;
    if now != from {
        return Ok(1);
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO audit_text (rowid, tool, arguments, error_message, output) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for r in &rows {
            if stop.load(Ordering::Acquire) {
                // Dropped without a commit: rolled back, to be done by the next run.
                return Ok(0);
            }
            insert.execute(params![
                r.id,
                r.tool,
                r.arguments,
                r.error_message,
                r.output
            ])?;
        }
    }
    tx.execute("UPDATE audit_text_state SET indexed_to = ?1", [last])?;
    tx.commit()?;
    tracing::trace!(
        rows = rows.len(),
        to = last,
        us = started.elapsed().as_micros() as u64,
        "indexed audit text"
    );
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_text_becomes_its_distinct_trigrams_quoted() {
        assert_eq!(match_query("ab"), None);
        assert_eq!(match_query(""), None);
        assert_eq!(match_query("abc").as_deref(), Some("\"abc\""));
        assert_eq!(
            match_query("aaaa\"b").as_deref(),
            Some("\"aaa\" AND \"aa\"\"\" AND \"a\"\"b\"")
        );
        assert_eq!(
            match_query("abcdefgh").as_deref(),
            Some("\"abc\" AND \"cde\" AND \"efg\"")
        );
        assert_eq!(match_query("ééé!").as_deref(), Some("\"ééé\" AND \"éé!\""));
    }

    #[test]
    fn a_long_text_asks_for_at_most_the_trigram_limit() {
        let text: String = ('a'..='z').chain('A'..='Z').collect();
        let q = match_query(&text).unwrap_or_default();
        let terms = q.split(" AND ").count();
        assert!(
            (MAX_TRIGRAMS / 2..=MAX_TRIGRAMS).contains(&terms),
            "{terms}: {q}"
        );
    }
}
