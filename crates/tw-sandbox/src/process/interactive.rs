//! Long-lived sandboxed processes whose standard input and output are the caller's streams for
//! as long as they run: upstream MCP servers spoken to in JSON-RPC, and anything else that
//! answers line by line rather than once at the end.
//!
//! Design decisions:
//! - **The same helper, the same sandbox.** [`Sandbox::spawn_interactive`] checks the level,
//!   prepares the request and launches the helper through the very code [`Sandbox::run`] uses;
//!   only where the tool's input comes from and who reads its output differ.
//! - **Input is a live pipe.** The runtime makes a pipe and sends its read end with the request
//!   (`SCM_RIGHTS`); the helper makes it the tool's standard input. No copy of the input exists
//!   anywhere, and closing the writer is the tool's end of input.
//! - **Output is the caller's.** The tool's standard output is the helper's, a pipe read by no
//!   one but the caller. Standard error is drained all the time by the supervisor task, which
//!   keeps only its last bytes, so a chatty server never blocks on it and a crash can still be
//!   explained.
//! - **Started means running.** `spawn_interactive` returns once the helper reports that the
//!   tool runs; a sandbox that cannot be built, or a program that cannot be executed, is its
//!   error, never a handle to a process that is not there.
//! - **Nothing outlives its handle.** [`Interactive::stop`], dropping the handle, and the runtime
//!   itself going away (the helper watches its control socket) all stop the whole tree: SIGTERM,
//!   then SIGKILL after the helper's grace period.
//! - **No time limit.** A server runs until it is stopped or ends by itself; `spec.timeout` is
//!   not used. Resource limits (memory, processes, CPU time, open files) apply as to any run.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::net::unix::pipe;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tw_core::IsolationLevel;

use super::{
    ExitInfo, HELPER_GRACE, Launched, Mode, ProcessSpec, READ_CHUNK, RunMetrics, Sandbox,
    exit_info, failure, helper_exited, read_report, read_some, sleep_until, take_report,
};
use crate::error::{Result, SandboxError};
use crate::helper::wire::{self, Finished, Level, Message};

/// How an interactive process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InteractiveExit {
    /// The tool's exit status or the signal that ended it.
    pub exit: ExitInfo,
    /// Whether it was stopped ([`Interactive::stop`], or its handle dropped) rather than ending
    /// by itself.
    pub stopped: bool,
    /// The last bytes it wrote to standard error, at most the spec's `max_output_bytes`.
    pub stderr_tail: Vec<u8>,
    /// Whether earlier standard error was dropped to keep the tail within its cap.
    pub stderr_truncated: bool,
    /// The isolation that was applied.
    pub isolation: IsolationLevel,
    /// CPU, memory and identity of the run; `wall_time` is the whole life of the process.
    pub metrics: RunMetrics,
}

/// A sandboxed process that runs until it is stopped or ends by itself, started by
/// [`Sandbox::spawn_interactive`].
///
/// Take its standard input and output once each ([`Interactive::take_stdin`],
/// [`Interactive::take_stdout`]) and keep reading the output: a tool whose output pipe is full
/// waits until it is read, like any process writing to a pipe. Dropping the handle stops the
/// process and everything it started; [`Interactive::stop`] does the same and says how it
/// ended.
#[derive(Debug)]
pub struct Interactive {
    pid: u32,
    isolation: IsolationLevel,
    sandbox_id: String,
    stdin: Option<pipe::Sender>,
    stdout: Option<ChildStdout>,
    /// Asks the supervisor task to stop the tree.
    stop: CancellationToken,
    /// Whether the helper has not been reaped yet, so its pid is still its own to signal.
    helper_alive: Arc<AtomicBool>,
    state: State,
}

/// The supervisor task, or what it found.
#[derive(Debug)]
enum State {
    Running(JoinHandle<std::result::Result<InteractiveExit, String>>),
    Ended(std::result::Result<InteractiveExit, String>),
}

