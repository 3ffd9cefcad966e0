//! The console's frame: the state every page shares (kept here so it survives switching pages),
//! the left nav and its keyboard shortcuts, the app-wide error banner and the banner of a mode
//! the resource watcher switched to, and the background work that does not belong to one page:
//! the clock, the confirmation and settings polls and the event listeners.

use std::cell::Cell;
use std::time::Duration;

use leptos::ev;
use leptos::prelude::*;
use tw_protocol::{
    BrowserFrame, Confirmation, ConfirmationsChanged, IpcError, LiveEvent, Settings, commands,
    events,
};

use crate::browser;
use crate::ipc;
use crate::logic::frames::Frames;
use crate::logic::live::LiveLog;
use crate::logic::nav::{Page, shortcut};
use crate::pages;

/// Something loaded from the backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Load<T> {
    /// Not asked for yet.
    Idle,
    Loading,
    Ready(T),
    /// The error, in words.
    Failed(String),
}

impl<T> Load<T> {
    pub(crate) fn ready(&self) -> Option<&T> {
        match self {
            Load::Ready(v) => Some(v),
            _ => None,
        }
    }
}

impl<T> From<Result<T, IpcError>> for Load<T> {
    fn from(r: Result<T, IpcError>) -> Self {
        match r {
            Ok(v) => Load::Ready(v),
            Err(e) => Load::Failed(e.to_string()),
        }
    }
}

/// What every page can reach. Signals are handles, so this is `Copy` and passed to each page.
#[derive(Clone, Copy)]
pub(crate) struct AppState {
    pub(crate) page: RwSignal<Page>,
    /// The last IPC error, for the banner.
    pub(crate) error: RwSignal<Option<String>>,
    /// The last thing worth telling that is not an error (an answer's outcome...).
    pub(crate) notice: RwSignal<Option<String>>,
    /// Whether `window.__TAURI__` is there; without it every call fails the same way.
    pub(crate) backend: bool,
    /// The browser's clock in ms, ticking four times a second for countdowns and elapsed times.
    pub(crate) now_ms: RwSignal<f64>,
    pub(crate) settings: RwSignal<Load<Settings>>,
    /// The pending confirmations, oldest first.
    pub(crate) confirmations: RwSignal<Load<Vec<Confirmation>>>,
    confirmations_busy: RwSignal<bool>,
    pub(crate) live: RwSignal<LiveLog>,
    /// The latest picture of each browser session's page.
    pub(crate) frames: RwSignal<Frames>,
    pub(crate) tools: pages::tools::ToolsState,
    pub(crate) audit: pages::audit::AuditState,
    pub(crate) skills: pages::skills::SkillsState,
    pub(crate) chains: pages::chains::ChainsState,
    /// Set when the window was asked to close while this many calls wait for approval.
    pub(crate) closing: RwSignal<Option<usize>>,
}

impl AppState {
    fn new() -> Self {
        Self {
            page: RwSignal::new(Page::Tools),
            error: RwSignal::new(None),
            notice: RwSignal::new(None),
            backend: ipc::backend_available(),
            now_ms: RwSignal::new(browser::now_ms()),
            settings: RwSignal::new(Load::Idle),
            confirmations: RwSignal::new(Load::Idle),
            confirmations_busy: RwSignal::new(false),
            live: RwSignal::new(LiveLog::default()),
            frames: RwSignal::new(Frames::default()),
            tools: pages::tools::ToolsState::new(),
            audit: pages::audit::AuditState::new(),
            skills: pages::skills::SkillsState::new(),
            chains: pages::chains::ChainsState::new(),
            closing: RwSignal::new(None),
        }
    }

    /// Shows an IPC error in the banner.
    pub(crate) fn report(&self, e: &IpcError) {
        self.error.set(Some(e.to_string()));
    }

    /// The wire's "now", µs, from the ticking clock (reactive).
    pub(crate) fn now_us(&self) -> i64 {
        browser::ms_to_us(self.now_ms.get())
    }

