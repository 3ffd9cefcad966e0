//! What a tool is: its definition (the contract agents see and policy judges) and, for custom tools,
//! how it runs. Every field is checked while deserializing, so a malformed definition file fails
//! with the file, line and field at fault rather than at call time.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::command::CommandTemplate;
use crate::name::{ToolGroup, ToolName};
use crate::params::Parameters;
use crate::schema::ParameterSchema;

/// Case- and separator-insensitive key: `FileSystem`, `file_system` and `file-system` all match.
fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

macro_rules! string_enum {
    ($(#[$doc:meta])* $ty:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident => $s:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty {
            $($(#[$vdoc])* $variant),+
        }

        impl $ty {
            /// Every value, in order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The canonical snake_case spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $s),+
                }
            }
        }

        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let key = normalize(s);
                $(if key == normalize($s) { return Ok($ty::$variant); })+
                Err(format!(
                    "unknown {} {:?}: expected one of {}",
                    $what,
                    s,
                    [$($s),+].join(", ")
                ))
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

string_enum!(
    /// What kind of resource a tool touches.
    ToolCategory, "category" {
        /// Reads or writes files.
        FileSystem => "file_system",
        /// Talks to the network.
        Network => "network",
        /// Queries or changes a database.
        Database => "database",
        /// Runs code or commands.
        CodeExecution => "code_execution",
        /// Calls a third-party API.
        ExternalApi => "external_api",
        /// Looks up knowledge (search, retrieval, memory).
        Knowledge => "knowledge",
        /// Sends messages to people or systems.
        Communication => "communication",
        /// Inspects or manages the host or Toolwarden itself.
        System => "system",
    }
);

string_enum!(
    /// How strongly a tool's process is isolated; ordered from none to most restricted.
    IsolationLevel, "isolation level" {
        /// Runs inside the Toolwarden process (built-in tools only).
        None => "none",
        /// Own process group, scrubbed environment, workspace working directory, rlimits.
        Standard => "standard",
        /// Standard plus no network, read-only system, private /tmp, own pid namespace, seccomp.
        Strict => "strict",
        /// Strict plus a read-only workspace and tighter limits.
        Restricted => "restricted",
    }
);

string_enum!(
    /// How much harm a mistaken call can do.
    RiskLevel, "risk level" {
        /// Read-only or trivially reversible.
        Low => "low",
        /// Changes state in recoverable ways.
        Medium => "medium",
        /// Destructive, irreversible or reaching outside the machine.
        High => "high",
    }
);

string_enum!(
    /// The operational mode the runtime is in; tools declare the modes they may run in.
    OperationalMode, "operational mode" {
        /// Business as usual.
        Normal => "normal",
        /// Something looks wrong; risky tools may need approval.
        Alert => "alert",
        /// Running with reduced capacity.
        Degraded => "degraded",
        /// Only what is explicitly allowed in lockdown runs.
        Lockdown => "lockdown",
        /// Returning to normal after an incident.
        Recovery => "recovery",
    }
);

string_enum!(
    /// License tiers, ordered: a tool of tier T is available at T and above.
    LicenseTier, "license tier" {
        /// The free tier.
        Core => "core",
        /// Individual professional tier.
        Pro => "pro",
        /// Team tier.
        Teams => "teams",
        /// Enterprise tier.
        Enterprise => "enterprise",
    }
);

// The enums come from `string_enum!`, which cannot place `#[default]` on one variant, hence the
// hand-written impls.
#[allow(clippy::derivable_impls)]
impl Default for RiskLevel {
    fn default() -> Self {
        RiskLevel::Low
    }
}

#[allow(clippy::derivable_impls)]
impl Default for LicenseTier {
    fn default() -> Self {
        LicenseTier::Core
    }
}

/// Default time limit for a call.
pub const DEFAULT_MAX_EXECUTION_TIME_MS: u64 = 30_000;
/// Default output cap for a call.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 32 * 1024;
const MAX_EXECUTION_TIME_LIMIT_MS: u64 = 24 * 60 * 60 * 1000;
const MAX_OUTPUT_LIMIT: u64 = 64 * 1024 * 1024;

/// Limits and isolation for one tool's executions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolConstraints {
    /// Wall-clock limit for one call, in milliseconds (1 ms to 24 h).
    pub max_execution_time_ms: u64,
    /// Largest output passed on, in bytes (1 B to 64 MiB); beyond it the output is truncated.
    pub max_output_bytes: u64,
    /// Whether a call changes anything outside Toolwarden.
    pub side_effects: bool,
    /// The isolation the tool needs; the sandbox refuses to run it with less.
    pub isolation: IsolationLevel,
    /// Hosts its processes may reach at strict isolation and above, through the egress proxy
    /// and its gatekeeper, like a policy rule's `network` grant (domain patterns, checked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
}

impl ToolConstraints {
    /// The time limit as a [`Duration`].
    pub fn max_execution_time(&self) -> Duration {
        Duration::from_millis(self.max_execution_time_ms)
    }
}

impl Default for ToolConstraints {
    fn default() -> Self {
        Self {
            max_execution_time_ms: DEFAULT_MAX_EXECUTION_TIME_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            side_effects: false,
            isolation: IsolationLevel::Standard,
            network: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConstraintsDoc {
    #[serde(default)]
    max_execution_time_ms: Option<u64>,
    #[serde(default)]
    max_output_bytes: Option<u64>,
    #[serde(default)]
    side_effects: bool,
    #[serde(default)]
    isolation: Option<IsolationLevel>,
    #[serde(default)]
    network: Vec<String>,
}

impl<'de> Deserialize<'de> for ToolConstraints {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let doc = ConstraintsDoc::deserialize(d)?;
        let defaults = ToolConstraints::default();
        let time = doc
            .max_execution_time_ms
            .unwrap_or(defaults.max_execution_time_ms);
        if !(1..=MAX_EXECUTION_TIME_LIMIT_MS).contains(&time) {
            return Err(D::Error::custom(format!(
                "max_execution_time_ms must be between 1 and {MAX_EXECUTION_TIME_LIMIT_MS}, got {time}"
            )));
        }
        let bytes = doc.max_output_bytes.unwrap_or(defaults.max_output_bytes);
        if !(1..=MAX_OUTPUT_LIMIT).contains(&bytes) {
            return Err(D::Error::custom(format!(
                "max_output_bytes must be between 1 and {MAX_OUTPUT_LIMIT}, got {bytes}"
            )));
        }
        if let Err(e) = crate::target::DomainList::parse(&doc.network) {
            return Err(D::Error::custom(format!("network: {e}")));
        }
        Ok(Self {
            max_execution_time_ms: time,
            max_output_bytes: bytes,
            side_effects: doc.side_effects,
            isolation: doc.isolation.unwrap_or(defaults.isolation),
            network: doc.network,
        })
    }
}

/// Calls allowed per window. Declared here; enforced by the policy engine's rate-limit layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    /// Calls per minute, if limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<u32>,
    /// Calls per hour, if limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<u32>,
}

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Doc {
            per_minute: Option<u32>,
            per_hour: Option<u32>,
        }
        let doc = Doc::deserialize(d)?;
        if doc.per_minute.is_none() && doc.per_hour.is_none() {
            return Err(D::Error::custom(
                "a rate limit needs per_minute or per_hour",
            ));
        }
        if doc.per_minute == Some(0) || doc.per_hour == Some(0) {
            return Err(D::Error::custom(
                "a rate limit of 0 would block the tool; disable the tool instead",
            ));
        }
        Ok(Self {
            per_minute: doc.per_minute,
            per_hour: doc.per_hour,
        })
    }
}

