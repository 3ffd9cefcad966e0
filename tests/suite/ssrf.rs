//! Server-side request forgery through the real binary: `http_fetch` asked for every spelling of
//! a local, private or metadata address, for other schemes and for credentials in the URL, and
//! redirected there by a server it was allowed to reach. Each is refused with its reason before
//! any connection to the forbidden place, and each refusal is in the call's audit record with
//! the rule and the address that decided it. Names are mapped to addresses by the config's
//! `[network.resolve]`, which the gatekeeper checks like any DNS answer.
#![allow(clippy::disallowed_methods)] // the test server is plain std threads

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

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

/// A server on 127.0.0.1 answering `/ok` with a page, `/big` with 6 MiB, and each path `routes`
/// makes (given the server's port) with a redirect to its location.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn serve(routes: impl FnOnce(u16) -> Vec<(String, String)>) -> Server {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let redirects = routes(port);
    let hits = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let path = text.split(' ').nth(1).unwrap_or("/").to_owned();
            let (status, location, body) = match path.as_str() {
                "/ok" => (200, None, b"<h1>fine</h1>".to_vec()),
                "/big" => (200, None, vec![b'x'; 6 << 20]),
                _ => match redirects.iter().find(|(p, _)| *p == path) {
                    Some((_, to)) => (302, Some(to.clone()), Vec::new()),
                    None => (404, None, b"no".to_vec()),
                },
            };
            let mut out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            if let Some(to) = location {
                out.push_str(&format!("location: {to}\r\n"));
            }
            out.push_str("\r\n");
            let _ = stream.write_all(out.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    Server { port, hits }
}

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
