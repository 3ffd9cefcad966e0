//! Interactive process tests with real servers: that each line is answered while the process
//! runs, that the sandbox holds for as long as it runs, and that nothing it starts outlives a
//! stop, a dropped handle or a runtime that went away.

use std::os::unix::fs::PermissionsExt;
use std::time::Instant as StdInstant;

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::ChildStdout;

use super::tests::alive;
use super::*;

/// Every level that runs a process.
const LEVELS: [IsolationLevel; 3] = [
    IsolationLevel::Standard,
    IsolationLevel::Strict,
    IsolationLevel::Restricted,
];
/// Longer than any answer may take; an answer that never comes fails the test instead of
/// hanging it.
const PATIENCE: Duration = Duration::from_secs(20);
/// Answers each line as it arrives.
const ECHO: &str = r#"while read l; do echo "got:$l"; done"#;
/// Ignores SIGTERM, starts a child that ignores it too, says both pids, and waits.
const STUBBORN: &str = r#"trap '' TERM; sleep 1000 & echo "$$ $!"; wait"#;

fn sh(dir: &Path, level: IsolationLevel, script: &str) -> ProcessSpec {
    let mut spec = ProcessSpec::new("sh", dir);
    spec.args = vec!["-c".to_owned(), script.to_owned()];
    spec.isolation = level;
    spec
}

/// A running server and its two streams.
struct Session {
    handle: Interactive,
    stdin: Option<pipe::Sender>,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    async fn start(sandbox: &Sandbox, spec: ProcessSpec) -> Self {
        let mut handle = timeout(sandbox.spawn_interactive(spec)).await.unwrap();
        let stdin = handle.take_stdin();
        let stdout = BufReader::new(handle.take_stdout().unwrap());
        assert!(handle.take_stdin().is_none() && handle.take_stdout().is_none());
        Self {
            handle,
            stdin,
            stdout,
        }
    }

    /// Sends one line and returns the one line that answers it.
    async fn ask(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        timeout(stdin.write_all(format!("{line}\n").as_bytes()))
            .await
            .unwrap();
        self.line().await
    }

    /// The next line of output, without its newline; empty at EOF.
    async fn line(&mut self) -> String {
        let mut line = String::new();
        timeout(self.stdout.read_line(&mut line)).await.unwrap();
        line.trim_end_matches('\n').to_owned()
    }

    /// The tool's pid and its child's, as [`STUBBORN`] says them.
    async fn stubborn_pids(&mut self) -> (u32, u32) {
        let line = self.line().await;
        let (tool, child) = line.split_once(' ').unwrap();
        (tool.parse().unwrap(), child.parse().unwrap())
    }
}

async fn timeout<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("no answer within {PATIENCE:?}"))
}

/// The helper `pid` and every process below it.
fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while let Some(&p) = out.get(i) {
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Which of `pids` are still running `within` from now.
fn survivors_after(pids: &[u32], within: Duration) -> Vec<u32> {
    let deadline = StdInstant::now() + within;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || StdInstant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes lines one at a time and reads each answer before the next line is sent, then closes
/// the input: the server ends by itself, with status 0.
async fn check_echo(level: IsolationLevel) {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let mut s = Session::start(&sandbox, sh(dir.path(), level, ECHO)).await;
    // The runtime moves handles into tasks of their own.
    fn sendable<T: Send + 'static>(_: &T) {}
    sendable(&s.handle);
    assert_eq!(s.handle.isolation(), level);
    assert!(s.handle.sandbox_id().starts_with(level.as_str()));
    let mut answers = Vec::new();
    for i in 0..5 {
        answers.push(s.ask(&format!("line {i}")).await);
    }
    assert_eq!(
        answers,
        [
            "got:line 0",
            "got:line 1",
            "got:line 2",
            "got:line 3",
            "got:line 4"
        ]
    );
    drop(s.stdin.take());
    assert_eq!(s.line().await, "", "stdout ends with the server");
    let ended = timeout(s.handle.wait()).await.unwrap();
    assert_eq!(
        (
            ended.exit,
            ended.stopped,
            ended.stderr_tail,
            ended.isolation
        ),
        (
            ExitInfo {
                code: Some(0),
                signal: None
            },
            false,
            Vec::new(),
            level
        )
    );
}

#[tokio::test]
async fn an_echo_server_answers_each_line_while_it_runs_at_standard() {
    check_echo(IsolationLevel::Standard).await;
}

#[tokio::test]
async fn an_echo_server_answers_each_line_while_it_runs_at_strict() {
    check_echo(IsolationLevel::Strict).await;
}

#[tokio::test]
async fn an_echo_server_answers_each_line_while_it_runs_at_restricted() {
    check_echo(IsolationLevel::Restricted).await;
}

/// The server of the containment test: `read PATH` and `write PATH` are tried, and each answer
/// says whether it worked, with the error if not.
const FILE_SERVER: &str = r#"while read op path; do
  case $op in
    read) if out=$(cat "$path" 2>&1); then echo "read ok: $out"; else echo "read denied: $out"; fi ;;
    write) if err=$( { echo pwned > "$path"; } 2>&1 ); then echo "write ok"; else echo "write denied: $err"; fi ;;
  esac
