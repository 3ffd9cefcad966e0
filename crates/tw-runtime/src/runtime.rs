//! The governed pipeline. `Runtime::execute` is the one door every tool call goes through:
//!
//! 1. look up the tool,
//! 2. policy: every layer of `tw_core::policy` at once (tools, license, mode, exec, arguments,
//!    access, confirmation), with its explanation; a denial stops the call here,
//! 3. argument validation (every violation),
//! 4. rate limits, counted atomically in the store,
//! 5. confirmation: a standing grant, or a person's answer (the call waits),
//! 6. run with time limit and cancellation,
//! 7. output-schema validation,
//! 8. output cap,
//! 9. audit record,
//! 10. events.
//!
//! Validation runs before rate counting and confirmation (the issue lists it after): a person should
//! never be asked to approve a call that would be refused as invalid anyway, and the arguments they
//! are shown are then known to be well formed. Policy runs before validation so a denied tool is
//! denied whatever its arguments; its argument rules are written to be safe on any JSON. Likewise
//! the output schema is checked before the cap, on the whole output, because a truncated document
//! cannot be validated.
//!
//! Architecture invariant: exactly one audit record per call, committed before the result is
//! returned. The pipeline runs in its own task, so a caller that stops waiting (a dropped future, a
//! disconnected client) cancels the tool but cannot stop the record being written. When the record
//! cannot be written, the result is withheld and the call reported as failed.

// A stage's error is the call's final outcome, moved once per call; boxing it would only add an
// allocation to every refusal.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tw_core::policy::{self, Decision, Policy, PolicyDecision, Request, RuleRef};
use tw_core::{
    Caller, CommandTemplate, ErrorCode, ExecutionId, LicenseTier, OperationalMode, RegisteredTool,
    ToolCall, ToolDefinition, ToolError, ToolRegistry, ToolResult, ToolSpec, ToolStatus, TraceId,
    ValidatorCache, Violation,
};
use tw_sandbox::{Sandbox, Workspace};
use tw_store::{AuditRecord, AuditViolation, Store, StoreOptions};

use crate::builtins::exec::{Planned, ProcessContext, ProcessTool};
use crate::builtins::{self, BuiltinTool, ToolContext};
use crate::clock::{Clock, SystemClock};
use crate::config::{Commands, Config, ToolOverride};
use crate::confirm::{Held, Waiters};
use crate::custom;
use crate::error::{Result, RuntimeError};
use crate::events::{EventBus, EventKind, ExecutionEvent};
use crate::policy::PolicyWatcher;
use crate::sandboxed;
use crate::switches::Switches;

/// The setting that holds the operational mode, shared by every process on the data directory.
pub const MODE_SETTING: &str = "mode";

/// How often a runtime re-reads settings another process may have changed (the mode, the tools
/// switched off per tier).
pub const SETTINGS_REFRESH: Duration = Duration::from_secs(1);

/// How a registered tool runs.
#[derive(Clone)]
pub enum ToolKind {
    /// Implemented in Rust, in-process.
    Builtin(Arc<dyn BuiltinTool>),
    /// A command run as a sandboxed child process.
    Custom(CommandTemplate),
    /// Built into Toolwarden, run as a sandboxed child process.
    Process(Arc<dyn ProcessTool>),
    /// Imported from another MCP server, called through its client (`crate::upstream`).
    Upstream(Arc<crate::upstream::UpstreamTool>),
}

impl ToolKind {
    /// `builtin` or `custom`.
    pub fn label(&self) -> &'static str {
        match self {
            ToolKind::Builtin(_) | ToolKind::Process(_) => "builtin",
            ToolKind::Custom(_) => "custom",
            ToolKind::Upstream(_) => "upstream",
        }
    }

    /// Whether the tool ships with Toolwarden (and cannot be replaced by a custom tool).
    pub fn is_builtin(&self) -> bool {
        !matches!(self, ToolKind::Custom(_))
    }
}

impl std::fmt::Debug for ToolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A registered tool as the runtime holds it.
pub type Entry = RegisteredTool<ToolKind>;

/// What the runtime needs to start.
pub struct RuntimeOptions {
    /// Where the audit database lives.
    pub data_dir: std::path::PathBuf,
    /// Workspace roots (at least one).
    pub workspace: Vec<std::path::PathBuf>,
    /// Parsed configuration.
    pub config: Config,
    /// Time source for timestamps.
    pub clock: Arc<dyn Clock>,
}

impl RuntimeOptions {
    /// Options with the system clock.
    pub fn new(
        data_dir: impl Into<std::path::PathBuf>,
        workspace: Vec<std::path::PathBuf>,
        config: Config,
    ) -> Self {
        Self {
            data_dir: data_dir.into(),
            workspace,
            config,
            clock: Arc::new(SystemClock),
        }
    }
}

/// The state policy is judged against; replaced as a whole when it changes.
pub(crate) struct PolicyState {
    pub(crate) policy: Arc<Policy>,
    overrides: std::collections::BTreeMap<String, ToolOverride>,
    tier: LicenseTier,
    mode: OperationalMode,
    /// Tools switched off per tier (`crate::switches`).
    pub(crate) switches: Arc<Switches>,
}

impl PolicyState {
    fn with(&self, f: impl FnOnce(&mut PolicyState)) -> PolicyState {
        let mut next = PolicyState {
            policy: Arc::clone(&self.policy),
            overrides: self.overrides.clone(),
            tier: self.tier,
            mode: self.mode,
            switches: Arc::clone(&self.switches),
        };
        f(&mut next);
        next
    }
}

pub(crate) struct Inner {
    pub(crate) registry: ToolRegistry<ToolKind>,
    validators: ValidatorCache,
    policy: RwLock<Arc<PolicyState>>,
    store: Store,
    events: EventBus,
    workspace: Arc<Workspace>,
    pub(crate) sandbox: Sandbox,
    commands: Commands,
    clock: Arc<dyn Clock>,
    running: Mutex<HashMap<ExecutionId, InFlight>>,
    /// Where the runtime keeps its data (the live feed's socket goes below it).
    data_dir: PathBuf,
    /// The skills (SKILL.md folders): calls made under one are held to its tools. Replaced as a
    /// whole when the directory changes.
    skills: RwLock<Arc<crate::skills::Skills>>,
    /// Where they are read from.
    skills_dir: PathBuf,
    skills_watcher: Mutex<Option<crate::skills::SkillsWatcher>>,
    /// Every registered tool's capabilities (`crate::capabilities`), swapped whole on a change.
    pub(crate) capabilities: RwLock<Arc<crate::capabilities::CapabilityState>>,
    /// The administrators' per-skill overrides, swapped whole on a change.
    pub(crate) overrides: RwLock<Arc<crate::capabilities::OverrideState>>,
    /// The language model that classifies new tools, when one is configured.
    pub(crate) classifier: Option<crate::classifier::LlmClassifier>,
    pub(crate) skill_counters: crate::capabilities::SkillCounters,
    /// Why the last policy reload failed (when, errors), until one succeeds.
    policy_error: Mutex<Option<(i64, String)>>,
    /// This process's live feed, once published (`Runtime::publish_live`).
    live: Mutex<Option<crate::live::FeedServer>>,
    warnings: Vec<String>,
    pub(crate) waiters: Waiters,
    /// The config file, re-read when policy reloads.
    config_file: Option<PathBuf>,
    /// Position of each custom tool among the custom tools, by registration.
    custom_ranks: RwLock<HashMap<String, usize>>,
    watcher: Mutex<Option<PolicyWatcher>>,
    /// Orders re-reads of the tool switches against this process's own switches.
    pub(crate) switches_sync: tokio::sync::Mutex<()>,
    /// Upstream MCP servers' connections and the quarantined tools (`crate::upstream`).
    pub(crate) upstreams: Arc<crate::upstream::Upstreams>,
    /// The stored custom tools' version this registry reflects (count, last save).
    custom_version: Mutex<(i64, i64)>,
}

