//! Content checks: whether a text or a JSON value meets a validation profile (a JSON Schema, a
//! length, an encoding, patterns it must not and must match), and every way it does not, each
//! with where: a JSON pointer into the value for the schema, a line and column of the text for
//! the text rules. The `validate_content` built-in is a thin tool around [`ContentProfile::check`];
//! the runtime reads a profile's schema file and hands its contents in, so this stays pure.
//!
//! A string is text. When the profile has a schema it is also parsed as JSON for the schema (a
//! string that is not JSON is one `schema` violation saying where parsing stopped). Any other
//! JSON value is JSON; the text rules judge its compact serialization, the text an agent would
//! pass on.
//!
//! Reports are bounded: at most [`MAX_REPORTED`] violations are listed (the count says how many
//! there were), each message at most [`MAX_MESSAGE_CHARS`] characters (jsonschema quotes the
//! offending value, which may be the whole content), and a forbidden pattern's violation names
//! the pattern and the place, never the text it matched, which may be the secret it exists to
//! keep out.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use serde::Serialize;
use serde_json::Value;

use crate::schema::{ParameterSchema, SchemaError, clip};

/// At most this many violations are listed in a report; the rest are only counted.
pub const MAX_REPORTED: usize = 100;

/// Longest message a violation carries, in characters (the same as argument violations').
pub const MAX_MESSAGE_CHARS: usize = crate::schema::MAX_MESSAGE_CHARS;

/// Largest program one pattern may compile to. The regex crate matches in linear time whatever
/// the pattern; this bounds the memory a careless pattern (`\w{1000}{1000}`) takes.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The characters a text may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Any character (a Rust string is always valid UTF-8).
    #[default]
    Utf8,
    /// U+0000 to U+007F.
    Ascii,
    /// U+0000 to U+00FF (ISO-8859-1).
    Latin1,
}

impl Encoding {
    /// The name a config writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Ascii => "ascii",
            Encoding::Latin1 => "latin-1",
        }
    }

    fn allows(self, c: char) -> bool {
        match self {
            Encoding::Utf8 => true,
            Encoding::Ascii => c.is_ascii(),
            Encoding::Latin1 => u32::from(c) <= 0xFF,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Encoding::Utf8 => "UTF-8",
            Encoding::Ascii => "ASCII",
            Encoding::Latin1 => "Latin-1",
        }
    }
}

