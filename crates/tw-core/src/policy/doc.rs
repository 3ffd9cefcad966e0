//! The policy file format (TOML), as written. These types only describe the document; every value
//! keeps its span so that `compile` can report problems, and explanations can quote rules, with
//! the file and line they came from. The same document may stand alone in a policy file or sit
//! under `[policy]` in the main configuration file.
//!
//! ```toml
//! default = "deny"                       # tools no rule names (fail closed)
//! allow = ["group:fs", "echo"]
//! deny = ["delete_*"]                    # deny wins over allow
//!
//! [modes.alert]
//! ask = ["risk:high"]                    # need a person's approval in this mode
//! forbid = ["group:net"]                 # refused in this mode
//!
//! [exec]                                 # command-running tools
//! tools = ["category:code_execution"]    # which tools count as command-running
//! security = "allowlist"                 # deny | allowlist | full
//! ask = "on-miss"                        # off | on-miss | always
//! [[exec.allow]]
//! command = "git status **"              # program, then one glob per argument; ** = any rest
//! match = ["git status --short"]         # examples checked when the policy loads
//! not_match = ["git push", "git status > out.txt", "GIT_PAGER=x git status"]
//! [[exec.allow]]
//! command = "make **"
//! writes = ["build/**"]                  # what its redirections may write, relative to where
//!                                        # it runs (or absolute); /dev/null always may
//! env = ["CC", "LC_*"]                   # variables it may be given (NAME=v make, the call's env)
//! match = ["CC=clang make > build/log 2>&1"]
//! not_match = ["make > Makefile", "make 3<> build/../x", "MAKEFLAGS=x make"]
//!
//! # An entry covers a command only if it allows everything the command does: its redirections
//! # that can write a file (any operator, with or without a descriptor number) and the variables
//! # it is given. Several documents combine strictest-wins: see `compile` for each setting.
//!
//! [[rules]]                              # argument rules, on the final arguments
//! tools = ["*"]
//! forbid_paths = ["~/.ssh/**"]
//! allow_domains = ["*.wikipedia.org"]
//! block_domains = ["loopback", "private", "link-local"]
//! downloads = "downloads"                # browser downloads may be saved here (else refused)
//! block_patterns = ['rm\s+-rf']
//! max_argument_bytes = 65536
//! decision = "deny"                      # or "ask"
//! match = [{ tool = "read_file", arguments = { path = "~/.ssh/id_rsa" } }]
//! not_match = [{ tool = "read_file", arguments = { path = "README.md" } }]
//!
//! [access]
//! tools = { delete_file = "elevated" }   # selector -> level a call needs
//! callers = { ci-bot = "admin" }         # agent id -> level it holds
//! skills = { automation = "elevated" }   # skill -> level it holds
//!
//! [[rate_limits]]
//! tools = ["http_fetch"]
//! per = "caller"                         # tool | caller | skill_tool
//! per_minute = 100
//! per_hour = 1000
//!
//! [confirmation]
//! timeout_secs = 120
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

/// A whole policy document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDoc {
    /// What happens to tools no allow or deny rule names.
    pub default: Option<Spanned<DefaultDoc>>,
    /// Tool selectors that are allowed.
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    /// Tool selectors that are denied (these win).
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Per-mode rules, keyed by mode name.
    #[serde(default)]
    pub modes: BTreeMap<Spanned<String>, ModeDoc>,
    /// Exec approvals.
    pub exec: Option<ExecDoc>,
    /// Argument rules.
    #[serde(default)]
    pub rules: Vec<Spanned<RuleDoc>>,
    /// Access levels.
    pub access: Option<AccessDoc>,
    /// Permissions tools need and callers and skills hold.
    pub permissions: Option<PermissionsDoc>,
    /// Rate limits.
    #[serde(default)]
    pub rate_limits: Vec<Spanned<RateDoc>>,
    /// Confirmation settings.
    pub confirmation: Option<ConfirmationDoc>,
}

/// `default = "allow" | "deny"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DefaultDoc {
    /// Unnamed tools are allowed.
    Allow,
    /// Unnamed tools are denied.
    Deny,
}

/// `[modes.NAME]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeDoc {
    /// Selectors that need approval in this mode.
    #[serde(default)]
    pub ask: Vec<Spanned<String>>,
    /// Selectors refused in this mode.
    #[serde(default)]
    pub forbid: Vec<Spanned<String>>,
}

/// `[exec]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecDoc {
    /// Which tools are judged as command-running (default `category:code_execution`).
    pub tools: Option<Vec<Spanned<String>>>,
    /// `deny`, `allowlist` or `full`.
    pub security: Option<Spanned<String>>,
    /// `off`, `on-miss` or `always`.
    pub ask: Option<Spanned<String>>,
    /// Allowlist entries.
    #[serde(default)]
    pub allow: Vec<Spanned<ExecEntryDoc>>,
}

