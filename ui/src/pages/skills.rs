//! The skills page: the skills directory on the left (status, tools, calls, refusals); on the
//! right, the open skill's resolved tools with where each came from, the administrators'
//! overrides (remove a tool with a reason, add one at a level, clear), and its SKILL.md in an
//! editor that checks as the person types and saves only what is valid. A new skill starts from
//! a template. The runtime resolves, checks, writes and records; this page only asks and shows.

use std::time::Duration;

use leptos::prelude::*;
use tw_protocol::{
    IpcError, ListToolsParams, SkillDetail, SkillDiagnostic, SkillParams, SkillSummary,
    SkillTextParams, ToolSummary, commands,
};

use crate::app::{AppState, Load};
use crate::ipc;
use crate::logic::skills::{
    CHECK_AFTER_MS, Draft, LEVELS, check_name, diagnostic_text, status, warnings,
};
use crate::widgets::{Badge, LatestCheck, load_state};

mod overrides;

use self::overrides::{AddToolForm, OverridesList, ResolvedTools};

/// The skills page's state, kept across page switches (an unsaved SKILL.md included).
#[derive(Clone, Copy)]
pub(crate) struct SkillsState {
    list: RwSignal<Load<Vec<SkillSummary>>>,
    /// The skill shown on the right.
    open: RwSignal<Option<String>>,
    detail: RwSignal<Load<SkillDetail>>,
    /// The SKILL.md in the editor.
    draft: RwSignal<Option<Draft>>,
    /// The draft's problems: from the last check, or the file's as loaded.
    diagnostics: RwSignal<Vec<SkillDiagnostic>>,
    /// The draft's check as the person types.
    checker: LatestCheck,
    /// Why the last save was refused.
    save_error: RwSignal<Option<String>>,
    saving: RwSignal<bool>,
    /// Registered tools, suggested by the add form.
    tool_names: RwSignal<Vec<String>>,
    /// The tool whose Remove form is open, and the reason typed into it.
    removing: RwSignal<Option<String>>,
    remove_reason: RwSignal<String>,
    add_tool: RwSignal<String>,
    add_level: RwSignal<String>,
    add_reason: RwSignal<String>,
    /// An override request is with the backend.
    busy: RwSignal<bool>,
    /// The New skill form's name, while the form is open.
    new_name: RwSignal<Option<String>>,
    new_error: RwSignal<Option<String>>,
    /// A skill to open once the person agrees to drop the editor's unsaved changes.
    pending_open: RwSignal<Option<String>>,
}

impl SkillsState {
    pub(crate) fn new() -> Self {
        Self {
            list: RwSignal::new(Load::Idle),
            open: RwSignal::new(None),
            detail: RwSignal::new(Load::Idle),
            draft: RwSignal::new(None),
            diagnostics: RwSignal::new(Vec::new()),
            checker: LatestCheck::new(),
            save_error: RwSignal::new(None),
            saving: RwSignal::new(false),
            tool_names: RwSignal::new(Vec::new()),
            removing: RwSignal::new(None),
            remove_reason: RwSignal::new(String::new()),
            add_tool: RwSignal::new(String::new()),
            add_level: RwSignal::new(LEVELS[0].to_owned()),
            add_reason: RwSignal::new(String::new()),
            busy: RwSignal::new(false),
            new_name: RwSignal::new(None),
            new_error: RwSignal::new(None),
            pending_open: RwSignal::new(None),
        }
    }

    fn dirty(&self) -> bool {
        self.draft
            .with_untracked(|d| d.as_ref().is_some_and(Draft::dirty))
    }

    fn editing_new(&self) -> bool {
        self.draft.with(|d| d.as_ref().is_some_and(|d| d.new))
    }
}

fn load_skills(state: AppState) {
    let s = state.skills;
    if s.list.with_untracked(|l| l.ready().is_none()) {
        s.list.set(Load::Loading);
    }
    leptos::task::spawn_local(async move {
        let r: Result<Vec<SkillSummary>, IpcError> = ipc::invoke(commands::LIST_SKILLS, &()).await;
        match r {
            Ok(list) => s.list.set(Load::Ready(list)),
            Err(e) => {
                state.report(&e);
                // A refresh that fails keeps what was shown.
                if s.list.with_untracked(|l| l.ready().is_none()) {
                    s.list.set(Load::Failed(e.to_string()));
                }
            }
        }
    });
}

