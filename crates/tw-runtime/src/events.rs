//! The live event bus: every execution announces what happens to it, for the desktop app's live view,
//! the MCP server's progress notifications and anyone else who subscribes.
//!
//! A tokio broadcast channel: publishing never waits for subscribers, and a subscriber that falls
//! behind is told how many events it missed instead of slowing the pipeline. Events are built only
//! when someone listens, so the hot path pays nothing for an unobserved bus. Pictures of browser
//! pages ([`EventKind::Frame`]) cost a capture, so they are made only while someone watches every
//! event (the desktop, a live-feed watcher): a caller following its own call does not count.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    /// The process or team replica running the call went away without saying how it ended; the
    /// audit log has what is known.
    Lost {
        /// Who went away.
        reason: String,
    },
    /// Something needs attention (e.g. an audit write failed, a subscriber missed events).
    Warning {
        /// What.
        message: String,
    },
    /// A step of a chain run changed state. The event's execution is the chain's own call
    /// (`chain__NAME`), whose execution id is the run's id; the step's calls announce themselves
    /// under their own execution ids too.
    ChainStep {
        /// The step's id.
        step: String,
        /// Where it is now: `running`, or how it ended.
        status: tw_core::chain::StepStatus,
        /// Calls made so far (retries and `for_each` items count).
        attempts: u32,
        /// The execution ids of its calls (several with `for_each`), once it has ended.
        execution_ids: Vec<String>,
        /// Why it failed, was denied or was skipped.
        detail: Option<String>,
    },
    /// A browser session's page as the call left it, for a person watching (the desktop's live
    /// view); made only while someone watches every event ([`EventBus::has_watchers`]).
    Frame {
        /// Whose session: the agent, then ` / ` and the skill when the call ran under one.
        session: String,
        /// The page's address.
        url: String,
        /// The picture's type (`image/jpeg`).
        mime_type: String,
        /// The picture, base64.
        data: String,
    },
}

impl EventKind {
    /// Whether this is the last event of its call.
    pub fn ends_call(&self) -> bool {
        matches!(
            self,
            Self::Completed { .. }
                | Self::Failed { .. }
                | Self::Timeout { .. }
                | Self::Denied { .. }
                | Self::Lost { .. }
        )
    }
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
    /// The team-store replica that ran the call (`host:pid`), when it was not this process (see
    /// [`crate::team`]); absent for this process's own calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

/// Publishes execution events to any number of subscribers.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<ExecutionEvent>>,
    /// How many subscriptions take every event (not one execution's).
    watchers: Arc<AtomicUsize>,
    /// Told when a subscription to every event begins (the team relay announces it).
    arrived: Arc<tokio::sync::Notify>,
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
            watchers: Arc::new(AtomicUsize::new(0)),
            arrived: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Whether anyone listens (so callers can skip building events).
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Whether anyone watches every event (so pictures of browser pages are worth taking).
    pub fn has_watchers(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    /// Publishes an event. No subscribers is fine.
    pub fn publish(&self, event: ExecutionEvent) {
        // An error only means nobody is listening.
        let _ = self.tx.send(Arc::new(event));
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> Subscription {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        self.arrived.notify_one();
        Subscription {
            rx: self.tx.subscribe(),
            only: None,
            watcher: Some(Watcher(Arc::clone(&self.watchers))),
        }
    }

    /// Every event from now on, without counting as a watcher: the team relay, which forwards
    /// this process's events to the replicas someone watches on.
    pub(crate) fn tap(&self) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            only: None,
            watcher: None,
        }
    }

    /// Returns once a subscription to every event has begun since the last call (at once if
    /// one began meanwhile).
    pub(crate) async fn watcher_arrived(&self) {
        self.arrived.notified().await;
    }

    /// Events of one execution from now on.
    pub fn subscribe_execution(&self, id: ExecutionId) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            only: Some(id),
            watcher: None,
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
    /// Counts this subscription among the bus's watchers while it lives.
    #[allow(dead_code, reason = "held for its Drop")]
    watcher: Option<Watcher>,
}

/// One watcher of every event, counted until dropped.
struct Watcher(Arc<AtomicUsize>);

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_subscriptions_to_every_event_count_as_watchers_and_only_while_they_live() {
        let bus = EventBus::new();
        assert!(!bus.has_watchers());
        let one = bus.subscribe_execution(crate::ids::new_execution_id());
        assert!(bus.has_subscribers());
        assert!(
            !bus.has_watchers(),
            "a caller following its own call is no watcher"
        );
        let all = bus.subscribe();
        let again = bus.clone().subscribe();
        assert!(bus.has_watchers());
        drop(all);
        assert!(bus.has_watchers());
        drop(again);
        assert!(!bus.has_watchers());
        drop(one);
        assert!(!bus.has_subscribers());
    }
}
