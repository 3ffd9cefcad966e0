//! Runs a tool's command as a child process at the isolation level its definition asks for,
//! with a time limit, cancellation, per-stream output caps, resource limits and metrics
//! ([`Sandbox::run`]), or starts a long-lived one whose standard input and output stay the
//! caller's streams for as long as it runs, an upstream MCP server for instance
//! ([`Sandbox::spawn_interactive`], see [`Interactive`]). Both go through the same checks, the
//! same request to the helper and the same cgroups; they differ in where the tool's input comes
//! from (bytes sent after the request, or a pipe sent with it) and in who reads its output.
//!
//! Design decisions:
//! - **Every level goes through the helper.** The runtime spawns `tw-sandbox-helper` (see
//!   [`crate::helper`]) with `posix_spawn`: no `pre_exec`, whose `fork` fallback copies the page
//!   tables of a large parent. The helper sets the limits before `exec`, so no window exists in
//!   which the tool runs unlimited, and builds the namespaces, Landlock and seccomp for strict and
//!   restricted.
//! - **Fail closed.** A level the host cannot give is [`SandboxError::Unsupported`] with what is
//!   missing; a helper that fails to build the sandbox is [`SandboxError::Setup`] with the step.
//!   Nothing is ever run with less isolation than asked for. `none` is refused too: it means
//!   "in-process", which a command can never be.
//! - **The helper does the cleanup.** Timeout and cancellation send SIGTERM to the helper, which
//!   passes it to the tool's whole tree, then SIGKILLs whatever remains after a grace period; a
//!   tool that exits has its leftovers killed the same way. At strict and above that tree is a pid
//!   namespace, which nothing escapes. The runtime SIGKILLs the helper only as a backstop. An
//!   interactive process is stopped the same way by [`Interactive::stop`] or by dropping its
//!   handle; and because the helper of an interactive run takes the runtime's end of the
//!   control socket closing as a stop request, it is stopped too if the runtime dies.
//! - **Output is drained to the end.** Bytes beyond a stream's cap are read and dropped, never left
//!   in the pipe, so a chatty child cannot block on a full pipe and run into its timeout.
// tw-sandbox is the one crate that spawns processes.
#![allow(clippy::disallowed_methods)]

mod cgroup;
mod host;
mod interactive;
mod launch;
mod pool;
mod spec;

pub use host::{DEFAULT_POOL_IDLE, DEFAULT_POOL_SIZE, DEFAULT_SANDBOX_ID, HELPER_ENV, HELPER_NAME};
pub use interactive::{Interactive, InteractiveExit};

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tw_core::IsolationLevel;

use crate::error::{Result, SandboxError};
use crate::helper::wire::{self, Finished, Level, Message};
use launch::Launched;
pub(crate) use spec::find_program;
use spec::{check_cwd, child_env};

pub use cgroup::{own_v1_cgroup, own_v2_cgroup};
pub use host::{Doctor, LevelSupport, Protection, SandboxConfig, SelfTestCase};

/// The search path every child gets unless its spec sets `PATH` itself.
pub(crate) const BASE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long the runtime waits for the helper to finish stopping a tool (it gives the tool 300 ms
/// between SIGTERM and SIGKILL) before it kills the helper itself.
const HELPER_GRACE: Duration = Duration::from_millis(2000);
/// How long readers may keep going after the child exited, for pipes held open elsewhere.
const DEFAULT_DRAIN: Duration = Duration::from_millis(250);
/// Size of each stream's read buffer: large enough to empty a full pipe in one read.
const READ_CHUNK: usize = 64 * 1024;
/// The most standard input a run may be given.
pub const MAX_STDIN_BYTES: usize = 16 * 1024 * 1024;

/// Resource limits the helper sets on the tool before `exec`. `None` leaves the inherited
/// limit. A limit is never raised above what Toolwarden itself runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ResourceLimits {
    /// Address-space limit (`RLIMIT_AS`), in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU time limit (`RLIMIT_CPU`), in seconds.
    pub cpu_seconds: Option<u64>,
    /// Largest file the child may write (`RLIMIT_FSIZE`), in bytes.
    pub max_file_bytes: Option<u64>,
    /// Most open file descriptors (`RLIMIT_NOFILE`).
    pub max_open_files: Option<u64>,
    /// Most processes alive at once (strict and above, through the pid namespace's `pid_max`).
    /// The kernel skips the first 300 pids once they wrap, so a run may briefly hold up to 300
    /// more than this; it never gets fewer.
    pub max_processes: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory_bytes: Some(256 * 1024 * 1024),
            cpu_seconds: Some(300),
            max_file_bytes: Some(1024 * 1024 * 1024),
            max_open_files: Some(256),
            max_processes: Some(256),
        }
    }
}

