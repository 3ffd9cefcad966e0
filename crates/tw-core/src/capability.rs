//! Capabilities: the coarse names skills ask for (`permissions: [web_read]`) instead of tools, the
//! catalog that defines them (`config/tool_capabilities.yaml`), and the classifications that say
//! which capabilities a tool has.
//!
//! A tool is classified once and the answer is stored elsewhere with [`definition_hash`], so a
//! changed definition is classified again. The classifiers here are pure: the static map
//! ([`classify_static`]), a keyword heuristic ([`heuristic`]) and the request/answer halves of a
//! language-model classifier ([`llm`]) whose HTTP call happens in the runtime.
//!
//! The catalog is parsed strictly, unlike SKILL.md: it is our own file, so an unknown field or
//! category is an error rather than a warning, and every problem is reported with its line.
//! serde_yaml_ng's values carry no positions, so lines come from a small scan of the text that
//! records where each block-style key and list item sits ([`Lines`]); a field inside a flow
//! collection (`{ tools: [a, b] }`) is reported at the line of the nearest enclosing key.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

use crate::definition::{ToolCategory, ToolDefinition};
use crate::name::ToolName;

pub mod heuristic;
pub mod llm;

pub use heuristic::{MIN_CONFIDENCE, classify_heuristic};
pub use llm::{chat_request, parse_chat_answer};

/// The only catalog format version.
pub const CATALOG_VERSION: u64 = 1;
/// Longest capability description.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest capability name.
pub const MAX_NAME: usize = 64;

const FIELDS: &str = "description, tools, keywords, categories, writes";

/// One capability of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// Its name, as skills write it: `^[a-z][a-z0-9_]{0,63}$`.
    pub name: String,
    /// One sentence for people and for the classifying model.
    pub description: String,
    /// Tools that have it for certain (the static map).
    pub tools: Vec<String>,
    /// Lowercase single words that hint at it, for the heuristic.
    pub keywords: Vec<String>,
    /// Tool categories that usually have it, for the heuristic.
    pub categories: Vec<ToolCategory>,
    /// Whether it writes or has side effects (`Some(true)`), only reads (`Some(false)`), or
    /// either.
    pub writes: Option<bool>,
}

/// A parsed, checked capability catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    capabilities: Vec<Capability>,
    by_name: HashMap<String, usize>,
    by_tool: HashMap<String, Vec<String>>,
}

impl Catalog {
    /// Every capability, in file order.
    pub fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }

    /// The capability called `name`.
    pub fn get(&self, name: &str) -> Option<&Capability> {
        self.by_name
            .get(name)
            .and_then(|&i| self.capabilities.get(i))
    }

    /// Whether the catalog defines `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The capabilities' names, in file order.
    pub fn names(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.capabilities.iter().map(|c| c.name.as_str())
    }

    /// Capabilities the static map gives `tool` (empty if none), in catalog order.
    pub fn static_for(&self, tool: &str) -> &[String] {
        self.by_tool.get(tool).map_or(&[], Vec::as_slice)
    }
}

/// One problem in a catalog file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogError {
    /// 1-based line.
    pub line: usize,
    /// The field at fault (`capabilities.web_read.tools[1]`), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for CatalogError {}

/// Who decided a classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The catalog's static map.
    Static,
    /// A language model.
    Llm,
    /// The keyword heuristic.
    Heuristic,
    /// An administrator's override.
    Admin,
}

impl Source {
    /// Every source, in declaration order (the order `Ord` uses; it is not a precedence).
    pub const ALL: &'static [Source] = &[
        Source::Static,
        Source::Llm,
        Source::Heuristic,
        Source::Admin,
    ];

    /// The snake_case spelling used on the wire and in storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Static => "static",
            Source::Llm => "llm",
            Source::Heuristic => "heuristic",
            Source::Admin => "admin",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Source {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Source::ALL
            .iter()
            .copied()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown classification source {s:?}: expected one of static, llm, heuristic, admin"
                )
            })
    }
}

/// One capability given to a tool, with how sure the classifier is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assigned {
    /// The capability's name.
    pub capability: String,
    /// From 0 to 1; the static map and administrators give 1.
    pub confidence: f32,
}

