//! The MCP sessions of the streamable HTTP transport and the rules that bound them, in one place:
//! who opened each (one token), how many one token may hold ([`SessionLimits::max_per_token`]),
//! when a session nobody uses is closed ([`SessionLimits::idle_timeout`]), and closing one on the
//! client's request.
//!
//! [`Sessions`] is the rmcp `SessionManager` the transport runs on: it keeps rmcp's in-memory
//! manager for the sessions themselves and adds a table of what it needs to judge them. Every
//! way a session ends (the client's DELETE, the idle timeout, the server shutting down, its task
//! failing) comes through `close_session`, which removes the session from both, so nothing of it
//! outlives it here. rmcp's own inactivity timer is switched off: it counts only messages, so it
//! would close a session whose call waits half an hour for a person, or whose client only
//! listens for notifications; here a session is idle only while none of its requests is open.
//!
//! The HTTP endpoint (tw-server) asks before it lets a request through: [`Sessions::reserve`]
//! for a request that may open a session, [`Sessions::owns`] for one that names a session, and
//! [`Sessions::close`] for a DELETE; it only translates the answers into HTTP.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions as _, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tw_runtime::SessionLimits;

use crate::McpError;

/// Who opened a session: one token. The HTTP endpoint's guard puts it in every request's
/// extensions; a session answers only requests made with the token that opened it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionOwner {
    key: Arc<str>,
    name: Arc<str>,
}

impl SessionOwner {
    /// `key` tells tokens apart (the token's SHA-256, never the token); `name` says whose it is
    /// in messages ("agent ci-bot's token").
    pub fn new(key: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        Self {
            key: key.into(),
            name: name.into(),
        }
    }

    /// Requests that came without an owner (the transport mounted without a guard): they share
    /// one allowance, so even then sessions are bounded.
    pub fn unidentified() -> Self {
        Self::new("", "requests without a token")
    }

    /// Whose token this is, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The MCP sessions over HTTP (see the module's documentation). Cheap to clone: clones share the
/// sessions.
#[derive(Clone)]
pub struct Sessions {
    shared: Arc<Shared>,
}

struct Shared {
    local: LocalSessionManager,
    limits: SessionLimits,
    table: Mutex<Table>,
    next_ticket: AtomicU64,
}

#[derive(Default)]
struct Table {
    sessions: HashMap<SessionId, Session>,
    /// Per owner, the sessions it has open plus the places its requests reserved.
    held: HashMap<SessionOwner, usize>,
    /// Places reserved by requests that may open a session and have not yet, by ticket.
    reserved: HashMap<u64, SessionOwner>,
}

struct Session {
    /// `None` until the handshake names the request's reserved place; such a session answers
    /// nobody and is closed when idle.
    owner: Option<SessionOwner>,
    /// When the last request ended (or began, while none is open).
    last_active: Instant,
    /// Its requests whose responses are still streaming: a call running, the notification stream.
    streams: usize,
    /// Cancelled when the session ends: stops its idle watch.
    ended: CancellationToken,
}

impl Table {
    fn release(&mut self, owner: &SessionOwner) {
        if let Some(n) = self.held.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.held.remove(owner);
            }
        }
    }

    fn touch(&mut self, id: &SessionId) -> bool {
        match self.sessions.get_mut(id) {
            Some(s) => {
                s.last_active = Instant::now();
                true
            }
            None => false,
        }
    }
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics while holding it; a poisoned table is still consistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `id` and gives its owner's place back; `false` if it was not open.
    fn forget(&self, id: &SessionId) -> bool {
        let mut table = self.table();
        let Some(session) = table.sessions.remove(id) else {
            return false;
        };
        session.ended.cancel();
        if let Some(owner) = &session.owner {
            table.release(owner);
        }
        true
    }

    fn track<S>(self: &Arc<Self>, id: &SessionId, stream: S) -> Tracked<S> {
        let mut table = self.table();
        if let Some(s) = table.sessions.get_mut(id) {
            s.streams += 1;
            s.last_active = Instant::now();
        }
        Tracked {
            inner: Box::pin(stream),
            _open: OpenStream {
                shared: Arc::clone(self),
                id: id.clone(),
            },
        }
    }
}

/// A place for one more session of an owner, held while the request that may open it runs. The
/// session's handshake takes it over (it then counts as the open session); if the request ends
/// without one, dropping this gives it back.
pub struct SessionSlot {
    shared: Arc<Shared>,
    ticket: SlotTicket,
}

/// Names a [`SessionSlot`] in the request's extensions, so the handshake can claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotTicket(u64);

impl SessionSlot {
    /// What the request carries to the handshake.
    pub fn ticket(&self) -> SlotTicket {
        self.ticket
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut table = self.shared.table();
        if let Some(owner) = table.reserved.remove(&self.ticket.0) {
            table.release(&owner);
        }
    }
}

impl Sessions {
    /// No sessions yet, bounded by `limits`.
    pub fn new(limits: SessionLimits) -> Self {
        let mut local = LocalSessionManager::default();
        // Idleness is judged here (see the module's documentation), not by rmcp's timer.
        local.session_config.keep_alive = None;
        Self {
            shared: Arc::new(Shared {
                local,
                limits,
                table: Mutex::default(),
                next_ticket: AtomicU64::new(0),
            }),
        }
    }

