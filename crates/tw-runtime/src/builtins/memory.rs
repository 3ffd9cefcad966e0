//! The agent memory tools of seed 001 (group `memory`): `memory_put`, `memory_get`,
//! `memory_search` and `memory_delete`. Each agent has a memory of its own per skill: the
//! caller the pipeline vouched for picks the namespace, never an argument, so one agent cannot
//! read or overwrite another's.
//!
//! The entries live in the store (`tw_store::Store::memory_*`; full-text search is FTS5 on
//! SQLite and a `tsvector` on a team store); the quotas are the config's `[memory]`, held by the
//! store in the transaction that writes. A value too large for `[memory] max_value_bytes` is
//! refused here, before the store is asked.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{ErrorCode, RiskLevel, ToolCategory, ToolDefinition, ToolStatus};
use tw_store::{
    MemoryEntry, MemoryQuota, MemoryScope, MemorySearch, NewMemory, PutOutcome, QuotaKind, Store,
    StoreError,
};

use super::{BuiltinTool, StoreAccess, ToolContext, ToolFailure, ToolFuture, args, lit, output};
use crate::config::MemorySettings;

/// The longest time-to-live: ten years.
const MAX_TTL_SECS: u64 = 10 * 365 * 24 * 3600;
/// The most results one search returns.
const MAX_RESULTS: u64 = 100;
/// The most tags an entry carries.
const MAX_TAGS: usize = 16;
/// The tool's code for a write its namespace's quota has no room for.
const QUOTA_EXCEEDED: &str = "quota_exceeded";
/// The tool's code for a value over `[memory] max_value_bytes`.
const VALUE_TOO_LARGE: &str = "value_too_large";

/// What every memory tool shares.
struct Memory {
    backend: Option<StoreAccess>,
    limits: MemorySettings,
}

impl Memory {
    fn backend(&self) -> Result<(&Store, i64), ToolFailure> {
        StoreAccess::of(self.backend.as_ref(), "agent memory")
    }
}

/// The agent's namespace: the caller the pipeline checked, never an argument.
fn scope(ctx: &ToolContext) -> MemoryScope {
    MemoryScope {
        agent: ctx.caller.agent_id.clone(),
        skill: ctx.caller.skill.clone().unwrap_or_default(),
    }
}

pub(super) fn store_failure(e: StoreError) -> ToolFailure {
    match e {
        StoreError::Invalid { what, message } => ToolFailure {
            status: ToolStatus::ValidationError,
            code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
            message: format!("invalid {what}: {message}"),
        },
        e => ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!("the memory store failed: {e}"),
        ),
    }
}

/// A time in µs since the epoch, as RFC 3339 in UTC (milliseconds).
pub(super) fn time(us: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_micros(u64::try_from(us).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// An entry as the tools show it.
fn shown(e: &MemoryEntry) -> Value {
    let mut v = json!({
        "key": e.key,
        "value": e.value,
        "tags": e.tags,
        "created_at": time(e.created_at),
        "updated_at": time(e.updated_at),
        "expires_at": e.expires_at.map(time),
    });
    if let Some(score) = e.score {
        v["score"] = json!(score);
    }
    if let Some(snippet) = &e.snippet {
        v["snippet"] = json!(snippet);
    }
    v
}

fn key_schema() -> Value {
    json!({
        "type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\u0000-\\u001F\\u007F]+$",
        "description": "The entry's key (1 to 256 characters, no control characters), such as `user/preferences`."
    })
}

/// The arguments of a tool that takes a key only.
fn key_params() -> Value {
    json!({
        "type": "object",
        "properties": {"key": key_schema()},
        "required": ["key"],
        "additionalProperties": false
    })
}

fn tag_schema() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9_.:-]{0,63}$"})
}

fn entry_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "value": {},
            "tags": {"type": "array", "items": {"type": "string"}},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "expires_at": {"type": ["string", "null"]},
            "score": {"type": "number"},
            "snippet": {"type": "string"}
        },
        "required": ["key", "value", "tags", "created_at", "updated_at", "expires_at"]
    })
}

