//! The browser service: one Chromium (Debian's) per runtime, started on first use and again
//! if it dies, in the strict sandbox, driven over the DevTools protocol with chromiumoxide.
//! Each caller (agent and skill) gets a browser context of its own (cookies, storage and cache
//! apart from every other's) whose only way out is its own address on the sandbox's egress
//! port: every request its pages make (documents, subresources, XHR and fetch, WebSockets,
//! workers, redirects) is judged by the egress gatekeeper under the rules of the call running
//! in that session, and written into that call's network facts. Between calls nothing may
//! connect. The DevTools connection is a pipe ([`devtools`]): Chromium listens on no port.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

mod devtools;

use chromiumoxide::browser::Browser;
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    DialogType, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, GetTargetsParams, TargetId,
};
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::listeners::EventStream;
use chromiumoxide::page::Page;
use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tw_core::target::Egress;

use crate::net::proxy::{Proxy, serve_with};
use crate::net::{Blocked, Gatekeeper, NetFacts};

/// Where Debian's `chromium` package puts the browser.
pub const DEFAULT_EXECUTABLE: &str = "/usr/bin/chromium";
/// A session unused this long is closed (its context, cookies and pages with it).
pub const IDLE: Duration = Duration::from_secs(600);
/// The most sessions (browser contexts) open at once.
pub const MAX_SESSIONS: usize = 16;
/// The most pages (tabs) one session may have open.
pub const MAX_TABS: usize = 8;
/// Where downloads are put: under a file, so no directory, and no download, can be made there.
const NO_DOWNLOADS: &str = "/dev/null/toolwarden-downloads-are-off";
/// How long Chromium may take to start, and one DevTools command to answer. It starts in about
/// a second here, but once, on a machine running six times slower than usual, it gave no answer
/// in 30 s; the browser tools' own limit (60 s) still leaves room for the page.
const LAUNCH_TIME: Duration = Duration::from_secs(45);
/// How long a running Chromium may take to say its version before a call uses it.
const ANSWER_TIME: Duration = Duration::from_secs(5);

/// Why the browser could not do what a call asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrowserError {
    /// Chromium is not installed, or would not start.
    #[error("the browser could not be started: {0}")]
    Unavailable(String),
    /// Every session is in use.
    #[error("{0}")]
    Busy(String),
    /// The browser answered with an error, or stopped.
    #[error("the browser failed: {0}")]
    Failed(String),
}

fn failed(e: impl std::fmt::Display) -> BrowserError {
    BrowserError::Failed(e.to_string())
}

/// The runtime's browser, shared by every browser tool.
pub struct Browsers {
    executable: PathBuf,
    profiles: PathBuf,
    gate: Arc<Gatekeeper>,
    sandbox: tw_sandbox::Sandbox,
    running: tokio::sync::Mutex<Option<Chromium>>,
}

/// One running Chromium and the sessions open in it.
struct Chromium {
    browser: Browser,
    handler: JoinHandle<()>,
    sessions: HashMap<String, Session>,
    /// Each session's proxy, by the index of the loopback address its context was given.
    slots: Vec<Slot>,
    /// The browser's process tree, started by the sandbox's helper, which stops all of it when
    /// this is dropped, or when the runtime itself dies.
    _process: tw_sandbox::Interactive,
    /// Serving the sandbox's egress port ends with the browser.
    _serving: DropGuard,
    profile: tempfile::TempDir,
}

/// The proxy of the call running in a session; `None` between calls.
type Slot = Arc<Mutex<Option<Arc<Proxy>>>>;

/// One caller's browser context, its pages, and the proxy its requests go through.
struct Session {
    context: BrowserContextId,
    tabs: Arc<Mutex<Tabs>>,
    /// Which of the browser's proxy addresses is this session's.
    index: usize,
    /// The proxy of the call running in this session; `None` between calls.
    slot: Slot,
    /// One call at a time per session.
    turn: Arc<tokio::sync::Mutex<()>>,
    used: Instant,
    /// Whether its downloads are saved (into its folder in the profile) rather than refused:
    /// set for a call whose rules grant downloads, unset for the next that does not (changed
    /// only by a call holding the session's turn).
    downloads_on: Arc<AtomicBool>,
}

