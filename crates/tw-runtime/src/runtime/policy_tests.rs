//! The policy engine inside the pipeline, on real SQLite files: exact rate limits under a thousand
//! concurrent calls, calls that wait for a person and are released (or refused) by another
//! runtime on the same data directory, grants, mode switches seen by other processes, and policy
//! files reloaded when they change (and kept when the change is broken).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, OperationalMode, ToolStatus};
use tw_store::{AdminQuery, ConfirmationState};

use tw_core::policy;

use super::*;
use crate::EventKind;
use crate::confirm::{Answer, GrantSpec, Remember, Who};

pub(super) struct Install {
    dir: tempfile::TempDir,
}

impl Install {
    pub(super) fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Self { dir }
    }

    pub(super) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A runtime on this installation (several may be open at once, like several processes).
    pub(super) async fn open(&self) -> std::result::Result<Runtime, RuntimeError> {
        let path = self.path("config.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let config = Config::parse(&text, &path, None)?;
        Runtime::open(RuntimeOptions::new(
            self.path("data"),
            vec![self.path("ws")],
            config,
        ))
        .await
    }
}

fn caller() -> Caller {
    Caller::agent("agent-7")
}

pub(super) async fn wait_until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn one_pending(rt: &Runtime) -> tw_store::ConfirmationRow {
    wait_until("a pending confirmation", || async {
        !rt.confirmations()
            .pending_confirmations()
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    rt.confirmations()
        .pending_confirmations()
        .await
        .unwrap()
        .remove(0)
}

pub(super) fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_parallel_calls_against_100_per_minute_admit_exactly_100() {
    let install = Install::new(
        "[policy]\nallow = [\"echo\"]\n[[policy.rate_limits]]\ntools = [\"echo\"]\nper_minute = 100\n",
    );
    let rt = install.open().await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            rt.execute(rt.call("echo", json!({ "i": i }), caller()))
                .await
        }));
    }
    let mut statuses = std::collections::BTreeMap::new();
    for t in tasks {
        let r = t.await.unwrap();
        *statuses
            .entry((r.status.as_str(), code(&r).map(str::to_owned)))
            .or_insert(0) += 1;
    }
    assert_eq!(
        statuses,
        std::collections::BTreeMap::from([
            (("success", None), 100),
            (("permission_denied", Some("rate_limited".to_owned())), 900),
        ])
    );
    // Every call has its record; every refusal is a violation.
    let report = rt.store().usage_report(&Default::default()).await.unwrap();
    assert_eq!(report.by_tool[0].calls, 1000);
    assert_eq!(report.by_tool[0].violations, 900);
    rt.close().await;
    // A restart does not reset the count.
    let rt = install.open().await.unwrap();
    let r = rt.execute(rt.call("echo", json!({}), caller())).await;
    assert_eq!(code(&r), Some("rate_limited"));
    rt.close().await;
}

