//! Retention: the audit log's oldest records written to a self-verifying archive, the archive
//! read back and verified, and only then the records removed. Nothing leaves the log that is not
//! in a written, verified archive: the removal is a batch of deletes that the schema allows only
//! below the newest archive recorded in `audit_archives`, and that record is signed.
//!
//! An archive is JSON lines. The first is the header: the ids it holds, the link before its first
//! record, its last record's hash, how many records, when and up to when, signed with the store's
//! key like a checkpoint (what is signed: see `message`). Every other line is one record as
//! stored: `id`, `prev` and `hash` (hex), and every column under its name, text as text (the JSON
//! columns as the stored JSON text, so the link is recomputed from exactly the bytes it covered),
//! integers as numbers. That is format 1, SQLite's one chain by id. A team store's archive
//! (format 2, written by `pg_archive`) holds a run of each writer's chain: its header names each
//! chain's first and last seq, the link before the first and the last hash, and its records carry
//! `chain` and `seq` too, chain by chain in the header's order.
//! `audit verify --archive FILE` checks one on its own; `audit verify` of the store checks that
//! the log goes on where its newest archive ends.

use std::io::{BufRead as _, BufWriter};
use std::path::{Path, PathBuf};

use rusqlite::OpenFlags;
use rusqlite::types::ValueRef;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::chain::{self, AUDIT_COLUMNS, Field, Log, hex, unhex};
use crate::checkpoint::{CheckpointFault, SigningKey};
use crate::error::{Result, StoreError};

/// An archive's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveHeader {
    /// The format: 1 for SQLite's one chain, 2 for a team store's chains.
    pub toolwarden_archive: u32,
    /// When it was written (µs since the epoch).
    pub created_at: i64,
    /// It holds the records that started before this time (µs since the epoch).
    pub before: i64,
    /// Its first record's id (format 2: the lowest).
    pub first_id: i64,
    /// Its last record's id (format 2: the highest).
    pub last_id: i64,
    /// Format 1: the link before its first record (hex): the hash of the record before, or the
    /// genesis. Empty in format 2, where each chain has its own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prev: String,
    /// Format 1: its last record's hash (hex): where the log goes on. Empty in format 2.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_hash: String,
    /// How many records it holds.
    pub records: u64,
    /// Format 2: the part of each writer's chain it holds, by chain name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<ArchivedChain>,
    /// The key that signed it (hex).
    pub public_key: String,
    /// The signature (hex).
    pub signature: String,
}

/// The part of one team-store chain an archive holds: its records `first_seq` to `last_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedChain {
    /// The chain's name.
    pub chain: String,
    /// Its first record held (1 for the chain's start).
    pub first_seq: i64,
    /// Its last record held: the chain goes on after it.
    pub last_seq: i64,
    /// The link before `first_seq` (hex).
    pub prev: String,
    /// The hash of `last_seq` (hex).
    pub last_hash: String,
    /// How many records (`last_seq - first_seq + 1`).
    pub records: u64,
}

/// A run of linked records an archive holds: SQLite's log by id (`chain` `None`), or one team
/// chain by seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) chain: Option<String>,
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) prev: [u8; 32],
    pub(crate) last_hash: [u8; 32],
}

