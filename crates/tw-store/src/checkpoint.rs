//! Signed checkpoints: every so many records or seconds the store states, signed with its
//! Ed25519 key, where the audit and admin logs' chains end and how many rows they hold. A
//! checkpoint goes into the `audit_checkpoints` table and, one JSON line each, into
//! `<database>.checkpoints` beside it: removing records and then the checkpoints that cover them
//! takes editing two files, and a checkpoint copied anywhere else (`audit verify
//! --from-checkpoint`) still shows the cut.
//!
//! The key is `<database>.audit-key` (PKCS#8, mode 0600), made on the first checkpoint. What is
//! signed, in order: `toolwarden checkpoint v1\n`, then `created_at`, `audit_head_id`, the
//! 32-byte `audit_head_hash`, `audit_count`, `admin_head_id`, the 32-byte `admin_head_hash`,
//! `admin_count`, each integer as 8 bytes big-endian. A log with no rows has head id 0 and the
//! genesis hash (32 zero bytes).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use crate::chain::{hex, unhex};
use crate::error::{Result, StoreError};
use crate::writer::Writer;

/// When the next checkpoint is due, and the one making it.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub(crate) every: u64,
    pub(crate) interval: Duration,
    /// Records this process appended since it last looked.
    pub(crate) since: AtomicU64,
    /// Wakes the checkpointing task early (`every` records came in).
    pub(crate) wake: Arc<tokio::sync::Notify>,
    /// Made one at a time, with the signing key once read.
    making: tokio::sync::Mutex<Option<SigningKey>>,
    /// Set by the store's `close`: its background tasks (checkpoints, retention) end.
    pub(crate) closed: AtomicBool,
}

impl Schedule {
    pub(crate) fn new(every: u64, interval: Duration) -> Self {
        Self {
            every: every.max(1),
            interval,
            since: AtomicU64::new(0),
            wake: Arc::new(tokio::sync::Notify::new()),
            making: tokio::sync::Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// Signs a checkpoint of both logs' heads, if they moved since this key's last one and one
    /// is due (`every` records or `interval` since it, or none yet), or `now`; keeps it in the
    /// table and, if no other process kept the same one first, in the file beside `db`.
    pub(crate) async fn make(
        &self,
        writer: &Writer,
        pool: &sqlx::SqlitePool,
        db: &Path,
        now: bool,
    ) -> Result<Option<Checkpoint>> {
        let mut making = self.making.lock().await;
        let key = match &mut *making {
            Some(key) => key,
            none => none.insert(SigningKey::read_or_create(&key_path(db))?),
        };
        let (heads, last) = self::heads(pool, key.public_key()).await?;
        let created_at = now_us();
        let moved = last.as_ref().is_none_or(|l| {
            (l.heads.audit_id, l.heads.admin_id) != (heads.audit_id, heads.admin_id)
        });
        let due = now
            || last.as_ref().is_none_or(|l| {
                heads.audit_id.saturating_sub(l.heads.audit_id) >= self.every as i64
                    || created_at.saturating_sub(l.checkpoint.created_at)
                        >= self.interval.as_micros() as i64
            });
        if !moved && now {
            // Asked for one: the newest already states these heads.
            return Ok(last.map(|l| l.checkpoint));
        }
        if !moved || !due || (heads.audit_id, heads.admin_id) == (0, 0) {
            return Ok(None);
        }
        self.since.store(0, Ordering::Relaxed);
        let signed = key.sign(created_at, &heads);
        let kept = insert(writer, &signed).await?;
        if kept {
            // A file write: off the runtime's threads.
            let (file, line) = (file_path(db), signed.clone());
            tokio::task::spawn_blocking(move || append_to_file(&file, &line))
                .await
                .map_err(|e| {
                    StoreError::Database(format!("writing a checkpoint stopped: {e}"))
                })??;
        }
        Ok(Some(signed))
    }
}

/// The heads of both logs at one moment, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// When it was made (µs since the epoch).
    pub created_at: i64,
    /// The audit log's last record then (0: none).
    pub audit_head_id: i64,
    /// That record's hash (hex).
    pub audit_head_hash: String,
    /// How many audit records there were, up to and including the head.
    pub audit_count: u64,
    /// The admin log's last entry then (0: none).
    pub admin_head_id: i64,
    /// That entry's hash (hex).
    pub admin_head_hash: String,
    /// How many admin entries there were.
    pub admin_count: u64,
    /// The Ed25519 public key that signed it (hex).
    pub public_key: String,
    /// The signature (hex).
    pub signature: String,
    /// On a team store, every writer's chain head, by chain: `audit_head_hash` is their join
    /// ([`join_heads`]), so the signature covers each. Empty on SQLite's single chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<ChainHead>,
}

/// One writer's chain head in a team store's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChainHead {
    /// The chain (the writer that opened it).
    pub chain: String,
    /// Its last record's place in it (from 1).
    pub seq: i64,
    /// That record's hash (hex).
    pub hash: String,
}

