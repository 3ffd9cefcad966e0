//! The desktop app's IPC boundary: every type that crosses between the Tauri shell (`src-tauri`,
//! package tw-desktop) and the Leptos UI (`ui`, package tw-ui), and the names of the commands and
//! events that carry them. Both sides compile this crate, so a change to the wire is a change to
//! one type that both sides see; it depends on serde alone so it builds for wasm32.
//!
//! Conventions: camelCase field names on the wire; timestamps are `*_at` fields in microseconds
//! since the Unix epoch; every command answers `Result<T, IpcError>`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod chains;

pub use chains::{
    ChainCheck, ChainDetail, ChainDiagnostic, ChainList, ChainParams, ChainProblem, ChainRun,
    ChainRunParams, ChainRunStep, ChainRunsParams, ChainStepInfo, ChainStepUpdate, ChainSummary,
    ChainTextParams, RunChainParams,
};

/// The commands the shell exposes, by name (`invoke(NAME, params)`), so the UI and the shell's
/// capability file cannot drift from the handlers.
pub mod commands {
    /// [`crate::ListToolsParams`] -> `Vec<`[`crate::ToolSummary`]`>`.
    pub const LIST_TOOLS: &str = "list_tools";
    /// [`crate::ToolParams`] -> [`crate::ToolDetail`].
    pub const GET_TOOL: &str = "get_tool";
    /// [`crate::SetToolEnabledParams`] -> [`crate::ToolSummary`].
    pub const SET_TOOL_ENABLED: &str = "set_tool_enabled";
    /// no parameters -> `Vec<`[`crate::Confirmation`]`>` (pending, oldest first).
    pub const LIST_CONFIRMATIONS: &str = "list_confirmations";
    /// [`crate::AnswerParams`] -> [`crate::AnswerResponse`].
    pub const ANSWER_CONFIRMATION: &str = "answer_confirmation";
    /// [`crate::AuditQueryParams`] -> [`crate::AuditPage`].
    pub const QUERY_AUDIT: &str = "query_audit";
    /// [`crate::AuditRecordParams`] -> [`crate::AuditDetail`].
    pub const GET_AUDIT_RECORD: &str = "get_audit_record";
    /// [`crate::CancelParams`] -> `bool` (whether a running call was found).
    pub const CANCEL_EXECUTION: &str = "cancel_execution";
    /// no parameters -> [`crate::Settings`].
    pub const GET_SETTINGS: &str = "get_settings";
    /// [`crate::SetModeParams`] -> [`crate::Settings`].
    pub const SET_MODE: &str = "set_mode";
    /// [`crate::SaveToolParams`] -> [`crate::ToolSummary`].
    pub const SAVE_CUSTOM_TOOL: &str = "save_custom_tool";
    /// [`crate::ToolParams`] -> `()`.
    pub const REMOVE_CUSTOM_TOOL: &str = "remove_custom_tool";
    /// [`crate::RunToolParams`] -> [`crate::RunResult`].
    pub const RUN_TOOL: &str = "run_tool";
    /// no parameters -> `Vec<`[`crate::Grant`]`>` (in force or expired, not revoked).
    pub const LIST_GRANTS: &str = "list_grants";
    /// [`crate::GrantParams`] -> `bool` (whether it was in force).
    pub const REVOKE_GRANT: &str = "revoke_grant";
    /// [`crate::ExportParams`] -> [`crate::ExportResult`].
    pub const EXPORT_AUDIT: &str = "export_audit";
    /// [`crate::ReportParams`] -> [`crate::UsageReport`].
    pub const AUDIT_REPORT: &str = "audit_report";
    /// no parameters -> `()`: closes the window after the person confirmed it
    /// ([`crate::events::CLOSE_REQUESTED`]).
    pub const CLOSE_WINDOW: &str = "close_window";
    /// no parameters -> `()`: the UI's first view is drawn with its data; the shell logs how
    /// long its start took (once).
    pub const REPORT_INTERACTIVE: &str = "report_interactive";
    /// no parameters -> [`crate::Settings`]: re-reads the config and policy files now.
    pub const RELOAD_POLICY: &str = "reload_policy";
    /// no parameters -> `Vec<`[`crate::SkillSummary`]`>` (the skills directory, by name).
    pub const LIST_SKILLS: &str = "list_skills";
    /// [`crate::SkillParams`] -> [`crate::SkillDetail`].
    pub const GET_SKILL: &str = "get_skill";
    /// [`crate::SkillOverrideParams`] -> [`crate::SkillDetail`] (the skill as it is after).
    pub const SET_SKILL_OVERRIDE: &str = "set_skill_override";
    /// [`crate::SkillTextParams`] -> `Vec<`[`crate::SkillDiagnostic`]`>`: checks a SKILL.md
    /// without saving it.
    pub const CHECK_SKILL: &str = "check_skill";
    /// [`crate::SkillTextParams`] -> [`crate::SkillDetail`]: saves a SKILL.md (creating the
    /// skill if it is new). A text with an error is refused, and nothing is written: the error's
    /// `field` is `/text` and its message holds every diagnostic, one per line.
    pub const SAVE_SKILL: &str = "save_skill";
    /// no parameters -> [`crate::ChainList`].
    pub const LIST_CHAINS: &str = "list_chains";
    /// [`crate::ChainParams`] -> [`crate::ChainDetail`].
    pub const GET_CHAIN: &str = "get_chain";
    /// [`crate::ChainTextParams`] -> [`crate::ChainCheck`]: checks a chain file's text against
    /// the tools registered now, without saving it.
    pub const CHECK_CHAIN: &str = "check_chain";
    /// [`crate::ChainTextParams`] -> `Vec<String>` (the chains saved): saves a chain file into
    /// the chains directory. A text with an error is refused, and nothing is written: the
    /// error's `field` is `/text`.
    pub const SAVE_CHAIN: &str = "save_chain";
    /// [`crate::RunChainParams`] -> `String`, the run's id (its call's execution id), as soon as
    /// the call has started; the run goes on, reported by [`crate::events::EXECUTION`] events
    /// and read with [`GET_CHAIN_RUN`]. Cancelled with [`CANCEL_EXECUTION`].
    pub const RUN_CHAIN: &str = "run_chain";
    /// [`crate::ChainRunsParams`] -> `Vec<`[`crate::ChainRun`]`>`, newest first.
    pub const LIST_CHAIN_RUNS: &str = "list_chain_runs";
    /// [`crate::ChainRunParams`] -> [`crate::ChainRun`].
    pub const GET_CHAIN_RUN: &str = "get_chain_run";

