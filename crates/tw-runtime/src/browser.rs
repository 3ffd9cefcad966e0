//! The browser service: one Chromium (Debian's) per runtime, started on first use and again
//! if it dies, driven over the DevTools protocol with chromiumoxide. Each caller (agent and
//! skill) gets a browser context of its own (cookies, storage and cache apart from every
//! other's) whose only way out is an egress proxy of its own on the host's loopback: every
//! request its pages make (documents, subresources, XHR and fetch, WebSockets, workers,
//! redirects) is judged by the egress gatekeeper under the rules of the call running in that
//! session, and written into that call's network facts. Between calls nothing may connect.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::page::Page;
use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tw_core::target::Egress;

use crate::net::proxy::{Proxy, serve_with};
use crate::net::{Gatekeeper, NetFacts};

/// Where Debian's `chromium` package puts the browser.
pub const DEFAULT_EXECUTABLE: &str = "/usr/bin/chromium";
/// A session unused this long is closed (its context, cookies and pages with it).
pub const IDLE: Duration = Duration::from_secs(600);
/// The most sessions (browser contexts) open at once.
pub const MAX_SESSIONS: usize = 16;
/// How long Chromium may take to start, and one DevTools command to answer.
const LAUNCH_TIME: Duration = Duration::from_secs(30);

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
    running: tokio::sync::Mutex<Option<Chromium>>,
}

/// One running Chromium and the sessions open in it.
struct Chromium {
    browser: Browser,
    handler: JoinHandle<()>,
    sessions: HashMap<String, Session>,
    _profile: tempfile::TempDir,
}

/// One caller's browser context, its page, and the proxy its requests go through.
struct Session {
    context: BrowserContextId,
    page: Page,
    /// The proxy of the call running in this session; `None` between calls.
    slot: Arc<Mutex<Option<Arc<Proxy>>>>,
    /// One call at a time per session.
    turn: Arc<tokio::sync::Mutex<()>>,
    used: Instant,
    _serving: DropGuard,
}

/// A call's hold on its session: the page, with requests judged under the call's rules and
/// counted in its facts until it is dropped.
pub struct Lease {
    /// The session's page.
    pub page: Page,
    slot: Arc<Mutex<Option<Arc<Proxy>>>>,
    facts: Arc<Mutex<NetFacts>>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl Lease {
    /// Ends the call's hold on the session's network (nothing connects from here on) and
    /// returns what its pages did on it.
    pub fn finish(&self) -> NetFacts {
        self.close();
        std::mem::take(&mut *self.facts.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn close(&self) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.close();
    }
}

impl Browsers {
    /// The service; Chromium starts on the first call that needs it.
    pub fn new(executable: PathBuf, profiles: PathBuf, gate: Arc<Gatekeeper>) -> Self {
        Self {
            executable,
            profiles,
            gate,
            running: tokio::sync::Mutex::new(None),
        }
    }

    /// The session of `owner` (made when it has none), held for one call under `egress`.
    pub async fn lease(&self, owner: &str, egress: Egress) -> Result<Lease, BrowserError> {
        let (page, slot, turn) = {
            let mut running = self.running.lock().await;
            if running.as_ref().is_some_and(|c| c.handler.is_finished()) {
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
            let Some(session) = chromium.sessions.get_mut(owner) else {
                return Err(BrowserError::Unavailable("no session".into()));
            };
            session.used = Instant::now();
            (
                session.page.clone(),
                Arc::clone(&session.slot),
                Arc::clone(&session.turn),
            )
        };
        let turn = turn.lock_owned().await;
        let facts = Arc::new(Mutex::new(NetFacts::default()));
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Proxy {
            gate: Arc::clone(&self.gate),
            egress,
            facts: Arc::clone(&facts),
        }));
        Ok(Lease {
            page,
            slot,
            facts,
            _turn: turn,
        })
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
        let mut config = BrowserConfig::builder()
            .chrome_executable(&self.executable)
            .user_data_dir(profile.path())
            .launch_timeout(LAUNCH_TIME)
            .request_timeout(LAUNCH_TIME)
            .args(ARGS);
        // Chromium's own sandbox needs user namespaces it cannot have as root.
        if is_root() {
            config = config.no_sandbox();
        }
        let config = config.build().map_err(BrowserError::Unavailable)?;
        let (browser, mut events) = Browser::launch(config)
            .await
            .map_err(|e| BrowserError::Unavailable(e.to_string()))?;
        // The connection's messages are handled as they come; the task ends with the browser.
        let handler = tokio::spawn(async move { while events.next().await.is_some() {} });
        Ok(Chromium {
            browser,
            handler,
            sessions: HashMap::new(),
            _profile: profile,
        })
    }
}

impl Chromium {
    /// A new context whose requests all go through a proxy of its own, with downloads off.
    async fn open(&self) -> Result<Session, BrowserError> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| failed(format!("no proxy port: {e}")))?;
        let port = listener.local_addr().map_err(failed)?.port();
        let slot: Arc<Mutex<Option<Arc<Proxy>>>> = Arc::default();
        let stop = CancellationToken::new();
        {
            let slot = Arc::clone(&slot);
            tokio::spawn(serve_with(listener, stop.clone(), move || {
                slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
            }));
        }
        let context = self
            .browser
            .create_browser_context(
                CreateBrowserContextParams::builder()
                    .proxy_server(format!("http://127.0.0.1:{port}"))
                    // Loopback too goes through the proxy (Chromium sends it direct otherwise).
                    .proxy_bypass_list("<-loopback>")
                    .dispose_on_detach(true)
                    .build(),
            )
            .await
            .map_err(failed)?;
        self.browser
            .execute(
                SetDownloadBehaviorParams::builder()
                    .behavior(SetDownloadBehaviorBehavior::Deny)
                    .browser_context_id(context.clone())
                    .build()
                    .map_err(failed)?,
            )
            .await
            .map_err(failed)?;
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
        Ok(Session {
            context,
            page,
            slot,
            turn: Arc::default(),
            used: Instant::now(),
            _serving: stop.drop_guard(),
        })
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

/// Chromium's switches beyond chromiumoxide's defaults: nothing reaches out by itself, and
/// nothing leaves except through a context's proxy.
const ARGS: [&str; 9] = [
    // The default context (which no session uses) gets a proxy that answers nothing.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    // No name is resolved by the browser: the gatekeeper behind the proxy resolves them.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    // WebRTC would send UDP around the proxy.
    "--force-webrtc-ip-handling-policy",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features=DnsOverHttps,Prefetch,NoStatePrefetch,OptimizationHints,MediaRouter",
];

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
