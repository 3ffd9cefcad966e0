//! The keyword heuristic: classifies a tool the static map does not know when no model is
//! configured (or the model's answer was unusable), from words alone.
//!
//! How it scores, per capability:
//! - **Evidence**: each of the capability's `keywords` found in the tool's name (1.5), description
//!   (1.0), parameter names (0.75) or group (0.75), each place counted once per keyword. Words
//!   match after a light stemming, so `files`, `searching` and `queries` find `file`, `search` and
//!   `query`.
//! - **Reinforcement**, only when the evidence is at least 1.0 (a parameter name alone is too
//!   little): the tool's category is one of the capability's `categories` (+1.0); a parameter
//!   hint (a `format: uri`, a property called `path` or `sql`) points at one of them (+0.75 per
//!   hinted category).
//! - **Direction**: write verbs (write, delete, send, put, ...) against read verbs (read, get,
//!   list, fetch, ...) in the name (counted twice) and description, plus declared side effects and
//!   "read-only". A capability whose `writes` agrees gains (+1.0 for writes, +0.5 for reads); one
//!   that disagrees keeps a fifth of its score.
//!
//! The score becomes a confidence of `0.95 * (1 - e^(-score / 2.5))`, rounded to hundredths: one
//! keyword in the name alone (0.43) passes [`MIN_CONFIDENCE`], one in the description alone (0.31)
//! does not, and a category or a direction never creates a match by itself. Everything is
//! computed from sorted, deduplicated inputs, so the same definition and catalog give the same
//! answer whatever order the catalog lists its capabilities in.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Assigned, Capability, Catalog, Classification, Source};
use crate::definition::{ToolCategory, ToolDefinition};

/// The lowest confidence the heuristic keeps.
pub const MIN_CONFIDENCE: f32 = 0.35;
/// The most capabilities the heuristic gives one tool.
pub const MAX_CAPABILITIES: usize = 3;

/// Keyword evidence below this gives nothing: one parameter name alone is not enough.
const MIN_EVIDENCE: f64 = 1.0;
const NAME_WEIGHT: f64 = 1.5;
const DESCRIPTION_WEIGHT: f64 = 1.0;
const PARAMETER_WEIGHT: f64 = 0.75;
const GROUP_WEIGHT: f64 = 0.75;
const CATEGORY_BONUS: f64 = 1.0;
const HINT_BONUS: f64 = 0.75;
const WRITE_AGREES: f64 = 1.0;
const READ_AGREES: f64 = 0.5;
const OPPOSITE: f64 = 0.2;
const SCALE: f64 = 2.5;
const CEILING: f64 = 0.95;

/// Most description words looked at; descriptions are at most 4096 characters anyway.
const MAX_WORDS: usize = 1024;
/// Most schema nodes looked at, so a huge schema costs a bounded amount.
const MAX_NODES: usize = 512;
const MAX_DEPTH: usize = 16;

const WRITE_VERBS: &[&str] = &[
    "write",
    "delete",
    "create",
    "update",
    "insert",
    "send",
    "post",
    "remove",
    "put",
    "upload",
    "modify",
    "edit",
    "save",
    "drop",
    "append",
    "move",
    "rename",
    "patch",
    "publish",
    "deploy",
    "kill",
    "truncate",
    "overwrite",
    "mkdir",
    "rm",
    "replace",
    "upsert",
    "commit",
    "push",
    "submit",
];

const READ_VERBS: &[&str] = &[
    "read", "get", "list", "fetch", "search", "query", "show", "select", "find", "view",
    "describe", "inspect", "lookup", "download", "browse", "count", "stat", "readonly",
];

/// Which way a tool seems to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
    Unknown,
}

/// What a definition offers the heuristic, computed once per classification.
struct Signals {
    name: BTreeSet<String>,
    description: BTreeSet<String>,
    /// Stemmed parameter-name token → the first pointer it was seen at.
    parameters: BTreeMap<String, String>,
    group: BTreeSet<String>,
    /// Hinted category → what hinted it.
    hints: BTreeMap<ToolCategory, BTreeSet<String>>,
    category: ToolCategory,
    direction: Direction,
    direction_why: Vec<String>,
}

