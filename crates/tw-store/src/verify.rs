//! `audit verify`: recomputes both logs' chains from the rows as stored, checks every output
//! against its digest and every checkpoint (the table's, the file's beside the database, and any
//! the caller saved elsewhere) against its signature, the store's key and the logs, and says
//! where each break is: which record was edited, deleted, inserted or moved, and which records a
//! cut at the end removed.
//!
//! It reads one snapshot of the file on a connection of its own (read-only), so appends go on
//! meanwhile; it never writes.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rusqlite::OpenFlags;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chain::{self, ADMIN_COLUMNS, AUDIT_COLUMN_COUNT, AUDIT_COLUMNS, Field, GENESIS, Log};
use crate::checkpoint::{self, Checkpoint, CheckpointFault, Heads, SigningKey};
use crate::error::{Result, StoreError};

/// At most this many problems are listed (the count goes on).
pub const MAX_PROBLEMS: usize = 100;

/// What kind of break a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A row's content no longer matches its hash, or its output no longer matches its digest.
    Edited,
    /// Rows are missing between two that were linked.
    Deleted,
    /// A row was put between two that were linked.
    Inserted,
    /// A row links to one that comes after it, or rows were moved.
    Reordered,
    /// Rows at the end that a checkpoint covers are gone.
    Truncated,
    /// A row has no link at all (written around Toolwarden).
    Unlinked,
    /// A checkpoint's signature does not verify, or it is not a checkpoint.
    BadCheckpoint,
    /// A checkpoint was signed by a key that is not this store's.
    ForeignKey,
    /// The signing key is missing or unreadable while checkpoints exist.
    MissingKey,
}

/// One break, located.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `audit`, `admin` or `checkpoint`.
    pub log: String,
    /// The record (or entry) where it shows; for a checkpoint, the head it covers.
    pub id: Option<i64>,
    /// What kind of break.
    pub kind: ProblemKind,
    /// What was found, in a sentence.
    pub message: String,
}

/// A log's last row as verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// Its id.
    pub id: i64,
    /// Its hash (hex).
    pub hash: String,
}

/// What `audit verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Audit records read.
    pub audit_records: u64,
    /// Admin log entries read.
    pub admin_entries: u64,
    /// The audit log's last record.
    pub audit_head: Option<Head>,
    /// The admin log's last entry.
    pub admin_head: Option<Head>,
    /// The store's public key (hex), if it has one yet.
    pub public_key: Option<String>,
    /// Checkpoints read (table, file and given), counted once each.
    pub checkpoints: u64,
    /// The newest checkpoint whose signature verifies and whose heads the logs still hold.
    pub latest_checkpoint: Option<Checkpoint>,
    /// Audit records after that checkpoint: the chain links them, no signature covers them yet.
    pub audit_uncovered: u64,
    /// Archives recorded whose signatures verify (their records left the log; each file still
    /// where it was written is checked too).
    pub archives: u64,
    /// Every break found, in log and id order (at most [`MAX_PROBLEMS`]).
    pub problems: Vec<Problem>,
    /// How many breaks there were in all.
    pub problem_count: u64,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problem_count == 0
    }
}

