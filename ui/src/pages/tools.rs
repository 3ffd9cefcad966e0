//! The tools console: every tool with its policy decision and its on/off switches per license
//! tier, filtered in place; and a tool's own page (description, constraints, the parameters schema
//! as a readable form, policy's explanation).

use leptos::prelude::*;
use serde_json::Value;
use tw_protocol::{
    IpcError, ListToolsParams, SetToolEnabledParams, Settings, ToolDetail, ToolParams, ToolSummary,
    commands,
};

use crate::app::{AppState, Load};
use crate::ipc;
use crate::logic::filters::{ToolFilter, choices};
use crate::logic::schema::{FormRow, form_rows};
use crate::logic::tool_form::ToolForm;
use crate::pages::tool_form::{Draft, ToolFormView, remove};
use crate::pages::try_it::TryIt;
use crate::widgets::{Badge, JsonBlock, Trace, load_state};

/// The license tiers, least first: the per-tier switches.
pub(crate) const TIERS: [&str; 4] = ["core", "pro", "teams", "enterprise"];

/// The console's state, kept across page switches.
#[derive(Clone, Copy)]
pub(crate) struct ToolsState {
    list: RwSignal<Load<Vec<ToolSummary>>>,
    filter: RwSignal<ToolFilter>,
    /// The tool whose page is open.
    pub(crate) open: RwSignal<Option<String>>,
    detail: RwSignal<Load<ToolDetail>>,
    /// Switches waiting for the backend, as `tool/tier`.
    busy: RwSignal<Vec<String>>,
    /// The custom-tool form, while it is open.
    pub(crate) form: RwSignal<Option<Draft>>,
    /// The agent id policy's explanation is shown for (empty: the app's own caller).
    explain_for: RwSignal<String>,
}

impl ToolsState {
    pub(crate) fn new() -> Self {
        Self {
            list: RwSignal::new(Load::Idle),
            filter: RwSignal::new(ToolFilter::default()),
            open: RwSignal::new(None),
            detail: RwSignal::new(Load::Idle),
            busy: RwSignal::new(Vec::new()),
            form: RwSignal::new(None),
            explain_for: RwSignal::new(String::new()),
        }
    }
}

pub(crate) fn load_tools(state: AppState) {
    let tools = state.tools;
    if tools.list.with_untracked(|l| l.ready().is_none()) {
        tools.list.set(Load::Loading);
    }
    leptos::task::spawn_local(async move {
        let r: Result<Vec<ToolSummary>, IpcError> =
            ipc::invoke(commands::LIST_TOOLS, &ListToolsParams::default()).await;
        if let Err(e) = &r {
            state.report(e);
        }
        let loaded = r.is_ok();
        tools.list.set(r.into());
        // The tools list is the first view the app opens on.
        if loaded {
            crate::app::report_interactive();
        }
    });
}

pub(crate) fn open_tool(state: AppState, name: String) {
    let tools = state.tools;
    if tools.open.get_untracked().as_deref() != Some(name.as_str()) {
        tools.explain_for.set(String::new());
    }
    tools.open.set(Some(name.clone()));
    tools.detail.set(Load::Loading);
    let caller = Some(tools.explain_for.get_untracked()).filter(|c| !c.trim().is_empty());
    leptos::task::spawn_local(async move {
        let params = ToolParams {
            name: name.clone(),
            caller,
        };
        let r: Result<ToolDetail, IpcError> = ipc::invoke(commands::GET_TOOL, &params).await;
        if let Err(e) = &r {
            state.report(e);
        }
        // Only if the person has not moved on to another tool meanwhile.
        if tools.open.get_untracked().as_deref() == Some(name.as_str()) {
            tools.detail.set(r.into());
        }
    });
}

/// Switches `name` on or off for `tier` (`None`: the current tier, read from the settings, which
/// may not have arrived yet); the row shows the backend's answer, not the click.
fn set_enabled(state: AppState, name: String, tier: Option<String>, enabled: bool) {
    let tools = state.tools;
    let key = busy_key(&name, tier.as_deref());
    if tools.busy.with_untracked(|b| b.contains(&key)) {
        return;
    }
    tools.busy.update(|b| b.push(key.clone()));
    // Called from a click whose default was prevented: the browser restores the checkbox once the
    // click's dispatch ends, so the answer must land after that (a new task), or the restore
    // would undo it.
    set_timeout(
        move || {
            leptos::task::spawn_local(async move {
                let r = switch(state, name, tier, enabled).await;
                tools.busy.update(|b| b.retain(|k| k != &key));
                if let Err(e) = r {
                    state.report(&e);
                }
            });
        },
        std::time::Duration::ZERO,
    );
}

