//! Tools imported from other MCP servers ("upstream" servers): registered as `server__tool`,
//! judged, validated, audited and limited like every other tool, and called through whatever
//! client the transport (tw-mcp) connected. The runtime knows nothing of MCP itself: a client is
//! an [`UpstreamClient`], and tw-mcp registers a server's tools with [`Runtime::register_upstream`]
//! each time it (re)connects and reports it gone with [`Runtime::upstream_down`].
//!
//! **Pinning.** The first time a tool is registered, the fingerprint of its upstream definition
//! (name, description, schemas; keys sorted) is pinned in the store. A later, different definition
//! quarantines the tool: policy denies every call (`tool_quarantined`), so the listing an agent
//! sees drops it, until an administrator reviews the change and accepts it. A description is what
//! an agent reads and obeys, so a server that rewrites one after approval ("rug pull") must not
//! reach an agent unseen. The quarantine is re-read from the store every second, so an
//! acceptance in another process frees the tool here too.
//!
//! **Availability.** While a server is down (crashed, restarting), its tools stay registered and
//! a call fails at once with `upstream_unavailable` (and is audited); the MCP listing leaves them
//! out until the server is back.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::{ToolDefinition, ToolStatus};
use tw_store::{AdminEvent, SeenDefinition};
pub use tw_store::{PinRow, PinState};

use crate::builtins::{BuiltinTool, ToolContext, ToolFailure, ToolFuture};
use crate::runtime::ToolKind;
use crate::{Result, Runtime, RuntimeError};

/// The error code of a call to a server that is not connected.
pub const UNAVAILABLE: &str = "upstream_unavailable";
/// The error code of a call refused because its tool changed upstream since it was pinned.
pub const QUARANTINED: &str = "tool_quarantined";
/// The error code of a tool error the upstream server reported.
pub const UPSTREAM_ERROR: &str = "upstream_error";

/// A connected upstream server, as the transport gives it to the runtime.
pub trait UpstreamClient: Send + Sync + 'static {
    /// Calls `tool` (its name on the server) with validated arguments; `cancel` fires when the
    /// call is cancelled or times out. The output is the tool's structured content if it gave
    /// one, else `{"content": [...]}` with its content blocks.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: &'a Value,
        cancel: CancellationToken,
    ) -> ToolFuture<'a>;
}

/// A tool a server offers, ready to register.
#[derive(Debug, Clone)]
pub struct ImportedTool {
    /// The definition as registered (`server__tool`).
    pub definition: ToolDefinition,
    /// The tool's name on the server.
    pub upstream_name: String,
    /// What is pinned: the server's own name, description and schemas for the tool.
    pub pinned: Value,
}

/// One registered upstream tool: where calls go.
pub struct UpstreamTool {
    server: String,
    tool: String,
    definition: ToolDefinition,
    upstreams: Weak<Upstreams>,
}

impl std::fmt::Debug for UpstreamTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpstreamTool({}:{})", self.server, self.tool)
    }
}

impl UpstreamTool {
    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool's name on the server.
    pub fn upstream_name(&self) -> &str {
        &self.tool
    }
}

impl BuiltinTool for UpstreamTool {
    fn definition(&self) -> std::result::Result<ToolDefinition, tw_core::CoreError> {
        Ok(self.definition.clone())
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let client = self
                .upstreams
                .upgrade()
                .and_then(|u| u.client(&self.server));
            let Some(client) = client else {
                return Err(unavailable(
                    &self.server,
                    self.upstreams.upgrade().as_deref(),
                ));
            };
            client.call(&self.tool, args, ctx.cancel.clone()).await
        })
    }
}

fn unavailable(server: &str, upstreams: Option<&Upstreams>) -> ToolFailure {
    let why = upstreams
        .and_then(|u| u.read().get(server).and_then(|s| s.error.clone()))
        .map(|e| format!(" ({e})"))
        .unwrap_or_default();
    ToolFailure {
        status: ToolStatus::Failed,
        code: UNAVAILABLE.to_owned(),
        message: format!("upstream server {server} is not connected{why}; it is being restarted"),
    }
}

#[derive(Default)]
struct ServerState {
    client: Option<Arc<dyn UpstreamClient>>,
    /// Registered name → the tool's name on the server.
    tools: BTreeMap<String, String>,
    error: Option<String>,
    connects: u32,
}

/// Every upstream server this runtime knows, and which tools are quarantined.
#[derive(Default)]
pub(crate) struct Upstreams {
    servers: RwLock<BTreeMap<String, ServerState>>,
    /// Registered name → why it is quarantined.
    quarantined: RwLock<HashMap<String, String>>,
}