/// Verifies the store at `db`, with `extra` checkpoints saved elsewhere.
pub(crate) fn verify(db: &Path, extra: &[Checkpoint]) -> Result<VerifyReport> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| database(db, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| database(db, e))?;
    // The tail's own file; a store no version with one has opened yet keeps its tail inside.
    let tail = crate::tail::path(db);
    if tail.exists() {
        crate::tail::attach(&conn, &tail).map_err(|e| database(&tail, e))?;
    }
    let mut v = Verifier::default();
    let key = match SigningKey::read(&checkpoint::key_path(db)) {
        Ok(key) => key.map(|k| k.public_hex()),
        Err(e) => {
            v.problem("checkpoint", None, ProblemKind::MissingKey, e.to_string());
            None
        }
    };
    // One read transaction: the tail's move and new appends do not change what is read. The
    // tail is seen first, the log second, so that a move in between shows its rows in both
    // rather than in neither (`tail`); the tail's rows the log holds are skipped below.
    conn.execute_batch("BEGIN").map_err(|e| database(db, e))?;
    conn.query_row(crate::tail::PIN, [], |_| Ok(()))
        .map_err(|e| database(db, e))?;
    let mut checkpoints = table_checkpoints(&conn).map_err(|e| database(db, e))?;
    let file = checkpoint::file_path(db);
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Checkpoint>(line) {
                    Ok(c) => checkpoints.push(c),
                    Err(e) => v.problem(
                        "checkpoint",
                        None,
                        ProblemKind::BadCheckpoint,
                        format!("{}:{}: not a checkpoint: {e}", file.display(), i + 1),
                    ),
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(StoreError::Io { path: file, source }),
    }
    checkpoints.extend(extra.iter().cloned());
    checkpoints.sort_by(|a, b| (a.created_at, &a.signature).cmp(&(b.created_at, &b.signature)));
    checkpoints.dedup();
    let signed = v.check_signatures(&checkpoints, key.as_deref());
    let archives = v.check_archives(
        &crate::archive::recorded(&conn).map_err(|e| database(db, e))?,
        key.as_deref(),
    );
    // The heads the checkpoints name, looked out for while the logs are walked.
    let mut audit_marks: BTreeMap<i64, Option<Mark>> = BTreeMap::new();
    let mut admin_marks: BTreeMap<i64, Option<Mark>> = BTreeMap::new();
    for (_, h) in &signed {
        audit_marks.insert(h.audit_id, None);
        admin_marks.insert(h.admin_id, None);
    }
    let audit = walk(
        &conn,
        Log::Audit,
        &[
            &format!("SELECT id, prev, hash, {AUDIT_COLUMNS}, output FROM audit_log ORDER BY id"),
            &format!(
                "SELECT id, prev, hash, {AUDIT_COLUMNS}, output FROM audit_tail \
                 WHERE id > (SELECT IFNULL(MAX(id), 0) FROM audit_log) ORDER BY id"
            ),
        ],
        &archives,
        &mut audit_marks,
        &mut v,
    )
    .map_err(|e| database(db, e))?;
    let admin = walk(
        &conn,
        Log::Admin,
        &[&format!(
            "SELECT id, prev, hash, {ADMIN_COLUMNS} FROM admin_log ORDER BY id"
        )],
        &[],
        &mut admin_marks,
        &mut v,
    )
    .map_err(|e| database(db, e))?;
    conn.execute_batch("COMMIT").map_err(|e| database(db, e))?;
    // Each checkpoint against the logs.
    let mut latest: Option<&Checkpoint> = None;
    for (c, h) in &signed {
        if let Some(a) = archives
            .iter()
            .find(|a| a.first_id <= h.audit_id && h.audit_id <= a.last_id)
            .filter(|_| audit.first.is_none_or(|first| h.audit_id < first))
        {
            // Its records are in an archive (checked on its own): its head must be the archive's
            // last record if it is that one.
            if h.audit_id == a.last_id && h.audit_hash != a.last_hash {
                v.problem(
                    "audit",
                    Some(h.audit_id),
                    ProblemKind::Edited,
                    format!(
                        "the checkpoint made at {} and the archive of {} to {} disagree on \
                         record {}'s hash",
                        time(c.created_at),
                        a.first_id,
                        a.last_id,
                        h.audit_id
                    ),
                );
            }
            continue;
        }
        let audit_ok = v.against(
            "audit",
            c,
            h.audit_id,
            &h.audit_hash,
            h.audit_count,
            &audit,
            &audit_marks,
        );
        let admin_ok = v.against(
            "admin",
            c,
            h.admin_id,
            &h.admin_hash,
            h.admin_count,
            &admin,
            &admin_marks,
        );
        if audit_ok && admin_ok && latest.is_none_or(|l| l.audit_head_id <= c.audit_head_id) {
            latest = Some(c);
        }
    }
    let covered = latest.map_or(0, |c| c.audit_head_id);
    let rank = |log: &str| {
        ["audit", "admin", "archive"]
            .iter()
            .position(|l| *l == log)
            .unwrap_or(3)
    };
    v.problems.sort_by_key(|p| (rank(&p.log), p.id));
    Ok(VerifyReport {
        audit_records: audit.rows,
        admin_entries: admin.rows,
        audit_head: audit.last.map(|(id, hash)| Head {
            id,
            hash: chain::hex(&hash),
        }),
        admin_head: admin.last.map(|(id, hash)| Head {
            id,
            hash: chain::hex(&hash),
        }),
        public_key: key,
        checkpoints: checkpoints.len() as u64,
        latest_checkpoint: latest.cloned(),
        audit_uncovered: audit.ids_after(covered),
        archives: v.archives,
        problem_count: v.count,
        problems: v.problems,
    })
}

