//! Secrets in request headers. A header value names a secret (`Bearer ${secret:github}`) and
//! the tool puts the value in just before sending: the arguments, and so the audit record, only
//! ever hold the name. The value comes from the environment variable the config names, goes
//! only to the hosts the config lists for it (redirects elsewhere go without it), and is masked
//! wherever the answer echoes it back.

use std::collections::BTreeMap;

use super::super::ToolFailure;
use crate::config::Secret;
use crate::net::Confined;
use tw_core::{ErrorCode, ToolStatus};

const OPEN: &str = "${secret:";

/// The secrets a request's headers used, for masking the answer.
#[derive(Default)]
pub(super) struct Used {
    values: Vec<(String, Vec<u8>)>,
}

/// Headers with their secrets put in.
pub(super) struct Filled {
    /// The headers to send.
    pub(super) headers: Vec<(String, String)>,
    /// Those held to their secrets' hosts.
    pub(super) confined: Vec<Confined>,
    /// What to mask in the answer.
    pub(super) used: Used,
}

/// Puts the secrets named in `headers` in. `env` reads an environment variable.
pub(super) fn fill(
    headers: Vec<(String, String)>,
    secrets: &BTreeMap<String, Secret>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Filled, ToolFailure> {
    let mut used = Used::default();
    let mut confined = Vec::new();
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        if !value.contains(OPEN) {
            out.push((name, value));
            continue;
        }
        let mut filled = String::new();
        let mut rest = value.as_str();
        while let Some(start) = rest.find(OPEN) {
            filled.push_str(&rest[..start]);
            let after = &rest[start + OPEN.len()..];
            let Some(end) = after.find('}') else {
                return Err(invalid(
                    &name,
                    "\"${secret:\" is not closed by \"}\"".to_owned(),
                ));
            };
            let secret_name = &after[..end];
            let Some(secret) = secrets.get(secret_name) else {
                let known: Vec<&str> = secrets.keys().map(String::as_str).collect();
                return Err(invalid(
                    &name,
                    format!(
                        "no secret {secret_name:?} is configured ({})",
                        if known.is_empty() {
                            "the config's [network.secrets] names none".to_owned()
                        } else {
                            format!("[network.secrets] names {}", known.join(", "))
                        }
                    ),
                ));
            };
            let Some(v) = env(&secret.env).filter(|v| !v.is_empty()) else {
                return Err(ToolFailure::failed(
                    ErrorCode::EXECUTION_FAILED,
                    format!(
                        "secret {secret_name:?}: the environment variable {} is not set in the \
                         runtime's environment",
                        secret.env
                    ),
                ));
            };
            filled.push_str(&v);
            if !used.values.iter().any(|(n, _)| n == secret_name) {
                used.values.push((secret_name.to_owned(), v.into_bytes()));
            }
            confined.push(Confined {
                header: name.clone(),
                hosts: secret.hosts.clone(),
                rule: format!("secret {secret_name} hosts"),
            });
            rest = &after[end + 1..];
        }
        filled.push_str(rest);
        out.push((name, filled));
    }
    Ok(Filled {
        headers: out,
        confined,
        used,
    })
}

impl Used {
    /// Replaces every secret value in `bytes` by `[secret:NAME]`.
    pub(super) fn mask(&self, bytes: Vec<u8>) -> Vec<u8> {
        self.values
            .iter()
            .fold(bytes, |b, (name, value)| replace(b, value, name))
    }

    /// Like [`Used::mask`], for text.
    pub(super) fn mask_text(&self, text: String) -> String {
        if self.values.is_empty() {
            return text;
        }
        String::from_utf8(self.mask(text.into_bytes()))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

fn replace(bytes: Vec<u8>, value: &[u8], name: &str) -> Vec<u8> {
    if value.is_empty() || bytes.len() < value.len() {
        return bytes;
    }
    let mask = format!("[secret:{name}]");
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(value) {
            out.extend_from_slice(mask.as_bytes());
            i += value.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn invalid(header: &str, message: String) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::ValidationError,
        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
        message: format!("headers/{header}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tw_core::target::DomainList;

    fn secrets() -> BTreeMap<String, Secret> {
        BTreeMap::from([(
            "gh".to_owned(),
            Secret {
                env: "GH_TOKEN".to_owned(),
                hosts: DomainList::parse(["api.github.test"]).unwrap(),
            },
        )])
    }

    fn env(name: &str) -> Option<String> {
        (name == "GH_TOKEN").then(|| "tok-123".to_owned())
    }

    #[test]
    fn a_named_secret_is_filled_in_held_to_its_hosts_and_masked() {
        let Filled {
            headers,
            confined,
            used,
        } = fill(
            vec![
                ("Authorization".into(), "Bearer ${secret:gh}".into()),
                ("X-Plain".into(), "$ {secret:gh} stays".into()),
            ],
            &secrets(),
            env,
        )
        .unwrap();
        assert_eq!(
            headers,
            vec![
                ("Authorization".to_owned(), "Bearer tok-123".to_owned()),
                ("X-Plain".to_owned(), "$ {secret:gh} stays".to_owned()),
            ]
        );
        assert_eq!(confined.len(), 1);
        assert_eq!(confined[0].header, "Authorization");
        assert_eq!(confined[0].rule, "secret gh hosts");
        assert_eq!(
            used.mask_text("echo: Bearer tok-123, tok-123tok-12".to_owned()),
            "echo: Bearer [secret:gh], [secret:gh]tok-12"
        );
    }

    #[test]
    fn an_unknown_unclosed_or_unset_secret_is_refused_with_its_header() {
        let cases = [
            (
                "${secret:nope}",
                "headers/A: no secret \"nope\" is configured",
            ),
            ("${secret:gh", "headers/A: \"${secret:\" is not closed"),
        ];
        for (value, expected) in cases {
            let e = fill(vec![("A".into(), value.into())], &secrets(), env)
                .err()
                .unwrap();
            assert_eq!(e.status, ToolStatus::ValidationError);
            assert!(e.message.starts_with(expected), "{}", e.message);
        }
        let e = fill(
            vec![("A".into(), "${secret:gh}".into())],
            &secrets(),
            |_| None,
        )
        .err()
        .unwrap();
        assert_eq!(e.status, ToolStatus::Failed);
        assert!(e.message.contains("GH_TOKEN is not set"), "{}", e.message);
    }
}
