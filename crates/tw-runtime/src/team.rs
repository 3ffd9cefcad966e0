//! Live events across a team store's replicas: `/api/v1/events` and the desktop's live view on
//! any replica show the calls running on every replica.
//!
//! Each runtime on a team store runs one relay. While someone on its replica watches every event
//! (a [`crate::events::EventBus::subscribe`]), the relay says so on the team's live channel
//! ([`tw_store::TeamChannel`]: a row renewed every [`TICK`] and a message). While some other
//! replica is watched, the relay forwards this process's events there, batched into as few
//! NOTIFY messages as fit; it sends nothing otherwise, so the hot path of a team nobody watches
//! pays nothing, as on one machine. The events another replica sends are published on this
//! runtime's bus with [`ExecutionEvent::replica`] set, so every consumer of the bus sees them
//! without knowing where they came from; browser pictures stay on their replica.
//!
//! A watcher that arrives is told what every replica is running at that moment (each answers
//! its `watching` message with its calls in flight, as `started` events). A replica that goes
//! silent for [`LOST_AFTER`] while calls it announced are open (it was killed, or lost the
//! database) has those calls closed as [`EventKind::Lost`], so the live view does not show them
//! running for ever. A cancel the live view asks for (`POST /api/v1/running/ID/cancel`,
//! `toolwarden cancel`) reaches the replica running the call the same way. The audit log, not
//! this channel, is the record: a message lost on the way costs a line in a live view, never a
//! record.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tw_core::ExecutionId;
use tw_store::{MAX_LIVE_MESSAGE, TeamChannel};

use crate::clock::{Clock as _, SystemClock};
use crate::events::{EventBus, EventKind, ExecutionEvent, Received, Subscription};
use crate::pipeline::{Pipeline, RunningCall};

/// How often a watched replica renews its row, and a forwarding one says it is alive.
pub(crate) const TICK: Duration = Duration::from_secs(5);
/// How long a replica's `watching` holds without being renewed.
const WATCH_TTL: Duration = Duration::from_secs(15);
/// How long a replica with open calls may stay silent before they are closed as lost.
pub(crate) const LOST_AFTER: Duration = Duration::from_secs(15);
/// Most events forwarded in one statement.
const BATCH: usize = 512;
/// Running calls per `running` message.
const RUNNING_PER_MESSAGE: usize = 10;
/// How long a roll call of the calls in flight waits for the replicas' answers.
const ROLL_WAIT: Duration = Duration::from_secs(1);
/// How long a cancel waits for the replica running the call to say it cancelled it.
const CANCEL_WAIT: Duration = Duration::from_secs(3);
/// How long closing the runtime waits for the relay to send what it holds.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How an `events` message begins (as [`pack`] writes it).
const EVENTS_HEAD: &str = "{\"t\":\"events\",";

/// What replicas say to each other on the live channel.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Message {
    /// Someone on `from` watches every event until `until` (µs since the epoch).
    Watching { from: String, until: i64 },
    /// Nobody on `from` watches any more.
    Stopped { from: String },
    /// Events of `from`'s calls, in order.
    Events {
        from: String,
        events: Vec<ExecutionEvent>,
    },
    /// What `from` runs right now, for the watcher on `to` that just arrived, or in answer to
    /// `to`'s roll call `ask`.
    Running {
        from: String,
        to: String,
        running: Vec<RunningCall>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ask: Option<u64>,
    },
    /// `from` asks every replica what it runs (question `ask`).
    RollCall { from: String, ask: u64 },
    /// `from` forwards events and is still there.
    Alive { from: String },
    /// `from` asks whoever runs `execution_id` to cancel it; `ask` numbers the question.
    Cancel {
        from: String,
        ask: u64,
        execution_id: ExecutionId,
    },
    /// `from` ran the call `to` asked about (question `ask`) and cancelled it.
    Cancelled { from: String, to: String, ask: u64 },
}

