//! The one error type of tw-sandbox for setting up and running sandboxed work. Messages are
//! lowercase and say what was wrong and how to fix it, because they reach agents and operators
//! verbatim as `sandbox_error` results. File-tool refusals have their own type,
//! [`PathError`](crate::PathError), because each of them is an answer to the agent, not a fault.

use std::io;
use std::path::PathBuf;

use tw_core::IsolationLevel;

/// Everything that can stop the sandbox from being set up or a process from being run in it.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The requested isolation level cannot be provided by this host or build.
    #[error("isolation level {level} is not available: {reason}")]
    Unsupported {
        /// The level that was asked for.
        level: IsolationLevel,
        /// What is missing, and what can be done about it.
        reason: String,
    },
    /// The helper could not build the sandbox for a run; nothing ran.
    #[error("the {level} sandbox could not be set up: {step} failed: {error}")]
    Setup {
        /// The level that was being built.
        level: IsolationLevel,
        /// The step that failed.
        step: String,
        /// Why, and what to do about it.
        error: String,
    },
    /// The program could not be started.
    #[error("could not start program {program:?}: {source}")]
    Spawn {
        /// The program as given in the process spec.
        program: String,
        /// Why the kernel or the lookup refused it.
        source: io::Error,
    },
    /// The working directory given for a process is unusable.
    #[error("working directory {path:?} {reason}")]
    WorkingDirectory {
        /// The directory as given in the process spec.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Waiting for or reading from a running child failed.
    #[error("lost track of child process {pid}: {source}")]
    Child {
        /// The child's process id.
        pid: u32,
        /// The underlying error.
        source: io::Error,
    },
    /// A process spec was inconsistent.
    #[error("invalid process spec: {0}")]
    InvalidSpec(String),
    /// A workspace root could not be opened.
    #[error("workspace root {path:?} {reason}")]
    WorkspaceRoot {
        /// The root as configured.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result alias for tw-sandbox.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
