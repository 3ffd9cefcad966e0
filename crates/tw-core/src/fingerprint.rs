//! Fingerprints: SHA-256 in lowercase hex, and of JSON with its object keys sorted, so that a
//! mere reordering of keys (serde_json keeps insertion order in this workspace) changes nothing.
//! Used for capability classifications, pinned upstream tools and stored token hashes.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// SHA-256 of `data`, in lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// SHA-256 of `value` written as canonical JSON (see [`canonical_json`]), in lowercase hex.
pub fn json_sha256(value: &Value) -> String {
    let mut doc = String::new();
    canonical_json(value, &mut doc);
    sha256_hex(doc.as_bytes())
}

/// JSON with object keys sorted (serde_json keeps insertion order in this workspace).
pub fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_does_not_change_the_fingerprint_but_content_does() {
        let a = json!({"b": [1, {"y": 2, "x": 1}], "a": "s"});
        let b = json!({"a": "s", "b": [1, {"x": 1, "y": 2}]});
        assert_eq!(json_sha256(&a), json_sha256(&b));
        assert_ne!(
            json_sha256(&a),
            json_sha256(&json!({"a": "s", "b": [{"x": 1, "y": 2}, 1]}))
        );
        let mut doc = String::new();
        canonical_json(&b, &mut doc);
        assert_eq!(doc, r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
