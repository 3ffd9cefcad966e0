//! A tool call and its result: the values that flow through the pipeline, into the audit log and
//! back to the caller. Timestamps are microseconds since the Unix epoch, supplied by the runtime.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::name::{ExecutionId, TraceId};
use crate::policy::PolicyDecision;
use crate::schema::Violation;

/// Who is calling: the agent, and optionally the skill it acts under and the person behind it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Caller {
    /// The agent (or client) making the call.
    pub agent_id: String,
    /// The skill the call is made under, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The person on whose behalf the agent acts, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Caller ids come from clients we do not control; keep them printable and bounded so they cannot
/// forge log lines or bloat audit rows.
fn sanitize(id: &str) -> String {
    // Most ids are clean already: one copy, no second pass.
    let short = id.len() <= MAX_ID_CHARS || id.chars().count() <= MAX_ID_CHARS;
    if short && !id.is_empty() && id.trim().len() == id.len() && !id.chars().any(char::is_control) {
        return id.to_owned();
    }
    let cleaned: String = id
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_ID_CHARS)
        .collect();
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        "unknown".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The longest an agent, skill or user id may be, in characters.
pub const MAX_ID_CHARS: usize = 128;

/// Whether `agent` is an agent id exactly as given (1 to [`MAX_ID_CHARS`] characters, none of
/// them control characters, no space at either end): what a name is held to where one is
/// chosen (a token issued for it, an explanation asked for it) rather than sanitized.
pub fn check_agent_id(agent: &str) -> Result<(), String> {
    if sanitize(agent) == agent && agent.chars().count() <= MAX_ID_CHARS {
        Ok(())
    } else {
        Err(format!(
            "{agent:?} is not an agent id: use 1 to {MAX_ID_CHARS} printable characters"
        ))
    }
}

impl Caller {
    /// A caller with only an agent id.
    pub fn agent(agent_id: &str) -> Self {
        Self {
            agent_id: sanitize(agent_id),
            skill: None,
            user: None,
        }
    }

    /// Sets the skill.
    pub fn with_skill(mut self, skill: &str) -> Self {
        self.skill = Some(sanitize(skill));
        self
    }

    /// Sets the user.
    pub fn with_user(mut self, user: &str) -> Self {
        self.user = Some(sanitize(user));
        self
    }

    /// The same caller with every id sanitized; applied by the runtime to whatever it is given.
    pub fn sanitized(&self) -> Self {
        Self {
            agent_id: sanitize(&self.agent_id),
            skill: self.skill.as_deref().map(sanitize),
            user: self.user.as_deref().map(sanitize),
        }
    }
}

/// One request to run a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name as the caller wrote it (unknown or malformed names end as NotFound).
    pub tool: String,
    /// The arguments, validated against the tool's schema before anything runs.
    pub arguments: Value,
    /// Who is calling.
    pub caller: Caller,
    /// Unique id of this execution.
    pub execution_id: ExecutionId,
    /// Trace joining related calls.
    pub trace_id: TraceId,
    /// A tighter time limit than the tool's own, if wanted (the tool's limit still applies).
    #[serde(default, with = "opt_millis", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Do not wait for a person: a call that needs approval (and no grant covers) ends at once
    /// as RequiresConfirmation instead of waiting for an answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_wait: bool,
    /// The chain run this call is a step of. Set only by the runtime's chain engine, never
    /// read from the wire: a caller cannot file its call under somebody else's run.
    #[serde(skip)]
    pub chain: Option<ChainLink>,
}

/// Where a call stands in a chain run: recorded with the call's audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    /// The run (the chain call's execution id).
    pub run_id: String,
    /// The step's id.
    pub step: String,
    /// Which try this is, from 1.
    pub attempt: u32,
    /// The `for_each` item's position, for a step run once per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// How many chains deep the call is (1: a step of a chain an agent called).
    pub depth: u32,
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and produced a valid result.
    Success,
    /// The tool ran and failed, or produced an invalid result.
    Failed,
    /// The tool exceeded its time limit and was stopped.
    Timeout,
    /// The call was cancelled and its work stopped.
    Cancelled,
    /// A person must approve the call before it runs.
    RequiresConfirmation,
    /// The sandbox could not be set up for the tool's isolation level.
    SandboxError,
    /// Policy, license tier or operational mode refused the call.
    PermissionDenied,
    /// The arguments do not satisfy the tool's schema.
    ValidationError,
    /// No tool with that name is registered.
    NotFound,
}

impl ToolStatus {
    /// Every status.
    pub const ALL: &'static [ToolStatus] = &[
        ToolStatus::Success,
        ToolStatus::Failed,
        ToolStatus::Timeout,
        ToolStatus::Cancelled,
        ToolStatus::RequiresConfirmation,
        ToolStatus::SandboxError,
        ToolStatus::PermissionDenied,
        ToolStatus::ValidationError,
        ToolStatus::NotFound,
    ];

    /// The snake_case name used on the wire and in the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Failed => "failed",
            ToolStatus::Timeout => "timeout",
            ToolStatus::Cancelled => "cancelled",
            ToolStatus::RequiresConfirmation => "requires_confirmation",
            ToolStatus::SandboxError => "sandbox_error",
            ToolStatus::PermissionDenied => "permission_denied",
            ToolStatus::ValidationError => "validation_error",
            ToolStatus::NotFound => "not_found",
        }
    }

    /// Whether the tool's own work ran (as opposed to the call being stopped before it started).
    pub fn executed(self) -> bool {
        matches!(
            self,
            ToolStatus::Success | ToolStatus::Failed | ToolStatus::Timeout | ToolStatus::Cancelled
        )
    }
}

