//! The config's `[memory]` section: how much an agent may keep in its memory (`memory_put`), per
//! agent and skill. The numbers are checked here; the store holds every write to them in the
//! transaction that makes it.

use serde::Deserialize;
use toml::Spanned;

/// What `[memory]` says, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySettings {
    /// Entries per agent and skill.
    pub max_entries: u64,
    /// Bytes per agent and skill (keys, values' JSON and tags).
    pub max_bytes: u64,
    /// Bytes of one value's JSON.
    pub max_value_bytes: u64,
}

impl MemorySettings {
    /// The default entries per namespace.
    pub const DEFAULT_MAX_ENTRIES: u64 = 1_000;
    /// The default bytes per namespace.
    pub const DEFAULT_MAX_BYTES: u64 = 8 << 20;
    /// The default bytes of one value.
    pub const DEFAULT_MAX_VALUE_BYTES: u64 = 64 << 10;
    /// The most one value may be allowed: a value comes back whole in a tool's answer.
    pub const MAX_VALUE_BYTES: u64 = 1 << 20;
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_value_bytes: Self::DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MemoryDoc {
    max_entries: Option<Spanned<u64>>,
    max_bytes: Option<Spanned<u64>>,
    max_value_bytes: Option<Spanned<u64>>,
}

type Failure = (usize, String);

/// Checks `[memory]`.
pub(super) fn settings(d: MemoryDoc) -> Result<MemorySettings, Failure> {
    let mut s = MemorySettings::default();
    let positive = |v: &Spanned<u64>, name: &str| {
        if *v.get_ref() == 0 {
            Err((v.span().start, format!("memory.{name}: must be at least 1")))
        } else {
            Ok(*v.get_ref())
        }
    };
    if let Some(v) = &d.max_entries {
        s.max_entries = positive(v, "max_entries")?;
    }
    if let Some(v) = &d.max_bytes {
        s.max_bytes = positive(v, "max_bytes")?;
    }
    if let Some(v) = &d.max_value_bytes {
        s.max_value_bytes = positive(v, "max_value_bytes")?;
        if s.max_value_bytes > MemorySettings::MAX_VALUE_BYTES {
            return Err((
                v.span().start,
                format!(
                    "memory.max_value_bytes: at most {} (a value comes back whole in an answer)",
                    MemorySettings::MAX_VALUE_BYTES
                ),
            ));
        }
    }
    if s.max_value_bytes > s.max_bytes {
        let at = d.max_bytes.as_ref().or(d.max_value_bytes.as_ref());
        return Err((
            at.map_or(0, |v| v.span().start),
            format!(
                "memory.max_bytes ({}) is less than memory.max_value_bytes ({}): not even one \
                 value would fit",
                s.max_bytes, s.max_value_bytes
            ),
        ));
    }
    Ok(s)
}
