//! `toolwarden skills ...`: the skills directory (the config's `skills_dir`, else the first
//! workspace root's `skills` folder) as loaded, each skill's resolved tools with where they came
//! from (manifest, inherited, capability, override), every SKILL.md problem as `FILE:LINE`, the
//! administrators' overrides and capability settings, lifecycle figures, and validated saves.
//!
//! One function per subcommand; the skills service checks and does the work, and its refusals
//! exit with their kind's code (`crate::exit`).

use std::sync::Arc;

use serde_json::json;
use tw_runtime::skills::Skills;
use tw_runtime::{OverrideChange, Runtime, RuntimeError};
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
    match cmd {
        SkillsCommand::List { json } => list(rt, json),
        SkillsCommand::Show { name, json } => show(rt, &name, json),
        SkillsCommand::Check => check(rt),
        SkillsCommand::Report { name, json } => report(rt, &name, json).await,
        SkillsCommand::Resolved { name, json } => resolved(rt, &name, json),
        SkillsCommand::Override { name, action } => change_override(rt, ctx, &name, action).await,
        SkillsCommand::Overrides { name, json } => overrides(rt, name.as_deref(), json),
        SkillsCommand::Capabilities { tool, json } => capabilities(rt, tool.as_deref(), json),
        SkillsCommand::Classify {
            tool,
            set,
            note,
            clear,
            again,
        } => classify(rt, ctx, &tool, Classify::asked(set, note, clear, again)).await,
        SkillsCommand::Metrics { json } => metrics(rt, json).await,
        SkillsCommand::Text { name } => text(rt, &name),
        SkillsCommand::Save { name, file } => save(rt, ctx, &name, &file).await,
    }
}

/// The skills as loaded: an error, not an empty list, while the directory cannot be read
/// (every call under a skill is refused until it can).
fn listing(rt: &Runtime) -> anyhow::Result<Arc<Skills>> {
    Ok(rt.skills().listing()?)
}

