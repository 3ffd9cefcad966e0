//! "Try it" on a tool's page: a form generated from the tool's parameters schema that runs one
//! call as the app's own caller, through the whole governed pipeline (policy, confirmation,
//! validation, sandbox, audit), and shows how it ended. A long call shows in the live view
//! meanwhile, where it can be cancelled.

use leptos::prelude::*;
use serde_json::Value;
use tw_protocol::{IpcError, RunResult, RunToolParams, commands};

use crate::app::AppState;
use crate::ipc;
use crate::logic::time::duration;
use crate::logic::try_form::{InputKind, TryInput, arguments, inputs};
use crate::widgets::{Badge, JsonBlock};

/// The card.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn TryIt(state: AppState, name: String, schema: Value) -> impl IntoView {
    let fields = inputs(&schema);
    let values: Vec<RwSignal<String>> = fields
        .iter()
        .map(|f| {
            RwSignal::new(if f.kind == InputKind::Bool {
                "false".to_owned()
            } else {
                String::new()
            })
        })
        .collect();
    let error: RwSignal<Option<(String, String)>> = RwSignal::new(None);
    let result: RwSignal<Option<RunResult>> = RwSignal::new(None);
    let running = RwSignal::new(false);
    let run = {
        let fields = fields.clone();
        let values = values.clone();
        move || {
            let typed: Vec<String> = values.iter().map(|v| v.get_untracked()).collect();
            let args = match arguments(&fields, &typed) {
                Ok(a) => a,
                Err(e) => {
                    error.set(Some(e));
                    return;
                }
            };
            error.set(None);
            result.set(None);
            running.set(true);
            let params = RunToolParams {
                name: name.clone(),
                arguments: args,
            };
            leptos::task::spawn_local(async move {
                let r: Result<RunResult, IpcError> = ipc::invoke(commands::RUN_TOOL, &params).await;
                running.set(false);
                match r {
                    Ok(r) => result.set(Some(r)),
                    Err(e) => state.report(&e),
                }
            });
        }
    };
    let rows = fields
        .iter()
        .zip(values.iter().copied())
        .map(|(f, value)| input_row(f.clone(), value, error))
        .collect::<Vec<_>>();
    view! {
        <section class="card wide" id="try-it">
            <h2>"Try it"</h2>
            <p class="muted small">
                "Runs one call as the app's caller, through policy, confirmation, validation and the sandbox; it is audited like any other."
            </p>
            <form
                class="form"
                on:submit=move |ev| {
                    ev.prevent_default();
                    run();
                }
            >
                {rows}
                {move || {
                    error
                        .get()
                        .filter(|(field, _)| field.is_empty())
                        .map(|(_, m)| view! { <p class="field-error">{m}</p> })
                }}
                <div class="actions">
                    <button class="btn primary" id="try-run" type="submit" disabled=move || running.get()>
                        {move || if running.get() { "Running…" } else { "Run" }}
                    </button>
                </div>
            </form>
            {move || result.get().map(|r| view! { <RunOutcome r/> })}
        </section>
    }
}

fn input_row(
    f: TryInput,
    value: RwSignal<String>,
    error: RwSignal<Option<(String, String)>>,
) -> impl IntoView {
    let id = format!("try-{}", f.name);
    let label = if f.required {
        format!("{} (required)", f.name)
    } else {
        f.name.clone()
    };
    let set = move |ev: leptos::ev::Event| value.set(event_target_value(&ev));
    let input = match &f.kind {
        InputKind::Bool => view! {
            <input
                id=id
                type="checkbox"
                prop:checked=move || value.get() == "true"
                on:change=move |ev| value.set(event_target_checked(&ev).to_string())
            />
        }
        .into_any(),
        InputKind::Choice(options) => {
            let options = options
                .iter()
                .map(|o| view! { <option value=o.clone()>{o.clone()}</option> })
                .collect_view();
            view! {
                <select id=id on:change=set>
                    <option value="">"(not set)"</option>
                    {options}
                </select>
            }
            .into_any()
        }
        InputKind::Json => view! {
            <textarea id=id rows="3" spellcheck="false" placeholder="JSON" on:input=set></textarea>
        }
        .into_any(),
        InputKind::Integer | InputKind::Number => {
            view! { <input id=id type="text" inputmode="decimal" on:input=set/> }.into_any()
        }
        InputKind::Text => view! { <input id=id type="text" on:input=set/> }.into_any(),
    };
    let name = f.name.clone();
    view! {
        <label class="field">
            <span>{label}</span>
            {input}
            <span class="muted small">{f.description.clone()}</span>
        </label>
        {move || {
            error
                .get()
                .filter(|(field, _)| *field == name)
                .map(|(_, m)| view! { <p class="field-error" role="alert">{m}</p> })
        }}
    }
}

#[component]
fn RunOutcome(r: RunResult) -> impl IntoView {
    view! {
        <div id="try-result" data-status=r.status.clone()>
            <p>
                <Badge word=r.status.clone()/>
                " "
                <span class="muted">{format!("in {}", duration(r.duration_us))}</span>
                " "
                <code class="muted">{r.execution_id.clone()}</code>
            </p>
            {r
                .error
                .clone()
                .map(|e| {
                    let at = r.error_field.clone().filter(|f| !f.is_empty());
                    view! {
                        <p class="field-error">
                            {e}
                            {at.map(|f| format!(" (at {f})"))}
                        </p>
                    }
                })}
            {r.output.clone().map(|o| view! { <JsonBlock value=o/> })}
        </div>
    }
}
