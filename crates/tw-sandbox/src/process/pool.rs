//! Sandbox helpers made ahead of their runs. Building a strict sandbox (a helper process,
//! namespaces, mounts, a fresh `/proc`, Landlock, seccomp) costs a few times a bare spawn, and
//! even a standard run pays for starting its helper before its tool; a pooled helper has done
//! all of it before its run comes, and waits confined (at strict and restricted, as its
//! namespace's init) for the [`Run`] that names the program (see [`Request::pooled`]). A run
//! takes a ready helper and the pool makes the next one in the background, off the run's path,
//! once the same shape of run came twice. It keeps helpers for the last [`SHAPES`] shapes that
//! ran.
//!
//! What a pooled run keeps from a run built on the spot:
//! - **Nothing is shared between runs.** A helper serves one run and exits with it: its
//!   namespaces, its private `/tmp` and `/dev/shm` and its `/proc` are its own.
//! - **The sandbox is the one the run asks for.** The pool keeps helpers per *shape*, the run's
//!   request without what only the run names (program, arguments, working directory,
//!   environment); a run takes only a helper of its own shape, and one whose shape the pool has
//!   no helper for (another tool's limits, a changed policy, a forbidden file that appeared
//!   since) is built on the spot.
//! - **The host paths are the ones there now.** A helper's mounts pin the files and directories
//!   they cover when it is made. Each path the sandbox names (workspace, masks, system paths,
//!   hidden directories) is marked (see [`Mark`]) before the helper is made and compared when a
//!   run takes it: a workspace swapped for another directory, or a masked file deleted and made
//!   again (which detaches its mask in every namespace), sends the run to a helper built on the
//!   spot.
//! - **Limits and cgroups.** The tool's rlimits and the tree's caps are in the shape; the helper
//!   enters the run's cgroups before it reads its request, as a run built on the spot does, so
//!   its init and the tool are born in them.
//!
//! Only batch runs without standard input and without an egress port are pooled (an egress
//! listener belongs to one run's proxy; an interactive run's stdin pipe comes with its request).
//! Idle helpers exit when the pool drops them or the runtime's end of their socket closes; their
//! cgroups then go back for reuse. The pool drops a shape's helpers once no run of it came for
//! [`SandboxConfig::pool_idle`](super::SandboxConfig::pool_idle) (5 minutes by default): a
//! strict helper's mounts keep the directories they cover busy.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::cgroup::{Cgroups, RunCgroup};
use super::host::Host;
use crate::helper::wire::{self, Message, Request, Run};

/// How long a helper may take to say it is ready before the pool gives up on it.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Shapes the pool keeps helpers for at once, the most recently run first: an agent that
/// alternates between a few tools (each tool's limits and policy make a shape of its own) finds
/// helpers for each, and the least recently run shape's go when one more comes.
pub(crate) const SHAPES: usize = 4;

/// The helpers made ahead for the last few shapes of run.
#[derive(Debug)]
pub(crate) struct Pool {
    /// How many ready helpers the pool keeps per shape; 0 turns pooling off.
    size: usize,
    /// How long a shape no run takes keeps its helpers.
    idle: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// At most [`SHAPES`], the most recently run first.
    slots: Vec<Slot>,
    /// The id the next new slot gets.
    next_id: u64,
    /// Whether a task is waiting to let idle shapes go (see [`Pool::sweep`]).
    sweeping: bool,
}

/// The helpers for one shape.
#[derive(Debug)]
struct Slot {
    /// The request (see [`shape`]) the helpers are made for.
    shape: Request,
    /// Never reused, so a helper finished for a slot the pool has since let go is dropped.
    id: u64,
    /// How many runs of this shape came so far (up to 2): helpers are made only for a shape
    /// seen twice, so a one-shot process (`toolwarden call`) makes none it would throw away.
    seen: u8,
    /// When a run of this shape last came.
    last: Instant,
    ready: Vec<Pooled>,
    /// Helpers being made.
    filling: usize,
    /// A helper for this shape failed to get ready: no more are made for it (a run built on
    /// the spot reports the failure itself) until the pool lets the shape go.
    broken: bool,
}