impl ResourceLimits {
    /// The tighter defaults of the restricted level: 128 MiB, 60 s of CPU, 64 MiB files, 64 open
    /// files.
    pub fn restricted() -> Self {
        Self {
            memory_bytes: Some(128 * 1024 * 1024),
            cpu_seconds: Some(60),
            max_file_bytes: Some(64 * 1024 * 1024),
            max_open_files: Some(64),
            max_processes: Some(64),
        }
    }

    /// Each limit of `self`, tightened to `other`'s where `other` sets a lower one.
    pub fn min(self, other: Self) -> Self {
        let m = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            memory_bytes: m(self.memory_bytes, other.memory_bytes),
            cpu_seconds: m(self.cpu_seconds, other.cpu_seconds),
            max_file_bytes: m(self.max_file_bytes, other.max_file_bytes),
            max_open_files: m(self.max_open_files, other.max_open_files),
            max_processes: m(self.max_processes, other.max_processes),
        }
    }
}

/// What a strict or restricted tool sees of the filesystem, on top of the system allowlist
/// (programs, libraries, a few files under `/etc`), a private `/tmp` and `/dev/shm`, and a
/// `/proc` that shows only its own processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsView {
    /// Paths the tool may read and execute (the workspace at restricted).
    pub read_only: Vec<PathBuf>,
    /// Paths the tool may read, change and execute (the workspace at strict).
    pub read_write: Vec<PathBuf>,
    /// Paths inside those that the tool must not see at all (policy's forbidden paths); an
    /// empty read-only file or directory is mounted over each.
    pub masked: Vec<PathBuf>,
}

/// What to run and under which constraints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program: a name looked up in the child's `PATH`, or a path (relative ones are taken
    /// relative to `cwd`).
    pub program: String,
    /// Arguments, each passed as one argv element; no shell is involved.
    pub args: Vec<String>,
    /// Environment on top of the minimal base (`PATH`, `LANG`, `HOME`); it may override the base.
    pub env: BTreeMap<String, String>,
    /// Working directory; must be an absolute path to an existing directory. Also the child's
    /// `HOME`.
    pub cwd: PathBuf,
    /// The isolation the tool's definition asks for.
    pub isolation: IsolationLevel,
    /// Wall-clock limit, after which the process tree is stopped.
    pub timeout: Duration,
    /// How much of each of stdout and stderr is kept.
    pub max_output_bytes: usize,
    /// Resource limits for the child.
    pub limits: ResourceLimits,
    /// The filesystem view at strict and restricted (ignored at standard).
    pub fs: FsView,
    /// Whether a strict or restricted tool keeps the host's network.
    pub network: bool,
    /// Network through a proxy instead (strict and restricted): the tool gets a
    /// network namespace of its own whose only way out is a listener on port 3128 of its
    /// loopback (`127.0.0.1:3128`, and every other 127.0.0.0/8 address),
    /// handed to this port's owner before the tool starts, and `HTTP_PROXY`/`HTTPS_PROXY`
    /// pointing at it. Whoever serves the listener decides where the tool can go.
    pub egress: Option<EgressPort>,
    /// Bytes for the child's standard input (otherwise `/dev/null`).
    pub stdin: Option<Vec<u8>>,
}

/// Who serves a tool's egress port: called once per run with the listener inside the tool's
/// network namespace (non-blocking is up to the callee). The run's namespace lives as long as
/// the listener does, so the callee drops it when the run is over.
#[derive(Clone)]
pub struct EgressPort(pub std::sync::Arc<dyn Fn(std::net::TcpListener) + Send + Sync>);

impl std::fmt::Debug for EgressPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EgressPort")
    }
}

