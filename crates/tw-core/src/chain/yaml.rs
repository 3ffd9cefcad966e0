//! YAML read with positions, so every problem in a chain file can name its line, and written so
//! that reading it back gives the same value.
//!
//! `serde_yaml_ng` gives values without positions; chain diagnostics point at the line of the step,
//! argument or reference at fault. This reads saphyr-parser's event stream (each event carries
//! its span) into a `serde_json::Value` and a [`LineMap`] from JSON pointer to line.
//!
//! Scalars resolve the YAML 1.2 core schema way (`null`/`~`/empty, `true`/`false`, decimal, `0x`
//! and `0o` integers, floats); quoted and block scalars are strings. What JSON cannot hold, or
//! what would make a file mean something other than it seems, is refused with its line: `.inf`
//! and `.nan`, anchors and aliases, keys that are not strings, duplicate keys, tags other than the
//! core ones, more than one document, nesting deeper than [`MAX_DEPTH`], input over
//! [`MAX_BYTES`].

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};
use serde_json::{Map, Number, Value};

/// The largest YAML text read, in bytes.
pub const MAX_BYTES: usize = 1024 * 1024;
/// How deep mappings and lists may nest.
pub const MAX_DEPTH: usize = 64;

/// A problem reading YAML, with the (file) line it is on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    /// 1-based line, the offset given to [`read`] included.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Lines of the nodes of a YAML document, by JSON pointer (`/steps/2/arguments/url`).
///
/// A mapping entry has two lines, its key's and its value's (a block value starts on the next
/// line); [`LineMap::line_of`] gives the key's, where a reader looks for the field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LineMap {
    nodes: BTreeMap<String, usize>,
    keys: BTreeMap<String, usize>,
    /// The line given when nothing on the pointer's way is known.
    first: usize,
}

impl LineMap {
    /// The line of the node at `pointer` (its key's line for a mapping entry), else of its
    /// nearest parent that has one, else the document's first line.
    pub fn line_of(&self, pointer: &str) -> usize {
        let mut at = pointer;
        loop {
            if let Some(&line) = self.keys.get(at).or_else(|| self.nodes.get(at)) {
                return line;
            }
            match at.rfind('/') {
                Some(i) => at = &at[..i],
                None => return self.first.max(1),
            }
        }
    }

    /// The line the value at `pointer` starts on, if there is such a node.
    pub fn node_line(&self, pointer: &str) -> Option<usize> {
        self.nodes.get(pointer).copied()
    }

    /// The line of the key of the mapping entry at `pointer`, if it is one.
    pub fn key_line(&self, pointer: &str) -> Option<usize> {
        self.keys.get(pointer).copied()
    }

    /// The lines of the subtree at `prefix`, with pointers relative to it (`/chains/1` taken
    /// from `/chains/1/steps/0` gives `/steps/0`).
    pub fn within(&self, prefix: &str) -> LineMap {
        let pick = |m: &BTreeMap<String, usize>| -> BTreeMap<String, usize> {
            m.range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .filter_map(|(k, &l)| {
                    let rest = &k[prefix.len()..];
                    (rest.is_empty() || rest.starts_with('/')).then(|| (rest.to_owned(), l))
                })
                .collect()
        };
        LineMap {
            nodes: pick(&self.nodes),
            keys: pick(&self.keys),
            first: self.line_of(prefix),
        }
    }

    /// The same lines under `prefix` (`/steps` over a chain written as its list of steps).
    pub(crate) fn nest(&self, prefix: &str) -> LineMap {
        let put = |m: &BTreeMap<String, usize>| -> BTreeMap<String, usize> {
            m.iter()
                .map(|(k, &l)| (format!("{prefix}{k}"), l))
                .collect()
        };
        LineMap {
            nodes: put(&self.nodes),
            keys: put(&self.keys),
            first: self.first,
        }
    }

    /// Sets the line given when nothing on a pointer's way is known.
    pub(crate) fn set_first(&mut self, line: usize) {
        self.first = line;
    }

