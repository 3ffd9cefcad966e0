//! Runs a custom tool's command as a child process at the isolation level its definition asks
//! for, with a time limit, cancellation, per-stream output caps and resource limits.
//!
//! Design decisions:
//! - **Fail closed.** [`Sandbox::check`] and [`Sandbox::run`] refuse a level this build cannot
//!   give (`strict`, `restricted`) instead of running the command with less. `none` is refused
//!   too: it means "in-process", which a command can never be.
//! - **No `pre_exec`.** A `pre_exec` closure makes std fall back from `posix_spawn` to `fork`,
//!   which copies the page tables of a large parent. The process group is a spawn attribute, and
//!   resource limits are applied with `prlimit` on the child right after spawn; if that fails the
//!   child is killed and the run is an error. For the same reason the program is looked up in the
//!   child's `PATH` here: std falls back to `fork` when it has to search a changed `PATH` itself.
//! - **The process group is the unit of cleanup.** Timeout and cancellation send SIGTERM to the
//!   group, then SIGKILL after a grace period; a normal exit is followed by SIGKILL to the group
//!   too, so background grandchildren cannot outlive the call. A guard kills the group if the
//!   future running the child is dropped. Pipes held open by processes that left the group are
//!   given a short deadline after the child exits, then abandoned.
//! - **Output is drained to the end.** Bytes beyond a stream's cap are read and dropped, never left
//!   in the pipe, so a chatty child cannot block on a full pipe and run into its timeout.
//!
//! Known gaps (the planned helper binary, which sets everything up before `exec`, closes both):
//! - The resource limits land shortly after `exec`, not before it: `posix_spawn` returns once the
//!   child has exec'd, and only then can `prlimit` reach it. Measured with a debug build, a child
//!   running `sh -c 'ulimit -n'` saw the old limit in 36 of 300 runs on an idle machine and 140
//!   of 300 with the CPUs busy. A child that forks inside that window leaves a descendant with
//!   Toolwarden's own limits. So at `standard` the limits guard against runaway tools, not
//!   hostile ones (`standard` is the level for trusted tools). Closing the window needs the
//!   limits set before `exec`: a `/bin/sh -c 'ulimit ...; exec "$0" "$@"'` trampoline would do it
//!   at about 0.7 ms per spawn; the planned helper would do it as part of its own setup.
//! - The group is killed after the leader has been reaped, so if every member of the group had
//!   already exited and the kernel handed the same number to a new process group within those
//!   microseconds, that group would get the SIGKILL. Linux does not reuse a pid while any process
//!   still has it as its group id, so this needs the group to be empty already.
// tw-sandbox is the one crate that spawns processes.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Resource, Rlimit, Signal};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tw_core::IsolationLevel;

use crate::error::{Result, SandboxError};

/// The search path every child gets unless its spec sets `PATH` itself.
pub(crate) const BASE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long a stopped child may take to exit after SIGTERM before its group is killed.
const DEFAULT_GRACE: Duration = Duration::from_millis(300);
/// How long readers may keep going after the child exited, for pipes held open elsewhere.
const DEFAULT_DRAIN: Duration = Duration::from_millis(250);
/// Size of each stream's read buffer: large enough to empty a full pipe in one read.
const READ_CHUNK: usize = 64 * 1024;

/// Resource limits applied to the child with `prlimit`. `None` leaves the inherited limit.
/// A limit is never raised above what Toolwarden itself runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceLimits {
    /// Address-space limit (`RLIMIT_AS`), in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU time limit (`RLIMIT_CPU`), in seconds.
    pub cpu_seconds: Option<u64>,
    /// Largest file the child may write (`RLIMIT_FSIZE`), in bytes.
    pub max_file_bytes: Option<u64>,
    /// Most open file descriptors (`RLIMIT_NOFILE`).
    pub max_open_files: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory_bytes: Some(256 * 1024 * 1024),
            cpu_seconds: Some(300),
            max_file_bytes: Some(1024 * 1024 * 1024),
            max_open_files: Some(256),
        }
    }
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
    /// Wall-clock limit, after which the process group is stopped.
    pub timeout: Duration,
    /// How much of each of stdout and stderr is kept.
    pub max_output_bytes: usize,
    /// Resource limits for the child.
    pub limits: ResourceLimits,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    /// The exit status, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
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
    /// The child's process id (also its process group id); 0 if it was never started.
    pub pid: u32,
    /// The isolation that was actually applied.
    pub isolation: IsolationLevel,
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
    /// The time limit passed and the child's process group was stopped.
    TimedOut(ProcessOutput),
    /// The cancellation token fired and the child's process group was stopped.
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

