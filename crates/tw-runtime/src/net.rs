//! The egress gatekeeper's connector: the one way a tool's request leaves the machine. It
//! resolves names itself (through an injectable [`Resolver`]), keeps only the addresses
//! [`Egress`] allows and hands exactly those to the HTTP client, so the address checked is the
//! address connected to; it follows redirects itself, checking every hop; it holds every limit
//! (connect, first byte, whole exchange, request and response bytes, redirects); and it writes
//! down what happened ([`NetFacts`]) for the call's audit record, refusals included.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use tw_core::target::{DomainList, Egress, EgressRefusal, Host, UrlTarget, parse_host};

mod limit;
pub mod proxy;
mod resolve;
#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;

pub use limit::{HostRate, StoreLimiter};
pub use resolve::{DnsResolver, Lookup, Resolver, StaticResolver, SystemResolver, with_names};

/// How long and how much one fetch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Setting up one connection (TCP and TLS).
    pub connect: Duration,
    /// From sending a request to its response's headers, per hop.
    pub first_byte: Duration,
    /// The whole fetch, every hop and the body included.
    pub total: Duration,
    /// The request body.
    pub max_request_bytes: usize,
    /// The response body kept; the rest is not read and the response is marked truncated.
    pub max_response_bytes: usize,
    /// Redirects followed.
    pub max_redirects: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(30),
            total: Duration::from_secs(60),
            max_request_bytes: 1 << 20,
            max_response_bytes: 5 << 20,
            max_redirects: 5,
        }
    }
}

/// One request a tool asks for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// GET, POST, ...
    pub method: Method,
    /// Where, as the caller wrote it.
    pub url: String,
    /// Header names and values, as the caller gave them.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// Headers that may only go to some hosts (they carry a secret): the request is refused
    /// when its own host is not among them, and a redirect elsewhere goes without the header.
    pub confined: Vec<Confined>,
}

/// A header held to a list of hosts.
#[derive(Debug, Clone)]
pub struct Confined {
    /// The header's name, as in [`Request::headers`].
    pub header: String,
    /// The hosts it may be sent to.
    pub hosts: DomainList,
    /// The rule named when it stops a request (`secret github hosts`).
    pub rule: String,
}

/// What came back.
#[derive(Debug, Clone)]
pub struct Response {
    /// The final response's status.
    pub status: u16,
    /// Its headers, in order (values that are not UTF-8 are shown lossily).
    pub headers: Vec<(String, String)>,
    /// The URL of the final hop.
    pub final_url: String,
    /// The body, up to the limit.
    pub body: Vec<u8>,
    /// Whether the body was cut at the limit.
    pub truncated: bool,
}

/// What one call did on the network, for its audit record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetFacts {
    /// Requests sent (every redirect hop is one).
    pub requests: u32,
    /// Hosts asked for, in order, each once.
    pub hosts: Vec<String>,
    /// Addresses connected to, in order, each once.
    pub addresses: Vec<IpAddr>,
    /// Request bodies sent.
    pub bytes_sent: u64,
    /// Response bodies received.
    pub bytes_received: u64,
    /// The URLs redirected to, in order.
    pub redirects: Vec<String>,
    /// The rule that refused the fetch, and the address that decided it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refused>,
    /// Every request refused, in order (a page's many requests; at most [`MAX_BLOCKED`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Blocked>,
}

/// The most refused requests one call's facts list; the count goes on past it.
pub const MAX_BLOCKED: usize = 100;

/// One refused request: where it asked to go, and the rule (and address) that refused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// The destination as asked for (a URL, or `host:port` for a tunnel).
    pub destination: String,
    /// The rule that decided.
    pub rule: String,
    /// The address that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
}

/// A refusal as the audit record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// The rule that decided.
    pub rule: String,
    /// The address that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
}