/// What is signed. Format 1: `toolwarden archive v1\n`, then `created_at`, `before`,
/// `first_id`, `last_id`, each 8 bytes big-endian, the 32-byte `prev` and `last_hash`, and
/// `records`, 8 bytes big-endian. Format 2: `toolwarden archive v2\n`, the same four numbers
/// and `records`, the number of chains, then for each chain its name's length and bytes,
/// `first_seq`, `last_seq` and `records` (8 bytes big-endian each) and its 32-byte `prev` and
/// `last_hash`.
fn message(h: &ArchiveHeader, segments: &[Segment]) -> Vec<u8> {
    let mut m = format!("toolwarden archive v{}\n", h.toolwarden_archive).into_bytes();
    for n in [h.created_at, h.before, h.first_id, h.last_id] {
        m.extend_from_slice(&n.to_be_bytes());
    }
    if h.toolwarden_archive == 1 {
        if let Some(s) = segments.first() {
            m.extend_from_slice(&s.prev);
            m.extend_from_slice(&s.last_hash);
        }
        m.extend_from_slice(&h.records.to_be_bytes());
        return m;
    }
    m.extend_from_slice(&h.records.to_be_bytes());
    m.extend_from_slice(&(segments.len() as u64).to_be_bytes());
    for s in segments {
        let name = s.chain.as_deref().unwrap_or_default().as_bytes();
        m.extend_from_slice(&(name.len() as u64).to_be_bytes());
        m.extend_from_slice(name);
        for n in [s.first, s.last, s.last - s.first + 1] {
            m.extend_from_slice(&n.to_be_bytes());
        }
        m.extend_from_slice(&s.prev);
        m.extend_from_slice(&s.last_hash);
    }
    m
}

fn hash_of(name: &str, text: &str) -> std::result::Result<[u8; 32], String> {
    chain::hash_from_hex(text).ok_or_else(|| format!("{name} is not 32 bytes of hex"))
}

impl ArchiveHeader {
    /// The runs of records it says it holds, read without checking the signature.
    pub(crate) fn segments(&self) -> std::result::Result<Vec<Segment>, String> {
        match self.toolwarden_archive {
            1 => Ok(vec![Segment {
                chain: None,
                first: self.first_id,
                last: self.last_id,
                prev: hash_of("prev", &self.prev)?,
                last_hash: hash_of("last_hash", &self.last_hash)?,
            }]),
            2 => {
                let mut total = 0u64;
                let mut out: Vec<Segment> = Vec::with_capacity(self.chains.len());
                for c in &self.chains {
                    let what = format!("chain {}", c.chain);
                    if c.first_seq < 1 || c.last_seq < c.first_seq {
                        return Err(format!(
                            "{what}: records {} to {} is not a range",
                            c.first_seq, c.last_seq
                        ));
                    }
                    if c.records != crate::codec::count(c.last_seq - c.first_seq + 1) {
                        return Err(format!(
                            "{what}: {} records do not fill {} to {}",
                            c.records, c.first_seq, c.last_seq
                        ));
                    }
                    if out
                        .last()
                        .is_some_and(|s| s.chain.as_deref() >= Some(&c.chain))
                    {
                        return Err(format!("{what}: the chains are not in order by name"));
                    }
                    total += c.records;
                    out.push(Segment {
                        chain: Some(c.chain.clone()),
                        first: c.first_seq,
                        last: c.last_seq,
                        prev: hash_of(&format!("{what}: prev"), &c.prev)?,
                        last_hash: hash_of(&format!("{what}: last_hash"), &c.last_hash)?,
                    });
                }
                if out.is_empty() || total != self.records {
                    return Err(format!(
                        "its chains hold {total} records, not the {} it says",
                        self.records
                    ));
                }
                Ok(out)
            }
            n => Err(format!("unknown archive format {n}")),
        }
    }

    /// Checks the signature with the header's own key; returns the runs of records it holds.
    pub(crate) fn check(&self) -> std::result::Result<Vec<Segment>, String> {
        let segments = self.segments()?;
        let signed = message(self, &segments);
        crate::checkpoint::verify_signature(&self.public_key, &self.signature, &signed).map_err(
            |fault| match fault {
                CheckpointFault::Malformed(why) => why,
                CheckpointFault::BadSignature => {
                    "its signature does not verify with its key: it was edited".to_owned()
                }
            },
        )?;
        Ok(segments)
    }

    /// Signs the header (format 2: its `chains`) with `key`.
    pub(crate) fn sign(&mut self, key: &SigningKey) -> std::result::Result<(), String> {
        let segments = self.segments()?;
        self.public_key = key.public_hex();
        self.signature = hex(&key.sign_bytes(&message(self, &segments)));
        Ok(())
    }
}