fn busy_key(name: &str, tier: Option<&str>) -> String {
    format!("{name}/{}", tier.unwrap_or("current"))
}

async fn switch(
    state: AppState,
    name: String,
    tier: Option<String>,
    enabled: bool,
) -> Result<(), IpcError> {
    let tools = state.tools;
    let tier = match tier {
        Some(t) => t,
        None => {
            let s: Settings = ipc::invoke(commands::GET_SETTINGS, &()).await?;
            let tier = s.tier.clone();
            state.settings.set(Load::Ready(s));
            tier
        }
    };
    let params = SetToolEnabledParams {
        name,
        tier,
        enabled,
    };
    let summary: ToolSummary = ipc::invoke(commands::SET_TOOL_ENABLED, &params).await?;
    tools.list.update(|l| {
        if let Load::Ready(list) = l
            && let Some(row) = list.iter_mut().find(|t| t.name == summary.name)
        {
            *row = summary.clone();
        }
    });
    tools.detail.update(|d| {
        if let Load::Ready(detail) = d
            && detail.summary.name == summary.name
        {
            detail.summary = summary;
        }
    });
    Ok(())
}

/// The tools page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ToolsPage(state: AppState) -> impl IntoView {
    load_tools(state);
    let tools = state.tools;
    view! {
        <section id="page-tools" class="page">
            {move || match (tools.form.get(), tools.open.get()) {
                (Some(draft), _) => view! { <ToolFormView state draft/> }.into_any(),
                (None, Some(_)) => view! { <ToolDetailView state/> }.into_any(),
                (None, None) => view! { <ToolsTable state/> }.into_any(),
            }}
        </section>
    }
}

/// A `<select>` over one field's values, `""` meaning any.
fn filter_select(
    label: &'static str,
    options: Signal<Vec<String>>,
    get: impl Fn(&ToolFilter) -> String + Copy + Send + Sync + 'static,
    set: impl Fn(&mut ToolFilter, String) + Copy + Send + Sync + 'static,
    filter: RwSignal<ToolFilter>,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <select on:change=move |ev| {
                let v = event_target_value(&ev);
                filter.update(|f| set(f, v));
            }>
                <option value="" selected=move || filter.with(|f| get(f).is_empty())>
                    "any"
                </option>
                {move || {
                    options
                        .get()
                        .into_iter()
                        .map(|o| {
                            let value = o.clone();
                            let selected = move || filter.with(|f| get(f) == value);
                            view! {
                                <option value=o.clone() selected=selected>
                                    {o.clone()}
                                </option>
                            }
                        })
                        .collect_view()
                }}
            </select>
        </label>
    }
}