    /// Re-reads the settings.
    pub(crate) fn load_settings(self) {
        if self.settings.with_untracked(|s| s.ready().is_none()) {
            self.settings.set(Load::Loading);
        }
        leptos::task::spawn_local(async move {
            let r: Result<Settings, IpcError> = ipc::invoke(commands::GET_SETTINGS, &()).await;
            match r {
                // The poll re-reads them: only a change should re-render (a page being edited
                // keeps its state).
                Ok(s) => {
                    if self.settings.with_untracked(|c| c.ready() != Some(&s)) {
                        self.settings.set(Load::Ready(s));
                    }
                }
                Err(e) => {
                    self.report(&e);
                    // A refresh that fails keeps what was shown; a first load shows the error.
                    if self.settings.with_untracked(|s| s.ready().is_none()) {
                        self.settings.set(Load::Failed(e.to_string()));
                    }
                }
            }
        });
    }

    /// Re-reads the pending confirmations, unless a read is already under way (the poll and the
    /// event can both ask at once).
    pub(crate) fn refresh_confirmations(self) {
        if self.confirmations_busy.get_untracked() {
            return;
        }
        self.confirmations_busy.set(true);
        leptos::task::spawn_local(async move {
            let r: Result<Vec<Confirmation>, IpcError> =
                ipc::invoke(commands::LIST_CONFIRMATIONS, &()).await;
            self.confirmations_busy.set(false);
            match r {
                Ok(list) => {
                    // The poll runs every second: only a change should re-render.
                    if self
                        .confirmations
                        .with_untracked(|c| c.ready() != Some(&list))
                    {
                        self.confirmations.set(Load::Ready(list));
                    }
                }
                Err(e) => {
                    self.report(&e);
                    if self.confirmations.with_untracked(|c| c.ready().is_none()) {
                        self.confirmations.set(Load::Failed(e.to_string()));
                    }
                }
            }
        });
    }

    /// Starts the work that runs for the app's life: confirmations polled every second and on
    /// the backend's event, the settings (the mode, and a switch the resource watcher made, here
    /// or in another process) every few seconds and on a warning, live events collected
    /// whatever page is shown.
    fn start_background(self) {
        self.load_settings();
        set_interval(move || self.load_settings(), Duration::from_millis(3000));
        self.refresh_confirmations();
        set_interval(
            move || self.refresh_confirmations(),
            Duration::from_millis(1000),
        );
        let on_changed = move |r: Result<ConfirmationsChanged, IpcError>| match r {
            Ok(_) => self.refresh_confirmations(),
            Err(e) => self.report(&e),
        };
        if let Err(e) = ipc::listen(events::CONFIRMATIONS, on_changed) {
            self.report(&e);
        }
        let on_live = move |r: Result<LiveEvent, IpcError>| match r {
            Ok(event) => {
                // The resource watcher's switches come as warnings.
                if event.kind == "warning" {
                    self.load_settings();
                }
                self.chains.on_event(self, &event);
                self.live.update(|log| log.push(event));
            }
            Err(e) => self.report(&e),
        };
        if let Err(e) = ipc::listen(events::EXECUTION, on_live) {
            self.report(&e);
        }
        let on_frame = move |r: Result<BrowserFrame, IpcError>| match r {
            Ok(frame) => self.frames.update(|f| f.push(frame)),
            Err(e) => self.report(&e),
        };
        if let Err(e) = ipc::listen(events::BROWSER_FRAME, on_frame) {
            self.report(&e);
        }
        let on_close = move |r: Result<ConfirmationsChanged, IpcError>| match r {
            Ok(c) => self.closing.set(Some(c.pending)),
            Err(e) => self.report(&e),
        };
        if let Err(e) = ipc::listen(events::CLOSE_REQUESTED, on_close) {
            self.report(&e);
        }
    }
}

