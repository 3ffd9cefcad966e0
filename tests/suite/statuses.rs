//! Every status a call can end in, reached through the real CLI, with its exit code and its audit
//! record.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::check_status as check;
use super::support::{Env, Run};

/// Custom tools used across this module: a sleeper (timeouts, cancellation), a failing command and
/// one that needs strict isolation (refused where the sandbox cannot be built).
pub const TOOLS: &str = r#"
[[tools]]
name = "sleeper"
description = "Record the shell's pid, then sleep."
category = "system"
parameters = [
  { name = "pidfile", type = "string", required = true },
  { name = "seconds", type = "string", required = true },
]
constraints = { max_execution_time_ms = 400 }
[tools.command]
argv = ["sh", "-c", "echo $$ > \"$1\"; sleep 1000 & echo $! >> \"$1\"; sleep \"$2\"", "sh", "{pidfile}", "{seconds}"]

[[tools]]
name = "fails"
description = "Exit with status 3 after complaining."
category = "system"
[tools.command]
argv = ["sh", "-c", "echo partial; echo 'disk on fire' >&2; exit 3"]

[[tools]]
name = "isolated"
description = "Needs strict isolation."
category = "code_execution"
constraints = { isolation = "strict" }
[tools.command]
argv = ["true"]
"#;

pub fn env_with_tools() -> Env {
    let env = Env::new();
    let file = env.root.path().join("tools.toml");
    std::fs::write(&file, TOOLS).unwrap();
    env.cmd(&["tools", "add", file.to_str().unwrap()])
        .run()
        .ok();
    env
}

/// Whether a process is gone (or a zombie nobody has reaped yet, which runs nothing).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

fn pids(file: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[test]
fn every_status_has_its_exit_code_and_one_audit_record() {
    let env = env_with_tools().with_config(
        r#"
[policy]
default = "deny"
allow = ["group:fs", "group:system", "group:custom", "isolated"]
deny = ["list_directory"]
[policy.exec]
security = "full"
"#,
    );
    env.write("hello.txt", "hello\n");
    // The same tools where the sandbox helper is missing: strict cannot be given, so the call is
    // refused, never run with less.
    let no_sandbox = env_with_tools().with_config(
        r#"
[policy]
allow = ["isolated"]
[policy.exec]
security = "full"
[sandbox]
helper = "/nonexistent/tw-sandbox-helper"
"#,
    );
    let pidfile = env.root.path().join("pids");
    let pidfile = pidfile.to_str().unwrap();

    let runs = [
        ("success", env.call("echo", json!({"x": 1})), 0, Some(None)),
        (
            "not found",
            env.call("no_such_tool", json!({})),
            9,
            Some(Some("tool_not_found")),
        ),
        (
            "denied",
            env.call("list_directory", json!({})),
            7,
            Some(Some("policy_denied")),
        ),
        (
            "invalid",
            env.call("read_file", json!({"path": 7})),
            8,
            Some(Some("invalid_arguments")),
        ),
        (
            "confirm",
            env.call("delete_file", json!({"path": "hello.txt"})),
            5,
            Some(Some("confirmation_required")),
        ),
        (
            "failed",
            env.call("fails", json!({})),
            1,
            Some(Some("execution_failed")),
        ),
        (
            "sandbox",
            no_sandbox.call("isolated", json!({})),
            6,
            Some(Some("sandbox_unavailable")),
        ),
        (
            "timeout",
            env.call("sleeper", json!({"pidfile": pidfile, "seconds": "30"})),
            3,
            Some(Some("timeout")),
        ),
    ];
    let expected_status = [
        "success",
        "not_found",
        "permission_denied",
        "validation_error",
        "requires_confirmation",
        "failed",
        "sandbox_error",
        "timeout",
    ];
    for ((what, run, code, err), status) in runs.iter().zip(expected_status) {
        let err = err.unwrap_or(None);
        eprintln!("checking {what}");
        check(run, *code, status, err);
    }
    // The confirmation stop ran nothing.
    assert!(env.ws.join("hello.txt").exists());
    // The failure carries the end of stderr and the partial stdout.
    let failed = runs[5].1.json();
    assert_eq!(
        failed["error"]["message"],
        "sh exited with status 3: disk on fire"
    );
    assert_eq!(failed["output"], "partial\n");
    // The timed-out tool and its background grandchild are gone.
    let timed_out = pids(std::path::Path::new(pidfile));
    assert_eq!(timed_out.len(), 2, "pidfile: {timed_out:?}");
    for pid in timed_out {
        assert!(
            process_gone(pid),
            "process {pid} outlived its timed-out call"
        );
    }
    // The denial explains itself with the rule and where it was written.
    let denied = runs[2].1.json();
    let trace = &denied["decision"]["trace"][0];
    assert_eq!(trace["rule"]["rule"], "list_directory");
    let source = trace["rule"]["source"].as_str().unwrap();
    // Line 6: the harness puts `license_tier` on line 1.
    assert!(source.ends_with("config.toml:6"), "{source}");

    // Each call left its record in the data directory of the Toolwarden it went to.
    let mut ids: Vec<String> = runs
        .iter()
        .map(|r| r.1.json()["execution_id"].as_str().unwrap().to_owned())
        .collect();
    let sandbox_id = ids.remove(6);
    let sandbox_rows = no_sandbox.audit_rows();
    assert_eq!(
        sandbox_rows
            .iter()
            .map(|r| (r.execution_id.clone(), r.status.to_string()))
            .collect::<Vec<_>>(),
        [(sandbox_id, "sandbox_error".to_owned())]
    );
    let mut expected_status = expected_status.to_vec();
    expected_status.remove(6);
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| r.execution_id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    assert_eq!(
        rows.iter()
            .map(|r| r.status.to_string())
            .collect::<Vec<_>>(),
        expected_status
    );
    assert_eq!(rows[2].decision.as_deref(), Some("deny"));
    assert_eq!(rows[0].agent_id, "cli");
    assert_eq!(rows[0].user_id.as_deref(), Some("tester"));
}

#[test]
fn ctrl_c_cancels_the_call_kills_its_processes_and_records_it() {
    let env = env_with_tools();
    let pidfile = env.root.path().join("pids");
    let child = env
        .cmd(&[
            "call",
            "sleeper",
            "--timeout",
            "60000",
            "--args",
            &json!({"pidfile": pidfile, "seconds": "30"}).to_string(),
        ])
        .spawn();
    // The tool's own limit is 400 ms, so this call would time out; cancel it before that.
    let start = Instant::now();
    while pids(&pidfile).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let run = Run::from(out);
    check(&run, 4, "cancelled", Some("cancelled"));
    for pid in pids(&pidfile) {
        assert!(
            process_gone(pid),
            "process {pid} outlived its cancelled call"
        );
    }
    let rows = env.audit_rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status.to_string(), "cancelled");
    assert_eq!(
        rows[0].execution_id,
        run.json()["execution_id"].as_str().unwrap()
    );
}

