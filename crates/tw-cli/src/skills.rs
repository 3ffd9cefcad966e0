//! `toolwarden skills list|show|check`: the skills directory (the config's `skills_dir`, else the
//! first workspace root's `skills` folder) as loaded, each skill's resolved tools with where they
//! came from, and every SKILL.md problem as `FILE:LINE`.

use serde_json::json;
use tw_runtime::Runtime;
use tw_store::AuditQuery;

use crate::cli::SkillsCommand;
use crate::table::Table;

/// A diagnostic as `FILE:LINE: severity: ...`.
fn located(path: &std::path::Path, d: &tw_core::skill::Diagnostic) -> String {
    format!(
        "{}:{}",
        path.display(),
        d.to_string().trim_start_matches("line ")
    )
}

pub(crate) async fn run(rt: &Runtime, cmd: SkillsCommand) -> anyhow::Result<u8> {
    // The runtime loaded them as it opened (a directory it cannot read is reported as a warning
    // then, and has no skills).
    let dir = rt.skills_dir();
    let skills = rt.skills();
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
            println!("{}", serde_json::to_string_pretty(&rows)?);
            Ok(0)
        }
        SkillsCommand::List { json: false } => {
            if skills.skills.is_empty() {
                println!("No skills in {}.", dir.display());
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
            print!("{}", table.render());
            Ok(0)
        }
        SkillsCommand::Show { name, json } => {
            let Some(s) = skills.get(&name) else {
                eprintln!("error: no skill {name:?} in {}", dir.display());
                return Ok(2);
            };
            let tools = skills.map.tools_of(&name).unwrap_or_default();
            if json {
                let out = json!({
                    "name": s.folder,
                    "path": s.path,
                    "manifest": s.manifest,
                    "resolved_tools": tools,
                    "diagnostics": s.diagnostics,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            println!("skill:  {}", s.folder);
            println!("file:   {}", s.path.display());
            if let Some(m) = &s.manifest {
                println!("about:  {}", m.description);
            }
            let mut table = Table::new(&["TOOL", "LEVEL", "FROM"]);
            for t in tools {
                let from = match &t.provenance {
                    tw_core::skill::Provenance::Manifest => "manifest".to_owned(),
                    tw_core::skill::Provenance::Inherited(p) => format!("inherited from {p}"),
                };
                table.row(vec![t.name.clone(), t.access_level.to_string(), from]);
            }
            print!("{}", table.render());
            for d in &s.diagnostics {
                println!("{}", located(&s.path, d));
            }
            Ok(0)
        }
        SkillsCommand::Report { name, json } => {
            let declared = skills.map.tools_of(&name).unwrap_or_default();
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
                        tw_core::skill::Provenance::Inherited(p) => format!("inherited from {p}"),
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
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(0);
            }
            if skills.get(&name).is_none() && rows.is_empty() {
                eprintln!(
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
            print!("{}", table.render());
            Ok(0)
        }
        SkillsCommand::Check => {
            let mut errors = 0;
            for s in &skills.skills {
                for d in &s.diagnostics {
                    if d.severity == tw_core::skill::Severity::Error {
                        errors += 1;
                    }
                    println!("{}", located(&s.path, d));
                }
            }
            for p in skills.map.problems() {
                println!("skill {}: {}", p.skill, p.message);
            }
            let loaded = skills
                .skills
                .iter()
                .filter(|s| s.manifest.is_some())
                .count();
            println!(
                "{loaded} of {} skills load; {errors} error(s)",
                skills.skills.len()
            );
            Ok(u8::from(errors > 0))
        }
    }
}
