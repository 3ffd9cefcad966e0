//! From the runtime's and the store's types to the wire types of tw-protocol. Kept apart from
//! the commands so that what the UI sees is decided in one place, and tested without a window.

use serde_json::Value;
use tw_core::policy::{Decision, LayerVerdict, PolicyDecision};
use tw_core::{RegisteredTool, ToolDefinition};
use tw_protocol::{AuditSummary, Confirmation, LayerLine, LiveEvent, ToolSummary};
use tw_runtime::{EventKind, ExecutionEvent, ToolKind};
use tw_store::{AuditRow, ConfirmationRow};

/// A grant as the grants list shows it.
pub(crate) fn grant(g: &tw_store::GrantRow) -> tw_protocol::Grant {
    let arguments = match &g.scope {
        tw_store::GrantScope::Exact(v) => v.clone(),
        tw_store::GrantScope::Pattern(m) => Value::Object(m.clone()),
        tw_store::GrantScope::Tool => Value::Null,
    };
    tw_protocol::Grant {
        id: g.id.clone(),
        tool: g.tool.clone(),
        scope: g.scope.kind().to_owned(),
        arguments,
        caller: g.agent_id.clone(),
        skill: g.skill.clone(),
        created_at: g.created_at,
        created_by: g.created_by.clone(),
        expires_at: g.expires_at,
    }
}

/// One line per layer of a decision.
pub(crate) fn trace(verdicts: &[LayerVerdict]) -> Vec<LayerLine> {
    verdicts
        .iter()
        .map(|v| LayerLine {
            layer: v.layer.as_str().to_owned(),
            decision: v.decision.to_string(),
            rule: v
                .rule
                .as_ref()
                .map(|r| format!("{} ({})", r.rule, r.source)),
            reason: v.reason.clone(),
        })
        .collect()
}

/// A stored explanation (the JSON of a `PolicyDecision`, or of its trace) as lines; anything
/// else gives none.
pub(crate) fn stored_trace(explanation: Option<&Value>) -> Vec<LayerLine> {
    let Some(v) = explanation else {
        return Vec::new();
    };
    if let Ok(d) = serde_json::from_value::<PolicyDecision>(v.clone()) {
        return trace(&d.trace);
    }
    serde_json::from_value::<Vec<LayerVerdict>>(v.clone())
        .map(|t| trace(&t))
        .unwrap_or_default()
}

/// A tool as the console lists it; `decision` is policy's verdict for the desktop's caller.
pub(crate) fn tool_summary(
    tool: &RegisteredTool<ToolKind>,
    decision: Option<&PolicyDecision>,
    disabled_tiers: &[tw_core::LicenseTier],
    current_tier: tw_core::LicenseTier,
) -> ToolSummary {
    let d: &ToolDefinition = &tool.definition;
    let (verdict, reason) = match decision {
        Some(p) => (
            p.decision.to_string(),
            p.trace
                .iter()
                .find(|v| v.decision == p.decision && p.decision != Decision::Allow)
                .or_else(|| p.trace.last())
                .map(|v| v.reason.clone())
                .unwrap_or_default(),
        ),
        None => ("deny".to_owned(), "no policy decision".to_owned()),
    };
    ToolSummary {
        name: d.name.to_string(),
        description: d.description.clone(),
        category: d.category.to_string(),
        group: d.group.to_string(),
        risk: d.risk_level.to_string(),
        tier: d.license_tier.to_string(),
        requires_confirmation: d.requires_confirmation,
        builtin: tool.kind.is_builtin(),
        enabled: !disabled_tiers.contains(&current_tier),
        disabled_tiers: disabled_tiers.iter().map(ToString::to_string).collect(),
        decision: verdict,
        reason,
    }
}

