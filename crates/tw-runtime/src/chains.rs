//! The chain service: which tool chains exist, where each came from, what is wrong with the
//! ones that do not load, and their runs. Every valid chain is registered as the tool
//! `chain__NAME` (group `chains`) with its input schema, so agents list and call it like any
//! other tool and policy judges the chain as a whole; running it is the pipeline's execution
//! stage ([`crate::pipeline`]'s chain engine), where each step is judged again on its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use serde_json::Value;
use tw_core::chain::{self, Chain};
use tw_core::skill::{Diagnostic, Severity};
use tw_core::{ParameterSchema, RiskLevel, ToolCategory, ToolDefinition, ToolGroup, ToolName};
use tw_store::{AuditRow, ChainRunEnd, ChainRunQuery, ChainRunRow};

use crate::error::{Result, RuntimeError};
pub use crate::kind::ChainEntry;
use crate::kind::ToolKind;
use crate::shared::Shared;

/// A problem with a chain as loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainProblem {
    /// Where: a chain file's path, or `skill NAME`.
    pub origin: String,
    /// The line in that file (1-based), 0 when none applies.
    pub line: usize,
    /// The chain, when known.
    pub chain: Option<String>,
    /// An error leaves the chain out; a warning does not.
    pub severity: Severity,
    /// What is wrong (with the field, when one is at fault).
    pub message: String,
}

impl ChainProblem {
    /// An error with no line: what the service finds when it puts chains in force.
    fn error(origin: &str, chain: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            origin: origin.to_owned(),
            line: 0,
            chain: chain.map(str::to_owned),
            severity: Severity::Error,
            message: message.into(),
        }
    }

    /// A diagnostic of a chain file or SKILL.md at `origin`.
    fn from_diagnostic(origin: &str, chain: Option<&str>, d: &Diagnostic) -> Self {
        Self {
            origin: origin.to_owned(),
            line: d.line,
            chain: chain.map(str::to_owned),
            severity: d.severity,
            message: match &d.field {
                Some(f) => format!("{f}: {}", d.message),
                None => d.message.clone(),
            },
        }
    }

    /// Whether it leaves the chain out.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl std::fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.origin)?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {level}: {}", self.message)
    }
}

/// A loaded chain as listings show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainSummary {
    /// The chain's name.
    pub name: String,
    /// The tool it is called as.
    pub tool: String,
    /// What it does.
    pub description: String,
    /// How many steps it has.
    pub steps: usize,
    /// Where it was written.
    pub origin: String,
    /// The skill that declares it.
    pub skill: Option<String>,
}

#[derive(Default)]
struct State {
    chains: BTreeMap<String, Arc<ChainEntry>>,
    problems: Vec<ChainProblem>,
}

/// Tool chains: loaded, registered as tools, and their runs.
pub struct ChainService {
    shared: Arc<Shared>,
    this: Weak<ChainService>,
    state: RwLock<State>,
    /// The chain files' directory.
    dir: PathBuf,
    settings: Arc<crate::settings::SettingsService>,
    skills: Arc<crate::skills::SkillService>,
    upstreams: Arc<crate::upstream::UpstreamService>,
    watcher: crate::watch::FileWatcher,
    watching: Mutex<Option<crate::watch::Subscription>>,
    /// Whether the first load is done (its problems are a start-up warning instead).
    opened: std::sync::atomic::AtomicBool,
    /// The language model `plan` asks (the `[classifier]` endpoint), if one is configured.
    planner: Option<crate::classifier::LlmClassifier>,
}

/// How long a planning request may take, at least (the classifier's own limit is for a short
/// answer; a chain is a longer one).
pub const PLAN_TIMEOUT_MS: u64 = 60_000;

/// A chain a language model proposed, checked, not saved.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChainPlan {
    /// The chain file text: the chain as YAML when it reads, else what the model answered.
    pub text: String,
    /// The chains in it without errors (one, when the plan is usable).
    pub valid: Vec<String>,
    /// Every problem, each with its line in `text`.
    pub diagnostics: Vec<Diagnostic>,
    /// The model asked.
    pub model: String,
}