/// A session's pages, the one the tools act on, and the element references of the last
/// snapshot taken of it.
pub struct Tabs {
    /// Its pages, oldest first.
    pub pages: Vec<Page>,
    /// The index in `pages` of the page the tools act on.
    pub current: usize,
    /// The references the last snapshot handed out, and the page it was taken of.
    pub refs: Refs,
}

/// What the last snapshot of a page named: each reference (a DOM node's backend id) with the
/// element's role and accessible name, as a confirmation shows them.
#[derive(Debug, Clone, Default)]
pub struct Refs {
    /// The page the snapshot was taken of.
    pub target: Option<TargetId>,
    /// Backend node id -> (role, accessible name).
    pub named: HashMap<i64, (String, String)>,
}

impl Tabs {
    /// The page the tools act on.
    pub fn page(&self) -> Option<&Page> {
        self.pages.get(self.current)
    }
}

/// A call's hold on its session: its pages, with requests judged under the call's rules and
/// counted in its facts until it is dropped.
pub struct Lease {
    /// The page the tools act on, when the call began.
    pub page: Page,
    /// The session's pages and references (this call holds the session's turn).
    pub tabs: Arc<Mutex<Tabs>>,
    context: BrowserContextId,
    slot: Arc<Mutex<Option<Arc<Proxy>>>>,
    facts: Arc<Mutex<NetFacts>>,
    /// Where the session's downloads land, when this call's rules grant them (a folder in the
    /// browser's profile, from which the tool moves a finished one into the workspace).
    pub downloads: Option<PathBuf>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl Lease {
    /// The session's browser context.
    pub fn context(&self) -> &BrowserContextId {
        &self.context
    }

    /// Ends the call's hold on the session's network (nothing connects from here on) and
    /// returns what its pages did on it.
    pub fn finish(&self) -> NetFacts {
        self.close();
        std::mem::take(&mut *self.facts.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn close(&self) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The last request the session's pages were refused during this call.
    pub fn last_blocked(&self) -> Option<Blocked> {
        let facts = self.facts.lock().unwrap_or_else(PoisonError::into_inner);
        facts.blocked.last().cloned()
    }

    /// The refused request for `destination` during this call, if it was refused (later ones
    /// may have been refused since: the page's icon, its scripts' requests).
    pub fn blocked(&self, destination: &str) -> Option<Blocked> {
        let facts = self.facts.lock().unwrap_or_else(PoisonError::into_inner);
        facts
            .blocked
            .iter()
            .rev()
            .find(|b| b.destination == destination)
            .cloned()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.close();
    }
}

impl Browsers {
    /// The service; Chromium starts on the first call that needs it, through `sandbox`.
    pub fn new(
        executable: PathBuf,
        profiles: PathBuf,
        gate: Arc<Gatekeeper>,
        sandbox: tw_sandbox::Sandbox,
    ) -> Self {
        Self {
            executable,
            profiles,
            gate,
            sandbox,
            running: tokio::sync::Mutex::new(None),
        }
    }

    /// The session of `owner` (made when it has none), held for one call under `egress`, with
    /// its downloads saved (`downloads`) or refused.
    pub async fn lease(
        &self,
        owner: &str,
        egress: Egress,
        downloads: bool,
    ) -> Result<Lease, BrowserError> {
        let (tabs, context, slot, turn, folder, on) = {
            let mut running = self.running.lock().await;
            let dead = match running.as_mut() {
                Some(chromium) => chromium.died() || !chromium.answers().await,
                None => false,
            };
            if dead {
                // It died: its sessions are gone with it; the next start is a fresh one.
                tracing::warn!("the browser stopped; starting it again");
                *running = None;
            }
            if running.is_none() {
                *running = Some(self.launch().await?);
            }
            let Some(chromium) = running.as_mut() else {
                return Err(BrowserError::Unavailable("no browser".into()));
            };
            chromium.close_idle().await;
            if !chromium.sessions.contains_key(owner) {
                if chromium.sessions.len() >= MAX_SESSIONS {
                    return Err(BrowserError::Busy(format!(
                        "{MAX_SESSIONS} browser sessions are open, the most at once: close one \
                         (browser_close) or wait for one to go idle"
                    )));
                }
                let session = chromium.open().await?;
                chromium.sessions.insert(owner.to_owned(), session);
            }
            let saved = chromium.profile.path().join("downloads");
            let Some(session) = chromium.sessions.get_mut(owner) else {
                return Err(BrowserError::Unavailable("no session".into()));
            };
            let folder = saved.join(session.index.to_string());
            session.used = Instant::now();
            (
                Arc::clone(&session.tabs),
                session.context.clone(),
                Arc::clone(&session.slot),
                Arc::clone(&session.turn),
                folder,
                Arc::clone(&session.downloads_on),
            )
        };
        let turn = turn.lock_owned().await;
        // Switched while no other call of the session runs: the proxy is shut between calls,
        // so a download begun under one call's grant gets no byte under the next one's rules.
        if on.load(Ordering::Acquire) != downloads {
            let running = self.running.lock().await;
            let Some(chromium) = running.as_ref() else {
                return Err(failed("the browser stopped"));
            };
            chromium
                .download_into(&context, downloads.then_some(folder.as_path()))
                .await?;
            on.store(downloads, Ordering::Release);
        }
        let page = match lock(&tabs).page() {
            Some(p) => p.clone(),
            None => return Err(failed("the session has no page open")),
        };
        let facts = Arc::new(Mutex::new(NetFacts::default()));
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Proxy {
            gate: Arc::clone(&self.gate),
            egress,
            facts: Arc::clone(&facts),
        }));
        Ok(Lease {
            page,
            tabs,
            context,
            slot,
            facts,
            downloads: downloads.then_some(folder),
            _turn: turn,
        })
    }

    /// The page `owner`'s tools act on and the references of its last snapshot, to look at
    /// without taking a turn (a confirmation describes the element a held call would touch);
    /// `None` when `owner` has no session.
    pub async fn peek(&self, owner: &str) -> Option<(Page, Refs)> {
        let running = self.running.lock().await;
        let session = running.as_ref()?.sessions.get(owner)?;
        let tabs = lock(&session.tabs);
        Some((tabs.page()?.clone(), tabs.refs.clone()))
    }

    /// The browser's events of one kind from here on: the downloads its pages begin
    /// (`EventDownloadWillBegin`, so a navigation that turned into one can say so at once; saved
    /// only for a call whose rules grant them, see [`Chromium::download_into`]) and how they go
    /// on (`EventDownloadProgress`).
    pub async fn events<T>(&self) -> Result<EventStream<T>, BrowserError>
    where
        T: chromiumoxide::cdp::IntoEventKind + Unpin,
    {
        let running = self.running.lock().await;
        let Some(chromium) = running.as_ref() else {
            return Err(failed("the browser stopped"));
        };
        chromium.browser.event_listener::<T>().await.map_err(failed)
    }

    /// Opens a page in the lease's session and makes it the one the tools act on.
    pub async fn open_tab(&self, lease: &mut Lease) -> Result<(), BrowserError> {
        if lock(&lease.tabs).pages.len() >= MAX_TABS {
            return Err(BrowserError::Busy(format!(
                "{MAX_TABS} pages are open in this session, the most at once: close one first"
            )));
        }
        let page = {
            let running = self.running.lock().await;
            let Some(chromium) = running.as_ref() else {
                return Err(failed("the browser stopped"));
            };
            chromium.page_in(&lease.context).await?
        };
        let mut tabs = lock(&lease.tabs);
        tabs.pages.push(page.clone());
        tabs.current = tabs.pages.len() - 1;
        lease.page = page;
        Ok(())
    }

    /// Brings the session's list of pages up to date: pages its pages opened (popups, links
    /// with a target) are added, closed ones dropped; pages past [`MAX_TABS`] are closed.
    pub async fn sync_tabs(&self, lease: &mut Lease) -> Result<(), BrowserError> {
        let (all, infos) = {
            let running = self.running.lock().await;
            let Some(chromium) = running.as_ref() else {
                return Err(failed("the browser stopped"));
            };
            let infos = chromium
                .browser
                .execute(GetTargetsParams::default())
                .await
                .map_err(failed)?
                .result
                .target_infos;
            (chromium.browser.pages().await.map_err(failed)?, infos)
        };
        let ours: Vec<&TargetId> = infos
            .iter()
            .filter(|t| t.r#type == "page" && t.browser_context_id.as_ref() == Some(&lease.context))
            .map(|t| &t.target_id)
            .collect();
        let mut extra = Vec::new();
        let mut added = Vec::new();
        {
            let mut tabs = lock(&lease.tabs);
            let current = tabs.page().map(|p| p.target_id().clone());
            tabs.pages.retain(|p| ours.contains(&p.target_id()));
            for page in all {
                let known = tabs.pages.iter().any(|p| p.target_id() == page.target_id());
                if !known && ours.contains(&page.target_id()) {
                    if tabs.pages.len() < MAX_TABS {
                        added.push(page.clone());
                        tabs.pages.push(page);
                    } else {
                        extra.push(page);
                    }
                }
            }
            tabs.current = current
                .and_then(|c| tabs.pages.iter().position(|p| *p.target_id() == c))
                .unwrap_or(0);
            if let Some(p) = tabs.page() {
                lease.page = p.clone();
            }
        }
        for page in &added {
            dismiss_dialogs(page).await;
        }
        for page in extra {
            if let Err(e) = page.close().await {
                tracing::debug!(error = %e, "a page past the session's cap could not be closed");
            }
        }
        Ok(())
    }

    /// Closes the page at `index` in the lease's session; the one before it becomes current.
    /// The last page is replaced by a blank one, so a session always has a page.
    pub async fn close_tab(&self, lease: &mut Lease, index: usize) -> Result<(), BrowserError> {
        let page = {
            let mut tabs = lock(&lease.tabs);
            if index >= tabs.pages.len() {
                return Err(failed(format!("there is no page {index}")));
            }
            let page = tabs.pages.remove(index);
            if tabs.current >= index && tabs.current > 0 {
                tabs.current -= 1;
            }
            page
        };
        page.close().await.map_err(failed)?;
        if lock(&lease.tabs).pages.is_empty() {
            return self.open_tab(lease).await;
        }
        if let Some(p) = lock(&lease.tabs).page() {
            lease.page = p.clone();
        }
        Ok(())
    }

    /// Closes `owner`'s session; whether it had one.
    pub async fn close(&self, owner: &str) -> bool {
        let mut running = self.running.lock().await;
        let Some(chromium) = running.as_mut() else {
            return false;
        };
        match chromium.sessions.remove(owner) {
            Some(s) => {
                chromium.dispose(s).await;
                true
            }
            None => false,
        }
    }

    async fn launch(&self) -> Result<Chromium, BrowserError> {
        if !self.executable.is_file() {
            return Err(BrowserError::Unavailable(format!(
                "{} does not exist: install Debian's chromium package (scripts/setup does)",
                self.executable.display()
            )));
        }
        std::fs::create_dir_all(&self.profiles)
            .map_err(|e| BrowserError::Unavailable(format!("{}: {e}", self.profiles.display())))?;
        let profile = tempfile::Builder::new()
            .prefix("chromium-")
            .tempdir_in(&self.profiles)
            .map_err(|e| BrowserError::Unavailable(format!("{}: {e}", self.profiles.display())))?;
        let slots: Vec<Slot> = (0..MAX_SESSIONS).map(|_| Slot::default()).collect();
        let serving = CancellationToken::new();
        let spec = self.spec(profile.path(), &slots, &serving);
        let mut process = self
            .sandbox
            .spawn_interactive(spec)
            .await
            .map_err(|e| BrowserError::Unavailable(e.to_string()))?;
        let (Some(to_browser), Some(from_browser)) = (process.take_stdin(), process.take_stdout())
        else {
            return Err(BrowserError::Unavailable("the browser's pipes".into()));
        };
        // A snapshot is one message of hundreds of kilobytes: a pipe of 1 MiB (the most a
        // normal user may ask for) takes it in a few writes rather than sixteen per megabyte.
        if let Err(e) = rustix::pipe::fcntl_setpipe_size(&from_browser, 1 << 20) {
            tracing::debug!(error = %e, "the browser's pipe keeps its default size");
        }
        let bridge = devtools::bridge(to_browser, from_browser, LAUNCH_TIME)
            .await
            .map_err(|e| BrowserError::Unavailable(format!("no DevTools bridge: {e}")))?;
        let config = HandlerConfig {
            // A certificate the browser cannot trust fails the page: the egress proxy tunnels
            // TLS without looking into it, so the browser is the one that checks.
            ignore_https_errors: false,
            viewport: Some(Viewport::default()),
            request_timeout: LAUNCH_TIME,
            ..HandlerConfig::default()
        };
        let (browser, mut events) = match Browser::connect_with_config(bridge.url, config).await {
            Ok(c) => c,
            Err(e) => return Err(not_started(process, e.to_string()).await),
        };
        // The connection's messages are handled as they come; the task ends with the browser
        // (its connection failing is the end: the handler goes on trying otherwise).
        let handler = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if let Err(chromiumoxide::error::CdpError::Ws(e)) = event {
                    tracing::warn!(error = %e, "the connection to the browser failed");
                    break;
                }
            }
        });
        // Started means answering: a browser that cannot start says why here, not on the
        // first page.
        let answered = match tokio::time::timeout(LAUNCH_TIME, browser.version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} s", LAUNCH_TIME.as_secs())),
        };
        if let Err(e) = answered {
            handler.abort();
            return Err(not_started(process, e).await);
        }
        Ok(Chromium {
            browser,
            handler,
            sessions: HashMap::new(),
            slots,
            _process: process,
            _serving: serving.drop_guard(),
            profile,
        })
    }

    /// How Chromium is started: through a shell that hands it its DevTools pipes, at the strict
    /// level, its egress port served by the proxies in `slots` until `serving` is cancelled.
    fn spec(
        &self,
        profile: &std::path::Path,
        slots: &[Slot],
        serving: &CancellationToken,
    ) -> tw_sandbox::ProcessSpec {
        // Chromium reads DevTools commands from fd 3 and writes to fd 4: the shell hands it
        // the pipes it was given as standard input and output, then becomes it.
        let mut spec = tw_sandbox::ProcessSpec::new("/bin/sh", profile);
        spec.args = vec![
            "-c".into(),
            "exec \"$0\" \"$@\" 3<&0 4>&1 </dev/null >&2".into(),
            self.executable.display().to_string(),
        ];
        spec.args.extend(ARGS.iter().map(|a| (*a).to_owned()));
        spec.args
            .push(format!("--user-data-dir={}", profile.display()));
        // Strict: namespaces of its own (its network's only way out is the egress port below),
        // the system read-only, its profile the one place it may write, seccomp. Chromium's own
        // sandbox would nest namespaces in ours, which the seccomp filter refuses to everything
        // confined, so it runs without it: ours is the one around every process of it.
        spec.args
            .extend(["--no-sandbox".into(), "--disable-setuid-sandbox".into()]);
        spec.isolation = tw_core::IsolationLevel::Strict;
        spec.fs.read_write = vec![profile.to_path_buf()];
        spec.fs.read_only = BROWSER_READ
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        // The limits of a long-lived program (V8 reserves far more address space than it uses;
        // each page is a process).
        spec.limits.cpu_seconds = None;
        spec.limits.memory_bytes = None;
        spec.limits.max_open_files = Some(4096);
        spec.limits.max_processes = Some(1024);
        // The egress port: every address of the namespace's loopback, port 3128. Each session's
        // context is given an address of its own, and a connection is judged by the proxy of
        // the call running in the session whose address it was made to.
        let (slots, stop) = (slots.to_vec(), serving.clone());
        spec.egress = Some(tw_sandbox::EgressPort(Arc::new(move |listener| {
            let slots = slots.clone();
            tokio::spawn(serve_with(listener, stop.clone(), move |to| {
                let slot = slots.get(session_index(to)?)?;
                slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
            }));
        })));
        spec.max_output_bytes = STDERR_TAIL;
        spec
    }
}

