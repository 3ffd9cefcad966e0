//! The chain service: which tool chains exist, where each came from, what is wrong with the
//! ones that do not load, and their runs. Every valid chain is registered as the tool
//! `chain__NAME` (group `chains`) with its input schema, so agents list and call it like any
//! other tool and policy judges the chain as a whole; running it is the pipeline's execution
//! stage ([`crate::pipeline`]'s chain engine), where each step is judged again on its own.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;
use tw_core::chain::{self, Chain};
use tw_core::{ParameterSchema, RiskLevel, ToolCategory, ToolDefinition, ToolGroup, ToolName};
use tw_store::{AuditRow, ChainRunQuery, ChainRunRow};

use crate::error::{Result, RuntimeError};
use crate::kind::ToolKind;
use crate::shared::Shared;

/// A chain the runtime knows, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainEntry {
    /// The chain.
    pub chain: Chain,
    /// Where it was written: a chain file's path, or `skill NAME`.
    pub origin: String,
    /// The skill that declares it; its steps run under that skill.
    pub skill: Option<String>,
}

/// A problem with a chain as loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainProblem {
    /// Where: a chain file's path, or `skill NAME`.
    pub origin: String,
    /// The line in that file (1-based), 0 when none applies.
    pub line: usize,
    /// The chain, when known.
    pub chain: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.origin, self.line, self.message)
        } else {
            write!(f, "{}: {}", self.origin, self.message)
        }
    }
}

#[derive(Default)]
struct State {
    chains: BTreeMap<String, Arc<ChainEntry>>,
    problems: Vec<ChainProblem>,
}

/// Tool chains: loaded, registered as tools, and their runs.
pub struct ChainService {
    shared: Arc<Shared>,
    state: RwLock<State>,
}

/// The longest a chain may run unless it says.
pub const DEFAULT_TIMEOUT_MS: u64 = 10 * 60 * 1000;

impl ChainService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            state: RwLock::default(),
        }
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
                problems.push(ChainProblem {
                    origin: list[0].origin.clone(),
                    line: 0,
                    chain: Some(name.clone()),
                    message: format!(
                        "chain {name:?} is declared more than once ({}); none of them is loaded",
                        origins.join(", ")
                    ),
                });
                continue;
            }
            if let Some(e) = list.pop() {
                chains.insert(name, Arc::new(e));
            }
        }
        for name in calling_in_a_circle(&chains) {
            if let Some(e) = chains.remove(&name) {
                problems.push(ChainProblem {
                    origin: e.origin.clone(),
                    line: 0,
                    chain: Some(name.clone()),
                    message: format!("chain {name:?} calls itself through other chains"),
                });
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
                    problems.push(ChainProblem {
                        origin: e.origin.clone(),
                        line: 0,
                        chain: Some(name.clone()),
                        message,
                    });
                    continue;
                }
            };
            let kind = ToolKind::Chain(Arc::clone(&e));
            let done = match registry.get(def.name.as_str()) {
                Some(r) if matches!(r.kind, ToolKind::Chain(_)) => {
                    registry.update(def, kind).map(|_| ())
                }
                Some(_) => {
                    problems.push(ChainProblem {
                        origin: e.origin.clone(),
                        line: 0,
                        chain: Some(name.clone()),
                        message: format!("another tool is named {}", chain_tool(&name)),
                    });
                    continue;
                }
                None => registry.register(def, kind).map(|_| ()),
            };
            if let Err(err) = done {
                problems.push(ChainProblem {
                    origin: e.origin.clone(),
                    line: 0,
                    chain: Some(name.clone()),
                    message: err.to_string(),
                });
                continue;
            }
            installed.insert(name, e);
        }
        *state = State {
            chains: installed,
            problems,
        };
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

/// A step's call through the pipeline, behind a boxed future. The pipeline runs chains and
/// chains run calls through the pipeline; the compiler cannot see through that circle of
/// `async fn`s to prove the futures `Send` unless the circle passes through a named type
/// outside the pipeline's module, which this is.
pub(crate) fn execute_step(
    pipeline: Arc<crate::pipeline::Pipeline>,
    call: tw_core::ToolCall,
    cancel: tokio_util::sync::CancellationToken,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = tw_core::ToolResult> + Send>> {
    Box::pin(async move { pipeline.execute_with_cancel(call, cancel).await })
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
