//! References and templates: how a chain step names what it needs (`$input.query`,
//! `$steps.search.output.results[0].url`, `$item`), whole or inside a string
//! (`"Summarize ${steps.fetch.output.content}"`), and how a template becomes the value a tool
//! is called with once the values it names exist.
//!
//! A string that is exactly one reference takes the referenced value with its type (an array
//! stays an array); a reference inside a longer string is written into it as text. `$$` writes
//! a literal `$`. The seed's shorthand `$ID.output.text` and `$ID.results[0].url` name step
//! `ID`'s output; `$steps.ID.output...` is the canonical spelling `to_yaml` writes.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::schema::kind_of;

/// The longest reference or expression text, in bytes.
pub const MAX_REFERENCE: usize = 1024;
/// The most path segments a reference may have.
const MAX_SEGMENTS: usize = 32;

/// What a reference starts from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Root {
    /// The chain's input.
    Input,
    /// A step's output (`$steps.ID.output`).
    Output(String),
    /// A step's status as a string (`$steps.ID.status`: `completed`, `failed`, ...).
    Status(String),
    /// The current item of a `for_each`.
    Item,
    /// The current item's position in a `for_each`, from 0.
    Index,
}

/// One step down into a value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A field of an object.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// A reference to a value a run has or will have.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    /// Where it starts.
    pub root: Root,
    /// The path below the root.
    pub path: Vec<Segment>,
}

/// Why a reference does not parse, or cannot be followed in a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reference}: {message}")]
pub struct RefError {
    /// The reference as written.
    pub reference: String,
    /// What is wrong.
    pub message: String,
}

