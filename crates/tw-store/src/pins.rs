//! Pinned definitions of tools imported from upstream MCP servers (`upstream_pins`, migration
//! 0007): what a tool looked like when it was first registered, and what it looks like now if
//! that differs (then it is quarantined until an administrator accepts the change).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::admin::AdminEvent;
use crate::codec;
use crate::error::Result;

/// One pinned upstream tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinRow {
    /// The upstream server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// The fingerprint of the pinned definition.
    pub definition_hash: String,
    /// The pinned definition (name, description, schemas).
    pub definition: Value,
    /// When it was pinned (µs since the epoch).
    pub pinned_at: i64,
    /// Who pinned it (`first use`, or the administrator who accepted a change).
    pub pinned_by: String,
    /// A different definition the server now gives, waiting for review.
    pub pending_hash: Option<String>,
    /// That definition.
    pub pending_definition: Option<Value>,
    /// Since when it waits.
    pub pending_since: Option<i64>,
}

impl PinRow {
    /// Whether the tool is quarantined (its server changed it since it was pinned).
    pub fn quarantined(&self) -> bool {
        self.pending_hash.is_some()
    }
}

/// What the store made of a definition a server just gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinState {
    /// Seen for the first time: pinned now.
    New,
    /// The same as the pin.
    Same,
    /// Different from the pin: quarantined (still, or from now on).
    Changed,
}

/// A definition seen now.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenDefinition {
    /// The server.
    pub server: String,
    /// The tool's name on it.
    pub tool: String,
    /// Its fingerprint.
    pub hash: String,
    /// The definition.
    pub definition: Value,
    /// When (µs since the epoch).
    pub at: i64,
}

dual! {
    fn decode(row: &DbRow) -> Result<PinRow> {
        let server: String = row.try_get("server")?;
        let tool: String = row.try_get("tool")?;
        let what = |column: &str| format!("upstream pin {server}/{tool}, column {column}");
        let definition: String = row.try_get("definition")?;
        let pending: Option<String> = row.try_get("pending_definition")?;
        Ok(PinRow {
            definition: codec::json(|| what("definition"), &definition)?,
            pending_definition: pending
                .map(|p| codec::json(|| what("pending_definition"), &p))
                .transpose()?,
            server,
            tool,
            definition_hash: row.try_get("definition_hash")?,
            pinned_at: row.try_get("pinned_at")?,
            pinned_by: row.try_get("pinned_by")?,
            pending_hash: row.try_get("pending_hash")?,
            pending_since: row.try_get("pending_since")?,
        })
    }

    pub(crate) async fn observe(
        conn: &mut Conn,
        seen: &SeenDefinition,
    ) -> Result<PinState> {
        let definition = seen.definition.to_string();
        let inserted = sqlx::query(
            "INSERT INTO upstream_pins (server, tool, definition_hash, definition, pinned_at, pinned_by) \
             VALUES ($1, $2, $3, $4, $5, 'first use') ON CONFLICT (server, tool) DO NOTHING",
        )
        .bind(seen.server.clone())
        .bind(seen.tool.clone())
        .bind(seen.hash.clone())
        .bind(definition.clone())
        .bind(seen.at)
        .execute(&mut *conn)
        .await?;
        if inserted.rows_affected() > 0 {
            return Ok(PinState::New);
        }
        let pinned: String = sqlx::query_scalar(
            "SELECT definition_hash FROM upstream_pins WHERE server = $1 AND tool = $2",
        )
        .bind(seen.server.clone())
        .bind(seen.tool.clone())
        .fetch_one(&mut *conn)
        .await?;
        if pinned == seen.hash {
            // Back to what was pinned: nothing waits for review any more.
            sqlx::query(
                "UPDATE upstream_pins SET pending_hash = NULL, pending_definition = NULL, \
                 pending_since = NULL WHERE server = $1 AND tool = $2",
            )
            .bind(seen.server.clone())
            .bind(seen.tool.clone())
            .execute(&mut *conn)
            .await?;
            return Ok(PinState::Same);
        }
        sqlx::query(
            "UPDATE upstream_pins SET pending_hash = $1, pending_definition = $2, \
             pending_since = CASE WHEN pending_hash IS NOT DISTINCT FROM $3 THEN pending_since ELSE $4 END \
             WHERE server = $5 AND tool = $6",
        )
        .bind(seen.hash.clone())
        .bind(definition)
        .bind(seen.hash.clone())
        .bind(seen.at)
        .bind(seen.server.clone())
        .bind(seen.tool.clone())
        .execute(&mut *conn)
        .await?;
        Ok(PinState::Changed)
    }

    /// Moves the pending definition into the pin; `None` when nothing waited.
    pub(crate) async fn accept(
        conn: &mut Conn,
        server: &str,
        tool: &str,
        by: &str,
        event: &AdminEvent,
        details: String,
    ) -> Result<Option<PinRow>> {
        let row = sqlx::query(
            "UPDATE upstream_pins SET definition_hash = pending_hash, definition = pending_definition, \
             pinned_at = $1, pinned_by = $2, pending_hash = NULL, pending_definition = NULL, \
             pending_since = NULL \
             WHERE server = $3 AND tool = $4 AND pending_hash IS NOT NULL RETURNING *",
        )
        .bind(event.at)
        .bind(by.to_owned())
        .bind(server.to_owned())
        .bind(tool.to_owned())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        on::admin::append(conn, event, details).await?;
        decode(&row).map(Some)
    }

    pub(crate) async fn list(pool: &Pool) -> Result<Vec<PinRow>> {
        let rows = sqlx::query("SELECT * FROM upstream_pins ORDER BY server, tool")
            .fetch_all(pool)
            .await?;
        rows.iter().map(decode).collect()
    }
}