/// The directory chain files are read from: the config's `chains_dir`, else the first
/// workspace root's `chains` folder (as skills are found).
pub fn chains_dir(config: &crate::config::Config, workspace: &[PathBuf]) -> PathBuf {
    match &config.chains_dir {
        Some(d) => d.clone(),
        None => workspace
            .first()
            .map_or_else(|| PathBuf::from("chains"), |w| w.join("chains")),
    }
}

/// The largest chain file read, in bytes: the most the chain parser reads.
const MAX_FILE_BYTES: u64 = chain::yaml::MAX_BYTES as u64;

/// The longest a chain may run unless it says.
pub const DEFAULT_TIMEOUT_MS: u64 = 10 * 60 * 1000;

impl ChainService {
    pub(crate) fn open(
        shared: Arc<Shared>,
        config: &crate::config::Config,
        dir: PathBuf,
        settings: Arc<crate::settings::SettingsService>,
        skills: Arc<crate::skills::SkillService>,
        upstreams: Arc<crate::upstream::UpstreamService>,
        watcher: crate::watch::FileWatcher,
    ) -> Result<Arc<Self>> {
        let mut settings_for_plan = config.classifier.clone();
        settings_for_plan.timeout_ms = settings_for_plan.timeout_ms.max(PLAN_TIMEOUT_MS);
        let planner = crate::classifier::LlmClassifier::from_settings(&settings_for_plan)
            .map_err(|e| RuntimeError::invalid("classifier", e))?;
        let service = Arc::new_cyclic(|this| Self {
            shared,
            this: this.clone(),
            state: RwLock::default(),
            dir,
            settings,
            skills,
            upstreams,
            watcher,
            watching: Mutex::new(None),
            opened: std::sync::atomic::AtomicBool::new(false),
            planner,
        });
        service.reload();
        Ok(service)
    }

    /// Asks the configured language model for a chain reaching `goal`, using only the tools
    /// `skill` reaches (every registered tool but chains without one), and checks its answer
    /// like a chain file. Nothing is saved or run: a person accepts a plan with [`Self::save`].
    pub async fn plan(&self, goal: &str, skill: Option<&str>) -> Result<ChainPlan> {
        let goal = goal.trim();
        if goal.is_empty() {
            return Err(RuntimeError::invalid(
                "goal",
                "say what the chain should do",
            ));
        }
        let Some(model) = &self.planner else {
            return Err(RuntimeError::Unavailable(
                "no language model is configured: set [classifier] endpoint (an OpenAI-compatible API) to plan chains".to_owned(),
            ));
        };
        if let Some(s) = skill {
            self.skills.existing("skill", s)?;
        }
        let catalog = Catalog {
            service: self,
            skill,
        };
        let entries: Vec<_> = self
            .shared
            .registry
            .list()
            .into_iter()
            .filter(|e| !matches!(e.kind, ToolKind::Chain(_)))
            .filter(|e| {
                chain::ChainCatalog::outside_skill(&catalog, e.definition.name.as_str()).is_none()
            })
            .collect();
        let outputs: Vec<Option<Value>> = entries
            .iter()
            .map(|e| {
                e.definition
                    .output_schema
                    .as_ref()
                    .map(|s| s.value().clone())
            })
            .collect();
        let tools: Vec<chain::plan::PlanTool<'_>> = entries
            .iter()
            .zip(&outputs)
            .map(|(e, out)| chain::plan::PlanTool {
                name: e.definition.name.as_str(),
                description: &e.definition.description,
                parameters: e.definition.parameters.value(),
                output: out.as_ref(),
            })
            .collect();
        let request = chain::plan::plan_request(goal, &tools, model.model());
        let response = model.complete(&request).await.map_err(|e| {
            RuntimeError::Unavailable(format!("model {} gave no plan: {e}", model.model()))
        })?;
        let answer = chain::plan::plan_answer(&response).map_err(|e| {
            RuntimeError::Unavailable(format!("model {} gave no plan: {e}", model.model()))
        })?;
        let (chains, found) = self.check_text(&answer, skill);
        // A chain that reads is shown as the YAML it will be saved as; lines then refer to it.
        let (text, diagnostics) = match chains.as_slice() {
            [one] if found.is_empty() => (one.to_yaml(), Vec::new()),
            _ => (answer, found.into_iter().map(|(_, d)| d).collect()),
        };
        Ok(ChainPlan {
            text,
            valid: chains.into_iter().map(|c| c.name).collect(),
            diagnostics,
            model: model.model().to_owned(),
        })
    }

