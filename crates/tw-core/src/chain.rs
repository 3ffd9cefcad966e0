//! Tool chains: several governed tool calls run as one, each step's output feeding the next.
//!
//! This module holds the model every front end shares: a [`Chain`] of [`Step`]s whose
//! arguments are [`Template`]s with references (`$input.query`,
//! `$steps.search.output.results[0].url`), `when` conditions ([`Expr`]), `for_each` fan-out and
//! `on_error` handling. Chains are written in YAML (a chain file, or SKILL.md's `chains:`),
//! or built in Rust with [`Chain::builder`]; both give the same model. Running a chain is the
//! runtime's job (every step is a call through the whole pipeline); this crate only describes
//! and checks it.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

pub mod check;
pub mod expr;
pub mod parse;
pub mod plan;
pub mod reference;
pub mod yaml;

pub use check::{ChainCatalog, ChainInfo, ToolInfo, check, output_schema};
pub use expr::{CmpOp, Expr, ExprError};
pub use parse::{ChainParse, ChainSource, parse_chain_file, parse_chains};
pub use reference::{
    Piece, Ref, RefError, Root, Scope, Segment, StepStatus, StepValue, Template, check_step_id,
};
pub use yaml::{LineMap, YamlError, YamlRead};

/// What registered chains are called as tools: `chain__NAME`, the convention imported tools
/// use (`server__tool`), since MCP clients refuse `:` in tool names.
pub const TOOL_PREFIX: &str = "chain__";
/// The group chain tools are listed in.
pub const GROUP: &str = "chains";
/// The most steps a chain may have.
pub const MAX_STEPS: usize = 256;
/// The most parallel slots a chain or `for_each` may ask for.
pub const MAX_PARALLEL: u32 = 64;
/// The most items a `for_each` may run over in one run.
pub const MAX_ITEMS: usize = 1024;
/// The most retries `on_error: retry` may ask for.
pub const MAX_RETRIES: u32 = 10;

/// Whether `name` may name a chain: what a tool name allows, short enough for the prefix.
pub fn check_chain_name(name: &str) -> Result<(), String> {
    let ok = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name.len() <= 64 - TOOL_PREFIX.len()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a chain name: a lowercase letter first, then lowercase letters, digits and '_', at most {}",
            64 - TOOL_PREFIX.len()
        ))
    }
}

/// What a step calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepTarget {
    /// A registered tool, by name.
    Tool(String),
    /// Another chain, by name (`chain: NAME` in YAML).
    Chain(String),
}

impl StepTarget {
    /// The registered tool the step calls: the tool, or the chain's tool.
    pub fn tool_name(&self) -> String {
        match self {
            StepTarget::Tool(t) => t.clone(),
            StepTarget::Chain(c) => format!("{TOOL_PREFIX}{c}"),
        }
    }
}

/// What happens when a step's call does not succeed.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum OnError {
    /// The run stops: running steps are cancelled, pending ones skipped. The default.
    #[default]
    Abort,
    /// The step is failed, what needs it is skipped, and the rest of the run goes on.
    Continue,
    /// The call is tried again after transient failures (time-outs, unreachable upstreams,
    /// network errors), never after a denial or invalid arguments; then the run stops.
    Retry {
        /// Further attempts after the first.
        max: u32,
        /// Wait before the first retry, doubled for each next one.
        backoff_ms: u64,
    },
    /// The step completes with this output instead, and the run goes on.
    Default(Value),
}

/// A `for_each`: the step runs once per item of an array.
#[derive(Debug, Clone, PartialEq)]
pub struct ForEach {
    /// The array (usually a reference); each element is `$item`, its position `$index`.
    pub items: Template,
    /// How many items run at once.
    pub max_parallel: u32,
}

/// One step of a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Its id, unique in the chain.
    pub id: String,
    /// The tool or chain it calls.
    pub target: StepTarget,
    /// The call's arguments, with references.
    pub arguments: Template,
    /// Steps it waits for besides those its references name.
    pub depends_on: Vec<String>,
    /// Runs only when this holds; skipped otherwise.
    pub when: Option<Expr>,
    /// Runs once per item.
    pub for_each: Option<ForEach>,
    /// What a failed call does to the run.
    pub on_error: OnError,
    /// A time limit for each call of the step (the tool's own still applies).
    pub timeout_ms: Option<u64>,
}

