//! The tool layer: allow and deny lists by name, glob, group, category and risk, deny wins, and
//! what happens to tools no rule names; and gathering it from every document's `default`,
//! `allow` and `deny`. Lists add up across documents; a `default = "deny"` in any document
//! stands (a document that leaves `default` out counts as deny).

use std::collections::BTreeSet;

use super::doc::{DefaultDoc, PolicyDoc};
use super::source::{PolicyError, Reading};
use super::{Decision, Layer, LayerVerdict, PolicyRule, RuleRef, SelectorSet, Severity};
use crate::definition::ToolDefinition;
use crate::error::CoreError;

/// The tool layer: allow and deny lists, deny wins, and what happens to tools no rule names.
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    allow: SelectorSet,
    deny: SelectorSet,
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
            allow: SelectorSet::build(allow)?,
            deny: SelectorSet::build(deny)?,
            default_deny,
            default_source: default_source.into(),
        })
    }

    /// The allow selectors.
    pub fn allow(&self) -> &SelectorSet {
        &self.allow
    }

    /// The deny selectors.
    pub fn deny(&self) -> &SelectorSet {
        &self.deny
    }

    /// Whether unnamed tools are denied.
    pub fn default_deny(&self) -> bool {
        self.default_deny
    }

    /// Judges a tool. A deny rule beats any allow rule; with no matching rule the default applies.
    pub fn evaluate(&self, def: &ToolDefinition) -> LayerVerdict {
        if let Some(rule) = self.deny.first_match(def) {
            return LayerVerdict::stop(
                Layer::Tools,
                Decision::Deny,
                "policy_denied",
                Severity::Error,
                format!("tool {} is denied by rule {:?}", def.name, rule.pattern),
            )
            .by(RuleRef::new(&rule.pattern, &rule.source));
        }
        if let Some(rule) = self.allow.first_match(def) {
            return LayerVerdict::allow(
                Layer::Tools,
                format!("tool {} is allowed by rule {:?}", def.name, rule.pattern),
            )
            .by(RuleRef::new(&rule.pattern, &rule.source));
        }
        let default = RuleRef::new(
            format!(
                "default = \"{}\"",
                if self.default_deny { "deny" } else { "allow" }
            ),
            &self.default_source,
        );
        let reason = format!(
            "no allow or deny rule names tool {} (group {}); the default is {}",
            def.name,
            def.group,
            if self.default_deny { "deny" } else { "allow" }
        );
        if self.default_deny {
            LayerVerdict::stop(
                Layer::Tools,
                Decision::Deny,
                "policy_denied",
                Severity::Error,
                reason,
            )
            .by(default)
        } else {
            LayerVerdict::allow(Layer::Tools, reason).by(default)
        }
    }
}

/// Every document's `default`, `allow` and `deny`, gathered.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    /// Each document's `default`: (deny, where).
    defaults: Vec<(bool, String)>,
    allow: Vec<PolicyRule>,
    deny: Vec<PolicyRule>,
}

/// Reads one document's `default`, `allow` and `deny`.
pub(super) fn gather(r: &mut Reading<'_>, doc: &PolicyDoc, out: &mut Gathered) {
    out.defaults.push(match &doc.default {
        Some(d) => (*d.get_ref() == DefaultDoc::Deny, r.at(d.span())),
        None => (true, format!("{} (no default set: deny)", r.file())),
    });
    for (list, target, verb) in [
        (&doc.allow, &mut out.allow, "allow"),
        (&doc.deny, &mut out.deny, "deny"),
    ] {
        let rules = r.selectors(list, verb);
        for rule in &rules {
            r.note(format!("{verb} {}", rule.pattern));
        }
        target.extend(rules);
    }
}

impl Gathered {
    /// The layer: the first deny default stands, else the first document's allow. With no
    /// document at all the default is deny, quoted from `fallback_file`. `None` (with the problem
    /// in `errors`) if the lists cannot be compiled.
    pub(super) fn build(
        self,
        fallback_file: &str,
        summary: &mut BTreeSet<String>,
        errors: &mut Vec<PolicyError>,
    ) -> Option<ToolPolicy> {
        let (default_deny, default_source) = self
            .defaults
            .iter()
            .find(|(deny, _)| *deny)
            .or(self.defaults.first())
            .cloned()
            .unwrap_or_else(|| (true, format!("{fallback_file} (no default set: deny)")));
        summary.insert(format!(
            "default {}",
            if default_deny { "deny" } else { "allow" }
        ));
        ToolPolicy::new(self.allow, self.deny, default_deny, default_source)
            .map_err(|e| errors.push(PolicyError::unplaced(e.to_string())))
            .ok()
    }
}
