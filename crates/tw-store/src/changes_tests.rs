//! The change counters and the atomic custom-tool replacement, on a real SQLite file: every write
//! to a watched table moves its counter and only its counter (whichever process or connection
//! made it), and a replacement is all or nothing.

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use super::*;
use crate::backends_tests::Place;
use crate::tests::{open, raw, spec};

fn renamed(name: &str) -> ToolSpec {
    let mut s = spec("Count words");
    s.definition.name = tw_core::ToolName::new(name).unwrap();
    s
}

#[tokio::test]
async fn each_watched_table_moves_its_own_counter() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let start = store.change_counters().await.unwrap();
    assert_eq!(start.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut t = WATCHED_TABLES.to_vec();
        t.sort_unstable();
        t
    });
    assert!(start.values().all(|c| *c == 0), "{start:?}");

    store.set_setting("mode", "safe", "ana", 1).await.unwrap();
    store
        .save_custom_tool(&spec("Count words"), 2)
        .await
        .unwrap();
    // A write by another connection (another process, as far as SQLite knows) counts too.
    let pool = raw(&dir).await;
    sqlx::query("UPDATE settings SET value = 'normal' WHERE key = 'mode'")
        .execute(&pool)
        .await
        .unwrap();
    store.delete_custom_tool("word_count").await.unwrap();

    let now = store.change_counters().await.unwrap();
    let moved: BTreeMap<&str, i64> = now
        .iter()
        .filter(|(k, v)| start[*k] != **v)
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        moved,
        BTreeMap::from([("custom_tools", 2), ("settings", 2)])
    );
    store.close().await;
}

on_both! {
#[tokio::test]
async fn a_replacement_renames_in_one_step_and_keeps_the_tools_place(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        store.save_custom_tool(&renamed("first"), 10).await.unwrap();
        store
            .save_custom_tool(&renamed("second"), 20)
            .await
            .unwrap();
        store
            .replace_custom_tool("first", &renamed("renamed"), 30)
            .await
            .unwrap();
        let tools: Vec<(String, i64, i64)> = store
            .custom_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| (t.name, t.created_at, t.updated_at))
            .collect();
        assert_eq!(
            tools,
            vec![("renamed".into(), 10, 30), ("second".into(), 20, 20)]
        );

        // Taking another stored tool's name, or replacing one that is not stored, changes nothing.
        for (old, new) in [("renamed", "second"), ("missing", "other")] {
            let err = store
                .replace_custom_tool(old, &renamed(new), 40)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("invalid custom tool"), "{err}");
        }
        let names: Vec<String> = store
            .custom_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, vec!["renamed".to_owned(), "second".to_owned()]);
        store.close().await;
}
}
