//! Capability auto-resolve inside the runtime, against a small local server that speaks the
//! OpenAI-compatible chat completions protocol (the one thing that may stand in: no language
//! model is reachable here). A new tool is classified by the model once and cached; a model that
//! answers garbage, an error status or nothing in time leaves registration to the heuristic; a
//! skill's `permissions` reach a tool registered after it, and an override beats the classifier.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tw_core::capability::Source;
use tw_core::{Caller, DefinitionFormat, ToolStatus, load_tool_specs};

use super::policy_tests::{Install, code, wait_until};
use tw_core::{ToolSpec, policy};

use super::*;
use crate::OverrideChange;

/// How the fake model answers.
#[derive(Debug, Clone)]
pub(super) enum Answer {
    /// A chat completion whose message content is this text.
    Content(String),
    /// This HTTP status with a plain body.
    Status(u16),
    /// Nothing, for longer than any time limit in these tests.
    Silence,
}

/// An OpenAI-compatible endpoint on 127.0.0.1 that records each request's path and body.
pub(super) struct FakeModel {
    base: String,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    pub(super) async fn start(answer: Answer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let answer = Arc::new(Mutex::new(answer));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (Arc::clone(&answer), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (a, r) = (Arc::clone(&a), Arc::clone(&r));
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // Headers, then as many body bytes as Content-Length says.
                    let (head_end, length) = loop {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            break (i + 4, length);
                        }
                    };
                    while buf.len() < head_end + length {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let body: Value = serde_json::from_slice(&buf[head_end..head_end + length])
                        .unwrap_or_default();
                    r.lock().unwrap().push((path, body));
                    let answer = a.lock().unwrap().clone();
                    let (status, body) = match answer {
                        Answer::Content(text) => (
                            200,
                            json!({
                                "id": "chatcmpl-1",
                                "object": "chat.completion",
                                "model": "test-model",
                                "choices": [{
                                    "index": 0,
                                    "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"
                                }]
                            })
                            .to_string(),
                        ),
                        Answer::Status(s) => (s, "upstream exploded".to_owned()),
                        Answer::Silence => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            return;
                        }
                    };
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self {
            base,
            answer,
            requests,
            _task: task,
        }
    }

    pub(super) fn answer(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    pub(super) fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }
}

fn tool(name: &str, description: &str) -> ToolSpec {
    let toml = format!(
        r#"
[[tools]]
name = "{name}"
description = "{description}"
category = "network"
group = "custom"
parameters = [{{ name = "url", type = "string", description = "The page's address" }}]
command = {{ argv = ["echo", "{{url}}"] }}
"#
    );
    load_tool_specs(&toml, "tools.toml", DefinitionFormat::Toml)
        .unwrap()
        .remove(0)
}

pub(super) fn config(model: &FakeModel) -> String {
    format!(
        "license_tier = \"pro\"\n[policy]\ndefault = \"allow\"\n[classifier]\nendpoint = \"{}\"\nmodel = \"test-model\"\ntimeout_ms = 400\n",
        model.base
    )
}

