//! `send_message` through the whole pipeline against a real local webhook, the name mapped by
//! the test resolver: the message arrives as Slack-compatible JSON; by default a person is asked
//! first and nothing is sent without an answer; the built-in policy does not allow the tool; a
//! webhook's URL never appears in an answer or the audit record, and a variable that is missing
//! or holds no URL is a clear failure; a channel the config lacks is refused by the schema; the tool's
//! own rate limit holds.

use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolStatus};

use super::net_tests::{audited, open_with};
use super::policy_tests::{Install, code};
use super::*;
use crate::net::test_server::{Reply, serve};

fn config(port: u16, extra: &str) -> String {
    format!(
        r#"[policy]
allow = ["send_message"]

[tools.send_message]
requires_confirmation = false

[messaging.channels.ops]
webhook_url = "http://hooks.test:{port}/services/T000/B000/XXXX"

[messaging.channels.alerts]
webhook_url_env = "TW_TEST_ALERTS_WEBHOOK_UNSET"
{extra}"#
    )
}

/// A webhook on the loopback keeping every body posted to the channel's path; its port.
async fn webhook() -> (Arc<Mutex<Vec<Vec<u8>>>>, u16) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let s = serve(vec![(
        "/services/T000/B000/XXXX",
        Reply::Record(200, Arc::clone(&bodies)),
    )])
    .await;
    (bodies, s.port)
}

