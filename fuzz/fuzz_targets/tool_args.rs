//! Fuzzes what an agent's tool-call arguments meet on the way in, up to and through validation:
//! the pipeline judges a call before it validates it, so the redaction of secrets, a custom
//! tool's command rendering, a process tool's plan and every policy layer see the arguments as
//! sent (see `tw_fuzz::judge`), then `ValidatorCache::validate` checks them against the tool's
//! schema, as `Runtime::stages` does. Two kinds of input:
//! - a JSON object shaped like MCP's `tools/call` params, `{"name", "arguments"}`: the arguments
//!   go to the built-in or custom tool of that name (or one picked by the input), judged by the
//!   built-in policy and by a policy with a rule of every kind; with `"inputSchema"` they are
//!   validated against that schema instead, checked as a tool's registration checks it (an
//!   upstream MCP server's schema, a custom tool's);
//! - anything else: a schema generated from the bytes (every keyword that takes structure,
//!   keys that need escaping in a JSON pointer, `$ref`s, patterns, formats) and an instance.
//!
//! Beyond "no panic": validation of a compiled schema never fails to run; an invalid instance
//! has at least one violation, and every violation's pointer exists in the instance; arguments
//! that pass a process tool's schema are accepted by its plan (the tool's argument struct and
//! its schema agree); judging is deterministic; redaction leaves no secret-keyed value and is
//! skipped only when it would change nothing. Run it with `scripts/fuzz`; the seeds in
//! `fuzz/corpus/tool_args` are calls from the tests and the README, and upstream servers' tools.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Number, Value, json};
use tw_core::redact::{REDACTED, is_secret_key, needs_redaction, redact};
use tw_core::schema::ParameterSchema;
use tw_core::{Caller, ErrorCode, OperationalMode, ToolStatus, ValidatorCache};
use tw_fuzz::{Kind, Tool, builtin_policy, judge, process_context, strict_policy, tool, tools};

/// The registered tools' validators, compiled once before the first input: a cache that kept
/// growing would make libFuzzer's leak check scan the heap after every input.
static CACHE: LazyLock<ValidatorCache> = LazyLock::new(|| {
    let cache = ValidatorCache::default();
    for t in tools() {
        if let Err(e) = cache.validator(&t.definition.parameters) {
            panic!("{}'s schema does not compile: {e}", t.definition.name);
        }
    }
    cache
});

fuzz_target!(|data: &[u8]| {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(params)) => call(data, &params),
        _ => generated(data),
    }
});

fn call(data: &[u8], params: &Map<String, Value>) {
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    check_redaction(&arguments);
    if let Some(schema) = params.get("inputSchema") {
        if let Ok(schema) = ParameterSchema::parameters(schema.clone()) {
            validate(&ValidatorCache::new(1), &schema, &arguments);
        }
        return;
    }
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let all = tools();
    let t = tool(name).unwrap_or_else(|| &all[data.len() % all.len()]);
    let caller = Caller::agent(
        params
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or("agent-1"),
    );
    for policy in [builtin_policy(), strict_policy()] {
        let (first, _) = judge(policy, t, &arguments, &caller, OperationalMode::Normal);
        let (second, _) = judge(policy, t, &arguments, &caller, OperationalMode::Normal);
        assert_eq!(first, second, "judging is not deterministic");
    }
    if validate(&CACHE, &t.definition.parameters, &arguments) {
        planned(t, &arguments);
    }
}

/// Validates as the pipeline does; whether the arguments passed.
fn validate(cache: &ValidatorCache, schema: &ParameterSchema, instance: &Value) -> bool {
    let violations = match cache.validate(schema, instance) {
        Ok(Ok(())) => return true,
        Ok(Err(v)) => v,
        Err(e) => panic!("a checked schema cannot be used: {e}"),
    };
    assert!(
        !violations.is_empty(),
        "invalid, with no violation to say why"
    );
    for v in &violations {
        if v.keyword == "limit" {
            continue;
        }
        assert!(
            instance.pointer(&v.pointer).is_some(),
            "violation at {:?}, which is not in the instance: {v}",
            v.pointer
        );
        assert!(!v.message.is_empty(), "a violation without a message");
    }
    false
}

