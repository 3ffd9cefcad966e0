//! Tables of the spellings agents and attackers use for hosts and paths, pinned to what they
//! normalize to and which list entry they hit. Tables are exempt from rustfmt so that each case
//! stays on one line.

use pretty_assertions::assert_eq;

use super::*;

/// Errors are compared by substring so tables stay short; everything else exactly.
fn assert_rendered(input: &str, got: String, expect: &str) {
    match expect.strip_prefix("ERR: ") {
        Some(part) if got.starts_with("ERR: ") && got.contains(part) => {}
        _ => assert_eq!(got, expect, "input {input:?}"),
    }
}

/// `domain:x`, `ipv4:x`, `ipv6:x` or `ERR: message`: one line per outcome keeps tables readable.
fn render(host: Result<Host, TargetError>) -> String {
    match host {
        Ok(Host::Domain(d)) => format!("domain:{d}"),
        Ok(Host::Ipv4(a)) => format!("ipv4:{a}"),
        Ok(Host::Ipv6(a)) => format!("ipv6:{a}"),
        Err(e) => format!("ERR: {e}"),
    }
}

mod urls {
    use super::*;

    /// Renders `scheme host port`, with port `-` when the scheme has no default.
    fn check(input: &str, expect: &str) {
        let got = parse_url(input).map(|t| {
            let port = t.port.map_or("-".into(), |p| p.to_string());
            format!("{} {} {port}", t.scheme, render(Ok(t.host)))
        });
        assert_rendered(input, got.unwrap_or_else(|e| render(Err(e))), expect);
    }

    #[rustfmt::skip]
    #[test]
    fn domains_normalize() {
        for (inputs, expect) in [
            (&["https://wikipedia.org/wiki/Rust", "HTTPS://WikiPedia.ORG/", "https://wikipedia.org./"][..], "https domain:wikipedia.org 443"),
            (&["wikipedia.org/wiki", "//wikipedia.org/x", "http://%77ikipedia%2eorg/"], "http domain:wikipedia.org 80"),
            // Fullwidth letters and the ideographic full stop are the same name under UTS-46.
            (&["http://\u{ff57}\u{ff49}\u{ff4b}\u{ff49}\u{ff50}\u{ff45}\u{ff44}\u{ff49}\u{ff41}.org/", "http://wikipedia\u{3002}org/"], "http domain:wikipedia.org 80"),
            // Cyrillic а: a different name, which must not pass for wikipedia.org.
            (&["http://wikipedi\u{430}.org/"], "http domain:xn--wikipedi-86g.org 80"),
            (&["wikipedia.org:8080/x"], "http domain:wikipedia.org 8080"),
            (&["localhost:3000"], "http domain:localhost 3000"),
            (&["http://1.2.3.4.example.com/"], "http domain:1.2.3.4.example.com 80"),
            (&["https://b\u{fc}cher.de/", "https://XN--BCHER-KVA.de/"], "https domain:xn--bcher-kva.de 443"),
            (&["ssh://git@GitHub.com/org/repo"], "ssh domain:github.com -"),
            (&["git+ssh://b%C3%BCcher.de/"], "git+ssh domain:xn--bcher-kva.de -"),
            (&["wss://example.com:8443/socket"], "wss domain:example.com 8443"),
            // Userinfo and backslashes: the host is what WHATWG (and so browsers) connect to.
            (&["http://wikipedia.org@evil.com/", "http://wikipedia.org:443@evil.com/", "http://a@wikipedia.org@evil.com/",
               "http:\\\\evil.com\\x", "http:/\\evil.com/", "http://evil.com\\.wikipedia.org/"], "http domain:evil.com 80"),
            (&["http://evil.com%2F@wikipedia.org/"], "http domain:wikipedia.org 80"),
        ] {
            for input in inputs {
                check(input, expect);
            }
        }
    }

    #[rustfmt::skip]
    #[test]
    fn ip_literals_in_every_spelling() {
        for (inputs, expect) in [
            (&["http://127.0.0.1/", "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.0.0.1/", "http://0x7f000001/",
               "http://127.1/", "http://127.0.0.1./", "http://[::ffff:7f00:1]/"][..], "http ipv4:127.0.0.1 80"),
            (&["http://[::ffff:127.0.0.1]:8080/"], "http ipv4:127.0.0.1 8080"),
            (&["http://0/"], "http ipv4:0.0.0.0 80"),
            (&["http://[::1]/"], "http ipv6:::1 80"),
            (&["http://[fe80::1%25eth0]/", "http://[FE80::1]:80/"], "http ipv6:fe80::1 80"),
            (&["http://169.254.169.254/latest/meta-data"], "http ipv4:169.254.169.254 80"),
            (&["ssh://root@127.1:22/"], "ssh ipv4:127.0.0.1 22"),
            (&["ssh://[::ffff:a00:1]/"], "ssh ipv4:10.0.0.1 -"),
        ] {
            for input in inputs {
                check(input, expect);
            }
        }
    }

