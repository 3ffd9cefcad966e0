//! The runtime's configuration file (TOML). Parsing is pure: the caller reads the file and passes the
//! text, and gets either a complete `Config` or an error with file:line:column. A config that does not
//! parse refuses to start; nothing half-applies.
//!
//! Policy rules keep the line they were written on, so a decision's explanation can point at it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use tw_core::policy::PolicyRule;
use tw_core::{LicenseTier, OperationalMode, ToolName};
use tw_store::Synchronous;

/// Where the built-in defaults are quoted from in explanations.
pub const BUILTIN_SOURCE: &str = "built-in default";

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

/// The tool-policy layer's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Whether tools no rule names are denied.
    pub default_deny: bool,
    /// Where `default` was set.
    pub default_source: String,
    /// Allow rules.
    pub allow: Vec<PolicyRule>,
    /// Deny rules (these win).
    pub deny: Vec<PolicyRule>,
}

impl Default for PolicyConfig {
    /// Fail closed: nothing is allowed unless named. The built-in groups that ship with Toolwarden
    /// (`fs`, `system`) and the administrator's own `custom` tools are named.
    fn default() -> Self {
        let rule = |p: &str| PolicyRule::new(p, BUILTIN_SOURCE);
        Self {
            default_deny: true,
            default_source: BUILTIN_SOURCE.to_owned(),
            allow: vec![rule("group:fs"), rule("group:system"), rule("group:custom")],
            deny: Vec::new(),
        }
    }
}

