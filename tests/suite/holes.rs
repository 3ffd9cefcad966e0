//! Issue 15's sandbox holes, reproduced exactly as the outside attack found them, through the
//! real binary: a strict `exec` that planted a set-user-ID root shell in the workspace, and one
//! that reached the user's D-Bus session bus by its path. (tw-sandbox's escape suite tries every
//! other route to the same ends; these pin the reports themselves.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;

use serde_json::json;

use super::support::Env;

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