done"#;

#[tokio::test]
async fn a_strict_server_cannot_read_or_write_outside_its_view_for_as_long_as_it_runs() {
    // As in tests/escapes.rs: outside `/tmp` (private in the sandbox) and open to any uid, so
    // only the sandbox stands between the server and the secret.
    let root = tempfile::Builder::new()
        .prefix("tw-interactive-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let chmod = |p: &Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(root.path(), 0o755);
    let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    chmod(&outside, 0o777);
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "tw-interactive-secret").unwrap();
    chmod(&secret, 0o666);
    std::fs::write(ws.join("inside.txt"), "inside").unwrap();
    let (secret_s, ws_s) = (secret.display(), ws.display());
    let planted = outside.join("planted");

    let sandbox = Sandbox::new();
    let mut s = Session::start(&sandbox, sh(&ws, IsolationLevel::Strict, FILE_SERVER)).await;
    assert_eq!(
        s.ask(&format!("read {ws_s}/inside.txt")).await,
        "read ok: inside"
    );
    // `/var` is hidden in the sandbox (an empty directory over it), and Landlock would refuse
    // the read if it were not.
    let answer = s.ask(&format!("read {secret_s}")).await;
    assert!(
        [
            format!("read denied: cat: {secret_s}: No such file or directory"),
            format!("read denied: cat: {secret_s}: Permission denied"),
        ]
        .contains(&answer),
        "{answer}"
    );
    assert_eq!(s.ask(&format!("write {ws_s}/made.txt")).await, "write ok");
    for target in [&secret, &planted] {
        let answer = s.ask(&format!("write {}", target.display())).await;
        assert!(
            answer.starts_with("write denied: ")
                && (answer.ends_with("Permission denied")
                    || answer.ends_with("Read-only file system")
                    || answer.ends_with("Directory nonexistent")),
            "{answer}"
        );
    }
    // Still the same server, still answering.
    assert_eq!(
        s.ask("read /etc/shadow").await,
        "read denied: cat: /etc/shadow: Permission denied"
    );
    let ended = s.handle.stop().await.unwrap();
    assert!(ended.stopped, "{ended:?}");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "tw-interactive-secret"
    );
    assert!(!planted.exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "pwned\n"
    );
}

#[tokio::test]
async fn stop_ends_a_server_that_ignores_sigterm_and_its_child() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = Session::start(&sandbox, sh(dir.path(), level, STUBBORN)).await;
        let (tool, child) = s.stubborn_pids().await;
        let members = tree(s.handle.pid());
        // helper, tool and child at standard; helper, init, tool and child at strict.
        assert_eq!(
            members.len(),
            if level == IsolationLevel::Standard {
                3
            } else {
                4
            }
        );
        if level == IsolationLevel::Standard {
            assert_eq!(members[1..], [tool, child]);
        }
        let ended = timeout(s.handle.stop()).await.unwrap();
        let left: Vec<u32> = members.iter().copied().filter(|p| alive(*p)).collect();
        assert_eq!(left, Vec::<u32>::new(), "{level}: {ended:?}");
        assert!(ended.stopped, "{level}: {ended:?}");
        assert_eq!(ended.exit.signal, Some(libc::SIGKILL), "{level}: {ended:?}");
    }
}

// Single-threaded on purpose: after the drop the test blocks its only thread, so the supervisor
// task cannot run and the drop itself must set the stop going.
#[tokio::test(flavor = "current_thread")]
async fn dropping_the_handle_stops_the_whole_tree() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = Session::start(&sandbox, sh(dir.path(), level, STUBBORN)).await;
        s.stubborn_pids().await;
        let members = tree(s.handle.pid());
        assert!(members.len() >= 3, "{level}: {members:?}");
        drop(s);
        assert_eq!(
            survivors_after(&members, Duration::from_secs(2)),
            Vec::<u32>::new(),
            "{level}"
        );
    }
}