#[test]
fn disabled_tools_and_license_tiers_are_denied_with_their_reason() {
    let env = Env::new().with_config(
        r#"
[tools.echo]
enabled = false
"#,
    );
    let run = env.call("echo", json!({}));
    check(&run, 7, "permission_denied", Some("tool_disabled"));
    assert_eq!(
        run.json()["error"]["message"],
        "tool echo is disabled by the administrator"
    );

    let env = Env::new();
    let spec = env.root.path().join("pro.json");
    std::fs::write(
        &spec,
        json!({
            "name": "pro_only", "description": "A pro tool", "category": "system",
            "license_tier": "pro", "command": {"argv": ["true"]}
        })
        .to_string(),
    )
    .unwrap();
    env.cmd(&["tools", "add", spec.to_str().unwrap()])
        .run()
        .ok();
    // The installation is downgraded to core: the tool stays registered but cannot run.
    let env = env.with_config("license_tier = \"core\"\n");
    let run = env.call("pro_only", json!({}));
    check(&run, 7, "permission_denied", Some("tier_unavailable"));
    assert_eq!(
        run.json()["error"]["message"],
        "tool pro_only needs the pro tier; this installation runs core"
    );
    // And core includes no custom tools at all, so registering one is refused up front.
    let spec = env.root.path().join("core.json");
    std::fs::write(
        &spec,
        json!({"name": "mine", "description": "d", "category": "system", "command": {"argv": ["true"]}})
            .to_string(),
    )
    .unwrap();
    let add = env.cmd(&["tools", "add", spec.to_str().unwrap()]).run();
    // Denied by the tier: a call's permission_denied code.
    assert_eq!(add.code, 7, "{}", add.stderr);
    assert!(
        add.stderr
            .contains("the core tier includes 0 custom tools and 0 are registered"),
        "{}",
        add.stderr
    );
}

#[test]
fn every_schema_violation_is_reported_with_its_pointer() {
    let env = Env::new();
    let run = env.call(
        "read_file",
        json!({"path": "", "start_line": 0, "max_bytes": "lots", "colour": "red"}),
    );
    check(&run, 8, "validation_error", Some("invalid_arguments"));
    let violations: Vec<(String, String)> = run.json()["error"]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["pointer"].as_str().unwrap().to_owned(),
                v["keyword"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut violations = violations;
    violations.sort();
    assert_eq!(
        violations,
        vec![
            ("".to_owned(), "additionalProperties".to_owned()),
            ("/max_bytes".to_owned(), "type".to_owned()),
            ("/path".to_owned(), "minLength".to_owned()),
            ("/start_line".to_owned(), "minimum".to_owned()),
        ]
    );
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("arguments do not match the schema (4 violations): ")
    );
}

#[test]
fn outputs_over_the_limit_are_truncated_and_flagged() {
    let env = Env::new();
    let big = "é".repeat(40_000); // 80,000 bytes
    env.write("big.txt", &big);
    let run = env.call("read_file", json!({"path": "big.txt"})).ok();
    let r = run.json();
    assert_eq!(r["output"]["truncated"], true);
    let content = r["output"]["content"].as_str().unwrap();
    assert!(
        content.len() <= 32 * 1024 && content.len() > 30_000,
        "{}",
        content.len()
    );
    assert!(r["metadata"]["output_bytes"].as_u64().unwrap() <= 32 * 1024);

    let env = Env::new();
    let spec = env.root.path().join("loud.json");
    std::fs::write(
        &spec,
        json!({
            "name": "loud", "description": "Print a lot", "category": "system",
            "constraints": {"max_output_bytes": 1000},
            "command": {"argv": ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"]}
        })
        .to_string(),
    )
    .unwrap();
    env.cmd(&["tools", "add", spec.to_str().unwrap()])
        .run()
        .ok();
    let r = env.call("loud", json!({})).ok().json();
    assert_eq!(r["metadata"]["truncated"], true);
    assert_eq!(r["output"], "x".repeat(1000));
    assert_eq!(r["metadata"]["output_bytes"], 1000);
}