impl PartialEq for EgressPort {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EgressPort {}

/// Where a tool with an egress port finds its proxy.
pub const EGRESS_PROXY_URL: &str = "http://127.0.0.1:3128";
/// The port of the egress proxy, at every loopback address of the tool's network namespace.
pub const EGRESS_PROXY_PORT: u16 = crate::helper::wire::PROXY_PORT;

impl ProcessSpec {
    /// A spec with the default limits, no stdin and no network, whose filesystem view is `cwd`
    /// read-write.
    pub fn new(program: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            program: program.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: cwd.clone(),
            isolation: IsolationLevel::Standard,
            timeout: Duration::from_secs(60),
            max_output_bytes: 32 * 1024,
            limits: ResourceLimits::default(),
            fs: FsView {
                read_write: vec![cwd],
                ..FsView::default()
            },
            network: false,
            egress: None,
            stdin: None,
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    /// The exit status, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

/// What a run cost, measured by the helper over the tool's whole process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunMetrics {
    /// Identifies this run's sandbox in logs and the audit record.
    pub sandbox_id: String,
    /// Time from spawning the helper until the tool ended.
    pub wall_time: Duration,
    /// User plus system CPU time of every process of the run, when the helper could report it.
    pub cpu_time: Option<Duration>,
    /// The most memory the run held at once, bytes: the whole tree's (page cache it caused
    /// included) where runs get cgroups, else the largest resident set of any one process.
    pub peak_memory_bytes: Option<u64>,
    /// Processes the tool left running, which were killed when it ended.
    pub killed_leftovers: u32,
    /// Processes the kernel killed because the run's tree reached its memory cap (only where
    /// runs get cgroups; a single process meets its rlimit as a failed allocation instead).
    pub oom_kills: u64,
    /// Whether the run's sandbox was built ahead of it, by the pool of helpers (strict and
    /// restricted), rather than on the spot.
    pub prepared_ahead: bool,
}

/// Everything known about a finished (or stopped) child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    /// How it ended.
    pub exit: ExitInfo,
    /// Standard output, at most `max_output_bytes`.
    pub stdout: Vec<u8>,
    /// Standard error, at most `max_output_bytes`.
    pub stderr: Vec<u8>,
    /// Whether standard output was cut at the cap.
    pub stdout_truncated: bool,
    /// Whether standard error was cut at the cap.
    pub stderr_truncated: bool,
    /// Time from spawn until the child exited.
    pub wall_time: Duration,
    /// The helper's process id; 0 if nothing was started.
    pub pid: u32,
    /// The isolation that was actually applied.
    pub isolation: IsolationLevel,
    /// CPU, memory and identity of the run.
    pub metrics: RunMetrics,
}

/// A piece of output, forwarded while the child runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputChunk {
    /// Bytes from standard output.
    Stdout(Vec<u8>),
    /// Bytes from standard error.
    Stderr(Vec<u8>),
}

/// How a run ended. Timed-out and cancelled runs keep the output read until they were stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The child exited on its own (with any status or signal).
    Exited(ProcessOutput),
    /// The time limit passed and the child's process tree was stopped.
    TimedOut(ProcessOutput),
    /// The cancellation token fired and the child's process tree was stopped.
    Cancelled(ProcessOutput),
}

impl RunOutcome {
    /// The output, whichever way the run ended.
    pub fn output(&self) -> &ProcessOutput {
        match self {
            RunOutcome::Exited(o) | RunOutcome::TimedOut(o) | RunOutcome::Cancelled(o) => o,
        }
    }
}

/// The process runner. Cheap to clone; what it learns about the host is shared by its clones.
#[derive(Debug, Clone)]
pub struct Sandbox {
    host: Arc<host::Host>,
    drain: Duration,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    TimedOut,
    Cancelled,
}

/// Numbers the runs of this process, for sandbox ids.
static RUNS: AtomicU64 = AtomicU64::new(0);

impl Sandbox {
    /// A runner with the default configuration (see [`SandboxConfig`]).
    pub fn new() -> Self {
        Self::with_config(SandboxConfig::default())
    }

    /// A runner with an explicit configuration.
    pub fn with_config(config: SandboxConfig) -> Self {
        Self {
            host: Arc::new(host::Host::new(config)),
            drain: DEFAULT_DRAIN,
        }
    }

    /// How many helpers are built and waiting for a run, and how many are
    /// being built (see [`SandboxConfig::pool_size`]).
    pub fn helpers_ahead(&self) -> (usize, usize) {
        self.host.pool().counts()
    }

    /// The configuration in effect, with the helper found (or not).
    pub fn config(&self) -> &SandboxConfig {
        self.host.config()
    }

