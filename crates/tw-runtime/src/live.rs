//! The live feed between processes that share a data directory: each runtime that publishes (the
//! CLI while it runs calls, the desktop app, an MCP server) listens on `DATA/live/PID.sock`, and
//! any other process on the data directory can watch its executions as they happen or cancel one.
//!
//! That is how the desktop app's live view shows a call an agent started from the CLI, and how
//! its Cancel button stops it: the event bus of one process is not visible to another, and the
//! audit log only learns of a call when it ends. A Unix socket per process, rather than rows in
//! SQLite, keeps the hot path free of writes: a feed nobody watches costs nothing, since events
//! are only built while someone is subscribed.
//!
//! The protocol is JSON lines. A client sends one request line: `{"op":"watch"}` gets a
//! [`FeedMessage::Hello`] with the calls running right now, then every [`ExecutionEvent`] until
//! either side hangs up; `{"op":"cancel","execution_id":ID}` gets `{"found":true|false}`. The
//! socket is the owner's alone (mode 0600 in a 0700 directory), so only the data directory's own
//! user can watch or cancel. Sockets left by a process that died are removed by the next client
//! that finds nobody listening and the process gone.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tw_core::ExecutionId;

use crate::events::{ExecutionEvent, Received};
use crate::pipeline::Pipeline;

/// The directory of the feeds, below the data directory.
pub const FEED_DIR: &str = "live";
/// Longest request line a feed reads.
const MAX_REQUEST: usize = 4096;
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a watcher looks for new feeds even without a file-system notification.
const RESCAN: Duration = Duration::from_secs(2);
/// How long a one-shot request (cancel, snapshot) waits for one feed to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the feeds of `data_dir` live.
pub fn feed_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(FEED_DIR)
}

pub use crate::pipeline::{Flight, RunningCall};

/// What a feed sends a watcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedMessage {
    /// The first message: who is publishing, and what it is running now.
    Hello {
        /// The publishing process.
        pid: u32,
        /// Its calls in flight (including those waiting for confirmation).
        running: Vec<RunningCall>,
    },
    /// Something happened to one of its calls.
    Event(ExecutionEvent),
    /// The watcher fell behind and this many events were dropped for it.
    Missed(u64),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    Watch,
    Cancel { execution_id: ExecutionId },
}

#[derive(Debug, Serialize, Deserialize)]
struct CancelReply {
    found: bool,
}

/// A runtime's published feed; dropping it stops listening and removes the socket.
pub(crate) struct FeedServer {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FeedServer {
    fn drop(&mut self) {
        self.task.abort();
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!(path = %self.path.display(), error = %e, "cannot remove the live feed");
        }
    }
}

impl FeedServer {
    /// Listens on `DATA/live/PID.sock` for `pipeline`'s calls (held weakly, so the feed never
    /// keeps a closed runtime alive).
    pub(crate) fn start(data_dir: &Path, pipeline: Weak<Pipeline>) -> io::Result<(Self, PathBuf)> {
        let dir = feed_dir(data_dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let path = dir.join(format!("{}.sock", std::process::id()));
        // Our own pid's socket can only be left over from an earlier runtime of this process.
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let task = tokio::spawn(accept_loop(listener, pipeline));
        Ok((
            Self {
                path: path.clone(),
                task,
            },
            path,
        ))
    }
}

async fn accept_loop(listener: UnixListener, inner: Weak<Pipeline>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "the live feed stopped accepting");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let inner = inner.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(stream, inner).await {
                tracing::debug!(error = %e, "a live feed client went away");
            }
        });
    }
}

/// Reads one line of at most [`MAX_REQUEST`] bytes.
async fn read_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> io::Result<String> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if line.len() > MAX_REQUEST {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        if done {
            return String::from_utf8(line)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
        }
    }
}

async fn write_json(
    stream: &mut (impl tokio::io::AsyncWrite + Unpin),
    value: &impl Serialize,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line).await
}

