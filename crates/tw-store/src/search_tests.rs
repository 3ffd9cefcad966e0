//! The audit log's text index: a search through it finds exactly what reading the log finds,
//! above and below the index's reach and across every window, and a damaged index file is
//! rebuilt without touching the log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::ToolStatus;

use crate::query;
use crate::tests::{ids, open, record};
use crate::{AuditQuery, Store, StoreOptions};

/// Row `i` of the test log: the shared sample's shape, with text that tests the corners of a
/// search (case, non-ASCII letters, LIKE's wildcards, quotes, text split across columns).
fn varied(i: i64) -> crate::AuditRecord {
    let statuses = [
        ToolStatus::Success,
        ToolStatus::Failed,
        ToolStatus::PermissionDenied,
        ToolStatus::Success,
    ];
    let tool = ["read_file", "write_file", "exec"][(i % 3) as usize];
    let mut r = record(i, tool, statuses[(i % 4) as usize]);
    let words = [
        "ENOSPC: no space left",
        "Grüße aus Köln",
        "100% done_now",
        "say \"hi\" back",
        "cargo test --workspace",
        "enospc lower",
        "abca cab",
    ];
    if r.output.is_some() {
        r.output = Some(json!({"text": words[(i % 7) as usize], "n": i}));
    }
    r.arguments = json!({"path": format!("file-{i}.txt"), "note": words[((i + 3) % 7) as usize]});
    r
}

/// Waits until the index has every record (the indexer runs in the background).
async fn wait_indexed(store: &Store) -> i64 {
    let started = Instant::now();
    loop {
        let s = store.text_index().await.unwrap().unwrap();
        if s.newest > 0 && s.indexed_to == s.newest {
            return s.indexed_to;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never indexed: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every row a query's pages give, walking its cursors, with the direct search's window and the
/// index's (none: the log is read directly), and how many pages that took.
async fn walk(
    store: &Store,
    mut q: AuditQuery,
    window: i64,
    index: Option<i64>,
) -> (Vec<i64>, usize) {
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page =
            query::page_in_windows(store.inner().settled().await.unwrap(), &q, window, index)
                .await
                .unwrap();
        let got = ids(&page);
        assert!(got.len() <= q.limit as usize, "{q:?}: {got:?}");
        if let Some(to) = page.scanned_to {
            assert_eq!(page.next_cursor, Some(to), "{q:?}");
        }
        seen.extend(&got);
        pages += 1;
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
        assert!(pages < 1000, "{q:?} does not end");
    }
    (seen, pages)
}

/// The rows a query matches, read from the log in one window.
async fn direct(store: &Store, q: &AuditQuery) -> Vec<i64> {
    let q = AuditQuery {
        limit: 1000,
        ..q.clone()
    };
    let page = query::page_in_windows(store.inner().settled().await.unwrap(), &q, i64::MAX, None)
        .await
        .unwrap();
    ids(&page)
}

/// The texts searched for. "KÖLN" and "abcab" are candidates the index lets through and the
/// check rules out: the index folds non-ASCII case and `LIKE` does not, and "abca cab" holds every
/// trigram of "abcab" but not the text.
const TEXTS: [&str; 14] = [
    "KÖLN",
    "abcab",
    "enospc",
    "ENOSPC: no",
    "grüße",
    "GRÜSSE",
    "Köln",
    "100%",
    "0% d",
    "_now",
    "\"hi\"",
    "file-1",
    "ab",
    "nowhere at all",
];

#[tokio::test]
async fn a_search_through_the_index_finds_what_reading_the_log_finds() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for i in 0..40 {
        store.append(varied(i)).await.unwrap();
    }
    assert_eq!(wait_indexed(&store).await, 40);
    // The index stops here: the next rows are above its reach and are read directly.
    store.inner().indexer.as_ref().unwrap().close().await;
    for i in 40..60 {
        store.append(varied(i)).await.unwrap();
    }
    let status = store.text_index().await.unwrap().unwrap();
    assert_eq!((status.indexed_to, status.newest), (40, 60));
    let filters: [&dyn Fn(&mut AuditQuery); 4] = [
        &|_| {},
        &|q| q.tool = Some("exec".into()),
        &|q| q.status = Some(ToolStatus::Success),
        &|q| q.until = Some(1_700_000_000_000_000 + 45 * 1_000_000),
    ];
    let mut found_any = 0;
    for text in TEXTS {
        for (f, filter) in filters.iter().enumerate() {
            let mut q = AuditQuery {
                text: Some(text.to_owned()),
                limit: 1000,
                ..AuditQuery::default()
            };
            filter(&mut q);
            let expected = direct(&store, &q).await;
            found_any += expected.len();
            let counted = query::count(store.inner().settled().await.unwrap(), &q, true)
                .await
                .unwrap();
            assert_eq!(counted, expected.len() as u64, "count {text:?}, filter {f}");
            for (window, index_window) in [(1, 1), (3, 2), (7, 5), (100, 100)] {
                for limit in [1, 3, 50] {
                    let q = AuditQuery { limit, ..q.clone() };
                    let (seen, _) = walk(&store, q, window, Some(index_window)).await;
                    assert_eq!(
                        seen, expected,
                        "{text:?}, filter {f}, windows {window}/{index_window}, limit {limit}"
                    );
                }
            }
        }
    }
    assert!(
        found_any > 100,
        "the texts match too little to test: {found_any}"
    );
    store.close().await;
}

#[tokio::test]
async fn a_search_below_the_direct_window_takes_one_page_through_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for i in 0..60 {
        store.append(varied(i)).await.unwrap();
    }
    wait_indexed(&store).await;
    // Rows 1 and 10 to 19 hold "file-1"; reading the log 4 ids at a time takes many pages to
    // reach them, the index one.
    let q = AuditQuery {
        text: Some("file-1".into()),
        ..AuditQuery::default()
    };
    let (direct, direct_pages) = walk(&store, q.clone(), 4, None).await;
    let (indexed, indexed_pages) = walk(&store, q, 4, Some(4096)).await;
    assert_eq!(indexed, direct);
    assert_eq!(indexed.len(), 11);
    assert_eq!(indexed_pages, 1);
    assert!(direct_pages > 5, "{direct_pages}");
    store.close().await;
}

