//! The strict and restricted confinement: namespaces, the filesystem view (private `/tmp` and
//! `/dev/shm`, masked paths, id-mapped workspace mounts when the runtime is root), a fresh
//! `/proc`, a per-namespace `pid_max`, Landlock and the seccomp filter.
//!
//! Landlock decides what the tool may read, write and execute: a narrow allowlist of system
//! paths read-only, the workspace read-write (read-only at restricted), private `/tmp`, and a
//! few device nodes. Mounts add what Landlock cannot: a `/tmp` and `/dev/shm` no other process
//! shares, and masks over forbidden paths inside allowed trees. The seccomp filter closes the
//! kernel interfaces that would undo the rest (new namespaces, mounts, ptrace, TIOCSTI, kernel
//! keyrings, BPF, io_uring, which bypasses seccomp).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::sys::{self, Errno, check, cstring};
use super::wire::Request;
use super::{At, Failure, Step, owned};

/// The smallest `pid_max` the kernel accepts in a pid namespace.
const PID_MAX_FLOOR: u64 = 301;
/// Pids the kernel skips when it wraps around (`RESERVED_PIDS` in kernel/pid.c).
const RESERVED_PIDS: u64 = 300;
/// Size of the private `/tmp` and `/dev/shm`.
const TMPFS_OPTIONS: &str = "mode=1777,size=268435456,nr_inodes=65536";
/// A hidden host directory: empty but for the mount points of allowed paths beneath it.
const HIDDEN_OPTIONS: &str = "mode=755,size=1048576,nr_inodes=4096";
/// The Landlock ABI strict requires: every filesystem right (they stopped growing at 5) and the
/// abstract-socket and signal scopes (6). A kernel with less fails strict; nothing is dropped.
const LANDLOCK_ABI: ABI = ABI::V6;
/// [`LANDLOCK_ABI`] as the number the kernel reports.
pub(crate) const MIN_LANDLOCK_ABI: i64 = 6;
/// Device nodes every program expects to open.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Directories that get a fresh tmpfs in the sandbox.
const PRIVATE_DIRS: [&str; 2] = ["/tmp", "/dev/shm"];