#[tokio::test]
async fn the_tree_is_stopped_when_the_runtime_goes_away() {
    // What a runtime that dies leaves: the control socket closed, and nobody to signal. The
    // server's input and output stay open here, so only the socket can tell the helper.
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        sandbox.check(level).await.unwrap();
        let spec = sh(dir.path(), level, STUBBORN);
        let prepared = sandbox.prepare(&spec, Mode::Interactive).await.unwrap();
        let (stdin, theirs) = pipe::pipe().unwrap();
        let Launched {
            mut child,
            ctl,
            mut guard,
            cgroup,
            pid,
            ..
        } = sandbox
            .launch(&spec, prepared, Some(theirs.into_blocking_fd().unwrap()))
            .await
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        timeout(stdout.read_line(&mut line)).await.unwrap();
        let members = tree(pid);
        assert!(members.len() >= 3, "{level}: {members:?} after {line:?}");
        guard.armed = false;
        drop(ctl);
        assert_eq!(
            survivors_after(&members, Duration::from_secs(5)),
            Vec::<u32>::new(),
            "{level}"
        );
        let status = timeout(child.wait()).await.unwrap();
        assert_eq!(status.code(), Some(128 + libc::SIGKILL), "{level}");
        drop((stdin, stdout, cgroup));
    }
}

#[tokio::test]
async fn a_program_that_cannot_start_is_an_error_not_a_hang() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for level in LEVELS {
        // Not in PATH: found out before anything starts.
        let spec = ProcessSpec {
            isolation: level,
            ..ProcessSpec::new("no-such-program-tw", dir.path())
        };
        let e = timeout(sandbox.spawn_interactive(spec)).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "could not start program \"no-such-program-tw\": not found in PATH \
             /usr/local/bin:/usr/bin:/bin",
            "{level}"
        );
        // A path the helper tries to execute, inside the sandbox.
        let spec = ProcessSpec {
            isolation: level,
            ..ProcessSpec::new("/nonexistent/server", dir.path())
        };
        let e = timeout(sandbox.spawn_interactive(spec)).await.unwrap_err();
        match e {
            SandboxError::Spawn { program, source } => {
                assert_eq!(program, "/nonexistent/server", "{level}");
                assert_eq!(source.kind(), io::ErrorKind::NotFound, "{level}: {source}");
            }
            other => panic!("{level}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn none_and_bytes_for_stdin_are_refused() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let mut spec = sh(dir.path(), IsolationLevel::None, "touch ran");
    let e = sandbox.spawn_interactive(spec.clone()).await.unwrap_err();
    assert!(
        matches!(
            e,
            SandboxError::Unsupported {
                level: IsolationLevel::None,
                ..
            }
        ),
        "{e:?}"
    );
    spec.isolation = IsolationLevel::Standard;
    spec.stdin = Some(b"input".to_vec());
    let e = sandbox.spawn_interactive(spec).await.unwrap_err();
    assert!(matches!(e, SandboxError::InvalidSpec(_)), "{e:?}");
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn megabytes_of_stderr_neither_block_the_server_nor_grow_its_tail() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let script = "yes 0123456789abcdef | head -c 8388608 >&2; echo flooded; read l; \
                  echo last words >&2";
    let mut spec = sh(dir.path(), IsolationLevel::Standard, script);
    spec.max_output_bytes = 4096;
    let mut s = Session::start(&sandbox, spec).await;
    assert_eq!(s.line().await, "flooded");
    drop(s.stdin.take());
    let ended = timeout(s.handle.wait()).await.unwrap();
    assert_eq!(ended.exit.code, Some(0), "{ended:?}");
    let mut written: Vec<u8> = b"0123456789abcdef\n".repeat(8388608 / 17 + 1);
    written.truncate(8388608);
    written.extend_from_slice(b"last words\n");
    assert!(ended.stderr_truncated);
    assert_eq!(
        String::from_utf8_lossy(&ended.stderr_tail),
        String::from_utf8_lossy(&written[written.len() - 4096..])
    );
}

#[tokio::test]
async fn stdout_ends_when_the_server_exits_by_itself() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let spec = sh(dir.path(), level, "echo hello; echo oops >&2; exit 7");
        let mut s = Session::start(&sandbox, spec).await;
        let mut out = String::new();
        timeout(s.stdout.read_to_string(&mut out)).await.unwrap();
        assert_eq!(out, "hello\n");
        let ended = timeout(s.handle.wait()).await.unwrap();
        assert_eq!(
            (ended.exit.code, ended.stopped, ended.stderr_tail.as_slice()),
            (Some(7), false, &b"oops\n"[..]),
            "{level}"
        );
        assert!(ended.metrics.cpu_time.is_some(), "{ended:?}");
        // Asked again, the answer is the same; stopping an ended server changes nothing.
        assert_eq!(s.handle.wait().await.unwrap(), ended);
        assert_eq!(s.handle.stop().await.unwrap(), ended);
        // Writing to a server that is gone fails instead of blocking.
        let e = s
            .stdin
            .unwrap()
            .write_all(&vec![b'x'; 1 << 20])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