    /// Whether this host can run a process at `level`. The first check of strict or restricted
    /// builds a sandbox and runs the escape self-test in it (a few milliseconds, once per
    /// [`Sandbox`]); if any escape succeeds, those levels are refused with the reason. A level
    /// that cannot be given exactly is an error: a tool never runs with less isolation than it
    /// asks for.
    pub async fn check(&self, level: IsolationLevel) -> Result<()> {
        self.host.check(self, level).await
    }

    /// Everything this host supports, each level's status, and the self-test's cases.
    pub async fn doctor(&self) -> Doctor {
        self.host.doctor(self).await
    }

    /// Runs `spec` to completion, until its timeout, or until `cancel` fires. Output chunks are
    /// offered to `progress` as they arrive (dropped if the listener is behind, never waited
    /// for), up to the same cap as the returned output.
    pub async fn run(
        &self,
        spec: ProcessSpec,
        cancel: CancellationToken,
        progress: Option<mpsc::Sender<OutputChunk>>,
    ) -> Result<RunOutcome> {
        self.check(spec.isolation).await?;
        self.run_checked(spec, cancel, progress, true).await
    }

    /// [`Sandbox::run`] without the level check, for the self-test itself (which `use_pool`
    /// keeps off the helpers made ahead: its one run would only take a place among the shapes
    /// the pool keeps).
    async fn run_checked(
        &self,
        spec: ProcessSpec,
        cancel: CancellationToken,
        progress: Option<mpsc::Sender<OutputChunk>>,
        use_pool: bool,
    ) -> Result<RunOutcome> {
        let prepared = self.prepare(&spec, Mode::Batch).await?;
        let level = prepared.level;
        let sandbox_id = prepared.sandbox_id.clone();
        let empty_output = |pid: u32, wall_time: Duration| ProcessOutput {
            exit: ExitInfo {
                code: None,
                signal: None,
            },
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            wall_time,
            pid,
            isolation: spec.isolation,
            metrics: RunMetrics {
                sandbox_id: sandbox_id.clone(),
                wall_time,
                cpu_time: None,
                peak_memory_bytes: None,
                killed_leftovers: 0,
                oom_kills: 0,
                prepared_ahead: false,
            },
        };
        if cancel.is_cancelled() {
            return Ok(RunOutcome::Cancelled(empty_output(0, Duration::ZERO)));
        }
        // The pool makes the next helper once this run is over (or failed), not alongside it:
        // on two cores building a sandbox beside a run slows the run.
        let _refill = use_pool.then(|| pool::RefillOnDrop(&self.host));
        let pooled = if use_pool {
            self.launch_pooled(&spec, &prepared).await?
        } else {
            None
        };
        let prepared_ahead = pooled.is_some();
        let launched = match pooled {
            Some(launched) => launched,
            None => self.launch(&spec, prepared, None).await?,
        };
        let Launched {
            mut child,
            mut ctl,
            mut guard,
            cgroup,
            pid,
            start,
        } = launched;
        // A helper that died early cannot read; its report says why.
        if let Some(stdin) = &spec.stdin {
            let _ = ctl.write_all(stdin).await;
        }
        let _ = ctl.shutdown().await;

        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let mut report = Some(ctl);
        let mut out = Capture::new(spec.max_output_bytes);
        let mut err = Capture::new(spec.max_output_bytes);
        let mut messages = Vec::new();
        let mut obuf = vec![0u8; READ_CHUNK];
        let mut ebuf = vec![0u8; READ_CHUNK];
        let mut rbuf = vec![0u8; 4096];
        let mut progress = progress;

        let deadline = start.checked_add(spec.timeout);
        let mut stop: Option<Stop> = None;
        let mut kill_at: Option<Instant> = None;
        let mut status: Option<ExitStatus> = None;
        let mut wall_time = Duration::ZERO;
        let mut drain_until: Option<Instant> = None;

        loop {
            if stdout.is_none() && stderr.is_none() && report.is_none() {
                if status.is_some() {
                    break;
                }
                // The helper's report says the tool's whole tree ended and was reaped, and its
                // streams were read to their end then: the run is over. The helper's own exit,
                // after a strict one's namespaces are torn down, is not waited for; tokio reaps
                // it.
                if finished_in(&messages) {
                    wall_time = start.elapsed();
                    guard.armed = false;
                    break;
                }
            }
            tokio::select! {
                r = read_some(&mut stdout, &mut obuf), if stdout.is_some() => match r {
                    Ok(n) if n > 0 => {
                        let kept = out.push(&obuf[..n]);
                        forward(&mut progress, kept, OutputChunk::Stdout);
                    }
                    Ok(_) => stdout = None,
                    Err(e) => {
                        tracing::debug!(pid, error = %e, "reading stdout failed");
                        stdout = None;
                    }
                },
                r = read_some(&mut stderr, &mut ebuf), if stderr.is_some() => match r {
                    Ok(n) if n > 0 => {
                        let kept = err.push(&ebuf[..n]);
                        forward(&mut progress, kept, OutputChunk::Stderr);
                    }
                    Ok(_) => stderr = None,
                    Err(e) => {
                        tracing::debug!(pid, error = %e, "reading stderr failed");
                        stderr = None;
                    }
                },
                r = read_report(&mut report, &mut rbuf), if report.is_some() => {
                    let (r, fds) = match r {
                        Ok((n, fds)) => (Ok(n), fds),
                        Err(e) => (Err(e), Vec::new()),
                    };
                    // Only the egress port's listener is ever attached to a message.
                    for fd in fds {
                        if let Some(port) = &spec.egress {
                            (port.0)(std::net::TcpListener::from(fd));
                        }
                    }
                    if !take_report(r, &rbuf, &mut messages) {
                        report = None;
                    } else if finished_in(&messages) {
                        // The tool's whole tree ended and was reaped: what it wrote is in the
                        // pipes already, and only the helper and its init, which write nothing
                        // there, still hold them. Read it now instead of waiting for their exit.
                        drain_now(&mut stdout, &mut obuf, &mut out, &mut progress, OutputChunk::Stdout);
                        drain_now(&mut stderr, &mut ebuf, &mut err, &mut progress, OutputChunk::Stderr);
                        report = None;
                    }
                },
                w = child.wait(), if status.is_none() => {
                    let st = w.map_err(|source| SandboxError::Child { pid, source })?;
                    wall_time = start.elapsed();
                    helper_exited(level, pid, st);
                    status = Some(st);
                    guard.armed = false;
                    drain_until = Some(Instant::now() + self.drain);
                },
                _ = sleep_until(deadline), if stop.is_none() && status.is_none() => {
                    tracing::debug!(pid, sandbox_id, "time limit reached, stopping the tool");
                    stop = Some(Stop::TimedOut);
                    guard.signal(Signal::TERM);
                    kill_at = Some(Instant::now() + HELPER_GRACE);
                },
                _ = cancel.cancelled(), if stop.is_none() && status.is_none() => {
                    tracing::debug!(pid, sandbox_id, "cancelled, stopping the tool");
                    stop = Some(Stop::Cancelled);
                    guard.signal(Signal::TERM);
                    kill_at = Some(Instant::now() + HELPER_GRACE);
                },
                _ = sleep_until(kill_at), if kill_at.is_some() && status.is_none() => {
                    tracing::warn!(pid, sandbox_id, "the sandbox helper did not stop in time; killing it");
                    guard.signal(Signal::KILL);
                    kill_at = None;
                },
                _ = sleep_until(drain_until), if drain_until.is_some() => {
                    tracing::debug!(pid, "output pipes still open after the helper exited; abandoning them");
                    break;
                },
            }
        }

        let mut finished: Option<Finished> = None;
        for m in wire::parse_messages(&messages) {
            if let Some(e) = failure(&m, &spec, level) {
                return Err(e);
            }
            if let Message::Finished(f) = m {
                finished = Some(f);
            }
        }
        let mut output = empty_output(pid, wall_time);
        output.metrics.prepared_ahead = prepared_ahead;
        output.exit = exit_info(finished, status);
        output.stdout = out.data;
        output.stderr = err.data;
        output.stdout_truncated = out.truncated;
        output.stderr_truncated = err.truncated;
        self.measure(&mut output.metrics, finished, cgroup);
        Ok(match stop {
            None => RunOutcome::Exited(output),
            Some(Stop::TimedOut) => RunOutcome::TimedOut(output),
            Some(Stop::Cancelled) => RunOutcome::Cancelled(output),
        })
    }