impl NetFacts {
    /// Adds what another fetch of the same call did (hosts and addresses each once; the latest
    /// refusal wins).
    pub fn merge(&mut self, other: NetFacts) {
        self.requests += other.requests;
        for h in other.hosts {
            push_once(&mut self.hosts, h);
        }
        for a in other.addresses {
            push_once(&mut self.addresses, a);
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.redirects.extend(other.redirects);
        if other.refusal.is_some() {
            self.refusal = other.refusal;
        }
        let room = MAX_BLOCKED.saturating_sub(self.blocked.len());
        self.blocked.extend(other.blocked.into_iter().take(room));
    }

    /// Writes down one refused request: the latest refusal, and the list of them (up to
    /// [`MAX_BLOCKED`]).
    pub fn refuse(&mut self, destination: &str, r: &EgressRefusal) {
        if self.blocked.len() < MAX_BLOCKED {
            self.blocked.push(Blocked {
                destination: tw_core::output::truncate_str(destination, 1024).to_owned(),
                rule: r.rule.clone(),
                address: r.address,
            });
        }
        self.refusal = Some(Refused {
            rule: r.rule.clone(),
            address: r.address,
        });
    }

    /// The facts as the audit record's `network` object: the same document `Serialize` writes,
    /// built directly (a fetch's record is made on every call, and serde's value serializer
    /// took a tenth of the pipeline around a local fetch).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{Map, Value};
        fn texts<T: ToString>(items: &[T]) -> Value {
            Value::Array(items.iter().map(|i| Value::String(i.to_string())).collect())
        }
        fn decided(m: &mut Map<String, Value>, rule: &str, address: Option<IpAddr>) {
            m.insert("rule".to_owned(), Value::String(rule.to_owned()));
            if let Some(a) = address {
                m.insert("address".to_owned(), Value::String(a.to_string()));
            }
        }
        let mut m = Map::with_capacity(8);
        m.insert("requests".to_owned(), self.requests.into());
        m.insert("hosts".to_owned(), texts(&self.hosts));
        m.insert("addresses".to_owned(), texts(&self.addresses));
        m.insert("bytes_sent".to_owned(), self.bytes_sent.into());
        m.insert("bytes_received".to_owned(), self.bytes_received.into());
        m.insert("redirects".to_owned(), texts(&self.redirects));
        if let Some(r) = &self.refusal {
            let mut refusal = Map::with_capacity(2);
            decided(&mut refusal, &r.rule, r.address);
            m.insert("refusal".to_owned(), Value::Object(refusal));
        }
        if !self.blocked.is_empty() {
            let blocked = self.blocked.iter().map(|b| {
                let mut one = Map::with_capacity(3);
                one.insert(
                    "destination".to_owned(),
                    Value::String(b.destination.clone()),
                );
                decided(&mut one, &b.rule, b.address);
                Value::Object(one)
            });
            m.insert("blocked".to_owned(), Value::Array(blocked.collect()));
        }
        Value::Object(m)
    }

    fn host(&mut self, host: &Host) {
        push_once(&mut self.hosts, host.to_string());
    }

    fn address(&mut self, addr: IpAddr) {
        push_once(&mut self.addresses, addr);
    }
}

fn push_once<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Why a fetch did not produce a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The gatekeeper refused a URL or every address its host resolved to.
    #[error("refused: {0}")]
    Refused(EgressRefusal),
    /// The request itself is malformed; `field` names the part.
    #[error("{field}: {message}")]
    Invalid {
        /// `url`, `headers/<name>`, `body`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A limit ran out.
    #[error("{0}")]
    Timeout(String),
    /// The host could not be resolved or reached, or the exchange broke off.
    #[error("{0}")]
    Failed(String),
}

/// How many HTTP clients (one per set of rules and limits) are kept for reuse.
const CLIENTS: usize = 64;

/// Counts requests per host where limits apply, refusing one that would pass a limit.
pub trait HostLimiter: Send + Sync {
    /// Counts one request to `host`, or says which limit refuses it.
    fn admit<'a>(
        &'a self,
        host: &'a Host,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), EgressRefusal>> + Send + 'a>>;
}

