//! Batch execution: many calls, one report. Sequential by default, optionally stopping at the first
//! call that does not succeed; or parallel with a concurrency cap. Results always come back in input
//! order, and a streaming variant hands each one over as soon as it (and every call before it) is
//! done, so a CLI can print results as they land.
//!
//! Calls a stopped batch never reaches still get a result (Cancelled, code `skipped`) and an audit
//! record: the caller asked for them, so the log must say what became of them.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tw_core::{ToolCall, ToolResult, ToolStatus};

use super::Pipeline;

/// How a batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMode {
    /// One call after another.
    Sequential {
        /// Skip the remaining calls once one does not succeed.
        stop_on_error: bool,
    },
    /// Up to `concurrency` calls at once.
    Parallel {
        /// Maximum calls in flight (at least 1).
        concurrency: usize,
    },
}

impl Default for BatchMode {
    fn default() -> Self {
        BatchMode::Sequential {
            stop_on_error: false,
        }
    }
}

impl Pipeline {
    /// Runs a batch and returns the results in input order.
    pub async fn execute_batch(
        self: &Arc<Self>,
        calls: Vec<ToolCall>,
        mode: BatchMode,
    ) -> Vec<ToolResult> {
        self.execute_batch_with(calls, mode, |_, _| {}).await
    }

    /// Runs a batch, calling `on_result(index, result)` in input order as soon as each result and
    /// all before it are available.
    pub async fn execute_batch_with(
        self: &Arc<Self>,
        calls: Vec<ToolCall>,
        mode: BatchMode,
        on_result: impl FnMut(usize, &ToolResult),
    ) -> Vec<ToolResult> {
        self.execute_batch_cancellable(calls, mode, CancellationToken::new(), on_result)
            .await
    }

    /// Like [`Pipeline::execute_batch_with`]; cancelling `cancel` cancels the running calls and every
    /// call not yet started (each still gets its result and audit record).
    pub async fn execute_batch_cancellable(
        self: &Arc<Self>,
        calls: Vec<ToolCall>,
        mode: BatchMode,
        cancel: CancellationToken,
        mut on_result: impl FnMut(usize, &ToolResult),
    ) -> Vec<ToolResult> {
        match mode {
            BatchMode::Sequential { stop_on_error } => {
                let mut results = Vec::with_capacity(calls.len());
                let mut failed_at: Option<usize> = None;
                for (i, call) in calls.into_iter().enumerate() {
                    let result = match failed_at {
                        Some(at) => {
                            self.skip(
                                call,
                                format!("skipped: call {at} of the batch did not succeed"),
                            )
                            .await
                        }
                        None => self.execute_with_cancel(call, cancel.child_token()).await,
                    };
                    if stop_on_error && failed_at.is_none() && result.status != ToolStatus::Success
                    {
                        failed_at = Some(i);
                    }
                    on_result(i, &result);
                    results.push(result);
                }
                results
            }
            BatchMode::Parallel { concurrency } => {
                let permits = Arc::new(Semaphore::new(concurrency.max(1)));
                let mut set = JoinSet::new();
                let n = calls.len();
                for (i, call) in calls.into_iter().enumerate() {
                    let rt = Arc::clone(self);
                    let permits = Arc::clone(&permits);
                    let token = cancel.child_token();
                    set.spawn(async move {
                        // The semaphore is never closed, so acquire only fails if it were.
                        let _permit = permits.acquire_owned().await.ok();
                        (i, rt.execute_with_cancel(call, token).await)
                    });
                }
                let mut slots: Vec<Option<ToolResult>> = (0..n).map(|_| None).collect();
                let mut next = 0;
                while let Some(joined) = set.join_next().await {
                    match joined {
                        Ok((i, r)) => slots[i] = Some(r),
                        Err(e) => tracing::error!(error = %e, "batch task failed"),
                    }
                    while next < n {
                        match &slots[next] {
                            Some(r) => {
                                on_result(next, r);
                                next += 1;
                            }
                            None => break,
                        }
                    }
                }
                slots.into_iter().flatten().collect()
            }
        }
    }
}