/// Creates the namespaces and the filesystem view; runs in the helper before init is forked.
/// Returns the egress port's listener when the request asks for one.
pub(crate) fn enter_namespaces(req: &Request, fds: &[OwnedFd]) -> Step<Option<OwnedFd>> {
    let given = |i: Option<usize>| i.and_then(|i| fds.get(i));
    // A shared empty network namespace from the runtime is joined rather than a new one made
    // per run (making one is the costliest step of the sandbox); a run with an egress port
    // needs one of its own.
    let shared_net = given(req.netns_fd).filter(|_| !req.network && req.proxy_port.is_none());
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if !req.network && shared_net.is_none() {
        flags |= libc::CLONE_NEWNET;
    }
    // Likewise the user namespace of the id mapping, which otherwise costs a process per run.
    let made;
    let idmap = match (req.run_as, given(req.userns_fd)) {
        (Some(_), _) if req.idmapped.is_empty() => None,
        (Some(_), Some(shared)) => Some(shared),
        (Some((uid, gid)), None) => {
            made = idmap_userns(uid, gid).at("creating the id-mapping user namespace")?;
            Some(&made)
        }
        (None, _) => None,
    };
    match req.run_as {
        Some(_) => {
            check(unsafe { libc::unshare(flags) }).at("unshare(mount, pid, ipc, uts, net)")?;
            if let Some(net) = shared_net {
                sys::setns(net.as_raw_fd(), libc::CLONE_NEWNET)
                    .at("joining the shared network namespace")?;
            }
        }
        None => {
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            check(unsafe { libc::unshare(flags | libc::CLONE_NEWUSER) }).map_err(|e| {
                Failure::new(
                    "unshare(user, mount, pid, ipc, uts, net)",
                    format!(
                        "{e}; unprivileged user namespaces must be enabled \
                         (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, \
                         and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)"
                    ),
                )
            })?;
            // The helper made itself non-dumpable, which hands its /proc files to the host's
            // root, a uid the new namespace does not map: its own id maps would be closed to
            // it. Dumpable again for the three writes (nothing runs in the namespace yet, and
            // only the user's own processes could look), then closed again.
            check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) })
                .at("prctl(PR_SET_DUMPABLE)")?;
            sys::write_file("/proc/self/setgroups", "deny").at("writing setgroups")?;
            sys::write_file("/proc/self/uid_map", &format!("{uid} {uid} 1"))
                .at("writing uid_map")?;
            sys::write_file("/proc/self/gid_map", &format!("{gid} {gid} 1"))
                .at("writing gid_map")?;
            check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
                .at("prctl(PR_SET_DUMPABLE)")?;
        }
    }
    let listener = match req.proxy_port {
        Some(port) => Some(
            sys::loopback_listener(port).at("opening the egress port in the network namespace")?,
        ),
        None => None,
    };
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .at("making / private")?;

    // Directories that get an empty tmpfs: the private ones, and, when the tool runs as the
    // sandbox uid, any directory above an allowed path that the uid could not pass through
    // (`/root` above a workspace in root's home). Landlock already denies everything else in
    // such a directory; the tmpfs makes the allowed path reachable without opening the rest.
    let mut hidden: Vec<PathBuf> = PRIVATE_DIRS.iter().map(PathBuf::from).collect();
    hidden.extend(req.hidden.iter().cloned());
    if req.run_as.is_some() {
        hidden.extend(closed_ancestors(
            req.read_only.iter().chain(&req.read_write),
        ));
    }
    // A directory inside one already hidden needs no mount of its own.
    hidden.sort();
    hidden.dedup();
    let all = hidden.clone();
    hidden.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    // The paths the tool may write, those the private mounts would hide, and those that need an
    // id mapping or a read-only mount of their own are cloned first and put back on top of the
    // read-only host afterwards.
    let private = |p: &Path| hidden.iter().any(|d| p.starts_with(d));
    let mut carried: Vec<(&PathBuf, OwnedFd)> = Vec::new();
    let mut wanted: Vec<&PathBuf> = req
        .read_write
        .iter()
        .chain(&req.read_only)
        .filter(|p| {
            private(p)
                || req.read_write.contains(p)
                || req.read_only_mounts.contains(p)
                || (idmap.is_some() && req.idmapped.contains(p))
        })
        .collect();
    wanted.sort();
    wanted.dedup();
    for path in wanted {
        if carried.iter().any(|(c, _)| path.starts_with(c)) || !path.exists() {
            continue;
        }
        let mapping = idmap.filter(|_| req.idmapped.contains(path));
        let read_only = req.read_only_mounts.contains(path);
        let tree = clone_tree(path, mapping, read_only).map_err(|e| {
            Failure::new(
                "preparing a workspace mount",
                format!(
                    "{}: {e}{}",
                    path.display(),
                    if mapping.is_some() {
                        " (the filesystem must support id-mapped mounts, Linux 5.12+)"
                    } else {
                        ""
                    }
                ),
            )
        })?;
        carried.push((path, tree));
    }
    // Everything of the host becomes read-only: Landlock has no right for chmod, chown, utimes
    // or xattrs, so without this a tool could change the attributes of any file its uid owns.
    // The writable paths were cloned above and go back on top, writable.
    set_attr(libc::AT_FDCWD, c"/", MOUNT_ATTR_RDONLY, None)
        .at("making the host's filesystems read-only")?;
    for dir in &hidden {
        if dir.is_dir() {
            let private = PRIVATE_DIRS.iter().any(|p| dir == Path::new(p));
            tmpfs(
                dir,
                if private {
                    TMPFS_OPTIONS
                } else {
                    HIDDEN_OPTIONS
                },
            )
            .map_err(|e| {
                Failure::new(
                    "mounting a private directory",
                    format!("{}: {e}", dir.display()),
                )
            })?;
        }
    }
    for (path, tree) in &carried {
        attach(path, tree).map_err(|e| {
            Failure::new(
                "mounting a workspace path",
                format!("{}: {e}", path.display()),
            )
        })?;
    }
    for path in &req.masked {
        mask(path).map_err(|e| {
            Failure::new(
                "masking a forbidden path",
                format!("{}: {e}", path.display()),
            )
        })?;
    }
    Ok(listener)
}

/// The highest directory above each path that others may not search (no `o+x`), outermost
/// first and without nesting.
fn closed_ancestors<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        let highest = path
            .ancestors()
            .skip(1)
            .filter(|a| a.parent().is_some())
            .filter(|a| {
                std::fs::metadata(a)
                    .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 == 0)
            })
            .last();
        if let Some(dir) = highest {
            out.push(dir.to_owned());
        }
    }
    out.sort();
    out.dedup();
    let all = out.clone();
    out.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    out
}