/// A runtime's relay; dropping it stops the relay without flushing (`close` flushes).
pub(crate) struct Relay {
    close: mpsc::Sender<oneshot::Sender<()>>,
    cancels: mpsc::Sender<(ExecutionId, oneshot::Sender<()>)>,
    rolls: mpsc::Sender<Answers>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Relay {
    /// Starts relaying: reads which other replicas are watched first, so a short-lived process
    /// (one CLI call) forwards its events from its first call on.
    pub(crate) async fn start(
        channel: TeamChannel,
        bus: EventBus,
        pipeline: Weak<Pipeline>,
    ) -> Self {
        let incoming = channel.subscribe();
        let watched = match channel.watchers(SystemClock.now_us()).await {
            Ok(rows) => rows.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read which replicas are watched");
                HashMap::new()
            }
        };
        let mut relay = State {
            me: channel.replica().to_owned(),
            channel,
            tap: None,
            bus,
            pipeline,
            watched,
            watching: false,
            remote: HashMap::new(),
            asked: HashMap::new(),
            rolls: HashMap::new(),
            asks: 0,
        };
        relay.tap_if_watched();
        let (close, closing) = mpsc::channel(1);
        let (cancels, cancelling) = mpsc::channel(16);
        let (rolls, calling) = mpsc::channel(16);
        Self {
            close,
            cancels,
            rolls,
            task: tokio::spawn(relay.run(incoming, closing, cancelling, calling)),
        }
    }

    /// What the other replicas run, as they answer within [`ROLL_WAIT`] (a replica running
    /// nothing does not answer).
    pub(crate) async fn running_elsewhere(&self) -> Vec<(String, Vec<RunningCall>)> {
        let (answers, mut heard) = mpsc::unbounded_channel();
        if self.rolls.send(answers).await.is_err() {
            return Vec::new();
        }
        let mut out: Vec<(String, Vec<RunningCall>)> = Vec::new();
        let deadline = tokio::time::sleep(ROLL_WAIT);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                answer = heard.recv() => match answer {
                    // A replica with many calls answers in several messages.
                    Some((replica, calls)) => match out.iter_mut().find(|(r, _)| *r == replica) {
                        Some((_, known)) => known.extend(calls),
                        None => out.push((replica, calls)),
                    },
                    None => break,
                },
            }
        }
        out
    }

    /// Asks the other replicas to cancel `id`; true once one says it did (within
    /// [`CANCEL_WAIT`]: a replica that does not run the call does not answer).
    pub(crate) async fn cancel(&self, id: &ExecutionId) -> bool {
        let (done, wait) = oneshot::channel();
        if self.cancels.send((id.clone(), done)).await.is_err() {
            return false;
        }
        matches!(tokio::time::timeout(CANCEL_WAIT, wait).await, Ok(Ok(())))
    }

    /// Sends what the relay holds, says nobody watches here any more, and stops (waiting at most
    /// [`CLOSE_WAIT`]).
    pub(crate) async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.close.send(done).await.is_ok() {
            let _ = tokio::time::timeout(CLOSE_WAIT, wait).await;
        }
    }
}

/// Where the answers to a roll call go: each replica's name and calls in flight.
type Answers = mpsc::UnboundedSender<(String, Vec<RunningCall>)>;

/// Another replica's calls this runtime has shown as open, and when it was last heard from.
struct Remote {
    heard: Instant,
    open: HashMap<ExecutionId, (tw_core::TraceId, String)>,
}

struct State {
    me: String,
    channel: TeamChannel,
    bus: EventBus,
    pipeline: Weak<Pipeline>,
    /// This process's events while some other replica is watched.
    tap: Option<Subscription>,
    /// The other replicas someone watches, and until when.
    watched: HashMap<String, i64>,
    /// Whether this replica has said it is watched.
    watching: bool,
    remote: HashMap<String, Remote>,
    /// Cancels asked of the other replicas and not answered yet, by question number.
    asked: HashMap<u64, oneshot::Sender<()>>,
    /// Roll calls still listening for answers, by question number.
    rolls: HashMap<u64, Answers>,
    asks: u64,
}

