//! The team store's signed checkpoints and `audit verify`. Each writer appends to a chain of its
//! own (see `pg`); a checkpoint signs every chain's head at once (their join is its audit head
//! hash, see `checkpoint::join_heads`) with the key of the replica that makes it, recorded in
//! `audit_chains` when it opened. The verifier walks each chain in order from one snapshot,
//! recomputing every link and output digest, walks the admin log, and checks every checkpoint
//! (the table's, the replica's `<path>.checkpoints`, and any saved elsewhere) against its
//! signature, the keys the writers recorded and the chains.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use futures_util::TryStreamExt as _;
use sqlx::{Connection as _, PgConnection, Row as _};

use crate::archive::Segment;
use crate::chain::{self, ADMIN_COLUMNS, AUDIT_COLUMNS, Field, GENESIS, Log};
use crate::checkpoint::{self, ChainHead, Checkpoint, CheckpointFault, Heads, SigningKey};
use crate::error::{Result, StoreError};
use crate::verify::{Head, MAX_PROBLEMS, Problem, ProblemKind, VerifyReport, short, time};

/// Makes a checkpoint of every chain's head and the admin log's, signed with `key`; records it
/// in the table and appends it to `file`. `None` while both logs are empty.
pub(crate) async fn checkpoint(
    conn: &mut PgConnection,
    key: &SigningKey,
    file: &Path,
) -> Result<Option<Checkpoint>> {
    let mut tx = conn
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await?;
    let heads = sqlx::query(
        "SELECT DISTINCT ON (chain) chain, seq, hash, id FROM audit_log ORDER BY chain, seq DESC",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut chains = Vec::with_capacity(heads.len());
    let (mut newest, mut count) = (0i64, 0u64);
    for r in &heads {
        let seq: i64 = r.try_get("seq")?;
        newest = newest.max(r.try_get("id")?);
        count += crate::codec::count(seq);
        chains.push(ChainHead {
            chain: r.try_get("chain")?,
            seq,
            hash: chain::hex(&r.try_get::<Vec<u8>, _>("hash")?),
        });
    }
    // A chain whose every record was archived and removed still has a head: where its archived
    // part ends.
    let archived = sqlx::query(
        "SELECT DISTINCT ON (chain) chain, last_seq, last_hash FROM audit_archive_chains \
         ORDER BY chain, last_seq DESC",
    )
    .fetch_all(&mut *tx)
    .await?;
    for r in &archived {
        let name: String = r.try_get("chain")?;
        if !chains.iter().any(|c| c.chain == name) {
            let seq: i64 = r.try_get("last_seq")?;
            count += crate::codec::count(seq);
            chains.push(ChainHead {
                chain: name,
                seq,
                hash: chain::hex(&r.try_get::<Vec<u8>, _>("last_hash")?),
            });
        }
    }
    let admin = sqlx::query("SELECT id, hash FROM admin_log ORDER BY id DESC LIMIT 1")
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    let (admin_id, admin_hash) = match &admin {
        Some(r) => (r.try_get::<i64, _>("id")?, hash32(r.try_get("hash")?)?),
        None => (0, GENESIS),
    };
    if chains.is_empty() && admin_id == 0 {
        return Ok(None);
    }
    // Nothing appended since the newest checkpoint (any replica's): that one, as on SQLite.
    chains.sort();
    if let Some(last) = table_checkpoints(conn, "ORDER BY id DESC LIMIT 1")
        .await?
        .pop()
    {
        let mut signed = last.chains.clone();
        signed.sort();
        if signed == chains
            && last.admin_head_id == admin_id
            && last
                .admin_head_hash
                .eq_ignore_ascii_case(&chain::hex(&admin_hash))
        {
            return Ok(Some(last));
        }
    }
    let audit_hash = checkpoint::join_heads(&chains).ok_or_else(|| StoreError::Corrupt {
        what: "audit log, a chain head".to_owned(),
        message: "its hash is not 32 bytes".to_owned(),
    })?;
    let heads = Heads {
        audit_id: newest,
        audit_hash,
        audit_count: count,
        admin_id,
        admin_hash,
        admin_count: crate::codec::count(admin_id),
    };
    let mut c = key.sign(checkpoint::now_us(), &heads);
    c.chains = chains;
    let encoded = serde_json::to_string(&c.chains).map_err(|e| StoreError::Encode {
        what: "checkpoint heads".to_owned(),
        message: e.to_string(),
    })?;
    sqlx::query(
        "INSERT INTO audit_checkpoints (created_at, audit_heads, audit_head_id, audit_head_hash, \
         audit_count, admin_head_id, admin_head_hash, admin_count, public_key, signature) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(c.created_at)
    .bind(encoded)
    .bind(heads.audit_id)
    .bind(heads.audit_hash.as_slice())
    .bind(i64::try_from(heads.audit_count).unwrap_or(i64::MAX))
    .bind(heads.admin_id)
    .bind(heads.admin_hash.as_slice())
    .bind(i64::try_from(heads.admin_count).unwrap_or(i64::MAX))
    .bind(key.public_key())
    .bind(chain::unhex(&c.signature).unwrap_or_default())
    .execute(&mut *conn)
    .await?;
    checkpoint::append_to_file(file, &c)?;
    Ok(Some(c))
}

/// A 32-byte chain hash read from a BYTEA column.
pub(crate) fn hash32(bytes: Vec<u8>) -> Result<[u8; 32]> {
    bytes.try_into().map_err(|_| StoreError::Corrupt {
        what: "a chain hash".to_owned(),
        message: "it is not 32 bytes".to_owned(),
    })
}

#[derive(Debug, Default)]
struct Problems {
    list: Vec<Problem>,
    count: u64,
}

impl Problems {
    fn add(&mut self, log: &str, id: Option<i64>, kind: ProblemKind, message: String) {
        self.count += 1;
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(Problem {
                log: log.to_owned(),
                id,
                kind,
                message,
            });
        }
    }
}

/// A chain as walked: its last seq and hash, and the hashes at the seqs checkpoints name.
#[derive(Debug, Default)]
struct Walked {
    last: Option<(i64, [u8; 32])>,
    marks: HashMap<i64, [u8; 32]>,
}

/// Verifies the team store: every chain, the admin log, and every checkpoint (the table's,
/// `file`'s and `extra`).
pub(crate) async fn verify(
    conn: &mut PgConnection,
    host: &str,
    file: &Path,
    extra: &[Checkpoint],
) -> Result<VerifyReport> {
    let mut p = Problems::default();
    let mut tx = conn
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let writers: BTreeSet<String> = sqlx::query_scalar("SELECT chain FROM audit_chains")
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
    let keys = crate::pg_archive::keys(&mut tx).await?;
    let recorded = crate::pg_archive::recorded(&mut tx).await?;
    let archives = check_archives(&recorded, &keys, host, &mut p);
    let archived = crate::pg_archive::archived_heads(&archives);
    let mut checkpoints = table_checkpoints(&mut tx, "ORDER BY id").await?;
    match std::fs::read_to_string(file) {
        Ok(text) => checkpoints.extend(checkpoint::parse_lines(file, &text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StoreError::Io {
                path: file.to_owned(),
                source,
            });
        }
    }
    checkpoints.extend(extra.iter().cloned());
    checkpoints.sort_by(|a, b| (a.created_at, &a.signature).cmp(&(b.created_at, &b.signature)));
    checkpoints.dedup();
    let signed = check_signatures(&checkpoints, &keys, &mut p);
    // The seqs the checkpoints name, per chain, looked out for while the chains are walked.
    let mut wanted: HashMap<String, BTreeSet<i64>> = HashMap::new();
    for (c, _) in &signed {
        for h in &c.chains {
            wanted.entry(h.chain.clone()).or_default().insert(h.seq);
        }
    }
    let (walked, audit_rows, audit_last) =
        walk_chains(&mut tx, &writers, &wanted, &archived, &mut p).await?;
    let (admin_rows, admin_last, admin_marks) = walk_admin(&mut tx, &signed, &mut p).await?;
    tx.commit().await?;
    let mut latest: Option<&Checkpoint> = None;
    for (c, heads) in &signed {
        let mut agrees = true;
        for h in &c.chains {
            agrees &= against(c, h, walked.get(&h.chain), archived.get(&h.chain), &mut p);
        }
        if heads.admin_id > 0 {
            match admin_marks.get(&heads.admin_id) {
                Some(hash) if *hash == heads.admin_hash => {}
                Some(_) => {
                    agrees = false;
                    p.add(
                        "admin",
                        Some(heads.admin_id),
                        ProblemKind::Edited,
                        format!(
                            "the admin log up to {} is not the one the checkpoint made at {} signed",
                            heads.admin_id,
                            time(c.created_at)
                        ),
                    );
                }
                None => {
                    agrees = false;
                    p.add(
                        "admin",
                        Some(heads.admin_id),
                        ProblemKind::Truncated,
                        format!(
                            "entry {}, which the checkpoint made at {} covers, is gone",
                            heads.admin_id,
                            time(c.created_at)
                        ),
                    );
                }
            }
        }
        if agrees && latest.is_none_or(|l| l.created_at <= c.created_at) {
            latest = Some(c);
        }
    }
    let covered: HashMap<&str, i64> = latest
        .map(|c| c.chains.iter().map(|h| (h.chain.as_str(), h.seq)).collect())
        .unwrap_or_default();
    let uncovered = walked
        .iter()
        .map(|(chain, w)| {
            let last = w.last.map_or(0, |(seq, _)| seq);
            crate::codec::count(last - covered.get(chain.as_str()).copied().unwrap_or(0))
        })
        .sum();
    let rank = |log: &str| {
        ["audit", "admin", "archive", "checkpoint"]
            .iter()
            .position(|l| *l == log)
            .unwrap_or(3)
    };
    p.list.sort_by_key(|x| (rank(&x.log), x.id));
    Ok(VerifyReport {
        audit_records: audit_rows,
        admin_entries: admin_rows,
        audit_head: audit_last.map(|(id, hash)| Head {
            id,
            hash: chain::hex(&hash),
        }),
        admin_head: admin_last.map(|(id, hash)| Head {
            id,
            hash: chain::hex(&hash),
        }),
        public_key: None,
        checkpoints: checkpoints.len() as u64,
        latest_checkpoint: latest.cloned(),
        audit_uncovered: uncovered,
        archives: archives.len() as u64,
        problem_count: p.count,
        problems: p.list,
    })
}

/// The checkpoints in the table, in the order `order` (an `ORDER BY`, perhaps with a `LIMIT`)
/// gives.
async fn table_checkpoints(
    conn: &mut PgConnection,
    order: &'static str,
) -> Result<Vec<Checkpoint>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT created_at, audit_heads, audit_head_id, audit_head_hash, audit_count, \
         admin_head_id, admin_head_hash, admin_count, public_key, signature \
         FROM audit_checkpoints {order}"
    )))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            let blob = |c: &str| -> Result<String> { Ok(chain::hex(&r.try_get::<Vec<u8>, _>(c)?)) };
            let heads: String = r.try_get("audit_heads")?;
            Ok(Checkpoint {
                created_at: r.try_get("created_at")?,
                audit_head_id: r.try_get("audit_head_id")?,
                audit_head_hash: blob("audit_head_hash")?,
                audit_count: crate::codec::count(r.try_get("audit_count")?),
                admin_head_id: r.try_get("admin_head_id")?,
                admin_head_hash: blob("admin_head_hash")?,
                admin_count: crate::codec::count(r.try_get("admin_count")?),
                public_key: blob("public_key")?,
                signature: blob("signature")?,
                chains: serde_json::from_str(&heads).map_err(|e| StoreError::Corrupt {
                    what: "audit_checkpoints, column audit_heads".to_owned(),
                    message: e.to_string(),
                })?,
            })
        })
        .collect()
}

