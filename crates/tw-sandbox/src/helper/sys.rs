//! Thin wrappers over the system calls the helper makes, each turning `-1`/`errno` into an
//! error value, so the setup code in the other helper modules reads as a list of steps.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr};
use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::owned;
use crate::process::ResourceLimits;

/// An `errno` value, displayed with the system's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl Errno {
    pub(crate) fn last() -> Self {
        Self(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

/// `-1` becomes the current `errno`.
pub(crate) fn check<T: Into<i64> + Copy>(ret: T) -> Result<T, Errno> {
    if ret.into() == -1 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

pub(crate) fn exit(code: i32) -> ! {
    // `_exit`: no atexit handlers or stdio flushing in a forked child.
    unsafe { libc::_exit(code) }
}

pub(crate) fn cstring(s: impl AsRef<OsStr>) -> Result<CString, Errno> {
    CString::new(s.as_ref().as_bytes()).map_err(|_| Errno(libc::EINVAL))
}

pub(crate) fn dup_cloexec(fd: RawFd, min: RawFd) -> Result<OwnedFd, Errno> {
    check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) }).map(owned)
}

pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n.unsigned_abs());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Calls `op` on what is left of `buf` until all of it is written, retrying on EINTR.
fn write_loop(mut buf: &[u8], op: impl Fn(&[u8]) -> isize) -> Result<(), Errno> {
    while !buf.is_empty() {
        let n = op(buf);
        if n < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n.unsigned_abs()..];
    }
    Ok(())
}

pub(crate) fn write_all(fd: RawFd, buf: &[u8]) -> Result<(), Errno> {
    write_loop(buf, |b| unsafe {
        libc::write(fd, b.as_ptr().cast(), b.len())
    })
}

/// Writes to a socket without raising SIGPIPE if the other end is gone.
pub(crate) fn send_all(fd: RawFd, buf: &[u8]) -> Result<(), Errno> {
    write_loop(buf, |b| unsafe {
        libc::send(fd, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL)
    })
}

pub(crate) fn open_dev_null() -> Result<OwnedFd, Errno> {
    check(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) }).map(owned)
}

pub(crate) fn memfd(name: &str) -> Result<OwnedFd, Errno> {
    let name = cstring(name)?;
    check(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) }).map(owned)
}

pub(crate) fn chdir(path: &Path) -> Result<(), Errno> {
    let p = cstring(path)?;
    check(unsafe { libc::chdir(p.as_ptr()) }).map(drop)
}

/// Marks every descriptor from `from` up close-on-exec.
pub(crate) fn cloexec_from(from: u32) -> Result<(), Errno> {
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            from,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    check(r).map(drop)
}

pub(crate) fn write_file(path: &str, contents: &str) -> Result<(), Errno> {
    let p = cstring(path)?;
    let fd = check(unsafe { libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    let fd = owned(fd);
    write_all(fd.as_raw_fd(), contents.as_bytes())
}

/// Switches every id to `uid`/`gid` and drops supplementary groups; all capabilities go with
/// the uid change.
pub(crate) fn drop_to(uid: u32, gid: u32) -> Result<(), Errno> {
    check(unsafe { libc::setgroups(0, std::ptr::null()) })?;
    check(unsafe { libc::setresgid(gid, gid, gid) })?;
    check(unsafe { libc::setresuid(uid, uid, uid) })?;
    // Regaining root must be impossible.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(Errno(libc::EPERM));
    }
    Ok(())
}

/// Applies each limit, never above the current hard limit.
pub(crate) fn set_limits(l: &ResourceLimits) -> Result<(), Errno> {
    let wanted = [
        (libc::RLIMIT_AS, l.memory_bytes),
        (libc::RLIMIT_CPU, l.cpu_seconds),
        (libc::RLIMIT_FSIZE, l.max_file_bytes),
        (libc::RLIMIT_NOFILE, l.max_open_files),
        (libc::RLIMIT_CORE, Some(0)),
    ];
    for (resource, value) in wanted {
        let Some(value) = value else { continue };
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        check(unsafe { libc::getrlimit(resource, &mut cur) })?;
        let value = value.min(cur.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        check(unsafe { libc::setrlimit(resource, &new) })?;
    }
    Ok(())
}

fn sigset(signals: &[i32]) -> libc::sigset_t {
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
    }
    set
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Blocks `signals` (they are then taken with [`wait_signal`]) and gives each a no-op handler:
/// an init process only receives signals it handles.
pub(crate) fn watch_signals(signals: &[i32]) -> Result<(), Errno> {
    for s in signals {
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = ignore_signal as *const () as usize;
        check(unsafe { libc::sigaction(*s, &act, std::ptr::null_mut()) })?;
    }
    let set = sigset(signals);
    let r = unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    check(r).map(drop)
}

/// A signal taken by [`wait_signal`].
pub(crate) struct Caught {
    /// The signal number.
    pub(crate) signo: i32,
    /// Who sent it, as this process's pid namespace sees it: 0 for the kernel or a process
    /// outside the namespace.
    pub(crate) sender: libc::pid_t,
}

/// The next pending watched signal, or `None` when `timeout` passes first.
pub(crate) fn wait_signal(signals: &[i32], timeout: Option<Duration>) -> Option<Caught> {
    let set = sigset(signals);
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = match timeout {
        None => unsafe { libc::sigwaitinfo(&set, &mut info) },
        Some(t) => {
            let ts = libc::timespec {
                tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(t.subsec_nanos().min(999_999_999) as i32),
            };
            unsafe { libc::sigtimedwait(&set, &mut info, &ts) }
        }
    };
    (r > 0).then(|| Caught {
        signo: r,
        sender: unsafe { info.si_pid() },
    })
}

/// Reaps every child that has already exited: `(pid, wait status)`.
pub(crate) fn reap_ready() -> Vec<(libc::pid_t, i32)> {
    let mut out = Vec::new();
    loop {
        let mut st = 0;
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid <= 0 {
            return out;
        }
        out.push((pid, st));
    }
}

/// Whether this process still has a child, running or not yet reaped.
pub(crate) fn has_children() -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // ECHILD means none; anything else (a child, or none exited yet) means one exists.
    let r = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) };
    r == 0
}