impl Chromium {
    /// Whether the browser still takes commands. A browser that has just died may not have
    /// closed the connection yet (the sandbox's helper and init, which share its ends of the
    /// pipes, are still winding up): a command sent to it fails when they are gone, or is never
    /// answered. A browser that does not tell its version within [`ANSWER_TIME`] is as good as
    /// dead and is started again.
    async fn answers(&self) -> bool {
        matches!(
            tokio::time::timeout(ANSWER_TIME, self.browser.version()).await,
            Ok(Ok(_))
        )
    }

    /// Whether the browser is gone: its connection failed.
    fn died(&mut self) -> bool {
        // The relay closes the connection when the browser's end of the pipe closes, and the
        // handler ends with the connection.
        self.handler.is_finished()
    }

    /// A new context whose requests all go through a proxy of its own, with downloads off.
    async fn open(&self) -> Result<Session, BrowserError> {
        let Some(index) =
            (0..MAX_SESSIONS).find(|i| !self.sessions.values().any(|s| s.index == *i))
        else {
            return Err(BrowserError::Busy(format!(
                "{MAX_SESSIONS} browser sessions are open, the most at once"
            )));
        };
        let slot = Arc::clone(&self.slots[index]);
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let context = self
            .browser
            .create_browser_context(
                CreateBrowserContextParams::builder()
                    .proxy_server(format!(
                        "http://{}:{}",
                        proxy_address(index),
                        tw_sandbox::EGRESS_PROXY_PORT
                    ))
                    // Loopback too goes through the proxy (Chromium sends it direct otherwise).
                    .proxy_bypass_list("<-loopback>")
                    .dispose_on_detach(true)
                    .build(),
            )
            .await
            .map_err(failed)?;
        self.download_into(&context, None).await?;
        let page = self.page_in(&context).await?;
        Ok(Session {
            context,
            tabs: Arc::new(Mutex::new(Tabs {
                pages: vec![page],
                current: 0,
                refs: Refs::default(),
            })),
            index,
            slot,
            turn: Arc::default(),
            used: Instant::now(),
            downloads_on: Arc::default(),
        })
    }