#[component]
fn ToolsTable(state: AppState) -> impl IntoView {
    let tools = state.tools;
    let filter = tools.filter;
    let all = move || tools.list.with(|l| l.ready().cloned().unwrap_or_default());
    let field_choices = move |f: fn(&ToolSummary) -> &str| {
        Signal::derive(move || {
            tools
                .list
                .with(|l| choices(l.ready().map_or(&[], |v| v), f))
        })
    };
    let current_tier = move || state.settings.with(|s| s.ready().map(|s| s.tier.clone()));
    let shown = move || {
        let f = filter.get();
        all()
            .into_iter()
            .filter(|t| f.matches(t))
            .collect::<Vec<_>>()
    };
    let count = move || {
        let total = tools.list.with(|l| l.ready().map_or(0, Vec::len));
        format!("{} of {total}", shown().len())
    };
    let rows = move || {
        let tier = current_tier();
        shown()
            .into_iter()
            .map(|t| view! { <ToolRow state tool=t current_tier=tier.clone()/> })
            .collect_view()
    };
    view! {
        <header class="page-head">
            <h1>"Tools"</h1>
            <span class="muted">{count}</span>
            <button class="btn" id="tools-reload" on:click=move |_| load_tools(state)>
                "Reload"
            </button>
            <button
                class="btn primary"
                id="tools-add"
                on:click=move |_| {
                    tools
                        .form
                        .set(
                            Some(Draft {
                                original: None,
                                form: ToolForm::default(),
                            }),
                        )
                }
            >
                "Add custom tool"
            </button>
        </header>
        <div class="filters">
            <label class="field grow">
                <span>"Search"</span>
                <input
                    id="tools-search"
                    type="search"
                    placeholder="name or description"
                    prop:value=move || filter.with(|f| f.search.clone())
                    on:input=move |ev| {
                        let v = event_target_value(&ev);
                        filter.update(|f| f.search = v);
                    }
                />
            </label>
            {filter_select(
                "Category",
                field_choices(|t| &t.category),
                |f| f.category.clone(),
                |f, v| f.category = v,
                filter,
            )}
            {filter_select(
                "Group",
                field_choices(|t| &t.group),
                |f| f.group.clone(),
                |f, v| f.group = v,
                filter,
            )}
            {filter_select(
                "Tier",
                Signal::derive(|| TIERS.map(String::from).to_vec()),
                |f| f.tier.clone(),
                |f, v| f.tier = v,
                filter,
            )}
            {filter_select(
                "Risk",
                Signal::derive(|| ["low", "medium", "high"].map(String::from).to_vec()),
                |f| f.risk.clone(),
                |f, v| f.risk = v,
                filter,
            )}
            {filter_select(
                "Enabled",
                Signal::derive(|| ["on", "off"].map(String::from).to_vec()),
                |f| f.enabled.clone(),
                |f, v| f.enabled = v,
                filter,
            )}
            <button class="btn link" on:click=move |_| filter.set(ToolFilter::default())>
                "Clear"
            </button>
        </div>
        {move || tools.list.with(|l| load_state(l, "tools"))}
        <Show when=move || tools.list.with(|l| l.ready().is_some())>
            <table class="grid" id="tools-table">
                <thead>
                    <tr>
                        <th>"Name"</th>
                        <th>"Category"</th>
                        <th>"Group"</th>
                        <th>"Risk"</th>
                        <th>"Tier"</th>
                        <th>"Decision"</th>
                        <th title="Enabled at the current license tier">"Enabled"</th>
                        {TIERS.map(|t| view! { <th class="tier-col">{t}</th> }).to_vec()}
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
            <Show when=move || shown().is_empty()>
                <p class="muted empty">"No tool matches these filters."</p>
            </Show>
        </Show>
    }
}

#[component]
fn ToolRow(state: AppState, tool: ToolSummary, current_tier: Option<String>) -> impl IntoView {
    let busy = state.tools.busy;
    let name = tool.name.clone();
    let is_busy = {
        let name = name.clone();
        move |tier: Option<&str>| busy.with(|b| b.contains(&busy_key(&name, tier)))
    };
    let current = {
        let name = name.clone();
        let tier = current_tier.clone();
        let enabled = tool.enabled;
        let is_busy = is_busy.clone();
        let busy_now = {
            let tier = tier.clone();
            move || is_busy(tier.as_deref())
        };
        let title = match &tier {
            Some(t) => format!("Enabled at the current tier ({t})"),
            None => "Enabled at the current tier".to_owned(),
        };
        view! {
            <input
                type="checkbox"
                class="tool-enabled"
                title=title
                prop:checked=enabled
                disabled=busy_now
                on:click=move |ev| {
                    // The checkbox shows what the backend says, not the click: undo the click's
                    // toggle, and let the answer re-render the row.
                    ev.prevent_default();
                    set_enabled(state, name.clone(), tier.clone(), !enabled);
                }
            />
        }
    };
    let per_tier = TIERS
        .map(|tier| {
            let on = !tool.disabled_tiers.iter().any(|d| d == tier);
            let name = name.clone();
            let is_busy = is_busy.clone();
            view! {
                <td class="tier-col">
                    <input
                        type="checkbox"
                        class="tier-toggle"
                        data-tier=tier
                        title=format!("Enabled for the {tier} tier")
                        prop:checked=on
                        disabled=move || is_busy(Some(tier))
                        on:click=move |ev| {
                            ev.prevent_default();
                            set_enabled(state, name.clone(), Some(tier.to_owned()), !on);
                        }
                    />
                </td>
            }
        })
        .to_vec();
    let open = name.clone();
    let row_class = if tool.enabled { "" } else { "off" };
    view! {
        <tr data-tool=name.clone() class=row_class>
            <td>
                <button
                    class="link tool-name"
                    title=tool.description.clone()
                    on:click=move |_| open_tool(state, open.clone())
                >
                    {name.clone()}
                </button>
                {tool.requires_confirmation.then(|| view! { <span class="tag">"asks"</span> })}
                {(!tool.builtin).then(|| view! { <span class="tag">"custom"</span> })}
            </td>
            <td>{tool.category.clone()}</td>
            <td>{tool.group.clone()}</td>
            <td>
                <Badge word=tool.risk.clone()/>
            </td>
            <td>{tool.tier.clone()}</td>
            <td title=tool.reason.clone()>
                <Badge word=tool.decision.clone()/>
            </td>
            <td>{current}</td>
            {per_tier}
        </tr>
    }
}