impl State {
    async fn run(
        mut self,
        mut incoming: tokio::sync::broadcast::Receiver<Arc<str>>,
        mut closing: mpsc::Receiver<oneshot::Sender<()>>,
        mut cancelling: mpsc::Receiver<(ExecutionId, oneshot::Sender<()>)>,
        mut calling: mpsc::Receiver<Answers>,
    ) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                done = closing.recv() => {
                    self.forward_queued(Vec::new()).await;
                    if self.watching {
                        self.stop_watching().await;
                    }
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                    return;
                }
                Some((execution_id, done)) = cancelling.recv() => {
                    self.asks += 1;
                    // Questions nobody answered are dropped with their askers.
                    self.asked.retain(|_, waiting| !waiting.is_closed());
                    self.asked.insert(self.asks, done);
                    self.send(&[Message::Cancel {
                        from: self.me.clone(),
                        ask: self.asks,
                        execution_id,
                    }])
                    .await;
                }
                Some(answers) = calling.recv() => {
                    self.asks += 1;
                    self.rolls.retain(|_, waiting| !waiting.is_closed());
                    self.rolls.insert(self.asks, answers);
                    self.send(&[Message::RollCall {
                        from: self.me.clone(),
                        ask: self.asks,
                    }])
                    .await;
                }
                () = self.bus.watcher_arrived() => {
                    if !self.watching && self.bus.has_watchers() {
                        self.announce().await;
                    }
                }
                heard = incoming.recv() => match heard {
                    Ok(text) => self.hear(&text).await,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "fell behind the team's live channel");
                    }
                    Err(RecvError::Closed) => return,
                },
                first = next(&mut self.tap) => match first {
                    Some(first) => self.forward_queued(vec![first]).await,
                    None => self.tap = None,
                },
                _ = tick.tick() => self.tick().await,
            }
        }
    }

    fn now() -> i64 {
        SystemClock.now_us()
    }

    /// Taps the bus while some other replica is watched, and lets go once none is.
    fn tap_if_watched(&mut self) {
        let now = Self::now();
        self.watched.retain(|_, until| *until > now);
        if self.watched.is_empty() {
            self.tap = None;
        } else if self.tap.is_none() {
            self.tap = Some(self.bus.tap());
        }
    }

    async fn send(&self, messages: &[Message]) {
        let texts: Vec<String> = messages
            .iter()
            .filter_map(|m| serde_json::to_string(m).ok())
            .filter(|t| t.len() <= MAX_LIVE_MESSAGE)
            .collect();
        if let Err(e) = self.channel.send(&texts).await {
            tracing::debug!(error = %e, "could not send on the team's live channel");
        }
    }

    /// Says (again) that someone here watches.
    async fn announce(&mut self) {
        let until = Self::now() + i64::try_from(WATCH_TTL.as_micros()).unwrap_or(i64::MAX);
        if let Err(e) = self.channel.set_watching(Some(until)).await {
            tracing::warn!(error = %e, "cannot tell the other replicas this one is watched");
        }
        self.send(&[Message::Watching {
            from: self.me.clone(),
            until,
        }])
        .await;
        self.watching = true;
    }

    async fn stop_watching(&mut self) {
        if let Err(e) = self.channel.set_watching(None).await {
            tracing::debug!(error = %e, "cannot withdraw this replica's watching");
        }
        self.send(&[Message::Stopped {
            from: self.me.clone(),
        }])
        .await;
        self.watching = false;
        self.remote.clear();
    }

    async fn tick(&mut self) {
        if self.bus.has_watchers() {
            self.announce().await;
        } else if self.watching {
            self.stop_watching().await;
        }
        self.tap_if_watched();
        if self.tap.is_some() {
            self.send(&[Message::Alive {
                from: self.me.clone(),
            }])
            .await;
        }
        self.close_lost();
    }

    /// Closes the open calls of replicas silent for [`LOST_AFTER`].
    fn close_lost(&mut self) {
        let now = Instant::now();
        let lost: Vec<String> = self
            .remote
            .iter()
            .filter(|(_, r)| now.duration_since(r.heard) >= LOST_AFTER)
            .map(|(name, _)| name.clone())
            .collect();
        for name in lost {
            let Some(remote) = self.remote.remove(&name) else {
                continue;
            };
            for (execution_id, (trace_id, tool)) in remote.open {
                self.bus.publish(ExecutionEvent {
                    execution_id,
                    trace_id,
                    tool,
                    at: Self::now(),
                    kind: EventKind::Lost {
                        reason: format!(
                            "replica {name} stopped reporting; the audit log has how the call ended"
                        ),
                    },
                    replica: Some(name.clone()),
                });
            }
        }
    }

    async fn hear(&mut self, text: &str) {
        // Most of what a replica nobody watches hears is other replicas' events: not even read.
        if text.starts_with(EVENTS_HEAD) && !self.bus.has_watchers() {
            return;
        }
        let message: Message = match serde_json::from_str(text) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "an unreadable message on the team's live channel");
                return;
            }
        };
        match message {
            Message::Watching { from, until } if from != self.me => {
                let now = Self::now();
                let new = self
                    .watched
                    .insert(from.clone(), until)
                    .is_none_or(|was| was <= now);
                // Tapped before the snapshot, so a call starting in between is in one or both.
                self.tap_if_watched();
                if new {
                    self.tell_running(from, None).await;
                }
            }
            Message::Stopped { from } => {
                self.watched.remove(&from);
                self.tap_if_watched();
            }
            Message::Events { from, events } if from != self.me => {
                if !self.bus.has_watchers() {
                    return;
                }
                let bus = self.bus.clone();
                let remote = self.remote_heard(&from);
                for event in events {
                    if event.kind.ends_call() {
                        remote.open.remove(&event.execution_id);
                    } else {
                        remote.open.insert(
                            event.execution_id.clone(),
                            (event.trace_id.clone(), event.tool.clone()),
                        );
                    }
                    bus.publish(ExecutionEvent {
                        replica: Some(from.clone()),
                        ..event
                    });
                }
            }
            Message::Running {
                from,
                to,
                running,
                ask: Some(ask),
            } if to == self.me => {
                if let Some(answers) = self.rolls.get(&ask) {
                    let _ = answers.send((from, running));
                }
            }
            Message::RollCall { from, ask } if from != self.me => {
                self.tell_running(from, Some(ask)).await;
            }
            Message::Running {
                from,
                to,
                running,
                ask: None,
            } if to == self.me && from != self.me => {
                if !self.bus.has_watchers() {
                    return;
                }
                let bus = self.bus.clone();
                let remote = self.remote_heard(&from);
                for call in running {
                    remote.open.insert(
                        call.execution_id.clone(),
                        (call.trace_id.clone(), call.tool.clone()),
                    );
                    bus.publish(ExecutionEvent {
                        execution_id: call.execution_id,
                        trace_id: call.trace_id,
                        tool: call.tool,
                        at: call.started_at,
                        kind: EventKind::Started,
                        replica: Some(from.clone()),
                    });
                }
            }
            Message::Cancel {
                from,
                ask,
                execution_id,
            } if from != self.me => {
                let found = self
                    .pipeline
                    .upgrade()
                    .is_some_and(|p| p.cancel(&execution_id));
                if found {
                    self.send(&[Message::Cancelled {
                        from: self.me.clone(),
                        to: from,
                        ask,
                    }])
                    .await;
                }
            }
            Message::Cancelled { to, ask, .. } if to == self.me => {
                if let Some(done) = self.asked.remove(&ask) {
                    let _ = done.send(());
                }
            }
            Message::Alive { from } if from != self.me => {
                if let Some(remote) = self.remote.get_mut(&from) {
                    remote.heard = Instant::now();
                }
            }
            _ => {}
        }
    }

    fn remote_heard(&mut self, from: &str) -> &mut Remote {
        let remote = self
            .remote
            .entry(from.to_owned())
            .or_insert_with(|| Remote {
                heard: Instant::now(),
                open: HashMap::new(),
            });
        remote.heard = Instant::now();
        remote
    }

    /// Tells a watcher that just arrived (or, with `ask`, a roll call) what this process is
    /// running.
    async fn tell_running(&self, to: String, ask: Option<u64>) {
        let Some(pipeline) = self.pipeline.upgrade() else {
            return;
        };
        let running = pipeline.running_calls();
        drop(pipeline);
        let messages: Vec<Message> = running
            .chunks(RUNNING_PER_MESSAGE)
            .map(|calls| Message::Running {
                from: self.me.clone(),
                to: to.clone(),
                running: calls.to_vec(),
                ask,
            })
            .collect();
        self.send(&messages).await;
    }

    /// Forwards `first` and whatever else the tap holds, in as few messages as fit.
    async fn forward_queued(&mut self, first: Vec<Received>) {
        let Some(tap) = self.tap.as_mut() else {
            return;
        };
        let mut received = first;
        while received.len() < BATCH {
            match tap.try_recv() {
                Some(r) => received.push(r),
                None => break,
            }
        }
        let mut events = Vec::with_capacity(received.len());
        for r in received {
            match r {
                // Another replica's events came through here; browser pictures stay home.
                Received::Event(e) if e.replica.is_some() => {}
                Received::Event(e) if matches!(e.kind, EventKind::Frame { .. }) => {}
                Received::Event(e) => events.push(e),
                Received::Missed(n) => {
                    tracing::warn!(
                        missed = n,
                        "the team relay fell behind this process's events"
                    );
                }
            }
        }
        let texts = pack(&self.me, &events);
        if let Err(e) = self.channel.send(&texts).await {
            tracing::debug!(error = %e, "could not forward events to the team");
        }
    }
}

