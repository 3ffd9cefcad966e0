//! The runtime's configuration file (TOML). Parsing is pure: the caller reads the file and passes the
//! text, and gets either a complete `Config` or an error with file:line:column. A config that does not
//! parse refuses to start; nothing half-applies.
//!
//! Policy lives in policy documents: the config's own `[policy]` table (the same format as a
//! policy file, see `tw_core::policy::doc`) and any files named by `policy_files`. They are
//! compiled together by the runtime (`crate::policy`), which keeps the config's text so rules can
//! be quoted with their line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use tw_core::policy::PolicyDoc;
use tw_core::{LicenseTier, OperationalMode, ToolName};
use tw_store::Synchronous;

mod databases;
mod memory;
mod messaging;
mod network;
mod system;
mod telemetry;
mod validation;
mod watchdog;

pub use databases::{Database, DatabaseSettings, DatabaseSource};
pub use memory::MemorySettings;
pub use messaging::{
    Channel, EmailChannel, MessagingSettings, SmtpServer, recipient_globs, smtp_url_problem,
};
pub use network::{NetworkSettings, SearchProvider, SearchSettings, Secret};
pub use system::{JOURNAL, LogRoot, LogRoots, SystemSettings};
pub use telemetry::{HeaderValue, TelemetrySettings};
pub use validation::{ContentProfiles, ProfileSettings, SchemaSource, ValidationSettings};
pub use watchdog::WatchdogSettings;

/// A configuration file that could not be used, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Per-tool adjustments made by the administrator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// `false` disables the tool: every call is denied with `tool_disabled`.
    pub enabled: Option<bool>,
    /// Overrides the definition's `requires_confirmation`.
    pub requires_confirmation: Option<bool>,
}

/// The whole runtime configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    /// The file's text (the `[policy]` table's rules are quoted from it).
    pub text: String,
    /// The license tier this installation runs.
    pub license_tier: LicenseTier,
    /// The operational mode at start.
    pub mode: OperationalMode,
    /// Workspace roots for file tools and custom tools' working directory.
    pub workspace: Vec<PathBuf>,
    /// Data directory (audit log, custom tools), when set in the file.
    pub data_dir: Option<PathBuf>,
    /// The skills directory (one folder with a SKILL.md per skill), when set in the file.
    pub skills_dir: Option<PathBuf>,
    /// The chains directory (chain files, `*.yaml`), when set in the file.
    pub chains_dir: Option<PathBuf>,
    /// How many compiled schema validators to keep.
    pub schema_cache_capacity: usize,
    /// Audit durability.
    pub audit_synchronous: Synchronous,
    /// `[audit] keep_days`: records older than this are archived (`<data>/archives`) and then
    /// removed; none: kept for good.
    pub audit_keep_days: Option<u32>,
    /// `[store] url`: a PostgreSQL team store shared by several replicas instead of the data
    /// directory's SQLite file (`TOOLWARDEN_STORE_URL` overrides it).
    pub store_url: Option<String>,
    /// The `[policy]` table, if the file has one.
    pub policy: Option<PolicyDoc>,
    /// Further policy files, compiled together with `[policy]`.
    pub policy_files: Vec<PathBuf>,
    /// Per-tool overrides, by tool name.
    pub tools: BTreeMap<String, ToolOverride>,
    /// How the sandbox is set up (`[sandbox]`).
    pub sandbox: SandboxSettings,
    /// The commands the exec tools run (`[commands]`).
    pub commands: Commands,
    /// The capability catalog (`capabilities_file`); `None`: the built-in one.
    pub capabilities_file: Option<PathBuf>,
    /// How newly registered tools are classified into capabilities (`[classifier]`).
    pub classifier: ClassifierSettings,
    /// Where `toolwarden serve` (and the desktop app) listen for HTTP (`[serve]`).
    pub serve: ServeSettings,
    /// Other MCP servers whose tools are imported (`[upstream.NAME]`), by name.
    pub upstream: BTreeMap<String, UpstreamServer>,
    /// `[network]`: the egress gatekeeper's limits, names, secrets and search provider.
    pub network: NetworkSettings,
    /// `[validation]`: the profiles `validate_content` checks content against.
    pub validation: ValidationSettings,
    /// `[system]`: what the host-inspection tools may look at.
    pub system: SystemSettings,
    /// `[messaging]`: the channels `send_message` may post to.
    pub messaging: MessagingSettings,
    /// `[memory]`: how much an agent may keep in its memory.
    pub memory: MemorySettings,
    /// `[databases]`: the databases `sql_query` may read.
    pub databases: DatabaseSettings,
    /// `[watchdog]`: when the resource watcher switches the mode by itself.
    pub watchdog: WatchdogSettings,
    /// `[telemetry]`: where the spans and metrics go over OTLP (nowhere by default).
    pub telemetry: TelemetrySettings,
}

