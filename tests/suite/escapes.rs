//! Attack tests for the workspace confinement of the file tools, through the real CLI: every attempt
//! to read, write, list, search or delete outside the workspace is refused, the secret outside never
//! appears in any output, and nothing outside changes.

use std::os::unix::fs::symlink;

use serde_json::{Value, json};

use super::support::{Env, Run, SECRET};

fn env() -> Env {
    let env = Env::new().with_config(
        r#"
[tools.delete_file]
requires_confirmation = false
"#,
    );
    env.write("inside.txt", "inside\n");
    env.write("a/b/deep.txt", "deep\n");
    symlink(env.outside.join("secret.txt"), env.ws.join("link_file")).unwrap();
    symlink(&env.outside, env.ws.join("link_dir")).unwrap();
    symlink(env.ws.join("inside.txt"), env.ws.join("abs_link_inside")).unwrap();
    symlink("../../../outside", env.ws.join("a/b/rel_link_out")).unwrap();
    // A sibling whose name starts with the workspace's name: not inside it.
    let sibling = env.ws.with_file_name("wsx");
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("secret.txt"), SECRET).unwrap();
    env
}

/// Runs an attempt and checks it was refused with one of the expected statuses, without leaking.
fn refused(env: &Env, what: &str, tool: &str, args: Value, statuses: &[&str]) -> Run {
    let run = env.call(tool, args);
    let status = run.status();
    assert!(
        statuses.contains(&status.as_str()),
        "{what}: expected {statuses:?}, got {status}\n{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains(SECRET),
        "{what}: the secret leaked:\n{}",
        run.stdout
    );
    assert!(
        !run.stderr.contains(SECRET),
        "{what}: the secret leaked on stderr"
    );
    run
}

const DENIED: &[&str] = &["permission_denied"];

#[test]
fn escape_attempts_are_all_refused() {
    let env = env();
    let ws = env.ws.display().to_string();
    let outside = env.outside.display().to_string();
    let secret = env.secret_path();
    let sibling_secret = env
        .ws
        .with_file_name("wsx")
        .join("secret.txt")
        .display()
        .to_string();

    let reads: Vec<(&str, String)> = vec![
        ("parent", "../outside/secret.txt".into()),
        ("absolute outside", secret.clone()),
        ("climb from a subdir", "a/../../outside/secret.txt".into()),
        ("climb deep", "a/b/../../../outside/secret.txt".into()),
        ("dot slash dot dot", "./../outside/./secret.txt".into()),
        (
            "absolute inside then up",
            format!("{ws}/../outside/secret.txt"),
        ),
        (
            "absolute inside then deep up",
            format!("{ws}/a/b/../../../outside/secret.txt"),
        ),
        ("sibling with the root as prefix", sibling_secret),
        ("symlinked file", "link_file".into()),
        ("symlinked dir", "link_dir/secret.txt".into()),
        ("relative symlink out", "a/b/rel_link_out/secret.txt".into()),
        ("symlink then up", "link_dir/../outside/secret.txt".into()),
        ("proc root", format!("/proc/self/root{secret}")),
        (
            "proc fd of the root",
            "/proc/self/fd/3/../outside/secret.txt".into(),
        ),
        ("dev zero", "/dev/zero".into()),
        ("etc passwd", "/etc/passwd".into()),
        ("many parents", "../../../../../../../../etc/passwd".into()),
    ];
    for (what, path) in &reads {
        refused(&env, what, "read_file", json!({"path": path}), DENIED);
    }

    // An absolute symlink is refused even though it points inside: resolution never leaves the
    // root, so absolute targets are not followed at all.
    refused(
        &env,
        "absolute symlink",
        "read_file",
        json!({"path": "abs_link_inside"}),
        DENIED,
    );

    let writes = [
        (
            "write parent",
            json!({"path": "../outside/evil.txt", "content": "x"}),
        ),
        (
            "write absolute",
            json!({"path": format!("{outside}/evil.txt"), "content": "x"}),
        ),
        (
            "write via symlinked dir",
            json!({"path": "link_dir/evil.txt", "content": "x"}),
        ),
        (
            "write via symlinked dir with parents",
            json!({"path": "link_dir/new/evil.txt", "content": "x", "create_parents": true}),
        ),
        (
            "overwrite through a file symlink",
            json!({"path": "link_dir/secret.txt", "content": "x"}),
        ),
        (
            "append through symlinked dir",
            json!({"path": "link_dir/secret.txt", "content": "x", "mode": "append"}),
        ),
    ];
    for (what, args) in writes {
        refused(&env, what, "write_file", args, DENIED);
    }

    refused(
        &env,
        "delete via symlinked dir",
        "delete_file",
        json!({"path": "link_dir/secret.txt"}),
        DENIED,
    );
    refused(
        &env,
        "delete absolute",
        "delete_file",
        json!({"path": secret}),
        DENIED,
    );
    refused(
        &env,
        "list parent",
        "list_directory",
        json!({"path": ".."}),
        DENIED,
    );
    refused(
        &env,
        "list symlinked dir",
        "list_directory",
        json!({"path": "link_dir"}),
        DENIED,
    );
    refused(
        &env,
        "search parent",
        "file_search",
        json!({"path": "../outside", "content": "SECRET"}),
        DENIED,
    );

    // Invalid paths never reach the file system.
    refused(
        &env,
        "empty path",
        "read_file",
        json!({"path": ""}),
        &["validation_error"],
    );
    refused(
        &env,
        "NUL in path",
        "read_file",
        json!({"path": "inside.txt\u{0}../../x"}),
        &["failed", "permission_denied"],
    );

    // Nothing outside changed.
    assert_eq!(
        std::fs::read_to_string(env.outside.join("secret.txt")).unwrap(),
        SECRET
    );
    let outside_entries: Vec<_> = std::fs::read_dir(&env.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside_entries,
        vec![std::ffi::OsString::from("secret.txt")]
    );
}

#[test]
fn walks_do_not_follow_symlinks_out_and_legitimate_paths_work() {
    let env = env();
    let run = env.call("file_search", json!({"content": "SECRET"})).ok();
    assert_eq!(run.json()["output"]["matches"], json!([]));
    let run = env.call("list_directory", json!({"depth": 4})).ok();
    let kinds: Vec<(String, String)> = run.json()["output"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("link_dir".into(), "symlink".into())),
        "{kinds:?}"
    );
    assert!(
        !kinds.iter().any(|(p, _)| p.starts_with("link_dir/")),
        "{kinds:?}"
    );

    // The same tools work inside the workspace, by relative and absolute path.
    let r = env
        .call("read_file", json!({"path": "a/b/deep.txt"}))
        .ok()
        .json();
    assert_eq!(r["output"]["content"], "deep\n");
    let abs = env.ws.join("inside.txt").display().to_string();
    let r = env.call("read_file", json!({"path": abs})).ok().json();
    assert_eq!(r["output"]["content"], "inside\n");
    env.call(
        "write_file",
        json!({"path": "new/dir/x.txt", "content": "hi", "create_parents": true}),
    )
    .ok();
    assert_eq!(
        std::fs::read_to_string(env.ws.join("new/dir/x.txt")).unwrap(),
        "hi"
    );
    // Deleting a symlink removes the link, never its target.
    env.call("delete_file", json!({"path": "link_file"})).ok();
    assert!(!env.ws.join("link_file").exists());
    assert_eq!(
        std::fs::read_to_string(env.outside.join("secret.txt")).unwrap(),
        SECRET
    );
}
