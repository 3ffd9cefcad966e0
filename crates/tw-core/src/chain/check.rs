//! The checks of a chain that need to know the tools: that each step calls a tool (or chain) that
//! exists, is not quarantined and is inside the skill; that its arguments are ones the tool has and
//! its required ones are given; that every reference names a field its source can have, and that
//! a whole-value reference can be of the type the parameter takes.
//!
//! The registry is the runtime's, so it is reached through [`ChainCatalog`]. Schemas are read, not
//! compiled: a reference is walked through `properties`, `items` and `prefixItems`, and where a
//! schema says nothing (no `type`, no `properties`, or `$ref`, `anyOf`, `oneOf`, `allOf` that are
//! not followed) anything goes, so a check only fails on what a schema does say. An object schema
//! that lists its `properties` is taken as complete unless `additionalProperties` allows others:
//! a field it does not list is most likely a typo.
//!
//! A `for_each` step's output is taken to be the list of its calls' outputs, in item order; a step
//! with `on_error: {default: ...}` may give its default instead, so its output is not checked.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use super::parse::ChainSource;
use super::yaml::escape_pointer;
use super::{Chain, OnError, Piece, Ref, Root, Segment, Step, StepTarget, Template};
use crate::skill::{Diagnostic, Severity};

/// What the checks need to know of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// Its parameters' JSON Schema (an object schema).
    pub parameters: Value,
    /// The JSON Schema of its output, when it declares one.
    pub output: Option<Value>,
    /// Whether it is quarantined (a call to it is refused).
    pub quarantined: bool,
}

/// What the checks need to know of another chain a step calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainInfo {
    /// Its input schema.
    pub input: Value,
    /// The schema of its output, when it can be known ([`output_schema`]).
    pub output: Option<Value>,
}

/// The registry as the checks see it; the runtime implements it.
pub trait ChainCatalog {
    /// The tool registered as `name`.
    fn tool(&self, name: &str) -> Option<ToolInfo>;
    /// The chain registered as `name` (the chain's name, without `chain__`).
    fn chain(&self, name: &str) -> Option<ChainInfo>;
    /// Why `tool` (a tool name, or `chain__NAME` for a chain) is outside the skill the chain
    /// belongs to (not among its tools, or above its access level); `None` when it is inside, or
    /// when the chain belongs to no skill.
    fn outside_skill(&self, tool: &str) -> Option<String> {
        let _ = tool;
        None
    }
}

/// What a step calls, as far as the catalog knows it.
#[derive(Debug, Clone, Default)]
struct Target {
    /// How messages name it: `tool "web_search"`, `chain "research"`.
    what: String,
    parameters: Option<Value>,
    output: Option<Value>,
}

/// Every problem of `source` that needs the catalog, each with its line, in line order.
pub fn check(source: &ChainSource, catalog: &dyn ChainCatalog) -> Vec<Diagnostic> {
    let chain = &source.chain;
    let mut c = Checker {
        source,
        out: Vec::new(),
        value: chain.to_value(),
    };
    let mut targets: HashMap<&str, Target> = HashMap::new();
    for (i, step) in chain.steps.iter().enumerate() {
        let target = c.target(i, step, catalog);
        targets.entry(step.id.as_str()).or_insert(target);
    }
    let outputs: HashMap<&str, Option<Value>> = chain
        .steps
        .iter()
        .map(|s| {
            let out = targets
                .get(s.id.as_str())
                .and_then(|t| t.output.clone())
                .and_then(|o| step_output(s, o));
            (s.id.as_str(), out)
        })
        .collect();
    let env = Env { chain, outputs };
    for (i, step) in chain.steps.iter().enumerate() {
        let target = targets.get(step.id.as_str()).cloned().unwrap_or_default();
        c.step(i, step, &target, &env);
    }
    if let Some(o) = &chain.output {
        for (ptr, r) in o.refs() {
            if let Err(m) = env.walk(r, None) {
                c.error(&format!("/output{ptr}"), m);
            }
        }
    }
    c.out.sort_by_key(|d| d.line);
    c.out
}

/// The schema of what `chain` returns, when it can be known: its `output` template's shape, each
/// whole reference as the schema of what it names (`{}` where that is unknown), else the output
/// schema of its last step.
pub fn output_schema(chain: &Chain, catalog: &dyn ChainCatalog) -> Option<Value> {
    let target_output = |s: &Step| -> Option<Value> {
        let out = match &s.target {
            StepTarget::Tool(t) => catalog.tool(t)?.output?,
            StepTarget::Chain(c) => catalog.chain(c)?.output?,
        };
        step_output(s, out)
    };
    match &chain.output {
        None => target_output(chain.steps.last()?),
        Some(t) => {
            let env = Env {
                chain,
                outputs: chain
                    .steps
                    .iter()
                    .map(|s| (s.id.as_str(), target_output(s)))
                    .collect(),
            };
            Some(env.template_schema(t))
        }
    }
}

