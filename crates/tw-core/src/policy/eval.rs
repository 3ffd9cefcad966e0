//! Judging one call: every layer's verdict, combined strictest-wins, with the rule behind each.
//!
//! Two layers need state the pure core does not keep. Rate limits must be counted atomically,
//! across processes, and survive restarts, so [`evaluate`] returns the counters the call must pass
//! ([`Evaluation::rate_checks`]) and the runtime counts them in the store and adds the verdict
//! (`rate::judge`). Grants are a person's standing approvals, kept in the store: the runtime
//! offers the active ones to [`super::PolicyDecision::apply_grant`] when the decision is Ask.
//! Every layer is evaluated even after one denies, so an explanation shows the whole picture.

use serde_json::Value;

use super::compile::Policy;
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
    /// Whether the tool asks for approval on every call (after administrator overrides).
    pub requires_confirmation: bool,
    /// An administrator override that disables the tool, and where it was set.
    pub disabled: Option<RuleRef>,
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
    match &req.disabled {
        Some(rule) => LayerVerdict::stop(
            Layer::Tools,
            Decision::Deny,
            "tool_disabled",
            Severity::Warning,
            format!("tool {} is disabled by the administrator", req.tool.name),
        )
        .by(rule.clone()),
        None => policy.tools.evaluate(req.tool),
    }
}

fn mode_layer(policy: &Policy, def: &ToolDefinition, mode: OperationalMode) -> LayerVerdict {
    if !def.allowed_modes.contains(&mode) {
        return LayerVerdict::stop(
            Layer::Mode,
            Decision::Deny,
            "mode_forbidden",
            Severity::Warning,
            format!(
                "tool {} may not run in {mode} mode (it allows: {})",
                def.name,
                def.allowed_modes
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .by(RuleRef::new("allowed_modes", format!("tool {}", def.name)));
    }
    if let Some(rules) = policy.modes.get(&mode) {
        if let Some(r) = rules.forbid.first_match(def) {
            return LayerVerdict::stop(
                Layer::Mode,
                Decision::Deny,
                "mode_forbidden",
                Severity::Warning,
                format!("{mode} mode forbids {} (rule {:?})", def.name, r.pattern),
            )
            .by(RuleRef::new(
                format!("modes.{mode}.forbid {}", r.pattern),
                &r.source,
            ));
        }
        if let Some(r) = rules.ask.first_match(def) {
            return LayerVerdict::stop(
                Layer::Mode,
                Decision::Ask,
                "mode_ask",
                Severity::Warning,
                format!(
                    "in {mode} mode {} needs a person's approval (rule {:?})",
                    def.name, r.pattern
                ),
            )
            .by(RuleRef::new(
                format!("modes.{mode}.ask {}", r.pattern),
                &r.source,
            ));
        }
    }
    LayerVerdict::allow(
        Layer::Mode,
        format!("tool {} may run in {mode} mode", def.name),
    )
}

/// Judges a call against a policy. Pure: the rate-limit counting and grants are applied by the
/// caller (see the module documentation).
pub fn evaluate(policy: &Policy, req: &Request<'_>) -> Evaluation {
    let def = req.tool;
    let env = &policy.env;
    let mut trace = vec![
        tools_layer(policy, req),
        license_layer(def, req.tier, req.custom_rank),
        mode_layer(policy, def, req.mode),
    ];
    if let Some(v) = policy.exec.evaluate(
        def,
        req.argv,
        req.arguments,
        &env.base,
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
    trace.push(confirmation_layer(def, req.requires_confirmation));
    let decision = PolicyDecision::from_verdicts(trace);
    let rate_checks = policy.rates.checks(def, req.caller);
    Evaluation {
        decision,
        rate_checks,
    }
}
