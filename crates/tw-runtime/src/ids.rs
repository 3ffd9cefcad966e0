//! Fresh identifiers for calls and traces: UUID v7, so they are unique and sort by time.

use tw_core::{ExecutionId, TraceId};

/// A fresh execution id (UUID v7: unique and time-ordered).
pub fn new_execution_id() -> ExecutionId {
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    ExecutionId::new(&id).unwrap_or_else(|_| unreachable!("a UUID is a valid execution id"))
}

/// A fresh trace id (32 lowercase hex digits, the W3C trace-context shape).
pub fn new_trace_id() -> TraceId {
    let id = uuid::Uuid::now_v7().simple().to_string();
    TraceId::new(&id).unwrap_or_else(|_| unreachable!("a UUID is a valid trace id"))
}

/// The span id of a call's `tool_call` span (16 lowercase hex digits, the W3C shape): derived
/// from its execution id, so the log lines, the OTLP export and anyone holding the audit record
/// name the same span, and a chain step's parent span is its chain call's.
pub fn span_id(execution_id: &str) -> String {
    let hex = tw_store::sha256_hex(execution_id.as_bytes());
    match &hex[..16] {
        "0000000000000000" => "0000000000000001".to_owned(),
        id => id.to_owned(),
    }
}