impl State {
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }
}

/// A helper that built its sandbox and waits for its run. Dropping it closes the runtime's end
/// of its socket, on which its init, waiting to read the run, exits, and the helper with it.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(crate) child: tokio::process::Child,
    /// The runtime's end of the control socket.
    pub(crate) ctl: tokio::net::UnixStream,
    /// The helper's process id.
    pub(crate) pid: u32,
    /// The run's cgroups (where runs get them), which the helper entered before it read its
    /// request, as at a run built on the spot: its init and the tool are born in them.
    cgroup: Kept,
    /// The host paths the sandbox names (see [`Mark`]), taken before it was made.
    marks: Vec<Option<Mark>>,
}

impl Pooled {
    /// The helper, the runtime's end of its socket, its pid and its cgroups, for its run.
    pub(crate) fn into_parts(
        self,
    ) -> (
        tokio::process::Child,
        tokio::net::UnixStream,
        u32,
        Option<RunCgroup>,
    ) {
        let Pooled {
            child,
            ctl,
            pid,
            mut cgroup,
            ..
        } = self;
        (child, ctl, pid, cgroup.0.take().map(|(_, cg)| cg))
    }
}

/// An unused helper's cgroups, which go back for reuse once it has exited (the runtime's end of
/// its socket closing ends it).
#[derive(Debug)]
struct Kept(Option<(Arc<Cgroups>, RunCgroup)>);

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some((cgroups, cg)) = self.0.take() {
            cgroups.give_back(cg);
        }
    }
}

