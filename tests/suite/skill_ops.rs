//! The skill operations through the real binary: capability resolution that picks up a tool
//! registered after the skill was written, overrides and administrator classifications that beat
//! the classifier (and land in the admin log with who made them), validated atomic saves of a
//! SKILL.md, lifecycle metrics, and the per-skill domain rules and rate limits of a tool entry.

use std::io::Write;
use std::process::Stdio;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Env, Run};

const READER: &str =
    "---\nname: reader\ndescription: Reads files.\npermissions: [filesystem_read]\n---\nBody\n";

/// A file tool the keyword heuristic places under filesystem_read: "file" in its description, a
/// `path` parameter, the file_system category, and no writing verb.
const COUNT_WORDS: &str = r#"
name: count_words
description: Count the words in a text file.
category: file_system
parameters:
  - { name: path, type: string, required: true, description: "Path of the file" }
command:
  argv: ["wc", "-w", "{path}"]
"#;

/// Policy that lets exec run `echo` without a person, so a call under a skill is decided by the
/// skill layer alone.
const EXEC_ECHO: &str = r#"[policy]
allow = ["group:fs", "group:system", "group:custom", "group:exec"]
[policy.exec]
security = "allowlist"
ask = "off"
[[policy.exec.allow]]
command = "echo **"
"#;

/// Skills `reader` (permissions: filesystem_read) and `sysinfo` (permissions: system_info).
fn skills(env: &Env) {
    env.write("skills/reader/SKILL.md", READER);
    env.write(
        "skills/sysinfo/SKILL.md",
        "---\nname: sysinfo\ndescription: Inspects the host.\npermissions: [system_info]\n---\n",
    );
    env.write("notes.txt", "one two three\n");
}

fn add_tool(env: &Env, file: &str, text: &str) {
    let path = env.root.path().join(file);
    std::fs::write(&path, text).unwrap();
    env.cmd(&["tools", "add", path.to_str().unwrap()])
        .run()
        .ok();
}

/// Runs a command as the person `ann`, so the admin log and overrides name her.
fn as_ann(env: &Env, args: &[&str]) -> Run {
    let mut cmd = env.cmd(args);
    cmd.cmd.env("USER", "ann");
    cmd.run()
}

fn under_skill(env: &Env, tool: &str, args: Value, skill: &str) -> Run {
    env.cmd(&[
        "call",
        tool,
        "--args",
        &args.to_string(),
        "--skill",
        skill,
        "--no-wait",
    ])
    .run()
}

/// (exit code, error code, error message) of a call, compared as one.
fn outcome(run: &Run) -> (i32, Option<String>, Option<String>) {
    let out = run.json();
    let text = |v: &Value| v.as_str().map(str::to_owned);
    (
        run.code,
        text(&out["error"]["code"]),
        text(&out["error"]["message"]),
    )
}

fn denied(code: &str, message: &str) -> (i32, Option<String>, Option<String>) {
    (7, Some(code.to_owned()), Some(message.to_owned()))
}

fn layer(run: &Run, name: &str) -> Value {
    run.json()["decision"]["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["layer"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn resolved(env: &Env, skill: &str) -> Value {
    env.cmd(&["skills", "resolved", skill, "--json"])
        .run()
        .ok()
        .json()
}

/// (name, provenance) of each tool the skill may use, in the order printed.
fn resolved_names(env: &Env, skill: &str) -> Vec<(String, Value)> {
    resolved(env, skill)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["provenance"].clone(),
            )
        })
        .collect()
}

fn via_capability(name: &str, cap: &str) -> (String, Value) {
    (name.to_owned(), json!({"kind": "capability", "from": cap}))
}

fn classification(env: &Env, tool: &str) -> Value {
    let all = env
        .cmd(&["skills", "capabilities", tool, "--json"])
        .run()
        .ok()
        .json();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["tool"], tool);
    all[0].clone()
}