impl Sandbox {
    /// Starts `spec` at its isolation level and hands back its standard input and output as
    /// streams, for as long as it runs. Returns once the tool is running: a level this host
    /// cannot give is [`SandboxError::Unsupported`], a sandbox that cannot be built
    /// [`SandboxError::Setup`], a program that cannot be executed [`SandboxError::Spawn`].
    ///
    /// Of the spec, `timeout` is not used (an interactive process has no time limit; stop it
    /// when it is no longer wanted), `max_output_bytes` is how much of standard error's end is
    /// kept, and `stdin` must be `None` (the input is [`Interactive::take_stdin`]). The limits
    /// apply as they are: the default 300 s of CPU time (60 s at restricted) ends a server that
    /// computes for longer, so a spec for a long-lived server sets `limits.cpu_seconds` to what
    /// it may really use.
    pub async fn spawn_interactive(&self, spec: ProcessSpec) -> Result<Interactive> {
        self.check(spec.isolation).await?;
        if spec.stdin.is_some() {
            return Err(SandboxError::InvalidSpec(
                "an interactive process reads its standard input from Interactive::take_stdin; \
                 spec.stdin must be None"
                    .to_owned(),
            ));
        }
        let prepared = self.prepare(&spec, Mode::Interactive).await?;
        let level = prepared.level;
        let isolation = spec.isolation;
        let sandbox_id = prepared.sandbox_id.clone();
        let pipe_failed = |source: io::Error| SandboxError::Spawn {
            program: spec.program.clone(),
            source: io::Error::new(
                source.kind(),
                format!("cannot make the pipe for its standard input: {source}"),
            ),
        };
        let (stdin, theirs) = pipe::pipe().map_err(pipe_failed)?;
        // The tool reads its input with plain blocking reads.
        let theirs = theirs.into_blocking_fd().map_err(pipe_failed)?;
        let mut launched = self.launch(&spec, prepared, Some(theirs)).await?;
        let pid = launched.pid;
        let stdout = launched.child.stdout.take();
        let stderr = launched.child.stderr.take();
        let stop = CancellationToken::new();
        let helper_alive = Arc::new(AtomicBool::new(true));
        let (started, is_started) = oneshot::channel();
        let supervisor = Supervisor {
            sandbox: self.clone(),
            level,
            sandbox_id: sandbox_id.clone(),
            launched,
            stderr,
            tail: Tail::new(spec.max_output_bytes),
            stop: stop.clone(),
            helper_alive: Arc::clone(&helper_alive),
            started: Some(started),
            spec,
        };
        // Until the tool is known to run, dropping this future stops whatever was started.
        let abandon = stop.clone().drop_guard();
        let task = tokio::spawn(supervisor.run());
        match is_started.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(SandboxError::Child {
                    pid,
                    source: io::Error::other(
                        "the sandbox's supervisor ended before the tool started",
                    ),
                });
            }
        }
        abandon.disarm();
        Ok(Interactive {
            pid,
            isolation,
            sandbox_id,
            stdin: Some(stdin),
            stdout,
            stop,
            helper_alive,
            state: State::Running(task),
        })
    }
}