/// The connector. Cheap to share; clients are kept per set of rules, so a pooled connection
/// is only reused under the rules that admitted it.
pub struct Gatekeeper {
    resolver: Arc<dyn Resolver>,
    /// By rules, then by connect timeout: looked up by reference, so a call's rules are
    /// neither copied nor hashed twice to find its client.
    clients: Mutex<HashMap<Egress, Vec<(Duration, reqwest::Client)>>>,
    limiter: Option<Arc<dyn HostLimiter>>,
}

impl Gatekeeper {
    /// A gatekeeper resolving names through `resolver`.
    pub fn new(resolver: Arc<dyn Resolver>) -> Self {
        Gatekeeper {
            resolver,
            clients: Mutex::new(HashMap::new()),
            limiter: None,
        }
    }

    /// The same, counting every request against `limiter` (every redirect hop, every request
    /// of a sandboxed process through the proxy).
    pub fn with_limiter(mut self, limiter: Arc<dyn HostLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// Counts one request to `host` against the per-host limits.
    pub async fn limit(&self, host: &Host) -> Result<(), NetError> {
        match &self.limiter {
            Some(l) => l.admit(host).await.map_err(NetError::Refused),
            None => Ok(()),
        }
    }

    /// Fetches `req` under `egress` and `limits`, following redirects, recording in `facts`.
    pub async fn fetch(
        &self,
        egress: &Egress,
        req: Request,
        limits: &Limits,
        facts: &mut NetFacts,
    ) -> Result<Response, NetError> {
        let outcome =
            match tokio::time::timeout(limits.total, self.hops(egress, req, limits, facts)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(NetError::Timeout(format!(
                    "the fetch took longer than its {} limit",
                    secs(limits.total)
                ))),
            };
        if let Err(NetError::Refused(r)) = &outcome {
            facts.refusal = Some(Refused {
                rule: r.rule.clone(),
                address: r.address,
            });
        }
        outcome
    }

    async fn hops(
        &self,
        egress: &Egress,
        mut req: Request,
        limits: &Limits,
        facts: &mut NetFacts,
    ) -> Result<Response, NetError> {
        if req
            .body
            .as_ref()
            .is_some_and(|b| b.len() > limits.max_request_bytes)
        {
            return Err(NetError::Invalid {
                field: "body".to_owned(),
                message: format!(
                    "the body is longer than the {} bytes a request may send",
                    limits.max_request_bytes
                ),
            });
        }
        let mut headers = header_map(&req.headers)?;
        let client = self.client(egress, limits)?;
        let mut target = check(egress, &req.url)?;
        let mut url = reqwest::Url::parse(&req.url)
            .or_else(|_| reqwest::Url::parse(&format!("http://{}", req.url)))
            .map_err(|e| invalid_url(&req.url, &e.to_string()))?;
        let mut redirects = 0;
        loop {
            for c in &req.confined {
                if c.hosts.first_match(&target.host).is_some() {
                    continue;
                }
                if redirects > 0 {
                    headers.remove(c.header.as_str());
                    continue;
                }
                return Err(NetError::Refused(EgressRefusal {
                    rule: c.rule.clone(),
                    reason: format!(
                        "header {} may only be sent to {}, not {}",
                        c.header,
                        c.hosts
                            .patterns()
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        target.host
                    ),
                    address: None,
                }));
            }
            self.limit(&target.host).await?;
            facts.host(&target.host);
            facts.requests += 1;
            if let Some(body) = &req.body {
                facts.bytes_sent += body.len() as u64;
            }
            let mut builder = client
                .request(req.method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(body) = &req.body {
                builder = builder.body(body.clone());
            }
            let sent = tokio::time::timeout(limits.first_byte, builder.send()).await;
            let mut response = match sent {
                Err(_) => {
                    return Err(NetError::Timeout(format!(
                        "{} sent no response within {}",
                        target.host,
                        secs(limits.first_byte)
                    )));
                }
                Ok(Err(e)) => return Err(failure(&target.host, &e, limits)),
                Ok(Ok(r)) => r,
            };
            if let Some(peer) = response.remote_addr() {
                facts.address(peer.ip());
            }
            let status = response.status();
            let location = status
                .is_redirection()
                .then(|| response.headers().get(reqwest::header::LOCATION).cloned())
                .flatten();
            if let Some(location) = location {
                if redirects == limits.max_redirects {
                    return Err(NetError::Failed(format!(
                        "more than {} redirects",
                        limits.max_redirects
                    )));
                }
                redirects += 1;
                let next = location
                    .to_str()
                    .ok()
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| {
                        NetError::Failed(format!(
                            "{} redirected to a location that is not a url",
                            target.host
                        ))
                    })?;
                facts.redirects.push(next.to_string());
                // A location that cannot be read is the server's doing, not the caller's.
                let next_target = egress.url(next.as_str()).map_err(NetError::Refused)?;
                if origin(&url) != origin(&next) {
                    // Credentials meant for one site are not handed to the next.
                    for name in ["authorization", "cookie", "proxy-authorization"] {
                        headers.remove(name);
                    }
                }
                if status == StatusCode::SEE_OTHER
                    || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                        && req.method == Method::POST)
                {
                    req.method = Method::GET;
                    req.body = None;
                    headers.remove(reqwest::header::CONTENT_TYPE);
                    headers.remove(reqwest::header::CONTENT_LENGTH);
                }
                url = next;
                target = next_target;
                continue;
            }
            let headers_out = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            // Room for the body the server announces, up to the limit (and at most a MiB
            // ahead of what arrives): read into place, not grown and copied chunk by chunk.
            let announced = response.content_length().unwrap_or(0);
            let ahead = usize::try_from(announced).unwrap_or(usize::MAX);
            let mut body = Vec::with_capacity(ahead.min(limits.max_response_bytes).min(1 << 20));
            let mut truncated = false;
            loop {
                let chunk = match response.chunk().await {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    Err(e) => return Err(failure(&target.host, &e, limits)),
                };
                facts.bytes_received += chunk.len() as u64;
                let room = limits.max_response_bytes - body.len();
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            return Ok(Response {
                status: status.as_u16(),
                headers: headers_out,
                final_url: url.to_string(),
                body,
                truncated,
            });
        }
    }

    /// The client for these rules, made once: its resolver admits only what `egress` allows,
    /// and it follows no redirects by itself.
    fn client(&self, egress: &Egress, limits: &Limits) -> Result<reqwest::Client, NetError> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, client)) = clients
            .get(egress)
            .and_then(|kept| kept.iter().find(|(t, _)| *t == limits.connect))
        {
            return Ok(client.clone());
        }
        let client = self
            .builder(egress, limits.connect)
            .build()
            .map_err(|e| NetError::Failed(format!("no HTTP client: {e}")))?;
        if clients.values().map(Vec::len).sum::<usize>() >= CLIENTS {
            clients.clear();
        }
        clients
            .entry(egress.clone())
            .or_default()
            .push((limits.connect, client.clone()));
        Ok(client)
    }
}