    /// Everything about a run that is checked and worked out before anything starts: the
    /// level, the environment, the working directory, the program, and the helper's request.
    async fn prepare(&self, spec: &ProcessSpec, mode: Mode) -> Result<Prepared<'_>> {
        let level = match spec.isolation {
            IsolationLevel::Standard => Level::Standard,
            IsolationLevel::Strict => Level::Strict,
            IsolationLevel::Restricted => Level::Restricted,
            IsolationLevel::None => {
                return Err(SandboxError::Unsupported {
                    level: IsolationLevel::None,
                    reason: host::NONE_REASON.to_owned(),
                });
            }
        };
        if spec.egress.is_some() && level == Level::Standard {
            return Err(SandboxError::InvalidSpec(
                "an egress port needs strict or restricted isolation (a network namespace of \
                 its own)"
                    .to_owned(),
            ));
        }
        let helper = self.host.helper()?;
        let env = child_env(spec)?;
        check_cwd(&spec.cwd)?;
        if spec
            .stdin
            .as_ref()
            .is_some_and(|s| s.len() > MAX_STDIN_BYTES)
        {
            return Err(SandboxError::InvalidSpec(format!(
                "standard input is larger than {MAX_STDIN_BYTES} bytes"
            )));
        }
        let path_var = env.get("PATH").map_or(BASE_PATH, String::as_str);
        let program = find_program(&spec.program, path_var, &spec.cwd).map_err(|source| {
            SandboxError::Spawn {
                program: spec.program.clone(),
                source,
            }
        })?;
        let shared = match level {
            Level::Standard => None,
            _ => self.host.shared_namespaces().await,
        };
        let request = self
            .host
            .request(spec, level, program.clone(), shared.is_some(), mode);
        let sandbox_id = format!(
            "{}-{}-{}",
            spec.isolation,
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(Prepared {
            level,
            helper,
            env,
            program,
            shared,
            request,
            sandbox_id,
        })
    }
}

