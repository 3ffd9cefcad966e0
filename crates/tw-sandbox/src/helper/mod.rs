//! The sandbox helper: the small program (`tw-sandbox-helper`) that the runtime spawns for every
//! process a tool runs. It is spawned normally (`posix_spawn`, no `pre_exec`, so spawning stays
//! cheap however much memory the runtime holds), confines itself, then runs the tool.
//!
//! Process layout:
//! - **standard**: the helper starts a session, becomes a child subreaper, and forks the tool
//!   into its own process group with rlimits set before `exec`. When the tool ends, the helper
//!   kills whatever it left behind (descendants that changed group or session are reparented to
//!   the helper, so they are found too) and reaps everything.
//! - **strict / restricted**: the helper unshares mount, pid, ipc, uts and (unless the tool has
//!   network) net namespaces, plus a user namespace when it is not root, builds the filesystem
//!   view, and forks the namespace's init. Init mounts a fresh `/proc`, caps the namespace's
//!   `pid_max`, drops to the sandbox uid when the runtime is root, and forks the tool, which sets
//!   rlimits, `no_new_privs`, Landlock and a seccomp filter before `exec`. When the tool ends,
//!   init kills every other process in the namespace; if init itself dies, the kernel does.
//!
//! The helper talks to the runtime over its standard input, a socket (see [`wire`]): the request
//! comes in, and setup errors and the final metrics go out, on a channel the tool never holds.
//!
//! This module is the only unsafe code in Toolwarden: `fork`, namespaces, mounts and signal
//! masks have no safe wrappers that fit a single-threaded pre-exec helper. The helper has one
//! thread, so allocating after `fork` is sound.
#![allow(unsafe_code)]

mod confine;
mod probe;
mod sys;
pub mod wire;

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use self::sys::{Errno, check};
use self::wire::{Finished, Level, Message, Request, SETUP_FAILED};

/// How long a stopping tool gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(300);
/// The signals the helper waits for instead of being interrupted by.
const WATCHED: [i32; 6] = [
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
];

/// The helper binary's whole `main`.
pub fn main() -> ! {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--escape-probe") {
        probe::run(&args[2..])
    }
    // The control socket moves off fd 0 (which becomes the tool's stdin) and is close-on-exec,
    // so the tool never holds it.
    let ctl = match sys::dup_cloexec(0, 10) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("tw-sandbox-helper: no control socket on standard input: {e}");
            sys::exit(SETUP_FAILED)
        }
    };
    let ctl = Control(ctl);
    match run(&ctl) {
        Ok(code) => sys::exit(code),
        Err(failure) => {
            ctl.send(&Message::SetupFailed {
                step: failure.step.to_owned(),
                error: failure.error,
            });
            sys::exit(SETUP_FAILED)
        }
    }
}

/// A setup step that failed, and why.
pub(crate) struct Failure {
    step: &'static str,
    error: String,
}

impl Failure {
    fn new(step: &'static str, error: impl std::fmt::Display) -> Self {
        Self {
            step,
            error: error.to_string(),
        }
    }
}

type Step<T> = Result<T, Failure>;

/// Attaches a step name to a fallible operation.
trait At<T> {
    fn at(self, step: &'static str) -> Step<T>;
}

impl<T, E: std::fmt::Display> At<T> for Result<T, E> {
    fn at(self, step: &'static str) -> Step<T> {
        self.map_err(|e| Failure::new(step, e))
    }
}

/// The helper's end of the control socket.
struct Control(OwnedFd);

impl Control {
    fn send(&self, m: &Message) {
        // A runtime that stopped listening has nothing left to hear; the run goes on regardless.
        let _ = sys::send_all(self.0.as_raw_fd(), &wire::encode_message(m));
    }
}

impl Read for &Control {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        sys::read(self.0.as_raw_fd(), buf)
    }
}

