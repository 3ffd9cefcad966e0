//! Judging one call: every layer's verdict, combined strictest-wins, with the rule behind each.
//!
//! Two layers need state the pure core does not keep. Rate limits must be counted atomically,
//! across processes, and survive restarts, so [`evaluate`] returns the counters the call must pass
//! ([`Evaluation::rate_checks`]) and the runtime counts them in the store and adds the verdict
//! (`rate::judge`). Grants are a person's standing approvals, kept in the store: the runtime
//! offers the active ones to [`super::PolicyDecision::apply_grant`] when the decision is Ask.
//! Every layer is evaluated even after one denies, so an explanation shows the whole picture.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::compile::Policy;
use super::mode;
use super::rate::RateCheck;
use super::{
    Decision, Layer, LayerVerdict, PolicyDecision, RuleRef, Severity, confirmation_layer,
    license_layer,
};
use crate::call::Caller;
use crate::definition::{LicenseTier, OperationalMode, ToolDefinition};

/// Everything policy needs to know about one call.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The tool's definition.
    pub tool: &'a ToolDefinition,
    /// The final arguments (already validated against the schema).
    pub arguments: &'a Value,
    /// Who is calling.
    pub caller: &'a Caller,
    /// The installation's license tier.
    pub tier: LicenseTier,
    /// The current operational mode.
    pub mode: OperationalMode,
    /// For a custom tool: its position among the custom tools, by registration.
    pub custom_rank: Option<usize>,
    /// For a custom tool: the command it would run, rendered from the arguments.
    pub argv: Option<&'a [String]>,
    /// The absolute directory the call's process starts in, as the runtime will start it (exec's
    /// `cwd`, run_tests' `path`); `None`: the policy's base, the first workspace root. Relative
    /// programs and write targets are judged there.
    pub cwd: Option<&'a str>,
    /// Whether the tool asks for approval on every call (after administrator overrides).
    pub requires_confirmation: bool,
    /// An administrator override that disables the tool, and where it was set.
    pub disabled: Option<RuleRef>,
    /// An administrator's switch that turned the tool off for the tier this call runs at.
    pub switched_off: Option<&'a TierSwitch>,
}

/// A tool switched off for one license tier by an administrator, at run time (the runtime keeps
/// these in the store; `toolwarden tools disable`, the desktop's tool switches). Unlike the
/// configuration's `enabled = false`, it names a tier, a person and a time, and the trace quotes
/// all three.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSwitch {
    /// The tier the tool is switched off for.
    pub tier: LicenseTier,
    /// Who switched it off.
    pub by: String,
    /// When (µs since the epoch).
    pub at: i64,
}

impl TierSwitch {
    /// When it was switched off, as RFC 3339 UTC to the second (`2026-03-01T10:00:00Z`).
    pub fn at_rfc3339(&self) -> String {
        // A time before the epoch is nobody's switch; shown as the epoch rather than refused.
        let us = u64::try_from(self.at).unwrap_or(0);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us);
        humantime::format_rfc3339_seconds(t).to_string()
    }
}

/// A decision and the counters it still depends on.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// Every layer's verdict combined.
    pub decision: PolicyDecision,
    /// The rate-limit counters the call must pass before it may run.
    pub rate_checks: Vec<RateCheck>,
}

fn tools_layer(policy: &Policy, req: &Request<'_>) -> LayerVerdict {
    let name = &req.tool.name;
    if let Some(rule) = &req.disabled {
        return LayerVerdict::stop(
            Layer::Tools,
            Decision::Deny,
            "tool_disabled",
            Severity::Warning,
            format!("tool {name} is disabled by the administrator"),
        )
        .by(rule.clone());
    }
    if let Some(switch) = req.switched_off {
        let tier = switch.tier;
        let at = switch.at_rfc3339();
        return LayerVerdict::stop(
            Layer::Tools,
            Decision::Deny,
            "tool_disabled",
            Severity::Warning,
            format!(
                "tool {name} is switched off for the {tier} tier (by {} at {at})",
                switch.by
            ),
        )
        .by(RuleRef::new(
            format!("{name} off for tier {tier}"),
            format!("switched off by {} at {at}", switch.by),
        ));
    }
    policy.tools.evaluate(req.tool)
}

/// Judges a call against a policy. Pure: the rate-limit counting and grants are applied by the
/// caller (see the module documentation).
pub fn evaluate(policy: &Policy, req: &Request<'_>) -> Evaluation {
    let def = req.tool;
    let env = &policy.env;
    // Room for every layer and the two the runtime adds (rate limits, a grant), so the trace
    // is allocated once.
    let mut trace = Vec::with_capacity(10);
    trace.extend([
        tools_layer(policy, req),
        license_layer(def, req.tier, req.custom_rank),
        mode::evaluate(&policy.modes, def, req.mode),
    ]);
    if let Some(v) = policy.exec.evaluate(
        def,
        req.argv,
        req.arguments,
        req.cwd.unwrap_or(&env.base),
        env.resolver.as_ref(),
    ) {
        trace.push(v);
    }
    trace.push(policy.rules.evaluate(
        def,
        req.arguments,
        req.argv,
        &env.base,
        env.home.as_deref(),
        env.resolver.as_ref(),
    ));
    trace.push(policy.access.evaluate(def, req.caller));
    trace.push(policy.permissions.evaluate(def, req.caller));
    trace.push(confirmation_layer(def, req.requires_confirmation));
    let decision = PolicyDecision::from_verdicts(trace);
    let rate_checks = policy.rates.checks(def, req.caller);
    Evaluation {
        decision,
        rate_checks,
    }
}
