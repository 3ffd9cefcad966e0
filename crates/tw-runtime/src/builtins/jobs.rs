//! The tools that look after `exec`'s background jobs (group `exec`, so the policy that allows
//! `exec` allows them): `exec_output` reads a job's standard output from an offset, `exec_wait`
//! waits for it to end (at most a while), `exec_kill` stops its whole process tree. Each is a
//! governed, audited call of its own; a job is only its starter's (agent and skill), see
//! [`registry`].

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{ErrorCode, RiskLevel, ToolCategory, ToolDefinition};

use super::memory::time;
use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit, output};
mod registry;

pub use registry::{Jobs, KEPT_BYTES, MAX_PER_CALLER, MAX_RUNNING};

use registry::{Job, JobEnd};

/// The most of a job's output one read returns.
const MAX_READ: u64 = 256 << 10;
/// The longest one `exec_wait` waits.
const MAX_WAIT_MS: u64 = 110_000;

fn job_id_schema() -> Value {
    json!({"type": "string", "pattern": "^job-[0-9]{1,20}$", "description": "The job id exec returned."})
}

/// A job as the tools show it.
fn shown(job: &Job, end: Option<&JobEnd>) -> Value {
    let mut v = json!({
        "job_id": job.id,
        "argv": job.argv,
        "started_at": time(job.started_at_us),
        "time_limit_ms": u64::try_from(job.time_limit.as_millis()).unwrap_or(u64::MAX),
        "running": end.is_none(),
    });
    if let Some(e) = end {
        v["exit_code"] = json!(e.exit_code);
        v["signal"] = json!(e.signal);
        v["stopped"] = json!(e.stopped);
        v["stderr"] = json!(e.stderr);
        v["stderr_truncated"] = json!(e.stderr_truncated);
    }
    v
}

fn job_output_schema(extra: Value) -> Value {
    let mut props = json!({
        "job_id": {"type": "string"},
        "argv": {"type": "array", "items": {"type": "string"}},
        "started_at": {"type": "string"},
        "time_limit_ms": {"type": "integer"},
        "running": {"type": "boolean"},
        "exit_code": {"type": ["integer", "null"]},
        "signal": {"type": ["integer", "null"]},
        "stopped": {"enum": [null, "killed", "time_limit", "runtime"]},
        "stderr": {"type": "string"},
        "stderr_truncated": {"type": "boolean"}
    });
    if let (Some(p), Value::Object(more)) = (props.as_object_mut(), extra) {
        p.extend(more);
    }
    json!({"type": "object", "properties": props, "required": ["job_id", "running"]})
}

fn definition(
    name: &str,
    description: &str,
    params: Value,
    output: Value,
    writes: bool,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut d = lit::in_runtime(
        name,
        description,
        ToolCategory::System,
        "exec",
        params,
        output,
        writes,
    )?;
    d.constraints.max_execution_time_ms = MAX_WAIT_MS + 10_000;
    d.constraints.max_output_bytes = MAX_READ + (80 << 10);
    d.risk_level = if writes {
        RiskLevel::Medium
    } else {
        RiskLevel::Low
    };
    Ok(d)
}

/// The job tools, over the runtime's `jobs` (none: each call says so).
pub(super) fn tools(jobs: Option<Arc<Jobs>>) -> Vec<Arc<dyn BuiltinTool>> {
    vec![
        Arc::new(ExecOutput(jobs.clone())),
        Arc::new(ExecWait(jobs.clone())),
        Arc::new(ExecKill(jobs)),
    ]
}

/// The caller's job `id`.
fn job(jobs: Option<&Arc<Jobs>>, ctx: &ToolContext, id: &str) -> Result<Arc<Job>, ToolFailure> {
    let jobs = jobs.ok_or_else(|| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            "background jobs need a runtime, and this one has none",
        )
    })?;
    jobs.get(&ctx.caller, id)
}

struct ExecOutput(Option<Arc<Jobs>>);

#[derive(Deserialize)]
struct OutputArgs {
    job_id: String,
    #[serde(default)]
    offset: u64,
    #[serde(default = "default_read")]
    max_bytes: u64,
}

fn default_read() -> u64 {
    64 << 10
}

impl BuiltinTool for ExecOutput {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        definition(
            "exec_output",
            "Read a background job's standard output so far, from a byte offset (0: the start; \
             pass next_offset to read on), and whether it is still running; once it ended, how \
             (exit code, signal, why it was stopped) and the end of its standard error.",
            json!({
                "type": "object",
                "properties": {
                    "job_id": job_id_schema(),
                    "offset": {"type": "integer", "minimum": 0},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_READ}
                },
                "required": ["job_id"],
                "additionalProperties": false
            }),
            job_output_schema(json!({
                "stdout": {"type": "string"},
                "skipped": {"type": "integer"},
                "next_offset": {"type": "integer"}
            })),
            false,
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: OutputArgs = args(raw)?;
            let job = job(self.0.as_ref(), ctx, &a.job_id)?;
            // How it ended is read first: output read after it is then all there is.
            let end = job.ended();
            let read = job.read(
                a.offset,
                usize::try_from(a.max_bytes.min(MAX_READ)).unwrap_or(usize::MAX),
            );
            let mut v = shown(&job, end.as_ref());
            v["stdout"] = json!(read.text);
            v["skipped"] = json!(read.skipped);
            v["next_offset"] = json!(read.next_offset);
            output(&v)
        })
    }
}

struct ExecWait(Option<Arc<Jobs>>);

#[derive(Deserialize)]
struct WaitArgs {
    job_id: String,
    #[serde(default = "default_wait")]
    timeout_ms: u64,
}

fn default_wait() -> u64 {
    30_000
}

impl BuiltinTool for ExecWait {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        definition(
            "exec_wait",
            "Wait for a background job to end, at most timeout_ms (30 s by default, 110 s at \
             most); says whether it is still running and, once it ended, how.",
            json!({
                "type": "object",
                "properties": {
                    "job_id": job_id_schema(),
                    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS}
                },
                "required": ["job_id"],
                "additionalProperties": false
            }),
            job_output_schema(json!({})),
            false,
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: WaitArgs = args(raw)?;
            let job = job(self.0.as_ref(), ctx, &a.job_id)?;
            let wait = Duration::from_millis(a.timeout_ms.min(MAX_WAIT_MS));
            let end = tokio::select! {
                end = job.wait(wait) => end,
                () = ctx.cancel.cancelled() => job.ended(),
            };
            output(&shown(&job, end.as_ref()))
        })
    }
}

struct ExecKill(Option<Arc<Jobs>>);

#[derive(Deserialize)]
struct KillArgs {
    job_id: String,
}

impl BuiltinTool for ExecKill {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        definition(
            "exec_kill",
            "Stop a background job and every process it started (SIGTERM, then SIGKILL after a \
             grace period); says how it ended. A job that already ended is left as it was.",
            json!({
                "type": "object",
                "properties": {"job_id": job_id_schema()},
                "required": ["job_id"],
                "additionalProperties": false
            }),
            job_output_schema(json!({})),
            true,
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: KillArgs = args(raw)?;
            let job = job(self.0.as_ref(), ctx, &a.job_id)?;
            let end = match job.ended() {
                Some(end) => Some(end),
                None => job.kill().await,
            };
            output(&shown(&job, end.as_ref()))
        })
    }
}
