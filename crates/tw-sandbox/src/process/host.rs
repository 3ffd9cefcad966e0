//! What this host can give: where the helper is, the system paths a confined tool may read,
//! the uid it runs as when Toolwarden is root, whether strict isolation really holds here (the
//! escape self-test), and the `doctor` report built from all of that.

// tw-sandbox is the one crate that spawns processes; the namespace holder is one of them.
#![allow(clippy::disallowed_methods)]

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tw_core::IsolationLevel;

use super::cgroup::Cgroups;
use super::{Mode, ProcessSpec, ResourceLimits, RunOutcome, Sandbox};
use crate::error::{Result, SandboxError};
use crate::helper::wire::{Level, PROXY_PORT, Request};

/// The file name of the helper executable.
pub const HELPER_NAME: &str = "tw-sandbox-helper";
/// Environment variable naming the helper explicitly.
pub const HELPER_ENV: &str = "TOOLWARDEN_SANDBOX_HELPER";
/// The uid and gid strict tools run as when Toolwarden runs as root: unused by any distribution,
/// outside the ranges `useradd`, systemd's dynamic users and container subuids hand out.
pub const DEFAULT_SANDBOX_ID: u32 = 2_147_000_000;
/// How many helpers [`SandboxConfig::pool_size`] keeps ready by default: one for the next run
/// and one being made or waiting behind it.
pub const DEFAULT_POOL_SIZE: usize = 2;
/// How long [`SandboxConfig::pool_idle`] keeps the helpers of a shape no run has taken by
/// default.
pub const DEFAULT_POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

pub(crate) const NONE_REASON: &str = "it means running inside the Toolwarden process, which only \
    built-in tools can do; a command always runs as a sandboxed child process. Declare the tool \
    with isolation standard or stricter";

/// System paths a strict tool may read and execute: programs, libraries, and the few files
/// under `/etc` that programs read at start-up. Not `/home`, `/root`, `/var` or the rest of
/// `/etc`.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
    "/etc/magic",
];

/// How the sandbox is set up on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The helper executable; by default `tw-sandbox-helper` next to the running program (or one
    /// directory up, for test binaries), or `$TOOLWARDEN_SANDBOX_HELPER`.
    pub helper: Option<PathBuf>,
    /// The uid and gid strict and restricted tools run as when Toolwarden is root.
    pub sandbox_ids: (u32, u32),
    /// Extra paths every strict tool may read and execute (an interpreter outside `/usr`).
    pub extra_read_only: Vec<PathBuf>,
    /// Where the self-test puts its scratch files.
    pub scratch_dir: PathBuf,
    /// How many helpers are kept built ahead of their runs (at every level), for each of
    /// the last few shapes of run (see `process::pool`); 0 builds every sandbox on the spot.
    pub pool_size: usize,
    /// How long the helpers made ahead for a shape of run are kept once no run of that shape
    /// comes: an idle helper holds one or two small processes and a cgroup, and a strict one's
    /// mounts keep the directories they cover busy (a workspace on a removable disk could not
    /// be unmounted).
    pub pool_idle: std::time::Duration,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            helper: None,
            sandbox_ids: (DEFAULT_SANDBOX_ID, DEFAULT_SANDBOX_ID),
            extra_read_only: Vec::new(),
            scratch_dir: std::env::temp_dir(),
            pool_size: DEFAULT_POOL_SIZE,
            pool_idle: DEFAULT_POOL_IDLE,
        }
    }
}

/// Whether one isolation level is available, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelSupport {
    /// The level.
    pub level: IsolationLevel,
    /// Whether tools at this level run.
    pub available: bool,
    /// What the level gives here, or what is missing and how to fix it.
    pub detail: String,
}

/// One escape the self-test tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTestCase {
    /// What was tried.
    pub case: String,
    /// Whether the sandbox stopped it.
    pub contained: bool,
    /// The error that stopped it, or what the escape achieved.
    pub detail: String,
}

