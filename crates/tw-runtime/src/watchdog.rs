//! The resource watcher (issue 22, seed 004's automatic modes): every `[watchdog] interval_ms` it
//! measures what the runtime lives on and switches the operational mode by itself — DEGRADED
//! when free space on the data directory's filesystem or available memory runs low, memory
//! pressure runs high or audit writes fail; LOCKDOWN when the audit log cannot be written at all
//! (nothing runs unaudited: the pipeline refuses every call then, and the mode says so to every
//! process and person). It only ever makes the mode stricter; each switch is an admin-log entry
//! (`mode_changed` by `watchdog`, with what was measured), a warning on the event bus and the
//! desktop's banner. Once the conditions clear (past their resume levels, so a reading at the
//! line does not flap), going back is a person's act through RECOVERY, recorded as
//! `resources_recovered`; with `auto_recover` the watcher goes back to the mode it left.
//!
//! The first look comes one interval after start, so a one-shot CLI command never measures.

mod measure;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Duration;

use serde_json::{Value, json};
use tw_core::OperationalMode;
use tw_store::AdminEvent;

use crate::config::WatchdogSettings;
use crate::settings::{SettingsService, WATCHDOG_ACTOR as ACTOR};
use crate::shared::Shared;
pub(crate) use measure::Readings;

const MIB: u64 = 1 << 20;

/// What can trip, in the order a reason lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Condition {
    /// Free space below its floor.
    Disk,
    /// Available memory below its floor, or pressure above its ceiling.
    Memory,
    /// Some audit records could not be written since the last look.
    AuditFailing,
    /// The audit store takes no records.
    AuditDown,
}

impl Condition {
    fn mode(self) -> OperationalMode {
        match self {
            Self::AuditDown => OperationalMode::Lockdown,
            _ => OperationalMode::Degraded,
        }
    }
}

/// How strict a mode is: the watcher only ever moves the mode up this order by itself.
pub(crate) fn strictness(mode: OperationalMode) -> u8 {
    match mode {
        OperationalMode::Normal => 0,
        OperationalMode::Recovery => 1,
        OperationalMode::Alert => 2,
        OperationalMode::Degraded => 3,
        OperationalMode::Lockdown => 4,
    }
}

/// The conditions in force, each with the reading that tripped it, judged with hysteresis.
#[derive(Debug, Default)]
pub(crate) struct Judge {
    active: BTreeMap<Condition, String>,
    last_failures: u64,
}

impl Judge {
    /// Takes in one look; returns the conditions in force and why.
    pub(crate) fn look(
        &mut self,
        r: &Readings,
        s: &WatchdogSettings,
    ) -> &BTreeMap<Condition, String> {
        let mib = |b: u64| b as f64 / MIB as f64;
        if s.disk_free_min_mb > 0
            && let Some(free) = r.disk_free
        {
            if free < s.disk_free_min_mb * MIB {
                self.active.insert(
                    Condition::Disk,
                    format!(
                        "free space on the data directory's filesystem is {:.1} MiB, below {} MiB",
                        mib(free),
                        s.disk_free_min_mb
                    ),
                );
            } else if free >= s.disk_free_resume_mb * MIB {
                self.active.remove(&Condition::Disk);
            }
        }
        let low = s.memory_available_min_mb > 0
            && r.memory_available
                .is_some_and(|a| a < s.memory_available_min_mb * MIB);
        let pressed = s.memory_pressure_max > 0.0
            && r.memory_pressure
                .is_some_and(|p| p >= s.memory_pressure_max);
        if low || pressed {
            let mut why = Vec::new();
            if let (true, Some(a)) = (low, r.memory_available) {
                why.push(format!(
                    "available memory is {:.1} MiB, below {} MiB",
                    mib(a),
                    s.memory_available_min_mb
                ));
            }
            if let (true, Some(p)) = (pressed, r.memory_pressure) {
                why.push(format!(
                    "memory pressure (PSI some avg10) is {p:.1}%, at or above {}%",
                    s.memory_pressure_max
                ));
            }
            self.active.insert(Condition::Memory, why.join("; "));
        } else {
            let roomy = s.memory_available_min_mb == 0
                || r.memory_available
                    .is_none_or(|a| a >= s.memory_available_resume_mb * MIB);
            let calm = s.memory_pressure_max <= 0.0
                || r.memory_pressure
                    .is_none_or(|p| p < s.memory_pressure_resume);
            if roomy && calm {
                self.active.remove(&Condition::Memory);
            }
        }
        let failed = r.audit_failures.saturating_sub(self.last_failures);
        self.last_failures = r.audit_failures;
        if failed > 0 {
            self.active.insert(
                Condition::AuditFailing,
                format!("{failed} audit record(s) could not be written since the last look"),
            );
        } else if r.audit_healthy {
            self.active.remove(&Condition::AuditFailing);
        }
        if r.audit_healthy {
            self.active.remove(&Condition::AuditDown);
        } else {
            self.active.insert(
                Condition::AuditDown,
                "the audit log cannot be written: nothing may run unaudited".to_owned(),
            );
        }
        &self.active
    }
}

/// The mode the conditions call for, if any.
pub(crate) fn called_for(active: &BTreeMap<Condition, String>) -> Option<OperationalMode> {
    active
        .keys()
        .map(|c| c.mode())
        .max_by_key(|m| strictness(*m))
}

/// What the watcher does after a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing changes.
    Stay,
    /// Switch to this mode (stricter, or back with `auto_recover`).
    Switch(OperationalMode),
    /// The conditions cleared: say so once; a person goes back.
    Cleared,
}

