//! A throwaway PostgreSQL cluster for tests and benchmarks: Debian's server, initialised in a
//! temporary directory, listening on a Unix socket only (no port to collide on), and gone when
//! the process that started it is. Shared by the store's tests, the integration suites and the
//! load scripts, so each suite tests against a real server rather than a stand-in.
//!
//! PostgreSQL refuses to run as root; run as root, the cluster belongs to `nobody` (or
//! `TOOLWARDEN_PG_USER`), and the test process (root) connects through the socket.
//!
//! Built for this crate's tests and, with the `testing` feature, for other crates' tests: it
//! starts Debian's server binaries directly (not through the sandbox) and panics with what to
//! do when they are missing, as a test should.
#![allow(clippy::disallowed_methods, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The name of the cluster's superuser (trust authentication on its socket).
const SUPERUSER: &str = "toolwarden";
/// How long a cluster may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running cluster. Its server stops when the process that started it exits.
#[derive(Debug)]
pub struct PgCluster {
    root: PathBuf,
    databases: AtomicU32,
    /// How to start the server again after [`PgCluster::stop`].
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    settings: Vec<String>,
    /// The port (also the socket's name), and the certificate of a cluster that speaks TLS on
    /// 127.0.0.1.
    port: u16,
    tls_cert: Option<PathBuf>,
}

