//! `read_system_logs` through the whole pipeline on a real installation: a log root's files
//! listed and their newest lines read (filtered, limited, past the scan window), nothing outside
//! the root reachable by `..` or a symlink, a FIFO refused without hanging; and a real journal,
//! written by systemd's own `systemd-journal-remote`, read by a sandboxed `journalctl` with its
//! unit, priority, time and (literal) text filters. Every call leaves its audit record.
#![allow(clippy::disallowed_methods)] // the test writes its journal with systemd's own writer

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use super::net_tests::{audited, succeeded};
use super::policy_tests::{Install, code};
use super::*;

async fn call(rt: &Runtime, args: Value) -> (ToolResult, tw_store::AuditRow) {
    audited(rt, "read_system_logs", args, Caller::agent("agent-7")).await
}

async fn output(rt: &Runtime, args: Value) -> Value {
    succeeded(rt, "read_system_logs", args).await
}

/// The status and message of a call that must not succeed (its audit row agreeing).
async fn refused(rt: &Runtime, args: Value) -> (ToolStatus, Option<String>, String) {
    let (result, row) = call(rt, args.clone()).await;
    assert_eq!(result.status, row.status);
    let code = code(&result).map(str::to_owned);
    let error = result.error.unwrap_or_else(|| {
        panic!(
            "{args} must be refused, and was answered {:?}",
            result.output
        )
    });
    (result.status, code, error.message)
}

