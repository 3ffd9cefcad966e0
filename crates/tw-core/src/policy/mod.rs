//! Policy evaluation: every layer returns a verdict and the rule behind it, and the call's decision
//! is the strictest verdict. `Decision` derives `Ord` (Allow < Ask < Deny), so combining layers is
//! `max()`; a layer can tighten a decision but never loosen it. The one exception is explicit: a
//! person's standing approval (a grant) can turn an Ask into an Allow, never a Deny.
//!
//! The layers, in the order they are reported: the tool allow/deny lists (`tools`), the license
//! tier, the operational mode (`mode`), exec approvals for command-running tools (`exec`),
//! argument rules (`args`), access levels (`access`), rate limits (`rate`) and confirmation.
//! Policy documents (`doc`) compile into one [`Policy`] (`compile`): each layer's module reads its
//! own section of every document, locating each problem through `source`, and `compile` puts the
//! layers together. [`evaluate`] judges a [`Request`] against the result. Everything here is pure:
//! files are read, programs resolved (a [`Resolver`], in `env`) and counters kept by the runtime
//! and passed in.

pub mod access;
pub mod args;
pub mod compile;
pub mod doc;
mod env;
pub mod eval;
pub mod exec;
pub mod grant;
pub mod lint;
mod mode;
pub mod permissions;
pub mod rate;
pub mod sandbox;
pub mod selector;
mod source;
mod tools;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::definition::{LicenseTier, ToolDefinition};

pub use compile::Policy;
pub use doc::PolicyDoc;
pub use env::{LexicalResolver, PolicyEnv, Resolver};
pub use eval::{Evaluation, Request, TierSwitch, evaluate};
pub use sandbox::SandboxRequirements;
pub use selector::{PolicyRule, RuleIndex, SelectorSet};
pub use source::{PolicyError, PolicySource};
pub use tools::ToolPolicy;

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

impl Decision {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which layer produced a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Tool allow/deny lists by name, glob and group; administrator overrides.
    Tools,
    /// License tier availability.
    License,
    /// Operational mode.
    Mode,
    /// Exec approvals for command-running tools.
    Exec,
    /// Argument rules: paths, domains, sizes, blocked patterns.
    Arguments,
    /// Access levels.
    Access,
    /// Permissions a tool needs and its caller holds.
    Permissions,
    /// Rate limits.
    RateLimit,
    /// The tool's own confirmation requirement.
    Confirmation,
    /// A person's standing approval that turned an Ask into an Allow.
    Grant,
    /// The envelope of the skill the call is made under (its SKILL.md's tools).
    Skill,
}

impl Layer {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Tools => "tools",
            Layer::License => "license",
            Layer::Mode => "mode",
            Layer::Exec => "exec",
            Layer::Arguments => "arguments",
            Layer::Access => "access",
            Layer::Permissions => "permissions",
            Layer::RateLimit => "rate_limit",
            Layer::Confirmation => "confirmation",
            Layer::Grant => "grant",
            Layer::Skill => "skill",
        }
    }
}

/// The rule that decided a layer, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    /// The rule as written, e.g. `group:fs` or `delete_*`.
    pub rule: String,
    /// Where it came from: `path/to/policy.toml:12` or `built-in default`.
    pub source: String,
}

impl RuleRef {
    /// A rule reference.
    pub fn new(rule: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            source: source.into(),
        }
    }
}

/// How serious a violation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Expected friction: a tier or mode limit, a rate limit, an unanswered confirmation.
    Warning,
    /// A call the policy refuses.
    Error,
    /// An attempt at something the policy singles out as dangerous: a forbidden path, a blocked
    /// pattern, a command that could not be parsed with certainty.
    Critical,
}

impl Severity {
    /// `warning`, `error` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "warning" => Ok(Self::Warning),
            "error" => Ok(Self::Error),
            "critical" => Ok(Self::Critical),
            other => Err(format!(
                "unknown severity {other:?}: expected \"warning\", \"error\" or \"critical\""
            )),
        }
    }
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
    /// For a denial or ask: the machine-readable kind (`policy_denied`, `path_forbidden`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For a denial: how serious it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
}

impl LayerVerdict {
    /// A passing verdict.
    pub fn allow(layer: Layer, reason: impl Into<String>) -> Self {
        Self {
            layer,
            decision: Decision::Allow,
            rule: None,
            reason: reason.into(),
            code: None,
            severity: None,
        }
    }

