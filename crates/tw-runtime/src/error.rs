//! The runtime's error type: what can stop the runtime from starting or an administrative
//! operation (adding a custom tool, answering a confirmation, ...) from completing. Tool calls
//! never return these: a call always ends in a `ToolResult` with a status.
//!
//! Every error has a [`kind`](RuntimeError::kind), and for invalid input the [`field`](
//! RuntimeError::field) at fault, so each front end maps errors in one place (the CLI to exit
//! codes, the admin API to HTTP statuses, the desktop app to IPC error codes) instead of guessing
//! from messages. Messages are lowercase and say what to fix; they are shown as they are.

use tw_core::CoreError;
use tw_store::StoreError;

/// What kind of failure an error is, for front ends to translate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The thing named does not exist (a tool, a confirmation, a skill, a grant...).
    NotFound,
    /// The change collides with what is there (a built-in's name, a taken name).
    Conflict,
    /// The request itself is wrong; [`RuntimeError::field`] says which part, when one does.
    Invalid,
    /// Allowed in general, not here: the license tier or policy refuses it.
    Denied,
    /// Something the operation needs is not available now (the store, a directory, the
    /// sandbox); trying again later may work.
    Unavailable,
    /// Toolwarden itself failed; the log says why.
    Internal,
}

impl ErrorKind {
    /// The kind's stable name (`not_found`, `conflict`, `invalid`, `denied`, `unavailable`,
    /// `internal`): the error code every front end reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Denied => "denied",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }

    /// Every kind, for tests that pin a front end's mapping.
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Invalid,
        ErrorKind::Denied,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    Core(#[from] CoreError),
    /// The audit store failed or refused the request.
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// A reload found the changed policy invalid; the one in force stays.
    #[error("the policy was not reloaded; the one in force stays: {0}")]
    PolicyNotReloaded(String),
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
    /// A SKILL.md to be saved has errors; nothing was written.
    #[error("SKILL.md for {skill} was not saved: {}", .diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    SkillInvalid {
        /// The skill.
        skill: String,
        /// Every problem, errors and warnings, with its line.
        diagnostics: Vec<tw_core::skill::Diagnostic>,
    },
    /// A custom tool tried to take a built-in tool's name.
    #[error("tool {0} is built in; choose another name")]
    BuiltinName(String),
    /// A tool was to be created under a name that is taken.
    #[error("tool {0} exists; replace it to change it")]
    ToolExists(String),
    /// A built-in tool was to be removed.
    #[error("tool {0} is built in; only custom tools can be removed")]
    BuiltinRemoval(String),
    /// What the request names does not exist (a skill, a custom tool to replace, ...).
    #[error("{message}")]
    NotFound {
        /// A stable name for what was missing (`unknown_skill`, `unknown_tool`).
        code: &'static str,
        /// Which, and where it was looked for.
        message: String,
    },
    /// What the request would create exists already (a chain of that name, ...).
    #[error("{message}")]
    Conflict {
        /// A stable name for the clash (`chain_exists`).
        code: &'static str,
        /// What exists, and where.
        message: String,
    },
    /// Part of the request is wrong.
    #[error("{message}")]
    Invalid {
        /// Which part, in the service's words (`duration`, `agent`, `reason`, ...).
        field: &'static str,
        /// What is wrong with it and what would do.
        message: String,
    },
    /// Something the operation needs cannot be used now (a directory that cannot be read, a
    /// server reached over HTTP asked to start).
    #[error("{0}")]
    Unavailable(String),
    /// Toolwarden itself failed (say, a row vanished from under a waiting call).
    #[error("{0}")]
    Internal(String),
}

impl RuntimeError {
    /// No skill of this name is in the skills directory `dir`.
    pub fn unknown_skill(name: &str, dir: &std::path::Path) -> Self {
        RuntimeError::NotFound {
            code: "unknown_skill",
            message: format!("no skill named {name:?} is in {}", dir.display()),
        }
    }

    /// No tool of this name (or no custom one, for `what` = "custom tool") is registered.
    pub fn unknown_tool(message: impl Into<String>) -> Self {
        RuntimeError::NotFound {
            code: "unknown_tool",
            message: message.into(),
        }
    }

