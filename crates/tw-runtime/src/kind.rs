//! How a registered tool runs, the one thing the registry holds besides its definition. Kept
//! apart from the services so that every one of them can name it without importing another.

use std::sync::Arc;

use tw_core::chain::Chain;
use tw_core::{CommandTemplate, RegisteredTool};

use crate::builtins::BuiltinTool;
use crate::builtins::exec::ProcessTool;
use crate::imported::UpstreamTool;

/// How a registered tool runs.
#[derive(Clone)]
pub enum ToolKind {
    /// Implemented in Rust, in-process.
    Builtin(Arc<dyn BuiltinTool>),
    /// A command run as a sandboxed child process.
    Custom(CommandTemplate),
    /// Built into Toolwarden, run as a sandboxed child process.
    Process(Arc<dyn ProcessTool>),
    /// Imported from another MCP server, called through its client (`crate::upstream`).
    Upstream(Arc<UpstreamTool>),
    /// A tool chain: its steps run as calls of their own (`crate::pipeline::chain`).
    Chain(Arc<ChainEntry>),
}

impl ToolKind {
    /// `builtin`, `custom`, `upstream` or `chain`.
    pub fn label(&self) -> &'static str {
        match self {
            ToolKind::Builtin(_) | ToolKind::Process(_) => "builtin",
            ToolKind::Custom(_) => "custom",
            ToolKind::Upstream(_) => "upstream",
            ToolKind::Chain(_) => "chain",
        }
    }

    /// Whether the tool ships with Toolwarden or came from an upstream server (and so cannot be
    /// replaced or removed as a custom tool).
    pub fn is_builtin(&self) -> bool {
        !matches!(self, ToolKind::Custom(_))
    }
}

impl std::fmt::Debug for ToolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A registered tool as the runtime holds it.
pub type Entry = RegisteredTool<ToolKind>;

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
