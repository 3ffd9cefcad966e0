//! `send_message` to an e-mail channel: one plain-text message over SMTP (`lettre`), to the
//! addresses the call names or the channel's default ones, each of which must match the
//! channel's `recipients` globs. The server's host is admitted by the egress gatekeeper under a
//! rule naming only that host (the administrator wrote it), and the connection goes to an
//! address the gatekeeper allowed, its certificate checked against the host's name. The SMTP URL
//! (it may hold a password) appears in no answer and no audit record.

use std::time::Duration;

use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor};
use serde_json::{Value, json};
use tw_core::target::{DomainList, Egress, EgressLayer};
use tw_core::{ErrorCode, ToolStatus};

use super::super::ToolFailure;
use super::NetContext;
use crate::config::{EmailChannel, SmtpServer, recipient_globs, smtp_url_problem};

/// How long the SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);
/// The subject of a message that gives none.
const DEFAULT_SUBJECT: &str = "Message from Toolwarden";

fn failed(channel: &str, message: impl std::fmt::Display) -> ToolFailure {
    ToolFailure::failed(
        ErrorCode::EXECUTION_FAILED,
        format!("channel {channel:?}: {message}"),
    )
}

/// The addresses a message goes to: the call's, each allowed by the channel, or its defaults.
fn recipients(
    channel: &str,
    ch: &EmailChannel,
    to: &[String],
) -> Result<Vec<Mailbox>, ToolFailure> {
    // The config compiled them once already to check them; these are the same patterns.
    let globs = recipient_globs(&ch.recipients)
        .map_err(|(_, e)| failed(channel, format!("its recipients do not compile: {e}")))?;
    if to.is_empty() && ch.to.is_empty() {
        return Err(ToolFailure {
            status: ToolStatus::ValidationError,
            code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
            message: format!(
                "/to: channel {channel:?} has no default recipients; name at least one"
            ),
        });
    }
    let named = !to.is_empty();
    let list = if named { to } else { &ch.to };
    let mut out = Vec::with_capacity(list.len());
    for (i, address) in list.iter().enumerate() {
        let mailbox: Mailbox = address.parse().map_err(|_| ToolFailure {
            status: ToolStatus::ValidationError,
            code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
            message: format!("/to/{i}: {address:?} is not an e-mail address"),
        })?;
        if named && !globs.is_match(mailbox.email.to_string().to_lowercase()) {
            return Err(ToolFailure {
                status: ToolStatus::PermissionDenied,
                code: "recipient_not_allowed".to_owned(),
                message: format!(
                    "/to/{i}: {} is not among channel {channel:?}'s recipients",
                    mailbox.email
                ),
            });
        }
        out.push(mailbox);
    }
    Ok(out)
}

/// The SMTP URL, from the config or its variable.
fn server_url(channel: &str, ch: &EmailChannel) -> Result<String, ToolFailure> {
    let url = match &ch.server {
        SmtpServer::Url(url) => url.clone(),
        SmtpServer::Env(var) => std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                ToolFailure::failed(
                    super::message::NOT_CONFIGURED,
                    format!(
                        "channel {channel:?}: the environment variable {var} that holds its SMTP \
                         URL is not set"
                    ),
                )
            })?,
    };
    if let Some(problem) = smtp_url_problem(&url) {
        // Said without the URL: it may hold a password.
        return Err(failed(channel, format!("its SMTP URL {problem}")));
    }
    Ok(url)
}

fn decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Sends `text` to an e-mail channel.
pub(super) async fn send(
    net: &NetContext,
    channel: &str,
    ch: &EmailChannel,
    text: &str,
    subject: Option<&str>,
    to: &[String],
) -> Result<Value, ToolFailure> {
    let mailboxes = recipients(channel, ch, to)?;
    let url = server_url(channel, ch)?;
    let u = url::Url::parse(&url).map_err(|_| failed(channel, "its SMTP URL is not a URL"))?;
    let host = u
        .host_str()
        .ok_or_else(|| failed(channel, "its SMTP URL has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let implicit = u.scheme() == "smtps";
    let starttls = u.query_pairs().any(|(k, v)| k == "tls" && v == "required");
    let port = u.port().unwrap_or(match (implicit, starttls) {
        (true, _) => 465,
        (false, true) => 587,
        (false, false) => 25,
    });
    let rule = Egress::new(vec![EgressLayer {
        source: format!("config messaging.channels.{channel}"),
        allow: DomainList::parse([host.as_str()])
            .map_err(|_| failed(channel, "its SMTP host is not a host name"))?,
        ..EgressLayer::default()
    }]);
    let addresses = net
        .gate
        .admit(
            &rule,
            &format!("https://{}/", u.host_str().unwrap_or_default()),
        )
        .await
        .map_err(|e| {
            failed(
                channel,
                format!("its SMTP server {host} is not reachable: {e}"),
            )
        })?;
    let address = addresses
        .first()
        .ok_or_else(|| failed(channel, format!("{host} has no address")))?;
    let tls = if implicit || starttls {
        let params = TlsParameters::new(host.clone())
            .map_err(|e| failed(channel, format!("cannot set up TLS: {e}")))?;
        if implicit {
            Tls::Wrapper(params)
        } else {
            Tls::Required(params)
        }
    } else {
        Tls::None
    };
    let mut transport =
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(address.to_string())
            .port(port)
            .tls(tls)
            .timeout(Some(SMTP_TIMEOUT));
    if !u.username().is_empty() {
        transport = transport.credentials(Credentials::new(
            decoded(u.username()),
            decoded(u.password().unwrap_or_default()),
        ));
    }
    let from: Mailbox = ch
        .from
        .parse()
        .map_err(|_| failed(channel, "its from is not an e-mail address"))?;
    let mut message = Message::builder()
        .from(from)
        .subject(subject.unwrap_or(DEFAULT_SUBJECT))
        .header(ContentType::TEXT_PLAIN);
    for m in &mailboxes {
        message = message.to(m.clone());
    }
    let message = message
        .body(text.to_owned())
        .map_err(|e| failed(channel, format!("the message cannot be built: {e}")))?;
    let response = transport
        .build()
        .send(message)
        .await
        .map_err(|e| failed(channel, format!("{host} did not take the message: {e}")))?;
    let status: u16 = response.code().to_string().parse().unwrap_or(250);
    let recipients: Vec<String> = mailboxes.iter().map(|m| m.email.to_string()).collect();
    Ok(json!({
        "channel": channel,
        "delivered": true,
        "status": status,
        "recipients": recipients,
    }))
}
