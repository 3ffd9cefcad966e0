//! The memory tools through the whole pipeline: allowed by the built-in policy, each agent's
//! entries its own, expiry by the runtime's clock, the config's quotas refusing a write that
//! does not fit without changing anything, bad input refused with its place, and an audit
//! record for every call.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::ToolStatus;

use super::net_tests::called as call;
use super::policy_tests::Install;
use super::*;
use crate::clock::Clock;

const T0: i64 = 1_750_000_000_000_000;

/// A clock the test moves.
#[derive(Default)]
struct Hands(AtomicI64);

impl Clock for Hands {
    fn now_us(&self) -> i64 {
        T0 + self.0.load(Ordering::SeqCst)
    }
}

async fn open(install: &Install, hands: &Arc<Hands>) -> Runtime {
    let path = install.path("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let config = Config::parse(&text, &path, None).unwrap();
    let mut options = RuntimeOptions::new(install.path("data"), vec![install.path("ws")], config);
    options.clock = Arc::clone(hands) as Arc<dyn Clock>;
    Runtime::open(options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_remembers_recalls_and_searches_its_own_memory_only() {
    let install = Install::new("");
    let hands = Arc::new(Hands::default());
    let rt = open(&install, &hands).await;

    let put = json!({"key": "build/cache", "value": "the build uses sccache and mold", "tags": ["build"]});
    let (status, out) = call(&rt, "agent-a", "memory_put", put).await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(
        (
            &out["created"],
            &out["entries"],
            &out["expires_at"],
            &out["max_entries"]
        ),
        (&json!(true), &json!(1), &Value::Null, &json!(1000))
    );
    let (_, out) = call(&rt, "agent-a", "memory_get", json!({"key": "build/cache"})).await;
    assert_eq!(
        (
            &out["found"],
            &out["value"],
            &out["tags"],
            &out["created_at"]
        ),
        (
            &json!(true),
            &json!("the build uses sccache and mold"),
            &json!(["build"]),
            &json!("2025-06-15T15:06:40.000Z")
        )
    );
    let (_, out) = call(
        &rt,
        "agent-a",
        "memory_search",
        json!({"query": "which linker? mold"}),
    )
    .await;
    assert_eq!(out["count"], json!(1));
    assert_eq!(out["results"][0]["key"], json!("build/cache"));
    assert!(
        out["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("[mold]"),
        "{out}"
    );

    // Another agent has a memory of its own: it sees none of the first one's, whatever it asks.
    let (_, out) = call(&rt, "agent-b", "memory_get", json!({"key": "build/cache"})).await;
    assert_eq!(out, json!({"key": "build/cache", "found": false}));
    let (_, out) = call(&rt, "agent-b", "memory_search", json!({"query": "mold"})).await;
    assert_eq!(out, json!({"count": 0, "results": []}));
    let (_, out) = call(
        &rt,
        "agent-b",
        "memory_delete",
        json!({"key": "build/cache"}),
    )
    .await;
    assert_eq!(out["deleted"], json!(false));

    // An entry with a time to live is gone once the runtime's clock passes it.
    let brief = json!({"key": "otp", "value": {"code": 482913}, "ttl_secs": 60});
    let (_, out) = call(&rt, "agent-a", "memory_put", brief).await;
    assert_eq!(out["expires_at"], json!("2025-06-15T15:07:40.000Z"));
    hands.0.store(59_999_999, Ordering::SeqCst);
    let (_, out) = call(&rt, "agent-a", "memory_get", json!({"key": "otp"})).await;
    assert_eq!(out["value"], json!({"code": 482913}));
    hands.0.store(60_000_000, Ordering::SeqCst);
    let (_, out) = call(&rt, "agent-a", "memory_get", json!({"key": "otp"})).await;
    assert_eq!(out["found"], json!(false));

    let (_, out) = call(
        &rt,
        "agent-a",
        "memory_delete",
        json!({"key": "build/cache"}),
    )
    .await;
    assert_eq!(out["deleted"], json!(true));
    let (_, out) = call(&rt, "agent-a", "memory_search", json!({})).await;
    assert_eq!(out["count"], json!(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_over_the_configured_quota_fails_saying_which_and_keeps_what_was_there() {
    let install =
        Install::new("[memory]\nmax_entries = 2\nmax_bytes = 4096\nmax_value_bytes = 100\n");
    let rt = open(&install, &Arc::new(Hands::default())).await;
    for k in ["a", "b"] {
        let (status, _) = call(&rt, "agent-a", "memory_put", json!({"key": k, "value": k})).await;
        assert_eq!(status, ToolStatus::Success);
    }
    let (status, out) = call(
        &rt,
        "agent-a",
        "memory_put",
        json!({"key": "c", "value": "c"}),
    )
    .await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Failed, &json!("quota_exceeded"))
    );
    let message = out["message"].as_str().unwrap();
    assert!(
        message.contains("3 entries, over its quota of 2 ([memory] max_entries)"),
        "{message}"
    );
    let (_, out) = call(&rt, "agent-a", "memory_get", json!({"key": "c"})).await;
    assert_eq!(out["found"], json!(false));
    // Replacing a key fits; another agent's quota is its own.
    let (status, _) = call(
        &rt,
        "agent-a",
        "memory_put",
        json!({"key": "b", "value": "bb"}),
    )
    .await;
    assert_eq!(status, ToolStatus::Success);
    let (status, _) = call(
        &rt,
        "agent-b",
        "memory_put",
        json!({"key": "c", "value": "c"}),
    )
    .await;
    assert_eq!(status, ToolStatus::Success);

    // A value over max_value_bytes is refused before the store is asked, saying where.
    let big = json!({"key": "b", "value": "x".repeat(99)});
    let (status, out) = call(&rt, "agent-a", "memory_put", big).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::ValidationError, &json!("value_too_large"))
    );
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .starts_with("/value: 101 bytes"),
        "{out}"
    );
    let (_, out) = call(&rt, "agent-a", "memory_get", json!({"key": "b"})).await;
    assert_eq!(out["value"], json!("bb"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_by_the_schema_with_their_place() {
    let install = Install::new("");
    let rt = open(&install, &Arc::new(Hands::default())).await;
    let cases = [
        ("memory_put", json!({"key": "", "value": 1}), "/key"),
        ("memory_put", json!({"key": "a\u{7}b", "value": 1}), "/key"),
        (
            "memory_put",
            json!({"key": "k", "value": 1, "tags": ["Two Words"]}),
            "/tags/0",
        ),
        (
            "memory_put",
            json!({"key": "k", "value": 1, "ttl_secs": 0}),
            "/ttl_secs",
        ),
        ("memory_put", json!({"key": "k"}), "value"),
        ("memory_search", json!({"limit": 101}), "/limit"),
        (
            "memory_get",
            json!({"key": "k", "agent": "agent-b"}),
            "agent",
        ),
    ];
    for (tool, args, place) in cases {
        let (status, out) = call(&rt, "agent-a", tool, args.clone()).await;
        assert_eq!(status, ToolStatus::ValidationError, "{tool} {args}: {out}");
        let message = out["message"].as_str().unwrap();
        assert!(message.contains(place), "{tool} {args}: {message}");
    }
    assert_eq!(
        rt.store()
            .memory_usage(
                &tw_store::MemoryScope {
                    agent: "agent-a".into(),
                    skill: String::new()
                },
                T0
            )
            .await
            .unwrap(),
        (0, 0)
    );
}

#[test]
fn a_memory_section_that_cannot_hold_a_value_is_refused_with_its_line() {
    for (text, expected) in [
        (
            "[memory]\nmax_entries = 0\n",
            "config.toml:2:15: memory.max_entries: must be at least 1",
        ),
        (
            "[memory]\nmax_bytes = 1000\n",
            "config.toml:2:13: memory.max_bytes (1000) is less than memory.max_value_bytes (65536)",
        ),
        (
            "[memory]\nmax_value_bytes = 2000000\n",
            "config.toml:2:19: memory.max_value_bytes: at most 1048576",
        ),
        ("[memory]\nmax_entrys = 5\n", "config.toml:2:1: "),
    ] {
        let err = Config::parse(text, std::path::Path::new("config.toml"), None).unwrap_err();
        assert!(err.to_string().starts_with(expected), "{text:?}: {err}");
    }
}
