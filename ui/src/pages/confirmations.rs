//! Calls held for a person. The dialog puts the oldest pending call in front of whatever page is
//! open (with its arguments, the risky ones marked, why policy asked, and a live countdown); the
//! page lists the whole queue for batch answers, and the grants under it.

use leptos::prelude::*;
use tw_protocol::{AnswerParams, AnswerResponse, Confirmation, Decision, IpcError, commands};

use crate::app::AppState;
use crate::browser;
use crate::ipc;
use crate::logic::nav::enter_armed;
use crate::logic::time::countdown;
use crate::pages::grants::GrantsList;
use crate::widgets::{Badge, JsonBlock, Trace, load_state};

/// How long an "Approve and remember" grant may last: seconds and label.
pub(crate) const REMEMBER: [(u64, &str); 3] = [(600, "10 min"), (3600, "1 h"), (86_400, "1 day")];

/// What answering said, in words, when it is not the plain outcome asked for (the call expired,
/// someone else answered first).
pub(crate) fn outcome_note(
    tool: &str,
    decision: Decision,
    answer: &AnswerResponse,
) -> Option<String> {
    let expected = match decision {
        Decision::Approve => "approved",
        Decision::Deny => "denied",
    };
    if answer.outcome == expected {
        return answer
            .grant_id
            .as_ref()
            .map(|g| format!("{tool}: approved and remembered (grant {g})"));
    }
    Some(format!("{tool}: {}", answer.outcome.replace('_', " ")))
}

/// How an approval is remembered as a grant: for how long, which calls, whose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Remembered {
    pub(crate) secs: u64,
    /// `exact` (these arguments) or `tool` (every call of the tool).
    pub(crate) scope: &'static str,
    pub(crate) any_caller: bool,
}

/// Answers one confirmation; the outcome goes to the notice, errors to the banner.
async fn answer(
    state: AppState,
    c: &Confirmation,
    decision: Decision,
    remember: Option<Remembered>,
) -> bool {
    let params = AnswerParams {
        id: c.id.clone(),
        decision,
        remember_secs: remember.map(|r| r.secs),
        remember_scope: remember.map(|r| r.scope.to_owned()),
        any_caller: remember.is_some_and(|r| r.any_caller),
        note: None,
    };
    let r: Result<AnswerResponse, IpcError> =
        ipc::invoke(commands::ANSWER_CONFIRMATION, &params).await;
    match r {
        Ok(a) => {
            if let Some(note) = outcome_note(&c.tool, decision, &a) {
                state.notice.set(Some(note));
            }
            true
        }
        Err(e) => {
            state.report(&e);
            false
        }
    }
}

/// The modal dialog for the oldest pending confirmation; absent while none is pending.
/// What a held call would touch, as its tool saw it: for a browser action the page and each
/// element's role and accessible name (page text, shown as text).
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
fn Touches(context: serde_json::Value) -> impl IntoView {
    let text = |key: &str| context[key].as_str().unwrap_or_default().to_owned();
    let page = text("page");
    let title = text("title");
    let elements: Vec<String> = context["elements"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    view! {
        <dl class="facts confirm-context">
            <dt>"Page"</dt>
            <dd class="confirm-page">{page} " " <span class="muted">{title}</span></dd>
            <dt>"Element"</dt>
            <dd class="confirm-elements">
                {elements.into_iter().map(|e| view! { <div>{e}</div> }).collect::<Vec<_>>()}
            </dd>
        </dl>
    }
}

#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ConfirmDialog(state: AppState) -> impl IntoView {
    // Re-render only when the confirmation in front changes, not on every poll.
    let front = Memo::new(move |_| {
        state
            .confirmations
            .with(|c| c.ready().and_then(|l| l.first()).map(|c| c.id.clone()))
    });
    move || {
        front.get().and_then(|id| {
            state
                .confirmations
                .with_untracked(|c| {
                    c.ready()
                        .and_then(|l| l.iter().find(|c| c.id == id).cloned())
                })
                .map(|c| view! { <DialogBody state c/> })
        })
    }
}