/// A tool's contract: what agents see, what policy judges, what the pipeline enforces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Unique name.
    pub name: ToolName,
    /// What the tool does, for agents and people (1 to 4096 characters).
    pub description: String,
    /// Kind of resource touched.
    pub category: ToolCategory,
    /// Group used by policy rules (`group:fs`) and discovery.
    pub group: ToolGroup,
    /// JSON Schema of the arguments (root is an object).
    pub parameters: ParameterSchema,
    /// JSON Schema the output must satisfy, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<ParameterSchema>,
    /// Limits and isolation.
    pub constraints: ToolConstraints,
    /// Permissions (capability names) a caller needs.
    pub permissions: Vec<String>,
    /// Whether a person must approve each call.
    pub requires_confirmation: bool,
    /// How much harm a mistaken call can do.
    pub risk_level: RiskLevel,
    /// Operational modes the tool may run in.
    pub allowed_modes: Vec<OperationalMode>,
    /// Call-rate limit, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Lowest license tier that includes the tool.
    pub license_tier: LicenseTier,
    /// Version of the definition.
    pub version: String,
    /// Free-form metadata, kept as given.
    pub metadata: Map<String, Value>,
}

impl ToolDefinition {
    /// A definition with defaults for everything but the identity; builtins start from this.
    pub fn new(
        name: ToolName,
        description: impl Into<String>,
        category: ToolCategory,
        group: ToolGroup,
        parameters: ParameterSchema,
    ) -> Self {
        Self {
            name,
            description: description.into(),
            category,
            group,
            parameters,
            output_schema: None,
            constraints: ToolConstraints::default(),
            permissions: Vec::new(),
            requires_confirmation: false,
            risk_level: RiskLevel::Low,
            allowed_modes: OperationalMode::ALL.to_vec(),
            rate_limit: None,
            license_tier: LicenseTier::Core,
            version: DEFAULT_VERSION.to_owned(),
            metadata: Map::new(),
        }
    }

