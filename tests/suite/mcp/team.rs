//! Issue 21 on a small scale, as its users would run it: two `toolwarden serve` replicas on one
//! team store (a throwaway Debian PostgreSQL), agents on each over MCP with the official Python
//! SDK, one replica killed with SIGKILL halfway (tests/mcp/load_team.py). Every reply an agent
//! got has its audit row, `audit verify` passes, and a tool limited to 100 calls a minute admits
//! exactly 100 of 400 parallel calls spread over both replicas. `scripts/bench team` runs the
//! same script with 10,000 calls for the figures.

use serde_json::Value;

use super::super::support::binary;

#[test]
fn two_replicas_on_one_team_store_survive_a_kill_with_every_reply_audited_and_exact_limits() {
    let root = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(super::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/load_team.py"))
        .arg("--toolwarden")
        .arg(binary())
        .args(["--calls", "400", "--agents", "4", "--rate-calls", "400"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.path())
        .env("TMPDIR", std::env::temp_dir())
        .current_dir(root.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{stderr}"));
    eprintln!("team load: {report}");
    assert_eq!(report["replies_without_audit_row"], 0, "{report}");
    assert_eq!(report["audit_verify_exit"], 0, "{report}");
    assert_eq!(report["not_success"], 0, "{report}");
    assert_eq!(report["rate_limit"]["admitted"], 100, "{report}");
    assert!(
        report["per_replica"]["b"]["replies"].as_u64().unwrap() > 0,
        "the killed replica answered before it died: {report}"
    );
    assert!(
        report["replies"].as_u64().unwrap() >= 300,
        "most calls were answered: {report}"
    );
    assert!(out.status.success(), "{report}\n{stderr}");
}
