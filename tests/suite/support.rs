//! Test harness: a throwaway Toolwarden installation (data dir, workspace, an "outside" directory
//! holding a secret) and a `TestCommand` that runs the real `toolwarden` binary against it.
//!
//! The binary is found next to this test executable (`target/<profile>/toolwarden`), or at
//! `$TOOLWARDEN_BIN`. `scripts/test` builds it before running the tests.
#![allow(clippy::disallowed_methods)] // the harness spawns the binary under test

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// The text of the secret file outside the workspace; no escape attempt may ever print it.
pub const SECRET: &str = "TOP-SECRET-6d1f0c";

pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLWARDEN_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let bin = dir.join("toolwarden");
    assert!(
        bin.is_file(),
        "{} does not exist: build it first with `cargo build -p tw-cli` (scripts/test does)",
        bin.display()
    );
    bin
}

/// A fresh installation. It runs the teams tier (which includes custom tools) unless a config
/// names another, since most tests register custom tools.
pub struct Env {
    pub root: tempfile::TempDir,
    pub data: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub config: Option<PathBuf>,
    /// The team store every command uses, when the suite runs against PostgreSQL.
    pub store_url: Option<String>,
}

/// Whether the suite runs against a team store: `TOOLWARDEN_TEST_STORE=postgres` (scripts/test's
/// second pass) gives each installation a fresh database on the throwaway PostgreSQL cluster
/// (`tw_store::testing`) instead of its data directory's SQLite file.
pub fn on_team_store() -> bool {
    tw_store::testing::on_team_store()
}

impl Env {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        let ws = root.path().join("ws");
        let outside = root.path().join("outside");
        for d in [&ws, &outside] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(outside.join("secret.txt"), SECRET).expect("write secret");
        let store_url = block_on(tw_store::testing::suite_database());
        Self {
            root,
            data,
            ws,
            outside,
            config: None,
            store_url,
        }
        .with_config("")
    }

    /// Writes a config file and uses it for every later command (with `license_tier = "teams"`
    /// first unless the text sets a tier).
    pub fn with_config(mut self, text: &str) -> Self {
        let path = self.root.path().join("config.toml");
        let text = if text.contains("license_tier") {
            text.to_owned()
        } else {
            format!("license_tier = \"teams\"\n{text}")
        };
        std::fs::write(&path, text).expect("write config");
        self.config = Some(path);
        self
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.ws.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        p
    }

    pub fn db(&self) -> PathBuf {
        self.data.join("toolwarden.db")
    }

    pub fn cmd(&self, args: &[&str]) -> TestCommand {
        let mut c = Command::new(binary());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("USER", "tester");
        if let Some(url) = &self.store_url {
            c.env("TOOLWARDEN_STORE_URL", url);
        }
        c.arg("--data-dir")
            .arg(&self.data)
            .arg("--workspace")
            .arg(&self.ws);
        if let Some(cfg) = &self.config {
            c.arg("--config").arg(cfg);
        }
        c.args(args);
        TestCommand { cmd: c }
    }

    /// Runs `call TOOL --args ARGS --no-wait` and returns the parsed result: a call that needs
    /// a person's approval ends at once as requires_confirmation.
    pub fn call(&self, tool: &str, args: Value) -> Run {
        self.cmd(&["call", tool, "--args", &args.to_string(), "--no-wait"])
            .run()
    }

    /// Every audit row, oldest first, read straight from the store (the SQLite file, or the
    /// team store).
    pub fn audit_rows(&self) -> Vec<tw_store::AuditRow> {
        let mut options = tw_store::StoreOptions::new(self.db());
        options.url = self.store_url.clone();
        block_on(async move {
            let store = tw_store::Store::open(options)
                .await
                .expect("open audit store");
            let mut rows = Vec::new();
            let mut q = tw_store::AuditQuery {
                limit: 1000,
                ..Default::default()
            };
            loop {
                let page = store.query(&q).await.expect("query");
                rows.extend(page.rows);
                match page.next_cursor {
                    Some(c) => q.cursor = Some(c),
                    None => break,
                }
            }
            store.close().await;
            rows.reverse();
            rows
        })
    }

    pub fn secret_path(&self) -> String {
        self.outside.join("secret.txt").display().to_string()
    }
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

pub struct TestCommand {
    pub cmd: Command,
}

impl TestCommand {
    pub fn run(mut self) -> Run {
        let out = self
            .cmd
            .stdin(Stdio::null())
            .output()
            .expect("run toolwarden");
        Run::from(out)
    }

    pub fn spawn(mut self) -> std::process::Child {
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolwarden")
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn status(&self) -> String {
        self.json()["status"].as_str().unwrap_or("").to_owned()
    }

    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Exit code, status and error code of a call, compared as one so a failure shows all three
/// (and the whole output).
pub fn check_status(run: &Run, code: i32, status: &str, error_code: Option<&str>) {
    assert_eq!(
        (
            run.code,
            run.status(),
            run.json()["error"]["code"].as_str().map(str::to_owned)
        ),
        (code, status.to_owned(), error_code.map(str::to_owned)),
        "stdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
}

/// Whether the tests run as root (CI runs them as root and again as an unprivileged user).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .expect("read /proc/self/status")
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Says that part of a test did not run and why, on the real standard error: the test harness
/// captures `eprintln!` of passing tests, and a skip must never be silent.
pub fn skip(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// A server on 127.0.0.1 answering `/ok` with a page, `/big` with 6 MiB, and each path `routes`
/// makes (given the server's port) with a redirect to its location.
pub struct Server {
    /// Where it listens on 127.0.0.1.
    pub port: u16,
    /// Connections it accepted.
    pub hits: Arc<AtomicUsize>,
}

pub fn serve(routes: impl FnOnce(u16) -> Vec<(String, String)>) -> Server {
    serve_with(move |port| {
        let redirects = routes(port);
        move |path: &str| match path {
            "/ok" => Answer::page(200, "text/html", b"<h1>fine</h1>".to_vec()),
            "/big" => Answer::page(200, "text/html", vec![b'x'; 6 << 20]),
            _ => match redirects.iter().find(|(p, _)| *p == path) {
                Some((_, to)) => Answer {
                    location: Some(to.clone()),
                    ..Answer::page(302, "text/html", Vec::new())
                },
                None => Answer::page(404, "text/html", b"no".to_vec()),
            },
        }
    })
}

/// What a test server answers one request with.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub location: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn page(status: u16, content_type: &'static str, body: Vec<u8>) -> Self {
        Self {
            status,
            content_type,
            location: None,
            body,
        }
    }
}

/// A server on 127.0.0.1 answering each request by its path (query included) with what
/// `answers` (given the server's port) makes of it; one request per connection.
pub fn serve_with<F>(answers: impl FnOnce(u16) -> F) -> Server
where
    F: Fn(&str) -> Answer + Send + 'static,
{
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = answers(port);
    let hits = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let path = text.split(' ').nth(1).unwrap_or("/");
            let a = answer(path);
            let mut out = format!(
                "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                a.status,
                a.content_type,
                a.body.len()
            );
            if let Some(to) = a.location {
                out.push_str(&format!("location: {to}\r\n"));
            }
            out.push_str("\r\n");
            let _ = stream.write_all(out.as_bytes());
            let _ = stream.write_all(&a.body);
        }
    });
    Server { port, hits }
}