/// One `[[exec.allow]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecEntryDoc {
    /// The program (a name found on PATH, or an absolute path) and one glob per argument.
    pub command: Spanned<String>,
    /// Paths the command's redirections may write (`>`, `>>`, `<>`, `&>`, ...): globs relative to
    /// where the command runs, or absolute. `/dev/null` may always be written.
    #[serde(default)]
    pub writes: Vec<Spanned<String>>,
    /// Variables the command may be given (`NAME=value cmd`, `env NAME=value cmd`, assigned
    /// earlier in the line, or the call's `env`); globs such as `LC_*`.
    #[serde(default)]
    pub env: Vec<Spanned<String>>,
    /// Command lines this entry must allow.
    #[serde(default, rename = "match")]
    pub matches: Vec<Spanned<String>>,
    /// Command lines this entry must not allow.
    #[serde(default)]
    pub not_match: Vec<Spanned<String>>,
}

/// One `[[rules]]` entry: argument rules.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDoc {
    /// A name shown in explanations.
    pub name: Option<String>,
    /// Which tools the rule applies to (default: every tool).
    pub tools: Option<Vec<Spanned<String>>>,
    /// Path globs no argument may name.
    #[serde(default)]
    pub forbid_paths: Vec<Spanned<String>>,
    /// If set, every path argument must match one of these globs.
    #[serde(default)]
    pub allow_paths: Vec<Spanned<String>>,
    /// If set, every host an argument names must match one of these.
    #[serde(default)]
    pub allow_domains: Vec<Spanned<String>>,
    /// Hosts no argument may name.
    #[serde(default)]
    pub block_domains: Vec<Spanned<String>>,
    /// Hosts the processes of the rule's tools may reach, through the runtime's egress proxy
    /// (strict and restricted; without a grant they have no network at all).
    #[serde(default)]
    pub network: Vec<Spanned<String>>,
    /// A folder in the workspace (relative to its first root) where the rule's browser tools
    /// may save the files pages download; without one, downloads are refused.
    pub downloads: Option<Spanned<String>>,
    /// Regular expressions no string argument may match.
    #[serde(default)]
    pub block_patterns: Vec<Spanned<String>>,
    /// Largest serialized arguments, in bytes.
    pub max_argument_bytes: Option<Spanned<u64>>,
    /// Longest single string argument, in characters.
    pub max_string_length: Option<Spanned<u64>>,
    /// What a violation yields: `deny` (default) or `ask`.
    pub decision: Option<Spanned<String>>,
    /// The least isolation the rule's tools run with: raises (never lowers) what their
    /// definitions ask for.
    pub isolation: Option<Spanned<String>>,
    /// Calls this rule must stop.
    #[serde(default, rename = "match")]
    pub matches: Vec<Spanned<ExampleDoc>>,
    /// Calls this rule must let through.
    #[serde(default)]
    pub not_match: Vec<Spanned<ExampleDoc>>,
}

/// An example call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExampleDoc {
    /// The tool called.
    pub tool: String,
    /// Its arguments.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// `[access]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessDoc {
    /// Level a call needs when no selector names the tool (default `standard`).
    pub default: Option<Spanned<String>>,
    /// Tool selector -> level a call needs.
    #[serde(default)]
    pub tools: BTreeMap<Spanned<String>, Spanned<String>>,
    /// Agent id -> level it holds.
    #[serde(default)]
    pub callers: BTreeMap<Spanned<String>, Spanned<String>>,
    /// Skill name -> level it holds.
    #[serde(default)]
    pub skills: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// One `[[rate_limits]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateDoc {
    /// Which tools it limits (default: every tool).
    pub tools: Option<Vec<Spanned<String>>>,
    /// `tool` (all callers together), `caller` (each caller) or `skill_tool` (each skill, per tool).
    pub per: Option<Spanned<String>>,
    /// Calls per minute.
    pub per_minute: Option<Spanned<u32>>,
    /// Calls per hour.
    pub per_hour: Option<Spanned<u32>>,
}

/// `[confirmation]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationDoc {
    /// How long a call waits for a person before it is denied (default 120 s).
    pub timeout_secs: Option<Spanned<u64>>,
}

/// `[permissions]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsDoc {
    /// Tool selector -> permissions its tools need besides their definition's.
    #[serde(default)]
    pub tools: BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
    /// Agent id (or `*`) -> permissions it holds.
    #[serde(default)]
    pub callers: BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
    /// Skill name -> permissions it holds.
    #[serde(default)]
    pub skills: BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
}
