//! Tools switched off per license tier, on real SQLite files: a refused call's trace names the
//! tier, the person and the time, and its audit record is written; other tiers are untouched;
//! every change is in the admin log and a no-op records nothing; another runtime on the same
//! data directory (another process) honours a change within about a second.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::LicenseTier::{Enterprise, Pro, Teams};
use tw_core::policy::{Layer, LayerVerdict, Severity, TierSwitch};
use tw_core::{Caller, ToolStatus};
use tw_store::{AdminQuery, AuditViolation};

use super::policy_tests::{Install, code};
use tw_core::policy::{Decision, RuleRef};
use tw_core::{LicenseTier, ToolError};

use super::*;
use crate::clock::FixedClock;
use crate::switches::ToolSwitchOutcome;

/// 2023-11-14T22:13:20Z.
const T0: i64 = 1_700_000_000_000_000;
const AT: &str = "2023-11-14T22:13:20Z";

/// A runtime on `install`'s data directory running `tier`, whose clock says `T0`.
async fn open(install: &Install, tier: &str) -> Runtime {
    let path = install.path("config.toml");
    let config = Config::parse(&format!("license_tier = \"{tier}\"\n"), &path, None).unwrap();
    let mut options = RuntimeOptions::new(install.path("data"), vec![install.path("ws")], config);
    options.clock = Arc::new(FixedClock(T0));
    Runtime::open(options).await.unwrap()
}

async fn echo(rt: &Runtime) -> ToolResult {
    rt.execute(rt.call("echo", json!({"n": 1}), Caller::agent("agent-7")))
        .await
}

fn switch(tier: LicenseTier, by: &str) -> TierSwitch {
    TierSwitch {
        tier,
        by: by.to_owned(),
        at: T0,
    }
}

fn outcome(
    tier: LicenseTier,
    enabled: bool,
    changed: bool,
    off: Option<TierSwitch>,
) -> ToolSwitchOutcome {
    ToolSwitchOutcome {
        tool: "echo".to_owned(),
        tier,
        enabled,
        changed,
        off,
    }
}

/// The trace line of a call refused because ann switched echo off for the pro tier.
fn switched_off_by_ann() -> LayerVerdict {
    LayerVerdict::stop(
        Layer::Tools,
        Decision::Deny,
        "tool_disabled",
        Severity::Warning,
        format!("tool echo is switched off for the pro tier (by ann at {AT})"),
    )
    .by(RuleRef::new(
        "echo off for tier pro",
        format!("switched off by ann at {AT}"),
    ))
}

/// Status, error and the trace's first (tools) line of a result, compared as one.
fn refusal(r: &ToolResult) -> (ToolStatus, Option<ToolError>, Option<LayerVerdict>) {
    (
        r.status,
        r.error.clone(),
        r.decision.as_ref().map(|d| d.trace[0].clone()),
    )
}

fn refused_by_ann() -> (ToolStatus, Option<ToolError>, Option<LayerVerdict>) {
    let verdict = switched_off_by_ann();
    (
        ToolStatus::PermissionDenied,
        Some(ToolError::new("tool_disabled", verdict.reason.clone())),
        Some(verdict),
    )
}

