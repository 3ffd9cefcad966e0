//! SKILL.md: a skill's manifest, parsed from the YAML front matter of the open Agent Skills format
//! (`name`, `description`, `license`, `compatibility`, `metadata`, `allowed-tools`) plus
//! Toolwarden's tool-manifest fields (`version`, `triggers`, `tools`, `inherit_tools_from`,
//! `permissions`, `chains`), and the Markdown body after it.
//!
//! Parsing never stops at the first problem and never panics: it returns the manifest it could
//! build (none if an error makes the skill unusable) and every diagnostic, each with the line it
//! is about, so one broken skill is reported precisely and does not stop the others from loading.
//! Unknown fields are warnings: the format grows, and a skill written for a newer tool should
//! still load. An error in one of its `chains` leaves that chain out, not the skill: the skill's
//! tools mean the same without it.

use std::collections::BTreeMap;

use serde_yaml_ng::{Mapping, Value as Yaml};

use crate::chain::ChainSource;
use crate::policy::access::AccessLevel;

pub mod envelope;
pub mod map;

pub use envelope::{
    CapabilityIndex, Envelopes, OverrideAction, Overrides, Reach, SKILL_DENIED, SkillJudgement,
    SkillOverride, Via,
};
pub use map::{DomainRules, MapProblem, Provenance, Refusal, ResolvedTool, SkillMap};

/// Longest `name`.
pub const MAX_NAME: usize = 64;
/// Longest `description`.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest `compatibility`.
pub const MAX_COMPATIBILITY: usize = 500;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The skill cannot be used as written.
    Error,
    /// The skill loads; something in it is ignored or suspicious.
    Warning,
}

/// One problem in a SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// 1-based line in the file.
    pub line: usize,
    /// The field at fault (`tools[1].access_level`), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl Diagnostic {
    /// Whether it is about the skill's `chains`, whose errors leave a chain out, not the skill.
    pub fn is_about_chains(&self) -> bool {
        self.field
            .as_deref()
            .is_some_and(|f| f == "chains" || f.starts_with("chains.") || f.starts_with("chains["))
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "line {}: {level}: ", self.line)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// A per-skill rate limit on one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkillRate {
    /// Calls a minute.
    pub per_minute: Option<u32>,
    /// Calls an hour.
    pub per_hour: Option<u32>,
}

/// A tool a skill may use, and how.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkillTool {
    /// The tool's name (or `group:NAME`).
    pub name: String,
    /// The highest access level the skill may use it at; `None`: standard.
    pub access_level: Option<AccessLevel>,
    /// Its rate limit under this skill.
    pub rate_limit: Option<SkillRate>,
    /// Hosts it may reach under this skill (empty: no narrowing).
    pub allowed_domains: Vec<String>,
    /// Hosts it may not reach under this skill.
    pub blocked_domains: Vec<String>,
}

/// A parsed SKILL.md.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SkillManifest {
    /// Its name, equal to its folder's.
    pub name: String,
    /// What it is for (not empty; over 1024 characters is a warning).
    pub description: String,
    /// Its license.
    pub license: Option<String>,
    /// What it needs from its environment (over 500 characters is a warning).
    pub compatibility: Option<String>,
    /// Free string properties.
    pub metadata: BTreeMap<String, String>,
    /// The Agent Skills `allowed-tools` list (space-delimited in the file).
    pub allowed_tools: Vec<String>,
    /// Its version.
    pub version: Option<String>,
    /// Phrases or events that activate it.
    pub triggers: Vec<String>,
    /// The tools it may use.
    pub tools: Vec<SkillTool>,
    /// Skills whose tools it also gets.
    pub inherit_tools_from: Vec<String>,
    /// Capability names its tools are resolved from.
    pub permissions: Vec<String>,
    /// Its tool chains without errors (a chain with one is left out, and said so). Not
    /// serialized: a chain is written back as YAML (`Chain::to_yaml`), not as a manifest field.
    #[serde(skip)]
    pub chains: Vec<ChainSource>,
    /// The Markdown after the front matter.
    pub body: String,
    /// Line of the body's first line.
    pub body_line: usize,
}

/// What parsing a SKILL.md gives.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillParse {
    /// The manifest, unless an error makes the skill unusable (one about its `chains` does
    /// not: [`Diagnostic::is_about_chains`]).
    pub manifest: Option<SkillManifest>,
    /// Every problem found, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

