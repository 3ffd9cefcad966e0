//! The live view's memory: `tw://execution` events grouped per call, newest call first, with a
//! pause that buffers what arrives (so a person can read without the list moving) and bounds on
//! everything kept, since the app may run for days.

use std::collections::VecDeque;

use tw_protocol::LiveEvent;

/// Calls kept; older ones fall off the end.
pub(crate) const MAX_EXECUTIONS: usize = 300;
/// Events kept per call (a chatty tool's progress lines); the first and the latest are kept.
pub(crate) const MAX_EVENTS: usize = 200;
/// Events buffered while paused; beyond it the oldest buffered are dropped (and counted).
pub(crate) const MAX_BUFFERED: usize = 5_000;

/// One call and what happened to it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Execution {
    pub(crate) execution_id: String,
    pub(crate) tool: String,
    /// Its events in arrival order (a middle part is dropped beyond [`MAX_EVENTS`]).
    pub(crate) events: Vec<LiveEvent>,
    /// The final status, once an event carried one.
    pub(crate) status: Option<String>,
    /// Events dropped to respect [`MAX_EVENTS`].
    pub(crate) dropped: usize,
}

impl Execution {
    /// When its first event happened, µs.
    pub(crate) fn started_at(&self) -> i64 {
        self.events.first().map_or(0, |e| e.at)
    }

    /// Whether it has not ended yet (no event carried a final status).
    pub(crate) fn running(&self) -> bool {
        self.status.is_none()
    }

    /// How long it ran (until its final event) or has been running (until `now_us`).
    pub(crate) fn elapsed_us(&self, now_us: i64) -> i64 {
        let end = if self.running() {
            now_us
        } else {
            self.events.last().map_or(now_us, |e| e.at)
        };
        end.saturating_sub(self.started_at()).max(0)
    }

    /// The word its badge shows: the final status, else the latest event's kind.
    pub(crate) fn state_word(&self) -> &str {
        match &self.status {
            Some(s) => s,
            None => self.events.last().map_or("started", |e| e.kind.as_str()),
        }
    }

    fn matches(&self, needle: &str) -> bool {
        let has = |s: &str| s.to_lowercase().contains(needle);
        has(&self.tool)
            || has(&self.execution_id)
            || self.status.as_deref().is_some_and(has)
            || self
                .events
                .iter()
                .any(|e| has(&e.kind) || e.detail.as_deref().is_some_and(has))
    }
}

/// Every call seen, and what is held back while paused.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LiveLog {
    /// Newest call first.
    executions: VecDeque<Execution>,
    paused: bool,
    buffer: VecDeque<LiveEvent>,
    /// Buffered events dropped to respect [`MAX_BUFFERED`].
    lost: usize,
}

impl LiveLog {
    /// Takes one event in: shown at once, or held while paused.
    pub(crate) fn push(&mut self, event: LiveEvent) {
        if self.paused {
            if self.buffer.len() == MAX_BUFFERED {
                self.buffer.pop_front();
                self.lost += 1;
            }
            self.buffer.push_back(event);
        } else {
            self.apply(event);
        }
    }