/// The capabilities one classifier gave one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    /// Who decided.
    pub source: Source,
    /// What it decided, most confident first; empty: no capability.
    pub capabilities: Vec<Assigned>,
    /// Why: the model's name, the heuristic's signals, an administrator's note.
    pub detail: Option<String>,
}

impl Classification {
    /// Whether `capability` is among the assigned ones.
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|a| a.capability == capability)
    }
}

/// Static classification if the catalog's map names the tool (confidence 1.0), else `None`.
pub fn classify_static(tool: &str, catalog: &Catalog) -> Option<Classification> {
    let names = catalog.static_for(tool);
    if names.is_empty() {
        return None;
    }
    Some(Classification {
        source: Source::Static,
        capabilities: names
            .iter()
            .map(|name| Assigned {
                capability: name.clone(),
                confidence: 1.0,
            })
            .collect(),
        detail: None,
    })
}

/// The classification that needs no model: the static map's when it names the tool, else the
/// heuristic's.
pub fn classify_offline(def: &ToolDefinition, catalog: &Catalog) -> Classification {
    classify_static(def.name.as_str(), catalog).unwrap_or_else(|| classify_heuristic(def, catalog))
}

/// A stable hex SHA-256 fingerprint of what classification looks at: name, description,
/// category, group, parameters schema and output schema. Schemas are written with their keys
/// sorted, so reordering keys does not change it. A changed fingerprint means "classify again".
pub fn definition_hash(def: &ToolDefinition) -> String {
    let mut doc = String::from("toolwarden-capability-input-v1\n");
    let fields = [
        ("name", Value::String(def.name.as_str().to_owned())),
        ("description", Value::String(def.description.clone())),
        ("category", Value::String(def.category.as_str().to_owned())),
        ("group", Value::String(def.group.as_str().to_owned())),
    ];
    doc.push('{');
    for (name, value) in &fields {
        crate::fingerprint::canonical_json(&Value::String((*name).to_owned()), &mut doc);
        doc.push(':');
        crate::fingerprint::canonical_json(value, &mut doc);
        doc.push(',');
    }
    doc.push_str("\"parameters\":");
    crate::fingerprint::canonical_json(def.parameters.value(), &mut doc);
    doc.push_str(",\"output_schema\":");
    match &def.output_schema {
        Some(schema) => crate::fingerprint::canonical_json(schema.value(), &mut doc),
        None => doc.push_str("null"),
    }
    doc.push('}');
    crate::fingerprint::sha256_hex(doc.as_bytes())
}

/// Whether `name` is a valid capability name.
pub fn check_capability_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let ok = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.len() <= MAX_NAME
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "capability name {name:?} must match ^[a-z][a-z0-9_]{{0,63}}$"
        ))
    }
}

/// Parses and checks a catalog. Every problem found is returned, sorted by line.
pub fn parse_catalog(text: &str) -> Result<Catalog, Vec<CatalogError>> {
    let yaml: Yaml = match serde_yaml_ng::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let message = e.to_string();
            // serde_yaml_ng places a duplicate key at the start of its mapping; the second
            // occurrence is what the author needs to see.
            let repeated = message
                .contains("duplicate entry")
                .then(|| Lines::scan(text).repeated.first().copied())
                .flatten();
            // libyaml's own line can name one the file does not have (a lone `\r` breaks its
            // lines, the end of the stream sits on a line of its own); its byte index is exact.
            let line = repeated.unwrap_or_else(|| {
                e.location()
                    .map_or(1, |l| crate::load::line_col(text, l.index()).0)
            });
            return Err(vec![CatalogError {
                line,
                field: None,
                message: format!(
                    "not valid YAML: {}",
                    crate::load::without_positions(&message)
                ),
            }]);
        }
    };
    let mut r = Report {
        lines: Lines::scan(text),
        errors: Vec::new(),
    };
    let capabilities = build(&yaml, &mut r);
    if !r.errors.is_empty() {
        let mut errors = r.errors;
        errors.sort_by(|a, b| a.line.cmp(&b.line).then_with(|| a.field.cmp(&b.field)));
        return Err(errors);
    }
    let mut by_name = HashMap::new();
    let mut by_tool: HashMap<String, Vec<String>> = HashMap::new();
    for (i, c) in capabilities.iter().enumerate() {
        by_name.insert(c.name.clone(), i);
        for tool in &c.tools {
            by_tool
                .entry(tool.clone())
                .or_default()
                .push(c.name.clone());
        }
    }
    Ok(Catalog {
        capabilities,
        by_name,
        by_tool,
    })
}

