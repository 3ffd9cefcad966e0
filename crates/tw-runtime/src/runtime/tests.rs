//! The pipeline stage by stage, on real SQLite files and real child processes: each stage's refusal
//! with its status, code and recorded explanation; the events and tracing events every call emits;
//! cancellation by id and by a caller that stops waiting; one audit record per call throughout.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, DefinitionFormat, ToolStatus, load_tool_specs};

use tw_core::TraceId;

use super::*;
use crate::events::Received;
use crate::{EventKind, ExecutionEvent};
use tw_core::Decision;

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) rt: Runtime,
}

/// A runtime on a fresh data directory and workspace, with `config` (TOML) and custom tools.
pub(crate) async fn fixture(config: &str, custom_tools: &str) -> Fixture {
    recorder();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "one\ntwo\n").unwrap();
    // Custom tools are registered by an enterprise installation first, so each test can then
    // judge them under whatever tier its own config names (a downgrade keeps them registered).
    if !custom_tools.is_empty() {
        let admin = Config {
            license_tier: tw_core::LicenseTier::Enterprise,
            ..Config::default()
        };
        let rt = Runtime::open(RuntimeOptions::new(
            dir.path().join("data"),
            vec![ws.clone()],
            admin,
        ))
        .await
        .unwrap();
        for spec in load_tool_specs(custom_tools, "tools.toml", DefinitionFormat::Toml).unwrap() {
            rt.tools().add_custom_tool(spec, "tester").await.unwrap();
        }
        rt.close().await;
    }
    // Custom tools need a tier that includes them; tests that are about tiers name their own.
    let config = if config.contains("license_tier") {
        config.to_owned()
    } else {
        format!("license_tier = \"pro\"\n{config}")
    };
    let config = Config::parse(&config, Path::new("/etc/tw/config.toml"), None).unwrap();
    let rt = Runtime::open(RuntimeOptions::new(
        dir.path().join("data"),
        vec![ws],
        config,
    ))
    .await
    .unwrap();
    Fixture { _dir: dir, rt }
}

const CUSTOM: &str = r#"
[[tools]]
name = "pro_tool"
description = "Needs the pro tier."
category = "system"
group = "custom"
license_tier = "pro"
parameters = []
command = { argv = ["true"] }

[[tools]]
name = "normal_only"
description = "May only run in normal mode."
category = "system"
group = "custom"
allowed_modes = ["normal"]
parameters = []
command = { argv = ["true"] }

[[tools]]
name = "slow"
description = "Sleeps for a while."
category = "system"
group = "custom"
parameters = [{ name = "seconds", type = "string", required = true }]
constraints = { max_execution_time_ms = 300 }
command = { argv = ["sleep", "{seconds}"] }

[[tools]]
name = "wrong_output"
description = "Prints JSON that does not match its output schema."
category = "system"
group = "custom"
parameters = []
output_schema = { type = "object", required = ["count"], properties = { count = { type = "integer" } } }
command = { argv = ["echo", '{{"count": "many"}}'], output = "json" }

[[tools]]
name = "chatty"
description = "Prints a line on each stream."
category = "system"
group = "custom"
parameters = []
command = { argv = ["sh", "-c", "echo out; echo err >&2"] }
"#;

/// What a stage decided, in comparable form.
#[derive(Debug, PartialEq)]
struct Seen {
    status: ToolStatus,
    code: Option<String>,
    decision: Option<String>,
    /// The layer that decided a denial or an ask.
    deciding: Option<String>,
}

fn seen(r: &ToolResult) -> Seen {
    Seen {
        status: r.status,
        code: r.error.as_ref().map(|e| e.code.clone()),
        decision: r.decision.as_ref().map(|d| d.decision.to_string()),
        deciding: r
            .decision
            .as_ref()
            .filter(|d| d.decision != Decision::Allow)
            .and_then(|d| d.deciding())
            .map(|v| v.layer.as_str().to_owned()),
    }
}

fn expect(
    status: ToolStatus,
    code: Option<&str>,
    decision: Option<&str>,
    deciding: Option<&str>,
) -> Seen {
    Seen {
        status,
        code: code.map(str::to_owned),
        decision: decision.map(str::to_owned),
        deciding: deciding.map(str::to_owned),
    }
}