    /// Pauses or resumes; resuming shows the held events in the order they came.
    pub(crate) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        if !paused {
            while let Some(event) = self.buffer.pop_front() {
                self.apply(event);
            }
        }
    }

    pub(crate) fn paused(&self) -> bool {
        self.paused
    }

    /// How many events are held back by the pause.
    pub(crate) fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// How many held events were dropped because the buffer was full.
    pub(crate) fn lost(&self) -> usize {
        self.lost
    }

    /// The call `execution_id`, if its events are kept.
    pub(crate) fn execution(&self, execution_id: &str) -> Option<&Execution> {
        self.executions
            .iter()
            .find(|e| e.execution_id == execution_id)
    }

    /// The calls whose tool, id, status, event kinds or details contain `text` (any case), newest
    /// first.
    pub(crate) fn filtered(&self, text: &str) -> Vec<Execution> {
        let needle = text.trim().to_lowercase();
        self.executions
            .iter()
            .filter(|e| needle.is_empty() || e.matches(&needle))
            .cloned()
            .collect()
    }

    fn apply(&mut self, event: LiveEvent) {
        let pos = self
            .executions
            .iter()
            .position(|e| e.execution_id == event.execution_id);
        let exec = match pos {
            Some(i) => &mut self.executions[i],
            None => {
                if self.executions.len() == MAX_EXECUTIONS {
                    self.executions.pop_back();
                }
                self.executions.push_front(Execution {
                    execution_id: event.execution_id.clone(),
                    tool: event.tool.clone(),
                    events: Vec::new(),
                    status: None,
                    dropped: 0,
                });
                &mut self.executions[0]
            }
        };
        if event.status.is_some() {
            exec.status.clone_from(&event.status);
        }
        if exec.events.len() == MAX_EVENTS {
            // Keep the first (the start) and the latest; drop the oldest after the first.
            exec.events.remove(1);
            exec.dropped += 1;
        }
        exec.events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn ev(id: &str, kind: &str, status: Option<&str>, at: i64) -> LiveEvent {
        LiveEvent {
            execution_id: id.to_owned(),
            tool: format!("tool-{id}"),
            kind: kind.to_owned(),
            status: status.map(str::to_owned),
            at,
            detail: None,
            chain_step: None,
        }
    }

    /// (id, state word, running, number of events) per call, newest first.
    fn summary(log: &LiveLog, filter: &str) -> Vec<(String, String, bool, usize)> {
        log.filtered(filter)
            .iter()
            .map(|e| {
                (
                    e.execution_id.clone(),
                    e.state_word().to_owned(),
                    e.running(),
                    e.events.len(),
                )
            })
            .collect()
    }

    fn row(id: &str, word: &str, running: bool, n: usize) -> (String, String, bool, usize) {
        (id.to_owned(), word.to_owned(), running, n)
    }

    #[test]
    fn events_group_per_call_newest_call_first() {
        let mut log = LiveLog::default();
        log.push(ev("a", "started", None, 10));
        log.push(ev("b", "started", None, 20));
        log.push(ev("a", "progress", None, 30));
        log.push(ev("a", "completed", Some("success"), 40));
        log.push(ev("b", "awaiting_confirmation", None, 50));
        assert_eq!(
            summary(&log, ""),
            vec![
                row("b", "awaiting_confirmation", true, 2),
                row("a", "success", false, 3)
            ]
        );
        let a = &log.filtered("tool-a")[0];
        assert_eq!((a.elapsed_us(1_000), a.started_at()), (30, 10));
        let b = &log.filtered("AWAITING")[0];
        assert_eq!(b.elapsed_us(1_000), 980);
    }

    #[test]
    fn a_pause_holds_events_until_resumed_in_order() {
        let mut log = LiveLog::default();
        log.push(ev("a", "started", None, 1));
        log.set_paused(true);
        log.push(ev("a", "failed", Some("failed"), 2));
        log.push(ev("c", "started", None, 3));
        assert_eq!(
            (summary(&log, ""), log.buffered(), log.paused()),
            (vec![row("a", "started", true, 1)], 2, true)
        );
        log.set_paused(false);
        assert_eq!(
            (summary(&log, ""), log.buffered(), log.paused()),
            (
                vec![row("c", "started", true, 1), row("a", "failed", false, 2)],
                0,
                false
            )
        );
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let mut log = LiveLog::default();
        for i in 0..MAX_EXECUTIONS + 5 {
            log.push(ev(&i.to_string(), "started", None, 0));
        }
        for at in 0..MAX_EVENTS as i64 + 3 {
            log.push(ev("chatty", "progress", None, at));
        }
        let all = log.filtered("");
        assert_eq!(all.len(), MAX_EXECUTIONS);
        let chatty = &all[0];
        assert_eq!(
            (
                chatty.events.len(),
                chatty.dropped,
                chatty.events[0].at,
                chatty.events[1].at
            ),
            (MAX_EVENTS, 3, 0, 4)
        );
        log.set_paused(true);
        for _ in 0..MAX_BUFFERED + 2 {
            log.push(ev("x", "progress", None, 0));
        }
        assert_eq!((log.buffered(), log.lost()), (MAX_BUFFERED, 2));
    }
}
