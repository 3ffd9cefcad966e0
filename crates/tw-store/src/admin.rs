//! The admin log: who changed the rules and when (mode switches, policy reloads, grants created
//! and revoked, tools switched on and off). The audit log says what agents did; this says why
//! they were allowed to. Append-only in the schema, like the audit log.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::error::{Result, StoreError};
use crate::query::MAX_PAGE;
use crate::{chain, codec};

/// An administrative change, ready to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminEvent {
    /// When it happened (µs since the epoch).
    pub at: i64,
    /// Who made it (a user, or `system` for automatic changes).
    pub actor: String,
    /// A short snake_case kind: `mode_changed`, `policy_reloaded`, `grant_created`, ...
    pub kind: String,
    /// One line a person can read (`mode: normal -> lockdown`, a diff summary).
    pub summary: String,
    /// The change in full, as JSON.
    pub details: Value,
}

/// A stored administrative change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminEventRow {
    /// Position in the log; increases with every append.
    pub id: i64,
    /// When it happened (µs since the epoch).
    pub at: i64,
    /// Who made it.
    pub actor: String,
    /// What kind of change.
    pub kind: String,
    /// One line a person can read.
    pub summary: String,
    /// The change in full.
    pub details: Value,
}

/// Which administrative changes to read. The default is everything, newest first, 50 at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdminQuery {
    /// Only changes made at or after this time (µs since the epoch).
    pub since: Option<i64>,
    /// Only changes of this kind.
    pub kind: Option<String>,
    /// Continue below this id: the last id of the previous page.
    pub cursor: Option<i64>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: u32,
}

impl Default for AdminQuery {
    fn default() -> Self {
        Self {
            since: None,
            kind: None,
            cursor: None,
            limit: 50,
        }
    }
}

impl AdminQuery {
    /// The query as a front end hands it over, checked: a page holds 1 to [`MAX_PAGE`] changes,
    /// a cursor is an id (1 or more), and a blank kind filters nothing. The reader itself stays
    /// lenient (it clamps the page size), like the audit log's; front ends check first so a
    /// request that makes no sense is refused with its reason rather than quietly changed.
    pub fn checked(mut self) -> Result<Self> {
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(StoreError::InvalidQuery {
                field: "limit",
                message: format!(
                    "between 1 and {MAX_PAGE} changes a page, not {}",
                    self.limit
                ),
            });
        }
        if self.cursor.is_some_and(|c| c < 1) {
            return Err(StoreError::InvalidQuery {
                field: "cursor",
                message: "a cursor is a change's id, 1 or more (a page's next_cursor)".to_owned(),
            });
        }
        self.kind = self.kind.filter(|k| !k.trim().is_empty());
        Ok(self)
    }
}

/// Checks and encodes an event before the write connection is taken.
pub(crate) fn encode(event: &AdminEvent) -> Result<String> {
    codec::check_kind("admin event kind", &event.kind)?;
    Ok(event.details.to_string())
}

dual! {
    /// Appends an event linked to the last one (see `chain`). `conn` must be in a transaction that
    /// holds the write lock (`Writer::transaction`), so no other process appends between the read of
    /// the last link and the insert.
    pub(crate) async fn append(
        conn: &mut Conn,
        event: &AdminEvent,
        details: String,
    ) -> Result<i64> {
        // One appender at a time per store: on PostgreSQL replicas append side by side.
        conn.lock_key("toolwarden admin_log").await?;
        let last: Option<Option<Vec<u8>>> =
            sqlx::query_scalar("SELECT hash FROM admin_log ORDER BY id DESC LIMIT 1")
                .fetch_optional(&mut *conn)
                .await?;
        let prev: [u8; 32] = match last {
            None => chain::GENESIS,
            Some(hash) => hash
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| StoreError::Corrupt {
                    what: "admin log, last entry".to_owned(),
                    message: "it has no chain hash".to_owned(),
                })?,
        };
        let hash = chain::link(
            chain::Log::Admin,
            &prev,
            [
                chain::Field::Int(event.at),
                chain::Field::Text(&event.actor),
                chain::Field::Text(&event.kind),
                chain::Field::Text(&event.summary),
                chain::Field::Text(&details),
            ],
        );
        let id = sqlx::query_scalar(
            "INSERT INTO admin_log (id, at, actor, kind, summary, details, prev, hash) \
             VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM admin_log), \
             $1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(event.at)
        .bind(event.actor.clone())
        .bind(event.kind.clone())
        .bind(event.summary.clone())
        .bind(details)
        .bind(prev.to_vec())
        .bind(hash.to_vec())
        .fetch_one(&mut *conn)
        .await?;
        Ok(id)
    }

    pub(crate) async fn list(pool: &Pool, q: &AdminQuery) -> Result<Vec<AdminEventRow>> {
        let mut qb = QueryBuilder::<Db>::new(
            "SELECT id, at, actor, kind, summary, details FROM admin_log WHERE 1 = 1",
        );
        if let Some(since) = q.since {
            qb.push(" AND at >= ").push_bind(since);
        }
        if let Some(kind) = &q.kind {
            qb.push(" AND kind = ").push_bind(kind.clone());
        }
        if let Some(cursor) = q.cursor {
            qb.push(" AND id < ").push_bind(cursor);
        }
        qb.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(q.limit.clamp(1, MAX_PAGE)));
        let rows = qb.build().fetch_all(pool).await?;
        rows.iter().map(decode).collect()
    }

    fn decode(row: &DbRow) -> Result<AdminEventRow> {
        let id: i64 = row.try_get("id")?;
        let details: String = row.try_get("details")?;
        Ok(AdminEventRow {
            id,
            at: row.try_get("at")?,
            actor: row.try_get("actor")?,
            kind: row.try_get("kind")?,
            summary: row.try_get("summary")?,
            details: codec::json(|| format!("admin event {id}, column details"), &details)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn check(q: AdminQuery, expect: std::result::Result<AdminQuery, &str>) {
        let got = q.clone().checked().map_err(|e| e.to_string());
        assert_eq!(got, expect.map_err(str::to_owned), "{q:?}");
    }

    #[test]
    fn a_query_out_of_range_is_refused_with_its_field_and_a_blank_kind_is_none() {
        let q = |limit, cursor: Option<i64>, kind: Option<&str>| AdminQuery {
            since: None,
            kind: kind.map(str::to_owned),
            cursor,
            limit,
        };
        check(AdminQuery::default(), Ok(AdminQuery::default()));
        check(
            q(MAX_PAGE, Some(1), Some("mode_changed")),
            Ok(q(MAX_PAGE, Some(1), Some("mode_changed"))),
        );
        check(q(50, None, Some(" ")), Ok(q(50, None, None)));
        check(
            q(0, None, None),
            Err("invalid audit query: limit: between 1 and 1000 changes a page, not 0"),
        );
        check(
            q(MAX_PAGE + 1, None, None),
            Err("invalid audit query: limit: between 1 and 1000 changes a page, not 1001"),
        );
        check(
            q(50, Some(0), None),
            Err(
                "invalid audit query: cursor: a cursor is a change's id, 1 or more (a page's \
                 next_cursor)",
            ),
        );
    }
}