fn run(ctl: &Control) -> Step<i32> {
    let req = wire::read_request(&mut &*ctl).at("reading the request")?;
    let stdin = tool_stdin(ctl, req.stdin)?;
    check(unsafe { libc::setsid() }).at("starting a session")?;
    // Nobody, the tool included, may read this process's memory or descriptors.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
        .at("prctl(PR_SET_DUMPABLE)")?;
    sys::watch_signals(&WATCHED).at("blocking signals")?;
    match req.level {
        Level::Standard => {
            check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
                .at("prctl(PR_SET_CHILD_SUBREAPER)")?;
            let tool = spawn_tool(ctl, &req, &stdin)?;
            drop(stdin);
            let finished = supervise(tool, Reaper::Subreaper);
            ctl.send(&Message::Finished(finished));
            Ok(exit_code(&finished))
        }
        Level::Strict | Level::Restricted => {
            confine::enter_namespaces(&req)?;
            match unsafe { libc::fork() } {
                -1 => Err(Failure::new("forking the namespace's init", Errno::last())),
                0 => {
                    let code = match namespace_init(ctl, &req, &stdin) {
                        Ok(code) => code,
                        Err(failure) => {
                            ctl.send(&Message::SetupFailed {
                                step: failure.step.to_owned(),
                                error: failure.error,
                            });
                            SETUP_FAILED
                        }
                    };
                    sys::exit(code)
                }
                init => {
                    drop(stdin);
                    Ok(relay(init))
                }
            }
        }
    }
}

/// The tool's standard input: what follows the request on the socket, in a memory file, or
/// `/dev/null`.
fn tool_stdin(ctl: &Control, wanted: bool) -> Step<OwnedFd> {
    if !wanted {
        return sys::open_dev_null().at("opening /dev/null");
    }
    let file = sys::memfd("stdin").at("creating the stdin file")?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = (&*ctl).read(&mut buf).at("reading the tool's stdin")?;
        if n == 0 {
            break;
        }
        sys::write_all(file.as_raw_fd(), &buf[..n]).at("writing the tool's stdin")?;
    }
    check(unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_SET) }).at("rewinding stdin")?;
    Ok(file)
}

/// Pid 1 of the sandbox's pid namespace.
fn namespace_init(ctl: &Control, req: &Request, stdin: &OwnedFd) -> Step<i32> {
    // If the helper above dies, so does init, and with it the whole namespace.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })
        .at("prctl(PR_SET_PDEATHSIG)")?;
    confine::init_namespace(req)?;
    if let Some((uid, gid)) = req.run_as {
        sys::drop_to(uid, gid).at("switching to the sandbox uid")?;
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
            .at("prctl(PR_SET_DUMPABLE)")?;
    }
    let tool = spawn_tool(ctl, req, stdin)?;
    let finished = supervise(tool, Reaper::Init);
    ctl.send(&Message::Finished(finished));
    Ok(exit_code(&finished))
}

/// Forks the tool. The child confines itself and executes the program; if that fails it reports
/// on the socket and exits, so the parent only ever sees a pid.
fn spawn_tool(ctl: &Control, req: &Request, stdin: &OwnedFd) -> Step<libc::pid_t> {
    // Everything the child needs is prepared before the fork, so a failure is reported once.
    let exec = sys::Exec::new(&req.program, &req.argv).at("preparing argv")?;
    let plan = confine::Plan::new(req).at("preparing the confinement")?;
    match unsafe { libc::fork() } {
        -1 => Err(Failure::new("forking the tool", Errno::last())),
        0 => {
            let message = match tool_child(req, stdin.as_raw_fd(), &plan) {
                Ok(()) => {
                    let errno = exec.exec();
                    Message::ExecFailed {
                        errno: errno.0,
                        error: format!("cannot execute {}: {errno}", req.program.to_string_lossy()),
                    }
                }
                Err(failure) => Message::SetupFailed {
                    step: failure.step.to_owned(),
                    error: failure.error,
                },
            };
            ctl.send(&message);
            sys::exit(SETUP_FAILED)
        }
        pid => Ok(pid),
    }
}

