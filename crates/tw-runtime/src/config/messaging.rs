//! The config's `[messaging]` section: the channels `send_message` may post to, each by a short
//! name agents use. A channel is a webhook taking Slack-compatible JSON (`{"text": ...}`: Slack,
//! Mattermost, Rocket.Chat, Discord's `/slack` endpoint and most chat tools), or e-mail over SMTP.
//! A webhook's URL is usually a secret, so the config names the environment variable holding it
//! (`webhook_url_env`), read when a message is sent and never written to the audit log, or
//! writes it (`webhook_url`). An e-mail channel names its server the same way (`smtp_url`, or
//! `smtp_url_env` when the URL holds a password), its sender (`from`), who agents may write to
//! (`recipients`, globs over addresses) and who gets a message that names nobody (`to`).
//!
//! Parsing stays pure like the rest of the config: a written URL is checked here (http or https,
//! a host; smtp or smtps, and TLS unless the server is on the loopback), addresses parsed, an
//! environment variable only named.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::MAX_SHORT_NAME;

/// What `[messaging]` says, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessagingSettings {
    /// The channels, by name.
    pub channels: BTreeMap<String, Channel>,
}

/// One `[messaging.channels.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// A webhook whose URL the config writes.
    Webhook {
        /// The URL.
        url: String,
    },
    /// A webhook whose URL is in an environment variable.
    WebhookFromEnv {
        /// The variable's name.
        env: String,
    },
    /// E-mail over SMTP.
    Email(EmailChannel),
}

/// An e-mail channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailChannel {
    /// The server: `smtp://` (STARTTLS with `?tls=required`, or none on the loopback) or
    /// `smtps://` (implicit TLS), with its credentials, written or in a variable.
    pub server: SmtpServer,
    /// The sender, `Name <address>` or an address.
    pub from: String,
    /// Who gets a message that names no recipients.
    pub to: Vec<String>,
    /// Globs over the addresses agents may write to (`*@example.com`); `to` must match them.
    pub recipients: Vec<String>,
}

/// Where an e-mail channel's SMTP URL is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmtpServer {
    /// Written in the config.
    Url(String),
    /// In an environment variable.
    Env(String),
}

