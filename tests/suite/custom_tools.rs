//! Custom tools through the CLI: definition files in every format, precise errors for bad ones,
//! persistence across runs, argument placement without a shell, JSON output with an output schema,
//! and the exported function schemas.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Env;

fn add(env: &Env, name: &str, text: &str) -> super::support::Run {
    let path = env.root.path().join(name);
    std::fs::write(&path, text).unwrap();
    env.cmd(&["tools", "add", path.to_str().unwrap()]).run()
}

const PRINTF_YAML: &str = r#"
name: show_args
description: Print each argument between bars.
category: system
parameters:
  - { name: a, type: string, required: true }
  - { name: b, type: string }
command:
  argv: ["printf", "|%s", "{a}", "--b={b}"]
"#;

#[test]
fn arguments_are_single_argv_elements_never_shell_text() {
    let env = Env::new();
    add(&env, "show.yaml", PRINTF_YAML).ok();
    let r = env
        .call(
            "show_args",
            json!({"a": "x y; $(touch pwned) `id` | cat", "b": "*"}),
        )
        .ok()
        .json();
    assert_eq!(r["output"], "|x y; $(touch pwned) `id` | cat|--b=*");
    assert!(!env.ws.join("pwned").exists());
    // An omitted optional argument drops its element.
    let r = env.call("show_args", json!({"a": "only"})).ok().json();
    assert_eq!(r["output"], "|only");
}

