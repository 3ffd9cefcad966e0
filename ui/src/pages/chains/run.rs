//! Running the open chain and following its runs: the input form and Run button, the chain's
//! recent runs, and one run's per-step timeline. A run started here is followed through its
//! live `chain_step` events while it goes (with a Cancel button, which cancels the chain's call
//! like the live view does) and read back from its record when it ends; a run chosen from the
//! list is read from its record (and followed too, if it is still running).

use leptos::prelude::*;
use serde_json::Value;
use tw_protocol::{
    CancelParams, ChainDetail, ChainRun, ChainRunParams, ChainRunStep, ChainRunsParams, IpcError,
    LiveEvent, RunChainParams, commands,
};

use crate::app::AppState;
use crate::logic::chains::{fold, parse_input, pending_steps, run_over, timeline};
use crate::logic::time::duration;
use crate::widgets::{Badge, JsonBlock, load_state};
use crate::{browser, ipc};

/// How many recent runs the list shows.
const RECENT_RUNS: u32 = 20;

/// The run whose timeline is shown.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ActiveRun {
    /// The run's id: the chain call's execution id.
    pub(crate) id: String,
    pub(crate) chain: String,
    pub(crate) steps: Vec<ChainRunStep>,
    /// How it ended (the record's status, else the chain call's); `None` while it runs.
    pub(crate) status: Option<String>,
    pub(crate) started_at: i64,
    pub(crate) completed_at: Option<i64>,
    pub(crate) error: Option<String>,
    pub(crate) output: Option<Value>,
}

impl ActiveRun {
    fn from_record(r: ChainRun) -> Self {
        let over = run_over(&r.status);
        ActiveRun {
            id: r.id,
            chain: r.chain,
            steps: r.steps,
            status: over.then_some(r.status),
            started_at: r.started_at,
            completed_at: r.completed_at,
            error: r.error,
            output: r.output,
        }
    }

    /// Takes one event of its call in; answers whether the call has ended with it.
    fn apply(&mut self, event: &LiveEvent) -> bool {
        if event.execution_id != self.id {
            return false;
        }
        if event.kind == "started" {
            self.started_at = event.at;
        }
        fold(&mut self.steps, &self.id, event);
        match &event.status {
            Some(status) if self.status.is_none() => {
                self.status = Some(status.clone());
                self.completed_at = Some(event.at);
                if self.error.is_none() {
                    self.error.clone_from(&event.detail);
                }
                true
            }
            _ => false,
        }
    }
}

pub(crate) fn load_runs(state: AppState, chain: String) {
    let s = state.chains;
    leptos::task::spawn_local(async move {
        let params = ChainRunsParams {
            chain: Some(chain.clone()),
            limit: Some(RECENT_RUNS),
        };
        let r: Result<Vec<ChainRun>, IpcError> =
            ipc::invoke(commands::LIST_CHAIN_RUNS, &params).await;
        if s.open.get_untracked().as_deref() != Some(chain.as_str()) {
            return;
        }
        s.runs.set(r.into());
    });
}

/// Reads a run from its record and shows it; `ended` says the run's call is known to be over,
/// so a run without a record (refused before it started) keeps what its events said.
fn load_run(state: AppState, id: String, ended: bool) {
    let s = state.chains;
    leptos::task::spawn_local(async move {
        let params = ChainRunParams { id: id.clone() };
        let r: Result<ChainRun, IpcError> = ipc::invoke(commands::GET_CHAIN_RUN, &params).await;
        let current = s
            .active
            .with_untracked(|a| a.as_ref().map(|a| a.id.clone()));
        if current.is_some() && current.as_deref() != Some(id.as_str()) {
            return;
        }
        match r {
            Ok(run) => {
                let chain = run.chain.clone();
                let mut shown = ActiveRun::from_record(run);
                // The call has ended, but the record said running: the events know better.
                if ended && shown.status.is_none() {
                    shown.status = s
                        .active
                        .with_untracked(|a| a.as_ref().and_then(|a| a.status.clone()));
                }
                s.active.set(Some(shown));
                if ended {
                    load_runs(state, chain);
                }
            }
            Err(e) if e.code == "not_found" && ended => {}
            Err(e) => state.report(&e),
        }
    });
}

