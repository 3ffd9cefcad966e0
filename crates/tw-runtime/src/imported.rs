//! What an imported tool is at run time: the client a transport connected ([`UpstreamClient`]),
//! each registered tool's route to its server ([`UpstreamTool`]), and which servers are
//! connected and which tools quarantined ([`Upstreams`]). The service that registers them is
//! `crate::upstream`; this module is apart from it so that `crate::kind` can name an imported
//! tool without importing the service.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tw_core::{ToolDefinition, ToolStatus};
use tw_store::PinRow;

use crate::builtins::{BuiltinTool, ToolContext, ToolFailure, ToolFuture};

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
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) definition: ToolDefinition,
    pub(crate) upstreams: Weak<Upstreams>,
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
pub(crate) struct ServerState {
    pub(crate) client: Option<Arc<dyn UpstreamClient>>,
    /// Registered name → the tool's name on the server.
    pub(crate) tools: BTreeMap<String, String>,
    pub(crate) error: Option<String>,
    pub(crate) connects: u32,
}

/// Every upstream server this runtime knows, and which tools are quarantined.
#[derive(Default)]
pub(crate) struct Upstreams {
    servers: RwLock<BTreeMap<String, ServerState>>,
    /// Registered name → why it is quarantined.
    quarantined: RwLock<HashMap<String, String>>,
}

impl Upstreams {
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ServerState>> {
        self.servers.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, ServerState>> {
        self.servers.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn client(&self, server: &str) -> Option<Arc<dyn UpstreamClient>> {
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
    pub(crate) fn set_quarantine(&self, pins: &[PinRow]) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

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