impl Step {
    /// A step calling `tool` with no arguments.
    pub fn new(id: &str, tool: &str) -> Step {
        Step {
            id: id.to_owned(),
            target: StepTarget::Tool(tool.to_owned()),
            arguments: Template::Literal(Value::Object(Map::new())),
            depends_on: Vec::new(),
            when: None,
            for_each: None,
            on_error: OnError::Abort,
            timeout_ms: None,
        }
    }

    /// Every step this one waits for: `depends_on` and every step its references name.
    pub fn needs(&self) -> BTreeSet<&str> {
        let mut out: BTreeSet<&str> = self.depends_on.iter().map(String::as_str).collect();
        for (_, r) in self.arguments.refs() {
            out.extend(r.step());
        }
        if let Some(w) = &self.when {
            out.extend(w.refs().into_iter().filter_map(Ref::step));
        }
        if let Some(f) = &self.for_each {
            out.extend(f.items.refs().into_iter().filter_map(|(_, r)| r.step()));
        }
        out
    }

    /// The step as YAML writes it (a JSON value of the same shape).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        match &self.target {
            StepTarget::Tool(t) => m.insert("tool".into(), json!(t)),
            StepTarget::Chain(c) => m.insert("chain".into(), json!(c)),
        };
        let args = self.arguments.to_value();
        if args.as_object().is_none_or(|o| !o.is_empty()) {
            m.insert("arguments".into(), args);
        }
        if !self.depends_on.is_empty() {
            m.insert("depends_on".into(), json!(self.depends_on));
        }
        if let Some(w) = &self.when {
            m.insert("when".into(), json!(w.to_string()));
        }
        if let Some(f) = &self.for_each {
            m.insert(
                "for_each".into(),
                json!({"items": f.items.to_value(), "max_parallel": f.max_parallel}),
            );
        }
        match &self.on_error {
            OnError::Abort => {}
            OnError::Continue => {
                m.insert("on_error".into(), json!("continue"));
            }
            OnError::Retry { max, backoff_ms } => {
                m.insert(
                    "on_error".into(),
                    json!({"retry": {"max": max, "backoff_ms": backoff_ms}}),
                );
            }
            OnError::Default(v) => {
                m.insert("on_error".into(), json!({ "default": v }));
            }
        }
        if let Some(t) = self.timeout_ms {
            m.insert("timeout_ms".into(), json!(t));
        }
        Value::Object(m)
    }
}

/// A chain: named steps with an input schema and an output.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// Its name (registered as the tool `chain__NAME`).
    pub name: String,
    /// What it does, for people and agents.
    pub description: String,
    /// The JSON Schema of its input (an object).
    pub input: Value,
    /// Its steps, in the order written (runs follow their dependencies).
    pub steps: Vec<Step>,
    /// What the run returns; the last step's output when absent.
    pub output: Option<Template>,
    /// A time limit for the whole run.
    pub timeout_ms: Option<u64>,
    /// How many steps run at once.
    pub max_parallel: u32,
}

/// The parallel slots a chain has unless it says.
pub const DEFAULT_PARALLEL: u32 = 4;

impl Chain {
    /// A chain builder.
    pub fn builder(name: &str) -> ChainBuilder {
        ChainBuilder {
            chain: Chain::empty(name),
        }
    }

    /// A chain with no steps, an empty object as input and the defaults: what the builder and
    /// the parser start from.
    pub(crate) fn empty(name: &str) -> Chain {
        Chain {
            name: name.to_owned(),
            description: String::new(),
            input: json!({"type": "object", "properties": {}}),
            steps: Vec::new(),
            output: None,
            timeout_ms: None,
            max_parallel: DEFAULT_PARALLEL,
        }
    }

    /// The registered tool name this chain is called as.
    pub fn tool_name(&self) -> String {
        format!("{TOOL_PREFIX}{}", self.name)
    }

