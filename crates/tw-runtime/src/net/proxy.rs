//! The egress proxy of a sandboxed process granted network: it serves the listener the sandbox
//! made inside the process's own network namespace (`tw_sandbox::EgressPort`), the only way out
//! of it. Each connection asks for one destination, as an HTTP proxy is asked: `CONNECT
//! host:port` (a tunnel, for HTTPS and anything else) or a request with an absolute `http://`
//! URL. The destination is judged by the same gatekeeper as `http_fetch` (policy's grant and
//! domain rules, the skill's, every address class), connected to at an address it checked, and
//! written down in the call's network facts; a refusal is a `403` that says why.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tw_core::target::{Egress, EgressRefusal};

use super::{Gatekeeper, NetError, NetFacts};

/// Serves `listener` until `stop` fires, each connection by the proxy `current` names when it
/// arrives, given the address the connection was made to: a long-lived client (a browser
/// session, told apart by the loopback address it was given) is held to the rules of the call
/// it serves now. `None` refuses the connection (no call is running).
pub async fn serve_with(
    listener: std::net::TcpListener,
    stop: CancellationToken,
    current: impl Fn(IpAddr) -> Option<Arc<Proxy>> + Send + 'static,
) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "the egress port could not be served");
            return;
        }
    };
    loop {
        let mut conn = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((conn, _)) => conn,
                Err(e) => {
                    tracing::debug!(error = %e, "accepting on the egress port failed");
                    continue;
                }
            },
        };
        let to = conn
            .local_addr()
            .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        let Some(proxy) = current(to) else {
            tokio::spawn(async move {
                let _ = conn
                    .write_all(&answer(403, "no call is running: nothing may connect now"))
                    .await;
            });
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = proxy.handle(conn) => {}
            }
        });
    }
}

/// The longest request head read.
const MAX_HEAD: usize = 16 << 10;
/// How long a client may take to say where it goes.
const HEAD_TIME: Duration = Duration::from_secs(30);
/// How long connecting to a destination may take.
const CONNECT_TIME: Duration = Duration::from_secs(10);

/// What serves one run's egress port.
pub struct Proxy {
    /// The connector whose rules and resolver judge every destination.
    pub gate: Arc<Gatekeeper>,
    /// The rules of the run.
    pub egress: Egress,
    /// What the run did on the network.
    pub facts: Arc<Mutex<NetFacts>>,
}

impl Proxy {
    /// A sandbox's egress port served by this proxy: every listener it is handed is served
    /// until the port is dropped, which the sandbox does when the run (or the server) ends.
    pub fn port(self: Arc<Self>) -> tw_sandbox::EgressPort {
        let stop = CancellationToken::new();
        let serving = stop.clone().drop_guard();
        tw_sandbox::EgressPort(Arc::new(move |listener| {
            let _served_while_held = &serving;
            tokio::spawn(Arc::clone(&self).serve(listener, stop.clone()));
        }))
    }

    /// Serves `listener` until `stop` fires (the run is over); every connection ends with it.
    pub async fn serve(self: Arc<Self>, listener: std::net::TcpListener, stop: CancellationToken) {
        serve_with(listener, stop, move |_| Some(Arc::clone(&self))).await;
    }

    async fn handle(&self, mut client: TcpStream) {
        let Ok(Some((head, rest))) = tokio::time::timeout(HEAD_TIME, read_head(&mut client))
            .await
            .unwrap_or(Ok(None))
        else {
            let _ = client
                .write_all(&answer(400, "a proxy request head was expected"))
                .await;
            return;
        };
        let Some(ask) = Ask::parse(&head) else {
            let _ = client
                .write_all(&answer(
                    400,
                    "ask for CONNECT host:port, or a request with an absolute http:// URL",
                ))
                .await;
            return;
        };
        let (mut upstream, peer) = match self.open(&ask).await {
            Ok(found) => found,
            Err(why) => {
                let _ = client.write_all(&answer(403, &why)).await;
                return;
            }
        };
        self.record(|f| f.address(peer.ip()));
        let sent = match &ask {
            Ask::Tunnel { .. } => client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
                .map(|()| 0),
            Ask::Forward { head, .. } => {
                let mut out = head.clone().into_bytes();
                out.extend_from_slice(&rest);
                upstream.write_all(&out).await.map(|()| out.len() as u64)
            }
        };
        let Ok(sent) = sent else { return };
        self.record(|f| f.bytes_sent += sent);
        let (from_client, to_client) = client.into_split();
        let (from_upstream, to_upstream) = upstream.into_split();
        tokio::join!(
            self.pump(from_client, to_upstream, Direction::Sent),
            self.pump(from_upstream, to_client, Direction::Received),
        );
    }

