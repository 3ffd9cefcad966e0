//! Process runner tests with real children: what they see, what comes back, and that nothing they
//! start survives the call.

use std::os::unix::fs::PermissionsExt;
use std::time::Instant as StdInstant;

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::*;

/// What a test expects of a run, in a form that compares as one object.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Summary {
    outcome: &'static str,
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    stdout_truncated: bool,
    stderr_truncated: bool,
}

impl Summary {
    pub(super) fn exited(code: i32, stdout: &str, stderr: &str) -> Self {
        Self {
            outcome: "exited",
            code: Some(code),
            signal: None,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            stdout_truncated: false,
            stderr_truncated: false,
        }
    }

    pub(super) fn of(outcome: &RunOutcome) -> Self {
        let (name, o) = match outcome {
            RunOutcome::Exited(o) => ("exited", o),
            RunOutcome::TimedOut(o) => ("timed_out", o),
            RunOutcome::Cancelled(o) => ("cancelled", o),
        };
        Self {
            outcome: name,
            code: o.exit.code,
            signal: o.exit.signal,
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
        }
    }
}

pub(super) fn spec(dir: &TempDir, program: &str, args: &[&str]) -> ProcessSpec {
    let mut spec = ProcessSpec::new(program, dir.path());
    spec.args = args.iter().map(|a| (*a).to_owned()).collect();
    spec.timeout = Duration::from_secs(20);
    spec.max_output_bytes = 1024 * 1024;
    spec
}

fn sh(dir: &TempDir, script: &str) -> ProcessSpec {
    spec(dir, "sh", &["-c", script])
}

pub(super) async fn run(spec: ProcessSpec) -> RunOutcome {
    run_with(&Sandbox::new(), spec).await
}

async fn run_with(sandbox: &Sandbox, spec: ProcessSpec) -> RunOutcome {
    sandbox
        .run(spec, CancellationToken::new(), None)
        .await
        .unwrap()
}

/// Runs `spec` and compares the whole outcome with `expect`.
async fn check(spec: ProcessSpec, expect: Summary) -> RunOutcome {
    let outcome = run(spec).await;
    assert_eq!(Summary::of(&outcome), expect);
    outcome
}

/// Whether `pid` is a live process (zombies waiting for a reaper count as dead).
pub(super) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        }
        Err(_) => false,
    }
}

