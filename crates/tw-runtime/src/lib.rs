//! tw-runtime wires the pure domain (tw-core), the sandbox (tw-sandbox) and the audit store
//! (tw-store) into the governed pipeline every tool call goes through, and ships the built-in tools.
//!
//! Architecture invariant: this is the only place a tool runs. Transports (CLI, MCP, the desktop
//! app) build a `ToolCall`, hand it to `Runtime::execute` and relay the `ToolResult`; none of them
//! looks at policy, schemas or the audit log on its own.

pub mod batch;
pub mod builtins;
pub mod capabilities;
pub mod classifier;
pub mod clock;
pub mod config;
pub mod confirm;
mod custom;
pub mod error;
pub mod events;
pub mod live;
pub mod paths;
pub mod policy;
pub mod runtime;
mod sandboxed;
pub mod skills;
pub mod switches;
pub mod tokens;
pub mod upstream;

pub use batch::BatchMode;
pub use clock::{Clock, FixedClock, SystemClock};
pub use config::{
    Commands, Config, ConfigError, SandboxSettings, ServeSettings, SessionLimits, ToolOverride,
    UpstreamServer, UpstreamTransport,
};
pub use confirm::{Answer, GrantSpec, Remember, Who};
pub use error::{Result, RuntimeError};
pub use events::{EventBus, EventKind, ExecutionEvent, Received, Subscription};
pub use policy::PolicyLoadError;
pub use runtime::{
    DATABASE_FILE, MODE_SETTING, Runtime, RuntimeOptions, ToolKind, new_execution_id, new_trace_id,
};
pub use switches::ToolSwitchOutcome;
pub use tokens::TokenHolder;
pub use tw_sandbox::Doctor as SandboxDoctor;
pub use tw_sandbox::{Interactive, InteractiveExit};
pub use upstream::{ImportedTool, UpstreamClient, UpstreamStatus};
