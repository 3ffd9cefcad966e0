//! The admin API's skills operations (`/api/v1/skills...`), the ones the CLI and the desktop app
//! have: list, show, check, a skill's resolved tools and overrides, adding or removing a tool as
//! an override, the lifecycle figures, reading and saving a SKILL.md (checked first), and the
//! tools' capabilities with their classification. Each handler reads its request and calls the
//! skills service, which checks it, does it and writes the admin log (as `api`).

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tw_runtime::RuntimeError;
use tw_runtime::skills::{SkillCheck, Skills};

use super::{ACTOR, ApiError, Reply, Shared, ok};
use crate::Gateway;
use crate::body;

pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/skills", get(list))
        .route("/skills/check", get(check))
        .route("/skills/capabilities", get(capabilities))
        .route("/skills/lifecycle/metrics", get(metrics))
        .route("/skills/classify/{tool}", post(classify))
        .route("/skills/{name}", get(show))
        .route("/skills/{name}/resolved-tools", get(resolved))
        .route("/skills/{name}/overrides", get(overrides))
        .route("/skills/{name}/override", post(change_override))
        .route("/skills/{name}/skill-md", get(text).put(save))
        .route("/skills/{name}/skill-md/check", post(check_text))
}

/// The loaded skills, or 503 while the directory cannot be read.
fn listing(g: &Gateway) -> Result<Arc<Skills>, ApiError> {
    Ok(g.rt.skills().listing()?)
}

/// Every skill of the skills directory: loaded or not, its tools, its problems.
async fn list(State(g): Shared) -> Reply {
    let skills = listing(&g)?;
    let rows: Vec<_> = skills
        .skills
        .iter()
        .map(|s| {
            json!({
                "name": s.folder,
                "loaded": s.manifest.is_some(),
                "description": s.manifest.as_ref().map(|m| m.description.clone()),
                "tools": skills.map.tools_of(&s.folder).map(|t| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>()),
                "diagnostics": s.diagnostics,
            })
        })
        .collect();
    ok(rows)
}

/// One skill: its file, its manifest, its resolved tools and its problems.
async fn show(State(g): Shared, Path(name): Path<String>) -> Reply {
    let skills = listing(&g)?;
    g.rt.skills().check_name(&name)?;
    let Some(s) = skills.get(&name) else {
        return Err(RuntimeError::unknown_skill(&name, g.rt.skills().dir()).into());
    };
    let resolved = g.rt.skills().resolve(&name);
    ok(json!({
        "name": s.folder,
        "path": s.path,
        "manifest": s.manifest,
        "resolved_tools": resolved.map(|r| r.tools).unwrap_or_default(),
        "diagnostics": s.diagnostics,
    }))
}

/// Every problem of the directory: each SKILL.md's diagnostics, the skill map's problems
/// (cycles, missing parents) and permissions no capability matches.
async fn check(State(g): Shared) -> Reply {
    let report: SkillCheck = g.rt.skills().check_all()?;
    ok(report)
}

/// The tools a skill may use now, with where each came from.
async fn resolved(State(g): Shared, Path(name): Path<String>) -> Reply {
    listing(&g)?;
    g.rt.skills().check_name(&name)?;
    match g.rt.skills().resolve(&name) {
        Some(r) => ok(r),
        None => Err(RuntimeError::unknown_skill(&name, g.rt.skills().dir()).into()),
    }
}

/// The administrators' overrides of one skill, with who, when and why.
async fn overrides(State(g): Shared, Path(name): Path<String>) -> Reply {
    g.rt.skills().check_name(&name)?;
    let state = g.rt.skills().overrides();
    let rows: Vec<_> = state
        .rows
        .iter()
        .filter(|r| r.skill == name)
        .map(tw_runtime::capabilities::override_json)
        .collect();
    ok(rows)
}

/// Adds a tool to a skill, removes one, or clears such an override.
async fn change_override(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    let request = body::skill_override(&body)?;
    let previous =
        g.rt.skills()
            .change_override(
                &name,
                &request.tool,
                request.change,
                request.reason.as_deref(),
                ACTOR,
            )
            .await?;
    let now: Vec<_> =
        g.rt.skills()
            .overrides()
            .rows
            .iter()
            .filter(|r| r.skill == name && r.tool == request.tool)
            .map(tw_runtime::capabilities::override_json)
            .collect();
    ok(json!({
        "skill": name,
        "tool": request.tool,
        "override": now.into_iter().next(),
        "previous": previous.as_ref().map(tw_runtime::capabilities::override_json),
    }))
}

/// Lifecycle figures: per skill (activations, resolved tools by provenance, overrides, calls and
/// refusals) and who classified the tools.
async fn metrics(State(g): Shared) -> Reply {
    listing(&g)?;
    ok(g.rt.skills().metrics().await?)
}

/// A skill's SKILL.md as it is on disk.
async fn text(State(g): Shared, Path(name): Path<String>) -> Reply {
    let text = g.rt.skills().text(&name)?;
    Ok((
        [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
        text,
    )
        .into_response())
}

/// Saves a SKILL.md sent as the body: checked first, and refused (422, every diagnostic in the
/// message) with nothing written when it has an error; in force at once otherwise.
async fn save(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    let saved = g.rt.skills().save(&name, &body, ACTOR).await?;
    let status = if saved.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        axum::Json(json!({
            "path": saved.path,
            "created": saved.created,
            "warnings": saved.warnings,
        })),
    )
        .into_response())
}

/// A SKILL.md's problems, without saving it.
async fn check_text(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    ok(g.rt.skills().check_text(&name, &body)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapabilitiesParams {
    /// Only this tool.
    tool: Option<String>,
}

/// Every registered tool's capabilities: who classified it, with what confidence and why.
async fn capabilities(
    State(g): Shared,
    q: Result<Query<CapabilitiesParams>, QueryRejection>,
) -> Reply {
    let Query(q) = q?;
    let state = g.rt.skills().capabilities();
    let tools: Vec<_> = state
        .tools
        .values()
        .filter(|t| q.tool.as_deref().is_none_or(|n| t.tool == n))
        .collect();
    if let Some(t) = &q.tool
        && tools.is_empty()
    {
        return Err(RuntimeError::from(tw_core::CoreError::UnknownTool(t.clone())).into());
    }
    ok(json!({ "min_confidence": state.min_confidence, "tools": tools }))
}

/// Sets a tool's capabilities as the administrator, clears that setting, or runs the
/// classifier again.
async fn classify(State(g): Shared, Path(tool): Path<String>, body: String) -> Reply {
    let skills = g.rt.skills();
    let classified = match body::classify(&body)? {
        body::Classify::Set { capabilities, note } => {
            skills
                .set_tool_capabilities(&tool, &capabilities, note.as_deref(), ACTOR)
                .await?
        }
        body::Classify::Clear => {
            let cleared = skills.clear_tool_capabilities(&tool, ACTOR).await?;
            let now = skills.capabilities().tools.get(&tool).cloned();
            return ok(json!({ "tool": tool, "cleared": cleared, "now": now }));
        }
        body::Classify::Again => skills.reclassify_tool(&tool).await?,
    };
    ok(classified)
}

#[cfg(test)]
mod tests;