/// Runs `tool(args)` under `config` and checks the outcome and its single audit record.
async fn check(config: &str, tool: &str, args: Value, want: Seen) {
    let f = fixture(config, CUSTOM).await;
    let mut call = f.rt.call(tool, args, Caller::agent("tester"));
    call.no_wait = true;
    let r = f.rt.execute(call).await;
    let got = seen(&r);
    assert_eq!(got, want, "{tool} under {config:?}: {:?}", r.error);
    let page = f.rt.store().query(&Default::default()).await.unwrap();
    let rows: Vec<_> = page
        .rows
        .iter()
        .filter(|row| row.execution_id == r.execution_id.as_str())
        .collect();
    assert_eq!(rows.len(), 1, "exactly one audit record for {tool}");
    assert_eq!(rows[0].status, r.status);
    assert_eq!(rows[0].decision, want.decision);
    f.rt.close().await;
}

#[tokio::test]
async fn stage_1_lookup_unknown_tool_is_not_found_before_policy() {
    check(
        "",
        "no_such_tool",
        json!({}),
        expect(ToolStatus::NotFound, Some("tool_not_found"), None, None),
    )
    .await;
}

#[tokio::test]
async fn stage_2_tool_policy_denies_by_name_glob_group_default_and_override() {
    let cases = [
        (
            "[policy]\ndeny = [\"echo\"]\nallow = [\"echo\"]",
            "policy_denied",
        ),
        (
            "[policy]\ndeny = [\"ec*\"]\nallow = [\"group:system\"]",
            "policy_denied",
        ),
        ("[policy]\ndeny = [\"group:system\"]", "policy_denied"),
        (
            "[policy]\ndefault = \"deny\"\nallow = [\"group:fs\"]",
            "policy_denied",
        ),
        ("[tools.echo]\nenabled = false", "tool_disabled"),
    ];
    for (config, code) in cases {
        check(
            config,
            "echo",
            json!({}),
            expect(
                ToolStatus::PermissionDenied,
                Some(code),
                Some("deny"),
                Some("tools"),
            ),
        )
        .await;
    }
}

#[tokio::test]
async fn stage_3_license_tier_and_mode() {
    let tier = |status, code: Option<&str>, decision, layer: Option<&str>| {
        expect(status, code, Some(decision), layer)
    };
    for (config, tool, want) in [
        // The definition needs pro; a core installation has neither it nor any custom tool.
        (
            "license_tier = \"core\"",
            "pro_tool",
            tier(
                ToolStatus::PermissionDenied,
                Some("tier_unavailable"),
                "deny",
                Some("license"),
            ),
        ),
        (
            "license_tier = \"core\"",
            "normal_only",
            tier(
                ToolStatus::PermissionDenied,
                Some("tier_unavailable"),
                "deny",
                Some("license"),
            ),
        ),
        (
            "license_tier = \"pro\"",
            "pro_tool",
            tier(ToolStatus::Success, None, "allow", None),
        ),
        (
            "mode = \"lockdown\"",
            "normal_only",
            tier(
                ToolStatus::PermissionDenied,
                Some("mode_forbidden"),
                "deny",
                Some("mode"),
            ),
        ),
        // The built-in meaning of alert mode: high-risk tools need a person.
        (
            "mode = \"alert\"",
            "delete_file",
            tier(
                ToolStatus::RequiresConfirmation,
                Some("confirmation_required"),
                "ask",
                Some("mode"),
            ),
        ),
    ] {
        let args = if tool == "delete_file" {
            json!({"path": "notes.txt"})
        } else {
            json!({})
        };
        check(config, tool, args, want).await;
    }
}

#[tokio::test]
async fn stage_4_argument_validation_reports_every_violation() {
    let f = fixture("", "").await;
    let r =
        f.rt.execute(f.rt.call(
            "read_file",
            json!({"path": 7, "start_line": 0, "color": "red"}),
            Caller::agent("t"),
        ))
        .await;
    assert_eq!(r.status, ToolStatus::ValidationError);
    let error = r.error.unwrap();
    assert_eq!(error.code, "invalid_arguments");
    let mut pointers: Vec<&str> = error
        .violations
        .iter()
        .map(|v| v.pointer.as_str())
        .collect();
    pointers.sort_unstable();
    assert_eq!(
        pointers,
        ["", "/path", "/start_line"],
        "{:?}",
        error.violations
    );
    f.rt.close().await;
}

