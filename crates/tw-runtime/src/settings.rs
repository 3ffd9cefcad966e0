//! The settings service: the policy in force, the configuration's per-tool overrides, the
//! license tier and the operational mode, held together as one snapshot that the pipeline
//! judges every call against and that is replaced whole when any of them changes.
//!
//! The mode is a setting every process on the data directory shares: switching it here writes
//! it and applies it at once; a switch made by another process is picked up through the change
//! counters (`crate::changes`). The policy is read from its files at start-up (an invalid one
//! refuses to start) and reloaded when the shared file watcher sees one of them change: an
//! invalid change keeps the last good policy in force, and says so in the log, as a warning
//! event and in the admin log. Every reload and mode switch is an admin-log entry.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::json;
use tw_core::policy::Policy;
use tw_core::{LicenseTier, OperationalMode};

use crate::config::{Config, ToolOverride};
use crate::error::{Result, RuntimeError};
use crate::shared::Shared;

/// The setting that holds the operational mode, shared by every process on the data directory.
pub const MODE_SETTING: &str = "mode";

/// Who the admin log names for the resource watcher's automatic switches (`crate::watchdog`).
pub const WATCHDOG_ACTOR: &str = "watchdog";

/// What policy is judged against; replaced as a whole when any part changes.
#[derive(Clone)]
pub struct PolicyState {
    /// The compiled policy.
    pub policy: Arc<Policy>,
    /// `[tools.NAME]` from the configuration.
    pub overrides: BTreeMap<String, ToolOverride>,
    /// The installation's license tier.
    pub tier: LicenseTier,
    /// The operational mode.
    pub mode: OperationalMode,
}

/// Owns the policy, the tool overrides, the tier and the mode.
pub struct SettingsService {
    shared: Arc<Shared>,
    state: RwLock<Arc<PolicyState>>,
    /// The config file, re-read when policy reloads.
    config_file: Option<PathBuf>,
    /// Why the last policy reload failed (when, errors), until one succeeds.
    policy_error: Mutex<Option<(i64, String)>>,
    /// A switch the resource watcher made that the store has not taken yet (it could not be
    /// written): it holds here, over what the store says, until it is written or a person
    /// switches.
    unsaved_mode: Mutex<Option<OperationalMode>>,
    /// The resource watcher's last switch in this process, and why.
    automatic: Mutex<Option<AutomaticSwitch>>,
}

/// A switch the resource watcher made (`crate::watchdog`), while the mode it set is in force:
/// what a front end shows until a person changes the mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutomaticSwitch {
    /// The mode it left.
    pub from: OperationalMode,
    /// The mode it set, in force now.
    pub to: OperationalMode,
    /// What it measured, one line per condition (`free space on ... is 90 MiB, below 256 MiB`).
    pub reasons: Vec<String>,
    /// When (µs since the epoch).
    pub at: i64,
}

impl SettingsService {
    /// Starts from the policy loaded at start-up and the mode stored for the data directory
    /// (the configuration's when none is).
    pub(crate) async fn open(shared: Arc<Shared>, config: &Config, policy: Policy) -> Result<Self> {
        let mode = match shared.store.get_setting(MODE_SETTING).await? {
            Some(s) => s.value.parse().unwrap_or(config.mode),
            None => config.mode,
        };
        Ok(Self {
            shared,
            state: RwLock::new(Arc::new(PolicyState {
                policy: Arc::new(policy),
                overrides: config.tools.clone(),
                tier: config.license_tier,
                mode,
            })),
            config_file: config.source.clone(),
            policy_error: Mutex::new(None),
            unsaved_mode: Mutex::new(None),
            automatic: Mutex::new(None),
        })
    }