    fn with_first(first: usize) -> LineMap {
        LineMap {
            first,
            ..LineMap::default()
        }
    }
}

/// What reading a YAML text gives.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlRead {
    /// The document as JSON, unless there is an error (an empty text is `null`).
    pub value: Option<Value>,
    /// The line of every node read.
    pub lines: LineMap,
    /// Every problem found; a syntax error or a limit stops the reading.
    pub errors: Vec<YamlError>,
}

/// Escapes one JSON pointer segment.
pub fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// An open mapping or list.
enum Open {
    Seq {
        items: Vec<Value>,
        pointer: String,
    },
    Map {
        map: Map<String, Value>,
        pointer: String,
        /// The key read, waiting for its value.
        key: Option<String>,
    },
}

struct Reader {
    first_line: usize,
    /// Character positions of the text's `\n`s: YAML also breaks lines at a lone `\r`, the
    /// file's lines (what an editor and the rest of Toolwarden count) do not.
    breaks: Vec<usize>,
    stack: Vec<Open>,
    root: Option<Value>,
    lines: LineMap,
    errors: Vec<YamlError>,
}

impl Reader {
    /// The file line of a position the parser gives.
    fn line(&self, at: &saphyr_parser::Marker) -> usize {
        self.first_line + self.breaks.partition_point(|&b| b < at.index())
    }

    fn error(&mut self, line: usize, message: impl Into<String>) {
        self.errors.push(YamlError {
            line,
            message: message.into(),
        });
    }

    /// The pointer the next value goes to.
    fn next_pointer(&self) -> String {
        match self.stack.last() {
            None => String::new(),
            Some(Open::Seq { items, pointer }) => format!("{pointer}/{}", items.len()),
            Some(Open::Map { pointer, key, .. }) => {
                format!("{pointer}/{}", escape_pointer(key.as_deref().unwrap_or("")))
            }
        }
    }