impl Interactive {
    /// The sandbox helper's process id (the tool is its child, or at strict and restricted the
    /// child of the sandbox's init, in a pid namespace of its own).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Identifies this run's sandbox in logs and audit records.
    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    /// The isolation that was applied.
    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
    }

    /// The tool's standard input; `None` once taken. Dropping it (or closing it with
    /// `shutdown`) is the end of the tool's input. Writes fail with `BrokenPipe` once the tool
    /// and everything it started are gone.
    pub fn take_stdin(&mut self) -> Option<pipe::Sender> {
        self.stdin.take()
    }

    /// The tool's standard output; `None` once taken. It ends (EOF) when the tool and
    /// everything it started have ended.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// Waits until the process ends by itself (or is stopped from elsewhere) and says how.
    /// Cancel-safe, and may be called again: it answers the same. A process whose output is
    /// never read may never end.
    pub async fn wait(&mut self) -> Result<InteractiveExit> {
        if let State::Running(task) = &mut self.state {
            let ended = match task.await {
                Ok(ended) => ended,
                Err(e) => Err(format!("the sandbox's supervisor task failed: {e}")),
            };
            self.state = State::Ended(ended);
        }
        match &self.state {
            State::Ended(Ok(exit)) => Ok(exit.clone()),
            State::Ended(Err(e)) => Err(SandboxError::Child {
                pid: self.pid,
                source: io::Error::other(e.clone()),
            }),
            State::Running(_) => Err(SandboxError::Child {
                pid: self.pid,
                source: io::Error::other("the sandbox's supervisor is still running"),
            }),
        }
    }

    /// Stops the process and everything it started, and says how it ended: its input is
    /// closed, the helper passes SIGTERM to the whole tree and SIGKILLs what is left after a
    /// grace period (300 ms); a helper that does not finish within two seconds is killed
    /// itself. A process that already ended is not touched. To let a server exit by itself
    /// first (as MCP's stdio transport asks), drop its input and [`Interactive::wait`] a while
    /// before calling this.
    pub async fn stop(mut self) -> Result<InteractiveExit> {
        self.stdin = None;
        self.stdout = None;
        self.stop.cancel();
        self.wait().await
    }
}

impl Drop for Interactive {
    /// Stops the tree. The signal is sent here and now, so it happens even where the
    /// supervisor task does not get to run again (a runtime that is shutting down, or a thread
    /// that blocks after the drop); the task then reaps the helper and escalates if needed.
    fn drop(&mut self) {
        if matches!(self.state, State::Ended(_)) {
            return;
        }
        self.stop.cancel();
        if self.helper_alive.load(Ordering::Acquire)
            && let Some(pid) = i32::try_from(self.pid).ok().and_then(Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, Signal::TERM);
        }
    }
}

/// Everything the supervisor task owns: the helper, its control socket and standard error.
struct Supervisor {
    sandbox: Sandbox,
    level: Level,
    sandbox_id: String,
    launched: Launched,
    stderr: Option<ChildStderr>,
    tail: Tail,
    stop: CancellationToken,
    helper_alive: Arc<AtomicBool>,
    /// Told once whether the tool started.
    started: Option<oneshot::Sender<Result<()>>>,
    spec: ProcessSpec,
}

impl Supervisor {
    /// Drains standard error, reads the helper's report, stops the tree when asked, and once
    /// the helper has exited, measures the run.
    async fn run(mut self) -> std::result::Result<InteractiveExit, String> {
        let Launched {
            mut child,
            ctl,
            mut guard,
            cgroup,
            pid,
            start,
        } = self.launched;
        let mut stderr = self.stderr.take();
        let mut report = Some(ctl);
        let mut messages = Vec::new();
        let mut scanned = 0;
        let mut ebuf = vec![0u8; READ_CHUNK];
        let mut rbuf = vec![0u8; 4096];
        let mut stopped = false;
        let mut kill_at: Option<Instant> = None;
        let mut status = None;
        let mut wall_time = Duration::ZERO;
        let mut drain_until: Option<Instant> = None;

        loop {
            if status.is_some() && stderr.is_none() && report.is_none() {
                break;
            }
            tokio::select! {
                r = read_some(&mut stderr, &mut ebuf), if stderr.is_some() => match r {
                    Ok(n) if n > 0 => self.tail.push(&ebuf[..n]),
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
                        if let Some(port) = &self.spec.egress {
                            (port.0)(std::net::TcpListener::from(fd));
                        }
                    }
                    if !take_report(r, &rbuf, &mut messages) {
                        report = None;
                    }
                    if started_in(&messages, &mut scanned)
                        && let Some(tx) = self.started.take()
                    {
                        let _ = tx.send(Ok(()));
                    }
                },
                w = child.wait(), if status.is_none() => {
                    let st = w.map_err(|e| format!("waiting for the sandbox helper failed: {e}"))?;
                    wall_time = start.elapsed();
                    // Reaped: from here on the pid may be someone else's.
                    self.helper_alive.store(false, Ordering::Release);
                    guard.armed = false;
                    helper_exited(self.level, pid, st);
                    status = Some(st);
                    drain_until = Some(Instant::now() + self.sandbox.drain);
                },
                () = self.stop.cancelled(), if !stopped && status.is_none() => {
                    tracing::debug!(pid, sandbox_id = self.sandbox_id, "stopping the interactive tool");
                    stopped = true;
                    guard.signal(Signal::TERM);
                    kill_at = Some(Instant::now() + HELPER_GRACE);
                },
                () = sleep_until(kill_at), if kill_at.is_some() && status.is_none() => {
                    tracing::warn!(pid, sandbox_id = self.sandbox_id, "the sandbox helper did not stop in time; killing it");
                    guard.signal(Signal::KILL);
                    kill_at = None;
                },
                () = sleep_until(drain_until), if drain_until.is_some() => {
                    tracing::debug!(pid, "stderr or the report still open after the helper exited; abandoning them");
                    break;
                },
            }
        }