    /// The snapshot in force.
    pub fn state(&self) -> Arc<PolicyState> {
        Arc::clone(&self.state.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn swap(&self, f: impl FnOnce(&mut PolicyState)) {
        let mut guard = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = PolicyState::clone(&guard);
        f(&mut next);
        *guard = Arc::new(next);
    }

    /// The current operational mode.
    pub fn mode(&self) -> OperationalMode {
        self.state().mode
    }

    /// The installation's license tier.
    pub fn tier(&self) -> LicenseTier {
        self.state().tier
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.state().policy)
    }

    /// Switches the operational mode for every process on this data directory, and records who
    /// did it. Returns the mode before.
    pub async fn set_mode(&self, mode: OperationalMode, actor: &str) -> Result<OperationalMode> {
        let before = self.mode();
        self.shared
            .store
            .set_setting(MODE_SETTING, mode.as_str(), actor, self.shared.now_us())
            .await?;
        self.swap(|s| s.mode = mode);
        *self
            .unsaved_mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        *self
            .automatic
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.shared
            .admin(
                actor,
                "mode_changed",
                format!("operational mode {before} -> {mode}"),
                json!({"from": before.as_str(), "to": mode.as_str()}),
            )
            .await;
        Ok(before)
    }

    /// Switches the mode on the resource watcher's word (`crate::watchdog`, which records why):
    /// at once in this process, and in the others through the store once it takes the write.
    /// While it does not (the disk is full, the database is gone), the switch holds here and
    /// [`Self::save_pending_mode`] tries again. `reasons` are what it measured. Returns the
    /// mode before.
    pub(crate) async fn switch_automatically(
        &self,
        to: OperationalMode,
        reasons: Vec<String>,
    ) -> OperationalMode {
        let from = self.mode();
        self.swap(|s| s.mode = to);
        *self
            .automatic
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(AutomaticSwitch {
            from,
            to,
            reasons,
            at: self.shared.now_us(),
        });
        *self
            .unsaved_mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(to);
        self.save_pending_mode().await;
        from
    }

    /// The resource watcher's switch behind the mode in force, if that is how the mode came to
    /// be, and it is not NORMAL (a return it made by itself needs no one's attention): this
    /// process's watcher's, or, for a switch another process on the data directory made, the
    /// last `mode_changed` entry of the admin log when the watcher made it. `None` once a person
    /// changed the mode after it, here or elsewhere.
    pub async fn automatic_switch(&self) -> Option<AutomaticSwitch> {
        let now = self.mode();
        if now == OperationalMode::Normal {
            return None;
        }
        let here = self
            .automatic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let query = tw_store::AdminQuery {
            kind: Some("mode_changed".to_owned()),
            limit: 1,
            ..Default::default()
        };
        let last = match self.shared.store.admin_events(&query).await {
            Ok(rows) => rows.into_iter().next(),
            // The store is not answering (the watcher may have locked down for that): what this
            // process knows.
            Err(_) => return here.filter(|a| a.to == now),
        };
        // The later of the two: this process's switch may not be in the log yet, and an entry
        // after it (a person's, elsewhere) ends it.
        let switch = match last {
            Some(row) if here.as_ref().is_none_or(|h| row.at >= h.at) => {
                let d = &row.details;
                let mode = |key: &str| d[key].as_str()?.parse::<OperationalMode>().ok();
                (row.actor == WATCHDOG_ACTOR)
                    .then(|| {
                        Some(AutomaticSwitch {
                            from: mode("from")?,
                            to: mode("to")?,
                            reasons: d["reasons"]
                                .as_array()
                                .map(|r| {
                                    r.iter()
                                        .filter_map(|v| v.as_str().map(str::to_owned))
                                        .collect()
                                })
                                .unwrap_or_default(),
                            at: row.at,
                        })
                    })
                    .flatten()
            }
            _ => here,
        };
        switch.filter(|a| a.to == now)
    }

    /// Writes an automatic switch the store did not take yet; returns whether none is pending.
    pub(crate) async fn save_pending_mode(&self) -> bool {
        let pending = *self
            .unsaved_mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(mode) = pending else { return true };
        let at = self.shared.now_us();
        match self
            .shared
            .store
            .set_setting(MODE_SETTING, mode.as_str(), WATCHDOG_ACTOR, at)
            .await
        {
            Ok(()) => {
                let mut guard = self
                    .unsaved_mode
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if *guard == Some(mode) {
                    *guard = None;
                }
                true
            }
            Err(e) => {
                tracing::warn!(%mode, error = %e, "the automatic mode switch could not be stored yet; it holds in this process");
                false
            }
        }
    }

    /// Picks up a mode another process switched to (not while this process holds an automatic
    /// switch the store has not taken).
    pub(crate) async fn refresh(&self) -> Result<()> {
        if self
            .unsaved_mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            return Ok(());
        }
        if let Some(setting) = self.shared.store.get_setting(MODE_SETTING).await?
            && let Ok(mode) = setting.value.parse::<OperationalMode>()
            && mode != self.mode()
        {
            tracing::info!(%mode, by = %setting.updated_by, "operational mode changed by another process");
            self.swap(|s| s.mode = mode);
        }
        Ok(())
    }

    /// When the last policy reload failed and why, while the policy in force is the one before
    /// it (`None` once a reload succeeds).
    pub fn policy_error(&self) -> Option<(i64, String)> {
        self.policy_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_policy_error(&self, error: Option<(i64, String)>) {
        *self
            .policy_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
    }

    /// Reloads the policy from its files. On success the new policy takes effect at once and the
    /// change is recorded (the rules that changed are returned); on failure the running policy
    /// stays, the errors are reported, and the error is [`RuntimeError::PolicyNotReloaded`].
    pub async fn reload_policy(&self, actor: &str) -> Result<Vec<String>> {
        let loaded = self.read_policy();
        match loaded {
            Ok((policy, config)) => {
                let diff = policy.diff(&self.policy());
                let policy = Arc::new(policy);
                self.swap(|s| {
                    s.policy = policy;
                    s.overrides = config.tools.clone();
                });
                let summary = if diff.is_empty() {
                    "policy reloaded; no rule changed".to_owned()
                } else {
                    format!("policy reloaded: {}", diff.join("; "))
                };
                tracing::info!(%summary, "policy reloaded");
                self.set_policy_error(None);
                self.shared
                    .admin(
                        actor,
                        "policy_reloaded",
                        summary,
                        json!({ "changes": diff }),
                    )
                    .await;
                Ok(diff)
            }
            Err(errors) => {
                tracing::error!(%errors, "the changed policy is invalid; the previous policy stays in force");
                self.set_policy_error(Some((self.shared.now_us(), errors.clone())));
                self.shared.warn(format!(
                    "the changed policy is invalid and was not applied:\n{errors}"
                ));
                self.shared
                    .admin(
                        actor,
                        "policy_reload_failed",
                        "the changed policy is invalid; the previous policy stays in force"
                            .to_owned(),
                        json!({ "errors": errors }),
                    )
                    .await;
                Err(RuntimeError::PolicyNotReloaded(errors))
            }
        }
    }

    /// The configuration and the policy it names, read afresh.
    fn read_policy(&self) -> std::result::Result<(Policy, Config), String> {
        let config = match &self.config_file {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => Config::parse(&text, path, crate::paths::home_dir().as_deref())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot read {}: {e}", path.display())),
            },
            None => Ok(Config::default()),
        }?;
        let env = crate::policy::env(&self.shared.workspace);
        crate::policy::load(&config, env)
            .map(|p| (p, config))
            .map_err(|e| e.to_string())
    }
}
