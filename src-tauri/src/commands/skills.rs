//! The skills page: every skill of the skills directory with its figures, one skill's resolved
//! tools (with where each came from) and its overrides, administrators' overrides (add a tool,
//! remove one, clear), and the SKILL.md editor's check and validated save. The skills service
//! does the work, checks what it is given and keeps the admin log; these commands read the
//! form's parameters and convert.

use std::sync::Arc;

use tauri::State;
use tw_core::policy::access::AccessLevel;
use tw_core::skill::Diagnostic;
use tw_protocol::{
    IpcError, SkillDetail, SkillDiagnostic, SkillOverrideParams, SkillParams, SkillSummary,
    SkillTextParams,
};
use tw_runtime::{OverrideChange, Runtime, RuntimeError};

use super::{Reply, actor, invalid, refused};
use crate::{Desktop, convert};

/// What an override request asks the skills service to do, read from the form's parameters.
pub(crate) fn override_change(p: &SkillOverrideParams) -> Reply<OverrideChange> {
    let level = p
        .access_level
        .as_deref()
        .filter(|l| !l.is_empty())
        .map(str::parse::<AccessLevel>)
        .transpose()
        .map_err(|e| invalid("/accessLevel", e))?;
    match p.action.as_str() {
        "add" => Ok(OverrideChange::Add(level.unwrap_or_default())),
        "remove" | "clear" if level.is_some() => Err(invalid(
            "/accessLevel",
            format!("only an addition has an access level, not a {}", p.action),
        )),
        "remove" => Ok(OverrideChange::Remove),
        "clear" => Ok(OverrideChange::Clear),
        other => Err(invalid(
            "/action",
            format!("{other:?} is not an override action; use add, remove or clear"),
        )),
    }
}

/// A refused save: every diagnostic on a line of its own, so the editor can show them as they
/// are.
pub(crate) fn invalid_text(skill: &str, diagnostics: &[Diagnostic]) -> IpcError {
    let mut message =
        format!("SKILL.md for {skill} was not saved; the skill in force is unchanged:");
    for d in diagnostics {
        message.push('\n');
        message.push_str(&d.to_string());
    }
    invalid("/text", message)
}

fn not_found(name: &str, rt: &Runtime) -> IpcError {
    IpcError::new(
        "not_found",
        format!("no skill named {name:?} in {}", rt.skills().dir().display()),
    )
}

/// A skill in full, as it is in force now.
fn detail(rt: &Runtime, name: &str) -> Reply<SkillDetail> {
    let skills = rt.skills().loaded();
    let skill = skills.get(name).ok_or_else(|| not_found(name, rt))?;
    let text = rt
        .skills()
        .text(name)
        .map_err(|e| refused("reading the SKILL.md", e))?;
    let resolved = rt.skills().resolve(name);
    let overrides = rt.skills().overrides();
    let problems = skills
        .map
        .problems()
        .iter()
        .filter(|p| p.skill == name)
        .map(|p| p.message.clone())
        .collect();
    Ok(convert::skill_detail(
        skill,
        text,
        resolved.as_ref(),
        &overrides.rows,
        problems,
    ))
}

/// Every skill of the skills directory, by name, with its tools, overrides, calls and refusals.
#[tauri::command]
pub async fn list_skills(state: State<'_, Arc<Desktop>>) -> Reply<Vec<SkillSummary>> {
    let rt = &state.runtime;
    // An unreadable directory is not an empty one: the service says so.
    let skills = rt
        .skills()
        .listing()
        .map_err(|e| refused("listing the skills", e))?;
    let metrics = rt
        .skills()
        .metrics()
        .await
        .map_err(|e| refused("reading the skills' figures", e))?;
    Ok(skills
        .skills
        .iter()
        .map(|s| {
            let problems = skills
                .map
                .problems()
                .iter()
                .filter(|p| p.skill == s.folder)
                .count();
            let figures = metrics.skills.iter().find(|f| f.skill == s.folder);
            convert::skill_summary(s, figures, problems)
        })
        .collect())
}

/// One skill: its SKILL.md, its diagnostics, its resolved tools and its overrides.
#[tauri::command]
pub async fn get_skill(state: State<'_, Arc<Desktop>>, params: SkillParams) -> Reply<SkillDetail> {
    let rt = &state.runtime;
    rt.skills()
        .check_name(&params.name)
        .map_err(|e| refused("reading the skill", e))?;
    detail(rt, &params.name)
}