fn database(db: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Database(format!("verifying {}: {e}", db.display()))
}

pub(crate) fn table_checkpoints(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<Checkpoint>> {
    let mut stmt = conn.prepare(
        "SELECT created_at, audit_head_id, audit_head_hash, audit_count, admin_head_id, \
         admin_head_hash, admin_count, public_key, signature FROM audit_checkpoints ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        let blob = |i| -> rusqlite::Result<String> { Ok(chain::hex(&r.get::<_, Vec<u8>>(i)?)) };
        Ok(Checkpoint {
            created_at: r.get(0)?,
            audit_head_id: r.get(1)?,
            audit_head_hash: blob(2)?,
            audit_count: r.get::<_, i64>(3)?.max(0) as u64,
            admin_head_id: r.get(4)?,
            admin_head_hash: blob(5)?,
            admin_count: r.get::<_, i64>(6)?.max(0) as u64,
            public_key: blob(7)?,
            signature: blob(8)?,
            chains: Vec::new(),
        })
    })?;
    rows.collect()
}

/// What the walk saw at a checkpoint's head: the row's hash and how many rows up to it.
#[derive(Debug, Clone, Copy)]
struct Mark {
    hash: [u8; 32],
    count: u64,
}

/// A walked log.
#[derive(Debug, Default)]
struct Walked {
    rows: u64,
    /// The first row's id.
    first: Option<i64>,
    /// Rows before the first, held by archives.
    base: u64,
    last: Option<(i64, [u8; 32])>,
    /// Ids in order (to count rows after a checkpoint and to tell a cut from a gap).
    ids: Vec<i64>,
}

impl Walked {
    fn ids_after(&self, id: i64) -> u64 {
        (self.ids.len() - self.ids.partition_point(|&i| i <= id)) as u64
    }
}

#[derive(Debug, Default)]
struct Verifier {
    problems: Vec<Problem>,
    count: u64,
    archives: u64,
}

/// A recorded archive whose signature verified.
#[derive(Debug, Clone, Copy)]
struct Archived {
    first_id: i64,
    last_id: i64,
    last_hash: [u8; 32],
}