/// Which kind of run a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// [`Sandbox::run`]: the tool's input is `spec.stdin`'s bytes (or `/dev/null`) and its
    /// output is captured.
    Batch,
    /// [`Sandbox::spawn_interactive`]: the tool's input is a pipe the caller writes to, and the
    /// helper stops the tool when the runtime's end of the socket closes.
    Interactive,
}

/// A run worked out by [`Sandbox::prepare`], ready for [`Sandbox::launch`].
struct Prepared<'a> {
    level: Level,
    helper: &'a Path,
    env: BTreeMap<String, String>,
    program: PathBuf,
    shared: Option<&'a host::SharedNamespaces>,
    request: wire::Request,
    sandbox_id: String,
}

impl Sandbox {
    /// Fills in what the helper and the run's cgroups measured, and keeps the cgroups for the
    /// next run.
    fn measure(
        &self,
        metrics: &mut RunMetrics,
        finished: Option<Finished>,
        cgroup: Option<cgroup::RunCgroup>,
    ) {
        if let Some(f) = finished {
            metrics.cpu_time = Some(Duration::from_micros(f.cpu_time_us));
            metrics.peak_memory_bytes = Some(f.peak_memory_bytes);
            metrics.killed_leftovers = f.killed_leftovers;
        }
        if let Some(cg) = cgroup {
            if let Some(peak) = cg.peak_memory() {
                metrics.peak_memory_bytes = Some(peak);
            }
            metrics.oom_kills = cg.oom_kills();
            if let Some(c) = self.host.cgroups() {
                c.give_back(cg);
            }
        }
    }
}

/// The error a helper's message reports, if it is one: the sandbox could not be built, or the
/// program could not be executed in it.
fn failure(m: &Message, spec: &ProcessSpec, level: Level) -> Option<SandboxError> {
    match m {
        Message::SetupFailed { step, error } => Some(SandboxError::Setup {
            level: spec.isolation,
            step: step.clone(),
            error: error.clone(),
        }),
        Message::ExecFailed { errno, error } => {
            let source = io::Error::from_raw_os_error(*errno);
            let hint = if *errno == libc::EACCES && level != Level::Standard {
                " (at this isolation level a program must lie inside the sandbox's read allowlist)"
            } else {
                ""
            };
            Some(SandboxError::Spawn {
                program: spec.program.clone(),
                source: io::Error::new(source.kind(), format!("{error}{hint}")),
            })
        }
        Message::Started | Message::Ready | Message::Listening { .. } | Message::Finished(_) => {
            None
        }
    }
}