/// Whether `pid` is dead within a few seconds: SIGKILL is delivered asynchronously, so a
/// process signalled a moment ago may not have run its exit path yet on a busy machine.
pub(super) fn dies(pid: u32) -> bool {
    let deadline = StdInstant::now() + Duration::from_secs(5);
    while alive(pid) {
        if StdInstant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

fn read_pid(dir: &TempDir, name: &str) -> u32 {
    let deadline = StdInstant::now() + Duration::from_secs(5);
    loop {
        if let Ok(s) = std::fs::read_to_string(dir.path().join(name))
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        assert!(StdInstant::now() < deadline, "{name} was never written");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn exit_code_and_streams_are_captured_separately() {
    let dir = TempDir::new().unwrap();
    check(
        sh(&dir, "echo out; echo err >&2; exit 3"),
        Summary::exited(3, "out\n", "err\n"),
    )
    .await;
}

#[tokio::test]
async fn death_by_signal_is_reported() {
    let dir = TempDir::new().unwrap();
    check(
        sh(&dir, "echo before; kill -9 $$"),
        Summary {
            code: None,
            signal: Some(9),
            ..Summary::exited(0, "before\n", "")
        },
    )
    .await;
}

#[tokio::test]
async fn environment_is_scrubbed_to_the_base_and_the_spec() {
    let dir = TempDir::new().unwrap();
    let mut s = spec(&dir, "env", &[]);
    s.env.insert("TOOL_SETTING".into(), "on".into());
    let outcome = run(s).await;
    let mut lines: Vec<String> = String::from_utf8_lossy(&outcome.output().stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            format!("HOME={}", dir.path().display()),
            "LANG=C.UTF-8".to_owned(),
            "PATH=/usr/local/bin:/usr/bin:/bin".to_owned(),
            "TOOL_SETTING=on".to_owned(),
        ]
    );
    // The test process itself has a richer environment (cargo sets several variables), so the
    // comparison above could not pass if the parent's environment leaked through.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
}

#[tokio::test]
async fn spec_env_may_override_the_base_path() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(&dir, "echo \"$PATH\"; pwd");
    s.env.insert("PATH".into(), "/bin:/usr/bin".into());
    check(
        s,
        Summary::exited(0, &format!("/bin:/usr/bin\n{}\n", dir.path().display()), ""),
    )
    .await;
}

#[tokio::test]
async fn output_beyond_the_cap_is_drained_and_dropped() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(
        &dir,
        "head -c 10000000 /dev/zero | tr '\\0' x; echo done >&2",
    );
    s.max_output_bytes = 1000;
    s.timeout = Duration::from_secs(30);
    let outcome = check(
        s,
        Summary {
            stdout_truncated: true,
            ..Summary::exited(0, &"x".repeat(1000), "done\n")
        },
    )
    .await;
    assert_eq!(outcome.output().stdout.len(), 1000);
}

#[tokio::test]
async fn non_utf8_output_is_kept_byte_for_byte() {
    let dir = TempDir::new().unwrap();
    let outcome = run(sh(&dir, "printf '\\377\\376ok\\200'")).await;
    assert_eq!(outcome.output().stdout, vec![0xff, 0xfe, b'o', b'k', 0x80]);
}

#[tokio::test]
async fn timeout_kills_the_child_and_its_grandchildren_quickly() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(
        &dir,
        "sleep 30 & echo $! > grandchild; echo started; sleep 30",
    );
    s.timeout = Duration::from_millis(500);
    let t = StdInstant::now();
    let outcome = check(
        s,
        Summary {
            outcome: "timed_out",
            code: None,
            signal: Some(15),
            ..Summary::exited(0, "started\n", "")
        },
    )
    .await;
    let elapsed = t.elapsed();
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    let grandchild = read_pid(&dir, "grandchild");
    assert!(dies(grandchild), "grandchild {grandchild} survived");
    assert!(dies(outcome.output().pid));
}

#[tokio::test]
async fn a_child_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(
        &dir,
        "trap '' TERM; echo $$ > me; while :; do sleep 0.05; done",
    );
    s.timeout = Duration::from_millis(300);
    let t = StdInstant::now();
    let outcome = run(s).await;
    assert_eq!(
        (Summary::of(&outcome).outcome, outcome.output().exit.signal),
        ("timed_out", Some(9))
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(dies(read_pid(&dir, "me")));
}

