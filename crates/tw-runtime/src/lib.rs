//! tw-runtime wires the pure domain (tw-core), the sandbox (tw-sandbox) and the audit store
//! (tw-store) into the governed pipeline every tool call goes through, and ships the built-in tools.
//!
//! Architecture invariant: this is the only place a tool runs. Transports (CLI, MCP, the desktop
//! app) build a `ToolCall`, hand it to `Runtime::execute` and relay the `ToolResult`; none of them
//! looks at policy, schemas or the audit log on its own.
//!
//! The crate is a thin facade (`runtime`) over services that each own their state and their
//! rules: the call `pipeline`, `tools` (custom tools, tier switches), `settings` (policy, tier,
//! mode), `confirm` (confirmations and grants), `skills` (skills, capabilities, overrides),
//! `upstream` (imported MCP tools) and `tokens`. They share `shared` (store, clock, events,
//! registry, workspace, sandbox), follow other processes' changes through `changes` and files
//! through `watch`, and never import the facade. Every outbound connection goes through `net`.

pub mod browser;
pub mod builtins;
pub mod capabilities;
pub mod chains;
mod changes;
pub mod classifier;
pub mod clock;
pub mod config;
pub mod confirm;
mod custom;
pub mod error;
pub mod events;
mod ids;
mod imported;
pub mod kind;
pub mod live;
mod metrics;
pub mod net;
mod owner;
pub mod paths;
pub mod pipeline;
pub mod policy;
pub mod runtime;
mod sandboxed;
pub mod settings;
mod shared;
pub mod skills;
pub mod switches;
mod team;
mod telemetry;
#[cfg(test)]
mod test_store;
/// The team store other crates' tests run on when the suite asks for one
/// (`TOOLWARDEN_TEST_STORE=postgres`): `suite_database` gives each a fresh database.
#[cfg(feature = "testing")]
pub mod testing {
    pub use tw_store::testing::{on_team_store, suite_database};
}
pub mod tokens;
pub mod tools;
pub mod upstream;
mod watch;
mod watchdog;

pub use changes::SETTINGS_REFRESH;

/// The log filter a front end starts from when `RUST_LOG` is not set: `level` for everything,
/// except chromiumoxide's handler, which warns of every DevTools event newer than its protocol
/// tables (harmless: such events are skipped) and would fill the log while a browser runs.
pub fn log_filter(level: &str) -> String {
    format!("{level},chromiumoxide::handler=error")
}
pub use clock::{Clock, FixedClock, SystemClock};
pub use config::{
    Commands, Config, ConfigError, SandboxSettings, ServeSettings, SessionLimits, ToolOverride,
    UpstreamServer, UpstreamTransport,
};
pub use confirm::{Answer, Answered, ConfirmationService, GrantSpec, Remember, Who};
pub use error::{ErrorKind, Result, RuntimeError};
pub use events::{EventBus, EventKind, ExecutionEvent, Received, Subscription};
pub use ids::{new_execution_id, new_trace_id, span_id};
pub use kind::{Entry, ToolKind};
pub use pipeline::{BatchMode, Pipeline};
pub use policy::PolicyLoadError;
pub use runtime::{DATABASE_FILE, Runtime, RuntimeOptions};
pub use settings::{AutomaticSwitch, MODE_SETTING, PolicyState, SettingsService};
pub use skills::{OverrideChange, SkillService};
pub use switches::ToolSwitchOutcome;
pub use tokens::{TokenHolder, TokenService};
pub use tools::ToolService;
pub use tw_sandbox::Doctor as SandboxDoctor;
pub use tw_sandbox::{Interactive, InteractiveExit};
pub use upstream::{ImportedTool, UpstreamClient, UpstreamService, UpstreamStatus};