/// `[upstream.NAME]`: another MCP server whose tools are registered as `NAME__tool` and called
/// through the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    /// The name tools are prefixed with (lowercase letters, digits, `_`; no `__`).
    pub name: String,
    /// How to reach it.
    pub transport: UpstreamTransport,
}

/// How an upstream server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A program Toolwarden starts in its sandbox and talks to over stdin/stdout.
    Stdio {
        /// The program (looked up in `PATH`, or a path).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment on top of the sandbox's minimal one.
        env: BTreeMap<String, String>,
        /// Working directory (default: the first workspace root).
        cwd: Option<PathBuf>,
        /// Isolation: standard (default), strict or restricted; never none.
        isolation: tw_core::IsolationLevel,
        /// At strict and above: the hosts it may reach, through the egress proxy and its
        /// gatekeeper (`network = true` is every host, `*`); `None` is no network at all. At
        /// standard it keeps the host's network.
        network: Option<tw_core::target::DomainList>,
        /// At strict and above: paths it may read besides the system's.
        read_only: Vec<PathBuf>,
        /// At strict and above: paths it may change.
        read_write: Vec<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers sent with every request (an `Authorization`, say).
        headers: BTreeMap<String, String>,
    },
}

/// The default address of the HTTP endpoint (MCP and the admin API).
pub const DEFAULT_LISTEN: std::net::SocketAddr = std::net::SocketAddr::V4(
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 8790),
);

/// `[serve]`: the HTTP endpoint. Loopback only unless `allow_non_loopback` says otherwise; the
/// `Host` and `Origin` allowlists start with the loopback names and grow with these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    /// The address to listen on (port 0: any free port).
    pub listen: std::net::SocketAddr,
    /// Whether a non-loopback `listen` is allowed (off: refused before binding).
    pub allow_non_loopback: bool,
    /// Further `Host` names (or `host:port`) requests may be addressed to.
    pub allowed_hosts: Vec<String>,
    /// Further browser origins (`scheme://host:port`) requests may come from.
    pub allowed_origins: Vec<String>,
    /// How long MCP sessions live and how many one token may hold.
    pub sessions: SessionLimits,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            allow_non_loopback: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sessions: SessionLimits::default(),
        }
    }
}

/// The bounds on the endpoint's MCP sessions (`[serve] session_idle_timeout_secs` and
/// `max_sessions_per_token`), enforced by tw-mcp's session table. An agent that connects all day
/// holds one session; one that forgets to close its sessions, or dies without closing them, must
/// not grow the server without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// A session with no request open (no call running, no notification stream held) for this
    /// long is closed; the client's next request gets 404 and it starts a new session.
    pub idle_timeout: std::time::Duration,
    /// Sessions one token (the administrator's, or one agent token) may have open at once; a
    /// new one past it is refused with 429 and no open session is closed to make room.
    pub max_per_token: usize,
}

impl SessionLimits {
    /// The default idle timeout: a client that went away without closing is forgotten after
    /// half an hour; one that keeps its notification stream open is never idle.
    pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);
    /// The default cap per token: far above what one agent (or a few sharing a token) keeps
    /// open, low enough that a leaking client is stopped early.
    pub const DEFAULT_MAX_PER_TOKEN: usize = 64;
    /// The longest idle timeout accepted: a week.
    pub const MAX_IDLE_TIMEOUT_SECS: u64 = 7 * 24 * 3600;
    /// The largest cap per token accepted.
    pub const MAX_PER_TOKEN: usize = 10_000;
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_per_token: Self::DEFAULT_MAX_PER_TOKEN,
        }
    }
}