impl std::str::FromStr for ToolStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ToolStatus::ALL
            .iter()
            .copied()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown status {s:?}: expected one of {}",
                    ToolStatus::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }
}

impl fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Machine-readable error codes. Tools may add their own; these are the pipeline's.
pub struct ErrorCode;

impl ErrorCode {
    /// No such tool.
    pub const TOOL_NOT_FOUND: &'static str = "tool_not_found";
    /// Denied by the tool policy.
    pub const POLICY_DENIED: &'static str = "policy_denied";
    /// The license tier does not include the tool.
    pub const TIER_UNAVAILABLE: &'static str = "tier_unavailable";
    /// The tool may not run in the current operational mode.
    pub const MODE_FORBIDDEN: &'static str = "mode_forbidden";
    /// The tool is disabled.
    pub const TOOL_DISABLED: &'static str = "tool_disabled";
    /// A person must approve the call.
    pub const CONFIRMATION_REQUIRED: &'static str = "confirmation_required";
    /// Arguments break the schema.
    pub const INVALID_ARGUMENTS: &'static str = "invalid_arguments";
    /// The tool's schema cannot be compiled.
    pub const SCHEMA_ERROR: &'static str = "schema_error";
    /// Time limit reached.
    pub const TIMEOUT: &'static str = "timeout";
    /// Cancelled by the caller.
    pub const CANCELLED: &'static str = "cancelled";
    /// The tool reported a failure.
    pub const EXECUTION_FAILED: &'static str = "execution_failed";
    /// The output breaks the output schema.
    pub const INVALID_OUTPUT: &'static str = "invalid_output";
    /// The sandbox cannot provide the isolation the tool needs.
    pub const SANDBOX_UNAVAILABLE: &'static str = "sandbox_unavailable";
    /// The process could not be started.
    pub const SPAWN_FAILED: &'static str = "spawn_failed";
    /// The audit record could not be written, so the result is withheld.
    pub const AUDIT_UNAVAILABLE: &'static str = "audit_unavailable";
    /// A path names something outside the workspace roots.
    pub const PATH_OUTSIDE_WORKSPACE: &'static str = "path_outside_workspace";
    /// A batch stopped before reaching this call.
    pub const SKIPPED: &'static str = "skipped";
    /// The network failed under the call (refused or reset connection, unreachable host): a
    /// transient failure a chain step may retry.
    pub const NETWORK_ERROR: &'static str = "network_error";
}

/// Why a call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    /// Machine-readable code (see [`ErrorCode`]).
    pub code: String,
    /// What happened, for people and agents.
    pub message: String,
    /// Every schema violation, for validation errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
}

impl ToolError {
    /// An error with a code and message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            violations: Vec::new(),
        }
    }
}

/// What a tool produced: text or a JSON document.
pub type ToolOutput = Value;

/// Facts about an execution beyond its status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultMetadata {
    /// When the pipeline took the call (µs since the epoch).
    pub started_at: i64,
    /// When the result was final (µs since the epoch).
    pub completed_at: i64,
    /// `completed_at - started_at`, in µs.
    pub duration_us: i64,
    /// Size of the output passed on, in bytes.
    pub output_bytes: u64,
    /// Whether the output was cut at the tool's limit.
    pub truncated: bool,
    /// Execution facts from the executor (exit code, sandbox level, resource use, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub execution: Map<String, Value>,
}

/// The answer to a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call's execution id.
    pub execution_id: ExecutionId,
    /// The call's trace id.
    pub trace_id: TraceId,
    /// The tool name as called.
    pub tool: String,
    /// How the call ended.
    pub status: ToolStatus,
    /// The output, on success (and partial output on some failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// The policy decision and its explanation, when policy was consulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<PolicyDecision>,
    /// Timing, size and execution facts.
    pub metadata: ResultMetadata,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_ids_are_sanitized() {
        let c = Caller::agent("evil\nagent\u{1b}[31m").with_skill("  ");
        assert_eq!(c.agent_id, "evilagent[31m");
        assert_eq!(c.skill.as_deref(), Some("unknown"));
        assert_eq!(Caller::agent(&"x".repeat(500)).agent_id.len(), 128);
    }

    #[test]
    fn status_names_round_trip() {
        for s in ToolStatus::ALL {
            assert_eq!(s.as_str().parse::<ToolStatus>(), Ok(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    #[test]
    fn an_agent_id_is_checked_as_given() {
        for good in ["ci-bot", "agent 7", "ünïcode", &"x".repeat(128)] {
            assert_eq!(check_agent_id(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            " ci-bot",
            "ci-bot ",
            "a\nb",
            "tab\there",
            &"x".repeat(129),
        ] {
            let e = check_agent_id(bad).unwrap_err();
            assert!(
                e.ends_with("is not an agent id: use 1 to 128 printable characters"),
                "{e}"
            );
        }
    }
}
