//! Running one process for a tool call: the spec every process-running tool starts from (the
//! isolation its definition asks for, raised by policy; the workspace as its filesystem view
//! with policy's forbidden paths hidden; the call's time limit and output cap), progress events
//! while it runs, and the mapping of timeouts, cancellation and sandbox failures to call
//! statuses. Custom tools and the built-in exec tools share it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::policy::Policy;
use tw_core::{ErrorCode, IsolationLevel, ToolCall, ToolDefinition, ToolError, ToolStatus};
use tw_sandbox::fs::{HiddenPaths, paths_to_hide};
use tw_sandbox::{OutputChunk, ProcessOutput, ProcessSpec, RunOutcome, Sandbox, Workspace};

use crate::clock::Clock;
use crate::events::{EventBus, EventKind, ExecutionEvent, Stream};

/// What an executor produced.
pub(crate) struct Produced {
    pub(crate) output: Value,
    pub(crate) execution: Map<String, Value>,
    /// Whether the executor already cut the output (a child's stdout is capped as it is read).
    pub(crate) truncated: bool,
}

/// An executor's failure: its status, error and whatever it learned about the execution.
pub(crate) struct ExecFailure {
    pub(crate) status: ToolStatus,
    pub(crate) error: ToolError,
    pub(crate) output: Option<Value>,
    pub(crate) execution: Map<String, Value>,
}

/// How much of one output chunk is forwarded as a progress event.
const PROGRESS_CHUNK: usize = 4096;
/// How much of standard error is quoted in a failure message.
pub(crate) const STDERR_IN_MESSAGE: usize = 2048;

/// What a process run needs from the runtime.
pub(crate) struct Launch<'a> {
    pub(crate) sandbox: &'a Sandbox,
    pub(crate) events: &'a EventBus,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) call: &'a ToolCall,
    pub(crate) definition: &'a ToolDefinition,
    /// The rule that raised the isolation, if one did (recorded with the run's facts).
    pub(crate) raised_by: Option<String>,
    /// The network policy grants the tool's processes, through the egress proxy: the
    /// gatekeeper and the rules (`None`: no network at all).
    pub(crate) egress: Option<(Arc<crate::net::Gatekeeper>, tw_core::target::Egress)>,
}

/// How many workspace entries are examined, per run, for paths that policy forbids by a
/// pattern. Beyond it the run is refused: a partial list would leave the rest visible.
pub(crate) const HIDE_WALK_LIMIT: usize = 200_000;

/// The spec a tool's process starts from: `program` in `cwd` (the directory policy judged the
/// call in, see `crate::pipeline`'s run plan), at the level policy requires, seeing the workspace
/// read-write (read-only at restricted) minus policy's forbidden paths, with the call's limit and
/// the definition's output cap.
///
/// Forbidden paths are hidden at strict and restricted, the levels with a filesystem view (a
/// standard process sees the host as its uid does). Literal paths are masked as named; what a
/// pattern such as `**/.env` matches is found by walking the workspace, off the async threads.
pub(crate) async fn base_spec(
    policy: &Arc<Policy>,
    def: &ToolDefinition,
    workspace: &Arc<Workspace>,
    limit: Duration,
    program: String,
    cwd: std::path::PathBuf,
) -> Result<(ProcessSpec, Option<String>), ExecFailure> {
    let needs = policy.sandbox_requirements(def);
    let roots = workspace.roots();
    let mut spec = ProcessSpec::new(program, cwd);
    spec.isolation = needs.isolation;
    spec.timeout = limit;
    spec.max_output_bytes = usize::try_from(def.constraints.max_output_bytes).unwrap_or(usize::MAX);
    spec.fs.read_write = roots.to_vec();
    // Forbidden paths outside the workspace are outside the sandbox's view already.
    spec.fs.masked = needs
        .forbidden_paths
        .iter()
        .map(Path::new)
        .filter(|p| roots.iter().any(|r| p.starts_with(r)))
        .map(Path::to_path_buf)
        .collect();
    if needs.isolation >= IsolationLevel::Strict && !needs.forbidden_patterns.is_empty() {
        let (policy, ws, def_) = (Arc::clone(policy), Arc::clone(workspace), def.clone());
        let walked = tokio::task::spawn_blocking(move || {
            paths_to_hide(&ws, HIDE_WALK_LIMIT, &|path| {
                policy.sandbox_forbids(&def_, path).is_some()
            })
        })
        .await;
        let refuse = |why: String| {
            failure(
                ToolStatus::SandboxError,
                ErrorCode::SANDBOX_UNAVAILABLE,
                format!(
                    "policy forbids paths matching {} inside the workspace, and {why}; the \
                     run was refused rather than show them",
                    needs.forbidden_patterns.join(", ")
                ),
                Map::new(),
            )
        };
        match walked {
            Ok(Ok(HiddenPaths::Complete(found))) => {
                for path in found {
                    if !spec.fs.masked.contains(&path) {
                        spec.fs.masked.push(path);
                    }
                }
            }
            Ok(Ok(HiddenPaths::TooMany { limit })) => {
                return Err(refuse(format!(
                    "finding them needs a walk of more than {limit} entries (narrow the \
                     workspace, or forbid literal paths, which need no walk)"
                )));
            }
            Ok(Err(e)) => return Err(refuse(format!("the workspace could not be walked: {e}"))),
            Err(e) => return Err(refuse(format!("the walk of the workspace failed: {e}"))),
        }
    }
    Ok((spec, needs.raised_by))
}

pub(crate) fn failure(
    status: ToolStatus,
    code: &str,
    message: String,
    execution: Map<String, Value>,
) -> ExecFailure {
    ExecFailure {
        status,
        error: ToolError::new(code, message),
        output: None,
        execution,
    }
}

