//! The gatekeeper's rules against every address spelling and layer combination we know of.

use std::net::IpAddr;

use pretty_assertions::assert_eq;

use super::*;
use crate::target::parse_host;

#[test]
fn every_address_off_the_public_internet_has_its_class() {
    use AddressClass::*;
    let table: &[(&str, Option<AddressClass>)] = &[
        ("127.0.0.1", Some(Loopback)),
        ("127.255.255.254", Some(Loopback)),
        ("0.0.0.0", Some(Unspecified)),
        ("0.1.2.3", Some(Unspecified)),
        ("10.1.2.3", Some(Private)),
        ("172.16.0.1", Some(Private)),
        ("172.31.255.255", Some(Private)),
        ("172.32.0.1", None),
        ("192.168.1.1", Some(Private)),
        ("100.64.0.1", Some(Private)),
        ("100.127.255.255", Some(Private)),
        ("100.128.0.1", None),
        ("169.254.1.1", Some(LinkLocal)),
        ("169.254.169.254", Some(CloudMetadata)),
        ("169.254.170.2", Some(CloudMetadata)),
        ("100.100.100.200", Some(CloudMetadata)),
        ("224.0.0.1", Some(Multicast)),
        ("239.255.255.250", Some(Multicast)),
        ("255.255.255.255", Some(Broadcast)),
        ("240.0.0.1", Some(Reserved)),
        ("192.0.0.8", Some(Reserved)),
        ("192.88.99.1", Some(Reserved)),
        ("192.0.2.1", Some(Documentation)),
        ("198.51.100.7", Some(Documentation)),
        ("203.0.113.9", Some(Documentation)),
        ("198.18.0.1", Some(Documentation)),
        ("198.19.255.255", Some(Documentation)),
        ("198.20.0.1", None),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("93.184.216.34", None),
        ("::1", Some(Loopback)),
        ("::", Some(Unspecified)),
        ("::ffff:127.0.0.1", Some(Loopback)),
        ("::ffff:7f00:1", Some(Loopback)),
        ("::ffff:169.254.169.254", Some(CloudMetadata)),
        ("::ffff:8.8.8.8", None),
        ("::127.0.0.1", Some(Reserved)),
        ("::8.8.8.8", Some(Reserved)),
        ("64:ff9b::a00:1", Some(Private)),
        ("64:ff9b::7f00:1", Some(Loopback)),
        ("64:ff9b::a9fe:a9fe", Some(CloudMetadata)),
        ("64:ff9b::808:808", None),
        ("64:ff9b:1::1", Some(Private)),
        ("2002:7f00:1::", Some(Loopback)),
        ("2002:a9fe:a9fe::1", Some(CloudMetadata)),
        ("2002:808:808::", None),
        ("2001::1", Some(Reserved)),
        ("2001:20::1", Some(Reserved)),
        ("2001:db8::1", Some(Documentation)),
        ("100::1", Some(Reserved)),
        ("fc00::1", Some(Private)),
        ("fdff:ffff::1", Some(Private)),
        ("fd00:ec2::254", Some(CloudMetadata)),
        ("fe80::1", Some(LinkLocal)),
        ("febf::1", Some(LinkLocal)),
        ("fec0::1", Some(Private)),
        ("ff02::1", Some(Multicast)),
        ("2606:4700::1111", None),
        ("2001:4860:4860::8888", None),
    ];
    let got: Vec<_> = table
        .iter()
        .map(|(a, _)| (*a, classify(a.parse::<IpAddr>().unwrap())))
        .collect();
    assert_eq!(got, table.to_vec());
}

fn layer(source: &str, allow: &[&str], block: &[&str], ports: &[u16]) -> EgressLayer {
    let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    EgressLayer::parse(source, &own(allow), &own(block), ports).unwrap()
}

/// The rule that refused each URL, or `ok` and where it goes.
fn judge(egress: &Egress, urls: &[&str]) -> Vec<(String, String)> {
    urls.iter()
        .map(|u| {
            let verdict = match egress.url(u) {
                Ok(t) => format!("ok {}://{}:{}", t.scheme, t.host, t.port.unwrap_or(0)),
                Err(r) => r.rule,
            };
            ((*u).to_owned(), verdict)
        })
        .collect()
}