    /// The step with id `id`.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// The steps in an order where every step comes after those it needs, or the ids on a
    /// cycle (or naming a step that does not exist) when there is none.
    pub fn order(&self) -> Result<Vec<usize>, Vec<String>> {
        let index: HashMap<&str, usize> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let needs: Vec<Vec<usize>> = self
            .steps
            .iter()
            .enumerate()
            // A step naming itself is reported on its own, not as a cycle.
            .map(|(i, s)| {
                s.needs()
                    .iter()
                    .filter_map(|n| index.get(n).copied())
                    .filter(|&n| n != i)
                    .collect()
            })
            .collect();
        let mut waiting: Vec<usize> = needs.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..self.steps.len())
            .filter(|&i| waiting[i] == 0)
            .rev()
            .collect();
        let mut out = Vec::with_capacity(self.steps.len());
        while let Some(i) = ready.pop() {
            out.push(i);
            for (j, n) in needs.iter().enumerate() {
                let hits = n.iter().filter(|&&d| d == i).count();
                if hits > 0 {
                    waiting[j] -= hits;
                    if waiting[j] == 0 {
                        ready.push(j);
                    }
                }
            }
        }
        if out.len() == self.steps.len() {
            return Ok(out);
        }
        // What is left waits on a cycle; keep only the steps on one (or between two): drop,
        // again and again, those no other step left needs.
        let mut left: BTreeSet<usize> = (0..self.steps.len()).filter(|&i| waiting[i] > 0).collect();
        loop {
            let needed: BTreeSet<usize> = left
                .iter()
                .flat_map(|&i| needs[i].iter().copied())
                .collect();
            let before = left.len();
            left.retain(|i| needed.contains(i));
            if left.len() == before {
                break;
            }
        }
        let mut ids: Vec<String> = Vec::new();
        for i in left {
            if !ids.contains(&self.steps[i].id) {
                ids.push(self.steps[i].id.clone());
            }
        }
        Err(ids)
    }

    /// The chain as YAML writes it (a JSON value of the same shape).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        if !self.description.is_empty() {
            m.insert("description".into(), json!(self.description));
        }
        m.insert("input".into(), self.input.clone());
        if self.max_parallel != DEFAULT_PARALLEL {
            m.insert("max_parallel".into(), json!(self.max_parallel));
        }
        if let Some(t) = self.timeout_ms {
            m.insert("timeout_ms".into(), json!(t));
        }
        m.insert(
            "steps".into(),
            Value::Array(self.steps.iter().map(Step::to_value).collect()),
        );
        if let Some(o) = &self.output {
            m.insert("output".into(), o.to_value());
        }
        Value::Object(m)
    }

    /// The chain in YAML, as a chain file holds it; reading it back gives the same chain.
    pub fn to_yaml(&self) -> String {
        yaml::write(&self.to_value())
    }
}

/// Builds a [`Chain`] in Rust; [`ChainBuilder::build`] runs the same structural checks a
/// chain file gets (ids, references, cycles), not the ones that need the tool registry.
#[derive(Debug, Clone)]
pub struct ChainBuilder {
    chain: Chain,
}

/// Builds one [`Step`]: `StepBuilder::new("search", "web_search").arg("query", "$input.q")`.
#[derive(Debug, Clone)]
pub struct StepBuilder {
    step: Step,
    arguments: Map<String, Value>,
    when: Option<String>,
    for_each: Option<(Value, u32)>,
}

impl StepBuilder {
    /// A step `id` calling `tool`.
    pub fn new(id: &str, tool: &str) -> StepBuilder {
        StepBuilder {
            step: Step::new(id, tool),
            arguments: Map::new(),
            when: None,
            for_each: None,
        }
    }

    /// A step `id` calling the chain `chain`.
    pub fn chain(id: &str, chain: &str) -> StepBuilder {
        let mut b = StepBuilder::new(id, chain);
        b.step.target = StepTarget::Chain(chain.to_owned());
        b
    }

    /// Sets an argument; strings may hold references.
    pub fn arg(mut self, name: &str, value: impl Into<Value>) -> StepBuilder {
        self.arguments.insert(name.to_owned(), value.into());
        self
    }

    /// Waits for `step` too.
    pub fn depends_on(mut self, step: &str) -> StepBuilder {
        self.step.depends_on.push(step.to_owned());
        self
    }