/// One step of a path into the document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

type Path = Vec<Seg>;

fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// The line of each block-style key and list item, by path. Good enough for the catalog's
/// shape; anything it cannot place falls back to the nearest enclosing key it could.
struct Lines {
    by_path: HashMap<Path, usize>,
    /// Lines of keys seen a second time under the same parent, in file order.
    repeated: Vec<usize>,
}

struct Open {
    indent: usize,
    seg: Seg,
    item: bool,
}

impl Lines {
    fn scan(text: &str) -> Self {
        let mut by_path: HashMap<Path, usize> = HashMap::new();
        let mut repeated = Vec::new();
        let mut counters: HashMap<Path, usize> = HashMap::new();
        let mut stack: Vec<Open> = Vec::new();
        // Lines deeper than this belong to a block scalar.
        let mut block_scalar: Option<usize> = None;
        // Open brackets of a flow collection continuing over lines.
        let mut flow_depth: i64 = 0;
        for (n, raw) in (1..).zip(text.lines()) {
            let content = raw.trim_start_matches(' ');
            let indent = raw.len() - content.len();
            if flow_depth > 0 {
                flow_depth += bracket_delta(content);
                continue;
            }
            if content.trim().is_empty() || content.starts_with('#') {
                continue;
            }
            if let Some(scalar_indent) = block_scalar {
                if indent > scalar_indent {
                    continue;
                }
                block_scalar = None;
            }
            if indent == 0 && (content.starts_with("---") || content.starts_with("...")) {
                stack.clear();
                continue;
            }
            let (mut indent, mut content) = (indent, content);
            let mut value_start = None;
            if content == "-" || content.starts_with("- ") {
                while stack
                    .last()
                    .is_some_and(|o| o.indent > indent || (o.item && o.indent == indent))
                {
                    stack.pop();
                }
                let parent: Path = stack.iter().map(|o| o.seg.clone()).collect();
                let counter = counters.entry(parent.clone()).or_insert(0);
                let index = *counter;
                *counter += 1;
                let mut path = parent;
                path.push(Seg::Index(index));
                by_path.entry(path).or_insert(n);
                stack.push(Open {
                    indent,
                    seg: Seg::Index(index),
                    item: true,
                });
                let rest = content.get(1..).unwrap_or("");
                let inner = rest.trim_start_matches(' ');
                indent += 1 + rest.len() - inner.len();
                content = inner;
                value_start = Some(content);
            }
            if let Some((key, rest)) = split_key(content) {
                while stack.last().is_some_and(|o| o.indent >= indent) {
                    stack.pop();
                }
                stack.push(Open {
                    indent,
                    seg: Seg::Key(key),
                    item: false,
                });
                let path: Path = stack.iter().map(|o| o.seg.clone()).collect();
                match by_path.entry(path) {
                    Entry::Vacant(e) => {
                        e.insert(n);
                    }
                    Entry::Occupied(_) => repeated.push(n),
                }
                value_start = Some(rest.trim_start());
            }
            if let Some(value) = value_start {
                if value.starts_with('|') || value.starts_with('>') {
                    block_scalar = Some(indent);
                } else if value.starts_with('[') || value.starts_with('{') {
                    flow_depth = bracket_delta(value).max(0);
                }
            }
        }
        Self { by_path, repeated }
    }

    /// The line of `path`, or of its nearest ancestor that has one, or 1.
    fn line_of(&self, path: &[Seg]) -> usize {
        let mut end = path.len();
        loop {
            if let Some(line) = path.get(..end).and_then(|p| self.by_path.get(p)) {
                return *line;
            }
            if end == 0 {
                return 1;
            }
            end -= 1;
        }
    }
}

