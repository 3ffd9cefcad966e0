//! The audit record as the runtime hands it over, and the stored row as readers get it back.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tw_core::ToolStatus;

use crate::codec;
use crate::error::{Result, StoreError};

/// JSON text, encoded once from the value's own type. A record's decision trace and execution
/// facts reach the log this way rather than built as a [`Value`] first and written out from it:
/// that round trip was about a tenth of a governed no-op call (docs/decisions/0033).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// `value` as compact JSON text.
    pub fn encode<T: Serialize + ?Sized>(value: &T) -> Self {
        // Serializing to a string fails only for a map with keys that are not strings, which
        // no record holds; `null` then rather than a record lost.
        Self(serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value, read back from the text.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        Self::encode(&value)
    }
}

/// One governed call, ready to be appended to the audit log. Secrets must already be redacted.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// The call's execution id (unique in the log).
    pub execution_id: String,
    /// The trace the call belongs to.
    pub trace_id: String,
    /// The tool named by the call (which may not exist).
    pub tool: String,
    /// The calling agent.
    pub agent_id: String,
    /// The skill the call was made under.
    pub skill: Option<String>,
    /// The person on whose behalf the agent acted.
    pub user_id: Option<String>,
    /// The arguments, redacted.
    pub arguments: Value,
    /// The policy decision (`allow`, `deny`, `ask`), when policy was reached.
    pub decision: Option<String>,
    /// Why policy decided as it did: every layer's verdict.
    pub explanation: Option<JsonText>,
    /// How the call ended.
    pub status: ToolStatus,
    /// Machine-readable error code.
    pub error_code: Option<String>,
    /// Human-readable error.
    pub error_message: Option<String>,
    /// The rule the call broke, if it broke one. Every denied call is a violation.
    pub violation: Option<AuditViolation>,
    /// The output passed to the caller, redacted.
    pub output: Option<Value>,
    /// Size of that output in bytes.
    pub output_bytes: u64,
    /// Whether the output was cut at the tool's limit.
    pub truncated: bool,
    /// When the pipeline took the call (µs since the epoch).
    pub started_at: i64,
    /// When the result was final (µs since the epoch).
    pub completed_at: i64,
    /// Wall time in µs.
    pub duration_us: i64,
    /// Execution facts (exit code, sandbox level, ...): a JSON object.
    pub metadata: JsonText,
}

/// A stored audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    /// Position in the log; increases with every append.
    pub id: i64,
    /// The call's execution id.
    pub execution_id: String,
    /// The trace the call belongs to.
    pub trace_id: String,
    /// The tool named by the call.
    pub tool: String,
    /// The calling agent.
    pub agent_id: String,
    /// The skill the call was made under.
    pub skill: Option<String>,
    /// The person on whose behalf the agent acted.
    pub user_id: Option<String>,
    /// The arguments, redacted.
    pub arguments: Value,
    /// The policy decision, when policy was reached.
    pub decision: Option<String>,
    /// Why policy decided as it did.
    pub explanation: Option<Value>,
    /// How the call ended.
    pub status: ToolStatus,
    /// Machine-readable error code.
    pub error_code: Option<String>,
    /// Human-readable error.
    pub error_message: Option<String>,
    /// The rule the call broke, if it broke one.
    pub violation: Option<AuditViolation>,
    /// The output passed to the caller, redacted.
    pub output: Option<Value>,
    /// SHA-256 (hex) of the stored output: the string itself for text, compact JSON otherwise.
    pub output_sha256: Option<String>,
    /// Size of the output in bytes.
    pub output_bytes: u64,
    /// Whether the output was cut at the tool's limit.
    pub truncated: bool,
    /// When the pipeline took the call (µs since the epoch).
    pub started_at: i64,
    /// When the result was final (µs since the epoch).
    pub completed_at: i64,
    /// Wall time in µs.
    pub duration_us: i64,
    /// Execution facts.
    pub metadata: Value,
    /// The previous record's hash (hex), which this record's hash covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// This record's hash (hex) over `prev` and its content: the link `audit verify` checks
    /// (docs/decisions/0035-verifiable-audit-log.md has the encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// What rule a call broke and how much it matters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditViolation {
    /// A short snake_case kind: `policy_denied`, `rate_limited`, `path_forbidden`, ...
    pub kind: String,
    /// How serious it is.
    pub severity: Severity,
}

/// How serious a violation is (shared with the policy engine that decides it).
pub use tw_core::policy::Severity;

/// The SHA-256 of an output as the log stores it.
pub fn output_digest(output: &Value) -> String {
    match output {
        Value::String(s) => sha256_hex(s.as_bytes()),
        other => sha256_hex(json_text(other).as_bytes()),
    }
}

/// The compact JSON text of `value`, written through a byte buffer (`Display` goes through
/// `fmt::Write` a piece at a time, several times slower on a long string).
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// The SHA-256 of `bytes` as lowercase hex, the form the log keeps digests in.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::chain::hex(&Sha256::digest(bytes))
}