    #[rustfmt::skip]
    #[test]
    fn unreadable_or_hostless_urls_are_refused() {
        for (inputs, expect) in [
            (&[""][..], "ERR: empty"),
            (&[" http://example.com", "http://example.com\n", "http://evil.com\t.wikipedia.org/", "http://example.com/a b"], "ERR: whitespace"),
            (&["http://ex\u{0}ample.com/"], "ERR: control"),
            (&["http://wikipedia.org\\@evil.com/", "http:\\\\wikipedia.org\\@evil.com/"], "ERR: a backslash before '@'"),
            (&["mailto:user@example.com"], "ERR: a mailto: url has no network host"),
            (&["data:text/plain,hi"], "ERR: a data: url has no network host"),
            (&["javascript:alert(1)"], "ERR: a javascript: url has no network host"),
            (&["file:///etc/passwd", "file://server/share"], "ERR: a file: url has no network host"),
            (&["http://"], "ERR: empty host"),
            (&["http://a..b/", "http://.example.com/"], "ERR: empty label"),
            (&["http://example.123/", "http://999.1.1.1/"], "ERR: invalid ipv4 address"),
            (&["http://[::1/"], "ERR: invalid ipv6 address"),
            (&["http://example.com:99999/", "git@github.com:org/repo"], "ERR: invalid port"),
            (&["https://xn--a.de/", "http://evil.com%40wikipedia.org/"], "ERR: invalid international domain name"),
        ] {
            for input in inputs {
                check(input, expect);
            }
        }
    }
}

mod hosts {
    use super::*;

    fn check(input: &str, expect: &str) {
        assert_rendered(input, render(parse_host(input)), expect);
    }

    #[rustfmt::skip]
    #[test]
    fn bare_hosts_normalize() {
        for (input, expect) in [
            ("wikipedia.org", "domain:wikipedia.org"),
            ("WikiPedia.ORG.", "domain:wikipedia.org"),
            ("wikipedia.org:443", "domain:wikipedia.org"),
            ("b\u{fc}cher.de", "domain:xn--bcher-kva.de"),
            ("127.1", "ipv4:127.0.0.1"),
            ("2130706433", "ipv4:127.0.0.1"),
            ("0x7f.0.0.1:80", "ipv4:127.0.0.1"),
            ("::1", "ipv6:::1"),
            ("[::1]:8080", "ipv6:::1"),
            ("fe80::1%eth0", "ipv6:fe80::1"),
            ("[fe80::1%25eth0]", "ipv6:fe80::1"),
            ("::ffff:127.0.0.1", "ipv4:127.0.0.1"),
            ("", "ERR: empty"),
            ("a b", "ERR: whitespace"),
            ("wikipedia.org@evil.com", "ERR: '@' is not allowed in a bare host"),
            ("evil.com/x", "ERR: '/' is not allowed in a bare host"),
            ("example.com:http", "ERR: invalid port"),
            ("[::1]x", "ERR: invalid"),
            ("[::1", "ERR: invalid ipv6 address"),
            ("g::1", "ERR: invalid ipv6 address"),
        ] {
            check(input, expect);
        }
    }
}

mod domain_lists {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The pattern of `patterns` that the host of URL `input` hits first.
    fn check(patterns: &[&str], input: &str, expect: Option<&str>) {
        let list = DomainList::parse(patterns).map_err(|e| e.to_string());
        let host = parse_url(input).map_err(|e| e.to_string());
        let got = match (&list, &host) {
            (Ok(list), Ok(t)) => Ok(list.first_match(&t.host).map(DomainPattern::as_str)),
            (Err(e), _) | (_, Err(e)) => Err(e.as_str()),
        };
        assert_eq!(got, Ok(expect), "{patterns:?} against {input:?}");
    }