/// (actor, kind, summary) of the admin-log entries whose kind starts with `prefix`, newest first.
fn changes(env: &Env, prefix: &str) -> Vec<(String, String, String)> {
    let all = env.cmd(&["audit", "changes", "--json"]).run().ok().json();
    all.as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"].as_str().unwrap().starts_with(prefix))
        .map(|c| {
            (
                c["actor"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["summary"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_newly_registered_tool_is_picked_up_by_a_skill_whose_permissions_match() {
    let env = Env::new();
    skills(&env);
    let static_entry = |name: &str| {
        json!({
            "name": name,
            "access_level": "standard",
            "rate_limit": null,
            "allowed_domains": [],
            "blocked_domains": [],
            "provenance": {"kind": "capability", "from": "filesystem_read"},
            "registered": true,
            "classification": {"source": "static", "confidence": 1.0}
        })
    };
    assert_eq!(
        resolved(&env, "reader"),
        json!({
            "skill": "reader",
            "permissions": ["filesystem_read"],
            "tools": [
                static_entry("file_search"),
                static_entry("list_directory"),
                static_entry("read_file")
            ],
            "unknown_permissions": [],
            "dangling_overrides": []
        })
    );

    add_tool(&env, "count_words.yaml", COUNT_WORDS);
    let class = classification(&env, "count_words");
    assert_eq!(
        (
            &class["classification"]["source"],
            &class["classification"]["capabilities"][0]["capability"],
            class["classification"]["capabilities"]
                .as_array()
                .unwrap()
                .len(),
            &class["classified_by"],
        ),
        (
            &json!("heuristic"),
            &json!("filesystem_read"),
            1,
            &json!("classifier")
        ),
        "{class}"
    );
    let confidence = class["classification"]["capabilities"][0]["confidence"].clone();

    // The SKILL.md is not touched, yet the skill now reaches the new tool through its permission.
    let out = resolved(&env, "reader");
    let entry = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "count_words")
        .cloned()
        .unwrap_or_else(|| panic!("count_words is not resolved: {out}"));
    assert_eq!(
        entry,
        json!({
            "name": "count_words",
            "access_level": "standard",
            "rate_limit": null,
            "allowed_domains": [],
            "blocked_domains": [],
            "provenance": {"kind": "capability", "from": "filesystem_read"},
            "registered": true,
            "classification": {"source": "heuristic", "confidence": confidence}
        })
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("skills/reader/SKILL.md")).unwrap(),
        READER
    );

    let path = json!({"path": "notes.txt"});
    let allowed = under_skill(&env, "count_words", path.clone(), "reader");
    assert_eq!(allowed.code, 0, "{}", allowed.stdout);
    assert_eq!(allowed.json()["output"], "3 notes.txt\n");
    assert_eq!(
        layer(&allowed, "skill"),
        json!({
            "layer": "skill",
            "decision": "allow",
            "rule": {"rule": "permissions: filesystem_read", "source": "skill reader"},
            "reason": "tool count_words has capability filesystem_read, which skill reader is permitted, up to standard access"
        })
    );

    let refused = under_skill(&env, "count_words", path, "sysinfo");
    assert_eq!(
        outcome(&refused),
        denied(
            "skill_denied",
            "skill sysinfo does not include tool count_words"
        )
    );
}

#[test]
fn an_override_beats_the_classifier() {
    let env = Env::new().with_config(EXEC_ECHO);
    skills(&env);
    add_tool(&env, "count_words.yaml", COUNT_WORDS);
    let read = json!({"path": "notes.txt"});
    let echo_hi = json!({"argv": ["echo", "hi"]});

    // Removing a tool the skill has through its permission.
    let r = as_ann(
        &env,
        &[
            "skills",
            "override",
            "reader",
            "remove",
            "read_file",
            "--reason",
            "too broad",
        ],
    )
    .ok();
    assert_eq!(
        r.stdout,
        "skill reader may no longer use tool read_file (override by ann)\n"
    );
    assert_eq!(
        outcome(&under_skill(&env, "read_file", read.clone(), "reader")),
        denied(
            "skill_denied",
            "tool read_file was removed from skill reader by an override (ann)"
        )
    );
    assert_eq!(
        resolved_names(&env, "reader"),
        [
            via_capability("count_words", "filesystem_read"),
            via_capability("file_search", "filesystem_read"),
            via_capability("list_directory", "filesystem_read"),
        ]
    );

    // Adding a tool the skill has no permission for.
    assert_eq!(
        outcome(&under_skill(&env, "exec", echo_hi.clone(), "reader")),
        denied("skill_denied", "skill reader does not include tool exec")
    );
    let r = as_ann(
        &env,
        &[
            "skills", "override", "reader", "add", "exec", "--level", "standard",
        ],
    )
    .ok();
    assert_eq!(
        r.stdout,
        "skill reader may now use tool exec up to standard access (override by ann)\n"
    );
    let ran = under_skill(&env, "exec", echo_hi.clone(), "reader");
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["output"]["stdout"], "hi\n");
    assert_eq!(
        layer(&ran, "skill")["reason"],
        "tool exec was added to skill reader by ann, up to standard access"
    );
    let exec = resolved(&env, "reader")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exec")
        .cloned();
    assert_eq!(
        exec,
        Some(json!({
            "name": "exec",
            "access_level": "standard",
            "rate_limit": null,
            "allowed_domains": [],
            "blocked_domains": [],
            "provenance": {"kind": "override", "from": "ann"},
            "registered": true
        }))
    );

    let listed = env
        .cmd(&["skills", "overrides", "--json"])
        .run()
        .ok()
        .json();
    let rows: Vec<Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert!(o["created_at"].is_u64(), "{o}");
            let mut o = o.clone();
            o.as_object_mut().unwrap().remove("created_at");
            o
        })
        .collect();
    assert_eq!(
        rows,
        [
            json!({"skill": "reader", "tool": "exec", "action": "add", "access_level": "standard", "reason": null, "created_by": "ann"}),
            json!({"skill": "reader", "tool": "read_file", "action": "remove", "access_level": null, "reason": "too broad", "created_by": "ann"}),
        ]
    );
    assert_eq!(
        env.cmd(&["skills", "overrides", "reader"])
            .run()
            .ok()
            .stdout,
        "reader add exec (up to standard), by ann\nreader remove read_file, by ann: too broad\n"
    );

    // Clearing gives the decision back to the manifest and the capabilities.
    for tool in ["read_file", "exec"] {
        assert_eq!(
            as_ann(&env, &["skills", "override", "reader", "clear", tool])
                .ok()
                .stdout,
            format!("the override of tool {tool} for skill reader is cleared\n")
        );
    }
    assert_eq!(under_skill(&env, "read_file", read, "reader").code, 0);
    assert_eq!(
        outcome(&under_skill(&env, "exec", echo_hi, "reader")),
        denied("skill_denied", "skill reader does not include tool exec")
    );
    assert_eq!(
        env.cmd(&["skills", "overrides", "--json"])
            .run()
            .ok()
            .json(),
        json!([])
    );
    let entry = |kind: &str, summary: &str| ("ann".to_owned(), kind.to_owned(), summary.to_owned());
    assert_eq!(
        changes(&env, "skill_override"),
        [
            entry(
                "skill_override_cleared",
                "cleared the addition of tool exec for skill reader"
            ),
            entry(
                "skill_override_cleared",
                "cleared the removal of tool read_file for skill reader"
            ),
            entry(
                "skill_override_set",
                "added tool exec to skill reader at access level standard"
            ),
            entry(
                "skill_override_set",
                "removed tool read_file from skill reader"
            ),
        ]
    );

    // An administrator's classification beats the heuristic's.
    let heuristic = classification(&env, "count_words")["classification"].clone();
    assert_eq!(
        as_ann(
            &env,
            &[
                "skills",
                "classify",
                "count_words",
                "--set",
                "code_execute",
                "--note",
                "runs wc",
            ],
        )
        .ok()
        .stdout,
        "tool count_words: code_execute 1.00 (admin by ann)\n"
    );
    let admin = classification(&env, "count_words");
    assert_eq!(
        (&admin["classification"], &admin["classified_by"]),
        (
            &json!({
                "source": "admin",
                "capabilities": [{"capability": "code_execute", "confidence": 1.0}],
                "detail": "runs wc"
            }),
            &json!("ann")
        )
    );
    assert_eq!(
        resolved_names(&env, "reader"),
        [
            via_capability("file_search", "filesystem_read"),
            via_capability("list_directory", "filesystem_read"),
            via_capability("read_file", "filesystem_read"),
        ]
    );
    assert_eq!(
        outcome(&under_skill(
            &env,
            "count_words",
            json!({"path": "notes.txt"}),
            "reader"
        )),
        denied(
            "skill_denied",
            "skill reader does not include tool count_words"
        )
    );

    as_ann(&env, &["skills", "classify", "count_words", "--clear"]).ok();
    assert_eq!(
        classification(&env, "count_words")["classification"],
        heuristic
    );
    assert_eq!(
        resolved_names(&env, "reader")[0],
        via_capability("count_words", "filesystem_read")
    );
    let kinds: Vec<(String, String)> = changes(&env, "tool_classif")
        .into_iter()
        .map(|(actor, kind, _)| (actor, kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ann".to_owned(), "tool_classification_cleared".to_owned()),
            ("ann".to_owned(), "tool_classified".to_owned()),
        ]
    );
}

#[test]
fn override_errors_are_clear() {
    let env = Env::new();
    skills(&env);
    let skills_dir = env.ws.join("skills").display().to_string();
    // Each exits with its kind's code (9 not found, 8 invalid; 2 a bad argument to the CLI).
    let cases: [(&[&str], i32, String); 5] = [
        (
            &["skills", "override", "ghost", "add", "read_file"],
            9,
            format!("error: no skill named \"ghost\" is in {skills_dir}\n"),
        ),
        (
            &["skills", "override", "reader", "add", "no_such_tool"],
            9,
            "error: no tool named \"no_such_tool\" is registered\n".to_owned(),
        ),
        (
            &["skills", "override", "reader", "add", "exec", "--level", "root"],
            2,
            "error: --level: unknown access level \"root\": expected standard, elevated or admin\n"
                .to_owned(),
        ),
        (
            &["skills", "classify", "no_such_tool", "--set", "code_execute"],
            9,
            "error: no tool named \"no_such_tool\" is registered\n".to_owned(),
        ),
        (
            &["skills", "classify", "echo", "--set", "telepathy"],
            8,
            "error: \"telepathy\" is not a capability in the catalog; known: web_search, web_read, \
             browser_control, filesystem_read, filesystem_write, code_execute, database_read, \
             database_write, api_call, messaging, knowledge_search, knowledge_write, memory, \
             system_info, content_check\n"
                .to_owned(),
        ),
    ];
    for (args, code, stderr) in cases {
        let r = env.cmd(args).run();
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (code, stderr.as_str()),
            "{args:?}"
        );
    }
    // Nothing was recorded or changed.
    assert_eq!(
        env.cmd(&["skills", "overrides", "--json"])
            .run()
            .ok()
            .json(),
        json!([])
    );
    assert_eq!(changes(&env, ""), []);
    assert_eq!(
        classification(&env, "echo")["classification"]["source"],
        "static"
    );
}