/// `[classifier]`: an OpenAI-compatible chat endpoint (a local Ollama, a hosted API) that
/// classifies newly registered tools into capabilities. Without an endpoint, or when it fails,
/// a deterministic classifier does it; registration never waits longer than `timeout_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifierSettings {
    /// The API's base URL, e.g. `http://127.0.0.1:11434/v1` (`/chat/completions` is appended).
    pub endpoint: Option<String>,
    /// The model to ask.
    pub model: String,
    /// The environment variable holding the API key, if the endpoint wants one.
    pub api_key_env: Option<String>,
    /// How long one classification may take before the fallback is used.
    pub timeout_ms: u64,
    /// Capabilities a classifier gives with less confidence than this are not used to resolve
    /// skills' `permissions` (they are still recorded).
    pub min_confidence: f32,
}

impl Default for ClassifierSettings {
    fn default() -> Self {
        Self {
            endpoint: None,
            model: "llama3.2".to_owned(),
            api_key_env: None,
            timeout_ms: 5_000,
            min_confidence: 0.5,
        }
    }
}

/// `[sandbox]`: where the helper is, the uid strict tools run as when Toolwarden is root, and
/// extra read-only paths for every strict tool (an interpreter or toolchain outside `/usr`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// The helper executable (default: next to the running program).
    pub helper: Option<PathBuf>,
    /// `uid` and `gid` for strict tools when running as root.
    pub ids: Option<(u32, u32)>,
    /// Extra paths strict tools may read and execute.
    pub read_only: Vec<PathBuf>,
    /// How many sandboxes are kept built ahead of their calls, for each of the last few shapes
    /// of call (default `tw_sandbox::DEFAULT_POOL_SIZE`; 0 builds each on the spot).
    pub pool: Option<usize>,
}

/// `[commands]`: what `run_tests` and `run_linter` run, and which environment variables an
/// agent may pass to `exec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commands {
    /// The test command (default: detected from the workspace).
    pub test: Option<Vec<String>>,
    /// The lint command (default: detected from the workspace).
    pub lint: Option<Vec<String>>,
    /// Variable names (a trailing `*` matches a prefix) an agent may set, beyond the built-in
    /// list.
    pub env_allow: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            source: None,
            text: String::new(),
            license_tier: LicenseTier::Core,
            mode: OperationalMode::Normal,
            workspace: Vec::new(),
            data_dir: None,
            skills_dir: None,
            chains_dir: None,
            schema_cache_capacity: tw_core::validate::DEFAULT_CAPACITY,
            audit_synchronous: Synchronous::Normal,
            audit_keep_days: None,
            store_url: None,
            policy: None,
            policy_files: Vec::new(),
            tools: BTreeMap::new(),
            sandbox: SandboxSettings::default(),
            commands: Commands::default(),
            capabilities_file: None,
            classifier: ClassifierSettings::default(),
            serve: ServeSettings::default(),
            upstream: BTreeMap::new(),
            network: NetworkSettings::default(),
            validation: ValidationSettings::default(),
            system: SystemSettings::default(),
            messaging: MessagingSettings::default(),
            memory: MemorySettings::default(),
            databases: DatabaseSettings::default(),
            watchdog: WatchdogSettings::default(),
            telemetry: telemetry::defaults(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    license_tier: Option<LicenseTier>,
    mode: Option<OperationalMode>,
    #[serde(default)]
    workspace: Vec<String>,
    data_dir: Option<String>,
    skills_dir: Option<String>,
    chains_dir: Option<String>,
    schema_cache_capacity: Option<Spanned<usize>>,
    policy: Option<PolicyDoc>,
    #[serde(default)]
    policy_files: Vec<String>,
    audit: Option<AuditDoc>,
    store: Option<StoreDoc>,
    #[serde(default)]
    tools: BTreeMap<Spanned<String>, ToolOverride>,
    sandbox: Option<SandboxDoc>,
    commands: Option<CommandsDoc>,
    capabilities_file: Option<String>,
    classifier: Option<ClassifierDoc>,
    serve: Option<ServeDoc>,
    #[serde(default)]
    upstream: BTreeMap<Spanned<String>, UpstreamDoc>,
    network: Option<network::NetworkDoc>,
    validation: Option<validation::ValidationDoc>,
    system: Option<system::SystemDoc>,
    messaging: Option<messaging::MessagingDoc>,
    memory: Option<memory::MemoryDoc>,
    watchdog: Option<watchdog::WatchdogDoc>,
    telemetry: Option<telemetry::TelemetryDoc>,
    #[serde(default)]
    databases: BTreeMap<Spanned<String>, databases::DatabaseDoc>,
}