/// What an archive holds, once verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveReport {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: ArchiveHeader,
    /// Whether the header, every link and every output verified.
    pub ok: bool,
    /// What did not, by record id or line.
    pub problems: Vec<String>,
}

/// The columns of an archived record, in the order they are read and written: a team store's
/// (format 2) carry their chain and place in it.
pub(crate) fn columns(team: bool) -> Vec<&'static str> {
    let mut c = if team {
        vec!["id", "chain", "seq", "prev", "hash"]
    } else {
        vec!["id", "prev", "hash"]
    };
    c.extend(AUDIT_COLUMNS.split(',').map(str::trim));
    c.push("output");
    c
}

/// Where the records started before `before` end: the highest id below which every record
/// started before it (records finish out of order, so a later id may have started earlier).
fn cut(conn: &rusqlite::Connection, before: i64) -> rusqlite::Result<Option<(i64, i64)>> {
    let first: Option<i64> = conn.query_row("SELECT MIN(id) FROM audit_log", [], |r| r.get(0))?;
    let newer: Option<i64> = conn.query_row(
        "SELECT MIN(id) FROM audit_log WHERE started_at >= ?1",
        [before],
        |r| r.get(0),
    )?;
    let last: Option<i64> = match newer {
        Some(n) => Some(n - 1),
        None => conn.query_row("SELECT MAX(id) FROM audit_log", [], |r| r.get(0))?,
    };
    Ok(match (first, last) {
        (Some(f), Some(l)) if l >= f => Some((f, l)),
        _ => None,
    })
}

/// Writes the records that started before `before` to `out` (created, owner-only; it must not
/// exist), signed with `key`; `None` if there are none. Reads one snapshot of the log.
pub(crate) fn write(
    db: &Path,
    key: &SigningKey,
    created_at: i64,
    before: i64,
    out: &Path,
) -> Result<Option<ArchiveHeader>> {
    let sql_err = |e: rusqlite::Error| StoreError::Database(format!("archiving: {e}"));
    let conn = rusqlite::Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql_err)?;
    conn.execute_batch("BEGIN").map_err(sql_err)?;
    let Some((first_id, last_id)) = cut(&conn, before).map_err(sql_err)? else {
        return Ok(None);
    };
    let link = |id: i64, column: &str| -> Result<[u8; 32]> {
        let bytes: Option<Vec<u8>> = conn
            .query_row(
                &format!("SELECT {column} FROM audit_log WHERE id = ?1"),
                [id],
                |r| r.get(0),
            )
            .map_err(sql_err)?;
        bytes
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| StoreError::Corrupt {
                what: format!("audit record {id}"),
                message: format!("it has no chain {column}: run `toolwarden audit verify`"),
            })
    };
    let (prev, last) = (link(first_id, "prev")?, link(last_id, "hash")?);
    let records: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM audit_log WHERE id BETWEEN ?1 AND ?2",
            [first_id, last_id],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    let mut header = ArchiveHeader {
        toolwarden_archive: 1,
        created_at,
        before,
        first_id,
        last_id,
        prev: hex(&prev),
        last_hash: hex(&last),
        records: crate::codec::count(records),
        chains: Vec::new(),
        public_key: String::new(),
        signature: String::new(),
    };
    let mut file = ArchiveFile::create(out, &mut header, key)?;
    let names = columns(false);
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {} FROM audit_log WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
            names.join(", ")
        ))
        .map_err(sql_err)?;
    let mut rows = stmt.query([first_id, last_id]).map_err(sql_err)?;
    while let Some(r) = rows.next().map_err(sql_err)? {
        let mut object = Map::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let v = match r.get_ref(i).map_err(sql_err)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::from(n),
                ValueRef::Real(x) => Value::from(x),
                ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::String(hex(b)),
            };
            object.insert((*name).to_owned(), v);
        }
        file.record(object)?;
    }
    file.finish()?;
    conn.execute_batch("COMMIT").map_err(sql_err)?;
    Ok(Some(header))
}

