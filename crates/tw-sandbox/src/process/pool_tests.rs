//! Tests of the sandbox helpers made ahead of their runs (`pool.rs`), as attacks on what a pooled
//! run must keep: a sandbox of its own each run, and the masks and paths of the moment it runs,
//! not of the moment its helper was made.

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::tests::{Summary, spec};
use super::*;

/// How long a test waits for the pool to have a helper ready.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// One run at `level`, to its exit.
async fn at(sandbox: &Sandbox, level: IsolationLevel, mut spec: ProcessSpec) -> ProcessOutput {
    spec.isolation = level;
    match sandbox
        .run(spec, CancellationToken::new(), None)
        .await
        .unwrap()
    {
        RunOutcome::Exited(o) => o,
        other => panic!("the run did not exit: {other:?}"),
    }
}

async fn strict(sandbox: &Sandbox, spec: ProcessSpec) -> ProcessOutput {
    at(sandbox, IsolationLevel::Strict, spec).await
}

/// `spec` with a limit of `files` open files: each limit is a shape of run of its own.
fn with_files(mut spec: ProcessSpec, files: u64) -> ProcessSpec {
    spec.limits.max_open_files = Some(files);
    spec
}

/// Whether process `pid` has exited (gone, or a zombie not yet reaped).
fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// Waits until every one of `pids` has exited; fails with `why` if one is still running after
/// [`READY_WITHIN`].
async fn until_exited(pids: &[i32], why: &str) {
    let until = Instant::now() + READY_WITHIN;
    while !pids.iter().all(|&p| exited(p)) {
        assert!(Instant::now() < until, "{why}: {pids:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until the pool holds a ready helper.
async fn ready(sandbox: &Sandbox) {
    let until = Instant::now() + READY_WITHIN;
    while sandbox.helpers_ahead().0 == 0 {
        assert!(
            Instant::now() < until,
            "no helper got ready within {READY_WITHIN:?}: {:?}",
            sandbox.helpers_ahead()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn text(o: &ProcessOutput) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pooled_run_has_fresh_namespaces_an_empty_tmp_and_its_own_program() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let script = "ls -A /dev/shm; test ! -e /tmp/left || echo /tmp/left is there; \
                  echo left > /tmp/left; echo left > /dev/shm/left; \
                  readlink /proc/self/ns/mnt /proc/self/ns/pid /proc/self/ns/ipc >&2; \
                  echo $$; echo \"$GREETING\" \"$0\" \"$1\"; pwd";
    let mut namespaces = Vec::new();
    // The pool makes helpers for a shape once it came twice.
    for round in 0..5 {
        if round > 1 {
            ready(&sandbox).await;
        }
        let mut s = spec(&dir, "sh", &["-c", script, "argv0", &format!("run{round}")]);
        s.env.insert("GREETING".to_owned(), format!("hello{round}"));
        let out = strict(&sandbox, s).await;
        // Nothing left by an earlier run. The tool is the first process after its namespace's
        // init.
        let expect = format!(
            "2\nhello{round} argv0 run{round}\n{}\n",
            dir.path().display()
        );
        assert_eq!(
            (text(&out), out.metrics.prepared_ahead),
            (expect, round > 1),
            "round {round}: {out:?}"
        );
        namespaces.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let mut distinct = namespaces.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        namespaces.len(),
        "namespaces reused: {namespaces:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_masked_file_made_again_after_its_helper_was_built_stays_masked() {
    let dir = TempDir::new().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "old secret\n").unwrap();
    let sandbox = Sandbox::new();
    let masked = |s: &mut ProcessSpec| s.fs.masked = vec![secret.clone()];
    for _ in 0..2 {
        let mut first = spec(&dir, "cat", &["secret"]);
        masked(&mut first);
        assert_eq!(text(&strict(&sandbox, first).await), "");
    }
    ready(&sandbox).await;
    // Deleting a mount point's file detaches its mounts in every namespace: the helper made
    // ahead would show whatever takes its place.
    std::fs::remove_file(&secret).unwrap();
    std::fs::write(&secret, "new secret\n").unwrap();
    let mut again = spec(&dir, "cat", &["secret"]);
    masked(&mut again);
    let out = strict(&sandbox, again).await;
    assert_eq!(
        (text(&out), out.metrics.prepared_ahead),
        (String::new(), false),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_to_mask_that_appeared_after_its_helper_was_built_is_masked() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    for _ in 0..2 {
        strict(&sandbox, spec(&dir, "true", &[])).await;
    }
    ready(&sandbox).await;
    let env = dir.path().join(".env");
    std::fs::write(&env, "TOKEN=hunter2\n").unwrap();
    let mut s = spec(&dir, "cat", &[".env"]);
    s.fs.masked = vec![env];
    let out = strict(&sandbox, s).await;
    assert_eq!(
        (text(&out), out.metrics.prepared_ahead),
        (String::new(), false),
        "{out:?}"
    );
    // The new shape gets helpers of its own once it came twice (the first shape keeps its).
    for ahead in [false, true] {
        if ahead {
            settled(&sandbox, 2 * DEFAULT_POOL_SIZE).await;
        }
        let mut s = spec(&dir, "cat", &[".env"]);
        s.fs.masked = vec![dir.path().join(".env")];
        let out = strict(&sandbox, s).await;
        assert_eq!(
            (text(&out), out.metrics.prepared_ahead),
            (String::new(), ahead),
            "{out:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_swapped_for_another_directory_is_the_one_a_pooled_run_sees() {
    let base = TempDir::new().unwrap();
    let ws = base.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("which"), "first\n").unwrap();
    let sandbox = Sandbox::new();
    let run = || {
        let mut s = ProcessSpec::new("cat", &ws);
        s.args = vec!["which".to_owned()];
        s
    };
    for _ in 0..2 {
        assert_eq!(text(&strict(&sandbox, run()).await), "first\n");
    }
    ready(&sandbox).await;
    std::fs::rename(&ws, base.path().join("old")).unwrap();
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("which"), "second\n").unwrap();
    let out = strict(&sandbox, run()).await;
    assert_eq!(
        (text(&out), out.metrics.prepared_ahead),
        ("second\n".to_owned(), false),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_helper_killed_while_it_waited_leaves_the_run_to_one_built_on_the_spot() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::with_config(SandboxConfig {
        pool_size: 1,
        ..SandboxConfig::default()
    });
    for _ in 0..2 {
        strict(&sandbox, spec(&dir, "true", &[])).await;
    }
    ready(&sandbox).await;
    let pid = sandbox.host.pool().ready_pids()[0];
    rustix::process::kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL).unwrap();
    // Its exit (not yet reaped: a zombie) takes its init with it.
    until_exited(&[pid], "the helper did not die").await;
    let out = strict(&sandbox, spec(&dir, "echo", &["ran"])).await;
    assert_eq!(
        (
            Summary::of(&RunOutcome::Exited(out.clone())),
            out.metrics.prepared_ahead
        ),
        (Summary::exited(0, "ran\n", ""), false)
    );
}

#[tokio::test]
async fn a_pool_of_none_builds_every_sandbox_on_the_spot() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::with_config(SandboxConfig {
        pool_size: 0,
        ..SandboxConfig::default()
    });
    for _ in 0..3 {
        let out = strict(&sandbox, spec(&dir, "true", &[])).await;
        assert!(!out.metrics.prepared_ahead, "{out:?}");
    }
    assert_eq!(sandbox.helpers_ahead(), (0, 0));
}

#[tokio::test]
async fn a_shape_seen_once_gets_no_helpers_made_ahead() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    strict(&sandbox, spec(&dir, "true", &[])).await;
    strict(&sandbox, with_files(spec(&dir, "true", &[]), 100)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sandbox.helpers_ahead(), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_other_limits_gets_its_own_not_those_of_the_helpers_made_ahead() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let with_files = |n: u64| with_files(spec(&dir, "sh", &["-c", "ulimit -n"]), n);
    for _ in 0..2 {
        assert_eq!(text(&strict(&sandbox, with_files(200)).await), "200\n");
    }
    ready(&sandbox).await;
    let out = strict(&sandbox, with_files(100)).await;
    assert_eq!(
        (text(&out), out.metrics.prepared_ahead),
        ("100\n".to_owned(), false),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_runs_are_served_ahead_each_with_its_own_process_program_and_limits() {
    let dir = TempDir::new().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let sandbox = Sandbox::new();
    let script = "echo $$ \"$GREETING\" \"$1\"; pwd; ulimit -n; test -z \"$LEFT\" || echo left";
    let mut pids = Vec::new();
    for round in 0..4 {
        if round > 1 {
            settled(&sandbox, DEFAULT_POOL_SIZE).await;
        }
        let mut s = spec(&dir, "sh", &["-c", script, "argv0", &format!("run{round}")]);
        s.env.insert("GREETING".to_owned(), format!("hello{round}"));
        if round % 2 == 1 {
            s.cwd = sub.clone();
        }
        let out = at(&sandbox, IsolationLevel::Standard, with_files(s, 64)).await;
        let text = text(&out);
        let lines: Vec<&str> = text.lines().collect();
        let (pid, rest) = lines[0].split_once(' ').unwrap();
        pids.push(pid.to_owned());
        let cwd = if round % 2 == 1 { &sub } else { dir.path() };
        assert_eq!(
            (rest, lines[1..].to_vec(), out.metrics.prepared_ahead),
            (
                format!("hello{round} run{round}").as_str(),
                vec![cwd.to_str().unwrap(), "64"],
                round > 1
            ),
            "{out:?}"
        );
    }
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 4, "every run is a process of its own: {pids:?}");
    // A run with standard input is built on the spot, and still gets it.
    let mut s = spec(&dir, "cat", &[]);
    s.stdin = Some(b"typed".to_vec());
    settled(&sandbox, 1).await;
    let out = at(&sandbox, IsolationLevel::Standard, s).await;
    assert_eq!(
        (text(&out), out.metrics.prepared_ahead),
        ("typed".to_owned(), false)
    );
}

/// Waits until the pool has at least `n` helpers ready and is making none.
async fn settled(sandbox: &Sandbox, n: usize) {
    let until = Instant::now() + READY_WITHIN;
    while !matches!(sandbox.helpers_ahead(), (ready, 0) if ready >= n) {
        assert!(
            Instant::now() < until,
            "{n} helpers did not get ready within {READY_WITHIN:?}: {:?}",
            sandbox.helpers_ahead()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_alternating_between_shapes_each_take_a_helper_of_their_own_shape() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let with_files = |n: u64| with_files(spec(&dir, "sh", &["-c", "ulimit -n"]), n);
    // Each shape came twice: the pool keeps helpers for both.
    for n in [200, 100, 200, 100] {
        assert_eq!(
            text(&strict(&sandbox, with_files(n)).await),
            format!("{n}\n")
        );
    }
    for _ in 0..3 {
        for n in [200, 100] {
            settled(&sandbox, 2 * DEFAULT_POOL_SIZE).await;
            let out = strict(&sandbox, with_files(n)).await;
            assert_eq!(
                (text(&out), out.metrics.prepared_ahead),
                (format!("{n}\n"), true),
                "{out:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_recently_run_shape_loses_its_helpers_when_one_shape_too_many_comes() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    let with_files = |n: u64| with_files(spec(&dir, "true", &[]), n);
    let shapes: Vec<u64> = (0..=pool::SHAPES as u64).map(|i| 100 + i).collect();
    // The first SHAPES shapes, twice each: helpers for every one of them.
    for &n in &shapes[..pool::SHAPES] {
        for _ in 0..2 {
            strict(&sandbox, with_files(n)).await;
        }
    }
    settled(&sandbox, pool::SHAPES * DEFAULT_POOL_SIZE).await;
    let before = sandbox.host.pool().ready_pids();
    // One more shape: the first one's helpers go (and exit), the others stay.
    strict(&sandbox, with_files(shapes[pool::SHAPES])).await;
    let after = sandbox.host.pool().ready_pids();
    assert_eq!(
        after.len(),
        (pool::SHAPES - 1) * DEFAULT_POOL_SIZE,
        "{after:?}"
    );
    assert!(
        after.iter().all(|p| before.contains(p)),
        "{before:?} {after:?}"
    );
    // The first shape comes again: built on the spot, as a shape seen for the first time.
    let out = strict(&sandbox, with_files(shapes[0])).await;
    assert!(!out.metrics.prepared_ahead, "{out:?}");
    // That let the next least recently run one go; the newer ones are still served ahead.
    settled(&sandbox, (pool::SHAPES - 2) * DEFAULT_POOL_SIZE).await;
    let out = strict(&sandbox, with_files(shapes[pool::SHAPES - 1])).await;
    assert!(out.metrics.prepared_ahead, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shape_no_run_took_for_the_idle_time_lets_its_helpers_go_and_the_others_stay() {
    let dir = TempDir::new().unwrap();
    let idle = Duration::from_secs(2);
    let sandbox = Sandbox::with_config(SandboxConfig {
        pool_idle: idle,
        ..SandboxConfig::default()
    });
    let with_files = |n: u64| with_files(spec(&dir, "true", &[]), n);
    for _ in 0..2 {
        strict(&sandbox, with_files(100)).await;
    }
    settled(&sandbox, DEFAULT_POOL_SIZE).await;
    let first = sandbox.host.pool().ready_pids();
    for _ in 0..2 {
        strict(&sandbox, with_files(200)).await;
    }
    settled(&sandbox, 2 * DEFAULT_POOL_SIZE).await;
    let second: Vec<i32> = sandbox
        .host
        .pool()
        .ready_pids()
        .into_iter()
        .filter(|p| !first.contains(p))
        .collect();
    assert_eq!(second.len(), DEFAULT_POOL_SIZE, "{second:?}");
    // The second shape idles; the first keeps being run, well within the idle time.
    let until = Instant::now() + idle * 5 / 2;
    while Instant::now() < until {
        tokio::time::sleep(idle / 4).await;
        strict(&sandbox, with_files(100)).await;
    }
    settled(&sandbox, DEFAULT_POOL_SIZE).await;
    let now = sandbox.host.pool().ready_pids();
    assert_eq!(now.len(), DEFAULT_POOL_SIZE, "{now:?}");
    assert!(
        now.iter().all(|p| !second.contains(p)),
        "{now:?} {second:?}"
    );
    // Let go: the idle shape's helpers exit, and its next run is built on the spot.
    until_exited(&second, "idle helpers still running").await;
    let out = strict(&sandbox, with_files(200)).await;
    assert!(!out.metrics.prepared_ahead, "{out:?}");
    // Once nothing runs, every shape goes, and no helper is left.
    let until = Instant::now() + idle + READY_WITHIN;
    while sandbox.helpers_ahead() != (0, 0) {
        assert!(
            Instant::now() < until,
            "helpers kept past the idle time: {:?}",
            sandbox.helpers_ahead()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until_exited(&now, "helpers still running past the idle time").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_written_just_before_the_tool_ends_is_read_to_the_end() {
    let dir = TempDir::new().unwrap();
    let sandbox = Sandbox::new();
    // More than a pipe holds, on both streams, the last of it written as the tool exits: the
    // run ends on the helper's report, and must still read everything the tool wrote.
    let script = "head -c 300000 /dev/zero | tr '\\0' o; head -c 200000 /dev/zero | tr '\\0' e >&2";
    for round in 0..3 {
        if round == 2 {
            ready(&sandbox).await;
        }
        let out = strict(&sandbox, spec(&dir, "sh", &["-c", script])).await;
        assert_eq!(
            (
                out.stdout.len(),
                out.stdout.iter().all(|b| *b == b'o'),
                out.stderr.len(),
                out.stderr.iter().all(|b| *b == b'e'),
                out.metrics.prepared_ahead,
            ),
            (300_000, true, 200_000, true, round == 2),
            "round {round}"
        );
    }
}

/// The parent of `pid`, from `/proc`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(") ").unwrap();
    rest.split(' ').nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_tool_dies_with_its_helper_when_the_helper_is_killed_from_outside() {
    let dir = TempDir::new().unwrap();
    // A sleep no other test runs marks the tool.
    let marker = format!("1{}.75", std::process::id());
    let mut s = spec(&dir, "sleep", &[&marker]);
    s.isolation = IsolationLevel::Strict;
    let run = tokio::spawn(async move {
        let sandbox = Sandbox::new();
        sandbox.run(s, CancellationToken::new(), None).await
    });
    let until = Instant::now() + READY_WITHIN;
    let tool = loop {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c == format!("sleep\0{marker}\0").as_bytes())
            });
        if let Some(pid) = found {
            break pid;
        }
        assert!(Instant::now() < until, "the tool never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let init = parent_of(tool);
    let helper = parent_of(init);
    // As root, init drops to the sandbox uid, which clears a parent-death signal set before.
    rustix::process::kill_process(
        Pid::from_raw(i32::try_from(helper).unwrap()).unwrap(),
        Signal::KILL,
    )
    .unwrap();
    assert!(
        super::tests::dies(tool) && super::tests::dies(init),
        "init {init} or the tool {tool} outlived the helper {helper}"
    );
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(
        outcome.output().exit.signal,
        Some(libc::SIGKILL),
        "{outcome:?}"
    );
}
