//! The admin API's grants (`/api/v1/grants...`), as `toolwarden grants` has them: the standing
//! approvals in force (or all of them, revoked and lapsed too), a new one for a tool, and
//! revoking one. The confirmation service decides what a grant covers when the request does not
//! say, refuses one that cannot be (an unknown tool, a pattern that does not check, a zero
//! duration), releases the waiting calls a new grant covers and writes the admin log (as `api`).

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::{ACTOR, Reply, Shared, ok};
use crate::Gateway;
use crate::body;

pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/grants", get(list).post(create))
        .route("/grants/{id}/revoke", post(revoke))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Revoked and lapsed grants too.
    #[serde(default)]
    all: bool,
}

/// The grants in force, oldest first; with `?all=true`, every grant ever given.
async fn list(State(g): Shared, q: Result<Query<ListParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    ok(g.rt.confirmations().grants(q.all).await?)
}

/// Gives a standing approval for a tool's calls; 201 with the grant as stored.
async fn create(State(g): Shared, body: String) -> Reply {
    let request = body::grant(&body)?;
    let row =
        g.rt.confirmations()
            .grant(&request.tool, &request.spec, ACTOR)
            .await?;
    Ok((StatusCode::CREATED, axum::Json(row)).into_response())
}

/// Revokes a grant; 404 when none with that id was left to revoke.
async fn revoke(State(g): Shared, Path(id): Path<String>) -> Reply {
    g.rt.confirmations().revoke_grant(&id, ACTOR).await?;
    ok(json!({ "id": id, "revoked": true }))
}

#[cfg(test)]
mod tests;
