//! Rate limits: per tool (all callers together), per caller, and per skill and tool, each per
//! minute and/or per hour. This module only says which counters a call must pass and turns the
//! counting's outcome into a verdict; the counting itself must be atomic across concurrent calls
//! and processes and survive restarts, so the runtime does it in the store. Each document's
//! `[[rate_limits]]` are read here too (`gather`); limits add up across documents.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::doc::RateDoc;
use super::source::Reading;
use super::{Decision, Layer, LayerVerdict, RuleIndex, RuleRef, SelectorSet, Severity};
use crate::call::Caller;
use crate::definition::ToolDefinition;

/// One minute, in microseconds.
pub const MINUTE_US: i64 = 60_000_000;
/// One hour, in microseconds.
pub const HOUR_US: i64 = 60 * MINUTE_US;

/// Whose calls a limit counts together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// Every caller's calls to the tool.
    Tool,
    /// Each caller's calls to the limited tools.
    Caller,
    /// Each skill's calls to each tool.
    SkillTool,
}

/// A compiled `[[rate_limits]]` entry.
#[derive(Debug, Clone)]
pub struct RateRule {
    /// Which tools; `None` is every tool.
    pub tools: Option<SelectorSet>,
    /// Whose calls count together.
    pub per: Per,
    /// Calls per minute.
    pub per_minute: Option<u32>,
    /// Calls per hour.
    pub per_hour: Option<u32>,
    /// Where it was written.
    pub source: String,
}

/// At most `limit` calls in any `window_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateWindow {
    /// Window length in microseconds.
    pub window_us: i64,
    /// Calls allowed in the window.
    pub limit: u32,
}

/// A counter a call must pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateCheck {
    /// The counter's key (rule and scope), stable across restarts.
    pub key: String,
    /// Its windows.
    pub windows: Vec<RateWindow>,
    /// The rule, for explanations.
    pub rule: RuleRef,
}

/// What counting said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RateOutcome {
    /// Every counter had room; the call was counted.
    Admitted,
    /// A counter was full; nothing was counted.
    Limited {
        /// The counter.
        key: String,
        /// The full window.
        window_us: i64,
        /// Its limit.
        limit: u32,
        /// Calls already counted in the window.
        count: u64,
        /// When a slot frees up, from now.
        retry_after_us: i64,
    },
}

fn windows(per_minute: Option<u32>, per_hour: Option<u32>) -> Vec<RateWindow> {
    let mut w = Vec::new();
    if let Some(limit) = per_minute {
        w.push(RateWindow {
            window_us: MINUTE_US,
            limit,
        });
    }
    if let Some(limit) = per_hour {
        w.push(RateWindow {
            window_us: HOUR_US,
            limit,
        });
    }
    w
}

/// Reads one document's `[[rate_limits]]`; the limits that compile without a problem go to `out`.
pub(super) fn gather(r: &mut Reading<'_>, section: &[Spanned<RateDoc>], out: &mut Vec<RateRule>) {
    for rate in section {
        if let Some(rule) = rate_rule(r, rate) {
            out.push(rule);
        }
    }
}

/// One limit, or `None` if it is wrong (reported): an unknown scope, no window, or a limit of 0.
fn rate_rule(r: &mut Reading<'_>, rate: &Spanned<RateDoc>) -> Option<RateRule> {
    let doc = rate.get_ref();
    let tools = doc
        .tools
        .as_ref()
        .map(|t| r.selector_set(t, "rate_limits.tools"));
    let per = match doc.per.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
        None | Some(("tool", _)) => Per::Tool,
        Some(("caller", _)) => Per::Caller,
        Some(("skill_tool", _)) => Per::SkillTool,
        Some((other, span)) => {
            r.fail(
                span,
                format!(
                    "rate_limits.per: unknown scope {other:?}: expected tool, caller or skill_tool"
                ),
            );
            return None;
        }
    };
    let per_minute = doc.per_minute.as_ref().map(|v| (*v.get_ref(), v.span()));
    let per_hour = doc.per_hour.as_ref().map(|v| (*v.get_ref(), v.span()));
    if per_minute.is_none() && per_hour.is_none() {
        r.fail(rate.span(), "rate_limits: set per_minute, per_hour or both");
        return None;
    }
    if let Some((_, span)) = [&per_minute, &per_hour]
        .into_iter()
        .flatten()
        .find(|(v, _)| *v == 0)
        .cloned()
    {
        r.fail(
            span,
            "rate_limits: a limit of 0 would block the tools; deny them instead",
        );
        return None;
    }
    let (per_minute, per_hour) = (per_minute.map(|v| v.0), per_hour.map(|v| v.0));
    let named = match &doc.tools {
        Some(t) => t
            .iter()
            .map(|s| s.get_ref().as_str())
            .collect::<Vec<_>>()
            .join(","),
        None => "*".to_owned(),
    };
    r.note(format!(
        "rate limit {named} per {per:?} {per_minute:?}/min {per_hour:?}/h"
    ));
    Some(RateRule {
        tools,
        per,
        per_minute,
        per_hour,
        source: r.at(rate.span()),
    })
}