impl Verifier {
    fn problem(&mut self, log: &str, id: Option<i64>, kind: ProblemKind, message: String) {
        self.count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(Problem {
                log: log.to_owned(),
                id,
                kind,
                message,
            });
        }
    }

    /// The checkpoints whose signatures verify with their own key and whose key is the store's.
    fn check_signatures<'a>(
        &mut self,
        checkpoints: &'a [Checkpoint],
        key: Option<&str>,
    ) -> Vec<(&'a Checkpoint, Heads)> {
        if key.is_none() && !checkpoints.is_empty() {
            self.problem(
                "checkpoint",
                None,
                ProblemKind::MissingKey,
                "checkpoints exist but the store's signing key (<database>.audit-key) is gone"
                    .to_owned(),
            );
        }
        let mut good = Vec::new();
        for c in checkpoints {
            let at = Some(c.audit_head_id);
            match c.check() {
                Err(CheckpointFault::Malformed(why)) => self.problem(
                    "checkpoint",
                    at,
                    ProblemKind::BadCheckpoint,
                    format!("the checkpoint made at {} is malformed: {why}", time(c.created_at)),
                ),
                Err(CheckpointFault::BadSignature) => self.problem(
                    "checkpoint",
                    at,
                    ProblemKind::BadCheckpoint,
                    format!(
                        "the checkpoint made at {} does not verify with its key: it was edited",
                        time(c.created_at)
                    ),
                ),
                Ok(_) if key.is_some_and(|k| !k.eq_ignore_ascii_case(&c.public_key)) => self.problem(
                    "checkpoint",
                    at,
                    ProblemKind::ForeignKey,
                    format!(
                        "the checkpoint made at {} was signed by key {}, not by this store's key {}",
                        time(c.created_at),
                        short(&c.public_key),
                        short(key.unwrap_or_default())
                    ),
                ),
                Ok(heads) => good.push((c, heads)),
            }
        }
        good
    }

    /// The recorded archives whose signatures verify with the store's key; a file still where
    /// it was written is read back and checked too.
    fn check_archives(
        &mut self,
        recorded: &[(crate::archive::ArchiveHeader, String)],
        key: Option<&str>,
    ) -> Vec<Archived> {
        let mut good = Vec::new();
        for (h, file) in recorded {
            let what = format!(
                "the archive of records {} to {} ({file})",
                h.first_id, h.last_id
            );
            let at = Some(h.first_id);
            match h.check() {
                Err(why) => self.problem(
                    "archive",
                    at,
                    ProblemKind::BadCheckpoint,
                    format!("{what}: {why}"),
                ),
                Ok(_) if key.is_some_and(|k| !k.eq_ignore_ascii_case(&h.public_key)) => self
                    .problem(
                        "archive",
                        at,
                        ProblemKind::ForeignKey,
                        format!(
                            "{what} was signed by key {}, not by this store's key",
                            short(&h.public_key)
                        ),
                    ),
                Ok(segments) => {
                    // SQLite's archives are format 1: one run, by id.
                    let last_hash = segments.first().map_or(GENESIS, |s| s.last_hash);
                    if let Some(why) = crate::archive::file_disagrees(Path::new(file), h) {
                        self.problem("archive", at, ProblemKind::Edited, format!("{what}: {why}"));
                    }
                    good.push(Archived {
                        first_id: h.first_id,
                        last_id: h.last_id,
                        last_hash,
                    });
                }
            }
        }
        self.archives = good.len() as u64;
        good
    }

    /// Checks one log against what a checkpoint says of it; true if they agree.
    #[allow(clippy::too_many_arguments)]
    fn against(
        &mut self,
        log: &str,
        c: &Checkpoint,
        head: i64,
        hash: &[u8; 32],
        count: u64,
        walked: &Walked,
        marks: &BTreeMap<i64, Option<Mark>>,
    ) -> bool {
        if head == 0 {
            return true;
        }
        let when = time(c.created_at);
        let Some(Some(mark)) = marks.get(&head) else {
            let last = walked.last.map_or(0, |(id, _)| id);
            if head > last {
                self.problem(
                    log,
                    Some(last + 1),
                    ProblemKind::Truncated,
                    format!(
                        "the {log} log ends at {last}, but the checkpoint made at {when} covers \
                         up to {head}: {} removed from the end",
                        span(last + 1, head)
                    ),
                );
            } else {
                self.problem(
                    log,
                    Some(head),
                    ProblemKind::Deleted,
                    format!("{head}, the last row the checkpoint made at {when} covers, is gone"),
                );
            }
            return false;
        };
        if &mark.hash != hash {
            self.problem(
                log,
                Some(head),
                ProblemKind::Edited,
                format!(
                    "the {log} log up to {head} is not the one the checkpoint made at {when} \
                     signed: its hash there is {}, the checkpoint's {}",
                    short(&chain::hex(&mark.hash)),
                    short(&chain::hex(hash))
                ),
            );
            return false;
        }
        if mark.count != count {
            self.problem(
                log,
                Some(head),
                ProblemKind::Deleted,
                format!(
                    "the checkpoint made at {when} counted {count} rows up to {head}; the {log} \
                     log has {}",
                    mark.count
                ),
            );
            return false;
        }
        true
    }
}