impl Gatekeeper {
    /// An HTTP client of its own for a long-lived peer (an upstream MCP server over HTTP):
    /// connections only to addresses `egress` allows for the host asked for, no redirects
    /// followed (a hop elsewhere would not be judged), `headers` on every request.
    pub fn client_for(
        &self,
        egress: &Egress,
        connect: Duration,
        headers: &[(String, String)],
    ) -> Result<reqwest::Client, NetError> {
        self.builder(egress, connect)
            .default_headers(header_map(headers)?)
            .build()
            .map_err(|e| NetError::Failed(format!("no HTTP client: {e}")))
    }

    /// Whether `url` would be let through under `egress` now: the URL's rules, then every
    /// address its host resolves to; the allowed addresses, or the refusal. For saying why a
    /// long-lived peer cannot be reached before a client's error hides it.
    pub async fn admit(&self, egress: &Egress, url: &str) -> Result<Vec<IpAddr>, NetError> {
        let target = check(egress, url)?;
        let gate = Gate {
            egress: egress.clone(),
            resolver: Arc::clone(&self.resolver),
        };
        let name = target.host.to_string();
        let name = name.trim_start_matches('[').trim_end_matches(']');
        gate.allowed(name)
            .await
            .map(|addrs| addrs.into_iter().map(|a| a.ip()).collect())
            .map_err(|e| match e.downcast::<EgressRefusal>() {
                Ok(r) => NetError::Refused(*r),
                Err(e) => NetError::Failed(format!("{}: {e}", target.host)),
            })
    }