/// Found by fuzzing (`fuzz/corpus/tool_args/float-timeout-past-u64.json`): JSON Schema's
/// `integer` takes `2.0` and `1e20`, which the tools' argument structs refused, so a call whose
/// arguments passed validation failed with "arguments passed the schema but not the tool".
#[tokio::test]
async fn whole_number_floats_that_pass_an_integer_schema_reach_the_tool() {
    let f = fixture("", "").await;
    for args in [
        json!({"path": "notes.txt", "start_line": 2.0, "end_line": 1e20}),
        json!({"path": "notes.txt", "max_bytes": 18446788147419103230.0}),
    ] {
        let r =
            f.rt.execute(f.rt.call("read_file", args.clone(), Caller::agent("t")))
                .await;
        assert_eq!(r.status, ToolStatus::Success, "{args}: {:?}", r.error);
    }
    let r =
        f.rt.execute(f.rt.call(
            "list_directory",
            json!({"path": ".", "depth": 2.0, "max_entries": 10.0}),
            Caller::agent("t"),
        ))
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    f.rt.close().await;
}

#[tokio::test]
async fn stage_5_confirmation_by_definition_and_by_override() {
    check(
        "",
        "delete_file",
        json!({"path": "notes.txt"}),
        expect(
            ToolStatus::RequiresConfirmation,
            Some("confirmation_required"),
            Some("ask"),
            Some("confirmation"),
        ),
    )
    .await;
    check(
        "[tools.echo]\nrequires_confirmation = true",
        "echo",
        json!({}),
        expect(
            ToolStatus::RequiresConfirmation,
            Some("confirmation_required"),
            Some("ask"),
            Some("confirmation"),
        ),
    )
    .await;
}

#[tokio::test]
async fn stage_6_execution_time_limit_from_the_tool_and_from_the_call() {
    // The tool's own limit (300 ms) stops a 5 s sleep.
    check(
        "",
        "slow",
        json!({"seconds": "5"}),
        expect(ToolStatus::Timeout, Some("timeout"), Some("allow"), None),
    )
    .await;
    // A call may ask for less time than the tool allows, never more.
    let f = fixture("", CUSTOM).await;
    let mut call =
        f.rt.call("slow", json!({"seconds": "0.2"}), Caller::agent("t"));
    call.timeout = Some(Duration::from_millis(50));
    assert_eq!(f.rt.execute(call).await.status, ToolStatus::Timeout);
    let mut call =
        f.rt.call("slow", json!({"seconds": "0.1"}), Caller::agent("t"));
    call.timeout = Some(Duration::from_secs(60));
    assert_eq!(f.rt.execute(call).await.status, ToolStatus::Success);
    f.rt.close().await;
}

#[tokio::test]
async fn stage_7_output_schema_failure_withholds_the_output() {
    let f = fixture("", CUSTOM).await;
    let r =
        f.rt.execute(f.rt.call("wrong_output", json!({}), Caller::agent("t")))
            .await;
    assert_eq!(r.status, ToolStatus::Failed);
    assert_eq!(r.output, None);
    let error = r.error.unwrap();
    assert_eq!(error.code, "invalid_output");
    assert_eq!(error.violations[0].pointer, "/count");
    let row =
        f.rt.store()
            .get(r.execution_id.as_str())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(row.output, None);
    f.rt.close().await;
}

#[tokio::test]
async fn stage_8_output_cap_truncates_and_flags() {
    let f = fixture("", "").await;
    let big = "x".repeat(40_000);
    let r =
        f.rt.execute(f.rt.call("echo", json!({"text": big}), Caller::agent("t")))
            .await;
    assert_eq!(r.status, ToolStatus::Success);
    assert!(r.metadata.truncated);
    assert!(
        r.metadata.output_bytes <= 32 * 1024,
        "{}",
        r.metadata.output_bytes
    );
    let row =
        f.rt.store()
            .get(r.execution_id.as_str())
            .await
            .unwrap()
            .unwrap();
    assert!(row.truncated);
    f.rt.close().await;
}

fn kinds(events: &[Arc<ExecutionEvent>]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e.kind {
            EventKind::Started => "started",
            EventKind::InProgress { .. } => "in_progress",
            EventKind::Completed { .. } => "completed",
            EventKind::Failed { .. } => "failed",
            EventKind::Timeout { .. } => "timeout",
            EventKind::Denied { .. } => "denied",
            EventKind::Warning { .. } => "warning",
            EventKind::Lost { .. } => "lost",
            EventKind::ConfirmationRequested { .. } => "confirmation_requested",
            EventKind::Frame { .. } => "frame",
            EventKind::ConfirmationResolved { .. } => "confirmation_resolved",
            EventKind::ChainStep { .. } => "chain_step",
        })
        .collect()
}