/// `network = true | false | ["host", "*.domain"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum UpstreamNetworkDoc {
    All(bool),
    Hosts(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpstreamDoc {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    isolation: Option<Spanned<tw_core::IsolationLevel>>,
    network: Option<Spanned<UpstreamNetworkDoc>>,
    #[serde(default)]
    read_only: Vec<String>,
    #[serde(default)]
    read_write: Vec<String>,
    url: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeDoc {
    listen: Option<Spanned<String>>,
    #[serde(default)]
    allow_non_loopback: bool,
    #[serde(default)]
    allowed_hosts: Vec<Spanned<String>>,
    #[serde(default)]
    allowed_origins: Vec<Spanned<String>>,
    session_idle_timeout_secs: Option<Spanned<u64>>,
    max_sessions_per_token: Option<Spanned<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassifierDoc {
    endpoint: Option<Spanned<String>>,
    model: Option<String>,
    api_key_env: Option<String>,
    timeout_ms: Option<Spanned<u64>>,
    min_confidence: Option<Spanned<f32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxDoc {
    helper: Option<String>,
    uid: Option<u32>,
    gid: Option<u32>,
    #[serde(default)]
    read_only: Vec<String>,
    pool: Option<Spanned<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandsDoc {
    test: Option<Spanned<Vec<String>>>,
    lint: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    env_allow: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditDoc {
    synchronous: Option<SyncDoc>,
    keep_days: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreDoc {
    url: Option<Spanned<String>>,
}

/// Refuses a team store URL that is not PostgreSQL's, saying what is expected.
pub fn check_store_url(url: &str) -> std::result::Result<(), String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(())
    } else {
        Err(format!(
            "the team store URL must start with postgres:// or postgresql:// (got {:?})",
            url.split_once("://").map_or(url, |(scheme, _)| scheme)
        ))
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum SyncDoc {
    Normal,
    Full,
}

/// The longest name a config section gives something agents pick by name (a validation
/// profile, a log root): it is an enum value in a tool's schema and a word in messages.
const MAX_SHORT_NAME: usize = 64;
/// The most sandboxes `[sandbox] pool` may keep built ahead per shape of call.
const MAX_SANDBOX_POOL: usize = 16;

/// Whether `n` is such a name: 1 to [`MAX_SHORT_NAME`] lowercase letters, digits, `_` and `-`,
/// starting with a letter.
fn short_name(n: &str) -> bool {
    n.len() <= MAX_SHORT_NAME
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn expand(path: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = match (path.strip_prefix("~/"), path == "~", home) {
        (Some(rest), _, Some(h)) => h.join(rest),
        (_, true, Some(h)) => h.to_path_buf(),
        _ => PathBuf::from(path),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        base.join(expanded)
    }
}

impl Config {
    /// Parses a config file's text. `path` is used for error messages and to resolve relative
    /// paths; `home` expands a leading `~/`.
    pub fn parse(text: &str, path: &Path, home: Option<&Path>) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let at = |offset: usize| tw_core::load::line_col(text, offset);
        let err = |offset: Option<usize>, message: String| {
            let (line, column) = offset.map(at).unzip();
            ConfigError {
                file: file.clone(),
                line,
                column,
                message,
            }
        };
        let doc: Doc = toml::from_str(text)
            .map_err(|e| err(e.span().map(|s| s.start), e.message().trim().to_owned()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = Config {
            source: Some(path.to_path_buf()),
            ..Config::default()
        };
        if let Some(t) = doc.license_tier {
            config.license_tier = t;
        }
        if let Some(m) = doc.mode {
            config.mode = m;
        }
        config.workspace = doc
            .workspace
            .iter()
            .map(|w| expand(w, base, home))
            .collect();
        config.data_dir = doc.data_dir.as_deref().map(|d| expand(d, base, home));
        config.skills_dir = doc.skills_dir.as_deref().map(|d| expand(d, base, home));
        config.chains_dir = doc.chains_dir.as_deref().map(|d| expand(d, base, home));
        if let Some(cap) = doc.schema_cache_capacity {
            if *cap.get_ref() == 0 {
                return Err(err(
                    Some(cap.span().start),
                    "schema_cache_capacity must be at least 1".into(),
                ));
            }
            config.schema_cache_capacity = cap.into_inner();
        }
        config.policy = doc.policy;
        config.policy_files = doc
            .policy_files
            .iter()
            .map(|f| expand(f, base, home))
            .collect();
        config.text = text.to_owned();
        if let Some(audit) = doc.audit {
            if let Some(s) = audit.synchronous {
                config.audit_synchronous = match s {
                    SyncDoc::Normal => Synchronous::Normal,
                    SyncDoc::Full => Synchronous::Full,
                };
            }
            if let Some(days) = audit.keep_days {
                if *days.get_ref() == 0 {
                    return Err(err(
                        Some(days.span().start),
                        "[audit] keep_days must be at least 1 (leave it out to keep every record)"
                            .into(),
                    ));
                }
                config.audit_keep_days = Some(days.into_inner());
            }
        }
        if let Some(url) = doc.store.and_then(|s| s.url) {
            check_store_url(url.get_ref())
                .map_err(|m| err(Some(url.span().start), format!("[store] url: {m}")))?;
            config.store_url = Some(url.into_inner());
        }
        if let Some(sb) = doc.sandbox {
            config.sandbox = SandboxSettings {
                helper: sb.helper.as_deref().map(|h| expand(h, base, home)),
                ids: match (sb.uid, sb.gid) {
                    (None, None) => None,
                    (Some(u), g) => Some((u, g.unwrap_or(u))),
                    (None, Some(g)) => Some((g, g)),
                },
                read_only: sb.read_only.iter().map(|p| expand(p, base, home)).collect(),
                pool: match sb.pool {
                    Some(n) if *n.get_ref() > MAX_SANDBOX_POOL => {
                        return Err(err(
                            Some(n.span().start),
                            format!(
                                "sandbox.pool is {}; at most {MAX_SANDBOX_POOL} sandboxes are \
                                 kept ready per shape of call (each idle one holds one or two \
                                 small processes)",
                                n.get_ref()
                            ),
                        ));
                    }
                    n => n.map(Spanned::into_inner),
                },
            };
            if config.sandbox.ids.is_some_and(|(u, g)| u == 0 || g == 0) {
                return Err(err(
                    None,
                    "sandbox.uid and sandbox.gid must not be 0: strict tools never run as root"
                        .into(),
                ));
            }
        }
        if let Some(c) = doc.commands {
            for cmd in [&c.test, &c.lint].into_iter().flatten() {
                if cmd.get_ref().first().is_none_or(|p| p.is_empty()) {
                    return Err(err(
                        Some(cmd.span().start),
                        "commands: a command is a non-empty argv list whose first element names \
                         the program"
                            .into(),
                    ));
                }
            }
            config.commands = Commands {
                test: c.test.map(Spanned::into_inner),
                lint: c.lint.map(Spanned::into_inner),
                env_allow: c.env_allow,
            };
        }
        config.capabilities_file = doc
            .capabilities_file
            .as_deref()
            .map(|f| expand(f, base, home));
        if let Some(c) = doc.classifier {
            let mut settings = ClassifierSettings::default();
            if let Some(e) = c.endpoint {
                let url = e.get_ref().trim_end_matches('/');
                if !(url.starts_with("http://") || url.starts_with("https://"))
                    || url.contains(char::is_whitespace)
                {
                    return Err(err(
                        Some(e.span().start),
                        format!(
                            "classifier.endpoint must be an http:// or https:// URL, like \
                             \"http://127.0.0.1:11434/v1\"; got {:?}",
                            e.get_ref()
                        ),
                    ));
                }
                settings.endpoint = Some(url.to_owned());
            }
            if let Some(m) = c.model {
                settings.model = m;
            }
            settings.api_key_env = c.api_key_env;
            if let Some(t) = c.timeout_ms {
                if !(100..=600_000).contains(t.get_ref()) {
                    return Err(err(
                        Some(t.span().start),
                        "classifier.timeout_ms must be between 100 and 600000".into(),
                    ));
                }
                settings.timeout_ms = t.into_inner();
            }
            if let Some(m) = c.min_confidence {
                if !(0.0..=1.0).contains(m.get_ref()) {
                    return Err(err(
                        Some(m.span().start),
                        "classifier.min_confidence must be between 0 and 1".into(),
                    ));
                }
                settings.min_confidence = m.into_inner();
            }
            config.classifier = settings;
        }
        if let Some(d) = doc.serve {
            config.serve = serve_settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        for (name, d) in doc.upstream {
            let server = upstream_server(name.get_ref(), name.span().start, d, base, home)
                .map_err(|(at, m)| err(Some(at), m))?;
            config.upstream.insert(server.name.clone(), server);
        }
        if let Some(d) = doc.network {
            config.network = network::settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        if let Some(d) = doc.validation {
            config.validation =
                validation::settings(d, base, home).map_err(|(at, m)| err(Some(at), m))?;
        }
        if let Some(d) = doc.messaging {
            config.messaging = messaging::settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        config.databases =
            databases::settings(doc.databases, base, home).map_err(|(at, m)| err(Some(at), m))?;
        if let Some(d) = doc.memory {
            config.memory = memory::settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        if let Some(d) = doc.watchdog {
            config.watchdog = watchdog::settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        if let Some(d) = doc.telemetry {
            config.telemetry = telemetry::settings(d).map_err(|(at, m)| err(Some(at), m))?;
        }
        if let Some(d) = doc.system {
            config.system = system::settings(d, base, home).map_err(|(at, m)| err(Some(at), m))?;
        }
        for (name, o) in doc.tools {
            ToolName::new(name.get_ref())
                .map_err(|e| err(Some(name.span().start), format!("tools: {e}")))?;
            config.tools.insert(name.into_inner(), o);
        }
        Ok(config)
    }
}

/// Checks one `[upstream.NAME]`: a name tools can be prefixed with, exactly one of `command`
/// and `url`, options that fit the transport, isolation at least standard.
fn upstream_server(
    name: &str,
    at: usize,
    d: UpstreamDoc,
    base: &Path,
    home: Option<&Path>,
) -> std::result::Result<UpstreamServer, (usize, String)> {
    let bad = |m: String| (at, format!("upstream.{name}: {m}"));
    let ok_name = name.len() <= 24
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.contains("__")
        && !name.ends_with('_');
    if !ok_name {
        return Err(bad(
            "the name prefixes its tools (NAME__tool): use 1 to 24 lowercase letters, digits and \
             single underscores, starting with a letter"
                .into(),
        ));
    }
    let transport = match (d.command, d.url) {
        (Some(_), None) if !d.headers.is_empty() => {
            return Err(bad("headers are for an url".into()));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(bad("command is empty".into()));
            }
            let isolation = match d.isolation {
                None => tw_core::IsolationLevel::Standard,
                Some(i) if *i.get_ref() == tw_core::IsolationLevel::None => {
                    return Err((
                        i.span().start,
                        format!(
                            "upstream.{name}: isolation \"none\" would run it inside \
                             Toolwarden; use standard, strict or restricted"
                        ),
                    ));
                }
                Some(i) => i.into_inner(),
            };
            let network = match d.network {
                None => None,
                Some(n) => {
                    let at = n.span().start;
                    match n.into_inner() {
                        // No host listed is no network, not an open list.
                        UpstreamNetworkDoc::All(false) => None,
                        UpstreamNetworkDoc::Hosts(hosts) if hosts.is_empty() => None,
                        UpstreamNetworkDoc::All(true) => Some(vec!["*".to_owned()]),
                        UpstreamNetworkDoc::Hosts(_)
                            if isolation == tw_core::IsolationLevel::Standard =>
                        {
                            return Err((
                                at,
                                format!(
                                    "upstream.{name}: network lists hosts for a server at \
                                     strict or restricted isolation; at standard it keeps the \
                                     host's network, so set isolation = \"strict\""
                                ),
                            ));
                        }
                        UpstreamNetworkDoc::Hosts(hosts) => Some(hosts),
                    }
                    .map(|hosts| {
                        tw_core::target::DomainList::parse(&hosts)
                            .map_err(|e| (at, format!("upstream.{name}.network: {e}")))
                    })
                    .transpose()?
                }
            };
            UpstreamTransport::Stdio {
                command,
                args: d.args,
                env: d.env,
                cwd: d.cwd.as_deref().map(|c| expand(c, base, home)),
                isolation,
                network,
                read_only: d.read_only.iter().map(|p| expand(p, base, home)).collect(),
                read_write: d.read_write.iter().map(|p| expand(p, base, home)).collect(),
            }
        }
        (None, Some(url)) => {
            let u = url.get_ref();
            if !(u.starts_with("http://") || u.starts_with("https://"))
                || u.contains(char::is_whitespace)
            {
                return Err((
                    url.span().start,
                    format!("upstream.{name}: url must be an http:// or https:// URL; got {u:?}"),
                ));
            }
            let stdio_only = !d.args.is_empty()
                || !d.env.is_empty()
                || d.cwd.is_some()
                || d.isolation.is_some()
                || d.network.is_some()
                || !d.read_only.is_empty()
                || !d.read_write.is_empty();
            if stdio_only {
                return Err(bad(
                    "args, env, cwd, isolation, network, read_only and read_write are for a \
                     command; an url takes headers"
                        .into(),
                ));
            }
            UpstreamTransport::Http {
                url: url.into_inner(),
                headers: d.headers,
            }
        }
        (Some(_), Some(_)) => return Err(bad("give either command or url, not both".into())),
        (None, None) => return Err(bad("give command (a program to start) or url".into())),
    };
    Ok(UpstreamServer {
        name: name.to_owned(),
        transport,
    })
}

/// Checks `[serve]`: an address that parses, host names without schemes, origins with one,
/// session limits in range.
fn serve_settings(d: ServeDoc) -> std::result::Result<ServeSettings, (usize, String)> {
    let mut s = ServeSettings {
        allow_non_loopback: d.allow_non_loopback,
        ..ServeSettings::default()
    };
    if let Some(l) = d.listen {
        s.listen = l.get_ref().parse().map_err(|_| {
            (
                l.span().start,
                format!(
                    "serve.listen must be an address with a port, like \"127.0.0.1:8790\"; got {:?}",
                    l.get_ref()
                ),
            )
        })?;
        if !s.listen.ip().is_loopback() && !s.allow_non_loopback {
            return Err((
                l.span().start,
                format!(
                    "serve.listen {} is not a loopback address: anyone who can reach it could \
                     try tokens; set serve.allow_non_loopback = true to mean it",
                    s.listen
                ),
            ));
        }
    }
    for h in d.allowed_hosts {
        let v = h.get_ref();
        if v.is_empty() || v.contains("://") || v.contains(['/', ' ']) {
            return Err((
                h.span().start,
                format!(
                    "serve.allowed_hosts: {v:?} is not a host name (like \"tw.lan\" or \"tw.lan:8790\")"
                ),
            ));
        }
        s.allowed_hosts.push(v.to_ascii_lowercase());
    }
    for o in d.allowed_origins {
        let v = o.get_ref();
        let ok = (v.starts_with("http://") || v.starts_with("https://"))
            && !v
                .trim_end_matches('/')
                .split_once("://")
                .is_some_and(|(_, rest)| rest.contains('/'));
        if !ok {
            return Err((
                o.span().start,
                format!(
                    "serve.allowed_origins: {v:?} is not an origin (like \"https://console.example:8443\")"
                ),
            ));
        }
        s.allowed_origins
            .push(v.trim_end_matches('/').to_ascii_lowercase());
    }
    if let Some(t) = d.session_idle_timeout_secs {
        if !(1..=SessionLimits::MAX_IDLE_TIMEOUT_SECS).contains(t.get_ref()) {
            return Err((
                t.span().start,
                format!(
                    "serve.session_idle_timeout_secs must be between 1 and {} (a week); got {}",
                    SessionLimits::MAX_IDLE_TIMEOUT_SECS,
                    t.get_ref()
                ),
            ));
        }
        s.sessions.idle_timeout = std::time::Duration::from_secs(t.into_inner());
    }
    if let Some(m) = d.max_sessions_per_token {
        if !(1..=SessionLimits::MAX_PER_TOKEN).contains(m.get_ref()) {
            return Err((
                m.span().start,
                format!(
                    "serve.max_sessions_per_token must be between 1 and {}; got {}",
                    SessionLimits::MAX_PER_TOKEN,
                    m.get_ref()
                ),
            ));
        }
        s.sessions.max_per_token = m.into_inner();
    }
    Ok(s)
}

#[cfg(test)]
mod tests;