/// A step's output schema given its target's: a list of them under `for_each`; unknown when an
/// `on_error` default may stand in for it.
fn step_output(step: &Step, target_output: Value) -> Option<Value> {
    if matches!(step.on_error, OnError::Default(_)) {
        return None;
    }
    if step.for_each.is_some() {
        return Some(json!({"type": "array", "items": target_output}));
    }
    Some(target_output)
}

/// What references are followed in: the chain's input and its steps' output schemas.
struct Env<'a> {
    chain: &'a Chain,
    outputs: HashMap<&'a str, Option<Value>>,
}

impl Env<'_> {
    /// The schema of what `r` starts from (`None`: unknown), in `step` for `$item`.
    fn root(&self, r: &Ref, step: Option<&Step>) -> Option<Value> {
        match &r.root {
            Root::Input => Some(self.chain.input.clone()),
            Root::Output(id) => self.outputs.get(id.as_str()).cloned().flatten(),
            Root::Status(_) => Some(json!({"type": "string"})),
            Root::Index => Some(json!({"type": "integer"})),
            Root::Item => {
                let items = &step?.for_each.as_ref()?.items;
                let Template::Ref(source) = items else {
                    return None;
                };
                let list = self.walk(source, None).ok().flatten()?;
                list.get("items").filter(|i| i.is_object()).cloned()
            }
        }
    }

    /// The schema of the value `r` names (`Ok(None)`: unknown), or why it cannot exist.
    fn walk(&self, r: &Ref, step: Option<&Step>) -> Result<Option<Value>, String> {
        let Some(root) = self.root(r, step) else {
            return Ok(None);
        };
        let mut here = &root;
        for (n, seg) in r.path.iter().enumerate() {
            let shown = || {
                Ref {
                    root: r.root.clone(),
                    path: r.path[..n].to_vec(),
                }
                .to_string()
            };
            let Some(obj) = here.as_object() else {
                return Ok(None);
            };
            if ["$ref", "anyOf", "oneOf", "allOf"]
                .iter()
                .any(|k| obj.contains_key(*k))
            {
                return Ok(None);
            }
            let types = possible_types(here);
            match seg {
                Segment::Key(k) => {
                    let properties = obj.get("properties").and_then(Value::as_object);
                    if let Some(p) = properties.and_then(|p| p.get(k)) {
                        here = p;
                        continue;
                    }
                    if let Some(t) = types.as_ref().filter(|t| !t.contains("object")) {
                        return Err(format!(
                            "{r}: {} is {}, not an object",
                            shown(),
                            type_list(t)
                        ));
                    }
                    match obj.get("additionalProperties") {
                        Some(extra @ Value::Object(_)) => {
                            here = extra;
                            continue;
                        }
                        Some(Value::Bool(true)) => return Ok(None),
                        _ => {}
                    }
                    if obj.contains_key("patternProperties") {
                        return Ok(None);
                    }
                    let Some(properties) = properties else {
                        return Ok(None);
                    };
                    let has = if properties.is_empty() {
                        "it has none".to_owned()
                    } else {
                        format!(
                            "it has: {}",
                            properties.keys().cloned().collect::<Vec<_>>().join(", ")
                        )
                    };
                    return Err(format!("{r}: {} has no field {k:?}, {has}", shown()));
                }
                Segment::Index(i) => {
                    if let Some(t) = types.as_ref().filter(|t| !t.contains("array")) {
                        return Err(format!("{r}: {} is {}, not a list", shown(), type_list(t)));
                    }
                    if let Some(p) = obj
                        .get("prefixItems")
                        .and_then(Value::as_array)
                        .and_then(|p| p.get(*i))
                    {
                        here = p;
                        continue;
                    }
                    match obj.get("items") {
                        Some(items @ Value::Object(_)) => here = items,
                        Some(Value::Array(tuple)) => match tuple.get(*i) {
                            Some(s) => here = s,
                            None => return Ok(None),
                        },
                        _ => return Ok(None),
                    }
                }
            }
        }
        Ok(Some(here.clone()))
    }

    fn template_schema(&self, t: &Template) -> Value {
        match t {
            Template::Literal(v) => json!({ "const": v }),
            Template::Ref(r) => self
                .walk(r, None)
                .ok()
                .flatten()
                .unwrap_or_else(|| json!({})),
            Template::Text(_) => json!({"type": "string"}),
            Template::Array(items) => json!({
                "type": "array",
                "prefixItems": items.iter().map(|i| self.template_schema(i)).collect::<Vec<_>>(),
            }),
            Template::Object(fields) => {
                let properties: Map<String, Value> = fields
                    .iter()
                    .map(|(k, t)| (k.clone(), self.template_schema(t)))
                    .collect();
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": fields.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
                    "additionalProperties": false,
                })
            }
        }
    }
}