    #[rustfmt::skip]
    #[test]
    fn domains_match_on_label_boundaries() {
        let fullwidth = "http://\u{ff57}\u{ff49}\u{ff4b}\u{ff49}\u{ff50}\u{ff45}\u{ff44}\u{ff49}\u{ff41}.org/";
        let lookalike = "http://wikipedi\u{430}.org/";
        for (patterns, inputs, expect) in [
            (&["wikipedia.org"][..], &["https://wikipedia.org/", "https://WikiPedia.ORG./", fullwidth][..], Some("wikipedia.org")),
            (&["wikipedia.org"], &["https://en.wikipedia.org/", "https://WIKIPEDIA.ORG.evil.com/", lookalike, "http://wikipedia.org@evil.com/"], None),
            (&["*.wikipedia.org"], &["https://en.wikipedia.org/", "https://a.b.wikipedia.org./"], Some("*.wikipedia.org")),
            (&["*.wikipedia.org"], &["https://wikipedia.org/", "https://evilwikipedia.org/", "https://WIKIPEDIA.ORG.evil.com/"], None),
            (&[".wikipedia.org"], &["https://wikipedia.org/", "https://en.wikipedia.org./"], Some(".wikipedia.org")),
            (&[".wikipedia.org"], &["https://evilwikipedia.org/", "https://WIKIPEDIA.ORG.evil.com/"], None),
            (&["*.b\u{fc}cher.de"], &["https://www.xn--bcher-kva.de/"], Some("*.b\u{fc}cher.de")),
            (&["1.2.3.4.example.com"], &["http://1.2.3.4.example.com/"], Some("1.2.3.4.example.com")),
            (&["1.2.3.4.example.com"], &["http://1.2.3.4/"], None),
            (&["evil.com", "*", "wikipedia.org"], &["https://wikipedia.org/", "http://[::1]/"], Some("*")),
            (&["LOOPBACK."], &["http://loopback/"], Some("LOOPBACK.")),
            (&["LOOPBACK."], &["http://127.0.0.1/"], None),
        ] {
            for input in inputs {
                check(patterns, input, expect);
            }
        }
    }

    #[rustfmt::skip]
    #[test]
    fn ip_classes_and_blocks() {
        let loopbacks = ["http://127.0.0.1/", "http://2130706433/", "http://0177.0.0.1/",
            "http://0x7f000001/", "http://127.1/", "http://[::ffff:7f00:1]/"];
        for (patterns, inputs, expect) in [
            (&["loopback"][..], &loopbacks[..], Some("loopback")),
            (&["127.0.0.1"], &loopbacks, Some("127.0.0.1")),
            (&["::ffff:127.0.0.1"], &loopbacks, Some("::ffff:127.0.0.1")),
            (&["ip"], &loopbacks, Some("ip")),
            (&["private", "link-local", "unspecified", "localhost"], &loopbacks, None),
            (&["loopback"], &["http://[::1]/", "http://localhost:8080/", "http://api.LOCALHOST./"], Some("loopback")),
            (&["loopback"], &["http://localhost.evil.com/", "http://0/"], None),
            (&["127.0.0.1"], &["http://[::1]/"], None),
            (&["link-local"], &["http://169.254.169.254/latest", "http://[fe80::1%25eth0]/"], Some("link-local")),
            (&["private"], &["http://10.1.2.3/", "http://172.31.255.255/", "http://192.168.1.1/",
                "http://100.64.0.1/", "http://[fd00::1]/"], Some("private")),
            (&["private"], &["http://172.32.0.1/", "http://8.8.8.8/"], None),
            (&["unspecified"], &["http://0/", "http://[::]/"], Some("unspecified")),
            (&["ip"], &["http://example.com/"], None),
            (&["10.0.0.0/8"], &["http://10.255.0.1/"], Some("10.0.0.0/8")),
            (&["10.0.0.0/8"], &["http://11.0.0.1/"], None),
            (&["fc00::/7"], &["http://[fd12::1]/"], Some("fc00::/7")),
            (&["fc00::/7"], &["http://10.0.0.1/"], None),
            (&["0.0.0.0/0"], &["http://8.8.8.8/"], Some("0.0.0.0/0")),
            (&["::ffff:10.0.0.0/104"], &["http://10.9.9.9/"], Some("::ffff:10.0.0.0/104")),
        ] {
            for input in inputs {
                check(patterns, input, expect);
            }
        }
    }

