//! The skill's tools and the administrators' overrides on the skills page: each resolved tool
//! with where it came from and a way to take it away (with a reason), the form that adds a tool
//! at a level, and the overrides with who, when and why, each of which can be cleared. The
//! skills service checks and records every change; this part only asks and shows.

use leptos::prelude::*;
use tw_protocol::{
    IpcError, SkillDetail, SkillOverrideEntry, SkillOverrideParams, SkillToolEntry, commands,
};

use super::{load_skills, show_detail};
use crate::app::AppState;
use crate::logic::skills::LEVELS;
use crate::{browser, ipc};

/// Sends an override; on success shows the skill as it is now and says what changed.
fn set_override(state: AppState, params: SkillOverrideParams, done: String) {
    let s = state.skills;
    if s.busy.get_untracked() {
        return;
    }
    s.busy.set(true);
    leptos::task::spawn_local(async move {
        let r: Result<SkillDetail, IpcError> =
            ipc::invoke(commands::SET_SKILL_OVERRIDE, &params).await;
        s.busy.set(false);
        match r {
            Ok(detail) => {
                state.notice.set(Some(done));
                s.removing.set(None);
                s.remove_reason.set(String::new());
                if params.action == "add" {
                    s.add_tool.set(String::new());
                    s.add_reason.set(String::new());
                }
                if s.open.get_untracked().as_deref() == Some(params.skill.as_str()) {
                    show_detail(s, detail);
                }
                load_skills(state);
            }
            Err(e) => state.report(&e),
        }
    });
}

fn override_params(skill: &str, tool: &str, action: &str) -> SkillOverrideParams {
    SkillOverrideParams {
        skill: skill.to_owned(),
        tool: tool.to_owned(),
        action: action.to_owned(),
        access_level: None,
        reason: None,
    }
}

fn clear_override(state: AppState, skill: String, tool: String) {
    let done = format!("cleared the override of {tool} for skill {skill}");
    set_override(state, override_params(&skill, &tool, "clear"), done);
}

fn provenance_badge(kind: &str) -> impl IntoView + use<> {
    let class = format!("badge prov prov-{kind}");
    let kind = kind.to_owned();
    view! { <span class=class>{kind}</span> }
}

