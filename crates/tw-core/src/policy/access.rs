//! Access levels: standard < elevated < admin. A tool needs a level: in each policy document, the
//! strictest of its selectors that name the tool, else its default; across documents, the highest
//! of those (a document without `[access]` asks for standard). A call holds the higher of its
//! caller's and its skill's levels (an administrator grants both, in any document, like `allow`;
//! where two documents name the same caller or skill, the lower level stands; a skill's own
//! SKILL.md cannot raise it). A call below the level it needs is denied.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Decision, Layer, LayerVerdict, PolicyRule, RuleRef, SelectorSet, Severity};
use crate::call::Caller;
use crate::definition::ToolDefinition;
use crate::error::CoreError;

/// An access level, ordered.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum AccessLevel {
    /// What every caller holds.
    #[default]
    Standard,
    /// Granted to trusted callers or skills.
    Elevated,
    /// Administrators.
    Admin,
}

impl AccessLevel {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessLevel::Standard => "standard",
            AccessLevel::Elevated => "elevated",
            AccessLevel::Admin => "admin",
        }
    }
}

impl fmt::Display for AccessLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AccessLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(Self::Standard),
            "elevated" => Ok(Self::Elevated),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown access level {other:?}: expected standard, elevated or admin"
            )),
        }
    }
}

/// A level and where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The level.
    pub level: AccessLevel,
    /// Where it was written.
    pub source: String,
}

/// One document's `[access]` needs: its default and its selectors.
#[derive(Debug, Clone, Default)]
pub struct AccessNeeds {
    /// Level needed by tools none of its selectors names, and where it was set.
    pub default: Option<Held>,
    /// (selectors for one level, that level), strictest first.
    pub(crate) needs: Vec<(SelectorSet, AccessLevel)>,
}

impl AccessNeeds {
    /// Builds one document's needs from its default and (selector rule, level) pairs.
    pub fn new(
        default: Option<Held>,
        needs: Vec<(PolicyRule, AccessLevel)>,
    ) -> Result<Self, CoreError> {
        let mut by_level = Vec::new();
        for level in [
            AccessLevel::Admin,
            AccessLevel::Elevated,
            AccessLevel::Standard,
        ] {
            let rules: Vec<PolicyRule> = needs
                .iter()
                .filter(|(_, l)| *l == level)
                .map(|(r, _)| r.clone())
                .collect();
            if !rules.is_empty() {
                by_level.push((SelectorSet::build(rules)?, level));
            }
        }
        Ok(Self {
            default,
            needs: by_level,
        })
    }

    fn needed(&self, def: &ToolDefinition) -> (AccessLevel, Option<RuleRef>) {
        for (set, level) in &self.needs {
            if let Some(rule) = set.first_match(def) {
                return (*level, Some(RuleRef::new(&rule.pattern, &rule.source)));
            }
        }
        match &self.default {
            Some(d) => (
                d.level,
                Some(RuleRef::new(
                    format!("default = \"{}\"", d.level),
                    &d.source,
                )),
            ),
            None => (AccessLevel::Standard, None),
        }
    }
}

/// The compiled access layer.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    /// Each document's needs.
    pub documents: Vec<AccessNeeds>,
    /// Agent id -> level held.
    pub callers: HashMap<String, Held>,
    /// Skill -> level held.
    pub skills: HashMap<String, Held>,
}

impl AccessPolicy {
    /// Builds the layer.
    pub fn new(
        documents: Vec<AccessNeeds>,
        callers: HashMap<String, Held>,
        skills: HashMap<String, Held>,
    ) -> Self {
        Self {
            documents,
            callers,
            skills,
        }
    }

    /// The level a tool needs and the rule that says so: the highest any document asks for.
    pub fn needed(&self, def: &ToolDefinition) -> (AccessLevel, Option<RuleRef>) {
        let mut worst = (AccessLevel::Standard, None);
        for doc in &self.documents {
            let (level, rule) = doc.needed(def);
            if level > worst.0 || (worst.1.is_none() && level == worst.0) {
                worst = (level, rule);
            }
        }
        worst
    }

    /// The level a caller holds, and what granted it.
    pub fn held(&self, caller: &Caller) -> (AccessLevel, String) {
        let by_caller = self.callers.get(&caller.agent_id);
        let by_skill = caller.skill.as_ref().and_then(|s| self.skills.get(s));
        match (by_caller, by_skill) {
            (Some(c), Some(s)) if s.level > c.level => (
                s.level,
                format!(
                    "skill {} ({})",
                    caller.skill.as_deref().unwrap_or(""),
                    s.source
                ),
            ),
            (Some(c), _) => (
                c.level,
                format!("caller {} ({})", caller.agent_id, c.source),
            ),
            (None, Some(s)) => (
                s.level,
                format!(
                    "skill {} ({})",
                    caller.skill.as_deref().unwrap_or(""),
                    s.source
                ),
            ),
            (None, None) => (AccessLevel::Standard, "every caller".to_owned()),
        }
    }

    /// The access layer's verdict.
    pub fn evaluate(&self, def: &ToolDefinition, caller: &Caller) -> LayerVerdict {
        let (needed, rule) = self.needed(def);
        let (held, by) = self.held(caller);
        let verdict = if held >= needed {
            LayerVerdict::allow(
                Layer::Access,
                format!(
                    "tool {} needs {needed} access; {held} is held by {by}",
                    def.name
                ),
            )
        } else {
            LayerVerdict::stop(
                Layer::Access,
                Decision::Deny,
                "access_denied",
                Severity::Error,
                format!(
                    "tool {} needs {needed} access; caller {} holds only {held} (from {by})",
                    def.name, caller.agent_id
                ),
            )
        };
        match rule {
            Some(r) => verdict.by(r),
            None => verdict,
        }
    }
}