fn expect(rows: &[(&str, &str)]) -> Vec<(String, String)> {
    rows.iter()
        .map(|(u, v)| ((*u).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn without_rules_public_http_urls_pass_and_every_spelling_of_a_local_address_is_refused() {
    let rows = [
        ("http://example.com/", "ok http://example.com:80"),
        ("https://EXAMPLE.com.:8443/x", "ok https://example.com:8443"),
        (
            "https://bücher.example/",
            "ok https://xn--bcher-kva.example:443",
        ),
        ("example.com/path", "ok http://example.com:80"),
        ("http://8.8.8.8/", "ok http://8.8.8.8:80"),
        ("ftp://example.com/", "scheme"),
        ("gopher://example.com/", "scheme"),
        ("ws://example.com/", "scheme"),
        ("file:///etc/passwd", "url"),
        ("data:text/plain,hi", "url"),
        ("javascript:alert(1)", "url"),
        ("http://", "url"),
        ("http://exa mple.com/", "url"),
        ("http://good.org\\@evil.com/", "url"),
        ("http://user:pw@example.com/", "credentials"),
        ("http://user@example.com/", "credentials"),
        ("http://@example.com/", "credentials"),
        ("http://:@example.com/", "credentials"),
        ("http://example.com@127.0.0.1/", "credentials"),
        ("http://127.0.0.1/", "address class"),
        ("http://127.0.0.1./", "address class"),
        ("http://2130706433/", "address class"),
        ("http://0177.0.0.1/", "address class"),
        ("http://0x7f.1/", "address class"),
        ("http://0x7f000001/", "address class"),
        ("http://127.1/", "address class"),
        ("http://017700000001/", "address class"),
        ("http://%31%32%37.0.0.1/", "address class"),
        ("http://１２７.０.０.１/", "address class"),
        ("http://[::1]/", "address class"),
        ("http://[0:0:0:0:0:0:0:1]/", "address class"),
        ("http://[::ffff:127.0.0.1]/", "address class"),
        ("http://[::ffff:7f00:1]/", "address class"),
        ("http://[64:ff9b::7f00:1]/", "address class"),
        ("http://[2002:7f00:1::]/", "address class"),
        ("http://0.0.0.0/", "address class"),
        ("http://0/", "address class"),
        ("http://[::]/", "address class"),
        ("http://10.0.0.1:8080/", "address class"),
        ("http://192.168.0.1/", "address class"),
        ("http://169.254.169.254/latest/meta-data/", "address class"),
        ("http://[fd00:ec2::254]/", "address class"),
        ("http://100.100.100.200/", "address class"),
        ("http://[fe80::1%25eth0]/", "address class"),
        ("http://224.0.0.1/", "address class"),
        ("http://255.255.255.255/", "address class"),
    ];
    assert_eq!(judge(&Egress::default(), &rows.map(|r| r.0)), expect(&rows));
}

#[test]
fn every_layer_must_let_a_url_through() {
    let egress = Egress::new(vec![
        layer(
            "policy",
            &["*.example.com", ".example.org"],
            &["evil.example.com"],
            &[],
        ),
        layer("skill deploy", &[], &["*.internal.example.com"], &[443]),
    ]);
    let rows = [
        ("https://api.example.com/", "ok https://api.example.com:443"),
        ("https://example.org/", "ok https://example.org:443"),
        ("https://a.b.example.org/", "ok https://a.b.example.org:443"),
        ("https://example.com/", "policy allow_domains"),
        ("https://example.net/", "policy allow_domains"),
        (
            "https://evil.example.com./",
            "policy block_domains \"evil.example.com\"",
        ),
        (
            "https://EVIL.example.com/",
            "policy block_domains \"evil.example.com\"",
        ),
        (
            "https://db.internal.example.com/",
            "skill deploy block_domains \"*.internal.example.com\"",
        ),
        ("http://api.example.com/", "skill deploy ports"),
        ("https://api.example.com:8443/", "skill deploy ports"),
    ];
    assert_eq!(judge(&egress, &rows.map(|r| r.0)), expect(&rows));

    let refusal = egress.url("http://api.example.com/").unwrap_err();
    assert_eq!(
        refusal.reason,
        "port 80 of api.example.com is not among the ports skill deploy allows (443)"
    );
    let refusal = egress.url("https://example.net/").unwrap_err();
    assert_eq!(
        refusal.reason,
        "example.net is not among the hosts policy allows"
    );
}

/// What [`Egress::address`] says about `host` resolving to `addr`: `ok` or the rule.
fn resolved(egress: &Egress, host: &str, addr: &str) -> String {
    let host = parse_host(host).unwrap();
    match egress.address(&host, addr.parse().unwrap()) {
        Ok(()) => "ok".to_owned(),
        Err(r) => {
            assert_eq!(r.address, Some(addr.parse().unwrap()), "{r:?}");
            r.rule
        }
    }
}

#[test]
fn a_name_resolving_off_the_public_internet_needs_a_rule_naming_the_host_or_the_address() {
    let none = Egress::default();
    let by_name = Egress::new(vec![layer(
        "policy",
        &["intranet.corp", "meta.corp"],
        &[],
        &[],
    )]);
    let by_class = Egress::new(vec![layer("policy", &["private"], &[], &[])]);
    let by_block = Egress::new(vec![layer(
        "policy",
        &["10.0.0.0/8", "169.254.169.254"],
        &[],
        &[],
    )]);
    let catch_all = Egress::new(vec![layer("policy", &["*", "ip"], &[], &[])]);
    // Another layer naming the host unlocks the address; the first still lets the host through.
    let skill_names_it = Egress::new(vec![
        layer("policy", &["*"], &[], &[]),
        layer("skill ops", &["intranet.corp"], &[], &[]),
    ]);
    let cases = [
        (&none, "example.com", "93.184.216.34", "ok"),
        (&none, "localhost", "127.0.0.1", "address class"),
        (&none, "rebind.example.com", "10.0.0.5", "address class"),
        (
            &none,
            "rebind.example.com",
            "::ffff:10.0.0.5",
            "address class",
        ),
        (
            &none,
            "rebind.example.com",
            "64:ff9b::a00:5",
            "address class",
        ),
        (&by_name, "intranet.corp", "10.0.0.5", "ok"),
        (&by_name, "intranet.corp", "::1", "ok"),
        (&by_name, "meta.corp", "169.254.169.254", "address class"),
        (&by_class, "intranet.corp", "10.0.0.5", "ok"),
        (&by_class, "intranet.corp", "127.0.0.1", "address class"),
        (&by_block, "intranet.corp", "10.0.0.5", "ok"),
        (&by_block, "meta.corp", "169.254.169.254", "ok"),
        (&catch_all, "intranet.corp", "10.0.0.5", "address class"),
        (&catch_all, "intranet.corp", "93.184.216.34", "ok"),
        (&skill_names_it, "intranet.corp", "10.0.0.5", "ok"),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(e, h, a, _)| (*h, *a, resolved(e, h, a)))
        .collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(_, h, a, v)| (*h, *a, (*v).to_owned()))
        .collect();
    assert_eq!(got, want);

    let refusal = none
        .address(
            &parse_host("rebind.example.com").unwrap(),
            "10.0.0.5".parse().unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        refusal.reason,
        "rebind.example.com (10.0.0.5) is a private address, which tools may not reach unless a \
         rule names it (allow the host or the address in allow_domains)"
    );
}

#[test]
fn block_lists_apply_to_the_addresses_a_name_resolves_to() {
    let egress = Egress::new(vec![layer("policy", &[], &["93.184.216.0/24"], &[])]);
    assert_eq!(
        resolved(&egress, "example.com", "93.184.216.34"),
        "policy block_domains \"93.184.216.0/24\""
    );
    assert_eq!(resolved(&egress, "example.com", "93.184.217.34"), "ok");
    assert_eq!(
        judge(&egress, &["http://93.184.216.34/"]),
        expect(&[(
            "http://93.184.216.34/",
            "policy block_domains \"93.184.216.0/24\""
        )])
    );
}

#[test]
fn a_bad_pattern_names_itself() {
    let e = EgressLayer::parse("policy", &["*.*.example.com".to_owned()], &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid domain pattern \"*.*.example.com\": '*' is only allowed alone or as a leading '*.'"
    );
}