/// The JSON types a schema allows (`type`, else `const`, else `enum`); `None`: it does not say.
fn possible_types(schema: &Value) -> Option<BTreeSet<&'static str>> {
    let obj = schema.as_object()?;
    if let Some(t) = obj.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        let known: BTreeSet<&'static str> = names.into_iter().filter_map(type_name).collect();
        return (!known.is_empty()).then_some(known);
    }
    if let Some(c) = obj.get("const") {
        return Some(BTreeSet::from([json_type(c)]));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        return Some(values.iter().map(json_type).collect());
    }
    None
}

fn type_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "null" => "null",
        "boolean" => "boolean",
        "integer" => "integer",
        "number" => "number",
        "string" => "string",
        "array" => "array",
        "object" => "object",
        _ => return None,
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a value of one of the types `from` can be one of the types `to` (an integer is a
/// number, and a number may be an integer).
fn compatible(from: &BTreeSet<&str>, to: &BTreeSet<&str>) -> bool {
    from.iter().any(|f| {
        to.iter()
            .any(|t| f == t || matches!((*f, *t), ("integer", "number") | ("number", "integer")))
    })
}

fn type_list(types: &BTreeSet<&str>) -> String {
    types.iter().copied().collect::<Vec<_>>().join(" or ")
}

/// The schema of the parameter at `pointer` (`/url`, `/filters/0/name`) in a parameter schema,
/// when it says.
fn parameter_at<'s>(schema: &'s Value, pointer: &str) -> Option<&'s Value> {
    let mut here = schema;
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        here = match seg.parse::<usize>() {
            Ok(i) if possible_types(here).is_some_and(|t| t.contains("array")) => here
                .get("prefixItems")
                .and_then(|p| p.get(i))
                .or_else(|| here.get("items").filter(|s| s.is_object()))?,
            _ => here.get("properties")?.get(&seg)?,
        };
    }
    Some(here)
}

/// How a template uses a value at one place.
enum Use<'a> {
    /// A whole reference: the value with its type.
    Whole(&'a Ref),
    /// A reference written into a string.
    InText(&'a Ref),
}

fn uses<'a>(t: &'a Template, pointer: &mut String, out: &mut Vec<(String, Use<'a>)>) {
    match t {
        Template::Literal(_) => {}
        Template::Ref(r) => out.push((pointer.clone(), Use::Whole(r))),
        Template::Text(pieces) => {
            for p in pieces {
                if let Piece::Ref(r) = p {
                    out.push((pointer.clone(), Use::InText(r)));
                }
            }
        }
        Template::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                uses(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Template::Object(fields) => {
            for (k, item) in fields {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&escape_pointer(k));
                uses(item, pointer, out);
                pointer.truncate(len);
            }
        }
    }
}

struct Checker<'a> {
    source: &'a ChainSource,
    out: Vec<Diagnostic>,
    /// The chain as written back, for field names.
    value: Value,
}

