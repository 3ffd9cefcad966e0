//! The standing approvals (grants) under the confirmation queue: what each covers (tool, scope,
//! the arguments or patterns, caller, skill), who gave it and until when, with Revoke. Revoking
//! is recorded in the admin log by the runtime.

use leptos::prelude::*;
use tw_protocol::{Grant, GrantParams, IpcError, commands};

use crate::app::{AppState, Load};
use crate::browser;
use crate::ipc;
use crate::logic::time::countdown;
use crate::widgets::{Badge, JsonBlock, load_state};

fn load(state: AppState, grants: RwSignal<Load<Vec<Grant>>>) {
    leptos::task::spawn_local(async move {
        let r: Result<Vec<Grant>, IpcError> = ipc::invoke(commands::LIST_GRANTS, &()).await;
        if let Err(e) = &r {
            state.report(e);
        }
        grants.set(r.into());
    });
}

fn revoke(state: AppState, grants: RwSignal<Load<Vec<Grant>>>, id: String) {
    leptos::task::spawn_local(async move {
        let r: Result<(), IpcError> =
            ipc::invoke(commands::REVOKE_GRANT, &GrantParams { id: id.clone() }).await;
        match r {
            Ok(()) => state.notice.set(Some(format!("revoked grant {id}"))),
            // Someone else revoked it first, or it lapsed: the list is reloaded below.
            Err(e) if e.code == "not_found" => state.notice.set(Some(e.message)),
            Err(e) => state.report(&e),
        }
        load(state, grants);
    });
}

/// The grants section.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn GrantsList(state: AppState) -> impl IntoView {
    let grants: RwSignal<Load<Vec<Grant>>> = RwSignal::new(Load::Loading);
    // Loads now, and again whenever the number of pending calls changes: a remembered
    // approval made in the dialog shows up without a manual refresh.
    let pending = Memo::new(move |_| state.confirmations.with(|c| c.ready().map(Vec::len)));
    Effect::new(move |_| {
        pending.track();
        load(state, grants);
    });
    let rows = move || {
        grants
            .with(|g| g.ready().cloned().unwrap_or_default())
            .into_iter()
            .map(|g| {
                let id = g.id.clone();
                let expires = g.expires_at;
                view! {
                    <tr data-grant-id=g.id.clone()>
                        <td>
                            <strong>{g.tool.clone()}</strong>
                        </td>
                        <td>
                            <Badge word=g.scope.clone()/>
                        </td>
                        <td>
                            {(!g.arguments.is_null()).then(|| view! { <JsonBlock value=g.arguments.clone()/> })}
                        </td>
                        <td>{g.caller.clone().unwrap_or_else(|| "any".to_owned())}</td>
                        <td>{g.skill.clone().unwrap_or_else(|| "any".to_owned())}</td>
                        <td>{format!("{} · {}", g.created_by, browser::local_time(g.created_at))}</td>
                        <td class="countdown">
                            {move || match expires {
                                Some(at) => countdown(at, state.now_us()),
                                None => "never".to_owned(),
                            }}
                        </td>
                        <td>
                            <button
                                class="btn danger small grant-revoke"
                                on:click=move |_| revoke(state, grants, id.clone())
                            >
                                "Revoke"
                            </button>
                        </td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section id="grants" class="subsection">
            <header class="page-head">
                <h2>"Grants"</h2>
                <span class="muted">"standing approvals: calls they cover run without asking"</span>
                <button class="btn" id="grants-reload" on:click=move |_| load(state, grants)>
                    "Reload"
                </button>
            </header>
            {move || grants.with(|g| load_state(g, "the grants"))}
            <Show when=move || grants.with(|g| g.ready().is_some_and(|v| !v.is_empty()))>
                <table class="grid" id="grants-table">
                    <thead>
                        <tr>
                            <th>"Tool"</th>
                            <th>"Scope"</th>
                            <th>"Arguments"</th>
                            <th>"Caller"</th>
                            <th>"Skill"</th>
                            <th>"Given by"</th>
                            <th>"Lapses in"</th>
                            <th></th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </Show>
            <Show when=move || grants.with(|g| g.ready().is_some_and(Vec::is_empty))>
                <p class="muted empty">"No grants."</p>
            </Show>
        </section>
    }
}
