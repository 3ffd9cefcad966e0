//! Calls as they happen: the `tw://execution` events (collected by the app whatever page is open)
//! grouped per call, newest first, each with its timeline, its elapsed time while it runs, and a
//! Cancel button. Pause holds new events back so a person can read. Above them, the latest
//! picture of each browser session's page (`tw://browser-frame`), as the session's last call
//! left it.

use leptos::prelude::*;
use tw_protocol::{CancelParams, IpcError, commands};

use crate::app::AppState;
use crate::browser;
use crate::ipc;
use crate::logic::live::Execution;
use crate::logic::time::duration;
use crate::logic::tone::{Tone, tone};

fn cancel(state: AppState, execution_id: String) {
    leptos::task::spawn_local(async move {
        let params = CancelParams {
            execution_id: execution_id.clone(),
        };
        let r: Result<bool, IpcError> = ipc::invoke(commands::CANCEL_EXECUTION, &params).await;
        match r {
            Ok(true) => state
                .notice
                .set(Some(format!("cancel requested for {execution_id}"))),
            Ok(false) => state
                .notice
                .set(Some(format!("{execution_id} is not running any more"))),
            Err(e) => state.report(&e),
        }
    });
}

/// The live events page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn LivePage(state: AppState) -> impl IntoView {
    let filter = RwSignal::new(String::new());
    let live = state.live;
    let paused = move || live.with(|l| l.paused());
    let shown = move || filter.with(|f| live.with(|l| l.filtered(f)));
    let empty = move || {
        shown().is_empty().then(|| {
            let text = if state.backend {
                "No calls yet. Calls made by any agent on this data directory appear here as they run."
            } else {
                "No events: the backend is not available."
            };
            view! { <p class="muted empty">{text}</p> }
        })
    };
    view! {
        <section id="page-live" class="page">
            <header class="page-head">
                <h1>"Live events"</h1>
                <button
                    class=move || if paused() { "btn primary" } else { "btn" }
                    id="live-pause"
                    aria-pressed=move || paused().to_string()
                    on:click=move |_| live.update(|l| l.set_paused(!l.paused()))
                >
                    {move || if paused() { "Resume" } else { "Pause" }}
                </button>
                <span class="muted" id="live-buffered">
                    {move || {
                        live.with(|l| {
                            let lost = if l.lost() > 0 {
                                format!(" ({} dropped)", l.lost())
                            } else {
                                String::new()
                            };
                            if l.paused() {
                                format!("paused · {} new events held{lost}", l.buffered())
                            } else {
                                String::new()
                            }
                        })
                    }}
                </span>
                <label class="field grow">
                    <input
                        id="live-filter"
                        type="search"
                        placeholder="filter: tool, id, status, output…"
                        prop:value=move || filter.get()
                        on:input=move |ev| filter.set(event_target_value(&ev))
                    />
                </label>
            </header>
            <BrowserFrames state/>
            <div id="live-list">
                {empty}
                // Keyed on what can change, so an event re-renders its own call only.
                <For
                    each=shown
                    key=|e| (e.execution_id.clone(), e.events.len(), e.dropped, e.status.clone())
                    let:exec
                >
                    <LiveExec state exec/>
                </For>
            </div>
        </section>
    }
}

/// The latest picture of each browser session, with where it is and which call left it so.
#[component]
fn BrowserFrames(state: AppState) -> impl IntoView {
    let frames = state.frames;
    let shown = move || frames.with(|f| f.latest().to_vec());
    view! {
        <Show when=move || frames.with(|f| !f.latest().is_empty())>
            <section id="live-browsers" aria-label="Browser sessions">
                <h2>"Browser sessions"</h2>
                <div class="browser-frames">
                    <For
                        each=shown
                        key=|f| (f.pid, f.session.clone(), f.at)
                        let:frame
                    >
                        {
                            let (pid, session) = (frame.pid, frame.session.clone());
                            let alt = format!("{}'s page: {}", frame.session, frame.url);
                            view! {
                                <figure
                                    class="browser-frame"
                                    data-session=frame.session.clone()
                                    data-execution-id=frame.execution_id.clone()
                                >
                                    <img src=frame.image.clone() alt=alt/>
                                    <figcaption>
                                        <strong class="frame-session">{frame.session.clone()}</strong>
                                        <span class="muted">{format!(" process {}", frame.pid)}</span>
                                        <code class="frame-url">{frame.url.clone()}</code>
                                        <span class="muted">
                                            {format!("{} · {}", frame.tool, browser::local_time(frame.at))}
                                        </span>
                                        <button
                                            class="btn small frame-dismiss"
                                            title="Hide this picture"
                                            on:click=move |_| frames.update(|f| f.dismiss(pid, &session))
                                        >
                                            "Hide"
                                        </button>
                                    </figcaption>
                                </figure>
                            }
                        }
                    </For>
                </div>
            </section>
        </Show>
    }
}

#[component]
fn LiveExec(state: AppState, exec: Execution) -> impl IntoView {
    let running = exec.running();
    let word = exec.state_word().to_owned();
    let t = if running && tone(&word) == Tone::Neutral {
        Tone::Running
    } else {
        tone(&word)
    };
    let class = format!("live-exec {}", t.class());
    let started = exec.started_at();
    let elapsed = {
        let exec = exec.clone();
        move || duration(exec.elapsed_us(state.now_us()))
    };
    let id = exec.execution_id.clone();
    let timeline = exec
        .events
        .iter()
        .map(|e| {
            let offset = format!("+{}", duration(e.at - started));
            let kind_class = format!("kind {}", tone(&e.kind).class());
            view! {
                <li>
                    <span class="offset">{offset}</span>
                    <span class=kind_class>{e.kind.clone()}</span>
                    {e.status.clone().map(|s| view! { <span class="status">{s}</span> })}
                    <span class="detail">{e.detail.clone().unwrap_or_default()}</span>
                </li>
            }
        })
        .collect_view();
    view! {
        <div
            class=class
            data-execution-id=exec.execution_id.clone()
            data-state=if running { "running" } else { "done" }
        >
            <header class="live-head">
                <strong class="live-tool">{exec.tool.clone()}</strong>
                <span class=format!("badge {}", t.class())>{word}</span>
                <code class="live-id">{exec.execution_id.clone()}</code>
                <span class="muted">{browser::local_time(started)}</span>
                <span class="live-elapsed">{elapsed}</span>
                {running
                    .then(|| {
                        view! {
                            <button
                                class="btn danger small live-cancel"
                                on:click=move |_| cancel(state, id.clone())
                            >
                                "Cancel"
                            </button>
                        }
                    })}
            </header>
            <ol class="timeline">
                {timeline}
                {(exec.dropped > 0)
                    .then(|| {
                        view! {
                            <li class="muted">{format!("{} earlier events not kept", exec.dropped)}</li>
                        }
                    })}
            </ol>
        </div>
    }
}