fn list(rt: &Runtime, as_json: bool) -> anyhow::Result<u8> {
    let skills = listing(rt)?;
    if as_json {
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
        return Ok(0);
    }
    if skills.skills.is_empty() {
        outln!("No skills in {}.", rt.skills().dir().display())?;
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

/// A skill that is not in the directory, as the error to exit with.
fn no_skill(rt: &Runtime, name: &str, how: &str) -> anyhow::Error {
    RuntimeError::NotFound {
        code: "unknown_skill",
        message: format!("no skill {name:?} {how} {}", rt.skills().dir().display()),
    }
    .into()
}

fn show(rt: &Runtime, name: &str, as_json: bool) -> anyhow::Result<u8> {
    let skills = listing(rt)?;
    let Some(s) = skills.get(name) else {
        return Err(no_skill(rt, name, "in"));
    };
    let resolved = rt.skills().resolve(name);
    let tools = resolved
        .as_ref()
        .map(|r| r.tools.as_slice())
        .unwrap_or_default();
    if as_json {
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

/// Declared tools next to the tools the skill's calls used, from the audit log.
async fn report(rt: &Runtime, name: &str, as_json: bool) -> anyhow::Result<u8> {
    let skills = listing(rt)?;
    let declared: Vec<tw_core::skill::ResolvedTool> = rt
        .skills()
        .resolve(name)
        .map(|r| r.tools.into_iter().map(|e| e.tool).collect())
        .unwrap_or_default();
    let q = AuditQuery {
        skill: Some(name.to_owned()),
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
    if as_json {
        let out: Vec<_> = rows
            .iter()
            .map(|(tool, from, calls, ok, denied)| {
                json!({"tool": tool, "declared": from, "calls": calls, "success": ok, "denied": denied})
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(0);
    }
    if skills.get(name).is_none() && rows.is_empty() {
        return Err(RuntimeError::NotFound {
            code: "unknown_skill",
            message: format!(
                "no skill {name:?} in {} and no calls made under it",
                rt.skills().dir().display()
            ),
        }
        .into());
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

fn resolved(rt: &Runtime, name: &str, as_json: bool) -> anyhow::Result<u8> {
    listing(rt)?;
    let Some(resolved) = rt.skills().resolve(name) else {
        return Err(no_skill(rt, name, "is loaded from"));
    };
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&resolved)?)?;
        return Ok(0);
    }
    out!("{}", resolved_table(&resolved.tools).render())?;
    if !resolved.permissions.is_empty() {
        outln!("permissions: {}", resolved.permissions.join(", "))?;
    }
    for p in &resolved.unknown_permissions {
        outln!("warning: permission {p:?} is not a capability in the catalog; it reaches no tool")?;
    }
    for t in &resolved.dangling_overrides {
        outln!("warning: an override names tool {t:?}, which is not registered")?;
    }
    Ok(0)
}

async fn change_override(
    rt: &Runtime,
    ctx: &Context,
    name: &str,
    action: OverrideCommand,
) -> anyhow::Result<u8> {
    let actor = crate::confirm::actor(ctx);
    let (tool, change, reason) = match action {
        OverrideCommand::Add {
            tool,
            level,
            reason,
        } => match level.parse() {
            Ok(level) => (tool, OverrideChange::Add(level), reason),
            Err(e) => {
                // A usage error (exit 2), like any other bad argument.
                errln!("error: --level: {e}");
                return Ok(2);
            }
        },
        OverrideCommand::Remove { tool, reason } => (tool, OverrideChange::Remove, reason),
        OverrideCommand::Clear { tool } => (tool, OverrideChange::Clear, None),
    };
    let removed = rt
        .skills()
        .change_override(name, &tool, change, reason.as_deref(), &actor)
        .await?;
    match change {
        OverrideChange::Add(level) => outln!(
            "skill {name} may now use tool {tool} up to {level} access (override by {actor})"
        )?,
        OverrideChange::Remove => {
            outln!("skill {name} may no longer use tool {tool} (override by {actor})")?;
        }
        OverrideChange::Clear if removed.is_some() => {
            outln!("the override of tool {tool} for skill {name} is cleared")?;
        }
        OverrideChange::Clear => {
            outln!("skill {name} had no override of tool {tool}; nothing changed")?;
        }
    }
    Ok(0)
}

fn overrides(rt: &Runtime, name: Option<&str>, as_json: bool) -> anyhow::Result<u8> {
    let state = rt.skills().overrides();
    let rows: Vec<_> = state
        .rows
        .iter()
        .filter(|r| name.is_none_or(|n| r.skill == n))
        .collect();
    if as_json {
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

fn capabilities(rt: &Runtime, tool: Option<&str>, as_json: bool) -> anyhow::Result<u8> {
    let state = rt.skills().capabilities();
    let tools: Vec<_> = state
        .tools
        .values()
        .filter(|t| tool.is_none_or(|n| t.tool == n))
        .collect();
    if let Some(t) = tool
        && tools.is_empty()
    {
        return Err(tw_core::CoreError::UnknownTool(t.to_owned()).into());
    }
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&tools)?)?;
        return Ok(0);
    }
    let mut table = Table::new(&["TOOL", "CAPABILITIES", "SOURCE", "BY", "WHY"]).max_width(70);
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

/// What `skills classify` was asked to do.
enum Classify {
    /// Set these capabilities (comma-separated), with a note.
    Set(String, Option<String>),
    /// Clear an administrator's setting.
    Clear,
    /// Run the classifier again.
    Again,
}

impl Classify {
    /// What the flags ask for (`--set` before `--clear` before `--again`), or `None` if nothing.
    fn asked(set: Option<String>, note: Option<String>, clear: bool, again: bool) -> Option<Self> {
        match (set, clear, again) {
            (Some(set), _, _) => Some(Classify::Set(set, note)),
            (None, true, _) => Some(Classify::Clear),
            (None, false, true) => Some(Classify::Again),
            (None, false, false) => None,
        }
    }
}

/// `how` is `None` when the flags asked for nothing, a usage error (exit 2).
async fn classify(
    rt: &Runtime,
    ctx: &Context,
    tool: &str,
    how: Option<Classify>,
) -> anyhow::Result<u8> {
    let Some(how) = how else {
        errln!("error: say --set CAPABILITIES, --clear or --again");
        return Ok(2);
    };
    let actor = crate::confirm::actor(ctx);
    let skills = rt.skills();
    let now = match how {
        Classify::Set(set, note) => {
            let caps: Vec<String> = set
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            skills
                .set_tool_capabilities(tool, &caps, note.as_deref(), &actor)
                .await?
        }
        Classify::Clear => {
            if !skills.clear_tool_capabilities(tool, &actor).await? {
                outln!("tool {tool} had no administrator's capabilities; nothing changed")?;
                return Ok(0);
            }
            match skills.capabilities().tools.get(tool).cloned() {
                Some(t) => t,
                None => return Ok(0),
            }
        }
        Classify::Again => skills.reclassify_tool(tool).await?,
    };
    let caps: Vec<String> = now
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
        now.classification.source,
        now.classified_by
    )?;
    Ok(0)
}

async fn metrics(rt: &Runtime, as_json: bool) -> anyhow::Result<u8> {
    listing(rt)?;
    let m = rt.skills().metrics().await?;
    if as_json {
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

fn text(rt: &Runtime, name: &str) -> anyhow::Result<u8> {
    out!("{}", rt.skills().text(name)?)?;
    Ok(0)
}

async fn save(rt: &Runtime, ctx: &Context, name: &str, file: &str) -> anyhow::Result<u8> {
    let (text, shown) = if file == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)?;
        (t, "<stdin>")
    } else {
        match std::fs::read_to_string(file) {
            Ok(t) => (t, file),
            Err(e) => {
                errln!("error: {file}: {e}");
                return Ok(2);
            }
        }
    };
    match rt
        .skills()
        .save(name, &text, &crate::confirm::actor(ctx))
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
        // Each diagnostic at its line of the file, as a compiler would, and the verdict last.
        Err(RuntimeError::SkillInvalid { diagnostics, .. }) => {
            for d in &diagnostics {
                errln!("{shown}:{}", d.to_string().trim_start_matches("line "));
            }
            errln!("error: not saved; the skill in force is unchanged");
            Ok(1)
        }
        Err(e) => Err(e.into()),
    }
}

fn check(rt: &Runtime) -> anyhow::Result<u8> {
    let report = rt.skills().check_all()?;
    for line in &report.findings {
        outln!("{line}")?;
    }
    outln!(
        "{} of {} skills load; {} error(s)",
        report.loaded,
        report.total,
        report.errors
    )?;
    Ok(u8::from(report.errors > 0))
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
