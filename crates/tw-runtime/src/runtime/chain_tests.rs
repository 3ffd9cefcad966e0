//! Tool chains run through the real pipeline, on real SQLite files and real child processes:
//! each step its own governed call with its own audit row naming the run; independent steps
//! overlapping in time; retries counted and kept to transient failures; a failed step's
//! dependents skipped; a denied step stopping the run or not as `on_error` says; cancellation
//! reaching the running steps; the run record written before the answer.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::chain::{Chain, ChainBuilder, OnError, StepBuilder, StepStatus};
use tw_core::{Caller, ToolStatus};

use super::*;
use crate::chains::ChainEntry;
use crate::events::{EventKind, Received};

const TOOLS: &str = r#"
[[tools]]
name = "emit"
description = "Prints the JSON it is given."
category = "system"
group = "custom"
parameters = [{ name = "json", type = "string", required = true }]
command = { argv = ["printf", "%s", "{json}"], output = "json" }

[[tools]]
name = "nap"
description = "Sleeps, then says when it woke."
category = "system"
group = "custom"
parameters = [{ name = "seconds", type = "string", required = true }]
command = { argv = ["sleep", "{seconds}"] }

[[tools]]
name = "hang"
description = "Sleeps past its time limit."
category = "system"
group = "custom"
parameters = []
constraints = { max_execution_time_ms = 200 }
command = { argv = ["sleep", "5"] }

[[tools]]
name = "fail"
description = "Always fails."
category = "system"
group = "custom"
parameters = []
command = { argv = ["false"] }
"#;

use super::tests::Fixture;

/// A runtime whose policy allows what no rule names (`policy` adds to it), with [`TOOLS`].
async fn fixture(policy: &str) -> Fixture {
    super::tests::fixture(&format!("[policy]\ndefault = \"allow\"\n{policy}"), TOOLS).await
}

impl Fixture {
    fn install(&self, chains: Vec<ChainBuilder>) {
        let entries = chains
            .into_iter()
            .map(|b| ChainEntry {
                chain: b.build().unwrap(),
                origin: "test".to_owned(),
                skill: None,
            })
            .collect();
        self.rt.chains().install(entries, Vec::new());
        assert_eq!(self.rt.chains().problems(), vec![]);
    }

    async fn run(&self, chain: &str, input: Value) -> ToolResult {
        self.rt
            .execute(
                self.rt
                    .call(&format!("chain__{chain}"), input, Caller::agent("agent-7")),
            )
            .await
    }

    /// Each step's status in the run record, by id.
    async fn statuses(&self, run: &ToolResult) -> Vec<(String, String, u64)> {
        let (row, _) = self
            .rt
            .chains()
            .run(run.execution_id.as_str())
            .await
            .unwrap();
        row.steps
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["status"].as_str().unwrap().to_owned(),
                    s["attempts"].as_u64().unwrap(),
                )
            })
            .collect()
    }
}

fn emit(id: &str, json: &str) -> StepBuilder {
    StepBuilder::new(id, "emit").arg("json", json)
}

fn st(id: &str, status: &str, attempts: u64) -> (String, String, u64) {
    (id.to_owned(), status.to_owned(), attempts)
}