/// Runs in the namespace's init: a `/proc` that shows only this namespace, and its process cap.
pub(crate) fn init_namespace(req: &Request) -> Step<()> {
    mount(
        Some("proc"),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .at("mounting /proc for the pid namespace")?;
    if let Some(n) = req.limits.max_processes {
        // Once pids wrap, the kernel hands out only pids above RESERVED_PIDS (300), so the cap
        // leaves room for them: at least `n` processes at any time, at most `n + 300`.
        let pid_max = n.saturating_add(RESERVED_PIDS + 1).max(PID_MAX_FLOOR);
        sys::write_file("/proc/sys/kernel/pid_max", &pid_max.to_string())
            .at("setting the pid namespace's pid_max (needs Linux 6.14+)")?;
    }
    let name = b"toolwarden";
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).at("sethostname")?;
    Ok(())
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), Errno> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(cstring).transpose()?;
    let data = data.map(cstring).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    check(unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    })
    .map(drop)
}

fn tmpfs(at: &Path, options: &str) -> Result<(), Errno> {
    mount(
        Some("tmpfs"),
        at,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(options),
    )
}

/// Hides `path`: an empty read-only directory over a directory, `/dev/null` over a file.
fn mask(path: &Path) -> Result<(), Errno> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some("mode=000,size=4096,nr_inodes=1"),
        )
    } else {
        mount(Some("/dev/null"), path, None, libc::MS_BIND, None)?;
        mount(
            None,
            path,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )
    }
}