impl SkillParse {
    /// Whether there is an error among the diagnostics.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Whether `name` is a valid skill name: 1-64 lowercase letters, digits and hyphens, not starting
/// or ending with a hyphen.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("must be 1 to {MAX_NAME} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("may only contain lowercase letters, digits and hyphens".to_owned());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must not start or end with a hyphen".to_owned());
    }
    Ok(())
}

/// Collects diagnostics with the line each field is on.
struct Report {
    /// Line of each top-level key of the front matter.
    key_lines: BTreeMap<String, usize>,
    /// The front matter's lines, the first being line `start + 1`.
    lines: Vec<String>,
    /// Line of the opening `---`.
    start: usize,
    diagnostics: Vec<Diagnostic>,
}

impl Report {
    fn line_of(&self, field: &str) -> usize {
        let key = field.split(['.', '[']).next().unwrap_or(field);
        let Some(&at) = self.key_lines.get(key) else {
            return self.start;
        };
        // `tools[2]` and `tools[2].access_level`: the item's line, and the sub-field's within it,
        // when the list is written one item per line (a flow list `[a, b]` stays on the key's).
        let Some((index, sub)) = field
            .get(key.len()..)
            .and_then(|rest| rest.strip_prefix('['))
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(i, rest)| Some((i.parse::<usize>().ok()?, rest)))
        else {
            return at;
        };
        let sub = sub
            .strip_prefix('.')
            .and_then(|s| s.split(['.', '[']).next());
        self.item_line(at, index, sub).unwrap_or(at)
    }

    /// The line of item `index` of the block list under the top-level key on line `at`, or of
    /// `sub:` inside that item.
    fn item_line(&self, at: usize, index: usize, sub: Option<&str>) -> Option<usize> {
        let first = at.checked_sub(self.start)?;
        let mut items = 0usize;
        let mut item_indent = None;
        let mut found: Option<(usize, usize)> = None;
        for (n, line) in self.lines.iter().enumerate().skip(first) {
            let number = self.start + n + 1;
            let text = line.trim_start();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let indent = line.len() - text.len();
            let is_item = text == "-" || text.starts_with("- ");
            if indent == 0 && !is_item {
                break; // the next top-level key
            }
            if is_item && item_indent.is_none_or(|i| indent <= i) {
                if found.is_some() {
                    break; // the next item
                }
                item_indent = Some(indent);
                if items == index {
                    found = Some((number, indent));
                    if let Some(sub) = sub
                        && key_is(text.trim_start_matches('-').trim_start(), sub)
                    {
                        return Some(number);
                    }
                    if sub.is_none() {
                        return Some(number);
                    }
                }
                items += 1;
                continue;
            }
            if let (Some(sub), Some(_)) = (sub, found)
                && key_is(text, sub)
            {
                return Some(number);
            }
        }
        found.map(|(number, _)| number)
    }

    fn push(&mut self, severity: Severity, field: &str, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            severity,
            line: self.line_of(field),
            field: (!field.is_empty()).then(|| field.to_owned()),
            message: message.into(),
        });
    }

    fn error(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Error, field, message);
    }

    fn warn(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Warning, field, message);
    }
}

/// Whether a YAML line starts with the key `key:`.
fn key_is(text: &str, key: &str) -> bool {
    text.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

/// The front matter (between the first two `---` lines), its first line, and the body.
fn split(text: &str) -> Result<(&str, usize, &str, usize), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err("a SKILL.md starts with a `---` line opening its YAML front matter".to_owned());
    }
    let mut offset = first.len();
    let start = offset;
    for (line, l) in (2..).zip(lines) {
        if l.trim_end() == "---" {
            let body = &text[offset + l.len()..];
            return Ok((&text[start..offset], 2, body, line + 1));
        }
        offset += l.len();
    }
    Err("the front matter is not closed by a `---` line".to_owned())
}