#[component]
fn DialogBody(state: AppState, c: Confirmation) -> impl IntoView {
    let busy = RwSignal::new(false);
    let remember = RwSignal::new(REMEMBER[0].0);
    let scope = RwSignal::new("exact");
    let any_caller = RwSignal::new(false);
    let shown_at = browser::now_ms();
    let expires_at = c.expires_at;
    let queue = move || {
        let n = state.confirmations.with(|c| c.ready().map_or(0, Vec::len));
        (n > 1).then(|| format!("1 of {n} waiting"))
    };
    let act = {
        let c = c.clone();
        move |decision: Decision, remember: Option<Remembered>| {
            if busy.get_untracked() {
                return;
            }
            busy.set(true);
            let c = c.clone();
            leptos::task::spawn_local(async move {
                answer(state, &c, decision, remember).await;
                busy.set(false);
                state.refresh_confirmations();
            });
        }
    };
    // Enter approves (once the dialog has been up long enough to be read), Escape denies: the
    // keyboard's quick answer is the safe one.
    let keys = {
        let act = act.clone();
        window_event_listener(leptos::ev::keydown, move |e| {
            let on_control = e
                .target()
                .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
                .is_some_and(|el| matches!(el.tag_name().as_str(), "BUTTON" | "SELECT"));
            match e.key().as_str() {
                "Enter" if !on_control && enter_armed(shown_at, browser::now_ms()) => {
                    e.prevent_default();
                    act(Decision::Approve, None);
                }
                "Escape" => {
                    e.prevent_default();
                    act(Decision::Deny, None);
                }
                _ => {}
            }
        })
    };
    on_cleanup(move || keys.remove());
    let (approve, deny, remember_act) = (act.clone(), act.clone(), act);
    let explanation = c.explanation.clone();
    let risky = c.risky.clone();
    view! {
        <div class="backdrop">
            <div
                id="confirm-dialog"
                class="dialog"
                role="dialog"
                aria-modal="true"
                aria-labelledby="confirm-title"
            >
                <header class="dialog-head">
                    <h2 id="confirm-title">"Confirm a tool call"</h2>
                    <span class="muted">{queue}</span>
                    <span
                        class="confirm-countdown"
                        title="Time left before it lapses unanswered"
                    >
                        {move || countdown(expires_at, state.now_us())}
                    </span>
                </header>
                <dl class="facts">
                    <dt>"Tool"</dt>
                    <dd>
                        <strong class="confirm-tool">{c.tool.clone()}</strong>
                        " "
                        <Badge word=c.risk.clone()/>
                    </dd>
                    <dt>"Caller"</dt>
                    <dd class="confirm-caller">{c.caller.clone()}</dd>
                    <dt>"Skill"</dt>
                    <dd class="confirm-skill">{c.skill.clone().unwrap_or_else(|| "—".to_owned())}</dd>
                    <dt>"Asked"</dt>
                    <dd>{browser::local_time(c.created_at)}</dd>
                </dl>
                <p class="confirm-reason">{c.reason.clone()}</p>
                {c.context.clone().map(|context| view! { <Touches context/> })}
                <h3>"Arguments"</h3>
                <JsonBlock value=c.arguments.clone() risky=risky.clone()/>
                {(!risky.is_empty())
                    .then(|| {
                        view! {
                            <p class="muted small">
                                "Marked for a second look: " {risky.join(", ")}
                            </p>
                        }
                    })}
                <details>
                    <summary>"Why policy asked"</summary>
                    <Trace lines=explanation/>
                </details>
                <footer class="dialog-actions">
                    <button
                        id="confirm-deny"
                        class="btn danger"
                        disabled=move || busy.get()
                        on:click=move |_| deny(Decision::Deny, None)
                    >
                        "Deny"
                    </button>
                    <span class="spacer"></span>
                    <select
                        id="confirm-remember-scope"
                        title="Which later calls the approval covers"
                        on:change=move |ev| {
                            scope.set(if event_target_value(&ev) == "tool" { "tool" } else { "exact" });
                        }
                    >
                        <option value="exact" selected=move || scope.get() == "exact">
                            "these arguments"
                        </option>
                        <option value="tool" selected=move || scope.get() == "tool">
                            "any arguments"
                        </option>
                    </select>
                    <label class="check small" title="Cover every caller, not only this one">
                        <input
                            type="checkbox"
                            id="confirm-remember-anyone"
                            prop:checked=move || any_caller.get()
                            on:change=move |ev| any_caller.set(event_target_checked(&ev))
                        />
                        "any caller"
                    </label>
                    <select
                        id="confirm-remember-for"
                        title="How long to remember the approval"
                        on:change=move |ev| {
                            if let Ok(secs) = event_target_value(&ev).parse() {
                                remember.set(secs);
                            }
                        }
                    >
                        {REMEMBER
                            .map(|(secs, label)| {
                                view! {
                                    <option value=secs.to_string() selected=move || remember.get() == secs>
                                        {label}
                                    </option>
                                }
                            })
                            .to_vec()}
                    </select>
                    <button
                        id="confirm-remember"
                        class="btn"
                        disabled=move || busy.get()
                        on:click=move |_| {
                            remember_act(
                                Decision::Approve,
                                Some(Remembered {
                                    secs: remember.get_untracked(),
                                    scope: scope.get_untracked(),
                                    any_caller: any_caller.get_untracked(),
                                }),
                            )
                        }
                    >
                        "Approve and remember"
                    </button>
                    <button
                        id="confirm-approve"
                        class="btn primary"
                        disabled=move || busy.get()
                        on:click=move |_| approve(Decision::Approve, None)
                    >
                        "Approve"
                    </button>
                </footer>
                <p class="muted small">"Enter approves · Escape denies"</p>
            </div>
        </div>
    }
}

