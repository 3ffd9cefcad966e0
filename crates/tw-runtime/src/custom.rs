//! Custom tools: an administrator-defined command, filled from validated arguments and run as a child
//! process in the sandbox, with the tool's time limit, output cap and the call's cancellation.
//!
//! A command that cannot get the isolation its definition asks for is a SandboxError before anything
//! starts; it is never run with less. Exit status 0 is success; anything else is a failure whose
//! message carries the end of standard error, which is where programs explain themselves.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::{
    CommandTemplate, ErrorCode, OutputFormat, ToolCall, ToolDefinition, ToolError, ToolStatus,
};
use tw_sandbox::{
    OutputChunk, ProcessOutput, ProcessSpec, ResourceLimits, RunOutcome, Sandbox, Workspace,
};

use crate::clock::Clock;
use crate::events::{EventBus, EventKind, ExecutionEvent, Stream};
use crate::runtime::{ExecFailure, Produced};

/// How much of standard error is quoted in a failure message.
const STDERR_IN_MESSAGE: usize = 2048;
/// How much of one output chunk is forwarded as a progress event.
const PROGRESS_CHUNK: usize = 4096;

pub(crate) struct CustomRun<'a> {
    pub(crate) sandbox: &'a Sandbox,
    pub(crate) workspace: &'a Workspace,
    pub(crate) events: &'a EventBus,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) call: &'a ToolCall,
    pub(crate) definition: &'a ToolDefinition,
    pub(crate) template: &'a CommandTemplate,
    pub(crate) limit: Duration,
}

fn failure(
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

fn facts(out: &ProcessOutput) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("exit_code".into(), json!(out.exit.code));
    if let Some(sig) = out.exit.signal {
        m.insert("signal".into(), json!(sig));
    }
    m.insert(
        "wall_time_us".into(),
        json!(u64::try_from(out.wall_time.as_micros()).unwrap_or(u64::MAX)),
    );
    m.insert("pid".into(), json!(out.pid));
    m.insert("isolation".into(), json!(out.isolation.as_str()));
    m.insert("stdout_truncated".into(), json!(out.stdout_truncated));
    m.insert("stderr_truncated".into(), json!(out.stderr_truncated));
    if !out.stderr.is_empty() {
        m.insert("stderr".into(), json!(tail(&out.stderr, STDERR_IN_MESSAGE)));
    }
    m
}

/// The last `max` bytes of `bytes`, lossily decoded.
fn tail(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

pub(crate) async fn run(
    r: CustomRun<'_>,
    cancel: &CancellationToken,
) -> Result<Produced, ExecFailure> {
    let def = r.definition;
    if let Err(e) = r.sandbox.check(def.constraints.isolation) {
        return Err(failure(
            ToolStatus::SandboxError,
            ErrorCode::SANDBOX_UNAVAILABLE,
            e.to_string(),
            Map::new(),
        ));
    }
    let argv = r
        .template
        .render(&r.call.arguments, &def.parameters)
        .map_err(|e| {
            failure(
                ToolStatus::ValidationError,
                ErrorCode::INVALID_ARGUMENTS,
                e.to_string(),
                Map::new(),
            )
        })?;
    let mut argv = argv.into_iter();
    let program = argv.next().unwrap_or_default();
    let cwd = r.workspace.roots().first().cloned().unwrap_or_default();
    let spec = ProcessSpec {
        program,
        args: argv.collect(),
        env: r.template.env.clone(),
        cwd,
        isolation: def.constraints.isolation,
        timeout: r.limit,
        max_output_bytes: usize::try_from(def.constraints.max_output_bytes).unwrap_or(usize::MAX),
        limits: ResourceLimits::default(),
    };

    // Progress events only when someone listens. The forwarder ends when the sandbox drops the
    // sender, and is awaited before the call goes on, so no progress event can trail the call's
    // final event.
    let mut forwarder = None;
    let progress = r.events.has_subscribers().then(|| {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<OutputChunk>(64);
        let events = r.events.clone();
        let (execution_id, trace_id, tool) = (
            r.call.execution_id.clone(),
            r.call.trace_id.clone(),
            r.call.tool.clone(),
        );
        let clock = Arc::clone(&r.clock);
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
                });
            }
        }));
        tx
    });

    let outcome = r.sandbox.run(spec, cancel.child_token(), progress).await;
    if let Some(forwarder) = forwarder {
        // Only fails if the forwarder panicked, which loses progress events, not the call.
        let _ = forwarder.await;
    }
    let outcome = outcome.map_err(|e| {
        let code = match e {
            tw_sandbox::SandboxError::Spawn { .. } => ErrorCode::SPAWN_FAILED,
            _ => ErrorCode::SANDBOX_UNAVAILABLE,
        };
        failure(ToolStatus::SandboxError, code, e.to_string(), Map::new())
    })?;

    match outcome {
        RunOutcome::TimedOut(out) => Err(failure(
            ToolStatus::Timeout,
            ErrorCode::TIMEOUT,
            format!(
                "tool {} did not finish within {} ms and was stopped",
                def.name,
                r.limit.as_millis()
            ),
            facts(&out),
        )),
        RunOutcome::Cancelled(out) => Err(failure(
            ToolStatus::Cancelled,
            ErrorCode::CANCELLED,
            "the call was cancelled and its process stopped".to_owned(),
            facts(&out),
        )),
        RunOutcome::Exited(out) => {
            let execution = facts(&out);
            if out.exit.code != Some(0) {
                let how = match (out.exit.code, out.exit.signal) {
                    (_, Some(sig)) => format!("was killed by signal {sig}"),
                    (Some(code), None) => format!("exited with status {code}"),
                    (None, None) => "ended abnormally".to_owned(),
                };
                let stderr = tail(&out.stderr, STDERR_IN_MESSAGE);
                let message = if stderr.is_empty() {
                    format!("{} {how}", r.template.program())
                } else {
                    format!("{} {how}: {stderr}", r.template.program())
                };
                let mut f = failure(
                    ToolStatus::Failed,
                    ErrorCode::EXECUTION_FAILED,
                    message,
                    execution,
                );
                f.output = Some(Value::String(
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                ));
                return Err(f);
            }
            let output = match r.template.output {
                OutputFormat::Text => {
                    Value::String(String::from_utf8_lossy(&out.stdout).into_owned())
                }
                OutputFormat::Json => {
                    if out.stdout_truncated {
                        return Err(failure(
                            ToolStatus::Failed,
                            ErrorCode::INVALID_OUTPUT,
                            format!(
                                "standard output exceeded {} bytes, so the JSON result is incomplete",
                                def.constraints.max_output_bytes
                            ),
                            execution,
                        ));
                    }
                    serde_json::from_slice(&out.stdout).map_err(|e| {
                        failure(
                            ToolStatus::Failed,
                            ErrorCode::INVALID_OUTPUT,
                            format!("standard output is not one JSON document: {e}"),
                            execution.clone(),
                        )
                    })?
                }
            };
            Ok(Produced {
                output,
                execution,
                truncated: out.stdout_truncated,
            })
        }
    }
}