    /// Copies one direction until either side ends, counting as it goes, so the facts are
    /// right however the run ends (a connection still open when it does is cut there).
    async fn pump(&self, mut from: OwnedReadHalf, mut to: OwnedWriteHalf, direction: Direction) {
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Counted before it is passed on, so the count is in before the process can see
            // the bytes (and end the run).
            let counted = n as u64;
            self.record(|f| match direction {
                Direction::Sent => f.bytes_sent += counted,
                Direction::Received => f.bytes_received += counted,
            });
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    }

    /// Judges the destination and connects to an address the gatekeeper checked for it.
    async fn open(&self, ask: &Ask) -> Result<(TcpStream, SocketAddr), String> {
        let (url, port) = ask.destination();
        self.record(|f| {
            f.requests += 1;
        });
        let addrs: Vec<IpAddr> = match self.gate.admit(&self.egress, &url).await {
            Ok(addrs) => addrs,
            Err(NetError::Refused(r)) => return Err(self.refused(&url, r)),
            Err(e) => return Err(e.to_string()),
        };
        if let Ok(target) = tw_core::target::parse_url(&url) {
            if let Err(NetError::Refused(r)) = self.gate.limit(&target.host).await {
                return Err(self.refused(&url, r));
            }
            self.record(|f| f.host(&target.host));
        }
        let mut last = String::from("no address");
        for ip in addrs {
            let to = SocketAddr::new(ip, port);
            match tokio::time::timeout(CONNECT_TIME, TcpStream::connect(to)).await {
                Ok(Ok(s)) => return Ok((s, to)),
                Ok(Err(e)) => last = format!("{to}: {e}"),
                Err(_) => last = format!("{to}: no connection within 10 s"),
            }
        }
        Err(format!("could not connect: {last}"))
    }

    /// Writes a refusal down as the run's network facts keep it; what the client is told.
    fn refused(&self, destination: &str, r: EgressRefusal) -> String {
        let why = format!("{} (rule: {})", r.reason, r.rule);
        self.record(|f| f.refuse(destination, &r));
        why
    }

    fn record(&self, f: impl FnOnce(&mut NetFacts)) {
        f(&mut self.facts.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Sent,
    Received,
}

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    /// `CONNECT host:port`.
    Tunnel { authority: String, port: u16 },
    /// A request with an absolute URL: sent on with its target in origin form.
    Forward {
        url: String,
        port: u16,
        head: String,
    },
}

impl Ask {
    fn parse(head: &str) -> Option<Ask> {
        let mut lines = head.split("\r\n");
        let first = lines.next()?;
        let mut parts = first.split(' ');
        let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !version.starts_with("HTTP/1.") {
            return None;
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            let url = reqwest::Url::parse(&format!("https://{target}/")).ok()?;
            let port = url.port_or_known_default()?;
            // The authority must say its port, as CONNECT requires.
            target.rsplit_once(':')?.1.parse::<u16>().ok()?;
            return Some(Ask::Tunnel {
                authority: target.to_owned(),
                port,
            });
        }
        let url = reqwest::Url::parse(target).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        let port = url.port_or_known_default()?;
        let mut origin = url.path().to_owned();
        if let Some(q) = url.query() {
            origin.push('?');
            origin.push_str(q);
        }
        let mut out = format!("{method} {origin} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            // Hop-by-hop for the proxy; one request per connection, so each is judged.
            if [
                "proxy-connection",
                "proxy-authorization",
                "connection",
                "keep-alive",
            ]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
            {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        Some(Ask::Forward {
            url: url.to_string(),
            port,
            head: out,
        })
    }

    /// The URL the gatekeeper judges, and the port to connect to.
    fn destination(&self) -> (String, u16) {
        match self {
            Ask::Tunnel { authority, port } => (format!("https://{authority}/"), *port),
            Ask::Forward { url, port, .. } => (url.clone(), *port),
        }
    }
}

/// Reads up to the end of the request head; returns it and what came after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok(String::from_utf8(buf).ok().map(|h| (h, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn answer(status: u16, why: &str) -> Vec<u8> {
    let reason = if status == 403 {
        "Forbidden"
    } else {
        "Bad Request"
    };
    let body = format!("{why}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_proxy_request_says_where_it_goes() {
        assert_eq!(
            Ask::parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443"),
            Some(Ask::Tunnel {
                authority: "pypi.org:443".to_owned(),
                port: 443
            })
        );
        assert_eq!(
            Ask::parse(
                "GET http://example.test:8080/a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\n\
                 Proxy-Connection: keep-alive\r\nAccept: */*"
            ),
            Some(Ask::Forward {
                url: "http://example.test:8080/a?b=1".to_owned(),
                port: 8080,
                head: "GET /a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: */*\r\n\
                       Connection: close\r\n\r\n"
                    .to_owned(),
            })
        );
        for bad in [
            "GET /relative HTTP/1.1",
            "GET https://example.test/ HTTP/1.1",
            "CONNECT example.test HTTP/1.1",
            "GET http://example.test/ SPDY/3",
            "",
        ] {
            assert_eq!(Ask::parse(bad), None, "{bad}");
        }
    }
}