/// A live event, whatever page is shown: moves the followed run on, and reloads it from its
/// record when its call ends.
pub(crate) fn on_event(state: AppState, event: &LiveEvent) {
    let s = state.chains;
    let mut ended = false;
    let mut touched = false;
    s.active.update_untracked(|a| {
        if let Some(a) = a
            && a.id == event.execution_id
        {
            touched = true;
            ended = a.apply(event);
        }
    });
    if touched {
        s.active.notify();
    }
    if ended {
        load_run(state, event.execution_id.clone(), true);
    }
}

fn start_run(state: AppState, detail: &ChainDetail) {
    let s = state.chains;
    if s.starting.get_untracked() {
        return;
    }
    let input = match parse_input(&s.input.get_untracked()) {
        Ok(v) => v,
        Err(e) => {
            s.input_error.set(Some(e));
            return;
        }
    };
    s.input_error.set(None);
    s.starting.set(true);
    let name = detail.summary.name.clone();
    let pending = pending_steps(&detail.steps);
    leptos::task::spawn_local(async move {
        let params = RunChainParams {
            name: name.clone(),
            input,
        };
        let r: Result<String, IpcError> = ipc::invoke(commands::RUN_CHAIN, &params).await;
        s.starting.set(false);
        let id = match r {
            Ok(id) => id,
            Err(e) => {
                s.input_error.set(Some(e.to_string()));
                return;
            }
        };
        let mut run = ActiveRun {
            id: id.clone(),
            chain: name.clone(),
            steps: pending,
            status: None,
            started_at: browser::ms_to_us(browser::now_ms()),
            completed_at: None,
            error: None,
            output: None,
        };
        // Events that came before the id did are in the live log already.
        let mut ended = false;
        state.live.with_untracked(|log| {
            if let Some(exec) = log.execution(&id) {
                for e in &exec.events {
                    ended |= run.apply(e);
                }
            }
        });
        s.active.set(Some(run));
        load_runs(state, name);
        if ended {
            load_run(state, id, true);
        }
    });
}

fn cancel(state: AppState, id: String) {
    leptos::task::spawn_local(async move {
        let params = CancelParams {
            execution_id: id.clone(),
        };
        let r: Result<bool, IpcError> = ipc::invoke(commands::CANCEL_EXECUTION, &params).await;
        match r {
            Ok(true) => state
                .notice
                .set(Some(format!("cancel requested for run {id}"))),
            Ok(false) => state
                .notice
                .set(Some(format!("run {id} is not running any more"))),
            Err(e) => state.report(&e),
        }
    });
}

/// The run form, the runs and the followed run's timeline.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn RunCard(state: AppState, detail: ChainDetail) -> impl IntoView {
    let s = state.chains;
    let name = detail.summary.name.clone();
    let shown = {
        let name = name.clone();
        move || {
            s.active
                .with(|a| a.as_ref().is_some_and(|a| a.chain == name))
        }
    };
    view! {
        <section class="card" id="chain-run">
            <h2>"Run"</h2>
            <form
                class="form"
                on:submit=move |ev| {
                    ev.prevent_default();
                    start_run(state, &detail);
                }
            >
                <label class="field">
                    <span>"Input (JSON, checked against the chain's input schema)"</span>
                    <textarea
                        id="chain-input"
                        class="editor short"
                        rows="5"
                        spellcheck="false"
                        prop:value=move || s.input.get()
                        on:input=move |ev| s.input.set(event_target_value(&ev))
                    ></textarea>
                </label>
                {move || {
                    s.input_error
                        .get()
                        .map(|e| view! { <p class="field-error" id="chain-input-error" role="alert">{e}</p> })
                }}
                <div class="actions">
                    <button
                        class="btn primary"
                        id="chain-run-start"
                        type="submit"
                        disabled=move || s.starting.get()
                    >
                        {move || if s.starting.get() { "Starting…" } else { "Run" }}
                    </button>
                    <span class="muted small">
                        "Runs as the app's caller: policy judges the chain, then each step as a call of its own."
                    </span>
                </div>
            </form>
            <Show when=shown>
                <RunTimeline state/>
            </Show>
            <h3>"Recent runs"</h3>
            <RunsList state/>
        </section>
    }
}

