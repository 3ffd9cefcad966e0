//! A tool with an egress port: its only way out is the listener handed to the port's owner.
//! Raw TCP to the host's loopback or the internet and UDP go nowhere; the test fails if the tool
//! reaches the host's server directly or its connection to the port is not the owner's.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use tokio::io::AsyncBufReadExt;

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::tests::{Summary, run, spec};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_with_an_egress_port_reaches_only_whoever_serves_it() {
    let dir = TempDir::new().unwrap();
    // A server on the host's loopback, which the tool must not reach directly.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_port = host.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    let port = EgressPort(Arc::new(move |l: std::net::TcpListener| {
        let _ = tx.send(l);
    }));
    let owner = std::thread::spawn(move || {
        let listener = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the listener is handed over");
        listener.set_nonblocking(false).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&conn).read_line(&mut line).unwrap();
        conn.write_all(format!("proxied {}\n", line.trim()).as_bytes())
            .unwrap();
    });
    let script = format!(
        r#"
import os, socket
print(os.environ["HTTPS_PROXY"], os.environ.get("NO_PROXY"), os.environ["NODE_USE_ENV_PROXY"])
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"hello\n")
print(s.makefile().readline().strip())
tries = [
    ("host loopback", lambda: socket.create_connection(("127.0.0.1", {host_port}), timeout=2)),
    ("internet", lambda: socket.create_connection(("1.1.1.1", 80), timeout=2)),
    ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53))),
    ("ipv6", lambda: socket.create_connection(("::1", {host_port}), timeout=2)),
]
for what, attempt in tries:
    try:
        attempt()
        print(what, "reached")
    except OSError:
        print(what, "failed")
"#
    );
    let mut s = spec(&dir, "python3", &["-c", &script]);
    s.isolation = IsolationLevel::Strict;
    s.env.insert("NO_PROXY".to_owned(), "*".to_owned());
    s.egress = Some(port);
    let outcome = run(s).await;
    owner.join().unwrap();
    assert_eq!(
        Summary::of(&outcome),
        Summary::exited(
            0,
            "http://127.0.0.1:3128 None 1\nproxied hello\nhost loopback failed\ninternet failed\n\
             udp failed\nipv6 failed\n",
            ""
        )
    );
    assert_eq!(
        host.accept().map(|_| ()).unwrap_err().kind(),
        io::ErrorKind::WouldBlock,
        "the tool reached the host's server directly"
    );
}

#[tokio::test]
async fn an_egress_port_needs_a_network_namespace_of_its_own() {
    let dir = TempDir::new().unwrap();
    let mut s = spec(&dir, "true", &[]);
    s.egress = Some(EgressPort(Arc::new(|_| {})));
    let e = Sandbox::new()
        .run(s, CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("an egress port needs strict or restricted isolation"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_lived_process_keeps_its_egress_port_for_as_long_as_it_runs() {
    let dir = TempDir::new().unwrap();
    // The owner answers every connection with what it was sent, for as long as the port lives.
    let port = EgressPort(Arc::new(move |l: std::net::TcpListener| {
        std::thread::spawn(move || {
            l.set_nonblocking(false).unwrap();
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut line = String::new();
                BufReader::new(&conn).read_line(&mut line).unwrap();
                let _ = conn.write_all(format!("proxied {}", line).as_bytes());
            }
        });
    }));
    // A server: each line it reads goes out through the port and the answer comes back; a
    // direct connection to the internet is tried too.
    let script = r#"
import socket, sys
for line in sys.stdin:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(line.encode())
    answer = s.makefile().readline().strip()
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        direct = "reached"
    except OSError:
        direct = "failed"
    print(answer, "direct", direct, flush=True)
"#;
    let mut s = spec(&dir, "python3", &["-c", script]);
    s.isolation = IsolationLevel::Strict;
    s.egress = Some(port);
    let sandbox = Sandbox::new();
    let mut server = sandbox.spawn_interactive(s).await.unwrap();
    let mut stdin = server.take_stdin().unwrap();
    let mut stdout = tokio::io::BufReader::new(server.take_stdout().unwrap());
    for word in ["one", "two"] {
        tokio::io::AsyncWriteExt::write_all(&mut stdin, format!("{word}\n").as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut line))
            .await
            .expect("an answer")
            .unwrap();
        assert_eq!(line, format!("proxied {word} direct failed\n"));
    }
    server.stop().await.unwrap();
}