    /// Every command, for the capability file and its test.
    pub const ALL: [&str; 32] = [
        LIST_TOOLS,
        GET_TOOL,
        SET_TOOL_ENABLED,
        LIST_CONFIRMATIONS,
        ANSWER_CONFIRMATION,
        QUERY_AUDIT,
        GET_AUDIT_RECORD,
        CANCEL_EXECUTION,
        GET_SETTINGS,
        SET_MODE,
        SAVE_CUSTOM_TOOL,
        REMOVE_CUSTOM_TOOL,
        RUN_TOOL,
        LIST_GRANTS,
        REVOKE_GRANT,
        EXPORT_AUDIT,
        AUDIT_REPORT,
        CLOSE_WINDOW,
        REPORT_INTERACTIVE,
        RELOAD_POLICY,
        LIST_SKILLS,
        GET_SKILL,
        SET_SKILL_OVERRIDE,
        CHECK_SKILL,
        SAVE_SKILL,
        LIST_CHAINS,
        GET_CHAIN,
        CHECK_CHAIN,
        SAVE_CHAIN,
        RUN_CHAIN,
        LIST_CHAIN_RUNS,
        GET_CHAIN_RUN,
    ];
}

/// The events the shell emits to the UI.
pub mod events {
    /// A [`crate::LiveEvent`]: something happened to a call (started, progress, finished...).
    pub const EXECUTION: &str = "tw://execution";
    /// A [`crate::ConfirmationsChanged`]: the pending confirmations changed (in any process on
    /// the data directory).
    pub const CONFIRMATIONS: &str = "tw://confirmations";
    /// A [`crate::ConfirmationsChanged`]: the window was asked to close while calls wait for
    /// approval; the UI asks the person, and closes it with
    /// [`crate::commands::CLOSE_WINDOW`].
    pub const CLOSE_REQUESTED: &str = "tw://close-requested";
    /// A [`crate::BrowserFrame`]: the latest picture of a browser session's page (in any process
    /// on the data directory).
    pub const BROWSER_FRAME: &str = "tw://browser-frame";
}

