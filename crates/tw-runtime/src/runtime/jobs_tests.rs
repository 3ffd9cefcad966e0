//! `exec`'s background jobs through the whole pipeline, with real sandboxed processes: the call
//! returns at once with a job id; `exec_output` reads the output so far by offsets, `exec_wait`
//! waits for the end and says how, `exec_kill` stops the whole tree; a job is only its
//! starter's; the time limit stops it; a caller's running jobs are capped; and every job dies
//! with its runtime. Each call audited.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::ToolStatus;

use super::net_tests::called as call;
use super::*;

async fn open(dir: &Path) -> Runtime {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let text = "[policy]\ndefault = \"deny\"\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n";
    let config = Config::parse(text, Path::new("/etc/tw/config.toml"), None).unwrap();
    Runtime::open(RuntimeOptions::new(dir.join("data"), vec![ws], config))
        .await
        .unwrap()
}

async fn start(rt: &Runtime, agent: &str, command: &str) -> String {
    let (status, out) = call(
        rt,
        agent,
        "exec",
        json!({"command": command, "background": true}),
    )
    .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(out["background"], json!(true));
    out["job_id"].as_str().unwrap().to_owned()
}

/// A job that appends a line to `ws/tick` every 20 ms.
const TICKING: &str = "while true; do echo x >> tick; sleep 0.02; done";

/// Whether `file` still grows over half a second.
async fn grows(file: &Path) -> bool {
    let size = || std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let before = size();
    tokio::time::sleep(Duration::from_millis(500)).await;
    size() > before
}

fn ws(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("ws")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_runs_on_its_output_is_read_by_offsets_and_its_end_reported() {
    let dir = tempfile::tempdir().unwrap();
    let rt = open(dir.path()).await;
    let began = Instant::now();
    let id = start(
        &rt,
        "agent-a",
        "echo first; sleep 1; echo second; echo oops >&2; exit 3",
    )
    .await;
    assert!(
        began.elapsed() < Duration::from_millis(900),
        "the call returned before the job ended"
    );

    // The output so far, then from where that read stopped.
    let mut seen = String::new();
    let mut offset = 0;
    let end = loop {
        let (status, out) = call(
            &rt,
            "agent-a",
            "exec_output",
            json!({"job_id": id, "offset": offset}),
        )
        .await;
        assert_eq!(status, ToolStatus::Success, "{out}");
        seen.push_str(out["stdout"].as_str().unwrap());
        offset = out["next_offset"].as_u64().unwrap();
        if out["running"] == json!(false) {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(seen, "first\nsecond\n");
    assert_eq!(
        (&end["exit_code"], &end["stopped"], &end["stderr"]),
        (&json!(3), &Value::Null, &json!("oops\n"))
    );
    let (_, waited) = call(
        &rt,
        "agent-a",
        "exec_wait",
        json!({"job_id": id, "timeout_ms": 0}),
    )
    .await;
    assert_eq!(
        (&waited["running"], &waited["exit_code"]),
        (&json!(false), &json!(3))
    );

    // Another caller is told there is no such job, whatever it asks.
    for tool in ["exec_output", "exec_wait", "exec_kill"] {
        let (status, out) = call(&rt, "agent-b", tool, json!({"job_id": id})).await;
        assert_eq!(
            (status, &out["code"]),
            (ToolStatus::NotFound, &json!("unknown_job")),
            "{tool}"
        );
    }
    let (status, _) = call(
        &rt,
        "agent-a",
        "exec_output",
        json!({"job_id": "job; rm -rf /"}),
    )
    .await;
    assert_eq!(status, ToolStatus::ValidationError);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_or_timed_out_job_stops_whole_and_the_caller_has_a_cap() {
    let dir = tempfile::tempdir().unwrap();
    let rt = open(dir.path()).await;
    let id = start(&rt, "agent-a", TICKING).await;
    let tick = ws(&dir).join("tick");
    assert!(grows(&tick).await, "the job runs");
    let (status, out) = call(&rt, "agent-a", "exec_kill", json!({"job_id": id})).await;
    assert_eq!(
        (status, &out["running"], &out["stopped"]),
        (ToolStatus::Success, &json!(false), &json!("killed")),
        "{out}"
    );
    assert!(!grows(&tick).await, "nothing of it runs on");

    let (_, out) = call(
        &rt,
        "agent-a",
        "exec",
        json!({"argv": ["sleep", "30"], "background": true, "timeout_ms": 300}),
    )
    .await;
    let id = out["job_id"].as_str().unwrap();
    let (_, out) = call(
        &rt,
        "agent-a",
        "exec_wait",
        json!({"job_id": id, "timeout_ms": 10_000}),
    )
    .await;
    assert_eq!(
        (&out["running"], &out["stopped"]),
        (&json!(false), &json!("time_limit")),
        "{out}"
    );

    let mut ids = Vec::new();
    for _ in 0..crate::builtins::jobs::MAX_PER_CALLER {
        ids.push(start(&rt, "agent-a", "sleep 30").await);
    }
    let (status, out) = call(
        &rt,
        "agent-a",
        "exec",
        json!({"command": "sleep 30", "background": true}),
    )
    .await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::PermissionDenied, &json!("too_many_jobs")),
        "{out}"
    );
    // Another caller has a cap of its own.
    let other = start(&rt, "agent-b", "sleep 30").await;
    for id in ids.iter().chain([&other]) {
        let agent = if id == &other { "agent-b" } else { "agent-a" };
        call(&rt, agent, "exec_kill", json!({"job_id": id})).await;
    }
    start(&rt, "agent-a", "true").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_background_job_dies_with_its_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let rt = open(dir.path()).await;
    start(&rt, "agent-a", TICKING).await;
    let tick = ws(&dir).join("tick");
    assert!(grows(&tick).await, "the job runs");
    drop(rt);
    // The stop is a SIGTERM to the tree, then SIGKILL after the sandbox's grace period.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!grows(&tick).await, "the job ended with the runtime");
}
