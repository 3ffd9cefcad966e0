//! What the resource watcher reads off the host: free space on the data directory's filesystem,
//! the memory this process may still use (its memory cgroup's headroom where it has a limit, the
//! host's available memory otherwise) and memory pressure (PSI, its cgroup's on cgroup v2, the
//! host's otherwise). Each reading is `None` where the host does not offer it.

use std::path::{Path, PathBuf};

/// One look at the host.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Readings {
    /// Bytes an unprivileged user may still write on the data directory's filesystem.
    pub(crate) disk_free: Option<u64>,
    /// Bytes this process's processes may still take.
    pub(crate) memory_available: Option<u64>,
    /// PSI `some avg10`: percent of the last ten seconds some task stalled on memory.
    pub(crate) memory_pressure: Option<f64>,
    /// Calls whose audit record could not be written, since the runtime started.
    pub(crate) audit_failures: u64,
    /// Whether the audit store takes records (its last write succeeded).
    pub(crate) audit_healthy: bool,
}

/// Free bytes on the filesystem holding `dir`.
pub(crate) fn disk_free(dir: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The memory this process may still use: the host's available memory, or less where its
/// memory cgroup (v1 or v2) sets a lower limit.
pub(crate) fn memory_available() -> Option<u64> {
    let host = read("/proc/meminfo").and_then(|t| kib_field(&t, "MemAvailable:"));
    let cgroup = own_cgroups().into_iter().find_map(|(v2, dir)| {
        let (limit, usage, stat_key) = if v2 {
            (
                read_num(&dir.join("memory.max"))?,
                read_num(&dir.join("memory.current"))?,
                "inactive_file ",
            )
        } else {
            (
                read_num(&dir.join("memory.limit_in_bytes"))?,
                read_num(&dir.join("memory.usage_in_bytes"))?,
                "total_inactive_file ",
            )
        };
        // Page cache the kernel drops before it stalls anyone is not counted as used.
        let reclaimable = read(dir.join("memory.stat"))
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix(stat_key)?.trim().parse::<u64>().ok())
            })
            .unwrap_or(0);
        Some(limit.saturating_sub(usage.saturating_sub(reclaimable)))
    });
    match (host, cgroup) {
        (Some(h), Some(c)) => Some(h.min(c)),
        (h, c) => h.or(c),
    }
}

/// PSI `some avg10` for memory: this process's cgroup's on cgroup v2, else the host's.
pub(crate) fn memory_pressure() -> Option<f64> {
    let own = own_cgroups()
        .into_iter()
        .filter(|(v2, _)| *v2)
        .find_map(|(_, dir)| read(dir.join("memory.pressure")));
    let text = own.or_else(|| read("/proc/pressure/memory"))?;
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("avg10=")?.parse().ok())
}

/// This process's memory cgroup directories: (whether it is cgroup v2, the directory), v1's
/// `memory` controller first.
fn own_cgroups() -> Vec<(bool, PathBuf)> {
    let v1 = tw_sandbox::process::own_v1_cgroup("memory").map(|d| (false, d));
    let v2 = tw_sandbox::process::own_v2_cgroup().map(|d| (true, d));
    v1.into_iter().chain(v2).collect()
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A file holding one number (`max`, cgroup v2's "no limit", is none).
fn read_num(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// A `/proc/meminfo` field, in bytes.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_reports_free_space_and_available_memory() {
        let free = disk_free(Path::new("/")).unwrap();
        assert!(free > 0);
        let host = || {
            read("/proc/meminfo")
                .and_then(|t| kib_field(&t, "MemAvailable:"))
                .unwrap()
        };
        // The host's figure moves while other processes run: it is read on both sides.
        let before = host();
        let available = memory_available().unwrap();
        let after = host();
        assert!(
            available > 0 && available <= before.max(after),
            "{available} vs {before} and {after}"
        );
        assert_eq!(disk_free(Path::new("/no/such/dir")), None);
    }
}
