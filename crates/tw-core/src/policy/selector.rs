//! Which tools a rule is about. Every policy section names tools the same way, so one matcher
//! serves them all: an exact name, a glob (`delete_*`), `group:NAME`, `category:NAME`,
//! `risk:LEVEL`, `side_effects`, or `*` for every tool.
//!
//! Matching a definition against a list finds the earliest-written selector that matches, so an
//! explanation can quote the rule that decided. Exact names and groups are hash lookups and all
//! globs are one `GlobSet`, which keeps a list of a thousand rules fast.

use std::collections::HashMap;
use std::str::FromStr;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::definition::{RiskLevel, ToolCategory, ToolDefinition};
use crate::error::CoreError;
use crate::name::{ToolGroup, ToolName};

/// One selector and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// `name`, `glob*`, `group:name`, `category:name`, `risk:level`, `side_effects` or `*`.
    pub pattern: String,
    /// Where the rule was written (`policy.toml:12`, `built-in default`).
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

/// What a selector looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Exact(String),
    Group(String),
    Category(ToolCategory),
    Risk(RiskLevel),
    SideEffects,
    Glob,
}

/// Parses one selector; the error says what is wrong with it.
fn parse(pattern: &str) -> Result<Kind, String> {
    let p = pattern.trim();
    if let Some(group) = p.strip_prefix("group:") {
        ToolGroup::new(group).map_err(|e| e.to_string())?;
        return Ok(Kind::Group(group.to_owned()));
    }
    if let Some(category) = p.strip_prefix("category:") {
        return ToolCategory::from_str(category).map(Kind::Category);
    }
    if let Some(risk) = p.strip_prefix("risk:") {
        return RiskLevel::from_str(risk).map(Kind::Risk);
    }
    if p == "side_effects" {
        return Ok(Kind::SideEffects);
    }
    if p.contains(['*', '?', '[', '{']) {
        Glob::new(p).map_err(|e| e.to_string())?;
        return Ok(Kind::Glob);
    }
    if let Some((prefix, _)) = p.split_once(':') {
        return Err(format!(
            "unknown selector prefix {prefix:?}: expected group:, category: or risk:"
        ));
    }
    ToolName::new(p).map_err(|e| e.to_string())?;
    Ok(Kind::Exact(p.to_owned()))
}

/// Checks a selector without building a set (for load-time error reporting).
pub fn check_selector(pattern: &str) -> Result<(), String> {
    parse(pattern).map(|_| ())
}

/// A compiled list of selectors.
#[derive(Debug, Default, Clone)]
pub struct SelectorSet {
    rules: Vec<PolicyRule>,
    exact: HashMap<String, usize>,
    groups: HashMap<String, usize>,
    /// Category, risk and side-effect selectors: few, checked in order.
    attributes: Vec<(Kind, usize)>,
    globs: Option<GlobSet>,
    glob_index: Vec<usize>,
}

impl SelectorSet {
    /// Compiles `rules`, refusing the first malformed one.
    pub fn build(rules: Vec<PolicyRule>) -> Result<Self, CoreError> {
        let mut set = SelectorSet::default();
        let mut builder = GlobSetBuilder::new();
        for (i, rule) in rules.iter().enumerate() {
            let bad = |message: String| CoreError::PolicyRule {
                rule: format!("{} ({})", rule.pattern, rule.source),
                message,
            };
            let pattern = rule.pattern.trim();
            match parse(pattern).map_err(bad)? {
                Kind::Exact(name) => {
                    set.exact.entry(name).or_insert(i);
                }
                Kind::Group(group) => {
                    set.groups.entry(group).or_insert(i);
                }
                Kind::Glob => {
                    // Checked by `parse`; building again cannot fail differently.
                    let glob = Glob::new(pattern).map_err(|e| CoreError::PolicyRule {
                        rule: rule.pattern.clone(),
                        message: e.to_string(),
                    })?;
                    builder.add(glob);
                    set.glob_index.push(i);
                }
                attribute => set.attributes.push((attribute, i)),
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

    /// Whether the set has no selectors.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The selectors as written, in order.
    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// The earliest-written selector matching the tool.
    pub fn first_match(&self, def: &ToolDefinition) -> Option<&PolicyRule> {
        let mut best = self.exact.get(def.name.as_str()).copied();
        let mut consider = |i: usize| best = Some(best.map_or(i, |b: usize| b.min(i)));
        if let Some(&g) = self.groups.get(def.group.as_str()) {
            consider(g);
        }
        for (kind, i) in &self.attributes {
            let hit = match kind {
                Kind::Category(c) => def.category == *c,
                Kind::Risk(r) => def.risk_level == *r,
                Kind::SideEffects => def.constraints.side_effects,
                _ => false,
            };
            if hit {
                consider(*i);
            }
        }
        if let Some(globs) = &self.globs {
            for m in globs.matches(def.name.as_str()) {
                consider(self.glob_index[m]);
            }
        }
        best.map(|i| &self.rules[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::ToolCategory;
    use crate::schema::ParameterSchema;
    use pretty_assertions::assert_eq;

    fn tool(name: &str, group: &str, risk: RiskLevel, side_effects: bool) -> ToolDefinition {
        let mut d = ToolDefinition::new(
            ToolName::new(name).unwrap(),
            "t",
            ToolCategory::FileSystem,
            ToolGroup::new(group).unwrap(),
            ParameterSchema::no_parameters(),
        );
        d.risk_level = risk;
        d.constraints.side_effects = side_effects;
        d
    }

    fn check(selectors: &[&str], def: &ToolDefinition, expect: Option<&str>) {
        let set = SelectorSet::build(
            selectors
                .iter()
                .map(|s| PolicyRule::new(*s, "t.toml"))
                .collect(),
        )
        .unwrap();
        assert_eq!(
            set.first_match(def).map(|r| r.pattern.as_str()),
            expect,
            "{selectors:?} vs {}",
            def.name
        );
    }

    #[test]
    fn the_earliest_written_matching_selector_wins() {
        let write = tool("write_file", "fs", RiskLevel::Medium, true);
        let read = tool("read_file", "fs", RiskLevel::Low, false);
        check(&["risk:medium", "group:fs"], &write, Some("risk:medium"));
        check(&["group:fs", "risk:medium"], &write, Some("group:fs"));
        check(&["side_effects", "*"], &read, Some("*"));
        check(&["side_effects"], &write, Some("side_effects"));
        check(
            &["category:file_system"],
            &read,
            Some("category:file_system"),
        );
        check(&["category:network", "read_?ile"], &read, Some("read_?ile"));
        check(&["write_file", "group:net"], &read, None);
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        for (pattern, message) in [
            ("risk:extreme", "unknown risk level \"extreme\""),
            ("grp:fs", "unknown selector prefix \"grp\""),
            ("Bad Name", "invalid tool name"),
            ("a[", "unclosed character class"),
            ("category:web", "unknown category \"web\""),
        ] {
            let err = check_selector(pattern).unwrap_err();
            assert!(err.contains(message), "{pattern}: {err}");
        }
    }
}
