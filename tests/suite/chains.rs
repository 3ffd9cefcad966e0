//! Tool chains through the real binary: a chain file in the workspace's `chains/` folder is
//! listed, checked with every problem at its FILE:LINE, run as the tool `chain__NAME` from the
//! CLI and over MCP with the official Python client, each step leaving its own audit row that
//! names the run; a chain a skill declares runs under that skill, and a step the skill no
//! longer reaches is denied and stops the run.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

const NOTES: &str = "\
name: notes
description: Write a note, then read it back.
input:
  - {name: topic, type: string, required: true}
steps:
  - id: save
    tool: write_file
    arguments:
      path: notes.md
      content: \"# ${input.topic}\\n\"
  - id: read
    tool: read_file
    arguments: {path: notes.md}
    depends_on: save
output:
  text: $read.content
  size: $read.size
";

fn env() -> Env {
    let env = Env::new().with_config("[policy]\ndefault = \"allow\"\n");
    env.write("chains/notes.yaml", NOTES);
    env
}

#[test]
fn a_chain_file_runs_from_the_cli_and_each_step_is_an_audited_call() {
    let env = env();
    let listed = env.cmd(&["chains", "list", "--json"]).run().ok().json();
    assert_eq!(listed["chains"][0]["tool"], "chain__notes");
    assert_eq!(listed["problems"], json!([]));

    let run = env
        .cmd(&["chains", "run", "notes", "--input", r#"{"topic": "rust"}"#])
        .run()
        .ok();
    let result = run.json();
    assert_eq!(result["output"], json!({"text": "# rust\n", "size": 7}));
    let run_id = result["execution_id"].as_str().unwrap().to_owned();

    // The chain's call and its two steps: three rows, the steps naming the run.
    let rows = env.audit_rows();
    let seen: Vec<(&str, Option<&str>, Option<&str>)> = rows
        .iter()
        .map(|r| {
            (
                r.tool.as_str(),
                r.metadata["chain"]["run_id"].as_str(),
                r.metadata["chain"]["step"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("write_file", Some(run_id.as_str()), Some("save")),
            ("read_file", Some(run_id.as_str()), Some("read")),
            ("chain__notes", None, None),
        ]
    );
    let step = env
        .cmd(&["audit", "show", &rows[0].execution_id])
        .run()
        .ok();
    assert!(
        step.stdout.contains(&format!(
            "chain run {run_id} (`toolwarden chains runs {run_id}`): step save, attempt 1"
        )),
        "{}",
        step.stdout
    );
    let shown = env.cmd(&["audit", "show", &run_id]).run().ok();
    assert!(
        shown.stdout.contains("steps of this chain run (2 calls):"),
        "{}",
        shown.stdout
    );

    let runs = env
        .cmd(&["chains", "runs", &run_id, "--json"])
        .run()
        .ok()
        .json();
    let steps: Vec<(&str, &str)> = runs["run"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(steps, vec![("save", "completed"), ("read", "completed")]);
    assert_eq!(runs["run"]["status"], "completed");

    // Invalid input is the chain call's validation error, and no step runs.
    let bad = env.cmd(&["chains", "run", "notes", "--input", "{}"]).run();
    assert_eq!(bad.code, 8, "{}", bad.stdout);
    assert_eq!(env.audit_rows().len(), 4);
}

#[test]
fn a_broken_chain_file_is_reported_line_by_line_and_the_others_still_load() {
    let env = env();
    env.write(
        "chains/broken.yaml",
        "\
- name: broken
  steps:
    - id: a
      tool: no_such_tool
    - id: b
      tool: read_file
      arguments: {path: $a.missing, nope: 1}
- name: unparsed
  steps:
    - id: c
      tool: read_file
      arguments: {path: x}
      when: $steps.a.status ==
",
    );
    let listed = env.cmd(&["chains", "list", "--json"]).run().ok().json();
    assert_eq!(listed["chains"].as_array().unwrap().len(), 1, "{listed}");
    let path = env.ws.join("chains/broken.yaml");
    let file = path.display().to_string();
    let check = env.cmd(&["chains", "check", &file]).run();
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    let lines: Vec<String> = check.stdout.lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        vec![
            format!("{file}:4: error: [0].steps[0].tool: no tool \"no_such_tool\" is registered"),
            format!(
                "{file}:7: error: [0].steps[1].arguments.nope: tool \"read_file\" has no parameter \"nope\", it has: path, start_line, end_line, max_bytes, encoding"
            ),
            format!(
                "{file}:13: error: [1].steps[0].when: not a valid expression: at byte 18: a value or reference is missing"
            ),
            "0 valid: none; 3 errors".to_owned(),
        ]
    );
    // A running chain's tool refuses nothing else: the good chain still runs.
    env.cmd(&["chains", "run", "notes", "--input", r#"{"topic": "x"}"#])
        .run()
        .ok();
    let unknown = env.cmd(&["chains", "run", "broken"]).run();
    assert_eq!(unknown.code, 9);
    assert!(
        unknown.stderr.contains("chain \"broken\" did not load"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn a_skill_chain_runs_under_its_skill_and_a_step_the_skill_loses_is_denied() {
    let env = env();
    env.write(
        "skills/notes/SKILL.md",
        "---
name: notes
description: Keeps notes.
tools: [read_file, write_file]
chains:
  - name: note
    input: [{name: text, type: string, required: true}]
    steps:
      - {id: save, tool: write_file, arguments: {path: n.txt, content: $input.text}}
      - {id: read, tool: read_file, arguments: {path: n.txt}, depends_on: save}
    output: $read.content
---
Notes.
",
    );
    let run = env
        .cmd(&["chains", "run", "note", "--input", r#"{"text": "hi"}"#])
        .run()
        .ok();
    assert_eq!(run.json()["output"], "hi");
    // The steps run under the skill that declares the chain (the caller named none).
    let skills: Vec<(String, Option<String>)> = env
        .audit_rows()
        .into_iter()
        .map(|r| (r.tool, r.skill))
        .collect();
    assert_eq!(
        skills,
        vec![
            ("write_file".to_owned(), Some("notes".to_owned())),
            ("read_file".to_owned(), Some("notes".to_owned())),
            ("chain__note".to_owned(), None),
        ]
    );

    // The administrator takes write_file out of the skill: the next process to load the
    // chain refuses it, saying which step left the skill (a running one denies the step: see
    // tw-runtime's chain tests).
    env.cmd(&["skills", "override", "notes", "remove", "write_file"])
        .run()
        .ok();
    let run = env
        .cmd(&["chains", "run", "note", "--input", r#"{"text": "again"}"#])
        .run();
    assert_eq!(run.code, 9, "{}", run.stdout);
    assert!(
        run.stderr.contains("chain \"note\" did not load") && run.stderr.contains("steps[0].tool"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(env.ws.join("n.txt")).unwrap(), "hi");
}

#[test]
fn a_chain_is_a_tool_over_mcp_with_the_official_client() {
    let env = env();
    let report = super::mcp::run(
        &env,
        &[],
        json!([
            {"op": "list"},
            {"op": "call", "tool": "chain__notes", "arguments": {"topic": "mcp"}},
        ]),
    );
    let tool = report["steps"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "chain__notes")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(tool["description"], "Write a note, then read it back.");
    assert_eq!(tool["inputSchema"]["required"], json!(["topic"]));
    let result = &report["steps"][1]["result"];
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(
        result["content"][0]["text"]
            .as_str()
            .map(|t| serde_json::from_str::<Value>(t).unwrap()),
        Some(json!({"text": "# mcp\n", "size": 6}))
    );
    let rows = env.audit_rows();
    let agents: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.agent_id.as_str()))
        .collect();
    assert_eq!(
        agents,
        vec![
            ("write_file", "mcp:tw-test-client"),
            ("read_file", "mcp:tw-test-client"),
            ("chain__notes", "mcp:tw-test-client"),
        ]
    );
}

/// Polls `chains runs --json` until the newest run of `chain` has `status`.
fn newest_run(env: &Env, status: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let runs = env.cmd(&["chains", "runs", "--json"]).run().ok().json();
        if let Some(run) = runs.as_array().and_then(|r| r.first())
            && run["status"] == status
        {
            return run.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no run became {status}: {runs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_run_whose_process_is_killed_reads_interrupted_and_a_live_one_is_left_running() {
    let env = Env::new().with_config(
        "[policy]\ndefault = \"allow\"\nallow = [\"group:exec\", \"group:chains\"]\n\
         [policy.exec]\nsecurity = \"full\"\n",
    );
    env.write(
        "chains/slow.yaml",
        "\
name: slow
steps:
  - id: first
    tool: exec
    arguments: {argv: [echo, hi]}
  - id: wait
    tool: exec
    arguments: {argv: [sleep, \"30\"]}
    depends_on: first
  - id: after
    tool: exec
    arguments: {argv: [echo, done]}
    depends_on: wait
",
    );
    let mut child = env.cmd(&["chains", "run", "slow", "--input", "{}"]).spawn();
    // While the first process drives it, others opening the store leave it alone.
    let live = newest_run(&env, "running");
    let id = live["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while env
        .cmd(&["running", "--json"])
        .run()
        .ok()
        .json()
        .as_array()
        .unwrap()
        .len()
        < 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the sleep step never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let again = env
        .cmd(&["chains", "runs", &id, "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(again["run"]["status"], "running");

    child.kill().unwrap();
    child.wait().unwrap();
    let run = newest_run(&env, "interrupted");
    assert_eq!(run["id"], id.as_str());
    let shown = env
        .cmd(&["chains", "runs", &id, "--json"])
        .run()
        .ok()
        .json();
    let steps: Vec<(&str, &str)> = shown["run"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("first", "completed"),
            ("wait", "cancelled"),
            ("after", "cancelled")
        ]
    );
    assert!(
        shown["run"]["error"]
            .as_str()
            .unwrap()
            .contains("ended before the run did"),
        "{shown}"
    );
}