    /// Runs only when `expr` holds.
    pub fn when(mut self, expr: &str) -> StepBuilder {
        self.when = Some(expr.to_owned());
        self
    }

    /// Runs once per item of `items`, `max_parallel` at a time.
    pub fn for_each(mut self, items: impl Into<Value>, max_parallel: u32) -> StepBuilder {
        self.for_each = Some((items.into(), max_parallel));
        self
    }

    /// What a failed call does.
    pub fn on_error(mut self, on_error: OnError) -> StepBuilder {
        self.step.on_error = on_error;
        self
    }

    /// A time limit per call.
    pub fn timeout_ms(mut self, ms: u64) -> StepBuilder {
        self.step.timeout_ms = Some(ms);
        self
    }
}

impl ChainBuilder {
    /// Sets the description.
    pub fn description(mut self, text: &str) -> ChainBuilder {
        self.chain.description = text.to_owned();
        self
    }

    /// Sets the input schema.
    pub fn input(mut self, schema: Value) -> ChainBuilder {
        self.chain.input = schema;
        self
    }

    /// Adds a step.
    pub fn step(mut self, step: StepBuilder) -> ChainBuilder {
        // Kept as written; `build` reads references and expressions and reports what is wrong.
        self.chain.steps.push(Step {
            arguments: Template::Literal(Value::Object(step.arguments)),
            when: step.when.map(|w| Expr::Literal(Value::String(w))),
            for_each: step.for_each.map(|(items, max_parallel)| ForEach {
                items: Template::Literal(items),
                max_parallel,
            }),
            ..step.step
        });
        self
    }

    /// Sets the output mapping.
    pub fn output(mut self, output: Value) -> ChainBuilder {
        self.chain.output = Some(Template::Literal(output));
        self
    }

    /// Sets the whole run's time limit.
    pub fn timeout_ms(mut self, ms: u64) -> ChainBuilder {
        self.chain.timeout_ms = Some(ms);
        self
    }

    /// Sets how many steps run at once.
    pub fn max_parallel(mut self, n: u32) -> ChainBuilder {
        self.chain.max_parallel = n;
        self
    }

    /// The chain, or every problem found, each as `where: what`.
    pub fn build(self) -> Result<Chain, Vec<String>> {
        let mut chain = self.chain;
        let mut problems = Vec::new();
        for step in &mut chain.steps {
            if let Template::Literal(v) = &step.arguments {
                match Template::from_value(v) {
                    Ok(t) => step.arguments = t,
                    Err((at, e)) => problems.push(format!("steps.{}.arguments{at}: {e}", step.id)),
                }
            }
            if let Some(Expr::Literal(Value::String(w))) = &step.when {
                match Expr::parse(w) {
                    Ok(e) => step.when = Some(e),
                    Err(e) => problems.push(format!("steps.{}.when: {e}", step.id)),
                }
            }
            if let Some(f) = &mut step.for_each
                && let Template::Literal(v) = &f.items
            {
                match Template::from_value(v) {
                    Ok(t) => f.items = t,
                    Err((_, e)) => problems.push(format!("steps.{}.for_each: {e}", step.id)),
                }
            }
        }
        if let Some(Template::Literal(v)) = &chain.output {
            match Template::from_value(v) {
                Ok(t) => chain.output = Some(t),
                Err((at, e)) => problems.push(format!("output{at}: {e}")),
            }
        }
        problems.extend(
            structure(&chain)
                .into_iter()
                .map(|(at, m)| format!("{at}: {m}")),
        );
        if problems.is_empty() {
            Ok(chain)
        } else {
            Err(problems)
        }
    }
}

