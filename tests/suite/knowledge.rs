//! Agent memory and `sql_query` through the real binary. The memory tools are allowed by the
//! built-in policy, keep each agent's entries its own (the `--agent` the call is made as, never
//! an argument), refuse a bad tag with its place and a write over the config's quota saying
//! which. `sql_query` reads a SQLite file the config names, refuses a write hidden in a CTE with
//! the database's own refusal and leaves the file as it was, and is not allowed until the
//! policy says so. The team's knowledge store (teams tier): an entity one agent writes another
//! finds with its relations; a relation to nothing is refused with its place. Every call
//! audited.

use serde_json::json;

use super::support::{Env, check_status};

fn call_as(env: &Env, agent: &str, tool: &str, args: serde_json::Value) -> super::support::Run {
    env.cmd(&[
        "call",
        tool,
        "--agent",
        agent,
        "--args",
        &args.to_string(),
        "--no-wait",
    ])
    .run()
}

#[test]
fn each_agent_remembers_and_finds_its_own_notes_within_the_quota() {
    let env = Env::new().with_config("[memory]\nmax_entries = 2\n");
    let put = json!({"key": "deploy", "value": "deploys go out on Tuesdays after the freeze", "tags": ["ops"]});
    let run = call_as(&env, "agent-a", "memory_put", put);
    check_status(&run, 0, "success", None);
    assert_eq!(run.json()["output"]["created"], true);

    let run = call_as(
        &env,
        "agent-a",
        "memory_search",
        json!({"query": "when do deploys go out?", "tags": ["ops"]}),
    );
    check_status(&run, 0, "success", None);
    let out = &run.json()["output"];
    assert_eq!(
        (&out["count"], &out["results"][0]["key"]),
        (&json!(1), &json!("deploy"))
    );
    let run = call_as(&env, "agent-b", "memory_get", json!({"key": "deploy"}));
    check_status(&run, 0, "success", None);
    assert_eq!(
        run.json()["output"],
        json!({"key": "deploy", "found": false})
    );

    let run = call_as(
        &env,
        "agent-a",
        "memory_put",
        json!({"key": "k", "value": 1, "tags": ["Not A Tag"]}),
    );
    check_status(&run, 8, "validation_error", Some("invalid_arguments"));
    assert!(run.stdout.contains("/tags/0"), "{}", run.stdout);
    call_as(
        &env,
        "agent-a",
        "memory_put",
        json!({"key": "second", "value": 2}),
    )
    .ok();
    let run = call_as(
        &env,
        "agent-a",
        "memory_put",
        json!({"key": "third", "value": 3}),
    );
    check_status(&run, 1, "failed", Some("quota_exceeded"));
    assert!(
        run.stdout.contains("[memory] max_entries"),
        "{}",
        run.stdout
    );

    let audited: Vec<(String, String)> = env
        .audit_rows()
        .iter()
        .map(|r| (r.tool.clone(), r.status.as_str().to_owned()))
        .collect();
    let expected = [
        ("memory_put", "success"),
        ("memory_search", "success"),
        ("memory_get", "success"),
        ("memory_put", "validation_error"),
        ("memory_put", "success"),
        ("memory_put", "failed"),
    ];
    assert_eq!(audited, expected.map(|(t, s)| (t.to_owned(), s.to_owned())));
}

#[test]
fn sql_query_reads_a_configured_sqlite_file_and_the_database_refuses_writes() {
    let env = Env::new();
    let db = env.write("shop.db", "");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO items VALUES (1, 'pen'), (2, 'ink');")
        .unwrap();
    drop(c);
    let before = std::fs::read(&db).unwrap();
    let databases = format!("[databases.shop]\nsqlite = \"{}\"\n", db.display());

    // Not allowed by the built-in policy: reading a database is the administrator's choice.
    let env = env.with_config(&databases);
    let run = env.call("sql_query", json!({"database": "shop", "sql": "SELECT 1"}));
    check_status(&run, 7, "permission_denied", Some("policy_denied"));

    let env = env.with_config(&format!("[policy]\nallow = [\"sql_query\"]\n{databases}"));
    let run = env.call(
        "sql_query",
        json!({"database": "shop", "sql": "SELECT name FROM items WHERE id = ?1", "params": [2]}),
    );
    check_status(&run, 0, "success", None);
    assert_eq!(run.json()["output"]["rows"], json!([["ink"]]));
    let run = env.call(
        "sql_query",
        json!({"database": "shop", "sql": "WITH t AS (SELECT 1) DELETE FROM items"}),
    );
    check_status(&run, 7, "permission_denied", Some("read_only"));
    assert!(run.stdout.contains("readonly database"), "{}", run.stdout);
    let run = env.call(
        "sql_query",
        json!({"database": "shop", "sql": "SELECT 1; DELETE FROM items"}),
    );
    check_status(&run, 8, "validation_error", Some("invalid_arguments"));
    assert_eq!(std::fs::read(&db).unwrap(), before, "the file is unchanged");
    assert_eq!(env.audit_rows().len(), 4);
}

#[test]
fn the_teams_knowledge_store_links_entities_and_finds_them_for_any_agent() {
    let env = Env::new();
    let service = json!({"kind": "service", "name": "ledger", "description": "Double-entry bookkeeping for billing"});
    check_status(
        &call_as(&env, "agent-a", "create_entity", service),
        0,
        "success",
        None,
    );
    let team = json!({"kind": "team", "name": "finance", "relations": [{"relation": "owns", "to": {"kind": "service", "name": "ledger"}}]});
    check_status(
        &call_as(&env, "agent-b", "create_entity", team),
        0,
        "success",
        None,
    );
    let dangling = json!({"kind": "team", "name": "ops", "relations": [{"relation": "owns", "to": {"kind": "service", "name": "pager"}}]});
    let run = call_as(&env, "agent-b", "create_entity", dangling);
    check_status(&run, 1, "failed", Some("unknown_entity"));
    assert!(run.stdout.contains("/relations/0/to"), "{}", run.stdout);

    let run = call_as(
        &env,
        "agent-c",
        "search_knowledge",
        json!({"query": "bookkeeping"}),
    );
    check_status(&run, 0, "success", None);
    let found = &run.json()["output"]["results"][0];
    assert_eq!(
        (
            &found["name"],
            &found["created_by"],
            &found["relations"][0]["name"]
        ),
        (&json!("ledger"), &json!("agent-a"), &json!("finance"))
    );
    assert_eq!(env.audit_rows().len(), 4);
}
