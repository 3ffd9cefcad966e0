//! The config's `[network]` section: the gatekeeper's limits, names it resolves from the config
//! instead of DNS and the DNS servers it asks, secrets that header values may name, the web
//! search provider, and request rates per host. Parsing is pure like the rest of the config:
//! environment variables are named here and read when a call needs them, so a secret's value
//! never passes through the config or its errors.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use tw_core::target::DomainList;

use crate::net::{HostRate, Limits};

/// What `[network]` says, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkSettings {
    /// The gatekeeper's limits for every fetch (a tool may ask for less, never more).
    pub limits: Limits,
    /// Names answered from the config instead of DNS (like `curl --resolve`); the answers are
    /// still checked like any other address.
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
    /// The DNS servers names are asked of, in turn, instead of the system's resolver.
    pub nameservers: Vec<SocketAddr>,
    /// Secrets header values may name as `${secret:NAME}`.
    pub secrets: BTreeMap<String, Secret>,
    /// The provider `web_search` asks.
    pub search: Option<SearchSettings>,
    /// Requests allowed per host pattern, counted by the store's exact limiter across every
    /// tool, redirect hop and sandboxed process.
    pub rate_limits: Vec<HostRate>,
}

/// A secret: where its value is read from and the only hosts it may be sent to.
#[derive(Debug, Clone, PartialEq)]
pub struct Secret {
    /// The environment variable holding the value, read when a call uses it.
    pub env: String,
    /// The hosts the value may be sent to (at least one).
    pub hosts: DomainList,
}

/// The web search provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSettings {
    /// Which API it speaks.
    pub provider: SearchProvider,
    /// Where it is (the provider's public endpoint unless given; required for SearXNG).
    pub url: String,
    /// The environment variable holding the API key (Brave).
    pub api_key_env: Option<String>,
}

/// The search APIs `web_search` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// A SearXNG instance's JSON API (`/search?format=json`).
    Searxng,
    /// The Brave Search API.
    Brave,
    /// DuckDuckGo's HTML endpoint.
    Duckduckgo,
}