    /// A client that resolves through the gate and follows no redirects by itself.
    fn builder(&self, egress: &Egress, connect: Duration) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .dns_resolver(Arc::new(Gate {
                egress: egress.clone(),
                resolver: Arc::clone(&self.resolver),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect)
            .no_proxy()
    }
}

/// The resolver the HTTP client asks: names resolved by ours, and only allowed addresses kept.
struct Gate {
    egress: Egress,
    resolver: Arc<dyn Resolver>,
}

impl Gate {
    /// The addresses of `name` the rules allow; the first refusal when none is.
    async fn allowed(&self, name: &str) -> Result<Vec<SocketAddr>, BoxError> {
        let host = parse_host(name).map_err(|e| Box::new(e) as BoxError)?;
        let addrs = self.resolver.lookup(name).await?;
        let mut refusal = None;
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|ip| match self.egress.address(&host, *ip) {
                Ok(()) => true,
                Err(r) => {
                    refusal.get_or_insert(r);
                    false
                }
            })
            .map(|ip| SocketAddr::new(ip, 0))
            .collect();
        match (allowed.is_empty(), refusal) {
            (true, Some(r)) => Err(Box::new(r) as BoxError),
            (true, None) => Err(format!("{name} has no address").into()),
            _ => Ok(allowed),
        }
    }
}

impl reqwest::dns::Resolve for Gate {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let gate = Gate {
            egress: self.egress.clone(),
            resolver: Arc::clone(&self.resolver),
        };
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let allowed = gate.allowed(&name).await?;
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn check(egress: &Egress, url: &str) -> Result<UrlTarget, NetError> {
    egress.url(url).map_err(|r| match r.rule.as_str() {
        "url" => NetError::Invalid {
            field: "url".to_owned(),
            message: r.reason,
        },
        _ => NetError::Refused(r),
    })
}

fn invalid_url(url: &str, why: &str) -> NetError {
    NetError::Invalid {
        field: "url".to_owned(),
        message: format!("{url:?} is not a url: {why}"),
    }
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, NetError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let field = format!("headers/{name}");
        let key = HeaderName::from_bytes(name.as_bytes()).map_err(|_| NetError::Invalid {
            field: field.clone(),
            message: format!("{name:?} is not a header name"),
        })?;
        let value = HeaderValue::from_str(value).map_err(|_| NetError::Invalid {
            field,
            message: "a header value may not hold control characters or line breaks".to_owned(),
        })?;
        map.append(key, value);
    }
    Ok(map)
}

fn origin(url: &reqwest::Url) -> (String, Option<String>, Option<u16>) {
    (
        url.scheme().to_owned(),
        url.host_str().map(str::to_owned),
        url.port_or_known_default(),
    )
}

/// A client error as the caller should read it: the gatekeeper's refusal when there is one
/// anywhere in its causes, else what failed.
fn failure(host: &Host, e: &reqwest::Error, limits: &Limits) -> NetError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<EgressRefusal>() {
            return NetError::Refused(r.clone());
        }
        source = s.source();
    }
    if e.is_connect() && e.is_timeout() {
        return NetError::Timeout(format!(
            "could not connect to {host} within {}",
            secs(limits.connect)
        ));
    }
    let mut message = format!("{host}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    NetError::Failed(message)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
