//! Calls held for a person's approval. A request is settled once: approving, denying and expiring
//! all change a row only while it is still pending, inside one transaction, so when two people
//! (or the CLI and the desktop app) answer at once exactly one answer counts and the other is
//! told who got there first.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::codec;
use crate::error::{Result, StoreError};
use crate::grants::{GrantRow, NewGrant};
use crate::query::MAX_PAGE;

/// Where a confirmation request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmationState {
    /// Waiting for a person.
    Pending,
    /// A person allowed the call.
    Approved,
    /// A person refused the call.
    Denied,
    /// Nobody answered in time.
    Expired,
}

impl ConfirmationState {
    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }
}

impl std::fmt::Display for ConfirmationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ConfirmationState {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "pending" => Ok(Self::Pending),
            "approved" => Ok(Self::Approved),
            "denied" => Ok(Self::Denied),
            "expired" => Ok(Self::Expired),
            other => Err(format!(
                "unknown confirmation state {other:?}: expected \"pending\", \"approved\", \
                 \"denied\" or \"expired\""
            )),
        }
    }
}

/// A call to hold for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewConfirmation {
    /// Its id (a uuid chosen by the caller).
    pub id: String,
    /// The held call's execution id.
    pub execution_id: String,
    /// The tool called.
    pub tool: String,
    /// The arguments, already redacted.
    pub arguments: Value,
    /// The calling agent.
    pub agent_id: String,
    /// The skill the call was made under.
    pub skill: Option<String>,
    /// The person on whose behalf the agent acted.
    pub user_id: Option<String>,
    /// Why policy asked, in a line a person can read.
    pub reason: String,
    /// The decision trace that led to asking.
    pub explanation: Value,
    /// What the call would touch, as the tool saw it (a browser action: the page and element).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// When it was asked (µs since the epoch).
    pub created_at: i64,
    /// When an unanswered request lapses (µs since the epoch).
    pub expires_at: i64,
}

/// A stored confirmation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationRow {
    /// Its id.
    pub id: String,
    /// The held call's execution id.
    pub execution_id: String,
    /// The tool called.
    pub tool: String,
    /// The arguments, redacted.
    pub arguments: Value,
    /// The calling agent.
    pub agent_id: String,
    /// The skill the call was made under.
    pub skill: Option<String>,
    /// The person on whose behalf the agent acted.
    pub user_id: Option<String>,
    /// Why policy asked.
    pub reason: String,
    /// The decision trace that led to asking.
    pub explanation: Value,
    /// What the call would touch, as the tool saw it when it asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// When it was asked (µs since the epoch).
    pub created_at: i64,
    /// When an unanswered request lapses.
    pub expires_at: i64,
    /// Where it stands.
    pub state: ConfirmationState,
    /// When it left `pending`: the answer's time, or for an expired request its deadline.
    pub resolved_at: Option<i64>,
    /// Who answered; `None` while pending and for expired requests.
    pub resolved_by: Option<String>,
    /// What the person who answered said.
    pub note: Option<String>,
    /// The grant given with the approval, if any.
    pub grant_id: Option<String>,
}

/// Which requests to list. The default: pending ones, oldest first, 50 of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfirmationQuery {
    /// Only requests in this state; `None`: all.
    pub state: Option<ConfirmationState>,
    /// Most requests returned, 1 to [`MAX_PAGE`].
    pub limit: u32,
}

impl Default for ConfirmationQuery {
    fn default() -> Self {
        Self {
            state: Some(ConfirmationState::Pending),
            limit: 50,
        }
    }
}

/// A person's answer to a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// Allow the call (`true`) or refuse it.
    pub approve: bool,
    /// Who answered.
    pub by: String,
    /// What they said.
    pub note: Option<String>,
    /// A standing approval to create with the approval, so similar calls need not ask again.
    /// Only with `approve`. The store sets its `created_by` to `by` and its `confirmation_id` to
    /// the request's id.
    pub grant: Option<NewGrant>,
}

/// What answering a request did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ResolveOutcome {
    /// This answer settled the request.
    Resolved {
        /// The request as it now stands.
        confirmation: Box<ConfirmationRow>,
        /// The grant created with it.
        grant: Option<Box<GrantRow>>,
    },
    /// No request has that id.
    NotFound,
    /// The request was settled before this answer arrived; nothing changed.
    AlreadyResolved {
        /// How it was settled.
        state: ConfirmationState,
        /// Who settled it (`None` when it expired).
        by: Option<String>,
        /// When (µs since the epoch; for an expired request, its deadline).
        at: i64,
    },
}

