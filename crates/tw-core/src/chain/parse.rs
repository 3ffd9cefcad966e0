//! Chains read from YAML: a chain file, or the `chains:` of a SKILL.md, into [`Chain`]s and
//! diagnostics that each name their line and field.
//!
//! Parsing is total: every problem is reported, not only the first, and one broken chain does not
//! hide the others in the same file (it is left out, they are returned). Unknown fields are
//! warnings, as in SKILL.md, since the format grows. Besides the canonical form `to_yaml` writes,
//! the seed's shapes are read: a step written as a bare tool name (`steps: [web_search,
//! http_fetch]`, ids `step1`, `step2`, ... and each such step waiting for the one before, which is
//! what the seed's `$step1.output.text` means), a step without `id` (`stepN`), `max_retries: N`,
//! `on_error: retry`, `for_each: $ref`, and a chain written as its list of steps under its name.

use serde_json::{Map, Value, json};

use super::yaml::{self, LineMap, escape_pointer};
use super::{
    Chain, DEFAULT_PARALLEL, Expr, ForEach, OnError, Step, StepTarget, Template, check_chain_name,
    structure,
};
use crate::skill::{Diagnostic, Severity};

/// Retries `on_error: retry` and `max_retries` wait before the first, unless they say.
pub const DEFAULT_BACKOFF_MS: u64 = 200;

/// A chain read from a file, with the lines of what it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSource {
    /// The chain.
    pub chain: Chain,
    /// The lines of its nodes, by pointer from the chain (`/steps/1/arguments/url`), whatever
    /// shape it was written in.
    pub lines: LineMap,
    /// Where the chain is in its file, as diagnostics name fields: empty for a file that is one
    /// chain, `[1]` in a list of chains, `chains[0]` or `chains.research` in SKILL.md.
    pub field: String,
}

impl ChainSource {
    /// A chain with no file behind it (built in Rust): every line is 1.
    pub fn unplaced(chain: Chain) -> ChainSource {
        ChainSource {
            chain,
            lines: LineMap::default(),
            field: String::new(),
        }
    }

    /// The line of the node at `pointer` (from the chain), else of its nearest parent.
    pub fn line_of(&self, pointer: &str) -> usize {
        self.lines.line_of(pointer)
    }

    /// The field name of the node at `pointer` (from the chain) as diagnostics write it:
    /// `chains[0].steps[1].arguments.url`.
    pub fn field_of(&self, pointer: &str) -> String {
        join_field(&self.field, &field_path(&self.chain.to_value(), pointer))
    }
}

/// What reading chains gives.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainParse {
    /// Every chain without errors, in file order.
    pub chains: Vec<ChainSource>,
    /// Every problem found, in line order.
    pub diagnostics: Vec<Diagnostic>,
}