    #[rustfmt::skip]
    #[test]
    fn bad_patterns_say_what_is_wrong() {
        for (pattern, expect) in [
            ("", "invalid domain pattern \"\": empty"),
            ("foo*.com", "'*' is only allowed alone or as a leading '*.'"),
            ("a.*.com", "'*' is only allowed"),
            ("*.*.com", "'*' is only allowed"),
            ("*.", "empty"),
            ("*.10.0.0.1", "wildcards apply to domain names, not ip addresses"),
            ("example.com:443", "domain patterns do not take a port"),
            ("https://example.com", "write the host, not a url"),
            ("10.0.0.0/33", "prefix length 33 is longer than 32"),
            ("10.1.0.0/8", "10.1.0.0 has bits set after the prefix"),
            ("10.0.0.0/x", "invalid prefix length \"x\""),
            ("example.com/8", "\"example.com\" is not an ip address"),
            ("exa mple.com", "whitespace"),
            ("a..b", "empty label"),
        ] {
            let got = DomainPattern::parse(pattern).map(|p| p.as_str().to_owned()).map_err(|e| e.to_string());
            assert!(got.as_ref().is_err_and(|e| e.contains(expect)), "{pattern:?}: got {got:?}");
        }
    }
}

mod paths {
    use super::*;
    use pretty_assertions::assert_eq;

    const HOME: Option<&str> = Some("/home/u");

    fn check(input: (&str, &str, Option<&str>), expect: &str) {
        let (path, base, home) = input;
        assert_eq!(normalize_path(path, base, home), expect, "{input:?}");
    }

    #[rustfmt::skip]
    #[test]
    fn normalization() {
        for (input, expect) in [
            (("~/.ssh/id_rsa", "/w", HOME), "/home/u/.ssh/id_rsa"),
            (("~", "/w", HOME), "/home/u"),
            (("$HOME/x", "/w", HOME), "/home/u/x"),
            (("${HOME}/x", "/w", HOME), "/home/u/x"),
            (("$HOME", "/w", HOME), "/home/u"),
            (("$HOMEDIR/x", "/w", HOME), "/w/$HOMEDIR/x"),
            (("~user/x", "/w", HOME), "/w/~user/x"),
            (("x/~/y", "/w", HOME), "/w/x/~/y"),
            (("~/x", "/w", None), "/w/~/x"),
            (("a/../../etc/passwd", "/w", HOME), "/etc/passwd"),
            (("/w/./a//b/", "/w", HOME), "/w/a/b"),
            (("../../../..", "/w", HOME), "/"),
            (("/..", "/w", HOME), "/"),
            (("", "/w", HOME), "/w"),
            (("x", "/w/", HOME), "/w/x"),
            (("x", "rel", HOME), "/rel/x"),
            (("~/../../etc", "/w", Some("/home/u/")), "/etc"),
        ] {
            check(input, expect);
        }
        assert_eq!(expand_home("${HOME}/x", HOME), "/home/u/x");
        assert_eq!(expand_home("~user", HOME), "~user");
    }

    /// The pattern of `patterns` (base `/w`, home `/home/u`) that `path` hits first.
    fn check_match(patterns: &[&str], case: PathCase, path: &str, expect: Option<&str>) {
        let list = PathList::new(patterns, "/w", HOME, case).map_err(|e| e.to_string());
        let got = list
            .as_ref()
            .map(|l| l.first_match(&normalize_path(path, "/w", HOME)));
        assert_eq!(got, Ok(expect), "{patterns:?} against {path:?}");
    }

