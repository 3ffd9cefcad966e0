//! What decides which tools a skill reaches, kept across restarts (migration 0005): each tool's
//! capability classification, cached so a tool is classified once per definition rather than on
//! every start, and administrators' per-skill overrides. Also the per-skill call counts the
//! skills views show, read from the audit log.
//!
//! Administrative changes and their admin-log entries are written in one transaction, as tool
//! switches are: there is never a change nobody can account for, nor an entry for a change that
//! did not happen. A machine classification never replaces an administrator's; that is one
//! conditional upsert, so it holds when two processes classify at once.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tw_core::policy::access::AccessLevel;

use crate::admin::{self, AdminEvent};
use crate::codec;
use crate::error::{Result, StoreError};

/// Longest tool name the schema accepts, in characters.
const MAX_TOOL: usize = 128;
/// Longest skill name the schema accepts, in characters.
const MAX_SKILL: usize = 64;
/// The audit error code of a call its skill's envelope refused (`tw_core`'s `SKILL_DENIED`,
/// spelled here because it is what the stored rows hold).
const SKILL_DENIED: &str = "skill_denied";

/// Who decided a tool's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassificationSource {
    /// The capability catalog's static map.
    Static,
    /// A language model.
    Llm,
    /// The keyword heuristic.
    Heuristic,
    /// An administrator; never replaced by the others.
    Admin,
}

impl ClassificationSource {
    /// The snake_case spelling stored in `tool_classifications.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Llm => "llm",
            Self::Heuristic => "heuristic",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for ClassificationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ClassificationSource {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "static" => Ok(Self::Static),
            "llm" => Ok(Self::Llm),
            "heuristic" => Ok(Self::Heuristic),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown classification source {other:?}: expected static, llm, heuristic or admin"
            )),
        }
    }
}

/// One capability given to a tool, with how sure its classifier was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityScore {
    /// The capability's name (snake_case, at most 64 characters).
    pub capability: String,
    /// From 0 to 1; the static map and administrators give 1.
    pub confidence: f32,
}

/// A tool's classification, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassificationRow {
    /// The tool's name.
    pub tool: String,
    /// The fingerprint of the definition it was classified from; a different one means the
    /// classification is stale.
    pub definition_hash: String,
    /// Who decided.
    pub source: ClassificationSource,
    /// The capabilities given, in the order the classifier gave them; empty: none.
    pub capabilities: Vec<CapabilityScore>,
    /// Why: the model's name, the heuristic's reasons, an administrator's note.
    pub detail: Option<String>,
    /// When (µs since the epoch).
    pub classified_at: i64,
    /// `classifier`, or the administrator who set it.
    pub classified_by: String,
}

/// What an administrator's override does to a skill's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideAction {
    /// The skill may use the tool, whatever its SKILL.md and capabilities say.
    Add,
    /// The skill may not use the tool, whatever its SKILL.md and capabilities say.
    Remove,
}

impl OverrideAction {
    /// The snake_case spelling stored in `skill_overrides.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
        }
    }
}

impl fmt::Display for OverrideAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OverrideAction {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "add" => Ok(Self::Add),
            "remove" => Ok(Self::Remove),
            other => Err(format!(
                "unknown override action {other:?}: expected add or remove"
            )),
        }
    }
}

/// An administrator's override of one tool for one skill, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillOverrideRow {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// Add or remove.
    pub action: OverrideAction,
    /// For an addition, the highest level the skill may use the tool at (`None`: the skill's
    /// own); a removal has none.
    pub access_level: Option<AccessLevel>,
    /// Why, as the administrator wrote it.
    pub reason: Option<String>,
    /// When (µs since the epoch).
    pub created_at: i64,
    /// Who.
    pub created_by: String,
}

/// Calls made under one skill, from the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillUsageRow {
    /// The skill.
    pub skill: String,
    /// Every recorded call made under it.
    pub calls: u64,
    /// Those its envelope refused (error code `skill_denied`).
    pub skill_denied: u64,
    /// When the latest of them started (µs since the epoch).
    pub last_call_at: Option<i64>,
}

// Macros rather than consts: sqlx takes only `&'static str` SQL, and `concat!` takes only
// literals.
macro_rules! classification_columns {
    () => {
        "tool, definition_hash, source, capabilities, detail, classified_at, classified_by"
    };
}
macro_rules! override_columns {
    () => {
        "skill, tool, action, access_level, reason, created_at, created_by"
    };
}

fn invalid(what: String, message: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        what,
        message: message.into(),
    }
}

fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    let n = value.chars().count();
    if (1..=max).contains(&n) {
        return Ok(());
    }
    Err(invalid(
        format!("{what} {value:?}"),
        format!("expected 1 to {max} characters, got {n}"),
    ))
}

/// Checks a classification and encodes its capabilities before the write connection is taken.
pub(crate) fn encode_classification(row: &ClassificationRow) -> Result<String> {
    check_len("tool name", &row.tool, MAX_TOOL)?;
    let what = || format!("capabilities of tool {}", row.tool);
    for (i, score) in row.capabilities.iter().enumerate() {
        codec::check_kind("capability name", &score.capability)?;
        if !(0.0..=1.0).contains(&score.confidence) {
            return Err(invalid(
                what(),
                format!(
                    "confidence of {} is {}: expected 0 to 1",
                    score.capability, score.confidence
                ),
            ));
        }
        if row.capabilities[..i]
            .iter()
            .any(|s| s.capability == score.capability)
        {
            return Err(invalid(
                what(),
                format!("{} is listed twice", score.capability),
            ));
        }
    }
    serde_json::to_string(&row.capabilities).map_err(|e| StoreError::Encode {
        what: what(),
        message: e.to_string(),
    })
}

/// Checks an override before the write connection is taken.
pub(crate) fn check_override(row: &SkillOverrideRow) -> Result<()> {
    check_len("skill name", &row.skill, MAX_SKILL)?;
    check_len("tool name", &row.tool, MAX_TOOL)?;
    if row.action == OverrideAction::Remove
        && let Some(level) = row.access_level
    {
        return Err(invalid(
            format!("override of tool {} for skill {}", row.tool, row.skill),
            format!("a removal grants nothing, so it takes no access level (got {level})"),
        ));
    }
    Ok(())
}

/// The query behind [`skill_usage`]; a macro so the tests can ask SQLite for its plan.
macro_rules! usage_sql {
    () => {
        "SELECT skill, COUNT(*) AS calls, \
         COUNT(*) FILTER (WHERE error_code = $1) AS skill_denied, \
         MAX(started_at) AS last_call_at \
         FROM audit_log WHERE skill IS NOT NULL GROUP BY skill ORDER BY skill"
    };
}