/// Classifies `def` from keywords; deterministic, source [`Source::Heuristic`]. `detail` lists the
/// signals that counted for each capability kept, and the direction.
pub fn classify_heuristic(def: &ToolDefinition, catalog: &Catalog) -> Classification {
    let signals = Signals::of(def);
    let mut scored: Vec<(f32, &str, Vec<String>)> = catalog
        .capabilities()
        .iter()
        .filter_map(|c| {
            let (score, why) = score(c, &signals);
            let confidence = confidence(score);
            (confidence >= MIN_CONFIDENCE).then_some((confidence, c.name.as_str(), why))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.truncate(MAX_CAPABILITIES);
    let mut detail: Vec<String> = scored
        .iter()
        .map(|(c, name, why)| format!("{name} {c:.2} ({})", why.join(", ")))
        .collect();
    if detail.is_empty() {
        detail.push(format!("no capability reached {MIN_CONFIDENCE}"));
    }
    if signals.direction != Direction::Unknown {
        let way = if signals.direction == Direction::Read {
            "read"
        } else {
            "write"
        };
        detail.push(format!(
            "direction {way} ({})",
            signals.direction_why.join(", ")
        ));
    }
    Classification {
        source: Source::Heuristic,
        capabilities: scored
            .into_iter()
            .map(|(confidence, name, _)| Assigned {
                capability: name.to_owned(),
                confidence,
            })
            .collect(),
        detail: Some(detail.join("; ")),
    }
}

fn confidence(score: f64) -> f32 {
    if score.is_nan() || score <= 0.0 {
        return 0.0;
    }
    let c = CEILING * (1.0 - (-score / SCALE).exp());
    // Rounded so stored and displayed confidences agree; f32 holds hundredths exactly enough.
    ((c * 100.0).round() / 100.0) as f32
}

fn score(c: &Capability, s: &Signals) -> (f64, Vec<String>) {
    let mut evidence = 0.0;
    let mut why: Vec<String> = Vec::new();
    // Stem → the keyword as the catalog spells it, for the explanation.
    let keywords: BTreeMap<String, &str> =
        c.keywords.iter().map(|k| (stem(k), k.as_str())).collect();
    let places = [
        ("name", NAME_WEIGHT, &s.name),
        ("description", DESCRIPTION_WEIGHT, &s.description),
        ("group", GROUP_WEIGHT, &s.group),
    ];
    for (place, weight, words) in places {
        for (kw, spelled) in &keywords {
            if words.contains(kw) {
                evidence += weight;
                why.push(format!("{place} {spelled}"));
            }
        }
    }
    for (kw, spelled) in &keywords {
        if let Some(at) = s.parameters.get(kw) {
            evidence += PARAMETER_WEIGHT;
            why.push(format!("parameter {spelled} at {at}"));
        }
    }
    if evidence < MIN_EVIDENCE {
        return (0.0, Vec::new());
    }
    let mut score = evidence;
    if c.categories.contains(&s.category) {
        score += CATEGORY_BONUS;
        why.push(format!("category {}", s.category));
    }
    for (category, what) in &s.hints {
        if c.categories.contains(category) {
            score += HINT_BONUS;
            for w in what {
                if !why.contains(w) {
                    why.push(w.clone());
                }
            }
        }
    }
    match (c.writes, s.direction) {
        (Some(true), Direction::Write) => {
            score += WRITE_AGREES;
            why.push("writes".to_owned());
        }
        (Some(false), Direction::Read) => {
            score += READ_AGREES;
            why.push("reads".to_owned());
        }
        (Some(true), Direction::Read) => {
            score *= OPPOSITE;
            why.push("but the tool reads".to_owned());
        }
        (Some(false), Direction::Write) => {
            score *= OPPOSITE;
            why.push("but the tool writes".to_owned());
        }
        _ => {}
    }
    (score, why)
}

impl Signals {
    fn of(def: &ToolDefinition) -> Self {
        let name_words = split_words(def.name.as_str());
        let description_words: Vec<String> = split_words(&def.description)
            .into_iter()
            .take(MAX_WORDS)
            .collect();
        let mut parameters = BTreeMap::new();
        let mut hints = BTreeMap::new();
        let mut nodes = 0;
        walk(
            def.parameters.value(),
            "",
            0,
            &mut nodes,
            &mut parameters,
            &mut hints,
        );
        for token in split_words(def.group.as_str()) {
            if let Some(category) = group_hint(&token) {
                hints
                    .entry(category)
                    .or_default()
                    .insert(format!("group {}", def.group));
            }
        }
        let (direction, direction_why) = direction(
            &name_words,
            &description_words,
            def.constraints.side_effects,
        );
        Self {
            name: name_words.iter().map(|w| stem(w)).collect(),
            description: description_words.iter().map(|w| stem(w)).collect(),
            parameters,
            group: split_words(def.group.as_str())
                .iter()
                .map(|w| stem(w))
                .collect(),
            hints,
            category: def.category,
            direction,
            direction_why,
        }
    }
}

fn direction(
    name: &[String],
    description: &[String],
    side_effects: bool,
) -> (Direction, Vec<String>) {
    let mut write = 0.0;
    let mut read = 0.0;
    let mut why = BTreeSet::new();
    let mut count = |words: &[String], weight: f64, place: &str| {
        let stems: BTreeSet<String> = words.iter().map(|w| stem(w)).collect();
        for verb in WRITE_VERBS {
            if stems.contains(&stem(verb)) {
                write += weight;
                why.insert(format!("{place} {verb}"));
            }
        }
        for verb in READ_VERBS {
            if stems.contains(&stem(verb)) {
                read += weight;
                why.insert(format!("{place} {verb}"));
            }
        }
        // "read-only", "read only"
        if words.windows(2).any(|w| w[0] == "read" && w[1] == "only") {
            read += 2.0;
            why.insert(format!("{place} read-only"));
        }
    };
    count(name, 2.0, "name");
    count(description, 1.0, "description");
    if side_effects {
        write += 1.5;
        why.insert("side effects".to_owned());
    }
    let direction = if write > read {
        Direction::Write
    } else if read > write {
        Direction::Read
    } else {
        Direction::Unknown
    };
    (direction, why.into_iter().collect())
}

/// Records parameter-name tokens and format hints, depth-first in document order.
fn walk(
    node: &Value,
    pointer: &str,
    depth: usize,
    nodes: &mut usize,
    parameters: &mut BTreeMap<String, String>,
    hints: &mut BTreeMap<ToolCategory, BTreeSet<String>>,
) {
    *nodes += 1;
    if *nodes > MAX_NODES || depth > MAX_DEPTH {
        return;
    }
    let Value::Object(map) = node else {
        return;
    };
    if let Some(Value::String(format)) = map.get("format") {
        let format = format.to_ascii_lowercase();
        if let Some(category) = format_hint(&format) {
            let at = if pointer.is_empty() { "/" } else { pointer };
            for c in category {
                hints
                    .entry(*c)
                    .or_default()
                    .insert(format!("format {format} at {at}"));
            }
        }
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, schema) in properties {
            let at = format!("{pointer}/properties/{}", escape_pointer(name));
            for token in split_words(name) {
                if let Some(categories) = parameter_hint(&token) {
                    for c in categories {
                        hints
                            .entry(*c)
                            .or_default()
                            .insert(format!("parameter {token} at {at}"));
                    }
                }
                parameters.entry(stem(&token)).or_insert_with(|| at.clone());
            }
            walk(schema, &at, depth + 1, nodes, parameters, hints);
        }
    }
    if let Some(items) = map.get("items") {
        walk(
            items,
            &format!("{pointer}/items"),
            depth + 1,
            nodes,
            parameters,
            hints,
        );
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(options)) = map.get(key) {
            for (i, option) in options.iter().enumerate() {
                walk(
                    option,
                    &format!("{pointer}/{key}/{i}"),
                    depth + 1,
                    nodes,
                    parameters,
                    hints,
                );
            }
        }
    }
}

fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn format_hint(format: &str) -> Option<&'static [ToolCategory]> {
    match format {
        "uri" | "url" | "iri" | "uri-reference" | "iri-reference" | "uri-template" | "hostname"
        | "idn-hostname" => Some(&[ToolCategory::Network, ToolCategory::ExternalApi]),
        "email" | "idn-email" => Some(&[ToolCategory::Communication]),
        _ => None,
    }
}

fn parameter_hint(token: &str) -> Option<&'static [ToolCategory]> {
    match token {
        "url" | "uri" | "href" | "endpoint" | "host" | "hostname" => {
            Some(&[ToolCategory::Network, ToolCategory::ExternalApi])
        }
        "path" | "paths" | "file" | "files" | "filename" | "filepath" | "dir" | "directory"
        | "folder" | "glob" => Some(&[ToolCategory::FileSystem]),
        "sql" | "table" | "database" | "db" => Some(&[ToolCategory::Database]),
        "command" | "cmd" | "script" | "code" | "argv" => Some(&[ToolCategory::CodeExecution]),
        "email" | "recipient" | "recipients" | "channel" => Some(&[ToolCategory::Communication]),
        _ => None,
    }
}

fn group_hint(token: &str) -> Option<ToolCategory> {
    match token {
        "fs" | "file" | "files" => Some(ToolCategory::FileSystem),
        "net" | "web" | "http" => Some(ToolCategory::Network),
        "db" | "sql" | "database" => Some(ToolCategory::Database),
        _ => None,
    }
}