/// An archive being written: its file, created owner-only (it must not exist), with the signed
/// header on its first line and a record on each line after.
pub(crate) struct ArchiveFile {
    w: BufWriter<std::fs::File>,
    path: PathBuf,
}

impl ArchiveFile {
    /// Signs `header` with `key` and starts the file with it.
    pub(crate) fn create(out: &Path, header: &mut ArchiveHeader, key: &SigningKey) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        header.sign(key).map_err(|message| StoreError::Corrupt {
            what: "audit archive".to_owned(),
            message,
        })?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(out)
            .map_err(|source| StoreError::Io {
                path: out.to_owned(),
                source,
            })?;
        let mut this = Self {
            w: BufWriter::new(file),
            path: out.to_owned(),
        };
        this.line(&*header)?;
        Ok(this)
    }

    /// One record, its columns under their names.
    pub(crate) fn record(&mut self, columns: Map<String, Value>) -> Result<()> {
        self.line(&Value::Object(columns))
    }

    fn line(&mut self, v: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.w, v)
            .map_err(std::io::Error::from)
            .and_then(|()| std::io::Write::write_all(&mut self.w, b"\n"))
            .map_err(|source| self.io(source))
    }

    /// Flushes the file and makes it durable.
    pub(crate) fn finish(self) -> Result<()> {
        let path = self.path;
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let file = self.w.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

/// What is wrong with a recorded archive's file, if it is still at `file` (on this host) and
/// does not verify or is not the archive `recorded` says; `None` if it agrees or is not there.
pub(crate) fn file_disagrees(file: &Path, recorded: &ArchiveHeader) -> Option<String> {
    let report = verify_file(file).ok()?;
    (!report.ok || report.header != *recorded).then(|| {
        format!(
            "the file does not verify or is not the archive recorded: {}",
            report.problems.join("; ")
        )
    })
}

/// ` of chain NAME`, or nothing for SQLite's one chain: how a message names a run's chain.
fn of_chain(chain: Option<&str>) -> String {
    chain.map(|c| format!(" of chain {c}")).unwrap_or_default()
}

/// Reads an archive back and checks it on its own: the header's signature, every record's link
/// from its run's `prev` on (SQLite's log by id, or each team chain by seq), every output against
/// its digest, places without gaps, and each run's last hash and the header's count.
pub fn verify_file(path: &Path) -> Result<ArchiveReport> {
    let io = |source| StoreError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut lines = std::io::BufReader::new(file).lines();
    let first = lines.next().transpose().map_err(io)?.unwrap_or_default();
    let header: ArchiveHeader = serde_json::from_str(&first).map_err(|e| StoreError::Invalid {
        what: format!("{}:1", path.display()),
        message: format!("not an audit archive's header: {e}"),
    })?;
    let mut problems = Vec::new();
    let segments = match header.check() {
        Ok(segments) => segments,
        Err(why) => {
            problems.push(format!("header: {why}"));
            // The records are still checked against what the header says, if it says it.
            header.segments().unwrap_or_default()
        }
    };
    let team = header.toolwarden_archive == 2;
    let names = columns(team);
    let hashed = &names[if team { 5 } else { 3 }..names.len() - 1];
    let mut walk = Walk::new(&segments);
    let mut records = 0u64;
    for (n, line) in lines.enumerate() {
        let line_no = n + 2;
        let line = line.map_err(io)?;
        let row: Map<String, Value> = match serde_json::from_str(&line) {
            Ok(row) => row,
            Err(e) => {
                problems.push(format!("line {line_no}: not a record: {e}"));
                continue;
            }
        };
        records += 1;
        let id = row.get("id").and_then(Value::as_i64).unwrap_or(-1);
        let (chain, place) = if team {
            (
                row.get("chain").and_then(Value::as_str),
                row.get("seq").and_then(Value::as_i64).unwrap_or(-1),
            )
        } else {
            (None, id)
        };
        let link_of = |name| {
            row.get(name)
                .and_then(Value::as_str)
                .and_then(chain::hash_from_hex)
        };
        let (Some(prev), Some(hash)) = (link_of("prev"), link_of("hash")) else {
            problems.push(format!("record {id}: no chain link"));
            continue;
        };
        let fields = hashed.iter().map(|name| match row.get(*name) {
            Some(Value::String(s)) => Field::Text(s),
            Some(Value::Number(n)) => n.as_i64().map_or(Field::Null, Field::Int),
            _ => Field::Null,
        });
        let linked = chain::link(Log::Audit, &prev, fields) == hash;
        walk.record(
            line_no,
            id,
            (chain, place),
            (prev, hash, linked),
            &mut problems,
        );
        let output = row.get("output").and_then(Value::as_str);
        let digest = row.get("output_sha256").and_then(Value::as_str);
        if !crate::verify::output_matches_text(output, digest) {
            problems.push(format!(
                "record {id} was edited: its output no longer matches its digest"
            ));
        }
    }
    walk.finish(&mut problems);
    walk.missing(&mut problems);
    if records != header.records {
        problems.push(format!(
            "the header says {} records; the file holds {records}",
            header.records
        ));
    }
    Ok(ArchiveReport {
        path: path.to_owned(),
        ok: problems.is_empty(),
        header,
        problems,
    })
}

/// The records of an archive walked against the runs its header names, in order.
struct Walk<'a> {
    segments: &'a [Segment],
    /// The run being walked, the place and link its next record should have.
    at: Option<(usize, i64, [u8; 32])>,
    /// The next run that may start.
    next: usize,
}