/// The process runner. Cheap to clone; holds no per-run state.
#[derive(Debug, Clone)]
pub struct Sandbox {
    grace: Duration,
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

impl Sandbox {
    /// A runner with the default grace period (300 ms) between SIGTERM and SIGKILL.
    pub fn new() -> Self {
        Self {
            grace: DEFAULT_GRACE,
            drain: DEFAULT_DRAIN,
        }
    }

    /// Whether this host and build can run a process at `level`. A level that cannot be given
    /// exactly is an error: a tool is never run with less isolation than it asks for.
    pub fn check(&self, level: IsolationLevel) -> Result<()> {
        let reason = match level {
            IsolationLevel::Standard => return Ok(()),
            IsolationLevel::None => {
                "it means running inside the Toolwarden process, which only built-in tools can do; \
                 a command always runs as a sandboxed child process. Declare the tool with \
                 isolation standard"
            }
            IsolationLevel::Strict => {
                "this build's sandbox backend provides process groups, a scrubbed environment and \
                 rlimits (standard); strict also needs no network, a read-only system, a private \
                 /tmp, its own pid namespace and seccomp, which come with the \
                 namespace/Landlock/seccomp helper that this build does not have. Lower the \
                 tool's isolation to standard only if you trust it"
            }
            IsolationLevel::Restricted => {
                "this build's sandbox backend provides process groups, a scrubbed environment and \
                 rlimits (standard); restricted also needs everything strict needs (namespaces, a \
                 read-only system, seccomp) plus a read-only workspace, which come with the \
                 namespace/Landlock/seccomp helper that this build does not have. Lower the \
                 tool's isolation to standard only if you trust it"
            }
        };
        Err(SandboxError::Unsupported {
            level,
            reason: reason.to_owned(),
        })
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
        self.check(spec.isolation)?;
        let env = child_env(&spec)?;
        check_cwd(&spec.cwd)?;
        let path_var = env.get("PATH").map_or(BASE_PATH, String::as_str);
        let program = find_program(&spec.program, path_var, &spec.cwd).map_err(|source| {
            SandboxError::Spawn {
                program: spec.program.clone(),
                source,
            }
        })?;

        if cancel.is_cancelled() {
            return Ok(RunOutcome::Cancelled(ProcessOutput {
                exit: ExitInfo {
                    code: None,
                    signal: None,
                },
                stdout: Vec::new(),
                stderr: Vec::new(),
                stdout_truncated: false,
                stderr_truncated: false,
                wall_time: Duration::ZERO,
                pid: 0,
                isolation: spec.isolation,
            }));
        }

        let mut cmd = Command::new(&program);
        cmd.arg0(&spec.program)
            .args(&spec.args)
            .env_clear()
            .envs(&env)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        let start = Instant::now();
        let mut child = cmd.spawn().map_err(|source| SandboxError::Spawn {
            program: spec.program.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or(0);
        let Some(pgid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return Err(SandboxError::Child {
                pid,
                source: io::Error::other("the child has no usable process id"),
            });
        };
        // Declared after `child`, so it drops first: the group is killed while its leader is
        // still unreaped and its id cannot have been reused.
        let mut group = GroupGuard { pgid, armed: true };
        tracing::debug!(pid, program = %program.display(), "spawned child");

        if let Err((resource, source)) = apply_limits(pgid, &spec.limits) {
            group.kill(Signal::KILL);
            let _ = child.wait().await;
            group.armed = false;
            return Err(SandboxError::Limit {
                resource,
                pid,
                source,
            });
        }

        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let mut out = Capture::new(spec.max_output_bytes);
        let mut err = Capture::new(spec.max_output_bytes);
        let mut obuf = vec![0u8; READ_CHUNK];
        let mut ebuf = vec![0u8; READ_CHUNK];
        let mut progress = progress;

        let deadline = start.checked_add(spec.timeout);
        let mut stop: Option<Stop> = None;
        let mut kill_at: Option<Instant> = None;
        let mut status: Option<ExitStatus> = None;
        let mut wall_time = Duration::ZERO;
        let mut drain_until: Option<Instant> = None;

        loop {
            if status.is_some() && stdout.is_none() && stderr.is_none() {
                break;
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
                w = child.wait(), if status.is_none() => {
                    let st = w.map_err(|source| SandboxError::Child { pid, source })?;
                    wall_time = start.elapsed();
                    status = Some(st);
                    // Whatever the leader left behind in its group must not outlive the call.
                    group.kill(Signal::KILL);
                    group.armed = false;
                    drain_until = Some(Instant::now() + self.drain);
                },
                _ = sleep_until(deadline), if stop.is_none() && status.is_none() => {
                    tracing::debug!(pid, "time limit reached, stopping process group");
                    stop = Some(Stop::TimedOut);
                    group.kill(Signal::TERM);
                    kill_at = Some(Instant::now() + self.grace);
                },
                _ = cancel.cancelled(), if stop.is_none() && status.is_none() => {
                    tracing::debug!(pid, "cancelled, stopping process group");
                    stop = Some(Stop::Cancelled);
                    group.kill(Signal::TERM);
                    kill_at = Some(Instant::now() + self.grace);
                },
                _ = sleep_until(kill_at), if kill_at.is_some() && status.is_none() => {
                    group.kill(Signal::KILL);
                    kill_at = None;
                },
                _ = sleep_until(drain_until), if drain_until.is_some() => {
                    tracing::debug!(pid, "output pipes still open after the child exited; abandoning them");
                    break;
                },
            }
        }

        let exit = match status {
            Some(st) => ExitInfo {
                code: st.code(),
                signal: st.signal(),
            },
            None => ExitInfo {
                code: None,
                signal: None,
            },
        };
        let output = ProcessOutput {
            exit,
            stdout: out.data,
            stderr: err.data,
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            wall_time,
            pid,
            isolation: IsolationLevel::Standard,
        };
        Ok(match stop {
            None => RunOutcome::Exited(output),
            Some(Stop::TimedOut) => RunOutcome::TimedOut(output),
            Some(Stop::Cancelled) => RunOutcome::Cancelled(output),
        })
    }
}

/// Kills the child's process group when dropped while armed, so a run whose future is dropped
/// mid-way leaves nothing behind.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl GroupGuard {
    fn kill(&self, sig: Signal) {
        // ESRCH only means the group is already empty.
        if let Err(e) = rustix::process::kill_process_group(self.pgid, sig)
            && e != rustix::io::Errno::SRCH
        {
            tracing::warn!(pgid = self.pgid.as_raw_pid(), error = %e, "could not signal process group");
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.kill(Signal::KILL);
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

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The child's whole environment: the minimal base, then the spec's variables.
fn child_env(spec: &ProcessSpec) -> Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    env.insert("PATH".to_owned(), BASE_PATH.to_owned());
    env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
    env.insert("HOME".to_owned(), spec.cwd.to_string_lossy().into_owned());
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains(['=', '\0']) {
            return Err(SandboxError::InvalidSpec(format!(
                "environment variable name {k:?} must be non-empty and contain neither '=' nor NUL"
            )));
        }
        if v.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "environment variable {k} contains a NUL byte"
            )));
        }
        env.insert(k.clone(), v.clone());
    }
    Ok(env)
}

