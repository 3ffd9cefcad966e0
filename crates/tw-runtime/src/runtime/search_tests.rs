//! `web_search` and what the config's `[network]` adds to the network tools, through the whole
//! pipeline against real local servers with names mapped by the test resolver: a SearXNG
//! provider's results, with those the call's rules refuse withheld; no provider is a clear
//! failure; a secret named in a header is sent only to its hosts and never stored or echoed; a
//! GET is judged as reading and a POST as a side effect; a host past its rate limit is refused.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, Decision, ToolStatus};

use super::net_tests::{audited, open_with};
use super::policy_tests::{Install, code};
use super::*;
use crate::net::test_server::{Reply, serve};

const POLICY: &str = r#"
[policy]
default = "allow"
[[policy.rules]]
name = "web"
tools = ["http_fetch", "web_search"]
allow_domains = ["*", "site.test", "other.test"]
block_domains = ["blocked.test"]

[network.secrets.path]
env = "PATH"
hosts = ["site.test"]
"#;

async fn open(install: &Install, extra: &str) -> Runtime {
    let config = format!("{extra}\n{POLICY}");
    open_with(
        install,
        &config,
        &["site.test", "other.test", "search.test"],
    )
    .await
}

async fn call(rt: &Runtime, tool: &str, args: Value) -> (ToolResult, tw_store::AuditRow) {
    audited(rt, tool, args, Caller::agent("agent-7")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searxng_results_come_back_and_those_the_rules_refuse_are_withheld() {
    let answer = json!({"query": "tokio", "results": [
        {"title": "Tokio", "url": "https://tokio.rs/", "content": "An async runtime"},
        {"title": "Blocked", "url": "https://blocked.test/x", "content": "no"},
        {"title": "Loopback", "url": "http://127.0.0.1/admin", "content": "no"},
        {"title": "Docs", "url": "https://docs.rs/tokio", "content": "API docs"},
        {"title": "Third", "url": "https://example.org/", "content": "cut by count"}
    ]});
    let s = serve(vec![(
        "/search?q=tokio+site%3Adocs.rs&format=json",
        Reply::Body(answer.to_string().into_bytes()),
    )])
    .await;
    let install = Install::new("");
    let provider = format!(
        "[network.search]\nprovider = \"searxng\"\nurl = \"http://search.test:{}\"",
        s.port
    );
    let rt = open(&install, &provider).await;
    let (result, row) = call(
        &rt,
        "web_search",
        json!({"query": "tokio", "site": "docs.rs", "count": 2}),
    )
    .await;
    assert_eq!(result.status, ToolStatus::Success, "{:?}", result.error);
    assert_eq!(
        result.output.unwrap(),
        json!({
            "provider": "searxng",
            "query": "tokio site:docs.rs",
            "results": [
                {"title": "Tokio", "url": "https://tokio.rs/", "snippet": "An async runtime"},
                {"title": "Docs", "url": "https://docs.rs/tokio", "snippet": "API docs"}
            ],
            "withheld": 2
        })
    );
    assert_eq!(row.metadata["network"]["hosts"], json!(["search.test"]));
    assert_eq!(row.metadata["network"]["addresses"], json!(["127.0.0.1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_provider_a_search_fails_saying_how_to_configure_one() {
    let install = Install::new("");
    let rt = open(&install, "").await;
    let (result, row) = call(&rt, "web_search", json!({"query": "tokio"})).await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::Failed, Some("not_configured"))
    );
    assert!(
        result
            .error
            .unwrap()
            .message
            .contains("add a [network.search] table"),
    );
    assert_eq!(row.status, ToolStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_goes_only_to_its_hosts_and_is_never_stored_or_echoed() {
    let value = std::env::var("PATH").expect("the test runs with PATH set");
    let s = serve(vec![("/echo", Reply::Echo)]).await;
    let install = Install::new("");
    let rt = open(&install, "").await;
    let headers = json!({"X-Key": "k=${secret:path}"});
    let (result, row) = call(
        &rt,
        "http_fetch",
        json!({"url": format!("http://site.test:{}/echo", s.port), "headers": headers}),
    )
    .await;
    assert_eq!(result.status, ToolStatus::Success, "{:?}", result.error);
    let echoed = result.output.unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    // The server got the value; the caller sees its name.
    assert!(
        echoed
            .to_ascii_lowercase()
            .contains("x-key: k=[secret:path]"),
        "{echoed}"
    );
    assert!(!echoed.contains(&value), "{echoed}");
    assert_eq!(row.arguments["headers"], headers);
    assert!(!serde_json::to_string(&row).unwrap().contains(&value));

    let (result, row) = call(
        &rt,
        "http_fetch",
        json!({"url": format!("http://other.test:{}/echo", s.port), "headers": headers}),
    )
    .await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::PermissionDenied, Some("egress_refused"))
    );
    assert_eq!(
        row.metadata["network"]["refusal"],
        json!({"rule": "secret path hosts"})
    );
    assert_eq!(row.metadata["network"]["requests"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_is_judged_as_reading_and_a_post_as_a_side_effect() {
    let install = Install::new("");
    let rt = open(&install, "mode = \"recovery\"").await;
    let caller = Caller::agent("agent-7");
    let judge = |args: Value| rt.explain("http_fetch", &args, &caller).unwrap().decision;
    let url = "https://site.test/";
    assert_eq!(judge(json!({"url": url})), Decision::Allow);
    assert_eq!(
        judge(json!({"url": url, "method": "HEAD"})),
        Decision::Allow
    );
    assert_eq!(judge(json!({"url": url, "method": "POST"})), Decision::Ask);
    assert_eq!(
        judge(json!({"url": url, "method": "DELETE"})),
        Decision::Ask
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_past_its_rate_limit_is_refused_until_its_window_frees_a_slot() {
    let s = serve(vec![("/", Reply::Body(b"ok".to_vec()))]).await;
    let install = Install::new("");
    let rt = open(
        &install,
        "[network.rate_limits]\n\"*.test\" = { per_minute = 2 }",
    )
    .await;
    let url = |host: &str| json!({"url": format!("http://{host}:{}/", s.port)});
    for host in ["site.test", "other.test"] {
        let (result, _) = call(&rt, "http_fetch", url(host)).await;
        assert_eq!(result.status, ToolStatus::Success, "{:?}", result.error);
    }
    // The wildcard's one counter is full for every host it matches.
    let (result, row) = call(&rt, "http_fetch", url("site.test")).await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::PermissionDenied, Some("egress_refused"))
    );
    let message = result.error.unwrap().message;
    assert!(
        message.starts_with("site.test reached its limit of 2 requests per minute; retry in "),
        "{message}"
    );
    assert_eq!(
        row.metadata["network"]["refusal"],
        json!({"rule": "network rate_limits \"*.test\""})
    );
    assert_eq!(row.metadata["network"]["requests"], 0);
    assert_eq!(s.connections.load(std::sync::atomic::Ordering::SeqCst), 2);
}
