//! Limits on a run's whole process tree through cgroup v1 (`memory` and `pids`), where the host
//! lets Toolwarden make cgroups (as root, with the v1 hierarchies mounted; cgroup v2 has no
//! controllers delegated on the machines this was built on).
//!
//! rlimits bound each process; a tool that forks can multiply them. Each run gets a cgroup of its
//! own below Toolwarden's, in both hierarchies: `memory.limit_in_bytes` caps what the whole tree
//! may hold (the kernel's OOM killer picks a process of that tree, never anything outside it),
//! `pids.max` caps how many processes it may have at once (exactly, unlike the pid namespace's
//! `pid_max`), and `memory.max_usage_in_bytes` is the tree's peak. The runtime moves the helper
//! in right after spawning it, before it has read its request, so everything the helper starts
//! is inside. The cgroups are removed once the run is over.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Prefix of the run cgroups, so stale ones can be told from anything else.
const PREFIX: &str = "tw-run-";

/// Run cgroups kept for reuse: making and removing a memory cgroup costs about 0.2 ms, which a
/// run that reuses one does not pay.
const SPARE: usize = 4;

/// Where this process's `memory` and `pids` cgroups are, when runs can get cgroups of their own,
/// and the spare run cgroups made ahead.
#[derive(Debug)]
pub(crate) struct Cgroups {
    memory: PathBuf,
    pids: PathBuf,
    spare: Mutex<Vec<RunCgroup>>,
}

/// This process's lines of `/proc/self/cgroup`: each hierarchy's controllers (empty for the
/// unified one) and the cgroup's path in it.
fn own_entries() -> Vec<(String, String)> {
    let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    own.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((list.to_owned(), path.trim_start_matches('/').to_owned()))
        })
        .collect()
}

/// This process's cgroup directory in the cgroup v1 hierarchy of `controller` (`memory`,
/// `pids`), mounted at `/sys/fs/cgroup/<controller>`; `None` where that hierarchy is not in use.
pub fn own_v1_cgroup(controller: &str) -> Option<PathBuf> {
    own_entries().into_iter().find_map(|(list, path)| {
        list.split(',')
            .any(|c| c == controller)
            .then(|| Path::new("/sys/fs/cgroup").join(controller).join(path))
    })
}

/// This process's cgroup directory in the unified (v2) hierarchy, mounted at `/sys/fs/cgroup`
/// or beside v1 at `/sys/fs/cgroup/unified`; `None` where it is not mounted.
pub fn own_v2_cgroup() -> Option<PathBuf> {
    let (_, path) = own_entries()
        .into_iter()
        .find(|(list, _)| list.is_empty())?;
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .find(|root| Path::new(root).join("cgroup.controllers").exists())
        .map(|root| Path::new(root).join(path))
}

/// Numbers the run cgroups of this process (several sandboxes may share it).
static MADE: AtomicU64 = AtomicU64::new(0);
/// Probe cgroups made by this process.
static PROBES: AtomicU64 = AtomicU64::new(0);

impl Cgroups {
    /// The parent cgroups of the runs: this process's own in each hierarchy, if both are
    /// mounted and writable (a probe cgroup is made and removed). Cgroups left by a runtime that
    /// died are removed on the way.
    pub(crate) fn detect() -> Option<Self> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let found = Self {
            memory: own_v1_cgroup("memory")?,
            pids: own_v1_cgroup("pids")?,
            spare: Mutex::new(Vec::new()),
        };
        for parent in [&found.memory, &found.pids] {
            sweep(parent);
            // Numbered: runtimes in one process (tests, the desktop) detect at the same time,
            // and a shared name made one of them see "exists" and give up tree limits.
            let probe = parent.join(format!(
                "{PREFIX}{}-probe-{}",
                std::process::id(),
                PROBES.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir(&probe).ok()?;
            let _ = std::fs::remove_dir(&probe);
        }
        Some(found)
    }

    /// Where the runs' cgroups are made, for `sandbox doctor`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "memory and process caps per run's whole tree (cgroup v1 under {} and {})",
            self.memory.display(),
            self.pids.display()
        )
    }

    /// Cgroups for one run with its limits (`None`: unlimited). `helpers` is how many of the
    /// sandbox's own processes (the helper, and at strict the namespace's init) live in them
    /// besides the tool's, which the process cap does not count. The cgroups of an earlier run
    /// are reused when there are some ([`Cgroups::give_back`]); new ones are made otherwise.
    pub(crate) fn take(
        &self,
        memory_bytes: Option<u64>,
        max_processes: Option<u64>,
        helpers: u64,
    ) -> io::Result<RunCgroup> {
        let spare = self.spare.lock().ok().and_then(|mut s| s.pop());
        let mut run = match spare {
            Some(run) => run,
            None => self.make()?,
        };
        run.limit(
            memory_bytes,
            max_processes.map(|n| n.saturating_add(helpers)),
        )?;
        run.oom_base = run.oom_counter();
        Ok(run)
    }

    /// Keeps a finished run's cgroups for the next run, off the async threads: once the last
    /// process of the run has left them, their charges are reclaimed (`memory.force_empty`) and
    /// the peak reset, so the next run starts from nothing. Cgroups that cannot be emptied, or
    /// are more than the few kept, are removed.
    pub(crate) fn give_back(self: &Arc<Self>, run: RunCgroup) {
        let me = Arc::clone(self);
        let recycle = move || {
            let emptied = (0..50).any(|i| {
                if i > 0 {
                    std::thread::sleep(Duration::from_millis(20));
                }
                run.is_empty()
            }) && write(&run.memory.join("memory.force_empty"), "0").is_ok()
                && write(&run.memory.join("memory.max_usage_in_bytes"), "0").is_ok();
            if emptied
                && let Ok(mut spare) = me.spare.lock()
                && spare.len() < SPARE
            {
                spare.push(run);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(recycle)),
            Err(_) => recycle(),
        }
    }

    /// A new pair of run cgroups, without limits.
    fn make(&self) -> io::Result<RunCgroup> {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}-{n}", std::process::id());
        // Dropped on any error below, which removes what was made.
        let mut run = RunCgroup {
            memory: self.memory.join(&name),
            pids: self.pids.join(&name),
            made: Vec::new(),
            limits: (None, None),
            oom_base: 0,
        };
        for dir in [run.memory.clone(), run.pids.clone()] {
            std::fs::create_dir(&dir)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
            run.made.push(dir);
        }
        Ok(run)
    }
}

