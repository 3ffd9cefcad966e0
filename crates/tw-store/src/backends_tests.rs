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
