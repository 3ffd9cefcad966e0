//! The chains page's share of the wire: the chains loaded and the problems of those that did
//! not load, one chain's steps (for its graph) and YAML, a chain file's check, its runs with
//! each step's state, and a step's change of state as the live feed carries it. Kept apart from
//! `lib.rs` so the chain types read as one group; re-exported at the crate's root.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A loaded chain as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainSummary {
    /// The chain's name.
    pub name: String,
    /// The tool it is called as (`chain__NAME`).
    pub tool: String,
    /// What it does.
    pub description: String,
    /// How many steps it has.
    pub steps: usize,
    /// The file it was written in.
    pub origin: String,
    /// The skill that declares it.
    pub skill: Option<String>,
}

/// A problem with a chain as loaded: an error leaves the chain out, a warning does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainProblem {
    /// A chain file's path, or a SKILL.md's.
    pub origin: String,
    /// The line in it (1-based); 0 when none applies.
    pub line: usize,
    /// The chain, when known.
    pub chain: Option<String>,
    /// `error` or `warning`.
    pub severity: String,
    /// What is wrong.
    pub message: String,
}

/// What [`crate::commands::LIST_CHAINS`] answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainList {
    /// The chains in force, by name.
    pub chains: Vec<ChainSummary>,
    /// Every problem found loading them (those of chains left out included).
    pub problems: Vec<ChainProblem>,
}

/// Names a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainParams {
    /// The chain's name (not its tool's).
    pub name: String,
}

/// One step of a chain, as its graph draws it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainStepInfo {
    /// Its id.
    pub id: String,
    /// The tool it calls (a `chain:` step calls `chain__NAME`).
    pub tool: String,
    /// The steps its `depends_on` names.
    pub depends_on: Vec<String>,
    /// The other steps it waits for because its arguments, `when` or `for_each` read them.
    pub references: Vec<String>,
}

/// One chain in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainDetail {
    /// The summary the list shows.
    pub summary: ChainSummary,
    /// The JSON Schema of its input.
    pub input: Value,
    /// Its steps, in the order written.
    pub steps: Vec<ChainStepInfo>,
    /// The chain as a chain file holds it.
    pub yaml: String,
}

/// A chain file's text, to check or to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainTextParams {
    /// The whole chain file.
    pub text: String,
    /// Check (and save) it as a chain of this skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// Save over the chain of the same name saved from here before (ignored by a check).
    #[serde(default)]
    pub replace: bool,
}

/// One problem in a chain file's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainDiagnostic {
    /// The chain it is about, when known.
    pub chain: Option<String>,
    /// `error` or `warning`.
    pub severity: String,
    /// The line in the text (1-based).
    pub line: usize,
    /// The field at fault (`steps[1].tool`), when one is.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// What checking a chain file found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainCheck {
    /// The chains in the text without an error.
    pub valid: Vec<String>,
    /// Every problem, by line.
    pub diagnostics: Vec<ChainDiagnostic>,
}

/// Runs a chain, as the app's caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunChainParams {
    /// The chain's name.
    pub name: String,
    /// Its input.
    pub input: Value,
}

/// Which runs to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainRunsParams {
    /// Only runs of this chain.
    #[serde(default)]
    pub chain: Option<String>,
    /// At most this many (the runtime's default when absent).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Names a run (its id is the chain call's execution id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainRunParams {
    /// The run's id.
    pub id: String,
}

/// Where a step of a run is, or how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainRunStep {
    /// The step's id.
    pub id: String,
    /// `pending`, `running`, `completed`, `failed`, `skipped`, `denied` or `cancelled`.
    pub status: String,
    /// When its first call started.
    pub started_at: Option<i64>,
    /// When it ended.
    pub completed_at: Option<i64>,
    /// Calls made (retries and `for_each` items count).
    pub attempts: u32,
    /// Its calls' execution ids.
    pub execution_ids: Vec<String>,
    /// Why it failed, was denied or was skipped.
    pub error: Option<String>,
}

/// A run of a chain, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainRun {
    /// The run's id: the chain call's execution id.
    pub id: String,
    /// The chain.
    pub chain: String,
    /// `running`, `completed`, `failed`, `cancelled`, `timeout` or `interrupted`.
    pub status: String,
    /// Who ran it.
    pub caller: String,
    /// The skill it ran under.
    pub skill: Option<String>,
    /// Its input.
    pub input: Value,
    /// What it returned.
    pub output: Option<Value>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// Each step, in the chain's order.
    pub steps: Vec<ChainRunStep>,
    /// When it started.
    pub started_at: i64,
    /// When it ended.
    pub completed_at: Option<i64>,
}

/// A step of a chain run that changed state, on the chain call's [`crate::LiveEvent`] (kind
/// `chain_step`; the event's execution id is the run's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainStepUpdate {
    /// The step's id.
    pub step: String,
    /// `running`, or how it ended.
    pub status: String,
    /// Calls made so far.
    pub attempts: u32,
    /// Its calls' execution ids, once it has ended.
    pub execution_ids: Vec<String>,
    /// Why it failed, was denied or was skipped.
    pub error: Option<String>,
}