/// The cgroups of one run; removed when dropped (or, if the runtime dies first, by the next
/// runtime's sweep).
#[derive(Debug)]
pub(crate) struct RunCgroup {
    memory: PathBuf,
    pids: PathBuf,
    made: Vec<PathBuf>,
    /// The memory and pids caps written so far.
    limits: (Option<u64>, Option<u64>),
    /// The OOM kill counter when the run started (a reused cgroup keeps counting).
    oom_base: u64,
}

impl RunCgroup {
    /// Sets the memory cap (and memory plus swap, where swap is accounted, so the tree cannot
    /// swap its way past it) and the pids cap; `None` lifts a cap.
    fn limit(&mut self, memory_bytes: Option<u64>, pids: Option<u64>) -> io::Result<()> {
        if self.limits.0 != memory_bytes {
            let value = memory_bytes.map_or_else(|| "-1".to_owned(), |b| b.to_string());
            let memsw = self.memory.join("memory.memsw.limit_in_bytes");
            let swap_accounted = memsw.exists();
            // memory plus swap may never be below memory: raise it first, lower it last.
            let raising = match (self.limits.0, memory_bytes) {
                (Some(old), Some(new)) => new > old,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if swap_accounted && raising {
                write(&memsw, &value)?;
            }
            write(&self.memory.join("memory.limit_in_bytes"), &value)?;
            if swap_accounted && !raising {
                write(&memsw, &value)?;
            }
            self.limits.0 = memory_bytes;
        }
        if self.limits.1 != pids {
            let value = pids.map_or_else(|| "max".to_owned(), |n| n.to_string());
            write(&self.pids.join("pids.max"), &value)?;
            self.limits.1 = pids;
        }
        Ok(())
    }

    /// Moves process `pid` (and what it starts later) into the run's cgroups.
    pub(crate) fn enter(&self, pid: u32) -> io::Result<()> {
        for dir in [&self.memory, &self.pids] {
            write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// The most memory the run's tree held at once, page cache it caused included.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        read_u64(&self.memory.join("memory.max_usage_in_bytes"))
    }

    /// How many processes of the run the OOM killer stopped because the tree hit its cap.
    pub(crate) fn oom_kills(&self) -> u64 {
        self.oom_counter().saturating_sub(self.oom_base)
    }

    fn oom_counter(&self) -> u64 {
        std::fs::read_to_string(self.memory.join("memory.oom_control"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Whether no process is left in either cgroup.
    fn is_empty(&self) -> bool {
        [&self.memory, &self.pids].iter().all(|d| {
            std::fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|s| s.trim().is_empty())
        })
    }
}

impl Drop for RunCgroup {
    /// Removes the cgroups once their last process is gone; the kernel refuses while a zombie
    /// of the run is still being reaped, so this retries for a while, off the async threads.
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.made);
        if dirs.is_empty() {
            return;
        }
        let attempt = move || {
            for _ in 0..50 {
                if dirs
                    .iter()
                    .all(|d| !d.exists() || std::fs::remove_dir(d).is_ok())
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            tracing::warn!(?dirs, "a run's cgroups could not be removed");
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(attempt)),
            Err(_) => attempt(),
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Removes the run cgroups under `parent` of runtimes that are gone (names are `tw-run-PID-N`
/// and `tw-run-PID-probe-N`); any still in use is refused by the kernel.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