fn check_cwd(cwd: &Path) -> Result<()> {
    let fail = |reason: String| SandboxError::WorkingDirectory {
        path: cwd.to_owned(),
        reason,
    };
    if !cwd.is_absolute() {
        return Err(fail("must be an absolute path".to_owned()));
    }
    match std::fs::metadata(cwd) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail("is not a directory".to_owned())),
        Err(e) => Err(fail(format!("cannot be used: {e}"))),
    }
}

/// Finds `program` the way `execvp` would, but in the child's `PATH` rather than ours.
pub(crate) fn find_program(program: &str, path_var: &str, cwd: &Path) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program name is empty",
        ));
    }
    if program.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program name contains a NUL byte",
        ));
    }
    if program.contains('/') {
        // The kernel reports a missing or non-executable path itself, at spawn.
        return Ok(cwd.join(program));
    }
    let mut not_executable = None;
    // An empty PATH entry would mean the working directory, which an agent may be able to
    // write to; it is skipped.
    for dir in path_var.split(':').filter(|d| d.starts_with('/')) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
        {
            if meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
            not_executable.get_or_insert(candidate);
        }
    }
    Err(match not_executable {
        Some(p) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not executable", p.display()),
        ),
        None => io::Error::new(
            io::ErrorKind::NotFound,
            format!("not found in PATH {path_var}"),
        ),
    })
}

/// Applies each configured limit to the running child, never above our own hard limit (raising
/// one needs a privilege we must not rely on, and would loosen the sandbox).
fn apply_limits(
    pid: Pid,
    limits: &ResourceLimits,
) -> std::result::Result<(), (&'static str, io::Error)> {
    let wanted = [
        ("RLIMIT_AS", Resource::As, limits.memory_bytes),
        ("RLIMIT_CPU", Resource::Cpu, limits.cpu_seconds),
        ("RLIMIT_FSIZE", Resource::Fsize, limits.max_file_bytes),
        ("RLIMIT_NOFILE", Resource::Nofile, limits.max_open_files),
    ];
    for (name, resource, value) in wanted {
        let Some(value) = value else { continue };
        let ours = rustix::process::getrlimit(resource);
        let value = ours.maximum.map_or(value, |max| value.min(max));
        let limit = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        rustix::process::prlimit(Some(pid), resource, limit).map_err(|e| (name, e.into()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
