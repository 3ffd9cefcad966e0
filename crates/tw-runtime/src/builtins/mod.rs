//! Built-in tools: implemented in Rust, registered at start-up, governed like every other tool.
//!
//! A built-in only sees validated arguments and a context carrying the workspace and a cancellation
//! token; policy, limits, auditing and events are the pipeline's job, never the tool's.

mod browser;
pub mod exec;
mod fs;
mod git;
mod host;
pub mod jobs;
mod knowledge;
mod logs;
mod memory;
pub mod net;
mod sql;
mod system;
pub mod validate;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tw_core::{ToolDefinition, ToolStatus};
use tw_sandbox::Workspace;

/// What a built-in gets besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    /// The workspace roots all file access is confined to.
    pub workspace: Arc<Workspace>,
    /// Fires when the call is cancelled or times out; long-running tools check it.
    pub cancel: CancellationToken,
    /// The output budget for this call, in bytes.
    pub max_output_bytes: u64,
    /// For network tools: the gatekeeper and the rules this call is held to.
    pub net: Option<Arc<net::NetContext>>,
    /// The runtime's process runner, for a built-in that reads through a system program
    /// (`read_system_logs`' `journalctl`): every process a tool starts goes through it.
    pub sandbox: tw_sandbox::Sandbox,
    /// Who made the call, as the pipeline checked it: the memory tools keep each agent's (and
    /// skill's) entries apart by it.
    pub caller: tw_core::Caller,
}

/// Why a built-in did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The status to report (usually `Failed`; `PermissionDenied` for a path outside the workspace).
    pub status: ToolStatus,
    /// Machine-readable code.
    pub code: String,
    /// What happened.
    pub message: String,
}

impl ToolFailure {
    /// A plain failure.
    pub fn failed(code: &str, message: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Failed,
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// The future a built-in returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolFailure>> + Send + 'a>>;

/// A tool implemented in Rust.
pub trait BuiltinTool: Send + Sync + 'static {
    /// The tool's contract.
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError>;
    /// Runs the tool on validated arguments.
    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a>;
    /// Whether a call with these arguments has side effects, for a tool whose arguments decide
    /// it (modes and rules selecting `side_effects` then judge the call, not the tool); `None`
    /// keeps the definition's answer.
    fn side_effects(&self, _args: &Value) -> Option<bool> {
        None
    }
    /// What a call with these arguments would touch, shown to the person asked to approve it
    /// (a browser action: the page and the element, by its accessible name); `None` when the
    /// arguments say it all. Only looks: it runs before the call is approved.
    fn preview<'a>(&'a self, _ctx: &'a ToolContext, _args: &'a Value) -> Option<PreviewFuture<'a>> {
        None
    }
}

/// The runtime's store and clock, for the built-ins that keep state there (memory, knowledge).
#[derive(Clone)]
pub struct StoreAccess {
    /// The runtime's store.
    pub store: tw_store::Store,
    /// The runtime's clock: expiry and timestamps are judged by it.
    pub clock: Arc<dyn crate::clock::Clock>,
}

impl StoreAccess {
    /// The store and the time now, or a failure saying `what` needs a store this runtime lacks.
    pub(crate) fn of<'a>(
        access: Option<&'a Self>,
        what: &str,
    ) -> Result<(&'a tw_store::Store, i64), ToolFailure> {
        let a = access.ok_or_else(|| {
            ToolFailure::failed(
                tw_core::ErrorCode::EXECUTION_FAILED,
                format!("{what} needs the runtime's store, and this one has none"),
            )
        })?;
        Ok((&a.store, a.clock.now_us()))
    }
}

/// What [`BuiltinTool::preview`] returns.
pub type PreviewFuture<'a> = Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>>;

/// What the built-ins that depend on the config are made from (the default: a config that
/// sets none of it).
#[derive(Clone, Default)]
pub struct Settings {
    /// `validate_content`'s profiles, compiled; its definition lists them.
    pub profiles: Arc<crate::config::ContentProfiles>,
    /// `[system]`: what the host and log tools may look at.
    pub system: crate::config::SystemSettings,
    /// `[system.log_roots]`, opened.
    pub log_roots: Arc<crate::config::LogRoots>,
    /// `[messaging]`: `send_message`'s channels; its definition lists them.
    pub messaging: Arc<crate::config::MessagingSettings>,
    /// `[memory]`: what an agent's memory may hold.
    pub memory: crate::config::MemorySettings,
    /// `[databases]`: what `sql_query` may read; its definition lists them.
    pub databases: Arc<crate::config::DatabaseSettings>,
    /// The runtime's background jobs, which `exec_output`, `exec_wait` and `exec_kill` reach
    /// (none: they say so when called).
    pub jobs: Option<Arc<jobs::Jobs>>,
    /// Where the memory tools keep entries: the runtime's store (none: they say so when called).
    pub store: Option<StoreAccess>,
}