impl FromStr for Encoding {
    type Err = String;
    /// Case and `-`/`_` do not matter: `UTF8`, `us-ascii` and `ISO-8859-1` are read too.
    fn from_str(s: &str) -> Result<Self, String> {
        let key: String = s
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        match key.as_str() {
            "utf8" => Ok(Encoding::Utf8),
            "ascii" | "usascii" => Ok(Encoding::Ascii),
            "latin1" | "iso88591" => Ok(Encoding::Latin1),
            _ => Err(format!(
                "unknown encoding {s:?}: expected one of utf-8, ascii, latin-1"
            )),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A regular expression of a profile, kept with its source for messages.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: Regex,
}

impl Pattern {
    /// Compiles `source` (the regex crate's syntax: no look-around, no backreferences, linear
    /// time). The error says why in one line.
    pub fn new(source: &str) -> Result<Self, String> {
        if source.is_empty() {
            return Err("an empty pattern matches every text; leave it out".to_owned());
        }
        let regex = RegexBuilder::new(source)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| match e {
                regex::Error::Syntax(text) => {
                    // The crate's text quotes the pattern with a caret under the fault; its last
                    // `error:` line is what went wrong.
                    let why = text
                        .lines()
                        .rev()
                        .find_map(|l| l.strip_prefix("error: "))
                        .unwrap_or(text.trim());
                    format!("not a regular expression: {why}")
                }
                regex::Error::CompiledTooBig(limit) => {
                    format!("the pattern compiles to more than {limit} bytes; write a simpler one")
                }
                other => other.to_string(),
            })?;
        Ok(Self {
            source: source.to_owned(),
            regex,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// The rules a profile applies to the text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextRules {
    /// Fewest characters.
    pub min_length: Option<u64>,
    /// Most characters.
    pub max_length: Option<u64>,
    /// The characters allowed.
    pub encoding: Encoding,
    /// Patterns that must not match anywhere; every match is a violation.
    pub forbid: Vec<Pattern>,
    /// Patterns that must each match somewhere.
    pub require: Vec<Pattern>,
}

impl TextRules {
    /// Whether these rules accept every text.
    pub fn is_empty(&self) -> bool {
        self.min_length.is_none()
            && self.max_length.is_none()
            && self.encoding == Encoding::Utf8
            && self.forbid.is_empty()
            && self.require.is_empty()
    }

    fn check(&self, text: &str, found: &mut Found<'_>) {
        if self.min_length.is_some() || self.max_length.is_some() {
            let chars = text.chars().count() as u64;
            if let Some(min) = self.min_length
                && chars < min
            {
                found.push(Rule::MinLength, None, None, || {
                    format!("the text is {chars} characters; at least {min} are required")
                });
            }
            if let Some(max) = self.max_length
                && chars > max
            {
                // Where the first character past the limit starts.
                let over = usize::try_from(max)
                    .ok()
                    .and_then(|n| text.char_indices().nth(n))
                    .map(|(i, _)| i);
                found.push(Rule::MaxLength, None, over, || {
                    format!("the text is {chars} characters; at most {max} are allowed")
                });
            }
        }
        if self.encoding != Encoding::Utf8 {
            for (i, c) in text.char_indices() {
                if !self.encoding.allows(c) {
                    found.push(Rule::Encoding, None, Some(i), || {
                        format!(
                            "{c:?} (U+{:04X}) is not {}",
                            u32::from(c),
                            self.encoding.label()
                        )
                    });
                }
            }
        }
        for p in &self.forbid {
            for m in p.regex.find_iter(text) {
                found.push(Rule::Forbid, None, Some(m.start()), || {
                    format!("matches the forbidden pattern {:?}", p.source)
                });
            }
        }
        for p in &self.require {
            if !p.regex.is_match(text) {
                found.push(Rule::Require, None, None, || {
                    format!("does not match the required pattern {:?}", p.source)
                });
            }
        }
    }
}

/// A validation profile, ready to check content: its schema compiled once, its patterns too.
#[derive(Clone)]
pub struct ContentProfile {
    schema: Option<(ParameterSchema, Arc<jsonschema::Validator>)>,
    rules: TextRules,
}

impl fmt::Debug for ContentProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentProfile")
            .field("schema", &self.schema.as_ref().map(|(s, _)| s))
            .field("rules", &self.rules)
            .finish()
    }
}

impl ContentProfile {
    /// A profile of a checked schema (if any) and text rules; the schema is compiled here.
    pub fn new(schema: Option<ParameterSchema>, rules: TextRules) -> Result<Self, SchemaError> {
        let schema = match schema {
            Some(s) => {
                let validator = Arc::new(s.compile()?);
                Some((s, validator))
            }
            None => None,
        };
        Ok(Self { schema, rules })
    }

    /// The schema JSON content must satisfy.
    pub fn schema(&self) -> Option<&ParameterSchema> {
        self.schema.as_ref().map(|(s, _)| s)
    }

    /// The rules for the text.
    pub fn rules(&self) -> &TextRules {
        &self.rules
    }

    /// Every way `content` breaks the profile: schema violations first (in jsonschema's order),
    /// then the text rules in the order `min_length`, `max_length`, `encoding`, `forbid`,
    /// `require`, each rule's in the order they occur in the text.
    pub fn check(&self, content: &Value) -> Report {
        let serialized;
        let text = match content {
            Value::String(s) => s.as_str(),
            other => {
                serialized = other.to_string();
                serialized.as_str()
            }
        };
        let mut found = Found::new(text);
        if let Some((_, validator)) = &self.schema {
            match content {
                Value::String(s) => match serde_json::from_str::<Value>(s) {
                    Ok(value) => schema_violations(validator, &value, &mut found),
                    Err(e) => not_json(&e, s, &mut found),
                },
                other => schema_violations(validator, other, &mut found),
            }
        }
        self.rules.check(text, &mut found);
        found.report()
    }
}

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Whether the content meets every rule.
    pub valid: bool,
    /// The first [`MAX_REPORTED`] violations.
    pub violations: Vec<ContentViolation>,
    /// How many violations there were in all (more than listed when the list was cut).
    pub violation_count: usize,
}

/// The rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The profile's JSON Schema (or the content is not JSON at all).
    Schema,
    /// Too few characters.
    MinLength,
    /// Too many characters.
    MaxLength,
    /// A character the encoding cannot represent.
    Encoding,
    /// A forbidden pattern matches.
    Forbid,
    /// A required pattern does not match.
    Require,
}

