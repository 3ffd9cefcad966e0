//! `validate_content` through the real binary: a profile from the config with its schema in a
//! file beside it; valid and invalid content, each violation with its place; one audit record
//! per call with the policy's decision; a wrong profile name refused listing the profiles; and a
//! broken profile or schema file refusing to start, at its line in the config.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Env, check_status};

const CONFIG: &str = r#"
[validation.profiles.ticket]
schema = "schemas/ticket.json"
max_length = 500
encoding = "ascii"
forbid = ["(?i)password\\s*="]
require = ["TICKET-[0-9]+"]
"#;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "id": {"type": "string", "pattern": "^TICKET-[0-9]+$"},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5}
  },
  "required": ["id"],
  "additionalProperties": false
}"#;

fn env() -> Env {
    let env = Env::new().with_config(CONFIG);
    let dir = env.root.path().join("schemas");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ticket.json"), SCHEMA).unwrap();
    env
}

fn validate(env: &Env, content: Value) -> Value {
    let run = env.call(
        "validate_content",
        json!({"profile": "ticket", "content": content}),
    );
    check_status(&run, 0, "success", None);
    run.json()["output"].clone()
}

#[test]
fn content_is_checked_against_a_configured_profile_and_every_call_is_audited() {
    let env = env();
    assert_eq!(
        validate(&env, json!({"id": "TICKET-7", "priority": 3})),
        json!({"profile": "ticket", "valid": true, "violations": [], "violation_count": 0})
    );
    assert_eq!(
        validate(
            &env,
            json!("{\"id\": \"BUG-7\",\n \"priority\": 0, \"note\": \"Password = naïve\"}")
        ),
        json!({
            "profile": "ticket",
            "valid": false,
            "violations": [
                {"rule": "schema", "path": "/id", "message": "\"BUG-7\" does not match \"^TICKET-[0-9]+$\""},
                {"rule": "schema", "path": "/priority", "message": "0 is less than the minimum of 1"},
                {"rule": "schema", "path": "", "message": "Additional properties are not allowed ('note' was unexpected)"},
                {"rule": "encoding", "path": "", "message": "'ï' (U+00EF) is not ASCII",
                 "at": {"line": 2, "column": 39, "offset": 54}},
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"(?i)password\\\\s*=\"",
                 "at": {"line": 2, "column": 26, "offset": 41}},
                {"rule": "require", "path": "", "message": "does not match the required pattern \"TICKET-[0-9]+\""}
            ],
            "violation_count": 6
        })
    );
    let not_json = validate(&env, json!("TICKET-7: {broken"));
    assert_eq!(
        not_json["violations"],
        json!([{
            "rule": "schema", "path": "",
            "message": "the content is not JSON: expected value (line 1, column 1)",
            "at": {"line": 1, "column": 1, "offset": 0}
        }])
    );

    // A profile the config does not have: refused by the tool's schema, naming those it has.
    let wrong = env.call(
        "validate_content",
        json!({"profile": "tickets", "content": "TICKET-1"}),
    );
    check_status(&wrong, 8, "validation_error", Some("invalid_arguments"));
    assert_eq!(
        wrong.json()["error"]["message"],
        "arguments do not match the schema (1 violation): at /profile: \"tickets\" is not one \
         of \"ticket\""
    );

    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (
                r.tool.as_str(),
                r.decision.as_deref(),
                r.status.to_string(),
                r.output.as_ref().map(|o| o["valid"].clone())
            ))
            .collect::<Vec<_>>(),
        [
            (
                "validate_content",
                Some("allow"),
                "success".to_owned(),
                Some(json!(true))
            ),
            (
                "validate_content",
                Some("allow"),
                "success".to_owned(),
                Some(json!(false))
            ),
            (
                "validate_content",
                Some("allow"),
                "success".to_owned(),
                Some(json!(false))
            ),
            (
                "validate_content",
                Some("allow"),
                "validation_error".to_owned(),
                None
            ),
        ]
    );
}

#[test]
fn the_listing_shows_the_profiles_a_call_may_name() {
    let env = env();
    let tools = env
        .cmd(&["tools", "export", "--format", "mcp"])
        .run()
        .ok()
        .json();
    let entry = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "validate_content")
        .cloned()
        .expect("the built-in policy allows validate_content");
    assert_eq!(
        (
            entry["inputSchema"]["properties"]["profile"]["enum"].clone(),
            entry["annotations"]["readOnlyHint"].clone()
        ),
        (json!(["ticket"]), json!(true))
    );
}

#[test]
fn a_broken_profile_or_schema_file_refuses_to_start_at_its_line() {
    let broken = Env::new().with_config(
        "[validation.profiles.ticket]\nrequire = [\"TICKET-[0-9]+\", \"(unclosed\"]\n",
    );
    let run = broken.call(
        "validate_content",
        json!({"profile": "ticket", "content": "x"}),
    );
    let cfg = broken.config.as_ref().unwrap().display().to_string();
    assert_eq!(
        (run.code, run.stderr.trim().to_owned()),
        (
            10,
            format!(
                "error: {cfg}:3:29: validation.profiles.ticket.require[1]: \"(unclosed\": not a \
                 regular expression: unclosed group"
            )
        )
    );

    // The schema file is missing: the config names it on line 4 (after the tier the harness
    // writes first).
    let missing = Env::new().with_config(CONFIG);
    let run = missing.call(
        "validate_content",
        json!({"profile": "ticket", "content": "x"}),
    );
    let cfg = missing.config.as_ref().unwrap().display().to_string();
    let schema = missing.root.path().join("schemas/ticket.json");
    assert_eq!(
        (run.code, run.stderr.trim().to_owned()),
        (
            10,
            format!(
                "error: cannot open toolwarden with data directory {}: {cfg}:4:10: \
                 validation.profiles.ticket.schema: cannot read {}: No such file or directory \
                 (os error 2)",
                missing.data.display(),
                schema.display()
            )
        )
    );
    assert!(
        !missing.db().exists(),
        "nothing ran, so nothing was recorded"
    );
}