/// Every built-in tool this build ships, made from the config's settings.
pub fn all(s: &Settings) -> Result<Vec<Arc<dyn BuiltinTool>>, tw_core::CoreError> {
    let mut tools: Vec<Arc<dyn BuiltinTool>> = Vec::new();
    tools.extend(fs::tools());
    tools.extend(net::tools(Arc::clone(&s.messaging)));
    tools.extend(browser::tools());
    tools.extend(system::tools());
    tools.extend(host::tools(&s.system)?);
    tools.extend(logs::tools(&s.system, Arc::clone(&s.log_roots)));
    tools.extend(validate::tools(Arc::clone(&s.profiles)));
    tools.extend(memory::tools(s.store.clone(), s.memory));
    tools.extend(knowledge::tools(s.store.clone()));
    tools.extend(jobs::tools(s.jobs.clone()));
    tools.push(Arc::new(sql::SqlQuery::new(Arc::clone(&s.databases))));
    Ok(tools)
}

/// Deserializes validated arguments into a tool's argument struct. The schema has already passed,
/// so a failure here means the schema and the struct disagree: a bug, reported as such.
///
/// JSON Schema's `integer` is any number without a fraction, so `5.0` and `1e20` pass it while
/// serde's integer types refuse every float: such numbers are made integers first. Beyond `u64`
/// they saturate, which keeps their meaning: every integer argument of a built-in is a count, a
/// line or a limit, where more than `u64` holds means "all of it".
pub(crate) fn args<T: DeserializeOwned>(args: &Value) -> Result<T, ToolFailure> {
    let read = if has_whole_float(args) {
        T::deserialize(whole_numbers(args))
    } else {
        T::deserialize(args)
    };
    read.map_err(|e| {
        ToolFailure::failed(
            tw_core::ErrorCode::INVALID_ARGUMENTS,
            format!("arguments passed the schema but not the tool: {e}"),
        )
    })
}

/// A float without a fraction, which serde's integer types would refuse.
fn whole_float(n: &serde_json::Number) -> Option<f64> {
    n.as_f64()
        .filter(|f| n.is_f64() && f.is_finite() && f.fract() == 0.0)
}

/// Whether `v` holds a [`whole_float`] anywhere (most calls do not: nothing is copied then).
fn has_whole_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => whole_float(n).is_some(),
        Value::Array(items) => items.iter().any(has_whole_float),
        Value::Object(map) => map.values().any(has_whole_float),
        _ => false,
    }
}

/// `v` with every [`whole_float`] made an integer (saturating at `u64`'s and `i64`'s ends); other
/// values as they are.
fn whole_numbers(v: &Value) -> Value {
    match v {
        Value::Number(n) => match whole_float(n) {
            Some(f) => {
                // `as` saturates: exact below 2^64, `u64::MAX` (or `i64::MIN`) beyond.
                if f >= 0.0 {
                    Value::from(f as u64)
                } else {
                    Value::from(f as i64)
                }
            }
            None => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(whole_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), whole_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Runs blocking work (file reads, `/proc`) off the async workers and turns a lost task into a
/// failure naming `what` it was.
pub(crate) async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T, ToolFailure> + Send + 'static,
) -> Result<T, ToolFailure> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ToolFailure::failed(
            tw_core::ErrorCode::EXECUTION_FAILED,
            format!("{what} failed: {e}"),
        )
    })?
}

/// Turns a tool's typed output into the JSON result.
pub(crate) fn output<T: serde::Serialize>(value: &T) -> Result<Value, ToolFailure> {
    serde_json::to_value(value).map_err(|e| {
        ToolFailure::failed(
            tw_core::ErrorCode::EXECUTION_FAILED,
            format!("cannot encode output: {e}"),
        )
    })
}

/// Helpers for writing definitions as literals. A mistake in one is a build bug: registration
/// fails at start-up with the error, and the tests that start a runtime catch it.
pub(crate) mod lit {
    use serde_json::Value;
    use tw_core::{
        CoreError, IsolationLevel, ParameterSchema, ToolCategory, ToolDefinition, ToolGroup,
        ToolName,
    };

    /// A tool that runs inside the runtime (it starts no process: isolation `none`), with its
    /// output schema and whether it has side effects.
    pub(crate) fn in_runtime(
        name: &str,
        description: &str,
        category: ToolCategory,
        group: &str,
        params: Value,
        output: Value,
        side_effects: bool,
    ) -> Result<ToolDefinition, CoreError> {
        let mut d = ToolDefinition::new(
            self::name(name)?,
            description,
            category,
            self::group(group)?,
            self::params(params)?,
        );
        d.output_schema = self::output(output)?;
        d.constraints.isolation = IsolationLevel::None;
        d.constraints.side_effects = side_effects;
        Ok(d)
    }

    pub(crate) fn name(s: &str) -> Result<ToolName, CoreError> {
        ToolName::new(s)
    }

    pub(crate) fn group(s: &str) -> Result<ToolGroup, CoreError> {
        ToolGroup::new(s)
    }

    pub(crate) fn params(v: Value) -> Result<ParameterSchema, CoreError> {
        Ok(ParameterSchema::parameters(v)?)
    }

    pub(crate) fn output(v: Value) -> Result<Option<ParameterSchema>, CoreError> {
        Ok(Some(ParameterSchema::any(v)?))
    }
}
