//! Switching a tool on or off per license tier while Toolwarden runs (`toolwarden tools
//! disable|enable`, the desktop's tool switches). Where the configuration's `enabled = false`
//! takes a tool away everywhere until the file changes, a switch names a tier, a person and a
//! time, and the policy trace of every refused call quotes all three.
//!
//! The switches are rows in the store (`tool_switches`), so every process on the data directory
//! shares them: the one that makes a change applies it at once, the others re-read the table
//! with the mode, every [`SETTINGS_REFRESH`](crate::runtime::SETTINGS_REFRESH). Each change is
//! written together with its admin-log entry, in one transaction.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::json;
use tw_core::LicenseTier;
use tw_core::policy::TierSwitch;
use tw_store::{AdminEvent, SwitchChange, ToolSwitchRow};

use crate::error::Result;
use crate::runtime::Runtime;

/// The tools switched off, by tool and tier, as one runtime holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Switches(BTreeMap<String, BTreeMap<LicenseTier, TierSwitch>>);

impl Switches {
    pub(crate) fn from_rows(rows: Vec<ToolSwitchRow>) -> Self {
        let mut map: BTreeMap<String, BTreeMap<LicenseTier, TierSwitch>> = BTreeMap::new();
        for row in rows {
            map.entry(row.tool).or_default().insert(
                row.tier,
                TierSwitch {
                    tier: row.tier,
                    by: row.disabled_by,
                    at: row.disabled_at,
                },
            );
        }
        Self(map)
    }

    /// The switch that turned `tool` off for `tier`, if one did.
    pub(crate) fn get(&self, tool: &str, tier: LicenseTier) -> Option<&TierSwitch> {
        self.0.get(tool)?.get(&tier)
    }

    fn of(&self, tool: &str) -> Vec<TierSwitch> {
        self.0
            .get(tool)
            .map(|tiers| tiers.values().cloned().collect())
            .unwrap_or_default()
    }

    fn with(&self, tool: &str, tier: LicenseTier, off: Option<TierSwitch>) -> Self {
        let mut next = self.clone();
        match off {
            Some(switch) => {
                next.0
                    .entry(tool.to_owned())
                    .or_default()
                    .insert(tier, switch);
            }
            None => {
                if let Some(tiers) = next.0.get_mut(tool) {
                    tiers.remove(&tier);
                    if tiers.is_empty() {
                        next.0.remove(tool);
                    }
                }
            }
        }
        next
    }
}

/// What [`Runtime::set_tool_enabled`] did. Its `Display` is the line to show a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSwitchOutcome {
    /// The tool.
    pub tool: String,
    /// The tier.
    pub tier: LicenseTier,
    /// The state asked for, and now in force: on (`true`) or off.
    pub enabled: bool,
    /// Whether anything changed; `false`: the tool already was on or off for the tier, and
    /// nothing was written.
    pub changed: bool,
    /// The off-switch involved: when switching off, the one now in force (new, or the earlier
    /// one that made this a no-op); when switching on, the one removed (`None`: already on).
    pub off: Option<TierSwitch>,
}

impl fmt::Display for ToolSwitchOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (tool, tier) = (&self.tool, self.tier);
        let state = if self.enabled { "on" } else { "off" };
        let who = |s: &TierSwitch| format!("switched off by {} at {}", s.by, s.at_rfc3339());
        match (self.changed, &self.off) {
            (true, Some(s)) if self.enabled => write!(
                f,
                "switched {tool} on for the {tier} tier (it was {})",
                who(s)
            ),
            (true, _) => write!(f, "switched {tool} {state} for the {tier} tier"),
            (false, Some(s)) => write!(
                f,
                "{tool} is already off for the {tier} tier ({}); nothing changed",
                who(s)
            ),
            (false, None) => write!(
                f,
                "{tool} is already {state} for the {tier} tier; nothing changed"
            ),
        }
    }
}

impl Runtime {
    /// Switches `tool` on or off for `tier`, for every process on this data directory, and
    /// records who did it in the admin log (`tool_disabled`, `tool_enabled`). This runtime
    /// honours the change before returning; others within about a second. Switching a tool to
    /// the state it is already in changes and records nothing, and says so. A tool that is not
    /// registered is refused.
    pub async fn set_tool_enabled(
        &self,
        tool: &str,
        tier: LicenseTier,
        enabled: bool,
        actor: &str,
    ) -> Result<ToolSwitchOutcome> {
        if self.registry().get(tool).is_none() {
            return Err(tw_core::CoreError::UnknownTool(tool.to_owned()).into());
        }
        let now = self.now_us();
        let (kind, state) = if enabled {
            ("tool_enabled", "on")
        } else {
            ("tool_disabled", "off")
        };
        let event = AdminEvent {
            at: now,
            actor: actor.to_owned(),
            kind: kind.to_owned(),
            summary: format!("tool {tool} switched {state} for the {tier} tier"),
            details: json!({"tool": tool, "tier": tier.as_str(), "enabled": enabled}),
        };
        let change = SwitchChange {
            tool: tool.to_owned(),
            tier,
            enabled,
            by: actor.to_owned(),
            at: now,
        };
        // Held across the write so a refresh that read the table before it cannot put the old
        // switches back after it.
        let _sync = self.inner().switches_sync.lock().await;
        let outcome = self.store().switch_tool(&change, &event).await?;
        let off = outcome.off.map(|row| TierSwitch {
            tier: row.tier,
            by: row.disabled_by,
            at: row.disabled_at,
        });
        let in_force = if enabled { None } else { off.clone() };
        let next = Arc::new(self.policy_state().switches.with(tool, tier, in_force));
        self.swap_state(|s| s.switches = next);
        if outcome.changed {
            tracing::info!(tool, %tier, enabled, by = actor, "tool switched");
        }
        Ok(ToolSwitchOutcome {
            tool: tool.to_owned(),
            tier,
            enabled,
            changed: outcome.changed,
            off,
        })
    }

    /// The tiers `tool` is switched off for, in tier order (core first).
    pub fn disabled_tiers(&self, tool: &str) -> Vec<LicenseTier> {
        self.tier_switches(tool).iter().map(|s| s.tier).collect()
    }

    /// The switches that turned `tool` off, with who and when, in tier order.
    pub fn tier_switches(&self, tool: &str) -> Vec<TierSwitch> {
        self.policy_state().switches.of(tool)
    }

    /// Re-reads the switches (another process may have changed them) and applies them if they
    /// differ from the ones in force.
    pub(crate) async fn refresh_switches(&self) -> Result<()> {
        let _sync = self.inner().switches_sync.lock().await;
        let read = Switches::from_rows(self.store().tool_switches().await?);
        if *self.policy_state().switches != read {
            tracing::info!("tool switches changed by another process");
            let read = Arc::new(read);
            self.swap_state(|s| s.switches = read);
        }
        Ok(())
    }
}