    /// Where `context`'s downloads go: into `folder` (made if missing), or nowhere. "deny"
    /// would leave the navigation that asked for a download unanswered, so a refused download
    /// is let begin (the navigation says it was one) into a directory that cannot exist, under
    /// a file, where writing it fails. Saved ones are named by their GUID, never by the page.
    async fn download_into(
        &self,
        context: &BrowserContextId,
        folder: Option<&std::path::Path>,
    ) -> Result<(), BrowserError> {
        let path = match folder {
            Some(f) => {
                std::fs::create_dir_all(f).map_err(failed)?;
                f.display().to_string()
            }
            None => NO_DOWNLOADS.to_owned(),
        };
        self.browser
            .execute(
                SetDownloadBehaviorParams::builder()
                    .behavior(SetDownloadBehaviorBehavior::AllowAndName)
                    .download_path(path)
                    .events_enabled(true)
                    .browser_context_id(context.clone())
                    .build()
                    .map_err(failed)?,
            )
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// A blank page in `context`.
    async fn page_in(&self, context: &BrowserContextId) -> Result<Page, BrowserError> {
        let page = self
            .browser
            .new_page(
                CreateTargetParams::builder()
                    .url("about:blank")
                    .browser_context_id(context.clone())
                    .build()
                    .map_err(failed)?,
            )
            .await
            .map_err(failed)?;
        dismiss_dialogs(&page).await;
        Ok(page)
    }

    async fn close_idle(&mut self) {
        let idle: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.used.elapsed() > IDLE)
            .map(|(k, _)| k.clone())
            .collect();
        for owner in idle {
            if let Some(s) = self.sessions.remove(&owner) {
                self.dispose(s).await;
            }
        }
    }

