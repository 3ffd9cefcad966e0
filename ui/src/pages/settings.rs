//! Settings: the operational mode (switched only after a confirm step, since a stricter mode
//! denies calls at once for every agent), the license tier, the data directory and the policy
//! files with their load status.

use leptos::prelude::*;
use tw_protocol::{IpcError, SetModeParams, Settings, commands};

use crate::app::{AppState, Load};
use crate::browser;
use crate::ipc;
use crate::widgets::{Badge, load_state};

/// Re-reads the policy files now and shows the outcome.
fn reload(state: AppState) {
    leptos::task::spawn_local(async move {
        let r: Result<Settings, IpcError> = ipc::invoke(commands::RELOAD_POLICY, &()).await;
        match r {
            Ok(s) => {
                let note = if s.policy_error.is_some() {
                    "the policy files have errors; the previous policy stays in force"
                } else {
                    "policy reloaded"
                };
                state.notice.set(Some(note.to_owned()));
                state.settings.set(Load::Ready(s));
            }
            Err(e) => state.report(&e),
        }
    });
}

/// The settings page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn SettingsPage(state: AppState) -> impl IntoView {
    if state.backend {
        state.load_settings();
    }
    view! {
        <section id="page-settings" class="page">
            <header class="page-head">
                <h1>"Settings"</h1>
                <button
                    class="btn"
                    id="settings-reload"
                    on:click=move |_| {
                        if state.backend {
                            state.load_settings()
                        }
                    }
                >
                    "Reload"
                </button>
            </header>
            {move || state.settings.with(|s| load_state(s, "the settings"))}
            {move || state.settings.with(|s| s.ready().cloned()).map(|s| view! { <SettingsBody state s/> })}
        </section>
    }
}