fn load_tool_names(state: AppState) {
    leptos::task::spawn_local(async move {
        let r: Result<Vec<ToolSummary>, IpcError> =
            ipc::invoke(commands::LIST_TOOLS, &ListToolsParams::default()).await;
        match r {
            Ok(tools) => state
                .skills
                .tool_names
                .set(tools.into_iter().map(|t| t.name).collect()),
            Err(e) => state.report(&e),
        }
    });
}

/// Opens a skill, unless the editor holds unsaved changes to another one: then the person is
/// asked first.
fn request_open(state: AppState, name: String) {
    let s = state.skills;
    let other = s
        .draft
        .with_untracked(|d| d.as_ref().is_some_and(|d| d.skill != name));
    if other && s.dirty() {
        s.pending_open.set(Some(name));
    } else {
        open_skill(state, name);
    }
}

fn open_skill(state: AppState, name: String) {
    let s = state.skills;
    s.pending_open.set(None);
    s.removing.set(None);
    if s.open.get_untracked().as_deref() != Some(name.as_str()) {
        s.detail.set(Load::Loading);
    }
    s.open.set(Some(name.clone()));
    leptos::task::spawn_local(async move {
        let params = SkillParams { name: name.clone() };
        let r: Result<SkillDetail, IpcError> = ipc::invoke(commands::GET_SKILL, &params).await;
        // Only if the person has not moved on to another skill meanwhile.
        if s.open.get_untracked().as_deref() != Some(name.as_str()) {
            return;
        }
        match r {
            Ok(d) => show_detail(s, d),
            Err(e) => {
                state.report(&e);
                s.detail.set(Load::Failed(e.to_string()));
            }
        }
    });
}

/// Shows a skill as the backend answered it; the editor takes its text unless it holds unsaved
/// changes to the same skill.
fn show_detail(s: SkillsState, d: SkillDetail) {
    let next = s
        .draft
        .with_untracked(|cur| Draft::reloaded(cur.as_ref(), &d.name, &d.text));
    if !next.dirty() {
        s.checker.cancel();
        s.diagnostics.set(d.diagnostics.clone());
        s.save_error.set(None);
    }
    s.draft.set(Some(next));
    s.detail.set(Load::Ready(d));
}

/// Checks the draft once typing has paused for [`CHECK_AFTER_MS`].
fn schedule_check(state: AppState) {
    state
        .skills
        .checker
        .after(Duration::from_millis(CHECK_AFTER_MS), move |turn| {
            run_check(state, turn);
        });
}

fn check_now(state: AppState) {
    state.skills.checker.now(|turn| run_check(state, turn));
}

fn run_check(state: AppState, seq: u64) {
    let s = state.skills;
    let Some(d) = s.draft.get_untracked() else {
        s.checker.done();
        return;
    };
    leptos::task::spawn_local(async move {
        let params = SkillTextParams {
            name: d.skill,
            text: d.text,
        };
        let r: Result<Vec<SkillDiagnostic>, IpcError> =
            ipc::invoke(commands::CHECK_SKILL, &params).await;
        if !s.checker.is_latest(seq) {
            return;
        }
        s.checker.done();
        match r {
            Ok(diagnostics) => s.diagnostics.set(diagnostics),
            Err(e) => state.report(&e),
        }
    });
}

fn save(state: AppState) {
    let s = state.skills;
    let Some(d) = s.draft.get_untracked() else {
        return;
    };
    if s.saving.get_untracked() {
        return;
    }
    s.saving.set(true);
    s.save_error.set(None);
    leptos::task::spawn_local(async move {
        let params = SkillTextParams {
            name: d.skill.clone(),
            text: d.text.clone(),
        };
        let r: Result<SkillDetail, IpcError> = ipc::invoke(commands::SAVE_SKILL, &params).await;
        s.saving.set(false);
        match r {
            Ok(detail) => {
                let verb = if d.new { "created" } else { "saved" };
                state
                    .notice
                    .set(Some(format!("{verb} skill {} ({})", d.skill, detail.path)));
                // What was sent is on disk now; anything typed since stays unsaved.
                s.draft.update(|cur| {
                    if let Some(cur) = cur
                        && cur.skill == d.skill
                    {
                        cur.new = false;
                        cur.saved = d.text.clone();
                    }
                });
                if s.open.get_untracked().as_deref() == Some(d.skill.as_str()) {
                    show_detail(s, detail);
                }
                load_skills(state);
            }
            Err(e) if e.field.as_deref() == Some("/text") => {
                s.save_error.set(Some(e.message));
                check_now(state);
            }
            Err(e) => s.save_error.set(Some(e.to_string())),
        }
    });
}

