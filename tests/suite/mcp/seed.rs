//! Seed 004's success criterion, end to end: an agent over MCP (the official Python SDK, stdio)
//! calls `read_file`, `system_metrics_snapshot` and `web_search` (a SearXNG provider served on
//! the loopback, reached through the egress gatekeeper by a name the config maps), and each call
//! is in the audit log with its decision and the policy's reasons; the host tools a policy leaves
//! out are neither listed nor callable.

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
