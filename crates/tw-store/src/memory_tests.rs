//! Agents' memory on both backends: namespaces kept apart, quotas that hold under a race and
//! change nothing when a write does not fit, expiry, and search that ranks, filters by tag and
//! key prefix, and reads no query syntax from what an agent types.

use serde_json::{Value, json};

use super::*;
use crate::backends_tests::Place;

const T0: i64 = 1_700_000_000_000_000;
const SECOND: i64 = 1_000_000;

/// A quota no test here reaches.
pub(crate) const ROOMY: MemoryQuota = MemoryQuota {
    max_entries: 1_000,
    max_bytes: 1 << 20,
};

pub(crate) fn scope(agent: &str, skill: &str) -> MemoryScope {
    MemoryScope {
        agent: agent.into(),
        skill: skill.into(),
    }
}

pub(crate) fn entry(key: &str, value: Value) -> NewMemory {
    NewMemory {
        key: key.into(),
        value,
        tags: Vec::new(),
        expires_at: None,
    }
}

fn tagged(key: &str, value: Value, tags: &[&str]) -> NewMemory {
    NewMemory {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        ..entry(key, value)
    }
}

fn search(query: Option<&str>) -> MemorySearch {
    MemorySearch {
        query: query.map(str::to_owned),
        limit: 10,
        ..MemorySearch::default()
    }
}

fn keys(found: &[MemoryEntry]) -> Vec<&str> {
    found.iter().map(|e| e.key.as_str()).collect()
}

on_both! {
    #[tokio::test]
    async fn an_entry_is_kept_per_agent_and_skill_and_replaced_in_place(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        let value = json!({"theme": "dark", "font": 14});
        let out = s.memory_put(&a, &entry("prefs", value.clone()), ROOMY, T0).await.unwrap();
        // 5 bytes of key, 26 of JSON: `{"font":14,"theme":"dark"}`.
        assert_eq!(out, PutOutcome::Stored { created: true, entries: 1, bytes: 31 });

        let got = s.memory_get(&a, "prefs", T0).await.unwrap().unwrap();
        assert_eq!((got.value, got.created_at, got.updated_at), (value, T0, T0));
        // Another agent, and the same agent under a skill, have namespaces of their own.
        assert_eq!(s.memory_get(&scope("agent-b", ""), "prefs", T0).await.unwrap(), None);
        assert_eq!(s.memory_get(&scope("agent-a", "triage"), "prefs", T0).await.unwrap(), None);

        let out = s
            .memory_put(&a, &tagged("prefs", json!("light"), &["ui"]), ROOMY, T0 + SECOND)
            .await
            .unwrap();
        // The key, `"light"` and the tag with its separator.
        assert_eq!(out, PutOutcome::Stored { created: false, entries: 1, bytes: 15 });
        let got = s.memory_get(&a, "prefs", T0 + SECOND).await.unwrap().unwrap();
        assert_eq!(
            (got.value, got.tags, got.created_at, got.updated_at),
            (json!("light"), vec!["ui".to_owned()], T0, T0 + SECOND)
        );

        assert!(s.memory_delete(&a, "prefs", T0 + 2 * SECOND).await.unwrap());
        assert!(!s.memory_delete(&a, "prefs", T0 + 2 * SECOND).await.unwrap());
        assert_eq!(s.memory_get(&a, "prefs", T0).await.unwrap(), None);
        assert_eq!(s.memory_usage(&a, T0).await.unwrap(), (0, 0));
    }
}