fn revert(state: AppState) {
    let s = state.skills;
    s.draft.update(|d| {
        if let Some(d) = d {
            d.text = d.saved.clone();
        }
    });
    s.save_error.set(None);
    s.checker.cancel();
    if let Some(diagnostics) = s
        .detail
        .with_untracked(|d| d.ready().map(|d| d.diagnostics.clone()))
    {
        s.diagnostics.set(diagnostics);
    }
}

fn create_skill(state: AppState) {
    let s = state.skills;
    let name = s
        .new_name
        .get_untracked()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if let Err(e) = check_name(&name) {
        s.new_error.set(Some(e));
        return;
    }
    if s.list
        .with_untracked(|l| l.ready().is_some_and(|l| l.iter().any(|k| k.name == name)))
    {
        s.new_error.set(Some(format!(
            "a skill named {name} exists; open it from the list"
        )));
        return;
    }
    if s.dirty() {
        let current = s
            .draft
            .with_untracked(|d| d.as_ref().map(|d| d.skill.clone()))
            .unwrap_or_default();
        s.new_error.set(Some(format!(
            "the SKILL.md of {current} has unsaved changes: save or revert them first"
        )));
        return;
    }
    s.new_name.set(None);
    s.new_error.set(None);
    s.removing.set(None);
    s.save_error.set(None);
    s.diagnostics.set(Vec::new());
    s.detail.set(Load::Idle);
    s.draft.set(Some(Draft::new_skill(&name)));
    s.open.set(Some(name));
    check_now(state);
}

/// The skills page.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn SkillsPage(state: AppState) -> impl IntoView {
    let s = state.skills;
    load_skills(state);
    load_tool_names(state);
    if let Some(open) = s.open.get_untracked()
        && !s.editing_new()
    {
        open_skill(state, open);
    }
    let count = move || {
        s.list.with(|l| match l.ready().map(Vec::len) {
            Some(1) => "1 skill".to_owned(),
            Some(n) => format!("{n} skills"),
            None => String::new(),
        })
    };
    view! {
        <section id="page-skills" class="page">
            <header class="page-head">
                <h1>"Skills"</h1>
                <span class="muted">{count}</span>
                <button class="btn" id="skills-reload" on:click=move |_| load_skills(state)>
                    "Reload"
                </button>
                <button
                    class="btn primary"
                    id="skill-new"
                    on:click=move |_| {
                        s.new_error.set(None);
                        s.new_name.set(Some(String::new()));
                    }
                >
                    "New skill"
                </button>
            </header>
            <NewSkillForm state/>
            <DiscardStep state/>
            <div class="skills-layout">
                <SkillsList state/>
                <div class="skills-detail" id="skill-detail">
                    <Show when=move || s.open.with(Option::is_none)>
                        <p class="muted empty">
                            "Choose a skill to see the tools it may use and edit its SKILL.md, or make a new one."
                        </p>
                    </Show>
                    {move || {
                        if s.editing_new() {
                            let name = s.open.get().unwrap_or_default();
                            Some(
                                view! {
                                    <section class="card">
                                        <h2>{format!("New skill {name}")}</h2>
                                        <p class="muted">
                                            "Not saved yet. Fill in the SKILL.md below and save it; the skill's folder is made then, and the skill is in force at once."
                                        </p>
                                    </section>
                                }
                                    .into_any(),
                            )
                        } else if s.open.with(Option::is_some) {
                            s.detail.with(|d| load_state(d, "the skill"))
                        } else {
                            None
                        }
                    }}
                    {move || {
                        if s.editing_new() {
                            return None;
                        }
                        s.detail
                            .with(|d| d.ready().cloned())
                            .map(|d| view! { <SkillOverview state detail=d/> })
                    }}
                    <Show when=move || s.open.with(Option::is_some) && s.draft.with(Option::is_some)>
                        <SkillEditor state/>
                    </Show>
                </div>
            </div>
        </section>
    }
}

