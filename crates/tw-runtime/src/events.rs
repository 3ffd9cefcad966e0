//! The live event bus: every execution announces what happens to it, for the desktop app's live view,
//! the MCP server's progress notifications and anyone else who subscribes.
//!
//! A tokio broadcast channel: publishing never waits for subscribers, and a subscriber that falls
//! behind is told how many events it missed instead of slowing the pipeline. Events are built only
//! when someone listens, so the hot path pays nothing for an unobserved bus.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tw_core::{ExecutionId, ToolStatus, TraceId};

/// Buffered events per subscriber before it starts missing some.
pub const EVENT_CAPACITY: usize = 4096;

/// Which output stream a progress chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The tool began running (the call passed policy, validation and confirmation).
    Started,
    /// The running tool produced output.
    InProgress {
        /// Which stream.
        stream: Stream,
        /// The chunk, lossily decoded and capped.
        text: String,
    },
    /// The call succeeded.
    Completed {
        /// Always `success`.
        status: ToolStatus,
        /// How long the call took.
        duration_us: i64,
    },
    /// The call ran and failed, was cancelled, or its sandbox could not be set up.
    Failed {
        /// The final status.
        status: ToolStatus,
        /// Error code.
        code: String,
        /// Error message.
        message: String,
    },
    /// The call hit its time limit.
    Timeout {
        /// How long it ran.
        duration_us: i64,
    },
    /// The call was stopped before running: not found, denied, invalid or awaiting confirmation.
    Denied {
        /// The final status.
        status: ToolStatus,
        /// Why.
        reason: String,
    },
    /// The call waits for a person's approval.
    ConfirmationRequested {
        /// The pending request's id (`toolwarden confirm approve ID`).
        confirmation_id: String,
        /// Why policy asked.
        reason: String,
        /// When the request expires and the call is denied (µs since the epoch).
        expires_at: i64,
    },
    /// The request was answered, expired or withdrawn.
    ConfirmationResolved {
        /// The request's id.
        confirmation_id: String,
        /// `approved`, `denied` or `expired`.
        state: String,
        /// Who answered, if anyone did.
        by: Option<String>,
    },
    /// Something needs attention (e.g. an audit write failed, a subscriber missed events).
    Warning {
        /// What.
        message: String,
    },
}

/// One event of one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionEvent {
    /// The execution.
    pub execution_id: ExecutionId,
    /// Its trace.
    pub trace_id: TraceId,
    /// The tool as called.
    pub tool: String,
    /// When (µs since the epoch).
    pub at: i64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Publishes execution events to any number of subscribers.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<ExecutionEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    /// A bus with [`EVENT_CAPACITY`] buffered events per subscriber.
    pub fn new() -> Self {
        Self {
            tx: broadcast::channel(EVENT_CAPACITY).0,
        }
    }

    /// Whether anyone listens (so callers can skip building events).
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Publishes an event. No subscribers is fine.
    pub fn publish(&self, event: ExecutionEvent) {
        // An error only means nobody is listening.
        let _ = self.tx.send(Arc::new(event));
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            only: None,
        }
    }

    /// Events of one execution from now on.
    pub fn subscribe_execution(&self, id: ExecutionId) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            only: Some(id),
        }
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// An event.
    Event(Arc<ExecutionEvent>),
    /// The subscriber fell behind and this many events were dropped for it.
    Missed(u64),
}

/// A subscriber's end of the bus.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<ExecutionEvent>>,
    only: Option<ExecutionId>,
}

impl Subscription {
    /// The next event (for this subscription's execution, if filtered); `None` once the bus is gone.
    pub async fn recv(&mut self) -> Option<Received> {
        loop {
            match self.rx.recv().await {
                Ok(ev) => {
                    if self.only.as_ref().is_none_or(|id| *id == ev.execution_id) {
                        return Some(Received::Event(ev));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => return Some(Received::Missed(n)),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next already-queued event without waiting.
    pub fn try_recv(&mut self) -> Option<Received> {
        loop {
            match self.rx.try_recv() {
                Ok(ev) => {
                    if self.only.as_ref().is_none_or(|id| *id == ev.execution_id) {
                        return Some(Received::Event(ev));
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(n)) => return Some(Received::Missed(n)),
                Err(_) => return None,
            }
        }
    }
}
