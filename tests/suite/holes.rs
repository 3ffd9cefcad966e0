//! Issue 15's holes, reproduced exactly as the outside attack found them, through the real
//! binary: a strict `exec` that planted a set-user-ID root shell in the workspace, one that
//! reached the user's D-Bus session bus by its path, file-writing redirections that slipped past
//! an exec allowlist, a second policy document that loosened the first's exec settings, and a
//! relative program judged in one directory and run in another. (tw-sandbox's escape suite and
//! tw-core's bypass table try every other route to the same ends; these pin the reports
//! themselves. Holes 5, 9 and 11 have theirs in `skills`, `pipes` and `mcp::http`.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;

use serde_json::json;

use super::support::{Env, check_status};

fn exec_env() -> Env {
    Env::new().with_config(
        "[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\nask = \"off\"\n",
    )
}

/// Regression (issue 15, hole 1): `cp /bin/sh ./sh && chmod u+s ./sh` succeeded at strict and,
/// Toolwarden running as root, left `-rwsr-xr-x root root sh` in the workspace.
#[test]
fn exec_cannot_plant_a_set_user_id_shell_in_the_workspace() {
    let env = exec_env();
    let run = env.call(
        "exec",
        json!({"command": "cp /bin/sh ./sh && chmod u+s ./sh; ls -l sh"}),
    );
    let out = run.json();
    assert_eq!(out["status"], "success", "{}", run.stdout);
    let stderr = out["output"]["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("chmod: changing permissions of './sh': Operation not permitted"),
        "{stderr}"
    );
    let sh = std::fs::metadata(env.ws.join("sh")).unwrap();
    assert_eq!(
        sh.permissions().mode() & 0o7000,
        0,
        "mode {:o}, owner {}",
        sh.mode(),
        sh.uid()
    );
}

/// Issue 15, hole 7: a strict tool connected to a UNIX socket by its path, here the user's
/// session bus in their runtime directory, which Landlock does not govern.
#[test]
fn exec_cannot_reach_the_session_bus_by_its_path() {
    let env = exec_env();
    // A runtime directory of the test's own (the real one may not exist on a CI host), outside
    // `/tmp` (private in the sandbox anyway) and open to every uid: only the sandbox's hiding
    // of host directories stands between the tool and the socket.
    let parent = tempfile::Builder::new()
        .prefix("tw-hole7-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = parent.path().join("run-user");
    std::fs::create_dir_all(&runtime).unwrap();
    let bus = runtime.join("bus");
    let listener = UnixListener::bind(&bus).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::set_permissions(&bus, std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({:?})\n    \
         print('connected')\nexcept OSError as e:\n    print(type(e).__name__)\n",
        bus.display().to_string()
    );
    let run = env.call("exec", json!({"argv": ["python3", "-c", script]}));
    let out = run.json();
    assert_eq!(
        out["output"]["stdout"], "FileNotFoundError\n",
        "{}",
        run.stdout
    );
    assert!(
        listener.accept().is_err(),
        "the bus saw a connection from the sandbox"
    );
}

/// An exec allowlist that admits only `ls` and `git status`, misses denied without asking.
const LS_ONLY: &str = "[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"allowlist\"\n\
                       ask = \"off\"\n[[policy.exec.allow]]\ncommand = \"ls **\"\n\
                       [[policy.exec.allow]]\ncommand = \"git status **\"\n";

/// Issue 15, hole 2: with only `ls **` allowed and `ask = "off"`, `ls 3<>/tmp/x`, `ls >&/tmp/x`
/// and `bash -c 'ls >&/tmp/x'` were allowed, and each created or truncated its file. Here the
/// targets are workspace files, so what a miss would have written can be seen from outside.
#[test]
fn file_writing_redirections_do_not_slip_past_an_exec_allowlist() {
    let env = Env::new().with_config(LS_ONLY);
    env.write("kept", "not truncated\n");
    let ok = env.call("exec", json!({"command": "ls kept"})).ok().json();
    assert_eq!(ok["output"]["stdout"], "kept\n", "the allowlist admits ls");
    for command in [
        "ls 3<>x",
        "ls >&x",
        "ls 1>&x",
        "ls <>x",
        "ls 3<>kept",
        "ls >&kept",
        "bash -c 'ls >&x'",
        "sh -c 'ls 3<>x'",
    ] {
        let run = env.call("exec", json!({"command": command}));
        assert_eq!(
            (run.code, run.json()["error"]["code"].as_str()),
            (7, Some("exec_denied")),
            "{command}: {}",
            run.stdout
        );
    }
    assert!(!env.ws.join("x").exists(), "a refused command created x");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("kept")).unwrap(),
        "not truncated\n"
    );
}

/// Issue 15, hole 3: file A said `security = "allowlist"` and `ask = "off"` (misses denied);
/// adding file B with only `ask = "on-miss"` turned those denials into asks. Both orders of the
/// two documents are tried: the strictest setting stands whichever comes last.
#[test]
fn a_second_policy_document_does_not_turn_a_denial_into_an_ask() {
    let strict = "allow = [\"group:exec\"]\n[exec]\nsecurity = \"allowlist\"\nask = \"off\"\n\
                  [[exec.allow]]\ncommand = \"ls **\"\n";
    let loose = "[exec]\nask = \"on-miss\"\n";
    for (first, second) in [(strict, loose), (loose, strict)] {
        let env = Env::new();
        let a = env.root.path().join("a.toml");
        let b = env.root.path().join("b.toml");
        std::fs::write(&a, first).unwrap();
        std::fs::write(&b, second).unwrap();
        let env = env.with_config(&format!(
            "policy_files = [{:?}, {:?}]\n",
            a.display().to_string(),
            b.display().to_string()
        ));
        std::fs::create_dir(env.ws.join("victim")).unwrap();
        env.call("exec", json!({"command": "ls"})).ok();
        let run = env.call("exec", json!({"command": "rm -rf victim"}));
        check_status(&run, 7, "permission_denied", Some("exec_denied"));
        assert!(env.ws.join("victim").is_dir());
    }
}

/// Issue 15, hole 4: with `./run.sh` allowlisted, `{"argv": ["./run.sh"], "cwd": "sub"}` was
/// allowed and ran `sub/run.sh`. The program judged is the one that would run.
#[test]
fn a_relative_program_is_judged_where_it_would_run() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"allowlist\"\n\
         ask = \"off\"\n[[policy.exec.allow]]\ncommand = \"./run.sh **\"\n",
    );
    for (path, body) in [
        ("run.sh", "#!/bin/sh\necho root\n"),
        ("sub/run.sh", "#!/bin/sh\ntouch planted\necho sub\n"),
    ] {
        let p = env.write(path, body);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ok = env.call("exec", json!({"argv": ["./run.sh"]})).ok().json();
    assert_eq!(ok["output"]["stdout"], "root\n");
    for args in [
        json!({"argv": ["./run.sh"], "cwd": "sub"}),
        json!({"command": "./run.sh", "cwd": "sub"}),
    ] {
        let run = env.call("exec", args.clone());
        check_status(&run, 7, "permission_denied", Some("exec_denied"));
        let message = run.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("sub/run.sh"), "{args}: {message}");
    }
    assert!(!env.ws.join("sub/planted").exists(), "sub/run.sh ran");
}