impl PgCluster {
    /// The process's shared cluster, started on first use. Panics (with what to do) when the
    /// host has no PostgreSQL server: a test of the team store must not pass without one.
    pub fn shared() -> &'static Self {
        static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
        CLUSTER.get_or_init(|| match Self::start(&[]) {
            Ok(c) => c,
            Err(e) => panic!("no PostgreSQL for the team store's tests: {e}"),
        })
    }

    /// Starts a new cluster with `settings` (`name=value`, passed to the server as `-c`).
    pub fn start(settings: &[&str]) -> Result<Self, String> {
        let bin = server_bin()?;
        sweep_stale();
        let root = std::env::temp_dir().join(format!(
            "toolwarden-pg-{}-{}",
            std::process::id(),
            next_serial()
        ));
        std::fs::create_dir_all(root.join("sock"))
            .map_err(|e| format!("{}: {e}", root.display()))?;
        std::fs::write(root.join("owner.pid"), std::process::id().to_string())
            .map_err(|e| format!("{}: {e}", root.display()))?;
        let owner = server_owner()?;
        if let Some((uid, gid)) = owner {
            for p in [root.clone(), root.join("sock"), root.join("owner.pid")] {
                std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", p.display()))?;
            }
        }
        let data = root.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args(["-U", SUPERUSER, "--auth=trust", "--no-sync", "-E", "UTF8"])
            .args(["--locale=C", "-D"])
            .arg(&data)
            .stdout(Stdio::null());
        let out = through_setpriv(&initdb, owner)
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", bin.join("initdb").display()))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let cluster = Self {
            root,
            databases: AtomicU32::new(0),
            bin,
            owner,
            settings: settings.iter().map(|s| (*s).to_owned()).collect(),
            port: 5432,
            tls_cert: None,
        };
        cluster.spawn_server()?;
        Ok(cluster)
    }

    /// Starts a cluster that also listens on 127.0.0.1, on a free port, with TLS only there: its
    /// certificate is a fresh self-signed one for `localhost` and 127.0.0.1 (made with Debian's
    /// `openssl`), which [`PgCluster::tls_url_of`] trusts.
    pub fn start_tls() -> Result<Self, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let certs = std::env::temp_dir().join(format!(
            "toolwarden-pg-tls-{}-{}",
            std::process::id(),
            next_serial()
        ));
        std::fs::create_dir_all(&certs).map_err(|e| format!("{}: {e}", certs.display()))?;
        std::fs::write(certs.join("owner.pid"), std::process::id().to_string())
            .map_err(|e| format!("{}: {e}", certs.display()))?;
        let (cert, key) = (certs.join("server.pem"), certs.join("server.key"));
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=localhost", "-addext"])
            .args(["subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .map_err(|e| format!("openssl: {e}; install it with ./scripts/setup"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        // The server reads its key only if the key is its own and nobody else's.
        if let Some((uid, gid)) = server_owner()? {
            std::os::unix::fs::chown(&key, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", key.display()))?;
        }
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", key.display()))?;
        let settings = [
            "listen_addresses=127.0.0.1".to_owned(),
            format!("port={port}"),
            "ssl=on".to_owned(),
            format!("ssl_cert_file={}", cert.display()),
            format!("ssl_key_file={}", key.display()),
        ];
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        let mut cluster = Self::start(&settings)?;
        cluster.port = port;
        cluster.tls_cert = Some(cert);
        Ok(cluster)
    }

    /// A URL of database `name` over TCP to 127.0.0.1 that insists on TLS and checks the server's
    /// certificate against `root_cert` (`sslmode=verify-full`); `None` unless the cluster was
    /// started with [`PgCluster::start_tls`].
    pub fn tls_url_of(&self, name: &str, root_cert: &Path) -> Option<String> {
        self.tls_cert.as_ref()?;
        Some(format!(
            "postgres://{SUPERUSER}@localhost:{}/{name}?sslmode=verify-full&sslrootcert={}",
            self.port,
            root_cert.display()
        ))
    }

    /// The certificate of a cluster started with [`PgCluster::start_tls`].
    pub fn tls_cert(&self) -> Option<&Path> {
        self.tls_cert.as_deref()
    }

    /// Starts the server (again) and waits until it is ready.
    fn spawn_server(&self) -> Result<(), String> {
        let (root, bin) = (&self.root, &self.bin);
        let data = root.join("data");
        let mut server = Command::new(bin.join("postgres"));
        server
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(root.join("sock"))
            .args(["-c", "listen_addresses=", "-c", "max_connections=300"])
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]));
        let mut server = through_setpriv(&server, self.owner);
        server.stdin(Stdio::null()).stdout(Stdio::null()).stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join("server.log"))
                .map_err(|e| format!("{}: {e}", root.display()))?,
        );
        // The server goes when the thread that started it does: a thread that lives as long as
        // the process starts it, so it outlives every test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("postgres".to_owned())
            .spawn(move || {
                let spawned = server.spawn();
                let ok = spawned.is_ok();
                let _ = tx.send(spawned.map(|_| ()));
                if ok {
                    loop {
                        std::thread::park();
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        rx.recv()
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{}: {e}", bin.join("postgres").display()))?;
        wait_ready(root)
    }

    /// Stops the server (a fast shutdown: connections are cut) and waits until it is gone, so a
    /// test can see what its clients do while the database is unreachable.
    pub fn stop(&self) -> Result<(), String> {
        let pid_file = self.root.join("data/postmaster.pid");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .map_err(|e| format!("{}: {e}", pid_file.display()))?
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or("postmaster.pid names no process")?;
        let pid = rustix::process::Pid::from_raw(pid).ok_or("postmaster.pid names pid 0")?;
        rustix::process::kill_process(pid, rustix::process::Signal::INT)
            .map_err(|e| format!("stopping the server: {e}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        while pid_file.exists() {
            if Instant::now() > deadline {
                return Err("the server did not stop".to_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Starts a stopped server again.
    pub fn restart(&self) -> Result<(), String> {
        self.spawn_server()
    }

    /// A URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// A URL of database `name` on this cluster.
    pub fn url_of(&self, name: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost:{}/{name}?host={}",
            self.port,
            self.root.join("sock").display()
        )
    }

    /// Creates an empty database of its own for one test and returns its URL.
    pub async fn fresh_database(&self) -> String {
        use sqlx::Connection as _;
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.databases.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = sqlx::PgConnection::connect(&self.url())
            .await
            .unwrap_or_else(|e| panic!("connecting to the test cluster: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        self.url_of(&name)
    }

    /// The cluster's directory (its data, socket and server log).
    pub fn dir(&self) -> &Path {
        &self.root
    }
}

/// Debian's server binaries: the newest `/usr/lib/postgresql/<version>/bin` with a server.
fn server_bin() -> Result<PathBuf, String> {
    let base = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(base)
        .map_err(|e| format!("{}: {e}; install it with ./scripts/setup", base.display()))?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        format!(
            "no PostgreSQL server under {}; install it with ./scripts/setup",
            base.display()
        )
    })
}

/// Who the server runs as: this process's user, or when that is root, `TOOLWARDEN_PG_USER`
/// (default `nobody`).
fn server_owner() -> Result<Option<(u32, u32)>, String> {
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let user = std::env::var("TOOLWARDEN_PG_USER").unwrap_or_else(|_| "nobody".to_owned());
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| e.to_string())?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == user)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .map(Some)
        .ok_or_else(|| format!("no user {user:?} to run PostgreSQL as (TOOLWARDEN_PG_USER)"))
}

/// `cmd` run through `setpriv`: as the cluster's owner when that is not this user, and with the
/// parent-death signal set after the user change (which would clear it), so the server goes
/// with the thread that started it.
fn through_setpriv(cmd: &Command, owner: Option<(u32, u32)>) -> Command {
    let mut wrapped = Command::new("setpriv");
    wrapped.arg("--pdeathsig=TERM");
    if let Some((uid, gid)) = owner {
        wrapped.args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".to_owned(),
        ]);
    }
    wrapped
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    wrapped
}

fn next_serial() -> u32 {
    static SERIAL: AtomicU32 = AtomicU32::new(0);
    SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// Waits until the server says it is ready (`postmaster.pid`'s status line).
fn wait_ready(root: &Path) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let pid_file = root.join("data/postmaster.pid");
    loop {
        let status = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if status.lines().nth(7).is_some_and(|l| l.trim() == "ready") {
            return Ok(());
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(root.join("server.log")).unwrap_or_default();
            return Err(format!(
                "the server in {} did not start within {START_TIMEOUT:?}: {}",
                root.display(),
                log.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the clusters of test processes that have exited (their servers went with them).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("toolwarden-pg-") {
            continue;
        }
        let pid = std::fs::read_to_string(e.path().join("owner.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
        // A postmaster still running (its owner just exited) keeps its directory a moment more.
        let server_gone = !e.path().join("data/postmaster.pid").exists()
            || std::fs::read_to_string(e.path().join("data/postmaster.pid"))
                .ok()
                .and_then(|s| s.lines().next()?.trim().parse::<u32>().ok())
                .is_none_or(|p| !Path::new(&format!("/proc/{p}")).exists());
        if !alive && server_gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether the tests run against a team store: `TOOLWARDEN_TEST_STORE=postgres`, as in
/// scripts/test's second passes of the runtime's, the server's and the integration suites.
pub fn on_team_store() -> bool {
    std::env::var("TOOLWARDEN_TEST_STORE").as_deref() == Ok("postgres")
}

/// A fresh database on the shared cluster when the tests run against a team store
/// ([`on_team_store`]); `None` when they run on SQLite.
pub async fn suite_database() -> Option<String> {
    if on_team_store() {
        Some(PgCluster::shared().fresh_database().await)
    } else {
        None
    }
}
