//! tw-sandbox is where Toolwarden touches the operating system on an agent's behalf: it is the
//! only crate that spawns processes ([`process`]), and the one door through which built-in tools
//! reach files ([`workspace`], [`fs`]).
//!
//! Architecture invariants:
//! - A tool never runs with less isolation than its definition asks for. A level this build cannot
//!   give is an error ([`SandboxError::Unsupported`]), never a silent downgrade.
//! - Every file path an agent supplies is resolved by the kernel beneath a workspace root's
//!   directory descriptor (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), and the
//!   operation then works on the descriptors it got. Nothing here canonicalizes a path and then
//!   opens it, so a component swapped for a symlink between check and use is still refused.
//!
//! Linux only.

pub mod error;
pub mod fs;
#[doc(hidden)]
pub mod helper;
pub mod process;
pub mod resolve;
pub mod workspace;

pub use error::{Result, SandboxError};
pub use process::{
    Doctor, EGRESS_PROXY_PORT, EGRESS_PROXY_URL, EgressPort, ExitInfo, FsView, Interactive,
    InteractiveExit, LevelSupport, OutputChunk, ProcessOutput, ProcessSpec, Protection,
    ResourceLimits, RunMetrics, RunOutcome, Sandbox, SandboxConfig, SelfTestCase,
};
pub use resolve::HostResolver;
pub use workspace::{PathError, Workspace, WsPath};