/// A user namespace mapping id 0 to `uid`/`gid`, for id-mapped mounts: held by a short-lived
/// child whose namespace file stays open after it exits.
fn idmap_userns(uid: u32, gid: u32) -> Result<OwnedFd, Errno> {
    let mut ready = [0; 2];
    let mut release = [0; 2];
    check(unsafe { libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let (ready_r, ready_w) = (owned(ready[0]), owned(ready[1]));
    check(unsafe { libc::pipe2(release.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let (release_r, release_w) = (owned(release[0]), owned(release[1]));
    match check(unsafe { libc::fork() })? {
        0 => {
            drop(ready_r);
            drop(release_w);
            let ok = unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0;
            let _ = sys::write_all(ready_w.as_raw_fd(), &[u8::from(ok)]);
            let mut b = [0u8; 1];
            let _ = sys::read(release_r.as_raw_fd(), &mut b);
            sys::exit(0)
        }
        child => {
            drop(ready_w);
            drop(release_r);
            let result = (|| {
                let mut b = [0u8; 1];
                let n = sys::read(ready_r.as_raw_fd(), &mut b).map_err(|_| Errno::last())?;
                if n != 1 || b[0] != 1 {
                    return Err(Errno(libc::EPERM));
                }
                sys::write_file(&format!("/proc/{child}/uid_map"), &format!("0 {uid} 1"))?;
                sys::write_file(&format!("/proc/{child}/gid_map"), &format!("0 {gid} 1"))?;
                let ns = cstring(format!("/proc/{child}/ns/user"))?;
                check(unsafe { libc::open(ns.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })
                    .map(owned)
            })();
            drop(release_w);
            let mut st = 0;
            unsafe { libc::waitpid(child, &mut st, 0) };
            result
        }
    }
}

/// A detached copy of the mount tree at `path`; with a user namespace, its root-owned files
/// appear owned by that namespace's uid 0 (the sandbox uid); `read_only` makes every mount in it
/// read-only.
fn clone_tree(path: &Path, idmap: Option<&OwnedFd>, read_only: bool) -> Result<OwnedFd, Errno> {
    let p = cstring(path)?;
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            p.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    let tree = owned(i32::try_from(check(tree)?).map_err(|_| Errno(libc::EBADF))?);
    // No set-id program or device node in a carried tree works inside the sandbox, whatever
    // was there before the run (the seccomp filter keeps the tool from making new ones).
    let mut attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if read_only {
        attr |= MOUNT_ATTR_RDONLY;
    }
    if idmap.is_some() {
        attr |= MOUNT_ATTR_IDMAP;
    }
    set_attr(tree.as_raw_fd(), c"", attr, idmap)?;
    Ok(tree)
}

/// `mount_setattr(dirfd, path, AT_RECURSIVE, attr)`, with the user namespace for an id mapping.
fn set_attr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    attr: u64,
    userns: Option<&OwnedFd>,
) -> Result<(), Errno> {
    let flags = libc::AT_RECURSIVE
        | if path.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    let attr = MountAttr {
        attr_set: attr,
        attr_clr: 0,
        propagation: 0,
        userns_fd: match userns {
            Some(fd) => u64::try_from(fd.as_raw_fd()).map_err(|_| Errno(libc::EBADF))?,
            None => 0,
        },
    };
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Mounts a cloned tree at `path`, creating the mount point if a tmpfs now hides it.
fn attach(path: &Path, tree: &OwnedFd) -> Result<(), Errno> {
    if !path.exists() {
        let is_dir = {
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            check(unsafe { libc::fstat(tree.as_raw_fd(), &mut st) })?;
            st.st_mode & libc::S_IFMT == libc::S_IFDIR
        };
        let made = if is_dir {
            std::fs::create_dir_all(path)
        } else {
            path.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(path).map(drop))
        };
        made.map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    }
    let p = cstring(path)?;
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            p.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// What the namespace's init applies to itself, for the tool to inherit: Landlock, and the
/// seccomp program the runtime built once (see [`compiled_seccomp`]).
pub(crate) struct Plan {
    seccomp: Vec<libc::sock_filter>,
    read_only: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
}

impl Plan {
    pub(crate) fn new(req: &Request) -> Result<Self, String> {
        let mut read_only = req.read_only.clone();
        read_only.push(PathBuf::from("/proc"));
        let mut read_write = req.read_write.clone();
        read_write.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
        read_write.extend(DEVICES.map(PathBuf::from));
        if req.seccomp.is_empty() {
            return Err("the request carries no seccomp filter".to_owned());
        }
        Ok(Self {
            seccomp: req.seccomp.iter().map(|&w| unpack(w)).collect(),
            read_only,
            read_write,
        })
    }

    /// Landlock, then seccomp. `no_new_privs` is already set.
    pub(crate) fn apply(&self) -> Step<()> {
        self.landlock()?;
        super::seccomp::install(&self.seccomp).at("installing the seccomp filter")?;
        Ok(())
    }

    /// Landlock with every right of [`LANDLOCK_ABI`] handled and both scopes (abstract UNIX
    /// sockets and signals) on, fully enforced or not at all: a kernel that would enforce only
    /// part of it (an older ABI) fails the run, since strict relies on each part.
    fn landlock(&self) -> Step<()> {
        let status = self
            .landlock_ruleset(LANDLOCK_ABI)?
            .restrict_self()
            .map_err(landlock_missing)?;
        fully_enforced(status.ruleset)
    }

    /// The ruleset [`Plan::landlock`] enforces, asking for every right and scope of `abi` as a
    /// hard requirement: where the kernel lacks any of them this fails, before anything is
    /// enforced. Apart from [`LANDLOCK_ABI`], only the tests ask (for more than the kernel has).
    fn landlock_ruleset(&self, abi: ABI) -> Step<RulesetCreated> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(landlock_missing)?
            .scope(Scope::from_all(abi))
            .map_err(landlock_missing)?
            .create()
            .map_err(landlock_missing)?;
        let grants = self
            .read_only
            .iter()
            .map(|p| (p, AccessFs::from_read(abi)))
            .chain(self.read_write.iter().map(|p| (p, AccessFs::from_all(abi))));
        for (path, access) in grants {
            // A path that does not exist grants nothing. A file gets only the rights a file can
            // have (Landlock refuses directory rights on a file).
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let Ok(fd) = PathFd::new(path) else { continue };
            let access = if meta.is_dir() {
                access
            } else {
                access & AccessFs::from_file(abi)
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(landlock_missing)?;
        }
        Ok(ruleset)
    }
}

/// The second wall behind the hard requirement: whatever the ruleset asked, the run goes on only
/// if the kernel says it enforces all of it.
fn fully_enforced(status: RulesetStatus) -> Step<()> {
    if status == RulesetStatus::FullyEnforced {
        return Ok(());
    }
    Err(Failure::new(
        "setting up Landlock",
        format!(
            "the kernel would enforce it {}; {}",
            match status {
                RulesetStatus::PartiallyEnforced => "only partially",
                _ => "not at all",
            },
            landlock_requirement()
        ),
    ))
}

fn landlock_missing(e: landlock::RulesetError) -> Failure {
    Failure::new(
        "setting up Landlock",
        format!("{e}; {}", landlock_requirement()),
    )
}

/// What strict needs of Landlock, and what this kernel offers.
pub(crate) fn landlock_requirement() -> String {
    let offered = match sys::landlock_abi() {
        Some(v) => format!("this kernel offers ABI {v}"),
        None => "this kernel offers none (is `landlock` in the lsm= boot parameter?)".to_owned(),
    };
    format!(
        "strict needs Landlock ABI {MIN_LANDLOCK_ABI} (Linux 6.12+: file rights, abstract-socket \
         and signal scoping); {offered}"
    )
}

/// The seccomp program, packed for a request: one `u64` per instruction (code, jt, jf, k from the
/// high bits down). The runtime builds it once, not every run.
pub(crate) fn compiled_seccomp() -> Result<Vec<u64>, String> {
    Ok(super::seccomp::program()?
        .iter()
        .map(|i| {
            (u64::from(i.code) << 48)
                | (u64::from(i.jt) << 40)
                | (u64::from(i.jf) << 32)
                | u64::from(i.k)
        })
        .collect())
}

/// The inverse of the packing in [`compiled_seccomp`].
fn unpack(w: u64) -> libc::sock_filter {
    libc::sock_filter {
        code: (w >> 48) as u16,
        jt: (w >> 40) as u8,
        jf: (w >> 32) as u8,
        k: w as u32,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// A plan with something to grant of each kind; nothing here is ever enforced.
    fn plan() -> Plan {
        Plan {
            seccomp: Vec::new(),
            read_only: vec![PathBuf::from("/usr")],
            read_write: DEVICES.map(PathBuf::from).into(),
        }
    }

    /// Whether asking for everything of `abi` asks for a right or scope the kernel (at `kernel`)
    /// does not have.
    fn exceeds(abi: ABI, kernel: ABI) -> bool {
        !AccessFs::from_all(kernel).contains(AccessFs::from_all(abi))
            || !Scope::from_all(kernel).contains(Scope::from_all(abi))
    }

    /// Issue 15, hole 6: strict relies on every part of its Landlock ruleset, so a kernel that
    /// would enforce only part of it must fail the run. The runtime refuses kernels below
    /// [`MIN_LANDLOCK_ABI`] before the helper runs, so on a host that passes that check only this
    /// test sees the helper's own refusal: it asks for the first ABI that has a right or scope
    /// the kernel lacks (ABI 9's `ResolveUnix` on an ABI 7 kernel) and expects the hard
    /// requirement to refuse it before anything is enforced. With `BestEffort` the ruleset
    /// would be built, and enforced partially.
    #[test]
    fn landlock_asked_for_more_than_the_kernel_has_is_refused_before_it_is_enforced() {
        let offered = sys::landlock_abi();
        let kernel = offered.map_or(ABI::Unsupported, |v| {
            ABI::from(i32::try_from(v).unwrap_or(i32::MAX))
        });
        // ABI::from gives the newest ABI the crate knows for any higher number.
        let Some(beyond) = (1..=64).map(ABI::from).find(|&abi| exceeds(abi, kernel)) else {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIP the helper's refusal of a partial Landlock: this kernel (ABI {offered:?}) \
                 has every right and scope the landlock crate knows, so none can be asked that \
                 it lacks"
            );
            return;
        };
        // The plan strict uses builds here exactly when the kernel has what strict needs: the
        // refusal below is about what was asked beyond it.
        let strict_builds = offered.is_some_and(|v| v >= MIN_LANDLOCK_ABI);
        assert_eq!(
            plan().landlock_ruleset(LANDLOCK_ABI).is_ok(),
            strict_builds,
            "kernel ABI {offered:?}"
        );
        let refused = match plan().landlock_ruleset(beyond) {
            Ok(_) => Err(format!(
                "asking {beyond:?} of a kernel with ABI {offered:?} built a ruleset that would \
                 be enforced only partially"
            )),
            Err(f) => Ok((f.step, f.error.ends_with(&landlock_requirement()))),
        };
        assert_eq!(refused, Ok(("setting up Landlock", true)));
    }

    /// The second wall: whatever was asked, a ruleset the kernel enforces only partially, or
    /// not at all, fails the run with the reason.
    #[test]
    fn landlock_enforced_partially_or_not_at_all_fails_the_run() {
        let refusal = |how: &str| {
            Err((
                "setting up Landlock",
                format!(
                    "the kernel would enforce it {how}; {}",
                    landlock_requirement()
                ),
            ))
        };
        let seen: Vec<_> = [
            RulesetStatus::FullyEnforced,
            RulesetStatus::PartiallyEnforced,
            RulesetStatus::NotEnforced,
        ]
        .into_iter()
        .map(|status| {
            let label = format!("{status:?}");
            (label, fully_enforced(status).map_err(|f| (f.step, f.error)))
        })
        .collect();
        assert_eq!(
            seen,
            vec![
                ("FullyEnforced".to_owned(), Ok(())),
                ("PartiallyEnforced".to_owned(), refusal("only partially")),
                ("NotEnforced".to_owned(), refusal("not at all")),
            ]
        );
    }
}
