//! The host tools through the whole pipeline on a real installation, checked against what the
//! kernel says itself (`/proc`) and against real processes this test starts: a sleeping one, a
//! busy one, a zombie. The config's `[system] processes` refuses a name outside it and a pid
//! that turns out to be outside it, without naming that process; every call is audited.
#![allow(clippy::disallowed_methods)] // the tests start the processes the tools look at

use std::process::{Child, Command};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use super::net_tests::{audited, succeeded};
use super::policy_tests::{Install, code};
use super::*;

async fn call(rt: &Runtime, tool: &str, args: Value) -> (ToolResult, tw_store::AuditRow) {
    audited(rt, tool, args, Caller::agent("agent-7")).await
}

/// A field of `/proc/meminfo`, in bytes.
fn meminfo(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// A child that is killed and reaped when the test ends, however it ends.
struct Kid(Child);

impl Kid {
    fn spawn(program: &str, args: &[&str]) -> Self {
        Self(Command::new(program).args(args).spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_agrees_with_the_kernel() {
    let install = Install::new("");
    let rt = install.open().await.unwrap();
    let out = succeeded(&rt, "system_metrics_snapshot", json!({})).await;
    assert_eq!(out["memory"]["total_bytes"], json!(meminfo("MemTotal")));
    assert_eq!(out["swap"]["total_bytes"], json!(meminfo("SwapTotal")));
    let available = out["memory"]["available_bytes"].as_u64().unwrap();
    assert!(
        available > 0 && available <= meminfo("MemTotal"),
        "{available}"
    );
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    assert_eq!(out["cpu"]["count"], json!(cpus));
    assert_eq!(
        out["cpu"]["per_cpu_percent"].as_array().unwrap().len(),
        cpus
    );
    let usage = out["cpu"]["usage_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&usage), "{usage}");
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let reported = out["uptime_secs"].as_f64().unwrap();
    assert!((reported - uptime).abs() < 5.0, "{reported} vs {uptime}");
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap();
    let fifteen: f64 = loadavg.split_whitespace().nth(2).unwrap().parse().unwrap();
    let reported = out["load"]["fifteen"].as_f64().unwrap();
    assert!((reported - fifteen).abs() < 0.5, "{reported} vs {fifteen}");
    assert!(
        out["network"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["interface"] == "lo"),
        "{}",
        out["network"]
    );
    assert_eq!(out["sample_ms"], json!(200));

    // Without a window there is no CPU rate to give, and nothing claims one.
    let out = succeeded(&rt, "system_metrics_snapshot", json!({"sample_ms": 0})).await;
    assert_eq!(out["cpu"]["usage_percent"], Value::Null);
    assert_eq!(out["cpu"]["per_cpu_percent"], json!([]));

    let (result, row) = call(&rt, "system_metrics_snapshot", json!({"sample_ms": 60000})).await;
    assert_eq!(
        (result.status, row.status),
        (ToolStatus::ValidationError, ToolStatus::ValidationError)
    );
    assert!(
        result.error.unwrap().message.contains("/sample_ms"),
        "the error names the argument"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_is_found_by_pid_and_by_name_and_its_health_is_real() {
    let install = Install::new("");
    let rt = install.open().await.unwrap();
    let sleeper = Kid::spawn("sleep", &["30"]);
    let busy = Kid::spawn("sh", &["-c", "while :; do :; done"]);

    let out = succeeded(
        &rt,
        "check_process_health",
        json!({"pid": sleeper.pid(), "sample_ms": 0}),
    )
    .await;
    assert_eq!(
        (&out["running"], &out["matched"]),
        (&json!(true), &json!(1))
    );
    let p = &out["processes"][0];
    assert_eq!(
        (&p["pid"], &p["name"], &p["threads"], &p["parent_pid"]),
        (
            &json!(sleeper.pid()),
            &json!("sleep"),
            &json!(1),
            &json!(std::process::id())
        )
    );
    assert_eq!(p["cpu_percent"], Value::Null, "no window, no rate");
    assert!(p["memory_bytes"].as_u64().unwrap() > 0, "{p}");
    // The test's own user can see its child's descriptors: stdin, stdout, stderr at least.
    assert!(p["open_files"].as_u64().unwrap() >= 3, "{p}");

    let out = succeeded(&rt, "check_process_health", json!({"name": "sleep"})).await;
    let pids: Vec<&Value> = out["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["pid"])
        .collect();
    assert!(pids.contains(&&json!(sleeper.pid())), "{out}");

    // A busy loop shows its CPU use over the window.
    let out = succeeded(
        &rt,
        "check_process_health",
        json!({"pid": busy.pid(), "sample_ms": 500}),
    )
    .await;
    let cpu = out["processes"][0]["cpu_percent"].as_f64().unwrap();
    assert!(cpu > 10.0, "a busy loop used {cpu}% of a CPU");

    // A process that has exited but was not reaped is listed, as not running.
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id();
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{zpid}/stat")).unwrap();
        if stat.contains(") Z ") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let out = succeeded(
        &rt,
        "check_process_health",
        json!({"pid": zpid, "sample_ms": 0}),
    )
    .await;
    assert_eq!(out["running"], json!(false), "{out}");
    assert_eq!(out["processes"][0]["status"], json!("Zombie"));
    zombie.wait().unwrap();

    // Gone entirely: nothing matches, which is an answer, not a failure.
    let gone = sleeper.pid();
    drop(sleeper);
    let out = succeeded(&rt, "check_process_health", json!({"pid": gone})).await;
    assert_eq!(
        out,
        json!({"running": false, "matched": 0, "processes": [], "truncated": false, "sample_ms": 200})
    );
    let out = succeeded(
        &rt,
        "check_process_health",
        json!({"name": "no-such-process-here"}),
    )
    .await;
    assert_eq!(
        (&out["running"], &out["matched"]),
        (&json!(false), &json!(0))
    );

    // Exactly one of name and pid.
    for bad in [json!({}), json!({"name": "sleep", "pid": 1})] {
        let (result, row) = call(&rt, "check_process_health", bad).await;
        assert_eq!(
            (result.status, row.status),
            (ToolStatus::ValidationError, ToolStatus::ValidationError)
        );
        assert_eq!(
            result.error.unwrap().message,
            "name, pid: give exactly one of them"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_limits_which_processes_may_be_looked_at() {
    let install = Install::new("[system]\nprocesses = [\"sleep\", \"postgres*\"]\n");
    let rt = install.open().await.unwrap();
    let sleeper = Kid::spawn("sleep", &["30"]);
    let shell = Kid::spawn("sh", &["-c", "sleep 30"]);

    let out = succeeded(
        &rt,
        "check_process_health",
        json!({"pid": sleeper.pid(), "sample_ms": 0}),
    )
    .await;
    assert_eq!(out["running"], json!(true));

    let (result, row) = call(&rt, "check_process_health", json!({"name": "sh"})).await;
    assert_eq!(
        (result.status, row.status),
        (ToolStatus::PermissionDenied, ToolStatus::PermissionDenied)
    );
    assert_eq!(code(&result), Some("policy_denied"));
    let message = result.error.unwrap().message;
    assert!(
        message.contains("[system] processes: sleep, postgres*"),
        "{message}"
    );

    // By pid, the process is judged by its name, and that name is not given away.
    let (result, row) = call(
        &rt,
        "check_process_health",
        json!({"pid": shell.pid(), "sample_ms": 0}),
    )
    .await;
    assert_eq!(
        (result.status, row.status),
        (ToolStatus::PermissionDenied, ToolStatus::PermissionDenied)
    );
    let message = result.error.unwrap().message;
    assert!(
        message.starts_with(&format!("process {} is not among", shell.pid())),
        "{message}"
    );
    assert!(!message.contains("\"sh\""), "{message}");
}

#[test]
fn a_bad_process_glob_refuses_to_start_at_its_line() {
    let path = std::path::Path::new("/etc/toolwarden/config.toml");
    let err = Config::parse("[system]\nprocesses = [\"ok\", \"[bad\"]\n", path, None).unwrap_err();
    assert_eq!((err.line, err.column), (Some(2), Some(20)), "{err}");
    assert!(
        err.message.contains("\"[bad\" is not a glob"),
        "{}",
        err.message
    );
}