/// The next event the tap holds; never, without a tap.
async fn next(tap: &mut Option<Subscription>) -> Option<Received> {
    match tap {
        Some(t) => t.recv().await,
        None => std::future::pending().await,
    }
}

/// `events` as `events` messages of at most [`MAX_LIVE_MESSAGE`] bytes each, in order. An event
/// too long for one message has its text shortened; one that still does not fit is left out.
fn pack(from: &str, events: &[Arc<ExecutionEvent>]) -> Vec<String> {
    let head = format!(
        "{EVENTS_HEAD}\"from\":{},\"events\":[",
        serde_json::to_string(from).unwrap_or_default()
    );
    let room = MAX_LIVE_MESSAGE.saturating_sub(head.len() + 2);
    let mut out = Vec::new();
    let mut current = head.clone();
    for event in events {
        let Some(text) = fit(event, room) else {
            tracing::warn!(execution_id = %event.execution_id, "an event too long for the team's live channel is shown only on this replica");
            continue;
        };
        if current.len() + text.len() + 2 > MAX_LIVE_MESSAGE {
            current.push_str("]}");
            out.push(std::mem::replace(&mut current, head.clone()));
        }
        if current.len() > head.len() {
            current.push(',');
        }
        current.push_str(&text);
    }
    if current.len() > head.len() {
        current.push_str("]}");
        out.push(current);
    }
    out
}

