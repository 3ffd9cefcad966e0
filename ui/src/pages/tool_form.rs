//! The custom-tool form: add a tool, or edit or remove one an administrator added. What the form
//! can check itself (the schema box is JSON, there is a command) it checks before sending; the
//! shell checks the rest (a valid name, a valid JSON Schema, a name not taken) and its errors come
//! back with a JSON pointer, shown under the input they are about.

use leptos::prelude::*;
use tw_protocol::{IpcError, SaveToolParams, ToolParams, ToolSummary, commands};

use crate::app::AppState;
use crate::ipc;
use crate::logic::tool_form::{CATEGORIES, Field, FieldError, RISKS, ToolForm};
use crate::pages::tools::{TIERS, load_tools, open_tool};

/// The form being filled in: for a new tool, or for editing `original`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draft {
    pub(crate) original: Option<String>,
    pub(crate) form: ToolForm,
}

fn save(
    state: AppState,
    draft: RwSignal<Draft>,
    errors: RwSignal<Vec<FieldError>>,
    busy: RwSignal<bool>,
) {
    let d = draft.get_untracked();
    let spec = match d.form.to_spec() {
        Ok(spec) => spec,
        Err(e) => {
            errors.set(vec![e]);
            return;
        }
    };
    errors.set(Vec::new());
    busy.set(true);
    leptos::task::spawn_local(async move {
        let params = SaveToolParams {
            spec,
            original_name: d.original.clone(),
        };
        let r: Result<ToolSummary, IpcError> =
            ipc::invoke(commands::SAVE_CUSTOM_TOOL, &params).await;
        busy.set(false);
        match r {
            Ok(saved) => {
                state
                    .notice
                    .set(Some(format!("saved custom tool {}", saved.name)));
                state.tools.form.set(None);
                load_tools(state);
                open_tool(state, saved.name);
            }
            Err(e) => errors.set(vec![FieldError {
                field: Field::of(e.field.as_deref()),
                message: e.message,
            }]),
        }
    });
}

/// Removes a custom tool (the tool page asks first).
pub(crate) fn remove(state: AppState, name: String) {
    leptos::task::spawn_local(async move {
        let r: Result<(), IpcError> = ipc::invoke(
            commands::REMOVE_CUSTOM_TOOL,
            &ToolParams {
                name: name.clone(),
                caller: None,
            },
        )
        .await;
        match r {
            Ok(()) => {
                state
                    .notice
                    .set(Some(format!("removed custom tool {name}")));
                state.tools.open.set(None);
                load_tools(state);
            }
            Err(e) => state.report(&e),
        }
    });
}

/// The message for `field`, if there is one.
fn error_at(errors: RwSignal<Vec<FieldError>>, field: Field) -> impl IntoView {
    move || {
        errors.with(|es| {
            es.iter().find(|e| e.field == field).map(|e| {
                view! {
                    <p class="field-error" role="alert" data-field=field.key()>
                        {e.message.clone()}
                    </p>
                }
            })
        })
    }
}

