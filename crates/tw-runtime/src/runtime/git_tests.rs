//! `git_status` through the whole pipeline on a real repository made with Debian's git: the
//! branch, its upstream and how far ahead and behind, staged (modified, added, renamed),
//! unstaged and untracked paths, the last commits; a directory that is not a repository is a
//! clear failure; and a repository whose own config names a program for git to run
//! (`core.fsmonitor`) does not get it run where it could touch anything.
#![allow(clippy::disallowed_methods)] // the test makes its repositories with git

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use super::net_tests::{audited, succeeded};
use super::policy_tests::{Install, code};

/// Runs git in `dir` with a fixed identity and no user config, and checks it succeeded.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ann")
        .env("GIT_AUTHOR_EMAIL", "ann@example.test")
        .env("GIT_COMMITTER_NAME", "Ann")
        .env("GIT_COMMITTER_EMAIL", "ann@example.test")
        .output()
        .unwrap_or_else(|e| panic!("git is missing ({e}): scripts/setup installs it"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repositorys_branch_upstream_changes_and_commits_are_reported() {
    let install = Install::new("");
    let origin = install.path("origin.git");
    let other = install.path("other");
    let ws = install.path("ws");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "a.txt", "a\n");
    write(&ws, "b.txt", "b\n");
    write(&ws, "old.txt", "old\n");
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    git(&ws, &["remote", "add", "origin", origin.to_str().unwrap()]);
    git(&ws, &["push", "-q", "-u", "origin", "main"]);
    // Someone else pushes a commit: one behind after a fetch.
    git(
        &install.path(""),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    write(&other, "theirs.txt", "theirs\n");
    git(&other, &["add", "."]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    git(&other, &["push", "-q"]);
    git(&ws, &["fetch", "-q"]);
    // A local commit: one ahead.
    write(&ws, "a.txt", "a2\n");
    git(&ws, &["commit", "-q", "-am", "second: change a"]);
    // Staged: a modification, an addition, a rename; unstaged: a modification; untracked.
    write(&ws, "a.txt", "a3\n");
    git(&ws, &["add", "a.txt"]);
    write(&ws, "new.txt", "new\n");
    git(&ws, &["add", "new.txt"]);
    git(&ws, &["mv", "old.txt", "renamed.txt"]);
    write(&ws, "b.txt", "b2\n");
    write(&ws, "scratch.txt", "scratch\n");

    let rt = install.open().await.unwrap();
    let out = succeeded(&rt, "git_status", json!({"commits": 2})).await;
    assert_eq!(
        (
            &out["branch"],
            &out["upstream"],
            &out["ahead"],
            &out["behind"]
        ),
        (&json!("main"), &json!("origin/main"), &json!(1), &json!(1))
    );
    assert_eq!(out["head"].as_str().unwrap().len(), 40, "{out}");
    assert_eq!(
        out["staged"],
        json!([
            {"path": "a.txt", "change": "modified"},
            {"path": "new.txt", "change": "added"},
            {"path": "renamed.txt", "change": "renamed", "from": "old.txt"}
        ])
    );
    assert_eq!(
        out["unstaged"],
        json!([{"path": "b.txt", "change": "modified"}])
    );
    assert_eq!(out["untracked"], json!(["scratch.txt"]));
    assert_eq!(
        (&out["clean"], &out["truncated"]),
        (&json!(false), &json!(false))
    );
    let subjects: Vec<&Value> = out["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["subject"])
        .collect();
    assert_eq!(subjects, [&json!("second: change a"), &json!("first")]);
    assert_eq!(out["commits"][0]["author"], json!("Ann"));
    assert!(out["commits"][0]["time"].as_str().unwrap().ends_with('Z'));

    let out = succeeded(&rt, "git_status", json!({"commits": 0, "untracked": false})).await;
    assert_eq!(
        (&out["untracked"], &out["commits"]),
        (&json!([]), &json!([]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_repository_and_a_directory_that_is_not_one() {
    let install = Install::new("");
    let ws = install.path("ws");
    std::fs::create_dir_all(ws.join("plain")).unwrap();
    std::fs::create_dir_all(ws.join("repo")).unwrap();
    git(&ws.join("repo"), &["init", "-q", "-b", "trunk"]);
    write(&ws.join("repo"), "x.txt", "x\n");
    let rt = install.open().await.unwrap();

    let out = succeeded(&rt, "git_status", json!({"path": "repo"})).await;
    assert_eq!(
        (
            &out["branch"],
            &out["head"],
            &out["commits"],
            &out["untracked"]
        ),
        (&json!("trunk"), &Value::Null, &json!([]), &json!(["x.txt"]))
    );

    let (result, row) = audited(
        &rt,
        "git_status",
        json!({"path": "plain"}),
        Caller::agent("agent-7"),
    )
    .await;
    assert_eq!(
        (result.status, row.status),
        (ToolStatus::Failed, ToolStatus::Failed)
    );
    assert_eq!(code(&result), Some("not_a_repository"));

    let (result, _) = audited(
        &rt,
        "git_status",
        json!({"path": "../.."}),
        Caller::agent("agent-7"),
    )
    .await;
    assert_eq!(result.status, ToolStatus::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repositorys_own_config_cannot_make_git_touch_anything() {
    let install = Install::new("");
    let ws = install.path("ws");
    git(&ws, &["init", "-q", "-b", "main"]);
    write(&ws, "a.txt", "a\n");
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    // A hook git would run on every status, writing a file where it can.
    let marker = ws.join("pwned");
    let hook = ws.join("hook.sh");
    write(
        &ws,
        "hook.sh",
        &format!("#!/bin/sh\necho ran > {}\nexit 1\n", marker.display()),
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&ws, &["config", "core.fsmonitor", hook.to_str().unwrap()]);
    let rt = install.open().await.unwrap();
    let out = succeeded(&rt, "git_status", json!({})).await;
    assert_eq!(out["untracked"], json!(["hook.sh"]));
    assert!(!marker.exists(), "the repository's fsmonitor hook ran");
}
