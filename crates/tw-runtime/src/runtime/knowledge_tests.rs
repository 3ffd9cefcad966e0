//! The knowledge tools through the whole pipeline: the teams tier's, allowed by the built-in
//! policy there; an entity written by one agent is found by another with its relations and who
//! wrote it; a relation to an entity that does not exist fails with its place and writes
//! nothing; every call audited.

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::ToolStatus;

use super::net_tests::called as call;
use super::policy_tests::Install;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_share_the_teams_knowledge_with_relations_and_authors() {
    let install = Install::new("license_tier = \"teams\"\n");
    let rt = install.open().await.unwrap();
    let billing = json!({"kind": "service", "name": "billing", "description": "Charges customers every month", "properties": {"repo": "git.example/billing"}});
    let (status, out) = call(&rt, "agent-a", "create_entity", billing).await;
    assert_eq!(
        (status, &out["created"]),
        (ToolStatus::Success, &json!(true)),
        "{out}"
    );

    let ada = json!({"kind": "person", "name": "Ada", "relations": [
        {"relation": "owns", "to": {"kind": "service", "name": "billing"}},
        {"relation": "owns", "to": {"kind": "service", "name": "ledger"}}
    ]});
    let (status, out) = call(&rt, "agent-b", "create_entity", ada.clone()).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Failed, &json!("unknown_entity"))
    );
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .starts_with("/relations/1/to: there is no service named \"ledger\""),
        "{out}"
    );
    let (_, out) = call(
        &rt,
        "agent-c",
        "search_knowledge",
        json!({"kind": "person"}),
    )
    .await;
    assert_eq!(
        out["count"],
        json!(0),
        "nothing of the refused write was kept"
    );

    let mut ada = ada;
    ada["relations"].as_array_mut().unwrap().pop();
    let (status, out) = call(&rt, "agent-b", "create_entity", ada).await;
    assert_eq!(
        (status, &out["relations_added"]),
        (ToolStatus::Success, &json!(1))
    );

    let (_, out) = call(
        &rt,
        "agent-c",
        "search_knowledge",
        json!({"query": "who charges the customers?"}),
    )
    .await;
    assert_eq!(out["count"], json!(1), "{out}");
    let found = &out["results"][0];
    assert_eq!(
        (
            &found["name"],
            &found["created_by"],
            &found["properties"],
            &found["relations"]
        ),
        (
            &json!("billing"),
            &json!("agent-a"),
            &json!({"repo": "git.example/billing"}),
            &json!([{"relation": "owns", "direction": "in", "kind": "person", "name": "Ada"}])
        )
    );
    let (status, out) = call(
        &rt,
        "agent-c",
        "create_entity",
        json!({"kind": "Service", "name": "x"}),
    )
    .await;
    assert_eq!(status, ToolStatus::ValidationError);
    assert!(out["message"].as_str().unwrap().contains("/kind"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_the_teams_tier_the_knowledge_tools_are_refused() {
    let install = Install::new("");
    let rt = install.open().await.unwrap();
    let (status, out) = call(&rt, "agent-a", "search_knowledge", json!({})).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::PermissionDenied, &json!("tier_unavailable")),
        "{out}"
    );
}