/// The governed tool runtime. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

/// The file name of the audit database inside the data directory.
pub const DATABASE_FILE: &str = "toolwarden.db";

/// How a call ended before producing a result: the stage that stopped it says why.
struct Outcome {
    status: ToolStatus,
    output: Option<Value>,
    error: Option<ToolError>,
    output_bytes: u64,
    truncated: bool,
    execution: Map<String, Value>,
}

impl Outcome {
    fn stop(status: ToolStatus, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            output: None,
            error: Some(ToolError::new(code, message)),
            output_bytes: 0,
            truncated: false,
            execution: Map::new(),
        }
    }
}

/// A stage either passes its value on or stops the call with its final outcome.
type Stage<T> = std::result::Result<T, Outcome>;

/// What an executor produced.
pub(crate) struct Produced {
    pub(crate) output: Value,
    pub(crate) execution: Map<String, Value>,
    /// Whether the executor already cut the output (a child's stdout is capped as it is read).
    pub(crate) truncated: bool,
}

/// An executor's failure: its status, error and whatever it learned about the execution.
pub(crate) struct ExecFailure {
    pub(crate) status: ToolStatus,
    pub(crate) error: ToolError,
    pub(crate) output: Option<Value>,
    pub(crate) execution: Map<String, Value>,
}

/// A fresh execution id (UUID v7: unique and time-ordered).
pub fn new_execution_id() -> ExecutionId {
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    ExecutionId::new(&id).unwrap_or_else(|_| unreachable!("a UUID is a valid execution id"))
}

/// A fresh trace id (32 lowercase hex digits, the W3C trace-context shape).
pub fn new_trace_id() -> TraceId {
    let id = uuid::Uuid::now_v7().simple().to_string();
    TraceId::new(&id).unwrap_or_else(|_| unreachable!("a UUID is a valid trace id"))
}

