//! What the runtime and the sandbox helper say to each other over the socket that is the helper's
//! standard input: one request frame (a length-prefixed JSON [`Request`], with descriptors
//! attached to its first bytes) followed by the tool's standard input, and back a stream of
//! newline-separated JSON [`Message`]s: [`Message::Started`] once the tool runs, then the outcome.
//! A socket rather than argv, so nothing about a run shows in `ps`, and so the helper can report
//! setup failures and metrics on a channel the tool cannot write to.
//!
//! An interactive run (`Sandbox::spawn_interactive`) differs in two fields: the tool's standard
//! input is a pipe sent with the frame ([`Request::stdin_fd`]) instead of bytes after it, and the
//! runtime keeps its end of the socket open for as long as the tool may run
//! ([`Request::stop_on_close`]): its closing, when the runtime drops the run or dies, is a stop
//! request, so a tool never outlives the process that talks to it.

use std::io::{self, Read};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::process::ResourceLimits;

/// The largest request frame the helper accepts.
pub const MAX_REQUEST: u32 = 1 << 20;

/// The port a tool's egress proxy listens on inside its network namespace.
pub const PROXY_PORT: u16 = 3128;

/// Exit status the helper uses when it could not set up the sandbox (the reason is on the
/// socket). Borrowed from `env`/`bwrap`/`docker`, which use 125 for "the wrapper failed".
pub const SETUP_FAILED: i32 = 125;

/// How much isolation to build. Mirrors the tool definition's levels that run a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Session, rlimits, scrubbed environment, subreaper cleanup.
    Standard,
    /// Standard plus namespaces, Landlock, seccomp.
    Strict,
    /// Strict with a read-only workspace.
    Restricted,
}

/// One run, as the runtime asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The isolation to build.
    pub level: Level,
    /// Absolute path of the program to execute.
    pub program: PathBuf,
    /// The full argv, `argv[0]` included.
    pub argv: Vec<String>,
    /// Working directory for the tool.
    pub cwd: PathBuf,
    /// Limits for the tool.
    pub limits: ResourceLimits,
    /// Paths the tool may read (and execute) but not change.
    pub read_only: Vec<PathBuf>,
    /// Paths the tool may read, change and execute.
    pub read_write: Vec<PathBuf>,
    /// The workspace paths among `read_only`: mounted read-only as well, since Landlock alone
    /// would let a read-write ancestor (a workspace under `/tmp`) grant writes beneath it.
    pub read_only_mounts: Vec<PathBuf>,
    /// Paths hidden from the tool (an empty read-only file or directory is mounted over them).
    pub masked: Vec<PathBuf>,
    /// Host directories replaced by an empty one (strict and stricter): every top-level
    /// directory the system allowlist does not need (`/home`, `/root`, `/run`, `/var`, ...), so
    /// what Landlock does not govern (connecting to a UNIX socket by path, `stat`) finds nothing
    /// there. Allowed paths beneath them (the workspace) are put back on top.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Whether the tool keeps the host's network (strict and stricter only).
    pub network: bool,
    /// When the runtime is root: the unprivileged uid and gid the tool runs as. The paths in
    /// `read_write` and `idmapped` are then mounted with their root-owned files shown as owned
    /// by that uid, so the tool can use its workspace and nothing else that root owns.
    pub run_as: Option<(u32, u32)>,
    /// Paths that get the id-mapped mount when `run_as` is set.
    pub idmapped: Vec<PathBuf>,
    /// Whether the tool's standard input follows the frame on the socket (otherwise it is
    /// `/dev/null`, or the pipe of `stdin_fd`).
    pub stdin: bool,
    /// Index, among the descriptors sent with the frame, of the read end of a pipe that is the
    /// tool's standard input for as long as it runs (an interactive run; `stdin` is then false).
    pub stdin_fd: Option<usize>,
    /// Whether the runtime's end of the socket closing means "stop the tool": the runtime keeps
    /// it open, and writes nothing more after the frame, for as long as the tool may run.
    pub stop_on_close: bool,
    /// Index, among the descriptors sent with the frame, of a user namespace to use for the
    /// id-mapped mounts (instead of creating one per run).
    pub userns_fd: Option<usize>,
    /// Index of a network namespace to join (instead of creating an empty one per run).
    pub netns_fd: Option<usize>,
    /// When set, the tool's network namespace is its own, with loopback up and a listener on
    /// `127.0.0.1:PORT` that the helper hands to the runtime ([`Message::Listening`]): the
    /// runtime's egress proxy is then the tool's only way out (strict and stricter only).
    #[serde(default)]
    pub proxy_port: Option<u16>,
    /// The seccomp program for strict and restricted, built by the runtime (one `u64` per BPF
    /// instruction).
    pub seccomp: Vec<u64>,
    /// A helper made ahead of its run (batch runs without standard input; see
    /// `process::pool`): it builds the whole sandbox (at strict and restricted namespaces,
    /// mounts, Landlock and seccomp; at every level the limits), says [`Message::Ready`], and
    /// only then waits for the [`Run`] that names the program. `program`, `argv`, `cwd` and
    /// `stdin` are then empty here.
    #[serde(default)]
    pub pooled: bool,
}