/// How the tool ended: as the helper reported, else as the helper itself ended.
fn exit_info(finished: Option<Finished>, status: Option<ExitStatus>) -> ExitInfo {
    match (finished, status) {
        (Some(f), _) => ExitInfo {
            code: f.code,
            signal: f.signal,
        },
        (None, Some(st)) => ExitInfo {
            code: st.code(),
            signal: st.signal(),
        },
        (None, None) => ExitInfo {
            code: None,
            signal: None,
        },
    }
}

/// Whether the helper's report so far says the tool's tree ended.
fn finished_in(messages: &[u8]) -> bool {
    wire::parse_messages(messages)
        .iter()
        .any(|m| matches!(m, Message::Finished(_)))
}

/// Reads what `stream` holds right now, to the cap like the run's loop, and closes it.
fn drain_now<R: std::os::fd::AsFd>(
    stream: &mut Option<R>,
    buf: &mut [u8],
    capture: &mut Capture,
    progress: &mut Option<mpsc::Sender<OutputChunk>>,
    wrap: fn(Vec<u8>) -> OutputChunk,
) {
    let Some(s) = stream.take() else {
        return;
    };
    // The descriptor is non-blocking (tokio's): a read of an empty pipe says so at once.
    while let Ok(n) = rustix::io::read(&s, &mut *buf) {
        if n == 0 {
            break;
        }
        let kept = capture.push(&buf[..n]);
        forward(progress, kept, wrap);
    }
}

/// Keeps what one read of the control socket brought; false once the report is over.
fn take_report(read: io::Result<usize>, buf: &[u8], messages: &mut Vec<u8>) -> bool {
    match read {
        // The helper's report is a few hundred bytes; more is not the helper.
        Ok(n) if n > 0 && messages.len() < 64 * 1024 => {
            messages.extend_from_slice(&buf[..n]);
            true
        }
        _ => false,
    }
}

/// What follows the helper's exit: at standard, a helper killed from outside (SIGKILL, the OOM
/// killer) before it could stop the tool leaves what it started in its session.
fn helper_exited(level: Level, pid: u32, status: ExitStatus) {
    if level == Level::Standard && status.signal().is_some() {
        kill_session(pid);
    }
}

/// SIGKILLs every process in session `sid`, found through `/proc`: what a standard helper
/// started, once the helper itself is gone. A session id is a pid that stays taken while any
/// member lives, so nothing outside the session is reached. (Only a process that started a
/// session of its own, which the helper would have caught as its subreaper, is missed.)
fn kill_session(sid: u32) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // Fields after the command name: state, ppid, pgrp, session.
        let session = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(") ")?;
                rest.split(' ').nth(3)?.parse::<u32>().ok()
            });
        if session == Some(sid)
            && let Some(pid) = Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
}

/// One stream's kept output.
struct Capture {
    data: Vec<u8>,
    cap: usize,
    truncated: bool,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Self {
            data: Vec::new(),
            cap,
            truncated: false,
        }
    }

    /// Keeps what fits under the cap and returns it.
    fn push<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let room = self.cap.saturating_sub(self.data.len());
        let keep = room.min(chunk.len());
        if keep < chunk.len() {
            self.truncated = true;
        }
        self.data.extend_from_slice(&chunk[..keep]);
        &chunk[..keep]
    }
}

fn forward(
    progress: &mut Option<mpsc::Sender<OutputChunk>>,
    kept: &[u8],
    wrap: fn(Vec<u8>) -> OutputChunk,
) {
    if kept.is_empty() {
        return;
    }
    if let Some(tx) = progress {
        match tx.try_send(wrap(kept.to_vec())) {
            Ok(()) => {}
            // A slow listener loses chunks; the child is never held up for it.
            Err(mpsc::error::TrySendError::Full(_)) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => *progress = None,
        }
    }
}

async fn read_some<R: AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut [u8]) -> io::Result<usize> {
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Reads the helper's report, with any descriptors attached to it.
async fn read_report(
    r: &mut Option<tokio::net::UnixStream>,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let Some(sock) = r else {
        return std::future::pending().await;
    };
    loop {
        sock.readable().await?;
        match sock.try_io(tokio::io::Interest::READABLE, || {
            crate::helper::recv_with_fds(sock.as_raw_fd(), buf)
        }) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod egress_tests;
#[cfg(test)]
mod interactive_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod tests;
