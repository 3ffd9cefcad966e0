//! Small conversions every table shares: JSON columns in and out, snake_case kinds checked before
//! SQLite's CHECK constraint would refuse them with a less helpful message, page sizes.

use serde_json::Value;

use crate::error::{Result, StoreError};

/// Longest kind (admin event kind, violation type) the schema accepts.
pub(crate) const MAX_KIND_LEN: usize = 64;

/// Checks that `value` is a short snake_case word, as the schema's CHECK constraints require.
pub(crate) fn check_kind(what: &str, value: &str) -> Result<()> {
    let mut chars = value.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if starts_with_letter && rest_ok && value.len() <= MAX_KIND_LEN {
        return Ok(());
    }
    Err(StoreError::Invalid {
        what: format!("{what} {value:?}"),
        message: format!(
            "expected snake_case: a lowercase letter, then lowercase letters, digits and \
             underscores, at most {MAX_KIND_LEN} characters"
        ),
    })
}

/// Reads a JSON column.
pub(crate) fn json(what: impl FnOnce() -> String, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what: what(),
        message: e.to_string(),
    })
}

/// Reads a column holding one of a closed set of words.
pub(crate) fn word<T: std::str::FromStr<Err = String>>(
    what: impl FnOnce() -> String,
    text: &str,
) -> Result<T> {
    text.parse().map_err(|message| StoreError::Corrupt {
        what: what(),
        message,
    })
}

/// A count read from SQLite, which has no unsigned integers.
pub(crate) fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
