//! The connector against a real local HTTP server, with names mapped by the test resolver: what
//! it admits reaches the server, what it refuses never connects, every hop is checked again, and
//! each limit ends the fetch with its reason.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pretty_assertions::assert_eq;
use tw_core::target::{Egress, EgressLayer};

use super::test_server::{Reply, serve};
use super::*;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn gatekeeper(answers: Vec<(&str, Vec<Vec<IpAddr>>)>) -> Gatekeeper {
    Gatekeeper::new(Arc::new(StaticResolver::new(answers)))
}

fn local_names() -> Gatekeeper {
    gatekeeper(vec![
        ("site.test", vec![vec![LOOPBACK]]),
        ("other.test", vec![vec![LOOPBACK]]),
    ])
}

/// Rules that name the test hosts, which lets them reach the loopback server.
fn allowing(hosts: &[&str]) -> Egress {
    let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
    Egress::new(vec![
        EgressLayer::parse("policy", &hosts, &[], &[]).unwrap(),
    ])
}

fn get(url: String) -> Request {
    Request {
        method: Method::GET,
        url,
        ..Request::default()
    }
}

async fn fetch(
    g: &Gatekeeper,
    egress: &Egress,
    req: Request,
    limits: &Limits,
) -> (Result<Response, NetError>, NetFacts) {
    let mut facts = NetFacts::default();
    let outcome = g.fetch(egress, req, limits, &mut facts).await;
    (outcome, facts)
}