/// A memory tool's definition: group `memory`, run in the runtime (it only talks to the store).
fn definition(
    name: &str,
    description: &str,
    params: Value,
    output: Value,
    writes: bool,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut d = lit::in_runtime(
        name,
        description,
        ToolCategory::Knowledge,
        "memory",
        params,
        output,
        writes,
    )?;
    d.constraints.max_execution_time_ms = 10_000;
    d.risk_level = RiskLevel::Low;
    Ok(d)
}

/// The memory tools, over `backend` (none: each call says so) within `limits`.
pub(super) fn tools(
    backend: Option<StoreAccess>,
    limits: MemorySettings,
) -> Vec<Arc<dyn BuiltinTool>> {
    let m = Arc::new(Memory { backend, limits });
    vec![
        Arc::new(MemoryPut(Arc::clone(&m))),
        Arc::new(MemoryGet(Arc::clone(&m))),
        Arc::new(MemorySearchTool(Arc::clone(&m))),
        Arc::new(MemoryDelete(m)),
    ]
}

struct MemoryPut(Arc<Memory>);

#[derive(Deserialize)]
struct PutArgs {
    key: String,
    value: Value,
    #[serde(default)]
    tags: Vec<String>,
    ttl_secs: Option<u64>,
}

impl BuiltinTool for MemoryPut {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let l = self.0.limits;
        let mut d = definition(
            "memory_put",
            &format!(
                "Remember a value under a key in your own memory (per agent and skill), replacing \
                 what the key held. Tags and words in the value make it findable with \
                 memory_search; ttl_secs makes it expire. Holds at most {} entries and {} bytes; \
                 one value at most {} bytes of JSON.",
                l.max_entries, l.max_bytes, l.max_value_bytes
            ),
            json!({
                "type": "object",
                "properties": {
                    "key": key_schema(),
                    "value": {"description": "Any JSON value: a note as a string, or structured data."},
                    "tags": {
                        "type": "array", "items": tag_schema(), "maxItems": MAX_TAGS, "uniqueItems": true,
                        "description": "Lowercase labels to filter searches by, such as `project:toolwarden`."
                    },
                    "ttl_secs": {
                        "type": "integer", "minimum": 1, "maximum": MAX_TTL_SECS,
                        "description": "Forget the entry this many seconds from now (default: keep it until deleted)."
                    }
                },
                "required": ["key", "value"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "created": {"type": "boolean"},
                    "expires_at": {"type": ["string", "null"]},
                    "entries": {"type": "integer"},
                    "bytes": {"type": "integer"},
                    "max_entries": {"type": "integer"},
                    "max_bytes": {"type": "integer"}
                },
                "required": ["key", "created", "expires_at", "entries", "bytes", "max_entries", "max_bytes"]
            }),
            true,
        )?;
        d.constraints.max_output_bytes = 4 << 10;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: PutArgs = args(raw)?;
            let limits = self.0.limits;
            let size = a.value.to_string().len() as u64;
            if size > limits.max_value_bytes {
                return Err(ToolFailure {
                    status: ToolStatus::ValidationError,
                    code: VALUE_TOO_LARGE.to_owned(),
                    message: format!(
                        "/value: {size} bytes of JSON, over the {} a memory value may have \
                         ([memory] max_value_bytes)",
                        limits.max_value_bytes
                    ),
                });
            }
            let (store, now) = self.0.backend()?;
            let ttl_us = a
                .ttl_secs
                .map(|s| i64::try_from(s.saturating_mul(1_000_000)));
            let expires_at = ttl_us.map(|t| now.saturating_add(t.unwrap_or(i64::MAX)));
            let entry = NewMemory {
                key: a.key,
                value: a.value,
                tags: a.tags,
                expires_at,
            };
            let quota = MemoryQuota {
                max_entries: limits.max_entries,
                max_bytes: limits.max_bytes,
            };
            let scope = scope(ctx);
            match store
                .memory_put(&scope, &entry, quota, now)
                .await
                .map_err(store_failure)?
            {
                PutOutcome::Stored {
                    created,
                    entries,
                    bytes,
                } => output(&json!({
                    "key": entry.key,
                    "created": created,
                    "expires_at": expires_at.map(time),
                    "entries": entries,
                    "bytes": bytes,
                    "max_entries": limits.max_entries,
                    "max_bytes": limits.max_bytes,
                })),
                PutOutcome::OverQuota {
                    quota,
                    limit,
                    needed,
                } => {
                    let (what, setting) = match quota {
                        QuotaKind::Entries => ("entries", "max_entries"),
                        QuotaKind::Bytes => ("bytes", "max_bytes"),
                    };
                    Err(ToolFailure::failed(
                        QUOTA_EXCEEDED,
                        format!(
                            "not stored: this memory would hold {needed} {what}, over its quota \
                             of {limit} ([memory] {setting}); delete entries with memory_delete \
                             or give them a ttl_secs"
                        ),
                    ))
                }
            }
        })
    }
}