/// Polls until `done` (another runtime re-reads the switches every second), failing after 1.5 s.
async fn within_a_second_and_a_half(what: &str, done: impl Fn() -> bool) {
    let limit = Duration::from_millis(1500);
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < limit,
            "{what}: not seen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_switched_off_for_the_runtimes_tier_is_refused_quoting_who_and_when() {
    let install = Install::new("");
    let rt = open(&install, "pro").await;
    assert_eq!(echo(&rt).await.status, ToolStatus::Success);

    // Switched off for another tier: this pro runtime is unaffected.
    let teams = rt
        .tools()
        .set_tool_enabled("echo", Some(Teams), false, "bob")
        .await
        .unwrap();
    assert_eq!(
        teams,
        outcome(Teams, false, true, Some(switch(Teams, "bob")))
    );
    assert_eq!(echo(&rt).await.status, ToolStatus::Success);

    // Switched off for pro (the tier in force, which a switch without a tier names): refused at
    // once, with the tier, the person and the time.
    let off = rt
        .tools()
        .set_tool_enabled("echo", None, false, "ann")
        .await
        .unwrap();
    assert_eq!(off, outcome(Pro, false, true, Some(switch(Pro, "ann"))));
    assert_eq!(off.to_string(), "switched echo off for the pro tier");
    let refused = echo(&rt).await;
    assert_eq!(refusal(&refused), refused_by_ann());
    assert_eq!(
        rt.tool_decision("echo", &Caller::agent("agent-7"))
            .map(|d| (d.decision, d.trace[0].clone())),
        Some((Decision::Deny, switched_off_by_ann())),
        "listings see it too"
    );

    // The refused call has its audit record, with the trace line and the violation.
    let row = rt
        .store()
        .get(refused.execution_id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            row.status,
            row.error_code,
            row.violation,
            row.explanation.map(|e| e[0].clone())
        ),
        (
            ToolStatus::PermissionDenied,
            Some("tool_disabled".to_owned()),
            Some(AuditViolation {
                kind: "tool_disabled".to_owned(),
                severity: Severity::Warning
            }),
            Some(serde_json::to_value(switched_off_by_ann()).unwrap())
        )
    );

    // Switching it off again changes and records nothing, and says who did it first.
    let again = rt
        .tools()
        .set_tool_enabled("echo", Some(Pro), false, "carl")
        .await
        .unwrap();
    assert_eq!(again, outcome(Pro, false, false, Some(switch(Pro, "ann"))));
    assert_eq!(
        again.to_string(),
        format!(
            "echo is already off for the pro tier (switched off by ann at {AT}); nothing changed"
        )
    );
    assert_eq!(rt.tools().disabled_tiers("echo"), [Pro, Teams]);
    assert_eq!(
        rt.tools().tier_switches("echo"),
        [switch(Pro, "ann"), switch(Teams, "bob")]
    );
    assert_eq!(rt.tools().disabled_tiers("read_file"), []);

    // An unknown tool is refused, and nothing is written.
    let err = rt
        .tools()
        .set_tool_enabled("no_such_tool", Some(Pro), false, "ann")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no tool named \"no_such_tool\" is registered"
    );

    // Back on: the call runs again; switching on what is on is a no-op.
    let on = rt
        .tools()
        .set_tool_enabled("echo", Some(Pro), true, "ann")
        .await
        .unwrap();
    assert_eq!(on, outcome(Pro, true, true, Some(switch(Pro, "ann"))));
    assert_eq!(
        on.to_string(),
        format!("switched echo on for the pro tier (it was switched off by ann at {AT})")
    );
    assert_eq!(echo(&rt).await.status, ToolStatus::Success);
    let on_again = rt
        .tools()
        .set_tool_enabled("echo", Some(Enterprise), true, "ann")
        .await
        .unwrap();
    assert_eq!(on_again, outcome(Enterprise, true, false, None));
    assert_eq!(
        on_again.to_string(),
        "echo is already on for the enterprise tier; nothing changed"
    );
    assert_eq!(rt.tools().disabled_tiers("echo"), [Teams]);

    // Every change, and nothing else, is in the admin log: who, when, tool, tier, on or off.
    let logged: Vec<_> = rt
        .store()
        .admin_events(&AdminQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.at, e.actor, e.kind, e.summary, e.details))
        .collect();
    let entry = |actor: &str, kind: &str, summary: &str, tier: &str, enabled| {
        (
            T0,
            actor.to_owned(),
            kind.to_owned(),
            summary.to_owned(),
            json!({"tool": "echo", "tier": tier, "enabled": enabled}),
        )
    };
    assert_eq!(
        logged,
        [
            entry(
                "ann",
                "tool_enabled",
                "tool echo switched on for the pro tier",
                "pro",
                true
            ),
            entry(
                "ann",
                "tool_disabled",
                "tool echo switched off for the pro tier",
                "pro",
                false
            ),
            entry(
                "bob",
                "tool_disabled",
                "tool echo switched off for the teams tier",
                "teams",
                false
            ),
        ]
    );
    // Exactly one audit record per call: four calls, four records (newest first).
    let calls = rt.store().query(&Default::default()).await.unwrap().rows;
    assert_eq!(
        calls.iter().map(|r| r.status).collect::<Vec<_>>(),
        [
            ToolStatus::Success,
            ToolStatus::PermissionDenied,
            ToolStatus::Success,
            ToolStatus::Success
        ]
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_reaches_other_runtimes_on_the_data_directory_within_a_second() {
    let install = Install::new("");
    let desktop = open(&install, "pro").await;
    let cli = open(&install, "pro").await;
    let teams = open(&install, "teams").await;

    desktop
        .tools()
        .set_tool_enabled("echo", Some(Pro), false, "ann")
        .await
        .unwrap();
    assert_eq!(refusal(&echo(&desktop).await), refused_by_ann());
    within_a_second_and_a_half("the other runtimes seeing echo off", || {
        cli.tools().disabled_tiers("echo") == [Pro] && teams.tools().disabled_tiers("echo") == [Pro]
    })
    .await;
    assert_eq!(refusal(&echo(&cli).await), refused_by_ann());
    assert_eq!(
        echo(&teams).await.status,
        ToolStatus::Success,
        "a teams installation is unaffected"
    );

    // Switched back on from the other side.
    cli.tools()
        .set_tool_enabled("echo", Some(Pro), true, "bob")
        .await
        .unwrap();
    assert_eq!(echo(&cli).await.status, ToolStatus::Success);
    within_a_second_and_a_half("the desktop runtime seeing echo on", || {
        desktop.tools().disabled_tiers("echo").is_empty()
    })
    .await;
    assert_eq!(echo(&desktop).await.status, ToolStatus::Success);

    // A runtime started later reads the switches when it opens.
    teams
        .tools()
        .set_tool_enabled("echo", Some(Teams), false, "carl")
        .await
        .unwrap();
    let late = open(&install, "teams").await;
    assert_eq!(code(&echo(&late).await), Some("tool_disabled"));
    for rt in [desktop, cli, teams, late] {
        rt.close().await;
    }
}
