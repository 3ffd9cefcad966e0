//! From the runtime's and the store's types to the wire types of tw-protocol. Kept apart from
//! the commands so that what the UI sees is decided in one place, and tested without a window.

use serde_json::Value;
use tw_core::policy::{Decision, LayerVerdict, PolicyDecision};
use tw_core::skill::{Diagnostic, Provenance, ResolvedTool, Severity};
use tw_core::{RegisteredTool, ToolDefinition};
use tw_protocol::{
    AuditSummary, BrowserFrame, Confirmation, LayerLine, LiveEvent, SkillDetail, SkillDiagnostic,
    SkillOverrideEntry, SkillSummary, SkillToolEntry, ToolSummary,
};
use tw_runtime::capabilities::{ResolvedEntry, ResolvedSkill, SkillFigures, describe_provenance};
use tw_runtime::skills::LoadedSkill;
use tw_runtime::{EventKind, ExecutionEvent, ToolKind};
use tw_store::{AuditRow, ConfirmationRow, SkillOverrideRow};

pub(crate) mod chains;

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
        context: row.context.clone(),
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
        EventKind::Lost { reason } => ("lost", Some("unknown".to_owned()), Some(reason.clone())),
        EventKind::Frame { url, .. } => ("frame", None, Some(url.clone())),
        // A step's state is not the chain call's status: it goes in the detail (for the live
        // view) and, structured, in `chain_step` (for the chains page's timeline).
        EventKind::ChainStep {
            step,
            status,
            detail,
            ..
        } => (
            "chain_step",
            None,
            Some(match detail {
                Some(d) => format!("{step}: {status}: {d}"),
                None => format!("{step}: {status}"),
            }),
        ),
    };
    let chain_step = match &e.kind {
        EventKind::ChainStep {
            step,
            status,
            attempts,
            execution_ids,
            detail,
        } => Some(tw_protocol::ChainStepUpdate {
            step: step.clone(),
            status: status.as_str().to_owned(),
            attempts: *attempts,
            execution_ids: execution_ids.clone(),
            error: detail.clone(),
        }),
        _ => None,
    };
    // Another team-store replica's call says where it runs, as another process's does.
    let detail = match (&e.replica, detail) {
        (None, detail) => detail,
        (Some(replica), None) => Some(format!("on replica {replica}")),
        (Some(replica), Some(d)) => Some(format!("{d} (on replica {replica})")),
    };
    LiveEvent {
        execution_id: e.execution_id.to_string(),
        tool: e.tool.clone(),
        kind: kind.to_owned(),
        status,
        at: e.at,
        detail,
        chain_step,
    }
}

/// A picture of a browser page from process `pid`'s event, if the event is one.
pub(crate) fn browser_frame(pid: u32, e: &ExecutionEvent) -> Option<BrowserFrame> {
    let EventKind::Frame {
        session,
        url,
        mime_type,
        data,
    } = &e.kind
    else {
        return None;
    };
    Some(BrowserFrame {
        pid,
        session: session.clone(),
        execution_id: e.execution_id.to_string(),
        tool: e.tool.clone(),
        url: url.clone(),
        at: e.at,
        image: format!("data:{mime_type};base64,{data}"),
    })
}

/// A SKILL.md problem.
pub(crate) fn skill_diagnostic(d: &Diagnostic) -> SkillDiagnostic {
    SkillDiagnostic {
        severity: match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
        .to_owned(),
        line: d.line,
        field: d.field.clone(),
        message: d.message.clone(),
    }
}

/// A skill as the list shows it: its folder as loaded, its figures (none for a skill the
/// figures were read before), and how many problems resolving the skill map found for it.
pub(crate) fn skill_summary(
    skill: &LoadedSkill,
    figures: Option<&SkillFigures>,
    problems: usize,
) -> SkillSummary {
    let count = |severity| {
        skill
            .diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    };
    SkillSummary {
        name: skill.folder.clone(),
        description: skill.manifest.as_ref().map(|m| m.description.clone()),
        loaded: skill.manifest.is_some(),
        errors: count(Severity::Error),
        warnings: count(Severity::Warning) + problems,
        tool_count: figures.map_or(0, |f| f.resolved.values().sum()),
        overrides: figures.map_or(0, |f| f.overrides),
        calls: figures.map_or(0, |f| f.calls),
        skill_denied: figures.map_or(0, |f| f.skill_denied),
    }
}

