//! The upstream service: tools imported from other MCP servers, registered as `server__tool`,
//! judged, validated, audited and limited like every other tool, and called through whatever
//! client the transport (tw-mcp) connected. The runtime knows nothing of MCP itself: a client is
//! an [`UpstreamClient`], and tw-mcp registers a server's tools with
//! [`UpstreamService::register_upstream`] each time it (re)connects and reports it gone with
//! [`UpstreamService::upstream_down`].
//!
//! **Pinning.** The first time a tool is registered, the fingerprint of its upstream definition
//! (name, description, schemas; keys sorted) is pinned in the store. A later, different definition
//! quarantines the tool: policy denies every call (`tool_quarantined`), so the listing an agent
//! sees drops it, until an administrator reviews the change and accepts it. A description is what
//! an agent reads and obeys, so a server that rewrites one after approval ("rug pull") must not
//! reach an agent unseen. The quarantine is re-read when the pins change, so an acceptance in
//! another process frees the tool here too.
//!
//! **Availability.** While a server is down (crashed, restarting), its tools stay registered and
//! a call fails at once with `upstream_unavailable` (and is audited); the MCP listing leaves them
//! out until the server is back.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use tw_core::IsolationLevel;
use tw_core::target::{Egress, EgressLayer};
use tw_store::{AdminEvent, SeenDefinition};
pub use tw_store::{PinRow, PinState};

use crate::error::{Result, RuntimeError};
use crate::imported::Upstreams;
pub use crate::imported::{
    ImportedTool, QUARANTINED, UNAVAILABLE, UPSTREAM_ERROR, UpstreamClient, UpstreamStatus,
    UpstreamTool, pin_hash,
};
use crate::kind::ToolKind;
use crate::shared::Shared;
use crate::skills::SkillService;

/// Owns the upstream servers' connections and the quarantine of their tools.
pub struct UpstreamService {
    shared: Arc<Shared>,
    skills: Arc<SkillService>,
    upstreams: Arc<Upstreams>,
}

impl UpstreamService {
    pub(crate) fn new(shared: Arc<Shared>, skills: Arc<SkillService>) -> Self {
        Self {
            shared,
            skills,
            upstreams: Arc::default(),
        }
    }

    fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// Why `tool` is quarantined, if it is.
    pub(crate) fn quarantine_reason(&self, tool: &str) -> Option<String> {
        self.upstreams.quarantine_reason(tool)
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
        let now = self.shared.now_us();
        let mut registered = Vec::new();
        let mut names = BTreeMap::new();
        for t in tools {
            let name = t.definition.name.to_string();
            let taken =
                self.shared.registry.get(&name).is_some_and(
                    |e| !matches!(&e.kind, ToolKind::Upstream(u) if u.server == server),
                );
            if taken || names.contains_key(&name) {
                tracing::warn!(server, tool = %name, "an upstream tool's name is taken; skipped");
                continue;
            }
            let state = self
                .shared
                .store
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
            if self.shared.registry.get(&name).is_some() {
                self.shared.registry.update(t.definition.clone(), kind)?;
            } else {
                self.shared.registry.register(t.definition.clone(), kind)?;
            }
            self.skills.classify_registered(&t.definition).await;
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
            let _ = self.shared.registry.unregister(&name);
            self.skills.forget_classification(&name).await;
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
        match self.shared.registry.get(tool).map(|e| e.kind.clone()) {
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
        let pins = self.shared.store.upstream_pins().await?;
        self.upstreams().set_quarantine(&pins);
        // Registered tools and their quarantine are what a chain's steps are checked against.
        self.shared.tools_changed();
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
            at: self.shared.now_us(),
            actor: by.to_owned(),
            kind: "upstream_pin_accepted".to_owned(),
            summary: format!("accepted the changed definition of {server}'s tool {tool}"),
            details: json!({ "server": server, "tool": tool }),
        };
        let accepted = self
            .shared
            .store
            .accept_upstream_tool(server, tool, by, &event)
            .await?;
        self.refresh_quarantine().await?;
        Ok(accepted)
    }

    /// The HTTP client for `server`'s endpoint, through the egress gatekeeper under a rule of
    /// its own (`config upstream NAME`, allowing the endpoint's host: the administrator named it,
    /// so it may be local): every connection goes to an address checked for that host, and a
    /// redirect anywhere is not followed.
    pub async fn upstream_http_client(
        &self,
        server: &crate::config::UpstreamServer,
    ) -> Result<reqwest::Client> {
        let crate::config::UpstreamTransport::Http { url, headers } = &server.transport else {
            return Err(RuntimeError::invalid(
                "transport",
                format!(
                    "upstream.{} is started as a program, not reached over HTTP",
                    server.name
                ),
            ));
        };
        let target = tw_core::target::parse_url(url)
            .map_err(|e| RuntimeError::invalid("url", format!("upstream.{}: {e}", server.name)))?;
        let layer = EgressLayer {
            source: format!("config upstream {}", server.name),
            allow: tw_core::target::DomainList::parse([target.host.to_string()]).map_err(|e| {
                RuntimeError::invalid("url", format!("upstream.{}: {e}", server.name))
            })?,
            ..EgressLayer::default()
        };
        let egress = Egress::new(vec![layer]);
        // Refused now, it would be refused inside the client, where its reason is lost.
        self.shared
            .gatekeeper
            .admit(&egress, url)
            .await
            .map_err(|e| RuntimeError::Unavailable(format!("upstream.{}: {e}", server.name)))?;
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.shared
            .gatekeeper
            .client_for(&egress, self.shared.network.limits.connect, &headers)
            .map_err(|e| RuntimeError::invalid("headers", format!("upstream.{}: {e}", server.name)))
    }

    /// Starts `server`'s program in the sandbox at its isolation level, with its stdin and
    /// stdout open for the MCP transport. Fails closed like any tool: a level the host cannot
    /// give is an error.
    pub async fn start_upstream_process(
        &self,
        server: &crate::config::UpstreamServer,
    ) -> Result<tw_sandbox::Interactive> {
        let crate::config::UpstreamTransport::Stdio {
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
            return Err(RuntimeError::invalid(
                "transport",
                format!("upstream.{} is reached over HTTP, not started", server.name),
            ));
        };
        let cwd = match cwd {
            Some(c) => c.clone(),
            None => self
                .shared
                .workspace
                .roots()
                .first()
                .cloned()
                .ok_or(RuntimeError::NoWorkspace)?,
        };
        let mut spec = tw_sandbox::ProcessSpec::new(command.clone(), cwd.clone());
        spec.args = args.clone();
        spec.env = env.clone();
        spec.isolation = *isolation;
        // Hosts granted at strict and above: a network namespace whose only way out is the
        // egress proxy, judged by the gatekeeper against the grant, for as long as the server
        // runs.
        spec.egress = network
            .clone()
            .filter(|_| *isolation >= IsolationLevel::Strict)
            .map(|hosts| {
                Arc::new(crate::net::proxy::Proxy {
                    gate: Arc::clone(&self.shared.gatekeeper),
                    egress: Egress::new(vec![EgressLayer {
                        source: format!("config upstream {} network", server.name),
                        allow: hosts,
                        ..EgressLayer::default()
                    }]),
                    facts: Arc::default(),
                })
                .port()
            });
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
        Ok(self.shared.sandbox.spawn_interactive(spec).await?)
    }
}