#[tokio::test]
async fn cancellation_stops_the_whole_group_and_keeps_partial_output() {
    let dir = TempDir::new().unwrap();
    let s = sh(
        &dir,
        "sleep 30 & echo $! > grandchild; echo partial; sleep 30",
    );
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let t = StdInstant::now();
    let outcome = Sandbox::new().run(s, cancel, None).await.unwrap();
    assert_eq!(
        Summary::of(&outcome),
        Summary {
            outcome: "cancelled",
            code: None,
            signal: Some(15),
            ..Summary::exited(0, "partial\n", "")
        }
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(dies(read_pid(&dir, "grandchild")));
}

#[tokio::test]
async fn an_already_cancelled_run_starts_nothing() {
    let dir = TempDir::new().unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = Sandbox::new()
        .run(sh(&dir, "touch started"), cancel, None)
        .await
        .unwrap();
    assert_eq!(Summary::of(&outcome).outcome, "cancelled");
    assert_eq!(outcome.output().pid, 0);
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn a_background_grandchild_holding_stdout_does_not_delay_a_normal_exit() {
    let dir = TempDir::new().unwrap();
    let t = StdInstant::now();
    check(
        sh(&dir, "sleep 30 & echo $! > grandchild; echo done"),
        Summary::exited(0, "done\n", ""),
    )
    .await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(dies(read_pid(&dir, "grandchild")));
}

#[tokio::test]
async fn a_daemon_that_left_the_session_is_killed_when_the_tool_ends() {
    let dir = TempDir::new().unwrap();
    let t = StdInstant::now();
    let outcome = check(
        sh(
            &dir,
            "setsid sh -c 'sleep 30' > /dev/null 2>&1 & echo $! > escaped; echo done",
        ),
        Summary::exited(0, "done\n", ""),
    )
    .await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(dies(read_pid(&dir, "escaped")));
    assert!(
        outcome.output().metrics.killed_leftovers >= 1,
        "{outcome:?}"
    );
}

#[tokio::test]
async fn memory_limit_stops_a_large_allocation() {
    let dir = TempDir::new().unwrap();
    let script = "x = bytearray(512 * 1024 * 1024); print('allocated')";
    let mut limited = spec(&dir, "python3", &["-c", script]);
    limited.limits.memory_bytes = Some(128 * 1024 * 1024);
    let outcome = run(limited.clone()).await;
    let summary = Summary::of(&outcome);
    assert_eq!((summary.outcome, summary.stdout.as_str()), ("exited", ""));
    assert_ne!(summary.code, Some(0), "{summary:?}");
    assert!(summary.stderr.contains("MemoryError"), "{summary:?}");

    // The same program succeeds without the limit, so the failure above is the limit's doing.
    limited.limits.memory_bytes = None;
    check(limited, Summary::exited(0, "allocated\n", "")).await;
}

#[tokio::test]
async fn default_limits_are_applied_to_the_child() {
    let dir = TempDir::new().unwrap();
    // dash reports -v in KiB and -f in 512-byte blocks. The limits are set before exec, so
    // the very first thing the tool does already sees them.
    check(
        sh(&dir, "ulimit -n; ulimit -v; ulimit -t; ulimit -f"),
        Summary::exited(0, "256\n262144\n300\n2097152\n", ""),
    )
    .await;
}

#[tokio::test]
async fn cpu_limit_kills_a_busy_loop() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(&dir, "while :; do :; done");
    s.limits.cpu_seconds = Some(1);
    let outcome = run(s).await;
    let summary = Summary::of(&outcome);
    assert_eq!(
        (summary.outcome, summary.code),
        ("exited", None),
        "{summary:?}"
    );
    assert!(matches!(summary.signal, Some(9 | 24)), "{summary:?}");
}

#[tokio::test]
async fn none_is_refused_and_every_process_level_is_available_here() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let e = sandbox.check(IsolationLevel::None).await.unwrap_err();
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
    let mut s = sh(&dir, "touch ran");
    s.isolation = IsolationLevel::None;
    let e = sandbox
        .run(s, CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("isolation level none is not available: "),
        "{e}"
    );
    assert!(!dir.path().join("ran").exists(), "a none tool ran");
    for level in [
        IsolationLevel::Standard,
        IsolationLevel::Strict,
        IsolationLevel::Restricted,
    ] {
        sandbox.check(level).await.unwrap();
        let mut s = sh(&dir, "echo ok");
        s.isolation = level;
        let outcome = run_with(&sandbox, s).await;
        assert_eq!(Summary::of(&outcome), Summary::exited(0, "ok\n", ""));
        assert_eq!(outcome.output().isolation, level);
    }
    let doctor = sandbox.doctor().await;
    assert!(doctor.levels.iter().all(|l| l.available), "{doctor:#?}");
    assert!(doctor.self_test.len() >= 10, "{doctor:#?}");
    assert!(doctor.self_test.iter().all(|c| c.contained), "{doctor:#?}");
}

#[tokio::test]
async fn a_missing_helper_refuses_every_level_with_how_to_fix_it() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::with_config(SandboxConfig {
        helper: Some(dir.path().join("no-helper-here")),
        ..SandboxConfig::default()
    });
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let e = sandbox.check(level).await.unwrap_err().to_string();
        assert!(e.contains("no-helper-here does not exist"), "{e}");
        assert!(e.contains("cargo build -p tw-sandbox --bins"), "{e}");
    }
}

#[tokio::test]
async fn metrics_cover_the_whole_process_tree() {
    let dir = TempDir::new().unwrap();
    // Two processes burn CPU; the child's share is only visible if the tree is measured.
    let script = "python3 -c 'x = bytearray(64 << 20)\nfor i in range(3_000_000): pass' & \
                  python3 -c 'for i in range(3_000_000): pass'; wait";
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = sh(&dir, script);
        s.isolation = level;
        let outcome = run(s).await;
        let m = &outcome.output().metrics;
        assert!(m.sandbox_id.starts_with(level.as_str()), "{m:?}");
        let cpu = m.cpu_time.unwrap();
        assert!(cpu > Duration::from_millis(50), "{level}: {m:?}");
        assert!(
            cpu <= m.wall_time * 2 + Duration::from_millis(50),
            "{level}: {m:?}"
        );
        let peak = m.peak_memory_bytes.unwrap();
        assert!(peak >= 64 << 20, "{level}: {m:?}");
    }
}