/// Why a command failed. `code` is stable and machine-readable; `message` is for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpcError {
    /// `not_found`, `invalid`, `conflict`, `unavailable` (something the backend needs cannot be
    /// read now, such as the skills directory), `internal`.
    pub code: String,
    /// What went wrong, in words.
    pub message: String,
    /// Where, for errors about one field of the input (a JSON pointer such as `/parameters`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl IpcError {
    /// An error with a code and message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            field: None,
        }
    }
}

impl std::fmt::Display for IpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} (at {field})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Filters for the tools console; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListToolsParams {
    /// Case-insensitive substring of the name or description.
    pub search: Option<String>,
}

/// One tool as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSummary {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `file_system`, `network`, `code_execution`...
    pub category: String,
    /// Its group (`fs`, `exec`, `custom`...).
    pub group: String,
    /// `low`, `medium`, `high`.
    pub risk: String,
    /// The least license tier that includes it.
    pub tier: String,
    /// Whether its definition asks a person before each call.
    pub requires_confirmation: bool,
    /// Built in, or added by an administrator.
    pub builtin: bool,
    /// Whether it may be called at the current tier (not switched off for it).
    pub enabled: bool,
    /// The tiers it is switched off for.
    pub disabled_tiers: Vec<String>,
    /// What policy decides for the desktop's own caller: `allow`, `deny` or `ask`.
    pub decision: String,
    /// Why, in one line.
    pub reason: String,
}

/// Names one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolParams {
    /// The tool.
    pub name: String,
    /// Explain policy's decision for this agent id instead of the app's own caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// Adds a custom tool, or replaces one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveToolParams {
    /// The tool spec as JSON (the same shape `toolwarden tools add` reads: the definition's fields
    /// and a `command` section). Errors point into it (`field` = `/parameters`...).
    pub spec: Value,
    /// The tool being edited, if this replaces one (it may be renamed); `None` adds a new tool
    /// and refuses a name already taken.
    #[serde(default)]
    pub original_name: Option<String>,
}

/// Runs one call of a tool from the app ("try it").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunToolParams {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
}

/// How a call from the app ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The call's execution id (its audit record's).
    pub execution_id: String,
    /// `success`, `permission_denied`, `validation_error`...
    pub status: String,
    /// The output, redacted.
    pub output: Option<Value>,
    /// The error, for calls that did not succeed.
    pub error: Option<String>,
    /// Where in the arguments the error is, for invalid arguments (a JSON pointer).
    pub error_field: Option<String>,
    /// Wall time, µs.
    pub duration_us: i64,
}

/// A standing approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// Its id.
    pub id: String,
    /// The tool it covers.
    pub tool: String,
    /// `exact`, `pattern` or `tool`.
    pub scope: String,
    /// The arguments (exact) or patterns it matches; null for the whole tool.
    pub arguments: Value,
    /// Only calls from this agent; absent: any.
    pub caller: Option<String>,
    /// Only calls under this skill; absent: any.
    pub skill: Option<String>,
    /// When and by whom it was given.
    pub created_at: i64,
    /// Who gave it.
    pub created_by: String,
    /// When it lapses; absent: never.
    pub expires_at: Option<i64>,
}

/// Names one grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantParams {
    /// The grant.
    pub id: String,
}

/// Exports the audit rows a filter selects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportParams {
    /// The viewer's filters (cursor and limit are ignored: every matching row is written).
    pub filter: AuditQueryParams,
    /// `jsonl` or `csv`.
    pub format: String,
}

/// Where an export went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportResult {
    /// The file written.
    pub path: String,
    /// Rows in it.
    pub rows: u64,
}