    /// Saves a chain file a person accepted (a plan, or one they wrote) into the chains
    /// directory as `NAME.yaml`, one file per chain, and loads it. Refused whole when any chain
    /// in it has an error, or when a chain of that name exists, unless `replace` is set and it
    /// is a chain saved this way (its own `NAME.yaml` in the chains directory, loaded or not: a
    /// chain of a skill or of a file holding others is edited where it lives). Each file is
    /// written whole or not at all (a temporary file renamed over it); the admin log records who
    /// saved what, and what a replaced file held.
    pub async fn save(
        &self,
        text: &str,
        skill: Option<&str>,
        actor: &str,
        replace: bool,
    ) -> Result<Vec<String>> {
        let (chains, found) = self.check_text(text, skill);
        let errors: Vec<String> = found
            .iter()
            .filter(|(_, d)| d.severity == Severity::Error)
            .map(|(_, d)| d.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(RuntimeError::invalid("chain", errors.join("; ")));
        }
        if chains.is_empty() {
            return Err(RuntimeError::invalid("chain", "the text holds no chain"));
        }
        let mut previous = BTreeMap::new();
        for c in &chains {
            let path = self.dir.join(format!("{}.yaml", c.name));
            let loaded = self.get(&c.name);
            let exists = loaded.is_some() || path.exists();
            if exists && !replace {
                return Err(RuntimeError::Conflict {
                    code: "chain_exists",
                    message: format!(
                        "a chain named {:?} exists already (replace it to save over it)",
                        c.name
                    ),
                });
            }
            if let Some(e) = &loaded
                && Path::new(&e.origin) != path
            {
                return Err(RuntimeError::Conflict {
                    code: "chain_elsewhere",
                    message: format!("chain {:?} comes from {}; edit it there", c.name, e.origin),
                });
            }
            if path.exists() {
                let old = std::fs::read_to_string(&path).map_err(|e| {
                    RuntimeError::Unavailable(format!("cannot read {}: {e}", path.display()))
                })?;
                // Chains the old file holds beside this one (as far as it reads: the admin log
                // keeps the old text whole either way).
                let others: Vec<String> = chain::parse_chain_file(&old)
                    .chains
                    .into_iter()
                    .map(|o| o.chain.name)
                    .filter(|n| *n != c.name)
                    .collect();
                if !others.is_empty() {
                    return Err(RuntimeError::Conflict {
                        code: "chain_elsewhere",
                        message: format!(
                            "{} also holds {}; edit it there",
                            path.display(),
                            others.join(", ")
                        ),
                    });
                }
                previous.insert(c.name.clone(), old);
            }
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| {
            RuntimeError::Unavailable(format!("cannot create {}: {e}", self.dir.display()))
        })?;
        let mut saved = Vec::new();
        for c in &chains {
            let path = self.dir.join(format!("{}.yaml", c.name));
            let yaml = c.to_yaml();
            write_whole(&path, &yaml)?;
            let old = previous.get(&c.name);
            let (kind, verb) = match old {
                Some(_) => ("chain_replaced", "replaced in"),
                None => ("chain_saved", "saved to"),
            };
            self.shared
                .admin(
                    actor,
                    kind,
                    format!("chain {} {verb} {}", c.name, path.display()),
                    serde_json::json!({"chain": c.name, "path": path, "yaml": yaml, "previous": old}),
                )
                .await;
            saved.push(c.name.clone());
        }
        // Watched first: an edit after the read below is seen by the watch.
        self.watch();
        self.reload();
        Ok(saved)
    }