#[tokio::test]
async fn stdin_is_delivered_to_the_tool() {
    let dir = TempDir::new().unwrap();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = spec(&dir, "wc", &["-c"]);
        s.isolation = level;
        s.stdin = Some(vec![b'x'; 300_000]);
        check(s, Summary::exited(0, "300000\n", "")).await;
    }
}

#[tokio::test]
async fn spawn_failures_name_the_program() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let missing = sandbox
        .run(
            spec(&dir, "no-such-program-tw", &[]),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "could not start program \"no-such-program-tw\": not found in PATH /usr/local/bin:/usr/bin:/bin"
    );
    assert!(
        matches!(&missing, SandboxError::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound)
    );

    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let not_exec = sandbox
        .run(
            spec(&dir, script.to_str().unwrap(), &[]),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&not_exec, SandboxError::Spawn { source, .. } if source.kind() == io::ErrorKind::PermissionDenied),
        "{not_exec:?}"
    );
}

#[tokio::test]
async fn a_relative_program_path_is_taken_from_the_working_directory() {
    let dir = TempDir::new().unwrap();
    let script = dir.path().join("tool.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"tool $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    check(
        spec(&dir, "./tool.sh", &["a b"]),
        Summary::exited(0, "tool a b\n", ""),
    )
    .await;
}

#[tokio::test]
async fn unusable_working_directories_are_refused() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    for (cwd, reason) in [
        (dir.path().join("missing"), "cannot be used: "),
        (file, "is not a directory"),
        (PathBuf::from("relative"), "must be an absolute path"),
    ] {
        let mut s = sh(&dir, "true");
        s.cwd = cwd;
        let e = sandbox
            .run(s, CancellationToken::new(), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, SandboxError::WorkingDirectory { reason: r, .. } if r.starts_with(reason)),
            "{e:?}"
        );
    }
}

#[tokio::test]
async fn progress_chunks_arrive_per_stream() {
    let dir = TempDir::new().unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let outcome = Sandbox::new()
        .run(
            sh(&dir, "echo one; echo two >&2; echo three"),
            CancellationToken::new(),
            Some(tx),
        )
        .await
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    while let Some(chunk) = rx.recv().await {
        match chunk {
            OutputChunk::Stdout(b) => out.extend(b),
            OutputChunk::Stderr(b) => err.extend(b),
        }
    }
    assert_eq!(
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap()
        ),
        ("one\nthree\n".to_owned(), "two\n".to_owned())
    );
    assert_eq!(
        Summary::of(&outcome),
        Summary::exited(0, "one\nthree\n", "two\n")
    );
}

#[tokio::test]
async fn invalid_environment_names_are_refused() {
    let dir = TempDir::new().unwrap();
    let mut s = sh(&dir, "true");
    s.env.insert("A=B".into(), "x".into());
    let e = Sandbox::new()
        .run(s, CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::InvalidSpec(_)), "{e:?}");
}

// Multi-threaded: the test blocks its thread while it waits for the pid files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_tool_dies_with_its_helper_when_the_helper_is_killed_from_outside() {
    let dir = TempDir::new().unwrap();
    let script = "echo $PPID > helper; sleep 30 & echo $! > grandchild; echo $$ > tool; wait";
    let run = tokio::spawn(run(sh(&dir, script)));
    let helper = read_pid(&dir, "helper");
    let (tool, grandchild) = (read_pid(&dir, "tool"), read_pid(&dir, "grandchild"));
    let helper_pid = rustix::process::Pid::from_raw(i32::try_from(helper).unwrap()).unwrap();
    rustix::process::kill_process(helper_pid, rustix::process::Signal::KILL).unwrap();
    let t = StdInstant::now();
    let outcome = run.await.unwrap();
    assert_eq!(
        outcome.output().exit.signal,
        Some(libc::SIGKILL),
        "{outcome:?}"
    );
    assert!(dies(tool) && dies(grandchild));
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// Whether this host gives runs cgroups of their own (as root, with cgroup v1 mounted).
async fn tree_limits() -> bool {
    let doctor = Sandbox::new().doctor().await;
    // Root on a host with the v1 hierarchies (like the machines this is built on) must get them.
    if rustix::process::geteuid().is_root()
        && std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists()
    {
        assert!(doctor.tree_limits.is_ok(), "{:?}", doctor.tree_limits);
    }
    doctor.tree_limits.is_ok()
}

