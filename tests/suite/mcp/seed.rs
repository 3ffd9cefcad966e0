//! Seed 004's success criterion, end to end: an agent over MCP (the official Python SDK, stdio)
//! calls `read_file`, `system_metrics_snapshot` and `web_search` (a SearXNG provider served on
//! the loopback, reached through the egress gatekeeper by a name the config maps), and each call
//! is in the audit log with its decision and the policy's reasons; the host tools a policy leaves
//! out are neither listed nor callable. Seed 001's agent, in one session: memory and a
//! background build.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{names, run};
use crate::suite::support::{Answer, Env, serve_with};

/// A SearXNG instance's JSON API as far as `web_search` uses it: every `/search` request gets
/// the same two results. Returns the port.
fn searxng() -> u16 {
    let body = json!({"query": "toolwarden", "results": [
        {"title": "Toolwarden", "url": "https://toolwarden.example/", "content": "The control room"},
        {"title": "MCP", "url": "https://modelcontextprotocol.io/", "content": "The protocol"}
    ]})
    .to_string()
    .into_bytes();
    serve_with(move |_| {
        move |path: &str| {
            if path.starts_with("/search?") {
                Answer::page(200, "application/json", body.clone())
            } else {
                Answer::page(404, "application/json", b"{}".to_vec())
            }
        }
    })
    .port
}

#[test]
fn an_agent_reads_a_file_takes_a_metrics_snapshot_and_searches_the_web_all_audited() {
    let port = searxng();
    let env = Env::new().with_config(&format!(
        r#"[policy]
allow = ["read_file", "system_metrics_snapshot", "web_search"]

[[policy.rules]]
name = "search provider"
tools = ["web_search"]
allow_domains = ["*", "search.test"]

[network.resolve]
"search.test" = ["127.0.0.1"]

[network.search]
provider = "searxng"
url = "http://search.test:{port}"
"#
    ));
    env.write("status.md", "all systems nominal\n");
    let report = run(
        &env,
        &[],
        json!([
            {"op": "list"},
            {"op": "call", "tool": "read_file", "arguments": {"path": "status.md"}},
            {"op": "call", "tool": "system_metrics_snapshot", "arguments": {"sample_ms": 100}},
            {"op": "call", "tool": "web_search", "arguments": {"query": "toolwarden", "count": 2}},
            {"op": "call", "tool": "check_process_health", "arguments": {"pid": 1}},
        ]),
    );
    let steps = report["steps"].as_array().unwrap();
    let mut listed = names(&steps[0]);
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["read_file", "system_metrics_snapshot", "web_search"],
        "the listing is what the policy allows"
    );
    let result = |i: usize| -> &Value { &steps[i]["result"] };
    for i in 1..=3 {
        assert_eq!(result(i)["isError"], json!(false), "{}", result(i));
    }
    assert_eq!(
        result(1)["structuredContent"]["content"],
        json!("all systems nominal\n")
    );
    let snapshot = &result(2)["structuredContent"];
    assert!(
        snapshot["memory"]["total_bytes"].as_u64().unwrap() > 0,
        "{snapshot}"
    );
    assert_eq!(snapshot["sample_ms"], json!(100));
    let hits: Vec<&Value> = result(3)["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["url"])
        .collect();
    assert_eq!(
        hits,
        [
            &json!("https://toolwarden.example/"),
            &json!("https://modelcontextprotocol.io/")
        ]
    );
    assert_eq!(
        result(4)["isError"],
        json!(true),
        "not allowed: {}",
        result(4)
    );

    let rows = env.audit_rows();
    let seen: Vec<(&str, &str, Option<&str>)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.status.as_str(), r.decision.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("read_file", "success", Some("allow")),
            ("system_metrics_snapshot", "success", Some("allow")),
            ("web_search", "success", Some("allow")),
            ("check_process_health", "permission_denied", Some("deny")),
        ]
    );
    for r in &rows {
        assert_eq!(r.agent_id, "mcp:tw-test-client");
        let why = r
            .explanation
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no explanation", r.tool));
        assert!(!why.to_string().is_empty());
    }
    // The search went through the gatekeeper, and its record says where to.
    let search = &rows[2];
    assert!(
        search.metadata.to_string().contains("search.test"),
        "{}",
        search.metadata
    );
}