/// Parses a SKILL.md. `folder` is the name of the folder it is in, which `name` must equal.
pub fn parse_skill(text: &str, folder: Option<&str>) -> SkillParse {
    let fail = |line: usize, message: String| SkillParse {
        manifest: None,
        diagnostics: vec![Diagnostic {
            severity: Severity::Error,
            line,
            field: None,
            message,
        }],
    };
    let (front, front_line, body, body_line) = match split(text) {
        Ok(parts) => parts,
        Err(e) => return fail(1, e),
    };
    let yaml: Yaml = match serde_yaml_ng::from_str(front) {
        Ok(v) => v,
        Err(e) => {
            // libyaml also breaks lines at a lone `\r`, U+0085, U+2028 and U+2029, so its line
            // can lie past the front matter's `\n` lines: keep it within the front matter and
            // the `---` that closes it (where an unclosed list or quote is noticed).
            let last = front_line + front.lines().count();
            let line = e
                .location()
                .map_or(front_line, |l| front_line + l.line().saturating_sub(1))
                .min(last.max(front_line));
            let message = e.to_string();
            let message = message
                .rfind(" at line ")
                .map_or(message.as_str(), |i| &message[..i]);
            return fail(
                line,
                format!("the front matter is not valid YAML: {message}"),
            );
        }
    };
    let map = match yaml {
        Yaml::Mapping(m) => m,
        Yaml::Null => Mapping::new(),
        _ => {
            return fail(
                front_line,
                "the front matter must be a YAML mapping of fields".to_owned(),
            );
        }
    };
    let mut key_lines = BTreeMap::new();
    for (i, l) in front.lines().enumerate() {
        if let Some((key, _)) = l.split_once(':')
            && !key.is_empty()
            && !key.starts_with([' ', '\t', '#', '-'])
        {
            key_lines
                .entry(key.trim().trim_matches(['"', '\'']).to_owned())
                .or_insert(front_line + i);
        }
    }
    let mut r = Report {
        key_lines,
        lines: front.lines().map(str::to_owned).collect(),
        start: front_line - 1,
        diagnostics: Vec::new(),
    };
    let mut manifest = build(&map, folder, body, body_line, &mut r);
    let usable = !r.diagnostics.iter().any(|d| d.severity == Severity::Error);
    if map.contains_key("chains")
        && let Some(m) = &mut manifest
    {
        let last = (front_line + front.lines().count()).max(front_line);
        let (chains, diagnostics) = chains(front, front_line, &m.name);
        m.chains = chains;
        r.diagnostics.extend(diagnostics.into_iter().map(|mut d| {
            d.line = d.line.clamp(front_line, last);
            d
        }));
    }
    r.diagnostics.sort_by_key(|d| d.line);
    SkillParse {
        manifest: manifest.filter(|_| usable),
        diagnostics: r.diagnostics,
    }
}

/// A string field; other scalars are refused.
fn string(v: &Yaml, field: &str, r: &mut Report) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Null => None,
        _ => {
            r.error(field, "must be a string");
            None
        }
    }
}

/// A list of strings: a YAML list, or one string split on whitespace (`space_delimited`) or
/// taken whole.
fn strings(v: &Yaml, field: &str, space_delimited: bool, r: &mut Report) -> Vec<String> {
    match v {
        Yaml::Null => Vec::new(),
        Yaml::String(s) if space_delimited => s.split_whitespace().map(str::to_owned).collect(),
        Yaml::String(s) => vec![s.clone()],
        Yaml::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Yaml::String(s) => Some(s.clone()),
                _ => {
                    r.error(&format!("{field}[{i}]"), "must be a string");
                    None
                }
            })
            .collect(),
        _ => {
            r.error(field, "must be a list of strings");
            Vec::new()
        }
    }
}

