//! Who runs a long-lived record: a process identity that survives pid reuse and reboots, so a
//! runtime can tell a chain run another process is still driving from one a crash cut short.
//!
//! The identity is `BOOT_ID:PID:START_TICKS`: the kernel's boot id, the pid, and the process's
//! start time in clock ticks since boot (field 22 of `/proc/PID/stat`). A process is alive when
//! the boot is the same and `/proc/PID/stat` shows the same start time.

use std::sync::OnceLock;

/// This process's identity; `None` where `/proc` cannot tell it (then its runs count as gone
/// once it has ended, like any other).
pub(crate) fn this_process() -> Option<&'static str> {
    static ME: OnceLock<Option<String>> = OnceLock::new();
    ME.get_or_init(|| identity(std::process::id())).as_deref()
}

/// Whether the process `owner` names still runs.
pub(crate) fn is_alive(owner: &str) -> bool {
    let mut parts = owner.splitn(3, ':');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    boot_id().is_some_and(|b| b == boot) && start_ticks(pid).is_some_and(|s| s == start)
}

fn identity(pid: u32) -> Option<String> {
    Some(format!("{}:{pid}:{}", boot_id()?, start_ticks(pid)?))
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(':')).then(|| id.to_owned())
}

/// Field 22 of `/proc/PID/stat`, read after the command name (which may hold spaces and parens).
fn start_ticks(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 (state) on; 22 is the 20th of them.
    let ticks = after_name.split_whitespace().nth(19)?;
    ticks
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| ticks.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_or_reused_pid_is_not() {
        let me = this_process().expect("this host has /proc");
        assert!(is_alive(me), "{me}");
        // A child that has exited (and been reaped) is gone. A bare `true` from the test itself,
        // not a tool's process: nothing here runs on anyone's behalf.
        #[allow(clippy::disallowed_methods, reason = "a test's own short-lived child")]
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let child_owner = identity(pid);
        child.wait().unwrap();
        if let Some(owner) = child_owner {
            assert!(!is_alive(&owner), "{owner}");
        }
        // The same pid with another start time (a reused pid) or another boot.
        let (boot, rest) = me.split_once(':').unwrap();
        let (pid, _) = rest.split_once(':').unwrap();
        assert!(!is_alive(&format!("{boot}:{pid}:1")));
        assert!(!is_alive(&format!("other-boot:{rest}")));
        assert!(!is_alive("garbage"));
        assert!(!is_alive(""));
    }
}