impl Runtime {
    /// Opens the audit store, loads the policy, registers the built-in tools and the persisted
    /// custom tools, and starts watching the policy files. An invalid policy refuses to start.
    pub async fn open(options: RuntimeOptions) -> Result<Self> {
        let RuntimeOptions {
            data_dir,
            workspace,
            config,
            clock,
        } = options;
        let Some(first_root) = workspace.first().cloned() else {
            return Err(RuntimeError::NoWorkspace);
        };
        let workspace_roots = workspace.clone();
        let workspace = Arc::new(Workspace::open(&workspace)?);
        let policy = crate::policy::load(&config, crate::policy::env(&first_root))?;
        let mut store_options = StoreOptions::new(data_dir.join(DATABASE_FILE));
        store_options.synchronous = config.audit_synchronous;
        let store = Store::open(store_options).await?;
        let mode = match store.get_setting(MODE_SETTING).await? {
            Some(s) => s.value.parse().unwrap_or(config.mode),
            None => config.mode,
        };
        let switches = Switches::from_rows(store.tool_switches().await?);
        let skills_dir = crate::skills::skills_dir(&config, &workspace_roots);
        let skills = crate::skills::Skills::load(&skills_dir);

        let registry = ToolRegistry::new();
        for tool in builtins::all() {
            let def = tool.definition()?;
            registry.register(def, ToolKind::Builtin(tool))?;
        }
        for tool in builtins::exec::all() {
            let def = tool.definition()?;
            registry.register(def, ToolKind::Process(tool))?;
        }
        let mut warnings = Vec::new();
        let custom_version = store.custom_tools_version().await?;
        for stored in store.custom_tools().await? {
            match stored.spec {
                Ok(spec) => {
                    if let Err(e) = register_custom(&registry, spec) {
                        warnings.push(format!("custom tool {}: {e}", stored.name));
                    }
                }
                Err(e) => warnings.push(e),
            }
        }
        for w in &warnings {
            tracing::warn!(warning = %w, "a stored custom tool was not loaded");
        }
        if let Some(e) = skills.error() {
            warnings.push(format!(
                "the skills directory cannot be read ({e}); every call under a skill is refused \
                 until it can"
            ));
        }
        let catalog = Arc::new(crate::capabilities::load_catalog(
            config.capabilities_file.as_deref(),
        )?);
        let classifier = crate::classifier::LlmClassifier::from_settings(&config.classifier)
            .map_err(RuntimeError::Capabilities)?;
        let cached: HashMap<String, tw_store::ClassificationRow> = store
            .classifications()
            .await?
            .into_iter()
            .map(|r| (r.tool.clone(), r))
            .collect();
        let mut classified = std::collections::BTreeMap::new();
        let mut unsettled = Vec::new();
        for entry in registry.list() {
            let def = &entry.definition;
            match crate::capabilities::settled(def, &catalog, cached.get(def.name.as_str())) {
                Some(c) => {
                    classified.insert(c.tool.clone(), c);
                }
                None => unsettled.push(Arc::clone(&entry)),
            }
        }
        let overrides = crate::capabilities::OverrideState::new(store.skill_overrides().await?);
        let rt = Self {
            inner: Arc::new(Inner {
                registry,
                validators: ValidatorCache::new(config.schema_cache_capacity),
                policy: RwLock::new(Arc::new(PolicyState {
                    policy: Arc::new(policy),
                    overrides: config.tools.clone(),
                    tier: config.license_tier,
                    mode,
                    switches: Arc::new(switches),
                })),
                store,
                events: EventBus::new(),
                workspace,
                sandbox: sandbox_for(&config, &data_dir),
                commands: config.commands.clone(),
                clock,
                running: Mutex::new(HashMap::new()),
                data_dir,
                live: Mutex::new(None),
                policy_error: Mutex::new(None),
                skills: RwLock::new(Arc::new(skills)),
                skills_dir: skills_dir.clone(),
                skills_watcher: Mutex::new(None),
                capabilities: RwLock::new(Arc::new(crate::capabilities::CapabilityState::new(
                    catalog,
                    classified,
                    config.classifier.min_confidence,
                ))),
                overrides: RwLock::new(Arc::new(overrides)),
                classifier,
                skill_counters: Default::default(),
                warnings,
                waiters: Waiters::default(),
                config_file: config.source.clone(),
                custom_ranks: RwLock::new(HashMap::new()),
                watcher: Mutex::new(None),
                switches_sync: tokio::sync::Mutex::new(()),
                upstreams: Arc::default(),
                custom_version: Mutex::new(custom_version),
            }),
        };
        rt.refresh_custom_ranks().await?;
        // Tools no classification stands for yet (custom tools stored before they were
        // classified, or whose definition changed): classify them now, without the model so a
        // start never waits on the network; the model is asked when a tool is next registered
        // or by `toolwarden skills classify TOOL --again`.
        for entry in unsettled {
            let state = rt.capabilities();
            let c =
                crate::capabilities::classify(&entry.definition, &state.catalog, None, rt.now_us())
                    .await;
            rt.remember_classification(c).await;
        }
        let files = crate::policy::policy_paths(&config);
        if !files.is_empty() {
            match PolicyWatcher::start(files, Arc::downgrade(&rt.inner)) {
                Ok(w) => {
                    *rt.inner
                        .watcher
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(w)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "policy files cannot be watched; changes need a restart")
                }
            }
        }
        rt.spawn_settings_refresh();
        if skills_dir.is_dir() {
            rt.watch_skills();
        }
        Ok(rt)
    }

    /// Starts watching the skills directory, unless it already is watched (it must exist).
    pub(crate) fn watch_skills(&self) {
        let mut slot = self
            .inner
            .skills_watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        match crate::skills::SkillsWatcher::start(&self.inner.skills_dir, move || {
            weak.upgrade()
                .map(|inner| Runtime::from_inner(inner).reload_skills())
                .is_some()
        }) {
            Ok(w) => *slot = Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "the skills cannot be watched; changes need a restart")
            }
        }
    }

    fn skills_watched(&self) -> bool {
        self.inner
            .skills_watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Watches the skills directory afresh (an earlier watch ends with the directory it was
    /// on, e.g. one replaced by a file and back).
    fn watch_skills_again(&self) {
        *self
            .inner
            .skills_watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        if self.inner.skills_dir.is_dir() {
            self.watch_skills();
        }
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Now, by the runtime's clock (µs since the epoch).
    pub fn now_us(&self) -> i64 {
        self.inner.clock.now_us()
    }

    /// Re-reads settings other processes may change (the mode, the tool switches) while this
    /// runtime lives.
    fn spawn_settings_refresh(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SETTINGS_REFRESH).await;
                let Some(inner) = weak.upgrade() else { break };
                let rt = Runtime::from_inner(inner);
                if !rt.inner.store.is_healthy() {
                    continue;
                }
                if let Ok(Some(setting)) = rt.inner.store.get_setting(MODE_SETTING).await
                    && let Ok(mode) = setting.value.parse::<OperationalMode>()
                    && mode != rt.mode()
                {
                    tracing::info!(%mode, by = %setting.updated_by, "operational mode changed by another process");
                    rt.swap_state(|s| s.mode = mode);
                }
                if let Err(e) = rt.refresh_switches().await {
                    tracing::warn!(error = %e, "the tool switches could not be re-read");
                }
                if let Err(e) = rt.refresh_overrides().await {
                    tracing::warn!(error = %e, "the skill overrides could not be re-read");
                }
                if let Err(e) = rt.refresh_classifications().await {
                    tracing::warn!(error = %e, "the tool classifications could not be re-read");
                }
                if let Err(e) = rt.refresh_custom_tools().await {
                    tracing::warn!(error = %e, "the custom tools could not be re-read");
                }
                if let Err(e) = rt.refresh_quarantine().await {
                    tracing::warn!(error = %e, "the upstream tools' pins could not be re-read");
                }
                // A directory that cannot be read, or that appeared after the start, is not
                // watched: look again each second, so its skills apply (and the refusals for an
                // unreadable one end) within a second of it being fixed.
                if rt.skills().error().is_some()
                    || (!rt.skills_watched() && rt.skills_dir().is_dir())
                {
                    rt.reload_skills();
                    if rt.skills().error().is_none() {
                        rt.watch_skills_again();
                    }
                }
            }
        });
    }

    pub(crate) fn swap_state(&self, f: impl FnOnce(&mut PolicyState)) {
        let mut guard = self
            .inner
            .policy
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let next = guard.with(f);
        *guard = Arc::new(next);
    }

    /// The current operational mode.
    pub fn mode(&self) -> OperationalMode {
        self.policy_state().mode
    }

    /// The installation's license tier.
    pub fn tier(&self) -> LicenseTier {
        self.policy_state().tier
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy_state().policy)
    }

    /// Switches the operational mode for every process on this data directory, and records who
    /// did it.
    pub async fn set_mode(&self, mode: OperationalMode, actor: &str) -> Result<OperationalMode> {
        let before = self.mode();
        self.inner
            .store
            .set_setting(MODE_SETTING, mode.as_str(), actor, self.now_us())
            .await?;
        self.swap_state(|s| s.mode = mode);
        self.admin(
            actor,
            "mode_changed",
            format!("operational mode {before} -> {mode}"),
            json!({"from": before.as_str(), "to": mode.as_str()}),
        )
        .await;
        Ok(before)
    }

    /// Reloads the policy from its files. On success the new policy takes effect at once and the
    /// change is recorded; on failure the running policy stays and the errors are reported.
    pub async fn reload_policy(&self, actor: &str) -> std::result::Result<Vec<String>, String> {
        let config = match &self.inner.config_file {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => Config::parse(&text, path, crate::paths::home_dir().as_deref())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot read {}: {e}", path.display())),
            },
            None => Ok(Config::default()),
        };
        let base = self
            .inner
            .workspace
            .roots()
            .first()
            .cloned()
            .unwrap_or_default();
        let loaded = config.and_then(|c| {
            crate::policy::load(&c, crate::policy::env(&base))
                .map(|p| (p, c))
                .map_err(|e| e.to_string())
        });
        match loaded {
            Ok((policy, config)) => {
                let old = self.policy();
                let diff = policy.diff(&old);
                let policy = Arc::new(policy);
                self.swap_state(|s| {
                    s.policy = policy;
                    s.overrides = config.tools.clone();
                });
                let summary = if diff.is_empty() {
                    "policy reloaded; no rule changed".to_owned()
                } else {
                    format!("policy reloaded: {}", diff.join("; "))
                };
                tracing::info!(%summary, "policy reloaded");
                *self
                    .inner
                    .policy_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                self.admin(
                    actor,
                    "policy_reloaded",
                    summary,
                    json!({ "changes": diff }),
                )
                .await;
                Ok(diff)
            }
            Err(errors) => {
                tracing::error!(%errors, "the changed policy is invalid; the previous policy stays in force");
                *self
                    .inner
                    .policy_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some((self.now_us(), errors.clone()));
                if self.inner.events.has_subscribers() {
                    self.inner.events.publish(ExecutionEvent {
                        execution_id: new_execution_id(),
                        trace_id: new_trace_id(),
                        tool: String::new(),
                        at: self.now_us(),
                        kind: EventKind::Warning {
                            message: format!(
                                "the changed policy is invalid and was not applied:\n{errors}"
                            ),
                        },
                    });
                }
                self.admin(
                    actor,
                    "policy_reload_failed",
                    "the changed policy is invalid; the previous policy stays in force".to_owned(),
                    json!({ "errors": errors }),
                )
                .await;
                Err(errors)
            }
        }
    }

    /// Brings the registry's custom tools in line with the store when another process added,
    /// replaced or removed one (so a long-running `serve` or the desktop app lists and runs a
    /// tool added with the CLI, and stops running one removed there). Cheap when nothing changed:
    /// one query.
    pub(crate) async fn refresh_custom_tools(&self) -> Result<()> {
        let version = self.inner.store.custom_tools_version().await?;
        if *self
            .inner
            .custom_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            == version
        {
            return Ok(());
        }
        let stored = self.inner.store.custom_tools().await?;
        let mut keep = std::collections::HashSet::new();
        for t in stored {
            keep.insert(t.name.clone());
            let Ok(spec) = t.spec else { continue };
            let same = match self.inner.registry.get(&t.name) {
                Some(e) => match &e.kind {
                    ToolKind::Custom(c) => {
                        e.definition == spec.definition && Some(c) == spec.command.as_ref()
                    }
                    // A built-in or imported tool keeps its name.
                    _ => true,
                },
                None => false,
            };
            if !same {
                let def = spec.definition.clone();
                match register_custom(&self.inner.registry, spec) {
                    Ok(_) => self.classify_registered(&def).await,
                    Err(e) => {
                        tracing::warn!(tool = %t.name, error = %e, "a custom tool saved elsewhere was not loaded")
                    }
                }
            }
        }
        let gone: Vec<String> = self
            .inner
            .registry
            .list()
            .into_iter()
            .filter(|e| matches!(e.kind, ToolKind::Custom(_)))
            .map(|e| e.definition.name.to_string())
            .filter(|n| !keep.contains(n))
            .collect();
        for name in gone {
            let _ = self.inner.registry.unregister(&name);
            self.forget_classification(&name).await;
        }
        self.refresh_custom_ranks().await?;
        *self
            .inner
            .custom_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = version;
        tracing::info!("custom tools changed by another process; reloaded");
        Ok(())
    }

    async fn refresh_custom_ranks(&self) -> Result<()> {
        let mut stored = self.inner.store.custom_tools().await?;
        stored.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        let ranks = stored
            .into_iter()
            .enumerate()
            .map(|(i, t)| (t.name, i))
            .collect();
        *self
            .inner
            .custom_ranks
            .write()
            .unwrap_or_else(PoisonError::into_inner) = ranks;
        Ok(())
    }

    fn custom_rank(&self, name: &str) -> Option<usize> {
        self.inner
            .custom_ranks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .copied()
    }

    /// The tool registry.
    pub fn registry(&self) -> &ToolRegistry<ToolKind> {
        &self.inner.registry
    }

    /// The audit store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// The workspace roots.
    pub fn workspace(&self) -> &Workspace {
        &self.inner.workspace
    }

    /// Problems found at start-up that did not stop it (e.g. a stored custom tool that no longer
    /// loads).
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// The sandbox's report on this host: helper, kernel features, each level's status, and the
    /// escape self-test (run now if it has not run yet).
    pub async fn sandbox_doctor(&self) -> tw_sandbox::Doctor {
        self.inner.sandbox.doctor().await
    }

    /// Starts the sandbox's escape self-test in the background, so the first strict tool call
    /// does not wait for it. Long-running hosts (the desktop app, `serve`) call this at start;
    /// otherwise the test runs before the first strict or restricted call.
    pub fn start_sandbox_self_test(&self) {
        let sandbox = self.inner.sandbox.clone();
        tokio::spawn(async move {
            if let Err(e) = sandbox.check(tw_core::IsolationLevel::Strict).await {
                tracing::error!(error = %e, "strict and restricted tools are unavailable");
            }
        });
    }

    /// Flushes and closes the audit store.
    pub async fn close(&self) {
        drop(
            self.inner
                .live
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.inner.store.close().await;
    }

    /// Builds a call with fresh ids.
    pub fn call(&self, tool: &str, arguments: Value, caller: Caller) -> ToolCall {
        ToolCall {
            tool: tool.to_owned(),
            arguments,
            caller,
            execution_id: new_execution_id(),
            trace_id: new_trace_id(),
            timeout: None,
            no_wait: false,
        }
    }

    /// Cancels a running execution. Returns whether it was running.
    pub fn cancel(&self, id: &ExecutionId) -> bool {
        let running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match running.get(id) {
            Some(flight) => {
                flight.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Ids of the executions currently running.
    pub fn running(&self) -> Vec<ExecutionId> {
        let running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        running.keys().cloned().collect()
    }

    /// The calls in flight in this process (running or waiting for confirmation), oldest first.
    pub fn running_calls(&self) -> Vec<crate::live::RunningCall> {
        let running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut calls: Vec<_> = running
            .iter()
            .map(|(id, f)| crate::live::RunningCall {
                execution_id: id.clone(),
                trace_id: f.trace_id.clone(),
                tool: f.tool.clone(),
                agent_id: f.agent_id.clone(),
                started_at: f.started_at,
            })
            .collect();
        calls.sort_by_key(|c| c.started_at);
        calls
    }

    /// Publishes this process's executions to the other processes on the data directory (see
    /// [`crate::live`]), until the runtime closes. Returns the feed's socket. Publishing again
    /// replaces the feed.
    pub fn publish_live(&self) -> std::io::Result<PathBuf> {
        let (server, path) =
            crate::live::FeedServer::start(&self.inner.data_dir, Arc::downgrade(&self.inner))?;
        *self
            .inner
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(server);
        Ok(path)
    }

    /// When the last policy reload failed and why, while the policy in force is the one before
    /// it (`None` once a reload succeeds).
    pub fn policy_error(&self) -> Option<(i64, String)> {
        self.inner
            .policy_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The skills as loaded now.
    pub fn skills(&self) -> Arc<crate::skills::Skills> {
        Arc::clone(
            &self
                .inner
                .skills
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Where the skills are read from.
    pub fn skills_dir(&self) -> &std::path::Path {
        &self.inner.skills_dir
    }

    /// Re-reads the skills directory (the watcher does this on every change, and the settings
    /// refresh every second while the directory cannot be read). What is on disk now is in force:
    /// a skill whose edit does not load is refused until it is fixed, and while the directory
    /// cannot be read every call under a skill is refused with the reason.
    pub fn reload_skills(&self) {
        let next = crate::skills::Skills::load(&self.inner.skills_dir);
        for s in &next.skills {
            for d in &s.diagnostics {
                tracing::warn!(file = %s.path.display(), "{d}");
            }
        }
        let before = self.skills();
        match (before.error(), next.error()) {
            (was, Some(e)) if was != Some(e) => {
                tracing::warn!(error = %e, "the skills directory cannot be read; every call under a skill is refused until it can");
            }
            (Some(_), None) => tracing::info!("the skills directory can be read again"),
            _ => {}
        }
        *self
            .inner
            .skills
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }

    /// The data directory the runtime was opened on.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.inner.data_dir
    }

    /// Registers (or replaces) a custom tool and persists it. Built-in names cannot be taken.
    /// `actor` (who made the change) goes to the admin log with the tool's spec.
    pub async fn add_custom_tool(&self, spec: ToolSpec, now_us: i64, actor: &str) -> Result<bool> {
        if spec.command.is_none() {
            return Err(RuntimeError::NotCustom(spec.definition.name.to_string()));
        }
        if let Some(existing) = self.inner.registry.get(spec.definition.name.as_str())
            && existing.kind.is_builtin()
        {
            return Err(RuntimeError::BuiltinName(spec.definition.name.to_string()));
        }
        let is_new = self.custom_rank(spec.definition.name.as_str()).is_none();
        let tier = self.tier();
        if let Some(limit) = policy::custom_tool_limit(tier) {
            let count = self
                .inner
                .custom_ranks
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            if is_new && count >= limit {
                return Err(RuntimeError::TierLimit { tier, limit });
            }
        }
        self.inner.store.save_custom_tool(&spec, now_us).await?;
        let name = spec.definition.name.to_string();
        let details = serde_json::to_value(&spec).unwrap_or(Value::Null);
        let def = spec.definition.clone();
        let added = register_custom(&self.inner.registry, spec)?;
        self.refresh_custom_ranks().await?;
        self.classify_registered(&def).await;
        let (kind, verb) = if added {
            ("custom_tool_added", "added")
        } else {
            ("custom_tool_updated", "updated")
        };
        self.admin(actor, kind, format!("{verb} custom tool {name}"), details)
            .await;
        Ok(added)
    }

    /// Removes a custom tool from the registry and the store.
    /// `actor` goes to the admin log.
    pub async fn remove_custom_tool(&self, name: &str, actor: &str) -> Result<()> {
        match self.inner.registry.get(name) {
            Some(e) if e.kind.is_builtin() => {
                return Err(RuntimeError::BuiltinName(name.to_owned()));
            }
            None => return Err(tw_core::CoreError::UnknownTool(name.to_owned()).into()),
            Some(_) => {}
        }
        self.inner.store.delete_custom_tool(name).await?;
        self.inner.registry.unregister(name)?;
        self.forget_classification(name).await;
        self.refresh_custom_ranks().await?;
        self.admin(
            actor,
            "custom_tool_removed",
            format!("removed custom tool {name}"),
            json!({ "tool": name }),
        )
        .await;
        Ok(())
    }

    /// Explains how policy would judge a call now, without running or counting anything. Rate
    /// limits are listed as the counters the call would be checked against.
    pub fn explain(
        &self,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        self.explain_with(None, tool, arguments, caller)
    }

    /// Like [`Runtime::explain`], under another policy (`None`: the one in force). For simulating
    /// a proposed policy against recorded calls.
    pub fn explain_with(
        &self,
        policy: Option<&Arc<Policy>>,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        let entry = self.inner.registry.get(tool)?;
        let mut state = self.policy_state();
        if let Some(p) = policy {
            state = Arc::new(state.with(|s| s.policy = Arc::clone(p)));
        }
        let run = self.plan_run(&entry, arguments);
        let hidden = redacted(arguments);
        let evaluation = self.evaluate(
            &state,
            &entry,
            hidden.as_ref().unwrap_or(arguments),
            &caller.sanitized(),
            &run,
            false,
        );
        let mut decision = evaluation.decision;
        if !evaluation.rate_checks.is_empty() {
            decision.push(policy::LayerVerdict::allow(
                policy::Layer::RateLimit,
                format!(
                    "the call would be counted against {} rate limit(s): {}",
                    evaluation.rate_checks.len(),
                    evaluation
                        .rate_checks
                        .iter()
                        .map(|c| format!("{} ({})", c.rule.rule, c.rule.source))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Some(decision)
    }

    /// What policy decides for a tool before any arguments are known: every layer that does not
    /// look at arguments (tools, license, mode, access, confirmation). For listings and exports.
    pub fn tool_decision(&self, tool: &str, caller: &Caller) -> Option<PolicyDecision> {
        let decision = self.explain(tool, &json!({}), caller)?;
        let trace = decision
            .trace
            .into_iter()
            .filter(|v| {
                !matches!(
                    v.layer,
                    policy::Layer::Exec | policy::Layer::Arguments | policy::Layer::RateLimit
                )
            })
            .collect();
        Some(PolicyDecision::from_verdicts(trace))
    }

    fn evaluate(
        &self,
        state: &PolicyState,
        entry: &Entry,
        arguments: &Value,
        caller: &Caller,
        run: &RunPlan,
        count: bool,
    ) -> policy::Evaluation {
        let argv = run.argv.as_deref();
        let def = &entry.definition;
        let name = def.name.as_str();
        let overrides = state.overrides.get(name);
        let disabled = overrides
            .filter(|o| o.enabled == Some(false))
            .map(|_| RuleRef::new(format!("[tools.{name}] enabled = false"), "configuration"));
        let switched_off = state.switches.get(name, state.tier);
        let requires_confirmation = overrides
            .and_then(|o| o.requires_confirmation)
            .unwrap_or(def.requires_confirmation);
        let custom_rank = match entry.kind {
            ToolKind::Custom(_) => Some(self.custom_rank(name).unwrap_or(usize::MAX)),
            ToolKind::Builtin(_) | ToolKind::Process(_) | ToolKind::Upstream(_) => None,
        };
        let mut evaluation = policy::evaluate(
            &state.policy,
            &Request {
                tool: def,
                arguments,
                caller,
                tier: state.tier,
                mode: state.mode,
                custom_rank,
                argv,
                requires_confirmation,
                disabled,
                switched_off,
                cwd: run.cwd.to_str(),
            },
        );
        if matches!(entry.kind, ToolKind::Upstream(_))
            && let Some(reason) = self.inner.upstreams.quarantine_reason(name)
        {
            evaluation.decision.push(policy::LayerVerdict::stop(
                policy::Layer::Tools,
                tw_core::Decision::Deny,
                crate::upstream::QUARANTINED,
                tw_core::policy::Severity::Critical,
                reason,
            ));
        }
        // A call made under a skill may use only the skill's tools. A skill that is unknown,
        // does not load, or cannot be read because the directory cannot reaches nothing.
        if let Some(skill) = &caller.skill {
            let skills = self.skills();
            let (needed, _) = state.policy.access.needed(def);
            let caps = self.capabilities();
            let ov = self.skill_overrides();
            let envelopes = tw_core::skill::Envelopes {
                skills: &skills.map,
                capabilities: &caps.index,
                overrides: &ov.overrides,
            };
            let judged = envelopes.judge(skill, def, needed, arguments, argv);
            if count {
                self.inner.skill_counters.count_check(judged.via);
            }
            evaluation.decision.push(judged.verdict);
            evaluation.rate_checks.extend(judged.rate);
        }
        evaluation
    }

    pub(crate) fn policy_state(&self) -> Arc<PolicyState> {
        Arc::clone(
            &self
                .inner
                .policy
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Runs one call through the governed pipeline and returns its result once its audit record is
    /// committed. Dropping the returned future cancels the tool; the record is still written.
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        let cancel = CancellationToken::new();
        self.execute_with_cancel(call, cancel).await
    }

    /// Like [`Runtime::execute`], with a cancellation token the caller controls.
    pub async fn execute_with_cancel(
        &self,
        call: ToolCall,
        cancel: CancellationToken,
    ) -> ToolResult {
        let ids = (
            call.execution_id.clone(),
            call.trace_id.clone(),
            call.tool.clone(),
        );
        let stop_on_drop = cancel.clone().drop_guard();
        let this = self.clone();
        let joined = tokio::spawn(async move { this.pipeline(call, cancel).await }).await;
        stop_on_drop.disarm();
        joined.unwrap_or_else(|e| {
            tracing::error!(execution_id = %ids.0, error = %e, "pipeline task failed");
            ToolResult {
                execution_id: ids.0,
                trace_id: ids.1,
                tool: ids.2,
                status: ToolStatus::Failed,
                output: None,
                error: Some(ToolError::new(
                    ErrorCode::EXECUTION_FAILED,
                    format!("internal error: {e}"),
                )),
                decision: None,
                metadata: Default::default(),
            }
        })
    }

    async fn pipeline(&self, call: ToolCall, cancel: CancellationToken) -> ToolResult {
        let started_at = self.inner.clock.now_us();
        let clock = Instant::now();
        let _running = Running::track(self, &call, started_at, &cancel);
        let span = tracing::info_span!(
            "tool_call",
            trace_id = %call.trace_id,
            execution_id = %call.execution_id,
            tool = %call.tool,
            agent = %call.caller.agent_id,
        );
        let caller = call.caller.sanitized();
        let hidden = redacted(&call.arguments);
        let mut decision = None;
        let outcome = match self
            .stages(
                &call,
                hidden.as_ref().unwrap_or(&call.arguments),
                &cancel,
                &mut decision,
            )
            .instrument(span.clone())
            .await
        {
            Ok(o) | Err(o) => o,
        };
        let duration_us = i64::try_from(clock.elapsed().as_micros()).unwrap_or(i64::MAX);
        let result = ToolResult {
            execution_id: call.execution_id,
            trace_id: call.trace_id,
            tool: call.tool,
            status: outcome.status,
            output: outcome.output,
            error: outcome.error,
            decision,
            metadata: tw_core::ResultMetadata {
                started_at,
                completed_at: started_at.saturating_add(duration_us),
                duration_us,
                output_bytes: outcome.output_bytes,
                truncated: outcome.truncated,
                execution: outcome.execution,
            },
        };
        let stored = hidden.unwrap_or(call.arguments);
        self.finish(&caller, stored, result, &span).await
    }

    /// Records a call that will not run (e.g. one a stopped batch never reached): Cancelled with
    /// code `skipped`, audited and announced like any other.
    pub(crate) async fn skip(&self, call: ToolCall, message: String) -> ToolResult {
        let now = self.inner.clock.now_us();
        let span = tracing::info_span!("tool_call", trace_id = %call.trace_id, execution_id = %call.execution_id, tool = %call.tool);
        let caller = call.caller.sanitized();
        let result = ToolResult {
            execution_id: call.execution_id,
            trace_id: call.trace_id,
            tool: call.tool,
            status: ToolStatus::Cancelled,
            output: None,
            error: Some(ToolError::new(ErrorCode::SKIPPED, message)),
            decision: None,
            metadata: tw_core::ResultMetadata {
                started_at: now,
                completed_at: now,
                ..Default::default()
            },
        };
        let stored = redacted(&call.arguments).unwrap_or(call.arguments);
        self.finish(&caller, stored, result, &span).await
    }

    /// Stages 9 and 10: the audit record (the result is withheld if it cannot be written), then the
    /// events. `arguments` are already redacted.
    async fn finish(
        &self,
        caller: &Caller,
        arguments: Value,
        mut result: ToolResult,
        span: &tracing::Span,
    ) -> ToolResult {
        if let Err(e) = self.audit(caller, arguments, &result).await {
            let _enter = span.enter();
            tracing::error!(error = %e, "audit record could not be written; result withheld");
            self.emit(
                &result,
                EventKind::Warning {
                    message: format!("audit record could not be written: {e}"),
                },
            );
            result.status = ToolStatus::Failed;
            result.output = None;
            result.metadata.output_bytes = 0;
            result.error = Some(ToolError::new(
                ErrorCode::AUDIT_UNAVAILABLE,
                format!("the audit record could not be written, so the result is withheld: {e}"),
            ));
        }
        self.announce(&result, span);
        result
    }

    /// `redacted` is the call's arguments as the audit log will hold them: policy, grants and
    /// confirmations judge those, so a grant made from a logged call matches the call it was
    /// made from.
    async fn stages(
        &self,
        call: &ToolCall,
        redacted: &Value,
        cancel: &CancellationToken,
        decision_out: &mut Option<PolicyDecision>,
    ) -> Stage<Outcome> {
        let entry = self.stage_lookup(&call.tool)?;
        let def = &entry.definition;
        let caller = call.caller.sanitized();
        // Worked out once: policy judges the process this plan describes, and it is what runs.
        let run = self.plan_run(&entry, &call.arguments);
        let state = self.policy_state();
        let evaluation = self.evaluate(&state, &entry, redacted, &caller, &run, true);
        let decision = decision_out.insert(evaluation.decision);
        stage_policy(decision)?;
        self.stage_validate_arguments(def, &call.arguments)?;
        if !self.inner.store.is_healthy() {
            return Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::AUDIT_UNAVAILABLE,
                "the audit store is unavailable, so no tool may run",
            ));
        }
        self.stage_rate_limits(&call.tool, &evaluation.rate_checks, decision)
            .await?;
        self.stage_confirmation(call, redacted, decision, cancel)
            .await?;
        if cancel.is_cancelled() {
            return Err(Outcome::stop(
                ToolStatus::Cancelled,
                ErrorCode::CANCELLED,
                "the call was cancelled before it started",
            ));
        }
        let produced = self.stage_execute(&entry, call, run, cancel).await?;
        self.stage_validate_output(def, &produced)?;
        Ok(stage_cap(def, produced))
    }

    /// Stage 4: counts the call against its rate limits, atomically, in the store.
    async fn stage_rate_limits(
        &self,
        tool: &str,
        checks: &[policy::rate::RateCheck],
        decision: &mut PolicyDecision,
    ) -> Stage<()> {
        if checks.is_empty() {
            return Ok(());
        }
        let outcome = self
            .inner
            .store
            .rate_acquire(checks, self.now_us())
            .await
            .map_err(|e| {
                Outcome::stop(
                    ToolStatus::Failed,
                    ErrorCode::AUDIT_UNAVAILABLE,
                    format!("rate limits could not be counted, so the call is refused: {e}"),
                )
            })?;
        decision.push(policy::rate::judge(tool, checks, &outcome));
        stage_policy(decision)
    }

    /// Stage 5: an Ask is answered by a standing grant or by a person; the call waits.
    async fn stage_confirmation(
        &self,
        call: &ToolCall,
        arguments: &Value,
        decision: &mut PolicyDecision,
        cancel: &CancellationToken,
    ) -> Stage<()> {
        if decision.decision != Decision::Ask {
            return Ok(());
        }
        let unavailable = |e: RuntimeError| {
            Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::AUDIT_UNAVAILABLE,
                format!("the confirmation could not be handled, so the call is refused: {e}"),
            )
        };
        if self
            .apply_grants(call, arguments, decision)
            .await
            .map_err(unavailable)?
        {
            return Ok(());
        }
        let reason = decision.deciding().map_or_else(
            || "policy asks for approval".to_owned(),
            |v| v.reason.clone(),
        );
        if call.no_wait {
            return Err(Outcome::stop(
                ToolStatus::RequiresConfirmation,
                ErrorCode::CONFIRMATION_REQUIRED,
                reason,
            ));
        }
        match self
            .hold(call, arguments, decision, cancel)
            .await
            .map_err(unavailable)?
        {
            Held::Approved(verdict) => {
                decision.settle_ask(verdict);
                Ok(())
            }
            Held::Refused { verdict, cancelled } => {
                let message = verdict.reason.clone();
                let code = verdict.code.clone().unwrap_or_default();
                decision.settle_ask(verdict);
                Err(if cancelled {
                    Outcome::stop(ToolStatus::Cancelled, ErrorCode::CANCELLED, message)
                } else {
                    Outcome::stop(ToolStatus::PermissionDenied, &code, message)
                })
            }
        }
    }

    fn stage_lookup(&self, name: &str) -> Stage<Arc<Entry>> {
        self.inner.registry.get(name).ok_or_else(|| {
            let shown: String = name.chars().take(80).collect();
            Outcome::stop(
                ToolStatus::NotFound,
                ErrorCode::TOOL_NOT_FOUND,
                format!("no tool named {shown:?} is registered"),
            )
        })
    }

    fn stage_validate_arguments(&self, def: &ToolDefinition, arguments: &Value) -> Stage<()> {
        match self.inner.validators.validate(&def.parameters, arguments) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(violations)) => Err(invalid(
                ToolStatus::ValidationError,
                ErrorCode::INVALID_ARGUMENTS,
                "arguments",
                violations,
            )),
            Err(e) => Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::SCHEMA_ERROR,
                format!("tool {}'s parameter schema cannot be used: {e}", def.name),
            )),
        }
    }

    async fn stage_execute(
        &self,
        entry: &Entry,
        call: &ToolCall,
        run: RunPlan,
        cancel: &CancellationToken,
    ) -> Stage<Produced> {
        let def = &entry.definition;
        let limit = call
            .timeout
            .map_or(def.constraints.max_execution_time(), |t| {
                t.min(def.constraints.max_execution_time())
            });
        self.emit_for(call, EventKind::Started);
        tracing::info!(name: "tool_call_started", trace_id = %call.trace_id, tool = %call.tool, "tool call started");
        let run = match &entry.kind {
            ToolKind::Builtin(tool) => {
                self.run_builtin(tool.as_ref(), def, call, limit, cancel)
                    .await
            }
            ToolKind::Custom(template) => {
                let policy = Arc::clone(&self.policy_state().policy);
                custom::run(
                    self.launch(call, def),
                    &policy,
                    &self.inner.workspace,
                    template,
                    run.cwd,
                    limit,
                    cancel,
                )
                .await
            }
            ToolKind::Process(_) => match run.planned {
                Some(planned) => {
                    self.run_process(planned, run.cwd, call, def, limit, cancel)
                        .await
                }
                None => Err(sandboxed::failure(
                    ToolStatus::Failed,
                    ErrorCode::EXECUTION_FAILED,
                    "the process tool planned no process".to_owned(),
                    Map::new(),
                )),
            },
            ToolKind::Upstream(tool) => {
                self.run_builtin(tool.as_ref(), def, call, limit, cancel)
                    .await
            }
        };
        run.map_err(|f| Outcome {
            status: f.status,
            output: f.output,
            error: Some(f.error),
            output_bytes: 0,
            truncated: false,
            execution: f.execution,
        })
    }

    fn launch<'a>(&'a self, call: &'a ToolCall, def: &'a ToolDefinition) -> sandboxed::Launch<'a> {
        sandboxed::Launch {
            sandbox: &self.inner.sandbox,
            events: &self.inner.events,
            clock: Arc::clone(&self.inner.clock),
            call,
            definition: def,
            raised_by: None,
        }
    }

    /// Plans what a call will run (see [`RunPlan`]).
    fn plan_run(&self, entry: &Entry, arguments: &Value) -> RunPlan {
        let root = self
            .inner
            .workspace
            .roots()
            .first()
            .cloned()
            .unwrap_or_default();
        match &entry.kind {
            ToolKind::Custom(template) => RunPlan {
                argv: template
                    .render(arguments, &entry.definition.parameters)
                    .ok(),
                cwd: root,
                planned: None,
            },
            ToolKind::Process(tool) => {
                let planned = tool.plan(&self.process_context(), arguments);
                let (argv, cwd) = match &planned {
                    Ok(p) => (tool.policy_argv(p), p.cwd.clone().unwrap_or(root)),
                    Err(_) => (None, root),
                };
                RunPlan {
                    argv,
                    cwd,
                    planned: Some((Arc::clone(tool), planned)),
                }
            }
            ToolKind::Builtin(_) | ToolKind::Upstream(_) => RunPlan {
                argv: None,
                cwd: root,
                planned: None,
            },
        }
    }

    fn process_context(&self) -> ProcessContext<'_> {
        ProcessContext {
            workspace: &self.inner.workspace,
            commands: &self.inner.commands,
        }
    }

    async fn run_process(
        &self,
        planned: (
            Arc<dyn ProcessTool>,
            std::result::Result<Planned, builtins::ToolFailure>,
        ),
        cwd: PathBuf,
        call: &ToolCall,
        def: &ToolDefinition,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> std::result::Result<Produced, ExecFailure> {
        let to_failure =
            |f: builtins::ToolFailure| sandboxed::failure(f.status, &f.code, f.message, Map::new());
        let (tool, planned) = planned;
        let planned = planned.map_err(to_failure)?;
        let mut argv = planned.argv.into_iter();
        let program = argv.next().unwrap_or_default();
        let policy = Arc::clone(&self.policy_state().policy);
        let (mut spec, raised_by) =
            sandboxed::base_spec(&policy, def, &self.inner.workspace, limit, program, cwd).await?;
        spec.args = argv.collect();
        spec.env = planned.env;
        spec.stdin = planned.stdin;
        if let Some(t) = planned.timeout {
            spec.timeout = spec.timeout.min(t);
        }
        let launch = sandboxed::Launch {
            raised_by: raised_by.clone(),
            ..self.launch(call, def)
        };
        let out = sandboxed::run(launch, spec, cancel).await?;
        let execution = sandboxed::facts(&out, raised_by.as_deref());
        match tool.finish(&out) {
            Ok(output) => Ok(Produced {
                output,
                execution,
                truncated: out.stdout_truncated || out.stderr_truncated,
            }),
            Err(f) => Err(sandboxed::failure(f.status, &f.code, f.message, execution)),
        }
    }

    async fn run_builtin(
        &self,
        tool: &dyn BuiltinTool,
        def: &ToolDefinition,
        call: &ToolCall,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> std::result::Result<Produced, ExecFailure> {
        let ctx = ToolContext {
            workspace: Arc::clone(&self.inner.workspace),
            cancel: cancel.child_token(),
            max_output_bytes: def.constraints.max_output_bytes,
        };
        let fail = |status, code: &str, message: String| ExecFailure {
            status,
            error: ToolError::new(code, message),
            output: None,
            execution: Map::new(),
        };
        let ran = tokio::select! {
            biased;
            r = tool.call(&ctx, &call.arguments) => r,
            () = tokio::time::sleep(limit) => {
                ctx.cancel.cancel();
                return Err(fail(ToolStatus::Timeout, ErrorCode::TIMEOUT, format!("tool {} did not finish within {} ms", def.name, limit.as_millis())));
            }
            () = cancel.cancelled() => {
                return Err(fail(ToolStatus::Cancelled, ErrorCode::CANCELLED, "the call was cancelled".to_owned()));
            }
        };
        ran.map(|output| Produced {
            output,
            execution: Map::new(),
            truncated: false,
        })
        .map_err(|f| fail(f.status, &f.code, f.message))
    }

    fn stage_validate_output(&self, def: &ToolDefinition, produced: &Produced) -> Stage<()> {
        let Some(schema) = &def.output_schema else {
            return Ok(());
        };
        match self.inner.validators.validate(schema, &produced.output) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(violations)) => {
                let mut o = invalid(
                    ToolStatus::Failed,
                    ErrorCode::INVALID_OUTPUT,
                    "output",
                    violations,
                );
                o.execution = produced.execution.clone();
                Err(o)
            }
            Err(e) => Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::SCHEMA_ERROR,
                format!("tool {}'s output schema cannot be used: {e}", def.name),
            )),
        }
    }

    async fn audit(
        &self,
        caller: &Caller,
        arguments: Value,
        result: &ToolResult,
    ) -> tw_store::Result<i64> {
        let violation = violation(result);
        let record = AuditRecord {
            execution_id: result.execution_id.to_string(),
            trace_id: result.trace_id.to_string(),
            tool: result.tool.clone(),
            agent_id: caller.agent_id.clone(),
            skill: caller.skill.clone(),
            user_id: caller.user.clone(),
            arguments,
            decision: result.decision.as_ref().map(|d| d.decision.to_string()),
            explanation: result
                .decision
                .as_ref()
                .map(|d| serde_json::to_value(&d.trace).unwrap_or(Value::Null)),
            status: result.status,
            error_code: result.error.as_ref().map(|e| e.code.clone()),
            error_message: result.error.as_ref().map(|e| e.message.clone()),
            // JSON outputs get the same key-based redaction: a tool that echoes or returns
            // credentials must not copy them into a log that gets exported and shared.
            output: result.output.as_ref().map(|o| {
                if tw_core::redact::needs_redaction(o) {
                    tw_core::redact::redact(o)
                } else {
                    o.clone()
                }
            }),
            output_bytes: result.metadata.output_bytes,
            truncated: result.metadata.truncated,
            started_at: result.metadata.started_at,
            completed_at: result.metadata.completed_at,
            duration_us: result.metadata.duration_us,
            metadata: audit_metadata(result),
            violation,
        };
        self.inner.store.append(record).await
    }

    /// Publishes the final event and the matching tracing event.
    fn announce(&self, result: &ToolResult, span: &tracing::Span) {
        let _enter = span.enter();
        let message = result.error.as_ref().map_or("", |e| e.message.as_str());
        match result.status {
            ToolStatus::Success => {
                tracing::info!(name: "tool_call_completed", trace_id = %result.trace_id, status = %result.status, duration_us = result.metadata.duration_us, "tool call completed");
            }
            // A tool that broke or ran out of time is worth a warning; a refusal is governance
            // doing its job (the caller gets the reason, and the audit log has it).
            ToolStatus::Failed | ToolStatus::Timeout | ToolStatus::SandboxError => {
                tracing::warn!(name: "tool_call_failed", trace_id = %result.trace_id, status = %result.status, error = message, duration_us = result.metadata.duration_us, "tool call did not succeed");
            }
            _ => {
                tracing::info!(name: "tool_call_failed", trace_id = %result.trace_id, status = %result.status, error = message, duration_us = result.metadata.duration_us, "tool call did not succeed");
            }
        }
        if !self.inner.events.has_subscribers() {
            return;
        }
        let kind = match result.status {
            ToolStatus::Success => EventKind::Completed {
                status: result.status,
                duration_us: result.metadata.duration_us,
            },
            ToolStatus::Timeout => EventKind::Timeout {
                duration_us: result.metadata.duration_us,
            },
            ToolStatus::Failed | ToolStatus::Cancelled | ToolStatus::SandboxError => {
                EventKind::Failed {
                    status: result.status,
                    code: result
                        .error
                        .as_ref()
                        .map(|e| e.code.clone())
                        .unwrap_or_default(),
                    message: message.to_owned(),
                }
            }
            ToolStatus::RequiresConfirmation
            | ToolStatus::PermissionDenied
            | ToolStatus::ValidationError
            | ToolStatus::NotFound => EventKind::Denied {
                status: result.status,
                reason: message.to_owned(),
            },
        };
        self.emit(result, kind);
    }

    fn emit(&self, result: &ToolResult, kind: EventKind) {
        if self.inner.events.has_subscribers() {
            self.inner.events.publish(ExecutionEvent {
                execution_id: result.execution_id.clone(),
                trace_id: result.trace_id.clone(),
                tool: result.tool.clone(),
                at: self.inner.clock.now_us(),
                kind,
            });
        }
    }

    pub(crate) fn emit_for(&self, call: &ToolCall, kind: EventKind) {
        if self.inner.events.has_subscribers() {
            self.inner.events.publish(ExecutionEvent {
                execution_id: call.execution_id.clone(),
                trace_id: call.trace_id.clone(),
                tool: call.tool.clone(),
                at: self.inner.clock.now_us(),
                kind,
            });
        }
    }
}

