//! Switching a tool on or off per license tier while Toolwarden runs (`toolwarden tools
//! disable|enable`, the desktop's tool switches). Where the configuration's `enabled = false`
//! takes a tool away everywhere until the file changes, a switch names a tier, a person and a
//! time, and the policy trace of every refused call quotes all three.
//!
//! The switches are rows in the store (`tool_switches`), so every process on the data directory
//! shares them: the one that makes a change applies it at once (`crate::tools`), the others
//! re-read the table when its change counter moves. Each change is written together with its
//! admin-log entry, in one transaction. This module holds the in-memory view and the outcome.

use std::collections::BTreeMap;
use std::fmt;

use tw_core::LicenseTier;
use tw_core::policy::TierSwitch;
use tw_store::ToolSwitchRow;

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

    pub(crate) fn of(&self, tool: &str) -> Vec<TierSwitch> {
        self.0
            .get(tool)
            .map(|tiers| tiers.values().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn with(&self, tool: &str, tier: LicenseTier, off: Option<TierSwitch>) -> Self {
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

/// What [`crate::tools::ToolService::set_tool_enabled`] did. Its `Display` is the line to show a person.
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