/// Adds a tool to a skill, removes one, or clears such an override, as the app's actor; the
/// skills service checks it and writes it with its admin-log entry. Answers the skill as it is
/// after.
#[tauri::command]
pub async fn set_skill_override(
    state: State<'_, Arc<Desktop>>,
    params: SkillOverrideParams,
) -> Reply<SkillDetail> {
    let change = override_change(&params)?;
    let rt = &state.runtime;
    rt.skills()
        .change_override(
            &params.skill,
            &params.tool,
            change,
            params.reason.as_deref(),
            &actor(),
        )
        .await
        .map_err(|e| refused("saving the override", e))?;
    detail(rt, &params.skill)
}

/// A SKILL.md's problems, without saving it (the editor checks as the person types).
#[tauri::command]
pub async fn check_skill(
    state: State<'_, Arc<Desktop>>,
    params: SkillTextParams,
) -> Reply<Vec<SkillDiagnostic>> {
    let diagnostics = state
        .runtime
        .skills()
        .check_text(&params.name, &params.text)
        .map_err(|e| refused("checking the SKILL.md", e))?;
    Ok(diagnostics.iter().map(convert::skill_diagnostic).collect())
}

/// Saves a SKILL.md (a new skill gets its folder): refused with every diagnostic, and nothing
/// written, if it has an error; in force at once otherwise.
#[tauri::command]
pub async fn save_skill(
    state: State<'_, Arc<Desktop>>,
    params: SkillTextParams,
) -> Reply<SkillDetail> {
    let rt = &state.runtime;
    match rt.skills().save(&params.name, &params.text, &actor()).await {
        Ok(_) => detail(rt, &params.name),
        Err(RuntimeError::SkillInvalid { skill, diagnostics }) => {
            Err(invalid_text(&skill, &diagnostics))
        }
        Err(e) => Err(refused("saving the SKILL.md", e)),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_core::skill::{Severity, parse_skill};

    use super::*;

    fn params(action: &str, level: Option<&str>) -> SkillOverrideParams {
        SkillOverrideParams {
            skill: "research".into(),
            tool: "http_fetch".into(),
            action: action.into(),
            access_level: level.map(str::to_owned),
            reason: None,
        }
    }

    /// The change, or the field the error names. (Names, reasons and what each change may
    /// carry are the skills service's rules, tested there.)
    fn check(p: SkillOverrideParams) -> Result<OverrideChange, Option<String>> {
        override_change(&p).map_err(|e| {
            assert_eq!(e.code, "invalid", "{e}");
            e.field
        })
    }

    #[test]
    fn the_forms_action_and_level_become_a_change() {
        let field = |f: &str| Err(Some(f.to_owned()));
        let got = vec![
            check(params("add", None)),
            check(params("add", Some("elevated"))),
            check(params("add", Some(""))),
            check(params("remove", None)),
            check(params("clear", None)),
            check(params("grant", None)),
            check(params("add", Some("root"))),
            check(params("remove", Some("admin"))),
        ];
        assert_eq!(
            got,
            vec![
                Ok(OverrideChange::Add(AccessLevel::Standard)),
                Ok(OverrideChange::Add(AccessLevel::Elevated)),
                Ok(OverrideChange::Add(AccessLevel::Standard)),
                Ok(OverrideChange::Remove),
                Ok(OverrideChange::Clear),
                field("/action"),
                field("/accessLevel"),
                field("/accessLevel"),
            ]
        );
        let e = override_change(&params("add", Some("root"))).unwrap_err();
        assert!(e.message.contains("standard, elevated or admin"), "{e}");
    }

    #[test]
    fn a_refused_save_lists_every_diagnostic_with_its_line_at_the_text() {
        let parsed = parse_skill(
            "---\nname: other\ndescription: Reads things.\ntools: [read_file]\n---\n",
            Some("notes"),
        );
        assert!(parsed.has_errors());
        let e = invalid_text("notes", &parsed.diagnostics);
        assert_eq!(e.field.as_deref(), Some("/text"));
        let lines: Vec<&str> = e.message.lines().collect();
        assert_eq!(
            lines[0],
            "SKILL.md for notes was not saved; the skill in force is unchanged:"
        );
        assert_eq!(lines.len(), 1 + parsed.diagnostics.len());
        assert!(lines[1].starts_with("line 2: error: name: "), "{lines:?}");
        assert_eq!(
            parsed.diagnostics[0],
            Diagnostic {
                severity: Severity::Error,
                line: 2,
                field: Some("name".into()),
                message: parsed.diagnostics[0].message.clone(),
            }
        );
    }
}