impl<'a> Walk<'a> {
    fn new(segments: &'a [Segment]) -> Self {
        Self {
            segments,
            at: None,
            next: 0,
        }
    }

    /// One record at `place` in `chain`: its links, and whether its content matches its hash.
    fn record(
        &mut self,
        line_no: usize,
        id: i64,
        (chain, place): (Option<&str>, i64),
        (prev, hash, linked): ([u8; 32], [u8; 32], bool),
        problems: &mut Vec<String>,
    ) {
        let same = self
            .at
            .is_some_and(|(i, _, _)| self.segments[i].chain.as_deref() == chain);
        if !same {
            self.finish(problems);
            match self.segments[self.next..]
                .iter()
                .position(|s| s.chain.as_deref() == chain)
            {
                Some(k) => {
                    let i = self.next + k;
                    for s in &self.segments[self.next..i] {
                        problems.push(format!(
                            "records{} are missing",
                            of_chain(s.chain.as_deref())
                        ));
                    }
                    self.at = Some((i, self.segments[i].first, self.segments[i].prev));
                    self.next = i + 1;
                }
                None => {
                    problems.push(format!(
                        "line {line_no}: record {id}{} is not in a run the header names, or out \
                         of order",
                        of_chain(chain)
                    ));
                    return;
                }
            }
        }
        let Some((i, expected_place, expected)) = self.at.as_mut() else {
            return;
        };
        let what = format!(
            "record {id}{}",
            of_chain(self.segments[*i].chain.as_deref())
        );
        if place != *expected_place {
            problems.push(format!(
                "line {line_no}: {what} is at {place} where {expected_place} should be"
            ));
        }
        *expected_place = place + 1;
        if !linked {
            problems.push(format!(
                "{what} was edited: its content no longer matches its hash"
            ));
        } else if prev != *expected {
            problems.push(format!("{what} does not link to the record before it"));
        }
        *expected = hash;
    }

    /// Closes the run being walked: its last record must be the one the header signed.
    fn finish(&mut self, problems: &mut Vec<String>) {
        if let Some((i, next_place, hash)) = self.at.take() {
            let s = &self.segments[i];
            let of = of_chain(s.chain.as_deref());
            if next_place != s.last + 1 || hash != s.last_hash {
                problems.push(format!(
                    "the last record{of} is not the one the header signed ({})",
                    s.last
                ));
            }
        }
    }