    async fn dispose(&self, s: Session) {
        if let Err(e) = self.browser.dispose_browser_context(s.context).await {
            tracing::debug!(error = %e, "a browser context could not be disposed");
        }
    }
}

/// What Chromium reads beyond the sandbox's system paths: its fonts' configuration, and the
/// settings Debian's launcher script reads.
const BROWSER_READ: [&str; 2] = ["/etc/fonts", "/etc/chromium.d"];

/// The loopback address the proxy of session `index` is reached at inside the sandbox
/// (127.0.0.2 onwards; 127.0.0.1:3128 is every sandboxed process's proxy address).
fn proxy_address(index: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, 0, 2 + index as u8)
}

/// The session whose proxy address `to` is.
fn session_index(to: std::net::IpAddr) -> Option<usize> {
    match to {
        std::net::IpAddr::V4(a) if a.octets()[..3] == [127, 0, 0] => {
            let i = usize::from(a.octets()[3]).checked_sub(2)?;
            (i < MAX_SESSIONS).then_some(i)
        }
        _ => None,
    }
}

/// How much of what Chromium writes to standard error is kept, to say why it would not start.
const STDERR_TAIL: usize = 4096;

/// Why the browser did not start (`e`), with the end of what it wrote to standard error; the
/// process is stopped.
async fn not_started(process: tw_sandbox::Interactive, e: String) -> BrowserError {
    let said = match process.stop().await {
        Ok(exit) => {
            let text = String::from_utf8_lossy(&exit.stderr_tail);
            let text = text.trim();
            if text.is_empty() {
                String::new()
            } else {
                format!("; it said: {text}")
            }
        }
        Err(_) => String::new(),
    };
    BrowserError::Unavailable(format!("{e}{said}"))
}

