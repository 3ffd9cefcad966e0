//! The audit log: every governed call, newest first, 50 to a page, with filters applied on
//! submit, and a detail panel for one call (its arguments, output, decision trace and what the
//! sandbox measured); the usage charts and the export of the filtered rows.

use leptos::prelude::*;
use serde_json::Value;
use tw_protocol::{
    AuditDetail, AuditPage as Page, AuditRecordParams, AuditSummary, IpcError, commands,
};

use crate::app::{AppState, Load};
use crate::browser;
use crate::ipc;
use crate::logic::cursor::CursorStack;
use crate::logic::filters::AuditForm;
use crate::logic::time::duration;
use crate::pages::tools::Facts;
use crate::pages::usage::{UsagePanel, export};
use crate::widgets::{Badge, JsonBlock, Trace, load_state};

/// The statuses a call can end with (tw-core's `ToolStatus`), for the status filter.
const STATUSES: [&str; 9] = [
    "success",
    "failed",
    "timeout",
    "cancelled",
    "requires_confirmation",
    "sandbox_error",
    "permission_denied",
    "validation_error",
    "not_found",
];

/// The audit page's state, kept across page switches.
#[derive(Clone, Copy)]
pub(crate) struct AuditState {
    /// The form as typed.
    form: RwSignal<AuditForm>,
    /// The form as last submitted: what the table shows.
    applied: RwSignal<AuditForm>,
    cursors: RwSignal<CursorStack>,
    page: RwSignal<Load<Page>>,
    /// A query's sequence number, so an old reply never overwrites a newer one.
    seq: RwSignal<u64>,
    open: RwSignal<Option<String>>,
    detail: RwSignal<Load<AuditDetail>>,
    /// Whether the usage charts are shown.
    usage: RwSignal<bool>,
}

impl AuditState {
    pub(crate) fn new() -> Self {
        Self {
            form: RwSignal::new(AuditForm::default()),
            applied: RwSignal::new(AuditForm::default()),
            cursors: RwSignal::new(CursorStack::default()),
            page: RwSignal::new(Load::Idle),
            seq: RwSignal::new(0),
            open: RwSignal::new(None),
            detail: RwSignal::new(Load::Idle),
            usage: RwSignal::new(false),
        }
    }
}

/// Queries the page the cursors point at with the submitted filters.
fn run_query(state: AppState) {
    let audit = state.audit;
    let cursor = audit.cursors.with_untracked(CursorStack::current);
    let params = match audit
        .applied
        .with_untracked(|f| f.to_params(cursor, browser::offset_at_wall))
    {
        Ok(p) => p,
        Err(e) => {
            audit.page.set(Load::Failed(e));
            return;
        }
    };
    let seq = audit.seq.get_untracked() + 1;
    audit.seq.set(seq);
    if audit.page.with_untracked(|p| p.ready().is_none()) {
        audit.page.set(Load::Loading);
    }
    leptos::task::spawn_local(async move {
        let r: Result<Page, IpcError> = ipc::invoke(commands::QUERY_AUDIT, &params).await;
        if audit.seq.get_untracked() != seq {
            return;
        }
        if let Err(e) = &r {
            state.report(e);
        }
        audit.page.set(r.into());
    });
}

/// Exports every row the submitted filters select.
fn export_applied(state: AppState, format: &'static str) {
    match state
        .audit
        .applied
        .with_untracked(|f| f.to_params(None, browser::offset_at_wall))
    {
        Ok(filter) => export(state, filter, format),
        Err(e) => state.error.set(Some(e)),
    }
}

fn open_record(state: AppState, execution_id: String) {
    let audit = state.audit;
    audit.open.set(Some(execution_id.clone()));
    audit.detail.set(Load::Loading);
    leptos::task::spawn_local(async move {
        let params = AuditRecordParams {
            execution_id: execution_id.clone(),
        };
        let r: Result<AuditDetail, IpcError> =
            ipc::invoke(commands::GET_AUDIT_RECORD, &params).await;
        if let Err(e) = &r {
            state.report(e);
        }
        if audit.open.get_untracked().as_deref() == Some(execution_id.as_str()) {
            audit.detail.set(r.into());
        }
    });
}

