//! The runtime's time source. tw-core takes time as a parameter; this is where it comes from, and
//! tests can substitute a fixed clock to make timestamps predictable.

use std::time::{SystemTime, UNIX_EPOCH};

/// Supplies wall-clock timestamps.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    }
}

/// A clock that always says the same time (for tests and snapshots).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_us(&self) -> i64 {
        self.0
    }
}