/// Waits for any child; `None` once there are none left.
pub(crate) fn reap_one_blocking() -> Option<libc::pid_t> {
    loop {
        let mut st = 0;
        let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
        if pid > 0 {
            return Some(pid);
        }
        if Errno::last().0 != libc::EINTR {
            return None;
        }
    }
}

/// What every reaped descendant used.
pub(crate) struct Usage {
    pub(crate) cpu_time_us: u64,
    pub(crate) peak_memory_bytes: u64,
}

pub(crate) fn children_usage() -> Usage {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return Usage {
            cpu_time_us: 0,
            peak_memory_bytes: 0,
        };
    }
    let us = |tv: libc::timeval| {
        u64::try_from(tv.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(tv.tv_usec).unwrap_or(0)
    };
    Usage {
        cpu_time_us: us(ru.ru_utime) + us(ru.ru_stime),
        peak_memory_bytes: u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024,
    }
}

/// Every descendant of `pid`, found through the `children` lists in `/proc`.
pub(crate) fn descendants(pid: u32) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in list.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
                if let Ok(raw) = libc::pid_t::try_from(child) {
                    out.push(raw);
                }
                queue.push(child);
            }
        }
    }
    out
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI version.
pub(crate) fn landlock_abi() -> Option<i64> {
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v)
}

/// Sends `data` with `fds` attached (`SCM_RIGHTS`) on a Unix socket.
pub(crate) fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let payload = std::mem::size_of_val(fds);
    let space = unsafe { libc::CMSG_SPACE(u32::try_from(payload).unwrap_or(u32::MAX)) } as usize;
    let mut control = vec![0u8; space];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(u32::try_from(payload).unwrap_or(u32::MAX)) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                payload,
            );
        }
    }
    let mut sent = 0;
    while sent == 0 {
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent = n.unsigned_abs();
    }
    // The descriptors went with the first bytes; the rest is plain data.
    if sent < data.len() {
        send_all(sock, &data[sent..]).map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes and any descriptors sent with them (close-on-exec).
pub(crate) fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    const MAX_FDS: usize = 4;
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let space =
        unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    let n = loop {
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n.unsigned_abs();
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len - (data as usize - cmsg as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(owned(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, fds))
}

/// Asks the kernel to send this process SIGIO when something happens on socket `fd` (data,
/// or the peer closing it), so a process that waits in `sigwaitinfo` notices a runtime that
/// went away.
pub(crate) fn notify_on_close(fd: RawFd) -> Result<(), Errno> {
    check(unsafe { libc::fcntl(fd, libc::F_SETOWN, libc::getpid()) })?;
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) }).map(drop)
}