    /// At the end: the runs the header names that had no records.
    fn missing(&self, problems: &mut Vec<String>) {
        for s in &self.segments[self.next..] {
            let of = of_chain(s.chain.as_deref());
            problems.push(format!("records{of} are missing"));
        }
    }
}

/// What `Store::archive` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveSummary {
    /// The archive written.
    pub path: PathBuf,
    /// Its header.
    pub header: ArchiveHeader,
    /// Records removed from the log (all of the archive's, unless another process removed some).
    pub removed: u64,
}

/// One pass of `[audit] keep_days`: archives what is older than `days` into
/// `dir/audit-<now>.jsonl` through `archive`, and says what happened in the log.
pub(crate) async fn keep_days_pass(
    days: u32,
    dir: &Path,
    archive: impl AsyncFnOnce(i64, &Path) -> Result<Option<ArchiveSummary>>,
) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        tracing::warn!(error = %e, dir = %dir.display(), "audit retention: no archive directory");
        return;
    }
    let now = crate::checkpoint::now_us();
    let before = now - i64::from(days) * 86_400_000_000;
    match archive(before, &dir.join(format!("audit-{now}.jsonl"))).await {
        Ok(Some(s)) => {
            tracing::info!(file = %s.path.display(), records = s.header.records, removed = s.removed, "audit records past keep_days archived")
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "audit retention: nothing was archived or removed"),
    }
}

/// Records removed per transaction: each holds the write lock for a few milliseconds, so calls
/// go on between them.
const REMOVE_BATCH: i64 = 2000;

/// Where an archive for `out` is written before it is verified: `out` must not exist; a partial
/// file left by an archive cut short is removed.
pub(crate) fn partial_for(out: &Path) -> Result<PathBuf> {
    if out.exists() {
        return Err(StoreError::Io {
            path: out.to_owned(),
            source: std::io::ErrorKind::AlreadyExists.into(),
        });
    }
    let partial = crate::beside(out, ".partial");
    let _ = std::fs::remove_file(&partial);
    Ok(partial)
}

/// Reads a written archive back from the disk and checks it on its own; only if it verifies is
/// it moved to `out` (and the move made durable). Removes it otherwise: nothing may be removed
/// from the log then.
pub(crate) async fn seal(partial: &Path, out: &Path) -> Result<ArchiveReport> {
    let io = |path: &Path, source| StoreError::Io {
        path: path.to_owned(),
        source,
    };
    let part = partial.to_owned();
    let report = tokio::task::spawn_blocking(move || verify_file(&part))
        .await
        .map_err(|e| StoreError::Database(format!("the archive's check stopped: {e}")))
        .and_then(|r| r);
    let report = match report {
        Ok(report) if report.ok => report,
        Ok(report) => {
            let _ = std::fs::remove_file(partial);
            return Err(StoreError::WriteFailed(format!(
                "the archive did not verify after writing ({}); nothing was removed",
                report.problems.join("; ")
            )));
        }
        Err(e) => {
            let _ = std::fs::remove_file(partial);
            return Err(e);
        }
    };
    std::fs::rename(partial, out).map_err(|e| io(out, e))?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, e))?;
    }
    Ok(report)
}