/// A place in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// Byte offset from the start of the text.
    pub offset: usize,
}

/// One way content breaks its profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentViolation {
    /// The rule broken.
    pub rule: Rule,
    /// For a schema violation, the JSON pointer (RFC 6901) to the offending value (`""`: the
    /// whole value); empty for the text rules.
    pub path: String,
    /// What is wrong, in words.
    pub message: String,
    /// Where in the text, for the rules that have a place (`max_length`: the first character
    /// past the limit; `encoding`: the character; `forbid`: the match's start; a string that is
    /// not JSON: where parsing stopped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Position>,
}

/// Gathers violations: lists the first [`MAX_REPORTED`], counts them all, and places them in the
/// text going forward from the last place found (each rule finds its places in order, so a
/// whole check reads the text about once per rule, not once per violation).
struct Found<'t> {
    text: &'t str,
    listed: Vec<ContentViolation>,
    count: usize,
    cursor: Position,
}

impl<'t> Found<'t> {
    fn new(text: &'t str) -> Self {
        Self {
            text,
            listed: Vec::new(),
            count: 0,
            cursor: START,
        }
    }

    fn push(
        &mut self,
        rule: Rule,
        path: Option<String>,
        offset: Option<usize>,
        message: impl FnOnce() -> String,
    ) {
        self.count += 1;
        if self.listed.len() >= MAX_REPORTED {
            return;
        }
        let at = offset.map(|o| self.locate(o));
        self.listed.push(ContentViolation {
            rule,
            path: path.unwrap_or_default(),
            message: clip(message()),
            at,
        });
    }

    fn locate(&mut self, offset: usize) -> Position {
        let offset = floor_char_boundary(self.text, offset.min(self.text.len()));
        if offset < self.cursor.offset {
            self.cursor = START;
        }
        let Position {
            mut line,
            mut column,
            ..
        } = self.cursor;
        for c in self.text[self.cursor.offset..offset].chars() {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        self.cursor = Position {
            line,
            column,
            offset,
        };
        self.cursor
    }

    fn report(self) -> Report {
        Report {
            valid: self.count == 0,
            violations: self.listed,
            violation_count: self.count,
        }
    }
}

const START: Position = Position {
    line: 1,
    column: 1,
    offset: 0,
};

fn schema_violations(validator: &jsonschema::Validator, value: &Value, found: &mut Found<'_>) {
    if validator.is_valid(value) {
        return;
    }
    for e in validator.iter_errors(value) {
        let v = crate::schema::violation(&e);
        found.push(Rule::Schema, Some(v.pointer), None, || v.message);
    }
}

fn not_json(e: &serde_json::Error, text: &str, found: &mut Found<'_>) {
    let (why, offset) = json_error(e, text);
    let (line, column) = crate::load::line_col(text, offset);
    found.push(Rule::Schema, None, Some(offset), || {
        format!("the content is not JSON: {why} (line {line}, column {column})")
    });
}

/// A JSON parse error's message without the position serde_json writes into it, and the byte
/// offset it stopped at. serde_json counts columns in bytes, at the last byte read: the
/// offending one, or the end of the text when it ended too soon.
pub fn json_error(e: &serde_json::Error, text: &str) -> (String, usize) {
    let full = e.to_string();
    let why = match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    };
    let offset = if e.classify() == serde_json::error::Category::Eof {
        text.len()
    } else {
        let line_start = text
            .split_inclusive('\n')
            .take(e.line().saturating_sub(1))
            .map(str::len)
            .sum::<usize>();
        (line_start + e.column().saturating_sub(1)).min(text.len())
    };
    (why, floor_char_boundary(text, offset))
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests;