/// JSON pointers of arguments a person should look at twice: paths, commands, code and URLs.
pub(crate) fn risky_pointers(arguments: &Value) -> Vec<String> {
    const RISKY: [&str; 10] = [
        "path",
        "command",
        "code",
        "url",
        "argv",
        "script",
        "cwd",
        "destination",
        "target",
        "to",
    ];
    let mut out = Vec::new();
    fn walk(v: &Value, at: &str, out: &mut Vec<String>, key: Option<&str>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let escaped = k.replace('~', "~0").replace('/', "~1");
                    walk(child, &format!("{at}/{escaped}"), out, Some(k));
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{at}/{i}"), out, key);
                }
            }
            _ => {
                if key.is_some_and(|k| {
                    let k = k.to_ascii_lowercase();
                    RISKY
                        .iter()
                        .any(|r| k == *r || k.ends_with(&format!("_{r}")))
                }) {
                    out.push(at.to_owned());
                }
            }
        }
    }
    walk(arguments, "", &mut out, None);
    out
}

/// A pending confirmation.
pub(crate) fn confirmation(row: &ConfirmationRow, risk: Option<String>) -> Confirmation {
    Confirmation {
        id: row.id.clone(),
        execution_id: row.execution_id.clone(),
        tool: row.tool.clone(),
        caller: row.agent_id.clone(),
        skill: row.skill.clone(),
        risky: risky_pointers(&row.arguments),
        arguments: row.arguments.clone(),
        risk: risk.unwrap_or_else(|| "unknown".to_owned()),
        reason: row.reason.clone(),
        explanation: stored_trace(Some(&row.explanation)),
        created_at: row.created_at,
        expires_at: row.expires_at,
    }
}

/// One audit row as the table shows it.
pub(crate) fn audit_summary(row: &AuditRow) -> AuditSummary {
    AuditSummary {
        id: row.id,
        execution_id: row.execution_id.clone(),
        started_at: row.started_at,
        tool: row.tool.clone(),
        status: row.status.to_string(),
        caller: row.agent_id.clone(),
        skill: row.skill.clone(),
        decision: row.decision.clone(),
        duration_us: row.duration_us,
        error: row.error_message.clone(),
    }
}

/// A runtime event for the live view.
pub(crate) fn live_event(e: &ExecutionEvent) -> LiveEvent {
    let (kind, status, detail) = match &e.kind {
        EventKind::Started => ("started", None, None),
        EventKind::InProgress { stream, text } => (
            "progress",
            None,
            Some(format!(
                "{}: {text}",
                serde_json::to_value(stream)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )),
        ),
        EventKind::Completed { status, .. } => ("completed", Some(status.to_string()), None),
        EventKind::Failed {
            status, message, ..
        } => ("failed", Some(status.to_string()), Some(message.clone())),
        EventKind::Timeout { .. } => ("timeout", Some("timeout".to_owned()), None),
        EventKind::Denied { status, reason } => {
            ("denied", Some(status.to_string()), Some(reason.clone()))
        }
        EventKind::ConfirmationRequested { reason, .. } => {
            ("awaiting_confirmation", None, Some(reason.clone()))
        }
        EventKind::ConfirmationResolved { state, by, .. } => (
            "confirmation_resolved",
            None,
            Some(match by {
                Some(by) => format!("{state} by {by}"),
                None => state.clone(),
            }),
        ),
        EventKind::Warning { message } => ("warning", None, Some(message.clone())),
    };
    LiveEvent {
        execution_id: e.execution_id.to_string(),
        tool: e.tool.clone(),
        kind: kind.to_owned(),
        status,
        at: e.at,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn risky_arguments_are_pointed_at() {
        let args = json!({
            "path": "/etc/passwd",
            "options": {"mode": "w", "target_path": "x"},
            "argv": ["rm", "-rf"],
            "count": 3,
            "a/b": {"url": "http://x"}
        });
        assert_eq!(
            risky_pointers(&args),
            vec![
                "/path".to_owned(),
                "/options/target_path".to_owned(),
                "/argv/0".to_owned(),
                "/argv/1".to_owned(),
                "/a~1b/url".to_owned(),
            ]
        );
    }
}
