//! `http_fetch` through the whole pipeline against a real local server, names mapped by the test
//! resolver: an allowed page comes back as Markdown with its network facts in the audit record;
//! a local address is refused by the gatekeeper with the rule and the address, and that refusal
//! is audited too; a malformed header is invalid at its field.

use std::net::{IpAddr, Ipv4Addr};

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::{Caller, ToolStatus};

use super::policy_tests::{Install, code};
use super::*;
use crate::net::StaticResolver;
use crate::net::test_server::{Reply, serve};

/// Any host by name, and the test sites named so they may reach the loopback server.
const POLICY: &str = r#"
[policy]
default = "allow"
[[policy.rules]]
name = "web"
tools = ["http_fetch"]
allow_domains = ["*", "site.test", "other.test"]
"#;

async fn open(install: &Install) -> Runtime {
    open_with(install, POLICY, &["site.test", "other.test"]).await
}

/// A runtime under `config`, the test resolver mapping each of `local` to the loopback.
pub(super) async fn open_with(install: &Install, config: &str, local: &[&str]) -> Runtime {
    let path = install.path("config.toml");
    let config = Config::parse(config, &path, None).unwrap();
    let mut options = RuntimeOptions::new(install.path("data"), vec![install.path("ws")], config);
    options.resolver =
        Arc::new(StaticResolver::new(local.iter().map(|name| {
            (*name, vec![vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]])
        })));
    Runtime::open(options).await.unwrap()
}

async fn fetch(rt: &Runtime, args: serde_json::Value) -> (ToolResult, serde_json::Value) {
    fetch_as(rt, args, Caller::agent("agent-7")).await
}

async fn fetch_as(
    rt: &Runtime,
    args: serde_json::Value,
    caller: Caller,
) -> (ToolResult, serde_json::Value) {
    let (result, row) = audited(rt, "http_fetch", args, caller).await;
    (result, row.metadata)
}

/// Runs a call, with the audit record it left.
pub(super) async fn audited(
    rt: &Runtime,
    tool: &str,
    args: serde_json::Value,
    caller: Caller,
) -> (ToolResult, tw_store::AuditRow) {
    let result = rt.execute(rt.call(tool, args, caller)).await;
    let row = rt
        .store()
        .get(result.execution_id.as_str())
        .await
        .unwrap()
        .expect("every call leaves its audit record");
    (result, row)
}

/// A call as `agent`: its status, and its output or `{code, message}`; the audit record agrees.
pub(super) async fn called(
    rt: &Runtime,
    agent: &str,
    tool: &str,
    args: serde_json::Value,
) -> (ToolStatus, serde_json::Value) {
    let (result, row) = audited(rt, tool, args, Caller::agent(agent)).await;
    assert_eq!(result.status, row.status, "the audit record agrees");
    let out = match (result.status, result.error) {
        (ToolStatus::Success, _) => result.output.unwrap_or_default(),
        (_, error) => {
            let (code, message) = error.map(|e| (e.code, e.message)).unzip();
            serde_json::json!({"code": code, "message": message})
        }
    };
    (result.status, out)
}