/// The checkpoints whose signatures verify and whose key some writer recorded.
fn check_signatures<'a>(
    checkpoints: &'a [Checkpoint],
    keys: &BTreeSet<String>,
    p: &mut Problems,
) -> Vec<(&'a Checkpoint, Heads)> {
    let mut good = Vec::new();
    for c in checkpoints {
        let when = time(c.created_at);
        match c.check() {
            Err(CheckpointFault::Malformed(why)) => p.add(
                "checkpoint",
                Some(c.audit_head_id),
                ProblemKind::BadCheckpoint,
                format!("the checkpoint made at {when} is malformed: {why}"),
            ),
            Err(CheckpointFault::BadSignature) => p.add(
                "checkpoint",
                Some(c.audit_head_id),
                ProblemKind::BadCheckpoint,
                format!(
                    "the checkpoint made at {when} does not verify with its key: it was edited"
                ),
            ),
            Ok(_) if !keys.contains(&c.public_key.to_ascii_lowercase()) => p.add(
                "checkpoint",
                Some(c.audit_head_id),
                ProblemKind::ForeignKey,
                format!(
                    "the checkpoint made at {when} was signed by key {}, which no writer of this \
                     store recorded",
                    short(&c.public_key)
                ),
            ),
            Ok(heads) => good.push((c, heads)),
        }
    }
    good
}

