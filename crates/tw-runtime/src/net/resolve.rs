//! Name resolution for the gatekeeper, behind a trait so tests can map names to local addresses
//! and change the answer between lookups (DNS rebinding) without a DNS server.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A lookup in progress.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a host name into the addresses it has.
pub trait Resolver: Send + Sync {
    /// Every address of `host`, in the order to try them.
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a>;
}

/// The system's resolver (`getaddrinfo`, on tokio's blocking pool).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for a in addrs {
                if !ips.contains(&a.ip()) {
                    ips.push(a.ip());
                }
            }
            Ok(ips)
        })
    }
}

/// Names asked of the DNS servers the config lists (`[network] nameservers`), over UDP with
/// TCP for long answers, instead of the system's resolver. Nothing is cached: every lookup asks
/// again and its answer is judged afresh (the connection then goes to an address it judged).
pub struct DnsResolver {
    resolver: Result<hickory_resolver::TokioResolver, String>,
}

impl DnsResolver {
    /// A resolver asking `servers` in turn, each try waiting at most `timeout`.
    pub fn new(servers: &[SocketAddr], timeout: Duration) -> Self {
        use hickory_resolver::config::{
            ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
        };
        let name_servers = servers
            .iter()
            .map(|at| {
                let over = |mut c: ConnectionConfig| {
                    c.port = at.port();
                    c
                };
                NameServerConfig::new(
                    at.ip(),
                    true,
                    vec![over(ConnectionConfig::udp()), over(ConnectionConfig::tcp())],
                )
            })
            .collect();
        let mut options = ResolverOpts::default();
        options.cache_size = 0;
        options.timeout = timeout;
        options.attempts = 2;
        // The hosts file is the system's answer; names the config wants answered locally are
        // in `[network.resolve]`.
        options.use_hosts_file = ResolveHosts::Never;
        let resolver = hickory_resolver::Resolver::builder_with_config(
            ResolverConfig::from_name_servers(name_servers),
            hickory_resolver::net::runtime::TokioRuntimeProvider::default(),
        )
        .with_options(options)
        .build()
        .map_err(|e| format!("the configured DNS servers cannot be used: {e}"));
        DnsResolver { resolver }
    }
}

impl Resolver for DnsResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let resolver = self
                .resolver
                .as_ref()
                .map_err(|e| io::Error::other(e.clone()))?;
            // An address is its own answer, as with the system's resolver.
            if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
                return Ok(vec![ip]);
            }
            // Fully qualified, so no search domain is tried in its place.
            let name = format!("{}.", host.trim_end_matches('.'));
            let found = resolver
                .lookup_ip(name.as_str())
                .await
                .map_err(|e| io::Error::new(io::ErrorKind::NotFound, format!("{host}: {e}")))?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for ip in found.iter() {
                if !ips.contains(&ip) {
                    ips.push(ip);
                }
            }
            Ok(ips)
        })
    }
}

/// Fixed answers per name; a name given several answers returns them one lookup after another,
/// the last one for good.
#[derive(Debug, Default)]
pub struct StaticResolver {
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
}

impl StaticResolver {
    /// A resolver that knows `answers`: each name with its successive answers.
    pub fn new<I, S>(answers: I) -> Self
    where
        I: IntoIterator<Item = (S, Vec<Vec<IpAddr>>)>,
        S: Into<String>,
    {
        StaticResolver {
            answers: Mutex::new(
                answers
                    .into_iter()
                    .map(|(name, a)| (name.into().to_ascii_lowercase(), a))
                    .collect(),
            ),
        }
    }
}

impl Resolver for StaticResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        let answer = {
            let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
            match answers.get_mut(&host.to_ascii_lowercase()) {
                Some(queue) if queue.len() > 1 => Some(queue.remove(0)),
                Some(queue) => queue.first().cloned(),
                None => None,
            }
        };
        Box::pin(async move {
            answer.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host}: no such host"))
            })
        })
    }
}

/// `resolver`, with the names of `names` answered from it first (the config's
/// `[network.resolve]`); the answers are checked like any other.
pub fn with_names(
    names: &BTreeMap<String, Vec<IpAddr>>,
    resolver: Arc<dyn Resolver>,
) -> Arc<dyn Resolver> {
    if names.is_empty() {
        return resolver;
    }
    Arc::new(Named {
        names: names
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect(),
        rest: resolver,
    })
}

struct Named {
    names: HashMap<String, Vec<IpAddr>>,
    rest: Arc<dyn Resolver>,
}

impl Resolver for Named {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        match self.names.get(&key) {
            Some(addrs) => {
                let addrs = addrs.clone();
                Box::pin(async move { Ok(addrs) })
            }
            None => self.rest.lookup(host),
        }
    }
}
