//! JSON Schemas for tool parameters and outputs.
//!
//! A schema is checked once, when the value is built (meta-schema validation reporting every
//! problem, then a trial compilation that catches unresolvable `$ref`s and bad patterns), and is
//! compiled again for real on first use by [`crate::ValidatorCache`]. Compiled validators are big
//! (about 41 KiB each), so they are never kept per tool; see the cache for the budget.
//!
//! Reference resolution is offline: jsonschema is built without its HTTP and file retrievers, so a
//! hostile `$ref` cannot make Toolwarden fetch a URL or read a local file.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Largest schema accepted, serialized. Real tool schemas are a few KiB.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// At most this many violations are listed; the rest are counted.
pub const MAX_VIOLATIONS: usize = 64;

/// Longest violation message, in characters. jsonschema quotes the offending value, which may be
/// a megabyte of an argument; the pointer already says which one.
pub const MAX_MESSAGE_CHARS: usize = 300;

const KNOWN_DRAFTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-04/schema",
];

static NEXT_SCHEMA_ID: AtomicU64 = AtomicU64::new(1);

/// One way an instance (arguments, output or a schema itself) breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer (RFC 6901) to the offending value; `""` is the whole document.
    pub pointer: String,
    /// The schema keyword that failed, e.g. `type`, `required`, `maxLength`.
    pub keyword: String,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {}", self.message)
    }
}

/// Formats a violation list as one line: `at /a: ...; at /b: ...`.
pub fn join_violations(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not a JSON object.
    #[error("a schema must be a JSON object, found {0}")]
    NotAnObject(&'static str),
    /// A parameter schema must describe an object, since calls pass named arguments.
    #[error("a parameter schema must have \"type\": \"object\" (tool arguments are named)")]
    ParametersNotObject,
    /// `$schema` names a draft this build does not know.
    #[error("unsupported $schema {0:?}: use draft 2020-12 (or 2019-09, 7, 6, 4)")]
    UnsupportedDraft(String),
    /// The schema breaks its meta-schema.
    #[error("invalid JSON Schema: {}", join_violations(.0))]
    Invalid(Vec<Violation>),
    /// The schema is well formed but cannot be compiled (e.g. a `$ref` that does not resolve).
    #[error("JSON Schema cannot be compiled: {0}")]
    Compile(String),
    /// The schema is larger than [`MAX_SCHEMA_BYTES`].
    #[error("JSON Schema is {0} bytes; the limit is {MAX_SCHEMA_BYTES}")]
    TooLarge(usize),
}

/// The JSON type name of a value, as messages say it ("a string", "an array").
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A checked JSON Schema. Cheap to clone; each distinct value carries a process-unique id that keys
/// the compiled-validator cache, so an updated tool can never be validated with a stale validator.
#[derive(Clone)]
pub struct ParameterSchema {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    value: Value,
    /// The `format` each top-level property declares, read once: policy asks for every key of
    /// every call, and most schemas declare none.
    formats: Vec<(String, String)>,
}

impl Inner {
    fn new(value: Value) -> Self {
        let formats = value
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(key, p)| Some((key.clone(), p.get("format")?.as_str()?.to_owned())))
            .collect();
        Self {
            id: NEXT_SCHEMA_ID.fetch_add(1, Ordering::Relaxed),
            value,
            formats,
        }
    }
}

impl ParameterSchema {
    /// Checks a tool's parameter schema: a valid JSON Schema whose root describes an object.
    pub fn parameters(value: Value) -> Result<Self, SchemaError> {
        let is_object = match value.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.len() == 1 && ts[0] == "object",
            _ => false,
        };
        if value.is_object() && !is_object {
            return Err(SchemaError::ParametersNotObject);
        }
        Self::any(value)
    }

    /// Checks any JSON Schema (used for output schemas).
    pub fn any(value: Value) -> Result<Self, SchemaError> {
        check(&value)?;
        Ok(Self {
            inner: Arc::new(Inner::new(value)),
        })
    }

    /// The empty parameter list: an object with no properties, and no others allowed.
    pub fn no_parameters() -> Self {
        Self {
            inner: Arc::new(Inner::new(
                serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )),
        }
    }

    /// The schema document.
    pub fn value(&self) -> &Value {
        &self.inner.value
    }

    /// The `format` a top-level property declares (`"path"`, `"uri"`...), if it declares one.
    pub fn declared_format(&self, property: &str) -> Option<&str> {
        self.inner
            .formats
            .iter()
            .find(|(key, _)| key == property)
            .map(|(_, format)| format.as_str())
    }

    /// Process-unique id of this checked value.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Compiles the schema into a validator.
    pub fn compile(&self) -> Result<jsonschema::Validator, SchemaError> {
        compile(&self.inner.value)
    }
}

impl PartialEq for ParameterSchema {
    fn eq(&self, other: &Self) -> bool {
        self.inner.value == other.inner.value
    }
}

impl fmt::Debug for ParameterSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner.value, f)
    }
}

