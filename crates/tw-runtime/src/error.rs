//! The runtime's error type: what can stop the runtime from starting or an administrative operation
//! (adding a custom tool, ...) from completing. Tool calls never return these: a call always ends
//! in a `ToolResult` with a status.

/// Everything tw-runtime can refuse outside of a tool call.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No workspace root was configured.
    #[error(
        "no workspace root is configured: pass --workspace DIR or set `workspace` in the config"
    )]
    NoWorkspace,
    /// A domain rule was broken.
    #[error(transparent)]
    Core(#[from] tw_core::CoreError),
    /// The audit store failed.
    #[error(transparent)]
    Store(#[from] tw_store::StoreError),
    /// The sandbox or workspace could not be set up.
    #[error(transparent)]
    Sandbox(#[from] tw_sandbox::SandboxError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A spec without a command was given where a custom tool was expected.
    #[error("tool {0} has no `command`, so it cannot be added as a custom tool")]
    NotCustom(String),
    /// The policy could not be loaded.
    #[error("the policy is invalid, so nothing can be judged")]
    Policy(#[from] crate::policy::PolicyLoadError),
    /// The license tier allows no more custom tools.
    #[error(
        "the {tier} tier includes {limit} custom tools and {limit} are registered; remove one or upgrade the tier"
    )]
    TierLimit {
        /// The tier.
        tier: tw_core::LicenseTier,
        /// Its allowance.
        limit: usize,
    },
    /// A confirmation or grant operation was refused.
    #[error("{0}")]
    Confirmation(String),
    /// The capability catalog, the classifier's settings or a capability operation was refused.
    #[error("{0}")]
    Capabilities(String),
    /// An upstream MCP server could not be started or used.
    #[error("{0}")]
    Upstream(String),
    /// A token for the HTTP endpoint could not be made, read or issued.
    #[error("{0}")]
    Token(String),
    /// A SKILL.md to be saved has errors; nothing was written.
    #[error("SKILL.md for {skill} was not saved: {}", .diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    SkillInvalid {
        /// The skill.
        skill: String,
        /// Every problem, errors and warnings, with its line.
        diagnostics: Vec<tw_core::skill::Diagnostic>,
    },
    /// A custom tool tried to take a built-in tool's name, or a built-in was to be removed.
    #[error("tool {0} is built in; custom tools cannot replace or remove it")]
    BuiltinName(String),
}

/// Result alias for tw-runtime.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