/// Arguments that passed a process tool's schema must deserialize into its arguments.
fn planned(t: &Tool, arguments: &Value) {
    let Kind::Process(p) = &t.kind else {
        return;
    };
    if let Err(f) = p.plan(&process_context(), arguments) {
        assert!(
            !(f.status == ToolStatus::Failed && f.code == ErrorCode::INVALID_ARGUMENTS),
            "{}'s schema accepts arguments its plan cannot read: {}",
            t.definition.name,
            f.message
        );
    }
}

fn check_redaction(arguments: &Value) {
    let redacted = redact(arguments);
    if !needs_redaction(arguments) {
        assert_eq!(
            &redacted, arguments,
            "redaction was skipped but changes the arguments"
        );
    }
    assert_eq!(redact(&redacted), redacted, "redaction is not idempotent");
    assert!(!needs_redaction(&redacted) || has_marked_secrets(&redacted));
    fn has_marked_secrets(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().all(|(k, v)| {
                if is_secret_key(k) {
                    v.is_null() || v == REDACTED
                } else {
                    has_marked_secrets(v)
                }
            }),
            Value::Array(items) => items.iter().all(has_marked_secrets),
            _ => true,
        }
    }
}

// ---- generated schemas ----

/// Property names, including the two a JSON pointer must escape (`/` as `~1`, `~` as `~0`).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Key {
    Path,
    Limit,
    Command,
    Empty,
    Slash,
    Tilde,
    Both,
    Unicode,
}

impl Key {
    fn as_str(self) -> &'static str {
        match self {
            Key::Path => "path",
            Key::Limit => "limit",
            Key::Command => "command",
            Key::Empty => "",
            Key::Slash => "a/b",
            Key::Tilde => "m~n",
            Key::Both => "~1/~0",
            Key::Unicode => "ключ",
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Format {
    Email,
    Uri,
    DateTime,
    Date,
    Time,
    Ipv4,
    Ipv6,
    Hostname,
    Regex,
    Uuid,
    JsonPointer,
    IdnHostname,
    Duration,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Email => "email",
            Format::Uri => "uri",
            Format::DateTime => "date-time",
            Format::Date => "date",
            Format::Time => "time",
            Format::Ipv4 => "ipv4",
            Format::Ipv6 => "ipv6",
            Format::Hostname => "hostname",
            Format::Regex => "regex",
            Format::Uuid => "uuid",
            Format::JsonPointer => "json-pointer",
            Format::IdnHostname => "idn-hostname",
            Format::Duration => "duration",
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Schema {
    Any,
    Null,
    Boolean,
    String {
        min_length: Option<u8>,
        max_length: Option<u8>,
        pattern: Option<String>,
        format: Option<Format>,
    },
    Integer {
        minimum: Option<i64>,
        maximum: Option<i64>,
        multiple_of: Option<u16>,
    },
    Number {
        exclusive_minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Array {
        items: Option<Box<Schema>>,
        prefix_items: Vec<Schema>,
        min_items: Option<u8>,
        max_items: Option<u8>,
        unique_items: bool,
        contains: Option<Box<Schema>>,
    },
    Object(Object),
    Enum(Vec<Gen>),
    Const(Gen),
    AnyOf(Vec<Schema>),
    OneOf(Vec<Schema>),
    AllOf(Vec<Schema>),
    Not(Box<Schema>),
    IfThenElse(Box<Schema>, Box<Schema>, Box<Schema>),
    Ref(u8),
}

#[derive(Arbitrary, Debug)]
struct Object {
    properties: Vec<(Key, Schema)>,
    required: Vec<Key>,
    additional: Option<Additional>,
    pattern_properties: Vec<(String, Schema)>,
    property_names: Option<Box<Schema>>,
    min_properties: Option<u8>,
    dependent_required: Vec<(Key, Vec<Key>)>,
}

#[derive(Arbitrary, Debug)]
enum Additional {
    Forbidden,
    Schema(Box<Schema>),
}

/// The root: an object schema, with definitions `$ref`s can point at.
#[derive(Arbitrary, Debug)]
struct Root {
    object: Object,
    defs: Vec<Schema>,
}

/// A JSON value.
#[derive(Arbitrary, Debug)]
enum Gen {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Key(Key),
    Array(Vec<Gen>),
    Object(Vec<(Key, Gen)>),
    Named(Vec<(String, Gen)>),
}

const MAX_DEPTH: usize = 12;

impl Gen {
    fn value(&self, depth: usize) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        match self {
            Gen::Null => Value::Null,
            Gen::Bool(b) => json!(b),
            Gen::Int(i) => json!(i),
            Gen::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Gen::Str(s) => json!(s),
            Gen::Key(k) => json!(k.as_str()),
            Gen::Array(items) => Value::Array(items.iter().map(|g| g.value(depth + 1)).collect()),
            Gen::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, g)| (k.as_str().to_owned(), g.value(depth + 1)))
                    .collect(),
            ),
            Gen::Named(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, g)| (k.clone(), g.value(depth + 1)))
                    .collect(),
            ),
        }
    }
}

