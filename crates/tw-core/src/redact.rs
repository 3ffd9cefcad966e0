//! Secret redaction for audit records. Arguments are stored so that people can see what an agent
//! asked for, but credentials in them must not land in a log that is exported and shared.
//!
//! A value is redacted when its key names a secret. Keys are compared after lowercasing and
//! dropping `_`, `-` and `.`, and match when they equal or end with a secret word, so `api_key`,
//! `X-Api-Key` and `github_token` are caught while `max_tokens` and `author` are not.

use serde_json::{Map, Value};

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

const SECRET_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "credentials",
    "authorization",
    "cookie",
    "sessionid",
];

const SECRET_EXACT: &[&str] = &["auth", "pwd", "bearer", "setcookie"];

/// Whether a key names a secret.
pub fn is_secret_key(key: &str) -> bool {
    // Every key of every call and of every JSON output is asked, and most are short ASCII:
    // those are normalized on the stack rather than into a new string.
    let mut buf = [0u8; 32];
    if key.is_ascii() && key.len() <= buf.len() {
        let mut len = 0;
        for b in key
            .bytes()
            .filter(|b| !matches!(b, b'_' | b'-' | b'.' | b' '))
        {
            buf[len] = b.to_ascii_lowercase();
            len += 1;
        }
        return names_secret(&buf[..len]);
    }
    let norm: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    names_secret(norm.as_bytes())
}

/// Whether a normalized key is, or ends with, a secret word.
fn names_secret(norm: &[u8]) -> bool {
    SECRET_EXACT.iter().any(|w| norm == w.as_bytes())
        || SECRET_SUFFIXES.iter().any(|s| norm.ends_with(s.as_bytes()))
}

/// A copy of `value` with every secret-keyed value, at any depth, replaced by [`REDACTED`].
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let v = if is_secret_key(k) && !v.is_null() {
                    Value::String(REDACTED.to_owned())
                } else {
                    redact(v)
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// Whether `value` contains anything [`redact`] would replace (lets the hot path skip the copy).
pub fn needs_redaction(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| (is_secret_key(k) && !v.is_null()) || needs_redaction(v)),
        Value::Array(items) => items.iter().any(needs_redaction),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn redacts_secret_keys_at_any_depth() {
        let input = json!({
            "path": "a.txt",
            "password": "hunter2",
            "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k", "Accept": "*/*"},
            "items": [{"github_token": "t"}, {"max_tokens": 5}],
            "author": "me",
            "auth": {"user": "u"},
            "secret": null
        });
        assert!(needs_redaction(&input));
        assert_eq!(
            redact(&input),
            json!({
                "path": "a.txt",
                "password": REDACTED,
                "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "*/*"},
                "items": [{"github_token": REDACTED}, {"max_tokens": 5}],
                "author": "me",
                "auth": REDACTED,
                "secret": null
            })
        );
        assert!(!needs_redaction(&json!({"path": "x", "n": [1, {"a": 2}]})));
    }

    #[test]
    fn keys_are_compared_normalized() {
        let keys = [
            "api_key",
            "X-Api-Key",
            "github.token",
            "SESSION ID",
            "AUTH",
            "Pwd",
            "set-cookie",
            // The Kelvin sign lowercases to an ASCII `k`.
            "api_\u{212a}ey",
            "max_tokens",
            "author",
            "oauth",
            "pwds",
            "tokenizer",
            "a_very_long_key_name_that_ends_in_a_password",
            "a_very_long_key_name_that_ends_in_a_passport",
            "",
            "_-. ",
        ];
        let secret: Vec<_> = keys.iter().filter(|k| is_secret_key(k)).collect();
        assert_eq!(
            secret,
            [
                "api_key",
                "X-Api-Key",
                "github.token",
                "SESSION ID",
                "AUTH",
                "Pwd",
                "set-cookie",
                "api_\u{212a}ey",
                "a_very_long_key_name_that_ends_in_a_password",
            ]
            .iter()
            .collect::<Vec<_>>()
        );
    }
}