impl Serialize for ParameterSchema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.inner.value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ParameterSchema {
    /// Deserializes any checked schema; parameter schemas go through [`crate::params`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::checked(d, "a JSON Schema object", |value| {
            Self::any(value).map_err(|e| e.to_string())
        })
    }
}

fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        .should_validate_formats(true)
        // fancy-regex supports lookaround, which real schemas use; the limit keeps a hostile
        // pattern from backtracking for seconds on a crafted argument.
        .with_pattern_options(jsonschema::PatternOptions::fancy_regex().backtrack_limit(100_000))
}

fn compile(value: &Value) -> Result<jsonschema::Validator, SchemaError> {
    options()
        .build(value)
        .map_err(|e| SchemaError::Compile(e.to_string()))
}

fn check(value: &Value) -> Result<(), SchemaError> {
    if !value.is_object() {
        return Err(SchemaError::NotAnObject(kind_of(value)));
    }
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(0);
    if size > MAX_SCHEMA_BYTES {
        return Err(SchemaError::TooLarge(size));
    }
    if let Some(draft) = value.get("$schema") {
        let known = draft
            .as_str()
            .map(|d| d.trim_end_matches('#'))
            .is_some_and(|d| KNOWN_DRAFTS.contains(&d));
        if !known {
            return Err(SchemaError::UnsupportedDraft(match draft {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }));
        }
    }
    let meta =
        jsonschema::meta::validator_for(value).map_err(|e| SchemaError::Compile(e.to_string()))?;
    let violations = collect(meta.iter_errors(value));
    if !violations.is_empty() {
        return Err(SchemaError::Invalid(violations));
    }
    compile(value).map(drop)
}

/// One of jsonschema's errors as a violation, its message cut to [`MAX_MESSAGE_CHARS`].
pub(crate) fn violation(e: &jsonschema::ValidationError<'_>) -> Violation {
    Violation {
        pointer: e.instance_path().as_str().to_owned(),
        keyword: e.kind().keyword().to_owned(),
        message: clip(e.to_string()),
    }
}

/// `message` cut to [`MAX_MESSAGE_CHARS`] characters, marked with `…` when cut.
pub(crate) fn clip(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message,
    }
}

/// Turns jsonschema's errors into violations, capped at [`MAX_VIOLATIONS`] with a final line that
/// counts the rest.
pub(crate) fn collect<'a>(
    errors: impl Iterator<Item = jsonschema::ValidationError<'a>>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut extra = 0usize;
    for e in errors {
        if out.len() < MAX_VIOLATIONS {
            out.push(violation(&e));
        } else {
            extra += 1;
        }
    }
    if extra > 0 {
        out.push(Violation {
            pointer: String::new(),
            keyword: "limit".to_owned(),
            message: format!("{extra} more violations not shown"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn check_err(schema: Value, expect: &str) {
        let got = ParameterSchema::parameters(schema)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(got, Err(expect.to_owned()));
    }

    #[test]
    fn accepts_object_schemas() {
        let s = ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {"path": {"type": "string", "pattern": "^(?!/)"}},
            "required": ["path"]
        }))
        .unwrap();
        assert!(s.compile().is_ok());
    }

    #[test]
    fn refuses_bad_schemas_with_reasons() {
        check_err(json!([]), "a schema must be a JSON object, found an array");
        check_err(
            json!({"type": "string"}),
            "a parameter schema must have \"type\": \"object\" (tool arguments are named)",
        );
        check_err(
            json!({"type": "object", "properties": {"a": {"type": "strnig"}, "b": {"minLength": -1}}}),
            "invalid JSON Schema: at /properties/a/type: \"strnig\" is not valid under any of the schemas listed in the 'anyOf' keyword; at /properties/b/minLength: -1 is less than the minimum of 0",
        );
        check_err(
            json!({"type": "object", "$schema": "https://example.com/mine"}),
            "unsupported $schema \"https://example.com/mine\": use draft 2020-12 (or 2019-09, 7, 6, 4)",
        );
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let err = ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {"a": {"$ref": "http://127.0.0.1:9/evil.json"}}
        }))
        .unwrap_err();
        assert!(matches!(err, SchemaError::Compile(_)), "{err}");
        let err = ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {"a": {"$ref": "file:///etc/passwd"}}
        }))
        .unwrap_err();
        assert!(matches!(err, SchemaError::Compile(_)), "{err}");
    }

    #[test]
    fn a_violation_quoting_a_long_value_is_cut() {
        let s = ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {"a": {"type": "string", "maxLength": 3}}
        }))
        .unwrap();
        let long = "x".repeat(10_000);
        let v = collect(s.compile().unwrap().iter_errors(&json!({"a": long})));
        assert_eq!(
            v,
            [Violation {
                pointer: "/a".to_owned(),
                keyword: "maxLength".to_owned(),
                message: format!("\"{}…", "x".repeat(MAX_MESSAGE_CHARS - 1)),
            }]
        );
    }

    #[test]
    fn ids_are_unique() {
        let a = ParameterSchema::no_parameters();
        let b = ParameterSchema::no_parameters();
        assert_ne!(a.id(), b.id());
        assert_eq!(a, b);
    }
}