async fn drain(sub: &mut crate::events::Subscription) -> Vec<Arc<ExecutionEvent>> {
    let mut out = Vec::new();
    while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), sub.recv()).await {
        match r {
            Received::Event(e) => out.push(e),
            Received::Missed(n) => panic!("missed {n} events"),
        }
    }
    out
}

#[tokio::test]
async fn stage_10_events_announce_each_call_in_order() {
    let f = fixture(
        "[policy]\ndeny = [\"pro_tool\"]\nallow = [\"group:system\", \"group:custom\"]",
        CUSTOM,
    )
    .await;
    let mut all = f.rt.events().subscribe();
    let caller = Caller::agent("t");
    let cases = [
        ("echo", json!({"a": 1}), vec!["started", "completed"]),
        ("pro_tool", json!({}), vec!["denied"]),
        ("no_such_tool", json!({}), vec!["denied"]),
        ("slow", json!({"seconds": "5"}), vec!["started", "timeout"]),
        (
            "wrong_output",
            json!({}),
            vec!["started", "in_progress", "failed"],
        ),
    ];
    for (tool, args, want) in cases {
        let r = f.rt.execute(f.rt.call(tool, args, caller.clone())).await;
        let events = drain(&mut all).await;
        assert_eq!(kinds(&events), want, "{tool}");
        assert!(
            events
                .iter()
                .all(|e| e.execution_id == r.execution_id && e.trace_id == r.trace_id)
        );
    }
    // Output is streamed while a child runs, each stream on its own.
    let r =
        f.rt.execute(f.rt.call("chatty", json!({}), caller.clone()))
            .await;
    assert_eq!(r.status, ToolStatus::Success);
    let events = drain(&mut all).await;
    let mut chunks: Vec<(crate::events::Stream, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::InProgress { stream, text } => Some((*stream, text.trim().to_owned())),
            _ => None,
        })
        .collect();
    chunks.sort_by_key(|(s, _)| *s == crate::events::Stream::Stderr);
    assert_eq!(
        chunks,
        vec![
            (crate::events::Stream::Stdout, "out".to_owned()),
            (crate::events::Stream::Stderr, "err".to_owned())
        ]
    );
    assert_eq!(kinds(&events).first(), Some(&"started"));
    assert_eq!(kinds(&events).last(), Some(&"completed"));
    f.rt.close().await;
}

#[tokio::test]
async fn a_subscription_to_one_execution_sees_only_its_events() {
    let f = fixture("", "").await;
    let call = f.rt.call("echo", json!({}), Caller::agent("t"));
    let mut mine = f.rt.events().subscribe_execution(call.execution_id.clone());
    let other = f.rt.call("echo", json!({}), Caller::agent("t"));
    let (a, _) = tokio::join!(f.rt.execute(call), f.rt.execute(other));
    let events = drain(&mut mine).await;
    assert_eq!(kinds(&events), ["started", "completed"]);
    assert!(events.iter().all(|e| e.execution_id == a.execution_id));
    f.rt.close().await;
}

/// Collects the names and `trace_id` fields of tracing events.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(String, String)>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct TraceId(String);
        impl tracing::field::Visit for TraceId {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "trace_id" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut id = TraceId(String::new());
        event.record(&mut id);
        self.0
            .lock()
            .unwrap()
            .push((event.metadata().name().to_owned(), id.0));
    }
}

/// The recorder, installed as the process-wide subscriber before any test runs a call. A
/// subscriber scoped to one test's thread is not enough: tracing caches each callsite's interest
/// globally, and a callsite first reached by another test, while no subscriber wanted it, can stay
/// switched off.
fn recorder() -> &'static Recorder {
    static RECORDER: std::sync::OnceLock<Recorder> = std::sync::OnceLock::new();
    RECORDER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt as _;
        let recorder = Recorder::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(recorder.clone()),
        )
        .unwrap();
        recorder
    })
}

