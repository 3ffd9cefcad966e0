//! `send_message`: posts a message to one of the channels the config names (`[messaging]`): a
//! webhook gets Slack-compatible JSON (`{"text": ...}`), an e-mail channel a plain-text mail
//! (`net::email`), each through the egress gatekeeper under a rule of its own: the administrator named the channel, so its host is reachable (like a search provider's).
//! The channel's URL is read from its environment variable when the message is sent and appears
//! nowhere else: not in the answer, not in a failure, not in the audit record (the gatekeeper
//! records the host only, and a webhook may not redirect).
//!
//! It reaches people, so it asks a person first by default (`requires_confirmation`), is a side
//! effect (modes that forbid those stop it), is limited to 10 a minute and 100 an hour on top
//! of the policy's own limits, and the built-in policy does not allow it: an administrator
//! names it, and may hold it to permissions, callers and skills like any tool. The message
//! itself is the call's argument, so it is in the audit record.

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::target::{DomainList, Egress, EgressLayer};
use tw_core::{ErrorCode, RateLimit, RiskLevel, ToolCategory, ToolDefinition};

use super::super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit};
use super::{failure, net_context};
use crate::config::{Channel, MessagingSettings};
use crate::net::{Limits, Request};

/// The longest message, in characters.
const MAX_TEXT: u64 = 4_000;
/// The most of a webhook's answer read.
const MAX_ANSWER_BYTES: usize = 64 << 10;
/// The code of the failure when no channel is configured.
pub(super) const NOT_CONFIGURED: &str = "not_configured";

pub(in crate::builtins) struct SendMessage {
    settings: std::sync::Arc<MessagingSettings>,
}

impl SendMessage {
    pub(in crate::builtins) fn new(settings: std::sync::Arc<MessagingSettings>) -> Self {
        Self { settings }
    }
}

#[derive(Deserialize)]
struct MessageArgs {
    channel: String,
    text: String,
    subject: Option<String>,
    #[serde(default)]
    to: Vec<String>,
}

impl BuiltinTool for SendMessage {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let names: Vec<&str> = self.settings.channels.keys().map(String::as_str).collect();
        let channel = if names.is_empty() {
            json!({"type": "string", "minLength": 1,
                   "description": "A channel's name. None is configured yet: the administrator adds [messaging.channels.NAME] to the config."})
        } else {
            json!({"type": "string", "enum": names,
                   "description": "The channel to post to, as the config names it."})
        };
        let mut d = ToolDefinition::new(
            lit::name("send_message")?,
            "Send a message to a channel the administrator configured: a chat channel (a \
             Slack-compatible webhook) or e-mail (to the addresses `to` names, among those the \
             channel allows, or its default ones). A person approves each message unless the \
             administrator decided otherwise.",
            ToolCategory::Communication,
            lit::group("messaging")?,
            lit::params(json!({
                "type": "object",
                "properties": {
                    "channel": channel,
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT,
                             "description": "The message (Slack's mrkdwn where the channel supports it)."},
                    "subject": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\\r\\n]+$",
                                "description": "E-mail channels: the subject."},
                    "to": {"type": "array", "items": {"type": "string", "maxLength": 320}, "maxItems": 20, "uniqueItems": true,
                           "description": "E-mail channels: the recipients (default: the channel's own)."}
                },
                "required": ["channel", "text"],
                "additionalProperties": false
            }))?,
        );
        d.output_schema = lit::output(json!({
            "type": "object",
            "properties": {
                "channel": {"type": "string"},
                "delivered": {"type": "boolean"},
                "status": {"type": "integer"},
                "recipients": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["channel", "delivered", "status"]
        }))?;
        d.risk_level = RiskLevel::Medium;
        d.requires_confirmation = true;
        d.constraints.side_effects = true;
        d.constraints.max_execution_time_ms = 30_000;
        d.constraints.max_output_bytes = 16 << 10;
        d.rate_limit = Some(RateLimit {
            per_minute: Some(10),
            per_hour: Some(100),
        });
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: MessageArgs = args(raw)?;
            let net = net_context(ctx)?;
            let Some(channel) = self.settings.channels.get(&a.channel) else {
                return Err(ToolFailure::failed(
                    NOT_CONFIGURED,
                    "no messaging channel is configured: add [messaging.channels.NAME] with \
                     webhook_url_env naming the variable that holds the webhook's URL",
                ));
            };
            let url = match channel {
                Channel::Email(email) => {
                    return super::email::send(
                        net,
                        &a.channel,
                        email,
                        &a.text,
                        a.subject.as_deref(),
                        &a.to,
                    )
                    .await;
                }
                _ if a.subject.is_some() || !a.to.is_empty() => {
                    return Err(ToolFailure {
                        status: tw_core::ToolStatus::ValidationError,
                        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
                        message: format!(
                            "/{}: channel {:?} is a chat webhook, which takes no subject or \
                             recipients",
                            if a.subject.is_some() { "subject" } else { "to" },
                            a.channel
                        ),
                    });
                }
                Channel::Webhook { url } => url.clone(),
                Channel::WebhookFromEnv { env } => std::env::var(env)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        ToolFailure::failed(
                            NOT_CONFIGURED,
                            format!(
                                "channel {:?}: the environment variable {env} that holds its \
                                 webhook URL is not set",
                                a.channel
                            ),
                        )
                    })?,
            };
            // Said without the URL: its path is the secret.
            let unusable = || {
                ToolFailure::failed(
                    ErrorCode::EXECUTION_FAILED,
                    format!(
                        "channel {:?}: its webhook URL is not an http or https URL with a host",
                        a.channel
                    ),
                )
            };
            let host = url::Url::parse(&url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .and_then(|u| u.host_str().map(str::to_owned))
                .ok_or_else(unusable)?;
            let rule = Egress::new(vec![EgressLayer {
                source: format!("config messaging.channels.{}", a.channel),
                allow: DomainList::parse([host.as_str()]).map_err(|_| unusable())?,
                ..EgressLayer::default()
            }]);
            let limits = Limits {
                max_response_bytes: MAX_ANSWER_BYTES.min(net.settings.limits.max_response_bytes),
                max_redirects: 0,
                ..net.settings.limits
            };
            let shown = format!("the channel's webhook ({host})");
            let hide = |mut f: ToolFailure, url: &str| {
                f.message = f.message.replace(url, &shown);
                f
            };
            let secret = url.clone();
            let body = json!({"text": a.text}).to_string().into_bytes();
            let req = Request {
                method: reqwest::Method::POST,
                url,
                headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
                body: Some(body),
                confined: Vec::new(),
            };
            let response = net
                .fetch_under(&rule, req, &limits)
                .await
                .map_err(|e| hide(failure(e), &secret))?;
            if !(200..300).contains(&response.status) {
                return Err(ToolFailure::failed(
                    ErrorCode::EXECUTION_FAILED,
                    format!(
                        "channel {:?} ({host}) answered {}: the message was not delivered",
                        a.channel, response.status
                    ),
                ));
            }
            Ok(json!({
                "channel": a.channel,
                "delivered": true,
                "status": response.status,
            }))
        })
    }
}