#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ResolvedTools(
    state: AppState,
    skill: String,
    tools: Vec<SkillToolEntry>,
) -> impl IntoView {
    let s = state.skills;
    if tools.is_empty() {
        return view! { <p class="muted">"This skill may use no tool."</p> }.into_any();
    }
    let rows = tools
        .into_iter()
        .map(|t| {
            let name = t.name.clone();
            let open_form = name.clone();
            let is_open = {
                let name = name.clone();
                move || s.removing.with(|r| r.as_deref() == Some(name.as_str()))
            };
            let clear = (t.provenance_kind == "override").then(|| {
                let (skill, tool) = (skill.clone(), name.clone());
                view! {
                    <button
                        class="btn small skill-clear"
                        disabled=move || s.busy.get()
                        on:click=move |_| clear_override(state, skill.clone(), tool.clone())
                    >
                        "Clear override"
                    </button>
                }
            });
            // Groups are written in SKILL.md; an override names one tool.
            let remove = (!name.starts_with("group:")).then(|| {
                view! {
                    <button
                        class="btn danger small skill-remove"
                        on:click=move |_| {
                            s.remove_reason.set(String::new());
                            s.removing.set(Some(open_form.clone()));
                        }
                    >
                        "Remove"
                    </button>
                }
            });
            let form = {
                let (skill, tool) = (skill.clone(), name.clone());
                move || {
                    let (skill, tool) = (skill.clone(), tool.clone());
                    view! {
                        <tr class="inline-form">
                            <td colspan="5">
                                <form
                                    class="form-row"
                                    on:submit=move |ev| {
                                        ev.prevent_default();
                                        let mut p = override_params(&skill, &tool, "remove");
                                        p.reason = Some(s.remove_reason.get_untracked());
                                        let done = format!(
                                            "removed {tool} from skill {skill}: its calls under the skill are refused",
                                        );
                                        set_override(state, p, done);
                                    }
                                >
                                    <label class="field grow">
                                        <span>{format!("Why remove {tool} from {skill}? (for the admin log)")}</span>
                                        <input
                                            id="skill-remove-reason"
                                            type="text"
                                            placeholder="reason"
                                            prop:value=move || s.remove_reason.get()
                                            on:input=move |ev| s.remove_reason.set(event_target_value(&ev))
                                        />
                                    </label>
                                    <button
                                        class="btn danger"
                                        type="submit"
                                        id="skill-remove-confirm"
                                        disabled=move || s.busy.get()
                                    >
                                        "Remove"
                                    </button>
                                    <button
                                        class="btn"
                                        type="button"
                                        on:click=move |_| s.removing.set(None)
                                    >
                                        "Cancel"
                                    </button>
                                </form>
                            </td>
                        </tr>
                    }
                }
            };
            let row_class = if t.registered { "" } else { "off" };
            view! {
                <tr data-tool=name.clone() data-provenance=t.provenance_kind.clone() class=row_class>
                    <td>
                        <strong>{name.clone()}</strong>
                        {(!t.registered).then(|| view! { <span class="tag">"not registered"</span> })}
                    </td>
                    <td class="skill-level">{t.access_level.clone()}</td>
                    <td>
                        {provenance_badge(&t.provenance_kind)}
                        " "
                        <span class="skill-provenance">{t.provenance.clone()}</span>
                    </td>
                    <td class="muted">{t.limits.clone()}</td>
                    <td class="row-actions">{clear} {remove}</td>
                </tr>
                {move || is_open().then(form.clone())}
            }
        })
        .collect_view();
    view! {
        <table class="grid" id="skill-tools">
            <thead>
                <tr>
                    <th>"Tool"</th>
                    <th>"Level"</th>
                    <th>"From"</th>
                    <th>"Limits"</th>
                    <th></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn AddToolForm(state: AppState, skill: String) -> impl IntoView {
    let s = state.skills;
    let options = move || {
        s.tool_names
            .get()
            .into_iter()
            .map(|n| view! { <option value=n/> })
            .collect_view()
    };
    view! {
        <form
            class="form-row add-tool"
            id="skill-add-form"
            on:submit=move |ev| {
                ev.prevent_default();
                let tool = s.add_tool.get_untracked().trim().to_owned();
                if tool.is_empty() {
                    state.error.set(Some("name the tool to add".to_owned()));
                    return;
                }
                let level = s.add_level.get_untracked();
                let mut p = override_params(&skill, &tool, "add");
                p.access_level = Some(level.clone());
                p.reason = Some(s.add_reason.get_untracked());
                let done = format!("skill {skill} may now use {tool} up to {level} access");
                set_override(state, p, done);
            }
        >
            <label class="field">
                <span>"Add a tool"</span>
                <input
                    id="skill-add-tool"
                    type="text"
                    list="skill-tool-names"
                    placeholder="tool name"
                    prop:value=move || s.add_tool.get()
                    on:input=move |ev| s.add_tool.set(event_target_value(&ev))
                />
                <datalist id="skill-tool-names">{options}</datalist>
            </label>
            <label class="field">
                <span>"Up to level"</span>
                <select
                    id="skill-add-level"
                    on:change=move |ev| s.add_level.set(event_target_value(&ev))
                >
                    {LEVELS
                        .map(|l| {
                            view! {
                                <option value=l selected=move || s.add_level.with(|v| v == l)>
                                    {l}
                                </option>
                            }
                        })
                        .to_vec()}
                </select>
            </label>
            <label class="field grow">
                <span>"Why (for the admin log)"</span>
                <input
                    id="skill-add-reason"
                    type="text"
                    placeholder="reason"
                    prop:value=move || s.add_reason.get()
                    on:input=move |ev| s.add_reason.set(event_target_value(&ev))
                />
            </label>
            <button class="btn" type="submit" id="skill-add-submit" disabled=move || s.busy.get()>
                "Add override"
            </button>
        </form>
    }
}

#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn OverridesList(
    state: AppState,
    skill: String,
    overrides: Vec<SkillOverrideEntry>,
) -> impl IntoView {
    let s = state.skills;
    if overrides.is_empty() {
        return view! {
            <p class="muted" id="skill-no-overrides">
                "None: the SKILL.md and the capabilities decide."
            </p>
        }
        .into_any();
    }
    let rows = overrides
        .into_iter()
        .map(|o| {
            let (skill, tool) = (skill.clone(), o.tool.clone());
            let what = match (o.action.as_str(), &o.access_level) {
                ("add", Some(level)) => format!("added, up to {level}"),
                ("add", None) => "added".to_owned(),
                _ => "removed".to_owned(),
            };
            let tone = if o.action == "add" {
                "badge tone-good"
            } else {
                "badge tone-bad"
            };
            view! {
                <tr data-tool=o.tool.clone() data-action=o.action.clone()>
                    <td>
                        <strong>{o.tool.clone()}</strong>
                    </td>
                    <td>
                        <span class=tone>{what}</span>
                    </td>
                    <td class="override-by">{o.created_by.clone()}</td>
                    <td class="nowrap">{browser::local_time(o.created_at)}</td>
                    <td class="reason">{o.reason.clone().unwrap_or_else(|| "—".to_owned())}</td>
                    <td class="row-actions">
                        <button
                            class="btn small override-clear"
                            disabled=move || s.busy.get()
                            on:click=move |_| clear_override(state, skill.clone(), tool.clone())
                        >
                            "Clear"
                        </button>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="grid" id="skill-overrides">
            <thead>
                <tr>
                    <th>"Tool"</th>
                    <th>"Override"</th>
                    <th>"By"</th>
                    <th>"When"</th>
                    <th>"Why"</th>
                    <th></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