fn register_custom(registry: &ToolRegistry<ToolKind>, spec: ToolSpec) -> Result<bool> {
    let Some(command) = spec.command else {
        return Err(RuntimeError::NotCustom(spec.definition.name.to_string()));
    };
    let kind = ToolKind::Custom(command);
    if registry.get(spec.definition.name.as_str()).is_some() {
        registry.update(spec.definition, kind)?;
        Ok(false)
    } else {
        registry.register(spec.definition, kind)?;
        Ok(true)
    }
}

fn audit_metadata(result: &ToolResult) -> Value {
    if result.metadata.execution.is_empty() {
        json!({})
    } else {
        Value::Object(result.metadata.execution.clone())
    }
}

fn invalid(status: ToolStatus, code: &str, what: &str, violations: Vec<Violation>) -> Outcome {
    let n = violations.len();
    let message = format!(
        "{what} do not match the schema ({n} violation{}): {}",
        if n == 1 { "" } else { "s" },
        tw_core::schema::join_violations(&violations)
    );
    let mut o = Outcome::stop(status, code, message);
    if let Some(e) = o.error.as_mut() {
        e.violations = violations;
    }
    o
}

/// Stage 2 (and after each later verdict): a denial stops the call with the deciding layer's
/// code and reason.
fn stage_policy(decision: &PolicyDecision) -> Stage<()> {
    if decision.decision != Decision::Deny {
        return Ok(());
    }
    let deciding = decision.deciding();
    Err(Outcome::stop(
        ToolStatus::PermissionDenied,
        deciding
            .and_then(|v| v.code.as_deref())
            .unwrap_or(ErrorCode::POLICY_DENIED),
        deciding.map_or_else(|| "policy denies the call".to_owned(), |v| v.reason.clone()),
    ))
}

