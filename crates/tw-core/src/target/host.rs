//! Host and URL normalization and domain allow/block patterns, kept apart from paths because the
//! two share nothing but the policy layer that calls them.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{TargetError, shown};

/// A normalized host: what a connection would actually be made to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// An ASCII domain: lowercase, punycode for IDN labels, no trailing dot, no empty label.
    Domain(String),
    /// An IPv4 address, in whatever spelling it was written, including IPv4-mapped IPv6.
    Ipv4(Ipv4Addr),
    /// An IPv6 address without its zone id.
    Ipv6(Ipv6Addr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Domain(d) => f.write_str(d),
            Host::Ipv4(a) => write!(f, "{a}"),
            Host::Ipv6(a) => write!(f, "[{a}]"),
        }
    }
}

/// The parts of a URL that network policy looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTarget {
    /// Lowercase scheme (`https`, `ssh`, ...).
    pub scheme: String,
    /// The normalized host.
    pub host: Host,
    /// The explicit port, or the scheme's default port when the scheme has a known one.
    pub port: Option<u16>,
}

/// Parses a bare host or `host:port` (`example.com`, `[::1]:8080`, `::1`, `fe80::1%eth0`).
/// The port is validated and dropped: domain lists do not match on ports.
pub fn parse_host(input: &str) -> Result<Host, TargetError> {
    let err = |reason| TargetError::Host {
        input: shown(input),
        reason,
    };
    if let Some(c) = input
        .chars()
        .find(|c| matches!(c, '/' | '\\' | '@' | '?' | '#'))
    {
        return Err(err(format!(
            "{c:?} is not allowed in a bare host; pass a url instead"
        )));
    }
    // Several colons make a bare IPv6 address; brackets tell it apart from `host:port`.
    let bare_v6 = input.matches(':').count() > 1 && !input.starts_with('[');
    let host = if bare_v6 {
        format!("[{input}]")
    } else {
        input.to_owned()
    };
    url_target(&format!("http://{host}/"))
        .map(|t| t.host)
        .map_err(err)
}

/// Parses an absolute URL, or a scheme-less one (`example.com/path`) as `http`, and returns the
/// target it connects to. URLs without a network host (`mailto:`, `data:`, `file:`) are errors.
pub fn parse_url(input: &str) -> Result<UrlTarget, TargetError> {
    url_target(input).map_err(|reason| TargetError::Url {
        input: shown(input),
        reason,
    })
}

fn url_target(input: &str) -> Result<UrlTarget, String> {
    check_chars(input)?;
    let text: Cow<'_, str> = if has_scheme(input) {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(format!("http://{input}"))
    };
    if backslash_before_at(&text) {
        return Err(
            "a backslash before '@' in the authority: url parsers disagree on the host".into(),
        );
    }
    let url = url::Url::parse(&strip_zone_id(&text)).map_err(|e| e.to_string().to_lowercase())?;
    let scheme = url.scheme().to_owned();
    let host = match url.host() {
        Some(_) if scheme == "file" => None,
        host => host,
    };
    let host = match host {
        // A special URL's host went through the WHATWG host parser already (IDNA, every IPv4
        // spelling); an opaque one is still as written, so it goes through it here.
        Some(url::Host::Domain(d)) if url.is_special() => {
            check_chars(d)?;
            domain(d)?
        }
        Some(url::Host::Domain(d)) => parse_bare(d)?,
        Some(url::Host::Ipv4(a)) => Host::Ipv4(a),
        Some(url::Host::Ipv6(a)) => from_v6(a),
        None => return Err(format!("a {scheme}: url has no network host to check")),
    };
    Ok(UrlTarget {
        port: url.port_or_known_default(),
        scheme,
        host,
    })
}

/// Parses a host without a port. Domains go through the WHATWG host parser, which also
/// percent-decodes a non-special URL's opaque host and recognises every IPv4 spelling in it.
fn parse_bare(text: &str) -> Result<Host, String> {
    check_chars(text)?;
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
    if inner.is_some() || text.contains(':') {
        let addr = inner.unwrap_or(text);
        // A zone id picks the interface, not the host, so it has no bearing on policy.
        let addr = addr.split_once('%').map_or(addr, |(a, _)| a);
        return addr
            .parse()
            .map(from_v6)
            .map_err(|_| format!("{addr:?} is not an ipv6 address"));
    }
    match url::Host::parse(text).map_err(|e| e.to_string().to_lowercase())? {
        url::Host::Ipv4(a) => Ok(Host::Ipv4(a)),
        url::Host::Ipv6(a) => Ok(from_v6(a)),
        url::Host::Domain(d) => domain(&d),
    }
}

/// A domain the host parser returned, without its trailing dot.
fn domain(d: &str) -> Result<Host, String> {
    let d = d.strip_suffix('.').unwrap_or(d);
    if d.is_empty() || d.split('.').any(str::is_empty) {
        return Err("empty label in domain".into());
    }
    Ok(Host::Domain(d.to_owned()))
}