/// The whole runtime configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    /// The license tier this installation runs.
    pub license_tier: LicenseTier,
    /// The operational mode at start.
    pub mode: OperationalMode,
    /// Workspace roots for file tools and custom tools' working directory.
    pub workspace: Vec<PathBuf>,
    /// Data directory (audit log, custom tools), when set in the file.
    pub data_dir: Option<PathBuf>,
    /// How many compiled schema validators to keep.
    pub schema_cache_capacity: usize,
    /// Audit durability.
    pub audit_synchronous: Synchronous,
    /// Tool policy.
    pub policy: PolicyConfig,
    /// Per-tool overrides, by tool name.
    pub tools: BTreeMap<String, ToolOverride>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            source: None,
            license_tier: LicenseTier::Core,
            mode: OperationalMode::Normal,
            workspace: Vec::new(),
            data_dir: None,
            schema_cache_capacity: tw_core::validate::DEFAULT_CAPACITY,
            audit_synchronous: Synchronous::Normal,
            policy: PolicyConfig::default(),
            tools: BTreeMap::new(),
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
    schema_cache_capacity: Option<Spanned<usize>>,
    policy: Option<PolicyDoc>,
    audit: Option<AuditDoc>,
    #[serde(default)]
    tools: BTreeMap<Spanned<String>, ToolOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyDoc {
    default: Option<Spanned<DefaultDoc>>,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum DefaultDoc {
    Allow,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditDoc {
    synchronous: Option<SyncDoc>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum SyncDoc {
    Normal,
    Full,
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
        if let Some(cap) = doc.schema_cache_capacity {
            if *cap.get_ref() == 0 {
                return Err(err(
                    Some(cap.span().start),
                    "schema_cache_capacity must be at least 1".into(),
                ));
            }
            config.schema_cache_capacity = cap.into_inner();
        }
        if let Some(p) = doc.policy {
            let source_of = |s: &Spanned<String>| format!("{file}:{}", at(s.span().start).0);
            let rules = |v: &[Spanned<String>]| -> Vec<PolicyRule> {
                v.iter()
                    .map(|s| PolicyRule::new(s.get_ref().clone(), source_of(s)))
                    .collect()
            };
            config.policy = PolicyConfig {
                default_deny: p
                    .default
                    .as_ref()
                    .is_none_or(|d| matches!(d.get_ref(), DefaultDoc::Deny)),
                default_source: p.default.as_ref().map_or_else(
                    || format!("{file} (no default set: deny)"),
                    |d| format!("{file}:{}", at(d.span().start).0),
                ),
                allow: rules(&p.allow),
                deny: rules(&p.deny),
            };
            // Compile once here so a bad rule is reported with its line at load, not at first call.
            for (list, rules) in [("allow", &p.allow), ("deny", &p.deny)] {
                for r in rules {
                    let one = vec![PolicyRule::new(r.get_ref().clone(), "")];
                    let (a, d) = if list == "allow" {
                        (one, vec![])
                    } else {
                        (vec![], one)
                    };
                    tw_core::ToolPolicy::new(a, d, true, "").map_err(|e| {
                        let msg = e.to_string();
                        let msg = msg.split_once(": ").map_or(msg.as_str(), |(_, m)| m);
                        err(Some(r.span().start), format!("policy.{list}: {msg}"))
                    })?;
                }
            }
        }
        if let Some(s) = doc.audit.and_then(|a| a.synchronous) {
            config.audit_synchronous = match s {
                SyncDoc::Normal => Synchronous::Normal,
                SyncDoc::Full => Synchronous::Full,
            };
        }
        for (name, o) in doc.tools {
            ToolName::new(name.get_ref())
                .map_err(|e| err(Some(name.span().start), format!("tools: {e}")))?;
            config.tools.insert(name.into_inner(), o);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn check(text: &str, expect: Result<&str, &str>) {
        let got = Config::parse(
            text,
            Path::new("/etc/tw/config.toml"),
            Some(Path::new("/home/u")),
        );
        match (got, expect) {
            (Ok(c), Ok(debug_contains)) => {
                let dbg = format!("{c:?}");
                assert!(dbg.contains(debug_contains), "{dbg}\n---\n{debug_contains}");
            }
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), msg),
            (got, expect) => panic!("got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn full_config() {
        let text = r#"
license_tier = "pro"
mode = "alert"
workspace = ["~/proj", "rel", "/abs"]
schema_cache_capacity = 16

[policy]
default = "allow"
allow = ["group:fs"]
deny = [
  "delete_*",
]

[audit]
synchronous = "full"

[tools.delete_file]
requires_confirmation = false
"#;
        let c = Config::parse(
            text,
            Path::new("/etc/tw/config.toml"),
            Some(Path::new("/home/u")),
        )
        .unwrap();
        assert_eq!(c.license_tier, LicenseTier::Pro);
        assert_eq!(c.mode, OperationalMode::Alert);
        assert_eq!(
            c.workspace,
            vec![
                PathBuf::from("/home/u/proj"),
                PathBuf::from("/etc/tw/rel"),
                PathBuf::from("/abs")
            ]
        );
        assert_eq!(c.schema_cache_capacity, 16);
        assert_eq!(c.audit_synchronous, Synchronous::Full);
        assert_eq!(
            c.policy,
            PolicyConfig {
                default_deny: false,
                default_source: "/etc/tw/config.toml:8".into(),
                allow: vec![PolicyRule::new("group:fs", "/etc/tw/config.toml:9")],
                deny: vec![PolicyRule::new("delete_*", "/etc/tw/config.toml:11")],
            }
        );
        assert_eq!(
            c.tools.get("delete_file"),
            Some(&ToolOverride {
                enabled: None,
                requires_confirmation: Some(false)
            })
        );
    }

    #[test]
    fn errors_have_file_line_column() {
        check(
            "mode = \"panic\"\n",
            Err(
                "/etc/tw/config.toml:1:8: unknown operational mode \"panic\": expected one of normal, alert, degraded, lockdown, recovery",
            ),
        );
        check(
            "[policy]\nallow = [\"ok\", \"Not Valid\"]\n",
            Err(
                "/etc/tw/config.toml:2:16: policy.allow: invalid tool name \"Not Valid\": must start with a lowercase letter",
            ),
        );
        check(
            "[policy]\nalow = []\n",
            Err(
                "/etc/tw/config.toml:2:1: unknown field `alow`, expected one of `default`, `allow`, `deny`",
            ),
        );
        check(
            "license_tier = \n",
            Err("/etc/tw/config.toml:1:16: string values must be quoted, expected literal string"),
        );
        check(
            "[tools.\"Bad\"]\nenabled = false\n",
            Err(
                "/etc/tw/config.toml:1:8: tools: invalid tool name \"Bad\": must start with a lowercase letter",
            ),
        );
    }

    #[test]
    fn empty_file_is_the_default_policy() {
        check("", Ok("default_deny: true"));
    }
}
