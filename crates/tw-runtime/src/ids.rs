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
    use sha2::Digest as _;
    // The first 8 bytes of the SHA-256 digest, in hex: only those are written out.
    let digest = sha2::Sha256::digest(execution_id.as_bytes());
    let mut id = tw_core::fingerprint::hex(&digest[..8]);
    if id == "0000000000000000" {
        id.replace_range(15.., "1");
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_id_is_the_first_half_of_its_execution_ids_digest() {
        for id in ["01a2245e-84f3-7219-ae4a-5ff1e7346c9a", "chain-exec", ""] {
            let full = tw_store::sha256_hex(id.as_bytes());
            assert_eq!(span_id(id), full[..16], "{id:?}");
        }
        let fresh = new_execution_id();
        let span = span_id(fresh.as_str());
        assert_eq!(span.len(), 16);
        assert!(
            span.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
