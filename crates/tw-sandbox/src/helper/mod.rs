//! The sandbox helper: the small program (`tw-sandbox-helper`) that the runtime spawns for every
//! process a tool runs. It is spawned normally (`posix_spawn`, no `pre_exec`, so spawning stays
//! cheap however much memory the runtime holds), confines itself, then runs the tool.
//!
//! Process layout:
//! - **standard**: the helper starts a session, becomes a child subreaper, sets the rlimits on
//!   itself and spawns the tool into its own process group, so they hold from the tool's first
//!   instruction. When the tool ends, the helper kills whatever it left behind (descendants that
//!   changed group or session are reparented to the helper, so they are found too) and reaps
//!   everything.
//! - **strict / restricted**: the helper unshares mount, pid, ipc, uts and (unless the tool has
//!   network) net namespaces, plus a user namespace when it is not root, builds the filesystem
//!   view, and forks the namespace's init. Init mounts a fresh `/proc`, caps the namespace's
//!   `pid_max`, drops to the sandbox uid when the runtime is root, sets rlimits, `no_new_privs`,
//!   Landlock and a seccomp filter on itself, and spawns the tool, which inherits them all. When
//!   the tool ends, init kills every other process in the namespace; if init itself dies, the
//!   kernel does.
//!
//! The helper talks to the runtime over its standard input, a socket (see [`wire`]): the request
//! comes in, and setup errors, the news that the tool started and the final metrics go out, on a
//! channel the tool never holds. For an interactive run the tool's standard input is a pipe the
//! runtime sent with the request, and the helper watches the socket (SIGIO): the runtime closing
//! its end, because it dropped the run or died, stops the tool like a SIGTERM from it would.
//!
//! This module is the only unsafe code in Toolwarden: `fork`, namespaces, mounts and signal
//! masks have no safe wrappers that fit a single-threaded pre-exec helper. The helper has one
//! thread, so allocating after `fork` is sound.
#![allow(unsafe_code)]
// tw-sandbox is the one crate that spawns processes; the helper starts the tool.
#![allow(clippy::disallowed_methods)]

mod confine;
mod probe;
mod seccomp;
mod sys;
pub mod wire;

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use self::sys::{Errno, check};
use self::wire::{Finished, Level, Message, Request, Run, SETUP_FAILED};

/// How long a stopping tool gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(300);
/// The signals the helper waits for instead of being interrupted by. SIGIO comes from the
/// control socket of an interactive run (see [`Hangup`]).
const WATCHED: [i32; 7] = [
    libc::SIGCHLD,
    libc::SIGIO,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
];

/// The helper binary's whole `main`.
pub fn main() -> ! {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--escape-probe") => probe::run(&args[2..]),
        Some(HOLD_NAMESPACES) => hold_namespaces(),
        _ => {}
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
            ctl.send(&failure.into());
            sys::exit(SETUP_FAILED)
        }
    }
}

/// The argument that makes the helper hold namespaces for the runtime (see
/// `process::host::SharedNamespaces`).
pub(crate) const HOLD_NAMESPACES: &str = "--hold-namespaces";