#[tokio::test]
async fn each_step_is_a_governed_call_whose_output_feeds_the_next() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("notes")
            .input(json!({"type": "object", "required": ["topic"], "properties": {"topic": {"type": "string"}}}))
            .step(emit("find", r#"{"results": [{"title": "first"}, {"title": "second"}]}"#))
            .step(
                StepBuilder::new("save", "write_file")
                    .arg("path", "notes.md")
                    .arg("content", "# ${input.topic}: ${find.results[0].title}\n"),
            )
            .step(StepBuilder::new("read", "read_file").arg("path", "notes.md").depends_on("save"))
            .output(json!({"top": "$find.results[0].title", "text": "$read.content"})),
    ]);
    let r = f.run("notes", json!({"topic": "rust"})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(
        r.output.unwrap(),
        json!({"top": "first", "text": "# rust: first\n"})
    );
    assert_eq!(
        std::fs::read_to_string(f.rt.workspace().roots()[0].join("notes.md")).unwrap(),
        "# rust: first\n"
    );
    // One audit row per step, each naming the run and its step, sharing the chain's trace.
    let (run, rows) = f.rt.chains().run(r.execution_id.as_str()).await.unwrap();
    assert_eq!(run.status, "completed");
    assert_eq!(run.chain, "notes");
    let seen: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|row| {
            (
                row.tool.as_str(),
                row.metadata["chain"]["step"].as_str().unwrap(),
                row.status.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("emit", "find", "success"),
            ("write_file", "save", "success"),
            ("read_file", "read", "success"),
        ]
    );
    assert!(rows.iter().all(|row| row.trace_id == r.trace_id.as_str()
        && row.metadata["chain"]["run_id"] == r.execution_id.as_str()));
    // And the chain call's own row, with the steps' statuses.
    let own =
        f.rt.store()
            .get(r.execution_id.as_str())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(own.tool, "chain__notes");
    assert_eq!(
        own.metadata["chain_run"]["steps"],
        json!({"find": "completed", "save": "completed", "read": "completed"})
    );
}

#[tokio::test]
async fn independent_steps_overlap_in_time() {
    let f = fixture("").await;
    let mut b = Chain::builder("fan").max_parallel(3);
    for id in ["a", "b", "c"] {
        b = b.step(StepBuilder::new(id, "nap").arg("seconds", "0.4"));
    }
    f.install(vec![b]);
    let r = f.run("fan", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let (_, rows) = f.rt.chains().run(r.execution_id.as_str()).await.unwrap();
    assert_eq!(rows.len(), 3);
    let last_start = rows.iter().map(|r| r.started_at).max().unwrap();
    let first_end = rows.iter().map(|r| r.completed_at).min().unwrap();
    assert!(
        last_start < first_end,
        "the three naps did not overlap: last started at {last_start}, first ended at {first_end}"
    );
}

#[tokio::test]
async fn transient_failures_are_retried_and_counted_and_others_are_not() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("timeouts").step(StepBuilder::new("slow", "hang").on_error(
            OnError::Retry {
                max: 2,
                backoff_ms: 10,
            },
        )),
        Chain::builder("invalid").step(StepBuilder::new("bad", "emit").arg("wrong", 1).on_error(
            OnError::Retry {
                max: 2,
                backoff_ms: 10,
            },
        )),
    ]);
    let r = f.run("timeouts", json!({})).await;
    assert_eq!(r.status, ToolStatus::Failed, "{r:?}");
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .message
            .contains("step \"slow\" failed"),
        "{r:?}"
    );
    assert_eq!(f.statuses(&r).await, vec![st("slow", "failed", 3)]);
    let (_, rows) = f.rt.chains().run(r.execution_id.as_str()).await.unwrap();
    let attempts: Vec<(u64, ToolStatus)> = rows
        .iter()
        .map(|row| {
            (
                row.metadata["chain"]["attempt"].as_u64().unwrap(),
                row.status,
            )
        })
        .collect();
    assert_eq!(
        attempts,
        vec![
            (1, ToolStatus::Timeout),
            (2, ToolStatus::Timeout),
            (3, ToolStatus::Timeout)
        ]
    );
    // Invalid arguments are not transient: one attempt.
    let r = f.run("invalid", json!({})).await;
    assert_eq!(f.statuses(&r).await, vec![st("bad", "failed", 1)]);
}