/// Tells the shell, once per page load, that the console is usable: its first view has its data
/// and has been drawn. The shell times its start by this (`commands::REPORT_INTERACTIVE`). A
/// timeout queued in an animation frame runs after that frame is painted.
pub(crate) fn report_interactive() {
    thread_local! {
        static SENT: Cell<bool> = const { Cell::new(false) };
    }
    if SENT.with(|s| s.replace(true)) {
        return;
    }
    request_animation_frame(|| {
        set_timeout(
            || {
                leptos::task::spawn_local(async {
                    // Only the shell's log and timed starts use the answer; the person has
                    // nothing to do about a failure.
                    let _: Result<(), IpcError> =
                        ipc::invoke(commands::REPORT_INTERACTIVE, &()).await;
                });
            },
            Duration::ZERO,
        );
    });
}

/// The whole console.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn App() -> impl IntoView {
    let state = AppState::new();
    set_interval(
        move || state.now_ms.set(browser::now_ms()),
        Duration::from_millis(250),
    );
    if state.backend {
        state.start_background();
    } else {
        state.report(&ipc::unavailable());
        state.settings.set(Load::Failed(ipc::unavailable().message));
        state
            .confirmations
            .set(Load::Failed(ipc::unavailable().message));
    }
    // Alt+1..Alt+7 switch pages from anywhere, inputs included.
    let keys = window_event_listener(ev::keydown, move |e: ev::KeyboardEvent| {
        if let Some(page) = shortcut(&e.code(), e.alt_key(), e.ctrl_key(), e.meta_key()) {
            e.prevent_default();
            state.page.set(page);
        }
    });
    on_cleanup(move || keys.remove());

    view! {
        <div class="shell">
            <Nav state/>
            <main class="main">
                <ErrorBanner state/>
                <ModeBanner state/>
                <Show when=move || !state.backend>
                    <div class="unavailable" id="backend-unavailable">
                        <h2>"Backend not available"</h2>
                        <p>
                            "This is Toolwarden's desktop console. It talks to the Toolwarden runtime \
                             through the desktop app, and this page is not running inside it \
                             (window.__TAURI__ is missing). Start "
                            <code>"toolwarden-desktop"</code>
                            " to govern tools, confirmations and the audit log."
                        </p>
                    </div>
                </Show>
                {move || {
                    state
                        .notice
                        .get()
                        .map(|n| {
                            view! {
                                <div class="notice" id="notice">
                                    <span>{n}</span>
                                    <button
                                        class="link"
                                        on:click=move |_| state.notice.set(None)
                                    >
                                        "Dismiss"
                                    </button>
                                </div>
                            }
                        })
                }}
                {move || match state.page.get() {
                    Page::Tools => view! { <pages::tools::ToolsPage state/> }.into_any(),
                    Page::Confirmations => {
                        view! { <pages::confirmations::ConfirmationsPage state/> }.into_any()
                    }
                    Page::Audit => view! { <pages::audit::AuditPage state/> }.into_any(),
                    Page::Live => view! { <pages::live::LivePage state/> }.into_any(),
                    Page::Settings => view! { <pages::settings::SettingsPage state/> }.into_any(),
                    Page::Skills => view! { <pages::skills::SkillsPage state/> }.into_any(),
                    Page::Chains => view! { <pages::chains::ChainsPage state/> }.into_any(),
                }}
            </main>
            <pages::confirmations::ConfirmDialog state/>
            <CloseDialog state/>
        </div>
    }
}