/// A block mapping key at the start of `content`, and what follows its `:`.
fn split_key(content: &str) -> Option<(String, &str)> {
    let first = content.chars().next()?;
    if first == '"' || first == '\'' {
        let mut escaped = false;
        let mut end = None;
        for (i, c) in content.char_indices().skip(1) {
            if escaped {
                escaped = false;
            } else if c == '\\' && first == '"' {
                escaped = true;
            } else if c == first {
                end = Some(i);
                break;
            }
        }
        let end = end?;
        let key = content.get(1..end)?;
        let after = content.get(end + 1..)?.trim_start_matches(' ');
        let rest = after.strip_prefix(':')?;
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            return None;
        }
        return Some((key.to_owned(), rest));
    }
    if matches!(
        first,
        '[' | '{' | '#' | '&' | '*' | '!' | '|' | '>' | '%' | '@' | '`' | ',' | '?'
    ) {
        return None;
    }
    let bytes = content.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && i > 0 && bytes.get(i - 1).is_some_and(|p| *p == b' ') {
            return None;
        }
        if b == b':' {
            let next = bytes.get(i + 1);
            if next.is_none() || next.is_some_and(|n| *n == b' ' || *n == b'\t') {
                let key = content.get(..i)?.trim_end();
                let rest = content.get(i + 1..)?;
                return Some((key.to_owned(), rest));
            }
        }
    }
    None
}

/// Net count of flow brackets opened on a line, ignoring quoted text and comments.
fn bracket_delta(s: &str) -> i64 {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for c in s.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '#' if prev == ' ' => break,
                '[' | '{' => depth += 1,
                ']' | '}' => depth -= 1,
                _ => {}
            },
        }
        prev = c;
    }
    depth
}

struct Report {
    lines: Lines,
    errors: Vec<CatalogError>,
}

impl Report {
    fn error(&mut self, path: &[Seg], message: impl Into<String>) {
        self.errors.push(CatalogError {
            line: self.lines.line_of(path),
            field: (!path.is_empty()).then(|| render(path)),
            message: message.into(),
        });
    }
}