fn number(f: f64) -> Value {
    Number::from_f64(f).map_or(json!(0), Value::Number)
}

impl Schema {
    fn value(&self, depth: usize, defs: usize) -> Value {
        if depth > MAX_DEPTH {
            return json!({});
        }
        let sub = |s: &Schema| s.value(depth + 1, defs);
        let list = |l: &[Schema]| Value::Array(l.iter().map(sub).collect());
        match self {
            Schema::Any => json!({}),
            Schema::Null => json!({"type": "null"}),
            Schema::Boolean => json!({"type": "boolean"}),
            Schema::String {
                min_length,
                max_length,
                pattern,
                format,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("string"));
                if let Some(n) = min_length {
                    m.insert("minLength".into(), json!(n));
                }
                if let Some(n) = max_length {
                    m.insert("maxLength".into(), json!(n));
                }
                if let Some(p) = pattern {
                    m.insert("pattern".into(), json!(p));
                }
                if let Some(f) = format {
                    m.insert("format".into(), json!(f.as_str()));
                }
                Value::Object(m)
            }
            Schema::Integer {
                minimum,
                maximum,
                multiple_of,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("integer"));
                if let Some(n) = minimum {
                    m.insert("minimum".into(), json!(n));
                }
                if let Some(n) = maximum {
                    m.insert("maximum".into(), json!(n));
                }
                if let Some(n) = multiple_of.filter(|n| *n > 0) {
                    m.insert("multipleOf".into(), json!(n));
                }
                Value::Object(m)
            }
            Schema::Number {
                exclusive_minimum,
                maximum,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("number"));
                if let Some(n) = exclusive_minimum {
                    m.insert("exclusiveMinimum".into(), number(*n));
                }
                if let Some(n) = maximum {
                    m.insert("maximum".into(), number(*n));
                }
                Value::Object(m)
            }
            Schema::Array {
                items,
                prefix_items,
                min_items,
                max_items,
                unique_items,
                contains,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("array"));
                if let Some(s) = items {
                    m.insert("items".into(), sub(s));
                }
                if !prefix_items.is_empty() {
                    m.insert("prefixItems".into(), list(prefix_items));
                }
                if let Some(n) = min_items {
                    m.insert("minItems".into(), json!(n));
                }
                if let Some(n) = max_items {
                    m.insert("maxItems".into(), json!(n));
                }
                if *unique_items {
                    m.insert("uniqueItems".into(), json!(true));
                }
                if let Some(s) = contains {
                    m.insert("contains".into(), sub(s));
                }
                Value::Object(m)
            }
            Schema::Object(o) => o.value(depth + 1, defs),
            Schema::Enum(values) => {
                json!({"enum": values.iter().map(|g| g.value(depth + 1)).collect::<Vec<_>>()})
            }
            Schema::Const(g) => json!({"const": g.value(depth + 1)}),
            Schema::AnyOf(l) => json!({"anyOf": list(l)}),
            Schema::OneOf(l) => json!({"oneOf": list(l)}),
            Schema::AllOf(l) => json!({"allOf": list(l)}),
            Schema::Not(s) => json!({"not": sub(s)}),
            Schema::IfThenElse(i, t, e) => json!({"if": sub(i), "then": sub(t), "else": sub(e)}),
            Schema::Ref(n) => {
                // A missing definition is a schema error the check must catch, not a panic.
                let n = if defs == 0 {
                    usize::from(*n)
                } else {
                    usize::from(*n) % (defs + 1)
                };
                json!({"$ref": format!("#/$defs/d{n}")})
            }
        }
    }
}

