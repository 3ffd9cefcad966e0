//! The config's `[watchdog]` section: when the resource watcher (`crate::watchdog`) switches the
//! runtime to DEGRADED or LOCKDOWN by itself, and whether it may switch back. Each threshold has
//! a level that trips it and a level it must get back past before it counts as cleared, so a
//! reading that hovers at the line does not flip the mode back and forth.

use serde::Deserialize;
use toml::Spanned;

/// What `[watchdog]` says, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchdogSettings {
    /// Whether the watcher runs at all.
    pub enabled: bool,
    /// How often it measures, in milliseconds.
    pub interval_ms: u64,
    /// Free space (MiB, as an unprivileged user may use it) on the data directory's filesystem
    /// below which the runtime degrades; 0: not watched.
    pub disk_free_min_mb: u64,
    /// Free space it must be back to before the condition clears.
    pub disk_free_resume_mb: u64,
    /// Available memory (MiB: the process's memory cgroup's headroom, or the host's) below which
    /// the runtime degrades; 0: not watched.
    pub memory_available_min_mb: u64,
    /// Available memory it must be back to before the condition clears.
    pub memory_available_resume_mb: u64,
    /// Memory pressure (PSI `some avg10`, percent of time stalled) at or above which the runtime
    /// degrades, where the kernel reports it; 0: not watched.
    pub memory_pressure_max: f64,
    /// Pressure it must fall below before the condition clears.
    pub memory_pressure_resume: f64,
    /// Whether the watcher returns to the mode it left once every condition cleared; otherwise
    /// that is a person's act (RECOVERY, then NORMAL).
    pub auto_recover: bool,
}

impl Default for WatchdogSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            interval_ms: 5_000,
            disk_free_min_mb: 256,
            disk_free_resume_mb: 512,
            memory_available_min_mb: 128,
            memory_available_resume_mb: 256,
            memory_pressure_max: 60.0,
            memory_pressure_resume: 20.0,
            auto_recover: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WatchdogDoc {
    enabled: Option<bool>,
    interval_ms: Option<Spanned<u64>>,
    disk_free_min_mb: Option<Spanned<u64>>,
    disk_free_resume_mb: Option<Spanned<u64>>,
    memory_available_min_mb: Option<Spanned<u64>>,
    memory_available_resume_mb: Option<Spanned<u64>>,
    memory_pressure_max: Option<Spanned<f64>>,
    memory_pressure_resume: Option<Spanned<f64>>,
    auto_recover: Option<bool>,
}

type Failure = (usize, String);

/// A trip level and its resume level; the resume level defaults to twice the trip level (for
/// a floor) and must lie past it.
fn floor(
    min: &Option<Spanned<u64>>,
    resume: &Option<Spanned<u64>>,
    defaults: (u64, u64),
    name: &str,
) -> Result<(u64, u64), Failure> {
    let trip = min.as_ref().map_or(defaults.0, |v| *v.get_ref());
    let back = match resume {
        Some(v) => *v.get_ref(),
        None if min.is_some() => trip.saturating_mul(2),
        None => defaults.1,
    };
    if trip > 0 && back <= trip {
        let at = resume
            .as_ref()
            .or(min.as_ref())
            .map_or(0, |v| v.span().start);
        return Err((
            at,
            format!(
                "watchdog.{name}_resume_mb ({back}) must be more than watchdog.{name}_min_mb \
                 ({trip}): the condition would clear as soon as it tripped"
            ),
        ));
    }
    Ok((trip, back))
}

/// Checks `[watchdog]`.
pub(super) fn settings(d: WatchdogDoc) -> Result<WatchdogSettings, Failure> {
    let mut s = WatchdogSettings::default();
    if let Some(v) = d.enabled {
        s.enabled = v;
    }
    if let Some(v) = d.auto_recover {
        s.auto_recover = v;
    }
    if let Some(v) = &d.interval_ms {
        if !(100..=3_600_000).contains(v.get_ref()) {
            return Err((
                v.span().start,
                "watchdog.interval_ms: from 100 (a tenth of a second) to 3600000 (an hour)"
                    .to_owned(),
            ));
        }
        s.interval_ms = *v.get_ref();
    }
    (s.disk_free_min_mb, s.disk_free_resume_mb) = floor(
        &d.disk_free_min_mb,
        &d.disk_free_resume_mb,
        (s.disk_free_min_mb, s.disk_free_resume_mb),
        "disk_free",
    )?;
    (s.memory_available_min_mb, s.memory_available_resume_mb) = floor(
        &d.memory_available_min_mb,
        &d.memory_available_resume_mb,
        (s.memory_available_min_mb, s.memory_available_resume_mb),
        "memory_available",
    )?;
    for v in [&d.memory_pressure_max, &d.memory_pressure_resume]
        .into_iter()
        .flatten()
    {
        if !(0.0..=100.0).contains(v.get_ref()) {
            return Err((
                v.span().start,
                "watchdog.memory_pressure_max and _resume are percentages: from 0 to 100"
                    .to_owned(),
            ));
        }
    }
    if let Some(v) = &d.memory_pressure_max {
        s.memory_pressure_max = *v.get_ref();
        s.memory_pressure_resume = s.memory_pressure_max / 3.0;
    }
    if let Some(v) = &d.memory_pressure_resume {
        s.memory_pressure_resume = *v.get_ref();
    }
    if s.memory_pressure_max > 0.0 && s.memory_pressure_resume >= s.memory_pressure_max {
        let at = d
            .memory_pressure_resume
            .as_ref()
            .or(d.memory_pressure_max.as_ref())
            .map_or(0, |v| v.span().start);
        return Err((
            at,
            format!(
                "watchdog.memory_pressure_resume ({}) must be less than \
                 watchdog.memory_pressure_max ({})",
                s.memory_pressure_resume, s.memory_pressure_max
            ),
        ));
    }
    Ok(s)
}