fn refused_rule(outcome: &Result<Response, NetError>) -> (String, Option<IpAddr>) {
    match outcome {
        Err(NetError::Refused(r)) => (r.rule.clone(), r.address),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn an_allowed_fetch_reaches_the_server_and_says_what_it_did() {
    let s = serve(vec![("/page", Reply::Body(b"<h1>hello</h1>".to_vec()))]).await;
    let g = local_names();
    let url = format!("http://site.test:{}/page", s.port);
    let (outcome, facts) = fetch(
        &g,
        &allowing(&["site.test"]),
        get(url.clone()),
        &Limits::default(),
    )
    .await;
    let response = outcome.unwrap();
    assert_eq!(
        (
            response.status,
            response.body,
            response.truncated,
            response.final_url
        ),
        (200, b"<h1>hello</h1>".to_vec(), false, url)
    );
    assert_eq!(
        facts,
        NetFacts {
            requests: 1,
            hosts: vec!["site.test".to_owned()],
            addresses: vec![LOOPBACK],
            bytes_sent: 0,
            bytes_received: 14,
            redirects: Vec::new(),
            refusal: None,
            blocked: Vec::new(),
        }
    );
}

#[tokio::test]
async fn a_local_address_is_refused_before_any_connection_by_literal_and_by_name() {
    let s = serve(vec![("/page", Reply::Body(b"secret".to_vec()))]).await;
    let g = gatekeeper(vec![("innocent.test", vec![vec![LOOPBACK]])]);
    let none = Egress::default();
    for url in [
        format!("http://127.0.0.1:{}/page", s.port),
        format!("http://2130706433:{}/page", s.port),
        format!("http://[::ffff:127.0.0.1]:{}/page", s.port),
        format!("http://innocent.test:{}/page", s.port),
    ] {
        let (outcome, facts) = fetch(&g, &none, get(url.clone()), &Limits::default()).await;
        assert_eq!(
            refused_rule(&outcome),
            ("address class".to_owned(), Some(LOOPBACK)),
            "{url}"
        );
        assert_eq!(
            facts.refusal,
            Some(Refused {
                rule: "address class".to_owned(),
                address: Some(LOOPBACK)
            }),
            "{url}"
        );
    }
    assert_eq!(
        s.connections.load(Ordering::SeqCst),
        0,
        "a refused fetch connected"
    );
}

#[tokio::test]
async fn every_redirect_hop_is_checked_again() {
    let s = serve(vec![
        (
            "/to-metadata",
            Reply::Redirect(302, "http://169.254.169.254/latest/meta-data/".to_owned()),
        ),
        (
            "/to-ftp",
            Reply::Redirect(301, "ftp://site.test/file".to_owned()),
        ),
        (
            "/to-file",
            Reply::Redirect(307, "file:///etc/passwd".to_owned()),
        ),
        (
            "/to-unlisted",
            Reply::Redirect(302, "http://unlisted.test/".to_owned()),
        ),
    ])
    .await;
    let g = local_names();
    // Any host may be asked for, but only the test site's address is named.
    let open = allowing(&["*", "site.test"]);
    let listed = allowing(&["site.test"]);
    let cases = [
        ("/to-metadata", &open, "address class"),
        ("/to-ftp", &open, "scheme"),
        ("/to-file", &open, "url"),
        ("/to-unlisted", &listed, "policy allow_domains"),
        ("/to-metadata", &listed, "policy allow_domains"),
    ];
    for (path, egress, rule) in cases {
        let url = format!("http://site.test:{}{path}", s.port);
        let (outcome, facts) = fetch(&g, egress, get(url), &Limits::default()).await;
        assert_eq!(refused_rule(&outcome).0, rule, "{path}");
        assert_eq!((facts.requests, facts.redirects.len()), (1, 1), "{path}");
    }
}

#[tokio::test]
async fn a_name_rebound_to_a_private_address_is_refused_on_the_next_lookup() {
    let s = serve(vec![("/page", Reply::Body(b"ok".to_vec()))]).await;
    let private: IpAddr = "10.0.0.7".parse().unwrap();
    let g = gatekeeper(vec![("rebind.test", vec![vec![LOOPBACK], vec![private]])]);
    // Any host, and the loopback address by name: 10.0.0.7 is named by nothing.
    let egress = allowing(&["*", "127.0.0.1"]);
    let url = format!("http://rebind.test:{}/page", s.port);
    let (first, _) = fetch(&g, &egress, get(url.clone()), &Limits::default()).await;
    assert_eq!(first.unwrap().body, b"ok");
    let (second, facts) = fetch(&g, &egress, get(url), &Limits::default()).await;
    assert_eq!(
        refused_rule(&second),
        ("address class".to_owned(), Some(private))
    );
    assert_eq!(facts.addresses, Vec::<IpAddr>::new());
    assert_eq!(s.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn each_limit_ends_the_fetch_with_its_reason() {
    let s = serve(vec![
        ("/big", Reply::Body(vec![b'x'; 100_000])),
        ("/slow", Reply::Slow(Duration::from_secs(3))),
        ("/loop", Reply::Redirect(302, "/loop".to_owned())),
    ])
    .await;
    let g = local_names();
    let egress = allowing(&["site.test"]);
    let at = |path: &str| format!("http://site.test:{}{path}", s.port);

    let small = Limits {
        max_response_bytes: 1000,
        ..Limits::default()
    };
    let (outcome, _) = fetch(&g, &egress, get(at("/big")), &small).await;
    let response = outcome.unwrap();
    assert_eq!((response.body.len(), response.truncated), (1000, true));

    let impatient = Limits {
        first_byte: Duration::from_millis(200),
        ..Limits::default()
    };
    let (outcome, _) = fetch(&g, &egress, get(at("/slow")), &impatient).await;
    assert_eq!(
        outcome.unwrap_err(),
        NetError::Timeout("site.test sent no response within 0.2 s".to_owned())
    );

    let brief = Limits {
        total: Duration::from_millis(300),
        ..Limits::default()
    };
    let (outcome, _) = fetch(&g, &egress, get(at("/slow")), &brief).await;
    assert_eq!(
        outcome.unwrap_err(),
        NetError::Timeout("the fetch took longer than its 0.3 s limit".to_owned())
    );

    let few = Limits {
        max_redirects: 3,
        ..Limits::default()
    };
    let (outcome, facts) = fetch(&g, &egress, get(at("/loop")), &few).await;
    assert_eq!(
        outcome.unwrap_err(),
        NetError::Failed("more than 3 redirects".to_owned())
    );
    assert_eq!(facts.requests, 4);

    let mut post = get(at("/big"));
    post.method = Method::POST;
    post.body = Some(vec![0; 2000]);
    let tight = Limits {
        max_request_bytes: 1999,
        ..Limits::default()
    };
    let (outcome, facts) = fetch(&g, &egress, post, &tight).await;
    assert_eq!(
        outcome.unwrap_err(),
        NetError::Invalid {
            field: "body".to_owned(),
            message: "the body is longer than the 1999 bytes a request may send".to_owned()
        }
    );
    assert_eq!(facts.requests, 0);
}

#[tokio::test]
async fn credentials_stay_with_their_site_and_a_see_other_turns_a_post_into_a_get() {
    let s = serve(vec![
        ("/echo", Reply::Echo),
        ("/same", Reply::Redirect(302, "/echo".to_owned())),
        ("/posted", Reply::Redirect(303, "/echo".to_owned())),
    ])
    .await;
    let g = local_names();
    let egress = allowing(&["site.test", "other.test"]);
    let other = format!("http://other.test:{}", s.port);
    // Routes are made before the server has a port, so a second server sends the cross-site
    // redirect to the first.
    let hop = serve(vec![(
        "/other",
        Reply::Redirect(302, format!("{other}/echo")),
    )])
    .await;
    let with_auth = |url: String, method: Method| Request {
        method,
        url,
        headers: vec![
            ("Authorization".to_owned(), "Bearer s3cret".to_owned()),
            ("X-Trace".to_owned(), "t1".to_owned()),
        ],
        ..Request::default()
    };
    let echoed = |outcome: Result<Response, NetError>| {
        String::from_utf8(outcome.unwrap().body)
            .unwrap()
            .to_ascii_lowercase()
    };

    let same = format!("http://site.test:{}/same", s.port);
    let (outcome, _) = fetch(
        &g,
        &egress,
        with_auth(same, Method::GET),
        &Limits::default(),
    )
    .await;
    let head = echoed(outcome);
    assert!(head.contains("authorization: bearer s3cret"), "{head}");

    let cross = format!("http://site.test:{}/other", hop.port);
    let (outcome, facts) = fetch(
        &g,
        &egress,
        with_auth(cross, Method::GET),
        &Limits::default(),
    )
    .await;
    let head = echoed(outcome);
    assert!(!head.contains("authorization"), "{head}");
    assert!(head.contains("x-trace: t1"), "{head}");
    assert_eq!(
        facts.hosts,
        vec!["site.test".to_owned(), "other.test".to_owned()]
    );

    let mut post = with_auth(format!("http://site.test:{}/posted", s.port), Method::POST);
    post.body = Some(b"payload".to_vec());
    let (outcome, facts) = fetch(&g, &egress, post, &Limits::default()).await;
    let head = echoed(outcome);
    assert!(head.starts_with("get /echo "), "{head}");
    assert_eq!(facts.bytes_sent, 7);
}

#[tokio::test]
async fn a_malformed_request_names_its_field() {
    let g = local_names();
    let egress = allowing(&["site.test"]);
    let with_header = |name: &str, value: &str| Request {
        headers: vec![(name.to_owned(), value.to_owned())],
        ..get("http://site.test/".to_owned())
    };
    let cases = [
        (with_header("bad name", "x"), "headers/bad name"),
        (with_header("X-Ok", "line\r\nInjected: yes"), "headers/X-Ok"),
        (get("http://exa mple.test/".to_owned()), "url"),
        (get("http://".to_owned()), "url"),
    ];
    for (req, field) in cases {
        let (outcome, facts) = fetch(&g, &egress, req, &Limits::default()).await;
        match outcome {
            Err(NetError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
        assert_eq!(facts.requests, 0);
    }
    let (outcome, _) = fetch(
        &g,
        &egress,
        get("http://user:pw@site.test/".to_owned()),
        &Limits::default(),
    )
    .await;
    assert_eq!(refused_rule(&outcome).0, "credentials");
}

#[tokio::test]
async fn configured_dns_servers_answer_addresses_themselves_and_fail_with_the_name() {
    // Nothing listens on port 9 of the loopback: every question goes unanswered.
    let dns = DnsResolver::new(
        &["127.0.0.1:9".parse().unwrap()],
        Duration::from_millis(100),
    );
    assert_eq!(
        dns.lookup("[::1]").await.unwrap(),
        vec!["::1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(
        dns.lookup("10.0.0.7").await.unwrap(),
        vec!["10.0.0.7".parse::<IpAddr>().unwrap()]
    );
    let err = dns.lookup("nowhere.test").await.unwrap_err();
    assert!(err.to_string().starts_with("nowhere.test: "), "{err}");
}

#[test]
fn the_facts_document_built_by_hand_is_the_one_serde_writes() {
    let plain = NetFacts {
        requests: 2,
        hosts: vec!["a.test".to_owned(), "b.test".to_owned()],
        addresses: vec![IpAddr::V4(Ipv4Addr::LOCALHOST), "::1".parse().unwrap()],
        bytes_sent: 3,
        bytes_received: 16_384,
        redirects: vec!["http://b.test/".to_owned()],
        refusal: None,
        blocked: Vec::new(),
    };
    let mut refused = plain.clone();
    refused.refuse(
        "http://c.test/x",
        &EgressRefusal {
            rule: "block_domains c.test".to_owned(),
            reason: "c.test is blocked".to_owned(),
            address: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        },
    );
    refused.refuse(
        "d.test:443",
        &EgressRefusal {
            rule: "not allowed".to_owned(),
            reason: "d.test is not allowed".to_owned(),
            address: None,
        },
    );
    for facts in [NetFacts::default(), plain, refused] {
        let by_hand = facts.to_json();
        assert_eq!(by_hand, serde_json::to_value(&facts).unwrap());
        // The same text too, keys in the same order.
        assert_eq!(by_hand.to_string(), serde_json::to_string(&facts).unwrap());
    }
}
