//! The facade: [`Runtime`] opens every service on a data directory and a workspace, wires them
//! together, and hands each front end (the CLI, MCP, the admin API, the desktop app) the service
//! it asks for. It holds no rule of its own: calls go to the [`Pipeline`], custom tools and
//! switches to the [`ToolService`], the mode and policy to the [`SettingsService`], confirmations
//! and grants to the [`ConfirmationService`], skills and capabilities to the [`SkillService`],
//! imported tools to the [`UpstreamService`], the HTTP endpoint's tokens to the [`TokenService`].
//!
//! Architecture invariant: no other module of the crate imports this one. Services are built
//! here and given what they need (`Shared`, and the services they consult); background work
//! (the change feed, the file watcher's subscriptions, the live feed) holds services weakly,
//! so dropping the last `Runtime` ends it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tw_core::policy::{Policy, PolicyDecision};
use tw_core::{Caller, ExecutionId, ToolCall, ToolRegistry, ToolResult};
use tw_sandbox::{Sandbox, Workspace};
use tw_store::{Store, StoreOptions};

use crate::builtins;
use crate::chains::ChainService;
use crate::changes::Followers;
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::confirm::ConfirmationService;
use crate::error::{Result, RuntimeError};
use crate::events::EventBus;
use crate::kind::ToolKind;
use crate::pipeline::{BatchMode, Flight, Pipeline, RunningCall, Services};
use crate::settings::SettingsService;
use crate::shared::Shared;
use crate::skills::SkillService;
use crate::tokens::TokenService;
use crate::tools::ToolService;
use crate::upstream::UpstreamService;
use crate::watch::{FileWatcher, Subscription};

/// The file name of the audit database inside the data directory.
pub const DATABASE_FILE: &str = "toolwarden.db";

/// What the runtime needs to start.
pub struct RuntimeOptions {
    /// Where the audit database lives.
    pub data_dir: PathBuf,
    /// Workspace roots (at least one).
    pub workspace: Vec<PathBuf>,
    /// Parsed configuration.
    pub config: Config,
    /// Time source for timestamps.
    pub clock: Arc<dyn Clock>,
    /// How network tools resolve names (the system's resolver unless a test maps its own).
    pub resolver: Arc<dyn crate::net::Resolver>,
}

impl RuntimeOptions {
    /// Options with the system clock.
    pub fn new(data_dir: impl Into<PathBuf>, workspace: Vec<PathBuf>, config: Config) -> Self {
        Self {
            data_dir: data_dir.into(),
            workspace,
            config,
            clock: Arc::new(SystemClock),
            resolver: Arc::new(crate::net::SystemResolver),
        }
    }
}

/// The governed tool runtime. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    settings: Arc<SettingsService>,
    tools: Arc<ToolService>,
    skills: Arc<SkillService>,
    confirmations: Arc<ConfirmationService>,
    upstreams: Arc<UpstreamService>,
    chains: Arc<ChainService>,
    tokens: TokenService,
    pipeline: Arc<Pipeline>,
    warnings: Vec<String>,
    /// The policy files' subscriptions to the file watcher (one per directory).
    _policy_watch: Vec<Subscription>,
    changes: tokio::task::JoinHandle<()>,
    /// The resource watcher, unless `[watchdog] enabled = false`.
    watchdog: Option<tokio::task::JoinHandle<()>>,
    /// This process's live feed, once published.
    live: Mutex<Option<crate::live::FeedServer>>,
    /// On a team store: the relay that shows this replica's calls to the others' watchers, and
    /// theirs to this one's.
    team: Option<crate::team::Relay>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.changes.abort();
        if let Some(w) = &self.watchdog {
            w.abort();
        }
    }
}