    /// A place for one more session of `owner`, or [`McpError::TooManySessions`] when it already
    /// holds its limit. No open session is ever closed to make room: the live sessions are
    /// someone's work, and the client that asks for too many is the one to hear about it.
    pub fn reserve(&self, owner: &SessionOwner) -> crate::Result<SessionSlot> {
        let limit = self.shared.limits.max_per_token;
        let mut table = self.shared.table();
        let held = table.held.get(owner).copied().unwrap_or(0);
        if held >= limit {
            return Err(McpError::TooManySessions {
                owner: owner.name().to_owned(),
                limit,
                idle_secs: self.shared.limits.idle_timeout.as_secs(),
            });
        }
        let ticket = self.shared.next_ticket.fetch_add(1, Ordering::Relaxed);
        table.reserved.insert(ticket, owner.clone());
        *table.held.entry(owner.clone()).or_default() += 1;
        Ok(SessionSlot {
            shared: Arc::clone(&self.shared),
            ticket: SlotTicket(ticket),
        })
    }

    /// Whether `id` is an open session of `owner`. Someone else's session is answered as if it
    /// did not exist: a session id is not a credential, the token is.
    pub fn owns(&self, id: &str, owner: &SessionOwner) -> bool {
        self.shared
            .table()
            .sessions
            .get(id)
            .is_some_and(|s| s.owner.as_ref() == Some(owner))
    }

    /// Closes `owner`'s session `id` now (the client's DELETE): its calls still running are
    /// cancelled (and recorded as such) and everything it held is let go.
    pub async fn close(&self, id: &str, owner: &SessionOwner) -> crate::Result<()> {
        if !self.owns(id, owner) {
            return Err(McpError::NoSuchSession(id.to_owned()));
        }
        let id: SessionId = id.into();
        // Forgotten here whatever rmcp answers: a worker that already stopped has nothing left.
        if let Err(e) = self.close_session(&id).await {
            tracing::debug!(session = %id, error = %e, "closing an MCP session");
        }
        Ok(())
    }

    /// How many sessions are open.
    pub fn open(&self) -> usize {
        self.shared.table().sessions.len()
    }
}

/// Closes `id` once it has had no open request for the idle timeout; ends with the session.
async fn close_when_idle(shared: Arc<Shared>, id: SessionId, ended: CancellationToken) {
    let idle = shared.limits.idle_timeout;
    loop {
        let wait = {
            let table = shared.table();
            let Some(s) = table.sessions.get(&id) else {
                return;
            };
            if s.streams > 0 {
                idle
            } else {
                idle.saturating_sub(s.last_active.elapsed())
            }
        };
        if wait.is_zero() {
            tracing::info!(session = %id, idle_secs = idle.as_secs(), "closing an idle MCP session");
            if shared.forget(&id)
                && let Err(e) = shared.local.close_session(&id).await
            {
                tracing::debug!(session = %id, error = %e, "closing an idle MCP session");
            }
            return;
        }
        tokio::select! {
            () = ended.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The place a handshake's request reserved, if it carries one.
fn ticket(message: &ClientJsonRpcMessage) -> Option<SlotTicket> {
    match message {
        ClientJsonRpcMessage::Request(r) => r
            .request
            .extensions()
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<SlotTicket>())
            .copied(),
        _ => None,
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.shared.local.create_session().await?;
        let ended = CancellationToken::new();
        self.shared.table().sessions.insert(
            id.clone(),
            Session {
                owner: None,
                last_active: Instant::now(),
                streams: 0,
                ended: ended.clone(),
            },
        );
        tokio::spawn(close_when_idle(Arc::clone(&self.shared), id.clone(), ended));
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        if let Some(SlotTicket(ticket)) = ticket(&message) {
            let mut table = self.shared.table();
            if let Some(owner) = table.reserved.remove(&ticket) {
                match table.sessions.get_mut(id) {
                    // The place now counts as this open session.
                    Some(s) => s.owner = Some(owner),
                    // Already closed (the server is stopping): nothing to hold.
                    None => table.release(&owner),
                }
            }
        }
        self.shared.table().touch(id);
        self.shared.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.shared.table().touch(id);
        self.shared.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.shared.forget(id);
        self.shared.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.local.create_stream(id, message).await?;
        Ok(self.shared.track(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.shared.table().touch(id);
        self.shared.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.local.create_standalone_stream(id).await?;
        Ok(self.shared.track(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.local.resume(id, last_event_id).await?;
        Ok(self.shared.track(id, stream))
    }
}

/// A session's response stream: while it is open the session is in use.
struct Tracked<S> {
    inner: Pin<Box<S>>,
    _open: OpenStream,
}

impl<S: Stream> Stream for Tracked<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct OpenStream {
    shared: Arc<Shared>,
    id: SessionId,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut table = self.shared.table();
        if let Some(s) = table.sessions.get_mut(&self.id) {
            s.streams = s.streams.saturating_sub(1);
            s.last_active = Instant::now();
        }
    }
}