/// Walks every chain in seq order, checking each record's link, hash and output.
async fn walk_chains(
    conn: &mut PgConnection,
    writers: &BTreeSet<String>,
    wanted: &HashMap<String, BTreeSet<i64>>,
    archived: &Archived,
    p: &mut Problems,
) -> Result<(BTreeMap<String, Walked>, u64, Option<(i64, [u8; 32])>)> {
    let sql = format!(
        "SELECT id, chain, seq, prev, hash, {AUDIT_COLUMNS}, output FROM audit_log \
         ORDER BY chain, seq"
    );
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch(&mut *conn);
    let ints = integer_columns();
    let mut walked: BTreeMap<String, Walked> = BTreeMap::new();
    let (mut count, mut newest): (u64, Option<(i64, [u8; 32])>) = (0, None);
    while let Some(r) = rows.try_next().await? {
        count += 1;
        let id: i64 = r.try_get("id")?;
        let name: String = r.try_get("chain")?;
        let seq: i64 = r.try_get("seq")?;
        let prev = hash32(r.try_get("prev")?)?;
        let hash = hash32(r.try_get("hash")?)?;
        if newest.is_none_or(|(n, _)| n < id) {
            newest = Some((id, hash));
        }
        if !walked.contains_key(&name) && !writers.contains(&name) {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Inserted,
                format!("{id} is on chain {name}, which no writer of this store opened"),
            );
        }
        let w = walked.entry(name.clone()).or_default();
        let runs = archived.get(&name);
        let (expected_seq, expected_prev) = match w.last {
            Some((s, h)) => (s + 1, h),
            None => start(runs, seq, prev),
        };
        if let Some(run) = runs.and_then(|r| r.get(&seq))
            && run.last_hash != hash
        {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Edited,
                format!(
                    "{id} (record {seq} of chain {name}) is not the record the archive of \
                     {} to {} holds",
                    run.first, run.last
                ),
            );
        }
        // The hashed columns follow id, chain, seq, prev and hash.
        let fields = audit_fields(&r, 5, &ints)?;
        if chain::link(Log::Audit, &prev, fields.iter().map(Field::from)) != hash {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Edited,
                format!("{id} was edited: its content no longer matches its hash"),
            );
        } else if seq > expected_seq {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Deleted,
                format!(
                    "{} of chain {name} deleted: {id} (its record {seq}) comes after record {}",
                    if seq - expected_seq == 1 {
                        "1 record".to_owned()
                    } else {
                        format!("{} records", seq - expected_seq)
                    },
                    expected_seq - 1
                ),
            );
        } else if prev != expected_prev {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Reordered,
                format!(
                    "{id} (record {seq} of chain {name}) does not link to the record before it: \
                     records were moved or put in"
                ),
            );
        }
        let output: Option<String> = r.try_get("output")?;
        let digest: Option<String> = r.try_get("output_sha256")?;
        if !crate::verify::output_matches_text(output.as_deref(), digest.as_deref()) {
            p.add(
                "audit",
                Some(id),
                ProblemKind::Edited,
                format!("{id} was edited: its output no longer matches its digest"),
            );
        }
        if wanted.get(&name).is_some_and(|s| s.contains(&seq)) {
            w.marks.insert(seq, hash);
        }
        w.last = Some((seq, hash));
    }
    Ok((walked, count, newest))
}