#[tokio::test]
async fn tracing_events_carry_the_trace_id_and_a_refusal_is_blocked_not_failed() {
    let f = fixture("", "").await;
    let ok =
        f.rt.execute(f.rt.call("echo", json!({}), Caller::agent("t")))
            .await;
    let denied =
        f.rt.execute(f.rt.call("nope", json!({}), Caller::agent("t")))
            .await;
    let failed =
        f.rt.execute(f.rt.call(
            "read_file",
            json!({"path": "missing.txt"}),
            Caller::agent("t"),
        ))
        .await;
    assert_eq!(failed.status, ToolStatus::Failed, "{failed:?}");
    f.rt.close().await;
    let seen = recorder().0.lock().unwrap().clone();
    let named = |trace: &TraceId| -> Vec<String> {
        seen.iter()
            .filter(|(name, id)| id == trace.as_str() && name.starts_with("tool_call_"))
            .map(|(name, _)| name.clone())
            .collect()
    };
    assert_eq!(
        named(&ok.trace_id),
        ["tool_call_started", "tool_call_completed"]
    );
    // A call the pipeline refused never started; one that ran and failed did.
    assert_eq!(named(&denied.trace_id), ["tool_call_blocked"]);
    assert_eq!(
        named(&failed.trace_id),
        ["tool_call_started", "tool_call_failed"]
    );
}

#[tokio::test]
async fn cancel_by_id_stops_a_running_call_and_records_it() {
    let f = fixture("", CUSTOM).await;
    let mut call =
        f.rt.call("slow", json!({"seconds": "30"}), Caller::agent("t"));
    call.timeout = None;
    let id = call.execution_id.clone();
    let rt = f.rt.clone();
    let running = tokio::spawn(async move { rt.execute(call).await });
    while !f.rt.pipeline().running().contains(&id) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(f.rt.cancel(&id));
    let r = running.await.unwrap();
    assert_eq!(
        (r.status, r.error.map(|e| e.code)),
        (ToolStatus::Cancelled, Some("cancelled".to_owned()))
    );
    assert!(f.rt.pipeline().running().is_empty());
    assert!(
        !f.rt.cancel(&id),
        "a finished call is no longer cancellable"
    );
    let row = f.rt.store().get(id.as_str()).await.unwrap().unwrap();
    assert_eq!(row.status, ToolStatus::Cancelled);
    f.rt.close().await;
}

#[tokio::test]
async fn a_caller_that_stops_waiting_cancels_the_call_but_not_its_record() {
    let f = fixture("", CUSTOM).await;
    let call =
        f.rt.call("slow", json!({"seconds": "30"}), Caller::agent("t"));
    let id = call.execution_id.clone();
    let gave_up = tokio::time::timeout(Duration::from_millis(100), f.rt.execute(call)).await;
    assert!(gave_up.is_err());
    let mut row = None;
    for _ in 0..200 {
        row = f.rt.store().get(id.as_str()).await.unwrap();
        if row.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let row = row.expect("the abandoned call is recorded");
    assert_eq!(row.status, ToolStatus::Cancelled);
    f.rt.close().await;
}

#[tokio::test]
async fn after_the_store_closes_nothing_runs_and_no_result_escapes_unrecorded() {
    let f = fixture("", "").await;
    f.rt.store().close().await;
    let r =
        f.rt.execute(f.rt.call("echo", json!({"x": 1}), Caller::agent("t")))
            .await;
    assert_eq!(r.status, ToolStatus::Failed);
    assert_eq!(
        r.error.map(|e| e.code),
        Some("audit_unavailable".to_owned())
    );
    assert_eq!(r.output, None);
}

/// A custom tool with this name and description, run as `true`.
fn custom_spec(name: &str, description: &str) -> tw_core::ToolSpec {
    let text = format!(
        "[[tools]]\nname = \"{name}\"\ndescription = \"{description}\"\ncategory = \"system\"\n\
         group = \"custom\"\nparameters = []\ncommand = {{ argv = [\"true\"] }}\n"
    );
    load_tool_specs(&text, "tools.toml", DefinitionFormat::Toml)
        .unwrap()
        .remove(0)
}

/// The registry's custom tools and the store's, each sorted, with their descriptions.
async fn custom_tools_now(rt: &Runtime) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let mut registered: Vec<(String, String)> = rt
        .registry()
        .list()
        .iter()
        .filter(|t| !t.kind.is_builtin())
        .map(|t| (t.name().to_string(), t.definition.description.clone()))
        .collect();
    registered.sort();
    let mut stored: Vec<(String, String)> = rt
        .store()
        .custom_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| {
            let spec = t.spec.as_ref().unwrap();
            (t.name.clone(), spec.definition.description.clone())
        })
        .collect();
    stored.sort();
    (registered, stored)
}

