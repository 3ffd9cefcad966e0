//! How long the app took to become usable: from the process's start to the moment the UI says
//! its first view is drawn with its data (`report_interactive`), for issue 20's goal (cold start
//! to interactive, release build, at most 1 s) and the figures `scripts/bench desktop` and the
//! end-to-end tests print.
//!
//! The clock starts before `main`: the kernel's start time of the process (`/proc/self/stat`,
//! against `CLOCK_BOOTTIME`) is read first thing in `run`, so loading the shared libraries
//! (WebKitGTK's are many) counts too. That start time is in clock ticks (10 ms on Linux), so the
//! figure is up to one tick high; where it cannot be read the clock starts at `run`, and the log
//! line says so.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set to `1` to make the app print `desktop interactive_ms=N` on stdout and exit as soon as it
/// is interactive, so a script can time one start after another.
pub(crate) const EXIT_WHEN_INTERACTIVE: &str = "TOOLWARDEN_DESKTOP_EXIT_WHEN_INTERACTIVE";

/// When the app started, and whether its start has been reported.
#[derive(Debug)]
pub struct Startup {
    /// Taken first thing in `run`.
    at_run: Instant,
    /// How long the process had been running when `at_run` was taken (`None`: unknown).
    before_run: Option<Duration>,
    exit_when_interactive: bool,
    reported: AtomicBool,
}

impl Startup {
    /// Now, with the time since the process started; call it first thing.
    pub fn now() -> Self {
        let at_run = Instant::now();
        Self {
            at_run,
            before_run: process_age(),
            exit_when_interactive: std::env::var(EXIT_WHEN_INTERACTIVE).is_ok_and(|v| v == "1"),
            reported: AtomicBool::new(false),
        }
    }

    /// Logs the time to interactive the first time the UI reports it (a reloaded page reports
    /// again; only the start counts), and asks the app to exit if [`EXIT_WHEN_INTERACTIVE`] is
    /// set. Returns whether the app should exit now.
    pub(crate) fn interactive(&self) -> bool {
        if self.reported.swap(true, Ordering::Relaxed) {
            return false;
        }
        let elapsed = self.at_run.elapsed() + self.before_run.unwrap_or_default();
        let ms = elapsed.as_millis();
        let from = match self.before_run {
            Some(_) => "process start",
            None => "main (process start unknown)",
        };
        tracing::info!(from, "interactive after {ms} ms");
        if !self.exit_when_interactive {
            return false;
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "desktop interactive_ms={ms}");
        let _ = out.flush();
        true
    }
}

/// How long this process has been running, from the kernel's record of its start.
fn process_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = start_ticks(&stat)?;
    let hz = rustix::param::clock_ticks_per_second();
    if hz == 0 {
        return None;
    }
    // The start time counts from boot in CLOCK_BOOTTIME's terms (Linux 5.5 and later).
    let started = Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz);
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let now = Duration::new(
        u64::try_from(now.tv_sec).ok()?,
        u32::try_from(now.tv_nsec).ok()?,
    );
    now.checked_sub(started)
}

/// Field 22 of `/proc/PID/stat`, the start time in clock ticks since boot. The second field is
/// the command's name in parentheses and may itself hold spaces and parentheses, so fields are
/// counted from the last `)`.
fn start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (the state).
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (tool (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 \
                    987654 12345 67 18446744073709551615";
        assert_eq!(start_ticks(stat), Some(987_654));
        assert_eq!(start_ticks("4242 (short) S 1 2"), None);
        assert_eq!(start_ticks("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_been_running_for_a_while_but_not_forever() {
        let age = process_age().unwrap();
        // The test binary started before this test ran, within the last day.
        assert!(age < Duration::from_secs(86_400), "{age:?}");
    }

    #[test]
    fn only_the_first_report_counts() {
        let startup = Startup {
            at_run: Instant::now(),
            before_run: Some(Duration::from_millis(5)),
            exit_when_interactive: true,
            reported: AtomicBool::new(false),
        };
        assert!(startup.interactive());
        assert!(!startup.interactive());
    }
}