/// Asks before the window closes while calls wait for approval.
#[component]
fn CloseDialog(state: AppState) -> impl IntoView {
    let close = move || {
        leptos::task::spawn_local(async move {
            let r: Result<(), IpcError> = ipc::invoke(commands::CLOSE_WINDOW, &()).await;
            if let Err(e) = r {
                state.report(&e);
            }
        });
    };
    move || {
        state.closing.get().map(|pending| {
            let text = if pending == 1 {
                "1 call is waiting for approval.".to_owned()
            } else {
                format!("{pending} calls are waiting for approval.")
            };
            view! {
                <div class="backdrop">
                    <div class="dialog" id="close-dialog" role="alertdialog" aria-modal="true">
                        <div class="dialog-head">
                            <h2>"Close Toolwarden?"</h2>
                        </div>
                        <p>
                            {text}
                            " They stay held in the processes that made them, and are denied when they lapse unless someone answers them (the CLI: toolwarden confirm)."
                        </p>
                        <div class="dialog-actions">
                            <button class="btn primary" id="close-stay" on:click=move |_| state.closing.set(None)>
                                "Stay and answer"
                            </button>
                            <button class="btn danger" id="close-anyway" on:click=move |_| close()>
                                "Close anyway"
                            </button>
                        </div>
                    </div>
                </div>
            }
        })
    }
}

#[component]
fn Nav(state: AppState) -> impl IntoView {
    let pending = move || state.confirmations.with(|c| c.ready().map_or(0, Vec::len));
    let items = Page::ALL
        .iter()
        .enumerate()
        .map(|(i, &page)| {
            let class = move || {
                if state.page.get() == page {
                    "nav-item active"
                } else {
                    "nav-item"
                }
            };
            view! {
                <button
                    id=format!("nav-{}", page.slug())
                    class=class
                    title=format!("Alt+{}", i + 1)
                    on:click=move |_| state.page.set(page)
                >
                    <span class="nav-label">{page.label()}</span>
                    {(page == Page::Confirmations)
                        .then(|| {
                            view! {
                                <Show when=move || { pending() > 0 }>
                                    <span class="count">{pending}</span>
                                </Show>
                            }
                        })}
                    <kbd>{format!("Alt+{}", i + 1)}</kbd>
                </button>
            }
        })
        .collect_view();
    let facts = move || {
        state.settings.with(|s| {
            s.ready()
                .map(|s| format!("{} tier · {} mode", s.tier, s.mode))
                .unwrap_or_default()
        })
    };
    view! {
        <nav class="nav">
            <div class="brand">"Toolwarden"</div>
            {items}
            <div class="nav-facts">{facts}</div>
        </nav>
    }
}

#[component]
fn ErrorBanner(state: AppState) -> impl IntoView {
    move || {
        state.error.get().map(|message| {
            view! {
                <div class="error-banner" id="error-banner" role="alert">
                    <span class="error-text">{message}</span>
                    <button class="link" on:click=move |_| state.error.set(None)>
                        "Dismiss"
                    </button>
                </div>
            }
        })
    }
}

/// The mode the resource watcher switched to by itself, why, and the way to the person's
/// control; there until a person changes the mode.
#[component]
fn ModeBanner(state: AppState) -> impl IntoView {
    move || {
        let a = state
            .settings
            .with(|s| s.ready().and_then(|s| s.automatic.clone()))?;
        let reasons = a
            .reasons
            .iter()
            .map(|r| view! { <li>{r.clone()}</li> })
            .collect_view();
        Some(view! {
            <div
                class="mode-banner"
                class:lockdown={a.to == "lockdown"}
                id="mode-banner"
                role="alert"
                data-mode=a.to.clone()
            >
                <div class="mode-banner-text">
                    <strong>
                        {format!("The mode was switched to {} automatically", a.to.to_uppercase())}
                    </strong>
                    <span class="muted">
                        {format!(" (from {}, {})", a.from, browser::local_time(a.at))}
                    </span>
                    <ul class="mode-banner-reasons">{reasons}</ul>
                    <span>
                        "Calls are limited as that mode says until a person changes it."
                    </span>
                </div>
                <button
                    class="link"
                    id="mode-banner-settings"
                    on:click=move |_| state.page.set(Page::Settings)
                >
                    "Change the mode"
                </button>
            </div>
        })
    }
}