    /// Part of the request is wrong: `field` says which.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        RuntimeError::Invalid {
            field,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RuntimeError::NotFound { .. } => ErrorKind::NotFound,
            RuntimeError::BuiltinName(_)
            | RuntimeError::BuiltinRemoval(_)
            | RuntimeError::ToolExists(_)
            | RuntimeError::Conflict { .. } => ErrorKind::Conflict,
            RuntimeError::TierLimit { .. } => ErrorKind::Denied,
            RuntimeError::NoWorkspace
            | RuntimeError::Config(_)
            | RuntimeError::Policy(_)
            | RuntimeError::PolicyNotReloaded(_)
            | RuntimeError::NotCustom(_)
            | RuntimeError::SkillInvalid { .. }
            | RuntimeError::Invalid { .. } => ErrorKind::Invalid,
            RuntimeError::Unavailable(_) => ErrorKind::Unavailable,
            RuntimeError::Internal(_) => ErrorKind::Internal,
            RuntimeError::Core(e) => core_kind(e),
            RuntimeError::Store(e) => store_kind(e),
            RuntimeError::Sandbox(e) => match e {
                tw_sandbox::SandboxError::WorkspaceRoot { .. }
                | tw_sandbox::SandboxError::WorkingDirectory { .. }
                | tw_sandbox::SandboxError::InvalidSpec(_) => ErrorKind::Invalid,
                _ => ErrorKind::Unavailable,
            },
        }
    }

    /// A stable machine-readable code: the kind's name, or a narrower one where front ends
    /// and scripts tell those apart (`unknown_tool`, `unknown_skill`, `builtin`, `exists`,
    /// `tier_limit`, `invalid_policy`).
    pub fn code(&self) -> &'static str {
        match self {
            RuntimeError::Core(CoreError::UnknownTool(_)) => "unknown_tool",
            RuntimeError::NotFound { code, .. } | RuntimeError::Conflict { code, .. } => code,
            RuntimeError::BuiltinName(_) | RuntimeError::BuiltinRemoval(_) => "builtin",
            RuntimeError::TierLimit { .. } => "tier_limit",
            RuntimeError::ToolExists(_) => "exists",
            RuntimeError::PolicyNotReloaded(_) => "invalid_policy",
            _ => self.kind().as_str(),
        }
    }

    /// For an invalid request, the part at fault, when one is.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            RuntimeError::Invalid { field, .. } => Some(field),
            RuntimeError::NoWorkspace => Some("workspace"),
            RuntimeError::NotCustom(_) => Some("command"),
            RuntimeError::BuiltinName(_) | RuntimeError::ToolExists(_) => Some("name"),
            RuntimeError::SkillInvalid { .. } => Some("text"),
            RuntimeError::Store(StoreError::InvalidQuery { field, .. }) => Some(field),
            RuntimeError::Core(CoreError::InvalidName { .. }) => Some("name"),
            RuntimeError::Core(CoreError::Schema(_)) => Some("parameters"),
            _ => None,
        }
    }
}

/// The kind of a domain error, for a front end that meets one outside a [`RuntimeError`] (a
/// definition file the CLI loads itself).
pub fn core_kind(e: &CoreError) -> ErrorKind {
    match e {
        CoreError::UnknownTool(_) => ErrorKind::NotFound,
        CoreError::DuplicateTool(_) => ErrorKind::Conflict,
        _ => ErrorKind::Invalid,
    }
}

/// The kind of a store error, for a front end that reads the store directly (audit pages).
pub fn store_kind(e: &StoreError) -> ErrorKind {
    match e {
        StoreError::InvalidQuery { .. }
        | StoreError::Invalid { .. }
        | StoreError::Encode { .. } => ErrorKind::Invalid,
        StoreError::NotADatabase { .. }
        | StoreError::NewerSchema { .. }
        | StoreError::Io { .. }
        | StoreError::Migrate { .. }
        | StoreError::WriterClosed
        | StoreError::WriteFailed(_)
        | StoreError::Database(_)
        | StoreError::Unreachable { .. }
        | StoreError::Export(_) => ErrorKind::Unavailable,
        StoreError::Sqlx(_) if e.is_busy() => ErrorKind::Unavailable,
        StoreError::Sqlx(_) | StoreError::Corrupt { .. } => ErrorKind::Internal,
    }
}

/// Result alias for tw-runtime.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_error_has_the_kind_and_field_front_ends_map() {
        let cases: Vec<(RuntimeError, ErrorKind, Option<&str>)> = vec![
            (
                RuntimeError::unknown_tool("no custom tool named \"x\" to replace"),
                ErrorKind::NotFound,
                None,
            ),
            (
                CoreError::UnknownTool("nope".into()).into(),
                ErrorKind::NotFound,
                None,
            ),
            (
                RuntimeError::BuiltinName("echo".into()),
                ErrorKind::Conflict,
                Some("name"),
            ),
            (
                RuntimeError::invalid("duration", "a grant must last some time"),
                ErrorKind::Invalid,
                Some("duration"),
            ),
            (
                StoreError::InvalidQuery {
                    field: "limit",
                    message: "1 to 1000".into(),
                }
                .into(),
                ErrorKind::Invalid,
                Some("limit"),
            ),
            (
                RuntimeError::TierLimit {
                    tier: tw_core::LicenseTier::Pro,
                    limit: 10,
                },
                ErrorKind::Denied,
                None,
            ),
            (
                StoreError::WriterClosed.into(),
                ErrorKind::Unavailable,
                None,
            ),
            (
                RuntimeError::Unavailable("the skills directory cannot be read".into()),
                ErrorKind::Unavailable,
                None,
            ),
            (
                RuntimeError::Internal("a row vanished".into()),
                ErrorKind::Internal,
                None,
            ),
        ];
        for (e, kind, field) in cases {
            assert_eq!((e.kind(), e.field()), (kind, field), "{e}");
        }
    }
}
