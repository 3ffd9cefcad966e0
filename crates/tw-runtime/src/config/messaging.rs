//! The config's `[messaging]` section: the channels `send_message` may post to, each by a short
//! name agents use. A channel is a webhook taking Slack-compatible JSON (`{"text": ...}`: Slack,
//! Mattermost, Rocket.Chat, Discord's `/slack` endpoint and most chat tools); its URL is usually
//! a secret, so the config names the environment variable holding it (`webhook_url_env`), read
//! when a message is sent and never written to the audit log, or writes it (`webhook_url`).
//!
//! Parsing stays pure like the rest of the config: a written URL is checked here (http or https,
//! a host), an environment variable only named.

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
        let channel = match (doc.webhook_url, doc.webhook_url_env) {
            (Some(url), None) => {
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
            (None, Some(env)) => {
                super::network::env_name(&env, &format!("{key}.webhook_url_env"))?;
                Channel::WebhookFromEnv {
                    env: env.into_inner(),
                }
            }
            _ => {
                return Err((
                    name.span().start,
                    format!("{key}: set exactly one of webhook_url and webhook_url_env"),
                ));
            }
        };
        s.channels.insert(name.into_inner(), channel);
    }
    Ok(s)
}
