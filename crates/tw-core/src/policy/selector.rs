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
    /// Name -> every selector naming it, in written order (the first is the earliest).
    exact: HashMap<String, Vec<usize>>,
    groups: HashMap<String, Vec<usize>>,
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
                Kind::Exact(name) => set.exact.entry(name).or_default().push(i),
                Kind::Group(group) => set.groups.entry(group).or_default().push(i),
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

    /// Calls `hit` with the index of every selector matching the tool (not in order; an index
    /// may come more than once).
    fn each_match(&self, def: &ToolDefinition, mut hit: impl FnMut(usize)) {
        for i in self.exact.get(def.name.as_str()).into_iter().flatten() {
            hit(*i);
        }
        for i in self.groups.get(def.group.as_str()).into_iter().flatten() {
            hit(*i);
        }
        for (kind, i) in &self.attributes {
            let matched = match kind {
                Kind::Category(c) => def.category == *c,
                Kind::Risk(r) => def.risk_level == *r,
                Kind::SideEffects => def.constraints.side_effects,
                _ => false,
            };
            if matched {
                hit(*i);
            }
        }
        if let Some(globs) = &self.globs {
            for m in globs.matches(def.name.as_str()) {
                hit(self.glob_index[m]);
            }
        }
    }

    /// The positions (in the order the rules were given) of every selector matching the tool.
    pub fn matching(&self, def: &ToolDefinition) -> Vec<usize> {
        let mut hits = Vec::new();
        self.each_match(def, |i| hits.push(i));
        hits.sort_unstable();
        hits.dedup();
        hits
    }

    /// The earliest-written selector matching the tool.
    pub fn first_match(&self, def: &ToolDefinition) -> Option<&PolicyRule> {
        let mut best: Option<usize> = None;
        self.each_match(def, |i| best = Some(best.map_or(i, |b| b.min(i))));
        best.map(|i| &self.rules[i])
    }
}

/// Which of many rules apply to a tool, found in one pass: every rule's selectors merged into one
/// set, each remembering its rule. A layer with a hundred rules pays for one lookup, not a hundred.
#[derive(Debug, Clone, Default)]
pub struct RuleIndex {
    set: SelectorSet,
    owner: Vec<usize>,
    /// Rules without selectors: they apply to every tool.
    everywhere: Vec<usize>,
    len: usize,
}

impl RuleIndex {
    /// Indexes rules by their selectors; `None` means the rule applies to every tool.
    pub fn new(per_rule: &[Option<&SelectorSet>]) -> Result<Self, CoreError> {
        let mut all = Vec::new();
        let mut owner = Vec::new();
        let mut everywhere = Vec::new();
        for (i, set) in per_rule.iter().enumerate() {
            match set {
                Some(set) => {
                    for r in set.rules() {
                        all.push(r.clone());
                        owner.push(i);
                    }
                }
                None => everywhere.push(i),
            }
        }
        Ok(Self {
            set: SelectorSet::build(all)?,
            owner,
            everywhere,
            len: per_rule.len(),
        })
    }

    /// For each rule, whether it applies to the tool.
    pub fn applying(&self, def: &ToolDefinition) -> Vec<bool> {
        let mut applies = vec![false; self.len];
        for &i in &self.everywhere {
            applies[i] = true;
        }
        self.set.each_match(def, |i| applies[self.owner[i]] = true);
        applies
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