/// What the audit record and the result metadata say about a run.
pub(crate) fn facts(out: &ProcessOutput, raised_by: Option<&str>) -> Map<String, Value> {
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let mut m = Map::new();
    m.insert("exit_code".into(), json!(out.exit.code));
    if let Some(sig) = out.exit.signal {
        m.insert("signal".into(), json!(sig));
    }
    m.insert("wall_time_us".into(), json!(micros(out.wall_time)));
    if let Some(cpu) = out.metrics.cpu_time {
        m.insert("cpu_time_us".into(), json!(micros(cpu)));
    }
    if let Some(peak) = out.metrics.peak_memory_bytes {
        m.insert("peak_memory_bytes".into(), json!(peak));
    }
    m.insert("sandbox_id".into(), json!(out.metrics.sandbox_id));
    m.insert("isolation".into(), json!(out.isolation.as_str()));
    if let Some(rule) = raised_by {
        m.insert("isolation_raised_by".into(), json!(rule));
    }
    if out.metrics.oom_kills > 0 {
        m.insert("oom_kills".into(), json!(out.metrics.oom_kills));
    }
    if out.metrics.killed_leftovers > 0 {
        m.insert(
            "killed_leftovers".into(),
            json!(out.metrics.killed_leftovers),
        );
    }
    if out.metrics.prepared_ahead {
        m.insert("sandbox_prepared_ahead".into(), json!(true));
    }
    m.insert("pid".into(), json!(out.pid));
    m.insert("stdout_truncated".into(), json!(out.stdout_truncated));
    m.insert("stderr_truncated".into(), json!(out.stderr_truncated));
    m
}

/// The last `max` bytes of `bytes`, lossily decoded.
pub(crate) fn tail(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

/// Runs `spec`; an exit (with any status) is `Ok`, with the run's facts (see [`facts`], and
/// what it did on the network when it was granted any); a timeout, cancellation or sandbox
/// failure is the call's failure.
pub(crate) async fn run(
    l: Launch<'_>,
    mut spec: ProcessSpec,
    cancel: &CancellationToken,
) -> Result<(ProcessOutput, Map<String, Value>), ExecFailure> {
    let def = l.definition;
    let limit = spec.timeout;
    // A grant means a network namespace of the run's own whose only way out is the proxy,
    // served for as long as the run lasts (the sandbox holds the port until then). At standard
    // isolation the process keeps the host's network as it always has; a grant adds nothing
    // there.
    let proxy = l
        .egress
        .clone()
        .filter(|_| spec.isolation >= IsolationLevel::Strict)
        .map(|(gate, egress)| {
            Arc::new(crate::net::proxy::Proxy {
                gate,
                egress,
                facts: Arc::default(),
            })
        });
    spec.egress = proxy.as_ref().map(|p| Arc::clone(p).port());
    let facts = |out: &ProcessOutput, raised_by: Option<&str>| {
        let mut m = facts(out, raised_by);
        if let Some(p) = &proxy {
            let net = p
                .facts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            m.insert("network".into(), net.to_json());
        }
        m
    };
    // Progress events only when someone listens. The forwarder ends when the sandbox drops the
    // sender, and is awaited before the call goes on, so no progress event can trail the call's
    // final event.
    let mut forwarder = None;
    let progress = l.events.has_subscribers().then(|| {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<OutputChunk>(64);
        let events = l.events.clone();
        let (execution_id, trace_id, tool) = (
            l.call.execution_id.clone(),
            l.call.trace_id.clone(),
            l.call.tool.clone(),
        );
        let clock = Arc::clone(&l.clock);
        forwarder = Some(tokio::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                let (stream, bytes) = match chunk {
                    OutputChunk::Stdout(b) => (Stream::Stdout, b),
                    OutputChunk::Stderr(b) => (Stream::Stderr, b),
                };
                let cut = &bytes[..bytes.len().min(PROGRESS_CHUNK)];
                events.publish(ExecutionEvent {
                    execution_id: execution_id.clone(),
                    trace_id: trace_id.clone(),
                    tool: tool.clone(),
                    at: clock.now_us(),
                    kind: EventKind::InProgress {
                        stream,
                        text: String::from_utf8_lossy(cut).into_owned(),
                    },
                    replica: None,
                });
            }
        }));
        tx
    });

    let outcome = l.sandbox.run(spec, cancel.child_token(), progress).await;
    if let Some(forwarder) = forwarder {
        // Only fails if the forwarder panicked, which loses progress events, not the call.
        let _ = forwarder.await;
    }
    let raised_by = l.raised_by.as_deref();
    let outcome = outcome.map_err(|e| {
        let code = match e {
            tw_sandbox::SandboxError::Spawn { .. } => ErrorCode::SPAWN_FAILED,
            _ => ErrorCode::SANDBOX_UNAVAILABLE,
        };
        let mut execution = Map::new();
        if let Some(rule) = raised_by {
            execution.insert("isolation_raised_by".into(), json!(rule));
        }
        failure(ToolStatus::SandboxError, code, e.to_string(), execution)
    })?;
    match outcome {
        RunOutcome::TimedOut(out) => Err(failure(
            ToolStatus::Timeout,
            ErrorCode::TIMEOUT,
            format!(
                "tool {} did not finish within {} ms and was stopped",
                def.name,
                limit.as_millis()
            ),
            facts(&out, raised_by),
        )),
        RunOutcome::Cancelled(out) => Err(failure(
            ToolStatus::Cancelled,
            ErrorCode::CANCELLED,
            "the call was cancelled and its process stopped".to_owned(),
            facts(&out, raised_by),
        )),
        RunOutcome::Exited(out) => {
            let execution = facts(&out, raised_by);
            Ok((out, execution))
        }
    }
}