impl Checker<'_> {
    fn error(&mut self, pointer: &str, message: impl Into<String>) {
        let field = super::parse::join_field(
            &self.source.field,
            &super::parse::field_path(&self.value, pointer),
        );
        self.out.push(Diagnostic {
            severity: Severity::Error,
            line: self.source.line_of(pointer),
            field: (!field.is_empty()).then_some(field),
            message: message.into(),
        });
    }

    fn target(&mut self, i: usize, step: &Step, catalog: &dyn ChainCatalog) -> Target {
        match &step.target {
            StepTarget::Tool(t) => {
                let at = format!("/steps/{i}/tool");
                let Some(info) = catalog.tool(t) else {
                    self.error(&at, format!("no tool {t:?} is registered"));
                    return Target::default();
                };
                if info.quarantined {
                    self.error(&at, format!("the tool {t:?} is quarantined"));
                }
                if let Some(why) = catalog.outside_skill(t) {
                    self.error(&at, format!("the tool {t:?} is outside the skill: {why}"));
                }
                Target {
                    what: format!("tool {t:?}"),
                    parameters: Some(info.parameters),
                    output: info.output,
                }
            }
            StepTarget::Chain(c) => {
                let at = format!("/steps/{i}/chain");
                let Some(info) = catalog.chain(c) else {
                    self.error(&at, format!("no chain {c:?} is registered"));
                    return Target::default();
                };
                if let Some(why) = catalog.outside_skill(&step.target.tool_name()) {
                    self.error(&at, format!("the chain {c:?} is outside the skill: {why}"));
                }
                Target {
                    what: format!("chain {c:?}"),
                    parameters: Some(info.input),
                    output: info.output,
                }
            }
        }
    }

    fn step(&mut self, i: usize, step: &Step, target: &Target, env: &Env<'_>) {
        let at = format!("/steps/{i}");
        let arguments = step.arguments.to_value();
        let given: Vec<&String> = arguments
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        if let Some(params) = &target.parameters {
            let properties = params.get("properties").and_then(Value::as_object);
            if params.get("additionalProperties") == Some(&Value::Bool(false)) {
                for k in &given {
                    if properties.is_none_or(|p| !p.contains_key(k.as_str())) {
                        let has = properties.filter(|p| !p.is_empty()).map_or(
                            "it has none".to_owned(),
                            |p| {
                                format!(
                                    "it has: {}",
                                    p.keys().cloned().collect::<Vec<_>>().join(", ")
                                )
                            },
                        );
                        self.error(
                            &format!("{at}/arguments/{}", escape_pointer(k)),
                            format!("{} has no parameter {k:?}, {has}", target.what),
                        );
                    }
                }
            }
            let required = params.get("required").and_then(Value::as_array);
            for name in required.into_iter().flatten().filter_map(Value::as_str) {
                let defaulted = properties
                    .and_then(|p| p.get(name))
                    .is_some_and(|p| p.get("default").is_some());
                if !given.iter().any(|g| g.as_str() == name) && !defaulted {
                    self.error(
                        &format!("{at}/arguments"),
                        format!(
                            "the required parameter {name:?} of {} is not given",
                            target.what
                        ),
                    );
                }
            }
            // Literal arguments of the wrong type.
            if let Some(args) = arguments.as_object()
                && let Template::Literal(_) | Template::Object(_) = &step.arguments
            {
                for (k, v) in args {
                    let literal = match &step.arguments {
                        Template::Object(fields) => fields
                            .iter()
                            .find(|(f, _)| f == k)
                            .is_some_and(|(_, t)| matches!(t, Template::Literal(_))),
                        _ => true,
                    };
                    let want = properties.and_then(|p| p.get(k)).and_then(possible_types);
                    if let Some(want) = want.filter(|_| literal)
                        && !compatible(&BTreeSet::from([json_type(v)]), &want)
                    {
                        self.error(
                            &format!("{at}/arguments/{}", escape_pointer(k)),
                            format!(
                                "{k:?} of {} takes {}, not {}",
                                target.what,
                                type_list(&want),
                                json_type(v)
                            ),
                        );
                    }
                }
            }
        }
        let mut found = Vec::new();
        uses(&step.arguments, &mut String::new(), &mut found);
        for (ptr, u) in found {
            let here = format!("{at}/arguments{ptr}");
            let (r, whole) = match u {
                Use::Whole(r) => (r, true),
                Use::InText(r) => (r, false),
            };
            let schema = match env.walk(r, Some(step)) {
                Ok(s) => s,
                Err(m) => {
                    self.error(&here, m);
                    continue;
                }
            };
            let want = target
                .parameters
                .as_ref()
                .and_then(|p| parameter_at(p, &ptr))
                .and_then(possible_types);
            let Some(want) = want else {
                continue;
            };
            let argument = super::parse::field_path(&arguments, &ptr);
            let got = if whole {
                schema.as_ref().and_then(possible_types)
            } else {
                Some(BTreeSet::from(["string"]))
            };
            if let Some(got) = got
                && !compatible(&got, &want)
            {
                let what = if whole {
                    format!("{r} is {}", type_list(&got))
                } else {
                    format!("a text with {r} in it is a string")
                };
                self.error(
                    &here,
                    format!(
                        "{what}, but {argument:?} of {} takes {}",
                        target.what,
                        type_list(&want)
                    ),
                );
            }
        }
        if let Some(w) = &step.when {
            for r in w.refs() {
                if let Err(m) = env.walk(r, Some(step)) {
                    self.error(&format!("{at}/when"), m);
                }
            }
        }
        if let Some(f) = &step.for_each {
            let here = format!("{at}/for_each/items");
            let not_list = match &f.items {
                Template::Literal(v) if !v.is_array() => Some(json_type(v).to_owned()),
                Template::Text(_) => Some("a text (a string)".to_owned()),
                Template::Object(_) => Some("a mapping".to_owned()),
                Template::Ref(r) => match env.walk(r, None) {
                    Err(m) => {
                        self.error(&here, m);
                        None
                    }
                    Ok(schema) => schema
                        .as_ref()
                        .and_then(possible_types)
                        .filter(|t| !t.contains("array"))
                        .map(|t| format!("{r}, which is {}", type_list(&t))),
                },
                _ => None,
            };
            if let Some(what) = not_list {
                self.error(&here, format!("`for_each` runs over a list, not {what}"));
            }
            if !matches!(f.items, Template::Ref(_)) {
                for (_, r) in f.items.refs() {
                    if let Err(m) = env.walk(r, None) {
                        self.error(&here, m);
                    }
                }
            }
        }
    }
}
