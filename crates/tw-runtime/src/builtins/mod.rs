//! Built-in tools: implemented in Rust, registered at start-up, governed like every other tool.
//!
//! A built-in only sees validated arguments and a context carrying the workspace and a cancellation
//! token; policy, limits, auditing and events are the pipeline's job, never the tool's.

pub mod exec;
mod fs;
mod system;

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
}

/// Every built-in tool this build ships.
pub fn all() -> Vec<Arc<dyn BuiltinTool>> {
    let mut tools: Vec<Arc<dyn BuiltinTool>> = Vec::new();
    tools.extend(fs::tools());
    tools.extend(system::tools());
    tools
}

/// Deserializes validated arguments into a tool's argument struct. The schema has already passed,
/// so a failure here means the schema and the struct disagree: a bug, reported as such.
pub(crate) fn args<T: DeserializeOwned>(args: &Value) -> Result<T, ToolFailure> {
    T::deserialize(args).map_err(|e| {
        ToolFailure::failed(
            tw_core::ErrorCode::INVALID_ARGUMENTS,
            format!("arguments passed the schema but not the tool: {e}"),
        )
    })
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
    use tw_core::{CoreError, ParameterSchema, ToolGroup, ToolName};

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