/// One hash over the chain heads, in the order given (sorted by chain): SHA-256 over a domain
/// line and, per head, the length-prefixed chain name, the seq and the 32-byte hash. `None` if a
/// hash is not 32 bytes of hex.
pub(crate) fn join_heads(heads: &[ChainHead]) -> Option<[u8; 32]> {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    h.update(b"toolwarden chain heads v1\n");
    for c in heads {
        h.update((c.chain.len() as u64).to_be_bytes());
        h.update(c.chain.as_bytes());
        h.update(c.seq.to_be_bytes());
        h.update(crate::chain::hash_from_hex(&c.hash)?);
    }
    Some(h.finalize().into())
}

/// What is wrong with a checkpoint on its own (before it is compared with any log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckpointFault {
    /// A field is not what the format says (a hash of the wrong length, say).
    Malformed(String),
    /// The signature does not verify with the checkpoint's own public key: it was edited.
    BadSignature,
}

/// The heads a checkpoint states, as the store reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heads {
    pub(crate) audit_id: i64,
    pub(crate) audit_hash: [u8; 32],
    pub(crate) audit_count: u64,
    pub(crate) admin_id: i64,
    pub(crate) admin_hash: [u8; 32],
    pub(crate) admin_count: u64,
}

fn message(created_at: i64, h: &Heads) -> Vec<u8> {
    let mut m = Vec::with_capacity(26 + 6 * 8 + 64);
    m.extend_from_slice(b"toolwarden checkpoint v1\n");
    m.extend_from_slice(&created_at.to_be_bytes());
    m.extend_from_slice(&h.audit_id.to_be_bytes());
    m.extend_from_slice(&h.audit_hash);
    m.extend_from_slice(&h.audit_count.to_be_bytes());
    m.extend_from_slice(&h.admin_id.to_be_bytes());
    m.extend_from_slice(&h.admin_hash);
    m.extend_from_slice(&h.admin_count.to_be_bytes());
    m
}

fn hash_field(name: &str, text: &str) -> std::result::Result<[u8; 32], CheckpointFault> {
    crate::chain::hash_from_hex(text)
        .ok_or_else(|| CheckpointFault::Malformed(format!("{name} is not 32 bytes of hex")))
}

/// Checks an Ed25519 `signature` by `public_key` (both hex) over `message`: a checkpoint's or an
/// archive header's.
pub(crate) fn verify_signature(
    public_key: &str,
    signature: &str,
    message: &[u8],
) -> std::result::Result<(), CheckpointFault> {
    let key = unhex(public_key)
        .filter(|k| k.len() == 32)
        .ok_or_else(|| CheckpointFault::Malformed("public_key is not 32 bytes of hex".into()))?;
    let signature = unhex(signature)
        .filter(|s| s.len() == 64)
        .ok_or_else(|| CheckpointFault::Malformed("signature is not 64 bytes of hex".into()))?;
    UnparsedPublicKey::new(&ED25519, key)
        .verify(message, &signature)
        .map_err(|_| CheckpointFault::BadSignature)
}