#[component]
fn RunsList(state: AppState) -> impl IntoView {
    let s = state.chains;
    let rows = move || {
        s.runs
            .with(|r| r.ready().cloned().unwrap_or_default())
            .into_iter()
            .map(|r| {
                let id = r.id.clone();
                let selected = {
                    let id = id.clone();
                    move || {
                        if s.active.with(|a| a.as_ref().is_some_and(|a| a.id == id)) {
                            "selected"
                        } else {
                            ""
                        }
                    }
                };
                let took = r
                    .completed_at
                    .map(|c| duration(c - r.started_at))
                    .unwrap_or_else(|| "running".to_owned());
                let open = id.clone();
                view! {
                    <tr
                        data-run-id=id.clone()
                        data-status=r.status.clone()
                        class=selected
                        on:click=move |_| load_run(state, open.clone(), false)
                    >
                        <td>
                            <Badge word=r.status.clone()/>
                        </td>
                        <td class="nowrap">{browser::local_time(r.started_at)}</td>
                        <td class="num">{took}</td>
                        <td class="muted small">{r.error.clone().unwrap_or_default()}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        {move || s.runs.with(|r| load_state(r, "the runs"))}
        <Show when=move || s.runs.with(|r| r.ready().is_some_and(|r| !r.is_empty()))>
            <table class="grid clickable" id="chain-runs">
                <thead>
                    <tr>
                        <th>"Status"</th>
                        <th>"Started"</th>
                        <th class="num">"Took"</th>
                        <th>"Error"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </Show>
        <Show when=move || s.runs.with(|r| r.ready().is_some_and(Vec::is_empty))>
            <p class="muted" id="chain-no-runs">"No runs yet."</p>
        </Show>
    }
}

/// One run, step by step: a bar per step on the run's time axis, in its status colour.
#[component]
fn RunTimeline(state: AppState) -> impl IntoView {
    let s = state.chains;
    move || {
        let run = s.active.get()?;
        let running = run.status.is_none();
        let now = if running {
            state.now_us()
        } else {
            run.completed_at.unwrap_or(run.started_at)
        };
        let bars = timeline(&run.steps, run.started_at, run.completed_at, now);
        let rows = run
            .steps
            .iter()
            .zip(bars)
            .map(|(step, bar)| {
                let tone = crate::logic::tone::tone(&step.status);
                let style = format!("left: {:.2}%; width: {:.2}%", bar.left, bar.width);
                let took = if bar.started {
                    duration(bar.took_us)
                } else {
                    String::new()
                };
                let attempts = match step.attempts {
                    0 | 1 => String::new(),
                    n => format!("{n} attempts"),
                };
                view! {
                    <li class="chain-step-row" data-step=step.id.clone() data-status=step.status.clone()>
                        <span class="chain-step-id">{step.id.clone()}</span>
                        <span class="chain-step-status">
                            <Badge word=step.status.clone()/>
                        </span>
                        <span class="chain-step-track">
                            {(bar.width > 0.0)
                                .then(|| {
                                    view! {
                                        <span class=format!("chain-step-bar {}", tone.class()) style=style></span>
                                    }
                                })}
                        </span>
                        <span class="chain-step-took num">{took}</span>
                        <span class="chain-step-attempts muted small">{attempts}</span>
                        {step
                            .error
                            .clone()
                            .map(|e| view! { <span class="chain-step-error">{e}</span> })}
                    </li>
                }
            })
            .collect_view();
        let word = run.status.clone().unwrap_or_else(|| "running".to_owned());
        let id = run.id.clone();
        let elapsed = duration(now - run.started_at);
        Some(view! {
            <div
                id="chain-timeline"
                data-run-id=run.id.clone()
                data-state=if running { "running" } else { "done" }
            >
                <div class="skill-head">
                    <Badge word=word/>
                    <code class="muted small">{run.id.clone()}</code>
                    <span class="muted small">{browser::local_time(run.started_at)}</span>
                    <span class="chain-run-elapsed">{elapsed}</span>
                    {running
                        .then(|| {
                            view! {
                                <button
                                    class="btn danger small"
                                    id="chain-run-cancel"
                                    on:click=move |_| cancel(state, id.clone())
                                >
                                    "Cancel"
                                </button>
                            }
                        })}
                </div>
                {run.error.clone().map(|e| view! { <p class="field-error" id="chain-run-error">{e}</p> })}
                <ol class="chain-steps">{rows}</ol>
                {run.output.clone().map(|o| view! { <JsonBlock value=o id="chain-run-output"/> })}
            </div>
        })
    }
}
