//! Every byte the CLI prints goes through here, so a reader that stops reading ends the command
//! quietly, as it ends a Unix tool, instead of `println!`'s panic.
//!
//! Rust ignores SIGPIPE, so a closed pipe (`toolwarden tools list | head -1`) turns the next write
//! to stdout into EPIPE. The process must keep ignoring the signal: the runtime writes to sockets
//! and to the sandbox helper's pipes, where SIGPIPE would kill the CLI in the middle of a call and
//! lose its audit record. So EPIPE on stdout becomes the error [`Closed`], which `?` carries out of
//! the command like any other error: the command stops where it is, `main` closes the runtime
//! (every call already started writes its record first), and the process exits [`EXIT_CLOSED`]
//! without a word. `serve` whose URL line cannot be written shuts down as on SIGTERM.
//!
//! The exit status is 141, what a shell reports for a tool SIGPIPE ended (`cat`, `grep`, `git`):
//! scripts that check `PIPESTATUS` or use `pipefail` already treat it as "the reader went away",
//! and it does not claim, as 0 would, that everything was delivered and every call of a batch ran.
//!
//! Commands with calls in flight (`call`, `batch`, `mcp`) do not wait for their next print to
//! notice: [`cancel_when_closed`] watches stdout and cancels them the moment its reader goes,
//! through the token SIGINT and SIGTERM cancel, so each call still writes its audit record.
//!
//! Writing to stderr never fails a command: a diagnostic that cannot be shown has nowhere else
//! to go, and losing it must not change what the command did or how it exits.

use std::fmt;
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

/// The exit status of a command whose stdout was closed: 128 + SIGPIPE, as a shell reports it.
pub(crate) const EXIT_CLOSED: u8 = 141;

/// Stdout was closed by its reader; the command ends quietly.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for Closed {}

/// Set once stdout's reader is known to be gone.
static GONE: AtomicBool = AtomicBool::new(false);

/// Whether stdout's reader is known to be gone (a write failed with EPIPE, or the watcher saw it).
pub(crate) fn is_gone() -> bool {
    GONE.load(Ordering::Relaxed)
}

/// Whether `e` is (or was caused by) stdout being closed.
pub(crate) fn is_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Closed>())
}

/// What a failed write to stdout means: [`Closed`] for a reader that went away, else a real
/// error (a full disk behind `> file`) that is reported.
pub(crate) fn stdout_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        GONE.store(true, Ordering::Relaxed);
        Closed.into()
    } else {
        anyhow::Error::new(e).context("cannot write to stdout")
    }
}

/// Writes to stdout and flushes, so a closed pipe is noticed at the print that hit it.
pub(crate) fn stdout(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// Writes to stderr; a failure is ignored (see the module's documentation).
pub(crate) fn stderr(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// Whether stdout's reader has gone away, waiting for it up to `timeout` (`None`: for ever):
/// poll(2) asked for no event still reports POLLERR (a pipe with no reader left) and POLLHUP (a
/// hung-up terminal or socket), and never for stdout that cannot tell (a file).
fn reader_gone(timeout: Option<&rustix::event::Timespec>) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    loop {
        match poll(&mut fds, timeout) {
            Ok(_) => {
                let gone = PollFlags::ERR | PollFlags::HUP;
                return fds.iter().any(|f| f.revents().intersects(gone));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Whether stdout's reader is gone now.
pub(crate) fn reader_gone_now() -> bool {
    let gone = reader_gone(Some(&rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    }));
    if gone {
        GONE.store(true, Ordering::Relaxed);
    }
    gone
}

/// Cancels `token` (the one SIGINT and SIGTERM cancel) when stdout's reader goes away, and
/// returns a token that says whether that happened, so a command that prints nothing more (an
/// MCP session) can still end as [`Closed`]. The watch is a thread of its own blocked in
/// poll(2), which the process leaves behind when it exits (a blocking task would hold up the
/// async runtime's shutdown).
pub(crate) fn cancel_when_closed(token: &CancellationToken) -> CancellationToken {
    let closed = CancellationToken::new();
    let (token, flag) = (token.clone(), closed.clone());
    let watcher = std::thread::Builder::new()
        .name("stdout-watch".to_owned())
        .spawn(move || {
            if !reader_gone(None) {
                return;
            }
            GONE.store(true, Ordering::Relaxed);
            if !token.is_cancelled() {
                tracing::info!("stdout's reader went away; cancelling as on SIGINT");
                flag.cancel();
                token.cancel();
            }
        });
    if let Err(e) = watcher {
        tracing::warn!(error = %e, "stdout is not watched; a closed pipe is noticed when written");
    }
    closed
}

/// `print!` that returns `Err(Closed)` (use `?`) instead of panicking on a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!($($arg)*))
    };
}

/// `println!` that returns `Err(Closed)` (use `?`) instead of panicking on a closed stdout.
macro_rules! outln {
    () => {
        $crate::out::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_ends_quietly_and_other_write_errors_are_reported() {
        let got: Vec<(bool, String)> = [32, 28, 5]
            .into_iter()
            .map(|errno| {
                let e = stdout_error(io::Error::from_raw_os_error(errno));
                (is_closed(&e), format!("{e:#}"))
            })
            .collect();
        assert_eq!(
            got,
            [
                (true, "stdout was closed by its reader".to_owned()),
                (
                    false,
                    "cannot write to stdout: No space left on device (os error 28)".to_owned()
                ),
                (
                    false,
                    "cannot write to stdout: Input/output error (os error 5)".to_owned()
                ),
            ]
        );
    }
}
