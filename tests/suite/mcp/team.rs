//! Issue 21 on a small scale, as its users would run it: two `toolwarden serve` replicas on one
//! team store (a throwaway Debian PostgreSQL), agents on each over MCP with the official Python
//! SDK, one replica killed with SIGKILL halfway (tests/mcp/load_team.py). Every reply an agent
//! got has its audit row, `audit verify` passes, and a tool limited to 100 calls a minute admits
//! exactly 100 of 400 parallel calls spread over both replicas; someone watching replica a's
//! `/api/v1/events` meanwhile sees b's calls end. `scripts/bench team` runs the
//! same script with 10,000 calls for the figures. And `/api/v1/events` on one replica shows the
//! calls made on another (a CLI call that opens, runs and exits), each marked with its replica.

use std::io::{BufRead as _, BufReader, Write as _};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::super::support::{Env, binary, block_on};
use super::http::{Served, admin_token};

#[test]
fn two_replicas_on_one_team_store_survive_a_kill_with_every_reply_audited_and_exact_limits() {
    let root = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(super::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/load_team.py"))
        .arg("--toolwarden")
        .arg(binary())
        .args([
            "--calls",
            "400",
            "--agents",
            "4",
            "--rate-calls",
            "400",
            "--watch",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.path())
        .env("TMPDIR", std::env::temp_dir())
        .current_dir(root.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{stderr}"));
    eprintln!("team load: {report}");
    assert_eq!(report["replies_without_audit_row"], 0, "{report}");
    assert_eq!(report["audit_verify_exit"], 0, "{report}");
    assert_eq!(report["not_success"], 0, "{report}");
    assert_eq!(report["rate_limit"]["admitted"], 100, "{report}");
    assert!(
        report["per_replica"]["b"]["replies"].as_u64().unwrap() > 0,
        "the killed replica answered before it died: {report}"
    );
    assert!(
        report["replies"].as_u64().unwrap() >= 300,
        "most calls were answered: {report}"
    );
    // Someone followed replica a's /api/v1/events throughout and saw b's calls end there (all
    // but, at most, the few b answered as it was killed: live events are not the record).
    let watched = &report["watched"];
    let (seen, answered) = (
        watched["b_replies_seen_ending_on_a"].as_u64().unwrap(),
        watched["b_replies"].as_u64().unwrap(),
    );
    assert!(seen > 0 && seen * 10 >= answered * 9, "{report}");
    assert!(out.status.success(), "{report}\n{stderr}");
}

/// Reads `/api/v1/events` of `served` on a thread; each event's JSON arrives on the channel.
fn follow_events(served: &Served, token: &str) -> std::sync::mpsc::Receiver<Value> {
    let mut s = std::net::TcpStream::connect(served.addr()).unwrap();
    write!(
        s,
        "GET /api/v1/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: text/event-stream\r\n\r\n",
        served.addr()
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && let Ok(v) = serde_json::from_str::<Value>(data)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The events of `execution_id` that arrive within `wait`, up to the one that ends it.
fn events_of(
    rx: &std::sync::mpsc::Receiver<Value>,
    execution_id: &str,
    wait: Duration,
) -> Vec<Value> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(event) = rx.recv_timeout(left) else {
            break;
        };
        if event["execution_id"] == execution_id {
            let done = event["type"] != "started";
            out.push(event);
            if done {
                break;
            }
        }
    }
    out
}

#[test]
fn the_events_endpoint_of_one_replica_shows_the_calls_made_on_another() {
    let a = Env::new();
    let mut b = Env::new();
    let url = a
        .store_url
        .clone()
        .unwrap_or_else(|| block_on(tw_store::testing::PgCluster::shared().fresh_database()));
    let a = Env {
        store_url: Some(url.clone()),
        ..a
    };
    b.store_url = Some(url);
    let served = Served::start(&b);
    let events = follow_events(&served, &admin_token(&b));
    // B says it is watched as the stream opens; a CLI call that opens after that forwards its
    // events. The first calls may open before B's word is in.
    let call = |n: u32| {
        let run = a.call("echo", json!({"n": n})).ok();
        run.json()["execution_id"].as_str().unwrap().to_owned()
    };
    let first = (0..20)
        .find_map(|n| {
            let id = call(n);
            let seen = events_of(&events, &id, Duration::from_millis(500));
            (!seen.is_empty()).then_some(seen)
        })
        .unwrap_or_else(|| {
            panic!(
                "no call on A reached B's events; B's stderr:\n{}",
                served.stderr_so_far()
            )
        });
    let replica = first[0]["replica"]
        .as_str()
        .expect("marked with its replica")
        .to_owned();
    // From then on every call is shown, started then completed, from a new process each time.
    for n in 100..103 {
        let id = call(n);
        let seen = events_of(&events, &id, Duration::from_secs(10));
        let kinds: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["started", "completed"], "{seen:?}");
        let on = seen[0]["replica"].as_str().unwrap();
        assert!(
            on.contains(':') && on != replica,
            "each CLI call is a replica of its own: {on}"
        );
    }
}
