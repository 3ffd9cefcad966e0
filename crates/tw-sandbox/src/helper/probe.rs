//! The escape probe: the helper binary run as a tool inside a strict sandbox, trying the escapes
//! a confined tool must not manage. The runtime's start-up self-test and `toolwarden sandbox
//! doctor` run it; each attempt prints one JSON line saying whether it was contained.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde::Serialize;

use super::sys::{self, Errno, cstring};

#[derive(Serialize)]
struct Case<'a> {
    case: &'a str,
    contained: bool,
    detail: String,
}

fn report(case: &str, attempt: Result<String, String>) {
    // An attempt that errors was contained; one that succeeds is an escape.
    let (contained, detail) = match attempt {
        Ok(what) => (false, what),
        Err(why) => (true, why),
    };
    let line = serde_json::to_string(&Case {
        case,
        contained,
        detail,
    })
    .unwrap_or_default();
    println!("{line}");
}

fn errno_result(ret: i64, success: &str) -> Result<String, String> {
    if ret == -1 {
        Err(Errno::last().to_string())
    } else {
        Ok(success.to_owned())
    }
}

/// `args`: the canary file to read, a path to create outside the workspace, a loopback port
/// with a listener, and the runtime's pid.
pub(crate) fn run(args: &[String]) -> ! {
    let [canary, plant, port, runtime_pid] = args else {
        eprintln!("usage: tw-sandbox-helper --escape-probe CANARY PLANT PORT PID");
        sys::exit(2)
    };
    report(
        "read a file outside the workspace",
        std::fs::read_to_string(canary)
            .map(|s| format!("read {} bytes of {canary}", s.len()))
            .map_err(|e| e.to_string()),
    );
    report(
        "write a file outside the workspace",
        std::fs::File::create(plant)
            .and_then(|mut f| f.write_all(b"escaped"))
            .map(|()| format!("created {plant}"))
            .map_err(|e| e.to_string()),
    );
    // A world-readable file the allowlist leaves out: only Landlock stands in the way.
    let unlisted = [
        "/etc/hostname",
        "/etc/fstab",
        "/etc/issue",
        "/etc/debian_version",
    ]
    .into_iter()
    .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()));
    if let Some(path) = unlisted {
        report(
            "read a world-readable file outside the allowlist",
            std::fs::read(path)
                .map(|b| format!("read {} bytes of {path}", b.len()))
                .map_err(|e| format!("{path}: {e}")),
        );
    }
    report(
        "read /etc/shadow",
        std::fs::File::open("/etc/shadow")
            .and_then(|mut f| f.read(&mut [0u8; 16]))
            .map(|n| format!("read {n} bytes"))
            .map_err(|e| e.to_string()),
    );
    let addr = format!("127.0.0.1:{port}")
        .parse::<SocketAddr>()
        .map_err(|e| e.to_string());
    report(
        "connect to a listener on 127.0.0.1",
        addr.and_then(|a| {
            TcpStream::connect_timeout(&a, Duration::from_secs(1))
                .map(|_| format!("connected to {a}"))
                .map_err(|e| e.to_string())
        }),
    );
    let pid = runtime_pid.parse::<libc::pid_t>().unwrap_or(0);
    report(
        "signal the runtime's pid",
        errno_result(
            i64::from(unsafe { libc::kill(pid, 0) }),
            "kill(runtime, 0) succeeded",
        ),
    );
    report(
        "ptrace the namespace's init",
        errno_result(
            unsafe { libc::ptrace(libc::PTRACE_ATTACH, 1, 0, 0) },
            "attached to pid 1",
        ),
    );
    report(
        "create a user namespace",
        errno_result(
            i64::from(unsafe { libc::unshare(libc::CLONE_NEWUSER) }),
            "unshare(CLONE_NEWUSER) succeeded",
        ),
    );
    let target = cstring("/tmp").unwrap_or_default();
    report(
        "mount a filesystem",
        errno_result(
            i64::from(unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            }),
            "mounted a tmpfs",
        ),
    );
    let byte = b'x';
    report(
        "inject terminal input (TIOCSTI)",
        errno_result(
            i64::from(unsafe { libc::ioctl(0, libc::TIOCSTI, &byte) }),
            "TIOCSTI accepted",
        ),
    );
    report(
        "read /proc/1/root/etc/shadow",
        std::fs::read("/proc/1/root/etc/shadow")
            .map(|b| format!("read {} bytes", b.len()))
            .map_err(|e| e.to_string()),
    );
    sys::exit(0)
}