struct MemoryGet(Arc<Memory>);

#[derive(Deserialize)]
struct KeyArgs {
    key: String,
}

impl BuiltinTool for MemoryGet {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = definition(
            "memory_get",
            "Recall the value stored under a key in your own memory. An unknown or expired key \
             is `found: false`.",
            key_params(),
            json!({
                "type": "object",
                "properties": {"key": {"type": "string"}, "found": {"type": "boolean"}},
                "required": ["key", "found"]
            }),
            false,
        )?;
        d.constraints.max_output_bytes = MemorySettings::MAX_VALUE_BYTES + (16 << 10);
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: KeyArgs = args(raw)?;
            let (store, now) = self.0.backend()?;
            let got = store
                .memory_get(&scope(ctx), &a.key, now)
                .await
                .map_err(store_failure)?;
            Ok(match got {
                Some(e) => {
                    let mut v = shown(&e);
                    v["found"] = json!(true);
                    v
                }
                None => json!({"key": a.key, "found": false}),
            })
        })
    }
}

struct MemorySearchTool(Arc<Memory>);

#[derive(Deserialize)]
struct SearchArgs {
    query: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    prefix: Option<String>,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    10
}

impl BuiltinTool for MemorySearchTool {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = definition(
            "memory_search",
            "Search your own memory by words (full-text: entries with any of them, those with \
             more first, each with a snippet), tags and key prefix. Without a query, lists the \
             most recently written entries.",
            json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string", "maxLength": 1000,
                        "description": "Words to look for in keys, values and tags; punctuation only separates words."
                    },
                    "tags": {
                        "type": "array", "items": tag_schema(), "maxItems": MAX_TAGS,
                        "description": "Only entries carrying every one of these tags."
                    },
                    "prefix": {"type": "string", "maxLength": 256, "description": "Only keys starting with this (case-sensitive)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "At most this many results (default 10)."}
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": entry_schema()},
                    "count": {"type": "integer"}
                },
                "required": ["results", "count"]
            }),
            false,
        )?;
        d.constraints.max_output_bytes = 1 << 20;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: SearchArgs = args(raw)?;
            let (store, now) = self.0.backend()?;
            let q = MemorySearch {
                query: a.query,
                tags: a.tags,
                prefix: a.prefix,
                limit: u32::try_from(a.limit.min(MAX_RESULTS)).unwrap_or(1),
            };
            let found = store
                .memory_search(&scope(ctx), &q, now)
                .await
                .map_err(store_failure)?;
            let results: Vec<Value> = found.iter().map(shown).collect();
            Ok(json!({"count": results.len(), "results": results}))
        })
    }
}

struct MemoryDelete(Arc<Memory>);

impl BuiltinTool for MemoryDelete {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = definition(
            "memory_delete",
            "Forget the entry under a key in your own memory. `deleted: false` when there was \
             none.",
            key_params(),
            json!({
                "type": "object",
                "properties": {"key": {"type": "string"}, "deleted": {"type": "boolean"}},
                "required": ["key", "deleted"]
            }),
            true,
        )?;
        d.constraints.max_output_bytes = 4 << 10;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: KeyArgs = args(raw)?;
            let (store, now) = self.0.backend()?;
            let deleted = store
                .memory_delete(&scope(ctx), &a.key, now)
                .await
                .map_err(store_failure)?;
            output(&json!({"key": a.key, "deleted": deleted}))
        })
    }
}