/// Lowercase words of `s`, split on anything but letters and digits. A word with camelCase humps
/// also gives its parts (`HTTPFetch` → `httpfetch`, `http`, `fetch`), so both a brand written as
/// one word (`GitHub`) and an identifier (`getPage`) are found. Digits stay with their word.
pub fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    for run in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|r| !r.is_empty())
    {
        let parts = humps(run);
        words.push(run.to_lowercase());
        if parts.len() > 1 {
            words.extend(parts);
        }
    }
    words
}

/// The camelCase parts of an alphanumeric run, lowercased.
fn humps(run: &str) -> Vec<String> {
    let chars: Vec<char> = run.chars().collect();
    let mut parts = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && !current.is_empty() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let next = chars.get(i + 1).copied();
            let hump = prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || (prev.is_some_and(char::is_uppercase) && next.is_some_and(char::is_lowercase));
            if hump {
                parts.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// A light stemmer, the same on both sides of every comparison: `queries` → `query`,
/// `searches` → `search`, `files`/`file` → `fil`, `fetched` → `fetch`, `writing`/`write` → `writ`.
pub fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    if w.chars().count() <= 3 {
        return w;
    }
    // A suffix comes off only if at least three characters remain.
    let strip = |word: &str, suffix: &str| -> Option<String> {
        let rest = word.strip_suffix(suffix)?;
        (rest.chars().count() >= 3).then(|| rest.to_owned())
    };
    let drop_e = |word: String| strip(&word, "e").unwrap_or(word);
    if let Some(rest) = strip(&w, "ies") {
        return format!("{rest}y");
    }
    if let Some(rest) = strip(&w, "ing").or_else(|| strip(&w, "ed")) {
        return drop_e(rest);
    }
    if ["sses", "ches", "shes", "xes"]
        .iter()
        .any(|s| w.ends_with(s))
        && let Some(rest) = strip(&w, "es")
    {
        return rest;
    }
    if !w.ends_with("ss")
        && !w.ends_with("us")
        && let Some(rest) = strip(&w, "s")
    {
        return drop_e(rest);
    }
    drop_e(w)
}
