//! `send_message` to an e-mail channel through the real binary, against a real SMTP server
//! (aiosmtpd from PyPI, installed by scripts/setup-mcp, writing what it receives to a Maildir):
//! the message arrives with its subject, sender and the channel's default recipient; an
//! address outside the channel's recipients is refused and nothing is sent; a bad address is
//! invalid arguments with its place; a config that would send in clear text to a remote server
//! is refused with its line. Every call audited, the message in its record.
#![allow(clippy::disallowed_methods)] // the tests spawn the SMTP server

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::mcp::python;
use super::support::{Env, check_status};

/// The SMTP server, stopped when dropped.
struct Smtp {
    child: Child,
    port: u16,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts aiosmtpd on a free loopback port, keeping what it receives in `maildir`.
fn smtp(maildir: &Path) -> Smtp {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python())
        .args(["-m", "aiosmtpd", "-n", "-l"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-c", "aiosmtpd.handlers.Mailbox"])
        .arg(maildir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aiosmtpd starts (scripts/setup-mcp installs it)");
    let server = Smtp { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "aiosmtpd did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// The messages the server kept, as text.
fn received(maildir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(maildir.join("new")) else {
        return Vec::new();
    };
    entries
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect()
}

#[test]
fn a_message_reaches_the_mail_server_only_for_the_channels_recipients() {
    let dir = tempfile::tempdir().unwrap();
    let maildir = dir.path().join("mail");
    let server = smtp(&maildir);
    let env = Env::new().with_config(&format!(
        "[policy]\nallow = [\"send_message\"]\n\n[tools.send_message]\nrequires_confirmation = false\n\n\
         [messaging.channels.oncall]\nsmtp_url = \"smtp://127.0.0.1:{}\"\n\
         from = \"Toolwarden <toolwarden@example.com>\"\nto = [\"ops@example.com\"]\n\
         recipients = [\"*@example.com\"]\n",
        server.port
    ));

    let run = env.call(
        "send_message",
        json!({"channel": "oncall", "subject": "db-1: disk 95% full", "text": "Disk /var on db-1 is 95% full."}),
    );
    check_status(&run, 0, "success", None);
    assert_eq!(
        run.json()["output"],
        json!({"channel": "oncall", "delivered": true, "status": 250, "recipients": ["ops@example.com"]})
    );
    let mail = received(&maildir);
    assert_eq!(mail.len(), 1, "{mail:?}");
    for part in [
        "Subject: db-1: disk 95% full",
        "From: Toolwarden <toolwarden@example.com>",
        "To: ops@example.com",
        "Disk /var on db-1 is 95% full.",
    ] {
        assert!(mail[0].contains(part), "{part:?} in {}", mail[0]);
    }

    // Outside the channel's recipients: refused, nothing sent.
    let run = env.call(
        "send_message",
        json!({"channel": "oncall", "text": "hi", "to": ["ceo@elsewhere.example.org"]}),
    );
    check_status(&run, 7, "permission_denied", Some("recipient_not_allowed"));
    assert!(run.stdout.contains("/to/0"), "{}", run.stdout);
    let run = env.call(
        "send_message",
        json!({"channel": "oncall", "text": "hi", "to": ["not an address"]}),
    );
    check_status(&run, 8, "validation_error", Some("invalid_arguments"));
    assert_eq!(received(&maildir).len(), 1, "nothing more was sent");

    let rows = env.audit_rows();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].arguments["text"], "Disk /var on db-1 is 95% full.");
}

#[test]
fn an_email_channel_that_would_send_in_clear_text_is_refused_with_its_line() {
    let env = Env::new().with_config(
        "[messaging.channels.oncall]\nsmtp_url = \"smtp://mail.example.com:25\"\n\
         from = \"tw@example.com\"\nrecipients = [\"*@example.com\"]\n",
    );
    let run = env.cmd(&["tools", "list"]).run();
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains(":3:12: messaging.channels.oncall.smtp_url: sends in clear text"),
        "{}",
        run.stderr
    );
}