impl Upstreams {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ServerState>> {
        self.servers.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, ServerState>> {
        self.servers.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn client(&self, server: &str) -> Option<Arc<dyn UpstreamClient>> {
        self.read().get(server).and_then(|s| s.client.clone())
    }

    pub(crate) fn quarantine_reason(&self, tool: &str) -> Option<String> {
        self.quarantined
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .cloned()
    }

    /// Rebuilds the quarantine from the store's pins.
    fn set_quarantine(&self, pins: &[PinRow]) {
        let servers = self.read();
        let mut q = HashMap::new();
        for pin in pins.iter().filter(|p| p.quarantined()) {
            let Some(state) = servers.get(&pin.server) else {
                continue;
            };
            for (registered, upstream) in &state.tools {
                if *upstream == pin.tool {
                    q.insert(
                        registered.clone(),
                        format!(
                            "tool {registered} is quarantined: server {} changed its definition \
                             since it was pinned; an administrator must review the change \
                             (`toolwarden mcp review {registered}`)",
                            pin.server
                        ),
                    );
                }
            }
        }
        *self
            .quarantined
            .write()
            .unwrap_or_else(PoisonError::into_inner) = q;
    }
}

/// An upstream server's state, for `toolwarden mcp servers` and the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamStatus {
    /// The server's configured name.
    pub server: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// Its registered tools.
    pub tools: Vec<String>,
    /// Those quarantined.
    pub quarantined: Vec<String>,
    /// Why it is not connected (the last error), if it is not.
    pub error: Option<String>,
    /// How many times it connected (more than one: it was restarted).
    pub connects: u32,
}

/// What is pinned, as a fingerprint: SHA-256 of the JSON with every object's keys sorted, so a
/// server that merely reorders keys changes nothing.
pub fn pin_hash(pinned: &Value) -> String {
    tw_core::fingerprint::json_sha256(pinned)
}

impl Runtime {
    fn upstreams(&self) -> &Arc<Upstreams> {
        &self.inner().upstreams
    }

    /// Registers what `server` offers now (on each connect), with `client` for its calls.
    /// Tools it no longer offers are removed; each offered one is pinned on first sight and
    /// quarantined when it differs from its pin. Names taken by another kind of tool are skipped
    /// (and reported). Returns each registered tool with what pinning made of it.
    pub async fn register_upstream(
        &self,
        server: &str,
        tools: Vec<ImportedTool>,
        client: Arc<dyn UpstreamClient>,
    ) -> Result<Vec<(String, PinState)>> {
        let now = self.now_us();
        let mut registered = Vec::new();
        let mut names = BTreeMap::new();
        for t in tools {
            let name = t.definition.name.to_string();
            let taken = self
                .registry()
                .get(&name)
                .is_some_and(|e| !matches!(&e.kind, ToolKind::Upstream(u) if u.server == server));
            if taken || names.contains_key(&name) {
                tracing::warn!(server, tool = %name, "an upstream tool's name is taken; skipped");
                continue;
            }
            let state = self
                .store()
                .observe_upstream_tool(&SeenDefinition {
                    server: server.to_owned(),
                    tool: t.upstream_name.clone(),
                    hash: pin_hash(&t.pinned),
                    definition: t.pinned.clone(),
                    at: now,
                })
                .await?;
            let kind = ToolKind::Upstream(Arc::new(UpstreamTool {
                server: server.to_owned(),
                tool: t.upstream_name.clone(),
                definition: t.definition.clone(),
                upstreams: Arc::downgrade(self.upstreams()),
            }));
            if self.registry().get(&name).is_some() {
                self.registry().update(t.definition.clone(), kind)?;
            } else {
                self.registry().register(t.definition.clone(), kind)?;
            }
            self.classify_registered(&t.definition).await;
            names.insert(name.clone(), t.upstream_name);
            registered.push((name, state));
        }
        let gone: Vec<String> = {
            let mut servers = self.upstreams().write();
            let s = servers.entry(server.to_owned()).or_default();
            let gone = s
                .tools
                .keys()
                .filter(|n| !names.contains_key(*n))
                .cloned()
                .collect();
            s.tools = names;
            s.client = Some(client);
            s.error = None;
            s.connects += 1;
            gone
        };
        for name in gone {
            let _ = self.registry().unregister(&name);
            self.forget_classification(&name).await;
        }
        self.refresh_quarantine().await?;
        for (name, state) in &registered {
            if *state == PinState::Changed {
                tracing::warn!(server, tool = %name, "an upstream tool changed since it was pinned; quarantined");
            }
        }
        Ok(registered)
    }