fn build(
    map: &Mapping,
    folder: Option<&str>,
    body: &str,
    body_line: usize,
    r: &mut Report,
) -> Option<SkillManifest> {
    let mut m = SkillManifest {
        name: String::new(),
        description: String::new(),
        license: None,
        compatibility: None,
        metadata: BTreeMap::new(),
        allowed_tools: Vec::new(),
        version: None,
        triggers: Vec::new(),
        tools: Vec::new(),
        inherit_tools_from: Vec::new(),
        permissions: Vec::new(),
        chains: Vec::new(),
        body: body.to_owned(),
        body_line,
    };
    let mut seen_name = false;
    let mut seen_description = false;
    for (key, value) in map {
        let Yaml::String(key) = key else {
            r.error("", format!("field names must be strings, not {key:?}"));
            continue;
        };
        match key.as_str() {
            "name" => {
                seen_name = true;
                let Some(name) = string(value, "name", r) else {
                    if value.is_null() {
                        r.error("name", "must not be empty");
                    }
                    continue;
                };
                if let Err(e) = check_name(&name) {
                    r.error("name", format!("{name:?} {e}"));
                } else if let Some(folder) = folder
                    && folder != name
                {
                    r.error(
                        "name",
                        format!("{name:?} must equal the skill's folder name {folder:?}"),
                    );
                }
                m.name = name;
            }
            "description" => {
                seen_description = true;
                let Some(d) = string(value, "description", r) else {
                    if value.is_null() {
                        r.error("description", "must not be empty");
                    }
                    continue;
                };
                let n = d.trim().chars().count();
                if n == 0 {
                    r.error("description", "must not be empty");
                } else if n > MAX_DESCRIPTION {
                    // A soft limit: agents may cut the text, but the skill still means what it
                    // says (skills in the wild, anthropics/skills among them, go over it).
                    r.warn(
                        "description",
                        format!(
                            "is {n} characters; the Agent Skills format allows {MAX_DESCRIPTION}, \
                             and agents may cut the rest"
                        ),
                    );
                }
                m.description = d.trim().to_owned();
            }
            "license" => m.license = string(value, "license", r),
            "compatibility" => {
                m.compatibility = string(value, "compatibility", r);
                let n = m.compatibility.as_deref().map_or(0, |c| c.chars().count());
                if n > MAX_COMPATIBILITY {
                    r.warn(
                        "compatibility",
                        format!(
                            "is {n} characters; the Agent Skills format allows {MAX_COMPATIBILITY}"
                        ),
                    );
                }
            }
            "metadata" => match value {
                Yaml::Mapping(entries) => {
                    for (k, v) in entries {
                        let key = match k {
                            Yaml::String(k) => k.clone(),
                            _ => {
                                r.error("metadata", "keys must be strings");
                                continue;
                            }
                        };
                        match v {
                            Yaml::String(s) => {
                                m.metadata.insert(key, s.clone());
                            }
                            Yaml::Number(n) => {
                                m.metadata.insert(key, n.to_string());
                            }
                            Yaml::Bool(b) => {
                                m.metadata.insert(key, b.to_string());
                            }
                            _ => r.error(&format!("metadata.{key}"), "must be a string"),
                        }
                    }
                }
                Yaml::Null => {}
                _ => r.error("metadata", "must be a mapping of strings"),
            },
            "allowed-tools" => m.allowed_tools = strings(value, "allowed-tools", true, r),
            "version" => {
                m.version = match value {
                    Yaml::Number(n) => Some(n.to_string()),
                    other => string(other, "version", r),
                }
            }
            "triggers" => m.triggers = strings(value, "triggers", false, r),
            "tools" => m.tools = tools(value, r),
            "inherit_tools_from" => {
                m.inherit_tools_from = strings(value, "inherit_tools_from", false, r);
                for (i, parent) in m.inherit_tools_from.iter().enumerate() {
                    if let Err(e) = check_name(parent) {
                        r.error(
                            &format!("inherit_tools_from[{i}]"),
                            format!("{parent:?} {e}"),
                        );
                    }
                }
            }
            "permissions" => m.permissions = strings(value, "permissions", false, r),
            // Read from the text again, with lines, once the skill's name is known.
            "chains" => {}
            other => r.warn(other, format!("unknown field {other:?} is ignored")),
        }
    }
    if !seen_name {
        r.error("", "the required field `name` is missing");
    }
    if !seen_description {
        r.error("", "the required field `description` is missing");
    }
    Some(m)
}

/// The chains of the front matter `front` (whose first line is `front_line`), read again with
/// positions: a list (an unnamed chain named after the skill) or a mapping from names to chains.
fn chains(front: &str, front_line: usize, skill: &str) -> (Vec<ChainSource>, Vec<Diagnostic>) {
    let read = crate::chain::yaml::read(front, front_line);
    let Some(root) = read.value else {
        let diagnostics = read
            .errors
            .into_iter()
            .map(|e| Diagnostic {
                severity: Severity::Error,
                line: e.line,
                field: Some("chains".to_owned()),
                message: format!("the chains cannot be read: {}", e.message),
            })
            .collect();
        return (Vec::new(), diagnostics);
    };
    let unnamed = skill.replace('-', "_");
    let parse = crate::chain::parse_chains(&root, &read.lines, "/chains", Some(&unnamed));
    (parse.chains, parse.diagnostics)
}