    /// Whether the tool only reads (no side effects declared).
    pub fn is_read_only(&self) -> bool {
        !self.constraints.side_effects
    }
}

const DEFAULT_VERSION: &str = "1.0.0";

impl<'de> Deserialize<'de> for ToolDefinition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec = ToolSpec::deserialize(d)?;
        if spec.command.is_some() {
            return Err(serde::de::Error::custom(
                "`command` belongs in a custom tool spec, not in a plain definition",
            ));
        }
        Ok(spec.definition)
    }
}

/// A definition plus, for custom tools, the command that runs it. This is the unit of a definition
/// file and of a persisted custom tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The contract.
    #[serde(flatten)]
    pub definition: ToolDefinition,
    /// How a custom tool runs; `None` for definitions of tools implemented elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandTemplate>,
}

fn description<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    let s = String::deserialize(d)?;
    let trimmed = s.trim();
    if trimmed.is_empty() {
        return Err(D::Error::custom("description must not be empty"));
    }
    if trimmed.chars().count() > 4096 {
        return Err(D::Error::custom(
            "description must be at most 4096 characters",
        ));
    }
    Ok(trimmed.to_owned())
}

fn version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    let s = String::deserialize(d)?;
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
    if !ok {
        return Err(D::Error::custom(format!(
            "version {s:?} must be 1-64 characters of letters, digits, '.', '-' and '+'"
        )));
    }
    Ok(s)
}

fn default_group() -> ToolGroup {
    // "custom" is a valid group literal; see name.rs tests.
    ToolGroup::new("custom").unwrap_or_else(|_| unreachable!("\"custom\" is a valid group"))
}

