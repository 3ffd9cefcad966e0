//! `toolwarden call` and `toolwarden batch`: build calls, run them through the runtime, print results
//! as JSON and exit with the status's code.
//!
//! Ctrl-C (SIGINT) or SIGTERM cancels what is running instead of killing the process, so the tool's
//! process is stopped and the cancelled call still gets its audit record. A batch prints each result
//! as one line as soon as it is recorded, so a consumer (or a crash) never sees a result whose
//! audit record is not yet committed. A reader that goes away (`| head -1`) stops a call or a
//! batch the same way, and the command then ends quietly (`crate::out`).

use std::io::Read;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tw_core::{ToolCall, ToolResult, ToolStatus, TraceId};
use tw_runtime::{
    BatchMode, EventKind, Received, Runtime, UpstreamServer, new_execution_id, new_trace_id,
};

use crate::cli::{BatchArgs, CallArgs};
use crate::out::{errln, outln};
use crate::setup::Context;

/// A token that fires on SIGINT or SIGTERM. The handlers are installed here, before the caller
/// starts anything, not in the task that waits for them: a signal that came before that task
/// first ran would be lost (or, where whoever started us left SIGINT ignored, as a shell does for
/// a background job, silently ignored, and the call would run to its time limit).
pub(crate) fn cancel_on_signal() -> CancellationToken {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let streams = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    let t = token.clone();
    tokio::spawn(async move {
        let (mut int, mut term) = match streams {
            (Ok(int), Ok(term)) => (int, term),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot watch SIGINT and SIGTERM");
                return;
            }
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        errln!("toolwarden: cancelling (the cancelled calls are still recorded)");
        t.cancel();
    });
    token
}

pub(crate) fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read stdin")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

fn parse_trace(t: Option<&str>) -> anyhow::Result<TraceId> {
    Ok(match t {
        Some(t) => TraceId::new(t)?,
        None => new_trace_id(),
    })
}

pub(crate) async fn call(rt: &Runtime, ctx: &Context, a: CallArgs) -> anyhow::Result<u8> {
    let arguments = arguments(&a)?;
    let call = ToolCall {
        tool: a.tool,
        arguments,
        caller: ctx.caller.clone(),
        execution_id: new_execution_id(),
        trace_id: parse_trace(a.trace_id.as_deref())?,
        timeout: a.timeout.map(Duration::from_millis),
        no_wait: a.no_wait,
        chain: None,
    };
    let upstream = CancellationToken::new();
    let supervisors =
        tw_mcp::upstream::start(rt, upstream_of(ctx, &call.tool), upstream.clone()).await;
    let waiting = tell_when_waiting(rt, &call);
    let cancel = cancel_on_signal();
    crate::out::cancel_when_closed(&cancel);
    let result = rt.execute_with_cancel(call, cancel).await;
    waiting.abort();
    upstream.cancel();
    supervisors.stopped().await;
    outln!("{}", serde_json::to_string_pretty(&result)?)?;
    Ok(crate::exit::for_status(result.status))
}

/// The call's arguments, from `--args` or the file `--args-file` names.
fn arguments(a: &CallArgs) -> anyhow::Result<Value> {
    let text = match &a.args_file {
        Some(f) => read_input(f)?,
        None => a.args.clone(),
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "--args is not valid JSON (line {}, column {}): {e}",
            e.line(),
            e.column()
        )
    })
}

/// A tool of an upstream server (SERVER__TOOL) needs that server started for the call.
fn upstream_of(ctx: &Context, tool: &str) -> Vec<UpstreamServer> {
    match tool.split_once("__") {
        Some((server, _)) => ctx
            .places
            .config
            .upstream
            .get(server)
            .cloned()
            .into_iter()
            .collect(),
        None => Vec::new(),
    }
}

/// Tells the person at the terminal when the call waits for approval, and how to give it.
fn tell_when_waiting(rt: &Runtime, call: &ToolCall) -> tokio::task::JoinHandle<()> {
    let mut events = rt.events().subscribe_execution(call.execution_id.clone());
    tokio::spawn(async move {
        while let Some(received) = events.recv().await {
            if let Received::Event(e) = received
                && let EventKind::ConfirmationRequested {
                    confirmation_id,
                    reason,
                    expires_at,
                } = &e.kind
            {
                let secs = (expires_at - e.at).max(0) / 1_000_000;
                errln!(
                    "toolwarden: {} waits for approval ({reason}).\n  approve: toolwarden confirm approve {confirmation_id}\n  deny:    toolwarden confirm deny {confirmation_id}\n  it is denied if no one answers within {secs} s",
                    e.tool
                );
            }
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchEntry {
    tool: String,
    #[serde(default = "empty_object")]
    arguments: Value,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

fn parse_batch(text: &str, file: &str) -> anyhow::Result<Vec<BatchEntry>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str(text)
            .map_err(|e| anyhow!("{file}:{}:{}: {e}", e.line(), e.column()));
    }
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e = serde_json::from_str(line)
            .map_err(|e| anyhow!("{file}:{}:{}: {e}", i + 1, e.column()))?;
        entries.push(e);
    }
    if entries.is_empty() {
        bail!("{file}: no calls in the batch");
    }
    Ok(entries)
}

pub(crate) async fn batch(rt: &Runtime, ctx: &Context, a: BatchArgs) -> anyhow::Result<u8> {
    let shown = a.file.display().to_string();
    let entries = parse_batch(&read_input(&a.file)?, &shown)?;
    let trace = parse_trace(a.trace_id.as_deref())?;
    let cancel = cancel_on_signal();
    crate::out::cancel_when_closed(&cancel);
    let calls: Vec<ToolCall> = entries
        .into_iter()
        .map(|e| ToolCall {
            tool: e.tool,
            arguments: e.arguments,
            caller: ctx.caller.clone(),
            execution_id: new_execution_id(),
            trace_id: trace.clone(),
            timeout: e.timeout_ms.map(Duration::from_millis),
            no_wait: false,
            chain: None,
        })
        .collect();
    let mode = batch_mode(&a);
    let mut first_failure: Option<ToolStatus> = None;
    let mut write_error: Option<anyhow::Error> = None;
    let stop = cancel.clone();
    let results = rt
        .pipeline()
        .execute_batch_cancellable(calls, mode, cancel, |_, r: &ToolResult| {
            if r.status != ToolStatus::Success && first_failure.is_none() {
                first_failure = Some(r.status);
            }
            if write_error.is_some() {
                return;
            }
            let line = serde_json::to_string(r).unwrap_or_default();
            if let Err(e) = outln!("{line}") {
                // Nobody reads the results any more (a closed pipe), or they cannot be written:
                // stop as Ctrl-C would. The calls in flight are cancelled and the ones not yet
                // started never start; each still gets its audit record.
                tracing::info!(error = %format!("{e:#}"), "stdout failed; cancelling the rest of the batch");
                write_error = Some(e);
                stop.cancel();
            }
        })
        .await;
    if let Some(e) = write_error {
        return Err(e);
    }
    tracing::info!(calls = results.len(), "batch finished");
    Ok(first_failure.map_or(0, crate::exit::for_status))
}

fn batch_mode(a: &BatchArgs) -> BatchMode {
    match a.parallel {
        Some(n) => BatchMode::Parallel {
            concurrency: n.max(1),
        },
        None => BatchMode::Sequential {
            stop_on_error: a.stop_on_error,
        },
    }
}