on_both! {
    #[tokio::test]
    async fn a_write_over_a_quota_is_refused_and_changes_nothing(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        let quota = MemoryQuota { max_entries: 2, max_bytes: 100 };
        for k in ["one", "two"] {
            s.memory_put(&a, &entry(k, json!("x")), quota, T0).await.unwrap();
        }
        let out = s.memory_put(&a, &entry("three", json!("x")), quota, T0).await.unwrap();
        assert_eq!(out, PutOutcome::OverQuota { quota: QuotaKind::Entries, limit: 2, needed: 3 });
        assert_eq!(s.memory_get(&a, "three", T0).await.unwrap(), None);

        // Replacing a key counts its new size only; one that would not fit leaves the old value.
        let big = json!("y".repeat(95));
        let out = s.memory_put(&a, &entry("two", big), quota, T0).await.unwrap();
        assert_eq!(out, PutOutcome::OverQuota { quota: QuotaKind::Bytes, limit: 100, needed: 106 });
        assert_eq!(s.memory_get(&a, "two", T0).await.unwrap().unwrap().value, json!("x"));
        let fits = json!("y".repeat(88));
        let out = s.memory_put(&a, &entry("two", fits), quota, T0).await.unwrap();
        assert_eq!(out, PutOutcome::Stored { created: false, entries: 2, bytes: 99 });
        assert_eq!(s.memory_usage(&a, T0).await.unwrap(), (2, 99));
        // Another namespace has its own quota.
        let out = s.memory_put(&scope("agent-b", ""), &entry("three", json!("x")), quota, T0).await;
        assert!(matches!(out.unwrap(), PutOutcome::Stored { created: true, .. }));
    }
}

on_both! {
    #[tokio::test]
    async fn writers_racing_for_the_last_slots_never_overfill_a_namespace(b: Backend) {
        let place = Place::new(b).await;
        // Two stores: two processes on one file, or two replicas of a team store.
        let (s1, s2) = (place.open().await, place.open().await);
        let a = scope("agent-a", "");
        let quota = MemoryQuota { max_entries: 5, max_bytes: 1 << 20 };
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let (s, a) = (if i % 2 == 0 { s1.clone() } else { s2.clone() }, a.clone());
            tasks.spawn(async move {
                s.memory_put(&a, &entry(&format!("k{i}"), json!(i)), quota, T0).await.unwrap()
            });
        }
        let mut stored = 0;
        while let Some(out) = tasks.join_next().await {
            if matches!(out.unwrap(), PutOutcome::Stored { .. }) {
                stored += 1;
            }
        }
        assert_eq!(stored, 5);
        assert_eq!(s1.memory_usage(&a, T0).await.unwrap().0, 5);
    }
}

on_both! {
    #[tokio::test]
    async fn an_expired_entry_is_gone_for_reads_and_removed_by_the_next_write(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        let quota = MemoryQuota { max_entries: 1, max_bytes: 1 << 20 };
        let brief = NewMemory { expires_at: Some(T0 + 10 * SECOND), ..entry("otp", json!("482913 code")) };
        s.memory_put(&a, &brief, quota, T0).await.unwrap();
        let before = T0 + 9 * SECOND;
        assert!(s.memory_get(&a, "otp", before).await.unwrap().is_some());
        assert_eq!(keys(&s.memory_search(&a, &search(Some("code")), before).await.unwrap()), ["otp"]);

        let after = T0 + 10 * SECOND;
        assert_eq!(s.memory_get(&a, "otp", after).await.unwrap(), None);
        assert!(s.memory_search(&a, &search(Some("code")), after).await.unwrap().is_empty());
        assert_eq!(s.memory_usage(&a, after).await.unwrap(), (0, 0));
        // It no longer counts: the quota of one entry has room, and the row is gone.
        let out = s.memory_put(&scope("agent-b", ""), &entry("x", json!(1)), quota, after).await;
        assert!(matches!(out.unwrap(), PutOutcome::Stored { .. }));
        assert_eq!(place.scalar("SELECT COUNT(*) FROM memory WHERE key = $1", "otp").await, 0);
        let out = s.memory_put(&a, &entry("otp", json!("new")), quota, after).await.unwrap();
        assert!(matches!(out, PutOutcome::Stored { created: true, entries: 1, .. }));
    }
}