#[tokio::test]
async fn the_process_cap_counts_the_whole_tree_exactly() {
    let dir = TempDir::new().unwrap();
    let script = "import os, time\nn = 0\nfor _ in range(10):\n    try:\n        pid = os.fork()\n    \
                  except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        \
                  os._exit(0)\n    n += 1\nprint(n)\n";
    let exact = tree_limits().await;
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = spec(&dir, "python3", &["-c", script]);
        s.isolation = level;
        s.limits.max_processes = Some(5);
        let out = run(s).await;
        let forked: u32 = String::from_utf8_lossy(&out.output().stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{out:?}"));
        if exact {
            // Python itself and four children make five.
            assert_eq!(forked, 4, "{level}: {out:?}");
        } else {
            // Without cgroups (not root) the cap is per process at standard (RLIMIT_NPROC,
            // counted over the whole uid) and the pid namespace's pid_max at strict: 5 + the 300
            // pids the kernel reserves, so ten children fit (the fork bomb escape test holds it
            // at its bound).
            skip(&format!(
                "SKIP exact process count at {level}: needs cgroup v1 pids writable by this uid \
                 (root)"
            ));
            if level == IsolationLevel::Strict {
                assert_eq!(forked, 10, "{level}: {out:?}");
            }
        }
    }
}

#[tokio::test]
async fn the_memory_cap_holds_for_the_whole_tree() {
    if !tree_limits().await {
        // Per-process limits only: each process is held to its rlimit instead, which
        // memory_limit_stops_a_large_allocation covers. (`tree_limits` fails the test where
        // the doctor should have found the cgroups.)
        skip(&format!(
            "SKIP the_memory_cap_holds_for_the_whole_tree: needs cgroup v1 memory and pids \
             hierarchies writable by this uid (root); `sandbox doctor` says tree limits are: {:?}",
            Sandbox::new().doctor().await.tree_limits
        ));
        return;
    }
    let dir = TempDir::new().unwrap();
    // Four processes touching 60 MiB each: every one is within the per-process limit, the tree
    // is not.
    let one = "python3 -c \"import time; b = b'x' * (60 << 20); time.sleep(2)\"";
    let script = format!("for i in 1 2 3 4; do {one} & done; wait; echo done");
    let sandbox = Sandbox::new();
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = sh(&dir, &script);
        s.isolation = level;
        s.limits.memory_bytes = Some(128 * 1024 * 1024);
        let t = StdInstant::now();
        let out = run_with(&sandbox, s).await;
        // The survivors finish (the shell's `wait` sees its children die).
        assert!(matches!(out, RunOutcome::Exited(_)), "{level}: {out:?}");
        assert_eq!(out.output().stdout, b"done\n", "{level}");
        assert!(t.elapsed() < Duration::from_secs(10), "{level}");
        let m = &out.output().metrics;
        assert!(m.oom_kills >= 1, "{level}: {out:?}");
        let peak = m.peak_memory_bytes.unwrap();
        assert!(peak <= 130 * 1024 * 1024, "{level}: peak {peak}");
        assert!(peak >= 60 * 1024 * 1024, "{level}: peak {peak}");
        // The next run (likely in the same cgroups, recycled) starts from nothing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut s = sh(&dir, "true");
        s.isolation = level;
        s.limits.memory_bytes = Some(128 * 1024 * 1024);
        let next = run_with(&sandbox, s).await;
        let m = &next.output().metrics;
        assert_eq!(m.oom_kills, 0, "{level}: {next:?}");
        let peak = m.peak_memory_bytes.unwrap();
        assert!(
            peak < 16 * 1024 * 1024,
            "{level}: peak {peak} after a recycled cgroup"
        );
    }
}