impl Runtime {
    /// Opens the audit store, loads the policy, registers the built-in tools and the persisted
    /// custom tools, and starts following the policy files, the skills directory and other
    /// processes' changes. An invalid policy refuses to start.
    pub async fn open(options: RuntimeOptions) -> Result<Self> {
        let RuntimeOptions {
            data_dir,
            workspace,
            config,
            clock,
            resolver,
        } = options;
        if workspace.is_empty() {
            return Err(RuntimeError::NoWorkspace);
        }
        let skills_dir = crate::skills::skills_dir(&config, &workspace);
        let chains_dir = crate::chains::chains_dir(&config, &workspace);
        let workspace = Arc::new(Workspace::open(&workspace)?);
        let policy = crate::policy::load(&config, crate::policy::env(&workspace))?;
        let mut builtin_settings = builtins::Settings {
            profiles: Arc::new(config.content_profiles(|p| std::fs::read_to_string(p))?),
            system: config.system.clone(),
            log_roots: Arc::new(config.log_roots()?),
            messaging: Arc::new(config.messaging.clone()),
            memory: config.memory,
            databases: Arc::new(config.databases.clone()),
            jobs: None,
            store: None,
        };
        let mut store_options = StoreOptions::new(data_dir.join(DATABASE_FILE));
        store_options.synchronous = config.audit_synchronous;
        store_options.keep_days = config.audit_keep_days;
        store_options.url = store_url(&config)?;
        #[cfg(test)]
        if store_options.url.is_none() {
            store_options.url = crate::test_store::url_for(&data_dir).await;
        }
        let store = Store::open(store_options).await?;
        // Read before any service reads its state, so a change made in between is followed.
        let seen = store.change_counters().await?;
        let gatekeeper = Arc::new(gatekeeper(&config, resolver, &store, &clock));
        let sandbox = sandbox_for(&config, &data_dir);
        let jobs = Arc::new(crate::builtins::jobs::Jobs::default());
        builtin_settings.jobs = Some(Arc::clone(&jobs));
        builtin_settings.store = Some(builtins::StoreAccess {
            store: store.clone(),
            clock: Arc::clone(&clock),
        });
        let (telemetry, instruments) = match crate::telemetry::Telemetry::start(&config.telemetry)?
        {
            Some((t, i)) => (Some(t), Some(i)),
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            store,
            clock,
            events: EventBus::new(),
            registry: builtin_registry(&builtin_settings)?,
            workspace,
            browsers: Arc::new(crate::browser::Browsers::new(
                crate::browser::DEFAULT_EXECUTABLE.into(),
                data_dir.join("browser"),
                Arc::clone(&gatekeeper),
                sandbox.clone(),
            )),
            sandbox,
            gatekeeper,
            network: Arc::new(config.network.clone()),
            data_dir,
            on_tools_changed: Mutex::default(),
            metrics: crate::metrics::Metrics::default(),
            telemetry,
            jobs,
        });
        if let Some(i) = instruments {
            shared.metrics.export_to(i);
        }
        let watcher = FileWatcher::default();
        let settings = Arc::new(SettingsService::open(Arc::clone(&shared), &config, policy).await?);
        let skills =
            SkillService::open(Arc::clone(&shared), &config, skills_dir, watcher.clone()).await?;
        let mut warnings = Vec::new();
        let tools = Arc::new(
            ToolService::open(
                Arc::clone(&shared),
                Arc::clone(&settings),
                Arc::clone(&skills),
                &mut warnings,
            )
            .await?,
        );
        warnings.extend(skills.warning());
        skills.classify_at_start().await?;
        let confirmations = Arc::new(ConfirmationService::new(Arc::clone(&shared)));
        let upstreams = Arc::new(UpstreamService::new(
            Arc::clone(&shared),
            Arc::clone(&skills),
        ));
        let chains = ChainService::open(
            Arc::clone(&shared),
            &config,
            chains_dir,
            Arc::clone(&settings),
            Arc::clone(&skills),
            Arc::clone(&upstreams),
            watcher.clone(),
        )?;
        // The skills' `chains:` change with their SKILL.md files; what a chain may call changes
        // with the registered tools and their quarantine.
        let reload_chains = || {
            let chains = Arc::downgrade(&chains);
            Box::new(move || {
                if let Some(c) = chains.upgrade() {
                    c.reload();
                }
            })
        };
        skills.on_reload(reload_chains());
        shared
            .on_tools_changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(reload_chains());
        let pipeline = Arc::new_cyclic(|me| {
            Pipeline::new(
                Arc::clone(&shared),
                Services {
                    settings: Arc::clone(&settings),
                    tools: Arc::clone(&tools),
                    skills: Arc::clone(&skills),
                    confirmations: Arc::clone(&confirmations),
                    upstreams: Arc::clone(&upstreams),
                },
                config.schema_cache_capacity,
                config.commands.clone(),
                me.clone(),
                run_step,
            )
        });
        let policy_watch = watch_policy(&watcher, &config, &settings);
        skills.watch();
        chains.watch();
        warnings.extend(chains.warning());
        // Runs a crashed process left `running` are marked once some runtime opens the store.
        if let Err(e) = chains.recover_interrupted().await {
            tracing::warn!(error = %e, "could not check for interrupted chain runs");
        }
        let team = match shared.store.team_channel() {
            Some(channel) => Some(
                crate::team::Relay::start(
                    channel,
                    shared.events.clone(),
                    Arc::downgrade(&pipeline),
                )
                .await,
            ),
            None => None,
        };
        let changes = crate::changes::follow(
            Followers {
                shared: Arc::downgrade(&shared),
                settings: Arc::downgrade(&settings),
                tools: Arc::downgrade(&tools),
                skills: Arc::downgrade(&skills),
                upstreams: Arc::downgrade(&upstreams),
                confirmations: Arc::downgrade(&confirmations),
            },
            seen,
        );
        if let Some(t) = &shared.telemetry {
            let (s, p) = (Arc::downgrade(&settings), Arc::downgrade(&pipeline));
            t.watch_state(Box::new(move || {
                Some((s.upgrade()?.mode(), p.upgrade()?.running_calls().len()))
            }));
        }
        let watchdog = crate::watchdog::start(
            config.watchdog,
            Arc::downgrade(&shared),
            Arc::downgrade(&settings),
        );
        Ok(Self {
            inner: Arc::new(Inner {
                tokens: TokenService::new(Arc::clone(&shared)),
                shared,
                settings,
                tools,
                skills,
                confirmations,
                upstreams,
                chains,
                pipeline,
                warnings,
                _policy_watch: policy_watch,
                changes,
                watchdog,
                live: Mutex::new(None),
                team,
            }),
        })
    }

    /// Opens the runtime on the places a front end resolved.
    pub async fn open_at(places: &crate::paths::Places) -> Result<Self> {
        Self::open(RuntimeOptions::new(
            &places.data_dir,
            places.workspace.clone(),
            places.config.clone(),
        ))
        .await
    }

    /// Whether the runtime keeps its state in a team store (PostgreSQL), shared with other
    /// replicas, rather than its data directory's SQLite file.
    pub fn is_team_store(&self) -> bool {
        self.inner.shared.store.is_team_store()
    }

    /// Calls: running them, explaining them, the ones in flight.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.inner.pipeline
    }

    /// Custom tools and per-tier switches.
    pub fn tools(&self) -> &ToolService {
        &self.inner.tools
    }

    /// The policy, the tier, the mode.
    pub fn settings(&self) -> &SettingsService {
        &self.inner.settings
    }

    /// Pending confirmations and grants.
    pub fn confirmations(&self) -> &ConfirmationService {
        &self.inner.confirmations
    }

    /// Skills, tools' capabilities and the overrides.
    pub fn skills(&self) -> &SkillService {
        &self.inner.skills
    }

    /// Upstream MCP servers and their imported tools.
    pub fn upstreams(&self) -> &UpstreamService {
        &self.inner.upstreams
    }

    /// Tool chains and their runs.
    pub fn chains(&self) -> &ChainService {
        &self.inner.chains
    }

    /// The HTTP endpoint's tokens.
    pub fn tokens(&self) -> &TokenService {
        &self.inner.tokens
    }

    /// The tool registry.
    pub fn registry(&self) -> &ToolRegistry<ToolKind> {
        &self.inner.shared.registry
    }

    /// The audit store.
    pub fn store(&self) -> &Store {
        &self.inner.shared.store
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        &self.inner.shared.events
    }

    /// The workspace roots.
    pub fn workspace(&self) -> &Workspace {
        &self.inner.shared.workspace
    }

    /// The data directory the runtime was opened on.
    pub fn data_dir(&self) -> &Path {
        self.inner.shared.data_dir()
    }

    /// Now, by the runtime's clock (µs since the epoch).
    pub fn now_us(&self) -> i64 {
        self.inner.shared.now_us()
    }

    /// Problems found at start-up that did not stop it (e.g. a stored custom tool that no longer
    /// loads, a skills directory that cannot be read).
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// Builds a call with fresh ids.
    pub fn call(&self, tool: &str, arguments: Value, caller: Caller) -> ToolCall {
        self.inner.pipeline.call(tool, arguments, caller)
    }

    /// Runs one call through the governed pipeline (see [`Pipeline::execute`]).
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        self.inner.pipeline.execute(call).await
    }

    /// Like [`Runtime::execute`], with a cancellation token the caller controls.
    pub async fn execute_with_cancel(
        &self,
        call: ToolCall,
        cancel: CancellationToken,
    ) -> ToolResult {
        self.inner.pipeline.execute_with_cancel(call, cancel).await
    }

    /// Runs a batch and returns the results in input order (see [`Pipeline::execute_batch`]).
    pub async fn execute_batch(&self, calls: Vec<ToolCall>, mode: BatchMode) -> Vec<ToolResult> {
        self.inner.pipeline.execute_batch(calls, mode).await
    }

    /// Explains how policy would judge a call now (see [`Pipeline::explain`]).
    pub fn explain(
        &self,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        self.inner.pipeline.explain(tool, arguments, caller)
    }

    /// Like [`Runtime::explain`], under another policy (see [`Pipeline::explain_with`]).
    pub fn explain_with(
        &self,
        policy: Option<&Arc<Policy>>,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        self.inner
            .pipeline
            .explain_with(policy, tool, arguments, caller)
    }

    /// What policy decides for a tool before any arguments are known.
    pub fn tool_decision(&self, tool: &str, caller: &Caller) -> Option<PolicyDecision> {
        self.inner.pipeline.tool_decision(tool, caller)
    }

    /// Cancels a running execution of this process. Returns whether it was running.
    pub fn cancel(&self, id: &ExecutionId) -> bool {
        self.inner.pipeline.cancel(id)
    }

    /// What the calls this process ran add up to, in the OpenMetrics text format (`serve`'s
    /// /metrics): calls by tool, status and caller, latency, refusals by layer, the sandbox's
    /// CPU and memory, the mode and the calls in flight.
    pub fn metrics_text(&self) -> String {
        self.inner
            .shared
            .metrics
            .render(self.settings().mode(), self.running_calls().len())
    }

    /// The calls in flight in this process, oldest first.
    pub fn running_calls(&self) -> Vec<RunningCall> {
        self.inner.pipeline.running_calls()
    }

    /// Every call in flight on the data directory: this process's and those the other processes'
    /// live feeds report (feeds that do not answer within a few seconds are left out), and on a
    /// team store those the other replicas report within a second; oldest first.
    pub async fn running_everywhere(&self) -> Vec<Flight> {
        let own = std::process::id();
        let mut flights: Vec<Flight> = self
            .running_calls()
            .into_iter()
            .map(|call| Flight {
                pid: own,
                replica: None,
                call,
            })
            .collect();
        for (pid, calls) in crate::live::running_elsewhere(self.data_dir()).await {
            flights.extend(calls.into_iter().map(|call| Flight {
                pid,
                replica: None,
                call,
            }));
        }
        if let Some(team) = &self.inner.team {
            // The processes on this data directory answer on both ways: listed once.
            let known: std::collections::HashSet<ExecutionId> = flights
                .iter()
                .map(|f| f.call.execution_id.clone())
                .collect();
            for (replica, calls) in team.running_elsewhere().await {
                let pid = replica
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.split('.').next()?.parse().ok())
                    .unwrap_or(0);
                flights.extend(
                    calls
                        .into_iter()
                        .filter(|c| !known.contains(&c.execution_id))
                        .map(|call| Flight {
                            pid,
                            replica: Some(replica.clone()),
                            call,
                        }),
                );
            }
        }
        flights.sort_by_key(|f| f.call.started_at);
        flights
    }

    /// Cancels a call wherever on the data directory it runs: in this process or, through its
    /// live feed, in another; on a team store, on whichever replica runs it. Returns whether
    /// some process was running it.
    pub async fn cancel_anywhere(&self, id: &ExecutionId) -> bool {
        if self.cancel(id) || crate::live::cancel_elsewhere(self.data_dir(), id).await {
            return true;
        }
        match &self.inner.team {
            Some(team) => team.cancel(id).await,
            None => false,
        }
    }

    /// The sandbox's report on this host: helper, kernel features, each level's status, and the
    /// escape self-test (run now if it has not run yet).
    pub async fn sandbox_doctor(&self) -> tw_sandbox::Doctor {
        self.inner.shared.sandbox.doctor().await
    }

    /// Starts the sandbox's escape self-test in the background, so the first strict tool call
    /// does not wait for it. Long-running hosts (the desktop app, `serve`) call this at start;
    /// otherwise the test runs before the first strict or restricted call.
    pub fn start_sandbox_self_test(&self) {
        let sandbox = self.inner.shared.sandbox.clone();
        tokio::spawn(async move {
            if let Err(e) = sandbox.check(tw_core::IsolationLevel::Strict).await {
                tracing::error!(error = %e, "strict and restricted tools are unavailable");
            }
        });
    }

    /// Publishes this process's executions to the other processes on the data directory (see
    /// [`crate::live`]), until the runtime closes. Returns the feed's socket. Publishing again
    /// replaces the feed.
    pub fn publish_live(&self) -> std::io::Result<PathBuf> {
        let (server, path) =
            crate::live::FeedServer::start(self.data_dir(), Arc::downgrade(&self.inner.pipeline))?;
        *self
            .inner
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(server);
        Ok(path)
    }

    /// Stops the live feed, sends the last spans and metrics, flushes and closes the audit
    /// store.
    pub async fn close(&self) {
        drop(
            self.inner
                .live
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(team) = &self.inner.team {
            team.close().await;
        }
        if let Some(t) = &self.inner.shared.telemetry {
            t.shutdown().await;
        }
        self.inner.shared.store.close().await;
    }
}