/// Whether the peer of socket `fd` has closed it (or shut down its writing side). Reads
/// nothing: the bytes waiting, if any, stay where they are.
pub(crate) fn peer_closed(fd: RawFd) -> bool {
    let mut byte = 0u8;
    loop {
        let n = unsafe {
            libc::recv(
                fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return n == 0;
        }
        match Errno::last().0 {
            libc::EINTR => continue,
            libc::EAGAIN => return false,
            // ECONNRESET: the peer closed with our messages unread.
            _ => return true,
        }
    }
}

/// `setns(fd, nstype)`.
/// Brings the loopback interface of this network namespace up and listens on `port` at every
/// address of it (the namespace has no interface but loopback: 127.0.0.0/8): the one way out of
/// a sandbox whose network goes through the runtime's egress proxy. A client with several
/// proxies (the browser, one per session) tells them apart by the address it connects to.
pub(crate) fn loopback_listener(port: u16) -> Result<OwnedFd, Errno> {
    let ctl =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
            .map(owned)?;
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    check(unsafe { libc::ioctl(ctl.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) })?;
    unsafe {
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    check(unsafe { libc::ioctl(ctl.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) })?;
    let listener =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })
            .map(owned)?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::UNSPECIFIED).to_be(),
        },
        sin_zero: [0; 8],
    };
    check(unsafe {
        libc::bind(
            listener.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })?;
    check(unsafe { libc::listen(listener.as_raw_fd(), 128) })?;
    Ok(listener)
}

pub(crate) fn setns(fd: RawFd, nstype: libc::c_int) -> Result<(), Errno> {
    check(unsafe { libc::setns(fd, nstype) }).map(drop)
}

/// Starts `program` (an absolute path) with `argv` and `env` (`NAME=value` each; `None` for
/// this process's environment), standard
/// input from `stdin`, in a process group of its own, with no signal blocked and every signal
/// at its default action. The helper blocks the signals it waits for, and whoever started
/// Toolwarden may have ignored some (SIGXFSZ, SIGPIPE); a tool that inherited either would
/// behave differently (a shell's `wait` would never wake; a file-size limit would be an error
/// instead of a kill). It is `posix_spawn`, so no copy of this process is made. Returns the
/// pid, or the errno of the failed `exec`.
pub(crate) fn spawn(
    program: &Path,
    argv: &[String],
    env: Option<&[String]>,
    stdin: RawFd,
) -> Result<libc::pid_t, Errno> {
    let path = cstring(program)?;
    let args = argv.iter().map(cstring).collect::<Result<Vec<_>, _>>()?;
    let mut ptrs: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    ptrs.push(std::ptr::null_mut());
    let vars = env
        .unwrap_or_default()
        .iter()
        .map(cstring)
        .collect::<Result<Vec<_>, _>>()?;
    let mut env_ptrs: Vec<*mut libc::c_char> = vars.iter().map(|v| v.as_ptr().cast_mut()).collect();
    env_ptrs.push(std::ptr::null_mut());
    let envp = if env.is_some() {
        env_ptrs.as_ptr()
    } else {
        environ()
    };
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let nz = |r: libc::c_int| if r == 0 { Ok(()) } else { Err(Errno(r)) };
        nz(libc::posix_spawnattr_init(&mut attr))?;
        if let Err(e) = nz(libc::posix_spawn_file_actions_init(&mut actions)) {
            libc::posix_spawnattr_destroy(&mut attr);
            return Err(e);
        }
        let empty = sigset(&[]);
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut defaults);
        let flags = libc::POSIX_SPAWN_SETSIGMASK
            | libc::POSIX_SPAWN_SETSIGDEF
            | libc::POSIX_SPAWN_SETPGROUP;
        let result = nz(libc::posix_spawnattr_setsigmask(&mut attr, &empty))
            .and_then(|()| nz(libc::posix_spawnattr_setsigdefault(&mut attr, &defaults)))
            .and_then(|()| nz(libc::posix_spawnattr_setpgroup(&mut attr, 0)))
            .and_then(|()| {
                nz(libc::posix_spawnattr_setflags(
                    &mut attr,
                    flags as libc::c_short,
                ))
            })
            .and_then(|()| {
                nz(libc::posix_spawn_file_actions_adddup2(
                    &mut actions,
                    stdin,
                    0,
                ))
            })
            .and_then(|()| {
                let mut pid: libc::pid_t = 0;
                nz(libc::posix_spawn(
                    &mut pid,
                    path.as_ptr(),
                    &actions,
                    &attr,
                    ptrs.as_ptr(),
                    envp,
                ))
                .map(|()| pid)
            });
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        result
    }
}

/// This process's environment, as `execve` takes it.
fn environ() -> *const *mut libc::c_char {
    unsafe extern "C" {
        static environ: *const *mut libc::c_char;
    }
    unsafe { environ }
}