    #[rustfmt::skip]
    #[test]
    fn matching() {
        use PathCase::{Insensitive, Sensitive};
        for (patterns, case, path, expect) in [
            (&["/etc/**"][..], Sensitive, "/etc/passwd", Some("/etc/**")),
            (&["/etc/**"], Sensitive, "/etc/ssh/sshd_config", Some("/etc/**")),
            (&["/etc/**"], Sensitive, "/etcetera", None),
            (&["/etc/**"], Sensitive, "/etc", None),
            (&["/etc/**"], Sensitive, "/w/../etc/shadow", Some("/etc/**")),
            (&["/etc"], Sensitive, "/etc", Some("/etc")),
            (&["/etc/"], Sensitive, "/etc/passwd", Some("/etc/")),
            (&["/etc"], Sensitive, "/etcetera/x", None),
            (&["*.pem"], Sensitive, "key.pem", Some("*.pem")),
            (&["*.pem"], Sensitive, "/w/a/b/key.pem", Some("*.pem")),
            (&["*.pem"], Sensitive, "/key.pem", Some("*.pem")),
            (&["*.pem"], Sensitive, "/w/a.pem/inner", Some("*.pem")),
            (&["*.pem"], Sensitive, "/w/pem", None),
            (&["id_rsa"], Sensitive, "/x/y/id_rsa", Some("id_rsa")),
            (&["~/.ssh/**"], Sensitive, "~/.ssh/id_rsa", Some("~/.ssh/**")),
            (&["~/.ssh/**"], Sensitive, "$HOME/.ssh/config", Some("~/.ssh/**")),
            (&["~/.ssh/**"], Sensitive, "/home/u/.sshx", None),
            (&["~/.ssh/**"], Sensitive, "/home/u/.SSH/id_rsa", None),
            (&["~/.ssh/**"], Insensitive, "/home/u/.SSH/id_rsa", Some("~/.ssh/**")),
            (&["${HOME}/secrets"], Sensitive, "~/secrets/a", Some("${HOME}/secrets")),
            (&["/w/*.txt"], Sensitive, "a.txt", Some("/w/*.txt")),
            (&["/w/*.txt"], Sensitive, "sub/a.txt", None),
            (&["src/**/*.rs"], Sensitive, "src/a/b.rs", Some("src/**/*.rs")),
            (&["src/**/*.rs"], Sensitive, "/src/b.rs", None),
            (&["/w/**", "*.pem"], Sensitive, "k.pem", Some("/w/**")),
            (&["*.pem", "/w/**"], Sensitive, "k.pem", Some("*.pem")),
            (&["/"], Sensitive, "/anything/at/all", Some("/")),
            (&[], Sensitive, "/etc/passwd", None),
        ] {
            check_match(patterns, case, path, expect);
        }
    }

    #[test]
    fn substituted_directories_are_literal() {
        let list = PathList::new(
            ["~/x", "y/*"],
            "/b[1]",
            Some("/home/a*"),
            PathCase::Sensitive,
        );
        let list = list.map_err(|e| e.to_string());
        let paths = ["/home/a*/x", "/home/ab/x", "/b[1]/y/z", "/b1/y/z"];
        let hits = paths.map(|p| list.as_ref().map(|l| l.first_match(p).is_some()));
        assert_eq!(hits, [Ok(true), Ok(false), Ok(true), Ok(false)]);
    }

    #[rustfmt::skip]
    #[test]
    fn bad_patterns_say_what_is_wrong() {
        for (patterns, home, expect) in [
            (&[""][..], HOME, "invalid path pattern \"\": empty"),
            (&["~/.ssh/**"], None, "invalid path pattern \"~/.ssh/**\": refers to the home directory"),
            (&["/ok", "/a/[b"], HOME, "invalid path pattern \"/a/[b\": unclosed character class"),
        ] {
            let got = PathList::new(patterns, "/w", home, PathCase::Sensitive).map(|_| ()).map_err(|e| e.to_string());
            assert!(got.as_ref().is_err_and(|e| e.contains(expect)), "{patterns:?}: got {got:?}");
        }
    }
}

/// Arbitrary agent input must produce a value or an error, never a panic.
#[rustfmt::skip]
#[test]
fn odd_inputs_never_panic() {
    let pieces = [
        "", "http://", "h:", "[", "]", "::", ":", "%", "%25", "%zz", "@", "\\", "/", ".", "..",
        "0x", "0", "99999999999", "ffff", "\u{fc}", "\u{ff0e}", "xn--", "xn--a", "~", "$HOME",
        "${HOME}", "*", "*.", "/32", "/", "\u{0}", " ", "\u{200b}", "\u{1f600}", "a", "[::1%", "mailto:",
    ];
    let list = DomainList::parse(["*.example.com", "loopback", "10.0.0.0/8"]);
    let paths = PathList::new(["~/.ssh/**", "*.pem"], "/w", Some("/h"), PathCase::Sensitive);
    let mut seen = 0;
    for a in pieces {
        for b in pieces {
            for input in [format!("{a}{b}"), format!("{a}{b}{a}")] {
                let host = parse_host(&input).or_else(|_| parse_url(&input).map(|t| t.host));
                if let (Ok(list), Ok(host)) = (&list, &host) {
                    list.first_match(host);
                }
                let _ = DomainPattern::parse(&input);
                let _ = PathList::new([&input], &input, Some(&input), PathCase::Insensitive);
                if let Ok(paths) = &paths {
                    paths.first_match(&normalize_path(&input, &input, Some(&input)));
                }
                seen += 1;
            }
        }
    }
    assert_eq!(seen, pieces.len() * pieces.len() * 2);
}
