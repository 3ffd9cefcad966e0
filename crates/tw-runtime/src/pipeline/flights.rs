//! The calls in flight in this process: how to cancel each by its id, and what the live feed
//! (`crate::live`) tells other processes about them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tw_core::{ExecutionId, ToolCall, TraceId};

use super::Pipeline;

/// A call running in some process, as a watcher first learns of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningCall {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its trace.
    pub trace_id: TraceId,
    /// The tool called.
    pub tool: String,
    /// The calling agent.
    pub agent_id: String,
    /// When the call was taken (µs since the epoch).
    pub started_at: i64,
}

/// A call in flight somewhere on the data directory (or the team store), with the process
/// running it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    /// The process running the call (on its replica's host, for another replica's).
    pub pid: u32,
    /// The team-store replica running the call (`host:pid`), when it is not a process on this
    /// data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The call.
    #[serde(flatten)]
    pub call: RunningCall,
}

/// A call in flight: how to cancel it, and what the live feed says about it.
struct InFlight {
    token: CancellationToken,
    call: RunningCall,
}

/// The calls in flight, by execution id.
#[derive(Default)]
pub(super) struct Flights(Mutex<HashMap<ExecutionId, InFlight>>);

impl Flights {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ExecutionId, InFlight>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keeps an execution cancellable by id while it runs.
pub(super) struct Running<'a> {
    flights: &'a Flights,
    id: ExecutionId,
}

impl<'a> Running<'a> {
    pub(super) fn track(
        flights: &'a Flights,
        call: &ToolCall,
        started_at: i64,
        token: &CancellationToken,
    ) -> Self {
        let flight = InFlight {
            token: token.clone(),
            call: RunningCall {
                execution_id: call.execution_id.clone(),
                trace_id: call.trace_id.clone(),
                tool: call.tool.clone(),
                agent_id: call.caller.agent_id.clone(),
                started_at,
            },
        };
        flights.lock().insert(call.execution_id.clone(), flight);
        Self {
            flights,
            id: call.execution_id.clone(),
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.flights.lock().remove(&self.id);
    }
}

impl Pipeline {
    /// Cancels a running execution. Returns whether it was running.
    pub fn cancel(&self, id: &ExecutionId) -> bool {
        match self.flights.lock().get(id) {
            Some(flight) => {
                flight.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Ids of the executions currently running.
    pub fn running(&self) -> Vec<ExecutionId> {
        self.flights.lock().keys().cloned().collect()
    }

    /// The calls in flight in this process (running or waiting for confirmation), oldest first.
    pub fn running_calls(&self) -> Vec<RunningCall> {
        let mut calls: Vec<RunningCall> = self
            .flights
            .lock()
            .values()
            .map(|f| f.call.clone())
            .collect();
        calls.sort_by_key(|c| c.started_at);
        calls
    }
}