impl ChainParse {
    /// Whether there is an error among the diagnostics.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Reads a chain file: one chain (a mapping), a list of chains, or `chains:` holding a list (or a
/// mapping from names to chains).
pub fn parse_chain_file(text: &str) -> ChainParse {
    let read = yaml::read(text, 1);
    let last = text.lines().count().max(1);
    let mut out = ChainParse::default();
    let Some(root) = read.value else {
        out.diagnostics = read
            .errors
            .into_iter()
            .map(|e| Diagnostic {
                severity: Severity::Error,
                line: e.line.min(last),
                field: None,
                message: e.message,
            })
            .collect();
        return out;
    };
    let mut cx = Ctx::new(&root, &read.lines);
    match &root {
        Value::Object(m) if m.contains_key("chains") => {
            for k in m.keys().filter(|k| *k != "chains") {
                cx.warn(
                    &format!("/{}", escape_pointer(k)),
                    format!("unknown field {k:?} is ignored"),
                );
            }
            cx.collection("/chains", None);
        }
        Value::Object(_) => {
            if let Some(c) = cx.chain_at("", Naming::Written) {
                cx.chains.push(c);
            }
        }
        Value::Array(_) => cx.collection("", None),
        Value::Null => cx.error("", "the file holds no chain"),
        _ => cx.error(
            "",
            "a chain file holds a chain (a mapping), a list of chains, or `chains:` with a list",
        ),
    }
    out.chains = cx.chains;
    out.diagnostics = cx.diagnostics;
    for d in &mut out.diagnostics {
        d.line = d.line.min(last);
    }
    out.diagnostics.sort_by_key(|d| d.line);
    out
}

/// Reads the chains at `pointer` of a YAML document already read (SKILL.md's `/chains`): a list
/// of chains or a mapping from names to chains. A chain in a list without a `name` is called
/// `unnamed` when it is the only one, else `unnamed_N` (N its position from 1); without
/// `unnamed`, a missing name is an error.
pub fn parse_chains(
    root: &Value,
    lines: &LineMap,
    pointer: &str,
    unnamed: Option<&str>,
) -> ChainParse {
    let mut cx = Ctx::new(root, lines);
    cx.collection(pointer, unnamed);
    let mut diagnostics = cx.diagnostics;
    diagnostics.sort_by_key(|d| d.line);
    ChainParse {
        chains: cx.chains,
        diagnostics,
    }
}

/// The field name of `pointer` in `root`: array positions as `[N]`, keys after dots (or as
/// `["key"]` when not a plain word); past the end of `root`, a number is taken as a position.
pub fn field_path(root: &Value, pointer: &str) -> String {
    let mut out = String::new();
    let mut at = Some(root);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        let index = seg.parse::<usize>().ok();
        let (next, is_index) = match at {
            Some(Value::Array(a)) => (index.and_then(|i| a.get(i)), index.is_some()),
            Some(Value::Object(m)) => (m.get(&seg), false),
            _ => (None, index.is_some()),
        };
        if is_index {
            out.push_str(&format!("[{seg}]"));
        } else if !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        } else {
            out.push_str(&format!("[{seg:?}]"));
        }
        at = next;
    }
    out
}

/// `prefix` and `path` as one field name.
pub(crate) fn join_field(prefix: &str, path: &str) -> String {
    if prefix.is_empty() || path.is_empty() || path.starts_with('[') {
        format!("{prefix}{path}")
    } else {
        format!("{prefix}.{path}")
    }
}

/// Where a chain's name comes from.
enum Naming {
    /// Its `name` field, which it must have.
    Written,
    /// The key it is under (`chains: {research: ...}`); a `name` field must agree.
    Key(String),
    /// Its `name` field, else this.
    Default(String),
}

/// Diagnostics for one document, located through its line map.
struct Ctx<'a> {
    root: &'a Value,
    lines: &'a LineMap,
    diagnostics: Vec<Diagnostic>,
    chains: Vec<ChainSource>,
}