/// One protection strict relies on, and whether this host gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Protection {
    /// What it is.
    pub name: String,
    /// Whether this host gives it. Strict and restricted refuse to run without every one.
    pub held: bool,
    /// How it was found out, or what is missing and what gives it.
    pub detail: String,
}

/// The `toolwarden sandbox doctor` report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Doctor {
    /// The helper executable, or why it was not found.
    pub helper: std::result::Result<PathBuf, String>,
    /// `uname -r`.
    pub kernel: String,
    /// Whether Toolwarden runs as root (strict tools then run as `sandbox_ids`).
    pub running_as_root: bool,
    /// The uid and gid strict tools run as when Toolwarden is root.
    pub sandbox_ids: (u32, u32),
    /// The Landlock ABI the kernel offers.
    pub landlock_abi: Option<i64>,
    /// `kernel.unprivileged_userns_clone` / `user.max_user_namespaces`, where they exist.
    pub user_namespaces: String,
    /// Debian's bubblewrap, if installed (not used by Toolwarden; shown for comparison).
    pub bubblewrap: Option<PathBuf>,
    /// Where each run's memory and process caps over its whole tree live (cgroup v1), or why
    /// the caps are per process only.
    pub tree_limits: std::result::Result<String, String>,
    /// How many sandboxes are kept built ahead of their runs per shape of run (0: each is built
    /// on the spot), and how many are ready now over every shape.
    pub built_ahead: (usize, usize),
    /// Each protection strict and restricted need, held or missing.
    pub protections: Vec<Protection>,
    /// Each level's status.
    pub levels: Vec<LevelSupport>,
    /// The escape self-test, case by case (empty when strict could not be built).
    pub self_test: Vec<SelfTestCase>,
}

/// The strict self-test's verdict, computed once.
#[derive(Debug, Clone)]
struct Verdict {
    result: std::result::Result<(), String>,
    cases: Vec<SelfTestCase>,
}

#[derive(Debug)]
pub(crate) struct Host {
    config: SandboxConfig,
    helper: std::result::Result<PathBuf, String>,
    system_read: Vec<PathBuf>,
    /// Top-level host directories hidden from confined tools (see `Request::hidden`).
    hidden: Vec<PathBuf>,
    /// Sockets directly in `/dev` (`/dev/log` where no systemd links it into `/run`), masked
    /// for confined tools like a forbidden path.
    dev_sockets: Vec<PathBuf>,
    /// What the kernel offers, read once.
    pub(super) facts: HostFacts,
    root: bool,
    strict: OnceCell<Verdict>,
    shared: OnceCell<Option<SharedNamespaces>>,
    /// The seccomp program, built once (an error makes strict unavailable).
    seccomp: std::result::Result<Vec<u64>, String>,
    /// The parents of the runs' cgroups, where runs can have their own.
    cgroups: Option<Arc<Cgroups>>,
    /// Helpers made ahead of their runs.
    pool: super::pool::Pool,
}

impl Host {
    pub(crate) fn new(config: SandboxConfig) -> Self {
        let helper = find_helper(config.helper.as_deref());
        let (config_pool, pool_idle) = (config.pool_size, config.pool_idle);
        let mut system_read: Vec<PathBuf> = SYSTEM_READ
            .iter()
            .map(PathBuf::from)
            .chain(python_etc())
            .chain(config.extra_read_only.iter().cloned())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        // `/bin` and `/lib` are links into `/usr` on merged-/usr systems: one Landlock rule (one
        // path lookup per run) for each tree is enough.
        system_read.sort();
        system_read.dedup();
        let all = system_read.clone();
        system_read.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
        let hidden = hidden_roots(Path::new("/"), &system_read);
        let dev_sockets = sockets_in(Path::new("/dev"));
        let root = rustix::process::geteuid().is_root();
        Self {
            root,
            facts: HostFacts::read(root),
            config,
            helper,
            system_read,
            hidden,
            dev_sockets,
            strict: OnceCell::new(),
            shared: OnceCell::new(),
            seccomp: crate::helper::compiled_seccomp(),
            cgroups: Cgroups::detect().map(Arc::new),
            pool: super::pool::Pool::new(config_pool, pool_idle),
        }
    }