/// `event` as JSON of at most `room` bytes, its free text cut if need be.
fn fit(event: &ExecutionEvent, room: usize) -> Option<String> {
    let text = serde_json::to_string(event).ok()?;
    if text.len() <= room {
        return Some(text);
    }
    let mut event = event.clone();
    let mut over = text.len() - room;
    // A byte cut from the text shortens its JSON by at least a byte (escaping only lengthens),
    // so one cut does it; the loop is for the ellipsis.
    for _ in 0..3 {
        let long = free_text(&mut event.kind)?;
        let mut keep = long.len().saturating_sub(over + 8);
        while !long.is_char_boundary(keep) {
            keep -= 1;
        }
        long.truncate(keep);
        long.push('…');
        let text = serde_json::to_string(&event).ok()?;
        if text.len() <= room {
            return Some(text);
        }
        over = text.len() - room;
    }
    None
}

/// The free text of an event, the part that may be shortened.
fn free_text(kind: &mut EventKind) -> Option<&mut String> {
    match kind {
        EventKind::InProgress { text, .. } => Some(text),
        EventKind::Failed { message, .. } | EventKind::Warning { message } => Some(message),
        EventKind::Denied { reason, .. }
        | EventKind::Lost { reason }
        | EventKind::ConfirmationRequested { reason, .. } => Some(reason),
        EventKind::ChainStep {
            detail: Some(detail),
            ..
        } => Some(detail),
        _ => None,
    }
}

#[cfg(test)]
#[path = "team_tests.rs"]
mod tests;
