//! Small views more than one page shows: status badges, JSON blocks (with risky members marked),
//! policy explanation lines, and the loading and error states of anything loaded.

use leptos::prelude::*;
use serde_json::Value;
use tw_protocol::LayerLine;

use crate::app::Load;
use crate::logic::json_view;
use crate::logic::tone::tone;

/// A word from the wire in its status colour.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn Badge(#[prop(into)] word: String) -> impl IntoView {
    let class = format!("badge {}", tone(&word).class());
    view! { <span class=class>{word}</span> }
}

/// A JSON value, pretty-printed; the members the `risky` pointers name are marked.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn JsonBlock(
    value: Value,
    #[prop(optional)] risky: Vec<String>,
    #[prop(optional, into)] id: Option<String>,
) -> impl IntoView {
    let spans = json_view::spans(&value, &risky)
        .into_iter()
        .map(|s| {
            if s.risky {
                view! { <mark class="risky">{s.text}</mark> }.into_any()
            } else {
                view! { <span>{s.text}</span> }.into_any()
            }
        })
        .collect_view();
    view! { <pre class="json" id=id>{spans}</pre> }
}

/// The text of one explanation line, as the end-to-end tests read it: `layer: decision — reason`.
pub(crate) fn trace_text(line: &LayerLine) -> String {
    format!("{}: {} — {}", line.layer, line.decision, line.reason)
}

/// A policy decision, layer by layer; the deciding rule (with its source) beside each line.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn Trace(lines: Vec<LayerLine>) -> impl IntoView {
    if lines.is_empty() {
        return view! { <p class="muted">"No explanation recorded."</p> }.into_any();
    }
    let items = lines
        .into_iter()
        .map(|line| {
            let class = format!("trace-item {}", tone(&line.decision).class());
            let rule = line.rule.clone();
            view! {
                <li class=class>
                    <span class="trace-line">{trace_text(&line)}</span>
                    {rule.map(|r| view! { <span class="trace-rule">{r}</span> })}
                </li>
            }
        })
        .collect_view();
    view! { <ul class="trace">{items}</ul> }.into_any()
}

/// The placeholder for something not loaded: `Loading…`, or the error in a box. `None` once it
/// is ready (the caller renders it).
pub(crate) fn load_state<T>(load: &Load<T>, what: &str) -> Option<AnyView> {
    match load {
        Load::Idle | Load::Loading => {
            Some(view! { <p class="loading">{format!("Loading {what}…")}</p> }.into_any())
        }
        Load::Failed(e) => Some(
            view! {
                <div class="error-box" role="alert">
                    <strong>{format!("Could not load {what}")}</strong>
                    <span>{e.clone()}</span>
                </div>
            }
            .into_any(),
        ),
        Load::Ready(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn trace_lines_read_layer_decision_reason() {
        let line = LayerLine {
            layer: "confirmation".into(),
            decision: "ask".into(),
            rule: Some("policy.toml:12".into()),
            reason: "delete_file asks before every call".into(),
        };
        assert_eq!(
            trace_text(&line),
            "confirmation: ask — delete_file asks before every call"
        );
    }
}

/// An editor's check as the person types: only the latest check runs and answers. A check
/// scheduled before a later keystroke does not run, and an answer to an older check is dropped.
#[derive(Clone, Copy)]
pub(crate) struct LatestCheck {
    turn: RwSignal<u64>,
    /// Set from a keystroke until its check has answered.
    busy: RwSignal<bool>,
}

impl LatestCheck {
    pub(crate) fn new() -> Self {
        Self {
            turn: RwSignal::new(0),
            busy: RwSignal::new(false),
        }
    }

    /// Whether a check is pending (reactive).
    pub(crate) fn busy(self) -> bool {
        self.busy.get()
    }

    /// Runs `check` with a new turn at once.
    pub(crate) fn now(self, check: impl FnOnce(u64)) {
        check(self.next());
    }

    /// Runs `check` with a new turn once `after` has passed without another turn.
    pub(crate) fn after(self, after: std::time::Duration, check: impl FnOnce(u64) + 'static) {
        let turn = self.next();
        set_timeout(
            move || {
                if self.is_latest(turn) {
                    check(turn);
                }
            },
            after,
        );
    }

    /// Whether `turn` is still the latest (its answer is worth showing).
    pub(crate) fn is_latest(self, turn: u64) -> bool {
        self.turn.get_untracked() == turn
    }

    /// The latest check has answered.
    pub(crate) fn done(self) {
        self.busy.set(false);
    }

    /// Drops any check pending or under way (the text was replaced).
    pub(crate) fn cancel(self) {
        self.next();
        self.busy.set(false);
    }

    fn next(self) -> u64 {
        let turn = self.turn.get_untracked() + 1;
        self.turn.set(turn);
        self.busy.set(true);
        turn
    }
}