impl Pool {
    pub(crate) fn new(size: usize, idle: Duration) -> Self {
        Self {
            size,
            idle,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ready helper for `shape` whose paths are still the ones it was made with, if the pool
    /// has one; otherwise the run is built on the spot, and the pool counts the shape (letting
    /// the least recently run one go if it now holds more than [`SHAPES`]). Either way
    /// [`Pool::refill`] should follow.
    pub(crate) fn claim(&self, shape: &Request) -> Option<Pooled> {
        if self.size == 0 {
            return None;
        }
        let stale = {
            let mut guard = self.state();
            let state = &mut *guard;
            match state.slots.iter().position(|s| &s.shape == shape) {
                None => {
                    let id = state.next_id;
                    state.next_id += 1;
                    state.slots.insert(
                        0,
                        Slot {
                            shape: shape.clone(),
                            id,
                            seen: 1,
                            last: Instant::now(),
                            ready: Vec::new(),
                            filling: 0,
                            broken: false,
                        },
                    );
                    state
                        .slots
                        .drain(SHAPES.min(state.slots.len())..)
                        .flat_map(|s| s.ready)
                        .collect()
                }
                Some(at) => {
                    let slot = state.slots.remove(at);
                    state.slots.insert(0, slot);
                    let slot = &mut state.slots[0];
                    slot.seen = 2;
                    slot.last = Instant::now();
                    if slot.ready.is_empty() {
                        return None;
                    }
                    let now = marks(shape);
                    let mut taken = None;
                    let mut stale = Vec::new();
                    while let Some(p) = slot.ready.pop() {
                        if p.marks == now {
                            taken = Some(p);
                            break;
                        }
                        stale.push(p);
                    }
                    if let Some(p) = taken {
                        drop(guard);
                        drop(stale);
                        return Some(p);
                    }
                    stale
                }
            }
        };
        // Closed outside the lock: each exits on its own, and its cgroups go back.
        drop(stale);
        None
    }

    /// The slot that most needs a helper, the most recently run first: its shape and id.
    fn wanting(&self, state: &State) -> Option<(Request, u64)> {
        state
            .slots
            .iter()
            .find(|s| !s.broken && s.seen >= 2 && s.ready.len() + s.filling < self.size)
            .map(|s| (s.shape.clone(), s.id))
    }

    /// Makes helpers in the background until the pool holds `size` for each shape it keeps
    /// that came twice.
    pub(crate) fn refill(host: &Arc<Host>) {
        // A run dropped as its runtime shuts down has nowhere to build helpers, and needs none.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = host.pool();
        if pool.size == 0 {
            return;
        }
        pool.sweep(host, &runtime);
        if pool.wanting(&pool.state()).is_none() {
            return;
        }
        let host = Arc::clone(host);
        runtime.spawn(async move {
            let pool = host.pool();
            loop {
                let (shape, id) = {
                    let mut state = pool.state();
                    let Some((shape, id)) = pool.wanting(&state) else {
                        return;
                    };
                    if let Some(slot) = state.slot(id) {
                        slot.filling += 1;
                    }
                    (shape, id)
                };
                let made = make(&host, &shape).await;
                let mut state = pool.state();
                let Some(slot) = state.slot(id) else {
                    // Let go while it was being made: dropped (outside the lock).
                    drop(state);
                    drop(made);
                    continue;
                };
                slot.filling -= 1;
                match made {
                    Ok(p) => slot.ready.push(p),
                    Err(e) => {
                        slot.broken = true;
                        tracing::warn!(error = %e, "could not make a sandbox helper ahead of its run; runs build theirs on the spot");
                    }
                }
            }
        });
    }

    /// Lets go of the shapes no run has taken for the pool's idle time, with their helpers, in
    /// a task that sleeps until the next one is due and ends when the pool keeps no shape.
    fn sweep(&self, host: &Arc<Host>, runtime: &tokio::runtime::Handle) {
        {
            let mut state = self.state();
            if state.sweeping || state.slots.is_empty() {
                return;
            }
            state.sweeping = true;
        }
        // Weak: a sandbox dropped meanwhile is not kept alive by its sweeper.
        let host = Arc::downgrade(host);
        runtime.spawn(async move {
            loop {
                let due = {
                    let Some(host) = host.upgrade() else { return };
                    let pool = host.pool();
                    let mut state = pool.state();
                    let now = Instant::now();
                    let (kept, gone): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut state.slots)
                        .into_iter()
                        .partition(|s| now.duration_since(s.last) < pool.idle);
                    state.slots = kept;
                    let next = state.slots.iter().map(|s| s.last + pool.idle).min();
                    if next.is_none() {
                        state.sweeping = false;
                    }
                    drop(state);
                    // Closed outside the lock: each exits on its own, and its cgroups go back.
                    drop(gone);
                    match next {
                        Some(at) => at,
                        None => return,
                    }
                };
                tokio::time::sleep_until(due.into()).await;
            }
        });
    }

    /// The process ids of the ready helpers.
    #[cfg(test)]
    pub(crate) fn ready_pids(&self) -> Vec<i32> {
        self.state()
            .slots
            .iter()
            .flat_map(|s| &s.ready)
            .filter_map(|p| i32::try_from(p.pid).ok())
            .collect()
    }

    /// How many helpers are ready, and how many are being made, over every shape.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.state();
        state.slots.iter().fold((0, 0), |(ready, filling), s| {
            (ready + s.ready.len(), filling + s.filling)
        })
    }
}

/// Calls [`Pool::refill`] when dropped: at the end of a run, however it ends.
pub(crate) struct RefillOnDrop<'a>(pub(crate) &'a Arc<Host>);

impl Drop for RefillOnDrop<'_> {
    fn drop(&mut self) {
        Pool::refill(self.0);
    }
}

/// The part of a run's request a pooled helper is made for: all of it but the program, its
/// arguments and working directory (sent in the [`Run`]), and marked as pooled.
pub(crate) fn shape(request: &Request) -> Request {
    Request {
        program: PathBuf::new(),
        argv: Vec::new(),
        cwd: PathBuf::new(),
        pooled: true,
        ..request.clone()
    }
}