fn ref_error(reference: &str, message: impl Into<String>) -> RefError {
    RefError {
        reference: reference.to_owned(),
        message: message.into(),
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether `id` may be a step id: a letter or `_` first, then letters, digits, `_` and `-`, at
/// most 64 bytes, and none of the words a reference starts with.
pub fn check_step_id(id: &str) -> Result<(), String> {
    let first_ok = id
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok || id.len() > 64 || !id.bytes().all(is_ident_byte) {
        return Err(format!(
            "{id:?} is not a step id: start with a letter or '_', then letters, digits, '_' or '-', at most 64"
        ));
    }
    if matches!(id, "input" | "steps" | "item" | "index") {
        return Err(format!(
            "{id:?} is not a step id: it is a word references start with"
        ));
    }
    Ok(())
}

/// Reads a reference from the start of `text` (just after its `$`), returning it and how many
/// bytes it took. Used for whole-value references, `${...}` inside strings and expressions.
pub(crate) fn parse_ref_prefix(text: &str) -> Result<(Ref, usize), String> {
    let bytes = text.as_bytes();
    let ident = |from: usize| {
        let mut end = from;
        while end < bytes.len() && is_ident_byte(bytes[end]) {
            end += 1;
        }
        end
    };
    let end = ident(0);
    if end == 0 {
        return Err(
            "a reference names `input`, `steps.ID`, `item`, `index` or a step id after `$`"
                .to_owned(),
        );
    }
    let head = &text[..end];
    let mut at = end;
    let mut path = Vec::new();
    // Path segments: `.name`, `[N]`, `["key"]`.
    loop {
        if path.len() > MAX_SEGMENTS + 3 {
            return Err(format!(
                "a reference has at most {MAX_SEGMENTS} path segments"
            ));
        }
        match bytes.get(at) {
            Some(b'.') => {
                let e = ident(at + 1);
                if e == at + 1 {
                    return Err(format!("a field name must follow '.' at byte {}", at + 1));
                }
                path.push(Segment::Key(text[at + 1..e].to_owned()));
                at = e;
            }
            Some(b'[') => {
                let rest = &text[at + 1..];
                if let Some(quoted) = rest.strip_prefix('"') {
                    let close = quoted
                        .find('"')
                        .ok_or_else(|| format!("an unclosed '[\"' at byte {at}"))?;
                    if !quoted[close + 1..].starts_with(']') {
                        return Err(format!("'\"]' must close the '[\"' at byte {at}"));
                    }
                    path.push(Segment::Key(quoted[..close].to_owned()));
                    at += 1 + 1 + close + 2;
                } else {
                    let close = rest
                        .find(']')
                        .ok_or_else(|| format!("an unclosed '[' at byte {at}"))?;
                    let n: usize = rest[..close].parse().map_err(|_| {
                        format!(
                            "{:?} is not an index: write a whole number or a quoted key",
                            &rest[..close]
                        )
                    })?;
                    path.push(Segment::Index(n));
                    at += close + 2;
                }
            }
            _ => break,
        }
    }
    let key = |s: &Segment| match s {
        Segment::Key(k) => Some(k.clone()),
        Segment::Index(_) => None,
    };
    let root = match head {
        "input" => Root::Input,
        "item" => Root::Item,
        "index" => {
            if !path.is_empty() {
                return Err("`$index` is a number and has no fields".to_owned());
            }
            Root::Index
        }
        "steps" => {
            let id = path
                .first()
                .and_then(key)
                .ok_or("`$steps` is followed by a step id: `$steps.ID.output`")?;
            let what = path.get(1).and_then(key);
            let root = match what.as_deref() {
                Some("output") => Root::Output(id),
                Some("status") => Root::Status(id),
                _ => {
                    return Err(format!(
                        "`$steps.{id}` is followed by `.output` or `.status`"
                    ));
                }
            };
            path.drain(..2);
            root
        }
        id => {
            check_step_id(id)?;
            // The seed's `$ID.output.text` and `$ID.results[0].url` both mean ID's output.
            if path.first() == Some(&Segment::Key("output".to_owned())) {
                path.remove(0);
            }
            Root::Output(id.to_owned())
        }
    };
    if matches!(root, Root::Status(_)) && !path.is_empty() {
        return Err("a step's status is a string and has no fields".to_owned());
    }
    if path.len() > MAX_SEGMENTS {
        return Err(format!(
            "a reference has at most {MAX_SEGMENTS} path segments"
        ));
    }
    Ok((Ref { root, path }, at))
}

impl Ref {
    /// Parses a whole reference, `$` included.
    pub fn parse(text: &str) -> Result<Ref, RefError> {
        if text.len() > MAX_REFERENCE {
            return Err(ref_error(
                &text[..text.floor_char_boundary(40)],
                format!("a reference is at most {MAX_REFERENCE} bytes"),
            ));
        }
        let body = text
            .strip_prefix('$')
            .ok_or_else(|| ref_error(text, "a reference starts with '$'"))?;
        let (r, used) = parse_ref_prefix(body).map_err(|m| ref_error(text, m))?;
        if used != body.len() {
            return Err(ref_error(
                text,
                format!("unexpected {:?} after the reference", &body[used..]),
            ));
        }
        Ok(r)
    }

    /// The step this reference needs finished, if any.
    pub fn step(&self) -> Option<&str> {
        match &self.root {
            Root::Output(id) | Root::Status(id) => Some(id),
            _ => None,
        }
    }

    /// Follows the reference in `scope`. A missing field or index is an error naming it.
    pub fn resolve(&self, scope: &Scope<'_>) -> Result<Value, RefError> {
        self.follow(scope, false)
    }

    /// Follows the reference, a missing value being `null` (as `when` reads them).
    pub fn resolve_lenient(&self, scope: &Scope<'_>) -> Value {
        self.follow(scope, true).unwrap_or(Value::Null)
    }

    fn follow(&self, scope: &Scope<'_>, lenient: bool) -> Result<Value, RefError> {
        let fail = |m: String| ref_error(&self.to_string(), m);
        let mut at: &Value = match &self.root {
            Root::Input => scope.input,
            Root::Item => scope
                .item
                .map(|(v, _)| v)
                .ok_or_else(|| fail("`$item` is only set in a step with `for_each`".into()))?,
            Root::Index => {
                return scope
                    .item
                    .map(|(_, i)| Value::from(i))
                    .ok_or_else(|| fail("`$index` is only set in a step with `for_each`".into()));
            }
            Root::Status(id) => {
                return Ok(scope
                    .steps
                    .get(id.as_str())
                    .map_or(Value::Null, |s| Value::from(s.status.as_str())));
            }
            Root::Output(id) => match scope.steps.get(id.as_str()) {
                Some(s) if s.status.produced_output() => &s.output,
                Some(s) if lenient => {
                    let _ = s;
                    return Ok(Value::Null);
                }
                Some(s) => {
                    return Err(fail(format!(
                        "step {id:?} has no output (it is {})",
                        s.status
                    )));
                }
                None if lenient => return Ok(Value::Null),
                None => return Err(fail(format!("step {id:?} has not run"))),
            },
        };
        for (n, seg) in self.path.iter().enumerate() {
            let next = match seg {
                Segment::Key(k) => at.get(k.as_str()),
                Segment::Index(i) => at.get(*i),
            };
            at = match next {
                Some(v) => v,
                None if lenient => return Ok(Value::Null),
                None => {
                    let here = Ref {
                        root: self.root.clone(),
                        path: self.path[..n].to_vec(),
                    };
                    let why = match (seg, at) {
                        (Segment::Index(i), Value::Array(a)) => {
                            format!("index {i} is past the end of {here} ({} items)", a.len())
                        }
                        (Segment::Key(k), Value::Object(_)) => format!("{here} has no field {k:?}"),
                        (_, v) => format!(
                            "{here} is {}, not {}",
                            kind_of(v),
                            match seg {
                                Segment::Key(_) => "an object",
                                Segment::Index(_) => "an array",
                            }
                        ),
                    };
                    return Err(fail(why));
                }
            };
        }
        Ok(at.clone())
    }
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(is_ident_byte)
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            Root::Input => f.write_str("$input")?,
            Root::Item => f.write_str("$item")?,
            Root::Index => f.write_str("$index")?,
            Root::Output(id) => write!(f, "$steps.{id}.output")?,
            Root::Status(id) => write!(f, "$steps.{id}.status")?,
        }
        for seg in &self.path {
            match seg {
                Segment::Key(k) if is_plain_key(k) => write!(f, ".{k}")?,
                Segment::Key(k) => write!(f, "[\"{k}\"]")?,
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// How a step ended, or where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started yet.
    Pending,
    /// Its call (or calls, for `for_each`) are under way.
    Running,
    /// It succeeded, or failed with `on_error: default` giving its output.
    Completed,
    /// Its call failed (after its retries).
    Failed,
    /// It did not run: its `when` was false, or a step it needs did not complete.
    Skipped,
    /// Policy, the skill, a tier or a mode refused its call, or a person declined it.
    Denied,
    /// The run was cancelled or timed out while it was pending or running.
    Cancelled,
}

impl StepStatus {
    /// How a step whose (last) call ended with `status` stands.
    pub fn after_call(status: crate::ToolStatus) -> Self {
        use crate::ToolStatus as T;
        match status {
            T::Success => StepStatus::Completed,
            T::PermissionDenied | T::RequiresConfirmation => StepStatus::Denied,
            T::Cancelled => StepStatus::Cancelled,
            _ => StepStatus::Failed,
        }
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Completed => "completed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Denied => "denied",
            StepStatus::Cancelled => "cancelled",
        }
    }

    /// Whether steps that need this one may run.
    pub fn produced_output(self) -> bool {
        self == StepStatus::Completed
    }

    /// Whether the step is over.
    pub fn is_final(self) -> bool {
        !matches!(self, StepStatus::Pending | StepStatus::Running)
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run knows of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepValue {
    /// Where it is.
    pub status: StepStatus,
    /// Its output once completed (`null` before).
    pub output: Value,
}

/// The values references are followed in.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The chain's input.
    pub input: &'a Value,
    /// Every step's state so far, by id.
    pub steps: &'a HashMap<String, StepValue>,
    /// The current `for_each` item and its index.
    pub item: Option<(&'a Value, usize)>,
}

/// A piece of an interpolated string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Text written as is.
    Text(String),
    /// A value written as text (a string as itself, anything else as JSON).
    Ref(Ref),
}

/// A value with references in it, as a step's `arguments`, a `for_each` or the chain's `output`.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// A value with no references.
    Literal(Value),
    /// Exactly one reference: the referenced value, its type kept.
    Ref(Ref),
    /// A string with references inside.
    Text(Vec<Piece>),
    /// An array of templates.
    Array(Vec<Template>),
    /// An object of templates, in order.
    Object(Vec<(String, Template)>),
}

impl Template {
    /// Reads a template from a value, finding the references in its strings. The error names
    /// the JSON pointer of the string at fault.
    pub fn from_value(value: &Value) -> Result<Template, (String, RefError)> {
        Self::read(value, &mut String::new())
    }

    fn read(value: &Value, pointer: &mut String) -> Result<Template, (String, RefError)> {
        Ok(match value {
            Value::String(s) => parse_string(s).map_err(|e| (pointer.clone(), e))?,
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    let t = Self::read(v, pointer);
                    pointer.truncate(len);
                    out.push(t?);
                }
                // All literal: the value as read (`$$` is `$`), not as written.
                if out.iter().all(|t| matches!(t, Template::Literal(_))) {
                    Template::Literal(Value::Array(
                        out.into_iter()
                            .filter_map(|t| match t {
                                Template::Literal(v) => Some(v),
                                _ => None,
                            })
                            .collect(),
                    ))
                } else {
                    Template::Array(out)
                }
            }
            Value::Object(map) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, v) in map {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    let t = Self::read(v, pointer);
                    pointer.truncate(len);
                    out.push((k.clone(), t?));
                }
                if out.iter().all(|(_, t)| matches!(t, Template::Literal(_))) {
                    Template::Literal(Value::Object(
                        out.into_iter()
                            .filter_map(|(k, t)| match t {
                                Template::Literal(v) => Some((k, v)),
                                _ => None,
                            })
                            .collect(),
                    ))
                } else {
                    Template::Object(out)
                }
            }
            other => Template::Literal(other.clone()),
        })
    }

    /// The template written back as a value: references in their canonical spelling, literal
    /// `$` doubled where they would read as one.
    pub fn to_value(&self) -> Value {
        match self {
            Template::Literal(v) => escape_literal(v),
            Template::Ref(r) => Value::String(r.to_string()),
            Template::Text(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Piece::Text(t) => s.push_str(&t.replace('$', "$$")),
                        Piece::Ref(r) => {
                            s.push_str("${");
                            s.push_str(&r.to_string()[1..]);
                            s.push('}');
                        }
                    }
                }
                Value::String(s)
            }
            Template::Array(items) => Value::Array(items.iter().map(Template::to_value).collect()),
            Template::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_value()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    /// Every reference in the template, each with the JSON pointer of where it is.
    pub fn refs(&self) -> Vec<(String, &Ref)> {
        let mut out = Vec::new();
        self.collect(&mut String::new(), &mut out);
        out
    }

    fn collect<'a>(&'a self, pointer: &mut String, out: &mut Vec<(String, &'a Ref)>) {
        match self {
            Template::Literal(_) => {}
            Template::Ref(r) => out.push((pointer.clone(), r)),
            Template::Text(pieces) => {
                for p in pieces {
                    if let Piece::Ref(r) = p {
                        out.push((pointer.clone(), r));
                    }
                }
            }
            Template::Array(items) => {
                for (i, t) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    t.collect(pointer, out);
                    pointer.truncate(len);
                }
            }
            Template::Object(fields) => {
                for (k, t) in fields {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    t.collect(pointer, out);
                    pointer.truncate(len);
                }
            }
        }
    }

    /// The value the template stands for in `scope`.
    pub fn render(&self, scope: &Scope<'_>) -> Result<Value, RefError> {
        Ok(match self {
            Template::Literal(v) => v.clone(),
            Template::Ref(r) => r.resolve(scope)?,
            Template::Text(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Piece::Text(t) => s.push_str(t),
                        Piece::Ref(r) => match r.resolve(scope)? {
                            Value::String(v) => s.push_str(&v),
                            v => s.push_str(&v.to_string()),
                        },
                    }
                }
                Value::String(s)
            }
            Template::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|t| t.render(scope))
                    .collect::<Result<_, _>>()?,
            ),
            Template::Object(fields) => {
                let mut m = Map::with_capacity(fields.len());
                for (k, t) in fields {
                    m.insert(k.clone(), t.render(scope)?);
                }
                Value::Object(m)
            }
        })
    }
}

