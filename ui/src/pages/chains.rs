//! The chains page: the chains on the left (in force, or left out with their errors) and every
//! load problem at its file and line; on the right, the open chain's graph of steps and its
//! YAML, a form that runs it with its runs and a per-step timeline that moves with the run's
//! live events, and an editor for a new chain file (or a copy of the open one) checked as the
//! person types and saved only when valid. The chain service loads, checks, saves and runs;
//! this page only asks and shows.

use std::time::Duration;

use leptos::prelude::*;
use tw_protocol::{
    ChainCheck, ChainDetail, ChainList, ChainParams, ChainTextParams, IpcError, LiveEvent, commands,
};

use crate::app::{AppState, Load};
use crate::ipc;
use crate::logic::chains::{
    CHECK_AFTER_MS, TEMPLATE, diagnostic_text, entries, input_template, problem_text,
};
use crate::widgets::{Badge, LatestCheck, load_state};

mod graph;
mod run;

use self::graph::ChainGraph;
use self::run::{ActiveRun, RunCard};

/// The chains page's state, kept across page switches (the editor's text and a run being
/// followed included).
#[derive(Clone, Copy)]
pub(crate) struct ChainsState {
    list: RwSignal<Load<ChainList>>,
    /// The chain shown on the right.
    open: RwSignal<Option<String>>,
    detail: RwSignal<Load<ChainDetail>>,
    /// The editor's text, while the editor is open.
    draft: RwSignal<Option<String>>,
    /// The chain the editor was opened on (Edit): saving a text holding just that chain saves
    /// over it; a new chain, or a renamed one, is saved as new.
    editing: RwSignal<Option<String>>,
    /// The draft's last check.
    check: RwSignal<ChainCheck>,
    /// The draft's check as the person types.
    checker: LatestCheck,
    save_error: RwSignal<Option<String>>,
    saving: RwSignal<bool>,
    /// The run form's input, as typed.
    input: RwSignal<String>,
    input_error: RwSignal<Option<String>>,
    runs: RwSignal<Load<Vec<tw_protocol::ChainRun>>>,
    /// The run whose timeline is shown.
    active: RwSignal<Option<ActiveRun>>,
    starting: RwSignal<bool>,
}

impl ChainsState {
    pub(crate) fn new() -> Self {
        Self {
            list: RwSignal::new(Load::Idle),
            open: RwSignal::new(None),
            detail: RwSignal::new(Load::Idle),
            draft: RwSignal::new(None),
            editing: RwSignal::new(None),
            check: RwSignal::new(ChainCheck::default()),
            checker: LatestCheck::new(),
            save_error: RwSignal::new(None),
            saving: RwSignal::new(false),
            input: RwSignal::new(String::new()),
            input_error: RwSignal::new(None),
            runs: RwSignal::new(Load::Idle),
            active: RwSignal::new(None),
            starting: RwSignal::new(false),
        }
    }

    /// Takes a live event in (whatever page is shown): a step of the run being followed moves
    /// on its timeline, and its end reloads the run as recorded.
    pub(crate) fn on_event(self, state: AppState, event: &LiveEvent) {
        run::on_event(state, event);
    }
}

fn load_chains(state: AppState) {
    let s = state.chains;
    if s.list.with_untracked(|l| l.ready().is_none()) {
        s.list.set(Load::Loading);
    }
    leptos::task::spawn_local(async move {
        let r: Result<ChainList, IpcError> = ipc::invoke(commands::LIST_CHAINS, &()).await;
        match r {
            Ok(list) => s.list.set(Load::Ready(list)),
            Err(e) => {
                state.report(&e);
                if s.list.with_untracked(|l| l.ready().is_none()) {
                    s.list.set(Load::Failed(e.to_string()));
                }
            }
        }
    });
}