on_both! {
    #[tokio::test]
    async fn search_ranks_by_the_words_found_and_filters_by_tag_and_prefix(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        let notes = [
            tagged("project/build", json!("The build uses sccache and mold to link"), &["build", "ci_cd"]),
            tagged("project/tests", json!({"runner": "nextest", "note": "tests need PostgreSQL"}), &["ci_cd"]),
            tagged("Project/db", json!("PostgreSQL 17 on port 5433, build with sccache"), &["cixcd"]),
            tagged("people/alice", json!("Alice reviews the database migrations"), &[]),
        ];
        for (i, n) in notes.iter().enumerate() {
            s.memory_put(&a, n, ROOMY, T0 + i as i64).await.unwrap();
        }
        s.memory_put(&scope("agent-b", ""), &entry("other", json!("sccache")), ROOMY, T0).await.unwrap();

        // Entries with both words first; object values are searched by their strings and keys.
        let found = s.memory_search(&a, &search(Some("sccache build")), T0).await.unwrap();
        assert_eq!(keys(&found), ["project/build", "Project/db"]);
        assert!(found[0].score.unwrap() > 0.0);
        assert!(found[0].snippet.as_deref().unwrap().contains("[sccache]"), "{found:?}");
        let found = s.memory_search(&a, &search(Some("NEXTEST runner")), T0).await.unwrap();
        assert_eq!(keys(&found), ["project/tests"]);

        // A tag matches whole (`_` is not a wildcard), every tag given must be there.
        let q = MemorySearch { tags: vec!["ci_cd".into()], ..search(None) };
        assert_eq!(keys(&s.memory_search(&a, &q, T0).await.unwrap()), ["project/tests", "project/build"]);
        let q = MemorySearch { tags: vec!["ci_cd".into(), "build".into()], ..search(Some("sccache")) };
        assert_eq!(keys(&s.memory_search(&a, &q, T0).await.unwrap()), ["project/build"]);
        // A key prefix is case-sensitive and literal.
        let q = MemorySearch { prefix: Some("project/".into()), ..search(None) };
        assert_eq!(keys(&s.memory_search(&a, &q, T0).await.unwrap()), ["project/tests", "project/build"]);
        let q = MemorySearch { prefix: Some("p%".into()), ..search(None) };
        assert!(s.memory_search(&a, &q, T0).await.unwrap().is_empty());
        // Without words: the most recent first, up to the limit.
        let q = MemorySearch { limit: 2, ..search(Some("  ")) };
        assert_eq!(keys(&s.memory_search(&a, &q, T0).await.unwrap()), ["people/alice", "Project/db"]);
    }
}

on_both! {
    #[tokio::test]
    async fn what_an_agent_types_is_words_never_query_syntax(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        s.memory_put(&a, &entry("k", json!("near the \"quoted\" OR plain text")), ROOMY, T0).await.unwrap();
        for q in ["\"", "NEAR(quoted", "text*", "-plain", "OR", "a AND", "col:text", "!!! & | ()", "'; DROP TABLE memory; --"] {
            let found = s.memory_search(&a, &search(Some(q)), T0).await;
            assert!(found.is_ok(), "{q:?}: {found:?}");
        }
        let found = s.memory_search(&a, &search(Some("NEAR(quoted")), T0).await.unwrap();
        assert_eq!(keys(&found), ["k"]);
        assert_eq!(place.scalar("SELECT COUNT(*) FROM memory WHERE key = $1", "k").await, 1);
    }
}

on_both! {
    #[tokio::test]
    async fn a_key_or_tag_the_schema_would_refuse_is_refused_before_writing(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let a = scope("agent-a", "");
        let long = "k".repeat(257);
        for bad in [entry("", json!(1)), entry(&long, json!(1)), tagged("k", json!(1), &["Two words"])] {
            let err = s.memory_put(&a, &bad, ROOMY, T0).await.unwrap_err();
            assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
        }
        assert_eq!(s.memory_usage(&a, T0).await.unwrap(), (0, 0));
    }
}