impl Object {
    fn value(&self, depth: usize, defs: usize) -> Value {
        let sub = |s: &Schema| s.value(depth + 1, defs);
        let mut m = Map::new();
        m.insert("type".into(), json!("object"));
        let props: Map<String, Value> = self
            .properties
            .iter()
            .map(|(k, s)| (k.as_str().to_owned(), sub(s)))
            .collect();
        m.insert("properties".into(), Value::Object(props));
        if !self.required.is_empty() {
            let mut names: Vec<&str> = self.required.iter().map(|k| k.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            m.insert("required".into(), json!(names));
        }
        match &self.additional {
            None => {}
            Some(Additional::Forbidden) => {
                m.insert("additionalProperties".into(), json!(false));
            }
            Some(Additional::Schema(s)) => {
                m.insert("additionalProperties".into(), sub(s));
            }
        }
        if !self.pattern_properties.is_empty() {
            let pp: Map<String, Value> = self
                .pattern_properties
                .iter()
                .map(|(p, s)| (p.clone(), sub(s)))
                .collect();
            m.insert("patternProperties".into(), Value::Object(pp));
        }
        if let Some(s) = &self.property_names {
            m.insert("propertyNames".into(), sub(s));
        }
        if let Some(n) = self.min_properties {
            m.insert("minProperties".into(), json!(n));
        }
        if !self.dependent_required.is_empty() {
            let dr: Map<String, Value> = self
                .dependent_required
                .iter()
                .map(|(k, ks)| {
                    let mut names: Vec<&str> = ks.iter().map(|k| k.as_str()).collect();
                    names.sort_unstable();
                    names.dedup();
                    (k.as_str().to_owned(), json!(names))
                })
                .collect();
            m.insert("dependentRequired".into(), Value::Object(dr));
        }
        Value::Object(m)
    }
}

fn generated(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(root) = Root::arbitrary(&mut u) else {
        return;
    };
    let Ok(instance) = Gen::arbitrary(&mut u) else {
        return;
    };
    let defs = root.defs.len();
    let mut schema = root.object.value(0, defs);
    if let Value::Object(m) = &mut schema
        && defs > 0
    {
        let d: Map<String, Value> = root
            .defs
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("d{i}"), s.value(1, defs)))
            .collect();
        m.insert("$defs".into(), Value::Object(d));
    }
    let instance = instance.value(0);
    check_redaction(&instance);
    match ParameterSchema::parameters(schema) {
        Ok(schema) => {
            validate(&ValidatorCache::new(1), &schema, &instance);
        }
        Err(e) => assert!(
            !e.to_string().is_empty(),
            "a schema refused without a reason"
        ),
    }
}
