//! Permissions (seed 002's `RequiredPermissions`): a tool needs the permissions its definition
//! names (`permissions`), plus those a policy document's `[permissions] tools` adds for the tools
//! its selectors name (an administrator's own requirement on any tool, built-ins included). A
//! caller holds what `[permissions] callers` grants its agent id (`"*"`: every caller) and, for a
//! call made under a skill, what `[permissions] skills` grants that skill; grants add up across
//! documents, like `allow`. A call whose tool needs a permission its caller does not hold is
//! denied by this layer, naming what is missing and what is held. Each document's
//! `[permissions]` section is read here too (`gather`).

use std::collections::{BTreeMap, BTreeSet};

use toml::Spanned;

use super::doc::PermissionsDoc;
use super::selector;
use super::source::{PolicyError, Reading};
use super::{Decision, Layer, LayerVerdict, PolicyRule, RuleRef, SelectorSet, Severity};
use crate::call::Caller;
use crate::definition::ToolDefinition;

/// The caller key that grants to every caller.
pub const EVERY_CALLER: &str = "*";

/// A permission and where it was granted or required.
type Sourced = BTreeMap<String, String>;

/// The permissions layer.
#[derive(Debug, Clone, Default)]
pub struct PermissionPolicy {
    /// Selectors whose tools need more permissions, each with the permissions it adds.
    needs: SelectorSet,
    added: Vec<Vec<String>>,
    /// Agent id (or `*`) -> permission -> where it was granted.
    callers: BTreeMap<String, Sourced>,
    /// Skill -> permission -> where it was granted.
    skills: BTreeMap<String, Sourced>,
}

impl PermissionPolicy {
    /// What a tool needs: its definition's permissions, then those the policy adds, each once.
    pub fn needed(&self, def: &ToolDefinition) -> Vec<String> {
        let mut out: Vec<String> = def.permissions.clone();
        for i in self.needs.matching(def) {
            if let Some(added) = self.added.get(i) {
                out.extend(added.iter().cloned());
            }
        }
        let mut seen = BTreeSet::new();
        out.retain(|p| seen.insert(p.clone()));
        out
    }

    /// Whether the caller holds `permission`, and where it was granted.
    fn grant(&self, caller: &Caller, permission: &str) -> Option<String> {
        let by = |map: &BTreeMap<String, Sourced>, who: &str, what: &str| {
            map.get(who)
                .and_then(|held| held.get(permission))
                .map(|at| format!("{what} ({at})"))
        };
        by(
            &self.callers,
            &caller.agent_id,
            &format!("caller {}", caller.agent_id),
        )
        .or_else(|| {
            caller
                .skill
                .as_deref()
                .and_then(|s| by(&self.skills, s, &format!("skill {s}")))
        })
        .or_else(|| by(&self.callers, EVERY_CALLER, "every caller"))
    }

    /// The permissions layer's verdict.
    pub fn evaluate(&self, def: &ToolDefinition, caller: &Caller) -> LayerVerdict {
        let needed = self.needed(def);
        if needed.is_empty() {
            return LayerVerdict::allow(
                Layer::Permissions,
                format!("tool {} needs no permission", def.name),
            );
        }
        let mut missing = Vec::new();
        let mut held = Vec::new();
        for p in &needed {
            match self.grant(caller, p) {
                Some(by) => held.push(format!("{p} from {by}")),
                None => missing.push(p.as_str()),
            }
        }
        if missing.is_empty() {
            return LayerVerdict::allow(
                Layer::Permissions,
                format!(
                    "tool {} needs {}: held, {}",
                    def.name,
                    needed.join(", "),
                    held.join(", ")
                ),
            );
        }
        let who = match &caller.skill {
            Some(s) => format!("caller {} (skill {s})", caller.agent_id),
            None => format!("caller {}", caller.agent_id),
        };
        LayerVerdict::stop(
            Layer::Permissions,
            Decision::Deny,
            "missing_permission",
            Severity::Error,
            format!(
                "tool {} needs permission {}; {who} does not hold {} (grant it in [permissions] \
                 callers or skills)",
                def.name,
                needed.join(", "),
                missing.join(", ")
            ),
        )
        .by(RuleRef::new(
            format!("permissions {}", missing.join(", ")),
            "the tool's definition and [permissions] tools",
        ))
    }
}

/// Every document's `[permissions]` section, gathered.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    needs: Vec<(PolicyRule, Vec<String>)>,
    callers: BTreeMap<String, Sourced>,
    skills: BTreeMap<String, Sourced>,
}

/// A permission's name, as a tool definition's are checked: 1-128 characters without spaces.
fn permission(r: &mut Reading<'_>, p: &Spanned<String>) -> Option<String> {
    let s = p.get_ref();
    if s.is_empty() || s.len() > 128 || s.chars().any(char::is_whitespace) {
        r.fail(
            p.span(),
            format!("permissions: {s:?} is not a permission (1-128 characters without spaces)"),
        );
        return None;
    }
    Some(s.clone())
}

/// Reads one document's `[permissions]` section, if it has one.
pub(super) fn gather(r: &mut Reading<'_>, section: Option<&PermissionsDoc>, out: &mut Gathered) {
    let Some(doc) = section else {
        return;
    };
    for (sel, perms) in &doc.tools {
        let ok = match selector::check_selector(sel.get_ref()) {
            Ok(()) => true,
            Err(e) => {
                r.fail(sel.span(), format!("permissions.tools: {e}"));
                false
            }
        };
        let perms: Vec<String> = perms.iter().filter_map(|p| permission(r, p)).collect();
        if ok {
            r.note(format!(
                "permissions {} needs {}",
                sel.get_ref(),
                perms.join(", ")
            ));
            out.needs.push((
                PolicyRule::new(sel.get_ref().trim(), r.at(sel.span())),
                perms,
            ));
        }
    }
    for (section, target, what) in [
        (&doc.callers, &mut out.callers, "caller"),
        (&doc.skills, &mut out.skills, "skill"),
    ] {
        for (who, perms) in section {
            for p in perms {
                if let Some(name) = permission(r, p) {
                    r.note(format!("permissions {what} {} holds {name}", who.get_ref()));
                    target
                        .entry(who.get_ref().clone())
                        .or_default()
                        .entry(name)
                        .or_insert_with(|| r.at(p.span()));
                }
            }
        }
    }
}

impl Gathered {
    /// The layer; `None` (with the problem in `errors`) if the selectors cannot be compiled.
    pub(super) fn build(self, errors: &mut Vec<PolicyError>) -> Option<PermissionPolicy> {
        let (rules, added): (Vec<PolicyRule>, Vec<Vec<String>>) = self.needs.into_iter().unzip();
        match SelectorSet::build(rules) {
            Ok(needs) => Some(PermissionPolicy {
                needs,
                added,
                callers: self.callers,
                skills: self.skills,
            }),
            Err(e) => {
                errors.push(PolicyError::unplaced(e.to_string()));
                None
            }
        }
    }
}