/// The output of a call that must succeed, its audit record agreeing.
pub(super) async fn succeeded(
    rt: &Runtime,
    tool: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let (result, row) = audited(rt, tool, args, Caller::agent("agent-7")).await;
    assert_eq!(
        (result.status, row.status),
        (ToolStatus::Success, ToolStatus::Success),
        "{tool}: {:?}",
        result.error
    );
    result.output.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_page_comes_back_as_markdown_with_its_network_facts_audited() {
    let page = b"<html><body><h1>Hello</h1><p>A <a href=\"/x\">link</a>.</p></body></html>";
    let s = serve(vec![("/page", Reply::Body(page.to_vec()))]).await;
    let install = Install::new("");
    let rt = open(&install).await;
    let url = format!("http://site.test:{}/page", s.port);
    let (result, metadata) = fetch(&rt, json!({"url": url, "as": "markdown"})).await;
    assert_eq!(result.status, ToolStatus::Success, "{:?}", result.error);
    let output = result.output.unwrap();
    assert_eq!(output["status"], 200);
    assert_eq!(output["final_url"], url.as_str());
    assert_eq!(output["content"], "# Hello\n\nA [link](/x).");
    assert_eq!(
        metadata["network"],
        json!({
            "requests": 1,
            "hosts": ["site.test"],
            "addresses": ["127.0.0.1"],
            "bytes_sent": 0,
            "bytes_received": page.len(),
            "redirects": [],
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_address_is_refused_by_the_gatekeeper_and_the_refusal_is_audited() {
    let s = serve(vec![("/", Reply::Body(b"internal".to_vec()))]).await;
    let install = Install::new("");
    let rt = open(&install).await;
    let (result, metadata) = fetch(&rt, json!({"url": format!("http://0x7f.1:{}/", s.port)})).await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::PermissionDenied, Some("egress_refused"))
    );
    let message = &result.error.as_ref().unwrap().message;
    assert!(
        message.contains("127.0.0.1 is a loopback address")
            && message.ends_with("(rule: address class)"),
        "{message}"
    );
    assert_eq!(
        metadata["network"],
        json!({
            "requests": 0,
            "hosts": [],
            "addresses": [],
            "bytes_sent": 0,
            "bytes_received": 0,
            "redirects": [],
            "refusal": {"rule": "address class", "address": "127.0.0.1"},
        })
    );
    assert_eq!(s.connections.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_header_is_invalid_at_its_field() {
    let install = Install::new("");
    let rt = open(&install).await;
    let (result, _) = fetch(
        &rt,
        json!({"url": "http://site.test/", "headers": {"X-Ok": "a\r\nInjected: 1"}}),
    )
    .await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::ValidationError, Some("invalid_arguments"))
    );
    assert_eq!(
        result.error.unwrap().message,
        "headers/X-Ok: a header value may not hold control characters or line breaks"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skills_domain_rules_judge_every_hop_not_only_the_url_asked_for() {
    let install = Install::new("");
    let skill = install.path("ws/skills/research/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: research\ndescription: Reads one site.\ntools:\n  - name: http_fetch\n    allowed_domains: [site.test]\n---\n",
    )
    .unwrap();
    let s = serve(vec![("/ok", Reply::Body(b"fine".to_vec()))]).await;
    let hop = serve(vec![(
        "/away",
        Reply::Redirect(302, format!("http://other.test:{}/ok", s.port)),
    )])
    .await;
    let rt = open(&install).await;
    let url = format!("http://site.test:{}/away", hop.port);

    // Without the skill, the redirect is followed.
    let (plain, _) = fetch(&rt, json!({ "url": url })).await;
    assert_eq!(plain.status, ToolStatus::Success, "{:?}", plain.error);

    // Under it, the URL asked for passes the skill's rules but the hop to other.test does not.
    let under = Caller::agent("agent-7").with_skill("research");
    let (result, metadata) = fetch_as(&rt, json!({ "url": url }), under).await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::PermissionDenied, Some("egress_refused"))
    );
    assert_eq!(
        metadata["network"]["refusal"],
        json!({"rule": "skill research allow_domains"})
    );
    assert_eq!(
        metadata["network"]["redirects"],
        json!([format!("http://other.test:{}/ok", s.port)])
    );
}

/// Regression: a page of 4,000 nested elements (20 KB) overflowed the stack of the recursive
/// Markdown walk and aborted the whole process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_nested_to_overflow_the_reader_fails_the_call_not_the_process() {
    let page = format!("{}x{}", "<span>".repeat(100_000), "</span>".repeat(100_000));
    let s = serve(vec![("/deep", Reply::Body(page.into_bytes()))]).await;
    let install = Install::new("");
    let rt = open(&install).await;
    let url = format!("http://site.test:{}/deep", s.port);
    let (result, _) = fetch(&rt, json!({"url": url, "as": "markdown"})).await;
    assert_eq!(
        (result.status, code(&result)),
        (ToolStatus::Failed, Some("execution_failed"))
    );
    assert!(
        result
            .error
            .unwrap()
            .message
            .contains("nests elements more than 256 deep"),
    );
    let (text, _) = fetch(&rt, json!({"url": url, "max_bytes": 64})).await;
    assert_eq!(text.status, ToolStatus::Success, "{:?}", text.error);
}

/// Reads URLs, one a line, and answers each with what fetching it through the environment's
/// proxy gave, then whether a direct connection to the test server got through.
const FETCHER: &str = r#"
import socket, sys, urllib.request, urllib.error
port = int(sys.argv[1])
for url in sys.stdin:
    try:
        got = urllib.request.urlopen(url.strip(), timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        got = f"refused {e.code}"
    except urllib.error.URLError as e:
        got = f"unreachable {e.reason}"
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2)
        direct = "reached"
    except OSError:
        direct = "failed"
    print(got, "| direct", direct, flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_upstream_granted_hosts_reaches_them_only_through_the_gatekeeper() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let s = serve(vec![("/page", Reply::Body(b"hello".to_vec()))]).await;
    let install = Install::new("");
    let config = format!(
        "{POLICY}\n[upstream.web]\ncommand = \"python3\"\nargs = [\"-c\", '''{FETCHER}''', \
         \"{}\"]\nisolation = \"strict\"\nnetwork = [\"site.test\"]\n",
        s.port
    );
    let rt = open_with(&install, &config, &["site.test", "other.test"]).await;
    let server = Config::parse(&config, &install.path("config.toml"), None)
        .unwrap()
        .upstream["web"]
        .clone();
    let mut process = rt
        .upstreams()
        .start_upstream_process(&server)
        .await
        .unwrap();
    let mut stdin = process.take_stdin().unwrap();
    let mut stdout = tokio::io::BufReader::new(process.take_stdout().unwrap());
    let mut answers = Vec::new();
    for host in ["site.test", "other.test"] {
        let url = format!("http://{host}:{}/page\n", s.port);
        stdin.write_all(url.as_bytes()).await.unwrap();
        let mut line = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            stdout.read_line(&mut line),
        )
        .await
        .expect("an answer")
        .unwrap();
        answers.push(line);
    }
    assert_eq!(
        answers,
        ["hello | direct failed\n", "refused 403 | direct failed\n"]
    );
    assert_eq!(
        s.connections.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "only the granted request reached the server, through the proxy"
    );
    process.stop().await.unwrap();
}
