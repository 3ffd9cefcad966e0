//! A small real HTTP/1.1 server on 127.0.0.1 for the gatekeeper's and the network tools' tests:
//! canned answers per path, every connection counted and closed after one exchange (so each
//! fetch resolves its name again).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the test server answers on a path.
#[derive(Clone)]
pub(crate) enum Reply {
    /// 200 with this body.
    Body(Vec<u8>),
    /// 302 to this location.
    Redirect(u16, String),
    /// 200 with the request's head as its body.
    Echo,
    /// Waits this long, then 200.
    Slow(Duration),
    /// Reads the request's body (by its content-length), keeps it, then answers this status.
    Record(u16, Arc<std::sync::Mutex<Vec<Vec<u8>>>>),
}

pub(crate) struct Server {
    /// Where it listens on 127.0.0.1.
    pub(crate) port: u16,
    /// Connections accepted so far.
    pub(crate) connections: Arc<AtomicUsize>,
}

pub(crate) async fn serve(routes: Vec<(&'static str, Reply)>) -> Server {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&connections);
    let routes = Arc::new(routes);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let routes = Arc::clone(&routes);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let path = text.split(' ').nth(1).unwrap_or("/").to_owned();
                let reply = routes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, r)| r.clone())
                    .unwrap_or(Reply::Body(b"not found".to_vec()));
                let (status, location, body) = match reply {
                    Reply::Body(b) => (200, None, b),
                    Reply::Redirect(code, to) => (code, Some(to), Vec::new()),
                    Reply::Echo => (200, None, head.clone()),
                    Reply::Slow(d) => {
                        tokio::time::sleep(d).await;
                        (200, None, b"slow".to_vec())
                    }
                    Reply::Record(status, bodies) => {
                        let length = text
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        let mut body = vec![0u8; length];
                        if socket.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        bodies
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(body);
                        (status, None, b"ok".to_vec())
                    }
                };
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                if let Some(to) = location {
                    out.push_str(&format!("location: {to}\r\n"));
                }
                out.push_str("\r\n");
                let _ = socket.write_all(out.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Server { port, connections }
}
