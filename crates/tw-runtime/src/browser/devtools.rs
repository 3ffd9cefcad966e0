//! The DevTools connection to Chromium over a pipe, not a port. Chromium started with
//! `--remote-debugging-port` listens on the host's loopback, where any local process can drive
//! it without a password: read every session's cookies, open a context with no proxy, save
//! downloads anywhere the browser may write. Started with `--remote-debugging-pipe` it listens
//! nowhere: it reads commands from its fd 3 and writes answers and events to its fd 4, each a
//! JSON message ended by a NUL byte.
//!
//! chromiumoxide speaks only WebSocket, so a bridge stands between: a listener on a fresh
//! loopback port that upgrades exactly one connection, the one asking for a path with 128
//! random bits in it (nobody else knows it; any other is refused), then stops listening and
//! relays messages between that connection and the pipe for as long as both are open.

use std::io;
use std::time::Duration;

use async_tungstenite::tungstenite::Message;
use async_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use async_tungstenite::tungstenite::http::StatusCode;
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The WebSocket URL chromiumoxide connects to. The relay behind it runs on its own and ends
/// when either side closes: the browser exited, or the connection was dropped.
pub(super) struct Bridge {
    /// `ws://127.0.0.1:PORT/devtools/browser/SECRET`.
    pub url: String,
}

/// Listens for the one connection to `to_browser` (Chromium's fd 3) and `from_browser` (its
/// fd 4); `wait` is how long the connection may take to come.
pub(super) async fn bridge<W, R>(
    to_browser: W,
    from_browser: R,
    wait: Duration,
) -> io::Result<Bridge>
where
    W: AsyncWrite + Unpin + Send + 'static,
    R: AsyncRead + Unpin + Send + 'static,
{
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let mut secret = [0u8; 16];
    getrandom::fill(&mut secret).map_err(|e| io::Error::other(e.to_string()))?;
    let path = format!(
        "/devtools/browser/{}",
        secret
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let url = format!("ws://127.0.0.1:{port}{path}");
    tokio::spawn(async move {
        let accepted = tokio::time::timeout(wait, accept(&listener, &path)).await;
        // Listening stops here, whoever connected.
        drop(listener);
        match accepted {
            Ok(Some(ws)) => relay(ws, to_browser, from_browser).await,
            Ok(None) => {}
            Err(_) => tracing::warn!("nothing connected to the browser's DevTools bridge in time"),
        }
    });
    Ok(Bridge { url })
}

type Socket = async_tungstenite::WebSocketStream<
    async_tungstenite::tokio::TokioAdapter<tokio::net::TcpStream>,
>;

/// The first connection that asks for `path`; every other is refused and closed.
async fn accept(listener: &TcpListener, path: &str) -> Option<Socket> {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "the browser's DevTools bridge stopped listening");
                return None;
            }
        };
        // Each message goes out as it comes (as Chromium's own DevTools server sends them):
        // held back for the peer's acknowledgement of the last one, an answer waits up to the
        // 40 ms of a delayed ACK.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY on the DevTools bridge");
        }
        // The signature is tungstenite's handshake callback's.
        #[allow(clippy::result_large_err)]
        let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
            if req.uri().path() == path {
                Ok(resp)
            } else {
                let mut refused = ErrorResponse::new(None);
                *refused.status_mut() = StatusCode::NOT_FOUND;
                Err(refused)
            }
        };
        let config = async_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        match async_tungstenite::tokio::accept_hdr_async_with_config(stream, check, Some(config))
            .await
        {
            Ok(ws) => return Some(ws),
            Err(e) => {
                tracing::warn!(error = %e, "a connection to the browser's DevTools bridge was refused")
            }
        }
    }
}

