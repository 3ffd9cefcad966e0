//! Changes made by other processes on the same data directory (the CLI switching the mode, the
//! desktop app adding a custom tool, an administrator accepting an upstream tool's new pin)
//! reach this runtime within [`SETTINGS_REFRESH`]: one task reads the store's change counters,
//! one small query, and asks only the services whose tables moved to re-read them.
//!
//! On a team store (PostgreSQL) the database pushes each change as it commits (LISTEN/NOTIFY):
//! the feed reads the counters at once instead of at the next tick, and a confirmation settled
//! on another replica wakes the call waiting on it here.
//!
//! Before the counters each service re-read its own table every second: the mode setting, every
//! tool switch, every skill override, every tool classification (one row per registered tool),
//! the custom tools' version and, with upstream servers, every pin. Now an idle runtime reads the
//! six counters a second and nothing else. A change this process made itself moves a counter
//! too, and costs one re-read that finds nothing new.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tw_store::{ChangeCounters, StoreNotice};

use crate::confirm::ConfirmationService;
use crate::settings::SettingsService;
use crate::shared::Shared;
use crate::skills::SkillService;
use crate::tools::ToolService;
use crate::upstream::UpstreamService;

/// How often a runtime looks for changes another process made.
pub const SETTINGS_REFRESH: Duration = Duration::from_secs(1);

/// The services the feed keeps current, held weakly: the feed ends when the runtime goes.
pub(crate) struct Followers {
    pub(crate) shared: Weak<Shared>,
    pub(crate) settings: Weak<SettingsService>,
    pub(crate) tools: Weak<ToolService>,
    pub(crate) skills: Weak<SkillService>,
    pub(crate) upstreams: Weak<UpstreamService>,
    pub(crate) confirmations: Weak<ConfirmationService>,
}

/// Starts following changes, from the counters as they were `seen` before the services read
/// their state (so nothing written in between is missed).
pub(crate) fn follow(followers: Followers, seen: ChangeCounters) -> tokio::task::JoinHandle<()> {
    let mut notices = followers.shared.upgrade().and_then(|s| s.store.notices());
    tokio::spawn(async move {
        let mut seen = seen;
        loop {
            match notices.as_mut() {
                None => tokio::time::sleep(SETTINGS_REFRESH).await,
                Some(rx) => tokio::select! {
                    () = tokio::time::sleep(SETTINGS_REFRESH) => {}
                    notice = rx.recv() => match notice {
                        Ok(StoreNotice::ConfirmationSettled(id)) => {
                            if let Some(c) = followers.confirmations.upgrade() {
                                c.wake(&id);
                            }
                            continue;
                        }
                        Ok(StoreNotice::Changed(_)) => {}
                        // Notices were missed: every waiting call looks at its request again.
                        Ok(StoreNotice::Resync) | Err(RecvError::Lagged(_)) => {
                            if let Some(c) = followers.confirmations.upgrade() {
                                c.wake_all();
                            }
                        }
                        Err(RecvError::Closed) => notices = None,
                    },
                },
            }
            let (Some(shared), Some(settings), Some(tools), Some(skills), Some(upstreams)) = (
                followers.shared.upgrade(),
                followers.settings.upgrade(),
                followers.tools.upgrade(),
                followers.skills.upgrade(),
                followers.upstreams.upgrade(),
            ) else {
                break;
            };
            skills.recheck();
            if !shared.store.is_healthy() {
                continue;
            }
            let now = match shared.store.change_counters().await {
                Ok(now) => now,
                Err(e) => {
                    tracing::warn!(error = %e, "the change counters could not be read");
                    continue;
                }
            };
            for (table, counter) in &now {
                if seen.get(table) == Some(counter) {
                    continue;
                }
                let reread = match table.as_str() {
                    "settings" => settings.refresh().await,
                    "tool_switches" => tools.refresh_switches().await,
                    "skill_overrides" => skills.refresh_overrides().await,
                    "tool_classifications" => skills.refresh_classifications().await,
                    "custom_tools" => tools.refresh_custom_tools().await,
                    "upstream_pins" => upstreams.refresh_quarantine().await,
                    _ => Ok(()),
                };
                match reread {
                    Ok(()) => {
                        seen.insert(table.clone(), *counter);
                    }
                    // Tried again on the next tick.
                    Err(e) => tracing::warn!(table, error = %e, "a change could not be re-read"),
                }
            }
        }
    })
}