/// The queue, with batch answers.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ConfirmationsPage(state: AppState) -> impl IntoView {
    state.refresh_confirmations();
    let checked = RwSignal::new(Vec::<String>::new());
    let busy = RwSignal::new(false);
    let list = move || {
        state
            .confirmations
            .with(|c| c.ready().cloned().unwrap_or_default())
    };
    // Forget checks on confirmations that are gone.
    Effect::new(move |_| {
        let ids: Vec<String> = list().into_iter().map(|c| c.id).collect();
        checked.update(|ch| ch.retain(|id| ids.contains(id)));
    });
    let batch = move |decision: Decision| {
        if busy.get_untracked() {
            return;
        }
        let chosen: Vec<Confirmation> = list()
            .into_iter()
            .filter(|c| checked.with_untracked(|ch| ch.contains(&c.id)))
            .collect();
        if chosen.is_empty() {
            return;
        }
        busy.set(true);
        leptos::task::spawn_local(async move {
            let mut done = 0;
            for c in &chosen {
                if answer(state, c, decision, None).await {
                    done += 1;
                }
            }
            let verb = match decision {
                Decision::Approve => "approved",
                Decision::Deny => "denied",
            };
            state
                .notice
                .set(Some(format!("{verb} {done} of {} calls", chosen.len())));
            checked.set(Vec::new());
            busy.set(false);
            state.refresh_confirmations();
        });
    };
    let all_checked = move || {
        let l = list();
        !l.is_empty() && checked.with(|ch| l.iter().all(|c| ch.contains(&c.id)))
    };
    let rows = move || {
        list()
            .into_iter()
            .map(|c| {
                let id = c.id.clone();
                let is_checked = {
                    let id = id.clone();
                    move || checked.with(|ch| ch.contains(&id))
                };
                view! {
                    <tr data-confirmation-id=c.id.clone()>
                        <td>
                            <input
                                type="checkbox"
                                class="confirm-check"
                                prop:checked=is_checked
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    let id = id.clone();
                                    checked.update(|ch| {
                                        ch.retain(|x| x != &id);
                                        if on {
                                            ch.push(id);
                                        }
                                    });
                                }
                            />
                        </td>
                        <td>
                            <strong>{c.tool.clone()}</strong>
                        </td>
                        <td>{c.caller.clone()}</td>
                        <td>{c.skill.clone().unwrap_or_default()}</td>
                        <td>
                            <Badge word=c.risk.clone()/>
                        </td>
                        <td class="reason">{c.reason.clone()}</td>
                        <td>{browser::local_time(c.created_at)}</td>
                        <td class="countdown">
                            {move || countdown(c.expires_at, state.now_us())}
                        </td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section id="page-confirmations" class="page">
            <header class="page-head">
                <h1>"Confirmations"</h1>
                <span class="muted">
                    {move || format!("{} waiting", list().len())}
                </span>
                <button
                    class="btn primary"
                    id="confirmations-approve"
                    disabled=move || busy.get() || checked.with(Vec::is_empty)
                    on:click=move |_| batch(Decision::Approve)
                >
                    "Approve checked"
                </button>
                <button
                    class="btn danger"
                    id="confirmations-deny"
                    disabled=move || busy.get() || checked.with(Vec::is_empty)
                    on:click=move |_| batch(Decision::Deny)
                >
                    "Deny checked"
                </button>
            </header>
            {move || state.confirmations.with(|c| load_state(c, "the confirmations"))}
            <Show when=move || state.confirmations.with(|c| c.ready().is_some())>
                <table class="grid" id="confirmations-table">
                    <thead>
                        <tr>
                            <th>
                                <input
                                    type="checkbox"
                                    title="Check all"
                                    prop:checked=all_checked
                                    on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        checked
                                            .set(
                                                if on {
                                                    list().into_iter().map(|c| c.id).collect()
                                                } else {
                                                    Vec::new()
                                                },
                                            );
                                    }
                                />
                            </th>
                            <th>"Tool"</th>
                            <th>"Caller"</th>
                            <th>"Skill"</th>
                            <th>"Risk"</th>
                            <th>"Reason"</th>
                            <th>"Asked"</th>
                            <th>"Lapses in"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
                <Show when=move || list().is_empty()>
                    <p class="muted empty">"Nothing is waiting for a person."</p>
                </Show>
            </Show>
            <GrantsList state/>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn reply(outcome: &str, grant: Option<&str>) -> AnswerResponse {
        AnswerResponse {
            outcome: outcome.to_owned(),
            grant_id: grant.map(str::to_owned),
        }
    }

    #[test]
    fn only_surprising_outcomes_are_noted() {
        let got = vec![
            outcome_note("exec", Decision::Approve, &reply("approved", None)),
            outcome_note("exec", Decision::Deny, &reply("denied", None)),
            outcome_note("exec", Decision::Approve, &reply("approved", Some("g1"))),
            outcome_note("exec", Decision::Approve, &reply("expired", None)),
            outcome_note(
                "exec",
                Decision::Deny,
                &reply("already approved by desktop:ann", None),
            ),
        ];
        assert_eq!(
            got,
            vec![
                None,
                None,
                Some("exec: approved and remembered (grant g1)".to_owned()),
                Some("exec: expired".to_owned()),
                Some("exec: already approved by desktop:ann".to_owned()),
            ]
        );
    }
}