const COLUMNS: &str = "id, execution_id, tool, arguments, agent_id, skill, user_id, reason, \
     explanation, context, created_at, expires_at, state, resolved_at, resolved_by, note, grant_id";

/// Refuses a resolution that makes no sense before the write connection is taken.
pub(crate) fn check(id: &str, resolution: &Resolution) -> Result<()> {
    if !resolution.approve && resolution.grant.is_some() {
        return Err(StoreError::Invalid {
            what: format!("resolution of confirmation {id}"),
            message: "a grant can only come with an approval".to_owned(),
        });
    }
    Ok(())
}

dual! {
    pub(crate) async fn create(conn: &mut Conn, c: &NewConfirmation) -> Result<()> {
        sqlx::query(
            "INSERT INTO confirmations (id, execution_id, tool, arguments, agent_id, skill, user_id, \
             reason, explanation, context, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(c.id.clone())
        .bind(c.execution_id.clone())
        .bind(c.tool.clone())
        .bind(c.arguments.to_string())
        .bind(c.agent_id.clone())
        .bind(c.skill.clone())
        .bind(c.user_id.clone())
        .bind(c.reason.clone())
        .bind(c.explanation.to_string())
        .bind(c.context.as_ref().map(Value::to_string))
        .bind(c.created_at)
        .bind(c.expires_at)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    pub(crate) async fn get(pool: &Pool, id: &str) -> Result<Option<ConfirmationRow>> {
        let mut qb =
            QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM confirmations WHERE id = "));
        qb.push_bind(id.to_owned());
        let row = qb.build().fetch_optional(pool).await?;
        row.as_ref().map(decode).transpose()
    }

    pub(crate) async fn list(pool: &Pool, q: &ConfirmationQuery) -> Result<Vec<ConfirmationRow>> {
        let mut qb = QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM confirmations"));
        if let Some(state) = q.state {
            qb.push(" WHERE state = ").push_bind(state.as_str());
        }
        // Pending requests first and oldest first: the queue a person works through. Settled ones
        // after them, newest first: the history.
        qb.push(
            " ORDER BY state = 'pending' DESC, \
             CASE WHEN state = 'pending' THEN created_at ELSE -created_at END, id LIMIT ",
        )
        .push_bind(i64::from(q.limit.clamp(1, MAX_PAGE)));
        let rows = qb.build().fetch_all(pool).await?;
        rows.iter().map(decode).collect()
    }

    /// Settles a request if it is still pending and not past its deadline. Runs inside the caller's
    /// `BEGIN IMMEDIATE` transaction, so the state test and the change cannot be split by another
    /// writer, in this process or another.
    pub(crate) async fn resolve(
        conn: &mut Conn,
        id: &str,
        resolution: Resolution,
        now_us: i64,
    ) -> Result<ResolveOutcome> {
        let state = if resolution.approve {
            ConfirmationState::Approved
        } else {
            ConfirmationState::Denied
        };
        let mut qb = QueryBuilder::<Db>::new("UPDATE confirmations SET state = ");
        qb.push_bind(state.as_str())
            .push(", resolved_at = ")
            .push_bind(now_us)
            .push(", resolved_by = ")
            .push_bind(resolution.by.clone())
            .push(", note = ")
            .push_bind(resolution.note.clone())
            .push(" WHERE id = ")
            .push_bind(id.to_owned())
            .push(" AND state = 'pending' AND expires_at > ")
            .push_bind(now_us)
            .push(format!(" RETURNING {COLUMNS}"));
        let Some(row) = qb.build().fetch_optional(&mut *conn).await? else {
            return why_unchanged(conn, id, now_us).await;
        };
        let Some(mut grant) = resolution.grant else {
            return Ok(ResolveOutcome::Resolved {
                confirmation: Box::new(decode(&row)?),
                grant: None,
            });
        };
        grant.created_by = resolution.by;
        grant.confirmation_id = Some(id.to_owned());
        let grant = on::grants::create(conn, grant, now_us).await?;
        let mut qb = QueryBuilder::<Db>::new("UPDATE confirmations SET grant_id = ");
        qb.push_bind(grant.id.clone())
            .push(" WHERE id = ")
            .push_bind(id.to_owned())
            .push(format!(" RETURNING {COLUMNS}"));
        let row = qb.build().fetch_one(&mut *conn).await?;
        Ok(ResolveOutcome::Resolved {
            confirmation: Box::new(decode(&row)?),
            grant: Some(Box::new(grant)),
        })
    }

    /// Explains why [`resolve`] changed nothing. A request still marked pending past its deadline is
    /// marked expired here, so the answer and the file agree.
    async fn why_unchanged(
        conn: &mut Conn,
        id: &str,
        now_us: i64,
    ) -> Result<ResolveOutcome> {
        let row = sqlx::query(
            "SELECT state, resolved_at, resolved_by, expires_at FROM confirmations WHERE id = $1",
        )
        .bind(id.to_owned())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Ok(ResolveOutcome::NotFound);
        };
        let what = || format!("confirmation {id}, column state");
        let state: ConfirmationState = codec::word(what, &row.try_get::<String, _>("state")?)?;
        let expires_at: i64 = row.try_get("expires_at")?;
        if state == ConfirmationState::Pending {
            if expires_at > now_us {
                // The UPDATE's own test says otherwise; only a damaged row gets here.
                return Err(StoreError::Corrupt {
                    what: format!("confirmation {id}"),
                    message: "pending and unexpired, yet it could not be resolved".to_owned(),
                });
            }
            expire(conn, Some(id), now_us).await?;
            return Ok(ResolveOutcome::AlreadyResolved {
                state: ConfirmationState::Expired,
                by: None,
                at: expires_at,
            });
        }
        let at: Option<i64> = row.try_get("resolved_at")?;
        Ok(ResolveOutcome::AlreadyResolved {
            state,
            by: row.try_get("resolved_by")?,
            at: at.unwrap_or(expires_at),
        })
    }

    /// Marks pending requests past their deadline (all of them, or just `only`) expired and returns
    /// their ids, sorted.
    pub(crate) async fn expire(
        conn: &mut Conn,
        only: Option<&str>,
        now_us: i64,
    ) -> Result<Vec<String>> {
        // An expired request records its deadline as the time it was settled: that is when it
        // lapsed, whenever a sweep happened to notice.
        let mut qb = QueryBuilder::<Db>::new(
            "UPDATE confirmations SET state = 'expired', resolved_at = expires_at \
             WHERE state = 'pending' AND expires_at <= ",
        );
        qb.push_bind(now_us);
        if let Some(id) = only {
            qb.push(" AND id = ").push_bind(id.to_owned());
        }
        qb.push(" RETURNING id");
        let rows = qb.build().fetch_all(&mut *conn).await?;
        let mut ids = rows
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        ids.sort_unstable();
        Ok(ids)
    }

    fn decode(row: &DbRow) -> Result<ConfirmationRow> {
        let id: String = row.try_get("id")?;
        let what = |column: &'static str| {
            let id = id.clone();
            move || format!("confirmation {id}, column {column}")
        };
        let arguments: String = row.try_get("arguments")?;
        let explanation: String = row.try_get("explanation")?;
        let context: Option<String> = row.try_get("context")?;
        let state: String = row.try_get("state")?;
        Ok(ConfirmationRow {
            execution_id: row.try_get("execution_id")?,
            tool: row.try_get("tool")?,
            arguments: codec::json(what("arguments"), &arguments)?,
            agent_id: row.try_get("agent_id")?,
            skill: row.try_get("skill")?,
            user_id: row.try_get("user_id")?,
            reason: row.try_get("reason")?,
            explanation: codec::json(what("explanation"), &explanation)?,
            context: context
                .map(|c| codec::json(what("context"), &c))
                .transpose()?,
            created_at: row.try_get("created_at")?,
            expires_at: row.try_get("expires_at")?,
            state: codec::word(what("state"), &state)?,
            resolved_at: row.try_get("resolved_at")?,
            resolved_by: row.try_get("resolved_by")?,
            note: row.try_get("note")?,
            grant_id: row.try_get("grant_id")?,
            id,
        })
    }
}
