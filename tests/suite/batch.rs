//! Batches through the CLI: input order, stop-on-error with recorded skips, parallel runs, and the
//! durability promise: after `kill -9` mid-batch, every result the CLI printed has its audit record.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

fn batch_file(env: &Env, calls: &[Value]) -> String {
    let path = env.root.path().join("batch.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn sequential_stop_on_error_records_the_skipped_calls() {
    let env = Env::new();
    let file = batch_file(
        &env,
        &[
            json!({"tool": "echo", "arguments": {"n": 1}}),
            json!({"tool": "read_file", "arguments": {"path": "missing.txt"}}),
            json!({"tool": "echo", "arguments": {"n": 3}}),
        ],
    );
    let run = env.cmd(&["batch", &file, "--stop-on-error"]).run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    let results = lines(&run.stdout);
    let got: Vec<(String, Option<String>)> = results
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap().to_owned(),
                r["error"]["code"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("success".into(), None),
            ("failed".into(), Some("not_found".into())),
            ("cancelled".into(), Some("skipped".into())),
        ]
    );
    let rows = env.audit_rows();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2].error_code.as_deref(), Some("skipped"));
    // One batch, one trace.
    assert!(
        results
            .iter()
            .all(|r| r["trace_id"] == results[0]["trace_id"])
    );
}

#[test]
fn parallel_results_come_back_in_input_order() {
    let env = Env::new();
    let calls: Vec<Value> = (0..40)
        .map(|i| json!({"tool": "echo", "arguments": {"i": i}}))
        .collect();
    let file = batch_file(&env, &calls);
    let run = env.cmd(&["batch", &file, "--parallel", "8"]).run().ok();
    let got: Vec<Value> = lines(&run.stdout)
        .into_iter()
        .map(|r| r["output"]["i"].clone())
        .collect();
    assert_eq!(got, (0..40).map(|i| json!(i)).collect::<Vec<_>>());
    assert_eq!(env.audit_rows().len(), 40);
}

#[test]
fn kill_9_mid_batch_loses_no_record_of_a_printed_result() {
    let env = Env::new();
    let tick = env.root.path().join("tick.json");
    std::fs::write(
        &tick,
        json!({"name": "tick", "description": "A short pause", "category": "system",
               "command": {"argv": ["sleep", "0.002"]}})
        .to_string(),
    )
    .unwrap();
    env.cmd(&["tools", "add", tick.to_str().unwrap()])
        .run()
        .ok();
    let calls: Vec<Value> = (0..1000)
        .map(|i| {
            if i % 2 == 0 {
                json!({"tool": "tick"})
            } else {
                json!({"tool": "echo", "arguments": {"i": i}})
            }
        })
        .collect();
    let file = batch_file(&env, &calls);
    let mut child = env.cmd(&["batch", &file]).spawn();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut printed = Vec::new();
    let start = Instant::now();
    while printed.len() < 300 {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the batch ended early"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        printed.push(v["execution_id"].as_str().unwrap().to_owned());
        assert!(start.elapsed() < Duration::from_secs(60));
    }
    child.kill().unwrap(); // SIGKILL: no cleanup, no flush, no graceful shutdown
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the batch finished before it could be killed"
    );
    // Lines that were complete in the pipe before the kill count as printed too.
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
    for line in rest.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            printed.push(v["execution_id"].as_str().unwrap().to_owned());
        }
    }

    let rows = env.audit_rows();
    let recorded: std::collections::HashSet<String> =
        rows.iter().map(|r| r.execution_id.clone()).collect();
    let missing: Vec<&String> = printed
        .iter()
        .filter(|id| !recorded.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} printed results have no audit record: {missing:?}",
        missing.len()
    );
    assert!(
        rows.len() >= printed.len() && rows.len() < 1000,
        "{} rows",
        rows.len()
    );
}