/// Archives the records that started before `before` into `out` (which must not exist), verifies
/// the file, records it, then removes its records from the log. `None` if there is nothing to
/// archive.
pub(crate) async fn run(
    writer: &crate::writer::Writer,
    db: &Path,
    before: i64,
    out: &Path,
) -> Result<Option<ArchiveSummary>> {
    let partial = partial_for(out)?;
    writer.settle().await?;
    let key = SigningKey::read_or_create(&crate::checkpoint::key_path(db))?;
    let (db_owned, part) = (db.to_owned(), partial.clone());
    let created_at = crate::checkpoint::now_us();
    let written =
        tokio::task::spawn_blocking(move || write(&db_owned, &key, created_at, before, &part))
            .await
            .map_err(|e| StoreError::Database(format!("the archiver stopped: {e}")))
            .and_then(|r| r);
    let report = match written {
        Ok(Some(_)) => seal(&partial, out).await?,
        Ok(None) => return Ok(None),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let h = &report.header;
    let blob = |text: &str| unhex(text).unwrap_or_default();
    writer
        .with_conn(async |conn| {
            sqlx::query(
                "INSERT INTO audit_archives (created_at, before, first_id, last_id, prev, \
                 last_hash, records, public_key, signature, file) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(h.created_at)
            .bind(h.before)
            .bind(h.first_id)
            .bind(h.last_id)
            .bind(blob(&h.prev))
            .bind(blob(&h.last_hash))
            .bind(i64::try_from(h.records).unwrap_or(i64::MAX))
            .bind(blob(&h.public_key))
            .bind(blob(&h.signature))
            .bind(out.to_string_lossy().into_owned())
            .execute(&mut *conn)
            .await?;
            Ok(())
        })
        .await?;
    let removed = finish_cut(writer, db).await?;
    Ok(Some(ArchiveSummary {
        path: out.to_owned(),
        header: report.header,
        removed,
    }))
}

/// Removes what the newest recorded archive holds and the log still has (all of it after an
/// archive, the rest of it after a crash midway), a batch at a time; returns how many. Only an
/// archive this store signed counts: a row put in `audit_archives` by hand (which the schema
/// cannot tell apart) removes nothing, and `audit verify` names it.
pub(crate) async fn finish_cut(writer: &crate::writer::Writer, db: &Path) -> Result<u64> {
    let Some(newest) = writer
        .write_in_place(|conn| Ok(recorded(conn)?.pop()))
        .await?
        .map(|(h, _)| h)
    else {
        return Ok(0);
    };
    // A key that cannot be read signs nothing here: nothing is removed, and the store still
    // opens (`audit verify` says what is wrong with the key).
    let key = match SigningKey::read(&crate::checkpoint::key_path(db)) {
        Ok(key) => key.map(|k| k.public_hex()),
        Err(e) => {
            tracing::error!(error = %e, "the audit signing key cannot be read: no archived record is removed");
            None
        }
    };
    if newest.check().is_err() || key.as_deref() != Some(newest.public_key.as_str()) {
        tracing::error!(
            last_id = newest.last_id,
            "the newest archive record was not signed by this store: nothing is removed; run `toolwarden audit verify`"
        );
        return Ok(0);
    }
    let upto = newest.last_id;
    let mut removed = 0;
    loop {
        let n = writer
            .write_in_place(|conn| {
                conn.prepare_cached(
                    "DELETE FROM audit_log WHERE id IN \
                     (SELECT id FROM audit_log WHERE id <= ?1 ORDER BY id LIMIT ?2)",
                )?
                .execute([upto, REMOVE_BATCH])
            })
            .await?;
        removed += n as u64;
        if (n as i64) < REMOVE_BATCH {
            return Ok(removed);
        }
    }
}

/// The archives recorded in the store, oldest first, as headers (the file each was written to
/// beside it).
pub(crate) fn recorded(
    conn: &rusqlite::Connection,
) -> rusqlite::Result<Vec<(ArchiveHeader, String)>> {
    let mut stmt = conn.prepare(
        "SELECT created_at, before, first_id, last_id, prev, last_hash, records, public_key, \
         signature, file FROM audit_archives ORDER BY last_id",
    )?;
    let rows = stmt.query_map([], |r| {
        let blob = |i| -> rusqlite::Result<String> { Ok(hex(&r.get::<_, Vec<u8>>(i)?)) };
        Ok((
            ArchiveHeader {
                toolwarden_archive: 1,
                created_at: r.get(0)?,
                before: r.get(1)?,
                first_id: r.get(2)?,
                last_id: r.get(3)?,
                prev: blob(4)?,
                last_hash: blob(5)?,
                records: crate::codec::count(r.get(6)?),
                chains: Vec::new(),
                public_key: blob(7)?,
                signature: blob(8)?,
            },
            r.get(9)?,
        ))
    })?;
    rows.collect()
}