/// The team store's URL: `TOOLWARDEN_STORE_URL` if set, else `[store] url`; none for the data
/// directory's SQLite file.
fn store_url(config: &Config) -> Result<Option<String>> {
    match std::env::var("TOOLWARDEN_STORE_URL") {
        Ok(url) if !url.is_empty() => {
            crate::config::check_store_url(&url).map_err(|message| {
                RuntimeError::Config(crate::config::ConfigError {
                    file: "TOOLWARDEN_STORE_URL".to_owned(),
                    line: None,
                    column: None,
                    message,
                })
            })?;
            Ok(Some(url))
        }
        _ => Ok(config.store_url.clone()),
    }
}

/// A registry holding the built-in tools.
fn builtin_registry(settings: &builtins::Settings) -> Result<ToolRegistry<ToolKind>> {
    let registry = ToolRegistry::new();
    for tool in builtins::all(settings)? {
        let def = tool.definition()?;
        registry.register(def, ToolKind::Builtin(tool))?;
    }
    for tool in builtins::exec::all() {
        let def = tool.definition()?;
        registry.register(def, ToolKind::Process(tool))?;
    }
    Ok(registry)
}

/// Reloads the policy when one of its files changes (editors replace files, so their directories
/// are watched). None when there are no files, or they cannot be watched (then changes need a
/// restart, and the log says so).
fn watch_policy(
    watcher: &FileWatcher,
    config: &Config,
    settings: &Arc<SettingsService>,
) -> Vec<Subscription> {
    let files = crate::policy::policy_paths(config);
    let mut dirs: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let files = Arc::new(files.clone());
    let mut subscriptions = Vec::new();
    for dir in dirs {
        let settings = Arc::downgrade(settings);
        let files = Arc::clone(&files);
        let action: crate::watch::Action = Box::new(move || {
            let settings = settings.clone();
            Box::pin(async move {
                let Some(settings) = settings.upgrade() else {
                    return false;
                };
                // A failed reload is logged, announced and recorded by the service itself; the
                // watcher keeps watching.
                let _ = settings.reload_policy("file watcher").await;
                true
            })
        });
        match watcher.subscribe(dir, false, move |p| files.iter().any(|f| f == p), action) {
            Ok(sub) => subscriptions.push(sub),
            Err(e) => {
                tracing::warn!(error = %e, "policy files cannot be watched; changes need a restart");
                return Vec::new();
            }
        }
    }
    subscriptions
}