/// Chromium's switches: headless, nothing reaches out by itself, nothing leaves except through
/// a context's proxy, and DevTools over the pipe.
const ARGS: [&str; 34] = [
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
    "--disable-extensions",
    // The network service in the browser process, where each context's proxy applies.
    "--enable-features=NetworkService,NetworkServiceInProcess",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-component-extensions-with-background-pages",
    "--disable-default-apps",
    // Shared memory in the profile's temporary directory, not a small /dev/shm.
    "--disable-dev-shm-usage",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    // A page's popups open as pages of its session (browser_tabs lists them).
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--enable-automation",
    "--password-store=basic",
    "--use-mock-keychain",
    "--lang=en_US",
    // The default context (which no session uses) gets a proxy that answers nothing.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    // No name is resolved by the browser: the gatekeeper behind the proxy resolves them. The
    // rules cover addresses too, so the proxies' own addresses are let through.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.*",
    // WebRTC would send UDP around the proxy.
    "--force-webrtc-ip-handling-policy",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    // A page left stays gone: going back loads it again through the proxy, and no script of
    // the tools reads a page kept frozen in the back-forward cache.
    "--disable-features=DnsOverHttps,Prefetch,NoStatePrefetch,OptimizationHints,MediaRouter,\
     BackForwardCache,TranslateUI",
];

/// Dismisses the page's dialogs (alert, confirm, prompt; a page being left is let go) as they
/// open: nobody is there to answer them, and an open dialog stops the page's scripts, and the
/// tools' with them.
async fn dismiss_dialogs(page: &Page) {
    let mut opened = match page.event_listener::<EventJavascriptDialogOpening>().await {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(error = %e, "a page's dialogs cannot be watched");
            return;
        }
    };
    let page = page.clone();
    tokio::spawn(async move {
        while let Some(dialog) = opened.next().await {
            let accept = dialog.r#type == DialogType::Beforeunload;
            if let Err(e) = page
                .execute(HandleJavaScriptDialogParams::new(accept))
                .await
            {
                tracing::debug!(error = %e, "a dialog could not be dismissed");
            }
        }
    });
}

/// The session's pages, whoever panicked while holding them.
pub fn lock(tabs: &Mutex<Tabs>) -> std::sync::MutexGuard<'_, Tabs> {
    tabs.lock().unwrap_or_else(PoisonError::into_inner)
}