        let mut finished: Option<Finished> = None;
        let mut failed = None;
        for m in wire::parse_messages(&messages) {
            if failed.is_none() {
                failed = failure(&m, &self.spec, self.level);
            }
            if let Message::Finished(f) = m {
                finished = Some(f);
            }
        }
        let exit = exit_info(finished, status);
        let (stderr_tail, stderr_truncated) = self.tail.into_parts();
        if let Some(tx) = self.started.take() {
            let e = failed.unwrap_or_else(|| SandboxError::Setup {
                level: self.spec.isolation,
                step: "starting the tool".to_owned(),
                error: format!(
                    "the sandbox helper ended ({exit:?}) without starting it: {}",
                    String::from_utf8_lossy(&stderr_tail).trim()
                ),
            });
            let _ = tx.send(Err(e));
        }
        let mut metrics = RunMetrics {
            sandbox_id: self.sandbox_id,
            wall_time,
            cpu_time: None,
            peak_memory_bytes: None,
            killed_leftovers: 0,
            oom_kills: 0,
            prepared_ahead: false,
        };
        self.sandbox.measure(&mut metrics, finished, cgroup);
        Ok(InteractiveExit {
            exit,
            stopped,
            stderr_tail,
            stderr_truncated,
            isolation: self.spec.isolation,
            metrics,
        })
    }
}

/// Whether the complete lines of the report after `scanned` include [`Message::Started`];
/// moves `scanned` past them.
fn started_in(messages: &[u8], scanned: &mut usize) -> bool {
    let Some(end) = messages[*scanned..].iter().rposition(|b| *b == b'\n') else {
        return false;
    };
    let end = *scanned + end + 1;
    let lines = &messages[*scanned..end];
    *scanned = end;
    wire::parse_messages(lines)
        .iter()
        .any(|m| matches!(m, Message::Started))
}

/// The last bytes of a stream, at most `cap` of them.
struct Tail {
    data: VecDeque<u8>,
    cap: usize,
    seen: u64,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Self {
            data: VecDeque::new(),
            cap,
            seen: 0,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.seen = self
            .seen
            .saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        let chunk = &chunk[chunk.len().saturating_sub(self.cap)..];
        let excess = (self.data.len() + chunk.len()).saturating_sub(self.cap);
        self.data.drain(..excess);
        self.data.extend(chunk);
    }

    /// The bytes kept, and whether any were dropped.
    fn into_parts(self) -> (Vec<u8>, bool) {
        let truncated = self.seen > u64::try_from(self.data.len()).unwrap_or(u64::MAX);
        (self.data.into(), truncated)
    }
}