/// Which of [`AUDIT_COLUMNS`] are integers (the rest are text), in order: worked out once per
/// walk, not per row.
pub(crate) fn integer_columns() -> Vec<bool> {
    const INTS: [&str; 5] = [
        "output_bytes",
        "truncated",
        "started_at",
        "completed_at",
        "duration_us",
    ];
    AUDIT_COLUMNS
        .split(',')
        .map(|c| INTS.contains(&c.trim()))
        .collect()
}

/// One audit row's hashed columns, which the walk's query selects from column `first` on, in
/// [`AUDIT_COLUMNS`] order.
fn audit_fields(r: &sqlx::postgres::PgRow, first: usize, ints: &[bool]) -> Result<Vec<Owned>> {
    ints.iter()
        .enumerate()
        .map(|(i, &int)| {
            Ok(if int {
                Owned::Int(r.try_get(first + i)?)
            } else {
                r.try_get::<Option<String>, _>(first + i)?
                    .map_or(Owned::Null, Owned::Text)
            })
        })
        .collect()
}

/// A column's value, owned (the walk's rows are streamed).
enum Owned {
    Null,
    Int(i64),
    Text(String),
}

impl<'a> From<&'a Owned> for Field<'a> {
    fn from(o: &'a Owned) -> Self {
        match o {
            Owned::Null => Field::Null,
            Owned::Int(i) => Field::Int(*i),
            Owned::Text(t) => Field::Text(t),
        }
    }
}