fn open_chain(state: AppState, name: String) {
    let s = state.chains;
    let other = s.open.get_untracked().as_deref() != Some(name.as_str());
    if other {
        s.detail.set(Load::Loading);
        s.runs.set(Load::Loading);
        s.input_error.set(None);
    }
    s.open.set(Some(name.clone()));
    run::load_runs(state, name.clone());
    leptos::task::spawn_local(async move {
        let params = ChainParams { name: name.clone() };
        let r: Result<ChainDetail, IpcError> = ipc::invoke(commands::GET_CHAIN, &params).await;
        if s.open.get_untracked().as_deref() != Some(name.as_str()) {
            return;
        }
        match r {
            Ok(d) => {
                if other || s.input.with_untracked(String::is_empty) {
                    s.input.set(input_template(&d.input));
                }
                s.detail.set(Load::Ready(d));
            }
            Err(e) => s.detail.set(Load::Failed(e.to_string())),
        }
    });
}

/// Checks the draft once typing has paused for [`CHECK_AFTER_MS`].
fn schedule_check(state: AppState) {
    state
        .chains
        .checker
        .after(Duration::from_millis(CHECK_AFTER_MS), move |turn| {
            run_check(state, turn);
        });
}

fn check_now(state: AppState) {
    state.chains.checker.now(|turn| run_check(state, turn));
}

fn run_check(state: AppState, seq: u64) {
    let s = state.chains;
    let Some(text) = s.draft.get_untracked() else {
        s.checker.done();
        return;
    };
    leptos::task::spawn_local(async move {
        let params = ChainTextParams {
            text,
            skill: None,
            replace: false,
        };
        let r: Result<ChainCheck, IpcError> = ipc::invoke(commands::CHECK_CHAIN, &params).await;
        if !s.checker.is_latest(seq) {
            return;
        }
        s.checker.done();
        match r {
            Ok(c) => s.check.set(c),
            Err(e) => state.report(&e),
        }
    });
}

fn edit(state: AppState, text: String, editing: Option<String>) {
    let s = state.chains;
    s.editing.set(editing);
    s.save_error.set(None);
    s.draft.set(Some(text));
    check_now(state);
}

fn save(state: AppState) {
    let s = state.chains;
    let Some(text) = s.draft.get_untracked() else {
        return;
    };
    if s.saving.get_untracked() {
        return;
    }
    s.saving.set(true);
    s.save_error.set(None);
    // Over the chain being edited only when the text still holds just that chain; the runtime
    // decides whether that chain may be saved over.
    let replace = s.editing.with_untracked(|e| {
        e.as_ref()
            .is_some_and(|name| s.check.with_untracked(|c| c.valid == [name.clone()]))
    });
    leptos::task::spawn_local(async move {
        let params = ChainTextParams {
            text,
            skill: None,
            replace,
        };
        let r: Result<Vec<String>, IpcError> = ipc::invoke(commands::SAVE_CHAIN, &params).await;
        s.saving.set(false);
        match r {
            Ok(saved) => {
                state
                    .notice
                    .set(Some(format!("saved chain {}", saved.join(", "))));
                s.draft.set(None);
                s.editing.set(None);
                s.check.set(ChainCheck::default());
                load_chains(state);
                if let Some(first) = saved.into_iter().next() {
                    open_chain(state, first);
                }
            }
            Err(e) => {
                s.save_error.set(Some(e.message));
                check_now(state);
            }
        }
    });
}

/// The chains page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ChainsPage(state: AppState) -> impl IntoView {
    let s = state.chains;
    load_chains(state);
    if let Some(open) = s.open.get_untracked() {
        open_chain(state, open);
    }
    let count = move || {
        s.list.with(|l| match l.ready().map(|l| l.chains.len()) {
            Some(1) => "1 chain in force".to_owned(),
            Some(n) => format!("{n} chains in force"),
            None => String::new(),
        })
    };
    view! {
        <section id="page-chains" class="page">
            <header class="page-head">
                <h1>"Chains"</h1>
                <span class="muted">{count}</span>
                <button class="btn" id="chains-reload" on:click=move |_| load_chains(state)>
                    "Reload"
                </button>
                <button
                    class="btn primary"
                    id="chain-new"
                    on:click=move |_| edit(state, TEMPLATE.to_owned(), None)
                >
                    "New chain"
                </button>
            </header>
            <div class="skills-layout">
                <ChainsList state/>
                <div class="skills-detail" id="chain-detail">
                    <Show when=move || s.draft.with(Option::is_some)>
                        <ChainEditor state/>
                    </Show>
                    <Show when=move || s.open.with(Option::is_none) && s.draft.with(Option::is_none)>
                        <p class="muted empty">
                            "Choose a chain to see its steps, run it and follow its runs, or write a new one."
                        </p>
                    </Show>
                    {move || s.open.with(Option::is_some).then(|| s.detail.with(|d| load_state(d, "the chain")))}
                    {move || {
                        s.detail
                            .with(|d| d.ready().cloned())
                            .filter(|d| s.open.with(|o| o.as_deref() == Some(d.summary.name.as_str())))
                            .map(|d| view! { <ChainOverview state detail=d/> })
                    }}
                </div>
            </div>
        </section>
    }
}