#[component]
fn NewSkillForm(state: AppState) -> impl IntoView {
    let s = state.skills;
    move || {
        s.new_name.get().map(|_| {
            view! {
                <form
                    class="filters"
                    id="skill-new-form"
                    on:submit=move |ev| {
                        ev.prevent_default();
                        create_skill(state);
                    }
                >
                    <label class="field grow">
                        <span>"New skill's name (lowercase letters, digits and hyphens; its folder's name)"</span>
                        <input
                            id="skill-new-name"
                            type="text"
                            placeholder="release-notes"
                            prop:value=move || s.new_name.get().unwrap_or_default()
                            on:input=move |ev| s.new_name.set(Some(event_target_value(&ev)))
                        />
                    </label>
                    <button class="btn primary" type="submit" id="skill-new-create">
                        "Create"
                    </button>
                    <button class="btn" type="button" on:click=move |_| s.new_name.set(None)>
                        "Cancel"
                    </button>
                    {move || {
                        s.new_error
                            .get()
                            .map(|e| view! { <p class="field-error" role="alert">{e}</p> })
                    }}
                </form>
            }
        })
    }
}

#[component]
fn DiscardStep(state: AppState) -> impl IntoView {
    let s = state.skills;
    move || {
        s.pending_open.get().map(|next| {
            let current = s
                .draft
                .with(|d| d.as_ref().map(|d| d.skill.clone()))
                .unwrap_or_default();
            let open = next.clone();
            view! {
                <div class="confirm-step" id="skill-discard" role="alertdialog">
                    <p>{format!("The SKILL.md of {current} has unsaved changes.")}</p>
                    <button
                        class="btn danger"
                        id="skill-discard-confirm"
                        on:click=move |_| {
                            s.draft.set(None);
                            open_skill(state, open.clone());
                        }
                    >
                        {format!("Discard them and open {next}")}
                    </button>
                    <button class="btn" on:click=move |_| s.pending_open.set(None)>
                        "Keep editing"
                    </button>
                </div>
            }
        })
    }
}

