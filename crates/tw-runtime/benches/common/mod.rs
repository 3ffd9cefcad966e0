//! A local HTTP/1.1 server the network benches fetch from (`net`, `chain`): one fixed response
//! to every request of every keep-alive connection, sent at once or after a delay.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `response` (a whole HTTP response, head and body) on 127.0.0.1, `delay` after each
/// request came in; returns the port.
pub(crate) async fn serve(response: Vec<u8>, delay: Duration) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let response = Arc::new(response);
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let response = Arc::clone(&response);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                loop {
                    let n = match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        if socket.write_all(&response).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}