/// The usage report's window and bucket size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReportParams {
    /// From (µs since the epoch); default: 7 days before `untilAt`.
    pub since_at: Option<i64>,
    /// Until (µs since the epoch); default: now.
    pub until_at: Option<i64>,
}

/// Calls per tool over time, and denials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// The window.
    pub since_at: i64,
    /// The window's end.
    pub until_at: i64,
    /// Width of one bucket, µs.
    pub bucket_us: i64,
    /// One entry per bucket start, oldest first.
    pub buckets: Vec<i64>,
    /// Calls per bucket for the busiest tools (and `other`), busiest first.
    pub series: Vec<UsageSeries>,
    /// Denied calls per bucket (policy, tier, mode, confirmation).
    pub denied: Vec<u64>,
    /// Every call per bucket.
    pub total: Vec<u64>,
    /// How long the report took in the shell, milliseconds.
    pub query_ms: f64,
}

/// One tool's calls per bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageSeries {
    /// The tool (or `other`).
    pub tool: String,
    /// Calls per bucket.
    pub counts: Vec<u64>,
    /// All its calls in the window.
    pub total: u64,
}

/// One tool in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetail {
    /// What the list shows.
    pub summary: ToolSummary,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// The JSON Schema of its output, if it declares one.
    pub output_schema: Option<Value>,
    /// Its constraints (time limit, output cap, side effects, isolation).
    pub constraints: Value,
    /// The policy explanation for the chosen caller (the app's own by default), layer by layer.
    pub explanation: Vec<LayerLine>,
    /// The caller the explanation is for.
    pub explained_for: String,
    /// For a custom tool, its whole spec (definition and command) as the edit form loads it.
    pub spec: Option<Value>,
}

/// One layer of a policy decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerLine {
    /// `tools`, `license`, `mode`, `exec`, `arguments`, `access`, `confirmation`...
    pub layer: String,
    /// `allow`, `deny`, `ask`.
    pub decision: String,
    /// The rule that decided, if one did, with its source (`file:line`).
    pub rule: Option<String>,
    /// Why.
    pub reason: String,
}

/// Switches a tool on or off for a license tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetToolEnabledParams {
    /// The tool.
    pub name: String,
    /// The tier (`core`, `pro`, `teams`, `enterprise`).
    pub tier: String,
    /// On or off.
    pub enabled: bool,
}

/// A call waiting for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    /// The request's id.
    pub id: String,
    /// The held call.
    pub execution_id: String,
    /// The tool called.
    pub tool: String,
    /// The calling agent.
    pub caller: String,
    /// The skill the call was made under.
    pub skill: Option<String>,
    /// The arguments, redacted.
    pub arguments: Value,
    /// JSON pointers of arguments worth a second look (paths, commands, URLs).
    pub risky: Vec<String>,
    /// The tool's risk level.
    pub risk: String,
    /// Why policy asked.
    pub reason: String,
    /// What the call would touch, as the tool saw it (a browser action: `page`, `title` and
    /// `elements`, each element's role and accessible name).
    #[serde(default)]
    pub context: Option<Value>,
    /// The decision trace that led to asking.
    pub explanation: Vec<LayerLine>,
    /// When it was asked.
    pub created_at: i64,
    /// When it lapses unanswered.
    pub expires_at: i64,
}

/// What a person said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Let this call run.
    Approve,
    /// Refuse it.
    Deny,
}

/// An answer to a confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerParams {
    /// The request.
    pub id: String,
    /// Approve or deny.
    pub decision: Decision,
    /// With an approval: also allow later calls like it for this long (a grant).
    #[serde(default)]
    pub remember_secs: Option<u64>,
    /// Which later calls the grant covers: `exact` (the same arguments; the default) or `tool`
    /// (every call of the tool).
    #[serde(default)]
    pub remember_scope: Option<String>,
    /// Whether the grant covers every caller rather than only this call's.
    #[serde(default)]
    pub any_caller: bool,
    /// A note for the audit log.
    #[serde(default)]
    pub note: Option<String>,
}

