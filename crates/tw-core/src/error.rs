//! The one error type of tw-core. Messages are lowercase and say what was wrong and where, because
//! they end up verbatim in CLI output, audit records and agent-facing tool results.

use crate::load::LoadError;
use crate::schema::SchemaError;

/// Everything tw-core can refuse.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// An identifier did not have the required shape.
    #[error("invalid {kind} {value:?}: {reason}")]
    InvalidName {
        /// Which identifier ("tool name", "group", ...).
        kind: &'static str,
        /// The offending input.
        value: String,
        /// What rule it broke.
        reason: &'static str,
    },
    /// A parameter or output schema was refused.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A definition file could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A definition's fields are inconsistent.
    #[error("invalid tool definition: {field}: {message}")]
    InvalidDefinition {
        /// The field at fault, as a dotted path.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tool with this name is already registered.
    #[error("tool {0:?} is already registered")]
    DuplicateTool(String),
    /// No tool with this name is registered.
    #[error("no tool named {0:?} is registered")]
    UnknownTool(String),
    /// A policy rule could not be compiled.
    #[error("invalid policy rule {rule:?}: {message}")]
    PolicyRule {
        /// The rule as written.
        rule: String,
        /// Why it was refused.
        message: String,
    },
    /// A command template could not be filled.
    #[error("command template: {0}")]
    Template(String),
}

/// Result alias for tw-core.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