fn default_version() -> String {
    DEFAULT_VERSION.to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecDoc {
    name: ToolName,
    #[serde(deserialize_with = "description")]
    description: String,
    category: ToolCategory,
    #[serde(default = "default_group")]
    group: ToolGroup,
    #[serde(default)]
    parameters: Option<Parameters>,
    #[serde(default)]
    output_schema: Option<ParameterSchema>,
    #[serde(default)]
    constraints: Option<ToolConstraints>,
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    requires_confirmation: bool,
    #[serde(default)]
    risk_level: RiskLevel,
    #[serde(default)]
    allowed_modes: Option<Vec<OperationalMode>>,
    #[serde(default)]
    rate_limit: Option<RateLimit>,
    #[serde(default)]
    license_tier: LicenseTier,
    #[serde(default = "default_version", deserialize_with = "version")]
    version: String,
    #[serde(default)]
    metadata: Map<String, Value>,
    #[serde(default)]
    command: Option<CommandTemplate>,
}

impl<'de> Deserialize<'de> for ToolSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let doc = SpecDoc::deserialize(d)?;
        let parameters = doc
            .parameters
            .map_or_else(ParameterSchema::no_parameters, |p| p.0);
        let allowed_modes = match doc.allowed_modes {
            None => OperationalMode::ALL.to_vec(),
            Some(modes) if modes.is_empty() => {
                return Err(D::Error::custom(
                    "allowed_modes is empty, so the tool could never run; omit it to allow every mode",
                ));
            }
            Some(mut modes) => {
                modes.sort();
                modes.dedup();
                modes
            }
        };
        for p in &doc.permissions {
            if p.is_empty() || p.len() > 128 || p.chars().any(char::is_whitespace) {
                return Err(D::Error::custom(format!(
                    "permission {p:?} must be 1-128 characters without spaces"
                )));
            }
        }
        let constraints = doc.constraints.unwrap_or_default();
        if let Some(command) = &doc.command {
            command
                .check_against(&parameters)
                .map_err(|e| D::Error::custom(format!("command: {e}")))?;
            if constraints.isolation == IsolationLevel::None {
                return Err(D::Error::custom(
                    "constraints.isolation: a command runs as a child process and cannot use \
                     isolation \"none\"; use standard or stricter",
                ));
            }
        }
        Ok(ToolSpec {
            definition: ToolDefinition {
                name: doc.name,
                description: doc.description,
                category: doc.category,
                group: doc.group,
                parameters,
                output_schema: doc.output_schema,
                constraints,
                permissions: doc.permissions,
                requires_confirmation: doc.requires_confirmation,
                risk_level: doc.risk_level,
                allowed_modes,
                rate_limit: doc.rate_limit,
                license_tier: doc.license_tier,
                version: doc.version,
                metadata: doc.metadata,
            },
            command: doc.command,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn enums_parse_leniently_and_print_canonically() {
        assert_eq!("FileSystem".parse(), Ok(ToolCategory::FileSystem));
        assert_eq!("file-system".parse(), Ok(ToolCategory::FileSystem));
        assert_eq!("CODE_EXECUTION".parse(), Ok(ToolCategory::CodeExecution));
        assert_eq!(ToolCategory::ExternalApi.to_string(), "external_api");
        assert_eq!(
            "Files".parse::<ToolCategory>(),
            Err(
                "unknown category \"Files\": expected one of file_system, network, database, \
                 code_execution, external_api, knowledge, communication, system"
                    .to_owned()
            )
        );
        assert!(IsolationLevel::Strict > IsolationLevel::Standard);
        assert!(LicenseTier::Teams > LicenseTier::Pro);
    }

    #[test]
    fn spec_round_trips_through_json() {
        let spec: ToolSpec = serde_json::from_value(json!({
            "name": "word_count",
            "description": "Count words",
            "category": "FileSystem",
            "parameters": [{"name": "path", "type": "string", "required": true}],
            "constraints": {"max_execution_time_ms": 500, "network": ["*.pypi.org"]},
            "rate_limit": {"per_minute": 10},
            "command": {"argv": ["wc", "-w", "{path}"]}
        }))
        .unwrap();
        let text = serde_json::to_value(&spec).unwrap();
        let again: ToolSpec = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(spec, again);
        assert_eq!(text["constraints"]["isolation"], "standard");
        assert_eq!(text["constraints"]["network"], json!(["*.pypi.org"]));
        assert_eq!(text["group"], "custom");
        assert_eq!(
            text["parameters"],
            json!({"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"], "additionalProperties": false})
        );
    }

    #[test]
    fn definitions_refuse_inconsistencies() {
        let base = json!({"name": "t", "description": "d", "category": "system"});
        let with = |k: &str, v: Value| {
            let mut doc = base.clone();
            doc[k] = v;
            serde_json::from_value::<ToolSpec>(doc)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            with("description", json!("  ")),
            "description must not be empty"
        );
        assert_eq!(
            with("allowed_modes", json!([])),
            "allowed_modes is empty, so the tool could never run; omit it to allow every mode"
        );
        assert_eq!(
            with("rate_limit", json!({"per_hour": 0})),
            "a rate limit of 0 would block the tool; disable the tool instead"
        );
        assert_eq!(
            with("command", json!({"argv": ["echo", "{missing}"]})),
            "command: argv[1]: placeholder {missing} is not a declared parameter"
        );
        assert!(
            with("constraints", json!({"network": ["pypi.org", "a..b"]})).starts_with("network: "),
            "a bad host pattern in the grant is refused"
        );
        assert_eq!(
            with("surprise", json!(1)),
            "unknown field `surprise`, expected one of `name`, `description`, `category`, `group`, \
             `parameters`, `output_schema`, `constraints`, `permissions`, `requires_confirmation`, \
             `risk_level`, `allowed_modes`, `rate_limit`, `license_tier`, `version`, `metadata`, `command`"
        );
    }
}