/// Enters a new network namespace, then a new user namespace, says `ready`, and stays until its
/// standard input closes, while the runtime writes the user namespace's id maps and opens both.
fn hold_namespaces() -> ! {
    let entered = check(unsafe { libc::unshare(libc::CLONE_NEWNET) })
        .and_then(|_| check(unsafe { libc::unshare(libc::CLONE_NEWUSER) }));
    if let Err(e) = entered {
        eprintln!("tw-sandbox-helper: cannot hold namespaces: {e}");
        sys::exit(SETUP_FAILED)
    }
    println!("ready");
    let mut buf = [0u8; 64];
    while matches!(sys::read(0, &mut buf), Ok(n) if n > 0) {}
    sys::exit(0)
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

impl From<Failure> for Message {
    /// How the runtime hears of it.
    fn from(f: Failure) -> Self {
        Message::SetupFailed {
            step: f.step.to_owned(),
            error: f.error,
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
    let (req, fds) = read_request(ctl).at("reading the request")?;
    let stdin = tool_stdin(ctl, &req, &fds)?;
    check(unsafe { libc::setsid() }).at("starting a session")?;
    // Nobody, the tool included, may read this process's memory or descriptors.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
        .at("prctl(PR_SET_DUMPABLE)")?;
    sys::watch_signals(&WATCHED).at("blocking signals")?;
    let hangup = Hangup::watch(ctl, &req)?;
    if req.pooled && (req.stdin || req.stdin_fd.is_some() || req.stop_on_close) {
        return Err(Failure::new(
            "reading the request",
            "a helper made ahead runs only batch runs without standard input",
        ));
    }
    match req.level {
        Level::Standard => {
            drop(fds);
            check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
                .at("prctl(PR_SET_CHILD_SUBREAPER)")?;
            let started = if req.pooled {
                // Confined as for its tool, then waiting for the run that names it.
                confine_self(&req)?;
                ctl.send(&Message::Ready);
                let Some(run) = read_run(ctl)? else {
                    return Ok(0);
                };
                start(&run.program, &run.argv, Some(&run.env), &run.cwd, &stdin)
            } else {
                spawn_tool(&req, &stdin)
            };
            let tool = match started {
                Ok(pid) => pid,
                Err(m) => {
                    ctl.send(&m);
                    return Ok(SETUP_FAILED);
                }
            };
            // The tool holds its stdin now; a pipe's writer must see EPIPE once the tool is gone.
            drop(stdin);
            ctl.send(&Message::Started);
            let finished = supervise(tool, Reaper::Subreaper, hangup);
            ctl.send(&Message::Finished(finished));
            Ok(exit_code(&finished))
        }
        Level::Strict | Level::Restricted => {
            let listener = confine::enter_namespaces(&req, &fds)?;
            drop(fds);
            if let (Some(listener), Some(port)) = (listener, req.proxy_port) {
                // Handed over before init is forked, so nothing in the sandbox holds it.
                sys::send_with_fds(
                    ctl.0.as_raw_fd(),
                    &wire::encode_message(&Message::Listening { port }),
                    &[listener.as_raw_fd()],
                )
                .at("handing the egress port to the runtime")?;
            }
            match unsafe { libc::fork() } {
                -1 => Err(Failure::new("forking the namespace's init", Errno::last())),
                0 => {
                    let init = if req.pooled {
                        drop(stdin);
                        pooled_init(ctl, &req)
                    } else {
                        namespace_init(ctl, &req, stdin)
                    };
                    let code = match init {
                        Ok(code) => code,
                        Err(failure) => {
                            ctl.send(&failure.into());
                            SETUP_FAILED
                        }
                    };
                    sys::exit(code)
                }
                init => {
                    drop(stdin);
                    Ok(relay(init, hangup))
                }
            }
        }
    }
}

/// The request, and the descriptors sent with its first bytes.
fn read_request(ctl: &Control) -> io::Result<(Request, Vec<OwnedFd>)> {
    let mut len = [0u8; 4];
    let (n, fds) = sys::recv_with_fds(ctl.0.as_raw_fd(), &mut len)?;
    (&*ctl).read_exact(&mut len[n..])?;
    let req = wire::read_body(u32::from_le_bytes(len), &mut &*ctl)?;
    Ok((req, fds))
}

/// The tool's standard input: the pipe sent with the request (an interactive run), what
/// follows the request on the socket, in a memory file, or `/dev/null`.
fn tool_stdin(ctl: &Control, req: &Request, fds: &[OwnedFd]) -> Step<OwnedFd> {
    if let Some(i) = req.stdin_fd {
        return fds
            .get(i)
            .ok_or_else(|| Failure::new("receiving the tool's stdin", "no descriptor was sent"))?
            .try_clone()
            .at("receiving the tool's stdin");
    }
    if !req.stdin {
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
fn namespace_init(ctl: &Control, req: &Request, stdin: OwnedFd) -> Step<i32> {
    enter_init(req)?;
    let started = spawn_tool(req, &stdin);
    Ok(supervise_init(ctl, started, stdin))
}

/// Pid 1 of a pooled helper's namespace (see [`Request::pooled`]): it confines itself exactly as
/// [`namespace_init`] does before a tool starts, says [`Message::Ready`], and waits for its
/// [`Run`] (see [`read_run`]). (At standard the helper itself does the same.)
fn pooled_init(ctl: &Control, req: &Request) -> Step<i32> {
    enter_init(req)?;
    confine_self(req)?;
    ctl.send(&Message::Ready);
    let Some(run) = read_run(ctl)? else {
        return Ok(0);
    };
    let stdin = sys::open_dev_null().at("opening /dev/null")?;
    let started = start(&run.program, &run.argv, Some(&run.env), &run.cwd, &stdin);
    Ok(supervise_init(ctl, started, stdin))
}

/// A pooled helper's [`Run`], once it comes; `None` when the runtime closed the socket first (a
/// pool dropped, a runtime gone): nothing is run then.
fn read_run(ctl: &Control) -> Step<Option<Run>> {
    let mut len = [0u8; 4];
    match (&*ctl).read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Failure::new("reading the run", e)),
    }
    let run: Run = wire::read_body(u32::from_le_bytes(len), &mut &*ctl).at("reading the run")?;
    Ok(Some(run))
}

/// What init does before anything else: dies with the helper, mounts the namespace's `/proc`
/// and drops to the sandbox uid when the runtime is root.
fn enter_init(req: &Request) -> Step<()> {
    // If the helper above dies, so does init, and with it the whole namespace.
    die_with_parent()?;
    confine::init_namespace(req)?;
    if let Some((uid, gid)) = req.run_as {
        sys::drop_to(uid, gid).at("switching to the sandbox uid")?;
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
            .at("prctl(PR_SET_DUMPABLE)")?;
        // A change of uid clears the parent-death signal (prctl(2)): armed again, or a helper
        // killed from outside would leave init, and the tool, running.
        die_with_parent()?;
    }
    Ok(())
}

fn die_with_parent() -> Step<()> {
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })
        .at("prctl(PR_SET_PDEATHSIG)")
        .map(drop)
}

/// Init's part once the tool is started (or could not be: that is reported and ends init):
/// lets go of the tool's stdin, reports the start, waits for the tool and reports how it ended.
/// The helper above watches the socket and passes a hangup down as SIGTERM.
fn supervise_init(ctl: &Control, started: Result<libc::pid_t, Message>, stdin: OwnedFd) -> i32 {
    drop(stdin);
    let tool = match started {
        Ok(pid) => pid,
        Err(m) => {
            ctl.send(&m);
            return SETUP_FAILED;
        }
    };
    ctl.send(&Message::Started);
    let finished = supervise(tool, Reaper::Init, Hangup(None));
    ctl.send(&Message::Finished(finished));
    exit_code(&finished)
}

/// Starts the tool. The caller (the helper at standard, the namespace's init above it) first
/// confines itself: limits, `no_new_privs` and, at strict, Landlock and seccomp, all of which the
/// tool inherits; then the tool is started with `posix_spawn` (through std), so no copy of this
/// process is made. A failure is the message to report.
fn spawn_tool(req: &Request, stdin: &OwnedFd) -> Result<libc::pid_t, Message> {
    confine_self(req)?;
    start(&req.program, &req.argv, None, &req.cwd, stdin)
}

/// Confines this process the way the tool will be: only stdin, stdout and stderr cross into
/// it, the limits, `no_new_privs` and, at strict, Landlock and seccomp.
fn confine_self(req: &Request) -> Step<()> {
    sys::cloexec_from(3).at("close_range")?;
    sys::set_limits(&req.limits).at("setting resource limits")?;
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
        .at("prctl(PR_SET_NO_NEW_PRIVS)")?;
    if req.level != Level::Standard {
        confine::Plan::new(req)
            .at("preparing the confinement")?
            .apply()?;
    }
    Ok(())
}

/// Enters `cwd` and starts `program` (see [`sys::spawn`]), in this process's environment unless
/// `env` gives one.
fn start(
    program: &std::path::Path,
    argv: &[String],
    env: Option<&[String]>,
    cwd: &std::path::Path,
    stdin: &OwnedFd,
) -> Result<libc::pid_t, Message> {
    sys::chdir(cwd).at("entering the working directory")?;
    let argv0 = [program.to_string_lossy().into_owned()];
    let argv = if argv.is_empty() { &argv0[..] } else { argv };
    sys::spawn(program, argv, env, stdin.as_raw_fd()).map_err(|e| Message::ExecFailed {
        errno: e.0,
        error: format!(
            "cannot execute {}: {}",
            program.to_string_lossy(),
            io::Error::from_raw_os_error(e.0)
        ),
    })
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

/// The control socket of an interactive run, whose closing by the runtime is a stop request.
#[derive(Clone, Copy)]
struct Hangup(Option<RawFd>);

impl Hangup {
    /// Arms SIGIO on the control socket if the request asks for it (the signal is already
    /// blocked and waited for, so it cannot kill the helper). A runtime that is already gone
    /// gets nothing started.
    fn watch(ctl: &Control, req: &Request) -> Step<Self> {
        if !req.stop_on_close {
            return Ok(Self(None));
        }
        let fd = ctl.0.as_raw_fd();
        sys::notify_on_close(fd).at("watching the control socket")?;
        if sys::peer_closed(fd) {
            return Err(Failure::new(
                "watching the control socket",
                "the runtime closed it before the tool started",
            ));
        }
        Ok(Self(Some(fd)))
    }

    /// Whether the runtime has closed its end. The tool may send SIGIO too; only the socket's
    /// state counts.
    fn closed(self) -> bool {
        self.0.is_some_and(sys::peer_closed)
    }
}

/// Waits for the tool, forwarding a stop request as SIGTERM then SIGKILL, then stops and reaps
/// everything the tool left behind, and measures the whole tree.
fn supervise(tool: libc::pid_t, reaper: Reaper, hangup: Hangup) -> Finished {
    // Stop requests come from the helper above the namespace (seen as pid 0 from inside it),
    // or at standard from the runtime that spawned the helper.
    let stopper = match reaper {
        Reaper::Init => 0,
        Reaper::Subreaper => unsafe { libc::getppid() },
    };
    let mut status = None;
    let mut kill_at: Option<Instant> = None;
    while status.is_none() {
        let timeout = kill_at.map(|at| at.saturating_duration_since(Instant::now()));
        match sys::wait_signal(&WATCHED, timeout) {
            Some(sys::Caught {
                signo: libc::SIGCHLD,
                ..
            }) => {
                for (pid, st) in sys::reap_ready() {
                    if pid == tool {
                        status = Some(st);
                    }
                }
            }
            Some(sys::Caught {
                signo: libc::SIGIO, ..
            }) => {
                // SIGIO carries no sender (its siginfo holds the poll band instead).
                if hangup.closed() && kill_at.is_none() {
                    reaper.signal_all(tool, libc::SIGTERM);
                    kill_at = Some(Instant::now() + GRACE);
                }
            }
            Some(sys::Caught { signo, sender }) => {
                // Only whoever started the run may stop it: the tool signalling its init or its
                // helper is ignored, so it cannot cut short the cleanup of what it leaves.
                if signo != libc::SIGPIPE && sender == stopper && kill_at.is_none() {
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
    // (The common case, no child left, costs one syscall rather than a walk of /proc.)
    let mut leftovers = 0u32;
    while sys::has_children() {
        reaper.signal_all(tool, libc::SIGKILL);
        if sys::reap_one_blocking().is_some() {
            leftovers += 1;
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

/// The helper above the namespace: waits for init and passes stop requests (a signal from the
/// runtime, or the runtime closing the socket of an interactive run) down to it.
fn relay(init: libc::pid_t, hangup: Hangup) -> i32 {
    let runtime = unsafe { libc::getppid() };
    loop {
        match sys::wait_signal(&WATCHED, None) {
            Some(sys::Caught {
                signo: libc::SIGCHLD,
                ..
            }) => {
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
            // SIGIO carries no sender (its siginfo holds the poll band instead).
            Some(sys::Caught {
                signo: libc::SIGIO, ..
            }) if hangup.closed() => unsafe {
                libc::kill(init, libc::SIGTERM);
            },
            Some(sys::Caught { signo, sender })
                if !matches!(signo, libc::SIGPIPE | libc::SIGIO) && sender == runtime =>
            unsafe {
                libc::kill(init, signo);
            },
            _ => {}
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

/// Sends a request frame with descriptors attached (for the runtime side of [`wire`]).
pub(crate) fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    sys::send_with_fds(sock, data, fds)
}

/// Receives bytes and any descriptors attached to them (for the runtime side of [`wire`]).
pub(crate) fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    sys::recv_with_fds(sock, buf)
}

/// The seccomp program for a request (see `confine::compiled_seccomp`).
pub(crate) fn compiled_seccomp() -> Result<Vec<u64>, String> {
    confine::compiled_seccomp()
}

pub(crate) use confine::MIN_LANDLOCK_ABI;

/// The Landlock ABI version this kernel offers, if any.
pub(crate) fn landlock_abi() -> Option<i64> {
    sys::landlock_abi()
}

/// The raw file descriptor as an owned one, for descriptors this process just created.
fn owned(fd: RawFd) -> OwnedFd {
    unsafe { OwnedFd::from_raw_fd(fd) }
}
