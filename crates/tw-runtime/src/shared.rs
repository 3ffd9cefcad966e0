//! What every service of the runtime shares and none of them owns alone: the store, the clock,
//! the event bus, the tool registry, the workspace and the sandbox. Built once at start-up and
//! handed to each service behind an `Arc`; it holds no rules of its own beyond writing the
//! admin log, which every administrative change goes through the same way.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tw_core::{ToolCall, ToolRegistry};
use tw_sandbox::{Sandbox, Workspace};
use tw_store::{AdminEvent, Store};

use crate::clock::Clock;
use crate::error::Result;
use crate::events::{EventBus, EventKind, ExecutionEvent};
use crate::kind::{Entry, ToolKind};

/// The runtime's common ground.
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) events: EventBus,
    pub(crate) registry: ToolRegistry<ToolKind>,
    pub(crate) workspace: Arc<Workspace>,
    pub(crate) sandbox: Sandbox,
    /// Every outbound connection a tool makes goes through it.
    pub(crate) gatekeeper: Arc<crate::net::Gatekeeper>,
    /// The browser the browser tools drive (started on first use).
    pub(crate) browsers: Arc<crate::browser::Browsers>,
    /// The config's `[network]`, read once at start-up.
    pub(crate) network: Arc<crate::config::NetworkSettings>,
    /// Where the runtime keeps its data (the database, the live feed's socket, tokens).
    pub(crate) data_dir: PathBuf,
    /// Run after the registered tools or their quarantine changed (the chain service re-checks
    /// its chains against them).
    pub(crate) on_tools_changed: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// What the calls this process ran add up to (`serve`'s /metrics).
    pub(crate) metrics: crate::metrics::Metrics,
    /// The OTLP export of spans and metrics, when `[telemetry]` names a collector.
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
    /// Background processes (`exec`'s `background`), which die with the runtime.
    pub(crate) jobs: Arc<crate::builtins::jobs::Jobs>,
}

impl Shared {
    /// Now, by the runtime's clock (µs since the epoch).
    pub(crate) fn now_us(&self) -> i64 {
        self.clock.now_us()
    }

    /// The first workspace root: where processes start unless told otherwise, and what relative
    /// paths in policy are read against.
    pub(crate) fn first_root(&self) -> PathBuf {
        self.workspace.roots().first().cloned().unwrap_or_default()
    }

    pub(crate) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The registered tool named `tool`, or `unknown tool` as an error.
    pub(crate) fn registered(&self, tool: &str) -> Result<Arc<Entry>> {
        Ok(self
            .registry
            .get(tool)
            .ok_or_else(|| tw_core::CoreError::UnknownTool(tool.to_owned()))?)
    }

    /// Tells whoever asked ([`Self::on_tools_changed`]) that the registered tools changed.
    pub(crate) fn tools_changed(&self) {
        for hook in self
            .on_tools_changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            hook();
        }
    }

    /// Records an administrative change; a failure to record is logged, not fatal to the change.
    pub(crate) async fn admin(&self, actor: &str, kind: &str, summary: String, details: Value) {
        let event = AdminEvent {
            at: self.now_us(),
            actor: actor.to_owned(),
            kind: kind.to_owned(),
            summary,
            details,
        };
        if let Err(e) = self.store.append_admin_event(event).await {
            tracing::error!(error = %e, kind, "an administrative change could not be recorded");
        }
    }

    /// Publishes a warning that concerns no call (a policy change that was refused, an
    /// automatic mode switch), if anyone listens.
    pub(crate) fn warn(&self, message: String) {
        if self.events.has_subscribers() {
            self.events.publish(ExecutionEvent {
                execution_id: crate::ids::new_execution_id(),
                trace_id: crate::ids::new_trace_id(),
                tool: String::new(),
                at: self.now_us(),
                kind: EventKind::Warning { message },
                replica: None,
            });
        }
    }

    /// Publishes an event about `call`, if anyone listens.
    pub(crate) fn emit_for(&self, call: &ToolCall, kind: EventKind) {
        if self.events.has_subscribers() {
            self.events.publish(ExecutionEvent {
                execution_id: call.execution_id.clone(),
                trace_id: call.trace_id.clone(),
                tool: call.tool.clone(),
                at: self.now_us(),
                kind,
                replica: None,
            });
        }
    }
}
