//! Agents' tokens for the HTTP endpoint (`api_tokens`, migration 0006): only their SHA-256 is
//! kept, a token is revoked rather than deleted, and issuing or revoking one is written with its
//! admin-log entry in one transaction.

use serde::{Deserialize, Serialize};

use crate::admin::AdminEvent;
use crate::error::Result;

/// An agent's token, as stored (without the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiTokenRow {
    /// The row's id.
    pub id: i64,
    /// The agent calls made with the token are recorded as.
    pub agent_id: String,
    /// The first 8 hex digits of the token's SHA-256, to tell tokens apart in listings.
    pub fingerprint: String,
    /// A note from whoever issued it.
    pub label: Option<String>,
    /// When it was issued (µs since the epoch).
    pub created_at: i64,
    /// Who issued it.
    pub created_by: String,
    /// When it was revoked, if it was.
    pub revoked_at: Option<i64>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
}

/// A token to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiToken {
    /// The agent it stands for.
    pub agent_id: String,
    /// The token's SHA-256, 64 lowercase hex digits.
    pub token_sha256: String,
    /// A note.
    pub label: Option<String>,
    /// When (µs since the epoch).
    pub at: i64,
    /// Who issued it.
    pub by: String,
}

/// The columns every query returns (a macro, so the statements stay `&'static str`).
macro_rules! columns {
    () => {
        "id, agent_id, token_sha256, label, created_at, created_by, revoked_at, revoked_by"
    };
}

dual! {
    fn decode(row: &DbRow) -> Result<ApiTokenRow> {
        let sha: String = row.try_get("token_sha256")?;
        Ok(ApiTokenRow {
            id: row.try_get("id")?,
            agent_id: row.try_get("agent_id")?,
            fingerprint: sha.chars().take(8).collect(),
            label: row.try_get("label")?,
            created_at: row.try_get("created_at")?,
            created_by: row.try_get("created_by")?,
            revoked_at: row.try_get("revoked_at")?,
            revoked_by: row.try_get("revoked_by")?,
        })
    }

    pub(crate) async fn insert(
        conn: &mut Conn,
        token: &NewApiToken,
        event: &AdminEvent,
        details: String,
    ) -> Result<ApiTokenRow> {
        let row = sqlx::query(concat!(
            "INSERT INTO api_tokens (agent_id, token_sha256, label, created_at, created_by) \
             VALUES ($1, $2, $3, $4, $5) RETURNING ",
            columns!()
        ))
        .bind(token.agent_id.clone())
        .bind(token.token_sha256.clone())
        .bind(token.label.clone())
        .bind(token.at)
        .bind(token.by.clone())
        .fetch_one(&mut *conn)
        .await?;
        on::admin::append(conn, event, details).await?;
        decode(&row)
    }

    /// Revokes every live token of `agent`; the admin-log entry is written only if one was.
    pub(crate) async fn revoke(
        conn: &mut Conn,
        agent: &str,
        at: i64,
        by: &str,
        event: &AdminEvent,
        details: String,
    ) -> Result<Vec<ApiTokenRow>> {
        let rows = sqlx::query(concat!(
            "UPDATE api_tokens SET revoked_at = $1, revoked_by = $2 \
             WHERE agent_id = $3 AND revoked_at IS NULL RETURNING ",
            columns!()
        ))
        .bind(at)
        .bind(by.to_owned())
        .bind(agent.to_owned())
        .fetch_all(&mut *conn)
        .await?;
        if !rows.is_empty() {
            on::admin::append(conn, event, details).await?;
        }
        rows.iter().map(decode).collect()
    }

    pub(crate) async fn list(pool: &Pool, include_revoked: bool) -> Result<Vec<ApiTokenRow>> {
        let sql = if include_revoked {
            concat!("SELECT ", columns!(), " FROM api_tokens ORDER BY id")
        } else {
            concat!(
                "SELECT ",
                columns!(),
                " FROM api_tokens WHERE revoked_at IS NULL ORDER BY id"
            )
        };
        let rows = sqlx::query(sql).fetch_all(pool).await?;
        rows.iter().map(decode).collect()
    }

    /// The agent a live token (by its SHA-256) stands for.
    pub(crate) async fn agent(pool: &Pool, token_sha256: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT agent_id FROM api_tokens WHERE token_sha256 = $1 AND revoked_at IS NULL",
        )
        .bind(token_sha256.to_owned())
        .fetch_optional(pool)
        .await?)
    }
}
