//! How a store is opened: which backend, durability, batching, the lock wait, the text index, checkpoints and
//! retention, with their defaults.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// How hard SQLite works to make a commit survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Survives the process crashing; the last commits may be lost if the machine loses power.
    #[default]
    Normal,
    /// Also survives power loss, at the cost of an fsync per commit.
    Full,
}

impl FromStr for Synchronous {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            other => Err(format!(
                "unknown synchronous mode {other:?}: expected \"normal\" or \"full\""
            )),
        }
    }
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The database file; created (mode 0600) when missing. For a team store, the path its
    /// local files are named after (the signing key, `<path>.audit-key`).
    pub path: PathBuf,
    /// A `postgres://` URL: the team store, shared by several replicas, instead of the file.
    pub url: Option<String>,
    /// Durability of each commit.
    pub synchronous: Synchronous,
    /// Most records written in one commit (1 to 1000).
    pub max_batch: usize,
    /// How long to wait for another process holding the write lock.
    pub busy_timeout: Duration,
    /// Keep the audit log's text index (`<path>.search`, see [`Store::text_index`]) and search
    /// through it. Without it a text search reads the log directly, a window at a time.
    pub text_index: bool,
    /// A signed checkpoint of the logs' heads is made once this many records came in since the
    /// last one...
    pub checkpoint_every: u64,
    /// ...or this long after it, if any did.
    pub checkpoint_interval: Duration,
    /// Keep audit records this many days: older ones are archived into `archive_dir` (checked
    /// hourly) and then removed. `None` keeps everything.
    pub keep_days: Option<u32>,
    /// Where retention writes its archives (default `archives/` beside the database).
    pub archive_dir: PathBuf,
}

impl StoreOptions {
    /// Defaults for `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path: PathBuf = path.into();
        let archive_dir = path.with_file_name("archives");
        Self {
            archive_dir,
            path,
            url: None,
            synchronous: Synchronous::Normal,
            max_batch: 512,
            busy_timeout: Duration::from_secs(5),
            text_index: true,
            checkpoint_every: 1000,
            checkpoint_interval: Duration::from_secs(60),
            keep_days: None,
        }
    }
}