#[component]
fn ToolDetailView(state: AppState) -> impl IntoView {
    let tools = state.tools;
    let back = move || tools.open.set(None);
    let keys = window_event_listener(leptos::ev::keydown, move |e| {
        if e.key() == "Escape"
            && state
                .confirmations
                .with_untracked(|c| c.ready().is_none_or(Vec::is_empty))
        {
            tools.open.set(None);
        }
    });
    on_cleanup(move || keys.remove());
    view! {
        <div id="tool-detail">
            <header class="page-head">
                <button class="btn" on:click=move |_| back()>
                    "← All tools"
                </button>
                <h1>{move || tools.open.get().unwrap_or_default()}</h1>
            </header>
            {move || tools.detail.with(|d| load_state(d, "the tool"))}
            {move || tools.detail.with(|d| d.ready().cloned()).map(|d| detail_body(state, d))}
        </div>
    }
}

fn detail_body(state: AppState, d: ToolDetail) -> impl IntoView {
    let s = d.summary.clone();
    let name = s.name.clone();
    let tools = state.tools;
    let removing = RwSignal::new(false);
    let custom_actions = d.spec.clone().map(|spec| {
        let edit_name = name.clone();
        let remove_name = name.clone();
        view! {
            <div class="actions">
                <button
                    class="btn"
                    id="tool-edit"
                    on:click=move |_| {
                        tools
                            .form
                            .set(
                                Some(Draft {
                                    original: Some(edit_name.clone()),
                                    form: ToolForm::from_spec(&spec),
                                }),
                            )
                    }
                >
                    "Edit"
                </button>
                <button class="btn danger" id="tool-remove" on:click=move |_| removing.set(true)>
                    "Remove"
                </button>
                <Show when=move || removing.get()>
                    <span class="confirm-step" role="alertdialog">
                        "Remove this tool? Calls to it fail from then on. "
                        <button
                            class="btn danger"
                            id="tool-remove-confirm"
                            on:click={
                                let n = remove_name.clone();
                                move |_| remove(state, n.clone())
                            }
                        >
                            "Remove"
                        </button>
                        <button class="btn" on:click=move |_| removing.set(false)>
                            "Keep"
                        </button>
                    </span>
                </Show>
            </div>
        }
    });
    let try_name = name.clone();
    let explain_name = name.clone();
    let explained_for = d.explained_for.clone();
    let rows = form_rows(&d.parameters);
    let output_rows = d.output_schema.as_ref().map(form_rows).unwrap_or_default();
    let disabled = if s.disabled_tiers.is_empty() {
        "none".to_owned()
    } else {
        s.disabled_tiers.join(", ")
    };
    view! {
        <div class="detail-grid">
            <section class="card">
                <h2>"About"</h2>
                <p class="description">{s.description.clone()}</p>
                {custom_actions}
                <dl class="facts">
                    <dt>"Category"</dt>
                    <dd>{s.category.clone()}</dd>
                    <dt>"Group"</dt>
                    <dd>{s.group.clone()}</dd>
                    <dt>"Risk"</dt>
                    <dd>
                        <Badge word=s.risk.clone()/>
                    </dd>
                    <dt>"Least tier"</dt>
                    <dd>{s.tier.clone()}</dd>
                    <dt>"Confirmation"</dt>
                    <dd>
                        {if s.requires_confirmation {
                            "asks a person before every call"
                        } else {
                            "not required by its definition"
                        }}
                    </dd>
                    <dt>"Origin"</dt>
                    <dd>{if s.builtin { "built in" } else { "added by an administrator" }}</dd>
                    <dt>"Enabled here"</dt>
                    <dd>
                        <Badge word=if s.enabled { "on" } else { "off" }/>
                    </dd>
                    <dt>"Switched off for"</dt>
                    <dd>{disabled}</dd>
                </dl>
            </section>
            <section class="card">
                <h2>"Policy"</h2>
                <p>
                    <Badge word=s.decision.clone()/>
                    " "
                    {s.reason.clone()}
                </p>
                <p class="muted small" id="explained-for">
                    {format!("Explained for the caller {explained_for}")}
                </p>
                <Trace lines=d.explanation.clone()/>
                <form
                    class="form-row"
                    on:submit=move |ev| {
                        ev.prevent_default();
                        open_tool(state, explain_name.clone());
                    }
                >
                    <label class="field grow">
                        <span>"Explain for another caller (agent id)"</span>
                        <input
                            id="explain-caller"
                            type="text"
                            placeholder="desktop"
                            prop:value=move || tools.explain_for.get()
                            on:input=move |ev| tools.explain_for.set(event_target_value(&ev))
                        />
                    </label>
                    <button class="btn" type="submit" id="explain-run">
                        "Re-evaluate"
                    </button>
                </form>
            </section>
            <TryIt state name=try_name schema=d.parameters.clone()/>
            <section class="card wide">
                <h2>"Parameters"</h2>
                <SchemaRows rows/>
                <details>
                    <summary>"JSON Schema"</summary>
                    <JsonBlock value=d.parameters.clone()/>
                </details>
            </section>
            {d
                .output_schema
                .clone()
                .map(|schema| {
                    view! {
                        <section class="card wide">
                            <h2>"Output"</h2>
                            <SchemaRows rows=output_rows/>
                            <details>
                                <summary>"JSON Schema"</summary>
                                <JsonBlock value=schema/>
                            </details>
                        </section>
                    }
                })}
            <section class="card wide">
                <h2>"Constraints"</h2>
                <Facts value=d.constraints.clone()/>
            </section>
        </div>
    }
}