/// An IPv4-mapped address reaches the IPv4 host, so it must meet IPv4 rules.
pub(super) fn from_v6(a: Ipv6Addr) -> Host {
    a.to_ipv4_mapped().map_or(Host::Ipv6(a), Host::Ipv4)
}

/// WHATWG silently drops tabs and newlines and trims spaces; other parsers do not, so refuse them.
fn check_chars(text: &str) -> Result<(), String> {
    match text.chars().find(|c| c.is_whitespace() || c.is_control()) {
        Some(c) => Err(format!("contains whitespace or control character {c:?}")),
        None if text.is_empty() => Err("empty".into()),
        None => Ok(()),
    }
}

/// `localhost:8080` and `example.com:443/x` start like a scheme, but what follows a scheme's colon
/// never starts with a digit, while a port always does.
fn has_scheme(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.starts_with(|c: char| c.is_ascii_digit())
}

/// WHATWG ends an authority at `\`, RFC 3986 parsers (curl, most libraries) do not, so
/// `http://good.org\@evil.com` names two hosts. curl also reads `http:\\good.org\@evil.com`
/// (no `//`) as an authority, so the slashes after the scheme are skipped whatever they are.
fn backslash_before_at(text: &str) -> bool {
    let rest = text.split_once(':').map_or(text, |(_, rest)| rest);
    let rest = rest.trim_start_matches(['/', '\\']);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .find('\\')
        .is_some_and(|b| authority[b..].contains('@'))
}

/// The `url` crate refuses `[fe80::1%25eth0]`, which curl and resolvers accept; drop the zone id.
fn strip_zone_id(text: &str) -> Cow<'_, str> {
    let zone_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-');
    if let Some(open) = text.find('[')
        && let Some(close) = text[open..].find(']').map(|i| open + i)
        && let Some(pct) = text[open..close].find('%').map(|i| open + i)
    {
        let zone = &text[pct + 1..close];
        let zone = zone.strip_prefix("25").unwrap_or(zone);
        if !zone.is_empty() && zone.chars().all(zone_char) {
            return Cow::Owned(format!("{}{}", &text[..pct], &text[close..]));
        }
    }
    Cow::Borrowed(text)
}

/// An address block in IPv6 space; IPv4 blocks are kept as their IPv4-mapped range, so one
/// comparison serves both families. (An IPv6 block spanning `::ffff:0:0/96`, like `::/0`, thus
/// covers IPv4 too, which is what such a block reaches.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Cidr {
    bits: u128,
    len: u8,
}

impl Cidr {
    fn contains(self, host: &Host) -> bool {
        ip_bits(host).is_some_and(|bits| bits & mask(self.len) == self.bits)
    }
}

fn ip_bits(host: &Host) -> Option<u128> {
    match host {
        Host::Domain(_) => None,
        Host::Ipv4(a) => Some(u128::from(a.to_ipv6_mapped())),
        Host::Ipv6(a) => Some(u128::from(*a)),
    }
}

fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

const fn v4(a: u8, b: u8, len: u8) -> Cidr {
    Cidr {
        bits: 0xffff << 32 | (a as u128) << 24 | (b as u128) << 16,
        len: 96 + len,
    }
}

const fn v6(first: u16, len: u8) -> Cidr {
    Cidr {
        bits: (first as u128) << 112,
        len,
    }
}

const LOOPBACK: &[Cidr] = &[v4(127, 0, 8), Cidr { bits: 1, len: 128 }];
const PRIVATE: &[Cidr] = &[
    v4(10, 0, 8),
    v4(172, 16, 12),
    v4(192, 168, 16),
    v4(100, 64, 10),
    v6(0xfc00, 7),
];
const LINK_LOCAL: &[Cidr] = &[v4(169, 254, 16), v6(0xfe80, 10)];
// All of 0/8, not just 0.0.0.0: Linux routes any of it to the local host.
const UNSPECIFIED: &[Cidr] = &[v4(0, 0, 8), v6(0, 128)];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Rule {
    Any,
    AnyIp,
    Exact(String),
    Subdomains(String),
    ApexAndSubdomains(String),
    Blocks(Vec<Cidr>),
    Loopback,
}

/// One entry of a domain allow or block list. See [`DomainPattern::parse`] for the syntax.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DomainPattern {
    source: String,
    rule: Rule,
}

