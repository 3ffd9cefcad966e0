//! `toolwarden skills` through the real binary: a skills directory with a good skill, one that
//! inherits from it, and a broken one. The broken one is reported as FILE:LINE and does not stop
//! the others from loading; resolved tools say where each came from.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::support::Env;

fn with_skills() -> Env {
    let env = Env::new();
    env.write(
        "skills/retrieval/SKILL.md",
        "---\nname: retrieval\ndescription: Reads files.\ntools: [read_file, file_search]\n---\nBody\n",
    );
    env.write(
        "skills/synthesis/SKILL.md",
        "---\nname: synthesis\ndescription: Writes reports.\ninherit_tools_from: [retrieval]\ntools:\n  - {name: write_file, access_level: elevated}\n---\n",
    );
    env.write(
        "skills/broken/SKILL.md",
        "---\nname: broken\ndescription: d\ntools:\n  - {name: exec, access_level: root}\ncolour: blue\n---\n",
    );
    env
}

#[test]
fn a_broken_skill_is_reported_at_its_line_and_the_others_load() {
    let env = with_skills();
    let r = env.cmd(&["skills", "check"]).run();
    assert_eq!(r.code, 1, "{}", r.stdout);
    let file = env.ws.join("skills/broken/SKILL.md");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "{}:5: error: tools[0].access_level: unknown access level \"root\": expected standard, elevated or admin",
                file.display()
            )
            .as_str(),
            format!(
                "{}:6: warning: colour: unknown field \"colour\" is ignored",
                file.display()
            )
            .as_str(),
            "2 of 3 skills load; 1 error(s)",
        ]
    );
    let list = env.cmd(&["skills", "list", "--json"]).run().ok().json();
    let loaded: Vec<(String, bool)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["loaded"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        loaded,
        [
            ("broken".to_owned(), false),
            ("retrieval".to_owned(), true),
            ("synthesis".to_owned(), true)
        ]
    );
}

#[test]
fn resolved_tools_say_where_they_came_from() {
    let env = with_skills();
    let show = env
        .cmd(&["skills", "show", "synthesis", "--json"])
        .run()
        .ok()
        .json();
    let tools: Vec<(String, String, Value)> = show["resolved_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["access_level"].as_str().unwrap().to_owned(),
                t["provenance"].clone(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            (
                "write_file".to_owned(),
                "elevated".to_owned(),
                serde_json::json!({"kind": "manifest"})
            ),
            (
                "read_file".to_owned(),
                "standard".to_owned(),
                serde_json::json!({"kind": "inherited", "from": "retrieval"})
            ),
            (
                "file_search".to_owned(),
                "standard".to_owned(),
                serde_json::json!({"kind": "inherited", "from": "retrieval"})
            ),
        ]
    );
    let missing = env.cmd(&["skills", "show", "nope"]).run();
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no skill \"nope\""),
        "{}",
        missing.stderr
    );
}

#[test]
fn the_config_names_the_skills_directory_relative_to_itself() {
    let env = Env::new().with_config("skills_dir = \"team-skills\"\n");
    let skill = env.root.path().join("team-skills/review/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: review\ndescription: Reviews changes.\n---\n",
    )
    .unwrap();
    // The workspace's own skills folder is not read when the config names one.
    env.write(
        "skills/other/SKILL.md",
        "---\nname: other\ndescription: d\n---\n",
    );
    let list = env.cmd(&["skills", "list", "--json"]).run().ok().json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["review"]);
}

/// (exit code, error code, the skill layer's verdict) of `call TOOL --skill SKILL`.
fn under_skill(env: &Env, tool: &str, args: Value, skill: &str) -> (i32, Value, Value) {
    let r = env
        .cmd(&[
            "call",
            tool,
            "--args",
            &args.to_string(),
            "--skill",
            skill,
            "--no-wait",
        ])
        .run();
    let out = r.json();
    let skill_layer = out["decision"]["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["layer"] == "skill")
        .cloned()
        .unwrap_or(Value::Null);
    (r.code, out["error"]["code"].clone(), skill_layer)
}

#[test]
fn a_call_under_a_skill_reaches_only_the_skills_tools_even_where_policy_allows_more() {
    let env = with_skills();
    env.write("notes.txt", "hello\n");
    let read = serde_json::json!({"path": "notes.txt"});
    let write = serde_json::json!({"path": "out.txt", "content": "x"});

    // Policy allows write_file; the retrieval skill does not name it.
    let (code, error, layer) = under_skill(&env, "write_file", write.clone(), "retrieval");
    assert_eq!((code, error), (7, serde_json::json!("skill_denied")));
    assert_eq!(layer["decision"], "deny");
    assert_eq!(
        layer["reason"],
        "skill retrieval does not include tool write_file"
    );
    assert!(!env.ws.join("out.txt").exists());

    let (code, _, layer) = under_skill(&env, "read_file", read.clone(), "retrieval");
    assert_eq!(code, 0);
    assert_eq!(layer["decision"], "allow");
    assert_eq!(layer["rule"]["source"], "skill retrieval");

    // synthesis has write_file itself and read_file through retrieval.
    assert_eq!(under_skill(&env, "write_file", write, "synthesis").0, 0);
    let (code, _, layer) = under_skill(&env, "read_file", read.clone(), "synthesis");
    assert_eq!(code, 0);
    assert_eq!(
        layer["rule"]["source"],
        "skill retrieval, inherited by synthesis"
    );

    // A skill that is not loaded (unknown, or broken) reaches nothing: fail closed.
    for skill in ["ghost", "broken"] {
        let (code, error, layer) = under_skill(&env, "read_file", read.clone(), skill);
        assert_eq!(
            (code, error),
            (7, serde_json::json!("skill_denied")),
            "{skill}"
        );
        assert_eq!(
            layer["reason"],
            format!("no skill named \"{skill}\" is loaded"),
            "{skill}"
        );
    }
    // Without a skill, policy alone decides.
    assert_eq!(env.call("read_file", read).code, 0);
    // Every call was audited, naming its skill.
    let skills: Vec<Option<String>> = env.audit_rows().into_iter().map(|r| r.skill).collect();
    assert_eq!(
        skills,
        [
            Some("retrieval".to_owned()),
            Some("retrieval".to_owned()),
            Some("synthesis".to_owned()),
            Some("synthesis".to_owned()),
            Some("ghost".to_owned()),
            Some("broken".to_owned()),
            None
        ]
    );
}

#[test]
fn the_report_puts_declared_tools_next_to_the_tools_actually_used() {
    let env = with_skills();
    env.write("notes.txt", "hello\n");
    let read = serde_json::json!({"path": "notes.txt"});
    under_skill(&env, "read_file", read.clone(), "retrieval");
    under_skill(&env, "read_file", read, "retrieval");
    under_skill(
        &env,
        "write_file",
        serde_json::json!({"path": "o.txt", "content": "x"}),
        "retrieval",
    );
    let report = env
        .cmd(&["skills", "report", "retrieval", "--json"])
        .run()
        .ok()
        .json();
    let rows: Vec<(String, String, u64, u64, u64)> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_owned(),
                r["declared"].as_str().unwrap().to_owned(),
                r["calls"].as_u64().unwrap(),
                r["success"].as_u64().unwrap(),
                r["denied"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("read_file".to_owned(), "declared".to_owned(), 2, 2, 0),
            ("file_search".to_owned(), "declared".to_owned(), 0, 0, 0),
            (
                "write_file".to_owned(),
                "not in the skill".to_owned(),
                1,
                0,
                1
            ),
        ]
    );
}
