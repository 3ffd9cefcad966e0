//! The egress gatekeeper's rules, without any I/O: which URLs a tool may reach, and which of the
//! addresses a name resolved to it may connect to. The runtime's connector resolves names itself,
//! asks [`Egress::address`] about every address it got, and connects only to one allowed here, so
//! what was checked is what is reached (no window for DNS rebinding).
//!
//! - Only `http` and `https`; no credentials in the URL (they would reach the audit log, and
//!   `user@host` is the oldest way to make a URL read as another host).
//! - Rules come in layers (the policy's `allow_domains`/`block_domains`, a skill's
//!   `allowed_domains`/`blocked_domains`), and every layer must let a URL through: a block in any
//!   layer refuses, and a layer with an allow list admits only what it lists.
//! - Addresses that are not on the public internet (loopback, private, link-local, cloud metadata,
//!   multicast, unspecified, broadcast, reserved, documentation, and every IPv6 form that embeds
//!   one of those IPv4 addresses) are refused unless some layer's allow list names that host or
//!   that address (a catch-all `*` or `ip` does not). A cloud metadata address is only ever let
//!   through by a rule that names the address itself: a domain rule cannot unlock it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::host::from_v6;
use super::{DomainList, DomainPattern, Host, TargetError, UrlTarget, parse_url, shown};

/// Why an address is not on the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// 127/8, `::1`.
    Loopback,
    /// RFC 1918, the carrier-grade NAT range 100.64/10, unique local `fc00::/7`, site-local
    /// `fec0::/10`, local-use NAT64 `64:ff9b:1::/48`.
    Private,
    /// 169.254/16, `fe80::/10`.
    LinkLocal,
    /// The instance metadata services of cloud providers (169.254.169.254, 169.254.170.2,
    /// 100.100.100.200, `fd00:ec2::254`).
    CloudMetadata,
    /// 224/4, `ff00::/8`.
    Multicast,
    /// 0/8 (Linux routes any of it to the local host), `::`.
    Unspecified,
    /// 255.255.255.255.
    Broadcast,
    /// Documentation and benchmarking ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 198.18/15,
    /// `2001:db8::/32`).
    Documentation,
    /// Reserved or special-purpose space: 240/4, 192.0.0/24, 192.88.99/24, IPv4-compatible IPv6,
    /// Teredo `2001::/32`, the discard prefix `100::/64`, ORCHIDv2 `2001:20::/28`.
    Reserved,
}

impl AddressClass {
    /// The class as a person reads it in a refusal.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::CloudMetadata => "a cloud metadata address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Unspecified => "an unspecified address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Documentation => "a documentation or benchmarking address",
            AddressClass::Reserved => "a reserved address",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an address is when it is not a public one; `None` for a globally routable address.
/// IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by that address.
pub fn classify(addr: IpAddr) -> Option<AddressClass> {
    match addr {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => match from_v6(a) {
            Host::Ipv4(mapped) => classify_v4(mapped),
            _ => classify_v6(a),
        },
    }
}

fn classify_v4(a: Ipv4Addr) -> Option<AddressClass> {
    use AddressClass::*;
    let [o0, o1, o2, o3] = a.octets();
    Some(match (o0, o1, o2, o3) {
        (169, 254, 169, 254) | (169, 254, 170, 2) | (100, 100, 100, 200) => CloudMetadata,
        (127, ..) => Loopback,
        (0, ..) => Unspecified,
        (10, ..) | (192, 168, ..) => Private,
        (172, b, ..) if (16..32).contains(&b) => Private,
        (100, b, ..) if (64..128).contains(&b) => Private,
        (169, 254, ..) => LinkLocal,
        (255, 255, 255, 255) => Broadcast,
        (224..=239, ..) => Multicast,
        (240..=255, ..) | (192, 0, 0, _) | (192, 88, 99, _) => Reserved,
        (192, 0, 2, _) | (198, 51, 100, _) | (203, 0, 113, _) => Documentation,
        (198, 18 | 19, ..) => Documentation,
        _ => return None,
    })
}

fn classify_v6(a: Ipv6Addr) -> Option<AddressClass> {
    use AddressClass::*;
    let s = a.segments();
    let embedded = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if a == Ipv6Addr::UNSPECIFIED {
        return Some(Unspecified);
    }
    if a == Ipv6Addr::LOCALHOST {
        return Some(Loopback);
    }
    if a == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(CloudMetadata);
    }
    Some(match s {
        // IPv4-compatible (deprecated): never a route to anything public.
        [0, 0, 0, 0, 0, 0, _, _] => Reserved,
        // NAT64 reaches the IPv4 address it carries, so it is that address.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => return classify_v4(embedded(hi, lo)),
        [0x64, 0xff9b, 1, ..] => Private,
        // 6to4 likewise reaches its IPv4 relay's side; a public one stays public.
        [0x2002, hi, lo, ..] => return classify_v4(embedded(hi, lo)),
        [0x100, 0, 0, 0, ..] => Reserved,
        [0x2001, 0, ..] => Reserved,
        [0x2001, 0x20..=0x2f, ..] => Reserved,
        [0x2001, 0xdb8, ..] => Documentation,
        [first, ..] if first & 0xfe00 == 0xfc00 => Private,
        [first, ..] if first & 0xffc0 == 0xfe80 => LinkLocal,
        [first, ..] if first & 0xffc0 == 0xfec0 => Private,
        [first, ..] if first & 0xff00 == 0xff00 => Multicast,
        _ => return None,
    })
}