/// What answering did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerResponse {
    /// `approved`, `denied`, or why it could not be answered (`expired`, `already_answered`).
    pub outcome: String,
    /// The grant made with a remembered approval.
    pub grant_id: Option<String>,
}

/// Filters and position for one page of the audit log; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditQueryParams {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only calls that ended this way (`success`, `permission_denied`, ...).
    pub status: Option<String>,
    /// Only this caller.
    pub caller: Option<String>,
    /// Only this skill.
    pub skill: Option<String>,
    /// Only calls at or after this time.
    pub since_at: Option<i64>,
    /// Only calls before this time.
    pub until_at: Option<i64>,
    /// Only calls whose tool, arguments, error or output contain this text.
    pub text: Option<String>,
    /// Continue below this row (a previous page's `nextCursor`).
    pub cursor: Option<i64>,
    /// Rows per page (1 to 1000; default 50).
    pub limit: Option<u32>,
}

/// One page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// The rows.
    pub rows: Vec<AuditSummary>,
    /// Pass as `cursor` for the next (older) page; absent on the last.
    pub next_cursor: Option<i64>,
    /// Set when a text search ended this page at its scan window rather than after `limit`
    /// matches, while older rows remain: every row from the cursor down to this id was searched,
    /// and `nextCursor` (the same id) searches on below it. Such a page may hold few rows or none
    /// and still not be the last ("searched down to row N").
    #[serde(default)]
    pub scanned_to: Option<i64>,
    /// How long the query took in the shell, milliseconds.
    pub query_ms: f64,
}

/// One audit row as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditSummary {
    /// Its position in the log.
    pub id: i64,
    /// The call's execution id.
    pub execution_id: String,
    /// When the call was taken.
    pub started_at: i64,
    /// The tool.
    pub tool: String,
    /// How it ended.
    pub status: String,
    /// The calling agent.
    pub caller: String,
    /// The skill it was made under.
    pub skill: Option<String>,
    /// The policy decision, when policy was reached.
    pub decision: Option<String>,
    /// Wall time, µs.
    pub duration_us: i64,
    /// The error, for calls that did not succeed.
    pub error: Option<String>,
}

/// Names one audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecordParams {
    /// The call's execution id.
    pub execution_id: String,
}

/// One audit row in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditDetail {
    /// What the table shows.
    pub summary: AuditSummary,
    /// The arguments, redacted.
    pub arguments: Value,
    /// The output, redacted.
    pub output: Option<Value>,
    /// The decision trace.
    pub explanation: Vec<LayerLine>,
    /// Execution facts: sandbox id and level, exit status, CPU time, peak memory...
    pub execution: Value,
}

/// Names a running call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelParams {
    /// The call's execution id.
    pub execution_id: String,
}

/// Something that happened to a call, as the live view shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveEvent {
    /// The call.
    pub execution_id: String,
    /// The tool.
    pub tool: String,
    /// `started`, `awaiting_confirmation`, `progress`, `completed`...
    pub kind: String,
    /// The final status, on the last event of a call.
    pub status: Option<String>,
    /// When.
    pub at: i64,
    /// A line of output or other detail.
    pub detail: Option<String>,
    /// On a `chain_step` event: the step and where it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_step: Option<ChainStepUpdate>,
}

/// A browser session's page as a call left it, for the live view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserFrame {
    /// The process whose browser it is.
    pub pid: u32,
    /// Whose session: the agent, and ` / ` and the skill when there is one.
    pub session: String,
    /// The call that left the page so.
    pub execution_id: String,
    /// That call's tool.
    pub tool: String,
    /// The page's address.
    pub url: String,
    /// When the picture was taken (µs since the epoch).
    pub at: i64,
    /// The picture as a `data:` URL.
    pub image: String,
}

/// Sent when the pending confirmations change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationsChanged {
    /// How many are pending now.
    pub pending: usize,
}

/// Switches the operational mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    /// `normal`, `alert`, `degraded`, `lockdown`, `recovery`.
    pub mode: String,
}

