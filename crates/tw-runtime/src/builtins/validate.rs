//! `validate_content`: checks a text or JSON value against one of the validation profiles the
//! config names (`[validation.profiles.NAME]`) and reports every violation with its place. The
//! rules and the report are `tw_core::content`'s; the profiles are compiled when the runtime
//! opens (`Config::content_profiles`) and held here, the one place calls read them.
//!
//! The profile names are an `enum` in the tool's schema, so an agent sees the choices and a
//! wrong name is refused by the pipeline's validation stage, listing them. Without profiles the
//! schema cannot list any, and a call fails with `not_configured`, saying how to add one.
//!
//! A check is CPU work on at most [`MAX_CONTENT_CHARS`] characters: a small one runs inline on
//! the async worker (cheaper than a hand-off), a larger one on the blocking pool, so the call's
//! time limit holds.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::content::{ContentProfile, Report};
use tw_core::{ErrorCode, IsolationLevel, ToolCategory, ToolDefinition, ToolStatus};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit, output};
use crate::config::ContentProfiles;

/// The most characters content may have: a string's own, or JSON's compact serialization.
pub const MAX_CONTENT_CHARS: usize = 1 << 20;

/// Content up to this many bytes is checked inline: at most about 0.12 ms of work (a JSON text
/// parsed and validated against a schema; text rules alone take a tenth of that), where a hand-off
/// to the blocking pool costs tens of microseconds (`cargo bench -p tw-core --bench content`).
const INLINE_BYTES: usize = 16 << 10;

/// The tool's code for a profile name the config does not have.
const UNKNOWN_PROFILE: &str = "unknown_profile";
/// The tool's code when the config has no profiles at all.
const NOT_CONFIGURED: &str = "not_configured";

pub(super) struct ValidateContent {
    profiles: Arc<ContentProfiles>,
}

impl ValidateContent {
    pub(super) fn new(profiles: Arc<ContentProfiles>) -> Self {
        Self { profiles }
    }

    fn profile(&self, name: &str) -> Result<&Arc<ContentProfile>, ToolFailure> {
        self.profiles.get(name).ok_or_else(|| {
            if self.profiles.is_empty() {
                return ToolFailure::failed(
                    NOT_CONFIGURED,
                    "no validation profiles are configured: add [validation.profiles.NAME] to \
                     the config (a schema, lengths, an encoding, forbid or require patterns)",
                );
            }
            let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            ToolFailure {
                status: ToolStatus::ValidationError,
                code: UNKNOWN_PROFILE.to_owned(),
                message: format!(
                    "no validation profile named {name:?}; the config has {}",
                    known.join(", ")
                ),
            }
        })
    }
}

#[derive(Deserialize)]
struct Args {
    profile: String,
    content: Value,
}

impl BuiltinTool for ValidateContent {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let names: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
        let profile = if names.is_empty() {
            json!({"type": "string", "minLength": 1,
                   "description": "A validation profile's name. None is configured yet: the administrator adds [validation.profiles.NAME] to the config."})
        } else {
            json!({"type": "string", "enum": names,
                   "description": "The validation profile to check against, as the config names it."})
        };
        let mut d = ToolDefinition::new(
            lit::name("validate_content")?,
            "Check a text or a JSON value against a validation profile the administrator \
             configured: a JSON Schema, a length, an encoding, patterns it must not and must \
             match. Reports each violation with its JSON pointer or its line and column.",
            ToolCategory::System,
            lit::group("validation")?,
            lit::params(json!({
                "type": "object",
                "properties": {
                    "profile": profile,
                    "content": {
                        "maxLength": MAX_CONTENT_CHARS,
                        "description": "A string is text (parsed as JSON when the profile has a schema); any other JSON value is JSON, its text the compact serialization. At most 1,048,576 characters."
                    }
                },
                "required": ["profile", "content"],
                "additionalProperties": false
            }))?,
        );
        let at = json!({
            "type": "object",
            "properties": {
                "line": {"type": "integer"},
                "column": {"type": "integer"},
                "offset": {"type": "integer"}
            },
            "required": ["line", "column", "offset"]
        });
        d.output_schema = lit::output(json!({
            "type": "object",
            "properties": {
                "profile": {"type": "string"},
                "valid": {"type": "boolean"},
                "violations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "rule": {"enum": ["schema", "min_length", "max_length", "encoding", "forbid", "require"]},
                            "path": {"type": "string"},
                            "message": {"type": "string"},
                            "at": at
                        },
                        "required": ["rule", "path", "message"]
                    }
                },
                "violation_count": {"type": "integer"}
            },
            "required": ["profile", "valid", "violations", "violation_count"]
        }))?;
        d.constraints.isolation = IsolationLevel::None;
        d.constraints.max_execution_time_ms = 5_000;
        // 100 violations with messages of up to 300 characters, and room for the envelope.
        d.constraints.max_output_bytes = 128 << 10;
        Ok(d)
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: Args = args(raw)?;
            let profile = Arc::clone(self.profile(&a.profile)?);
            let size = text_bytes(&a.content)?;
            let report = if size <= INLINE_BYTES {
                profile.check(&a.content)
            } else {
                tokio::task::spawn_blocking(move || profile.check(&a.content))
                    .await
                    .map_err(|e| {
                        ToolFailure::failed(
                            ErrorCode::EXECUTION_FAILED,
                            format!("the check failed: {e}"),
                        )
                    })?
            };
            let Report {
                valid,
                violations,
                violation_count,
            } = report;
            output(&json!({
                "profile": a.profile,
                "valid": valid,
                "violations": violations,
                "violation_count": violation_count,
            }))
        })
    }
}

/// How many bytes of text the content is, refusing JSON whose compact serialization is longer
/// than [`MAX_CONTENT_CHARS`] (a string's length the schema has already checked). Counted as it
/// is written, so nothing is built for it.
fn text_bytes(content: &Value) -> Result<usize, ToolFailure> {
    if let Value::String(s) = content {
        return Ok(s.len());
    }
    let mut count = Count::default();
    serde_json::to_writer(&mut count, content).map_err(|e| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!("cannot serialize the content: {e}"),
        )
    })?;
    if count.chars > MAX_CONTENT_CHARS {
        return Err(ToolFailure {
            status: ToolStatus::ValidationError,
            code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
            message: format!(
                "content: the JSON is {} characters serialized; at most {MAX_CONTENT_CHARS} are \
                 allowed",
                count.chars
            ),
        });
    }
    Ok(count.bytes)
}

/// Counts the bytes and characters of UTF-8 written to it.
#[derive(Default)]
struct Count {
    bytes: usize,
    chars: usize,
}

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len();
        // Every character has exactly one byte that is not a continuation byte (10xxxxxx).
        self.chars += buf.iter().filter(|b| (*b & 0xC0) != 0x80).count();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(super) fn tools(profiles: Arc<ContentProfiles>) -> Vec<Arc<dyn BuiltinTool>> {
    vec![Arc::new(ValidateContent::new(profiles))]
}

#[cfg(test)]
mod tests;
