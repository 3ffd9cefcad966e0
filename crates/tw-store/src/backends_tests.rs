//! The store's tests on both backends: `on_both!` runs a test once against a SQLite file and
//! once against a fresh database on the throwaway PostgreSQL cluster (`testing`), so the shared
//! state's behaviour is one specification, not two copies.

use super::*;
use crate::testing::PgCluster;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// Where a test's stores live: a temporary directory (the SQLite file, and a team store's local
/// files) and, on PostgreSQL, a database of its own. Every store a test opens on one place
/// shares it, as processes share a data directory or replicas a team store.
#[derive(Debug)]
pub(crate) struct Place {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) url: Option<String>,
}

impl Place {
    pub(crate) async fn new(backend: Backend) -> Self {
        let url = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(PgCluster::shared().fresh_database().await),
        };
        Self {
            dir: tempfile::tempdir().unwrap(),
            url,
        }
    }

    pub(crate) fn options(&self) -> StoreOptions {
        let mut options = StoreOptions::new(self.dir.path().join("tw.db"));
        options.url = self.url.clone();
        options
    }

    /// Opens a store on this place (another process, or another replica).
    pub(crate) async fn open(&self) -> Store {
        Store::open(self.options()).await.unwrap()
    }
}

impl Place {
    /// One integer a statement with one text parameter (`$1`) reads, straight from the
    /// database (not through the store).
    pub(crate) async fn scalar(&self, sql: &'static str, arg: &str) -> i64 {
        match &self.url {
            None => {
                let pool = crate::tests::raw(&self.dir).await;
                let n = sqlx::query_scalar(sql)
                    .bind(arg)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                pool.close().await;
                n
            }
            Some(url) => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let n = sqlx::query_scalar(sql)
                    .bind(arg)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                pool.close().await;
                n
            }
        }
    }
}

