//! Server-side request forgery through the real binary: `http_fetch` asked for every spelling of
//! a local, private or metadata address, for other schemes and for credentials in the URL, and
//! redirected there by a server it was allowed to reach. Each is refused with its reason before
//! any connection to the forbidden place, and each refusal is in the call's audit record with
//! the rule and the address that decided it. Names are mapped to addresses by the config's
//! `[network.resolve]`, which the gatekeeper checks like any DNS answer, or by a DNS server of
//! the test's (`[network] nameservers`) whose answers change between lookups (rebinding).
#![allow(clippy::disallowed_methods)] // the test DNS server is a plain std thread

use std::collections::HashMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Env, serve};

/// Calls are allowed by policy, so what refuses them is the gatekeeper.
const OPEN: &str = "[policy]\ndefault = \"allow\"\n";

/// The test server's address named, so it may be reached; nothing else local is.
const SERVER_NAMED: &str = r#"
[policy]
default = "allow"
[[policy.rules]]
name = "web"
tools = ["http_fetch"]
allow_domains = ["*", "127.0.0.1"]
"#;

/// The call's status, error code, the rule and address of the refusal in its audit record, and
/// the requests it made.
fn outcome(env: &Env, url: &str) -> (String, String, Value, Value) {
    let run = env.call("http_fetch", json!({ "url": url }));
    let result = run.json();
    let row = env
        .audit_rows()
        .pop()
        .expect("every call leaves its audit record");
    assert_eq!(
        row.execution_id,
        result["execution_id"].as_str().unwrap_or_default(),
        "{url}"
    );
    let network = &row.metadata["network"];
    (
        result["status"].as_str().unwrap_or_default().to_owned(),
        result["error"]["code"].as_str().unwrap_or("-").to_owned(),
        network.get("refusal").cloned().unwrap_or(Value::Null),
        network.get("requests").cloned().unwrap_or(Value::Null),
    )
}

#[test]
fn every_spelling_of_a_local_address_is_refused_before_connecting_and_audited() {
    let server = serve(|_| Vec::new());
    let env = Env::new().with_config(OPEN);
    let p = server.port;
    let loopback = ["127.0.0.1", "::1"];
    let cases: Vec<(String, &str)> = vec![
        (format!("http://127.0.0.1:{p}/ok"), loopback[0]),
        (format!("http://127.0.0.1.:{p}/ok"), loopback[0]),
        (format!("http://2130706433:{p}/ok"), loopback[0]),
        (format!("http://0177.0.0.1:{p}/ok"), loopback[0]),
        (format!("http://0x7f.1:{p}/ok"), loopback[0]),
        (format!("http://0x7f000001:{p}/ok"), loopback[0]),
        (format!("http://017700000001:{p}/ok"), loopback[0]),
        (format!("http://127.1:{p}/ok"), loopback[0]),
        (format!("http://127.0.1:{p}/ok"), "127.0.0.1"),
        (format!("http://%31%32%37.0.0.1:{p}/ok"), loopback[0]),
        (format!("http://１２７.０.０.１:{p}/ok"), loopback[0]),
        (format!("HTTP://127.0.0.1:{p}/ok"), loopback[0]),
        (format!("http://[::1]:{p}/ok"), loopback[1]),
        (format!("http://[0:0:0:0:0:0:0:1]:{p}/ok"), loopback[1]),
        (format!("http://[::ffff:127.0.0.1]:{p}/ok"), loopback[0]),
        (format!("http://[::ffff:7f00:1]:{p}/ok"), loopback[0]),
        (
            format!("http://[64:ff9b::7f00:1]:{p}/ok"),
            "64:ff9b::7f00:1",
        ),
        (format!("http://[2002:7f00:1::]:{p}/ok"), "2002:7f00:1::"),
        (format!("http://[::127.0.0.1]:{p}/ok"), "::7f00:1"),
        (format!("http://[fe80::1]:{p}/ok"), "fe80::1"),
        (format!("http://0.0.0.0:{p}/ok"), "0.0.0.0"),
        (format!("http://0:{p}/ok"), "0.0.0.0"),
        (format!("http://[::]:{p}/ok"), "::"),
        ("http://10.0.0.1/".to_owned(), "10.0.0.1"),
        ("http://172.16.5.4/".to_owned(), "172.16.5.4"),
        ("http://192.168.1.1/".to_owned(), "192.168.1.1"),
        ("http://100.64.0.1/".to_owned(), "100.64.0.1"),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "169.254.169.254",
        ),
        (
            "http://[::ffff:169.254.169.254]/".to_owned(),
            "169.254.169.254",
        ),
        ("http://2852039166/".to_owned(), "169.254.169.254"),
        ("http://[fd00:ec2::254]/".to_owned(), "fd00:ec2::254"),
        ("http://100.100.100.200/".to_owned(), "100.100.100.200"),
        ("http://[fc00::1]/".to_owned(), "fc00::1"),
        ("http://224.0.0.1/".to_owned(), "224.0.0.1"),
        ("http://255.255.255.255/".to_owned(), "255.255.255.255"),
        ("http://240.0.0.1/".to_owned(), "240.0.0.1"),
    ];
    let got: Vec<_> = cases.iter().map(|(url, _)| outcome(&env, url)).collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(_, addr)| {
            (
                "permission_denied".to_owned(),
                "egress_refused".to_owned(),
                json!({"rule": "address class", "address": addr}),
                json!(0),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "a refused call connected"
    );
}

