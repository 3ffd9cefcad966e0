//! `toolwarden skills ...`: the skills directory (the config's `skills_dir`, else the first
//! workspace root's `skills` folder) as loaded, each skill's resolved tools with where they came
//! from (manifest, inherited, capability, override), every SKILL.md problem as `FILE:LINE`, the
//! administrators' overrides and capability settings, lifecycle figures, and validated saves.

use anyhow::bail;
use serde_json::json;
use tw_runtime::Runtime;
use tw_store::AuditQuery;

use crate::cli::{OverrideCommand, SkillsCommand};
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

/// A diagnostic as `FILE:LINE: severity: ...`.
fn located(path: &std::path::Path, d: &tw_core::skill::Diagnostic) -> String {
    format!(
        "{}:{}",
        path.display(),
        d.to_string().trim_start_matches("line ")
    )
}

pub(crate) async fn run(rt: &Runtime, ctx: &Context, cmd: SkillsCommand) -> anyhow::Result<u8> {
    // The runtime loaded them as it opened. A directory it cannot read is an error here, not an
    // empty list: every call under a skill is refused until it can be read.
    let dir = rt.skills_dir();
    let skills = rt.skills();
    if let Some(e) = skills.error()
        && matches!(
            cmd,
            SkillsCommand::List { .. }
                | SkillsCommand::Show { .. }
                | SkillsCommand::Check
                | SkillsCommand::Report { .. }
                | SkillsCommand::Resolved { .. }
                | SkillsCommand::Metrics { .. }
        )
    {
        bail!("the skills directory cannot be read: {e}");
    }
    match cmd {
        SkillsCommand::List { json: true } => {
            let rows: Vec<_> = skills
                .skills
                .iter()
                .map(|s| {
                    json!({
                        "name": s.folder,
                        "loaded": s.manifest.is_some(),
                        "description": s.manifest.as_ref().map(|m| m.description.clone()),
                        "tools": skills.map.tools_of(&s.folder).map(|t| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>()),
                        "diagnostics": s.diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    })
                })
                .collect();
            outln!("{}", serde_json::to_string_pretty(&rows)?)?;
            Ok(0)
        }
        SkillsCommand::List { json: false } => {
            if skills.skills.is_empty() {
                outln!("No skills in {}.", dir.display())?;
                return Ok(0);
            }
            let mut table = Table::new(&["SKILL", "STATUS", "TOOLS", "DESCRIPTION"]).max_width(60);
            for s in &skills.skills {
                let tools = skills
                    .map
                    .tools_of(&s.folder)
                    .map(|t| {
                        t.iter()
                            .map(|t| t.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let status = if s.manifest.is_some() { "ok" } else { "error" };
                let description = s
                    .manifest
                    .as_ref()
                    .map(|m| m.description.clone())
                    .unwrap_or_default();
                table.row(vec![
                    s.folder.clone(),
                    status.to_owned(),
                    tools,
                    description,
                ]);
            }
            out!("{}", table.render())?;
            Ok(0)
        }
        SkillsCommand::Show { name, json } => {
            let Some(s) = skills.get(&name) else {
                errln!("error: no skill {name:?} in {}", dir.display());
                return Ok(2);
            };
            let resolved = rt.resolve_skill(&name);
            let tools = resolved
                .as_ref()
                .map(|r| r.tools.as_slice())
                .unwrap_or_default();
            if json {
                let out = json!({
                    "name": s.folder,
                    "path": s.path,
                    "manifest": s.manifest,
                    "resolved_tools": tools,
                    "diagnostics": s.diagnostics,
                });
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
                return Ok(0);
            }
            outln!("skill:  {}", s.folder)?;
            outln!("file:   {}", s.path.display())?;
            if let Some(m) = &s.manifest {
                outln!("about:  {}", m.description)?;
            }
            out!("{}", resolved_table(tools).render())?;
            for d in &s.diagnostics {
                outln!("{}", located(&s.path, d))?;
            }
            Ok(0)
        }
        SkillsCommand::Report { name, json } => {
            let declared: Vec<tw_core::skill::ResolvedTool> = rt
                .resolve_skill(&name)
                .map(|r| r.tools.into_iter().map(|e| e.tool).collect())
                .unwrap_or_default();
            let q = AuditQuery {
                skill: Some(name.clone()),
                ..AuditQuery::default()
            };
            let used = rt.store().usage_report(&q).await?.by_tool;
            let mut rows: Vec<(String, String, u64, u64, u64)> = declared
                .iter()
                .map(|t| {
                    let u = used.iter().find(|u| u.key == t.name);
                    let from = match &t.provenance {
                        tw_core::skill::Provenance::Manifest => "declared".to_owned(),
                        other => other.to_string(),
                    };
                    (
                        t.name.clone(),
                        from,
                        u.map_or(0, |u| u.calls),
                        u.map_or(0, |u| u.success),
                        u.map_or(0, |u| u.denied),
                    )
                })
                .collect();
            for u in used
                .iter()
                .filter(|u| !declared.iter().any(|t| t.name == u.key))
            {
                rows.push((
                    u.key.clone(),
                    "not in the skill".to_owned(),
                    u.calls,
                    u.success,
                    u.denied,
                ));
            }
            if json {
                let out: Vec<_> = rows
                    .iter()
                    .map(|(tool, from, calls, ok, denied)| {
                        json!({"tool": tool, "declared": from, "calls": calls, "success": ok, "denied": denied})
                    })
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
                return Ok(0);
            }
            if skills.get(&name).is_none() && rows.is_empty() {
                errln!(
                    "error: no skill {name:?} in {} and no calls made under it",
                    dir.display()
                );
                return Ok(2);
            }
            let mut table = Table::new(&["TOOL", "DECLARED", "CALLS", "SUCCESS", "DENIED"]);
            for (tool, from, calls, ok, denied) in rows {
                table.row(vec![
                    tool,
                    from,
                    calls.to_string(),
                    ok.to_string(),
                    denied.to_string(),
                ]);
            }
            out!("{}", table.render())?;
            Ok(0)
        }
        SkillsCommand::Resolved { name, json } => {
            let Some(resolved) = rt.resolve_skill(&name) else {
                errln!("error: no skill {name:?} is loaded from {}", dir.display());
                return Ok(2);
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&resolved)?)?;
                return Ok(0);
            }
            out!("{}", resolved_table(&resolved.tools).render())?;
            if !resolved.permissions.is_empty() {
                outln!("permissions: {}", resolved.permissions.join(", "))?;
            }
            for p in &resolved.unknown_permissions {
                outln!(
                    "warning: permission {p:?} is not a capability in the catalog; it reaches no tool"
                )?;
            }
            for t in &resolved.dangling_overrides {
                outln!("warning: an override names tool {t:?}, which is not registered")?;
            }
            Ok(0)
        }
        SkillsCommand::Override { name, action } => {
            let actor = crate::confirm::actor(ctx);
            let (tool, outcome) = match action {
                OverrideCommand::Add {
                    tool,
                    level,
                    reason,
                } => {
                    let level: tw_core::policy::access::AccessLevel = match level.parse() {
                        Ok(l) => l,
                        Err(e) => {
                            errln!("error: --level: {e}");
                            return Ok(2);
                        }
                    };
                    let r = rt
                        .set_skill_override(&name, &tool, Some(level), reason.as_deref(), &actor)
                        .await;
                    (tool, r.map(|_| format!("skill {name} may now use tool {{}} up to {level} access (override by {actor})")))
                }
                OverrideCommand::Remove { tool, reason } => {
                    let r = rt
                        .set_skill_override(&name, &tool, None, reason.as_deref(), &actor)
                        .await;
                    (
                        tool,
                        r.map(|_| {
                            format!(
                                "skill {name} may no longer use tool {{}} (override by {actor})"
                            )
                        }),
                    )
                }
                OverrideCommand::Clear { tool } => {
                    let r = rt.clear_skill_override(&name, &tool, &actor).await;
                    (
                        tool,
                        r.map(|removed| match removed {
                            Some(_) => {
                                format!("the override of tool {{}} for skill {name} is cleared")
                            }
                            None => format!(
                                "skill {name} had no override of tool {{}}; nothing changed"
                            ),
                        }),
                    )
                }
            };
            match outcome {
                Ok(line) => {
                    outln!("{}", line.replace("{}", &tool))?;
                    Ok(0)
                }
                Err(e) => {
                    errln!("error: {e}");
                    Ok(2)
                }
            }
        }
        SkillsCommand::Overrides { name, json } => {
            let state = rt.skill_overrides();
            let rows: Vec<_> = state
                .rows
                .iter()
                .filter(|r| name.as_deref().is_none_or(|n| r.skill == n))
                .collect();
            if json {
                let out: Vec<_> = rows
                    .iter()
                    .map(|r| tw_runtime::capabilities::override_json(r))
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&out)?)?;
                return Ok(0);
            }
            if rows.is_empty() {
                outln!("No overrides.")?;
                return Ok(0);
            }
            for r in rows {
                outln!("{}", tw_runtime::capabilities::describe_override(r))?;
            }
            Ok(0)
        }
        SkillsCommand::Capabilities { tool, json } => {
            let state = rt.capabilities();
            let tools: Vec<_> = state
                .tools
                .values()
                .filter(|t| tool.as_deref().is_none_or(|n| t.tool == n))
                .collect();
            if let Some(t) = &tool
                && tools.is_empty()
            {
                errln!("error: no registered tool named {t:?}");
                return Ok(2);
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&tools)?)?;
                return Ok(0);
            }
            let mut table =
                Table::new(&["TOOL", "CAPABILITIES", "SOURCE", "BY", "WHY"]).max_width(70);
            for t in tools {
                let caps = t
                    .classification
                    .capabilities
                    .iter()
                    .map(|a| {
                        let used = if t.effective(state.min_confidence).contains(&a.capability) {
                            ""
                        } else {
                            " (below threshold)"
                        };
                        format!("{} {:.2}{used}", a.capability, a.confidence)
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                table.row(vec![
                    t.tool.clone(),
                    if caps.is_empty() {
                        "-".to_owned()
                    } else {
                        caps
                    },
                    t.classification.source.to_string(),
                    t.classified_by.clone(),
                    t.classification.detail.clone().unwrap_or_default(),
                ]);
            }
            out!("{}", table.render())?;
            Ok(0)
        }
        SkillsCommand::Classify {
            tool,
            set,
            note,
            clear,
            again,
        } => {
            let actor = crate::confirm::actor(ctx);
            let result = if let Some(set) = set {
                let caps: Vec<String> = set
                    .split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect();
                rt.set_tool_capabilities(&tool, &caps, note.as_deref(), &actor)
                    .await
                    .map(Some)
            } else if clear {
                match rt.clear_tool_capabilities(&tool, &actor).await {
                    Ok(false) => {
                        outln!("tool {tool} had no administrator's capabilities; nothing changed")?;
                        return Ok(0);
                    }
                    Ok(true) => Ok(rt.capabilities().tools.get(&tool).cloned()),
                    Err(e) => Err(e),
                }
            } else if again {
                rt.reclassify_tool(&tool).await.map(Some)
            } else {
                errln!("error: say --set CAPABILITIES, --clear or --again");
                return Ok(2);
            };
            match result {
                Ok(Some(t)) => {
                    let caps: Vec<String> = t
                        .classification
                        .capabilities
                        .iter()
                        .map(|a| format!("{} {:.2}", a.capability, a.confidence))
                        .collect();
                    outln!(
                        "tool {tool}: {} ({} by {})",
                        if caps.is_empty() {
                            "no capability".to_owned()
                        } else {
                            caps.join(", ")
                        },
                        t.classification.source,
                        t.classified_by
                    )?;
                    Ok(0)
                }
                Ok(None) => Ok(0),
                Err(e) => {
                    errln!("error: {e}");
                    Ok(2)
                }
            }
        }
        SkillsCommand::Metrics { json } => {
            let m = rt.skill_metrics().await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&m)?)?;
                return Ok(0);
            }
            let mut table = Table::new(&[
                "SKILL",
                "LOADED",
                "TOOLS",
                "FROM",
                "OVERRIDES",
                "CALLS",
                "SKILL-DENIED",
            ]);
            for f in &m.skills {
                let total: usize = f.resolved.values().sum();
                let from = f
                    .resolved
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                table.row(vec![
                    f.skill.clone(),
                    if f.loaded { "yes" } else { "no" }.to_owned(),
                    total.to_string(),
                    from,
                    f.overrides.to_string(),
                    f.calls.to_string(),
                    f.skill_denied.to_string(),
                ]);
            }
            out!("{}", table.render())?;
            let sources = m
                .classification_sources
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            outln!("tools classified by: {sources}")?;
            Ok(0)
        }
        SkillsCommand::Text { name } => match rt.skill_text(&name) {
            Ok(text) => {
                out!("{text}")?;
                Ok(0)
            }
            Err(e) => {
                errln!("error: {e}");
                Ok(2)
            }
        },
        SkillsCommand::Save { name, file } => {
            let text = if file == "-" {
                let mut t = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)?;
                t
            } else {
                match std::fs::read_to_string(&file) {
                    Ok(t) => t,
                    Err(e) => {
                        errln!("error: {file}: {e}");
                        return Ok(2);
                    }
                }
            };
            let shown = if file == "-" {
                "<stdin>"
            } else {
                file.as_str()
            };
            match rt
                .save_skill(&name, &text, &crate::confirm::actor(ctx))
                .await
            {
                Ok(saved) => {
                    for d in &saved.warnings {
                        errln!("{shown}:{}", d.to_string().trim_start_matches("line "));
                    }
                    outln!(
                        "{} {}",
                        if saved.created { "created" } else { "saved" },
                        saved.path.display()
                    )?;
                    Ok(0)
                }
                Err(tw_runtime::RuntimeError::SkillInvalid { diagnostics, .. }) => {
                    for d in &diagnostics {
                        errln!("{shown}:{}", d.to_string().trim_start_matches("line "));
                    }
                    errln!("error: not saved; the skill in force is unchanged");
                    Ok(1)
                }
                Err(e) => {
                    errln!("error: {e}");
                    Ok(2)
                }
            }
        }
        SkillsCommand::Check => {
            let mut errors = 0;
            for s in &skills.skills {
                for d in &s.diagnostics {
                    if d.severity == tw_core::skill::Severity::Error {
                        errors += 1;
                    }
                    outln!("{}", located(&s.path, d))?;
                }
            }
            for p in skills.map.problems() {
                outln!("skill {}: {}", p.skill, p.message)?;
            }
            let catalog = rt.capabilities().catalog.clone();
            for s in skills.skills.iter().filter_map(|s| s.manifest.as_ref()) {
                for p in s.permissions.iter().filter(|p| !catalog.contains(p)) {
                    outln!(
                        "skill {}: permission {p:?} is not a capability in the catalog; it reaches no tool",
                        s.name
                    )?;
                }
            }
            let loaded = skills
                .skills
                .iter()
                .filter(|s| s.manifest.is_some())
                .count();
            outln!(
                "{loaded} of {} skills load; {errors} error(s)",
                skills.skills.len()
            )?;
            Ok(u8::from(errors > 0))
        }
    }
}

/// A resolved skill's tools as a table.
fn resolved_table(tools: &[tw_runtime::capabilities::ResolvedEntry]) -> Table {
    let mut table = Table::new(&["TOOL", "LEVEL", "FROM", "LIMITS"]);
    for t in tools {
        let mut limits = Vec::new();
        if let Some(r) = &t.tool.rate_limit {
            if let Some(n) = r.per_minute {
                limits.push(format!("{n}/min"));
            }
            if let Some(n) = r.per_hour {
                limits.push(format!("{n}/h"));
            }
        }
        if !t.tool.allowed_domains.is_empty() {
            limits.push(format!("only {}", t.tool.allowed_domains.join(" ")));
        }
        if !t.tool.blocked_domains.is_empty() {
            limits.push(format!("not {}", t.tool.blocked_domains.join(" ")));
        }
        let mut name = t.tool.name.clone();
        if !t.registered {
            name.push_str(" (not registered)");
        }
        table.row(vec![
            name,
            t.tool.access_level.to_string(),
            tw_runtime::capabilities::describe_provenance(t),
            limits.join("; "),
        ]);
    }
    table
}