/// The watcher's memory between looks: the mode it switched to and the one it left, while its
/// switch is the mode in force.
#[derive(Debug, Default)]
pub(crate) struct Claim {
    /// (switched to, left).
    held: Option<(OperationalMode, OperationalMode)>,
    /// Whether `Cleared` was said for the claim held.
    said_cleared: bool,
}

impl Claim {
    /// Decides what to do, given the mode in force and the one the conditions call for.
    pub(crate) fn decide(
        &mut self,
        current: OperationalMode,
        wanted: Option<OperationalMode>,
        auto_recover: bool,
    ) -> Step {
        // A person switched since: the watcher's claim is theirs now.
        if let Some((set, _)) = self.held
            && set != current
        {
            self.held = None;
            self.said_cleared = false;
        }
        if let Some(w) = wanted
            && strictness(w) > strictness(current)
        {
            let left = self.held.map_or(current, |(_, left)| left);
            self.held = Some((w, left));
            self.said_cleared = false;
            return Step::Switch(w);
        }
        let Some((set, left)) = self.held else {
            return Step::Stay;
        };
        let floor = wanted.map_or(0, strictness);
        if floor >= strictness(set) {
            return Step::Stay;
        }
        if auto_recover {
            let back = match wanted {
                Some(w) if strictness(w) > strictness(left) => w,
                _ => left,
            };
            self.held = (back != left).then_some((back, left));
            return Step::Switch(back);
        }
        if self.said_cleared || wanted.is_some() {
            return Step::Stay;
        }
        self.said_cleared = true;
        Step::Cleared
    }
}

/// Starts the watcher; it ends when the runtime goes.
pub(crate) fn start(
    settings: WatchdogSettings,
    shared: Weak<Shared>,
    service: Weak<SettingsService>,
) -> Option<tokio::task::JoinHandle<()>> {
    if !settings.enabled {
        return None;
    }
    Some(tokio::spawn(async move {
        let every = Duration::from_millis(settings.interval_ms);
        let mut judge = Judge::default();
        let mut claim = Claim::default();
        let mut unrecorded: Vec<AdminEvent> = Vec::new();
        loop {
            tokio::time::sleep(every).await;
            let (Some(shared), Some(service)) = (shared.upgrade(), service.upgrade()) else {
                break;
            };
            let dir = shared.data_dir().to_path_buf();
            let (disk_free, memory_available, memory_pressure) =
                tokio::task::spawn_blocking(move || {
                    (
                        measure::disk_free(&dir),
                        measure::memory_available(),
                        measure::memory_pressure(),
                    )
                })
                .await
                .unwrap_or_default();
            let readings = Readings {
                disk_free,
                memory_available,
                memory_pressure,
                audit_failures: shared.metrics.audit_failures(),
                audit_healthy: shared.store.is_healthy(),
            };
            let active = judge.look(&readings, &settings).clone();
            let wanted = called_for(&active);
            let current = service.mode();
            let step = claim.decide(current, wanted, settings.auto_recover);
            if let Some(event) = act(&shared, &service, step, current, &active, &readings).await {
                unrecorded.push(event);
            }
            service.save_pending_mode().await;
            // Entries the store did not take (it was full or gone) go in once it does.
            let mut kept = Vec::new();
            for event in unrecorded.drain(..) {
                if let Err(e) = shared.store.append_admin_event(event.clone()).await {
                    tracing::warn!(error = %e, kind = %event.kind, "an automatic mode switch could not be recorded yet");
                    kept.push(event);
                }
            }
            unrecorded = kept;
        }
    }))
}

/// Carries out one step; returns the admin-log entry that records it.
async fn act(
    shared: &Shared,
    service: &SettingsService,
    step: Step,
    current: OperationalMode,
    active: &BTreeMap<Condition, String>,
    r: &Readings,
) -> Option<AdminEvent> {
    let reasons: Vec<&str> = active.values().map(String::as_str).collect();
    let (kind, summary, details) = match step {
        Step::Stay => return None,
        Step::Switch(to) => {
            service
                .switch_automatically(to, reasons.iter().map(|r| (*r).to_owned()).collect())
                .await;
            let why = if reasons.is_empty() {
                "every condition cleared".to_owned()
            } else {
                reasons.join("; ")
            };
            let summary = format!("operational mode {current} -> {to} (automatic): {why}");
            tracing::warn!(from = %current, %to, %why, "the resource watcher switched the operational mode");
            let details = json!({
                "from": current.as_str(),
                "to": to.as_str(),
                "automatic": true,
                "reasons": reasons,
                "readings": readings_json(r),
            });
            ("mode_changed", summary, details)
        }
        Step::Cleared => {
            let summary = format!(
                "the resources are back past their resume levels; the mode stays {current} until \
                 a person switches to recovery, then normal"
            );
            tracing::info!(%summary, "resources recovered");
            (
                "resources_recovered",
                summary,
                json!({ "mode": current.as_str(), "readings": readings_json(r) }),
            )
        }
    };
    shared.warn(summary.clone());
    Some(AdminEvent {
        at: shared.now_us(),
        actor: ACTOR.to_owned(),
        kind: kind.to_owned(),
        summary,
        details,
    })
}

fn readings_json(r: &Readings) -> Value {
    json!({
        "disk_free_bytes": r.disk_free,
        "memory_available_bytes": r.memory_available,
        "memory_pressure_some_avg10": r.memory_pressure,
        "audit_write_failures": r.audit_failures,
        "audit_healthy": r.audit_healthy,
    })
}