#[test]
fn saving_a_skill_validates_first_and_keeps_the_old_file_on_error() {
    let env = Env::new();
    skills(&env);
    let skill_md = env.ws.join("skills/reader/SKILL.md");
    let source = |name: &str, text: &str| {
        let p = env.root.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let good_text = "---\nname: reader\ndescription: Reads files, v2.\npermissions: [filesystem_read]\ntools: [echo]\n---\nBody v2\n";
    let good = source("good.md", good_text);
    assert_eq!(
        env.cmd(&["skills", "save", "reader", &good])
            .run()
            .ok()
            .stdout,
        format!("saved {}\n", skill_md.display())
    );
    assert_eq!(std::fs::read_to_string(&skill_md).unwrap(), good_text);
    assert_eq!(
        env.cmd(&["skills", "text", "reader"]).run().ok().stdout,
        good_text
    );
    // In force at once.
    assert_eq!(
        resolved_names(&env, "reader")[0],
        ("echo".to_owned(), json!({"kind": "manifest"}))
    );

    let before = std::fs::read(&skill_md).unwrap();
    let bad = source(
        "bad.md",
        "---\nname: reader\ndescription: Bad.\ntools:\n  - {name: exec, access_level: root}\n---\n",
    );
    let mismatch = source(
        "mismatch.md",
        "---\nname: other-name\ndescription: Named for another folder.\n---\n",
    );
    let refusals = [
        (
            &bad,
            "reader",
            format!(
                "{bad}:5: error: tools[0].access_level: unknown access level \"root\": expected standard, elevated or admin\n"
            ),
        ),
        (
            &mismatch,
            "reader",
            format!(
                "{mismatch}:2: error: name: \"other-name\" must equal the skill's folder name \"reader\"\n"
            ),
        ),
        (
            &mismatch,
            "mismatch",
            format!(
                "{mismatch}:2: error: name: \"other-name\" must equal the skill's folder name \"mismatch\"\n"
            ),
        ),
    ];
    for (file, skill, diagnostic) in refusals {
        let r = env.cmd(&["skills", "save", skill, file]).run();
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr),
            (
                1,
                "",
                format!("{diagnostic}error: not saved; the skill in force is unchanged\n")
            ),
            "{file} as {skill}"
        );
        assert_eq!(std::fs::read(&skill_md).unwrap(), before, "{file}");
    }
    // No temporary file was left beside the SKILL.md, and no folder made for a refused skill.
    let entries = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(env.ws.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(entries("skills/reader"), ["SKILL.md"]);
    assert_eq!(entries("skills"), ["reader", "sysinfo"]);

    // A new skill gets its folder.
    let fresh_text = "---\nname: fresh\ndescription: New.\ntools: [echo]\n---\n";
    let fresh = source("fresh.md", fresh_text);
    assert_eq!(
        env.cmd(&["skills", "save", "fresh", &fresh])
            .run()
            .ok()
            .stdout,
        format!(
            "created {}\n",
            env.ws.join("skills/fresh/SKILL.md").display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("skills/fresh/SKILL.md")).unwrap(),
        fresh_text
    );
    assert_eq!(
        resolved_names(&env, "fresh"),
        [("echo".to_owned(), json!({"kind": "manifest"}))]
    );

    // From stdin, with a warning that does not stop the save.
    let with_warning = "---\nname: reader\ndescription: Reads.\ncolour: blue\n---\n";
    let mut cmd = env.cmd(&["skills", "save", "reader", "-"]);
    let mut child = cmd
        .cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(with_warning.as_bytes())
        .unwrap();
    let r = Run::from(child.wait_with_output().unwrap());
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .ends_with(&format!("saved {}\n", skill_md.display())),
        "{}",
        r.stdout
    );
    // The warning is shown (the stream is not pinned: errors go to stderr, warnings to stdout).
    let warning = "<stdin>:4: warning: colour: unknown field \"colour\" is ignored";
    assert!(
        r.stdout
            .lines()
            .chain(r.stderr.lines())
            .any(|l| l == warning),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&skill_md).unwrap(), with_warning);
}

