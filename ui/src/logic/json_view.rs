//! Pretty-printed JSON split into spans, some marked risky: a confirmation's arguments are shown
//! with the members the backend pointed at (JSON pointers to paths, commands, URLs) highlighted,
//! so the person approving sees what matters without reading the whole document.
//!
//! The text is exactly `serde_json::to_string_pretty`'s, so nothing is hidden or reordered by the
//! highlighting; a risky object member is highlighted with its key.

use std::collections::BTreeSet;

use serde_json::Value;

/// A run of the pretty-printed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    /// The text.
    pub(crate) text: String,
    /// Whether it is (part of) a member a risky pointer names.
    pub(crate) risky: bool,
}

/// `value` pretty-printed, with the members that `risky` (JSON pointers) name marked. Pointers that
/// name nothing in `value` mark nothing.
pub(crate) fn spans(value: &Value, risky: &[String]) -> Vec<Span> {
    let risky: BTreeSet<&str> = risky.iter().map(String::as_str).collect();
    let mut out = Spans::default();
    write(value, "", 0, &risky, &mut out);
    out.0
}

/// Escapes one key for use in a JSON pointer (RFC 6901).
pub(crate) fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[derive(Default)]
struct Spans(Vec<Span>);

impl Spans {
    fn push(&mut self, text: &str, risky: bool) {
        match self.0.last_mut() {
            Some(last) if last.risky == risky => last.text.push_str(text),
            _ => self.0.push(Span {
                text: text.to_owned(),
                risky,
            }),
        }
    }
}

fn write(value: &Value, pointer: &str, indent: usize, risky: &BTreeSet<&str>, out: &mut Spans) {
    if risky.contains(pointer) {
        out.push(&pretty(value, indent), true);
        return;
    }
    let pad = |n: usize| "  ".repeat(n);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push("{\n", false);
            let last = map.len() - 1;
            for (i, (key, member)) in map.iter().enumerate() {
                let child = format!("{pointer}/{}", pointer_token(key));
                out.push(&pad(indent + 1), false);
                let key_text = format!("{}: ", Value::String(key.clone()));
                if risky.contains(child.as_str()) {
                    out.push(&key_text, true);
                    out.push(&pretty(member, indent + 1), true);
                } else {
                    out.push(&key_text, false);
                    write(member, &child, indent + 1, risky, out);
                }
                out.push(if i == last { "\n" } else { ",\n" }, false);
            }
            out.push(&pad(indent), false);
            out.push("}", false);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push("[\n", false);
            let last = items.len() - 1;
            for (i, item) in items.iter().enumerate() {
                out.push(&pad(indent + 1), false);
                write(item, &format!("{pointer}/{i}"), indent + 1, risky, out);
                out.push(if i == last { "\n" } else { ",\n" }, false);
            }
            out.push(&pad(indent), false);
            out.push("]", false);
        }
        scalar => out.push(&pretty(scalar, indent), false),
    }
}

/// `value` pretty-printed as it would appear nested `indent` levels deep.
fn pretty(value: &Value, indent: usize) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let pad = "  ".repeat(indent);
    text.replace('\n', &format!("\n{pad}"))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn check(value: Value, risky: &[&str], expect: &[(&str, bool)]) {
        let risky: Vec<String> = risky.iter().map(|s| s.to_string()).collect();
        let got = spans(&value, &risky);
        let want: Vec<Span> = expect
            .iter()
            .map(|(text, risky)| Span {
                text: text.to_string(),
                risky: *risky,
            })
            .collect();
        assert_eq!(got, want);
        let whole: String = got.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(whole, serde_json::to_string_pretty(&value).unwrap());
    }

    #[test]
    fn nothing_risky_is_one_plain_span() {
        check(
            json!({"a": [1, {}], "b": []}),
            &[],
            &[("{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}", false)],
        );
    }

    #[test]
    fn a_risky_member_is_highlighted_with_its_key() {
        check(
            json!({"path": "/etc/passwd", "mode": "w"}),
            &["/path"],
            &[
                ("{\n  ", false),
                ("\"path\": \"/etc/passwd\"", true),
                (",\n  \"mode\": \"w\"\n}", false),
            ],
        );
    }

    #[test]
    fn nested_objects_array_items_and_escaped_keys() {
        check(
            json!({"argv": ["rm", "-rf"], "a/b": {"url": "http://x"}, "o": {"k": [1]}}),
            &["/argv/1", "/a~1b", "/o/k", "/missing"],
            &[
                ("{\n  \"argv\": [\n    \"rm\",\n    ", false),
                ("\"-rf\"", true),
                ("\n  ],\n  ", false),
                ("\"a/b\": {\n    \"url\": \"http://x\"\n  }", true),
                (",\n  \"o\": {\n    ", false),
                ("\"k\": [\n      1\n    ]", true),
                ("\n  }\n}", false),
            ],
        );
    }

    #[test]
    fn the_root_pointer_marks_everything() {
        check(json!("rm -rf /"), &[""], &[("\"rm -rf /\"", true)]);
    }

    #[test]
    fn pointer_tokens_escape_tilde_before_slash() {
        assert_eq!(pointer_token("a~/b"), "a~0~1b");
    }
}
