//! Agents' tokens against a real SQLite file: only hashes are kept, revoking is per agent and
//! logged with the change, and a revoked token no longer names anyone.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::backends_tests::Place;
use crate::tests::{open, raw};

const T0: i64 = 1_700_000_000_000_000;

fn event(kind: &str, summary: &str) -> AdminEvent {
    AdminEvent {
        at: T0,
        actor: "ana".into(),
        kind: kind.into(),
        summary: summary.into(),
        details: json!({}),
    }
}

fn token(agent: &str, sha: char) -> NewApiToken {
    NewApiToken {
        agent_id: agent.into(),
        token_sha256: sha.to_string().repeat(64),
        label: Some("ci".into()),
        at: T0,
        by: "ana".into(),
    }
}

on_both! {
#[tokio::test]
async fn tokens_are_issued_looked_up_by_hash_and_revoked_per_agent(backend: Backend) {
        let dir = Place::new(backend).await;
        let store = dir.open().await;
        let issued = store
            .issue_api_token(&token("ci-bot", 'a'), &event("api_token_issued", "a"))
            .await
            .unwrap();
        assert_eq!(
            (issued.agent_id.as_str(), issued.fingerprint.as_str()),
            ("ci-bot", "aaaaaaaa")
        );
        store
            .issue_api_token(&token("ci-bot", 'b'), &event("api_token_issued", "b"))
            .await
            .unwrap();
        store
            .issue_api_token(&token("docs-bot", 'c'), &event("api_token_issued", "c"))
            .await
            .unwrap();
        assert_eq!(
            store.api_token_agent(&"a".repeat(64)).await.unwrap(),
            Some("ci-bot".into())
        );
        assert_eq!(store.api_token_agent(&"d".repeat(64)).await.unwrap(), None);

        let revoked = store
            .revoke_api_tokens("ci-bot", T0 + 1, "ana", &event("api_token_revoked", "r"))
            .await
            .unwrap();
        assert_eq!(revoked.len(), 2);
        assert_eq!(store.api_token_agent(&"a".repeat(64)).await.unwrap(), None);
        assert_eq!(store.api_token_agent(&"b".repeat(64)).await.unwrap(), None);
        assert_eq!(
            store.api_token_agent(&"c".repeat(64)).await.unwrap(),
            Some("docs-bot".into())
        );
        // Nothing left to revoke: no change, no entry.
        let again = store
            .revoke_api_tokens("ci-bot", T0 + 2, "ana", &event("api_token_revoked", "r2"))
            .await
            .unwrap();
        assert!(again.is_empty());
        let live: Vec<_> = store
            .api_tokens(false)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.agent_id)
            .collect();
        assert_eq!(live, ["docs-bot"]);
        assert_eq!(store.api_tokens(true).await.unwrap().len(), 3);
        let kinds: Vec<String> = store
            .admin_events(&AdminQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.summary)
            .collect();
        assert_eq!(kinds, ["r", "c", "b", "a"]);
}
}

#[tokio::test]
async fn the_schema_refuses_a_token_that_is_not_a_hash_and_a_reused_hash() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut plain = token("ci-bot", 'a');
    plain.token_sha256 = "hunter2".into();
    assert!(
        store
            .issue_api_token(&plain, &event("api_token_issued", "x"))
            .await
            .is_err()
    );
    store
        .issue_api_token(&token("ci-bot", 'a'), &event("api_token_issued", "a"))
        .await
        .unwrap();
    assert!(
        store
            .issue_api_token(&token("other", 'a'), &event("api_token_issued", "y"))
            .await
            .is_err()
    );
    // The failed issues left no admin-log entries behind.
    assert_eq!(
        store
            .admin_events(&AdminQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    let pool = raw(&dir).await;
    let stored: Vec<String> = sqlx::query_scalar("SELECT token_sha256 FROM api_tokens")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(stored, ["a".repeat(64)]);
}
