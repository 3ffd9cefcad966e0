//! The admin API's chain operations (`/api/v1/chains...`), the ones the CLI has: the chains
//! loaded with the problems of those that did not load, one chain (its model and its YAML),
//! checking a chain file's text against the tools registered now (nothing is saved), and the
//! runs with each step's status and the audit records of its calls. A chain runs as its tool
//! `chain__NAME`, over MCP like any other call; the chain service decides everything here.

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tw_runtime::chains::chain_tool;
use tw_store::ChainRunQuery;

use super::{ACTOR, ApiError, Reply, Shared, ok};
use crate::Gateway;
use crate::body;

pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/chains", get(list).post(save))
        .route("/chains/check", post(check))
        .route("/chains/plan", post(plan))
        .route("/chains/runs", get(runs))
        .route("/chains/runs/{id}", get(run))
        .route("/chains/{name}", get(show))
}

/// Every chain loaded, and every problem of those that did not load.
async fn list(State(g): Shared) -> Reply {
    ok(json!({"chains": g.rt.chains().summaries(), "problems": g.rt.chains().problems()}))
}

/// One chain: its model as a chain file writes it, and that file's text.
async fn show(State(g): Shared, Path(name): Path<String>) -> Reply {
    let e = g.rt.chains().require(&name)?;
    ok(json!({
        "name": e.chain.name,
        "tool": chain_tool(&e.chain.name),
        "origin": e.origin,
        "skill": e.skill,
        "chain": e.chain.to_value(),
        "yaml": e.chain.to_yaml(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckParams {
    /// Check it as a chain of this skill.
    skill: Option<String>,
    /// Save over a chain of the same name saved this way before (`POST /chains` only).
    #[serde(default)]
    replace: bool,
}

/// A chain file's diagnostics (each with its line) and the chains in it without errors.
async fn check(
    State(g): Shared,
    q: Result<Query<CheckParams>, QueryRejection>,
    text: String,
) -> Reply {
    let Query(q) = q?;
    let (chains, found) = g.rt.chains().check_text(&text, q.skill.as_deref());
    let diagnostics: Vec<_> = found
        .into_iter()
        .map(|(chain, d)| json!({"chain": chain, "severity": d.severity, "line": d.line, "field": d.field, "message": d.message}))
        .collect();
    ok(json!({
        "valid": chains.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "diagnostics": diagnostics,
    }))
}

/// Saves a chain file a person accepted (checked first; nothing is written with an error)
/// into the chains directory and loads it: 201 with the chains saved.
async fn save(
    State(g): Shared,
    q: Result<Query<CheckParams>, QueryRejection>,
    text: String,
) -> Reply {
    let Query(q) = q?;
    let saved =
        g.rt.chains()
            .save(&text, q.skill.as_deref(), ACTOR, q.replace)
            .await?;
    let mut reply = ok(json!({"saved": saved}))?;
    *reply.status_mut() = axum::http::StatusCode::CREATED;
    Ok(reply)
}

/// Asks the configured language model for a chain reaching a goal: the plan, checked, not
/// saved (503 without a model or when it fails).
async fn plan(State(g): Shared, text: String) -> Reply {
    let (goal, skill) = body::chain_plan(&text)?;
    ok(g.rt.chains().plan(&goal, skill.as_deref()).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsParams {
    chain: Option<String>,
    status: Option<String>,
    limit: Option<u32>,
}

/// Runs, newest first.
async fn runs(State(g): Shared, q: Result<Query<RunsParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    let rows =
        g.rt.chains()
            .runs(&ChainRunQuery {
                chain: q.chain,
                status: q.status,
                limit: q.limit,
            })
            .await?;
    ok(rows)
}

/// One run with its steps, and the audit records of the steps' calls.
async fn run(State(g): Shared, Path(id): Path<String>) -> Reply {
    let (run, calls) = g.rt.chains().run(&id).await.map_err(ApiError::from)?;
    ok(json!({"run": run, "calls": calls}))
}