    /// A verdict that stops or holds the call, with its code and severity.
    pub fn stop(
        layer: Layer,
        decision: Decision,
        code: &str,
        severity: Severity,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            layer,
            decision,
            rule: None,
            reason: reason.into(),
            code: Some(code.to_owned()),
            severity: Some(severity),
        }
    }

    /// The same verdict, quoting the rule that decided it.
    pub fn by(mut self, rule: RuleRef) -> Self {
        self.rule = Some(rule);
        self
    }
}

/// A decision with its full explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// The strictest verdict of all layers (after any grant).
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

    /// Adds a verdict, tightening the decision if it is stricter.
    pub fn push(&mut self, verdict: LayerVerdict) {
        self.decision = self.decision.max(verdict.decision);
        self.trace.push(verdict);
    }

    /// The first verdict with the final decision: the one to quote when refusing or asking.
    pub fn deciding(&self) -> Option<&LayerVerdict> {
        self.trace.iter().find(|v| v.decision == self.decision)
    }

    /// A grant turns an Ask into an Allow; it cannot touch a Deny. Returns whether it applied.
    pub fn apply_grant(&mut self, grant: RuleRef, reason: impl Into<String>) -> bool {
        self.settle_ask(LayerVerdict::allow(Layer::Grant, reason).by(grant))
    }

    /// A person's answer to an Ask: an approval (an allowing verdict) turns the decision into an
    /// Allow, a refusal into a Deny. Nothing changes unless the decision is Ask. Returns whether
    /// it applied.
    pub fn settle_ask(&mut self, answer: LayerVerdict) -> bool {
        if self.decision != Decision::Ask {
            return false;
        }
        self.decision = answer.decision;
        self.trace.push(answer);
        true
    }

    /// The violation a denial records: its kind and severity (the strictest denial's).
    pub fn violation(&self) -> Option<(String, Severity)> {
        if self.decision != Decision::Deny {
            return None;
        }
        self.trace
            .iter()
            .filter(|v| v.decision == Decision::Deny)
            .filter_map(|v| Some((v.code.clone()?, v.severity?)))
            .max_by_key(|(_, s)| *s)
    }
}

/// How many custom tools each tier may register (`None`: unlimited).
pub fn custom_tool_limit(tier: LicenseTier) -> Option<usize> {
    match tier {
        LicenseTier::Core => Some(0),
        LicenseTier::Pro => Some(10),
        LicenseTier::Teams => Some(50),
        LicenseTier::Enterprise => None,
    }
}

/// The license layer: is the tool part of the tier this installation runs? For a custom tool,
/// `custom_rank` is its position (0-based, by registration) among the custom tools: the tier's
/// allowance covers the earliest ones, so a downgrade disables the newest first.
pub fn license_layer(
    def: &ToolDefinition,
    tier: LicenseTier,
    custom_rank: Option<usize>,
) -> LayerVerdict {
    if def.license_tier > tier {
        return LayerVerdict::stop(
            Layer::License,
            Decision::Deny,
            "tier_unavailable",
            Severity::Warning,
            format!(
                "tool {} needs the {} tier; this installation runs {tier}",
                def.name, def.license_tier
            ),
        );
    }
    if let Some(rank) = custom_rank
        && let Some(limit) = custom_tool_limit(tier)
        && rank >= limit
    {
        let allowance = if limit == 0 {
            format!("the {tier} tier includes no custom tools")
        } else if rank == usize::MAX {
            // What the caller passes for a tool it has not ranked yet (one another process has
            // just added): refused until it has been.
            format!(
                "the {tier} tier includes {limit} custom tools and this one's place among them is \
                 not known yet"
            )
        } else {
            format!(
                "the {tier} tier includes {limit} custom tools and this is number {}",
                rank + 1
            )
        };
        return LayerVerdict::stop(
            Layer::License,
            Decision::Deny,
            "tier_unavailable",
            Severity::Warning,
            format!("custom tool {} is not available: {allowance}", def.name),
        );
    }
    LayerVerdict::allow(
        Layer::License,
        format!("tool {} is included in the {tier} tier", def.name),
    )
}

/// The confirmation layer: does the tool ask for a person's approval on every call?
pub fn confirmation_layer(def: &ToolDefinition, requires_confirmation: bool) -> LayerVerdict {
    if requires_confirmation {
        LayerVerdict::stop(
            Layer::Confirmation,
            Decision::Ask,
            "confirmation_required",
            Severity::Warning,
            format!("tool {} requires a person to approve each call", def.name),
        )
        .by(RuleRef::new(
            "requires_confirmation = true",
            format!("tool {}", def.name),
        ))
    } else {
        LayerVerdict::allow(
            Layer::Confirmation,
            format!("tool {} does not require confirmation", def.name),
        )
    }
}

#[cfg(test)]
mod tests;