fn held(rt: &Runtime, tool: &str) -> (Source, Vec<(String, f32)>, String) {
    let state = rt.skills().capabilities();
    let t = state.tools.get(tool).unwrap();
    (
        t.classification.source,
        t.classification
            .capabilities
            .iter()
            .map(|a| (a.capability.clone(), a.confidence))
            .collect(),
        t.classification.detail.clone().unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_classifies_a_new_tool_once_and_garbage_errors_or_silence_fall_back() {
    let model = FakeModel::start(Answer::Content(
        r#"{"capabilities":[{"name":"web_read","confidence":0.9}]}"#.to_owned(),
    ))
    .await;
    let install = Install::new(&config(&model));
    let rt = install.open().await.unwrap();
    rt.tools()
        .add_custom_tool(tool("page_title", "Get the title of a web page"), "tester")
        .await
        .unwrap();
    assert_eq!(
        held(&rt, "page_title"),
        (
            Source::Llm,
            vec![("web_read".to_owned(), 0.9)],
            "model test-model".to_owned()
        )
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, "/v1/chat/completions");
    assert_eq!(requests[0].1["model"], "test-model");
    assert!(
        requests[0].1["messages"].to_string().contains("page_title"),
        "{}",
        requests[0].1
    );

    // Garbage: prose instead of the JSON object asked for.
    model.answer(Answer::Content("I think it reads the web.".to_owned()));
    rt.tools()
        .add_custom_tool(tool("fetch_page", "Fetch a web page"), "tester")
        .await
        .unwrap();
    let (source, _, detail) = held(&rt, "fetch_page");
    assert_eq!(source, Source::Heuristic);
    assert!(detail.starts_with("model test-model failed ("), "{detail}");

    // Only capabilities the catalog does not have.
    model.answer(Answer::Content(
        r#"{"capabilities":[{"name":"teleport","confidence":1}]}"#.to_owned(),
    ));
    rt.tools()
        .add_custom_tool(tool("page_links", "List the links of a web page"), "tester")
        .await
        .unwrap();
    let (source, _, detail) = held(&rt, "page_links");
    assert_eq!(source, Source::Heuristic);
    assert!(detail.contains("teleport"), "{detail}");

    // An error status.
    model.answer(Answer::Status(500));
    rt.tools()
        .add_custom_tool(tool("page_text", "Read the text of a web page"), "tester")
        .await
        .unwrap();
    let (source, _, detail) = held(&rt, "page_text");
    assert_eq!(source, Source::Heuristic);
    assert!(detail.contains("HTTP 500"), "{detail}");

    // Silence: registration goes on after the time limit.
    model.answer(Answer::Silence);
    rt.tools()
        .add_custom_tool(tool("page_size", "Measure a web page"), "tester")
        .await
        .unwrap();
    let (source, _, detail) = held(&rt, "page_size");
    assert_eq!(source, Source::Heuristic);
    assert!(
        detail.contains("no answer within 400 ms") || detail.contains("did not answer in time"),
        "{detail}"
    );
    // Every tool is registered and callable whatever the model did.
    for name in [
        "page_title",
        "fetch_page",
        "page_links",
        "page_text",
        "page_size",
    ] {
        assert!(rt.registry().get(name).is_some(), "{name}");
    }
    let asked = model.requests().len();
    rt.close().await;

    // A restart reads the cache: nothing is classified again, the model is not asked.
    model.answer(Answer::Content(
        r#"{"capabilities":[{"name":"code_execute","confidence":1}]}"#.to_owned(),
    ));
    let rt = install.open().await.unwrap();
    assert_eq!(held(&rt, "page_title").0, Source::Llm);
    assert_eq!(held(&rt, "fetch_page").0, Source::Heuristic);
    assert_eq!(model.requests().len(), asked);
    // Until someone asks for it again.
    let again = rt.skills().reclassify_tool("fetch_page").await.unwrap();
    assert_eq!(again.classification.source, Source::Llm);
    assert_eq!(
        held(&rt, "fetch_page").1,
        vec![("code_execute".to_owned(), 1.0)]
    );
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_reaches_a_tool_registered_later_and_an_override_beats_the_classifier() {
    let model = FakeModel::start(Answer::Content(
        r#"{"capabilities":[{"name":"web_read","confidence":0.8}]}"#.to_owned(),
    ))
    .await;
    let install = Install::new(&config(&model));
    let skill = install.path("ws/skills/research/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: research\ndescription: Reads the web.\npermissions: [web_read]\n---\n",
    )
    .unwrap();
    let rt = install.open().await.unwrap();
    let under_skill = || Caller::agent("agent-7").with_skill("research");
    let call = |rt: &Runtime| {
        rt.call(
            "page_title",
            json!({"url": "https://docs.rs/"}),
            under_skill(),
        )
    };
    assert_eq!(
        rt.execute(call(&rt)).await.status,
        ToolStatus::NotFound,
        "not registered yet"
    );
    rt.tools()
        .add_custom_tool(tool("page_title", "Get the title of a web page"), "tester")
        .await
        .unwrap();
    // The skill was not edited; its permissions reach the new tool.
    let r = rt.execute(call(&rt)).await;
    assert_eq!(r.status, ToolStatus::Success, "{:?}", r.error);
    let resolved = rt.skills().resolve("research").unwrap();
    let entry = resolved
        .tools
        .iter()
        .find(|t| t.tool.name == "page_title")
        .unwrap();
    assert_eq!(
        entry.tool.provenance,
        tw_core::skill::Provenance::Capability("web_read".into())
    );
    assert_eq!(entry.classification.as_ref().unwrap().source, Source::Llm);

    // An administrator removes it from the skill: the override beats the classifier.
    rt.skills()
        .change_override(
            "research",
            "page_title",
            OverrideChange::Remove,
            Some("too broad"),
            "alice",
        )
        .await
        .unwrap();
    let r = rt.execute(call(&rt)).await;
    assert_eq!(r.status, ToolStatus::PermissionDenied);
    assert_eq!(code(&r), Some("skill_denied"));
    assert_eq!(
        r.error.as_ref().unwrap().message,
        "tool page_title was removed from skill research by an override (alice)"
    );
    assert!(
        rt.skills()
            .resolve("research")
            .unwrap()
            .tools
            .iter()
            .all(|t| t.tool.name != "page_title")
    );
    // Another process on the data directory sees the override within a refresh.
    let other = install.open().await.unwrap();
    assert_eq!(
        other.execute(call(&other)).await.status,
        ToolStatus::PermissionDenied
    );
    rt.skills()
        .change_override(
            "research",
            "page_title",
            OverrideChange::Clear,
            None,
            "alice",
        )
        .await
        .unwrap();
    assert_eq!(rt.execute(call(&rt)).await.status, ToolStatus::Success);

    // An administrator's capabilities beat the model's too.
    rt.skills()
        .set_tool_capabilities("page_title", &["code_execute".to_owned()], None, "bob")
        .await
        .unwrap();
    assert_eq!(code(&rt.execute(call(&rt)).await), Some("skill_denied"));
    assert!(
        rt.skills()
            .set_tool_capabilities("page_title", &["teleport".to_owned()], None, "bob")
            .await
            .is_err()
    );
    assert!(
        rt.skills()
            .clear_tool_capabilities("page_title", "bob")
            .await
            .unwrap()
    );
    assert_eq!(held(&rt, "page_title").0, Source::Llm);
    assert_eq!(rt.execute(call(&rt)).await.status, ToolStatus::Success);

    // Every change is in the admin log with who made it.
    let changes = rt
        .store()
        .admin_events(&tw_store::AdminQuery::default())
        .await
        .unwrap();
    let kinds: Vec<(String, String)> = changes
        .iter()
        .filter(|e| e.kind.starts_with("skill_override") || e.kind.starts_with("tool_classif"))
        .map(|e| (e.kind.clone(), e.actor.clone()))
        .collect();
    assert_eq!(
        kinds.len(),
        4,
        "set, clear, set capabilities, clear capabilities: {kinds:?}"
    );
    // The audit log names the skill on every call made under it.
    let metrics = rt.skills().metrics().await.unwrap();
    let research = metrics
        .skills
        .iter()
        .find(|s| s.skill == "research")
        .unwrap();
    // Not found, allowed, removed (here and in the other process), allowed, admin's
    // capabilities, allowed.
    assert_eq!((research.calls, research.skill_denied), (7, 3));
    other.close().await;
    rt.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_or_classifier_setting_that_cannot_be_used_refuses_to_start() {
    let install = Install::new(
        "capabilities_file = \"caps.yaml\"\n[classifier]\nendpoint = \"http://127.0.0.1:9/v1\"\n",
    );
    std::fs::write(
        install.path("caps.yaml"),
        "version: 1\ncapabilities:\n  web_read:\n    description: Reads.\n    colour: blue\n",
    )
    .unwrap();
    let e = install.open().await.err().unwrap().to_string();
    assert!(
        e.contains("caps.yaml:line 5") || e.contains("caps.yaml:5"),
        "{e}"
    );
    let install = Install::new(
        "[classifier]\nendpoint = \"http://127.0.0.1:9/v1\"\napi_key_env = \"TW_TEST_NO_SUCH_KEY\"\n",
    );
    let e = install.open().await.err().unwrap().to_string();
    assert_eq!(
        e,
        "classifier.api_key_env names TW_TEST_NO_SUCH_KEY, which is not set in the environment"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skills_directory_made_by_the_first_save_is_watched_from_then_on() {
    let install = Install::new("[policy]\nallow = [\"echo\", \"read_file\"]\n");
    let rt = install.open().await.unwrap();
    assert!(!install.path("ws/skills").exists());
    let skill =
        |tools: &str| format!("---\nname: helper\ndescription: Helps.\ntools: {tools}\n---\n");
    let saved = rt
        .skills()
        .save("helper", &skill("[read_file]"), "tester")
        .await
        .unwrap();
    assert!(saved.created);
    let echo = || Caller::agent("agent-7").with_skill("helper");
    assert_eq!(
        code(&rt.execute(rt.call("echo", json!({}), echo())).await),
        Some("skill_denied")
    );
    // An edit made outside the app, after the directory appeared: picked up without a restart.
    std::fs::write(&saved.path, skill("[read_file, echo]")).unwrap();
    wait_until("the edit to be picked up", || async {
        rt.explain("echo", &json!({}), &echo()).unwrap().decision == policy::Decision::Allow
    })
    .await;
    // A save with an error is refused and leaves the file as it was.
    let before = std::fs::read_to_string(&saved.path).unwrap();
    let e = rt
        .skills()
        .save("helper", "---\nname: helper\n---\n", "tester")
        .await
        .err()
        .unwrap();
    assert!(matches!(e, RuntimeError::SkillInvalid { .. }), "{e}");
    assert_eq!(std::fs::read_to_string(&saved.path).unwrap(), before);
    rt.close().await;
}

/// The skill layer's verdict on `echo` under `skill`, as (decision, reason).
fn skill_verdict(rt: &Runtime, skill: &str) -> (policy::Decision, String) {
    let decision = rt
        .explain(
            "echo",
            &json!({}),
            &Caller::agent("agent-7").with_skill(skill),
        )
        .unwrap();
    match decision
        .trace
        .into_iter()
        .find(|v| v.layer == policy::Layer::Skill)
    {
        Some(layer) => (layer.decision, layer.reason),
        None => (
            decision.decision,
            "no skill layer: the skill name was only a label".to_owned(),
        ),
    }
}

/// Issue 15: a skills directory that cannot be read is an error, not an empty set. From start-up,
/// every call under a skill is refused with the reason (and the runtime warns); once it can be
/// read the skills apply, within a second or so, without a restart; an edit that no longer loads
/// refuses the skill instead of keeping its last good version; and a watched directory replaced by
/// a file refuses every skill again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skills_directory_that_cannot_be_read_refuses_every_skill_until_it_can() {
    let install = Install::new("[policy]\nallow = [\"echo\", \"read_file\"]\n");
    let dir = install.path("ws/skills");
    std::fs::write(&dir, "a file where the skills directory should be").unwrap();
    let rt = install.open().await.unwrap();
    let unreadable = |skill: &str| {
        (
            policy::Decision::Deny,
            format!(
                "skill {skill} cannot be checked: the skills directory cannot be read ({}: Not a \
                 directory (os error 20)); no call under a skill is allowed until it can",
                dir.display()
            ),
        )
    };
    assert_eq!(skill_verdict(&rt, "helper"), unreadable("helper"));
    assert_eq!(skill_verdict(&rt, "other"), unreadable("other"));
    assert_eq!(
        rt.warnings(),
        [format!(
            "the skills directory cannot be read ({}: Not a directory (os error 20)); every call \
             under a skill is refused until it can",
            dir.display()
        )]
    );
    let r = rt
        .execute(rt.call(
            "echo",
            json!({}),
            Caller::agent("agent-7").with_skill("helper"),
        ))
        .await;
    assert_eq!(code(&r), Some("skill_denied"));

    // Fixed: the directory holds the skill, and it applies without a restart.
    let skill =
        |tools: &str| format!("---\nname: helper\ndescription: Helps.\ntools: {tools}\n---\n");
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir_all(dir.join("helper")).unwrap();
    std::fs::write(dir.join("helper/SKILL.md"), skill("[echo]")).unwrap();
    wait_until("the directory to be read again", || async {
        skill_verdict(&rt, "helper").0 == policy::Decision::Allow
    })
    .await;

    // An edit that does not load refuses the skill: the wider last version does not stay.
    std::fs::write(
        dir.join("helper/SKILL.md"),
        skill("[echo, {name: exec, access_level: root}]"),
    )
    .unwrap();
    // A read that catches the file half written refuses the skill too (for another reason) until
    // the write's own event reads it whole: wait for the edit's reason.
    let broken = format!(
        "skill helper does not load ({}:4: error: tools[1].access_level: unknown access level",
        dir.join("helper/SKILL.md").display()
    );
    wait_until("the broken edit to be picked up", || async {
        let (decision, reason) = skill_verdict(&rt, "helper");
        decision == policy::Decision::Deny && reason.starts_with(&broken)
    })
    .await;

    // Fixed again, then the watched directory is replaced by a file.
    std::fs::write(dir.join("helper/SKILL.md"), skill("[echo]")).unwrap();
    wait_until("the fix to be picked up", || async {
        skill_verdict(&rt, "helper").0 == policy::Decision::Allow
    })
    .await;
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "a file again").unwrap();
    wait_until("the directory to be refused again", || async {
        skill_verdict(&rt, "helper") == unreadable("helper")
    })
    .await;
    rt.close().await;
}
