//! `validate_content` through the whole pipeline on a real installation: profiles from the
//! config (a schema file beside it, an inline schema, text rules) check text and JSON and report
//! each violation with its place; a name the config lacks is refused by the schema, listing the
//! profiles; content past the cap is refused; every call leaves its audit record; and a schema
//! file that cannot be used stops the runtime from opening, at the config's line.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use super::net_tests::{audited, succeeded};
use super::policy_tests::{Install, code};
use super::*;

const CONFIG: &str = r#"
[validation.profiles.ticket]
schema = "schemas/ticket.json"
max_length = 200
encoding = "ascii"
forbid = ["(?i)password\\s*="]

[validation.profiles.note]
schema = { type = "object", required = ["title"], properties = { title = { type = "string", maxLength = 10 } } }
require = ["title"]
"#;

const TICKET: &str = r#"{
  "type": "object",
  "properties": {
    "id": {"type": "string", "pattern": "^TICKET-[0-9]+$"},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5}
  },
  "required": ["id"]
}"#;

fn install(config: &str) -> Install {
    let install = Install::new(config);
    std::fs::create_dir_all(install.path("schemas")).unwrap();
    std::fs::write(install.path("schemas/ticket.json"), TICKET).unwrap();
    install
}

async fn call(rt: &Runtime, args: Value) -> (ToolResult, tw_store::AuditRow) {
    audited(rt, "validate_content", args, Caller::agent("agent-7")).await
}

/// The output of a successful call.
async fn output(rt: &Runtime, args: Value) -> Value {
    succeeded(rt, "validate_content", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_check_text_and_json_and_place_every_violation() {
    let install = install(CONFIG);
    let rt = install.open().await.unwrap();
    assert_eq!(
        output(
            &rt,
            json!({"profile": "ticket", "content": {"id": "TICKET-42", "priority": 2}})
        )
        .await,
        json!({"profile": "ticket", "valid": true, "violations": [], "violation_count": 0})
    );
    assert_eq!(
        output(
            &rt,
            json!({"profile": "ticket", "content": {"id": "T-1", "priority": 9, "note": "password = x"}})
        )
        .await,
        json!({
            "profile": "ticket",
            "valid": false,
            "violations": [
                {"rule": "schema", "path": "/id", "message": "\"T-1\" does not match \"^TICKET-[0-9]+$\""},
                {"rule": "schema", "path": "/priority", "message": "9 is greater than the maximum of 5"},
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"(?i)password\\\\s*=\"",
                 "at": {"line": 1, "column": 34, "offset": 33}}
            ],
            "violation_count": 3
        })
    );
    // A string is text, and parsed as JSON for the schema.
    assert_eq!(
        output(
            &rt,
            json!({"profile": "ticket", "content": "{\"id\": \"TICKET-1\",\n \"summary\": \"café\"}"})
        )
        .await,
        json!({
            "profile": "ticket",
            "valid": false,
            "violations": [
                {"rule": "encoding", "path": "", "message": "'é' (U+00E9) is not ASCII",
                 "at": {"line": 2, "column": 17, "offset": 35}}
            ],
            "violation_count": 1
        })
    );
    assert_eq!(
        output(&rt, json!({"profile": "note", "content": "<title>hello"})).await,
        json!({
            "profile": "note",
            "valid": false,
            "violations": [
                {"rule": "schema", "path": "",
                 "message": "the content is not JSON: expected value (line 1, column 1)",
                 "at": {"line": 1, "column": 1, "offset": 0}}
            ],
            "violation_count": 1
        })
    );
    assert_eq!(
        output(
            &rt,
            json!({"profile": "note", "content": {"title": "far too long a title"}})
        )
        .await["violations"],
        json!([{"rule": "schema", "path": "/title",
                "message": "\"far too long a title\" is longer than 10 characters"}])
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_violations_are_listed_up_to_the_cap_and_counted() {
    let install = install(CONFIG);
    let rt = install.open().await.unwrap();
    let content = format!("{{\"id\": \"TICKET-1\", \"x\": \"{}\"}}", "ü".repeat(250));
    let out = output(&rt, json!({"profile": "ticket", "content": content})).await;
    let rules: Vec<&str> = out["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        (
            out["valid"].clone(),
            rules.len(),
            out["violation_count"].clone()
        ),
        (json!(false), tw_core::content::MAX_REPORTED, json!(251))
    );
    assert_eq!(rules[..2], ["max_length", "encoding"]);
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_audited() {
    let install = install(CONFIG);
    let rt = install.open().await.unwrap();
    let def = rt
        .registry()
        .get("validate_content")
        .unwrap()
        .definition
        .clone();
    assert_eq!(
        def.parameters.value()["properties"]["profile"]["enum"],
        json!(["note", "ticket"])
    );
    let refused = [
        json!({"profile": "tickets", "content": "x"}),
        json!({"profile": "ticket"}),
        json!({"profile": "ticket", "content": "x".repeat(crate::builtins::validate::MAX_CONTENT_CHARS + 1)}),
        json!({"profile": "ticket", "content": ["x".repeat(crate::builtins::validate::MAX_CONTENT_CHARS)]}),
    ];
    let mut seen = Vec::new();
    for args in refused {
        let (result, row) = call(&rt, args).await;
        seen.push((
            result.status,
            code(&result).map(str::to_owned),
            row.status,
            result.error.unwrap().message,
        ));
    }
    let limit = crate::builtins::validate::MAX_CONTENT_CHARS;
    let invalid = |message: String| {
        (
            ToolStatus::ValidationError,
            Some("invalid_arguments".to_owned()),
            ToolStatus::ValidationError,
            message,
        )
    };
    assert_eq!(
        seen,
        [
            invalid(
                "arguments do not match the schema (1 violation): at /profile: \"tickets\" is \
                 not one of \"note\" or \"ticket\""
                    .to_owned()
            ),
            invalid(
                "arguments do not match the schema (1 violation): at (root): \"content\" is a \
                 required property"
                    .to_owned()
            ),
            // The message quoting a megabyte of content is cut.
            invalid(format!(
                "arguments do not match the schema (1 violation): at /content: \"{}…",
                "x".repeat(tw_core::schema::MAX_MESSAGE_CHARS - 1)
            )),
            invalid(format!(
                "content: the JSON is {} characters serialized; at most {limit} are allowed",
                limit + 4
            )),
        ]
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_profiles_a_call_fails_saying_how_to_add_one() {
    let install = Install::new("");
    let rt = install.open().await.unwrap();
    let (result, row) = call(&rt, json!({"profile": "ticket", "content": "x"})).await;
    assert_eq!(
        (result.status, code(&result), row.status),
        (
            ToolStatus::Failed,
            Some("not_configured"),
            ToolStatus::Failed
        )
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_file_that_cannot_be_used_keeps_the_runtime_from_opening() {
    let install = Install::new(CONFIG);
    let refused = install.open().await.map(|_| ()).unwrap_err();
    let config = install.path("config.toml");
    let schema = install.path("schemas/ticket.json");
    assert_eq!(
        refused.to_string(),
        format!(
            "{}:3:10: validation.profiles.ticket.schema: cannot read {}: No such file or \
             directory (os error 2)",
            config.display(),
            schema.display()
        )
    );
    assert_eq!(refused.kind(), crate::ErrorKind::Invalid);
}