/// A text input bound to one field of the form.
fn text_field(
    label: &'static str,
    id: &'static str,
    kind: &'static str,
    form: RwSignal<AuditForm>,
    get: fn(&AuditForm) -> String,
    set: fn(&mut AuditForm, String),
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <input
                id=id
                type=kind
                prop:value=move || form.with(get)
                on:input=move |ev| {
                    let v = event_target_value(&ev);
                    form.update(|f| set(f, v));
                }
            />
        </label>
    }
}

/// The audit log page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn AuditPage(state: AppState) -> impl IntoView {
    let audit = state.audit;
    run_query(state);
    let form = audit.form;
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        audit.applied.set(form.get_untracked());
        audit.cursors.update(CursorStack::reset);
        run_query(state);
    };
    let older = move |_| {
        let next = audit
            .page
            .with_untracked(|p| p.ready().and_then(|p| p.next_cursor));
        if let Some(next) = next {
            audit.cursors.update(|c| c.older(next));
            run_query(state);
        }
    };
    let newer = move |_| {
        if audit.cursors.try_update(CursorStack::newer) == Some(true) {
            run_query(state);
        }
    };
    let keys = window_event_listener(leptos::ev::keydown, move |e| {
        if e.key() == "Escape"
            && state
                .confirmations
                .with_untracked(|c| c.ready().is_none_or(Vec::is_empty))
        {
            audit.open.set(None);
        }
    });
    on_cleanup(move || keys.remove());
    let rows = move || {
        audit.page.with(|p| {
            p.ready()
                .map(|p| p.rows.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|r| audit_row(state, r))
                .collect_view()
        })
    };
    view! {
        <section id="page-audit" class="page">
            <header class="page-head">
                <h1>"Audit log"</h1>
                <span class="muted" id="audit-query-ms">
                    {move || {
                        audit
                            .page
                            .with(|p| {
                                p.ready()
                                    .map(|p| format!("query {:.1} ms", p.query_ms))
                                    .unwrap_or_default()
                            })
                    }}
                </span>
                <button class="btn" id="audit-refresh" on:click=move |_| run_query(state)>
                    "Refresh"
                </button>
                <button
                    class=move || if audit.usage.get() { "btn primary" } else { "btn" }
                    id="audit-usage"
                    aria-pressed=move || audit.usage.get().to_string()
                    on:click=move |_| audit.usage.update(|u| *u = !*u)
                >
                    "Usage"
                </button>
                <button class="btn" id="audit-export-jsonl" on:click=move |_| export_applied(state, "jsonl")>
                    "Export JSONL"
                </button>
                <button class="btn" id="audit-export-csv" on:click=move |_| export_applied(state, "csv")>
                    "Export CSV"
                </button>
            </header>
            {move || audit.usage.get().then(|| view! { <UsagePanel state/> })}
            <form class="filters" on:submit=submit>
                {text_field("Tool", "audit-tool", "text", form, |f| f.tool.clone(), |f, v| f.tool = v)}
                <label class="field">
                    <span>"Status"</span>
                    <select
                        id="audit-status"
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            form.update(|f| f.status = v);
                        }
                    >
                        <option value="" selected=move || form.with(|f| f.status.is_empty())>
                            "any"
                        </option>
                        {STATUSES
                            .map(|s| {
                                view! {
                                    <option value=s selected=move || form.with(|f| f.status == s)>
                                        {s}
                                    </option>
                                }
                            })
                            .to_vec()}
                    </select>
                </label>
                {text_field(
                    "Caller",
                    "audit-caller",
                    "text",
                    form,
                    |f| f.caller.clone(),
                    |f, v| f.caller = v,
                )}
                {text_field("Skill", "audit-skill", "text", form, |f| f.skill.clone(), |f, v| f.skill = v)}
                {text_field(
                    "From",
                    "audit-from",
                    "datetime-local",
                    form,
                    |f| f.from.clone(),
                    |f, v| f.from = v,
                )}
                {text_field("To", "audit-to", "datetime-local", form, |f| f.to.clone(), |f, v| f.to = v)}
                {text_field("Text", "audit-text", "search", form, |f| f.text.clone(), |f, v| f.text = v)}
                <button class="btn primary" type="submit" id="audit-apply">
                    "Apply"
                </button>
                <button
                    class="btn link"
                    type="button"
                    on:click=move |_| {
                        form.set(AuditForm::default());
                        audit.applied.set(AuditForm::default());
                        audit.cursors.update(CursorStack::reset);
                        run_query(state);
                    }
                >
                    "Clear"
                </button>
            </form>
            <div class=move || {
                if audit.open.with(Option::is_some) { "split open" } else { "split" }
            }>
                <div class="split-main">
                    {move || audit.page.with(|p| load_state(p, "the audit log"))}
                    <Show when=move || audit.page.with(|p| p.ready().is_some())>
                        <table class="grid clickable" id="audit-table">
                            <thead>
                                <tr>
                                    <th>"Time"</th>
                                    <th>"Tool"</th>
                                    <th>"Status"</th>
                                    <th>"Decision"</th>
                                    <th>"Caller"</th>
                                    <th>"Skill"</th>
                                    <th class="num">"Duration"</th>
                                    <th>"Error"</th>
                                </tr>
                            </thead>
                            <tbody>{rows}</tbody>
                        </table>
                        <Show when=move || {
                            audit
                                .page
                                .with(|p| {
                                    p.ready()
                                        .is_some_and(|p| p.rows.is_empty() && p.scanned_to.is_none())
                                })
                        }>
                            <p class="muted empty">"No call matches these filters."</p>
                        </Show>
                        {move || {
                            audit
                                .page
                                .with(|p| p.ready().and_then(|p| p.scanned_to))
                                .map(|to| {
                                    view! {
                                        <p class="muted" id="audit-scanned">
                                            {format!(
                                                "Searched the log down to row {to}; \"Older →\" searches on.",
                                            )}
                                        </p>
                                    }
                                })
                        }}
                    </Show>
                    <div class="pager">
                        <button
                            class="btn"
                            id="audit-newer"
                            disabled=move || !audit.cursors.with(CursorStack::has_newer)
                            on:click=newer
                        >
                            "← Newer"
                        </button>
                        <span class="muted">
                            {move || format!("page {}", audit.cursors.with(CursorStack::page_number))}
                        </span>
                        <button
                            class="btn"
                            id="audit-older"
                            disabled=move || {
                                audit.page.with(|p| p.ready().is_none_or(|p| p.next_cursor.is_none()))
                            }
                            on:click=older
                        >
                            "Older →"
                        </button>
                    </div>
                </div>
                {move || audit.open.get().map(|_| view! { <AuditDetailPanel state/> })}
            </div>
        </section>
    }
}

