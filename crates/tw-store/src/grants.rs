//! Grants: standing approvals a person gave so that matching calls need not ask again. The store
//! keeps and lists them; deciding whether a grant covers a call is pure logic and lives in tw-core.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::codec;
use crate::error::{Result, StoreError};

/// What calls of the tool a grant covers: the policy engine's own type, stored as `scope` and
/// `arguments` columns.
pub use tw_core::policy::grant::GrantScope;

fn scope_arguments(scope: &GrantScope) -> Option<String> {
    match scope {
        GrantScope::Exact(v) => Some(v.to_string()),
        GrantScope::Pattern(map) => Some(Value::Object(map.clone()).to_string()),
        GrantScope::Tool => None,
    }
}

/// A grant to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewGrant {
    /// Its id (a uuid chosen by the caller).
    pub id: String,
    /// The tool it covers.
    pub tool: String,
    /// Which calls of the tool it covers.
    #[serde(flatten)]
    pub scope: GrantScope,
    /// Only calls from this agent; `None`: any caller.
    pub agent_id: Option<String>,
    /// Only calls made under this skill; `None`: any.
    pub skill: Option<String>,
    /// Who gave it. When the grant comes with a confirmation's approval, the approver.
    pub created_by: String,
    /// When it stops applying (µs since the epoch); `None`: never.
    pub expires_at: Option<i64>,
    /// The confirmation it was given with, if any (it must exist). Set by the store when the
    /// grant comes with an approval.
    pub confirmation_id: Option<String>,
}

/// A stored grant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantRow {
    /// Its id.
    pub id: String,
    /// The tool it covers.
    pub tool: String,
    /// Which calls of the tool it covers.
    #[serde(flatten)]
    pub scope: GrantScope,
    /// Only calls from this agent; `None`: any caller.
    pub agent_id: Option<String>,
    /// Only calls made under this skill; `None`: any.
    pub skill: Option<String>,
    /// When it was given (µs since the epoch).
    pub created_at: i64,
    /// Who gave it.
    pub created_by: String,
    /// When it stops applying; `None`: never.
    pub expires_at: Option<i64>,
    /// When it was revoked.
    pub revoked_at: Option<i64>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
    /// The confirmation it was given with.
    pub confirmation_id: Option<String>,
}

/// Which grants to list. The default: every grant not revoked, expired ones included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GrantQuery {
    /// Only grants for this tool.
    pub tool: Option<String>,
    /// Only grants in force at this time (µs since the epoch): not revoked and not expired then.
    /// Overrides `include_revoked`.
    pub active_at: Option<i64>,
    /// Also list revoked grants.
    pub include_revoked: bool,
}

const COLUMNS: &str = "id, tool, scope, arguments, agent_id, skill, created_at, created_by, \
     expires_at, revoked_at, revoked_by, confirmation_id";

dual! {
    pub(crate) async fn create(
        conn: &mut Conn,
        grant: NewGrant,
        now_us: i64,
    ) -> Result<GrantRow> {
        sqlx::query(
            "INSERT INTO grants (id, tool, scope, arguments, agent_id, skill, created_at, created_by, \
             expires_at, confirmation_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(grant.id.clone())
        .bind(grant.tool.clone())
        .bind(grant.scope.kind())
        .bind(scope_arguments(&grant.scope))
        .bind(grant.agent_id.clone())
        .bind(grant.skill.clone())
        .bind(now_us)
        .bind(grant.created_by.clone())
        .bind(grant.expires_at)
        .bind(grant.confirmation_id.clone())
        .execute(&mut *conn)
        .await?;
        Ok(GrantRow {
            id: grant.id,
            tool: grant.tool,
            scope: grant.scope,
            agent_id: grant.agent_id,
            skill: grant.skill,
            created_at: now_us,
            created_by: grant.created_by,
            expires_at: grant.expires_at,
            revoked_at: None,
            revoked_by: None,
            confirmation_id: grant.confirmation_id,
        })
    }

    pub(crate) async fn revoke(
        conn: &mut Conn,
        id: &str,
        by: &str,
        now_us: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE grants SET revoked_at = $1, revoked_by = $2 WHERE id = $3 AND revoked_at IS NULL",
        )
        .bind(now_us)
        .bind(by.to_owned())
        .bind(id.to_owned())
        .execute(&mut *conn)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn get(pool: &Pool, id: &str) -> Result<Option<GrantRow>> {
        let mut qb = QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM grants WHERE id = "));
        qb.push_bind(id.to_owned());
        let row = qb.build().fetch_optional(pool).await?;
        row.as_ref().map(decode).transpose()
    }

    pub(crate) async fn list(pool: &Pool, q: &GrantQuery) -> Result<Vec<GrantRow>> {
        let mut qb = QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM grants WHERE 1 = 1"));
        if let Some(tool) = &q.tool {
            qb.push(" AND tool = ").push_bind(tool.clone());
        }
        if let Some(at) = q.active_at {
            qb.push(" AND (revoked_at IS NULL OR revoked_at > ")
                .push_bind(at)
                .push(") AND (expires_at IS NULL OR expires_at > ")
                .push_bind(at)
                .push(")");
        } else if !q.include_revoked {
            qb.push(" AND revoked_at IS NULL");
        }
        qb.push(" ORDER BY created_at, id");
        let rows = qb.build().fetch_all(pool).await?;
        rows.iter().map(decode).collect()
    }

    fn decode(row: &DbRow) -> Result<GrantRow> {
        let id: String = row.try_get("id")?;
        let what = |column: &str| format!("grant {id}, column {column}");
        let scope: String = row.try_get("scope")?;
        let arguments: Option<String> = row.try_get("arguments")?;
        let arguments = arguments
            .map(|t| codec::json(|| what("arguments"), &t))
            .transpose()?;
        let scope = match (scope.as_str(), arguments) {
            ("exact", Some(v)) => GrantScope::Exact(v),
            ("pattern", Some(Value::Object(map))) => GrantScope::Pattern(map),
            ("tool", None) => GrantScope::Tool,
            (scope, arguments) => {
                return Err(StoreError::Corrupt {
                    what: what("scope"),
                    message: format!(
                        "scope {scope:?} with {} arguments",
                        if arguments.is_some() { "some" } else { "no" }
                    ),
                });
            }
        };
        Ok(GrantRow {
            tool: row.try_get("tool")?,
            scope,
            agent_id: row.try_get("agent_id")?,
            skill: row.try_get("skill")?,
            created_at: row.try_get("created_at")?,
            created_by: row.try_get("created_by")?,
            expires_at: row.try_get("expires_at")?,
            revoked_at: row.try_get("revoked_at")?,
            revoked_by: row.try_get("revoked_by")?,
            confirmation_id: row.try_get("confirmation_id")?,
            id,
        })
    }
}