    pub(crate) fn pool(&self) -> &super::pool::Pool {
        &self.pool
    }

    pub(crate) fn cgroups(&self) -> Option<&Arc<Cgroups>> {
        self.cgroups.as_ref()
    }

    /// The limits a run at `level` gets: the spec's, tightened at restricted.
    pub(crate) fn limits(spec: &ProcessSpec, level: Level) -> ResourceLimits {
        match level {
            Level::Restricted => spec.limits.min(ResourceLimits::restricted()),
            _ => spec.limits,
        }
    }

    pub(crate) fn config(&self) -> &SandboxConfig {
        &self.config
    }

    pub(crate) fn helper(&self) -> Result<&Path> {
        self.helper
            .as_deref()
            .map_err(|reason| SandboxError::Unsupported {
                level: IsolationLevel::Standard,
                reason: reason.clone(),
            })
    }

    pub(crate) async fn check(&self, sandbox: &Sandbox, level: IsolationLevel) -> Result<()> {
        let unsupported = |reason: String| SandboxError::Unsupported { level, reason };
        match level {
            IsolationLevel::None => Err(unsupported(NONE_REASON.to_owned())),
            IsolationLevel::Standard => self.helper().map(drop).map_err(|e| match e {
                SandboxError::Unsupported { reason, .. } => unsupported(reason),
                other => other,
            }),
            IsolationLevel::Strict | IsolationLevel::Restricted => {
                if let Err(reason) = &self.helper {
                    return Err(unsupported(reason.clone()));
                }
                if let Err(e) = &self.seccomp {
                    return Err(unsupported(format!(
                        "the seccomp filter cannot be built: {e}"
                    )));
                }
                let missing: Vec<String> = self
                    .protections()
                    .into_iter()
                    .filter(|p| !p.held)
                    .map(|p| format!("{}: {}", p.name, p.detail))
                    .collect();
                if !missing.is_empty() {
                    return Err(unsupported(format!(
                        "this host lacks what strict needs: {}",
                        missing.join("; ")
                    )));
                }
                let verdict = self.strict.get_or_init(|| self_test(sandbox)).await;
                verdict.result.clone().map_err(unsupported)
            }
        }
    }

    /// What strict needs of the kernel, judged from the facts read when the host was set up.
    /// The self-test then builds a strict sandbox, which fails at the first step the host
    /// refuses.
    pub(crate) fn protections(&self) -> Vec<Protection> {
        self.facts.protections()
    }