fn select(
    id: &'static str,
    label: &'static str,
    options: &'static [&'static str],
    get: fn(&ToolForm) -> &String,
    set: fn(&mut ToolForm, String),
    draft: RwSignal<Draft>,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <select
                id=id
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    draft.update(|d| set(&mut d.form, v));
                }
            >
                {options
                    .iter()
                    .map(|o| {
                        let selected = move || draft.with(|d| get(&d.form) == o);
                        view! {
                            <option value=*o selected=selected>
                                {*o}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        </label>
    }
}

/// A labelled monospace text box over one field of the form.
fn text_area(
    id: &'static str,
    label: &'static str,
    rows: u32,
    get: fn(&ToolForm) -> String,
    set: fn(&mut ToolForm, String),
    draft: RwSignal<Draft>,
) -> impl IntoView {
    view! {
        <label class="field">
            <span>{label}</span>
            <textarea
                id=id
                rows=rows
                spellcheck="false"
                prop:value=move || draft.with(|d| get(&d.form))
                on:input=move |ev| {
                    let v = event_target_value(&ev);
                    draft.update(|d| set(&mut d.form, v));
                }
            ></textarea>
        </label>
    }
}

/// The form page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ToolFormView(state: AppState, draft: Draft) -> impl IntoView {
    let editing = draft.original.clone();
    let draft = RwSignal::new(draft);
    let errors: RwSignal<Vec<FieldError>> = RwSignal::new(Vec::new());
    let busy = RwSignal::new(false);
    let title = match &editing {
        Some(name) => format!("Edit {name}"),
        None => "Add a custom tool".to_owned(),
    };
    let text_input =
        |id: &'static str, get: fn(&ToolForm) -> String, set: fn(&mut ToolForm, String)| {
            view! {
                <input
                    id=id
                    type="text"
                    prop:value=move || draft.with(|d| get(&d.form))
                    on:input=move |ev| {
                        let v = event_target_value(&ev);
                        draft.update(|d| set(&mut d.form, v));
                    }
                />
            }
        };
    view! {
        <div id="tool-form">
            <header class="page-head">
                <button class="btn" on:click=move |_| state.tools.form.set(None)>
                    "← Back"
                </button>
                <h1>{title}</h1>
            </header>
            <form
                class="card form"
                on:submit=move |ev| {
                    ev.prevent_default();
                    save(state, draft, errors, busy);
                }
            >
                {error_at(errors, Field::Form)}
                <label class="field">
                    <span>"Name (lowercase letters, digits and _)"</span>
                    {text_input("ct-name", |f| f.name.clone(), |f, v| f.name = v)}
                </label>
                {error_at(errors, Field::Name)}
                <label class="field">
                    <span>"Description (what agents read)"</span>
                    {text_input("ct-description", |f| f.description.clone(), |f, v| f.description = v)}
                </label>
                {error_at(errors, Field::Description)}
                <div class="form-row">
                    {select("ct-category", "Category", &CATEGORIES, |f| &f.category, |f, v| f.category = v, draft)}
                    {select("ct-risk", "Risk", &RISKS, |f| &f.risk, |f, v| f.risk = v, draft)}
                    {select("ct-tier", "Least tier", &TIERS, |f| &f.tier, |f, v| f.tier = v, draft)}
                    <label class="field check">
                        <span>"Ask a person before each call"</span>
                        <input
                            id="ct-confirm"
                            type="checkbox"
                            prop:checked=move || draft.with(|d| d.form.requires_confirmation)
                            on:change=move |ev| {
                                let on = event_target_checked(&ev);
                                draft.update(|d| d.form.requires_confirmation = on);
                            }
                        />
                    </label>
                </div>
                {error_at(errors, Field::Category)}
                {error_at(errors, Field::Risk)}
                {error_at(errors, Field::Tier)}
                {error_at(errors, Field::Confirmation)}
                {text_area(
                    "ct-parameters",
                    "Parameters (JSON Schema of the arguments)",
                    10,
                    |f| f.parameters.clone(),
                    |f, v| f.parameters = v,
                    draft,
                )}
                {error_at(errors, Field::Parameters)}
                {text_area(
                    "ct-argv",
                    "Command: one argument per line; {name} is replaced by that argument",
                    4,
                    |f| f.argv.clone(),
                    |f, v| f.argv = v,
                    draft,
                )}
                {error_at(errors, Field::Command)}
                <div class="actions">
                    <button class="btn primary" id="ct-save" type="submit" disabled=move || busy.get()>
                        {move || if busy.get() { "Saving…" } else { "Save" }}
                    </button>
                    <button class="btn" type="button" on:click=move |_| state.tools.form.set(None)>
                        "Cancel"
                    </button>
                </div>
            </form>
        </div>
    }
}