/// One row as the walk reads it.
struct Row {
    id: i64,
    prev: Option<[u8; 32]>,
    hash: Option<[u8; 32]>,
}

/// Walks a log's rows in id order over `queries` (read one after another), checking each row's
/// link and output, and notes the hash and count at every id in `marks`.
fn walk(
    conn: &rusqlite::Connection,
    log: Log,
    queries: &[&str],
    archives: &[Archived],
    marks: &mut BTreeMap<i64, Option<Mark>>,
    v: &mut Verifier,
) -> rusqlite::Result<Walked> {
    let name = match log {
        Log::Audit => "audit",
        Log::Admin => "admin",
    };
    let mut walked = Walked::default();
    // The link the next row should carry, and the two rows before it (to tell an insertion).
    let mut expected = GENESIS;
    let mut before_last: Option<(i64, [u8; 32])> = None;
    let mut last_prev: Option<[u8; 32]> = None;
    // Links that matched no neighbour, found in a second look.
    let mut stray: Vec<(i64, [u8; 32])> = Vec::new();
    for sql in queries {
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let row = Row {
                id: r.get(0)?,
                prev: chain::hash32(r.get_ref(1)?),
                hash: chain::hash32(r.get_ref(2)?),
            };
            let n_fields = match log {
                Log::Audit => AUDIT_COLUMN_COUNT,
                Log::Admin => 5,
            };
            let fields = (3..3 + n_fields)
                .map(|i| r.get_ref(i).map(Field::from))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let id = row.id;
            if walked.first.is_none() {
                walked.first = Some(id);
                // Records before the first one left are accounted for by an archive: the log
                // goes on where it ends, or (a removal cut short) somewhere inside it.
                if let Some(a) = archives.iter().find(|a| a.last_id + 1 == id) {
                    expected = a.last_hash;
                    walked.base = (id - 1).max(0) as u64;
                } else if let (Some(prev), Some(_)) = (
                    row.prev,
                    archives
                        .iter()
                        .find(|a| a.first_id <= id && id <= a.last_id),
                ) {
                    expected = prev;
                    walked.base = (id - 1).max(0) as u64;
                }
            }
            walked.rows += 1;
            walked.ids.push(id);
            let last = walked.last;
            let (Some(prev), Some(hash)) = (row.prev, row.hash) else {
                // Left out of the chain: if it was put in, the next row still links to the one
                // before it; if it replaced one, the next row's link shows that.
                v.problem(
                    name,
                    Some(id),
                    ProblemKind::Unlinked,
                    format!("{id} has no chain link: it was written or changed around Toolwarden"),
                );
                continue;
            };
            if chain::link(log, &prev, fields) != hash {
                v.problem(
                    name,
                    Some(id),
                    ProblemKind::Edited,
                    format!("{id} was edited: its content no longer matches its hash"),
                );
            } else if prev != expected {
                let before_any = walked.ids.len().checked_sub(2).map(|i| walked.ids[i]);
                match (before_any, last, before_last) {
                    (Some(p), _, _) if id > p + 1 => v.problem(
                        name,
                        Some(p + 1),
                        ProblemKind::Deleted,
                        format!(
                            "{} deleted: {id} links to a row that is no longer there",
                            span(p + 1, id - 1)
                        ),
                    ),
                    (None, _, _) if id > 1 => v.problem(
                        name,
                        Some(1),
                        ProblemKind::Deleted,
                        format!(
                            "{} deleted: the first row left, {id}, links to an earlier one",
                            span(1, id - 1)
                        ),
                    ),
                    // The row before links to the one before it, and this one does too: the row
                    // before was put in between.
                    (_, Some((last_id, _)), Some((before_id, before_hash)))
                        if before_hash == prev && last_prev == Some(before_hash) =>
                    {
                        v.problem(
                            name,
                            Some(last_id),
                            ProblemKind::Inserted,
                            format!("{last_id} was inserted: {id} links past it, to {before_id}"),
                        );
                    }
                    _ => stray.push((id, prev)),
                }
            }
            if log == Log::Audit && !output_matches(r, 3 + n_fields, 3 + 12)? {
                v.problem(
                    name,
                    Some(id),
                    ProblemKind::Edited,
                    format!("{id} was edited: its output no longer matches its digest"),
                );
            }
            if let Some(mark) = marks.get_mut(&id) {
                *mark = Some(Mark {
                    hash,
                    count: walked.base + walked.rows,
                });
            }
            before_last = last;
            last_prev = Some(prev);
            walked.last = Some((id, hash));
            expected = hash;
        }
    }
    if !stray.is_empty() {
        explain_strays(conn, name, queries, &stray, v)?;
    }
    Ok(walked)
}