/// A resolved tool's rate limit and domain rules in words, as `toolwarden skills resolved`
/// writes them: `10/min; only example.org; not ads.example.org`.
pub(crate) fn skill_limits(t: &ResolvedTool) -> String {
    let mut limits = Vec::new();
    if let Some(r) = &t.rate_limit {
        if let Some(n) = r.per_minute {
            limits.push(format!("{n}/min"));
        }
        if let Some(n) = r.per_hour {
            limits.push(format!("{n}/h"));
        }
    }
    if !t.allowed_domains.is_empty() {
        limits.push(format!("only {}", t.allowed_domains.join(" ")));
    }
    if !t.blocked_domains.is_empty() {
        limits.push(format!("not {}", t.blocked_domains.join(" ")));
    }
    limits.join("; ")
}

/// One tool of a resolved skill.
pub(crate) fn skill_tool(e: &ResolvedEntry) -> SkillToolEntry {
    let kind = match e.tool.provenance {
        Provenance::Manifest => "manifest",
        Provenance::Inherited(_) => "inherited",
        Provenance::Capability(_) => "capability",
        Provenance::Override(_) => "override",
    };
    SkillToolEntry {
        name: e.tool.name.clone(),
        access_level: e.tool.access_level.to_string(),
        provenance: describe_provenance(e),
        provenance_kind: kind.to_owned(),
        registered: e.registered,
        limits: skill_limits(&e.tool),
    }
}

/// An administrator's override.
pub(crate) fn skill_override(r: &SkillOverrideRow) -> SkillOverrideEntry {
    SkillOverrideEntry {
        tool: r.tool.clone(),
        action: r.action.as_str().to_owned(),
        access_level: r.access_level.map(|l| l.to_string()),
        reason: r.reason.clone(),
        created_at: r.created_at,
        created_by: r.created_by.clone(),
    }
}