/// Defines a test that runs on both backends, as `<name>::sqlite` and `<name>::postgres`.
macro_rules! on_both {
    ($(#[$attr:meta])* async fn $name:ident($b:ident: Backend) $body:block) => {
        mod $name {
            #[allow(unused_imports, clippy::allow_attributes)]
            use super::*;
            #[allow(unused_imports, clippy::allow_attributes)]
            use pretty_assertions::assert_eq;
            async fn run($b: $crate::backends_tests::Backend) $body
            $(#[$attr])*
            async fn sqlite() {
                run($crate::backends_tests::Backend::Sqlite).await
            }
            $(#[$attr])*
            async fn postgres() {
                run($crate::backends_tests::Backend::Postgres).await
            }
        }
    };
}
#[allow(unused_imports, clippy::allow_attributes)]
pub(crate) use on_both;

on_both! {
    #[tokio::test]
    async fn a_store_opens_migrated_and_appends_on_its_chain(backend: Backend) {
        let place = Place::new(backend).await;
        let store = place.open().await;
        assert_eq!(store.is_team_store(), backend == Backend::Postgres);
        let id = store
            .append(crate::tests::record(1, "echo", tw_core::ToolStatus::Success))
            .await
            .unwrap();
        let row = store.get("exec-00001").await.unwrap().unwrap();
        assert_eq!((row.id, row.tool.as_str()), (id, "echo"));
        // The first record of a chain links to the genesis hash.
        assert_eq!(row.prev.as_deref(), Some("0".repeat(64).as_str()));
        assert_eq!(row.hash.as_ref().map(String::len), Some(64));
        store.close().await;
    }
}

/// Waits for the next notice that is not a resync (the listener's first connect may announce
/// one).
async fn next_notice(rx: &mut tokio::sync::broadcast::Receiver<StoreNotice>) -> StoreNotice {
    loop {
        let notice = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .expect("no notice within 10 s")
            .expect("the notice feed ended");
        if notice != StoreNotice::Resync {
            return notice;
        }
    }
}

#[tokio::test]
async fn a_replica_hears_the_changes_and_answers_another_made_without_polling() {
    let place = Place::new(Backend::Postgres).await;
    let (a, b) = (place.open().await, place.open().await);
    let mut heard = a.notices().expect("a team store pushes its changes");
    // Listening starts in the background: a change made before it would not be heard.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    b.set_setting("mode", "lockdown", "alice", 1).await.unwrap();
    assert_eq!(
        next_notice(&mut heard).await,
        StoreNotice::Changed("settings".to_owned())
    );
    let t0 = 1_700_000_000_000_000;
    b.create_confirmation(crate::policy_tests::confirmation(
        "c-1",
        t0,
        t0 + 60_000_000,
    ))
    .await
    .unwrap();
    let answer = Resolution {
        approve: true,
        by: "bob".to_owned(),
        note: None,
        grant: None,
    };
    b.resolve_confirmation("c-1", answer, t0 + 1).await.unwrap();
    assert_eq!(
        next_notice(&mut heard).await,
        StoreNotice::ConfirmationSettled("c-1".to_owned())
    );
    // The embedded store has no feed: its processes look for changes themselves.
    let lite = Place::new(Backend::Sqlite).await.open().await;
    assert!(lite.notices().is_none());
    for s in [a, b, lite] {
        s.close().await;
    }
}

#[tokio::test]
async fn while_the_database_is_down_nothing_is_recorded_and_the_store_says_so_then_recovers() {
    let cluster = PgCluster::start(&[]).unwrap();
    let place = Place {
        dir: tempfile::tempdir().unwrap(),
        url: Some(cluster.fresh_database().await),
    };
    let store = place.open().await;
    let rec = |i| crate::tests::record(i, "echo", tw_core::ToolStatus::Success);
    store.append(rec(1)).await.unwrap();
    assert!(store.is_healthy());
    cluster.stop().unwrap();
    let err = store.append(rec(2)).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Unreachable { .. }),
        "{err:?}: the append must fail as unreachable"
    );
    assert!(err.to_string().contains("cannot be reached"), "{err}");
    assert!(
        !store.is_healthy(),
        "a store that cannot reach its database is not healthy"
    );
    let err = store.rate_acquire(&[], 0).await;
    assert!(err.is_ok(), "no limits to count needs no database");
    assert!(store.change_counters().await.is_err());
    cluster.restart().unwrap();
    // The store finds out by itself that the database is back, before anything is asked of it.
    let back = std::time::Instant::now();
    while !store.is_healthy() {
        assert!(
            back.elapsed() < std::time::Duration::from_secs(10),
            "the store did not notice the database came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The pool connects again by itself; the record refused before was never written.
    let mut tries = 0;
    let id = loop {
        match store.append(rec(3)).await {
            Ok(id) => break id,
            Err(e) if tries < 50 => {
                tries += 1;
                tracing::debug!(error = %e, "not back yet");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the store did not recover: {e}"),
        }
    };
    assert!(store.is_healthy());
    assert_eq!(store.get("exec-00003").await.unwrap().unwrap().id, id);
    assert_eq!(store.get("exec-00002").await.unwrap(), None);
    assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 2);
    store.close().await;
}

on_both! {
    #[tokio::test]
    async fn the_doctor_reports_the_schema_the_last_checkpoint_and_what_it_does_not_cover(backend: Backend) {
        let place = Place::new(backend).await;
        let store = place.open().await;
        let r = store.doctor().await.unwrap();
        assert!(r.ok(), "{r:?}");
        assert_eq!((r.newest_record, r.last_checkpoint), (0, None));
        for i in 1..=3 {
            store
                .append(crate::tests::record(i, "echo", tw_core::ToolStatus::Success))
                .await
                .unwrap();
        }
        let made = store.checkpoint().await.unwrap().unwrap();
        store
            .append(crate::tests::record(4, "echo", tw_core::ToolStatus::Success))
            .await
            .unwrap();
        let r = store.doctor().await.unwrap();
        assert_eq!(
            (r.schema_version, r.newest_record, r.unsigned_records),
            (r.build_schema_version, 4, 1)
        );
        // The checkpoint covers the records up to the third, not the newest.
        assert_eq!(r.last_checkpoint, Some((made.created_at, 3)));
        assert_eq!(r.public_key, Some(made.public_key));
        let expected = match backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgresql",
        };
        assert_eq!((r.backend.as_str(), r.journal_mode.as_str()), (expected, "wal"));
        store.close().await;
    }
}

#[tokio::test]
async fn replicas_hear_each_others_live_messages_in_order_and_see_who_watches() {
    let place = Place::new(Backend::Postgres).await;
    let (a, b) = (place.open().await, place.open().await);
    let (ca, cb) = (a.team_channel().unwrap(), b.team_channel().unwrap());
    assert!(
        Place::new(Backend::Sqlite)
            .await
            .open()
            .await
            .team_channel()
            .is_none(),
        "SQLite's processes watch each other through the data directory"
    );
    let mut heard = ca.subscribe();
    let sent: Vec<String> = (0..50).map(|i| format!("{{\"n\":{i}}}")).collect();
    cb.send(&sent).await.unwrap();
    cb.send(&["last".to_owned()]).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 51 {
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), heard.recv())
            .await
            .expect("a message within 10 s")
            .unwrap();
        got.push(m.to_string());
    }
    assert_eq!(got[..50], sent[..]);
    assert_eq!(got[50], "last");
    // Too long for NOTIFY: refused whole, and what came with it is not sent either.
    let long = "x".repeat(crate::MAX_LIVE_MESSAGE + 1);
    let err = cb.send(&["short".to_owned(), long]).await.unwrap_err();
    assert!(err.to_string().contains("at most 7900"), "{err}");
    cb.send(&["after".to_owned()]).await.unwrap();
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), heard.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&*next, "after");

    // Who watches: each replica sees the others' live rows, not its own or expired ones.
    assert_ne!(ca.replica(), cb.replica());
    let now = crate::checkpoint::now_us();
    ca.set_watching(Some(now + 15_000_000)).await.unwrap();
    assert_eq!(
        cb.watchers(now).await.unwrap(),
        vec![(ca.replica().to_owned(), now + 15_000_000)]
    );
    assert!(ca.watchers(now).await.unwrap().is_empty());
    assert!(
        cb.watchers(now + 16_000_000).await.unwrap().is_empty(),
        "expired"
    );
    ca.set_watching(None).await.unwrap();
    assert!(cb.watchers(now).await.unwrap().is_empty());
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_team_store_over_tls_checks_the_servers_certificate_and_refuses_one_it_does_not_trust() {
    let cluster = PgCluster::start_tls().unwrap();
    let cert = cluster.tls_cert().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions::new(dir.path().join("tw.db"));
    options.url = cluster.tls_url_of("postgres", &cert);
    let store = Store::open(options.clone()).await.unwrap();
    store
        .append(crate::tests::record(
            1,
            "echo",
            tw_core::ToolStatus::Success,
        ))
        .await
        .unwrap();
    store.close().await;
    // The connection is encrypted, not merely allowed to be.
    let pool = sqlx::PgPool::connect(options.url.as_deref().unwrap())
        .await
        .unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ssl);
    pool.close().await;
    // A server whose certificate the given roots do not vouch for (as a man in the middle's
    // would be) is refused, and the error says the store cannot be reached.
    options.url = cluster.tls_url_of("postgres", Path::new("/etc/ssl/certs/ca-certificates.crt"));
    let err = Store::open(options).await.unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(shown.contains("certificate"), "{shown}");
    cluster.stop().unwrap();
}

#[tokio::test]
async fn a_team_store_nobody_answers_for_says_why_not_only_that_it_waited() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions::new(dir.path().join("tw.db"));
    // Port 1 on loopback: nothing listens, the connection is refused.
    options.url = Some("postgres://toolwarden@127.0.0.1:1/toolwarden".to_owned());
    let err = Store::open(options).await.unwrap_err();
    let shown = err.to_string();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(shown.to_lowercase().contains("refused"), "{shown}");
}