#[test]
fn other_schemes_and_credentials_are_refused_and_audited() {
    let env = Env::new().with_config(OPEN);
    let cases = [
        ("ftp://example.com/file", "scheme"),
        ("gopher://example.com/", "scheme"),
        ("ws://example.com/", "scheme"),
        ("ldap://example.com/", "scheme"),
        ("dict://example.com:11211/stat", "scheme"),
        ("http://user:pw@example.com/", "credentials"),
        ("http://example.com@127.0.0.1/", "credentials"),
        ("http://@example.com/", "credentials"),
    ];
    let got: Vec<_> = cases.iter().map(|(url, _)| outcome(&env, url)).collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(_, rule)| {
            (
                "permission_denied".to_owned(),
                "egress_refused".to_owned(),
                json!({"rule": rule}),
                json!(0),
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_redirect_to_a_forbidden_place_is_refused_at_that_hop_and_audited() {
    let routes = |p: u16| {
        vec![
            (
                "/to-metadata".to_owned(),
                "http://169.254.169.254/latest/meta-data/".to_owned(),
            ),
            ("/to-v6-loopback".to_owned(), format!("http://[::1]:{p}/ok")),
            ("/to-private".to_owned(), "http://10.0.0.1/admin".to_owned()),
            ("/to-zero".to_owned(), format!("http://0.0.0.0:{p}/ok")),
            (
                "/to-mapped".to_owned(),
                "http://[::ffff:a9fe:a9fe]/".to_owned(),
            ),
            ("/to-decimal".to_owned(), "http://2852039166/".to_owned()),
            ("/to-ftp".to_owned(), "ftp://127.0.0.1/".to_owned()),
            ("/to-file".to_owned(), "file:///etc/passwd".to_owned()),
            (
                "/to-credentials".to_owned(),
                format!("http://u:p@127.0.0.1:{p}/ok"),
            ),
        ]
    };
    let server = serve(routes);
    let p = server.port;
    let env = Env::new().with_config(SERVER_NAMED);
    let cases = [
        (
            "/to-metadata",
            json!({"rule": "address class", "address": "169.254.169.254"}),
        ),
        (
            "/to-v6-loopback",
            json!({"rule": "address class", "address": "::1"}),
        ),
        (
            "/to-private",
            json!({"rule": "address class", "address": "10.0.0.1"}),
        ),
        (
            "/to-zero",
            json!({"rule": "address class", "address": "0.0.0.0"}),
        ),
        (
            "/to-mapped",
            json!({"rule": "address class", "address": "169.254.169.254"}),
        ),
        (
            "/to-decimal",
            json!({"rule": "address class", "address": "169.254.169.254"}),
        ),
        ("/to-ftp", json!({"rule": "scheme"})),
        ("/to-file", json!({"rule": "url"})),
        ("/to-credentials", json!({"rule": "credentials"})),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(path, _)| outcome(&env, &format!("http://127.0.0.1:{p}{path}")))
        .collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(_, refusal)| {
            (
                "permission_denied".to_owned(),
                "egress_refused".to_owned(),
                refusal.clone(),
                json!(1),
            )
        })
        .collect();
    assert_eq!(got, want);
    // One connection per call, to the allowed first hop only.
    assert_eq!(server.hits.load(Ordering::SeqCst), cases.len());

    // The allowed server itself answers, and a body past the cap is cut and says so.
    let page = env.call(
        "http_fetch",
        json!({"url": format!("http://127.0.0.1:{p}/ok"), "as": "markdown"}),
    );
    assert_eq!(
        page.json()["output"]["content"],
        "# fine",
        "{}",
        page.stdout
    );
    let big = env.call(
        "http_fetch",
        json!({"url": format!("http://127.0.0.1:{p}/big")}),
    );
    let big = big.json();
    assert_eq!(
        (
            big["output"]["truncated"].clone(),
            big["output"]["content"].as_str().map(str::len)
        ),
        (json!(true), Some(1 << 20))
    );
}

/// Names the config resolves (`[network.resolve]`, checked like DNS answers): a harmless-looking
/// name for a local or metadata address, a name with one public-looking and one private answer,
/// an IPv4-mapped answer, and a look-alike of the one name a rule lets reach loopback (Cyrillic
/// `а` for `a`). Each is refused at its address; the name the rule does name gets through, with
/// and without a trailing dot.
#[test]
fn names_answering_with_local_addresses_and_look_alikes_are_refused_and_audited() {
    let server = serve(|_| Vec::new());
    let p = server.port;
    let env = Env::new().with_config(
        r#"
[policy]
default = "allow"
[[policy.rules]]
name = "web"
tools = ["http_fetch"]
allow_domains = ["*", "example.test"]

[network.resolve]
"example.test" = ["127.0.0.1"]
"xn--exmple-4nf.test" = ["127.0.0.1"]
"innocent.test" = ["127.0.0.1"]
"metadata.test" = ["169.254.169.254"]
"mixed.test" = ["10.0.0.5", "127.0.0.1"]
"mapped.test" = ["::ffff:127.0.0.1"]
"#,
    );
    let cases = [
        (format!("http://innocent.test:{p}/ok"), "127.0.0.1"),
        (format!("http://INNOCENT.test.:{p}/ok"), "127.0.0.1"),
        ("http://metadata.test/latest/".to_owned(), "169.254.169.254"),
        (format!("http://mixed.test:{p}/ok"), "10.0.0.5"),
        (format!("http://mapped.test:{p}/ok"), "::ffff:127.0.0.1"),
        (format!("http://exаmple.test:{p}/ok"), "127.0.0.1"),
    ];
    let got: Vec<_> = cases.iter().map(|(url, _)| outcome(&env, url)).collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(_, addr)| {
            (
                "permission_denied".to_owned(),
                "egress_refused".to_owned(),
                json!({"rule": "address class", "address": addr}),
                json!(1),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "a refused call connected"
    );
    for host in ["example.test", "example.test."] {
        let page = env.call(
            "http_fetch",
            json!({"url": format!("http://{host}:{p}/ok"), "as": "markdown"}),
        );
        assert_eq!(
            page.json()["output"]["content"],
            "# fine",
            "{}",
            page.stdout
        );
    }
}

/// A DNS server on 127.0.0.1 answering A queries for `names`, each name's answers one lookup
/// after another (the last one for good), with a zero TTL, as a rebinding attacker's server
/// would; other questions get an empty answer. Counts the A lookups of each name.
fn dns(
    names: Vec<(&'static str, Vec<Vec<Ipv4Addr>>)>,
) -> (u16, Arc<Mutex<HashMap<String, usize>>>) {
    use hickory_proto::op::Message;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{RData, Record, RecordType};
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let count = Arc::clone(&asked);
    let mut answers: HashMap<String, Vec<Vec<Ipv4Addr>>> = names
        .into_iter()
        .map(|(n, a)| (format!("{n}."), a))
        .collect();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
            reply.metadata.recursion_desired = query.metadata.recursion_desired;
            reply.metadata.recursion_available = true;
            for q in &query.queries {
                reply.add_query(q.clone());
                let name = q.name().to_ascii().to_ascii_lowercase();
                if q.query_type() != RecordType::A {
                    continue;
                }
                *count.lock().unwrap().entry(name.clone()).or_insert(0) += 1;
                let Some(queue) = answers.get_mut(&name) else {
                    continue;
                };
                let ips = if queue.len() > 1 {
                    queue.remove(0)
                } else {
                    queue[0].clone()
                };
                for ip in ips {
                    reply.add_answer(Record::from_rdata(q.name().clone(), 0, RData::A(A(ip))));
                }
            }
            let _ = socket.send_to(&reply.to_vec().unwrap(), from);
        }
    });
    (port, asked)
}

#[test]
fn a_name_that_rebinds_between_lookups_is_judged_at_each_and_connected_as_judged() {
    let server = serve(|_| Vec::new());
    let p = server.port;
    // A public address (nothing answers it from here) first, then the loopback the test
    // server listens on: a check that resolved apart from its connection would reach it.
    let public = Ipv4Addr::new(203, 0, 114, 1);
    let loopback = Ipv4Addr::LOCALHOST;
    let (dns_port, asked) = dns(vec![
        ("flip.test", vec![vec![public], vec![loopback]]),
        ("both.test", vec![vec![loopback, public]]),
    ]);
    let env = Env::new().with_config(&format!(
        r#"{OPEN}
[[policy.rules]]
name = "web"
tools = ["http_fetch"]
allow_domains = ["*"]

[network]
nameservers = ["127.0.0.1:{dns_port}"]
connect_timeout_ms = 1000
"#
    ));
    // First lookup: public, allowed; the connection goes there and nowhere else.
    let first = env.call(
        "http_fetch",
        json!({"url": format!("http://flip.test:{p}/ok")}),
    );
    let first = first.json();
    assert!(
        matches!(first["status"].as_str(), Some("failed" | "timeout")),
        "{first:#}"
    );
    let row = env.audit_rows().pop().unwrap();
    assert_eq!(
        row.metadata["network"]["hosts"],
        json!(["flip.test"]),
        "{:#}",
        row.metadata
    );
    // Second lookup: the loopback, refused with the address that decided.
    assert_eq!(
        outcome(&env, &format!("http://flip.test:{p}/ok")),
        (
            "permission_denied".to_owned(),
            "egress_refused".to_owned(),
            json!({"rule": "address class", "address": "127.0.0.1"}),
            json!(1),
        )
    );
    // One answer holding both: only the allowed address is tried.
    let both = env.call(
        "http_fetch",
        json!({"url": format!("http://both.test:{p}/ok")}),
    );
    assert!(
        matches!(both.json()["status"].as_str(), Some("failed" | "timeout")),
        "{}",
        both.stdout
    );
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "a rebound name reached the loopback"
    );
    // Each call asked once: nothing resolved the name again to connect.
    let asked = asked.lock().unwrap().clone();
    assert_eq!(
        (asked.get("flip.test."), asked.get("both.test.")),
        (Some(&2), Some(&1)),
        "{asked:?}"
    );
}