dual! {
    fn decode_classification(row: &DbRow) -> Result<ClassificationRow> {
        let tool: String = row.try_get("tool")?;
        let source: String = row.try_get("source")?;
        let capabilities: String = row.try_get("capabilities")?;
        let what = |column: &str| format!("tool classification {tool}, column {column}");
        let capabilities = serde_json::from_str(&capabilities).map_err(|e| StoreError::Corrupt {
            what: what("capabilities"),
            message: e.to_string(),
        })?;
        Ok(ClassificationRow {
            source: codec::word(|| what("source"), &source)?,
            capabilities,
            definition_hash: row.try_get("definition_hash")?,
            detail: row.try_get("detail")?,
            classified_at: row.try_get("classified_at")?,
            classified_by: row.try_get("classified_by")?,
            tool,
        })
    }

    fn decode_override(row: &DbRow) -> Result<SkillOverrideRow> {
        let skill: String = row.try_get("skill")?;
        let tool: String = row.try_get("tool")?;
        let action: String = row.try_get("action")?;
        let access_level: Option<String> = row.try_get("access_level")?;
        let what = |column: &str| format!("override of tool {tool} for skill {skill}, column {column}");
        Ok(SkillOverrideRow {
            action: codec::word(|| what("action"), &action)?,
            access_level: access_level
                .map(|level| codec::word(|| what("access_level"), &level))
                .transpose()?,
            reason: row.try_get("reason")?,
            created_at: row.try_get("created_at")?,
            created_by: row.try_get("created_by")?,
            skill,
            tool,
        })
    }

    /// Every classification, by tool.
    pub(crate) async fn classifications(pool: &Pool) -> Result<Vec<ClassificationRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            classification_columns!(),
            " FROM tool_classifications ORDER BY tool"
        ))
        .fetch_all(pool)
        .await?;
        rows.iter().map(decode_classification).collect()
    }

    /// One tool's classification.
    pub(crate) async fn classification(
        pool: &Pool,
        tool: &str,
    ) -> Result<Option<ClassificationRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            classification_columns!(),
            " FROM tool_classifications WHERE tool = $1"
        ))
        .bind(tool.to_owned())
        .fetch_optional(pool)
        .await?;
        row.as_ref().map(decode_classification).transpose()
    }

    /// A stored classification as the admin log records it. Read from the columns rather than
    /// decoded: the capabilities keep the numbers as written (an `f32` widened to JSON's `f64` would
    /// print 0.8 as 0.800000011920929), and a damaged row can still be cleared and logged.
    fn logged_classification(row: &DbRow) -> Result<Value> {
        let capabilities: String = row.try_get("capabilities")?;
        Ok(json!({
            "source": row.try_get::<String, _>("source")?,
            "definition_hash": row.try_get::<String, _>("definition_hash")?,
            "capabilities": serde_json::from_str::<Value>(&capabilities)
                .unwrap_or(Value::String(capabilities)),
            "detail": row.try_get::<Option<String>, _>("detail")?,
            "classified_at": row.try_get::<i64, _>("classified_at")?,
            "classified_by": row.try_get::<String, _>("classified_by")?,
        }))
    }

    /// The capability names in a logged list, for a summary.
    fn logged_names(capabilities: &Value) -> String {
        let names: Vec<&str> = capabilities
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("capability").and_then(Value::as_str))
            .collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// Writes `row` (its capabilities already encoded) unless it is a machine's and an
    /// administrator's row is in place; an administrator's row is logged. Run in a transaction.
    pub(crate) async fn put_classification(
        conn: &mut Conn,
        row: &ClassificationRow,
        capabilities: String,
    ) -> Result<bool> {
        let admin = row.source == ClassificationSource::Admin;
        let previous = if admin {
            sqlx::query(concat!(
                "SELECT ",
                classification_columns!(),
                " FROM tool_classifications WHERE tool = $1"
            ))
            .bind(row.tool.clone())
            .fetch_optional(&mut *conn)
            .await?
            .as_ref()
            .map(logged_classification)
            .transpose()?
        } else {
            None
        };
        let logged_capabilities = codec::json(
            || format!("capabilities of tool {}", row.tool),
            &capabilities,
        )?;
        // The condition is part of the upsert, not a read before it: a machine's answer computed
        // before an administrator's write must still lose to it.
        let written = sqlx::query(concat!(
            "INSERT INTO tool_classifications (",
            classification_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (tool) DO UPDATE SET definition_hash = excluded.definition_hash, \
             source = excluded.source, capabilities = excluded.capabilities, \
             detail = excluded.detail, classified_at = excluded.classified_at, \
             classified_by = excluded.classified_by \
             WHERE excluded.source = 'admin' OR tool_classifications.source <> 'admin'"
        ))
        .bind(row.tool.clone())
        .bind(row.definition_hash.clone())
        .bind(row.source.as_str())
        .bind(capabilities)
        .bind(row.detail.clone())
        .bind(row.classified_at)
        .bind(row.classified_by.clone())
        .execute(&mut *conn)
        .await?
        .rows_affected()
            > 0;
        if written && admin {
            let event = AdminEvent {
                at: row.classified_at,
                actor: row.classified_by.clone(),
                kind: "tool_classified".to_owned(),
                summary: format!(
                    "set tool {}'s capabilities to {}",
                    row.tool,
                    logged_names(&logged_capabilities)
                ),
                details: json!({
                    "tool": row.tool,
                    "definition_hash": row.definition_hash,
                    "capabilities": logged_capabilities,
                    "detail": row.detail,
                    "previous": previous,
                }),
            };
            let details = admin::encode(&event)?;
            on::admin::append(conn, &event, details).await?;
        }
        Ok(written)
    }

    /// Removes a tool's classification and, if `actor` is given and there was one, logs it. Run in
    /// a transaction.
    pub(crate) async fn delete_classification(
        conn: &mut Conn,
        tool: &str,
        actor: Option<&str>,
        at: i64,
    ) -> Result<bool> {
        let removed = sqlx::query(concat!(
            "DELETE FROM tool_classifications WHERE tool = $1 RETURNING ",
            classification_columns!()
        ))
        .bind(tool.to_owned())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(removed) = removed.as_ref().map(logged_classification).transpose()? else {
            return Ok(false);
        };
        if let Some(actor) = actor {
            let source = removed["source"].as_str().unwrap_or_default();
            let event = AdminEvent {
                at,
                actor: actor.to_owned(),
                kind: "tool_classification_cleared".to_owned(),
                summary: format!(
                    "cleared tool {tool}'s capabilities (were {}, from {source})",
                    logged_names(&removed["capabilities"]),
                ),
                details: json!({ "tool": tool, "removed": removed }),
            };
            let details = admin::encode(&event)?;
            on::admin::append(conn, &event, details).await?;
        }
        Ok(true)
    }

    /// Every override, by skill and tool.
    pub(crate) async fn overrides(pool: &Pool) -> Result<Vec<SkillOverrideRow>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            override_columns!(),
            " FROM skill_overrides ORDER BY skill, tool"
        ))
        .fetch_all(pool)
        .await?;
        rows.iter().map(decode_override).collect()
    }

    async fn override_of(
        conn: &mut Conn,
        skill: &str,
        tool: &str,
    ) -> Result<Option<SkillOverrideRow>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            override_columns!(),
            " FROM skill_overrides WHERE skill = $1 AND tool = $2"
        ))
        .bind(skill.to_owned())
        .bind(tool.to_owned())
        .fetch_optional(&mut *conn)
        .await?;
        row.as_ref().map(decode_override).transpose()
    }

    /// Sets an override (already checked) and logs it; returns the one it replaced. Run in a
    /// transaction.
    pub(crate) async fn put_override(
        conn: &mut Conn,
        row: &SkillOverrideRow,
    ) -> Result<Option<SkillOverrideRow>> {
        let previous = override_of(conn, &row.skill, &row.tool).await?;
        sqlx::query(concat!(
            "INSERT INTO skill_overrides (",
            override_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (skill, tool) DO UPDATE SET action = excluded.action, \
             access_level = excluded.access_level, reason = excluded.reason, \
             created_at = excluded.created_at, created_by = excluded.created_by"
        ))
        .bind(row.skill.clone())
        .bind(row.tool.clone())
        .bind(row.action.as_str())
        .bind(row.access_level.map(AccessLevel::as_str))
        .bind(row.reason.clone())
        .bind(row.created_at)
        .bind(row.created_by.clone())
        .execute(&mut *conn)
        .await?;
        let summary = match (row.action, row.access_level) {
            (OverrideAction::Add, Some(level)) => format!(
                "added tool {} to skill {} at access level {level}",
                row.tool, row.skill
            ),
            (OverrideAction::Add, None) => format!("added tool {} to skill {}", row.tool, row.skill),
            (OverrideAction::Remove, _) => {
                format!("removed tool {} from skill {}", row.tool, row.skill)
            }
        };
        let event = AdminEvent {
            at: row.created_at,
            actor: row.created_by.clone(),
            kind: "skill_override_set".to_owned(),
            summary,
            details: json!({
                "skill": row.skill,
                "tool": row.tool,
                "action": row.action,
                "access_level": row.access_level,
                "reason": row.reason,
                "previous": previous,
            }),
        };
        let details = admin::encode(&event)?;
        on::admin::append(conn, &event, details).await?;
        Ok(previous)
    }

    /// Removes an override and, if there was one, logs it; returns it. Run in a transaction.
    pub(crate) async fn delete_override(
        conn: &mut Conn,
        skill: &str,
        tool: &str,
        actor: &str,
        at: i64,
    ) -> Result<Option<SkillOverrideRow>> {
        let removed = sqlx::query(concat!(
            "DELETE FROM skill_overrides WHERE skill = $1 AND tool = $2 RETURNING ",
            override_columns!()
        ))
        .bind(skill.to_owned())
        .bind(tool.to_owned())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(removed) = removed.as_ref().map(decode_override).transpose()? else {
            return Ok(None);
        };
        let undone = match removed.action {
            OverrideAction::Add => "addition of",
            OverrideAction::Remove => "removal of",
        };
        let event = AdminEvent {
            at,
            actor: actor.to_owned(),
            kind: "skill_override_cleared".to_owned(),
            summary: format!("cleared the {undone} tool {tool} for skill {skill}"),
            details: json!({ "skill": skill, "tool": tool, "removed": removed }),
        };
        let details = admin::encode(&event)?;
        on::admin::append(conn, &event, details).await?;
        Ok(Some(removed))
    }

    /// Calls per skill in the audit log, by skill. Grouping by skill reads `audit_log_skill`
    /// (migration 0004) in order, so no sort and no scan of calls made under no skill.
    pub(crate) async fn skill_usage(pool: &Pool) -> Result<Vec<SkillUsageRow>> {
        let rows = sqlx::query(usage_sql!())
            .bind(SKILL_DENIED)
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|row| {
                let calls: i64 = row.try_get("calls")?;
                let denied: Option<i64> = row.try_get("skill_denied")?;
                Ok(SkillUsageRow {
                    skill: row.try_get("skill")?,
                    calls: codec::count(calls),
                    skill_denied: codec::count(denied.unwrap_or(0)),
                    last_call_at: row.try_get("last_call_at")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) use usage_sql;