/// Runs in the forked tool process, up to the `exec`.
fn tool_child(req: &Request, stdin: RawFd, plan: &confine::Plan) -> Step<()> {
    sys::reset_signals(&WATCHED).at("resetting signals")?;
    check(unsafe { libc::setpgid(0, 0) }).at("setpgid")?;
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })
        .at("prctl(PR_SET_PDEATHSIG)")?;
    check(unsafe { libc::dup2(stdin, 0) }).at("dup2(stdin)")?;
    // Nothing but stdin, stdout and stderr crosses into the tool.
    sys::cloexec_from(3).at("close_range")?;
    sys::chdir(&req.cwd).at("entering the working directory")?;
    sys::set_limits(&req.limits).at("setting resource limits")?;
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
        .at("prctl(PR_SET_NO_NEW_PRIVS)")?;
    if req.level != Level::Standard {
        plan.apply()?;
    }
    Ok(())
}

/// How leftovers are found and stopped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reaper {
    /// Pid 1 of the sandbox's namespace: `kill(-1)` reaches every other process in it.
    Init,
    /// A child subreaper: descendants are found through `/proc/<pid>/task/*/children`.
    Subreaper,
}

impl Reaper {
    fn signal_all(self, tool_group: libc::pid_t, sig: i32) {
        match self {
            Reaper::Init => unsafe {
                libc::kill(-1, sig);
            },
            Reaper::Subreaper => {
                unsafe { libc::kill(-tool_group, sig) };
                for pid in sys::descendants(std::process::id()) {
                    unsafe { libc::kill(pid, sig) };
                }
            }
        }
    }
}

/// Waits for the tool, forwarding a stop request as SIGTERM then SIGKILL, then stops and reaps
/// everything the tool left behind, and measures the whole tree.
fn supervise(tool: libc::pid_t, reaper: Reaper) -> Finished {
    let mut status = None;
    let mut kill_at: Option<Instant> = None;
    while status.is_none() {
        let timeout = kill_at.map(|at| at.saturating_duration_since(Instant::now()));
        match sys::wait_signal(&WATCHED, timeout) {
            Some(libc::SIGCHLD) => {
                for (pid, st) in sys::reap_ready() {
                    if pid == tool {
                        status = Some(st);
                    }
                }
            }
            Some(libc::SIGPIPE) => {}
            Some(_) => {
                if kill_at.is_none() {
                    reaper.signal_all(tool, libc::SIGTERM);
                    kill_at = Some(Instant::now() + GRACE);
                }
            }
            None => {
                if kill_at.is_some_and(|at| Instant::now() >= at) {
                    reaper.signal_all(tool, libc::SIGKILL);
                    kill_at = None;
                }
            }
        }
    }
    // The tool is gone; nothing it started may outlive it.
    let mut leftovers = 0u32;
    loop {
        reaper.signal_all(tool, libc::SIGKILL);
        match sys::reap_one_blocking() {
            Some(_) => leftovers += 1,
            None => break,
        }
    }
    let status = status.unwrap_or(0);
    let usage = sys::children_usage();
    Finished {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        cpu_time_us: usage.cpu_time_us,
        peak_memory_bytes: usage.peak_memory_bytes,
        killed_leftovers: leftovers,
    }
}

/// The helper above the namespace: waits for init and passes stop requests down to it.
fn relay(init: libc::pid_t) -> i32 {
    loop {
        match sys::wait_signal(&WATCHED, None) {
            Some(libc::SIGCHLD) => {
                for (pid, st) in sys::reap_ready() {
                    if pid == init {
                        return if libc::WIFEXITED(st) {
                            libc::WEXITSTATUS(st)
                        } else {
                            128 + libc::WTERMSIG(st)
                        };
                    }
                }
            }
            Some(libc::SIGPIPE) | None => {}
            Some(sig) => unsafe {
                libc::kill(init, sig);
            },
        }
    }
}

fn exit_code(f: &Finished) -> i32 {
    match (f.code, f.signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => SETUP_FAILED,
    }
}

/// The Landlock ABI version this kernel offers, if any.
pub(crate) fn landlock_abi() -> Option<i64> {
    sys::landlock_abi()
}

/// The raw file descriptor as an owned one, for descriptors this process just created.
fn owned(fd: RawFd) -> OwnedFd {
    unsafe { OwnedFd::from_raw_fd(fd) }
}