    pub(crate) async fn doctor(&self, sandbox: &Sandbox) -> Doctor {
        let mut levels = Vec::new();
        for level in [
            IsolationLevel::Standard,
            IsolationLevel::Strict,
            IsolationLevel::Restricted,
        ] {
            let (available, detail) = match self.check(sandbox, level).await {
                Ok(()) => (
                    true,
                    level_summary(level, self.root, self.config.sandbox_ids),
                ),
                Err(SandboxError::Unsupported { reason, .. }) => (false, reason),
                Err(e) => (false, e.to_string()),
            };
            levels.push(LevelSupport {
                level,
                available,
                detail,
            });
        }
        let sysctl = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| {
                    format!(
                        "{}={}",
                        p.trim_start_matches("/proc/sys/").replace('/', "."),
                        s.trim()
                    )
                })
                .ok()
        };
        Doctor {
            helper: self.helper.clone(),
            kernel: self.facts.kernel.clone(),
            protections: self.protections(),
            running_as_root: self.root,
            sandbox_ids: self.config.sandbox_ids,
            landlock_abi: self.facts.landlock_abi,
            user_namespaces: [
                "/proc/sys/kernel/unprivileged_userns_clone",
                "/proc/sys/user/max_user_namespaces",
            ]
            .iter()
            .filter_map(|p| sysctl(p))
            .collect::<Vec<_>>()
            .join(", "),
            bubblewrap: ["/usr/bin/bwrap", "/bin/bwrap"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists()),
            tree_limits: match &self.cgroups {
                Some(c) => Ok(c.describe()),
                None if !self.root => {
                    Err("per process only (rlimits): cgroups need root".to_owned())
                }
                None => Err(
                    "per process only (rlimits): the cgroup v1 memory and pids hierarchies are \
                     not mounted or not writable"
                        .to_owned(),
                ),
            },
            built_ahead: (self.config.pool_size, self.pool.counts().0),
            levels,
            self_test: self
                .strict
                .get()
                .map(|v| v.cases.clone())
                .unwrap_or_default(),
        }
    }

    /// The helper's request for one run. The descriptors sent with it are, in this order, the
    /// shared user and network namespaces (when `shared`), then an interactive run's stdin pipe.
    pub(crate) fn request(
        &self,
        spec: &ProcessSpec,
        level: Level,
        program: PathBuf,
        shared: bool,
        mode: Mode,
    ) -> Request {
        let confined = level != Level::Standard;
        let (mut read_only, read_write) = match level {
            Level::Standard => (Vec::new(), Vec::new()),
            Level::Strict => (spec.fs.read_only.clone(), spec.fs.read_write.clone()),
            Level::Restricted => {
                let mut ro = spec.fs.read_only.clone();
                ro.extend(spec.fs.read_write.iter().cloned());
                (ro, Vec::new())
            }
        };
        let workspace: Vec<PathBuf> = read_only.iter().chain(&read_write).cloned().collect();
        let read_only_mounts = if confined {
            read_only.clone()
        } else {
            Vec::new()
        };
        if confined {
            read_only.extend(self.system_read.iter().cloned());
        }
        let limits = Self::limits(spec, level);
        let mut argv = Vec::with_capacity(spec.args.len() + 1);
        argv.push(spec.program.clone());
        argv.extend(spec.args.iter().cloned());
        let run_as = (confined && self.root).then_some(self.config.sandbox_ids);
        Request {
            level,
            program,
            argv,
            cwd: spec.cwd.clone(),
            limits: ResourceLimits {
                max_processes: limits.max_processes.filter(|_| confined),
                ..limits
            },
            read_only,
            read_write,
            read_only_mounts,
            masked: if confined {
                spec.fs
                    .masked
                    .iter()
                    .chain(&self.dev_sockets)
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            },
            hidden: if confined {
                self.hidden.clone()
            } else {
                Vec::new()
            },
            network: spec.network,
            run_as,
            idmapped: if run_as.is_some() {
                workspace
            } else {
                Vec::new()
            },
            stdin: mode == Mode::Batch && spec.stdin.is_some(),
            stdin_fd: (mode == Mode::Interactive).then_some(if shared { 2 } else { 0 }),
            stop_on_close: mode == Mode::Interactive,
            userns_fd: shared.then_some(0),
            netns_fd: shared.then_some(1),
            proxy_port: spec.egress.as_ref().map(|_| PROXY_PORT),
            seccomp: if confined {
                self.seccomp.clone().unwrap_or_default()
            } else {
                Vec::new()
            },
            pooled: false,
        }
    }

    /// The namespaces every strict run shares when Toolwarden is root: the user namespace of the
    /// id mapping and an empty network namespace, made once by a short-lived helper. `None` when
    /// not root, or when they cannot be made (each run then makes its own).
    pub(crate) async fn shared_namespaces(&self) -> Option<&SharedNamespaces> {
        if !self.root {
            return None;
        }
        let helper = self.helper.as_ref().ok()?;
        self.shared
            .get_or_init(|| async {
                match SharedNamespaces::make(helper, self.config.sandbox_ids).await {
                    Ok(ns) => Some(ns),
                    Err(e) => {
                        tracing::warn!(error = %e, "shared sandbox namespaces unavailable; each run makes its own");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }
}

/// Namespaces held open for every strict run (see [`Host::shared_namespaces`]).
#[derive(Debug)]
pub(crate) struct SharedNamespaces {
    /// Maps uid 0 to the sandbox uid: the id mapping of workspace mounts.
    pub(crate) userns: std::os::fd::OwnedFd,
    /// An empty network namespace (loopback down) that no one can configure.
    pub(crate) netns: std::os::fd::OwnedFd,
}

impl SharedNamespaces {
    async fn make(helper: &Path, (uid, gid): (u32, u32)) -> std::io::Result<Self> {
        use tokio::io::AsyncBufReadExt;
        let mut holder = tokio::process::Command::new(helper)
            .arg(crate::helper::HOLD_NAMESPACES)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = holder.id().unwrap_or(0);
        let mut ready = String::new();
        if let Some(out) = holder.stdout.take() {
            tokio::io::BufReader::new(out).read_line(&mut ready).await?;
        }
        if ready.trim() != "ready" {
            return Err(std::io::Error::other(
                "the namespace holder did not start (it needs root)",
            ));
        }
        std::fs::write(format!("/proc/{pid}/uid_map"), format!("0 {uid} 1"))?;
        std::fs::write(format!("/proc/{pid}/gid_map"), format!("0 {gid} 1"))?;
        let userns = std::fs::File::open(format!("/proc/{pid}/ns/user"))?.into();
        let netns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?.into();
        drop(holder.stdin.take());
        holder.wait().await?;
        Ok(Self { userns, netns })
    }
}

fn level_summary(level: IsolationLevel, root: bool, ids: (u32, u32)) -> String {
    let who = if root {
        format!("as uid {} (Toolwarden runs as root)", ids.0)
    } else {
        "as Toolwarden's own uid in a user namespace".to_owned()
    };
    match level {
        IsolationLevel::Standard => "own session and process group, scrubbed environment, rlimits \
            set before exec, every leftover process killed when the tool ends"
            .to_owned(),
        IsolationLevel::Strict => format!(
            "standard plus: pid, mount, ipc, uts and network namespaces, Landlock (system read-only, \
             workspace read-write), private /tmp and /dev/shm, seccomp, no_new_privs; runs {who}"
        ),
        _ => format!("strict with a read-only workspace and tighter limits; runs {who}"),
    }
}

/// What this host's kernel offers that strict needs, read once per `Sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostFacts {
    /// `uname -r`.
    pub(super) kernel: String,
    /// The Landlock ABI the kernel offers.
    pub(super) landlock_abi: Option<i64>,
    /// Whether the kernel has seccomp filters.
    pub(super) seccomp_filters: bool,
    /// Whether Toolwarden runs as root (no user namespace needed then).
    pub(super) root: bool,
    /// Settings that refuse unprivileged user namespaces, as `name=value`.
    pub(super) userns_refused_by: Vec<String>,
}

impl HostFacts {
    fn read(root: bool) -> Self {
        let sysctl = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
        let refusing = [
            ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
            ("/proc/sys/user/max_user_namespaces", "0"),
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            ),
        ];
        Self {
            kernel: kernel_release(),
            landlock_abi: crate::helper::landlock_abi(),
            seccomp_filters: std::fs::read_to_string("/proc/self/status")
                .is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp_filters:"))),
            root,
            userns_refused_by: refusing
                .iter()
                .filter(|(path, bad)| sysctl(path).as_deref() == Some(*bad))
                .map(|(path, bad)| {
                    format!(
                        "{}={bad}",
                        path.trim_start_matches("/proc/sys/").replace('/', ".")
                    )
                })
                .collect(),
        }
    }

    /// Each protection strict needs, held or missing, with what gives it.
    pub(super) fn protections(&self) -> Vec<Protection> {
        let version = kernel_version(&self.kernel);
        let at_least = |want: (u32, u32)| version.is_some_and(|v| v >= want);
        let kernel = &self.kernel;
        let min_abi = crate::helper::MIN_LANDLOCK_ABI;
        let mut out = vec![
            Protection {
                name: format!(
                    "Landlock ABI {min_abi}+ (file rights, abstract-socket and signal scoping)"
                ),
                held: self.landlock_abi.is_some_and(|v| v >= min_abi),
                detail: match self.landlock_abi {
                    Some(v) if v >= min_abi => format!("the kernel offers ABI {v}"),
                    Some(v) => format!(
                        "the kernel offers only ABI {v}; Linux 6.12+ gives {min_abi}, and strict \
                         never runs with part of it"
                    ),
                    None => "not available: Linux 6.12+ with landlock in the lsm= boot parameter"
                        .to_owned(),
                },
            },
            Protection {
                name: "seccomp filters".to_owned(),
                held: self.seccomp_filters,
                detail: if self.seccomp_filters {
                    "the kernel filters syscalls".to_owned()
                } else {
                    "the kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)".to_owned()
                },
            },
            Protection {
                name: "a process cap per pid namespace (pid_max, Linux 6.14+)".to_owned(),
                held: at_least((6, 14)),
                detail: format!("kernel {kernel}"),
            },
            Protection {
                name: "id-mapped and detached mounts (Linux 5.12+)".to_owned(),
                held: at_least((5, 12)),
                detail: format!("kernel {kernel}"),
            },
        ];
        if !self.root {
            out.push(Protection {
                name: "unprivileged user namespaces".to_owned(),
                held: self.userns_refused_by.is_empty(),
                detail: if self.userns_refused_by.is_empty() {
                    "allowed for this user (Toolwarden is not root)".to_owned()
                } else {
                    format!("refused by {}", self.userns_refused_by.join(", "))
                },
            });
        }
        out
    }
}

/// `uname -r`.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The major and minor version of a kernel release such as `6.18.44-fc-v657`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The directories directly under `root` that a confined tool gets an empty one in place of:
/// every real directory (not a link) except `/proc` and `/dev` (the sandbox's own), `/tmp`
/// (private anyway) and those holding a path of the system allowlist (`/usr`, `/etc`). The
/// sockets of the host live in them: `/run` (D-Bus, systemd, Docker, containerd, the user's
/// runtime directory), `/var/run`, and the homes (`~/.docker/desktop/docker.sock`).
fn hidden_roots(root: &Path, system_read: &[PathBuf]) -> Vec<PathBuf> {
    const OWN: [&str; 3] = ["proc", "dev", "tmp"];
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !OWN.iter().any(|o| e.file_name() == *o))
        .map(|e| e.path())
        .filter(|dir| !system_read.iter().any(|p| p.starts_with(dir)))
        .collect();
    out.sort();
    out
}