/// Seed 001's agent over MCP, in one session: it remembers how the project builds, starts the
/// build in the background, reads its output while it runs, waits for it, and finds the note
/// again by its words; a job id of another runtime is unknown. Every call audited.
#[test]
fn an_agent_remembers_runs_a_background_build_and_recalls_over_one_session() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:memory\", \"group:exec\"]\n\n[policy.exec]\nsecurity = \"full\"\n",
    );
    let report = run(
        &env,
        &[],
        json!([
            {"op": "call", "tool": "memory_put", "arguments": {"key": "build/command", "value": "the build runs ./build.sh", "tags": ["build"]}},
            {"op": "call", "tool": "exec", "arguments": {"command": "echo compiling; sleep 1; echo linked", "background": true}},
            {"op": "call", "tool": "exec_output", "arguments": {"job_id": "job-1"}},
            {"op": "call", "tool": "exec_wait", "arguments": {"job_id": "job-1", "timeout_ms": 20000}},
            {"op": "call", "tool": "exec_output", "arguments": {"job_id": "job-1"}},
            {"op": "call", "tool": "memory_search", "arguments": {"query": "how does the build run?", "tags": ["build"]}},
        ]),
    );
    let steps = report["steps"].as_array().unwrap();
    let out = |i: usize| -> &Value { &steps[i]["result"]["structuredContent"] };
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(step["result"]["isError"], json!(false), "step {i}: {step}");
    }
    assert_eq!(out(1)["job_id"], json!("job-1"));
    assert_eq!(
        out(2)["running"],
        json!(true),
        "read while it runs: {}",
        out(2)
    );
    assert_eq!(
        (&out(3)["running"], &out(3)["exit_code"]),
        (&json!(false), &json!(0))
    );
    assert_eq!(out(4)["stdout"], json!("compiling\nlinked\n"));
    assert_eq!(out(5)["results"][0]["key"], json!("build/command"));

    let seen: Vec<(String, String)> = env
        .audit_rows()
        .iter()
        .map(|r| (r.tool.clone(), r.status.as_str().to_owned()))
        .collect();
    let tools = [
        "memory_put",
        "exec",
        "exec_output",
        "exec_wait",
        "exec_output",
        "memory_search",
    ];
    assert_eq!(seen, tools.map(|t| (t.to_owned(), "success".to_owned())));

    // Jobs end with their runtime: a new session does not know job-1.
    let report = run(
        &env,
        &[],
        json!([{"op": "call", "tool": "exec_output", "arguments": {"job_id": "job-1"}}]),
    );
    assert_eq!(report["steps"][0]["result"]["isError"], json!(true));
}

/// A background job dies with its runtime even when the runtime is killed outright: the
/// sandbox's helper takes the runtime's end of the control socket closing as a stop request.
/// Spoken to in raw JSON-RPC over stdio, so the server can be SIGKILLed between two lines.
#[test]
fn a_background_job_dies_with_a_runtime_killed_outright() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::Stdio;
    use std::time::Duration;

    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n\n[policy.exec]\nsecurity = \"full\"\n");
    let mut server = env.cmd(&["mcp"]);
    server
        .cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = server.cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut answer = |id: u64| -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(output.read_line(&mut line).unwrap() > 0, "the server ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    };
    let tick = env.write("tick", "");
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ] {
        writeln!(input, "{line}").unwrap();
    }
    answer(1);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec", "arguments": {
        "command": "while true; do echo x >> tick; sleep 0.02; done", "background": true}}});
    writeln!(input, "{call}").unwrap();
    let started = answer(2);
    assert_eq!(started["result"]["isError"], json!(false), "{started}");

    let size = || std::fs::metadata(&tick).unwrap().len();
    let grows = || {
        let before = size();
        std::thread::sleep(Duration::from_millis(500));
        size() > before
    };
    assert!(grows(), "the job runs");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(!grows(), "the job died with the runtime");
}