    /// Marks `server` as not connected (its tools stay registered; calls fail at once).
    pub fn upstream_down(&self, server: &str, error: String) {
        let mut servers = self.upstreams().write();
        let s = servers.entry(server.to_owned()).or_default();
        s.client = None;
        s.error = Some(error);
    }

    /// Whether `tool` can be called now: not an upstream tool, or one whose server is connected.
    pub fn tool_available(&self, tool: &str) -> bool {
        match self.registry().get(tool).map(|e| e.kind.clone()) {
            Some(ToolKind::Upstream(u)) => self.upstreams().client(&u.server).is_some(),
            Some(_) => true,
            None => false,
        }
    }

    /// Every upstream server this runtime has tried, by name.
    pub fn upstream_status(&self) -> Vec<UpstreamStatus> {
        let servers = self.upstreams().read();
        servers
            .iter()
            .map(|(name, s)| UpstreamStatus {
                server: name.clone(),
                connected: s.client.is_some(),
                tools: s.tools.keys().cloned().collect(),
                quarantined: s
                    .tools
                    .keys()
                    .filter(|t| self.upstreams().quarantine_reason(t).is_some())
                    .cloned()
                    .collect(),
                error: s.error.clone(),
                connects: s.connects,
            })
            .collect()
    }

    /// Re-reads which upstream tools are quarantined (every process on the data directory
    /// shares the pins).
    pub async fn refresh_quarantine(&self) -> Result<()> {
        if self.upstreams().read().is_empty() {
            return Ok(());
        }
        let pins = self.store().upstream_pins().await?;
        self.upstreams().set_quarantine(&pins);
        Ok(())
    }

    /// Accepts the changed definition of quarantined `server`'s `tool` (its name on the
    /// server) as the new pin, recording `by` in the admin log. `None`: nothing waited.
    pub async fn accept_upstream_change(
        &self,
        server: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<PinRow>> {
        let event = AdminEvent {
            at: self.now_us(),
            actor: by.to_owned(),
            kind: "upstream_pin_accepted".to_owned(),
            summary: format!("accepted the changed definition of {server}'s tool {tool}"),
            details: json!({ "server": server, "tool": tool }),
        };
        let accepted = self
            .store()
            .accept_upstream_tool(server, tool, by, &event)
            .await?;
        self.refresh_quarantine().await?;
        Ok(accepted)
    }

    /// Starts `server`'s program in the sandbox at its isolation level, with its stdin and
    /// stdout open for the MCP transport. Fails closed like any tool: a level the host cannot
    /// give is an error.
    pub async fn start_upstream_process(
        &self,
        server: &crate::UpstreamServer,
    ) -> Result<tw_sandbox::Interactive> {
        let crate::UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
            isolation,
            network,
            read_only,
            read_write,
        } = &server.transport
        else {
            return Err(RuntimeError::Upstream(format!(
                "upstream.{} is reached over HTTP, not started",
                server.name
            )));
        };
        let cwd = match cwd {
            Some(c) => c.clone(),
            None => self
                .workspace()
                .roots()
                .first()
                .cloned()
                .ok_or(RuntimeError::NoWorkspace)?,
        };
        let mut spec = tw_sandbox::ProcessSpec::new(command.clone(), cwd.clone());
        spec.args = args.clone();
        spec.env = env.clone();
        spec.isolation = *isolation;
        spec.network = *network;
        // The last 64 KiB of its stderr, to say why it died.
        spec.max_output_bytes = 64 * 1024;
        // A server lives as long as its host: no CPU-time limit over that life. No address-space
        // limit either: V8 (Node) and the JVM reserve far more address space than they use and
        // die at start under a tool's 256 MiB; the process-count and file limits stay.
        spec.limits.cpu_seconds = None;
        spec.limits.memory_bytes = None;
        spec.limits.max_open_files = Some(1024);
        // At strict and above it sees its working directory read-only, unless listed as
        // writable, plus what the configuration lists.
        spec.fs.read_write = read_write.clone();
        if !read_write.iter().any(|p| cwd.starts_with(p)) {
            spec.fs.read_only.push(cwd);
        }
        spec.fs.read_only.extend(read_only.iter().cloned());
        Ok(self.inner().sandbox.spawn_interactive(spec).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_ignores_key_order_but_not_content() {
        let a = json!({"name": "x", "description": "d", "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}}}});
        let b = json!({"inputSchema": {"properties": {"b": {}, "a": {}}, "type": "object"}, "description": "d", "name": "x"});
        let c = json!({"name": "x", "description": "d.", "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}}}});
        assert_eq!(pin_hash(&a), pin_hash(&b));
        assert_ne!(pin_hash(&a), pin_hash(&c));
        assert_eq!(pin_hash(&a).len(), 64);
    }
}