/// One layer of egress rules: where they come from, and its lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EgressLayer {
    /// Where the rules come from, for refusals (`policy`, `skill deploy`).
    pub source: String,
    /// When not empty, the only hosts this layer lets through.
    pub allow: DomainList,
    /// Hosts this layer refuses, whatever else allows them.
    pub block: DomainList,
    /// When not empty, the only ports this layer lets through.
    pub ports: Vec<u16>,
}

impl EgressLayer {
    /// A layer compiled from lists of patterns as written (see [`DomainPattern::parse`]).
    pub fn parse(
        source: &str,
        allow: &[String],
        block: &[String],
        ports: &[u16],
    ) -> Result<Self, TargetError> {
        Ok(EgressLayer {
            source: source.to_owned(),
            allow: DomainList::parse(allow)?,
            block: DomainList::parse(block)?,
            ports: ports.to_vec(),
        })
    }
}

/// Why a URL or an address was refused: the rule that decided, and the address when one did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRefusal {
    /// The rule, as an audit record names it (`scheme`, `policy block_domains "*.evil"`,
    /// `address class`).
    pub rule: String,
    /// What was refused and why, for the caller.
    pub reason: String,
    /// The resolved address that decided, when one did.
    pub address: Option<IpAddr>,
}

impl fmt::Display for EgressRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for EgressRefusal {}

/// Every layer of rules one call is held to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Egress {
    layers: Vec<EgressLayer>,
}

impl Egress {
    /// The rules of these layers, all of which must let a connection through.
    pub fn new(layers: Vec<EgressLayer>) -> Self {
        Egress { layers }
    }

    /// Checks a URL before anything is resolved: scheme, credentials, port, and the host as
    /// written (an IP literal is judged as an address here too). Returns where it connects.
    pub fn url(&self, input: &str) -> Result<UrlTarget, EgressRefusal> {
        let refuse = |rule: &str, reason: String| EgressRefusal {
            rule: rule.to_owned(),
            reason,
            address: None,
        };
        let target = parse_url(input).map_err(|e| refuse("url", e.to_string()))?;
        if !matches!(target.scheme.as_str(), "http" | "https") {
            return Err(refuse(
                "scheme",
                format!(
                    "{:?}: only http and https urls may be fetched, not {}",
                    shown(input),
                    target.scheme
                ),
            ));
        }
        if has_credentials(input) {
            return Err(refuse(
                "credentials",
                format!(
                    "{:?}: a url may not carry a user name or password; send credentials in a header",
                    shown(input)
                ),
            ));
        }
        let port = target.port.unwrap_or(80);
        for layer in &self.layers {
            if !layer.ports.is_empty() && !layer.ports.contains(&port) {
                return Err(refuse(
                    &format!("{} ports", layer.source),
                    format!(
                        "port {port} of {} is not among the ports {} allows ({})",
                        target.host,
                        layer.source,
                        list(&layer.ports)
                    ),
                ));
            }
        }
        self.host(&target.host)?;
        if let Some(ip) = ip_of(&target.host) {
            self.address(&target.host, ip)?;
        }
        Ok(target)
    }

