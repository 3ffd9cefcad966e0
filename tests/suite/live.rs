//! The live feed across processes, through the real binary: a call running in one `toolwarden`
//! process is listed by `toolwarden running` in another and stopped by `toolwarden cancel`
//! there; the cancelled call ends as cancelled with its audit record written by the process that
//! ran it, and its feed is gone afterwards. A feed left behind by a process that died is removed,
//! and cancelling a call nobody runs says so.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

const LIMIT: Duration = Duration::from_secs(20);

fn exec_env() -> Env {
    Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n")
}

/// Polls `running --json` until it lists `n` calls.
fn in_flight(env: &Env, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let rows = env.cmd(&["running", "--json"]).run().ok().json();
        let rows = rows.as_array().unwrap().clone();
        if rows.len() == n {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} call(s) in flight, have {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_call_running_in_one_process_is_listed_and_cancelled_from_another() {
    let env = exec_env();
    let child = env
        .cmd(&[
            "call",
            "exec",
            "--args",
            &json!({"argv": ["sleep", "30"]}).to_string(),
            "--agent",
            "night-batch",
        ])
        .spawn();
    let started = Instant::now();
    let rows = in_flight(&env, 1);
    let row = &rows[0];
    assert_eq!(row["tool"], "exec");
    assert_eq!(row["agent_id"], "night-batch");
    assert_eq!(row["pid"], child.id());
    let id = row["execution_id"].as_str().unwrap().to_owned();

    let cancel = env.cmd(&["cancel", &id]).run().ok();
    assert!(cancel.stdout.contains(&id), "{}", cancel.stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the call ran to its end instead of being cancelled"
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "cancelled");
    assert_eq!(result["execution_id"], id.as_str());

    let rows = env.audit_rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].execution_id.to_string(), id);
    assert_eq!(rows[0].status.as_str(), "cancelled");
    // The process is gone and so is its feed.
    assert_eq!(in_flight(&env, 0), Vec::<Value>::new());
    let feeds: Vec<_> = std::fs::read_dir(env.data.join("live"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(feeds, Vec::<std::ffi::OsString>::new());
}

#[test]
fn cancelling_a_call_nobody_runs_says_so() {
    let env = exec_env();
    let r = env
        .cmd(&["cancel", "exec-00000000-0000-0000-0000-000000000000"])
        .run();
    assert_eq!(r.code, 9, "{}", r.stdout);
    assert!(r.stderr.contains("No call"), "{}", r.stderr);
    let r = env.cmd(&["cancel", "not an id!"]).run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not an execution id"), "{}", r.stderr);
    assert_eq!(env.audit_rows().len(), 0);
}

#[test]
fn a_feed_left_by_a_dead_process_is_removed() {
    let env = exec_env();
    let dir = env.data.join("live");
    std::fs::create_dir_all(&dir).unwrap();
    // A socket nobody listens on, named for a pid above the kernel's limit (never alive).
    let stale = dir.join("4194304.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    assert_eq!(in_flight(&env, 0), Vec::<Value>::new());
    assert!(!stale.exists(), "the stale feed is still there");
}