#[test]
fn metrics_count_calls_and_refusals() {
    let env = Env::new();
    skills(&env);
    add_tool(&env, "count_words.yaml", COUNT_WORDS);
    as_ann(&env, &["skills", "override", "reader", "add", "echo"]).ok();
    let read = json!({"path": "notes.txt"});
    assert_eq!(
        under_skill(&env, "read_file", read.clone(), "reader").code,
        0
    );
    assert_eq!(under_skill(&env, "count_words", read, "reader").code, 0);
    assert_eq!(under_skill(&env, "echo", json!({}), "reader").code, 0);
    let write = json!({"path": "out.txt", "content": "x"});
    for _ in 0..2 {
        assert_eq!(
            outcome(&under_skill(&env, "write_file", write.clone(), "reader")).1,
            Some("skill_denied".to_owned())
        );
    }
    // Refused before the skill layer: a call, but not a refusal by the skill.
    let forbidden = under_skill(
        &env,
        "read_file",
        json!({"path": "~/.ssh/id_rsa"}),
        "reader",
    );
    assert_eq!(outcome(&forbidden).1, Some("path_forbidden".to_owned()));
    // Calls without a skill count for none.
    env.call("echo", json!({})).ok();

    let metrics = env.cmd(&["skills", "metrics", "--json"]).run().ok().json();
    let by_skill: Vec<Value> = metrics["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            let last = s.as_object_mut().unwrap().remove("last_call_at").unwrap();
            assert_eq!(
                last.is_u64(),
                s["calls"] != 0,
                "last_call_at is a time exactly when there were calls: {s}"
            );
            s
        })
        .collect();
    assert_eq!(
        by_skill,
        [
            json!({
                "skill": "reader",
                "loaded": true,
                "activations": 0,
                "resolved": {"capability": 4, "override": 1},
                "overrides": 1,
                "calls": 6,
                "skill_denied": 2
            }),
            json!({
                "skill": "sysinfo",
                "loaded": true,
                "activations": 0,
                "resolved": {"capability": 5},
                "overrides": 0,
                "calls": 0,
                "skill_denied": 0
            }),
        ]
    );
    assert_eq!(
        metrics["classification_sources"],
        json!({"static": 43, "heuristic": 1})
    );
    let text = env.cmd(&["skills", "metrics"]).run().ok().stdout;
    assert!(
        text.ends_with("tools classified by: static 43, heuristic 1\n"),
        "{text}"
    );
}

