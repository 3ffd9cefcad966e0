//! The skills page: every skill of the skills directory with its figures, one skill's resolved
//! tools (with where each came from) and its overrides, administrators' overrides (add a tool,
//! remove one, clear), and the SKILL.md editor's check and validated save. The runtime does the
//! work and keeps the admin log; these commands check the parameters, naming the field at fault,
//! and convert.

use std::sync::Arc;

use tauri::State;
use tw_core::policy::access::AccessLevel;
use tw_core::skill::{Diagnostic, check_name, parse_skill};
use tw_protocol::{
    IpcError, SkillDetail, SkillDiagnostic, SkillOverrideParams, SkillParams, SkillSummary,
    SkillTextParams,
};
use tw_runtime::{Runtime, RuntimeError};

use super::{Reply, actor, internal, invalid};
use crate::{Desktop, convert};

/// The longest SKILL.md the editor may check or save; a manifest is a page of YAML and some
/// Markdown, so anything near this is a mistake (a pasted file of something else).
pub(crate) const MAX_SKILL_TEXT: usize = 256 * 1024;

/// The longest reason an override may carry (it goes to the admin log).
pub(crate) const MAX_REASON: usize = 1000;

/// What an override request asks the runtime to do, once its parameters are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OverrideRequest {
    /// Add the tool at a level (`Some`) or remove it (`None`).
    Set {
        add: Option<AccessLevel>,
        reason: Option<String>,
    },
    /// Drop the override; the manifest and capabilities decide again.
    Clear,
}

fn skill_name(field: &str, name: &str) -> Reply<()> {
    check_name(name).map_err(|e| invalid(field, format!("a skill name {e}")))
}

fn skill_text(text: &str) -> Reply<()> {
    if text.len() > MAX_SKILL_TEXT {
        return Err(invalid(
            "/text",
            format!(
                "a SKILL.md is at most {} KiB; this one is {} KiB",
                MAX_SKILL_TEXT / 1024,
                text.len().div_ceil(1024)
            ),
        ));
    }
    Ok(())
}