#[test]
fn custom_tools_persist_and_can_be_removed_but_builtins_cannot() {
    let env = Env::new();
    assert_eq!(
        add(&env, "show.yaml", PRINTF_YAML).ok().stdout,
        "added custom tool show_args\n"
    );
    assert_eq!(
        add(&env, "show.yaml", PRINTF_YAML).ok().stdout,
        "updated custom tool show_args\n"
    );
    let list = env.cmd(&["tools", "list", "--json"]).run().ok().json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "browser_back",
            "browser_click",
            "browser_close",
            "browser_content",
            "browser_extract",
            "browser_fill_form",
            "browser_links",
            "browser_navigate",
            "browser_press_key",
            "browser_screenshot",
            "browser_select",
            "browser_snapshot",
            "browser_tabs",
            "browser_type",
            "browser_wait_for",
            "check_process_health",
            "create_entity",
            "delete_file",
            "echo",
            "exec",
            "exec_kill",
            "exec_output",
            "exec_wait",
            "file_search",
            "git_status",
            "http_fetch",
            "list_directory",
            "memory_delete",
            "memory_get",
            "memory_put",
            "memory_search",
            "python_exec",
            "read_file",
            "read_system_logs",
            "run_linter",
            "run_tests",
            "search_knowledge",
            "send_message",
            "show_args",
            "sql_query",
            "system_metrics_snapshot",
            "validate_content",
            "web_search",
            "write_file"
        ]
    );
    let custom = env
        .cmd(&["tools", "list", "--group", "custom", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(custom[0]["kind"], "custom");

    let taken = add(
        &env,
        "echo.json",
        r#"{"name": "echo", "description": "mine", "category": "system", "command": {"argv": ["true"]}}"#,
    );
    // A conflict with a built-in's name.
    assert_eq!(taken.code, 11);
    assert!(
        taken
            .stderr
            .contains("tool echo is built in; choose another name"),
        "{}",
        taken.stderr
    );

    env.cmd(&["tools", "remove", "show_args"]).run().ok();
    assert_eq!(
        env.call("show_args", json!({"a": "x"})).status(),
        "not_found"
    );
    let removed = env.cmd(&["tools", "remove", "read_file"]).run();
    assert_eq!(removed.code, 11);
    assert!(
        removed.stderr.contains("tool read_file is built in"),
        "{}",
        removed.stderr
    );
}

#[test]
fn bad_definition_files_say_where_and_change_nothing() {
    let env = Env::new();
    let cases = [
        (
            "bad.toml",
            "[[tools]]\nname = \"ok_one\"\ndescription = \"fine\"\ncategory = \"system\"\ncommand = { argv = [\"true\"] }\n\n[[tools]]\nname = \"second\"\ndescription = \"d\"\ncategory = \"sytem\"\ncommand = { argv = [\"true\"] }\n",
            "bad.toml:10:12: tools[1].category: unknown category \"sytem\": expected one of file_system, network, database, code_execution, external_api, knowledge, communication, system",
        ),
        (
            "bad.json",
            "{\"name\": \"t\", \"description\": \"d\", \"category\": \"system\",\n \"parameters\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": \"zero\"}}},\n \"command\": {\"argv\": [\"true\"]}}",
            "bad.json:2:94: parameters: invalid JSON Schema: at /properties/n/minimum: \"zero\" is not of type \"number\"",
        ),
        (
            "bad.yaml",
            "name: t\ndescription: d\ncategory: system\ncommand:\n  argv: [\"{program}\"]\n",
            "bad.yaml:5:3: command: argv[0]: the program must be fixed; placeholders are only allowed in arguments",
        ),
    ];
    for (file, text, expect) in cases {
        let run = add(&env, file, text);
        assert_eq!(run.code, 10, "{file}: {}", run.stdout);
        let got = run.stderr.trim().trim_start_matches("error: ");
        let path = env.root.path().join(file).display().to_string();
        assert_eq!(got, expect.replacen(file, &path, 1), "{file}");
    }
    // The first tool of the bad TOML file was not added either.
    assert_eq!(env.call("ok_one", json!({})).status(), "not_found");
}

#[test]
fn json_output_is_checked_against_the_output_schema() {
    let env = Env::new();
    add(
        &env,
        "j.json",
        &json!({
            "tools": [
                {"name": "good_json", "description": "JSON out", "category": "system",
                 "output_schema": {"type": "object", "required": ["n"]},
                 "command": {"argv": ["echo", "{{\"n\": 1}}"], "output": "json"}},
                {"name": "bad_json", "description": "JSON out", "category": "system",
                 "output_schema": {"type": "object", "required": ["n"]},
                 "command": {"argv": ["echo", "{{\"m\": 1}}"], "output": "json"}},
                {"name": "not_json", "description": "Text claiming to be JSON", "category": "system",
                 "command": {"argv": ["echo", "hello"], "output": "json"}}
            ]
        })
        .to_string(),
    )
    .ok();
    assert_eq!(
        env.call("good_json", json!({})).ok().json()["output"],
        json!({"n": 1})
    );
    let bad = env.call("bad_json", json!({})).json();
    assert_eq!(
        (bad["status"].as_str(), bad["error"]["code"].as_str()),
        (Some("failed"), Some("invalid_output"))
    );
    assert!(
        bad.get("output").is_none(),
        "an invalid output must not be passed on: {bad}"
    );
    assert_eq!(bad["error"]["violations"][0]["keyword"], "required");
    let not = env.call("not_json", json!({})).json();
    assert_eq!(not["error"]["code"], "invalid_output");
}

#[test]
fn exported_schemas_are_pinned() {
    let env = Env::new();
    for format in ["openai", "anthropic", "mcp"] {
        let out = env
            .cmd(&["tools", "export", "--format", format])
            .run()
            .ok()
            .json();
        insta::assert_json_snapshot!(format!("export_builtins_{format}"), out);
    }
    // Denied tools are not exported unless asked for.
    let env = Env::new().with_config("[policy]\nallow = [\"echo\"]\n");
    let out = env
        .cmd(&["tools", "export", "--format", "anthropic"])
        .run()
        .ok()
        .json();
    assert_eq!(out.as_array().unwrap().len(), 1);
    let all = env
        .cmd(&["tools", "export", "--format", "anthropic", "--all"])
        .run()
        .ok()
        .json();
    assert_eq!(all.as_array().unwrap().len(), 43);
}

#[test]
fn adding_updating_and_removing_a_custom_tool_are_recorded_with_who_did_it() {
    let env = Env::new();
    let as_ann = |args: &[&str]| {
        let mut cmd = env.cmd(args);
        cmd.cmd.env("USER", "ann");
        cmd.run()
    };
    let path = env.root.path().join("show.yaml");
    std::fs::write(&path, PRINTF_YAML).unwrap();
    as_ann(&["tools", "add", path.to_str().unwrap()]).ok();
    as_ann(&["tools", "add", path.to_str().unwrap()]).ok();
    as_ann(&["tools", "remove", "show_args"]).ok();
    let changes = env.cmd(&["audit", "changes", "--json"]).run().ok().json();
    let rows: Vec<(String, String, String)> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["summary"].as_str().unwrap().to_owned(),
                c["details"]["name"]
                    .as_str()
                    .or(c["details"]["tool"].as_str())
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    let row = |k: &str, s: &str| (k.to_owned(), s.to_owned(), "show_args".to_owned());
    assert_eq!(
        rows,
        vec![
            row("custom_tool_removed", "removed custom tool show_args"),
            row("custom_tool_updated", "updated custom tool show_args"),
            row("custom_tool_added", "added custom tool show_args"),
        ]
    );
    for c in changes.as_array().unwrap() {
        assert!(c["actor"].as_str().unwrap().contains("ann"), "{c}");
    }
}

#[test]
fn a_tool_that_needs_a_permission_runs_only_for_callers_granted_it() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:custom\"]\n[policy.permissions]\ncallers = { analyst = [\"reports.read\"] }\n",
    );
    add(
        &env,
        "report.yaml",
        r#"
name: read_report
description: Print the report.
category: system
permissions: [reports.read]
command:
  argv: ["printf", "report"]
"#,
    )
    .ok();
    let as_agent = |agent: &str| {
        env.cmd(&["--agent", agent, "call", "read_report", "--args", "{}"])
            .run()
    };
    let granted = as_agent("analyst");
    super::support::check_status(&granted, 0, "success", None);
    let refused = as_agent("intern");
    super::support::check_status(&refused, 7, "permission_denied", Some("missing_permission"));
    assert_eq!(
        refused.json()["error"]["message"],
        "tool read_report needs permission reports.read; caller intern does not hold \
         reports.read (grant it in [permissions] callers or skills)"
    );
    let rows = env.audit_rows();
    let last = rows.last().unwrap();
    assert_eq!(
        (last.agent_id.as_str(), last.decision.as_deref()),
        ("intern", Some("deny"))
    );
    assert!(
        last.explanation
            .as_ref()
            .unwrap()
            .to_string()
            .contains("\"permissions\""),
        "the deciding layer is recorded: {:?}",
        last.explanation
    );
}