/// What a pooled helper is told when its run comes.
pub(crate) fn run_of(request: &Request, env: &std::collections::BTreeMap<String, String>) -> Run {
    Run {
        program: request.program.clone(),
        argv: request.argv.clone(),
        cwd: request.cwd.clone(),
        env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    }
}

/// Who each host path `shape` names is (see [`mark`]), `None` for one that does not exist.
fn marks(shape: &Request) -> Vec<Option<Mark>> {
    let whole = shape
        .read_only
        .iter()
        .chain(&shape.read_write)
        .chain(&shape.hidden)
        .map(|p| mark(p, false));
    whole
        .chain(shape.masked.iter().map(|p| mark(p, true)))
        .collect()
}

/// A file's identity: device, inode and birth time. A mask is mounted *on* its path, and
/// deleting the file there detaches the mask and frees the inode, whose number the filesystem
/// may give the next file at once (ext4 does): so for a masked path the change time counts too,
/// which a file made again cannot keep. (Where the filesystem records no birth time, the change
/// time counts for every path.)
type Mark = (u64, u64, i128, i128);

fn mark(path: &Path, masked: bool) -> Option<Mark> {
    let m = std::fs::metadata(path).ok()?;
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(-1, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
    };
    let changed = i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec());
    let born = m.created().ok().map(nanos);
    Some((
        m.dev(),
        m.ino(),
        born.unwrap_or(changed),
        if masked || born.is_none() { changed } else { 0 },
    ))
}

/// Starts a helper for `shape` and waits until it says it is ready.
async fn make(host: &Host, shape: &Request) -> std::io::Result<Pooled> {
    let helper = host
        .helper()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // As at a run built on the spot: a standard helper enters no namespace.
    let shared = match shape.level {
        crate::helper::wire::Level::Standard => None,
        _ => host.shared_namespaces().await,
    };
    let marks = marks(shape);
    let frame = wire::encode_request(shape)?;
    let fds: Vec<std::os::fd::RawFd> = shared
        .map(|ns| vec![ns.userns.as_raw_fd(), ns.netns.as_raw_fd()])
        .unwrap_or_default();
    let (mut child, mut ctl) = super::launch::start_helper(helper, &frame, &fds, None)?;
    let pid = child.id().unwrap_or(0);
    // Into the run's cgroups before it reads its request, as a run built on the spot.
    let cgroup = match super::launch::run_cgroups(host, &shape.limits, shape.level, pid) {
        Ok(cg) => Kept(host.cgroups().cloned().zip(cg)),
        Err(e) => {
            let _ = child.start_kill();
            return Err(e);
        }
    };
    let mut line = Vec::new();
    let ready = async {
        ctl.write_all(frame.get(4..).unwrap_or_default()).await?;
        read_line(&mut ctl, &mut line).await
    };
    let said = match tokio::time::timeout(READY_WITHIN, ready).await {
        Err(_) => Err("it was not ready in time".to_owned()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(())) => match wire::parse_messages(&line).first() {
            Some(Message::Ready) => Ok(()),
            Some(Message::SetupFailed { step, error }) => Err(format!("{step} failed: {error}")),
            other => Err(format!("it said {other:?} instead of ready")),
        },
    };
    if let Err(why) = said {
        // Reaped by tokio once it is gone.
        let _ = child.start_kill();
        return Err(std::io::Error::other(why));
    }
    Ok(Pooled {
        child,
        ctl,
        pid,
        cgroup,
        marks,
    })
}

/// Reads one line (the helper's first message) without reading past it.
async fn read_line(ctl: &mut tokio::net::UnixStream, line: &mut Vec<u8>) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    loop {
        if ctl.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other(
                "the helper exited before it was ready",
            ));
        }
        line.push(byte[0]);
        if byte[0] == b'\n' {
            return Ok(());
        }
    }
}

/// Sends a pooled helper its run.
pub(crate) async fn send_run(ctl: &mut tokio::net::UnixStream, run: &Run) -> std::io::Result<()> {
    let frame = wire::encode_request(run)?;
    ctl.write_all(&frame).await
}