/// A schema's properties as a read-only form.
#[component]
fn SchemaRows(rows: Vec<FormRow>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="muted">"No parameters."</p> }.into_any();
    }
    let body = rows
        .into_iter()
        .map(|r| {
            let style = format!("padding-left: {}em", 0.5 + r.depth as f64 * 1.25);
            let rules = r
                .rules
                .iter()
                .map(|rule| view! { <span class="rule">{rule.clone()}</span> })
                .collect_view();
            view! {
                <tr>
                    <td style=style>
                        <code>{r.path.clone()}</code>
                    </td>
                    <td>
                        <code class="type">{r.ty.clone()}</code>
                    </td>
                    <td>
                        {if r.required {
                            view! { <span class="tag required">"required"</span> }.into_any()
                        } else {
                            view! { <span class="muted">"optional"</span> }.into_any()
                        }}
                    </td>
                    <td>{r.description.clone()}</td>
                    <td class="rules">{rules}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="grid schema">
            <thead>
                <tr>
                    <th>"Property"</th>
                    <th>"Type"</th>
                    <th>"Required"</th>
                    <th>"Description"</th>
                    <th>"Constraints"</th>
                </tr>
            </thead>
            <tbody>{body}</tbody>
        </table>
    }
    .into_any()
}

/// An object's members as a two-column list (nested values as JSON); anything else as JSON.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn Facts(value: Value) -> impl IntoView {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let items = map
                .into_iter()
                .map(|(k, v)| {
                    let shown = match v {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    view! {
                        <dt>{k}</dt>
                        <dd>{shown}</dd>
                    }
                })
                .collect_view();
            view! { <dl class="facts">{items}</dl> }.into_any()
        }
        Value::Null => view! { <p class="muted">"None."</p> }.into_any(),
        other => view! { <JsonBlock value=other/> }.into_any(),
    }
}