#[component]
fn ChainsList(state: AppState) -> impl IntoView {
    let s = state.chains;
    let rows = move || {
        s.list
            .with(|l| l.ready().map(entries).unwrap_or_default())
            .into_iter()
            .map(|c| {
                let name = c.name.clone();
                let selected = {
                    let name = name.clone();
                    move || {
                        if s.open.with(|o| o.as_deref() == Some(name.as_str())) {
                            "selected"
                        } else {
                            ""
                        }
                    }
                };
                let open = name.clone();
                let loaded = c.loaded;
                let status = if c.loaded {
                    "loaded".to_owned()
                } else {
                    "not loaded".to_owned()
                };
                let problems = c
                    .problems
                    .iter()
                    .map(|p| view! { <li>{p.clone()}</li> })
                    .collect_view();
                let from = match &c.skill {
                    Some(skill) => format!("skill {skill} · {}", c.origin),
                    None => c.origin.clone(),
                };
                view! {
                    <tr
                        data-chain=name.clone()
                        data-loaded=loaded.to_string()
                        class=selected
                        on:click=move |_| {
                            if loaded {
                                open_chain(state, open.clone());
                            }
                        }
                    >
                        <td>
                            <button class="link tool-name chain-open" disabled=!loaded>
                                {name.clone()}
                            </button>
                            <div class="muted small chain-description">{c.description.clone()}</div>
                            <div class="muted small chain-origin">{from}</div>
                            <ul class="chain-problems">{problems}</ul>
                        </td>
                        <td class="chain-status">
                            <Badge word=status/>
                        </td>
                        <td class="num chain-steps">{c.steps.map(|n| n.to_string()).unwrap_or_default()}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let problems = move || {
        s.list
            .with(|l| l.ready().map(|l| l.problems.clone()).unwrap_or_default())
            .into_iter()
            .map(|p| {
                let class = if p.severity == "error" {
                    "diagnostic tone-bad"
                } else {
                    "diagnostic tone-wait"
                };
                view! { <li class=class data-line=p.line.to_string()>{problem_text(&p)}</li> }
            })
            .collect_view()
    };
    view! {
        <div class="skills-list">
            {move || s.list.with(|l| load_state(l, "the chains"))}
            <Show when=move || s.list.with(|l| l.ready().is_some())>
                <table class="grid clickable" id="chains-list">
                    <thead>
                        <tr>
                            <th>"Chain"</th>
                            <th>"Status"</th>
                            <th class="num">"Steps"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
                <Show when=move || s.list.with(|l| l.ready().is_some_and(|l| l.chains.is_empty() && l.problems.is_empty()))>
                    <p class="muted empty">
                        "No chains yet: each is a YAML file in the chains directory (the config's chains_dir, else the workspace's chains folder) or a skill's chains:."
                    </p>
                </Show>
                <Show when=move || s.list.with(|l| l.ready().is_some_and(|l| !l.problems.is_empty()))>
                    <h3>"Load problems"</h3>
                    <ul class="diagnostics" id="chains-problems">{problems}</ul>
                </Show>
            </Show>
        </div>
    }
}

/// The open chain: what it is, its graph, its YAML, and the run card.
#[component]
fn ChainOverview(state: AppState, detail: ChainDetail) -> impl IntoView {
    let c = detail.summary.clone();
    let yaml = detail.yaml.clone();
    let name = c.name.clone();
    let from = match &c.skill {
        Some(skill) => format!("{} · declared by skill {skill}", c.origin),
        None => c.origin.clone(),
    };
    view! {
        <section class="card" id="chain-overview" data-chain=c.name.clone()>
            <div class="skill-head">
                <h2>{c.name.clone()}</h2>
                <code class="muted small">{c.tool.clone()}</code>
                <button
                    class="btn small"
                    id="chain-edit"
                    title="Open this chain's YAML in the editor: saved under its name it replaces the chain, under another it is a new one"
                    on:click=move |_| edit(state, yaml.clone(), Some(name.clone()))
                >
                    "Edit"
                </button>
            </div>
            <p class="description">{c.description.clone()}</p>
            <p class="muted small" id="chain-origin">{from}</p>
            <ChainGraph steps=detail.steps.clone()/>
            <details class="chain-yaml">
                <summary>"YAML"</summary>
                <pre class="json" id="chain-yaml">{detail.yaml.clone()}</pre>
            </details>
        </section>
        <RunCard state detail/>
    }
}

/// The chain file editor: checked ~400 ms after typing stops, saved on Save (or Ctrl+S) only if
/// the runtime finds no error in it.
#[component]
fn ChainEditor(state: AppState) -> impl IntoView {
    let s = state.chains;
    let check_state = move || {
        if s.checker.busy() {
            return "checking…".to_owned();
        }
        s.check.with(|c| {
            let errors = c
                .diagnostics
                .iter()
                .filter(|d| d.severity == "error")
                .count();
            match (errors, c.diagnostics.len() - errors) {
                (0, 0) if c.valid.is_empty() => "no chain in the text".to_owned(),
                (0, 0) => format!("no problems: {}", c.valid.join(", ")),
                (e, w) => format!("{e} error(s), {w} warning(s)"),
            }
        })
    };
    let diagnostics = move || {
        s.check
            .get()
            .diagnostics
            .into_iter()
            .map(|d| {
                let class = if d.severity == "error" {
                    "diagnostic tone-bad"
                } else {
                    "diagnostic tone-wait"
                };
                view! { <li class=class data-line=d.line.to_string()>{diagnostic_text(&d)}</li> }
            })
            .collect_view()
    };
    view! {
        <section class="card" id="chain-editor">
            <div class="skill-head">
                <h2>"Chain file"</h2>
                <span class="muted small">
                    {move || match s.editing.get() {
                        Some(name) => format!("Editing {name}: saved under that name it replaces the chain (its NAME.yaml); under another name it is a new chain."),
                        None => "Saved as NAME.yaml in the chains directory; a chain of that name must not exist yet.".to_owned(),
                    }}
                </span>
            </div>
            <textarea
                id="chain-text"
                class="editor"
                rows="18"
                spellcheck="false"
                prop:value=move || s.draft.get().unwrap_or_default()
                on:input=move |ev| {
                    s.draft.set(Some(event_target_value(&ev)));
                    schedule_check(state);
                }
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if (ev.ctrl_key() || ev.meta_key()) && ev.key() == "s" {
                        ev.prevent_default();
                        save(state);
                    }
                }
            ></textarea>
            <div class="actions">
                <button class="btn" id="chain-check" on:click=move |_| check_now(state)>
                    "Check"
                </button>
                <button
                    class="btn primary"
                    id="chain-save"
                    disabled=move || s.saving.get()
                    on:click=move |_| save(state)
                >
                    {move || if s.saving.get() { "Saving…" } else { "Save" }}
                </button>
                <button
                    class="btn"
                    id="chain-close-editor"
                    on:click=move |_| {
                        s.draft.set(None);
                        s.save_error.set(None);
                        s.check.set(ChainCheck::default());
                    }
                >
                    "Close"
                </button>
                <span class="muted small" id="chain-check-state">{check_state}</span>
            </div>
            {move || {
                s.save_error
                    .get()
                    .map(|e| {
                        view! {
                            <div class="error-box" id="chain-save-error" role="alert">
                                <strong>"Not saved"</strong>
                                <span>{e}</span>
                            </div>
                        }
                    })
            }}
            <ul class="diagnostics" id="chain-diagnostics">{diagnostics}</ul>
        </section>
    }
}