    /// Checks a host against every layer's lists.
    fn host(&self, host: &Host) -> Result<(), EgressRefusal> {
        for layer in &self.layers {
            if let Some(p) = layer.block.first_match(host) {
                return Err(EgressRefusal {
                    rule: format!("{} block_domains {:?}", layer.source, p.as_str()),
                    reason: format!("{host} is blocked by {}'s {:?}", layer.source, p.as_str()),
                    address: None,
                });
            }
            if !layer.allow.patterns().is_empty() && layer.allow.first_match(host).is_none() {
                return Err(EgressRefusal {
                    rule: format!("{} allow_domains", layer.source),
                    reason: format!("{host} is not among the hosts {} allows", layer.source),
                    address: None,
                });
            }
        }
        Ok(())
    }

    /// Checks one address `host` resolved to (or the host itself, when it is an IP literal):
    /// every layer's block list applies to the address too, and an address that is not public
    /// needs a rule that names the host or the address.
    pub fn address(&self, host: &Host, addr: IpAddr) -> Result<(), EgressRefusal> {
        let as_host = match addr {
            IpAddr::V4(a) => Host::Ipv4(a),
            IpAddr::V6(a) => from_v6(a),
        };
        let shown_addr = match (host, &as_host) {
            (Host::Domain(_), _) => format!("{host} ({addr})"),
            _ => host.to_string(),
        };
        for layer in &self.layers {
            if let Some(p) = layer.block.first_match(&as_host) {
                return Err(EgressRefusal {
                    rule: format!("{} block_domains {:?}", layer.source, p.as_str()),
                    reason: format!(
                        "{shown_addr} is blocked by {}'s {:?}",
                        layer.source,
                        p.as_str()
                    ),
                    address: Some(addr),
                });
            }
        }
        let Some(class) = classify(addr) else {
            return Ok(());
        };
        let names = |p: &DomainPattern, h: &Host| !p.is_catch_all() && p.matches(h);
        let allowed = self.layers.iter().any(|l| {
            l.allow.patterns().iter().any(|p| {
                names(p, &as_host) || (class != AddressClass::CloudMetadata && names(p, host))
            })
        });
        if allowed {
            return Ok(());
        }
        let how = if class == AddressClass::CloudMetadata {
            "allow it by address in allow_domains"
        } else {
            "allow the host or the address in allow_domains"
        };
        Err(EgressRefusal {
            rule: "address class".to_owned(),
            reason: format!(
                "{shown_addr} is {class}, which tools may not reach unless a rule names it ({how})"
            ),
            address: Some(addr),
        })
    }
}

fn ip_of(host: &Host) -> Option<IpAddr> {
    match host {
        Host::Domain(_) => None,
        Host::Ipv4(a) => Some(IpAddr::V4(*a)),
        Host::Ipv6(a) => Some(IpAddr::V6(*a)),
    }
}

fn list(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the URL's authority has a user name or password (`http://a@b`, `http://:@b`).
fn has_credentials(input: &str) -> bool {
    match url::Url::parse(input) {
        Ok(u) => !u.username().is_empty() || u.password().is_some() || authority_has_at(input),
        // A scheme-less URL parse_url accepted: look at the authority as written.
        Err(_) => authority_has_at(input),
    }
}

/// `http://@host/` parses with an empty user name, so look for the `@` itself too.
fn authority_has_at(input: &str) -> bool {
    let rest = input.split_once("://").map_or(input, |(_, rest)| rest);
    rest.split(['/', '?', '#'])
        .next()
        .is_some_and(|authority| authority.contains('@'))
}

#[cfg(test)]
mod tests;