/// Relays until either side closes: each WebSocket message to the pipe with a NUL after it,
/// each NUL-ended message from the pipe as a text message.
async fn relay<W, R>(ws: Socket, mut to_browser: W, from_browser: R)
where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let (mut sender, mut receiver) = ws.split();
    let commands = async {
        while let Some(Ok(message)) = receiver.next().await {
            let data = match message {
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Binary(b) => b.to_vec(),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            };
            if to_browser.write_all(&data).await.is_err()
                || to_browser.write_all(b"\0").await.is_err()
                || to_browser.flush().await.is_err()
            {
                break;
            }
        }
    };
    let answers = async {
        let mut from_browser = BufReader::with_capacity(1 << 20, from_browser);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match from_browser.read_until(0, &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if buf.last() == Some(&0) {
                buf.pop();
            }
            let text = String::from_utf8(std::mem::take(&mut buf))
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            if sender.send(Message::text(text)).await.is_err() {
                break;
            }
        }
        // The browser is gone: the connection says so.
        let _ = sender.close(None).await;
    };
    tokio::select! {
        () = commands => {}
        () = answers => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A stand-in for the browser's two pipes: what the bridge writes to "fd 3" is read here,
    /// and what is written here comes out of "fd 4".
    async fn bridged() -> (Bridge, tokio::io::DuplexStream, tokio::io::DuplexStream) {
        let (to_browser, browser_reads) = tokio::io::duplex(1 << 20);
        let (browser_writes, from_browser) = tokio::io::duplex(1 << 20);
        let b = bridge(to_browser, from_browser, Duration::from_secs(10))
            .await
            .unwrap();
        (b, browser_reads, browser_writes)
    }

    #[tokio::test]
    async fn relays_messages_both_ways_with_nul_ends() {
        let (b, mut browser_reads, mut browser_writes) = bridged().await;
        let (mut ws, _) = async_tungstenite::tokio::connect_async(&b.url)
            .await
            .unwrap();
        ws.send(Message::text(r#"{"id":1,"method":"Browser.getVersion"}"#))
            .await
            .unwrap();
        let mut got = vec![0u8; 64];
        let n = browser_reads.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"{\"id\":1,\"method\":\"Browser.getVersion\"}\0");
        // Two answers in one write, and a long one, come out as separate messages.
        let long = format!(r#"{{"id":3,"result":"{}"}}"#, "x".repeat(200_000));
        browser_writes
            .write_all(format!("{{\"id\":1}}\0{{\"id\":2}}\0{long}\0").as_bytes())
            .await
            .unwrap();
        for want in ["{\"id\":1}", "{\"id\":2}", long.as_str()] {
            let m = ws.next().await.unwrap().unwrap();
            assert_eq!(m.into_text().unwrap().as_str(), want);
        }
        // The browser exiting closes the connection.
        drop(browser_writes);
        assert!(matches!(
            ws.next().await,
            Some(Ok(Message::Close(_))) | None
        ));
    }

    #[tokio::test]
    async fn a_connection_without_the_secret_path_is_refused_and_the_real_one_still_gets_in() {
        let (b, mut browser_reads, _browser_writes) = bridged().await;
        let guessed = b.url.rsplit_once('/').unwrap().0.to_owned() + "/0123456789abcdef";
        let refused = async_tungstenite::tokio::connect_async(&guessed).await;
        assert!(refused.is_err(), "a guessed path was let in");
        let (mut ws, _) = async_tungstenite::tokio::connect_async(&b.url)
            .await
            .unwrap();
        ws.send(Message::text("{}")).await.unwrap();
        let mut got = [0u8; 3];
        browser_reads.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"{}\0");
    }

    #[tokio::test]
    async fn after_the_one_connection_nothing_listens() {
        let (b, _browser_reads, _browser_writes) = bridged().await;
        let (_ws, _) = async_tungstenite::tokio::connect_async(&b.url)
            .await
            .unwrap();
        let port = b.url.trim_start_matches("ws://127.0.0.1:");
        let port: u16 = port[..port.find('/').unwrap()].parse().unwrap();
        // The listener is dropped right after the handshake; give the relay task a moment.
        let mut refused = false;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            refused,
            "the bridge still accepts connections on port {port}"
        );
    }
}