impl Checkpoint {
    /// The heads it states, once its signature verifies with its own public key.
    pub(crate) fn check(&self) -> std::result::Result<Heads, CheckpointFault> {
        if self.audit_head_id < 0 || self.admin_head_id < 0 {
            return Err(CheckpointFault::Malformed("a head id is negative".into()));
        }
        let heads = Heads {
            audit_id: self.audit_head_id,
            audit_hash: hash_field("audit_head_hash", &self.audit_head_hash)?,
            audit_count: self.audit_count,
            admin_id: self.admin_head_id,
            admin_hash: hash_field("admin_head_hash", &self.admin_head_hash)?,
            admin_count: self.admin_count,
        };
        verify_signature(
            &self.public_key,
            &self.signature,
            &message(self.created_at, &heads),
        )?;
        if !self.chains.is_empty() && join_heads(&self.chains) != Some(heads.audit_hash) {
            return Err(CheckpointFault::Malformed(
                "its chain heads are not the ones it signed".into(),
            ));
        }
        Ok(heads)
    }
}

/// The store's signing key.
pub(crate) struct SigningKey {
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("public_key", &self.public_hex())
            .finish_non_exhaustive()
    }
}

/// `<database>.audit-key`.
pub(crate) fn key_path(db: &Path) -> PathBuf {
    crate::beside(db, ".audit-key")
}

/// `<database>.checkpoints`.
pub(crate) fn file_path(db: &Path) -> PathBuf {
    crate::beside(db, ".checkpoints")
}

impl SigningKey {
    /// Reads the key at `path`; `None` if there is none yet.
    pub(crate) fn read(path: &Path) -> Result<Option<Self>> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let pair = Ed25519KeyPair::from_pkcs8(&bytes).map_err(|e| StoreError::Corrupt {
            what: format!("the audit signing key {}", path.display()),
            message: format!("not an Ed25519 PKCS#8 key: {e}"),
        })?;
        Ok(Some(Self { pair }))
    }

    /// Reads the key at `path`, making one (mode 0600) if there is none. Several processes may
    /// race to make it: the key is written to a file of its own and linked into place, so each
    /// ends up with the one that won.
    pub(crate) fn read_or_create(path: &Path) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(key) = Self::read(path)? {
            return Ok(key);
        }
        let io = |source| StoreError::Io {
            path: path.to_owned(),
            source,
        };
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| io(std::io::Error::other("no randomness for a new signing key")))?;
        let temp = crate::beside(path, &format!(".{}.new", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut f| {
                f.write_all(pkcs8.as_ref())?;
                f.sync_all()
            });
        let linked = written.and_then(|()| std::fs::hard_link(&temp, path));
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        Self::read(path)?.ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))
    }

    pub(crate) fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    pub(crate) fn public_hex(&self) -> String {
        hex(self.pair.public_key().as_ref())
    }

    /// An Ed25519 signature of `message`.
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sign(message).as_ref().to_vec()
    }

    /// A checkpoint of `heads`, made at `created_at`.
    pub(crate) fn sign(&self, created_at: i64, heads: &Heads) -> Checkpoint {
        let signature = self.pair.sign(&message(created_at, heads));
        Checkpoint {
            created_at,
            audit_head_id: heads.audit_id,
            audit_head_hash: hex(&heads.audit_hash),
            audit_count: heads.audit_count,
            admin_head_id: heads.admin_id,
            admin_head_hash: hex(&heads.admin_hash),
            admin_count: heads.admin_count,
            public_key: self.public_hex(),
            signature: hex(signature.as_ref()),
            chains: Vec::new(),
        }
    }
}

/// Appends `checkpoint` as one line to the checkpoint file (created owner-only).
pub(crate) fn append_to_file(path: &Path, checkpoint: &Checkpoint) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut line = serde_json::to_vec(checkpoint).map_err(|e| StoreError::Encode {
        what: "checkpoint".to_owned(),
        message: e.to_string(),
    })?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| {
            // One write of the whole line: O_APPEND keeps lines from two processes apart. Not
            // synced, like the database's own commits at `synchronous = NORMAL`: a checkpoint
            // lost to a power cut is made again from the same heads.
            f.write_all(&line)
        })
        .map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Reads a file of checkpoints, one JSON object a line (blank lines skipped); a line that is not
/// one is an error naming the file and line.
pub fn read_file(path: &Path) -> Result<Vec<Checkpoint>> {
    let text = std::fs::read_to_string(path).map_err(|source| StoreError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_lines(path, &text)
}

pub(crate) fn parse_lines(path: &Path, text: &str) -> Result<Vec<Checkpoint>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| StoreError::Invalid {
                what: format!("{}:{}", path.display(), i + 1),
                message: format!("not a checkpoint: {e}"),
            })
        })
        .collect()
}

