//! Validated identifiers. A `ToolName` in hand is known to be well formed, so no later stage has to
//! re-check it, and a malformed name is refused once, at the boundary, with the rule it broke.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::CoreError;

fn check_snake(value: &str, max: usize, extra: &[u8]) -> Result<(), &'static str> {
    let bytes = value.as_bytes();
    match bytes.first() {
        None => return Err("must not be empty"),
        Some(b) if !b.is_ascii_lowercase() => return Err("must start with a lowercase letter"),
        Some(_) => {}
    }
    if bytes.len() > max {
        return Err(if max == 64 {
            "must be at most 64 characters"
        } else {
            "must be at most 32 characters"
        });
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || extra.contains(b))
    {
        return Err(if extra.is_empty() {
            "may only contain lowercase letters, digits and '_'"
        } else {
            "may only contain lowercase letters, digits, '_' and '-'"
        });
    }
    Ok(())
}

fn check_id(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("must not be empty");
    }
    if value.len() > 128 {
        return Err("must be at most 128 characters");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err("may only contain ASCII letters, digits, '-', '_', '.' and ':'");
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $ty(Arc<str>);

        impl $ty {
            /// Validates `value` and wraps it.
            pub fn new(value: &str) -> Result<Self, CoreError> {
                let check: fn(&str) -> Result<(), &'static str> = $check;
                check(value).map_err(|reason| CoreError::InvalidName {
                    kind: $kind,
                    value: value.chars().take(200).collect(),
                    reason,
                })?;
                Ok(Self(Arc::from(value)))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $ty {
            type Err = CoreError;
            fn from_str(s: &str) -> Result<Self, CoreError> {
                Self::new(s)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::new(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A tool's name: `^[a-z][a-z0-9_]{0,63}$`, the shape every agent protocol accepts.
    ToolName,
    "tool name",
    |v| check_snake(v, 64, b"")
);

name_type!(
    /// A tool group such as `fs`, `runtime`, `net` or `custom`: `^[a-z][a-z0-9_-]{0,31}$`.
    ToolGroup,
    "group",
    |v| check_snake(v, 32, b"-")
);

name_type!(
    /// The id of one execution, unique per call; printable so it can be quoted in logs and URLs.
    ExecutionId,
    "execution id",
    check_id
);

name_type!(
    /// A trace id joining the calls of one piece of agent work; same shape as [`ExecutionId`].
    TraceId,
    "trace id",
    check_id
);

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Result<(), &str>) {
        let got = ToolName::new(input).map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(got, expect.map_err(str::to_owned), "input {input:?}");
    }

    #[test]
    fn tool_names() {
        check("read_file", Ok(()));
        check("a", Ok(()));
        check(&format!("a{}", "b".repeat(63)), Ok(()));
        check(
            &format!("a{}", "b".repeat(64)),
            Err(&format!(
                "invalid tool name \"a{}\": must be at most 64 characters",
                "b".repeat(64)
            )),
        );
        check("", Err("invalid tool name \"\": must not be empty"));
        check(
            "1abc",
            Err("invalid tool name \"1abc\": must start with a lowercase letter"),
        );
        check(
            "Read",
            Err("invalid tool name \"Read\": must start with a lowercase letter"),
        );
        check(
            "read-file",
            Err(
                "invalid tool name \"read-file\": may only contain lowercase letters, digits and '_'",
            ),
        );
        check(
            "../x",
            Err("invalid tool name \"../x\": must start with a lowercase letter"),
        );
    }

    #[test]
    fn groups_allow_hyphens_ids_allow_uuids() {
        assert!(ToolGroup::new("my-group").is_ok());
        assert!(ToolGroup::new("My").is_err());
        assert!(ExecutionId::new("0192f0c8-7d1e-7c3a-9a55-3f1a2b3c4d5e").is_ok());
        assert!(ExecutionId::new("a b").is_err());
        assert!(TraceId::new(&"x".repeat(129)).is_err());
    }

    #[test]
    fn deserialize_validates() {
        let err = serde_json::from_str::<ToolName>("\"Bad\"").unwrap_err();
        assert!(
            err.to_string()
                .contains("must start with a lowercase letter")
        );
        let ok: ToolName = serde_json::from_str("\"good_one\"").unwrap();
        assert_eq!(ok.as_str(), "good_one");
    }
}