/// A literal written so that reading it back gives it again: every `$` doubled.
fn escape_literal(v: &Value) -> Value {
    match v {
        Value::String(s) if s.contains('$') => Value::String(s.replace('$', "$$")),
        Value::Array(a) => Value::Array(a.iter().map(escape_literal).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), escape_literal(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Reads one string of a template: a whole reference, a text with `${...}` inside, or text.
fn parse_string(s: &str) -> Result<Template, RefError> {
    if s.len() > 64 * 1024 {
        return Ok(Template::Literal(Value::String(s.to_owned())));
    }
    if s.starts_with('$') && !s.starts_with("$$") && !s.starts_with("${") {
        return Ref::parse(s).map(Template::Ref).map_err(|mut e| {
            e.message.push_str(
                " (a string that starts with '$' is one reference: write '${...}' for one inside text, '$$' for a '$')",
            );
            e
        });
    }
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            text.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('{') {
            let close = inner.find('}').ok_or_else(|| {
                ref_error(
                    &rest[at..],
                    "an unclosed '${': close it with '}' or write '$$' for a '$'",
                )
            })?;
            let written = &inner[..close];
            let r = Ref::parse(&format!("${written}"))?;
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Ref(r));
            rest = &inner[close + 1..];
        } else {
            // A lone `$` (a price, a shell variable) is text.
            text.push('$');
            rest = after;
        }
    }
    text.push_str(rest);
    if pieces.is_empty() {
        return Ok(Template::Literal(Value::String(text)));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(Template::Text(pieces))
}