impl DomainPattern {
    /// Compiles a pattern: `example.com` (that host only), `*.example.com` (any subdomain, not the
    /// apex), `.example.com` (apex and subdomains), `*` (any host), an IP address or CIDR block
    /// (`10.0.0.0/8`, `fc00::/7`), or a class: `loopback`, `private` (RFC 1918, 100.64/10,
    /// fc00::/7), `link-local` (169.254/16, fe80::/10), `unspecified` (0/8, `::`), `ip` (any IP
    /// literal). Class names win over single-label domains; write `loopback.` for the domain.
    /// Unicode domains are converted to punycode.
    pub fn parse(pattern: &str) -> Result<Self, TargetError> {
        let err = |reason: String| TargetError::DomainPattern {
            pattern: shown(pattern),
            reason,
        };
        let star = || err("'*' is only allowed alone or as a leading '*.'".into());
        let domain = |text: &str| {
            // The WHATWG parser accepts `*` in a domain, so a misplaced one is caught here.
            if text.contains('*') {
                return Err(star());
            }
            match parse_bare(text).map_err(err)? {
                Host::Domain(d) => Ok(d),
                _ => Err(err(
                    "wildcards apply to domain names, not ip addresses".into()
                )),
            }
        };
        let rule = match pattern.to_ascii_lowercase().as_str() {
            "*" => Rule::Any,
            "ip" => Rule::AnyIp,
            "loopback" => Rule::Loopback,
            "private" => Rule::Blocks(PRIVATE.to_vec()),
            "link-local" => Rule::Blocks(LINK_LOCAL.to_vec()),
            "unspecified" => Rule::Blocks(UNSPECIFIED.to_vec()),
            _ if pattern.contains("://") => return Err(err("write the host, not a url".into())),
            _ if pattern.contains('/') => Rule::Blocks(vec![parse_cidr(pattern).map_err(err)?]),
            _ if pattern.starts_with("*.") => Rule::Subdomains(domain(&pattern[2..])?),
            _ if pattern.contains('*') => return Err(star()),
            _ if pattern.starts_with('.') => Rule::ApexAndSubdomains(domain(&pattern[1..])?),
            _ if !pattern.starts_with('[') && pattern.matches(':').count() == 1 => {
                return Err(err("domain patterns do not take a port".into()));
            }
            _ => match parse_bare(pattern).map_err(err)? {
                Host::Domain(d) => Rule::Exact(d),
                ip => Rule::Blocks(vec![Cidr {
                    bits: ip_bits(&ip).unwrap_or_default(),
                    len: 128,
                }]),
            },
        };
        Ok(DomainPattern {
            source: pattern.to_owned(),
            rule,
        })
    }

    /// Whether `host` (already normalized by [`parse_host`] or [`parse_url`]) is covered.
    pub fn matches(&self, host: &Host) -> bool {
        let domain = match host {
            Host::Domain(d) => Some(d.as_str()),
            _ => None,
        };
        let under =
            |d: &str, apex: &str| d.strip_suffix(apex).is_some_and(|rest| rest.ends_with('.'));
        match &self.rule {
            Rule::Any => true,
            Rule::AnyIp => domain.is_none(),
            Rule::Exact(apex) => domain == Some(apex),
            Rule::Subdomains(apex) => domain.is_some_and(|d| under(d, apex)),
            Rule::ApexAndSubdomains(apex) => domain.is_some_and(|d| d == apex || under(d, apex)),
            Rule::Blocks(blocks) => blocks.iter().any(|b| b.contains(host)),
            Rule::Loopback => match domain {
                Some(d) => d == "localhost" || under(d, "localhost"),
                None => LOOPBACK.iter().any(|b| b.contains(host)),
            },
        }
    }

    /// Whether the pattern covers hosts without naming any (`*`, `ip`): such a pattern does not
    /// let a tool reach an address off the public internet.
    pub fn is_catch_all(&self) -> bool {
        matches!(self.rule, Rule::Any | Rule::AnyIp)
    }

    /// The pattern as written, for explanations.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let (addr, len) = text.split_once('/').unwrap_or((text, ""));
    let len: u8 = len
        .parse()
        .map_err(|_| format!("invalid prefix length {len:?}"))?;
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an ip address"))?;
    let (max, host) = match ip {
        IpAddr::V4(a) => (32, Host::Ipv4(a)),
        IpAddr::V6(a) => (128, from_v6(a)),
    };
    if len > max {
        return Err(format!("prefix length {len} is longer than {max}"));
    }
    let bits = ip_bits(&host).unwrap_or_default();
    let len = len + if max == 32 { 96 } else { 0 };
    // Host bits are refused rather than masked: `10.1.0.0/8` is more likely a typo than intent.
    if bits & !mask(len) != 0 {
        return Err(format!(
            "{addr} has bits set after the prefix; write the network address"
        ));
    }
    Ok(Cidr { bits, len })
}

/// An ordered domain allow or block list. Shared, not copied: every network call's rules are
/// put together from the policy's and the skill's lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DomainList {
    patterns: std::sync::Arc<[DomainPattern]>,
}

impl DomainList {
    /// Compiles every pattern; the first bad one is the error, so a block list is never silently
    /// shorter than written.
    pub fn parse<I, S>(patterns: I) -> Result<Self, TargetError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let patterns = patterns
            .into_iter()
            .map(|p| DomainPattern::parse(p.as_ref()));
        Ok(DomainList {
            patterns: patterns.collect::<Result<_, _>>()?,
        })
    }

    /// The first pattern, in list order, that covers `host`.
    pub fn first_match(&self, host: &Host) -> Option<&DomainPattern> {
        self.patterns.iter().find(|p| p.matches(host))
    }

    /// The compiled patterns, in list order.
    pub fn patterns(&self) -> &[DomainPattern] {
        &self.patterns
    }
}