#[test]
fn a_skill_entry_limits_the_domains_and_the_rate_of_its_tool() {
    let env = Env::new();
    add_tool(
        &env,
        "fetch_page.yaml",
        r#"
name: fetch_page
description: Fetch a web page by URL.
category: network
parameters:
  type: object
  properties:
    url: { type: string, format: uri }
  required: [url]
command:
  argv: ["echo", "{url}"]
"#,
    );
    env.write(
        "skills/web/SKILL.md",
        "---\nname: web\ndescription: Reads the docs.\ntools:\n  - {name: fetch_page, allowed_domains: [docs.rs], rate_limit: {per_minute: 2}}\n---\n",
    );
    let fetch = |url: &str| under_skill(&env, "fetch_page", json!({"url": url}), "web");
    let off_limits = |url: &str| {
        denied(
            "skill_denied",
            &format!(
                "under skill web, tool fetch_page may not reach \"{url}\" at /url: it is not in allowed_domains"
            ),
        )
    };

    // Refused by the skill before the rate limit is consulted, so these use none of it.
    for url in ["https://example.com/", "https://docs.rs@example.com/"] {
        assert_eq!(outcome(&fetch(url)), off_limits(url), "{url}");
    }
    for url in ["https://docs.rs/x", "https://docs.rs/y"] {
        let ok = fetch(url);
        assert_eq!(ok.code, 0, "{}", ok.stdout);
        assert_eq!(ok.json()["output"], format!("{url}\n"));
    }
    let limited = fetch("https://docs.rs/z");
    let (code, error, message) = outcome(&limited);
    assert_eq!(
        (code, error),
        (7, Some("rate_limited".to_owned())),
        "{}",
        limited.stdout
    );
    let message = message.unwrap();
    assert!(
        message.starts_with("fetch_page reached its limit of 2 calls per minute; retry in "),
        "{message}"
    );
    assert_eq!(
        layer(&limited, "rate_limit")["rule"],
        json!({"rule": "tools: fetch_page rate_limit", "source": "skill web"})
    );
    // The limit and the domains belong to the skill's entry, not to the tool.
    env.call("fetch_page", json!({"url": "https://example.com/"}))
        .ok();
}