/// The sandbox the configuration describes; its self-test scratch files go in the data
/// directory, which (unlike /tmp) a sandboxed tool cannot see.
fn sandbox_for(config: &Config, data_dir: &Path) -> Sandbox {
    let defaults = tw_sandbox::SandboxConfig::default();
    Sandbox::with_config(tw_sandbox::SandboxConfig {
        helper: config.sandbox.helper.clone(),
        sandbox_ids: config.sandbox.ids.unwrap_or(defaults.sandbox_ids),
        extra_read_only: config.sandbox.read_only.clone(),
        scratch_dir: data_dir.to_path_buf(),
        pool_size: config.sandbox.pool.unwrap_or(defaults.pool_size),
        pool_idle: defaults.pool_idle,
    })
}

/// The egress gatekeeper: names from the config first, then its DNS servers when it lists
/// some, else `resolver`; requests counted per host where the config limits them.
fn gatekeeper(
    config: &Config,
    resolver: Arc<dyn crate::net::Resolver>,
    store: &Store,
    clock: &Arc<dyn Clock>,
) -> crate::net::Gatekeeper {
    let network = &config.network;
    let resolver: Arc<dyn crate::net::Resolver> = if network.nameservers.is_empty() {
        resolver
    } else {
        Arc::new(crate::net::DnsResolver::new(
            &network.nameservers,
            network.limits.connect,
        ))
    };
    let gate = crate::net::Gatekeeper::new(crate::net::with_names(&network.resolve, resolver));
    match crate::net::StoreLimiter::new(
        store.clone(),
        Arc::clone(clock),
        config.network.rate_limits.clone(),
    ) {
        Some(limiter) => gate.with_limiter(Arc::new(limiter)),
        None => gate,
    }
}

/// A chain step's call through the pipeline (see [`crate::pipeline::chain::StepRunner`]).
fn run_step(
    pipeline: Arc<Pipeline>,
    call: ToolCall,
    cancel: CancellationToken,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolResult> + Send>> {
    Box::pin(async move { pipeline.execute_with_cancel(call, cancel).await })
}

#[cfg(test)]
mod capability_tests;
#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod exec_tests;
#[cfg(test)]
mod git_tests;
#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod jobs_tests;
#[cfg(test)]
mod knowledge_tests;
#[cfg(test)]
mod logs_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod messaging_tests;
#[cfg(test)]
mod net_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod sql_tests;
#[cfg(test)]
mod switch_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod validate_tests;