/// Arguments as they may be stored and judged, secrets redacted: `None` when there is nothing to
/// redact, so the common call copies nothing.
fn redacted(arguments: &Value) -> Option<Value> {
    tw_core::redact::needs_redaction(arguments).then(|| tw_core::redact::redact(arguments))
}

/// What a call will run, worked out once from its arguments: the exec layer judges this argv in
/// this directory, and the process is started from the same plan, so a relative program is judged
/// where it will run.
pub(crate) struct RunPlan {
    /// The command policy judges (a custom tool's rendered argv, a process tool's planned one);
    /// `None` lets the exec layer read the call's own `command` or `argv`.
    argv: Option<Vec<String>>,
    /// The directory the process starts in: exec's `cwd`, run_tests' `path`, else the first
    /// workspace root.
    cwd: PathBuf,
    /// A process tool's plan (or why it cannot run), kept for running.
    planned: Option<(
        Arc<dyn ProcessTool>,
        std::result::Result<Planned, builtins::ToolFailure>,
    )>,
}

/// The sandbox the configuration describes; its self-test scratch files go in the data
/// directory, which (unlike /tmp) a sandboxed tool cannot see.
fn sandbox_for(config: &Config, data_dir: &std::path::Path) -> Sandbox {
    let defaults = tw_sandbox::SandboxConfig::default();
    Sandbox::with_config(tw_sandbox::SandboxConfig {
        helper: config.sandbox.helper.clone(),
        sandbox_ids: config.sandbox.ids.unwrap_or(defaults.sandbox_ids),
        extra_read_only: config.sandbox.read_only.clone(),
        scratch_dir: data_dir.to_path_buf(),
    })
}