/// Walks the admin log (one chain, by id); returns its rows, last entry and the hashes at the
/// ids checkpoints name.
async fn walk_admin(
    conn: &mut PgConnection,
    signed: &[(&Checkpoint, Heads)],
    p: &mut Problems,
) -> Result<(u64, Option<(i64, [u8; 32])>, HashMap<i64, [u8; 32]>)> {
    let wanted: BTreeSet<i64> = signed.iter().map(|(_, h)| h.admin_id).collect();
    let sql = format!("SELECT id, prev, hash, {ADMIN_COLUMNS} FROM admin_log ORDER BY id");
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch(&mut *conn);
    let (mut count, mut last, mut marks) = (0u64, None::<(i64, [u8; 32])>, HashMap::new());
    while let Some(r) = rows.try_next().await? {
        count += 1;
        let id: i64 = r.try_get("id")?;
        let prev = hash32(r.try_get("prev")?)?;
        let hash = hash32(r.try_get("hash")?)?;
        let at: i64 = r.try_get("at")?;
        let texts: Vec<String> = ["actor", "kind", "summary", "details"]
            .iter()
            .map(|c| r.try_get::<String, _>(*c))
            .collect::<std::result::Result<_, _>>()?;
        let fields = std::iter::once(Field::Int(at)).chain(texts.iter().map(|t| Field::Text(t)));
        let (expected_id, expected_prev) = last.map_or((1, GENESIS), |(i, h)| (i + 1, h));
        if chain::link(Log::Admin, &prev, fields) != hash {
            p.add(
                "admin",
                Some(id),
                ProblemKind::Edited,
                format!("{id} was edited: its content no longer matches its hash"),
            );
        } else if id > expected_id {
            p.add(
                "admin",
                Some(expected_id),
                ProblemKind::Deleted,
                format!("entries {expected_id} to {} deleted", id - 1),
            );
        } else if prev != expected_prev {
            p.add(
                "admin",
                Some(id),
                ProblemKind::Reordered,
                format!("{id} does not link to the entry before it"),
            );
        }
        if wanted.contains(&id) {
            marks.insert(id, hash);
        }
        last = Some((id, hash));
    }
    Ok((count, last, marks))
}

/// Each chain's runs of archived records (from archives whose signatures verify), by last seq.
type Archived = HashMap<String, BTreeMap<i64, Segment>>;

