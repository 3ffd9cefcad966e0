//! Name resolution for the gatekeeper, behind a trait so tests can map names to local addresses
//! and change the answer between lookups (DNS rebinding) without a DNS server.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

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