fn audit_row(state: AppState, r: AuditSummary) -> impl IntoView {
    let id = r.execution_id.clone();
    let selected = {
        let id = id.clone();
        move || {
            if state.audit.open.with(|o| o.as_deref() == Some(id.as_str())) {
                "selected"
            } else {
                ""
            }
        }
    };
    view! {
        <tr
            data-execution-id=r.execution_id.clone()
            class=selected
            on:click=move |_| open_record(state, id.clone())
        >
            <td class="nowrap">{browser::local_time(r.started_at)}</td>
            <td class="audit-tool">{r.tool.clone()}</td>
            <td>
                <span class=format!("audit-status badge {}", crate::logic::tone::tone(&r.status).class())>
                    {r.status.clone()}
                </span>
            </td>
            <td>{r.decision.clone().map(|d| view! { <Badge word=d/> })}</td>
            <td>{r.caller.clone()}</td>
            <td>{r.skill.clone().unwrap_or_default()}</td>
            <td class="num nowrap">{duration(r.duration_us)}</td>
            <td class="error-cell" title=r.error.clone().unwrap_or_default()>
                {r.error.clone().unwrap_or_default()}
            </td>
        </tr>
    }
}

#[component]
fn AuditDetailPanel(state: AppState) -> impl IntoView {
    let audit = state.audit;
    view! {
        <aside id="audit-detail" class="panel">
            <header class="panel-head">
                <h2>"Call"</h2>
                <button class="btn link" on:click=move |_| audit.open.set(None)>
                    "Close"
                </button>
            </header>
            {move || audit.detail.with(|d| load_state(d, "the record"))}
            {move || audit.detail.with(|d| d.ready().cloned()).map(detail_body)}
        </aside>
    }
}