/// The compiled rate layer: the rules and an index of the tools each applies to.
#[derive(Debug, Clone, Default)]
pub struct RateLayer {
    /// The rules, in written order.
    pub rules: Vec<RateRule>,
    index: Option<RuleIndex>,
}

impl RateLayer {
    /// Indexes the rules.
    pub fn new(rules: Vec<RateRule>) -> Self {
        let selectors: Vec<Option<&SelectorSet>> = rules.iter().map(|r| r.tools.as_ref()).collect();
        let index = RuleIndex::new(&selectors).ok();
        Self { rules, index }
    }

    /// The counters a call to `def` by `caller` must pass: the tool's own declared limit, and
    /// every rule that names the tool.
    pub fn checks(&self, def: &ToolDefinition, caller: &Caller) -> Vec<RateCheck> {
        let mut out = Vec::new();
        if let Some(limit) = def.rate_limit {
            out.push(RateCheck {
                key: format!("tool:{}", def.name),
                windows: windows(limit.per_minute, limit.per_hour),
                rule: RuleRef::new(
                    "rate_limit".to_owned(),
                    format!("tool {} definition", def.name),
                ),
            });
        }
        let applies = match &self.index {
            Some(index) => index.applying(def),
            None => vec![true; self.rules.len()],
        };
        for (rule, applies) in self.rules.iter().zip(applies) {
            if !applies {
                continue;
            }
            let selector = match &rule.tools {
                Some(set) => match set.first_match(def) {
                    Some(r) => r.pattern.clone(),
                    None => continue,
                },
                None => "*".to_owned(),
            };
            let scope = match rule.per {
                Per::Tool => format!("tool:{}", def.name),
                Per::Caller => format!("caller:{}", caller.agent_id),
                Per::SkillTool => format!(
                    "skill:{}:tool:{}",
                    caller.skill.as_deref().unwrap_or("-"),
                    def.name
                ),
            };
            out.push(RateCheck {
                key: format!("{}|{scope}", rule.source),
                windows: windows(rule.per_minute, rule.per_hour),
                rule: RuleRef::new(
                    format!("{selector} per {:?}", rule.per).to_lowercase(),
                    &rule.source,
                ),
            });
        }
        out
    }
}

fn window_name(window_us: i64) -> &'static str {
    if window_us == MINUTE_US {
        "minute"
    } else {
        "hour"
    }
}

/// The rate layer's verdict from the counting's outcome.
pub fn judge(tool: &str, checks: &[RateCheck], outcome: &RateOutcome) -> LayerVerdict {
    match outcome {
        RateOutcome::Admitted if checks.is_empty() => {
            LayerVerdict::allow(Layer::RateLimit, format!("no rate limit applies to {tool}"))
        }
        RateOutcome::Admitted => LayerVerdict::allow(
            Layer::RateLimit,
            format!("{tool} is within its {} rate limit(s)", checks.len()),
        ),
        RateOutcome::Limited {
            key,
            window_us,
            limit,
            retry_after_us,
            ..
        } => {
            let verdict = LayerVerdict::stop(
                Layer::RateLimit,
                Decision::Deny,
                "rate_limited",
                Severity::Warning,
                format!(
                    "{tool} reached its limit of {limit} calls per {}; retry in {} s",
                    window_name(*window_us),
                    (retry_after_us + 999_999) / 1_000_000
                ),
            );
            match checks.iter().find(|c| &c.key == key) {
                Some(c) => verdict.by(c.rule.clone()),
                None => verdict,
            }
        }
    }
}