fn tools(value: &Yaml, r: &mut Report) -> Vec<SkillTool> {
    let items = match value {
        Yaml::Null => return Vec::new(),
        Yaml::Sequence(items) => items,
        _ => {
            r.error(
                "tools",
                "must be a list of tool names or {name, ...} entries",
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("tools[{i}]");
        match item {
            Yaml::String(name) if !name.trim().is_empty() => out.push(SkillTool {
                name: name.trim().to_owned(),
                access_level: None,
                rate_limit: None,
                allowed_domains: Vec::new(),
                blocked_domains: Vec::new(),
            }),
            Yaml::Mapping(entry) => {
                if let Some(tool) = tool_entry(entry, &field, r) {
                    out.push(tool);
                }
            }
            _ => r.error(&field, "must be a tool name or a {name, ...} entry"),
        }
    }
    out
}

fn tool_entry(entry: &Mapping, field: &str, r: &mut Report) -> Option<SkillTool> {
    let mut tool = SkillTool {
        name: String::new(),
        access_level: None,
        rate_limit: None,
        allowed_domains: Vec::new(),
        blocked_domains: Vec::new(),
    };
    for (k, v) in entry {
        let key = k.as_str().unwrap_or_default();
        let at = format!("{field}.{key}");
        match key {
            "name" => tool.name = string(v, &at, r).unwrap_or_default(),
            "access_level" => {
                if let Some(level) = string(v, &at, r) {
                    match level.parse::<AccessLevel>() {
                        Ok(l) => tool.access_level = Some(l),
                        Err(e) => r.error(&at, e),
                    }
                }
            }
            "rate_limit" => tool.rate_limit = rate(v, &at, r),
            "allowed_domains" => tool.allowed_domains = domains(v, &at, r),
            "blocked_domains" => tool.blocked_domains = domains(v, &at, r),
            other => r.warn(&at, format!("unknown field {other:?} is ignored")),
        }
    }
    if tool.name.trim().is_empty() {
        r.error(field, "a tool entry needs a `name`");
        return None;
    }
    Some(tool)
}

/// A list of domain patterns (the policy's syntax: `example.com`, `*.example.com`, `.example.com`,
/// CIDR blocks); a pattern that does not compile is an error, so a list never silently narrows
/// less than written.
fn domains(v: &Yaml, field: &str, r: &mut Report) -> Vec<String> {
    let list = strings(v, field, false, r);
    for (i, pattern) in list.iter().enumerate() {
        if let Err(e) = crate::target::DomainPattern::parse(pattern) {
            r.error(&format!("{field}[{i}]"), e.to_string());
        }
    }
    list
}

fn rate(v: &Yaml, field: &str, r: &mut Report) -> Option<SkillRate> {
    // A bare number is calls a minute, as the seed writes it.
    if let Yaml::Number(n) = v {
        return match n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
        {
            Some(n) => Some(SkillRate {
                per_minute: Some(n),
                per_hour: None,
            }),
            None => {
                r.error(field, "must be a whole number of calls a minute above 0");
                None
            }
        };
    }
    let Yaml::Mapping(m) = v else {
        r.error(
            field,
            "must be calls a minute (N), or {per_minute: N} and/or {per_hour: N}",
        );
        return None;
    };
    let mut rate = SkillRate {
        per_minute: None,
        per_hour: None,
    };
    for (k, v) in m {
        let key = k.as_str().unwrap_or_default();
        let n = v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0);
        match (key, n) {
            ("per_minute", Some(n)) => rate.per_minute = Some(n),
            ("per_hour", Some(n)) => rate.per_hour = Some(n),
            ("per_minute" | "per_hour", None) => {
                r.error(&format!("{field}.{key}"), "must be a whole number above 0");
                return None;
            }
            (other, _) => r.warn(&format!("{field}.{other}"), "unknown field is ignored"),
        }
    }
    if rate.per_minute.is_none() && rate.per_hour.is_none() {
        r.error(field, "needs per_minute or per_hour");
        return None;
    }
    Some(rate)
}

#[cfg(test)]
mod tests;