/// Where a chain's first record left should be, and the link it should carry: after the archived
/// run that ends just before it; itself (a removal cut short) if an archived run holds it; the
/// chain's start if nothing of it was archived.
fn start(runs: Option<&BTreeMap<i64, Segment>>, seq: i64, prev: [u8; 32]) -> (i64, [u8; 32]) {
    let Some(runs) = runs else {
        return (1, GENESIS);
    };
    if runs.values().any(|r| r.first <= seq && seq <= r.last) {
        return (seq, prev);
    }
    runs.range(..seq)
        .next_back()
        .map_or((1, GENESIS), |(last, r)| (last + 1, r.last_hash))
}

/// The recorded archives whose signatures verify with a writer's key; a file on this host still
/// where it was written is read back and checked too.
fn check_archives<'a>(
    recorded: &'a [crate::pg_archive::Recorded],
    keys: &BTreeSet<String>,
    host: &str,
    p: &mut Problems,
) -> Vec<(&'a crate::pg_archive::Recorded, Vec<Segment>)> {
    let what = |a: &crate::pg_archive::Recorded| {
        format!(
            "the archive written at {} ({}:{})",
            time(a.header.created_at),
            a.host,
            a.file
        )
    };
    let good = crate::pg_archive::trusted(
        recorded,
        &|k| keys.contains(&k.to_ascii_lowercase()),
        |a, why| {
            let kind = if why.contains("no writer") {
                ProblemKind::ForeignKey
            } else {
                ProblemKind::BadCheckpoint
            };
            p.add(
                "archive",
                Some(a.header.first_id),
                kind,
                format!("{}: {why}", what(a)),
            );
        },
    );
    for (a, _) in &good {
        if a.host != host {
            continue;
        }
        if let Some(why) = crate::archive::file_disagrees(Path::new(&a.file), &a.header) {
            p.add(
                "archive",
                Some(a.header.first_id),
                ProblemKind::Edited,
                format!("{}: {why}", what(a)),
            );
        }
    }
    good
}

/// Checks one chain against the head a checkpoint states for it (in the log, or where an
/// archived run ends); true if they agree.
fn against(
    c: &Checkpoint,
    h: &ChainHead,
    walked: Option<&Walked>,
    runs: Option<&BTreeMap<i64, Segment>>,
    p: &mut Problems,
) -> bool {
    let when = time(c.created_at);
    let last = walked.and_then(|w| w.last).map_or(0, |(seq, _)| seq);
    let archived = runs.and_then(|r| r.range(h.seq..).next().filter(|(_, r)| r.first <= h.seq));
    match walked.and_then(|w| w.marks.get(&h.seq)) {
        Some(hash) if chain::hex(hash).eq_ignore_ascii_case(&h.hash) => true,
        None if archived.is_some() => match archived {
            Some((&end, run))
                if end == h.seq && !chain::hex(&run.last_hash).eq_ignore_ascii_case(&h.hash) =>
            {
                p.add(
                    "audit",
                    None,
                    ProblemKind::Edited,
                    format!(
                        "the checkpoint made at {when} and the archive of records {} to {} of \
                         chain {} disagree on its record {end}",
                        run.first, end, h.chain
                    ),
                );
                false
            }
            // Inside the archive, which is checked on its own.
            _ => true,
        },
        Some(_) => {
            p.add(
                "audit",
                None,
                ProblemKind::Edited,
                format!(
                    "chain {} up to its record {} is not the one the checkpoint made at {when} \
                     signed",
                    h.chain, h.seq
                ),
            );
            false
        }
        None if h.seq > last => {
            p.add(
                "audit",
                None,
                ProblemKind::Truncated,
                format!(
                    "chain {} ends at its record {last}, but the checkpoint made at {when} covers \
                     up to {}: records were removed from its end",
                    h.chain, h.seq
                ),
            );
            false
        }
        None => {
            p.add(
                "audit",
                None,
                ProblemKind::Deleted,
                format!(
                    "record {} of chain {}, the last the checkpoint made at {when} covers, is gone",
                    h.seq, h.chain
                ),
            );
            false
        }
    }
}
