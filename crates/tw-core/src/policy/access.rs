//! Access levels: standard < elevated < admin. A tool needs a level: in each policy document, the
//! strictest of its selectors that name the tool, else its default; across documents, the highest
//! of those (a document without `[access]` asks for standard). A call holds the higher of its
//! caller's and its skill's levels (an administrator grants both, in any document, like `allow`;
//! where two documents name the same caller or skill, the lower level stands; a skill's own
//! SKILL.md cannot raise it). A call below the level it needs is denied. Each document's
//! `[access]` section is read here too (`gather`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::doc::AccessDoc;
use super::selector;
use super::source::{PolicyError, Reading};
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

/// One document's `[access]` needs, as read: its default and (selector, level) pairs.
type Needs = (Option<Held>, Vec<(PolicyRule, AccessLevel)>);

/// Every document's `[access]` section, gathered.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    documents: Vec<Needs>,
    callers: HashMap<String, Held>,
    skills: HashMap<String, Held>,
}

/// Reads one document's `[access]` section, if it has one.
pub(super) fn gather(r: &mut Reading<'_>, section: Option<&AccessDoc>, out: &mut Gathered) {
    let Some(access) = section else {
        return;
    };
    let mut default = None;
    if let Some(d) = &access.default
        && let Some(l) = level(r, d)
    {
        r.note(format!("access default {l}"));
        default = Some(Held {
            level: l,
            source: r.at(d.span()),
        });
    }
    let needs = tool_needs(r, &access.tools);
    out.documents.push((default, needs));
    hold(r, &access.callers, &mut out.callers);
    hold(r, &access.skills, &mut out.skills);
}

/// `[access] tools`: the level each selector's tools need. A bad selector and a bad level are
/// both reported.
fn tool_needs(
    r: &mut Reading<'_>,
    tools: &BTreeMap<Spanned<String>, Spanned<String>>,
) -> Vec<(PolicyRule, AccessLevel)> {
    let mut needs = Vec::new();
    for (sel, lvl) in tools {
        let ok = match selector::check_selector(sel.get_ref()) {
            Ok(()) => true,
            Err(e) => {
                r.fail(sel.span(), format!("access.tools: {e}"));
                false
            }
        };
        if let (true, Some(l)) = (ok, level(r, lvl)) {
            r.note(format!("access {} needs {l}", sel.get_ref()));
            needs.push((PolicyRule::new(sel.get_ref().trim(), r.at(sel.span())), l));
        }
    }
    needs
}

/// `[access] callers` or `skills`: the level each one holds. Where two documents name the same
/// one, the lower level stands.
fn hold(
    r: &mut Reading<'_>,
    section: &BTreeMap<Spanned<String>, Spanned<String>>,
    target: &mut HashMap<String, Held>,
) {
    for (who, lvl) in section {
        let Some(l) = level(r, lvl) else {
            continue;
        };
        match target.get(who.get_ref()) {
            Some(cur) if cur.level <= l => {}
            _ => {
                let held = Held {
                    level: l,
                    source: r.at(who.span()),
                };
                target.insert(who.get_ref().clone(), held);
            }
        }
    }
}

fn level(r: &mut Reading<'_>, s: &Spanned<String>) -> Option<AccessLevel> {
    s.get_ref()
        .parse()
        .map_err(|e: String| r.fail(s.span(), e))
        .ok()
}

impl Gathered {
    /// The layer, with a summary line for each caller and skill holding a level; `None` (with the
    /// problem in `errors`) if a document's selectors cannot be compiled.
    pub(super) fn build(
        self,
        summary: &mut BTreeSet<String>,
        errors: &mut Vec<PolicyError>,
    ) -> Option<AccessPolicy> {
        for (what, map) in [("caller", &self.callers), ("skill", &self.skills)] {
            for (who, held) in map {
                summary.insert(format!("access {what} {who} holds {}", held.level));
            }
        }
        let documents: Result<Vec<AccessNeeds>, _> = self
            .documents
            .into_iter()
            .map(|(default, needs)| AccessNeeds::new(default, needs))
            .collect();
        match documents {
            Ok(documents) => Some(AccessPolicy::new(documents, self.callers, self.skills)),
            Err(e) => {
                errors.push(PolicyError::unplaced(e.to_string()));
                None
            }
        }
    }
}