impl<'a> Ctx<'a> {
    fn new(root: &'a Value, lines: &'a LineMap) -> Ctx<'a> {
        Ctx {
            root,
            lines,
            diagnostics: Vec::new(),
            chains: Vec::new(),
        }
    }

    fn push(&mut self, severity: Severity, pointer: &str, message: String) {
        let field = field_path(self.root, pointer);
        self.diagnostics.push(Diagnostic {
            severity,
            line: self.lines.line_of(pointer),
            field: (!field.is_empty()).then_some(field),
            message,
        });
    }

    fn error(&mut self, pointer: &str, message: impl Into<String>) {
        self.push(Severity::Error, pointer, message.into());
    }

    fn warn(&mut self, pointer: &str, message: impl Into<String>) {
        self.push(Severity::Warning, pointer, message.into());
    }

    fn errors(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// A list of chains, or a mapping from names to chains, at `at`.
    fn collection(&mut self, at: &str, unnamed: Option<&str>) {
        let root = self.root;
        let found: Vec<(String, Naming)> = match root.pointer(at) {
            None | Some(Value::Null) => return,
            Some(Value::Array(items)) => {
                let has_name = |v: &Value| v.get("name").is_some_and(|n| !n.is_null());
                let nameless = items.iter().filter(|v| !has_name(v)).count();
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let naming = match unnamed {
                            Some(base) if !has_name(v) && nameless == 1 => {
                                Naming::Default(base.to_owned())
                            }
                            Some(base) if !has_name(v) => {
                                Naming::Default(format!("{base}_{}", i + 1))
                            }
                            _ => Naming::Written,
                        };
                        (format!("{at}/{i}"), naming)
                    })
                    .collect()
            }
            Some(Value::Object(m)) => m
                .keys()
                .map(|k| {
                    (
                        format!("{at}/{}", escape_pointer(k)),
                        Naming::Key(k.clone()),
                    )
                })
                .collect(),
            Some(_) => {
                self.error(
                    at,
                    "must be a list of chains, or a mapping from chain names to chains",
                );
                return;
            }
        };
        for (pointer, naming) in found {
            let Some(c) = self.chain_at(&pointer, naming) else {
                continue;
            };
            if self.chains.iter().any(|o| o.chain.name == c.chain.name) {
                let at = if root.pointer(&format!("{pointer}/name")).is_some() {
                    format!("{pointer}/name")
                } else {
                    pointer
                };
                self.error(
                    &at,
                    format!("the chain name {:?} is used twice", c.chain.name),
                );
                continue;
            }
            self.chains.push(c);
        }
    }

    /// The chain at `at`, or `None` (its errors reported) when it has any.
    fn chain_at(&mut self, at: &str, naming: Naming) -> Option<ChainSource> {
        let before = self.errors();
        let root = self.root;
        let value = root.pointer(at)?;
        let mut chain = Chain::empty("");
        let mut written_name: Option<String> = None;
        let name_written = value.get("name").is_some();
        // Where the steps are: `steps:`, or the chain itself when written as its list of steps.
        let mut steps_at: Option<String> = None;
        let shorthand = value.is_array();
        match value {
            Value::Array(_) => steps_at = Some(at.to_owned()),
            Value::Object(m) => {
                for (k, v) in m {
                    let p = format!("{at}/{}", escape_pointer(k));
                    match k.as_str() {
                        "name" => written_name = self.string(&p, v),
                        "description" => {
                            chain.description = self.string(&p, v).unwrap_or_default();
                        }
                        "input" => chain.input = self.input(&p, v),
                        "steps" => steps_at = Some(p),
                        "output" => chain.output = self.template(&p, v),
                        "timeout_ms" => chain.timeout_ms = self.positive(&p, v),
                        "max_parallel" => {
                            if let Some(n) = self.count(&p, v, "must be 1 to 64") {
                                chain.max_parallel = n;
                            }
                        }
                        other => self.warn(&p, format!("unknown field {other:?} is ignored")),
                    }
                }
            }
            _ => {
                self.error(
                    at,
                    "a chain is a mapping with `name` and `steps`, or its list of steps",
                );
                return None;
            }
        }
        let mut name_missing = false;
        match (naming, written_name) {
            (Naming::Written | Naming::Default(_), Some(n)) => chain.name = n,
            (Naming::Written, None) => {
                name_missing = true;
                if !name_written {
                    self.error(at, "a chain needs a `name`");
                }
            }
            (Naming::Default(d), None) => chain.name = d,
            (Naming::Key(k), written) => {
                if let Some(n) = written.filter(|n| *n != k) {
                    self.error(
                        &format!("{at}/name"),
                        format!("the chain is under the key {k:?} but its `name` is {n:?}"),
                    );
                }
                chain.name = k;
            }
        }
        let mut steps_broken = false;
        if let Some(p) = &steps_at
            && let Some(v) = root.pointer(p)
        {
            steps_broken = !v.is_array();
            chain.steps = self.steps(p, v);
        }
        // A chain written as its steps has them at its own pointer; everything else (line map,
        // structure's paths) speaks of `/steps`.
        let file_pointer = |rel: &str| -> String {
            match rel.strip_prefix("/steps") {
                Some(rest) if shorthand => format!("{at}{rest}"),
                _ => format!("{at}{rel}"),
            }
        };
        let lines = if shorthand {
            let mut l = self.lines.within(at).nest("/steps");
            l.set_first(self.lines.line_of(at));
            l
        } else {
            self.lines.within(at)
        };
        for (path, message) in structure(&chain) {
            // Said already, in the words of what was written.
            if (name_missing && path == "name") || (steps_broken && path == "steps") {
                continue;
            }
            let rel = structure_pointer(&path);
            self.error(&file_pointer(&rel), message);
        }
        if self.errors() > before {
            return None;
        }
        Some(ChainSource {
            chain,
            lines,
            field: field_path(root, at),
        })
    }

    fn string(&mut self, p: &str, v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.error(p, "must be a string");
                None
            }
        }
    }

    /// A whole number above 0 (milliseconds).
    fn positive(&mut self, p: &str, v: &Value) -> Option<u64> {
        match v.as_u64() {
            Some(n) if n > 0 => Some(n),
            _ => {
                self.error(p, "must be a whole number above 0");
                None
            }
        }
    }

    /// A whole number that fits a `u32`, else the error `range` (the limit the model checks).
    fn count(&mut self, p: &str, v: &Value, range: &str) -> Option<u32> {
        match v.as_u64() {
            Some(n) => match u32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.error(p, range);
                    None
                }
            },
            None => {
                self.error(p, "must be a whole number");
                None
            }
        }
    }

    fn template(&mut self, p: &str, v: &Value) -> Option<Template> {
        match Template::from_value(v) {
            Ok(t) => Some(t),
            Err((at, e)) => {
                self.error(&format!("{p}{at}"), e.to_string());
                None
            }
        }
    }

    fn input(&mut self, p: &str, v: &Value) -> Value {
        let empty = json!({"type": "object", "properties": {}});
        match v {
            Value::Null => empty,
            Value::Array(list) => match crate::params::simple_list_to_schema(list) {
                Ok(schema) => schema,
                Err(e) => {
                    // The message starts with the entry at fault, `[2].name: ...`.
                    let entry = e
                        .strip_prefix('[')
                        .and_then(|r| r.split_once(']'))
                        .and_then(|(i, _)| i.parse::<usize>().ok());
                    let at = entry.map_or_else(|| p.to_owned(), |i| format!("{p}/{i}"));
                    // The field names the entry; the message keeps what is after it.
                    let message = match e.split_once(']') {
                        Some((_, rest)) if entry.is_some() => rest
                            .trim_start_matches('.')
                            .trim_start_matches(": ")
                            .to_owned(),
                        _ => e,
                    };
                    self.error(&at, message);
                    empty
                }
            },
            Value::Object(_) => {
                if let Err(e) = crate::schema::ParameterSchema::any(v.clone()) {
                    self.error(p, e.to_string());
                }
                v.clone()
            }
            _ => {
                self.error(
                    p,
                    "must be a JSON Schema (a mapping) or a list of parameters",
                );
                empty
            }
        }
    }

    fn steps(&mut self, at: &str, v: &Value) -> Vec<Step> {
        let Value::Array(items) = v else {
            self.error(at, "must be a list of steps");
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        let mut previous_bare: Option<String> = None;
        for (i, item) in items.iter().enumerate() {
            let p = format!("{at}/{i}");
            let id = format!("step{}", i + 1);
            match item {
                Value::String(tool) => {
                    self.tool_name(&p, tool);
                    let mut step = Step::new(&id, tool);
                    if let Some(before) = previous_bare.replace(id) {
                        step.depends_on.push(before);
                    }
                    out.push(step);
                }
                Value::Object(m) => out.push(self.step(&p, m, &id)),
                _ => {
                    self.error(
                        &p,
                        "a step is a tool name, or a mapping with `id` and `tool` or `chain`",
                    );
                    // Kept, so the steps after it keep their positions.
                    out.push(Step::new(&id, ""));
                }
            }
        }
        out
    }

    fn tool_name(&mut self, p: &str, name: &str) {
        if let Err(e) = crate::name::ToolName::new(name) {
            self.error(p, e.to_string());
        }
    }

    fn step(&mut self, at: &str, m: &Map<String, Value>, default_id: &str) -> Step {
        let mut step = Step::new(default_id, "");
        let mut tool: Option<String> = None;
        let mut called: Option<String> = None;
        let mut max_retries: Option<(String, u32)> = None;
        let mut on_error_written = false;
        for (k, v) in m {
            let p = format!("{at}/{}", escape_pointer(k));
            match k.as_str() {
                "id" => {
                    if let Some(id) = self.string(&p, v) {
                        step.id = id;
                    }
                }
                "tool" => {
                    if let Some(t) = self.string(&p, v) {
                        self.tool_name(&p, &t);
                        tool = Some(t);
                    }
                }
                "chain" => {
                    if let Some(c) = self.string(&p, v) {
                        if let Err(e) = check_chain_name(&c) {
                            self.error(&p, e);
                        }
                        called = Some(c);
                    }
                }
                "arguments" => match v {
                    Value::Null => {}
                    Value::Object(_) => {
                        if let Some(t) = self.template(&p, v) {
                            step.arguments = t;
                        }
                    }
                    _ => self.error(&p, "must be a mapping of argument names to values"),
                },
                "depends_on" => match v {
                    Value::String(s) => step.depends_on = vec![s.clone()],
                    Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            if let Some(s) = self.string(&format!("{p}/{i}"), item) {
                                step.depends_on.push(s);
                            }
                        }
                    }
                    _ => self.error(&p, "must be a step id or a list of step ids"),
                },
                "when" => match v {
                    Value::String(s) => match Expr::parse(s) {
                        Ok(e) => step.when = Some(e),
                        Err(e) => self.error(&p, format!("not a valid expression: {e}")),
                    },
                    Value::Bool(b) => step.when = Some(Expr::Literal(Value::Bool(*b))),
                    _ => self.error(&p, "must be an expression (a string)"),
                },
                "for_each" => step.for_each = self.for_each(&p, v),
                "on_error" => {
                    on_error_written = true;
                    if let Some(e) = self.on_error(&p, v) {
                        step.on_error = e;
                    }
                }
                "max_retries" => {
                    if let Some(n) = self.count(&p, v, "must be 1 to 10") {
                        max_retries = Some((p, n));
                    }
                }
                "timeout_ms" => step.timeout_ms = self.positive(&p, v),
                other => self.warn(&p, format!("unknown field {other:?} is ignored")),
            }
        }
        if let Some((p, n)) = max_retries {
            if on_error_written {
                self.error(
                    &p,
                    "write `max_retries` or `on_error`, not both (`on_error: {retry: {max: N}}`)",
                );
            } else if n > super::MAX_RETRIES {
                self.error(&p, format!("must be 0 to {}", super::MAX_RETRIES));
            } else if n > 0 {
                step.on_error = OnError::Retry {
                    max: n,
                    backoff_ms: DEFAULT_BACKOFF_MS,
                };
            }
        }
        match (tool, called) {
            (Some(t), None) => step.target = StepTarget::Tool(t),
            (None, Some(c)) => step.target = StepTarget::Chain(c),
            (Some(_), Some(_)) => self.error(at, "a step calls a `tool` or a `chain`, not both"),
            (None, None) => self.error(at, "a step needs a `tool` (or a `chain`) to call"),
        }
        step
    }

    fn for_each(&mut self, p: &str, v: &Value) -> Option<ForEach> {
        match v {
            Value::Object(m) => {
                let Some(items) = m.get("items") else {
                    self.error(p, "names its items: a reference, or {items, max_parallel}");
                    return None;
                };
                let mut max_parallel = DEFAULT_PARALLEL;
                for (k, v) in m {
                    let at = format!("{p}/{}", escape_pointer(k));
                    match k.as_str() {
                        "items" => {}
                        "max_parallel" => {
                            if let Some(n) = self.count(&at, v, "must be 1 to 64") {
                                max_parallel = n;
                            }
                        }
                        other => self.warn(&at, format!("unknown field {other:?} is ignored")),
                    }
                }
                let items = self.template(&format!("{p}/items"), items)?;
                Some(ForEach {
                    items,
                    max_parallel,
                })
            }
            Value::Null => {
                self.error(p, "names its items: a reference, or {items, max_parallel}");
                None
            }
            other => Some(ForEach {
                items: self.template(p, other)?,
                max_parallel: DEFAULT_PARALLEL,
            }),
        }
    }

    fn on_error(&mut self, p: &str, v: &Value) -> Option<OnError> {
        const FORMS: &str =
            "must be abort, continue, retry, {retry: {max, backoff_ms}} or {default: VALUE}";
        match v {
            Value::String(s) => match s.as_str() {
                "abort" => Some(OnError::Abort),
                "continue" => Some(OnError::Continue),
                "retry" => Some(OnError::Retry {
                    max: 1,
                    backoff_ms: DEFAULT_BACKOFF_MS,
                }),
                _ => {
                    self.error(p, FORMS);
                    None
                }
            },
            Value::Object(m) if m.len() == 1 => {
                let (k, inner) = m.iter().next()?;
                let at = format!("{p}/{}", escape_pointer(k));
                match k.as_str() {
                    "default" => Some(OnError::Default(inner.clone())),
                    "retry" => self.retry(&at, inner),
                    _ => {
                        self.error(p, FORMS);
                        None
                    }
                }
            }
            _ => {
                self.error(p, FORMS);
                None
            }
        }
    }

    fn retry(&mut self, p: &str, v: &Value) -> Option<OnError> {
        let mut max = 1;
        let mut backoff_ms = DEFAULT_BACKOFF_MS;
        match v {
            Value::Null => {}
            Value::Number(_) => max = self.count(p, v, "must be 1 to 10")?,
            Value::Object(m) => {
                let mut ok = true;
                for (k, v) in m {
                    let at = format!("{p}/{}", escape_pointer(k));
                    match k.as_str() {
                        "max" => match self.count(&at, v, "must be 1 to 10") {
                            Some(n) => max = n,
                            None => ok = false,
                        },
                        "backoff_ms" => match v.as_u64() {
                            Some(n) => backoff_ms = n,
                            None => {
                                self.error(&at, "must be a whole number of milliseconds");
                                ok = false;
                            }
                        },
                        other => self.warn(&at, format!("unknown field {other:?} is ignored")),
                    }
                }
                if !ok {
                    return None;
                }
            }
            _ => {
                self.error(p, "must be {max, backoff_ms} or a number of retries");
                return None;
            }
        }
        Some(OnError::Retry { max, backoff_ms })
    }
}

/// A path `structure` reports (`steps[2].arguments/x`, `steps[3].on_error.retry.max`) as a
/// pointer from the chain (`/steps/2/arguments/x`).
pub(crate) fn structure_pointer(path: &str) -> String {
    let (head, tail) = match path.find('/') {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    let mut out = String::new();
    for part in head.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        out.push('/');
        out.push_str(&escape_pointer(name));
        for index in rest.split(['[', ']']).filter(|s| !s.is_empty()) {
            out.push('/');
            out.push_str(index);
        }
    }
    out.push_str(tail);
    out
}