async fn serve(stream: UnixStream, inner: Weak<Pipeline>) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let line = tokio::time::timeout(REQUEST_TIMEOUT, read_line(&mut reader))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    let request: Request = serde_json::from_str(line.trim())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let Some(rt) = inner.upgrade() else {
        return Ok(());
    };
    match request {
        Request::Cancel { execution_id } => {
            let found = rt.cancel(&execution_id);
            write_json(&mut write, &CancelReply { found }).await
        }
        Request::Watch => {
            // Subscribe before the snapshot, so nothing falls between them.
            let mut events = rt.events().subscribe();
            let hello = FeedMessage::Hello {
                pid: std::process::id(),
                running: rt.running_calls(),
            };
            drop(rt);
            write_json(&mut write, &hello).await?;
            let mut probe = [0u8; 64];
            loop {
                tokio::select! {
                    received = events.recv() => {
                        let message = match received {
                            // Another replica's call: its watchers hear of it through the team
                            // store, not from this process.
                            Some(Received::Event(e)) if e.replica.is_some() => continue,
                            Some(Received::Event(e)) => FeedMessage::Event((*e).clone()),
                            Some(Received::Missed(n)) => FeedMessage::Missed(n),
                            None => return Ok(()),
                        };
                        write_json(&mut write, &message).await?;
                    }
                    // A watcher sends nothing more; a read ending means it hung up.
                    n = tokio::io::AsyncReadExt::read(&mut reader, &mut probe) => {
                        if n? == 0 {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

/// The feeds on `data_dir` other than this process's, by pid.
fn peers(data_dir: &Path) -> Vec<(u32, PathBuf)> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir(feed_dir(data_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let pid: u32 = path
                .file_name()?
                .to_str()?
                .strip_suffix(".sock")?
                .parse()
                .ok()?;
            (pid != own).then_some((pid, path))
        })
        .collect();
    out.sort_unstable();
    out
}

/// Connects to a feed; removes it if nobody listens and its process is gone.
async fn connect(pid: u32, path: &Path) -> Option<UnixStream> {
    match UnixStream::connect(path).await {
        Ok(s) => Some(s),
        Err(e) => {
            if e.kind() == io::ErrorKind::ConnectionRefused
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                tracing::debug!(pid, "removing the live feed of a process that is gone");
                let _ = std::fs::remove_file(path);
            }
            None
        }
    }
}

/// Sends one request to a feed and reads its first reply line as `T`; `None` if the feed is
/// gone, does not answer within [`ASK_TIMEOUT`], or answers something else.
async fn ask<T: serde::de::DeserializeOwned>(
    pid: u32,
    path: &Path,
    request: &Request,
) -> Option<T> {
    let exchange = async {
        let mut stream = connect(pid, path).await?;
        write_json(&mut stream, request).await.ok()?;
        let line = read_line(&mut BufReader::new(stream)).await.ok()?;
        serde_json::from_str(line.trim()).ok()
    };
    tokio::time::timeout(ASK_TIMEOUT, exchange)
        .await
        .ok()
        .flatten()
}

/// Asks every other process on `data_dir` to cancel `id`; true if one was running it.
pub async fn cancel_elsewhere(data_dir: &Path, id: &ExecutionId) -> bool {
    let request = Request::Cancel {
        execution_id: id.clone(),
    };
    for (pid, path) in peers(data_dir) {
        if let Some(CancelReply { found: true }) = ask(pid, &path, &request).await {
            return true;
        }
    }
    false
}

/// What every other process on `data_dir` has in flight right now, by pid (feeds that do not
/// answer within a few seconds are left out).
pub async fn running_elsewhere(data_dir: &Path) -> Vec<(u32, Vec<RunningCall>)> {
    let mut out = Vec::new();
    for (pid, path) in peers(data_dir) {
        if let Some(FeedMessage::Hello { running, .. }) = ask(pid, &path, &Request::Watch).await {
            out.push((pid, running));
        }
    }
    out
}

/// What a watcher of the other processes hears.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerUpdate {
    /// A feed was found; this is what it says first.
    Hello {
        /// The publishing process.
        pid: u32,
        /// Its calls in flight.
        running: Vec<RunningCall>,
    },
    /// An event of one of its calls.
    Event {
        /// The publishing process.
        pid: u32,
        /// The event.
        event: ExecutionEvent,
    },
    /// Events dropped for this watcher.
    Missed {
        /// The publishing process.
        pid: u32,
        /// How many.
        count: u64,
    },
    /// The feed closed (the process ended or closed its runtime).
    Gone {
        /// The process.
        pid: u32,
    },
}

/// Watches every other process's feed on `data_dir`, now and as they come: a new feed is found
/// at once through a file-system notification (and by a rescan every few seconds in case one is
/// missed). The watch ends when the receiver is dropped.
pub fn watch_peers(data_dir: PathBuf) -> mpsc::Receiver<PeerUpdate> {
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(async move {
        let dir = feed_dir(&data_dir);
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
        let (nudge_tx, mut nudge_rx) = mpsc::channel::<()>(1);
        let _watcher = dir_watcher(&dir, nudge_tx);
        let connected: Arc<Mutex<HashSet<u32>>> = Arc::default();
        while !tx.is_closed() {
            for (pid, path) in peers(&data_dir) {
                if connected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&pid)
                {
                    continue;
                }
                let Some(stream) = connect(pid, &path).await else {
                    continue;
                };
                connected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(pid);
                let (tx, connected) = (tx.clone(), Arc::clone(&connected));
                tokio::spawn(async move {
                    follow(pid, stream, &tx).await;
                    connected
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&pid);
                    let _ = tx.send(PeerUpdate::Gone { pid }).await;
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(RESCAN) => {}
                _ = nudge_rx.recv() => {}
                () = tx.closed() => break,
            }
        }
    });
    rx
}

/// Forwards one feed until it closes or the watcher goes away.
async fn follow(pid: u32, mut stream: UnixStream, tx: &mpsc::Sender<PeerUpdate>) {
    if write_json(&mut stream, &Request::Watch).await.is_err() {
        return;
    }
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let update = match serde_json::from_str::<FeedMessage>(&line) {
            Ok(FeedMessage::Hello { running, .. }) => PeerUpdate::Hello { pid, running },
            Ok(FeedMessage::Event(event)) => PeerUpdate::Event { pid, event },
            Ok(FeedMessage::Missed(count)) => PeerUpdate::Missed { pid, count },
            Err(e) => {
                tracing::debug!(pid, error = %e, "an unreadable live feed message");
                continue;
            }
        };
        if tx.send(update).await.is_err() {
            return;
        }
    }
}

/// A notification on new files in the feed directory, if the platform can give one.
fn dir_watcher(dir: &Path, nudge: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| e.kind.is_create()) {
            let _ = nudge.try_send(());
        }
    })
    .map_err(|e| tracing::debug!(error = %e, "no file-system notifications for the live feeds"))
    .ok()?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|e| tracing::debug!(error = %e, "cannot watch the live feed directory"))
        .ok()?;
    Some(watcher)
}