/// A record with its JSON columns encoded, ready to bind.
pub(crate) struct Encoded {
    pub(crate) record: AuditRecord,
    pub(crate) arguments: String,
    pub(crate) output: Option<String>,
    pub(crate) output_sha256: Option<String>,
}

impl Encoded {
    pub(crate) fn new(record: AuditRecord) -> Self {
        let output = record.output.as_ref().map(json_text);
        // The digest of a non-text output is that of the text just written: serialized once.
        let output_sha256 = match (&record.output, &output) {
            (Some(Value::String(s)), _) => Some(sha256_hex(s.as_bytes())),
            (Some(_), Some(text)) => Some(sha256_hex(text.as_bytes())),
            _ => None,
        };
        Self {
            arguments: json_text(&record.arguments),
            output,
            output_sha256,
            record,
        }
    }

    /// The decision trace's text, which the record holds encoded already.
    pub(crate) fn explanation(&self) -> Option<&str> {
        self.record.explanation.as_ref().map(JsonText::as_str)
    }

    /// The execution facts' text, which the record holds encoded already.
    pub(crate) fn metadata(&self) -> &str {
        self.record.metadata.as_str()
    }
}

/// The columns of `audit_log` in the order [`decode_row`] expects.
pub(crate) const COLUMNS: &str = "id, execution_id, trace_id, tool, agent_id, skill, user_id, arguments, decision, \
     explanation, status, error_code, error_message, output, output_sha256, output_bytes, truncated, \
     started_at, completed_at, duration_us, metadata, violation_type, violation_severity, prev, hash";

fn json(id: i64, column: &str, text: &str) -> Result<Value> {
    codec::json(|| format!("audit row {id}, column {column}"), text)
}

dual! {
    /// The two violation columns, which the schema keeps both set or both empty.
    fn violation(id: i64, row: &DbRow) -> Result<Option<AuditViolation>> {
        let kind: Option<String> = row.try_get("violation_type")?;
        let severity: Option<String> = row.try_get("violation_severity")?;
        match (kind, severity) {
            (None, None) => Ok(None),
            (Some(kind), Some(severity)) => Ok(Some(AuditViolation {
                kind,
                severity: codec::word(
                    || format!("audit row {id}, column violation_severity"),
                    &severity,
                )?,
            })),
            _ => Err(StoreError::Corrupt {
                what: format!("audit row {id}, columns violation_type and violation_severity"),
                message: "one is set and the other is not".to_owned(),
            }),
        }
    }

    /// Reads one `audit_log` row selected with [`COLUMNS`].
    pub(crate) fn decode_row(row: &DbRow) -> Result<AuditRow> {
        let id: i64 = row.try_get("id")?;
        let status: String = row.try_get("status")?;
        let status = codec::word(|| format!("audit row {id}, column status"), &status)?;
        let opt_json = |column: &str| -> Result<Option<Value>> {
            let text: Option<String> = row.try_get(column)?;
            text.map(|t| json(id, column, &t)).transpose()
        };
        let output_bytes: i64 = row.try_get("output_bytes")?;
        Ok(AuditRow {
            id,
            execution_id: row.try_get("execution_id")?,
            trace_id: row.try_get("trace_id")?,
            tool: row.try_get("tool")?,
            agent_id: row.try_get("agent_id")?,
            skill: row.try_get("skill")?,
            user_id: row.try_get("user_id")?,
            arguments: json(id, "arguments", &row.try_get::<String, _>("arguments")?)?,
            decision: row.try_get("decision")?,
            explanation: opt_json("explanation")?,
            status,
            error_code: row.try_get("error_code")?,
            error_message: row.try_get("error_message")?,
            violation: violation(id, row)?,
            output: opt_json("output")?,
            output_sha256: row.try_get("output_sha256")?,
            output_bytes: u64::try_from(output_bytes).unwrap_or(0),
            truncated: row.try_get::<i64, _>("truncated")? != 0,
            started_at: row.try_get("started_at")?,
            completed_at: row.try_get("completed_at")?,
            duration_us: row.try_get("duration_us")?,
            metadata: json(id, "metadata", &row.try_get::<String, _>("metadata")?)?,
            prev: row
                .try_get::<Option<Vec<u8>>, _>("prev")?
                .map(|b| crate::chain::hex(&b)),
            hash: row
                .try_get::<Option<Vec<u8>>, _>("hash")?
                .map(|b| crate::chain::hex(&b)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_is_over_text_as_is_and_json_compact() {
        // sha256("abc")
        assert_eq!(
            output_digest(&json!("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            output_digest(&json!({"a": 1})),
            output_digest(&json!("{\"a\":1}"))
        );
        assert_ne!(
            output_digest(&json!({"a": 1})),
            output_digest(&json!({"a": 2}))
        );
    }
}