#[component]
fn SkillsList(state: AppState) -> impl IntoView {
    let s = state.skills;
    let rows = move || {
        s.list
            .with(|l| l.ready().cloned().unwrap_or_default())
            .into_iter()
            .map(|k| {
                let name = k.name.clone();
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
                let warned = warnings(k.warnings);
                view! {
                    <tr
                        data-skill=name.clone()
                        class=selected
                        title=k.description.clone().unwrap_or_default()
                        on:click=move |_| request_open(state, open.clone())
                    >
                        <td>
                            <button class="link tool-name skill-open">{name.clone()}</button>
                            {warned.map(|w| view! { <span class="tag">{w}</span> })}
                        </td>
                        <td class="skill-status">
                            <Badge word=status(&k)/>
                        </td>
                        <td class="num" title="tools it may use now">{k.tool_count}</td>
                        <td class="num" title="calls made under it">{k.calls}</td>
                        <td class="num" title="calls its envelope refused">{k.skill_denied}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <div class="skills-list">
            {move || s.list.with(|l| load_state(l, "the skills"))}
            <Show when=move || s.list.with(|l| l.ready().is_some())>
                <table class="grid clickable" id="skills-list">
                    <thead>
                        <tr>
                            <th>"Skill"</th>
                            <th>"Status"</th>
                            <th class="num">"Tools"</th>
                            <th class="num">"Calls"</th>
                            <th class="num" title="refused by the skill's envelope">"Refused"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
                <Show when=move || s.list.with(|l| l.ready().is_some_and(Vec::is_empty))>
                    <p class="muted empty">
                        "No skills yet: each is a folder with a SKILL.md in the skills directory (the config's skills_dir, else the workspace's skills folder)."
                    </p>
                </Show>
            </Show>
        </div>
    }
}

/// What a skill resolves to: its warnings, its tools, its overrides.
#[component]
fn SkillOverview(state: AppState, detail: SkillDetail) -> impl IntoView {
    let mut notes: Vec<String> = Vec::new();
    notes.extend(detail.unknown_permissions.iter().map(|p| {
        format!("permission {p:?} is not a capability in the catalog; it reaches no tool")
    }));
    notes.extend(
        detail
            .dangling_overrides
            .iter()
            .map(|t| format!("an override names tool {t:?}, which is not registered")),
    );
    notes.extend(detail.problems.iter().cloned());
    if !detail.loaded {
        notes.push(
            "no manifest is in force: the SKILL.md has errors (see below), so calls under this skill are refused"
                .to_owned(),
        );
    }
    let permissions = if detail.permissions.is_empty() {
        "none".to_owned()
    } else {
        detail.permissions.join(", ")
    };
    let skill = detail.name.clone();
    view! {
        <section class="card">
            <div class="skill-head">
                <h2>{detail.name.clone()}</h2>
                <span class="muted small" id="skill-path">{detail.path.clone()}</span>
            </div>
            {detail.description.clone().map(|d| view! { <p class="description">{d}</p> })}
            <p class="muted small">"Permissions (capabilities): " {permissions}</p>
            {(!notes.is_empty())
                .then(|| {
                    view! {
                        <div class="warn-box" id="skill-warnings" role="status">
                            <ul>{notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
                        </div>
                    }
                })}
        </section>
        <section class="card" id="skill-resolved">
            <h2>"Resolved tools"</h2>
            <ResolvedTools state skill=skill.clone() tools=detail.tools.clone()/>
            <AddToolForm state skill=skill.clone()/>
        </section>
        <section class="card" id="skill-overrides-card">
            <h2>"Overrides"</h2>
            <OverridesList state skill overrides=detail.overrides.clone()/>
        </section>
    }
}

/// The SKILL.md editor: checked ~400 ms after typing stops, saved on Save (or Ctrl+S) only if
/// valid.
#[component]
fn SkillEditor(state: AppState) -> impl IntoView {
    let s = state.skills;
    let dirty = move || s.draft.with(|d| d.as_ref().is_some_and(Draft::dirty));
    let is_new = move || s.draft.with(|d| d.as_ref().is_some_and(|d| d.new));
    let check_state = move || {
        if s.checker.busy() {
            return "checking…".to_owned();
        }
        s.diagnostics.with(|ds| {
            let errors = ds.iter().filter(|d| d.severity == "error").count();
            match (errors, ds.len() - errors) {
                (0, 0) => "no problems".to_owned(),
                (e, w) => format!("{e} error(s), {w} warning(s)"),
            }
        })
    };
    let diagnostics = move || {
        s.diagnostics
            .get()
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
        <section class="card" id="skill-editor">
            <div class="skill-head">
                <h2>"SKILL.md"</h2>
                <Show when=dirty>
                    <span class="dirty" id="skill-dirty">
                        {move || if is_new() { "not saved yet" } else { "unsaved changes" }}
                    </span>
                </Show>
            </div>
            <textarea
                id="skill-text"
                class="editor"
                rows="22"
                spellcheck="false"
                prop:value=move || s.draft.with(|d| d.as_ref().map(|d| d.text.clone()).unwrap_or_default())
                on:input=move |ev| {
                    let text = event_target_value(&ev);
                    s.draft.update(|d| {
                        if let Some(d) = d {
                            d.text = text;
                        }
                    });
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
                <button class="btn" id="skill-check" on:click=move |_| check_now(state)>
                    "Check"
                </button>
                <button
                    class="btn primary"
                    id="skill-save"
                    disabled=move || s.saving.get() || !dirty()
                    on:click=move |_| save(state)
                >
                    {move || if s.saving.get() { "Saving…" } else { "Save" }}
                </button>
                <button
                    class="btn"
                    id="skill-revert"
                    disabled=move || !dirty() || is_new()
                    on:click=move |_| revert(state)
                >
                    "Revert"
                </button>
                <span class="muted small" id="skill-check-state">{check_state}</span>
            </div>
            {move || {
                s.save_error
                    .get()
                    .map(|e| {
                        view! {
                            <div class="error-box" id="skill-save-error" role="alert">
                                <strong>"Not saved"</strong>
                                <span>{e}</span>
                            </div>
                        }
                    })
            }}
            <ul class="diagnostics" id="skill-diagnostics">{diagnostics}</ul>
        </section>
    }
}
