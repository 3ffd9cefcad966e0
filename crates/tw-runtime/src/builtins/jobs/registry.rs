//! Background processes (`exec` with `background: true`, seed 001): started through the
//! sandbox like every process a tool runs, then looked after here while the calls that started
//! them have long returned. `exec_output`, `exec_wait` and `exec_kill` are governed calls of
//! their own that read, wait for or stop one.
//!
//! A job belongs to the caller that started it (agent and skill): another caller is told there
//! is no such job. Its standard output is kept as it arrives (the last [`KEPT_BYTES`], with the
//! count of bytes dropped before them, so a reader going by offsets knows what it missed); its
//! standard error's end is kept when it ends. Each job has a time limit, after which it is
//! stopped; the number running at once is capped per caller and per runtime.
//!
//! Every background process dies with its runtime: dropping the registry stops them all, and
//! each runs as an interactive sandbox whose helper stops the tool when the runtime's end of its
//! control socket closes, which a runtime that dies without dropping anything closes too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncReadExt as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tw_core::{ErrorCode, ToolStatus};
use tw_sandbox::{ProcessSpec, Sandbox};

use crate::builtins::ToolFailure;

/// Bytes of a job's standard output kept (the newest).
pub const KEPT_BYTES: usize = 1 << 20;
/// Jobs one caller may have running at once.
pub const MAX_PER_CALLER: usize = 4;
/// Jobs one runtime may have running at once.
pub const MAX_RUNNING: usize = 32;
/// Finished jobs kept for their callers to read, per runtime (the oldest go first).
const MAX_FINISHED: usize = 64;

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct JobEnd {
    /// The exit code; `None` when a signal ended it.
    pub(crate) exit_code: Option<i32>,
    /// The signal that ended it.
    pub(crate) signal: Option<i32>,
    /// Why it was stopped, when it did not end by itself: `killed`, `time_limit`, `runtime`.
    pub(crate) stopped: Option<&'static str>,
    /// The end of its standard error.
    pub(crate) stderr: String,
    /// Whether earlier standard error was dropped.
    pub(crate) stderr_truncated: bool,
}

/// What was read of a job's standard output.
#[derive(Default)]
struct Output {
    /// The newest bytes, at most [`KEPT_BYTES`].
    kept: Vec<u8>,
    /// Bytes written before `kept` starts.
    dropped: u64,
}

/// One background process.
pub(crate) struct Job {
    pub(crate) id: String,
    owner: String,
    pub(crate) argv: Vec<String>,
    pub(crate) started_at_us: i64,
    pub(crate) time_limit: Duration,
    output: Mutex<Output>,
    end: watch::Sender<Option<JobEnd>>,
    kill: CancellationToken,
}

/// A slice of a job's output, from an offset.
pub(crate) struct Read {
    /// The bytes from the offset asked for (or from the oldest kept, if that was dropped).
    pub(crate) text: String,
    /// Bytes between the offset asked for and the oldest kept, which were dropped.
    pub(crate) skipped: u64,
    /// The offset to ask for next.
    pub(crate) next_offset: u64,
}

impl Job {
    /// Its standard output from `offset` (bytes since it started), at most `max` bytes.
    pub(crate) fn read(&self, offset: u64, max: usize) -> Read {
        let out = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        let skipped = out.dropped.saturating_sub(offset);
        let from = usize::try_from(offset.saturating_sub(out.dropped))
            .unwrap_or(usize::MAX)
            .min(out.kept.len());
        let to = from.saturating_add(max).min(out.kept.len());
        Read {
            text: String::from_utf8_lossy(&out.kept[from..to]).into_owned(),
            skipped,
            next_offset: out.dropped + to as u64,
        }
    }

    /// How it ended, once it has.
    pub(crate) fn ended(&self) -> Option<JobEnd> {
        self.end.borrow().clone()
    }

    /// Waits until it ends, at most `wait`; how it ended, if it has.
    pub(crate) async fn wait(&self, wait: Duration) -> Option<JobEnd> {
        let mut rx = self.end.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await;
        self.ended()
    }

    /// Stops it (its whole process tree) and waits until it has ended.
    pub(crate) async fn kill(&self) -> Option<JobEnd> {
        self.kill.cancel();
        self.wait(Duration::from_secs(30)).await
    }

    fn append(&self, bytes: &[u8]) {
        let mut out = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        out.kept.extend_from_slice(bytes);
        if out.kept.len() > KEPT_BYTES {
            let extra = out.kept.len() - KEPT_BYTES;
            out.kept.drain(..extra);
            out.dropped += extra as u64;
        }
    }
}

/// The runtime's background jobs.
#[derive(Default)]
pub struct Jobs {
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    seq: AtomicU64,
    /// Fires when the runtime goes: every job stops.
    all: CancellationToken,
}

impl Drop for Jobs {
    fn drop(&mut self) {
        self.all.cancel();
    }
}