/// The checks that need only the chain itself, each as (field path, message): the name, step
/// ids (valid, unique), references to steps that exist (and not to the step itself or to a
/// later one through a cycle), `$item`/`$index` only under `for_each`, limits.
pub fn structure(chain: &Chain) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Err(e) = check_chain_name(&chain.name) {
        out.push(("name".to_owned(), e));
    }
    if chain.steps.is_empty() {
        out.push((
            "steps".to_owned(),
            "a chain has at least one step".to_owned(),
        ));
    }
    if chain.steps.len() > MAX_STEPS {
        out.push((
            "steps".to_owned(),
            format!("a chain has at most {MAX_STEPS} steps"),
        ));
    }
    if !(1..=MAX_PARALLEL).contains(&chain.max_parallel) {
        out.push((
            "max_parallel".to_owned(),
            format!("must be 1 to {MAX_PARALLEL}"),
        ));
    }
    if chain.input.get("type").and_then(Value::as_str) != Some("object") {
        out.push((
            "input".to_owned(),
            "the input schema describes an object (`type: object`)".to_owned(),
        ));
    }
    let ids: HashMap<&str, usize> = chain
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut seen = BTreeSet::new();
    for (i, step) in chain.steps.iter().enumerate() {
        let at = format!("steps[{i}]");
        if let Err(e) = check_step_id(&step.id) {
            out.push((format!("{at}.id"), e));
        }
        if !seen.insert(step.id.as_str()) {
            out.push((
                format!("{at}.id"),
                format!("step id {:?} is used twice", step.id),
            ));
        }
        if let StepTarget::Chain(c) = &step.target
            && c == &chain.name
        {
            out.push((
                format!("{at}.chain"),
                "a chain cannot call itself".to_owned(),
            ));
        }
        for d in &step.depends_on {
            if !ids.contains_key(d.as_str()) {
                out.push((format!("{at}.depends_on"), format!("no step has id {d:?}")));
            }
        }
        let mut refs: Vec<(String, &Ref)> = step
            .arguments
            .refs()
            .into_iter()
            .map(|(p, r)| (format!("{at}.arguments{p}"), r))
            .collect();
        if let Some(w) = &step.when {
            refs.extend(w.refs().into_iter().map(|r| (format!("{at}.when"), r)));
        }
        if let Some(f) = &step.for_each {
            if !(1..=MAX_PARALLEL).contains(&f.max_parallel) {
                out.push((
                    format!("{at}.for_each.max_parallel"),
                    format!("must be 1 to {MAX_PARALLEL}"),
                ));
            }
            for (_, r) in f.items.refs() {
                if matches!(r.root, Root::Item | Root::Index) {
                    out.push((
                        format!("{at}.for_each.items"),
                        format!("{r}: the items cannot name the item itself"),
                    ));
                }
                refs.push((format!("{at}.for_each.items"), r));
            }
        }
        for (field, r) in refs {
            match &r.root {
                Root::Output(s) | Root::Status(s) if s == &step.id => {
                    out.push((field, format!("{r}: a step cannot use its own output")));
                }
                Root::Output(s) | Root::Status(s) if !ids.contains_key(s.as_str()) => {
                    out.push((field, format!("{r}: no step has id {s:?}")));
                }
                Root::Item | Root::Index
                    if step.for_each.is_none() && !field.ends_with(".for_each.items") =>
                {
                    out.push((
                        field,
                        format!("{r}: `$item` and `$index` exist only in a step with `for_each`"),
                    ));
                }
                _ => {}
            }
        }
        if let OnError::Retry { max, .. } = step.on_error
            && !(1..=MAX_RETRIES).contains(&max)
        {
            out.push((
                format!("{at}.on_error.retry.max"),
                format!("must be 1 to {MAX_RETRIES}"),
            ));
        }
    }
    if let Err(cycle) = chain.order() {
        // Only cycles among existing steps: unknown ids are reported above.
        let on_cycle: Vec<&String> = cycle
            .iter()
            .filter(|id| ids.contains_key(id.as_str()))
            .collect();
        if !on_cycle.is_empty() {
            let first = on_cycle
                .iter()
                .filter_map(|id| ids.get(id.as_str()))
                .min()
                .copied()
                .unwrap_or(0);
            out.push((
                format!("steps[{first}]"),
                format!(
                    "steps wait for each other in a cycle: {}",
                    on_cycle
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(o) = &chain.output {
        for (p, r) in o.refs() {
            match &r.root {
                Root::Output(s) | Root::Status(s) if !ids.contains_key(s.as_str()) => {
                    out.push((format!("output{p}"), format!("{r}: no step has id {s:?}")));
                }
                Root::Item | Root::Index => out.push((
                    format!("output{p}"),
                    format!("{r}: `$item` and `$index` exist only in a step with `for_each`"),
                )),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod parse_tests;
#[cfg(test)]
mod tests;