    fn in_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Open::Map { key: None, .. }))
    }

    /// A complete value: into its list, its mapping entry, or the root.
    fn place(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Open::Seq { items, .. }) => items.push(value),
            Some(Open::Map { map, key, .. }) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
            }
        }
    }

    /// A key scalar: checked, its line noted.
    fn key(&mut self, text: &str, style: ScalarStyle, tag: Option<&Tag>, line: usize) {
        let resolved = if style == ScalarStyle::Plain && tag.is_none() {
            plain(text).ok()
        } else {
            None
        };
        if let Some(v) = resolved.filter(|v| !v.is_string()) {
            self.error(
                line,
                format!(
                    "mapping keys must be strings: {text:?} reads as {}; quote it",
                    type_name(&v)
                ),
            );
        }
        let duplicate =
            matches!(self.stack.last(), Some(Open::Map { map, .. }) if map.contains_key(text));
        if duplicate {
            self.error(line, format!("the key {text:?} is written twice"));
        }
        if let Some(Open::Map { key, pointer, .. }) = self.stack.last_mut() {
            *key = Some(text.to_owned());
            let at = format!("{pointer}/{}", escape_pointer(text));
            self.lines.keys.insert(at, line);
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Reads `text` (one YAML document); `first_line` is the file line of its first line (1 for a
/// whole file, the line after `---` for SKILL.md front matter).
pub fn read(text: &str, first_line: usize) -> YamlRead {
    let first_line = first_line.max(1);
    let mut r = Reader {
        first_line,
        breaks: Vec::new(),
        stack: Vec::new(),
        root: None,
        lines: LineMap::with_first(first_line),
        errors: Vec::new(),
    };
    if text.len() > MAX_BYTES {
        r.error(
            first_line,
            format!(
                "the text is {} bytes; at most {MAX_BYTES} are read",
                text.len()
            ),
        );
        return r.finish();
    }
    r.breaks = text
        .chars()
        .enumerate()
        .filter_map(|(i, c)| (c == '\n').then_some(i))
        .collect();
    let mut documents = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(e) => e,
            Err(e) => {
                let line = r.line(e.marker());
                r.error(line, format!("not valid YAML: {}", e.info()));
                return r.finish();
            }
        };
        let line = r.line(&span.start);
        let is_map = matches!(event, Event::MappingStart(..));
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    r.error(
                        line,
                        "a second YAML document starts here; a file holds one (a list holds several chains)",
                    );
                    return r.finish();
                }
            }
            Event::Alias(_) => {
                r.error(
                    line,
                    "aliases (`*name`) are not supported: write the value out",
                );
                if r.in_key_position() {
                    return r.finish();
                }
                let at = r.next_pointer();
                r.lines.nodes.insert(at, line);
                r.place(Value::Null);
            }
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 {
                    r.error(
                        line,
                        "anchors (`&name`) are not supported: write the value out",
                    );
                }
                if r.in_key_position() {
                    r.key(&text, style, tag.as_deref(), line);
                    continue;
                }
                let value = match scalar(&text, style, tag.as_deref()) {
                    Ok(v) => v,
                    Err(m) => {
                        r.error(line, m);
                        Value::Null
                    }
                };
                let at = r.next_pointer();
                r.lines.nodes.insert(at, line);
                r.place(value);
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                if r.in_key_position() {
                    r.error(
                        line,
                        "mapping keys must be strings, not a list or a mapping",
                    );
                    return r.finish();
                }
                if anchor != 0 {
                    r.error(
                        line,
                        "anchors (`&name`) are not supported: write the value out",
                    );
                }
                if let Some(tag) = tag.as_deref() {
                    let fits = tag.is_yaml_core_schema()
                        && tag.suffix == if is_map { "map" } else { "seq" };
                    if !fits {
                        r.error(line, format!("the tag {tag} is not supported"));
                    }
                }
                if r.stack.len() >= MAX_DEPTH {
                    r.error(line, format!("nested more than {MAX_DEPTH} deep"));
                    return r.finish();
                }
                let pointer = r.next_pointer();
                r.lines.nodes.insert(pointer.clone(), line);
                r.stack.push(if is_map {
                    Open::Map {
                        map: Map::new(),
                        pointer,
                        key: None,
                    }
                } else {
                    Open::Seq {
                        items: Vec::new(),
                        pointer,
                    }
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match r.stack.pop() {
                    Some(Open::Seq { items, .. }) => Value::Array(items),
                    Some(Open::Map { map, .. }) => Value::Object(map),
                    None => continue,
                };
                r.place(value);
            }
        }
    }
    r.finish()
}

impl Reader {
    fn finish(self) -> YamlRead {
        let ok = self.errors.is_empty() && self.stack.is_empty();
        YamlRead {
            value: ok.then(|| self.root.unwrap_or(Value::Null)),
            lines: self.lines,
            errors: self.errors,
        }
    }
}

/// A scalar's value: plain scalars resolved, quoted and block ones strings, core tags obeyed.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let Some(tag) = tag else {
        return if style == ScalarStyle::Plain {
            plain(text)
        } else {
            Ok(Value::String(text.to_owned()))
        };
    };
    if tag.handle.is_empty() && tag.suffix == "!" {
        // The non-specific tag `!`: a string.
        return Ok(Value::String(text.to_owned()));
    }
    if !tag.is_yaml_core_schema() {
        return Err(format!("the tag {tag} is not supported"));
    }
    let v = match tag.suffix.as_str() {
        "str" => return Ok(Value::String(text.to_owned())),
        "null" | "bool" | "int" | "float" => plain(text)?,
        _ => return Err(format!("the tag {tag} is not supported")),
    };
    let fits = match tag.suffix.as_str() {
        "null" => v.is_null(),
        "bool" => v.is_boolean(),
        "int" => v.is_i64() || v.is_u64(),
        _ => v.is_number(),
    };
    if !fits {
        return Err(format!("{text:?} is not a {}", &tag.suffix));
    }
    if tag.suffix == "float"
        && let Some(f) = v.as_f64()
    {
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("{text:?} is not a finite number"));
    }
    Ok(v)
}