/// Whose a job is: the agent and the skill.
pub(crate) fn owner(caller: &tw_core::Caller) -> String {
    format!(
        "{}\u{0}{}",
        caller.agent_id,
        caller.skill.as_deref().unwrap_or_default()
    )
}

fn refused(message: String) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::PermissionDenied,
        code: "too_many_jobs".to_owned(),
        message,
    }
}

impl Jobs {
    /// The caller's job `id`; another caller's is not found either.
    pub(crate) fn get(&self, caller: &tw_core::Caller, id: &str) -> Result<Arc<Job>, ToolFailure> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.get(id)
            .filter(|j| j.owner == owner(caller))
            .cloned()
            .ok_or_else(|| ToolFailure {
                status: ToolStatus::NotFound,
                code: "unknown_job".to_owned(),
                message: format!(
                    "no background job {id:?} of yours in this runtime (jobs end with the \
                     runtime that started them)"
                ),
            })
    }

    /// Starts `spec` in the background for `caller`, stopped after `time_limit`.
    pub(crate) async fn start(
        &self,
        sandbox: &Sandbox,
        mut spec: ProcessSpec,
        caller: &tw_core::Caller,
        time_limit: Duration,
        now_us: i64,
    ) -> Result<Arc<Job>, ToolFailure> {
        let owner = owner(caller);
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            let running: Vec<&Arc<Job>> = jobs.values().filter(|j| j.ended().is_none()).collect();
            if running.iter().filter(|j| j.owner == owner).count() >= MAX_PER_CALLER {
                return Err(refused(format!(
                    "you have {MAX_PER_CALLER} background jobs running, the most a caller may; \
                     wait for or kill one first"
                )));
            }
            if running.len() >= MAX_RUNNING {
                return Err(refused(format!(
                    "this runtime has {MAX_RUNNING} background jobs running, the most it keeps"
                )));
            }
            // Finished jobs are kept for reading, the oldest dropped first.
            let mut finished: Vec<(i64, String)> = jobs
                .values()
                .filter(|j| j.ended().is_some())
                .map(|j| (j.started_at_us, j.id.clone()))
                .collect();
            if finished.len() >= MAX_FINISHED {
                finished.sort();
                for (_, id) in finished.iter().take(finished.len() + 1 - MAX_FINISHED) {
                    jobs.remove(id);
                }
            }
        }
        let stdin = spec.stdin.take();
        let argv: Vec<String> = std::iter::once(spec.program.clone())
            .chain(spec.args.iter().cloned())
            .collect();
        // A long-lived process: CPU time up to its wall-clock limit.
        spec.limits.cpu_seconds = spec
            .limits
            .cpu_seconds
            .map(|c| c.max(time_limit.as_secs().max(1)));
        let mut proc = sandbox.spawn_interactive(spec).await.map_err(|e| {
            let code = match e {
                tw_sandbox::SandboxError::Spawn { .. } => ErrorCode::SPAWN_FAILED,
                _ => ErrorCode::SANDBOX_UNAVAILABLE,
            };
            ToolFailure {
                status: ToolStatus::SandboxError,
                code: code.to_owned(),
                message: e.to_string(),
            }
        })?;
        let n = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Arc::new(Job {
            id: format!("job-{n}"),
            owner,
            argv,
            started_at_us: now_us,
            time_limit,
            output: Mutex::default(),
            end: watch::Sender::new(None),
            kill: CancellationToken::new(),
        });
        let input = proc.take_stdin();
        let mut stdout = proc.take_stdout();
        let (me, all) = (Arc::clone(&job), self.all.clone());
        tokio::spawn(async move {
            if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
                use tokio::io::AsyncWriteExt as _;
                let _ = pipe.write_all(&bytes).await;
            }
            let why = tokio::select! {
                _ = async {
                    if let Some(out) = stdout.as_mut() {
                        let mut buf = vec![0u8; 16 << 10];
                        while let Ok(n) = out.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            me.append(&buf[..n]);
                        }
                    }
                    proc.wait().await
                } => None,
                () = me.kill.cancelled() => Some("killed"),
                () = all.cancelled() => Some("runtime"),
                () = tokio::time::sleep(time_limit) => Some("time_limit"),
            };
            let exit = proc.stop().await;
            let end = match exit {
                Ok(e) => JobEnd {
                    exit_code: e.exit.code,
                    signal: e.exit.signal,
                    stopped: why,
                    stderr: String::from_utf8_lossy(&e.stderr_tail).into_owned(),
                    stderr_truncated: e.stderr_truncated,
                },
                Err(e) => JobEnd {
                    exit_code: None,
                    signal: None,
                    stopped: why,
                    stderr: format!("the sandbox lost the process: {e}"),
                    stderr_truncated: false,
                },
            };
            me.end.send_replace(Some(end));
        });
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(job.id.clone(), Arc::clone(&job));
        Ok(job)
    }
}