#[tokio::test]
async fn the_tool_starts_with_no_signal_blocked_and_default_dispositions() {
    let dir = TempDir::new().unwrap();
    // glibc reserves signals 32 and 33 for itself and hands them to every program it starts
    // ignored; the rest must be as a fresh process has them.
    const GLIBC_INTERNAL: u64 = (1 << 31) | (1 << 32);
    for level in [IsolationLevel::Standard, IsolationLevel::Strict] {
        let mut s = sh(&dir, "grep -E '^(SigBlk|SigIgn):' /proc/self/status");
        s.isolation = level;
        let out = run(s).await;
        let text = String::from_utf8_lossy(&out.output().stdout).into_owned();
        let mask = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap_or_else(|| panic!("{level}: no {name} in {text:?}"))
        };
        assert_eq!(mask("SigBlk:"), 0, "{level}: {text}");
        assert_eq!(mask("SigIgn:") & !GLIBC_INTERNAL, 0, "{level}: {text}");
    }
}

/// Issue 15, hole 6: Landlock "partially enforced" used to be accepted at strict, though strict
/// relies on its abstract-socket and signal scoping (ABI 6). Every protection strict claims is
/// now required: an older kernel makes strict and restricted refuse with a reason naming what is
/// missing, before any run, and the helper itself asks Landlock for all or nothing.
#[tokio::test]
async fn strict_refuses_a_host_that_lacks_any_protection_and_names_it() {
    let current = host::Host::new(SandboxConfig::default()).facts;
    // This host: every protection held, or the doctor must say what is not.
    let held: Vec<(String, bool)> = current
        .protections()
        .into_iter()
        .map(|p| (p.name, p.held))
        .collect();
    assert!(held.iter().all(|(_, h)| *h), "{held:?}");
    let cases = [
        (
            host::HostFacts {
                landlock_abi: Some(5),
                ..current.clone()
            },
            "Landlock ABI 6+ (file rights, abstract-socket and signal scoping): the kernel offers \
             only ABI 5; Linux 6.12+ gives 6, and strict never runs with part of it",
        ),
        (
            host::HostFacts {
                landlock_abi: None,
                ..current.clone()
            },
            "Landlock ABI 6+ (file rights, abstract-socket and signal scoping): not available: \
             Linux 6.12+ with landlock in the lsm= boot parameter",
        ),
        (
            host::HostFacts {
                kernel: "6.12.9-amd64".to_owned(),
                ..current.clone()
            },
            "a process cap per pid namespace (pid_max, Linux 6.14+): kernel 6.12.9-amd64",
        ),
        (
            host::HostFacts {
                seccomp_filters: false,
                ..current.clone()
            },
            "seccomp filters: the kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)",
        ),
        (
            host::HostFacts {
                root: false,
                userns_refused_by: vec!["kernel.apparmor_restrict_unprivileged_userns=1".into()],
                ..current.clone()
            },
            "unprivileged user namespaces: refused by \
             kernel.apparmor_restrict_unprivileged_userns=1",
        ),
    ];
    for (facts, missing) in cases {
        let mut h = host::Host::new(SandboxConfig::default());
        h.facts = facts;
        let sandbox = Sandbox {
            host: Arc::new(h),
            drain: Sandbox::new().drain,
        };
        let dir = TempDir::new().unwrap();
        for level in [IsolationLevel::Strict, IsolationLevel::Restricted] {
            let mut s = spec(&dir, "true", &[]);
            s.isolation = level;
            let err = sandbox
                .run(s, CancellationToken::new(), None)
                .await
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                SandboxError::Unsupported {
                    level,
                    reason: format!("this host lacks what strict needs: {missing}"),
                }
                .to_string()
            );
        }
        // Standard needs none of it.
        let out = run_with(&sandbox, spec(&dir, "true", &[])).await;
        assert_eq!(out.output().exit.code, Some(0));
    }
}

/// Says that part of a test did not run and why, on the real standard error: the test harness
/// captures `eprintln!` of passing tests, and a skip must never be silent.
fn skip(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}