#[tokio::test]
async fn a_failed_step_skips_what_needs_it_and_the_rest_goes_on_when_allowed() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("partial")
            .step(StepBuilder::new("broken", "fail").on_error(OnError::Continue))
            .step(emit("after", r#"{"n": 1}"#).depends_on("broken"))
            .step(emit("later", r#"{"n": 2}"#).arg("json", "{\"from\": \"${after.n}\"}"))
            .step(emit("alone", r#"{"n": 3}"#))
            .step(emit("cleanup", r#"{"cleaned": true}"#).when("$steps.broken.status == 'failed'"))
            .step(emit("never", r#"{}"#).when("$alone.n > 5"))
            .step(StepBuilder::new("fallback", "fail").on_error(OnError::Default(json!({"n": 0}))))
            .output(json!({"alone": "$alone.n", "fallback": "$fallback.n"})),
        Chain::builder("stops")
            .step(StepBuilder::new("broken", "fail"))
            .step(emit("after", r#"{}"#).depends_on("broken")),
    ]);
    let r = f.run("partial", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(
        r.output.clone().unwrap(),
        json!({"alone": 3, "fallback": 0})
    );
    assert_eq!(
        f.statuses(&r).await,
        vec![
            st("broken", "failed", 1),
            st("after", "skipped", 0),
            st("later", "skipped", 0),
            st("alone", "completed", 1),
            st("cleanup", "completed", 1),
            st("never", "skipped", 0),
            st("fallback", "completed", 1),
        ]
    );
    let r = f.run("stops", json!({})).await;
    assert_eq!(r.status, ToolStatus::Failed);
    assert_eq!(
        f.statuses(&r).await,
        vec![st("broken", "failed", 1), st("after", "skipped", 0)]
    );
}

#[tokio::test]
async fn a_step_policy_denies_is_denied_and_stops_the_run_unless_told_otherwise() {
    let f = fixture("deny = [\"write_file\"]\n").await;
    f.install(vec![
        Chain::builder("writes")
            .step(
                StepBuilder::new("w", "write_file")
                    .arg("path", "x")
                    .arg("content", "y"),
            )
            .step(emit("after", "{}").depends_on("w")),
        Chain::builder("writes_anyway")
            .step(
                StepBuilder::new("w", "write_file")
                    .arg("path", "x")
                    .arg("content", "y")
                    .on_error(OnError::Continue),
            )
            .step(emit("other", r#"{"ok": true}"#)),
    ]);
    let r = f.run("writes", json!({})).await;
    assert_eq!(r.status, ToolStatus::Failed, "{r:?}");
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .message
            .contains("step \"w\" denied"),
        "{r:?}"
    );
    assert_eq!(
        f.statuses(&r).await,
        vec![st("w", "denied", 1), st("after", "skipped", 0)]
    );
    let (_, rows) = f.rt.chains().run(r.execution_id.as_str()).await.unwrap();
    assert_eq!(rows[0].status, ToolStatus::PermissionDenied);
    assert_eq!(rows[0].decision.as_deref(), Some("deny"));

    let r = f.run("writes_anyway", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(r.output.clone().unwrap(), json!({"ok": true}));
    assert_eq!(
        f.statuses(&r).await,
        vec![st("w", "denied", 1), st("other", "completed", 1)]
    );
}

#[tokio::test]
async fn cancelling_a_run_cancels_its_running_steps_and_each_keeps_its_row() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("long")
            .step(StepBuilder::new("sleep", "nap").arg("seconds", "30"))
            .step(emit("after", "{}").depends_on("sleep")),
    ]);
    let call =
        f.rt.call("chain__long", json!({}), Caller::agent("agent-7"));
    let id = call.execution_id.clone();
    let cancel = CancellationToken::new();
    let rt = f.rt.clone();
    let token = cancel.clone();
    let running = tokio::spawn(async move { rt.execute_with_cancel(call, token).await });
    // Wait until the step's call is running, then cancel the chain's.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while f
        .rt
        .pipeline()
        .running_calls()
        .iter()
        .all(|c| c.tool != "nap")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the step never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = std::time::Instant::now();
    cancel.cancel();
    let r = running.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.status, ToolStatus::Cancelled, "{r:?}");
    let (run, rows) = f.rt.chains().run(id.as_str()).await.unwrap();
    assert_eq!(run.status, "cancelled");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, ToolStatus::Cancelled);
    assert_eq!(
        f.statuses(&r).await,
        vec![st("sleep", "cancelled", 1), st("after", "cancelled", 0)]
    );
}

/// On a runtime with threads of its own, as the app and the server run, so each step's call can
/// end on another thread and report its cancellation before the run's own task sees the cancel
/// (the desktop e2e run met that order; here it is left to the scheduler). Either way the run is
/// cancelled, every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_cancels_its_parallel_steps_each_in_its_own_task() {
    let f = fixture("").await;
    let mut b = Chain::builder("wide").max_parallel(3);
    for id in ["a", "b", "c"] {
        b = b.step(StepBuilder::new(id, "nap").arg("seconds", "30"));
    }
    f.install(vec![b]);
    let naps = |f: &Fixture| {
        f.rt.pipeline()
            .running_calls()
            .iter()
            .filter(|c| c.tool == "nap")
            .count()
    };
    for round in 0..5 {
        let call =
            f.rt.call("chain__wide", json!({}), Caller::agent("agent-7"));
        let id = call.execution_id.clone();
        let cancel = CancellationToken::new();
        let (rt, token) = (f.rt.clone(), cancel.clone());
        let running = tokio::spawn(async move { rt.execute_with_cancel(call, token).await });
        // Wait until all three steps' calls are running, then cancel the chain's.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while naps(&f) < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the steps never all started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let started = std::time::Instant::now();
        cancel.cancel();
        let r = running.await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(r.status, ToolStatus::Cancelled, "round {round}: {r:?}");
        // Every step's call ended with its row before the chain's answer; none is left running.
        assert_eq!(naps(&f), 0, "round {round}");
        let (run, rows) = f.rt.chains().run(id.as_str()).await.unwrap();
        assert_eq!(run.status, "cancelled", "round {round}");
        assert_eq!(rows.len(), 3, "round {round}");
        assert!(
            rows.iter().all(|r| r.status == ToolStatus::Cancelled),
            "round {round}: {rows:?}"
        );
    }
}

#[tokio::test]
async fn for_each_runs_the_step_once_per_item_and_collects_the_outputs() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("each")
            .input(json!({"type": "object", "properties": {"names": {"type": "array"}}}))
            .step(
                emit("greet", "")
                    .arg("json", "{\"hello\": \"${item}\", \"at\": ${index}}")
                    .for_each("$input.names", 2),
            )
            .output(json!("$greet")),
    ]);
    let r = f.run("each", json!({"names": ["ann", "bo", "cy"]})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(
        r.output.unwrap(),
        json!([{"hello": "ann", "at": 0}, {"hello": "bo", "at": 1}, {"hello": "cy", "at": 2}])
    );
    let (_, rows) = f.rt.chains().run(r.execution_id.as_str()).await.unwrap();
    let mut items: Vec<u64> = rows
        .iter()
        .map(|r| r.metadata["chain"]["item"].as_u64().unwrap())
        .collect();
    items.sort_unstable();
    assert_eq!(items, vec![0, 1, 2]);
}

#[tokio::test]
async fn a_step_its_skill_no_longer_reaches_is_denied_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("skills/notes")).unwrap();
    std::fs::write(
        ws.join("skills/notes/SKILL.md"),
        "---
name: notes
description: Keeps notes.
tools: [read_file, write_file]
chains:
  - name: note
    input: [{name: text, type: string, required: true}]
    steps:
      - {id: save, tool: write_file, arguments: {path: n.txt, content: $input.text}}
      - {id: read, tool: read_file, arguments: {path: n.txt}, depends_on: save}
---
Notes.
",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("skills/other")).unwrap();
    std::fs::write(
        ws.join("skills/other/SKILL.md"),
        "---\nname: other\ndescription: Reaches the chain, not its tools.\ntools: [chain__note]\n---\n",
    )
    .unwrap();
    let config = Config::parse(
        "[policy]\ndefault = \"allow\"\n",
        Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    let rt = Runtime::open(RuntimeOptions::new(
        dir.path().join("data"),
        vec![ws],
        config,
    ))
    .await
    .unwrap();
    assert_eq!(rt.chains().problems(), vec![]);
    let call = |text: &str| rt.call("chain__note", json!({"text": text}), Caller::agent("a"));
    let r = rt.execute(call("one")).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");

    // A caller under another skill that reaches the chain may not borrow the chain's skill.
    let borrowed = rt
        .execute(rt.call(
            "chain__note",
            json!({"text": "x"}),
            Caller::agent("a").with_skill("other"),
        ))
        .await;
    assert_eq!(
        borrowed.status,
        ToolStatus::PermissionDenied,
        "{borrowed:?}"
    );
    let error = borrowed.error.unwrap();
    assert_eq!(error.code, "skill_denied");
    assert!(
        error.message.contains("chain note belongs to skill notes"),
        "{}",
        error.message
    );

    // Taken out of the skill while the chain is loaded: the step's own call is judged again
    // and refused by the skill layer; the run stops there.
    rt.skills()
        .change_override(
            "notes",
            "write_file",
            crate::skills::OverrideChange::Remove,
            None,
            "admin",
        )
        .await
        .unwrap();
    let r = rt.execute(call("two")).await;
    assert_eq!(r.status, ToolStatus::Failed, "{r:?}");
    let (run, rows) = rt.chains().run(r.execution_id.as_str()).await.unwrap();
    assert_eq!(run.status, "failed");
    assert_eq!(run.skill.as_deref(), Some("notes"));
    let save = &rows[0];
    assert_eq!(
        (save.tool.as_str(), save.status, save.skill.as_deref()),
        ("write_file", ToolStatus::PermissionDenied, Some("notes"))
    );
    let deciding: Vec<String> = save
        .explanation
        .as_ref()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["decision"] == "deny")
        .map(|v| v["layer"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deciding, vec!["skill".to_owned()]);
    assert_eq!(rows.len(), 1, "the step after a denied one does not run");
}

/// The seed's research chain (search, fetch the first result, keep what it says), as the
/// bundled research skill declares it, against a local search provider and page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_research_chain_runs_against_local_fixtures() {
    use crate::net::test_server::{Reply, serve};
    let page = serve(vec![(
        "/tokio",
        Reply::Body(b"<html><head><title>Tokio</title></head><body><article><h1>Tokio</h1><p>An asynchronous runtime for Rust, with a scheduler, timers and I/O.</p></article></body></html>".to_vec()),
    )])
    .await;
    let results = json!({"results": [
        {"title": "Tokio", "url": format!("http://site.test:{}/tokio", page.port), "content": "runtime"},
    ]});
    let search = serve(vec![(
        "/search?q=tokio+runtime&format=json",
        Reply::Body(results.to_string().into_bytes()),
    )])
    .await;
    let install = super::policy_tests::Install::new("");
    let config = format!(
        "[policy]\ndefault = \"allow\"\n[[policy.rules]]\nname = \"web\"\ntools = [\"http_fetch\", \"web_search\"]\nallow_domains = [\"site.test\", \"search.test\"]\n[network.search]\nprovider = \"searxng\"\nurl = \"http://search.test:{}\"\n",
        search.port
    );
    let rt = super::net_tests::open_with(&install, &config, &["site.test", "search.test"]).await;
    let bundled = include_str!("../../../../skills/research/SKILL.md");
    let parsed = tw_core::skill::parse_skill(bundled, Some("research"));
    let manifest = parsed.manifest.unwrap();
    let source = manifest
        .chains
        .into_iter()
        .find(|c| c.chain.name == "research")
        .unwrap();
    rt.chains().install(
        vec![ChainEntry {
            chain: source.chain,
            origin: "skills/research/SKILL.md".to_owned(),
            skill: None,
        }],
        Vec::new(),
    );
    let r = rt
        .execute(rt.call(
            "chain__research",
            json!({"query": "tokio runtime"}),
            Caller::agent("a"),
        ))
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let out = r.output.unwrap();
    assert_eq!(out["title"], "Tokio");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("An asynchronous runtime for Rust"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_chain_is_checked_shown_and_saved_only_when_accepted() {
    use super::capability_tests::{Answer, FakeModel, config};
    let good = r#"```json
{"name": "digest", "description": "Read the notes and echo them.",
 "input": [{"name": "file", "type": "string", "required": true}],
 "steps": [{"id": "read", "tool": "read_file", "arguments": {"path": "$input.file"}},
           {"id": "say", "tool": "echo", "arguments": {"text": "$read.content"}}],
 "output": "$say"}
```"#;
    let model = FakeModel::start(Answer::Content(good.to_owned())).await;
    let install = super::policy_tests::Install::new(&config(&model));
    let rt = install.open().await.unwrap();

    let plan = rt.chains().plan("echo my notes", None).await.unwrap();
    assert_eq!(plan.valid, vec!["digest".to_owned()]);
    assert_eq!(plan.diagnostics, vec![]);
    assert!(plan.text.starts_with("name: digest\n"), "{}", plan.text);
    assert_eq!(plan.model, "test-model");
    // Shown, not saved: no tool yet.
    assert!(rt.registry().get("chain__digest").is_none());
    let asked: Vec<Value> = model
        .requests()
        .into_iter()
        .map(|(_, body)| body)
        .filter(|b| {
            b["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .contains("You plan tool chains")
        })
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["messages"][1]["content"], "Goal: echo my notes");
    assert!(
        asked[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("- read_file: ")
    );

    // Accepted: saved as a chain file, loaded, callable; a second save of the name is refused.
    let saved = rt
        .chains()
        .save(&plan.text, None, "tester", false)
        .await
        .unwrap();
    assert_eq!(saved, vec!["digest".to_owned()]);
    assert!(install.path("ws/chains/digest.yaml").is_file());
    assert!(rt.registry().get("chain__digest").is_some());
    let again = rt
        .chains()
        .save(&plan.text, None, "tester", false)
        .await
        .unwrap_err();
    assert_eq!(again.code(), "chain_exists");

    // A plan naming a tool that does not exist is reported with its line, and cannot be saved.
    model.answer(Answer::Content(
        "name: wrong\nsteps:\n  - id: a\n    tool: teleport\n".to_owned(),
    ));
    let plan = rt.chains().plan("go somewhere", None).await.unwrap();
    assert_eq!(plan.valid, Vec::<String>::new());
    let found: Vec<(usize, String)> = plan
        .diagnostics
        .iter()
        .map(|d| (d.line, d.message.clone()))
        .collect();
    assert_eq!(
        found,
        vec![(4, "no tool \"teleport\" is registered".to_owned())]
    );
    let refused = rt
        .chains()
        .save(&plan.text, None, "tester", false)
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), crate::ErrorKind::Invalid);
    assert!(!install.path("ws/chains/wrong.yaml").exists());

    // Prose is reported as what it is, and nothing can be saved from it.
    model.answer(Answer::Content(
        "Sure! First you search, then...".to_owned(),
    ));
    let plan = rt.chains().plan("anything", None).await.unwrap();
    assert_eq!(plan.valid, Vec::<String>::new());
    assert_eq!(
        plan.diagnostics[0].message,
        "a chain file holds a chain (a mapping), a list of chains, or `chains:` with a list"
    );
    // An endpoint that fails is unavailable, with its reason.
    model.answer(Answer::Status(500));
    let e = rt.chains().plan("anything", None).await.unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("HTTP 500"), "{e}");
}

#[tokio::test]
async fn planning_without_a_model_says_how_to_configure_one() {
    let f = fixture("").await;
    let e = f.rt.chains().plan("do things", None).await.unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Unavailable);
    assert!(e.to_string().contains("[classifier] endpoint"), "{e}");
}

#[tokio::test]
async fn each_step_announces_when_it_starts_and_how_it_ends_under_the_chain_call() {
    let f = fixture("").await;
    f.install(vec![
        Chain::builder("told")
            .step(StepBuilder::new("broken", "fail").on_error(OnError::Continue))
            .step(emit("after", r#"{"n": 1}"#).depends_on("broken"))
            .step(emit("alone", r#"{"n": 2}"#)),
    ]);
    let call =
        f.rt.call("chain__told", json!({}), Caller::agent("agent-7"));
    let mut feed = f.rt.events().subscribe_execution(call.execution_id.clone());
    let r = f.rt.execute(call).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let mut seen = Vec::new();
    while let Some(Received::Event(e)) = feed.try_recv() {
        assert_eq!(e.tool, "chain__told");
        if let EventKind::ChainStep {
            step,
            status,
            attempts,
            execution_ids,
            detail,
        } = &e.kind
        {
            let ended = status.is_final();
            assert_eq!(ended, *status != StepStatus::Running, "{status}");
            // An ended step that ran names its calls; the skipped one made none.
            assert_eq!(
                execution_ids.len(),
                usize::from(ended && *status != StepStatus::Skipped),
                "{step}: {execution_ids:?}"
            );
            assert_eq!(*attempts as usize, execution_ids.len(), "{step}");
            seen.push((step.clone(), status.to_string(), detail.is_some()));
        }
    }
    let of = |id: &str| -> Vec<(String, bool)> {
        seen.iter()
            .filter(|(s, ..)| s == id)
            .map(|(_, st, d)| (st.clone(), *d))
            .collect()
    };
    let s = |st: &str, d: bool| (st.to_owned(), d);
    assert_eq!(of("broken"), vec![s("running", false), s("failed", true)]);
    assert_eq!(of("after"), vec![s("skipped", true)]);
    assert_eq!(
        of("alone"),
        vec![s("running", false), s("completed", false)]
    );
    // The run's own events frame them: started first, completed last.
    assert_eq!(seen.len(), 5);
}

#[tokio::test]
async fn runs_a_dead_process_left_running_are_marked_interrupted_and_live_ones_are_not() {
    let f = fixture("").await;
    let store = f.rt.store();
    let steps = json!([
        {"id": "done", "status": "completed", "started_at": 1, "completed_at": 2,
         "attempts": 1, "execution_ids": ["e1"], "error": null},
        {"id": "going", "status": "running", "started_at": 2, "completed_at": null,
         "attempts": 0, "execution_ids": [], "error": null},
        {"id": "later", "status": "pending", "started_at": null, "completed_at": null,
         "attempts": 0, "execution_ids": [], "error": null},
    ]);
    let me = crate::owner::this_process().unwrap();
    let (boot, rest) = me.split_once(':').unwrap();
    let (pid, _) = rest.split_once(':').unwrap();
    let runs = [
        ("crashed", Some(format!("{boot}:{pid}:1"))),
        ("old", None),
        ("live", Some(me.to_owned())),
    ];
    for (id, owner) in runs {
        store
            .start_chain_run(tw_store::NewChainRun {
                id: id.to_owned(),
                chain: "c".to_owned(),
                trace_id: "t".to_owned(),
                agent_id: "a".to_owned(),
                skill: None,
                user_id: None,
                input: json!({}),
                steps: steps.clone(),
                started_at: 1,
                owner,
            })
            .await
            .unwrap();
    }
    assert_eq!(f.rt.chains().recover_interrupted().await.unwrap(), 2);
    let status = |row: &tw_store::ChainRunRow| -> Vec<String> {
        row.steps
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap().to_owned())
            .collect()
    };
    for id in ["crashed", "old"] {
        let (row, _) = f.rt.chains().run(id).await.unwrap();
        assert_eq!(row.status, "interrupted", "{id}");
        assert!(
            row.error
                .as_deref()
                .unwrap()
                .contains("ended before the run did")
        );
        assert!(row.completed_at.is_some());
        assert_eq!(status(&row), ["completed", "cancelled", "cancelled"]);
    }
    let (row, _) = f.rt.chains().run("live").await.unwrap();
    assert_eq!(row.status, "running");
    assert_eq!(status(&row), ["completed", "running", "pending"]);
    // Nothing left to mark.
    assert_eq!(f.rt.chains().recover_interrupted().await.unwrap(), 0);
}

#[tokio::test]
async fn a_chain_is_checked_again_when_the_tools_it_calls_come_and_go() {
    let f = fixture("").await;
    let dir = f.rt.chains().dir().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("later.yaml"),
        "name: later\nsteps:\n  - id: shout\n    tool: shout\n    arguments: {text: hi}\n",
    )
    .unwrap();
    f.rt.chains().reload();
    let problems = f.rt.chains().problems();
    assert!(
        problems.iter().any(|p| p.to_string().contains("shout")),
        "{problems:?}"
    );
    assert!(f.rt.chains().get("later").is_none());

    let spec = tw_core::load_tool_specs(
        "[[tools]]\nname = \"shout\"\ndescription = \"Says it.\"\ncategory = \"system\"\n\
         group = \"custom\"\nparameters = [{ name = \"text\", type = \"string\" }]\n\
         command = { argv = [\"echo\", \"{text}\"] }\n",
        "tools.toml",
        tw_core::DefinitionFormat::Toml,
    )
    .unwrap()
    .remove(0);
    f.rt.tools().add_custom_tool(spec, "tester").await.unwrap();
    assert_eq!(f.rt.chains().problems(), vec![]);
    let r = f.run("later", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");

    f.rt.tools()
        .remove_custom_tool("shout", "tester")
        .await
        .unwrap();
    assert!(f.rt.chains().get("later").is_none());
    assert!(
        f.rt.chains()
            .problems()
            .iter()
            .any(|p| p.to_string().contains("shout"))
    );
}

#[tokio::test]
async fn a_saved_chain_is_replaced_only_when_asked_and_only_in_its_own_file() {
    let f = fixture("").await;
    let one = |desc: &str| {
        format!(
            "name: twice\ndescription: {desc}\nsteps:\n  - id: a\n    tool: echo\n    arguments: {{message: hi}}\n"
        )
    };
    let chains = f.rt.chains();
    chains
        .save(&one("First."), None, "tester", false)
        .await
        .unwrap();
    let path = chains.dir().join("twice.yaml");
    let refused = chains
        .save(&one("Second."), None, "tester", false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "chain_exists");
    assert!(std::fs::read_to_string(&path).unwrap().contains("First."));

    let saved = chains
        .save(&one("Second."), None, "tester", true)
        .await
        .unwrap();
    assert_eq!(saved, ["twice"]);
    assert!(std::fs::read_to_string(&path).unwrap().contains("Second."));
    assert_eq!(
        chains.require("twice").unwrap().chain.description,
        "Second."
    );
    let log =
        f.rt.store()
            .admin_events(&tw_store::AdminQuery {
                kind: Some("chain_replaced".to_owned()),
                ..Default::default()
            })
            .await
            .unwrap();
    assert_eq!(log.len(), 1);
    assert!(
        log[0].details["previous"]
            .as_str()
            .unwrap()
            .contains("First.")
    );
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(chains.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["twice.yaml"]);

    // A file holding this chain and another is edited where it lives.
    std::fs::write(
        chains.dir().join("both.yaml"),
        "- name: left\n  steps:\n    - {id: a, tool: echo, arguments: {message: l}}\n\
         - name: right\n  steps:\n    - {id: a, tool: echo, arguments: {message: r}}\n",
    )
    .unwrap();
    chains.reload();
    let left = "name: left\nsteps:\n  - {id: a, tool: echo, arguments: {message: L}}\n";
    let refused = chains.save(left, None, "tester", true).await.unwrap_err();
    assert_eq!(refused.code(), "chain_elsewhere");
    assert!(refused.to_string().contains("both.yaml"), "{refused}");
    assert!(!chains.dir().join("left.yaml").exists());
    // And a file named after a chain that also holds another is not overwritten either.
    std::fs::write(
        chains.dir().join("pair.yaml"),
        "- name: pair\n  steps:\n    - {id: a, tool: echo, arguments: {message: p}}\n\
         - name: extra\n  steps:\n    - {id: a, tool: echo, arguments: {message: e}}\n",
    )
    .unwrap();
    chains.reload();
    let pair = "name: pair\nsteps:\n  - {id: a, tool: echo, arguments: {message: P}}\n";
    let refused = chains.save(pair, None, "tester", true).await.unwrap_err();
    assert_eq!(refused.code(), "chain_elsewhere");
    assert!(refused.to_string().contains("extra"), "{refused}");
}