/// A plain scalar, resolved by the YAML 1.2 core schema.
fn plain(text: &str) -> Result<Value, String> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(format!(
                "{text} is not a number JSON can hold; quote it for the text"
            ));
        }
        _ => {}
    }
    let radix = |digits: &str, radix: u32| -> Option<Result<Value, String>> {
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        Some(
            u64::from_str_radix(digits, radix)
                .map(Value::from)
                .map_err(|_| format!("{text} is too large for a whole number")),
        )
    };
    if let Some(v) = text.strip_prefix("0x").and_then(|d| radix(d, 16)) {
        return v;
    }
    if let Some(v) = text.strip_prefix("0o").and_then(|d| radix(d, 8)) {
        return v;
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = unsigned.parse::<u64>()
            && !text.starts_with('-')
        {
            return Ok(Value::from(n));
        }
        return float(text).ok_or_else(|| format!("{text} is too large for a number"));
    }
    if let Some(normal) = float_form(text) {
        return float(&normal).ok_or_else(|| format!("{text} is too large for a number"));
    }
    Ok(Value::String(text.to_owned()))
}

fn float(text: &str) -> Option<Value> {
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?` written as Rust reads
/// floats, or `None` when `text` does not match.
fn float_form(text: &str) -> Option<String> {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'-') => ("-", &text[1..]),
        Some(b'+') => ("", &text[1..]),
        _ => ("", text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (whole, frac) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !frac.is_none_or(digits) {
        return None;
    }
    match frac {
        None if whole.is_empty() => return None,
        Some(f) if whole.is_empty() && f.is_empty() => return None,
        _ => {}
    }
    let mut out = format!(
        "{sign}{}.{}",
        if whole.is_empty() { "0" } else { whole },
        match frac {
            Some(f) if !f.is_empty() => f,
            _ => "0",
        }
    );
    if let Some(e) = exponent {
        let e_digits = e.strip_prefix(['-', '+']).unwrap_or(e);
        if e_digits.is_empty() || !digits(e_digits) {
            return None;
        }
        out.push('e');
        out.push_str(e);
    }
    Some(out)
}

/// `value` as block YAML that [`read`] gives back exactly. Strings are plain only where they
/// cannot read as anything else, else double-quoted with escapes; YAML 1.1 emitters (libyaml,
/// serde_yaml_ng) break lines at U+2028 and U+0085, which a YAML 1.2 reader keeps as text.
pub fn write(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => block_map(m, 0, &mut out),
        Value::Array(a) if !a.is_empty() => block_seq(a, 0, &mut out),
        other => {
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn block_map(m: &Map<String, Value>, indent: usize, out: &mut String) {
    for (k, v) in m {
        pad(out, indent);
        entry(k, v, indent, out);
    }
}

/// `key: value` from where the key starts; a non-empty collection goes on the lines below.
fn entry(k: &str, v: &Value, indent: usize, out: &mut String) {
    out.push_str(&string(k));
    out.push(':');
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            block_map(m, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            block_seq(a, indent + 2, out);
        }
        other => {
            out.push(' ');
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

fn block_seq(a: &[Value], indent: usize, out: &mut String) {
    for v in a {
        pad(out, indent);
        out.push('-');
        match v {
            Value::Object(m) if !m.is_empty() => {
                out.push(' ');
                for (n, (k, v)) in m.iter().enumerate() {
                    if n > 0 {
                        pad(out, indent + 2);
                    }
                    entry(k, v, indent + 2, out);
                }
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                block_seq(inner, indent + 2, out);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

/// A scalar, or an empty collection, on one line.
fn inline(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// A string plain when it reads back as itself, else double-quoted.
fn string(s: &str) -> String {
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '/' | '('));
    let rest_ok = s
        .chars()
        .all(|c| (c.is_ascii_graphic() || c == ' ') && !matches!(c, '#' | ':'));
    let plain_ok =
        first_ok && rest_ok && !s.ends_with(' ') && plain(s).is_ok_and(|v| v.as_str() == Some(s));
    if plain_ok {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            // YAML's printable characters, less the ones a reader may take for line breaks or
            // a byte order mark.
            ' '..='~'
            | '\u{a0}'..='\u{2027}'
            | '\u{202a}'..='\u{d7ff}'
            | '\u{e000}'..='\u{fefe}'
            | '\u{ff00}'..='\u{fffd}'
            | '\u{10000}'.. => out.push(c),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn check(text: &str, expect: Result<Value, Vec<(usize, &str)>>) {
        let got = read(text, 1);
        match expect {
            Ok(v) => {
                assert_eq!(got.errors, vec![], "{text:?}");
                assert_eq!(got.value, Some(v), "{text:?}");
            }
            Err(errors) => {
                let found: Vec<(usize, &str)> = got
                    .errors
                    .iter()
                    .map(|e| (e.line, e.message.as_str()))
                    .collect();
                assert_eq!(found, errors, "{text:?}");
                assert_eq!(got.value, None, "{text:?}");
            }
        }
    }

    #[test]
    fn plain_scalars_resolve_by_the_core_schema_and_quoted_ones_stay_strings() {
        let cases: &[(&str, Value)] = &[
            ("a: ~", json!({"a": null})),
            ("a:", json!({"a": null})),
            ("a: Null", json!({"a": null})),
            ("a: TRUE", json!({"a": true})),
            ("a: yes", json!({"a": "yes"})),
            ("a: on", json!({"a": "on"})),
            ("a: 12", json!({"a": 12})),
            ("a: -12", json!({"a": -12})),
            ("a: +12", json!({"a": 12})),
            ("a: 012", json!({"a": 12})),
            ("a: 0x1F", json!({"a": 31})),
            ("a: 0o17", json!({"a": 15})),
            ("a: 0b11", json!({"a": "0b11"})),
            ("a: 1.5", json!({"a": 1.5})),
            ("a: .5", json!({"a": 0.5})),
            ("a: 1.", json!({"a": 1.0})),
            ("a: -1.5e3", json!({"a": -1500.0})),
            ("a: 1e3", json!({"a": 1000.0})),
            (
                "a: 18446744073709551615",
                json!({"a": 18_446_744_073_709_551_615u64}),
            ),
            ("a: 1.2.3", json!({"a": "1.2.3"})),
            ("a: '12'", json!({"a": "12"})),
            ("a: \"true\"", json!({"a": "true"})),
            ("a: !!str 12", json!({"a": "12"})),
            ("a: !!float 1", json!({"a": 1.0})),
            ("a: ! 12", json!({"a": "12"})),
            ("a: |\n  x\n  y\n", json!({"a": "x\ny\n"})),
            ("a: $input.x", json!({"a": "$input.x"})),
            ("- [1, {b: c}]\n- d", json!([[1, {"b": "c"}], "d"])),
            ("", Value::Null),
            ("# only a comment\n", Value::Null),
            ("---\na: 1\n...\n", json!({"a": 1})),
        ];
        for (text, want) in cases {
            check(text, Ok(want.clone()));
        }
    }

    #[test]
    fn what_json_cannot_hold_or_yaml_would_hide_is_refused_with_its_line() {
        let cases: &[(&str, Vec<(usize, &str)>)] = &[
            (
                "a: 1\nb: .inf",
                vec![(
                    2,
                    ".inf is not a number JSON can hold; quote it for the text",
                )],
            ),
            (
                "a: .NaN",
                vec![(
                    1,
                    ".NaN is not a number JSON can hold; quote it for the text",
                )],
            ),
            (
                "a: &x 1\nb: *x",
                vec![
                    (
                        1,
                        "anchors (`&name`) are not supported: write the value out",
                    ),
                    (
                        2,
                        "aliases (`*name`) are not supported: write the value out",
                    ),
                ],
            ),
            (
                "a: 1\nb: 2\na: 3",
                vec![(3, "the key \"a\" is written twice")],
            ),
            (
                "1: a\ntrue: b\n'2': c",
                vec![
                    (
                        1,
                        "mapping keys must be strings: \"1\" reads as a number; quote it",
                    ),
                    (
                        2,
                        "mapping keys must be strings: \"true\" reads as a boolean; quote it",
                    ),
                ],
            ),
            (
                "? [a]\n: b",
                vec![(1, "mapping keys must be strings, not a list or a mapping")],
            ),
            (
                "a: 1\n---\nb: 2",
                vec![(
                    2,
                    "a second YAML document starts here; a file holds one (a list holds several chains)",
                )],
            ),
            ("a: !foo x", vec![(1, "the tag !foo is not supported")]),
            ("a: !!int x", vec![(1, "\"x\" is not a int")]),
            ("a: 99999999999999999999", vec![]),
            (
                "a:\n  b: [1, 2\nc: 3",
                vec![(3, "not valid YAML: invalid indentation")],
            ),
            (
                "a: 0x1FFFFFFFFFFFFFFFFF",
                vec![(1, "0x1FFFFFFFFFFFFFFFFF is too large for a whole number")],
            ),
        ];
        for (text, want) in cases {
            if want.is_empty() {
                // Decimal integers past u64 are floats, as JSON has them.
                let got = read(text, 1);
                assert_eq!(got.errors, vec![], "{text}");
                continue;
            }
            check(text, Err(want.clone()));
        }
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        check(&deep, Err(vec![(1, "nested more than 64 deep")]));
        let ok = format!("{}1{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(read(&ok, 1).errors, vec![]);
        let big = format!("a: \"{}\"", "x".repeat(MAX_BYTES));
        let got = read(&big, 1);
        assert_eq!(
            got.errors,
            vec![YamlError {
                line: 1,
                message: "the text is 1048581 bytes; at most 1048576 are read".to_owned()
            }]
        );
        assert_eq!(got.value, None);
    }

    #[test]
    fn every_node_has_its_line_and_an_offset_moves_them_all() {
        let text = "name: c\nsteps:\n  - id: a\n    arguments:\n      url: x\n      list:\n        - 1\n        - {k: v}\n  - b\n";
        let got = read(text, 10);
        assert_eq!(got.errors, vec![]);
        let lines = &got.lines;
        let cases: &[(&str, usize)] = &[
            ("", 10),
            ("/name", 10),
            ("/steps", 11),
            ("/steps/0", 12),
            ("/steps/0/id", 12),
            ("/steps/0/arguments", 13),
            ("/steps/0/arguments/url", 14),
            ("/steps/0/arguments/list", 15),
            ("/steps/0/arguments/list/1", 17),
            ("/steps/0/arguments/list/1/k", 17),
            ("/steps/0/arguments/missing/deeper", 13),
            ("/steps/1", 18),
            ("/nothing", 10),
        ];
        for (pointer, line) in cases {
            assert_eq!(lines.line_of(pointer), *line, "{pointer}");
        }
        assert_eq!(lines.node_line("/steps"), Some(12));
        assert_eq!(lines.key_line("/steps"), Some(11));
        let step = lines.within("/steps/0");
        assert_eq!(step.line_of("/arguments/url"), 14);
        assert_eq!(step.line_of("/zzz"), 12);
        assert_eq!(step.line_of(""), 12);
        // `/steps/1` is not inside `/steps/0`, nor `/steps/10` inside `/steps/1`.
        assert_eq!(lines.within("/steps/1").line_of("/id"), 18);
    }

    #[test]
    fn a_lone_cr_breaks_a_yaml_line_but_not_a_file_line() {
        // Found by fuzzing: the parser counts `\r` as a line break, so lines went past the
        // file's last one.
        let got = read("a: 1\rb: [x,\r  y]\nc: 3\n", 1);
        assert_eq!(got.errors, vec![]);
        let lines: Vec<usize> = ["/a", "/b/1", "/c"]
            .iter()
            .map(|p| got.lines.line_of(p))
            .collect();
        assert_eq!(lines, vec![1, 1, 2]);
        let bad = read("a: 1\r\r\rb: [\n", 1);
        assert_eq!(bad.errors.len(), 1);
        assert!(bad.errors[0].line <= 2, "{:?}", bad.errors);
    }
}