/// The settings page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// The operational mode.
    pub mode: String,
    /// Every mode there is, in order of strictness.
    pub modes: Vec<String>,
    /// The license tier.
    pub tier: String,
    /// The data directory (audit log, settings).
    pub data_dir: String,
    /// The policy files and whether they loaded.
    pub policy_files: Vec<PolicyFile>,
    /// Set while the last change to the policy was refused (the previous policy stays in force).
    pub policy_error: Option<PolicyError>,
    /// The HTTP endpoint this app hosts for agents (MCP) and scripts (the admin API).
    #[serde(default)]
    pub endpoint: Endpoint,
    /// Set while the mode in force is one the resource watcher switched to by itself.
    #[serde(default)]
    pub automatic: Option<AutomaticSwitch>,
}

/// A switch the resource watcher made, while its mode is in force (shown as a banner until a
/// person changes the mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomaticSwitch {
    /// The mode it left.
    pub from: String,
    /// The mode it set.
    pub to: String,
    /// What it measured, one line per condition.
    pub reasons: Vec<String>,
    /// When (µs since the epoch).
    pub at: i64,
}

/// The app's HTTP endpoint: where agents connect, or why it is not running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The MCP URL (`http://127.0.0.1:PORT/mcp`) while it runs.
    pub mcp_url: Option<String>,
    /// The file holding the administrator's token.
    pub token_file: Option<String>,
    /// Why it is not running (the address is taken, say by `toolwarden serve`).
    pub error: Option<String>,
}

/// A refused policy change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyError {
    /// When the change was refused.
    pub at: i64,
    /// What is wrong, with file:line.
    pub errors: String,
}

/// One policy file's load status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFile {
    /// Where it is.
    pub path: String,
    /// Whether it is in force.
    pub loaded: bool,
    /// Why not, if not.
    pub error: Option<String>,
}

/// One skill as the skills page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSummary {
    /// Its name (its folder's).
    pub name: String,
    /// What it is for, when its SKILL.md gives it.
    pub description: Option<String>,
    /// Whether a manifest is in force (a skill with errors has none, and reaches nothing).
    pub loaded: bool,
    /// Errors in its SKILL.md.
    pub errors: usize,
    /// Warnings in its SKILL.md, and problems resolving it (inheritance).
    pub warnings: usize,
    /// Tools it may use now (manifest, inherited, capability and override together).
    pub tool_count: usize,
    /// Administrators' overrides for it (additions and removals).
    pub overrides: usize,
    /// Calls made under it, from the audit log.
    pub calls: u64,
    /// Of those, refused by its envelope (`skill_denied`).
    pub skill_denied: u64,
}

/// Names one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillParams {
    /// The skill.
    pub name: String,
}

/// One problem in a SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillDiagnostic {
    /// `error` or `warning`.
    pub severity: String,
    /// 1-based line in the file.
    pub line: usize,
    /// The field at fault (`tools[1].access_level`), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// One tool a skill may use, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillToolEntry {
    /// The tool (or `group:NAME`).
    pub name: String,
    /// The highest access level the skill may use it at: `standard`, `elevated`, `admin`.
    pub access_level: String,
    /// Where it came from, in words (`capability filesystem_read (static 1.00)`).
    pub provenance: String,
    /// `manifest`, `inherited`, `capability` or `override`.
    pub provenance_kind: String,
    /// Whether a tool of this name is registered (a manifest may name one that is not).
    pub registered: bool,
    /// Its rate limit and domain rules under the skill, in words (empty: none).
    pub limits: String,
}

/// An administrator's override of one tool for one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillOverrideEntry {
    /// The tool.
    pub tool: String,
    /// `add` or `remove`.
    pub action: String,
    /// For an addition, the highest level the skill may use the tool at.
    pub access_level: Option<String>,
    /// Why, as the administrator wrote it.
    pub reason: Option<String>,
    /// When.
    pub created_at: i64,
    /// Who.
    pub created_by: String,
}