/// The wall clock in µs since the epoch: when a checkpoint is made (the store's own clock; the
/// records' times come from the runtime).
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A nullable BLOB column.
type Blob = Option<Vec<u8>>;

/// The last checkpoint this key signed, and the heads it states.
#[derive(Debug, Clone)]
pub(crate) struct Last {
    pub(crate) checkpoint: Checkpoint,
    pub(crate) heads: Heads,
}

/// Both logs' heads now, and `key`'s last checkpoint (whose heads the log must still hold). One
/// read transaction.
pub(crate) async fn heads(
    pool: &sqlx::SqlitePool,
    public_key: &[u8],
) -> Result<(Heads, Option<Last>)> {
    use sqlx::Row as _;
    let mut tx = pool.begin().await?;
    // The tail is seen before the log: a record a move takes from one to the other meanwhile is
    // then seen in at least one of them (`tail`).
    sqlx::query(crate::tail::PIN).fetch_one(&mut *tx).await?;
    let last = sqlx::query(
        "SELECT created_at, audit_head_id, audit_head_hash, audit_count, admin_head_id, \
         admin_head_hash, admin_count, public_key, signature FROM audit_checkpoints \
         WHERE public_key = ? ORDER BY id DESC LIMIT 1",
    )
    .bind(public_key)
    .fetch_optional(&mut *tx)
    .await?
    .map(|r| -> Result<Last> {
        let blob = |i| r.try_get::<Vec<u8>, _>(i);
        let hash = |i| -> Result<[u8; 32]> {
            blob(i)?.try_into().map_err(|_| StoreError::Corrupt {
                what: "the last audit checkpoint".to_owned(),
                message: "a head hash is not 32 bytes".to_owned(),
            })
        };
        let heads = Heads {
            audit_id: r.try_get(1)?,
            audit_hash: hash(2)?,
            audit_count: crate::codec::count(r.try_get(3)?),
            admin_id: r.try_get(4)?,
            admin_hash: hash(5)?,
            admin_count: crate::codec::count(r.try_get(6)?),
        };
        let checkpoint = Checkpoint {
            created_at: r.try_get(0)?,
            audit_head_id: heads.audit_id,
            audit_head_hash: hex(&heads.audit_hash),
            audit_count: heads.audit_count,
            admin_head_id: heads.admin_id,
            admin_head_hash: hex(&heads.admin_hash),
            admin_count: heads.admin_count,
            public_key: hex(&blob(7)?),
            signature: hex(&blob(8)?),
            chains: Vec::new(),
        };
        Ok(Last { checkpoint, heads })
    })
    .transpose()?;
    let mut head = async |sql: &str| -> Result<(i64, [u8; 32])> {
        let row: Option<(i64, Option<Vec<u8>>)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_optional(&mut *tx)
            .await?;
        Ok(match row {
            None => (0, crate::chain::GENESIS),
            Some((id, hash)) => (
                id,
                hash.and_then(|h| h.try_into().ok())
                    .ok_or_else(|| StoreError::Corrupt {
                        what: format!("log row {id}"),
                        message: "it has no chain hash".to_owned(),
                    })?,
            ),
        })
    };
    let (audit_id, audit_hash) = head(crate::chain::AUDIT_HEAD).await?;
    let (admin_id, admin_hash) =
        head("SELECT id, hash FROM admin_log ORDER BY id DESC LIMIT 1").await?;
    // The log must still hold what the last checkpoint signed: a store never signs over a
    // history that changed under it (that is for `audit verify` to explain).
    if let Some(l) = &last {
        // An audit head may since have gone into an archive: then the archive's last hash
        // stands for it if it is that archive's last record.
        let (audit_then, archived, admin_then): (Blob, Blob, Blob) = sqlx::query_as(
            "SELECT (SELECT hash FROM audit_log WHERE id = ?1 UNION ALL \
                         SELECT hash FROM audit_tail WHERE id = ?1), \
                        (SELECT CASE WHEN last_id = ?1 THEN last_hash ELSE ?3 END \
                         FROM audit_archives WHERE first_id <= ?1 AND ?1 <= last_id), \
                        (SELECT hash FROM admin_log WHERE id = ?2)",
        )
        .bind(l.heads.audit_id)
        .bind(l.heads.admin_id)
        .bind(l.heads.audit_hash.to_vec())
        .fetch_one(&mut *tx)
        .await?;
        let holds = |now: Option<Vec<u8>>, id: i64, then: &[u8; 32]| {
            id == 0 || now.as_deref() == Some(then.as_slice())
        };
        let audit_then = audit_then.or(archived);
        if !holds(audit_then, l.heads.audit_id, &l.heads.audit_hash)
            || !holds(admin_then, l.heads.admin_id, &l.heads.admin_hash)
        {
            return Err(StoreError::Corrupt {
                what: "audit log".to_owned(),
                message: format!(
                    "it no longer holds what the checkpoint made at {} signed (audit record {}, \
                     admin entry {}): no new checkpoint is signed; run `toolwarden audit verify`",
                    crate::verify::time(l.checkpoint.created_at),
                    l.heads.audit_id,
                    l.heads.admin_id
                ),
            });
        }
    }
    tx.rollback().await?;
    // Ids run from 1 without a gap, each record in the log or in an archive, so the count up to
    // the head is the head's id. Stating it rather than counting rows costs nothing (a count
    // read a thousand rows' pages per checkpoint, and showed in the appends' p99), and a record
    // removed before a checkpoint is still caught: `audit verify` counts the rows it walks.
    let heads = Heads {
        audit_id,
        audit_hash,
        audit_count: crate::codec::count(audit_id),
        admin_id,
        admin_hash,
        admin_count: crate::codec::count(admin_id),
    };
    Ok((heads, last))
}