fn kind(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "empty",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

fn key(path: &[Seg], k: &str) -> Path {
    let mut p = path.to_vec();
    p.push(Seg::Key(k.to_owned()));
    p
}

fn index(path: &[Seg], i: usize) -> Path {
    let mut p = path.to_vec();
    p.push(Seg::Index(i));
    p
}

fn build(yaml: &Yaml, r: &mut Report) -> Vec<Capability> {
    let map = match yaml {
        Yaml::Mapping(m) => m,
        Yaml::Null => {
            r.error(
                &[],
                "the catalog is empty; it needs `version: 1` and `capabilities`",
            );
            return Vec::new();
        }
        other => {
            r.error(
                &[],
                format!(
                    "the catalog must be a mapping with `version` and `capabilities`, not {}",
                    kind(other)
                ),
            );
            return Vec::new();
        }
    };
    let mut version_seen = false;
    let mut capabilities_seen = false;
    let mut out = Vec::new();
    for (k, v) in map {
        let Some(k) = k.as_str() else {
            r.error(
                &[],
                format!("top-level keys must be strings, not {}", kind(k)),
            );
            continue;
        };
        let path = key(&[], k);
        match k {
            "version" => {
                version_seen = true;
                if v.as_u64() != Some(CATALOG_VERSION) {
                    let got = match v {
                        Yaml::Number(n) => n.to_string(),
                        Yaml::String(s) => format!("{s:?}"),
                        other => kind(other).to_owned(),
                    };
                    r.error(&path, format!("must be {CATALOG_VERSION}, got {got}"));
                }
            }
            "capabilities" => {
                capabilities_seen = true;
                out = capabilities(v, &path, r);
            }
            other => r.error(
                &path,
                format!("unknown field {other:?}; expected version or capabilities"),
            ),
        }
    }
    if !version_seen {
        r.error(&[], "the required field `version` is missing");
    }
    if !capabilities_seen {
        r.error(&[], "the required field `capabilities` is missing");
    }
    out
}

fn capabilities(v: &Yaml, path: &[Seg], r: &mut Report) -> Vec<Capability> {
    let map = match v {
        Yaml::Mapping(m) => m,
        Yaml::Null => {
            r.error(path, "the catalog declares no capabilities");
            return Vec::new();
        }
        other => {
            r.error(
                path,
                format!("must be a mapping of capability names, not {}", kind(other)),
            );
            return Vec::new();
        }
    };
    if map.is_empty() {
        r.error(path, "the catalog declares no capabilities");
    }
    let mut out = Vec::new();
    for (k, v) in map {
        let Some(name) = k.as_str() else {
            r.error(
                path,
                format!("capability names must be strings, not {}", kind(k)),
            );
            continue;
        };
        let at = key(path, name);
        if let Err(e) = check_capability_name(name) {
            r.error(&at, e);
        }
        if let Some(c) = capability(name, v, &at, r) {
            out.push(c);
        }
    }
    out
}

fn capability(name: &str, v: &Yaml, path: &[Seg], r: &mut Report) -> Option<Capability> {
    let Yaml::Mapping(map) = v else {
        r.error(
            path,
            format!("must be a mapping with {FIELDS}, not {}", kind(v)),
        );
        return None;
    };
    let mut c = Capability {
        name: name.to_owned(),
        description: String::new(),
        tools: Vec::new(),
        keywords: Vec::new(),
        categories: Vec::new(),
        writes: None,
    };
    let mut described = false;
    for (k, v) in map {
        let Some(field) = k.as_str() else {
            r.error(
                path,
                format!("field names must be strings, not {}", kind(k)),
            );
            continue;
        };
        let at = key(path, field);
        match field {
            "description" => {
                described = true;
                description(v, &at, r, &mut c);
            }
            "tools" => {
                for (i, tool) in strings(v, &at, r) {
                    let at = index(&at, i);
                    if let Err(e) = ToolName::new(&tool) {
                        r.error(&at, e.to_string());
                    } else if c.tools.contains(&tool) {
                        r.error(&at, format!("tool {tool:?} is listed twice"));
                    } else {
                        c.tools.push(tool);
                    }
                }
            }
            "keywords" => {
                for (i, word) in strings(v, &at, r) {
                    let at = index(&at, i);
                    let ok = !word.is_empty()
                        && word.len() <= 64
                        && word
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                    if !ok {
                        r.error(
                            &at,
                            format!(
                                "keyword {word:?} must be one word of lowercase letters and digits"
                            ),
                        );
                    } else if !c.keywords.contains(&word) {
                        c.keywords.push(word);
                    }
                }
            }
            "categories" => {
                for (i, s) in strings(v, &at, r) {
                    match s.parse::<ToolCategory>() {
                        Ok(cat) if !c.categories.contains(&cat) => c.categories.push(cat),
                        Ok(_) => {}
                        Err(e) => r.error(&index(&at, i), e),
                    }
                }
            }
            "writes" => match v {
                Yaml::Bool(b) => c.writes = Some(*b),
                Yaml::Null => {}
                other => r.error(&at, format!("must be true or false, not {}", kind(other))),
            },
            other => r.error(
                &at,
                format!("unknown field {other:?}; a capability has {FIELDS}"),
            ),
        }
    }
    if !described {
        r.error(path, "the required field `description` is missing");
    }
    Some(c)
}

fn description(v: &Yaml, at: &[Seg], r: &mut Report, c: &mut Capability) {
    let Yaml::String(s) = v else {
        r.error(at, format!("must be a string, not {}", kind(v)));
        return;
    };
    let n = s.trim().chars().count();
    if n == 0 || n > MAX_DESCRIPTION {
        r.error(
            at,
            format!("must be 1 to {MAX_DESCRIPTION} characters (it has {n})"),
        );
    }
    c.description = s.trim().to_owned();
}

/// A list of strings with their indexes; bad entries are reported and skipped.
fn strings(v: &Yaml, at: &[Seg], r: &mut Report) -> Vec<(usize, String)> {
    match v {
        Yaml::Null => Vec::new(),
        Yaml::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Yaml::String(s) => Some((i, s.clone())),
                other => {
                    r.error(
                        &index(at, i),
                        format!("must be a string, not {}", kind(other)),
                    );
                    None
                }
            })
            .collect(),
        other => {
            r.error(
                at,
                format!("must be a list of strings, not {}", kind(other)),
            );
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests;