/// What a pooled helper (see [`Request::pooled`]) learns when its run comes: a second frame on
/// the socket. The tool's standard input is `/dev/null` (a run with input is built on the spot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Absolute path of the program to execute.
    pub program: PathBuf,
    /// The full argv, `argv[0]` included.
    pub argv: Vec<String>,
    /// Working directory for the tool.
    pub cwd: PathBuf,
    /// The tool's whole environment, as `NAME=value` (a helper made ahead has none of its own).
    pub env: Vec<String>,
}

/// What the helper reports back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// The sandbox is built and the tool is running (always the first message of a run that
    /// started; an interactive run waits for it before handing out the tool's streams).
    Started,
    /// A pooled helper's sandbox is built, confined and waiting for its [`Run`].
    Ready,
    /// The listener of [`Request::proxy_port`], inside the tool's network namespace, is
    /// attached to this message's first byte (sent before the tool starts).
    Listening {
        /// The port it listens on, on the namespace's 127.0.0.1.
        port: u16,
    },
    /// The sandbox could not be built; nothing ran.
    SetupFailed {
        /// Which step failed.
        step: String,
        /// The error, with what to do about it.
        error: String,
    },
    /// The sandbox was built but the program could not be executed in it.
    ExecFailed {
        /// The `errno` from `execve`.
        errno: i32,
        /// The error.
        error: String,
    },
    /// The tool's main process ended; everything it started has been stopped and reaped.
    Finished(Finished),
}

/// How the tool ended, and what its whole process tree used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// Exit status, if the main process exited.
    pub code: Option<i32>,
    /// Signal, if it was killed by one.
    pub signal: Option<i32>,
    /// User plus system CPU time of every process of the run, microseconds.
    pub cpu_time_us: u64,
    /// The largest resident set any single process of the run reached, bytes.
    pub peak_memory_bytes: u64,
    /// How many processes of the run were still alive when the main one ended, and were killed.
    pub killed_leftovers: u32,
}

/// Encodes a request (or a pooled helper's [`Run`]) as a frame.
pub fn encode_request<T: Serialize>(req: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(req).map_err(io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| *l <= MAX_REQUEST)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "request too large"))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Reads a request's (or a [`Run`]'s) body, given the length from its frame header.
pub fn read_body<T: serde::de::DeserializeOwned>(len: u32, r: &mut impl Read) -> io::Result<T> {
    if len > MAX_REQUEST {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("request frame of {len} bytes is larger than {MAX_REQUEST}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{e} (is tw-sandbox-helper from the same build as toolwarden? rebuild both with \
                 `cargo build -p tw-cli -p tw-sandbox --bins`)"
            ),
        )
    })
}

/// Encodes one message as a line.
pub fn encode_message(m: &Message) -> Vec<u8> {
    let mut line = serde_json::to_vec(m).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

/// Parses what the helper wrote: every well-formed line, in order. A line that does not parse
/// is skipped (it can only come from a helper killed mid-write).
pub fn parse_messages(bytes: &[u8]) -> Vec<Message> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}