/// Checks an override's parameters: the names, the action, a level only for an addition
/// (standard when none is given), a reason only for an addition or a removal.
pub(crate) fn override_request(p: &SkillOverrideParams) -> Reply<OverrideRequest> {
    skill_name("/skill", &p.skill)?;
    tw_core::ToolName::new(&p.tool).map_err(|e| invalid("/tool", e.to_string()))?;
    let reason = p
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    if reason
        .as_deref()
        .is_some_and(|r| r.chars().count() > MAX_REASON)
    {
        return Err(invalid(
            "/reason",
            format!("a reason is at most {MAX_REASON} characters"),
        ));
    }
    let level = p
        .access_level
        .as_deref()
        .filter(|l| !l.is_empty())
        .map(str::parse::<AccessLevel>)
        .transpose()
        .map_err(|e| invalid("/accessLevel", e))?;
    match p.action.as_str() {
        "add" => Ok(OverrideRequest::Set {
            add: Some(level.unwrap_or_default()),
            reason,
        }),
        "remove" | "clear" if level.is_some() => Err(invalid(
            "/accessLevel",
            format!("only an addition has an access level, not a {}", p.action),
        )),
        "remove" => Ok(OverrideRequest::Set { add: None, reason }),
        "clear" if reason.is_some() => {
            Err(invalid("/reason", "clearing an override takes no reason"))
        }
        "clear" => Ok(OverrideRequest::Clear),
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

fn override_error(e: RuntimeError) -> IpcError {
    match e {
        RuntimeError::Core(tw_core::CoreError::UnknownTool(name)) => {
            invalid("/tool", format!("no tool named {name:?} is registered"))
        }
        RuntimeError::Core(e) => invalid("/tool", e.to_string()),
        RuntimeError::Capabilities(message) => invalid("/skill", message),
        RuntimeError::Store(e) => internal("saving the override", e),
        other => IpcError::new("invalid", other.to_string()),
    }
}

fn not_found(name: &str, rt: &Runtime) -> IpcError {
    IpcError::new(
        "not_found",
        format!("no skill named {name:?} in {}", rt.skills_dir().display()),
    )
}

/// A skill in full, as it is in force now.
fn detail(rt: &Runtime, name: &str) -> Reply<SkillDetail> {
    let skills = rt.skills();
    let skill = skills.get(name).ok_or_else(|| not_found(name, rt))?;
    let text = rt.skill_text(name).map_err(|e| {
        tracing::warn!(skill = name, error = %e, "a skill's SKILL.md cannot be read");
        IpcError::new("internal", e.to_string())
    })?;
    let resolved = rt.resolve_skill(name);
    let overrides = rt.skill_overrides();
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
    let skills = rt.skills();
    // An unreadable directory is not an empty one: say so, as the CLI does.
    if let Some(reason) = skills.error() {
        return Err(IpcError::new(
            "unavailable",
            format!(
                "the skills directory cannot be read, so every call under a skill is refused: \
                 {reason}"
            ),
        ));
    }
    let metrics = rt
        .skill_metrics()
        .await
        .map_err(|e| internal("reading the skills' figures", e))?;
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
    skill_name("/name", &params.name)?;
    detail(&state.runtime, &params.name)
}

/// Adds a tool to a skill, removes one, or clears such an override, as the app's actor; the
/// runtime writes it with its admin-log entry. Answers the skill as it is after.
#[tauri::command]
pub async fn set_skill_override(
    state: State<'_, Arc<Desktop>>,
    params: SkillOverrideParams,
) -> Reply<SkillDetail> {
    let request = override_request(&params)?;
    let rt = &state.runtime;
    if rt.skills().get(&params.skill).is_none() {
        return Err(not_found(&params.skill, rt));
    }
    let who = actor();
    match request {
        OverrideRequest::Set { add, reason } => {
            rt.set_skill_override(&params.skill, &params.tool, add, reason.as_deref(), &who)
                .await
                .map_err(override_error)?;
        }
        OverrideRequest::Clear => {
            rt.clear_skill_override(&params.skill, &params.tool, &who)
                .await
                .map_err(override_error)?;
        }
    }
    detail(rt, &params.skill)
}

/// A SKILL.md's problems, without saving it (the editor checks as the person types).
#[tauri::command]
pub async fn check_skill(params: SkillTextParams) -> Reply<Vec<SkillDiagnostic>> {
    skill_name("/name", &params.name)?;
    skill_text(&params.text)?;
    Ok(parse_skill(&params.text, Some(&params.name))
        .diagnostics
        .iter()
        .map(convert::skill_diagnostic)
        .collect())
}

/// Saves a SKILL.md (a new skill gets its folder): refused with every diagnostic, and nothing
/// written, if it has an error; in force at once otherwise.
#[tauri::command]
pub async fn save_skill(
    state: State<'_, Arc<Desktop>>,
    params: SkillTextParams,
) -> Reply<SkillDetail> {
    skill_name("/name", &params.name)?;
    skill_text(&params.text)?;
    let rt = &state.runtime;
    match rt.save_skill(&params.name, &params.text, &actor()).await {
        Ok(_) => detail(rt, &params.name),
        Err(RuntimeError::SkillInvalid { skill, diagnostics }) => {
            Err(invalid_text(&skill, &diagnostics))
        }
        Err(e) => {
            tracing::error!(skill = params.name, error = %e, "saving a SKILL.md failed");
            Err(IpcError::new("internal", e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_core::skill::Severity;

    use super::*;

    fn params(action: &str, level: Option<&str>, reason: Option<&str>) -> SkillOverrideParams {
        SkillOverrideParams {
            skill: "research".into(),
            tool: "http_fetch".into(),
            action: action.into(),
            access_level: level.map(str::to_owned),
            reason: reason.map(str::to_owned),
        }
    }

    /// The request, or the field the error names.
    fn check(p: SkillOverrideParams) -> Result<OverrideRequest, Option<String>> {
        override_request(&p).map_err(|e| {
            assert_eq!(e.code, "invalid", "{e}");
            e.field
        })
    }

    #[test]
    fn override_parameters_are_checked_field_by_field() {
        let field = |f: &str| Err(Some(f.to_owned()));
        let mut bad_skill = params("add", None, None);
        bad_skill.skill = "Research".into();
        let mut bad_tool = params("add", None, None);
        bad_tool.tool = "http fetch".into();
        let got = vec![
            check(params("add", None, None)),
            check(params(
                "add",
                Some("elevated"),
                Some("  needed for the demo "),
            )),
            check(params("add", Some(""), Some("   "))),
            check(params("remove", None, Some("too broad"))),
            check(params("clear", None, None)),
            check(params("grant", None, None)),
            check(params("add", Some("root"), None)),
            check(params("remove", Some("admin"), None)),
            check(params("clear", None, Some("because"))),
            check(params("remove", None, Some(&"x".repeat(MAX_REASON + 1)))),
            check(bad_skill),
            check(bad_tool),
        ];
        assert_eq!(
            got,
            vec![
                Ok(OverrideRequest::Set {
                    add: Some(AccessLevel::Standard),
                    reason: None
                }),
                Ok(OverrideRequest::Set {
                    add: Some(AccessLevel::Elevated),
                    reason: Some("needed for the demo".into())
                }),
                Ok(OverrideRequest::Set {
                    add: Some(AccessLevel::Standard),
                    reason: None
                }),
                Ok(OverrideRequest::Set {
                    add: None,
                    reason: Some("too broad".into())
                }),
                Ok(OverrideRequest::Clear),
                field("/action"),
                field("/accessLevel"),
                field("/accessLevel"),
                field("/reason"),
                field("/reason"),
                field("/skill"),
                field("/tool"),
            ]
        );
        let e = override_request(&params("add", Some("root"), None)).unwrap_err();
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

    #[test]
    fn names_and_texts_are_checked_before_the_runtime_sees_them() {
        assert_eq!(
            skill_name("/name", "../etc").unwrap_err().field.as_deref(),
            Some("/name")
        );
        assert_eq!(skill_name("/name", "data-viz"), Ok(()));
        let big = "x".repeat(MAX_SKILL_TEXT + 1);
        let e = skill_text(&big).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/text"));
        assert_eq!(skill_text("---\n"), Ok(()));
    }
}