/// A skill in full: its folder as loaded, its SKILL.md's text, what it resolves to (`None` when
/// no manifest is in force), every override (those of other skills are left out) and the
/// problems resolving the skill map found for it.
pub(crate) fn skill_detail(
    skill: &LoadedSkill,
    text: String,
    resolved: Option<&ResolvedSkill>,
    overrides: &[SkillOverrideRow],
    problems: Vec<String>,
) -> SkillDetail {
    SkillDetail {
        name: skill.folder.clone(),
        path: skill.path.display().to_string(),
        description: skill.manifest.as_ref().map(|m| m.description.clone()),
        loaded: skill.manifest.is_some(),
        text,
        diagnostics: skill.diagnostics.iter().map(skill_diagnostic).collect(),
        problems,
        permissions: resolved.map(|r| r.permissions.clone()).unwrap_or_default(),
        unknown_permissions: resolved
            .map(|r| r.unknown_permissions.clone())
            .unwrap_or_default(),
        dangling_overrides: resolved
            .map(|r| r.dangling_overrides.clone())
            .unwrap_or_default(),
        tools: resolved
            .map(|r| r.tools.iter().map(skill_tool).collect())
            .unwrap_or_default(),
        overrides: overrides
            .iter()
            .filter(|o| o.skill == skill.folder)
            .map(skill_override)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tw_core::capability::Source;
    use tw_core::policy::access::AccessLevel;
    use tw_core::skill::SkillRate;
    use tw_runtime::capabilities::ClassificationNote;

    use super::*;

    fn entry(name: &str, provenance: Provenance) -> ResolvedEntry {
        ResolvedEntry {
            tool: ResolvedTool {
                name: name.to_owned(),
                access_level: AccessLevel::Standard,
                rate_limit: None,
                allowed_domains: Vec::new(),
                blocked_domains: Vec::new(),
                provenance,
                domains: None,
            },
            registered: true,
            classification: None,
        }
    }

    #[test]
    fn a_resolved_skill_is_shown_with_provenance_kinds_limits_and_its_own_overrides() {
        let mut fetch = entry("http_fetch", Provenance::Manifest);
        fetch.tool.rate_limit = Some(SkillRate {
            per_minute: Some(10),
            per_hour: Some(100),
        });
        fetch.tool.allowed_domains = vec!["example.org".into()];
        fetch.tool.blocked_domains = vec!["ads.example.org".into()];
        let mut list = entry(
            "list_directory",
            Provenance::Capability("filesystem_read".into()),
        );
        list.classification = Some(ClassificationNote {
            source: Source::Static,
            confidence: 1.0,
        });
        let mut exec = entry("exec", Provenance::Override("desktop:ann".into()));
        exec.tool.access_level = AccessLevel::Elevated;
        exec.registered = false;
        let search = entry("web_search", Provenance::Inherited("base".into()));
        let resolved = ResolvedSkill {
            skill: "research".into(),
            permissions: vec!["filesystem_read".into(), "telepathy".into()],
            tools: vec![exec, fetch, list, search],
            unknown_permissions: vec!["telepathy".into()],
            dangling_overrides: vec!["gone".into()],
        };
        let loaded = LoadedSkill {
            folder: "research".into(),
            path: "/ws/skills/research/SKILL.md".into(),
            manifest: None,
            diagnostics: vec![Diagnostic {
                severity: Severity::Warning,
                line: 4,
                field: Some("colour".into()),
                message: "unknown field".into(),
            }],
        };
        let row = |skill: &str, tool: &str, action, level| SkillOverrideRow {
            skill: skill.into(),
            tool: tool.into(),
            action,
            access_level: level,
            reason: Some("why".into()),
            created_at: 7,
            created_by: "desktop:ann".into(),
        };
        let overrides = [
            row(
                "research",
                "exec",
                tw_store::OverrideAction::Add,
                Some(AccessLevel::Elevated),
            ),
            row("other", "exec", tw_store::OverrideAction::Remove, None),
        ];
        let detail = skill_detail(
            &loaded,
            "---".into(),
            Some(&resolved),
            &overrides,
            vec!["inherits from missing".into()],
        );
        let words: Vec<(&str, &str, &str, &str, bool)> = detail
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.access_level.as_str(),
                    t.provenance_kind.as_str(),
                    t.provenance.as_str(),
                    t.registered,
                )
            })
            .collect();
        assert_eq!(
            words,
            vec![
                (
                    "exec",
                    "elevated",
                    "override",
                    "override by desktop:ann",
                    false
                ),
                ("http_fetch", "standard", "manifest", "manifest", true),
                (
                    "list_directory",
                    "standard",
                    "capability",
                    "capability filesystem_read (static 1.00)",
                    true
                ),
                (
                    "web_search",
                    "standard",
                    "inherited",
                    "inherited from base",
                    true
                ),
            ]
        );
        assert_eq!(
            detail.tools[1].limits,
            "10/min; 100/h; only example.org; not ads.example.org"
        );
        assert_eq!(
            detail.overrides,
            vec![SkillOverrideEntry {
                tool: "exec".into(),
                action: "add".into(),
                access_level: Some("elevated".into()),
                reason: Some("why".into()),
                created_at: 7,
                created_by: "desktop:ann".into(),
            }]
        );
        assert_eq!(
            detail.diagnostics,
            vec![SkillDiagnostic {
                severity: "warning".into(),
                line: 4,
                field: Some("colour".into()),
                message: "unknown field".into(),
            }]
        );
        assert_eq!(detail.unknown_permissions, ["telepathy"]);
        assert_eq!(detail.dangling_overrides, ["gone"]);
        assert_eq!(detail.problems, ["inherits from missing"]);
        assert!(!detail.loaded);

        let unresolved = skill_detail(&loaded, String::new(), None, &[], Vec::new());
        assert_eq!(
            (unresolved.tools.len(), unresolved.permissions.len()),
            (0, 0)
        );
    }

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
