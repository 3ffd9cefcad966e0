//! `policy check` beyond what compiling already refuses: rules that are valid but almost certainly
//! not what their author meant, judged against the tools actually registered. A rule naming a tool
//! or group that does not exist, a rule that matches nothing, an allow rule every tool of which a
//! deny rule takes away, a rule an earlier one already covers, an exec entry whose program is not
//! on this host.

use std::fmt;

use serde::Serialize;

use super::compile::{EXEC_TOOLS_DEFAULT, Policy};
use super::{PolicyRule, SelectorSet};
use crate::definition::ToolDefinition;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Where the rule was written.
    pub source: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

fn matches<'a>(rule: &PolicyRule, tools: &'a [ToolDefinition]) -> Vec<&'a ToolDefinition> {
    match SelectorSet::build(vec![rule.clone()]) {
        Ok(set) => tools
            .iter()
            .filter(|t| set.first_match(t).is_some())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn unmatched(
    what: &str,
    rule: &PolicyRule,
    tools: &[ToolDefinition],
    out: &mut Vec<Finding>,
) -> bool {
    if !matches(rule, tools).is_empty() {
        return false;
    }
    let p = rule.pattern.as_str();
    let message = if let Some(group) = p.strip_prefix("group:") {
        format!("{what} {p:?}: no registered tool is in group {group:?}")
    } else if p.contains(['*', '?', '[', '{']) || p.contains(':') || p == "side_effects" {
        format!("{what} {p:?} matches no registered tool, so it can never apply")
    } else {
        format!("{what} {p:?} names a tool that is not registered")
    };
    out.push(Finding {
        source: rule.source.clone(),
        message,
    });
    true
}

/// Every finding for `policy` against the registered `tools`. Rules Toolwarden supplies itself
/// (the built-in policy and defaults) are not the administrator's to fix and are left out.
pub fn lint(policy: &Policy, tools: &[ToolDefinition]) -> Vec<Finding> {
    let mut findings = all_findings(policy, tools);
    findings.retain(|f| {
        !(f.source.starts_with(super::compile::BUILTIN_FILE)
            || f.source.starts_with(super::compile::MODE_DEFAULTS_FILE)
            || f.source.ends_with(EXEC_TOOLS_DEFAULT))
    });
    findings
}

fn all_findings(policy: &Policy, tools: &[ToolDefinition]) -> Vec<Finding> {
    let mut out = Vec::new();
    let deny = policy.tools.deny().rules();
    let allow = policy.tools.allow().rules();
    for rule in deny {
        unmatched("deny", rule, tools, &mut out);
    }
    for (i, rule) in allow.iter().enumerate() {
        if unmatched("allow", rule, tools, &mut out) {
            continue;
        }
        let hits = matches(rule, tools);
        let denied_by: Vec<&PolicyRule> = deny
            .iter()
            .filter(|d| {
                let denied = matches(d, tools);
                hits.iter().any(|t| denied.iter().any(|x| x.name == t.name))
            })
            .collect();
        let all_denied = hits.iter().all(|t| {
            deny.iter()
                .any(|d| matches(d, tools).iter().any(|x| x.name == t.name))
        });
        if all_denied {
            out.push(Finding {
                source: rule.source.clone(),
                message: format!(
                    "allow {:?} is shadowed: every tool it matches is denied (by {}), and deny wins",
                    rule.pattern,
                    denied_by
                        .iter()
                        .map(|d| format!("{:?} at {}", d.pattern, d.source))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
            continue;
        }
        if let Some(earlier) = allow[..i].iter().find(|e| {
            let covered = matches(e, tools);
            hits.iter()
                .all(|t| covered.iter().any(|c| c.name == t.name))
        }) {
            out.push(Finding {
                source: rule.source.clone(),
                message: format!(
                    "allow {:?} adds nothing: the earlier rule {:?} at {} already allows every tool it matches",
                    rule.pattern, earlier.pattern, earlier.source
                ),
            });
        }
    }
    for (mode, rules) in &policy.modes {
        for rule in rules.ask.rules() {
            unmatched(&format!("modes.{mode}.ask"), rule, tools, &mut out);
        }
        for rule in rules.forbid.rules() {
            unmatched(&format!("modes.{mode}.forbid"), rule, tools, &mut out);
        }
    }
    for rule in policy.exec.documents.iter().flat_map(|d| d.tools.rules()) {
        unmatched("exec.tools", rule, tools, &mut out);
    }
    for entry in &policy.exec.allow {
        if entry.program.is_none() {
            out.push(Finding {
                source: entry.source.clone(),
                message: format!(
                    "exec.allow {:?}: its program is not on this host, so the entry matches nothing",
                    entry.written
                ),
            });
        }
    }
    for rule in &policy.rules.rules {
        if let Some(set) = &rule.tools {
            for r in set.rules() {
                unmatched(&format!("rule {:?} tools", rule.name), r, tools, &mut out);
            }
        }
    }
    for (set, level) in policy.access.documents.iter().flat_map(|d| &d.needs) {
        for rule in set.rules() {
            unmatched(&format!("access needing {level}"), rule, tools, &mut out);
        }
    }
    for rate in &policy.rates.rules {
        if let Some(set) = &rate.tools {
            for rule in set.rules() {
                unmatched("rate_limits", rule, tools, &mut out);
            }
        }
    }
    out
}