/// Whether an SMTP URL is one this build sends through: smtp or smtps with a host, and TLS
/// (`smtps://`, or `?tls=required`) unless the host is on the loopback.
pub fn smtp_url_problem(url: &str) -> Option<&'static str> {
    let Ok(u) = url::Url::parse(url) else {
        return Some("not a URL");
    };
    let Some(host) = u.host() else {
        return Some("no host");
    };
    if !matches!(u.scheme(), "smtp" | "smtps") {
        return Some("not an smtp:// or smtps:// URL");
    }
    let tls = u.scheme() == "smtps" || u.query_pairs().any(|(k, v)| k == "tls" && v == "required");
    // smtp is not one of the URL standard's special schemes: its host comes as text.
    let loopback = match host {
        url::Host::Domain(d) => {
            let d = d.trim_start_matches('[').trim_end_matches(']');
            d == "localhost" || d.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
        }
        url::Host::Ipv4(a) => a.is_loopback(),
        url::Host::Ipv6(a) => a.is_loopback(),
    };
    (!tls && !loopback).then_some(
        "sends in clear text: use smtps:// or smtp://...?tls=required (plain SMTP only to the \
         loopback)",
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MessagingDoc {
    #[serde(default)]
    channels: BTreeMap<Spanned<String>, ChannelDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelDoc {
    webhook_url: Option<Spanned<String>>,
    webhook_url_env: Option<Spanned<String>>,
    smtp_url: Option<Spanned<String>>,
    smtp_url_env: Option<Spanned<String>>,
    from: Option<Spanned<String>>,
    #[serde(default)]
    to: Vec<Spanned<String>>,
    #[serde(default)]
    recipients: Vec<Spanned<String>>,
}

type Failure = (usize, String);

/// Checks `[messaging]`.
pub(super) fn settings(d: MessagingDoc) -> Result<MessagingSettings, Failure> {
    let mut s = MessagingSettings::default();
    for (name, doc) in d.channels {
        let n = name.get_ref();
        if !super::short_name(n) {
            return Err((
                name.span().start,
                format!(
                    "messaging.channels: {n:?} is not a channel name (1 to {MAX_SHORT_NAME} \
                     lowercase letters, digits, '_' and '-', starting with a letter)"
                ),
            ));
        }
        let key = format!("messaging.channels.{n}");
        let email = doc.smtp_url.is_some() || doc.smtp_url_env.is_some();
        if !email {
            let stray = doc
                .from
                .as_ref()
                .or(doc.to.first())
                .or(doc.recipients.first());
            if let Some(v) = stray {
                return Err((
                    v.span().start,
                    format!("{key}: from, to and recipients are for e-mail channels (smtp_url)"),
                ));
            }
        }
        let channel = match (
            doc.webhook_url,
            doc.webhook_url_env,
            doc.smtp_url,
            doc.smtp_url_env,
        ) {
            (Some(url), None, None, None) => {
                let parsed = url::Url::parse(url.get_ref())
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
                if parsed.is_none() {
                    return Err((
                        url.span().start,
                        format!("{key}.webhook_url: not an http or https URL with a host"),
                    ));
                }
                Channel::Webhook {
                    url: url.into_inner(),
                }
            }
            (None, Some(env), None, None) => {
                super::network::env_name(&env, &format!("{key}.webhook_url_env"))?;
                Channel::WebhookFromEnv {
                    env: env.into_inner(),
                }
            }
            (None, None, Some(url), None) => {
                if let Some(problem) = smtp_url_problem(url.get_ref()) {
                    return Err((url.span().start, format!("{key}.smtp_url: {problem}")));
                }
                email_channel(
                    &key,
                    name.span().start,
                    SmtpServer::Url(url.into_inner()),
                    doc.from,
                    doc.to,
                    doc.recipients,
                )?
            }
            (None, None, None, Some(env)) => {
                super::network::env_name(&env, &format!("{key}.smtp_url_env"))?;
                email_channel(
                    &key,
                    name.span().start,
                    SmtpServer::Env(env.into_inner()),
                    doc.from,
                    doc.to,
                    doc.recipients,
                )?
            }
            _ => {
                return Err((
                    name.span().start,
                    format!(
                        "{key}: set exactly one of webhook_url, webhook_url_env, smtp_url and \
                         smtp_url_env"
                    ),
                ));
            }
        };
        s.channels.insert(name.into_inner(), channel);
    }
    Ok(s)
}

/// A channel's `recipients` as one matcher over lowercase addresses; the index of a pattern that
/// does not compile, and why.
pub fn recipient_globs(patterns: &[String]) -> Result<globset::GlobSet, (usize, globset::Error)> {
    let mut globs = globset::GlobSetBuilder::new();
    for (i, p) in patterns.iter().enumerate() {
        let glob = globset::GlobBuilder::new(&p.to_lowercase())
            .literal_separator(false)
            .build()
            .map_err(|e| (i, e))?;
        globs.add(glob);
    }
    globs.build().map_err(|e| (patterns.len(), e))
}

/// An e-mail channel's addresses, checked: the sender and every `to` parse as mailboxes, every
/// recipient glob compiles, and every `to` is among the recipients.
fn email_channel(
    key: &str,
    at: usize,
    server: SmtpServer,
    from: Option<Spanned<String>>,
    to: Vec<Spanned<String>>,
    recipients: Vec<Spanned<String>>,
) -> Result<Channel, Failure> {
    let from = from.ok_or_else(|| (at, format!("{key}: an e-mail channel needs from")))?;
    if from.get_ref().parse::<lettre::message::Mailbox>().is_err() {
        return Err((
            from.span().start,
            format!("{key}.from: not an e-mail address"),
        ));
    }
    if recipients.is_empty() {
        return Err((
            at,
            format!("{key}: an e-mail channel needs recipients, the addresses agents may write to"),
        ));
    }
    let patterns: Vec<String> = recipients.iter().map(|r| r.get_ref().clone()).collect();
    let globs = recipient_globs(&patterns).map_err(|(i, e)| {
        let at = recipients.get(i).map_or(at, |r| r.span().start);
        (at, format!("{key}.recipients: {e}"))
    })?;
    for t in &to {
        let Ok(mailbox) = t.get_ref().parse::<lettre::message::Mailbox>() else {
            return Err((
                t.span().start,
                format!("{key}.to: {:?} is not an e-mail address", t.get_ref()),
            ));
        };
        if !globs.is_match(mailbox.email.to_string().to_lowercase()) {
            return Err((
                t.span().start,
                format!(
                    "{key}.to: {:?} is not among the channel's recipients",
                    t.get_ref()
                ),
            ));
        }
    }
    Ok(Channel::Email(EmailChannel {
        server,
        from: from.into_inner(),
        to: to.into_iter().map(Spanned::into_inner).collect(),
        recipients: recipients.into_iter().map(Spanned::into_inner).collect(),
    }))
}