/// Whether the output column (`at`) matches the digest column (`digest_at`).
fn output_matches(r: &rusqlite::Row<'_>, at: usize, digest_at: usize) -> rusqlite::Result<bool> {
    let output: Option<String> = r.get(at)?;
    let digest: Option<String> = r.get(digest_at)?;
    Ok(output_matches_text(output.as_deref(), digest.as_deref()))
}

/// Whether a stored output matches its stored digest: SHA-256 of the text itself for a JSON
/// string, of the stored JSON otherwise; neither is none.
pub(crate) fn output_matches_text(output: Option<&str>, digest: Option<&str>) -> bool {
    match (output, digest) {
        (None, None) => true,
        (Some(text), Some(digest)) => {
            let bytes = if text.starts_with('"') {
                match serde_json::from_str::<String>(text) {
                    Ok(s) => Sha256::digest(s.as_bytes()),
                    Err(_) => return false,
                }
            } else {
                Sha256::digest(text.as_bytes())
            };
            chain::hex(&bytes) == digest
        }
        _ => false,
    }
}

/// Names what a row whose link matches neither neighbour links to: a row after it (moved), one
/// further back (rows between were moved or deleted), or none in the log.
fn explain_strays(
    conn: &rusqlite::Connection,
    name: &str,
    queries: &[&str],
    stray: &[(i64, [u8; 32])],
    v: &mut Verifier,
) -> rusqlite::Result<()> {
    let wanted: HashMap<[u8; 32], Vec<i64>> =
        stray.iter().fold(HashMap::new(), |mut m, (id, prev)| {
            m.entry(*prev).or_default().push(*id);
            m
        });
    let mut found: HashMap<i64, i64> = HashMap::new();
    for sql in queries {
        // The same query, for the ids and hashes only.
        let sql = format!("SELECT id, hash FROM ({sql})");
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            if let Some(hash) = chain::hash32(r.get_ref(1)?)
                && let Some(ids) = wanted.get(&hash)
            {
                for id in ids {
                    found.insert(*id, r.get(0)?);
                }
            }
        }
    }
    for (id, _) in stray {
        match found.get(id) {
            Some(target) if target > id => v.problem(
                name,
                Some(*id),
                ProblemKind::Reordered,
                format!("{id} was moved: it links to {target}, which comes after it"),
            ),
            Some(target) => v.problem(
                name,
                Some(*id),
                ProblemKind::Reordered,
                format!(
                    "{id} links to {target}, not to the row before it: rows between were moved \
                     or deleted"
                ),
            ),
            None => v.problem(
                name,
                Some(*id),
                ProblemKind::Deleted,
                format!("{id} links to a row that is not in the log: the row before it was replaced or deleted"),
            ),
        }
    }
    Ok(())
}

/// `"7 was"` or `"7 to 9 were"`.
fn span(from: i64, to: i64) -> String {
    if from == to {
        format!("{from} was")
    } else {
        format!("{from} to {to} were")
    }
}

/// A time for messages: RFC 3339 UTC.
pub(crate) fn time(us: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The first 16 hex digits, enough to tell keys and hashes apart in a message.
pub(crate) fn short(hex: &str) -> &str {
    hex.get(..16).unwrap_or(hex)
}
