//! Output sizing and capping. A tool's result is passed on whole up to its byte limit; beyond it
//! the caller gets the first bytes (cut at a character boundary) and `truncated: true`, never an
//! unbounded blob.
//!
//! Text output is measured as its UTF-8 bytes; a JSON result as its compact serialization. A JSON
//! result that is too big becomes the prefix of its serialization as a string, because a cut JSON
//! document would not parse.

use serde_json::Value;

/// Size in bytes of an output as it is passed on.
pub fn output_size(output: &Value) -> usize {
    match output {
        Value::String(s) => s.len(),
        other => serde_json::to_vec(other).map_or(0, |v| v.len()),
    }
}

/// The largest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Caps `output` at `max` bytes. Returns the output to pass on, its size, and whether it was cut.
pub fn cap_output(output: Value, max: usize) -> (Value, usize, bool) {
    match output {
        Value::String(s) => {
            if s.len() <= max {
                let n = s.len();
                (Value::String(s), n, false)
            } else {
                let cut = truncate_str(&s, max).to_owned();
                let n = cut.len();
                (Value::String(cut), n, true)
            }
        }
        other => {
            // Counted as it is written, without keeping the text: most outputs fit.
            let mut counted = Count(0);
            let _ = serde_json::to_writer(&mut counted, &other);
            if counted.0 <= max {
                (other, counted.0, false)
            } else {
                let text = serde_json::to_string(&other).unwrap_or_default();
                let cut = truncate_str(&text, max).to_owned();
                let n = cut.len();
                (Value::String(cut), n, true)
            }
        }
    }
}

/// Counts the bytes written to it.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn caps_text_on_char_boundaries() {
        assert_eq!(cap_output(json!("héllo"), 100), (json!("héllo"), 6, false));
        assert_eq!(cap_output(json!("héllo"), 2), (json!("h"), 1, true));
        assert_eq!(cap_output(json!("héllo"), 3), (json!("hé"), 3, true));
    }

    #[test]
    fn caps_json_as_its_serialization() {
        let v = json!({"a": "0123456789"});
        assert_eq!(cap_output(v.clone(), 100), (v, 18, false));
        assert_eq!(
            cap_output(json!({"a": "0123456789"}), 8),
            (json!("{\"a\":\"01"), 8, true)
        );
    }
}