fn messages(out: &Value) -> Vec<&str> {
    out["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect()
}

const APP_LOG: &str = "starting\nINFO ready\nerror: disk slow\n\nINFO request 1\n\
                       ERROR timeout talking to db\nINFO request 2\n";

fn with_root() -> Install {
    let install = Install::new("[system]\njournal = false\n[system.log_roots]\napp = \"logs\"\n");
    std::fs::create_dir_all(install.path("logs/old")).unwrap();
    std::fs::write(install.path("logs/app.log"), APP_LOG).unwrap();
    std::fs::write(install.path("logs/old/app.1.log"), "yesterday\n").unwrap();
    std::fs::write(install.path("secret.txt"), "outside the root\n").unwrap();
    install
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_roots_files_are_listed_and_their_newest_lines_read() {
    let install = with_root();
    let rt = install.open().await.unwrap();

    let out = output(&rt, json!({"source": "app"})).await;
    assert_eq!(
        out["files"],
        json!([{"file": "app.log", "size": APP_LOG.len()}, {"file": "old/app.1.log", "size": 10}])
    );

    let out = output(&rt, json!({"source": "app", "file": "app.log", "limit": 2})).await;
    assert_eq!(
        messages(&out),
        ["ERROR timeout talking to db", "INFO request 2"]
    );
    assert_eq!(out["truncated"], json!(true), "more lines were there");

    let out = output(
        &rt,
        json!({"source": "app", "file": "app.log", "contains": "error"}),
    )
    .await;
    assert_eq!(
        messages(&out),
        ["error: disk slow", "ERROR timeout talking to db"]
    );
    assert_eq!(out["truncated"], json!(false));

    // Filters that only the journal has are refused for a file, naming the argument.
    let (status, _, message) = refused(
        &rt,
        json!({"source": "app", "file": "app.log", "unit": "x.service"}),
    )
    .await;
    assert_eq!(status, ToolStatus::ValidationError);
    assert!(
        message.starts_with("unit: applies to the journal only"),
        "{message}"
    );

    // The journal is off in this config: the schema does not offer it.
    let (status, _, message) = refused(&rt, json!({"source": "journal"})).await;
    assert_eq!(status, ToolStatus::ValidationError);
    assert!(message.contains("/source"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_outside_a_log_root_is_reachable_and_nothing_hangs() {
    let install = with_root();
    std::os::unix::fs::symlink(install.path("secret.txt"), install.path("logs/link.log")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", install.path("logs/passwd.log")).unwrap();
    let rt = install.open().await.unwrap();
    for file in ["../secret.txt", "link.log", "passwd.log", "/etc/passwd"] {
        let (status, code, message) = refused(&rt, json!({"source": "app", "file": file})).await;
        assert_eq!(
            (status, code.as_deref()),
            (ToolStatus::PermissionDenied, Some("path_outside_workspace")),
            "{file}: {message}"
        );
        assert!(!message.contains("outside the root\n"), "{message}");
    }

    // A FIFO would block a plain open: it is refused before anything is read.
    let fifo = install.path("logs/pipe.log");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let (status, code, _) = refused(&rt, json!({"source": "app", "file": "pipe.log"})).await;
    assert_eq!(
        (status, code.as_deref()),
        (ToolStatus::Failed, Some("not_a_file"))
    );

    std::fs::write(install.path("logs/core.log"), b"\x1f\x8b\x08\x00\x00binary").unwrap();
    let (_, code, _) = refused(&rt, json!({"source": "app", "file": "core.log"})).await;
    assert_eq!(code.as_deref(), Some("binary_file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_end_of_a_long_log_is_read() {
    let install = with_root();
    let mut f = std::fs::File::create(install.path("logs/big.log")).unwrap();
    let mut size = 0u64;
    let mut n = 0u64;
    while size <= (16 << 20) + 4096 {
        let line = format!("line {n:08} {}\n", "x".repeat(100));
        f.write_all(line.as_bytes()).unwrap();
        size += line.len() as u64;
        n += 1;
    }
    drop(f);
    let rt = install.open().await.unwrap();
    let out = output(&rt, json!({"source": "app", "file": "big.log", "limit": 2})).await;
    let last = format!("line {:08} ", n - 1);
    let before = format!("line {:08} ", n - 2);
    let got = messages(&out);
    assert!(
        got[0].starts_with(&before) && got[1].starts_with(&last),
        "{got:?}"
    );
    assert_eq!(out["scanned_bytes"], json!(16u64 << 20));
    assert_eq!(out["file_size"], json!(size));
    assert_eq!(out["truncated"], json!(true));

    // A text found only before the window is not found, and the answer says the file was cut.
    let out = output(
        &rt,
        json!({"source": "app", "file": "big.log", "contains": "line 00000000 "}),
    )
    .await;
    assert_eq!(out["entries"], json!([]));
    assert_eq!(out["truncated"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_log_root_refuses_to_start_at_its_line() {
    let install = Install::new("[system.log_roots]\napp = \"no-such-dir\"\n");
    let Err(RuntimeError::Config(e)) = install.open().await else {
        panic!("a missing log root must refuse to start");
    };
    assert_eq!((e.line, e.column), (Some(2), Some(7)), "{e}");
    assert!(
        e.message.starts_with("system.log_roots.app: "),
        "{}",
        e.message
    );
}

/// systemd's own writer of journal files, from Debian's systemd-journal-remote (scripts/setup).
const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

/// Writes a journal file into `dir` from entries (seconds ago, unit, priority, message), in
/// the journal export format, through systemd-journal-remote.
fn write_journal(dir: &std::path::Path, entries: &[(u64, &str, u8, &str)]) {
    assert!(
        std::path::Path::new(JOURNAL_REMOTE).exists(),
        "{JOURNAL_REMOTE} is missing: scripts/setup installs systemd-journal-remote"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let mut export = String::new();
    for (i, (ago, unit, priority, message)) in entries.iter().enumerate() {
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=0123456789abcdef0123456789abcdef\n\
             MESSAGE={message}\nPRIORITY={priority}\n_SYSTEMD_UNIT={unit}\n_PID={}\n\
             SYSLOG_IDENTIFIER={}\n\n",
            now - ago * 1_000_000,
            1_000 + i,
            100 + i,
            unit.trim_end_matches(".service"),
        ));
    }
    let mut child = Command::new(JOURNAL_REMOTE)
        .arg("-o")
        .arg(dir.join("test.journal"))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(export.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_is_read_through_journalctl_with_its_filters() {
    let install = Install::new("[system]\njournal_directory = \"journal\"\n");
    std::fs::create_dir_all(install.path("journal")).unwrap();
    write_journal(
        &install.path("journal"),
        &[
            (7200, "nginx.service", 6, "nginx started"),
            (3600, "cron.service", 6, "cron ran backup"),
            (1800, "nginx.service", 3, "nginx: upstream timed out"),
            (60, "nginx.service", 4, "nginx: slow response"),
        ],
    );
    let rt = install.open().await.unwrap();

    let out = output(&rt, json!({"source": "journal"})).await;
    assert_eq!(
        messages(&out),
        [
            "nginx started",
            "cron ran backup",
            "nginx: upstream timed out",
            "nginx: slow response"
        ],
        "oldest first, all of them"
    );
    let e = &out["entries"][2];
    assert_eq!(
        (&e["unit"], &e["priority"], &e["identifier"], &e["pid"]),
        (
            &json!("nginx.service"),
            &json!("err"),
            &json!("nginx"),
            &json!(102)
        )
    );
    assert!(e["time"].as_str().unwrap().ends_with('Z'), "{e}");
    assert_eq!(out["truncated"], json!(false));

    let out = output(&rt, json!({"source": "journal", "unit": "cron.service"})).await;
    assert_eq!(messages(&out), ["cron ran backup"]);
    let out = output(&rt, json!({"source": "journal", "priority": "warning"})).await;
    assert_eq!(
        messages(&out),
        ["nginx: upstream timed out", "nginx: slow response"]
    );
    let out = output(&rt, json!({"source": "journal", "since": "45min"})).await;
    assert_eq!(
        messages(&out),
        ["nginx: upstream timed out", "nginx: slow response"]
    );
    let until =
        humantime::format_rfc3339_seconds(SystemTime::now() - std::time::Duration::from_secs(5000));
    let out = output(
        &rt,
        json!({"source": "journal", "until": until.to_string()}),
    )
    .await;
    assert_eq!(messages(&out), ["nginx started"]);
    let out = output(
        &rt,
        json!({"source": "journal", "contains": "NGINX:", "limit": 1}),
    )
    .await;
    assert_eq!(messages(&out), ["nginx: slow response"], "the newest match");
    assert_eq!(out["truncated"], json!(true));

    // The text is literal, not a pattern.
    let out = output(&rt, json!({"source": "journal", "contains": ".*"})).await;
    assert_eq!(out["entries"], json!([]));

    let (status, _, message) =
        refused(&rt, json!({"source": "journal", "since": "yesterday-ish"})).await;
    assert_eq!(status, ToolStatus::ValidationError);
    assert!(
        message.starts_with("since: \"yesterday-ish\" is neither"),
        "{message}"
    );
    let (status, _, message) =
        refused(&rt, json!({"source": "journal", "unit": "--output=export"})).await;
    assert_eq!(
        status,
        ToolStatus::ValidationError,
        "an option is not a unit"
    );
    assert!(message.contains("/unit"), "{message}");
}

#[test]
fn a_log_root_cannot_take_the_journals_name_or_a_bad_one() {
    let path = std::path::Path::new("/etc/toolwarden/config.toml");
    for (text, column) in [
        ("[system.log_roots]\njournal = \"/var/log\"\n", 1),
        ("[system.log_roots]\n\"App Logs\" = \"/var/log\"\n", 1),
        ("[system.log_roots]\napp = \"\"\n", 7),
    ] {
        let err = Config::parse(text, path, None).unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(column)), "{err}");
        assert!(
            err.message.starts_with("system.log_roots"),
            "{}",
            err.message
        );
    }
}