async fn send(rt: &Runtime, args: Value) -> (ToolResult, tw_store::AuditRow) {
    audited(rt, "send_message", args, Caller::agent("agent-7")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_reaches_the_channel_as_slack_json_and_is_audited() {
    let (bodies, port) = webhook().await;
    let install = Install::new("");
    let rt = open_with(&install, &config(port, ""), &["hooks.test"]).await;

    let (result, row) = send(&rt, json!({"channel": "ops", "text": "deploy *done*"})).await;
    assert_eq!(result.status, ToolStatus::Success, "{:?}", result.error);
    assert_eq!(
        result.output.unwrap(),
        json!({"channel": "ops", "delivered": true, "status": 200})
    );
    let got: Vec<Value> = bodies
        .lock()
        .unwrap()
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    assert_eq!(got, [json!({"text": "deploy *done*"})]);
    // The message is in the audit record, and where it went; the webhook's path is not.
    assert_eq!(row.arguments["text"], json!("deploy *done*"));
    let meta = row.metadata.to_string();
    assert!(meta.contains("hooks.test"), "{meta}");
    assert!(!meta.contains("XXXX"), "{meta}");

    // A channel whose variable is not set fails saying which variable, sending nothing.
    let (result, row) = send(&rt, json!({"channel": "alerts", "text": "x"})).await;
    assert_eq!(
        (result.status, row.status, code(&result)),
        (
            ToolStatus::Failed,
            ToolStatus::Failed,
            Some("not_configured")
        )
    );
    assert!(
        result
            .error
            .unwrap()
            .message
            .contains("TW_TEST_ALERTS_WEBHOOK_UNSET"),
    );
    // A channel the config lacks: the schema lists those it has.
    let (result, _) = send(&rt, json!({"channel": "everyone", "text": "x"})).await;
    assert_eq!(result.status, ToolStatus::ValidationError);
    assert_eq!(bodies.lock().unwrap().len(), 1, "nothing else was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_is_asked_first_and_the_built_in_policy_does_not_allow_it() {
    let (bodies, port) = webhook().await;
    let install = Install::new("");
    let asked = config(port, "").replace("requires_confirmation = false", "");
    let rt = open_with(&install, &asked, &["hooks.test"]).await;
    let mut call = rt.call(
        "send_message",
        json!({"channel": "ops", "text": "hi"}),
        Caller::agent("agent-7"),
    );
    call.no_wait = true;
    assert_eq!(
        rt.execute(call).await.status,
        ToolStatus::RequiresConfirmation
    );

    let builtin = Install::new("");
    let text = format!(
        "[messaging.channels.ops]\nwebhook_url = \"http://hooks.test:{}/services/T000/B000/XXXX\"\n",
        port
    );
    let rt = open_with(&builtin, &text, &["hooks.test"]).await;
    let (result, row) = send(&rt, json!({"channel": "ops", "text": "hi"})).await;
    assert_eq!(
        (result.status, row.decision.as_deref()),
        (ToolStatus::PermissionDenied, Some("deny"))
    );
    assert!(bodies.lock().unwrap().is_empty(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_url_stays_out_of_answers_and_records() {
    let install = Install::new("");
    // Nothing listens on port 9: the failure names the host, never the URL's secret path.
    let text = config(9, "")
        .replace("B000/XXXX", "SECRET/PATH")
        // A variable that is set but holds no URL: refused without quoting its value.
        .replace("TW_TEST_ALERTS_WEBHOOK_UNSET", "PATH");
    let rt = open_with(&install, &text, &["hooks.test"]).await;
    let (result, row) = send(&rt, json!({"channel": "ops", "text": "x"})).await;
    assert_eq!(result.status, ToolStatus::Failed, "{:?}", result.error);
    let message = result.error.unwrap().message;
    assert!(!message.contains("SECRET"), "{message}");
    assert!(message.contains("hooks.test"), "{message}");
    let stored = serde_json::to_string(&row).unwrap();
    assert!(!stored.contains("SECRET"), "{stored}");

    let (result, _) = send(&rt, json!({"channel": "alerts", "text": "x"})).await;
    let message = result.error.unwrap().message;
    assert_eq!(
        message,
        "channel \"alerts\": its webhook URL is not an http or https URL with a host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_own_rate_limit_holds() {
    let (bodies, port) = webhook().await;
    let install = Install::new("");
    let rt = open_with(&install, &config(port, ""), &["hooks.test"]).await;
    let mut statuses = Vec::new();
    for i in 0..11 {
        let (result, _) = send(&rt, json!({"channel": "ops", "text": format!("m{i}")})).await;
        statuses.push(result.status);
    }
    assert_eq!(statuses[..10], [ToolStatus::Success; 10]);
    assert_eq!(statuses[10], ToolStatus::PermissionDenied);
    assert_eq!(bodies.lock().unwrap().len(), 10);
}

#[test]
fn a_channel_is_a_webhook_or_a_mail_server_written_or_named_and_nothing_else() {
    let path = std::path::Path::new("/etc/toolwarden/config.toml");
    for (text, at, says) in [
        (
            "[messaging.channels.ops]\n",
            (1, 21),
            "set exactly one of webhook_url, webhook_url_env, smtp_url and smtp_url_env",
        ),
        (
            "[messaging.channels.ops]\nsmtp_url = \"smtps://mail.example.com\"\n",
            (1, 21),
            "an e-mail channel needs from",
        ),
        (
            "[messaging.channels.ops]\nsmtp_url = \"smtps://mail.example.com\"\nfrom = \"tw@example.com\"\n",
            (1, 21),
            "an e-mail channel needs recipients",
        ),
        (
            "[messaging.channels.ops]\nsmtp_url = \"smtps://m.example.com\"\nfrom = \"tw@example.com\"\n\
             recipients = [\"*@example.com\"]\nto = [\"boss@elsewhere.org\"]\n",
            (5, 7),
            "\"boss@elsewhere.org\" is not among the channel's recipients",
        ),
        (
            "[messaging.channels.ops]\nwebhook_url_env = \"X\"\nfrom = \"tw@example.com\"\n",
            (3, 8),
            "from, to and recipients are for e-mail channels",
        ),
        (
            "[messaging.channels.ops]\nwebhook_url = \"ftp://x\"\n",
            (2, 15),
            "webhook_url: not an http or https URL with a host",
        ),
        (
            "[messaging.channels.ops]\nwebhook_url_env = \"https://hooks\"\n",
            (2, 19),
            "is not an environment variable name",
        ),
        (
            "[messaging.channels.Ops]\nwebhook_url_env = \"X\"\n",
            (1, 21),
            "is not a channel name",
        ),
    ] {
        let err = Config::parse(text, path, None).unwrap_err();
        assert_eq!((err.line, err.column), (Some(at.0), Some(at.1)), "{err}");
        assert!(err.message.contains(says), "{}", err.message);
    }
}
