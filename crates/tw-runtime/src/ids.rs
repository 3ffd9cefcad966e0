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
