//! The resource watcher on real resources (issue 22's automatic modes): a runtime whose data
//! directory is on a small tmpfs the test fills degrades by itself, locks down when its audit
//! log cannot be written, records both with what it measured, and stays put until a person
//! goes back; a runtime in a memory cgroup the test fills degrades and, with `auto_recover`,
//! comes back by itself. The tmpfs is mounted in a user and mount namespace of the runtime's
//! own (`unshare -Urm`), so the test needs no privilege; the test reaches it through
//! `/proc/PID/root`.

#![allow(clippy::disallowed_methods)] // the tests start the runtime and fill its disk themselves

use std::ffi::OsStr;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Env, binary, on_team_store, skip};

/// A runtime speaking MCP on stdio, and what the test reads it through.
struct Runtime {
    /// Killed when the test ends.
    child: Killed,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Runtime {
    fn start(mut cmd: Command) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("start the runtime");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut rt = Self {
            child: Killed(child),
            input,
            output,
            next_id: 0,
        };
        rt.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        writeln!(
            rt.input,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        rt
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        writeln!(
            self.input,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "the runtime ended"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// Calls `echo`; returns its structured answer.
    fn echo(&mut self, text: &str) -> Value {
        let r = self.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        );
        r["result"].clone()
    }
}

/// `toolwarden` on `data` with `config`, in the environment the suite gives every command (the
/// team store included, when the suite runs on one).
fn toolwarden(env: &Env, data: &Path, config: &Path) -> Command {
    let mut c = Command::new(binary());
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path());
    if let Some(url) = &env.store_url {
        c.env("TOOLWARDEN_STORE_URL", url);
    }
    c.arg("--data-dir")
        .arg(data)
        .arg("--workspace")
        .arg(&env.ws)
        .arg("--config")
        .arg(config);
    c
}

/// `toolwarden ARGS` on `data`, with a config that keeps its own watcher off (the test looks on
/// without switching anything); with a pid, in that runtime's namespaces (`nsenter`: SQLite
/// resolves a `/proc/PID/root` path to the host's directory).
fn observer(env: &Env, (pid, data): (Option<u32>, &Path), args: &[&str]) -> std::process::Output {
    let cfg = env.root.path().join("observer.toml");
    std::fs::write(
        &cfg,
        "license_tier = \"teams\"\n[watchdog]\nenabled = false\n",
    )
    .unwrap();
    let plain = toolwarden(env, data, &cfg);
    let mut c = match pid {
        None => plain,
        Some(pid) => {
            let mut c = Command::new("nsenter");
            c.env_clear()
                .envs(plain.get_envs().filter_map(|(k, v)| Some((k, v?))))
                .args(["--user", "--mount", "--preserve-credentials", "--target"])
                .arg(pid.to_string())
                .arg("--")
                .arg(plain.get_program())
                .args(plain.get_args());
            c
        }
    };
    c.args(args).output().unwrap()
}

fn mode_of(env: &Env, data: (Option<u32>, &Path)) -> String {
    let out = observer(env, data, &["mode"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The admin log's entries by the watcher, oldest first.
fn watchdog_entries(env: &Env, data: (Option<u32>, &Path)) -> Vec<Value> {
    let out = observer(env, data, &["audit", "changes", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut mine: Vec<Value> = all
        .into_iter()
        .filter(|e| e["actor"] == "watchdog")
        .collect();
    mine.sort_by_key(|e| e["at"].as_i64());
    mine
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_bytes(dir: &Path) -> u64 {
    let st = rustix::fs::statvfs(dir).unwrap();
    st.f_bavail * st.f_frsize
}

/// Writes `bytes` (all there is room for, with `None`) to `file`.
fn fill(file: &Path, bytes: Option<u64>) {
    let mut f = std::fs::File::create(file).unwrap();
    let chunk = vec![7u8; 64 << 10];
    let mut left = bytes.unwrap_or(u64::MAX);
    while left > 0 {
        let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match f.write_all(&chunk[..n]) {
            Ok(()) => left -= n as u64,
            Err(e) if bytes.is_none() => {
                assert_eq!(
                    e.raw_os_error(),
                    Some(rustix::io::Errno::NOSPC.raw_os_error()),
                    "{e}"
                );
                return;
            }
            Err(e) => panic!("filling {}: {e}", file.display()),
        }
    }
    f.sync_all().unwrap();
}

#[test]
fn a_filling_disk_degrades_an_unwritable_audit_log_locks_down_and_a_person_goes_back() {
    if on_team_store() {
        skip(
            "SKIP the full-disk watchdog test: on a team store the audit log is not on the data \
             directory's disk; scripts/test runs it on SQLite first",
        );
        return;
    }
    let env = Env::new().with_config(
        "[watchdog]\ninterval_ms = 200\ndisk_free_min_mb = 4\ndisk_free_resume_mb = 8\n\
         memory_available_min_mb = 0\nmemory_pressure_max = 0\n",
    );
    let mount = env.root.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .args(["-Urm", "sh", "-c"])
        .arg("mount -t tmpfs -o size=32m tw-watchdog \"$0\" && exec \"$@\"")
        .arg(&mount)
        .arg(binary())
        .arg("--data-dir")
        .arg(mount.join("data"))
        .arg("--workspace")
        .arg(&env.ws)
        .arg("--config")
        .arg(env.config.as_ref().unwrap())
        .arg("mcp");
    let mut rt = Runtime::start(cmd);
    // The runtime's view of its tmpfs, from outside its mount namespace.
    let small: PathBuf = format!("/proc/{}/root{}", rt.child.0.id(), mount.display()).into();
    let data_dir = mount.join("data");
    let data = (Some(rt.child.0.id()), data_dir.as_path());
    assert_eq!(rt.echo("hello")["isError"], json!(false));
    assert_eq!(mode_of(&env, data), "normal");
    assert!(free_bytes(&small) > 8 << 20, "{}", free_bytes(&small));

    // Below 4 MiB free: degraded, with what was measured.
    fill(&small.join("ballast"), Some(free_bytes(&small) - (2 << 20)));
    wait_for("the switch to degraded", || {
        mode_of(&env, data) == "degraded"
    });
    let entries = watchdog_entries(&env, data);
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0]["kind"], "mode_changed");
    assert_eq!(entries[0]["details"]["from"], "normal");
    assert_eq!(entries[0]["details"]["to"], "degraded");
    let reason = entries[0]["details"]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("free space on the data directory's filesystem is ")
            && reason.ends_with("MiB, below 4 MiB"),
        "{reason}"
    );
    assert!(
        entries[0]["details"]["readings"]["disk_free_bytes"]
            .as_u64()
            .unwrap()
            < 4 << 20
    );

    // Nothing left: the audit record of a call cannot be written, so its result is withheld,
    // and the watcher locks down. The store cannot take that switch yet; it holds in the
    // runtime and is written, with its entry, once there is room again.
    fill(&small.join("ballast2"), None);
    let mut refused = None;
    for i in 0..50 {
        let answer = rt.echo(&"x".repeat(32 << 10));
        if answer["isError"] == json!(true) {
            refused = Some((i, answer));
            break;
        }
    }
    let (_, answer) = refused.expect("an audit write on a full disk fails");
    assert!(answer.to_string().contains("audit_unavailable"), "{answer}");
    std::thread::sleep(Duration::from_secs(1));
    std::fs::remove_file(small.join("ballast2")).unwrap();
    std::fs::remove_file(small.join("ballast")).unwrap();
    wait_for("the lockdown to be stored", || {
        mode_of(&env, data) == "lockdown"
    });
    // The next call's record goes in (the call itself is refused: the store was down when it
    // was judged), and the audit log takes records again.
    let answer = rt.echo("again");
    assert!(answer.to_string().contains("audit_unavailable"), "{answer}");
    let free = free_bytes(&small);
    assert!(free > 8 << 20, "{free} bytes free after the ballast went");
    wait_for("the watcher to see the resources back", || {
        watchdog_entries(&env, data)
            .iter()
            .any(|e| e["kind"] == "resources_recovered")
    });
    let entries = watchdog_entries(&env, data);
    let kinds: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["details"]["to"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("mode_changed", "degraded"),
            ("mode_changed", "lockdown"),
            ("resources_recovered", "")
        ],
        "{entries:#?}"
    );
    let reasons = entries[1]["details"]["reasons"].to_string();
    assert!(
        reasons.contains("the audit log cannot be written: nothing may run unaudited"),
        "{reasons}"
    );
    assert!(
        entries[2]["summary"]
            .as_str()
            .unwrap()
            .contains("the mode stays lockdown until a person switches to recovery"),
        "{:#?}",
        entries[2]
    );
    // It stays locked down until a person goes back, through recovery.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(mode_of(&env, data), "lockdown");
    for mode in ["recovery", "normal"] {
        let out = observer(&env, data, &["mode", "set", mode]);
        assert!(out.status.success(), "{out:?}");
    }
    wait_for("the runtime to run calls again", || {
        rt.echo("back")["isError"] == json!(false)
    });
    assert_eq!(watchdog_entries(&env, data).len(), 3);
}

/// A runtime in a memory cgroup of 256 MiB degrades when another process in it takes most of
/// that, and with `auto_recover` goes back to normal by itself once it lets go.
#[test]
fn memory_taken_in_the_runtimes_cgroup_degrades_and_auto_recover_comes_back() {
    if !super::support::running_as_root() {
        skip(
            "SKIP the memory cgroup watchdog test: making a memory cgroup needs root; \
             scripts/test runs this suite as root too",
        );
        return;
    }
    let cgroup = tw_sandbox::process::own_v1_cgroup("memory")
        .expect("this host has the cgroup v1 memory controller")
        .join(format!("tw-watchdog-test-{}", std::process::id()));
    std::fs::create_dir(&cgroup).unwrap();
    std::fs::write(
        cgroup.join("memory.limit_in_bytes"),
        (256u64 << 20).to_string(),
    )
    .unwrap();
    let env = Env::new().with_config(
        "[watchdog]\ninterval_ms = 200\ndisk_free_min_mb = 0\nmemory_pressure_max = 0\n\
         memory_available_min_mb = 96\nmemory_available_resume_mb = 160\nauto_recover = true\n",
    );
    let inside = |program: &OsStr, args: &[&OsStr]| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(cgroup.join("cgroup.procs"))
            .arg(program)
            .args(args);
        c
    };
    let plain = toolwarden(&env, &env.data, env.config.as_ref().unwrap());
    let mut args: Vec<&OsStr> = plain.get_args().collect();
    args.push(OsStr::new("mcp"));
    let mut cmd = inside(plain.get_program(), &args);
    cmd.env_clear()
        .envs(plain.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let mut rt = Runtime::start(cmd);
    let data = (None, env.data.as_path());
    assert_eq!(rt.echo("hello")["isError"], json!(false));
    assert_eq!(mode_of(&env, data), "normal");

    let hog = inside(
        OsStr::new("python3"),
        &[
            OsStr::new("-c"),
            OsStr::new("import time; b = bytearray(b'\\x01') * (150 << 20); print('held', flush=True); time.sleep(120)"),
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut hog = Killed(hog);
    let mut said = String::new();
    BufReader::new(hog.0.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "held");
    wait_for("the switch to degraded", || {
        mode_of(&env, data) == "degraded"
    });
    hog.0.kill().unwrap();
    hog.0.wait().unwrap();
    wait_for("the switch back to normal", || {
        mode_of(&env, data) == "normal"
    });
    let entries = watchdog_entries(&env, data);
    let steps: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["details"]["from"].as_str().unwrap(),
                e["details"]["to"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [("normal", "degraded"), ("degraded", "normal")],
        "{entries:#?}"
    );
    let reason = entries[0]["details"]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("available memory is ") && reason.ends_with("MiB, below 96 MiB"),
        "{reason}"
    );
    assert_eq!(entries[1]["details"]["reasons"], json!([]));
    drop(rt);
    let _ = std::fs::remove_dir(&cgroup);
}

/// A child killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
