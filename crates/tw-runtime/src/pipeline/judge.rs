//! Stage 2, judging a call: every layer of `tw_core::policy` over the snapshots the services
//! hold (policy, tier and mode from settings; tier switches and custom-tool ranks from tools),
//! the quarantine of imported tools, and the skill layer for a call made under a skill. The same
//! judgment explains a call without running or counting it, and lists a tool's verdict before
//! any arguments are known.

use std::sync::Arc;

use serde_json::{Value, json};
use tw_core::policy::{self, Policy, PolicyDecision, Request, RuleRef};
use tw_core::{Caller, ToolDefinition};

use super::Pipeline;
use super::run::RunPlan;
use crate::kind::{Entry, ToolKind};
use crate::settings::PolicyState;

impl Pipeline {
    /// Judges a call: `count` when it is a real call (it then counts in the skills' figures).
    pub(super) fn evaluate(
        &self,
        state: &PolicyState,
        entry: &Entry,
        arguments: &Value,
        caller: &Caller,
        run: &RunPlan,
        count: bool,
    ) -> policy::Evaluation {
        let argv = run.argv.as_deref();
        let def = Self::judged_as(entry, arguments);
        let name = def.name.as_str();
        let overrides = state.overrides.get(name);
        let disabled = overrides
            .filter(|o| o.enabled == Some(false))
            .map(|_| RuleRef::new(format!("[tools.{name}] enabled = false"), "configuration"));
        let switches = self.tools.switches();
        let switched_off = switches.get(name, state.tier);
        let requires_confirmation = overrides
            .and_then(|o| o.requires_confirmation)
            .unwrap_or(def.requires_confirmation);
        let custom_rank = match entry.kind {
            ToolKind::Custom(_) => Some(self.tools.custom_rank(name).unwrap_or(usize::MAX)),
            ToolKind::Builtin(_)
            | ToolKind::Process(_)
            | ToolKind::Upstream(_)
            | ToolKind::Chain(_) => None,
        };
        let mut evaluation = policy::evaluate(
            &state.policy,
            &Request {
                tool: def,
                arguments,
                caller,
                tier: state.tier,
                mode: state.mode,
                custom_rank,
                argv,
                requires_confirmation,
                disabled,
                switched_off,
                cwd: run.cwd.to_str(),
            },
        );
        if matches!(entry.kind, ToolKind::Upstream(_))
            && let Some(reason) = self.upstreams.quarantine_reason(name)
        {
            evaluation.decision.push(policy::LayerVerdict::stop(
                policy::Layer::Tools,
                tw_core::Decision::Deny,
                crate::upstream::QUARANTINED,
                tw_core::policy::Severity::Critical,
                reason,
            ));
        }
        if let Some(skill) = &caller.skill {
            let (needed, _) = state.policy.access.needed(def);
            let judged = self
                .skills
                .judge(skill, def, needed, arguments, argv, count);
            evaluation.decision.push(judged.verdict);
            evaluation.rate_checks.extend(judged.rate);
        }
        evaluation
    }

    /// The definition a call is judged as when its arguments decide whether it has side effects
    /// (`http_fetch` with GET only reads): the same contract with that one constraint changed.
    fn judged_as<'a>(entry: &'a Entry, arguments: &Value) -> &'a ToolDefinition {
        match &entry.kind {
            ToolKind::Builtin(tool) => match tool.side_effects(arguments) {
                Some(side_effects) => entry.with_side_effects(side_effects),
                None => &entry.definition,
            },
            _ => &entry.definition,
        }
    }

    /// Explains how policy would judge a call now, without running or counting anything. Rate
    /// limits are listed as the counters the call would be checked against.
    pub fn explain(
        &self,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        self.explain_with(None, tool, arguments, caller)
    }

    /// Like [`Pipeline::explain`], under another policy (`None`: the one in force). For
    /// simulating a proposed policy against recorded calls.
    pub fn explain_with(
        &self,
        policy: Option<&Arc<Policy>>,
        tool: &str,
        arguments: &Value,
        caller: &Caller,
    ) -> Option<PolicyDecision> {
        let entry = self.shared.registry.get(tool)?;
        let mut state = self.settings.state();
        if let Some(p) = policy {
            let mut proposed = PolicyState::clone(&state);
            proposed.policy = Arc::clone(p);
            state = Arc::new(proposed);
        }
        let run = self.plan_run(&entry, arguments);
        let hidden = super::redacted(arguments);
        let evaluation = self.evaluate(
            &state,
            &entry,
            hidden.as_ref().unwrap_or(arguments),
            &caller.sanitized(),
            &run,
            false,
        );
        let mut decision = evaluation.decision;
        if !evaluation.rate_checks.is_empty() {
            decision.push(policy::LayerVerdict::allow(
                policy::Layer::RateLimit,
                format!(
                    "the call would be counted against {} rate limit(s): {}",
                    evaluation.rate_checks.len(),
                    evaluation
                        .rate_checks
                        .iter()
                        .map(|c| format!("{} ({})", c.rule.rule, c.rule.source))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Some(decision)
    }

    /// What policy decides for a tool before any arguments are known: every layer that does not
    /// look at arguments (tools, license, mode, access, confirmation). For listings and exports.
    pub fn tool_decision(&self, tool: &str, caller: &Caller) -> Option<PolicyDecision> {
        let decision = self.explain(tool, &json!({}), caller)?;
        let trace = decision
            .trace
            .into_iter()
            .filter(|v| {
                !matches!(
                    v.layer,
                    policy::Layer::Exec | policy::Layer::Arguments | policy::Layer::RateLimit
                )
            })
            .collect();
        Some(PolicyDecision::from_verdicts(trace))
    }
}
