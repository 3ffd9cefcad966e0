//! Administrators' per-skill overrides: a tool added to a skill at a level, or removed from
//! it, over its manifest and its capabilities. The rules for what an override may say live
//! here: the skill must be loaded, an added tool registered, names well formed, and a reason
//! (which goes to the admin log) at most [`MAX_REASON`] characters.

use std::sync::{Arc, PoisonError};

use tw_core::policy::access::AccessLevel;
use tw_store::{OverrideAction as StoredAction, SkillOverrideRow};

use super::SkillService;
use crate::capabilities::OverrideState;
use crate::error::{Result, RuntimeError};

/// The longest reason an override may carry, in characters.
pub const MAX_REASON: usize = 1000;

/// What an administrator does to one tool of one skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideChange {
    /// Add the tool, up to this access level.
    Add(AccessLevel),
    /// Take the tool away, whatever the manifest or the capabilities say.
    Remove,
    /// Drop the override: the manifest and the capabilities decide again.
    Clear,
}

/// A reason as it may be stored: trimmed, none when blank, refused when too long.
fn reason(reason: Option<&str>) -> Result<Option<String>> {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON) {
        return Err(RuntimeError::invalid(
            "reason",
            format!("a reason is at most {MAX_REASON} characters"),
        ));
    }
    Ok(reason.map(str::to_owned))
}

impl SkillService {
    /// The administrators' per-skill overrides.
    pub fn overrides(&self) -> Arc<OverrideState> {
        Arc::clone(
            &self
                .overrides
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Changes one tool of one skill and records it with `actor` and `reason` (not for
    /// [`OverrideChange::Clear`], which takes none). Returns the override it replaced or
    /// cleared, if there was one.
    pub async fn change_override(
        &self,
        skill: &str,
        tool: &str,
        change: OverrideChange,
        why: Option<&str>,
        actor: &str,
    ) -> Result<Option<SkillOverrideRow>> {
        // An override of a skill that is gone can still be cleared; only changes need the skill.
        if change == OverrideChange::Clear {
            super::check_skill_name("skill", skill)?;
        } else {
            self.existing("skill", skill)?;
        }
        tw_core::ToolName::new(tool).map_err(|e| RuntimeError::invalid("tool", e.to_string()))?;
        let why = reason(why)?;
        let row = match change {
            OverrideChange::Clear => {
                if why.is_some() {
                    return Err(RuntimeError::invalid(
                        "reason",
                        "clearing an override takes no reason",
                    ));
                }
                let removed = self
                    .shared
                    .store
                    .delete_skill_override(skill, tool, actor, self.shared.now_us())
                    .await?;
                self.refresh_overrides().await?;
                return Ok(removed);
            }
            OverrideChange::Add(level) => {
                self.shared.registered(tool)?;
                (StoredAction::Add, Some(level))
            }
            OverrideChange::Remove => (StoredAction::Remove, None),
        };
        let row = SkillOverrideRow {
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            action: row.0,
            access_level: row.1,
            reason: why,
            created_at: self.shared.now_us(),
            created_by: actor.to_owned(),
        };
        let previous = self.shared.store.put_skill_override(&row).await?;
        self.refresh_overrides().await?;
        Ok(previous)
    }

    /// Re-reads the overrides and the classifications other processes may have changed.
    pub(crate) async fn refresh_overrides(&self) -> Result<()> {
        let rows = self.shared.store.skill_overrides().await?;
        if rows != self.overrides().rows {
            *self
                .overrides
                .write()
                .unwrap_or_else(PoisonError::into_inner) = Arc::new(OverrideState::new(rows));
        }
        Ok(())
    }
}