/// The violation a refused call records: the policy's, or one the tool itself reported (a path
/// outside the workspace is an attempt at the boundary).
fn violation(result: &ToolResult) -> Option<AuditViolation> {
    if let Some((kind, severity)) = result.decision.as_ref().and_then(PolicyDecision::violation) {
        return Some(AuditViolation { kind, severity });
    }
    let code = &result.error.as_ref()?.code;
    match result.status {
        ToolStatus::PermissionDenied => Some(AuditViolation {
            kind: code.clone(),
            severity: if code == "path_outside_workspace" {
                policy::Severity::Critical
            } else {
                policy::Severity::Error
            },
        }),
        _ => None,
    }
}

/// Stage 8: the output cap.
fn stage_cap(def: &ToolDefinition, produced: Produced) -> Outcome {
    let max = usize::try_from(def.constraints.max_output_bytes).unwrap_or(usize::MAX);
    let (output, bytes, truncated) = tw_core::output::cap_output(produced.output, max);
    Outcome {
        status: ToolStatus::Success,
        output: Some(output),
        error: None,
        output_bytes: bytes as u64,
        truncated: truncated || produced.truncated,
        execution: produced.execution,
    }
}

/// A call in flight: how to cancel it, and what the live feed says about it.
struct InFlight {
    token: CancellationToken,
    trace_id: TraceId,
    tool: String,
    agent_id: String,
    started_at: i64,
}

/// Keeps an execution cancellable by id while it runs.
struct Running<'a> {
    rt: &'a Runtime,
    id: ExecutionId,
}

impl<'a> Running<'a> {
    fn track(rt: &'a Runtime, call: &ToolCall, started_at: i64, token: &CancellationToken) -> Self {
        let flight = InFlight {
            token: token.clone(),
            trace_id: call.trace_id.clone(),
            tool: call.tool.clone(),
            agent_id: call.caller.agent_id.clone(),
            started_at,
        };
        rt.inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call.execution_id.clone(), flight);
        Self {
            rt,
            id: call.execution_id.clone(),
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.rt
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

#[cfg(test)]
mod capability_tests;
#[cfg(test)]
mod exec_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod switch_tests;
#[cfg(test)]
mod tests;
