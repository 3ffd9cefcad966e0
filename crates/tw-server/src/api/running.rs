//! The admin API's calls in flight (`/api/v1/running...`), as `toolwarden running` and
//! `toolwarden cancel` have them: every call running or waiting for a person in this process and
//! in the other processes on the same data directory (read from their live feeds), and a way to
//! cancel one wherever it runs. The cancelled call still gets its audit record, written by the
//! process that ran it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::json;
use tw_core::ExecutionId;

use super::{ApiError, Reply, Shared, ok};
use crate::Gateway;

pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/running", get(running))
        .route("/running/{execution_id}/cancel", post(cancel))
}

/// The calls in flight on the data directory, oldest first, each with the process running it.
async fn running(State(g): Shared) -> Reply {
    ok(g.rt.running_everywhere().await)
}

/// Asks whichever process runs the call to cancel it; 404 when none does.
async fn cancel(State(g): Shared, Path(id): Path<String>) -> Reply {
    let execution_id =
        ExecutionId::new(&id).map_err(|e| ApiError::bad(format!("execution_id: {e}")))?;
    if g.rt.cancel_anywhere(&execution_id).await {
        ok(json!({ "execution_id": execution_id, "cancel_requested": true }))
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_running",
            format!("no call {id:?} is in flight on this data directory"),
        ))
    }
}

#[cfg(test)]
mod tests;