#[component]
fn SettingsBody(state: AppState, s: Settings) -> impl IntoView {
    let chosen = RwSignal::new(s.mode.clone());
    let confirming = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let current = s.mode.clone();
    let apply = move || {
        if busy.get_untracked() {
            return;
        }
        busy.set(true);
        let mode = chosen.get_untracked();
        leptos::task::spawn_local(async move {
            let r: Result<Settings, IpcError> =
                ipc::invoke(commands::SET_MODE, &SetModeParams { mode: mode.clone() }).await;
            busy.set(false);
            confirming.set(false);
            match r {
                Ok(new) => {
                    state.notice.set(Some(format!("mode is now {}", new.mode)));
                    state.settings.set(Load::Ready(new));
                }
                Err(e) => state.report(&e),
            }
        });
    };
    // In the confirm step Enter confirms and Escape steps back.
    let keys = window_event_listener(leptos::ev::keydown, move |e| {
        let dialog_up = state
            .confirmations
            .with_untracked(|c| c.ready().is_some_and(|l| !l.is_empty()));
        if !confirming.get_untracked() || dialog_up {
            return;
        }
        match e.key().as_str() {
            "Enter" => {
                e.prevent_default();
                apply();
            }
            "Escape" => {
                e.prevent_default();
                confirming.set(false);
            }
            _ => {}
        }
    });
    on_cleanup(move || keys.remove());
    let options = s
        .modes
        .iter()
        .map(|m| {
            let value = m.clone();
            view! {
                <option value=m.clone() selected=move || chosen.with(|c| *c == value)>
                    {m.clone()}
                </option>
            }
        })
        .collect_view();
    let unchanged = {
        let current = current.clone();
        move || chosen.with(|c| *c == current)
    };
    let policy_rows = s
        .policy_files
        .iter()
        .map(|p| {
            let status = if p.loaded { "loaded" } else { "failed" };
            view! {
                <tr class=if p.loaded { "" } else { "bad-row" }>
                    <td>
                        <code>{p.path.clone()}</code>
                    </td>
                    <td>
                        <Badge word=status/>
                    </td>
                    <td class="error-cell">{p.error.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let no_policy = s.policy_files.is_empty();
    view! {
        <div class="detail-grid">
            <section class="card">
                <h2>"Operational mode"</h2>
                <p class="muted">
                    "Modes are ordered from least to most strict; a stricter mode denies more calls, \
                     for every agent, at once."
                </p>
                <div class="row">
                    <select
                        id="settings-mode"
                        disabled=move || confirming.get()
                        on:change=move |ev| chosen.set(event_target_value(&ev))
                    >
                        {options}
                    </select>
                    <button
                        class="btn"
                        id="settings-mode-apply"
                        disabled=move || unchanged() || confirming.get()
                        on:click=move |_| confirming.set(true)
                    >
                        "Apply"
                    </button>
                    <span>"Current: " <Badge word=current.clone()/></span>
                </div>
                <Show when=move || confirming.get()>
                    <div class="confirm-step" role="alertdialog">
                        <p>
                            {
                                let current = current.clone();
                                move || {
                                    format!(
                                        "Switch the mode from {current} to {}? It applies to every agent at once.",
                                        chosen.get(),
                                    )
                                }
                            }
                        </p>
                        <button
                            class="btn primary"
                            id="settings-mode-confirm"
                            disabled=move || busy.get()
                            on:click=move |_| apply()
                        >
                            "Switch mode"
                        </button>
                        <button
                            class="btn"
                            id="settings-mode-cancel"
                            on:click=move |_| confirming.set(false)
                        >
                            "Cancel"
                        </button>
                        <span class="muted small">"Enter confirms · Escape cancels"</span>
                    </div>
                </Show>
            </section>
            <section class="card">
                <h2>"Installation"</h2>
                <dl class="facts">
                    <dt>"License tier"</dt>
                    <dd id="settings-tier">{s.tier.clone()}</dd>
                    <dt>"Data directory"</dt>
                    <dd>
                        <code id="settings-data-dir">{s.data_dir.clone()}</code>
                    </dd>
                    <dt>"Modes"</dt>
                    <dd>{s.modes.join(" < ")}</dd>
                    <dt>"Agents connect at"</dt>
                    <dd id="settings-endpoint">
                        {match (&s.endpoint.mcp_url, &s.endpoint.error) {
                            (Some(url), _) => {
                                view! {
                                    <code id="settings-mcp-url">{url.clone()}</code>
                                    <span class="muted small">
                                        " · MCP over HTTP; token in "
                                        {s.endpoint.token_file.clone().unwrap_or_default()}
                                    </span>
                                }
                                    .into_any()
                            }
                            (None, Some(e)) => {
                                view! { <span class="error">{format!("not running: {e}")}</span> }
                                    .into_any()
                            }
                            (None, None) => view! { <span class="muted">"not running"</span> }.into_any(),
                        }}
                    </dd>
                </dl>
            </section>
            <section class="card wide">
                <header class="page-head">
                    <h2>"Policy files"</h2>
                    <button class="btn" id="settings-reload" on:click=move |_| reload(state)>
                        "Reload now"
                    </button>
                </header>
                {s
                    .policy_error
                    .clone()
                    .map(|e| {
                        view! {
                            <div class="error-box" role="alert" id="settings-policy-error">
                                <strong>
                                    {format!(
                                        "The change made at {} was refused; the previous policy stays in force.",
                                        browser::local_time(e.at),
                                    )}
                                </strong>
                                <pre>{e.errors}</pre>
                            </div>
                        }
                    })}
                {if no_policy {
                    view! { <p class="muted">"No policy files: Toolwarden's defaults apply."</p> }
                        .into_any()
                } else {
                    view! {
                        <table class="grid" id="settings-policy">
                            <thead>
                                <tr>
                                    <th>"File"</th>
                                    <th>"Status"</th>
                                    <th>"Error"</th>
                                </tr>
                            </thead>
                            <tbody>{policy_rows}</tbody>
                        </table>
                    }
                        .into_any()
                }}
            </section>
        </div>
    }
}