impl SearchProvider {
    /// The provider's name as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchProvider::Searxng => "searxng",
            SearchProvider::Brave => "brave",
            SearchProvider::Duckduckgo => "duckduckgo",
        }
    }

    fn default_url(self) -> Option<&'static str> {
        match self {
            SearchProvider::Searxng => None,
            SearchProvider::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            SearchProvider::Duckduckgo => Some("https://html.duckduckgo.com/html/"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NetworkDoc {
    connect_timeout_ms: Option<Spanned<u64>>,
    first_byte_timeout_ms: Option<Spanned<u64>>,
    total_timeout_ms: Option<Spanned<u64>>,
    max_request_bytes: Option<Spanned<u64>>,
    max_response_bytes: Option<Spanned<u64>>,
    max_redirects: Option<Spanned<u8>>,
    #[serde(default)]
    resolve: BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
    #[serde(default)]
    nameservers: Vec<Spanned<String>>,
    #[serde(default)]
    secrets: BTreeMap<Spanned<String>, SecretDoc>,
    search: Option<SearchDoc>,
    #[serde(default)]
    rate_limits: BTreeMap<Spanned<String>, Spanned<RateDoc>>,
}

/// A bare number (per minute) or a table.
#[derive(Deserialize)]
#[serde(untagged)]
enum RateDoc {
    PerMinute(u32),
    Table {
        per_minute: Option<u32>,
        per_hour: Option<u32>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretDoc {
    env: Spanned<String>,
    hosts: Spanned<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchDoc {
    provider: Spanned<SearchProvider>,
    url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
}

/// The longest any one fetch may be allowed to take.
const MAX_TIMEOUT_MS: u64 = 600_000;
/// The most of a body a fetch may be allowed to send or keep.
const MAX_BODY_BYTES: u64 = 64 << 20;

type Failure = (usize, String);

/// A `[network]` number, checked to lie between 1 and `max`.
fn within(v: Option<Spanned<u64>>, key: &str, max: u64) -> Result<Option<u64>, Failure> {
    let Some(v) = v else { return Ok(None) };
    if !(1..=max).contains(v.get_ref()) {
        return Err((
            v.span().start,
            format!(
                "network.{key} must be between 1 and {max}; got {}",
                v.get_ref()
            ),
        ));
    }
    Ok(Some(v.into_inner()))
}

/// Checks `[network]`.
pub(super) fn settings(d: NetworkDoc) -> Result<NetworkSettings, Failure> {
    let mut s = NetworkSettings::default();
    let limits = &mut s.limits;
    for (v, key, into) in [
        (
            d.connect_timeout_ms,
            "connect_timeout_ms",
            &mut limits.connect,
        ),
        (
            d.first_byte_timeout_ms,
            "first_byte_timeout_ms",
            &mut limits.first_byte,
        ),
        (d.total_timeout_ms, "total_timeout_ms", &mut limits.total),
    ] {
        if let Some(ms) = within(v, key, MAX_TIMEOUT_MS)? {
            *into = Duration::from_millis(ms);
        }
    }
    for (v, key, into) in [
        (
            d.max_request_bytes,
            "max_request_bytes",
            &mut limits.max_request_bytes,
        ),
        (
            d.max_response_bytes,
            "max_response_bytes",
            &mut limits.max_response_bytes,
        ),
    ] {
        if let Some(n) = within(v, key, MAX_BODY_BYTES)? {
            *into = usize::try_from(n).unwrap_or(usize::MAX);
        }
    }
    if let Some(r) = d.max_redirects {
        if *r.get_ref() > 20 {
            return Err((
                r.span().start,
                format!(
                    "network.max_redirects must be at most 20; got {}",
                    r.get_ref()
                ),
            ));
        }
        s.limits.max_redirects = r.into_inner();
    }
    for (name, addrs) in d.resolve {
        let host = tw_core::target::parse_host(name.get_ref()).map_err(|e| {
            (
                name.span().start,
                format!("network.resolve: {:?}: {e}", name.get_ref()),
            )
        })?;
        if addrs.is_empty() {
            return Err((
                name.span().start,
                format!(
                    "network.resolve.{:?} lists no address; give at least one, like [\"192.0.2.10\"]",
                    name.get_ref()
                ),
            ));
        }
        let mut ips = Vec::new();
        for a in addrs {
            let ip = a.get_ref().parse::<IpAddr>().map_err(|_| {
                (
                    a.span().start,
                    format!(
                        "network.resolve.{:?}: {:?} is not an IP address",
                        name.get_ref(),
                        a.get_ref()
                    ),
                )
            })?;
            ips.push(ip);
        }
        s.resolve.insert(host.to_string(), ips);
    }
    for at in d.nameservers {
        let text = at.get_ref();
        let addr = text
            .parse::<SocketAddr>()
            .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
            .map_err(|_| {
                (
                    at.span().start,
                    format!(
                        "network.nameservers: {text:?} is not an IP address with an optional \
                         port, like \"192.0.2.53\", \"192.0.2.53:5353\" or \"[2001:db8::53]:53\""
                    ),
                )
            })?;
        s.nameservers.push(addr);
    }
    for (name, doc) in d.secrets {
        let n = name.get_ref();
        if n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err((
                name.span().start,
                format!(
                    "network.secrets: {n:?} is not a secret name (letters, digits, '_' and '-')"
                ),
            ));
        }
        env_name(&doc.env, &format!("network.secrets.{n}.env"))?;
        if doc.hosts.get_ref().is_empty() {
            return Err((
                doc.hosts.span().start,
                format!(
                    "network.secrets.{n}.hosts lists no host: a secret is only ever sent to the \
                     hosts named here"
                ),
            ));
        }
        let hosts = DomainList::parse(doc.hosts.get_ref()).map_err(|e| {
            (
                doc.hosts.span().start,
                format!("network.secrets.{n}.hosts: {e}"),
            )
        })?;
        if let Some(p) = hosts.patterns().iter().find(|p| p.is_catch_all()) {
            return Err((
                doc.hosts.span().start,
                format!(
                    "network.secrets.{n}.hosts: {:?} would send the secret anywhere; name the \
                     hosts that need it",
                    p.as_str()
                ),
            ));
        }
        s.secrets.insert(
            name.into_inner(),
            Secret {
                env: doc.env.into_inner(),
                hosts,
            },
        );
    }
    if let Some(d) = d.search {
        s.search = Some(search(d)?);
    }
    for (pattern, rate) in d.rate_limits {
        let hosts = tw_core::target::DomainPattern::parse(pattern.get_ref()).map_err(|e| {
            (
                pattern.span().start,
                format!("network.rate_limits: {:?}: {e}", pattern.get_ref()),
            )
        })?;
        let (per_minute, per_hour) = match rate.get_ref() {
            RateDoc::PerMinute(n) => (Some(*n), None),
            RateDoc::Table {
                per_minute,
                per_hour,
            } => (*per_minute, *per_hour),
        };
        if per_minute.is_none() && per_hour.is_none() || [per_minute, per_hour].contains(&Some(0)) {
            return Err((
                rate.span().start,
                format!(
                    "network.rate_limits.{:?}: give a number of requests per minute, or \
                     per_minute and/or per_hour, each at least 1 (to keep a host out, block it)",
                    pattern.get_ref()
                ),
            ));
        }
        s.rate_limits.push(HostRate {
            hosts,
            per_minute,
            per_hour,
        });
    }
    Ok(s)
}

fn search(d: SearchDoc) -> Result<SearchSettings, Failure> {
    let provider = *d.provider.get_ref();
    let url = match (d.url, provider.default_url()) {
        (Some(u), _) => {
            let v = u.get_ref().trim_end_matches('/');
            let parsed = reqwest::Url::parse(v).ok();
            if !parsed
                .as_ref()
                .is_some_and(|p| matches!(p.scheme(), "http" | "https") && p.host().is_some())
            {
                return Err((
                    u.span().start,
                    format!(
                        "network.search.url must be an http:// or https:// URL, like \
                         \"http://127.0.0.1:8888\"; got {:?}",
                        u.get_ref()
                    ),
                ));
            }
            v.to_owned()
        }
        (None, Some(default)) => default.to_owned(),
        (None, None) => {
            return Err((
                d.provider.span().start,
                format!(
                    "network.search: provider {:?} needs url, the address of the instance (like \
                     \"http://127.0.0.1:8888\")",
                    provider.as_str()
                ),
            ));
        }
    };
    if let Some(e) = &d.api_key_env {
        env_name(e, "network.search.api_key_env")?;
    }
    if provider == SearchProvider::Brave && d.api_key_env.is_none() {
        return Err((
            d.provider.span().start,
            "network.search: provider \"brave\" needs api_key_env, the environment variable \
             holding the subscription token"
                .to_owned(),
        ));
    }
    Ok(SearchSettings {
        provider,
        url,
        api_key_env: d.api_key_env.map(Spanned::into_inner),
    })
}

pub(super) fn env_name(v: &Spanned<String>, key: &str) -> Result<(), Failure> {
    let n = v.get_ref();
    let ok = n.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err((
            v.span().start,
            format!(
                "{key}: {n:?} is not an environment variable name (letters, digits and '_'; \
                 the variable's name, not its value)"
            ),
        ))
    }
}
