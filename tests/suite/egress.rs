//! One policy, enforced twice: a strict `exec` granted `example.test` (`[[rules]] network`)
//! reaches it through the runtime's egress proxy, the only way out of its network namespace;
//! a host outside the grant is refused by the proxy with its rule; a raw TCP connection to the
//! host's loopback, a UDP packet and a DNS lookup go nowhere. The run's audit record holds what
//! the proxy saw, and the test server counts its connections, so a bypass would show twice.

use std::sync::atomic::Ordering;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{Env, serve};

/// Both test hosts are the test server on the loopback (reachable only if a grant names them).
const NAMES: &str = r#"
[network.resolve]
"example.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"#;

const SCRIPT: &str = r#"
import socket, sys, urllib.request, urllib.error
port = int(sys.argv[1])
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return f"refused {e.code}: {e.read().decode().strip()}"
    except urllib.error.URLError:
        return "unreachable"
print(get(f"http://example.test:{port}/ok"))
print(get(f"http://other.test:{port}/ok"))
tries = [
    ("direct", lambda: socket.create_connection(("127.0.0.1", port), timeout=2)),
    ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53))),
    ("dns", lambda: socket.getaddrinfo("example.test", port)),
]
for what, attempt in tries:
    try:
        attempt()
        print(what, "reached")
    except OSError:
        print(what, "failed")
"#;

#[test]
fn a_strict_exec_granted_a_host_reaches_it_through_the_proxy_and_nothing_else() {
    let server = serve(|_| Vec::new());
    let (port, hits) = (server.port, server.hits);
    let env = Env::new().with_config(&format!(
        r#"
[policy]
allow = ["group:exec"]
[policy.exec]
security = "full"
[[policy.rules]]
name = "packages"
tools = ["exec"]
network = ["example.test"]
{NAMES}"#
    ));
    let port_arg = port.to_string();
    let r = env
        .call("exec", json!({"argv": ["python3", "-c", SCRIPT, port_arg]}))
        .ok()
        .json();
    assert_eq!(
        r["output"]["stdout"].as_str().unwrap_or_default(),
        "<h1>fine</h1>\nrefused 403: other.test is not among the hosts policy network allows (rule: \
         policy network allow_domains)\ndirect failed\nudp failed\ndns failed\n",
        "{r:#}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "only the proxy connected");
    let rows = env.audit_rows();
    let network = &rows.last().unwrap().metadata["network"];
    assert_eq!(
        (
            &network["requests"],
            &network["hosts"],
            &network["addresses"],
            &network["refusal"]
        ),
        (
            &json!(2),
            &json!(["example.test"]),
            &json!(["127.0.0.1"]),
            &json!({"rule": "policy network allow_domains"})
        ),
        "{network}"
    );
    assert!(
        network["bytes_received"].as_u64().unwrap_or(0) > 0,
        "{network}"
    );

    // Without a grant, the same tool has no network at all: no proxy to ask.
    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n");
    let r = env
        .call("exec", json!({"argv": ["python3", "-c", SCRIPT, port_arg]}))
        .ok()
        .json();
    assert_eq!(
        r["output"]["stdout"].as_str().unwrap_or_default(),
        "unreachable\nunreachable\ndirect failed\nudp failed\ndns failed\n",
        "{r:#}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert!(env.audit_rows()[0].metadata.get("network").is_none());
}

#[test]
fn a_custom_tool_whose_definition_grants_a_host_reaches_it_through_the_proxy_only() {
    let server = serve(|_| Vec::new());
    let env = Env::new().with_config(&format!(
        "[policy]\nallow = [\"fetch_two\"]\n[policy.exec]\nsecurity = \"full\"\n{NAMES}"
    ));
    let definition = json!({
        "name": "fetch_two",
        "description": "Fetch two pages through the proxy and try the other ways out.",
        "category": "network",
        "parameters": [{"name": "port", "type": "string", "required": true}],
        "constraints": {"isolation": "strict", "network": ["example.test"]},
        // Braces in the script are literal in a command template.
        "command": {"argv": ["python3", "-c", SCRIPT.replace('{', "{{").replace('}', "}}"), "{port}"]}
    });
    let path = env.root.path().join("fetch_two.json");
    std::fs::write(&path, definition.to_string()).unwrap();
    env.cmd(&["tools", "add", path.to_str().unwrap()])
        .run()
        .ok();
    let r = env
        .call("fetch_two", json!({"port": server.port.to_string()}))
        .ok()
        .json();
    assert_eq!(
        r["output"].as_str().unwrap_or_default(),
        "<h1>fine</h1>\nrefused 403: other.test is not among the hosts tool network allows (rule: \
         tool network allow_domains)\ndirect failed\nudp failed\ndns failed\n",
        "{r:#}"
    );
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        1,
        "only the proxy connected"
    );
    let rows = env.audit_rows();
    let network = &rows.last().unwrap().metadata["network"];
    assert_eq!(
        (&network["requests"], &network["hosts"]),
        (&json!(2), &json!(["example.test"])),
        "{network}"
    );
}