/// One skill in full: its SKILL.md and what it resolves to now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillDetail {
    /// Its name.
    pub name: String,
    /// Its SKILL.md.
    pub path: String,
    /// What it is for, when its SKILL.md gives it.
    pub description: Option<String>,
    /// Whether a manifest is in force.
    pub loaded: bool,
    /// The SKILL.md as it is on disk.
    pub text: String,
    /// Its problems, in file order.
    pub diagnostics: Vec<SkillDiagnostic>,
    /// Problems resolving it (an inherited skill that is not loaded, a cycle), in words.
    pub problems: Vec<String>,
    /// Its capability names (own and inherited).
    pub permissions: Vec<String>,
    /// Permissions the capability catalog does not know (they reach no tool).
    pub unknown_permissions: Vec<String>,
    /// Overrides that name a tool that is not registered.
    pub dangling_overrides: Vec<String>,
    /// The tools it may use now, by name.
    pub tools: Vec<SkillToolEntry>,
    /// The administrators' overrides for it.
    pub overrides: Vec<SkillOverrideEntry>,
}

/// Adds a tool to a skill, removes one from it, or clears such an override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillOverrideParams {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// `add`, `remove` or `clear`.
    pub action: String,
    /// For `add`: the highest access level (`standard`, the default, `elevated`, `admin`).
    #[serde(default)]
    pub access_level: Option<String>,
    /// For `add` and `remove`: why, for the admin log.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A skill's SKILL.md text, to check or to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillTextParams {
    /// The skill (its folder's name; its `name` field must equal it).
    pub name: String,
    /// The whole SKILL.md.
    pub text: String,
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_wire_is_camel_case_and_round_trips() {
        let params = AnswerParams {
            id: "c1".into(),
            decision: Decision::Approve,
            remember_secs: Some(600),
            remember_scope: None,
            any_caller: false,
            note: None,
        };
        let wire = serde_json::to_value(&params).unwrap();
        assert_eq!(
            wire,
            json!({"id": "c1", "decision": "approve", "rememberSecs": 600, "rememberScope": null, "anyCaller": false, "note": null})
        );
        assert_eq!(
            serde_json::from_value::<AnswerParams>(wire).unwrap(),
            params
        );
        let q: AuditQueryParams =
            serde_json::from_value(json!({"tool": "exec", "sinceAt": 5})).unwrap();
        assert_eq!(
            q,
            AuditQueryParams {
                tool: Some("exec".into()),
                since_at: Some(5),
                ..AuditQueryParams::default()
            }
        );
    }

    #[test]
    fn skill_types_are_camel_case_on_the_wire() {
        let params: SkillOverrideParams = serde_json::from_value(
            json!({"skill": "research", "tool": "http_fetch", "action": "add", "accessLevel": "elevated"}),
        )
        .unwrap();
        assert_eq!(
            params,
            SkillOverrideParams {
                skill: "research".into(),
                tool: "http_fetch".into(),
                action: "add".into(),
                access_level: Some("elevated".into()),
                reason: None,
            }
        );
        let entry = SkillToolEntry {
            name: "list_directory".into(),
            access_level: "standard".into(),
            provenance: "capability filesystem_read (static 1.00)".into(),
            provenance_kind: "capability".into(),
            registered: true,
            limits: String::new(),
        };
        let wire = serde_json::to_value(&entry).unwrap();
        assert_eq!(
            wire,
            json!({
                "name": "list_directory",
                "accessLevel": "standard",
                "provenance": "capability filesystem_read (static 1.00)",
                "provenanceKind": "capability",
                "registered": true,
                "limits": ""
            })
        );
        assert_eq!(
            serde_json::from_value::<SkillToolEntry>(wire).unwrap(),
            entry
        );
        let summary = SkillSummary {
            name: "research".into(),
            description: None,
            loaded: true,
            errors: 0,
            warnings: 1,
            tool_count: 3,
            overrides: 0,
            calls: 4,
            skill_denied: 1,
        };
        assert_eq!(
            serde_json::to_value(&summary).unwrap(),
            json!({
                "name": "research", "description": null, "loaded": true, "errors": 0,
                "warnings": 1, "toolCount": 3, "overrides": 0, "calls": 4, "skillDenied": 1
            })
        );
    }

    #[test]
    fn every_command_name_is_listed_once() {
        let mut names = commands::ALL.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), commands::ALL.len());
    }
}
