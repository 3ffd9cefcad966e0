//! `toolwarden skills` through the real binary: a skills directory with a good skill, one that
//! inherits from it, and a broken one. The broken one is reported as FILE:LINE and does not stop
//! the others from loading; resolved tools say where each came from. A skill that is not loaded
//! (unknown, broken, unreadable, or behind a directory that cannot be read) reaches nothing.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::support::Env;

fn with_skills() -> Env {
    let env = Env::new();
    write_skills(&env);
    env
}

/// Writes a good skill, one that inherits from it and a broken one; returns the directory.
fn write_skills(env: &Env) -> std::path::PathBuf {
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
    env.ws.join("skills")
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
    // Not found, like a call to a tool nobody registered.
    assert_eq!(missing.code, 9);
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
        let (code, error, _) = under_skill(&env, "read_file", read.clone(), skill);
        assert_eq!(
            (code, error),
            (7, serde_json::json!("skill_denied")),
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

/// One state of the skills directory for the attack below: how to make it, the skill the call
/// names, and the skill layer's reason for refusing it.
struct Unloaded {
    case: &'static str,
    make: fn(&Env),
    skill: &'static str,
    reason: fn(&Env) -> String,
    /// chmod stops no read as root: the case needs an unprivileged user.
    unprivileged: bool,
}

fn skill_md(env: &Env, folder: &str) -> String {
    env.ws
        .join("skills")
        .join(folder)
        .join("SKILL.md")
        .display()
        .to_string()
}

fn unknown(skill: &str) -> String {
    format!("no skill named \"{skill}\" is loaded, so it reaches no tool")
}

fn unreadable(env: &Env, skill: &str, error: &str) -> String {
    format!(
        "skill {skill} cannot be checked: the skills directory cannot be read ({}: {error}); no \
         call under a skill is allowed until it can",
        env.ws.join("skills").display()
    )
}

fn mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const UNLOADED: &[Unloaded] = &[
    Unloaded {
        case: "no skills directory",
        make: |_| {},
        skill: "no-such-skill",
        reason: |_| unknown("no-such-skill"),
        unprivileged: false,
    },
    Unloaded {
        case: "an empty skills directory",
        make: |env| std::fs::create_dir_all(env.ws.join("skills")).unwrap(),
        skill: "no-such-skill",
        reason: |_| unknown("no-such-skill"),
        unprivileged: false,
    },
    Unloaded {
        case: "an unknown name beside loaded skills",
        make: |env| drop(write_skills(env)),
        skill: "ghost",
        reason: |_| unknown("ghost"),
        unprivileged: false,
    },
    Unloaded {
        case: "a SKILL.md with an error",
        make: |env| drop(write_skills(env)),
        skill: "broken",
        reason: |env| {
            format!(
                "skill broken does not load ({}:5: error: tools[0].access_level: unknown access \
                 level \"root\": expected standard, elevated or admin), so it reaches no tool",
                skill_md(env, "broken")
            )
        },
        unprivileged: false,
    },
    Unloaded {
        case: "a SKILL.md that is a directory",
        make: |env| std::fs::create_dir_all(env.ws.join("skills/hollow/SKILL.md")).unwrap(),
        skill: "hollow",
        reason: |env| {
            format!(
                "skill hollow does not load ({}:1: error: cannot read the file: Is a directory \
                 (os error 21)), so it reaches no tool",
                skill_md(env, "hollow")
            )
        },
        unprivileged: false,
    },
    Unloaded {
        case: "a SKILL.md that is a dangling link",
        make: |env| {
            std::fs::create_dir_all(env.ws.join("skills/dangling")).unwrap();
            std::os::unix::fs::symlink("gone.md", env.ws.join("skills/dangling/SKILL.md")).unwrap();
        },
        skill: "dangling",
        reason: |env| {
            format!(
                "skill dangling does not load ({}:1: error: cannot read the file: No such file \
                 or directory (os error 2)), so it reaches no tool",
                skill_md(env, "dangling")
            )
        },
        unprivileged: false,
    },
    Unloaded {
        case: "a file where the skills directory should be",
        make: |env| drop(env.write("skills", "not a directory")),
        skill: "retrieval",
        reason: |env| unreadable(env, "retrieval", "Not a directory (os error 20)"),
        unprivileged: false,
    },
    Unloaded {
        case: "a skills directory nobody may read",
        make: |env| mode(&write_skills(env), 0o000),
        skill: "retrieval",
        reason: |env| unreadable(env, "retrieval", "Permission denied (os error 13)"),
        unprivileged: true,
    },
    Unloaded {
        case: "a skill folder nobody may read",
        make: |env| mode(&write_skills(env).join("retrieval"), 0o000),
        skill: "retrieval",
        reason: |env| {
            format!(
                "skill retrieval does not load ({}:1: error: cannot look into the folder: \
                 Permission denied (os error 13)), so it reaches no tool",
                skill_md(env, "retrieval")
            )
        },
        unprivileged: true,
    },
];

/// Issue 15: a skill name with nothing loaded behind it used to be a label, so `--skill
/// no-such-skill call echo` ran whenever the skills directory was missing or empty. A named
/// skill that is unknown, broken or unreadable now reaches nothing, and says why; the same
/// call under no skill still runs, so the skill layer alone refuses it.
#[test]
fn a_skill_that_is_not_loaded_reaches_nothing_whatever_the_skills_directory_holds() {
    let root = rustix::process::geteuid().is_root();
    let mut got = Vec::new();
    let mut expected = Vec::new();
    for c in UNLOADED {
        if c.unprivileged && root {
            super::support::skip(&format!(
                "SKIP {}: needs an unprivileged user (root reads what chmod 000 forbids); \
                 scripts/test runs this suite as one too",
                c.case
            ));
            continue;
        }
        let env = Env::new();
        (c.make)(&env);
        let (code, error, layer) = under_skill(&env, "echo", serde_json::json!({}), c.skill);
        let plain = env.call("echo", serde_json::json!({})).code;
        // Give the directory back its permissions, so it can be removed.
        for p in [env.ws.join("skills"), env.ws.join("skills/retrieval")] {
            if p.is_dir() {
                mode(&p, 0o755);
            }
        }
        got.push((c.case, code, error, layer["reason"].clone(), plain));
        expected.push((
            c.case,
            7,
            serde_json::json!("skill_denied"),
            Value::String((c.reason)(&env)),
            0,
        ));
    }
    assert_eq!(got, expected);
}

#[test]
fn a_skills_directory_that_cannot_be_read_is_an_error_not_an_empty_list() {
    let env = Env::new();
    env.write("skills", "not a directory");
    let dir = env.ws.join("skills");
    let warning = format!(
        "warning: the skills directory cannot be read ({}: Not a directory (os error 20)); every \
         call under a skill is refused until it can\n",
        dir.display()
    );
    for cmd in [
        &["skills", "list"][..],
        &["skills", "check"],
        &["skills", "show", "x"],
    ] {
        let r = env.cmd(cmd).run();
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr),
            (
                // Unavailable until it can be read.
                12,
                "",
                format!(
                    "{warning}error: the skills directory cannot be read: {}: Not a directory (os \
                     error 20)\n",
                    dir.display()
                )
            ),
            "{cmd:?}"
        );
    }
    // A missing directory is the common case, and valid: no skills.
    let env = Env::new();
    let r = env.cmd(&["skills", "list"]).run().ok();
    assert_eq!(
        (r.stdout, r.stderr),
        (
            format!("No skills in {}.\n", env.ws.join("skills").display()),
            String::new()
        )
    );
}