    fn opened(&self) -> bool {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many chains did not load, as a start-up warning, when some did not.
    pub(crate) fn warning(&self) -> Option<String> {
        let state = self.read();
        let failed: std::collections::BTreeSet<&str> = state
            .problems
            .iter()
            .filter(|p| p.is_error())
            .map(|p| p.chain.as_deref().unwrap_or(p.origin.as_str()))
            .collect();
        (!failed.is_empty()).then(|| {
            format!(
                "{} chains did not load ({}); `toolwarden chains check` says why",
                failed.len(),
                failed.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Where chain files are read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Follows the chains directory: a change there reloads the chains within a second.
    pub(crate) fn watch(&self) {
        self.watcher.keep(
            &self.watching,
            &self.dir,
            false,
            self.this.clone(),
            Self::reload,
            "chains",
        );
    }

    /// Reads every chain again (the chain files and the skills' `chains:`), checks each
    /// against the tools registered now, and puts the valid ones in force. A chain with an
    /// error never runs; the others still load.
    pub fn reload(&self) {
        let (mut entries, mut problems) = self.read_files();
        for skill in &self.skills.loaded().skills {
            let origin = skill.path.display().to_string();
            // What reading the skill's `chains:` found: those chains are left out.
            problems.extend(
                skill
                    .diagnostics
                    .iter()
                    .filter(|d| d.is_about_chains())
                    .map(|d| ChainProblem::from_diagnostic(&origin, None, d)),
            );
            let Some(m) = &skill.manifest else { continue };
            for source in &m.chains {
                let origin = origin.clone();
                let found = self.check_source(source, Some(&m.name));
                let failed = found.iter().any(|d| d.severity == Severity::Error);
                problems.extend(
                    found.into_iter().map(|d| {
                        ChainProblem::from_diagnostic(&origin, Some(&source.chain.name), &d)
                    }),
                );
                if !failed {
                    entries.push(ChainEntry {
                        chain: source.chain.clone(),
                        origin,
                        skill: Some(m.name.clone()),
                    });
                }
            }
        }
        // Said once, when it first appears: a process that opens the runtime for one command
        // should not repeat every old problem (`chains check` lists them).
        let before = self.problems();
        for p in problems.iter().filter(|p| !before.contains(p)) {
            if self.opened() {
                tracing::warn!("chain: {p}");
            }
        }
        self.install(entries, problems);
        self.opened
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The chain files as read and checked: the valid chains and every problem.
    fn read_files(&self) -> (Vec<ChainEntry>, Vec<ChainProblem>) {
        let mut entries = Vec::new();
        let mut problems = Vec::new();
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (entries, problems),
            Err(e) => {
                problems.push(ChainProblem::error(
                    &self.dir.display().to_string(),
                    None,
                    format!("the chains directory cannot be read: {e}"),
                ));
                return (entries, problems);
            }
        };
        let mut files: Vec<PathBuf> = listing
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for path in files {
            let origin = path.display().to_string();
            let text = match read_capped(&path) {
                Ok(t) => t,
                Err(message) => {
                    problems.push(ChainProblem::error(&origin, None, message));
                    continue;
                }
            };
            let (chains, found) = self.check_text(&text, None);
            problems.extend(
                found
                    .iter()
                    .map(|(chain, d)| ChainProblem::from_diagnostic(&origin, chain.as_deref(), d)),
            );
            entries.extend(chains.into_iter().map(|chain| ChainEntry {
                chain,
                origin: origin.clone(),
                skill: None,
            }));
        }
        (entries, problems)
    }

    /// Reads a chain file's text and checks every chain in it against the tools registered
    /// now (under `skill`'s tools, when given): the chains without errors, and every
    /// diagnostic with the chain it is about. Nothing is saved.
    pub fn check_text(
        &self,
        text: &str,
        skill: Option<&str>,
    ) -> (Vec<Chain>, Vec<(Option<String>, Diagnostic)>) {
        let parsed = chain::parse_chain_file(text);
        let mut found: Vec<(Option<String>, Diagnostic)> =
            parsed.diagnostics.into_iter().map(|d| (None, d)).collect();
        let mut chains = Vec::new();
        for source in parsed.chains {
            let own = self.check_source(&source, skill);
            let failed = own.iter().any(|d| d.severity == Severity::Error);
            found.extend(
                own.into_iter()
                    .map(|d| (Some(source.chain.name.clone()), d)),
            );
            if !failed {
                chains.push(source.chain);
            }
        }
        found.sort_by_key(|(_, d)| d.line);
        (chains, found)
    }

    /// The checks that need the registry, for one chain.
    fn check_source(&self, source: &chain::ChainSource, skill: Option<&str>) -> Vec<Diagnostic> {
        let catalog = Catalog {
            service: self,
            skill,
        };
        chain::check(source, &catalog)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every loaded chain, by name.
    pub fn list(&self) -> Vec<Arc<ChainEntry>> {
        self.read().chains.values().cloned().collect()
    }

    /// The chain named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ChainEntry>> {
        self.read().chains.get(name).cloned()
    }

    /// Every loaded chain as listings show it, by name.
    pub fn summaries(&self) -> Vec<ChainSummary> {
        self.read()
            .chains
            .values()
            .map(|e| ChainSummary {
                name: e.chain.name.clone(),
                tool: chain_tool(&e.chain.name),
                description: e.chain.description.clone(),
                steps: e.chain.steps.len(),
                origin: e.origin.clone(),
                skill: e.skill.clone(),
            })
            .collect()
    }

    /// The chain named `name`, or why there is none: not declared, or declared and refused
    /// (with the first problem that kept it out).
    pub fn require(&self, name: &str) -> Result<Arc<ChainEntry>> {
        let state = self.read();
        if let Some(e) = state.chains.get(name) {
            return Ok(Arc::clone(e));
        }
        let message = match state
            .problems
            .iter()
            .find(|p| p.chain.as_deref() == Some(name) && p.is_error())
        {
            Some(p) => format!("chain {name:?} did not load: {p}"),
            None => format!("no chain named {name:?} is loaded (see `toolwarden chains list`)"),
        };
        Err(RuntimeError::NotFound {
            code: "unknown_chain",
            message,
        })
    }

    /// What was wrong with the chains that did not load (and warnings about those that did).
    pub fn problems(&self) -> Vec<ChainProblem> {
        self.read().problems.clone()
    }

    /// Makes `entries` the chains in force: each valid one is registered as its tool, chains
    /// no longer given are unregistered, and each one that cannot be (a name taken twice, a
    /// tool name another tool has, chains calling each other in a circle) is a problem
    /// instead. `problems` are those found while reading them.
    pub fn install(&self, entries: Vec<ChainEntry>, mut problems: Vec<ChainProblem>) {
        let mut by_name: BTreeMap<String, Vec<ChainEntry>> = BTreeMap::new();
        for e in entries {
            by_name.entry(e.chain.name.clone()).or_default().push(e);
        }
        let mut chains: BTreeMap<String, Arc<ChainEntry>> = BTreeMap::new();
        for (name, mut list) in by_name {
            if list.len() > 1 {
                // Which one was meant is not ours to guess: neither loads.
                let origins: Vec<&str> = list.iter().map(|e| e.origin.as_str()).collect();
                problems.push(ChainProblem::error(
                    &list[0].origin,
                    Some(&name),
                    format!(
                        "chain {name:?} is declared more than once ({}); none of them is loaded",
                        origins.join(", ")
                    ),
                ));
                continue;
            }
            if let Some(e) = list.pop() {
                chains.insert(name, Arc::new(e));
            }
        }
        for name in calling_in_a_circle(&chains) {
            if let Some(e) = chains.remove(&name) {
                problems.push(ChainProblem::error(
                    &e.origin,
                    Some(&name),
                    format!("chain {name:?} calls itself through other chains"),
                ));
            }
        }
        let registry = &self.shared.registry;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for old in state.chains.keys() {
            if !chains.contains_key(old) {
                let _ = registry.unregister(&chain_tool(old));
            }
        }
        let mut installed = BTreeMap::new();
        for (name, e) in chains {
            let def = match definition(&e, |t| registry.get(t).map(|r| r.definition.clone())) {
                Ok(d) => d,
                Err(message) => {
                    problems.push(ChainProblem::error(&e.origin, Some(&name), message));
                    continue;
                }
            };
            let kind = ToolKind::Chain(Arc::clone(&e));
            let done = match registry.get(def.name.as_str()) {
                Some(r) if matches!(r.kind, ToolKind::Chain(_)) => {
                    registry.update(def, kind).map(|_| ())
                }
                Some(_) => {
                    problems.push(ChainProblem::error(
                        &e.origin,
                        Some(&name),
                        format!("another tool is named {}", chain_tool(&name)),
                    ));
                    continue;
                }
                None => registry.register(def, kind).map(|_| ()),
            };
            if let Err(err) = done {
                problems.push(ChainProblem::error(&e.origin, Some(&name), err.to_string()));
                continue;
            }
            installed.insert(name, e);
        }
        *state = State {
            chains: installed,
            problems,
        };
    }

    /// Marks `interrupted` every run held as running whose process has ended (a crash, a kill,
    /// a power loss): its steps that had not ended read `cancelled`. Runs another live process
    /// drives are left alone. Gives how many were marked.
    pub async fn recover_interrupted(&self) -> Result<usize> {
        let store = &self.shared.store;
        let mut marked = 0;
        for run in store.running_chain_runs().await? {
            if run.owner.as_deref().is_some_and(crate::owner::is_alive) {
                continue;
            }
            let now = self.shared.now_us();
            let end = ChainRunEnd {
                status: "interrupted".to_owned(),
                output: None,
                error: Some(
                    "the process running this chain ended before the run did (a crash or a kill); \
                     steps that were running may or may not have finished"
                        .to_owned(),
                ),
                steps: interrupt_steps(run.steps, &store.chain_step_rows(&run.id).await?, now),
                completed_at: now,
            };
            if store.finish_chain_run(&run.id, end).await? {
                tracing::warn!(run = %run.id, "chain run interrupted: its process ended first");
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// Runs of chains, newest first.
    pub async fn runs(&self, q: &ChainRunQuery) -> Result<Vec<ChainRunRow>> {
        Ok(self.shared.store.chain_runs(q).await?)
    }

    /// A run and the audit rows of its steps' calls.
    pub async fn run(&self, id: &str) -> Result<(ChainRunRow, Vec<AuditRow>)> {
        let run = self
            .shared
            .store
            .chain_run(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound {
                code: "unknown_chain_run",
                message: format!("no chain run has id {id:?}"),
            })?;
        let steps = self.shared.store.chain_step_rows(id).await?;
        Ok((run, steps))
    }
}

/// Writes `text` to `path` whole or not at all: a temporary file beside it, renamed over it.
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let fail = |e: std::io::Error| {
        RuntimeError::Unavailable(format!("cannot write {}: {e}", path.display()))
    };
    let tmp = path.with_extension(format!("yaml.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// A cut-short run's steps as far as its audit rows tell: the run record holds the steps as they
/// were when it started, but each step's calls wrote their own rows as they ended. A step whose
/// last call succeeded (and that made every call it was going to, as far as anyone can tell)
/// reads `completed`, one whose last call failed or was denied reads so, and one that made no
/// call, or whose call never ended, reads `cancelled`.
fn interrupt_steps(mut steps: Value, rows: &[AuditRow], now: i64) -> Value {
    for step in steps.as_array_mut().into_iter().flatten() {
        let Some(step) = step.as_object_mut() else {
            continue;
        };
        if !matches!(
            step.get("status").and_then(Value::as_str),
            Some("pending" | "running")
        ) {
            continue;
        }
        let id = step.get("id").and_then(Value::as_str).unwrap_or_default();
        let calls: Vec<&AuditRow> = rows
            .iter()
            .filter(|r| r.metadata["chain"]["step"].as_str() == Some(id))
            .collect();
        let (status, error) = match calls.last() {
            Some(last) => {
                let status = chain::StepStatus::after_call(last.status);
                let error = (status != chain::StepStatus::Completed).then(|| {
                    format!(
                        "{} ({}): {}",
                        last.status,
                        last.tool,
                        last.error_message.as_deref().unwrap_or("")
                    )
                });
                (status, error)
            }
            None => (
                chain::StepStatus::Cancelled,
                Some("the run was interrupted before this step ended".to_owned()),
            ),
        };
        if let Some(first) = calls.first() {
            step.insert("started_at".to_owned(), first.started_at.into());
        }
        let ids: Vec<Value> = calls
            .iter()
            .map(|r| r.execution_id.clone().into())
            .collect();
        step.insert("attempts".to_owned(), ids.len().into());
        step.insert("execution_ids".to_owned(), ids.into());
        step.insert("status".to_owned(), status.as_str().into());
        step.insert(
            "completed_at".to_owned(),
            calls.last().map_or(now, |r| r.completed_at).into(),
        );
        step.insert("error".to_owned(), error.into());
    }
    steps
}

/// What the chain checks see of the registry, the loaded chains, quarantine and a skill.
struct Catalog<'a> {
    service: &'a ChainService,
    skill: Option<&'a str>,
}

impl chain::ChainCatalog for Catalog<'_> {
    fn tool(&self, name: &str) -> Option<chain::ToolInfo> {
        let entry = self.service.shared.registry.get(name)?;
        let d = &entry.definition;
        Some(chain::ToolInfo {
            parameters: d.parameters.value().clone(),
            output: d.output_schema.as_ref().map(|s| s.value().clone()),
            quarantined: self.service.upstreams.quarantine_reason(name).is_some(),
        })
    }

    fn chain(&self, name: &str) -> Option<chain::ChainInfo> {
        let entry = self.service.get(name)?;
        Some(chain::ChainInfo {
            input: entry.chain.input.clone(),
            output: chain::output_schema(&entry.chain, self),
        })
    }

    fn outside_skill(&self, tool: &str) -> Option<String> {
        let skill = self.skill?;
        let entry = self.service.shared.registry.get(tool)?;
        let policy = self.service.settings.policy();
        let (needed, _) = policy.access.needed(&entry.definition);
        let judged = self.service.skills.judge(
            skill,
            &entry.definition,
            needed,
            &Value::Object(serde_json::Map::new()),
            None,
            false,
        );
        (judged.verdict.decision != tw_core::Decision::Allow).then_some(judged.verdict.reason)
    }
}

/// A chain file's text, refused when it is too large or not UTF-8.
fn read_capped(path: &Path) -> std::result::Result<String, String> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("is larger than {MAX_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("is not UTF-8 (byte {})", e.utf8_error().valid_up_to()))
}

/// The tool a chain is called as.
pub fn chain_tool(name: &str) -> String {
    format!("{}{name}", chain::TOOL_PREFIX)
}

/// Chains that reach themselves through `chain:` steps.
fn calling_in_a_circle(chains: &BTreeMap<String, Arc<ChainEntry>>) -> Vec<String> {
    let calls = |name: &str| -> Vec<String> {
        chains.get(name).map_or_else(Vec::new, |e| {
            e.chain
                .steps
                .iter()
                .filter_map(|s| match &s.target {
                    chain::StepTarget::Chain(c) => Some(c.clone()),
                    chain::StepTarget::Tool(_) => None,
                })
                .collect()
        })
    };
    chains
        .keys()
        .filter(|start| {
            let mut seen = std::collections::BTreeSet::new();
            let mut todo = calls(start);
            while let Some(next) = todo.pop() {
                if &next == *start {
                    return true;
                }
                if seen.insert(next.clone()) {
                    todo.extend(calls(&next));
                }
            }
            false
        })
        .cloned()
        .collect()
}

/// The tool definition of a chain: its input schema, its description, and the highest risk
/// and any side effect of the tools its steps call (`lookup` gives their definitions).
fn definition(
    e: &ChainEntry,
    lookup: impl Fn(&str) -> Option<ToolDefinition>,
) -> std::result::Result<ToolDefinition, String> {
    let c = &e.chain;
    let name = ToolName::new(&chain_tool(&c.name)).map_err(|err| err.to_string())?;
    let group = ToolGroup::new(chain::GROUP).map_err(|err| err.to_string())?;
    let parameters =
        ParameterSchema::parameters(c.input.clone()).map_err(|err| format!("input: {err}"))?;
    let description = if c.description.is_empty() {
        format!(
            "Runs the tool chain {:?} ({} steps).",
            c.name,
            c.steps.len()
        )
    } else {
        c.description.clone()
    };
    let mut def = ToolDefinition::new(name, description, ToolCategory::System, group, parameters);
    let mut risk = RiskLevel::Low;
    let mut side_effects = false;
    for s in &c.steps {
        if let Some(d) = lookup(&s.target.tool_name()) {
            risk = risk.max(d.risk_level);
            side_effects |= d.constraints.side_effects;
        }
    }
    def.risk_level = risk;
    def.constraints.side_effects = side_effects;
    def.constraints.isolation = tw_core::IsolationLevel::None;
    def.constraints.max_execution_time_ms = c.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    def.metadata
        .insert("chain".to_owned(), Value::String(c.name.clone()));
    def.metadata
        .insert("origin".to_owned(), Value::String(e.origin.clone()));
    Ok(def)
}