/// Keeps `c` in the table; false if a checkpoint of the same heads is there already (another
/// process made it).
///
/// On the store file's rusqlite connection, in place, like the tail's moves: a write through the
/// store's other connection makes that connection find the file changed at its next transaction
/// and start its page cache afresh.
pub(crate) async fn insert(writer: &Writer, c: &Checkpoint) -> Result<bool> {
    let blob = |hex: &str| unhex(hex).unwrap_or_default();
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let done = writer
        .write_in_place(|conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO audit_checkpoints (created_at, audit_head_id, \
                 audit_head_hash, audit_count, admin_head_id, admin_head_hash, admin_count, \
                 public_key, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )?
            .execute(rusqlite::params![
                c.created_at,
                c.audit_head_id,
                blob(&c.audit_head_hash),
                count(c.audit_count),
                c.admin_head_id,
                blob(&c.admin_head_hash),
                count(c.admin_count),
                blob(&c.public_key),
                blob(&c.signature),
            ])
        })
        .await?;
    Ok(done == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads() -> Heads {
        Heads {
            audit_id: 7,
            audit_hash: [7; 32],
            audit_count: 7,
            admin_id: 2,
            admin_hash: [2; 32],
            admin_count: 2,
        }
    }

    #[test]
    fn a_checkpoint_verifies_and_any_edit_breaks_its_signature() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir.path().join("tw.db"));
        let key = SigningKey::read_or_create(&path).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The same key is read back, not made again.
        let again = SigningKey::read_or_create(&path).unwrap();
        assert_eq!(key.public_hex(), again.public_hex());
        let c = key.sign(1, &heads());
        assert_eq!(c.check(), Ok(heads()));
        let mut edited = c.clone();
        edited.audit_count = 6;
        assert_eq!(edited.check(), Err(CheckpointFault::BadSignature));
        let mut edited = c.clone();
        edited.audit_head_hash = hex(&[8; 32]);
        assert_eq!(edited.check(), Err(CheckpointFault::BadSignature));
        let mut edited = c;
        edited.audit_head_hash = "abc".into();
        assert!(matches!(edited.check(), Err(CheckpointFault::Malformed(_))));
    }

    #[test]
    fn a_line_that_is_no_checkpoint_is_named_by_file_and_line() {
        let err = parse_lines(Path::new("saved.jsonl"), "\n{\"created_at\": 1}\n").unwrap_err();
        assert!(err.to_string().contains("saved.jsonl:2"), "{err}");
    }
}