fn detail_body(d: AuditDetail) -> impl IntoView {
    let s = d.summary.clone();
    let execution = serde_json::to_string_pretty(&d.execution).unwrap_or_default();
    view! {
        <dl class="facts">
            <dt>"Tool"</dt>
            <dd>
                <strong>{s.tool.clone()}</strong>
            </dd>
            <dt>"Status"</dt>
            <dd>
                <Badge word=s.status.clone()/>
            </dd>
            <dt>"Execution"</dt>
            <dd>
                <code>{s.execution_id.clone()}</code>
            </dd>
            <dt>"Started"</dt>
            <dd>{browser::local_time(s.started_at)}</dd>
            <dt>"Duration"</dt>
            <dd id="audit-duration">{duration(s.duration_us)}</dd>
            <dt>"Caller"</dt>
            <dd>{s.caller.clone()}</dd>
            <dt>"Skill"</dt>
            <dd>{s.skill.clone().unwrap_or_else(|| "—".to_owned())}</dd>
            <dt>"Decision"</dt>
            <dd>{s.decision.clone().unwrap_or_else(|| "—".to_owned())}</dd>
        </dl>
        {s.error.clone().map(|e| view! { <div class="error-box">{e}</div> })}
        <h3>"Decision trace"</h3>
        <Trace lines=d.explanation.clone()/>
        <h3>"Arguments"</h3>
        <JsonBlock value=d.arguments.clone()/>
        <h3>"Output"</h3>
        {match d.output.clone() {
            Some(o) => view! { <JsonBlock value=o/> }.into_any(),
            None => view! { <p class="muted">"No output recorded."</p> }.into_any(),
        }}
        {d.execution.get("network").cloned().map(|n| view! {
            <h3>"Network"</h3>
            <Network facts=n/>
        })}
        <h3>"Execution facts"</h3>
        <Facts value=d.execution.clone()/>
        <details open>
            <summary>"As JSON"</summary>
            <pre class="json" id="audit-execution">{execution}</pre>
        </details>
    }
}

/// What a call did on the network (the egress gatekeeper's facts): requests, where they went,
/// bytes each way, redirects, and the rule and address of a refusal.
#[component]
fn Network(facts: Value) -> impl IntoView {
    let list = |key: &str| {
        let items: Vec<String> = facts[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if items.is_empty() {
            "—".to_owned()
        } else {
            items.join(", ")
        }
    };
    let number = |key: &str| facts[key].as_u64().unwrap_or(0).to_string();
    let refusal = facts.get("refusal").map(|r| {
        let rule = r["rule"].as_str().unwrap_or("—").to_owned();
        let address = r["address"].as_str().map(|a| format!(" (address {a})"));
        format!("{rule}{}", address.unwrap_or_default())
    });
    // Requests a browser page made that the gatekeeper refused, each with its rule.
    let blocked: Vec<(String, String)> = facts["blocked"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| {
                    let rule = b["rule"].as_str().unwrap_or("—");
                    let rule = match b["address"].as_str() {
                        Some(address) => format!("{rule} (address {address})"),
                        None => rule.to_owned(),
                    };
                    (b["destination"].as_str().unwrap_or("?").to_owned(), rule)
                })
                .collect()
        })
        .unwrap_or_default();
    view! {
        <dl class="facts" id="audit-network">
            <dt>"Requests"</dt>
            <dd>{number("requests")}</dd>
            <dt>"Hosts"</dt>
            <dd>{list("hosts")}</dd>
            <dt>"Addresses"</dt>
            <dd>{list("addresses")}</dd>
            <dt>"Bytes sent"</dt>
            <dd>{number("bytes_sent")}</dd>
            <dt>"Bytes received"</dt>
            <dd>{number("bytes_received")}</dd>
            <dt>"Redirects"</dt>
            <dd>{list("redirects")}</dd>
            {refusal.map(|r| view! {
                <dt>"Refused by"</dt>
                <dd class="refused">{r}</dd>
            })}
            {(!blocked.is_empty()).then(|| view! {
                <dt>"Blocked"</dt>
                <dd class="blocked">
                    {blocked
                        .into_iter()
                        .map(|(destination, rule)| view! {
                            <div><code>{destination}</code> " — " {rule}</div>
                        })
                        .collect::<Vec<_>>()}
                </dd>
            })}
        </dl>
    }
}
