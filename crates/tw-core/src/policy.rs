//! Policy evaluation: every layer returns a verdict and the rule behind it, and the call's decision
//! is the strictest verdict. `Decision` derives `Ord` (Allow < Ask < Deny), so combining layers is
//! `max()`; a layer can tighten a decision but never loosen it.
//!
//! Layers here: the tool allow/deny lists, the license tier, the operational mode and the tool's own
//! confirmation requirement. Each is a separate function so the pipeline can run (and test) them as
//! separate stages while recording one explanation.

use std::collections::HashMap;
use std::fmt;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::definition::{LicenseTier, OperationalMode, ToolDefinition};
use crate::error::CoreError;
use crate::name::{ToolGroup, ToolName};

/// A policy verdict, ordered from most to least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call may go ahead.
    Allow,
    /// A person must approve the call.
    Ask,
    /// The call is refused.
    Deny,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        })
    }
}

/// Which layer produced a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Tool allow/deny lists by name, glob and group.
    Tools,
    /// License tier availability.
    License,
    /// Operational mode.
    Mode,
    /// The tool's own confirmation requirement.
    Confirmation,
}

/// The rule that decided a layer, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    /// The rule as written, e.g. `group:fs` or `delete_*`.
    pub rule: String,
    /// Where it came from: `path/to/config.toml:12` or `built-in default`.
    pub source: String,
}

/// One layer's verdict with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerVerdict {
    /// The layer.
    pub layer: Layer,
    /// Its verdict.
    pub decision: Decision,
    /// The rule that matched, if a rule (rather than a default) decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    /// Why, in words.
    pub reason: String,
}

/// A decision with its full explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// The strictest verdict of all layers.
    pub decision: Decision,
    /// Every layer consulted, in order.
    pub trace: Vec<LayerVerdict>,
}

impl PolicyDecision {
    /// Combines verdicts: the strictest wins. No verdicts at all is a deny (fail closed).
    pub fn from_verdicts(trace: Vec<LayerVerdict>) -> Self {
        let decision = trace
            .iter()
            .map(|v| v.decision)
            .max()
            .unwrap_or(Decision::Deny);
        Self { decision, trace }
    }

    /// The first verdict with the final decision: the one to quote when refusing.
    pub fn deciding(&self) -> Option<&LayerVerdict> {
        self.trace.iter().find(|v| v.decision == self.decision)
    }
}

/// One allow or deny rule and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// `name`, `glob*` or `group:name`.
    pub pattern: String,
    /// Where the rule was written.
    pub source: String,
}

impl PolicyRule {
    /// A rule with its source.
    pub fn new(pattern: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            pattern: pattern.into(),
            source: source.into(),
        }
    }
}

#[derive(Debug, Default)]
struct RuleSet {
    rules: Vec<PolicyRule>,
    exact: HashMap<String, usize>,
    groups: HashMap<String, usize>,
    globs: Option<GlobSet>,
    glob_index: Vec<usize>,
}