/// Something done to an index file.
type Damage = &'static dyn Fn(&std::path::Path);

#[tokio::test]
async fn a_damaged_or_older_index_file_is_rebuilt_and_the_log_is_untouched() {
    let damage: [(&str, Damage); 2] = [
        ("not a database", &|index| {
            std::fs::write(
                index,
                b"not a database at all, and long enough to look like one",
            )
            .unwrap();
        }),
        ("another format", &|index| {
            let conn = rusqlite::Connection::open(index).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }),
    ];
    for (what, damage) in damage {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        for i in 0..20 {
            store.append(varied(i)).await.unwrap();
        }
        wait_indexed(&store).await;
        store.close().await;
        let index = dir.path().join("tw.db.search");
        damage(&index);
        let store = open(&dir).await;
        assert_eq!(wait_indexed(&store).await, 20, "{what}");
        let q = AuditQuery {
            text: Some("Köln".into()),
            ..AuditQuery::default()
        };
        let page = store.query(&q).await.unwrap();
        assert_eq!(ids(&page), direct(&store, &q).await, "{what}");
        assert_eq!(ids(&page), vec![20, 16, 13, 9, 6], "{what}");
        assert_eq!(store.count(&AuditQuery::default()).await.unwrap(), 20);
        store.close().await;
        let version: i64 = rusqlite::Connection::open(&index)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 1, "{what}");
    }
}

#[tokio::test]
async fn a_store_without_the_index_searches_the_log_and_makes_no_index_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = StoreOptions::new(dir.path().join("tw.db"));
    options.text_index = false;
    let store = Store::open(options).await.unwrap();
    for i in 0..20 {
        store.append(varied(i)).await.unwrap();
    }
    assert_eq!(store.text_index().await.unwrap(), None);
    let q = AuditQuery {
        text: Some("Köln".into()),
        ..AuditQuery::default()
    };
    assert_eq!(ids(&store.query(&q).await.unwrap()), vec![20, 16, 13, 9, 6]);
    assert!(!dir.path().join("tw.db.search").exists());
    store.close().await;
}

#[tokio::test]
async fn a_store_whose_index_cannot_be_made_opens_and_searches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the index file would go: it can be neither removed nor opened.
    std::fs::create_dir(dir.path().join("tw.db.search")).unwrap();
    std::fs::write(dir.path().join("tw.db.search").join("keep"), b"x").unwrap();
    let store = open(&dir).await;
    for i in 0..20 {
        store.append(varied(i)).await.unwrap();
    }
    assert_eq!(store.text_index().await.unwrap(), None);
    let q = AuditQuery {
        text: Some("Köln".into()),
        ..AuditQuery::default()
    };
    assert_eq!(ids(&store.query(&q).await.unwrap()), vec![20, 16, 13, 9, 6]);
    assert_eq!(store.count(&q).await.unwrap(), 5);
    store.close().await;
}
