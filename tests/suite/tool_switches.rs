//! `toolwarden tools disable|enable` through the real binary: a tool switched off for the tier
//! this installation runs is refused in every later process with the tier, the person and the
//! time in its trace (and still audited); other tiers leave it alone; no-ops, unknown tools and
//! unknown tiers are reported and change nothing; `tools list` and `audit changes` show it all.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::check_status as expect;
use super::support::{Env, Run};

/// Runs a command as the person ann (the admin log records the user, not the agent id).
fn as_ann(env: &Env, args: &[&str]) -> Run {
    let mut cmd = env.cmd(args);
    cmd.cmd.env("USER", "ann");
    cmd.run()
}

/// `tools list --json` as (name, policy, disabled tiers) for the given tools.
fn listed(env: &Env, names: &[&str]) -> Vec<(String, Value, Value)> {
    let list = env.cmd(&["tools", "list", "--json"]).run().ok().json();
    list.as_array()
        .unwrap()
        .iter()
        .filter(|t| names.contains(&t["name"].as_str().unwrap()))
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["policy"].clone(),
                t["disabled_tiers"].clone(),
            )
        })
        .collect()
}

/// The admin log as (actor, kind, summary, details), newest first, and the newest entry's time
/// as the CLI prints it.
fn changes(env: &Env) -> (Vec<(String, String, String, Value)>, String) {
    let rows = env.cmd(&["audit", "changes", "--json"]).run().ok().json();
    let rows = rows.as_array().unwrap();
    let newest = rows.first().map_or(String::new(), |r| {
        tw_core::policy::TierSwitch {
            tier: tw_core::LicenseTier::Core,
            by: String::new(),
            at: r["at"].as_i64().unwrap(),
        }
        .at_rfc3339()
    });
    let rows = rows
        .iter()
        .map(|r| {
            (
                r["actor"].as_str().unwrap().to_owned(),
                r["kind"].as_str().unwrap().to_owned(),
                r["summary"].as_str().unwrap().to_owned(),
                r["details"].clone(),
            )
        })
        .collect();
    (rows, newest)
}

#[test]
fn tools_disable_and_enable_switch_a_tool_per_tier_for_every_later_process() {
    let env = Env::new().with_config("license_tier = \"pro\"\n");
    expect(&env.call("echo", json!({})), 0, "success", None);

    // Off for the tier this installation runs (the default), by ann.
    assert_eq!(
        as_ann(&env, &["tools", "disable", "echo"]).ok().stdout,
        "switched echo off for the pro tier\n"
    );
    let (_, at) = changes(&env);
    let refused = env.call("echo", json!({}));
    expect(&refused, 7, "permission_denied", Some("tool_disabled"));
    let reason = format!("tool echo is switched off for the pro tier (by ann at {at})");
    assert_eq!(
        refused.json()["decision"]["trace"][0],
        json!({
            "layer": "tools",
            "decision": "deny",
            "rule": {"rule": "echo off for tier pro", "source": format!("switched off by ann at {at}")},
            "reason": reason,
            "code": "tool_disabled",
            "severity": "warning",
        })
    );
    assert_eq!(refused.json()["error"]["message"], reason);

    // Again, by someone else, together with another tier: the first is a no-op that says so.
    assert_eq!(
        env.cmd(&[
            "tools", "disable", "echo", "--tier", "teams", "--tier", "pro"
        ])
        .run()
        .ok()
        .stdout,
        format!(
            "echo is already off for the pro tier (switched off by ann at {at}); nothing changed\n\
             switched echo off for the teams tier\n"
        )
    );
    assert_eq!(
        listed(&env, &["echo", "read_file"]),
        [
            ("echo".to_owned(), json!("deny"), json!(["pro", "teams"])),
            ("read_file".to_owned(), json!("allow"), json!([])),
        ]
    );

    // Unknown tiers and tools are usage errors that change nothing.
    let bad_tier = env
        .cmd(&["tools", "disable", "read_file", "--tier", "platinum"])
        .run();
    assert_eq!(
        (
            bad_tier.code,
            bad_tier.stdout.as_str(),
            bad_tier.stderr.lines().next()
        ),
        (
            2,
            "",
            Some(
                "error: invalid value 'platinum' for '--tier <TIER>': unknown license tier \
                 \"platinum\": expected one of core, pro, teams, enterprise"
            )
        )
    );
    let bad_tool = env.cmd(&["tools", "enable", "no_such_tool"]).run();
    assert_eq!(
        (
            bad_tool.code,
            bad_tool.stdout.as_str(),
            bad_tool.stderr.as_str()
        ),
        (
            2,
            "",
            "error: no tool named \"no_such_tool\" is registered (see `toolwarden tools list`)\n"
        )
    );
    assert_eq!(
        listed(&env, &["read_file"]),
        [("read_file".to_owned(), json!("allow"), json!([]))]
    );

    // Switched off for another tier only: this pro installation runs it again.
    assert_eq!(
        as_ann(&env, &["tools", "enable", "echo"]).ok().stdout,
        format!("switched echo on for the pro tier (it was switched off by ann at {at})\n")
    );
    assert_eq!(
        env.cmd(&["tools", "enable", "echo", "--tier", "enterprise"])
            .run()
            .ok()
            .stdout,
        "echo is already on for the enterprise tier; nothing changed\n"
    );
    expect(&env.call("echo", json!({})), 0, "success", None);

    // Every change, and only the changes, in the admin log.
    let entry = |actor: &str, kind: &str, summary: &str, tier: &str, enabled: bool| {
        (
            actor.to_owned(),
            kind.to_owned(),
            summary.to_owned(),
            json!({"tool": "echo", "tier": tier, "enabled": enabled}),
        )
    };
    assert_eq!(
        changes(&env).0,
        [
            entry(
                "ann",
                "tool_enabled",
                "tool echo switched on for the pro tier",
                "pro",
                true
            ),
            entry(
                "tester",
                "tool_disabled",
                "tool echo switched off for the teams tier",
                "teams",
                false
            ),
            entry(
                "ann",
                "tool_disabled",
                "tool echo switched off for the pro tier",
                "pro",
                false
            ),
        ]
    );
    // One audit record per call, the refused one included.
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (r.tool.as_str(), r.error_code.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("echo", None),
            ("echo", Some("tool_disabled")),
            ("echo", None)
        ]
    );
}