const ASKS: &str =
    "[policy]\nallow = [\"group:fs\", \"echo\"]\n[policy.modes.normal]\nask = [\"write_file\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_is_released_by_an_approval_from_another_process() {
    let install = Install::new(ASKS);
    let agent_side = install.open().await.unwrap();
    let person_side = install.open().await.unwrap();
    let mut events = agent_side.events().subscribe();
    let rt = agent_side.clone();
    let waiting = tokio::spawn(async move {
        rt.execute(rt.call(
            "write_file",
            json!({"path": "a.txt", "content": "hi"}),
            caller(),
        ))
        .await
    });
    let pending = one_pending(&person_side).await;
    assert_eq!(
        (pending.tool.as_str(), pending.agent_id.as_str()),
        ("write_file", "agent-7")
    );
    assert!(
        pending
            .reason
            .contains("in normal mode write_file needs a person's approval")
    );
    person_side
        .confirmations()
        .answer(
            &pending.id,
            Answer::Approve { grant: None },
            "ann",
            Some("looks fine"),
        )
        .await
        .unwrap();
    let r = waiting.await.unwrap();
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    assert_eq!(
        std::fs::read_to_string(install.path("ws/a.txt")).unwrap(),
        "hi"
    );
    let last = r.decision.as_ref().unwrap().trace.last().unwrap().clone();
    assert_eq!(
        (last.layer, last.reason.as_str()),
        (policy::Layer::Confirmation, "approved by ann: looks fine")
    );
    // The agent's side announced the request and its answer.
    let mut kinds = Vec::new();
    while let Some(crate::events::Received::Event(e)) = events.try_recv() {
        kinds.push(match &e.kind {
            EventKind::ConfirmationRequested { .. } => "requested",
            EventKind::ConfirmationResolved { state, .. } if state == "approved" => "approved",
            EventKind::Started => "started",
            EventKind::Completed { .. } => "completed",
            _ => "other",
        });
    }
    assert_eq!(kinds, ["requested", "approved", "started", "completed"]);
    agent_side.close().await;
    person_side.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_expiry_and_cancellation_all_refuse_the_call() {
    let install = Install::new(&format!("{ASKS}[policy.confirmation]\ntimeout_secs = 1\n"));
    let rt = install.open().await.unwrap();
    let write = |rt: &Runtime| {
        rt.call(
            "write_file",
            json!({"path": "b.txt", "content": "x"}),
            caller(),
        )
    };

    // Denied by a person.
    let call = write(&rt);
    let r2 = rt.clone();
    let waiting = tokio::spawn(async move { r2.execute(call).await });
    let pending = one_pending(&rt).await;
    rt.confirmations()
        .answer(&pending.id, Answer::Deny, "bob", Some("not now"))
        .await
        .unwrap();
    let r = waiting.await.unwrap();
    assert_eq!(
        (r.status, code(&r)),
        (ToolStatus::PermissionDenied, Some("confirmation_denied"))
    );
    assert_eq!(r.error.unwrap().message, "denied by bob: not now");

    // Nobody answers: denied when the request expires (fail closed).
    let started = Instant::now();
    let r = rt.execute(write(&rt)).await;
    assert_eq!(
        (r.status, code(&r)),
        (ToolStatus::PermissionDenied, Some("confirmation_expired"))
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );

    // The caller gives up while waiting: cancelled, and the request is withdrawn.
    let call = write(&rt);
    let id = call.execution_id.clone();
    let r2 = rt.clone();
    let waiting = tokio::spawn(async move { r2.execute(call).await });
    let pending = one_pending(&rt).await;
    assert!(rt.cancel(&id));
    let r = waiting.await.unwrap();
    assert_eq!(r.status, ToolStatus::Cancelled);
    let row = rt.store().confirmation(&pending.id).await.unwrap().unwrap();
    assert_eq!(
        (row.state, row.note.as_deref()),
        (
            ConfirmationState::Denied,
            Some("the call was cancelled while it waited")
        )
    );
    assert!(
        !install.path("ws/b.txt").exists(),
        "no refused call wrote anything"
    );
    // Every refusal left one record.
    let rows = rt.store().query(&Default::default()).await.unwrap().rows;
    assert_eq!(rows.len(), 3);
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_answer_asks_but_never_denials() {
    let install = Install::new(ASKS);
    let rt = install.open().await.unwrap();
    let args = json!({"path": "c.txt", "content": "1", "mode": "overwrite"});

    // Approve and remember this exact call.
    let r2 = rt.clone();
    let a2 = args.clone();
    let waiting =
        tokio::spawn(async move { r2.execute(r2.call("write_file", a2, caller())).await });
    let pending = one_pending(&rt).await;
    let outcome = rt
        .confirmations()
        .answer(
            &pending.id,
            Answer::Approve {
                grant: Some(GrantSpec {
                    remember: Remember::Exact,
                    who: Some(Who::SameCaller),
                    duration: Some(Duration::from_secs(3600)),
                }),
            },
            "ann",
            None,
        )
        .await
        .unwrap();
    assert!(matches!(
        outcome,
        crate::Answered::Resolved { grant: Some(_), .. }
    ));
    assert_eq!(waiting.await.unwrap().status, ToolStatus::Success);

    // The same call again runs without asking; its trace names the grant.
    let mut again = rt.call("write_file", args.clone(), caller());
    again.no_wait = true;
    let r = rt.execute(again).await;
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    let grant_layer = r.decision.unwrap().trace.last().unwrap().layer;
    assert_eq!(grant_layer, policy::Layer::Grant);
    // Different arguments, or another caller, still ask.
    for (args, who) in [
        (
            json!({"path": "c.txt", "content": "2", "mode": "overwrite"}),
            caller(),
        ),
        (args.clone(), Caller::agent("someone-else")),
    ] {
        let mut call = rt.call("write_file", args, who);
        call.no_wait = true;
        assert_eq!(
            rt.execute(call).await.status,
            ToolStatus::RequiresConfirmation
        );
    }

    // A grant never turns a denial into anything: the policy now denies write_file outright.
    rt.close().await;
    std::fs::write(
        install.path("config.toml"),
        "[policy]\nallow = [\"group:fs\"]\ndeny = [\"write_file\"]\n",
    )
    .unwrap();
    let rt = install.open().await.unwrap();
    assert_eq!(
        rt.confirmations().grants(false).await.unwrap().len(),
        1,
        "the grant is still there"
    );
    let r = rt.execute(rt.call("write_file", args, caller())).await;
    assert_eq!(
        (r.status, code(&r)),
        (ToolStatus::PermissionDenied, Some("policy_denied"))
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_grant_releases_every_waiting_call_it_covers() {
    let install = Install::new(ASKS);
    let rt = install.open().await.unwrap();
    let mut waiting = Vec::new();
    for name in ["d1.txt", "d2.txt"] {
        let r2 = rt.clone();
        waiting.push(tokio::spawn(async move {
            r2.execute(r2.call(
                "write_file",
                json!({"path": name, "content": "x"}),
                caller(),
            ))
            .await
        }));
    }
    wait_until("two pending confirmations", || async {
        rt.confirmations()
            .pending_confirmations()
            .await
            .unwrap()
            .len()
            == 2
    })
    .await;
    let mut pattern = serde_json::Map::new();
    pattern.insert("path".into(), Value::String("d*.txt".into()));
    rt.confirmations()
        .grant(
            "write_file",
            &GrantSpec {
                remember: Remember::Pattern(pattern),
                who: Some(Who::Anyone),
                duration: None,
            },
            "ann",
        )
        .await
        .unwrap();
    for w in waiting {
        assert_eq!(w.await.unwrap().status, ToolStatus::Success);
    }
    let events = rt
        .store()
        .admin_events(&AdminQuery::default())
        .await
        .unwrap();
    assert_eq!(events[0].kind, "grant_created");
    // Revoked, it no longer covers anything.
    let grant = rt.confirmations().grants(false).await.unwrap().remove(0);
    rt.confirmations()
        .revoke_grant(&grant.id, "ann")
        .await
        .unwrap();
    let again = rt
        .confirmations()
        .revoke_grant(&grant.id, "ann")
        .await
        .unwrap_err();
    assert_eq!(again.code(), "unknown_grant", "{again}");
    let mut call = rt.call(
        "write_file",
        json!({"path": "d3.txt", "content": "x"}),
        caller(),
    );
    call.no_wait = true;
    assert_eq!(
        rt.execute(call).await.status,
        ToolStatus::RequiresConfirmation
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchers_switch_is_shown_with_its_reasons_here_and_elsewhere_until_a_person_switches()
{
    // A floor no disk clears: the watcher degrades at its first look.
    let install = Install::new(
        "[watchdog]\ninterval_ms = 100\ndisk_free_min_mb = 1000000000\nmemory_available_min_mb = 0\n\
         memory_pressure_max = 0\n",
    );
    let a = install.open().await.unwrap();
    wait_until("the watcher to degrade", || async {
        a.settings().automatic_switch().await.is_some()
    })
    .await;
    let here = a.settings().automatic_switch().await.unwrap();
    assert_eq!(
        (here.from, here.to),
        (OperationalMode::Normal, OperationalMode::Degraded)
    );
    assert!(
        here.reasons.len() == 1 && here.reasons[0].contains("below 1000000000 MiB"),
        "{here:?}"
    );
    // Another process (its own watcher off) shows the same switch, from the admin log.
    std::fs::write(install.path("config.toml"), "[watchdog]\nenabled = false\n").unwrap();
    let b = install.open().await.unwrap();
    wait_until("the other runtime to see the switch", || async {
        b.settings().automatic_switch().await.is_some()
    })
    .await;
    let there = b.settings().automatic_switch().await.unwrap();
    assert_eq!(
        (there.from, there.to, &there.reasons),
        (here.from, here.to, &here.reasons)
    );
    // A person switches, there (to a stricter mode: while the disk stays full, the watcher
    // would take a milder one back to degraded): neither shows it any more.
    b.settings()
        .set_mode(OperationalMode::Lockdown, "ann")
        .await
        .unwrap();
    assert_eq!(b.settings().automatic_switch().await, None);
    wait_until("this runtime to see the person's switch", || async {
        a.settings().mode() == OperationalMode::Lockdown
    })
    .await;
    assert_eq!(a.settings().automatic_switch().await, None);
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_switch_is_recorded_and_reaches_other_processes() {
    let install = Install::new("");
    let a = install.open().await.unwrap();
    let b = install.open().await.unwrap();
    let write = |rt: &Runtime| {
        let mut c = rt.call(
            "write_file",
            json!({"path": "e.txt", "content": "x"}),
            caller(),
        );
        c.no_wait = true;
        c
    };
    assert_eq!(b.execute(write(&b)).await.status, ToolStatus::Success);
    assert_eq!(
        a.settings()
            .set_mode(OperationalMode::Lockdown, "ann")
            .await
            .unwrap(),
        OperationalMode::Normal
    );
    let r = a.execute(write(&a)).await;
    assert_eq!(
        (r.status, code(&r)),
        (ToolStatus::PermissionDenied, Some("mode_forbidden"))
    );
    wait_until("the other runtime to see lockdown", || async {
        b.settings().mode() == OperationalMode::Lockdown
    })
    .await;
    let r = b.execute(write(&b)).await;
    assert_eq!(code(&r), Some("mode_forbidden"));
    let read = b
        .execute(b.call("read_file", json!({"path": "e.txt"}), caller()))
        .await;
    assert_eq!(
        read.status,
        ToolStatus::Success,
        "read-only tools still work in lockdown"
    );
    let events = a
        .store()
        .admin_events(&AdminQuery::default())
        .await
        .unwrap();
    assert_eq!(
        (
            events[0].kind.as_str(),
            events[0].actor.as_str(),
            events[0].summary.as_str()
        ),
        ("mode_changed", "ann", "operational mode normal -> lockdown")
    );
    // A new process starts in the switched mode.
    a.close().await;
    b.close().await;
    let c = install.open().await.unwrap();
    assert_eq!(c.settings().mode(), OperationalMode::Lockdown);
    c.close().await;
}

fn write_policy(path: &Path, text: &str) {
    // Write then rename, as editors do, so the watcher never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_files_reload_on_change_and_a_broken_change_keeps_the_last_good_policy() {
    let install = Install::new("policy_files = [\"policy.toml\"]\n");
    let policy_file = install.path("policy.toml");
    write_policy(&policy_file, "allow = [\"echo\"]\n");
    let rt = install.open().await.unwrap();
    let echo = |rt: &Runtime| rt.call("echo", json!({}), caller());
    assert_eq!(rt.execute(echo(&rt)).await.status, ToolStatus::Success);

    write_policy(&policy_file, "allow = [\"echo\"]\ndeny = [\"echo\"]\n");
    // The new policy is in force a moment before its reload is on record: wait for both.
    wait_until("the reload to deny echo and be recorded", || async {
        rt.explain("echo", &json!({}), &caller()).unwrap().decision == policy::Decision::Deny
            && !rt
                .store()
                .admin_events(&AdminQuery::default())
                .await
                .unwrap()
                .is_empty()
    })
    .await;
    let r = rt.execute(echo(&rt)).await;
    assert_eq!(code(&r), Some("policy_denied"));
    let reloaded = rt
        .store()
        .admin_events(&AdminQuery::default())
        .await
        .unwrap();
    assert_eq!(reloaded[0].kind, "policy_reloaded");
    assert_eq!(reloaded[0].summary, "policy reloaded: + deny echo");

    // A broken change is refused: the last good policy stays, and the failure is recorded.
    write_policy(&policy_file, "allow = [\"echo\"\ndeny = \n");
    wait_until("the failed reload to be recorded", || async {
        let events = rt
            .store()
            .admin_events(&AdminQuery::default())
            .await
            .unwrap();
        events[0].kind == "policy_reload_failed"
    })
    .await;
    let events = rt
        .store()
        .admin_events(&AdminQuery::default())
        .await
        .unwrap();
    let errors = events[0].details["errors"].as_str().unwrap();
    assert!(errors.contains("policy.toml:2:1"), "{errors}");
    assert_eq!(code(&rt.execute(echo(&rt)).await), Some("policy_denied"));
    // The failure is kept for the settings page until a reload succeeds.
    let (at, kept) = rt.settings().policy_error().unwrap();
    assert_eq!(kept, errors);
    assert!(
        (events[0].at - at).abs() < 1_000_000,
        "{at} vs {}",
        events[0].at
    );
    write_policy(&policy_file, "allow = [\"echo\"]\n");
    wait_until("the fixed policy to allow echo", || async {
        rt.explain("echo", &json!({}), &caller()).unwrap().decision == policy::Decision::Allow
            && rt.settings().policy_error().is_none()
    })
    .await;
    assert_eq!(rt.settings().policy_error(), None);
    write_policy(&policy_file, "allow = [\"echo\"\ndeny = \n");
    rt.close().await;

    // A process that starts with the broken file refuses to start, and says where.
    let Err(err) = install.open().await else {
        panic!("a broken policy must refuse to start")
    };
    let shown = format!(
        "{err}: {}",
        std::error::Error::source(&err)
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    assert!(
        shown.contains("the policy is invalid") && shown.contains("policy.toml:2:1"),
        "{shown}"
    );
}

/// Policy checks where a path leads afresh on every call (issue 20 made that check one system
/// call beneath the workspace root, remembering nothing): a file or a directory swapped for a
/// link to a forbidden place between two calls is judged as the link on the second.
#[tokio::test]
async fn a_path_swapped_for_a_link_between_calls_is_judged_where_it_now_leads() {
    let install = Install::new(
        "[policy]\nallow = [\"read_file\"]\n\
         [[policy.rules]]\nname = \"secrets\"\nforbid_paths = [\"private\"]\n",
    );
    let ws = install.path("ws");
    for dir in ["docs", "private"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for file in ["notes.txt", "docs/a.txt", "private/a.txt"] {
        std::fs::write(ws.join(file), "x\n").unwrap();
    }
    let rt = install.open().await.unwrap();
    let read = |path: &'static str| {
        let rt = &rt;
        async move {
            let r = rt
                .execute(rt.call("read_file", json!({ "path": path }), caller()))
                .await;
            (path, r.status, code(&r).map(str::to_owned))
        }
    };
    let ok = |path| (path, ToolStatus::Success, None);
    let forbidden = |path| {
        (
            path,
            ToolStatus::PermissionDenied,
            Some("path_forbidden".to_owned()),
        )
    };
    assert_eq!(
        vec![read("notes.txt").await, read("docs/a.txt").await],
        vec![ok("notes.txt"), ok("docs/a.txt")]
    );
    std::fs::remove_file(ws.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink("private/a.txt", ws.join("notes.txt")).unwrap();
    std::fs::remove_dir_all(ws.join("docs")).unwrap();
    std::os::unix::fs::symlink("private", ws.join("docs")).unwrap();
    assert_eq!(
        vec![read("notes.txt").await, read("docs/a.txt").await],
        vec![forbidden("notes.txt"), forbidden("docs/a.txt")]
    );
    let r = rt
        .execute(rt.call("read_file", json!({"path": "notes.txt"}), caller()))
        .await;
    let message = r.error.map(|e| e.message).unwrap_or_default();
    assert!(message.contains("it leads to"), "{message}");
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// An edit applies without a restart; an edit that does not load refuses the skill (issue 15:
/// keeping the last good version would keep a skill wider than the one its author now wants).
async fn skill_edits_apply_while_running_and_a_broken_edit_refuses_the_skill() {
    let install = Install::new("[policy]\nallow = [\"echo\", \"read_file\"]\n");
    let skill_file = install.path("ws/skills/helper/SKILL.md");
    std::fs::create_dir_all(skill_file.parent().unwrap()).unwrap();
    let write_skill = |tools: &str| {
        write_policy(
            &skill_file,
            &format!("---\nname: helper\ndescription: Helps.\ntools: {tools}\n---\n"),
        )
    };
    write_skill("[read_file]");
    let rt = install.open().await.unwrap();
    let echo = |rt: &Runtime| rt.call("echo", json!({}), caller().with_skill("helper"));
    let r = rt.execute(echo(&rt)).await;
    assert_eq!(code(&r), Some("skill_denied"));

    // The skill gains echo: the next calls may use it, without a restart.
    write_skill("[read_file, echo]");
    wait_until("the edited skill to allow echo", || async {
        rt.explain("echo", &json!({}), &caller().with_skill("helper"))
            .unwrap()
            .decision
            == policy::Decision::Allow
    })
    .await;
    assert_eq!(rt.execute(echo(&rt)).await.status, ToolStatus::Success);

    // An edit that does not parse refuses the skill, and says why.
    write_policy(&skill_file, "---\nname: helper\ntools: [\n---\n");
    wait_until("the broken edit to be seen", || async {
        rt.skills()
            .loaded()
            .get("helper")
            .is_some_and(|s| s.manifest.is_none())
    })
    .await;
    let skills = rt.skills().loaded();
    let helper = skills.get("helper").unwrap();
    assert!(
        helper.diagnostics[0].message.contains("not valid YAML"),
        "{:?}",
        helper.diagnostics
    );
    let r = rt.execute(echo(&rt)).await;
    assert_eq!(code(&r), Some("skill_denied"));
    let message = &r.error.as_ref().unwrap().message;
    assert!(
        message.starts_with(&format!(
            "skill helper does not load ({}:",
            skill_file.display()
        )) && message.contains("not valid YAML"),
        "{message}"
    );
    rt.close().await;
}
