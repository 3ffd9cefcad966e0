//! Toolwarden's pure domain: what a tool is, how its arguments are checked, where it is registered,
//! how policy judges a call and how the tool set is exported to agents.
//!
//! Architecture invariant: this crate does no I/O. It never touches the file system, the network,
//! processes or a clock; time, ids and file contents are passed in. That keeps every rule here
//! testable as a plain function and lets the same code run in the desktop UI's wasm build later.

pub mod call;
pub mod capability;
pub mod chain;
pub mod command;
pub mod content;
mod de;
pub mod definition;
pub mod error;
pub mod export;
pub mod fingerprint;
pub mod load;
pub mod name;
pub mod output;
pub mod params;
pub mod policy;
pub mod redact;
pub mod registry;
pub mod schema;
pub mod shell;
pub mod skill;
pub mod summary;
pub mod target;
pub mod validate;

pub use call::{
    Caller, ChainLink, ErrorCode, ResultMetadata, ToolCall, ToolError, ToolOutput, ToolResult,
    ToolStatus,
};
pub use command::{CommandTemplate, OutputFormat};
pub use definition::{
    IsolationLevel, LicenseTier, OperationalMode, RateLimit, RiskLevel, ToolCategory,
    ToolConstraints, ToolDefinition, ToolSpec,
};
pub use error::{CoreError, Result};
pub use export::{ExportFormat, export_tool, export_tools};
pub use load::{DefinitionFormat, LoadError, load_tool_specs};
pub use name::{ExecutionId, ToolGroup, ToolName, TraceId};
pub use policy::{
    Decision, Layer, LayerVerdict, Policy, PolicyDecision, PolicyEnv, PolicyError, PolicyRule,
    RuleRef, Severity, ToolPolicy,
};
pub use registry::{RegisteredTool, ToolFilter, ToolRegistry};
pub use schema::{ParameterSchema, SchemaError, Violation};
pub use shell::{Parsed, Redirect, SimpleCommand};
pub use target::{
    DomainList, DomainPattern, Host, PathCase, PathList, TargetError, UrlTarget, expand_home,
    normalize_path, parse_host, parse_url,
};
pub use validate::ValidatorCache;
