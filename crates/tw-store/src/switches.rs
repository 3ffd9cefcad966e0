//! Tools switched off per license tier at run time (`tool_switches`, migration 0003): what every
//! process on the data directory re-reads so a switch made in the desktop app stops the CLI's
//! calls too. A switch and its admin-log entry are written in one transaction, so there is never
//! a change nobody can account for, nor an entry for a change that did not happen.

use serde::{Deserialize, Serialize};
use tw_core::LicenseTier;

use crate::admin::AdminEvent;
use crate::codec;
use crate::error::Result;

/// A tool switched off for one tier, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSwitchRow {
    /// The tool's name.
    pub tool: String,
    /// The tier it is off for.
    pub tier: LicenseTier,
    /// When it was switched off (µs since the epoch).
    pub disabled_at: i64,
    /// Who switched it off.
    pub disabled_by: String,
}

/// Switching one tool on or off for one tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchChange {
    /// The tool's name.
    pub tool: String,
    /// The tier.
    pub tier: LicenseTier,
    /// On (`true`) or off.
    pub enabled: bool,
    /// Who is switching it.
    pub by: String,
    /// When (µs since the epoch).
    pub at: i64,
}

/// What a [`SwitchChange`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchOutcome {
    /// Whether the switch moved; `false`: it already was as asked, and nothing was written (not
    /// even the admin-log entry).
    pub changed: bool,
    /// The tool's off-switch for the tier: when switching off, the one now in force (new, or
    /// the earlier one that made this a no-op); when switching on, the one removed (`None`:
    /// the tool was already on).
    pub off: Option<ToolSwitchRow>,
}

dual! {
    fn decode(row: &DbRow) -> Result<ToolSwitchRow> {
        let tool: String = row.try_get("tool")?;
        let tier: String = row.try_get("tier")?;
        Ok(ToolSwitchRow {
            tier: codec::word(|| format!("tool switch {tool}, column tier"), &tier)?,
            tool,
            disabled_at: row.try_get("disabled_at")?,
            disabled_by: row.try_get("disabled_by")?,
        })
    }

    /// Every tool switched off, by tool and then tier (in tier order, core first).
    pub(crate) async fn list(pool: &Pool) -> Result<Vec<ToolSwitchRow>> {
        let rows = sqlx::query("SELECT tool, tier, disabled_at, disabled_by FROM tool_switches")
            .fetch_all(pool)
            .await?;
        let mut switches = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
        switches.sort_by(|a, b| (&a.tool, a.tier).cmp(&(&b.tool, b.tier)));
        Ok(switches)
    }

    /// Applies `change` and, if it changed anything, appends `event` (already encoded as `details`)
    /// in the same transaction.
    pub(crate) async fn apply(
        conn: &mut Conn,
        change: &SwitchChange,
        event: &AdminEvent,
        details: String,
    ) -> Result<SwitchOutcome> {
        let tier = change.tier.as_str();
        let outcome = if change.enabled {
            let removed = sqlx::query(
                "DELETE FROM tool_switches WHERE tool = $1 AND tier = $2 \
                 RETURNING tool, tier, disabled_at, disabled_by",
            )
            .bind(change.tool.clone())
            .bind(tier)
            .fetch_optional(&mut *conn)
            .await?;
            let off = removed.as_ref().map(decode).transpose()?;
            SwitchOutcome {
                changed: off.is_some(),
                off,
            }
        } else {
            let inserted = sqlx::query(
                "INSERT INTO tool_switches (tool, tier, disabled_at, disabled_by) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tool, tier) DO NOTHING",
            )
            .bind(change.tool.clone())
            .bind(tier)
            .bind(change.at)
            .bind(change.by.clone())
            .execute(&mut *conn)
            .await?;
            let row = sqlx::query(
                "SELECT tool, tier, disabled_at, disabled_by FROM tool_switches \
                 WHERE tool = $1 AND tier = $2",
            )
            .bind(change.tool.clone())
            .bind(tier)
            .fetch_one(&mut *conn)
            .await?;
            SwitchOutcome {
                changed: inserted.rows_affected() > 0,
                off: Some(decode(&row)?),
            }
        };
        if outcome.changed {
            on::admin::append(conn, event, details).await?;
        }
        Ok(outcome)
    }
}