/// The UNIX sockets directly in `dir`.
fn sockets_in(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// `/etc/python3*`: Debian's Python reads its site configuration there.
fn python_etc() -> Vec<PathBuf> {
    std::fs::read_dir("/etc")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python3"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn find_helper(configured: Option<&Path>) -> std::result::Result<PathBuf, String> {
    let explicit = configured
        .map(Path::to_owned)
        .or_else(|| std::env::var_os(HELPER_ENV).map(PathBuf::from));
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "the sandbox helper {} does not exist; build it with `cargo build -p tw-sandbox \
                 --bins` or fix {HELPER_ENV}",
                path.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this program: {e}"))?;
    let mut looked = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(HELPER_NAME);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    Err(format!(
        "the sandbox helper {HELPER_NAME} was not found (looked at {}); it is installed next to \
         the toolwarden binary: build it with `cargo build -p tw-sandbox --bins`, or set \
         {HELPER_ENV}",
        looked.join(", ")
    ))
}

/// A scratch directory that removes itself.
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path, name: &str) -> std::io::Result<Self> {
        let path = parent.join(format!(
            "tw-selftest-{}-{name}-{}",
            std::process::id(),
            super::RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds a strict sandbox and tries known escapes from inside it. Any escape, or a sandbox
/// that cannot be built, makes strict and restricted unavailable with the reason.
async fn self_test(sandbox: &Sandbox) -> Verdict {
    match try_self_test(sandbox).await {
        Ok(cases) => {
            let escaped: Vec<String> = cases
                .iter()
                .filter(|c| !c.contained)
                .map(|c| format!("{} ({})", c.case, c.detail))
                .collect();
            let result = if escaped.is_empty() {
                Ok(())
            } else {
                tracing::error!(?escaped, "sandbox self-test: escapes succeeded");
                Err(format!(
                    "the start-up self-test escaped the sandbox on this host: {}; strict tools \
                     are refused until `toolwarden sandbox doctor` passes",
                    escaped.join("; ")
                ))
            };
            Verdict { result, cases }
        }
        Err(reason) => Verdict {
            result: Err(reason),
            cases: Vec::new(),
        },
    }
}

async fn try_self_test(sandbox: &Sandbox) -> std::result::Result<Vec<SelfTestCase>, String> {
    let helper = sandbox.host.helper().map_err(|e| e.to_string())?.to_owned();
    let scratch = &sandbox.host.config.scratch_dir;
    let io = |what: &str, e: std::io::Error| format!("self-test: {what}: {e}");
    let outside = Scratch::new(scratch, "outside").map_err(|e| io("scratch directory", e))?;
    let workspace = Scratch::new(scratch, "workspace").map_err(|e| io("scratch directory", e))?;
    let canary = outside.0.join("canary");
    let plant = outside.0.join("planted");
    std::fs::write(&canary, "secret").map_err(|e| io("canary file", e))?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("loopback listener", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| io("loopback listener", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| io("loopback listener", e))?
        .port();

    let mut spec = ProcessSpec::new(helper.to_string_lossy(), workspace.0.clone());
    spec.args = vec![
        "--escape-probe".to_owned(),
        canary.to_string_lossy().into_owned(),
        plant.to_string_lossy().into_owned(),
        port.to_string(),
        std::process::id().to_string(),
    ];
    spec.isolation = IsolationLevel::Strict;
    spec.timeout = Duration::from_secs(20);
    spec.fs.read_only.push(helper.clone());
    let outcome = sandbox
        .run_checked(spec, CancellationToken::new(), None, false)
        .await
        .map_err(|e| match e {
            SandboxError::Setup { step, error, .. } => {
                format!("this host cannot build a strict sandbox: {step} failed: {error}")
            }
            other => format!("this host cannot build a strict sandbox: {other}"),
        })?;
    let out = match &outcome {
        RunOutcome::Exited(o) if o.exit.code == Some(0) => o,
        other => {
            let o = other.output();
            return Err(format!(
                "the self-test probe did not finish ({:?}): {}",
                o.exit,
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    };
    let mut cases: Vec<SelfTestCase> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // What the probe claims is checked from outside too.
    cases.push(SelfTestCase {
        case: "leave a file outside the workspace (checked from outside)".to_owned(),
        contained: !plant.exists(),
        detail: if plant.exists() {
            format!("{} exists", plant.display())
        } else {
            "nothing was created".to_owned()
        },
    });
    let accepted = match listener.accept() {
        Ok(_) => Some("a connection arrived".to_owned()),
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        Err(e) => Some(format!("accept failed: {e}")),
    };
    cases.push(SelfTestCase {
        case: "reach the loopback listener (checked from outside)".to_owned(),
        contained: accepted.is_none(),
        detail: accepted.unwrap_or_else(|| "no connection arrived".to_owned()),
    });
    if cases.len() < 4 {
        return Err(format!(
            "the self-test probe reported only {} cases: {}",
            cases.len(),
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    Ok(cases)
}