impl RuleSet {
    fn build(rules: Vec<PolicyRule>) -> Result<Self, CoreError> {
        let mut set = RuleSet::default();
        let mut builder = GlobSetBuilder::new();
        for (i, rule) in rules.iter().enumerate() {
            let p = rule.pattern.trim();
            let bad = |message: String| CoreError::PolicyRule {
                rule: format!("{} ({})", rule.pattern, rule.source),
                message,
            };
            if let Some(group) = p.strip_prefix("group:") {
                ToolGroup::new(group).map_err(|e| bad(e.to_string()))?;
                set.groups.entry(group.to_owned()).or_insert(i);
            } else if p.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(p).map_err(|e| bad(e.to_string()))?;
                builder.add(glob);
                set.glob_index.push(i);
            } else {
                ToolName::new(p).map_err(|e| bad(e.to_string()))?;
                set.exact.entry(p.to_owned()).or_insert(i);
            }
        }
        if !set.glob_index.is_empty() {
            set.globs = Some(builder.build().map_err(|e| CoreError::PolicyRule {
                rule: "glob set".to_owned(),
                message: e.to_string(),
            })?);
        }
        set.rules = rules;
        Ok(set)
    }

    /// The earliest-written rule matching the tool.
    fn first_match(&self, def: &ToolDefinition) -> Option<&PolicyRule> {
        let mut best = self.exact.get(def.name.as_str()).copied();
        if let Some(&g) = self.groups.get(def.group.as_str()) {
            best = Some(best.map_or(g, |b| b.min(g)));
        }
        if let Some(globs) = &self.globs {
            for m in globs.matches(def.name.as_str()) {
                let i = self.glob_index[m];
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        best.map(|i| &self.rules[i])
    }
}

/// The tool layer: allow and deny lists, deny wins, and what happens to tools no rule names.
#[derive(Debug)]
pub struct ToolPolicy {
    allow: RuleSet,
    deny: RuleSet,
    default_deny: bool,
    default_source: String,
}

impl ToolPolicy {
    /// Builds the layer. `default_deny` decides tools that no rule names; `default_source` says
    /// where that switch was set.
    pub fn new(
        allow: Vec<PolicyRule>,
        deny: Vec<PolicyRule>,
        default_deny: bool,
        default_source: impl Into<String>,
    ) -> Result<Self, CoreError> {
        Ok(Self {
            allow: RuleSet::build(allow)?,
            deny: RuleSet::build(deny)?,
            default_deny,
            default_source: default_source.into(),
        })
    }

    /// Judges a tool. A deny rule beats any allow rule; with no matching rule the default applies.
    pub fn evaluate(&self, def: &ToolDefinition) -> LayerVerdict {
        if let Some(rule) = self.deny.first_match(def) {
            return LayerVerdict {
                layer: Layer::Tools,
                decision: Decision::Deny,
                reason: format!("tool {} is denied by rule {:?}", def.name, rule.pattern),
                rule: Some(RuleRef {
                    rule: rule.pattern.clone(),
                    source: rule.source.clone(),
                }),
            };
        }
        if let Some(rule) = self.allow.first_match(def) {
            return LayerVerdict {
                layer: Layer::Tools,
                decision: Decision::Allow,
                reason: format!("tool {} is allowed by rule {:?}", def.name, rule.pattern),
                rule: Some(RuleRef {
                    rule: rule.pattern.clone(),
                    source: rule.source.clone(),
                }),
            };
        }
        let (decision, word) = if self.default_deny {
            (Decision::Deny, "deny")
        } else {
            (Decision::Allow, "allow")
        };
        LayerVerdict {
            layer: Layer::Tools,
            decision,
            reason: format!(
                "no allow or deny rule names tool {} (group {}); the default is {word}",
                def.name, def.group
            ),
            rule: Some(RuleRef {
                rule: format!("default = \"{word}\""),
                source: self.default_source.clone(),
            }),
        }
    }
}

/// The license layer: is the tool part of the tier this installation runs?
pub fn license_layer(def: &ToolDefinition, tier: LicenseTier) -> LayerVerdict {
    if def.license_tier <= tier {
        LayerVerdict {
            layer: Layer::License,
            decision: Decision::Allow,
            rule: None,
            reason: format!("tool {} is included in the {tier} tier", def.name),
        }
    } else {
        LayerVerdict {
            layer: Layer::License,
            decision: Decision::Deny,
            rule: None,
            reason: format!(
                "tool {} needs the {} tier; this installation runs {tier}",
                def.name, def.license_tier
            ),
        }
    }
}

/// The mode layer: may the tool run in the current operational mode?
pub fn mode_layer(def: &ToolDefinition, mode: OperationalMode) -> LayerVerdict {
    if def.allowed_modes.contains(&mode) {
        LayerVerdict {
            layer: Layer::Mode,
            decision: Decision::Allow,
            rule: None,
            reason: format!("tool {} may run in {mode} mode", def.name),
        }
    } else {
        LayerVerdict {
            layer: Layer::Mode,
            decision: Decision::Deny,
            rule: None,
            reason: format!(
                "tool {} may not run in {mode} mode (allowed: {})",
                def.name,
                def.allowed_modes
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The confirmation layer: does the tool ask for a person's approval on every call?
pub fn confirmation_layer(def: &ToolDefinition, requires_confirmation: bool) -> LayerVerdict {
    if requires_confirmation {
        LayerVerdict {
            layer: Layer::Confirmation,
            decision: Decision::Ask,
            rule: Some(RuleRef {
                rule: "requires_confirmation = true".to_owned(),
                source: format!("tool {}", def.name),
            }),
            reason: format!("tool {} requires a person to approve each call", def.name),
        }
    } else {
        LayerVerdict {
            layer: Layer::Confirmation,
            decision: Decision::Allow,
            rule: None,
            reason: format!("tool {} does not require confirmation", def.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::ToolCategory;
    use crate::schema::ParameterSchema;
    use pretty_assertions::assert_eq;

    fn tool(name: &str, group: &str) -> ToolDefinition {
        ToolDefinition::new(
            ToolName::new(name).unwrap(),
            "test tool",
            ToolCategory::System,
            ToolGroup::new(group).unwrap(),
            ParameterSchema::no_parameters(),
        )
    }

    fn policy(allow: &[&str], deny: &[&str], default_deny: bool) -> ToolPolicy {
        let rules = |v: &[&str]| {
            v.iter()
                .enumerate()
                .map(|(i, p)| PolicyRule::new(*p, format!("test.toml:{}", i + 1)))
                .collect()
        };
        ToolPolicy::new(rules(allow), rules(deny), default_deny, "test.toml:9").unwrap()
    }

    fn check(p: &ToolPolicy, name: &str, group: &str, expect: (Decision, Option<&str>)) {
        let v = p.evaluate(&tool(name, group));
        assert_eq!(
            (v.decision, v.rule.map(|r| r.rule)),
            (expect.0, expect.1.map(str::to_owned)),
            "{name} ({group})"
        );
    }

    #[test]
    fn deny_wins_over_allow_by_name_glob_and_group() {
        let p = policy(
            &["group:fs", "read_*", "delete_file"],
            &["delete_*", "group:net"],
            true,
        );
        check(&p, "read_file", "fs", (Decision::Allow, Some("group:fs")));
        check(&p, "read_mail", "mail", (Decision::Allow, Some("read_*")));
        check(&p, "delete_file", "fs", (Decision::Deny, Some("delete_*")));
        check(&p, "read_url", "net", (Decision::Deny, Some("group:net")));
        check(
            &p,
            "other",
            "misc",
            (Decision::Deny, Some("default = \"deny\"")),
        );
    }

    #[test]
    fn default_switch() {
        let p = policy(&[], &["x"], false);
        check(
            &p,
            "other",
            "misc",
            (Decision::Allow, Some("default = \"allow\"")),
        );
        check(&p, "x", "misc", (Decision::Deny, Some("x")));
    }

    #[test]
    fn explanation_names_rule_and_source() {
        let p = policy(&["echo"], &[], true);
        let v = p.evaluate(&tool("echo", "system"));
        assert_eq!(
            v,
            LayerVerdict {
                layer: Layer::Tools,
                decision: Decision::Allow,
                rule: Some(RuleRef {
                    rule: "echo".into(),
                    source: "test.toml:1".into()
                }),
                reason: "tool echo is allowed by rule \"echo\"".into(),
            }
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        let err = ToolPolicy::new(
            vec![PolicyRule::new("Bad Name", "c.toml:3")],
            vec![],
            true,
            "",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid policy rule \"Bad Name (c.toml:3)\": invalid tool name \"Bad Name\": must start with a lowercase letter"
        );
        assert!(ToolPolicy::new(vec![PolicyRule::new("a[", "c")], vec![], true, "").is_err());
    }

    #[test]
    fn strictest_layer_wins_and_empty_is_deny() {
        let t = tool("t", "g");
        let d = PolicyDecision::from_verdicts(vec![
            license_layer(&t, LicenseTier::Core),
            confirmation_layer(&t, true),
            mode_layer(&t, OperationalMode::Normal),
        ]);
        assert_eq!(d.decision, Decision::Ask);
        assert_eq!(d.deciding().map(|v| v.layer), Some(Layer::Confirmation));
        assert_eq!(
            PolicyDecision::from_verdicts(vec![]).decision,
            Decision::Deny
        );
        let mut pro = t.clone();
        pro.license_tier = LicenseTier::Pro;
        assert_eq!(
            license_layer(&pro, LicenseTier::Core).reason,
            "tool t needs the pro tier; this installation runs core"
        );
    }
}