/// Editing a custom tool is one step of the tool service: in place or under a new name, the
/// registry and the store agree afterwards; a new name that is taken is a conflict (as creating
/// a tool under it is), a built-in's name is refused, and a tool that is not a custom one is
/// not found. A refused edit changes nothing.
#[tokio::test]
async fn a_custom_tool_is_replaced_or_renamed_in_one_step_and_a_refused_edit_changes_nothing() {
    let f = fixture("", CUSTOM).await;
    let tools = f.rt.tools();
    tools
        .replace_custom_tool("pro_tool", custom_spec("renamed", "Renamed."), "tester")
        .await
        .unwrap();
    tools
        .replace_custom_tool(
            "normal_only",
            custom_spec("normal_only", "Edited."),
            "tester",
        )
        .await
        .unwrap();
    let after = custom_tools_now(&f.rt).await;
    assert_eq!(after.0, after.1, "the registry and the store agree");
    for edited in [("normal_only", "Edited."), ("renamed", "Renamed.")] {
        assert!(
            after
                .0
                .contains(&(edited.0.to_owned(), edited.1.to_owned())),
            "{after:?}"
        );
    }
    assert!(
        !after.0.iter().any(|(name, _)| name == "pro_tool"),
        "{after:?}"
    );

    let refusals = [
        (
            "renamed",
            "normal_only",
            crate::ErrorKind::Conflict,
            "exists",
        ),
        ("renamed", "echo", crate::ErrorKind::Conflict, "builtin"),
        (
            "no_such_tool",
            "other",
            crate::ErrorKind::NotFound,
            "unknown_tool",
        ),
        ("echo", "other", crate::ErrorKind::NotFound, "unknown_tool"),
    ];
    for (old, new, kind, code) in refusals {
        let err = tools
            .replace_custom_tool(old, custom_spec(new, "Refused."), "tester")
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind(), err.code()),
            (kind, code),
            "{old} -> {new}: {err}"
        );
        assert_eq!(custom_tools_now(&f.rt).await, after, "{old} -> {new}");
    }
}

/// A re-read of the store (the change feed's answer to another process's edit, or to this one's
/// own on a team store) that runs alongside an edit never puts the tool as it was before the
/// edit back into the registry after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_alongside_an_edit_never_puts_the_old_tool_back() {
    let f = fixture("", CUSTOM).await;
    let tools = f.rt.tools();
    let editing = std::sync::atomic::AtomicBool::new(true);
    let refreshes = async {
        let mut n = 0;
        while editing.load(std::sync::atomic::Ordering::Relaxed) {
            tools.refresh_custom_tools().await.unwrap();
            n += 1;
        }
        n
    };
    let edits = async {
        let mut seen = Vec::new();
        for round in 0..150 {
            let description = format!("Edit {round}.");
            // A rename first, which a re-read that sees the store before the registry takes
            // its time to bring in (the new name is classified) ...
            let (from, to) = if round % 2 == 0 {
                ("pro_tool", "renamed")
            } else {
                ("renamed", "pro_tool")
            };
            tools
                .replace_custom_tool(from, custom_spec(to, "Renamed."), "tester")
                .await
                .unwrap();
            // ... then an edit in place, which that re-read must not undo.
            tools
                .replace_custom_tool(
                    "normal_only",
                    custom_spec("normal_only", &description),
                    "tester",
                )
                .await
                .unwrap();
            for _ in 0..3 {
                tokio::task::yield_now().await;
                let now = f.rt.registry().get("normal_only").unwrap();
                seen.push((description.clone(), now.definition.description.clone()));
            }
        }
        editing.store(false, std::sync::atomic::Ordering::Relaxed);
        seen
    };
    let (refreshed, seen) = tokio::join!(refreshes, edits);
    assert!(refreshed > 0, "the store was re-read alongside the edits");
    let stale: Vec<_> = seen.iter().filter(|(edit, now)| edit != now).collect();
    assert!(
        stale.is_empty(),
        "the registry went back to an older edit: {stale:?}"
    );
    let (registered, stored) = custom_tools_now(&f.rt).await;
    assert_eq!(registered, stored, "the registry and the store agree");
}

#[tokio::test]
async fn the_suite_runs_on_the_store_it_was_asked_for() {
    // scripts/test runs these tests a second time with TOOLWARDEN_TEST_STORE=postgres: each
    // runtime must then be on a team store, or that pass would test SQLite twice.
    let fx = fixture("", "").await;
    let asked = std::env::var("TOOLWARDEN_TEST_STORE").as_deref() == Ok("postgres");
    assert_eq!(fx.rt.is_team_store(), asked);
}
