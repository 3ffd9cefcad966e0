//! Argument rules, judged on a call's final arguments: paths a call may or may not name, hosts it
//! may or may not reach, patterns no string may contain, and size limits.
//!
//! What counts as a path or a URL: a property whose schema says `"format": "path"` (or `uri`,
//! `url`, `iri`, `hostname`), or whose name says so (`path`, `file`, `dir`, `*_path`, `url`,
//! `*_url`, `host`, `domain`, ...); any string's embedded `scheme://` URLs; and, for
//! command-running tools, the path-like words and redirection targets of every command the line
//! would run (`cat ~/.ssh/id_rsa`). Paths are normalized (home expanded, joined to the workspace
//! root, `..` folded) and, when the runtime's resolver can see the file, also checked as the
//! canonical path a symlink leads to: a forbidden file stays forbidden behind a link.

use regex::RegexSet;
use serde_json::Value;

use super::compile::Resolver;
use super::exec::commands_of;
use super::{Decision, Layer, LayerVerdict, RuleRef, SelectorSet, Severity};
use crate::definition::ToolDefinition;
use crate::shell::Parsed;
use crate::target::{DomainList, PathList, normalize_path, parse_host, parse_url};

/// A compiled `[[rules]]` entry.
#[derive(Debug, Clone)]
pub struct ArgRule {
    /// The rule's name (or `rules[N]`).
    pub name: String,
    /// Where it was written.
    pub source: String,
    /// Which tools; `None` is every tool.
    pub tools: Option<SelectorSet>,
    /// Paths no argument may name.
    pub forbid_paths: Option<PathList>,
    /// If set, paths must match one of these.
    pub allow_paths: Option<PathList>,
    /// If set, hosts must match one of these.
    pub allow_domains: Option<DomainList>,
    /// Hosts no argument may name.
    pub block_domains: Option<DomainList>,
    /// Patterns no string may match, with their written forms.
    pub block_patterns: Option<(RegexSet, Vec<String>)>,
    /// Largest serialized arguments.
    pub max_argument_bytes: Option<u64>,
    /// Longest string.
    pub max_string_length: Option<u64>,
    /// What a violation yields (Deny or Ask).
    pub decision: Decision,
}

/// What a call's arguments name, each with its JSON pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// Paths, as written.
    pub paths: Vec<(String, String)>,
    /// URLs, as written.
    pub urls: Vec<(String, String)>,
    /// Bare hosts, as written.
    pub hosts: Vec<(String, String)>,
    /// Every string value.
    pub strings: Vec<(String, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Path,
    Url,
    Host,
    Text,
}

fn kind_of_key(key: &str) -> Kind {
    let k = key.to_ascii_lowercase();
    let is = |names: &[&str]| {
        names
            .iter()
            .any(|n| k == *n || k.ends_with(&format!("_{n}")))
    };
    if is(&["url", "uri", "href", "endpoint", "link"]) || k == "urls" {
        Kind::Url
    } else if is(&["host", "hostname", "domain"]) || k == "hosts" || k == "domains" {
        Kind::Host
    } else if is(&[
        "path",
        "file",
        "filename",
        "dir",
        "directory",
        "cwd",
        "folder",
        "dest",
        "destination",
        "source",
        "src",
        "target",
    ]) || k == "paths"
        || k == "files"
    {
        Kind::Path
    } else {
        Kind::Text
    }
}

fn kind_of_format(format: &str) -> Option<Kind> {
    match format {
        "path" => Some(Kind::Path),
        "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => Some(Kind::Url),
        "hostname" | "idn-hostname" => Some(Kind::Host),
        _ => None,
    }
}

/// The schema's `format` for a top-level property, if it declares one.
fn declared_format<'a>(def: Option<&'a ToolDefinition>, key: &str) -> Option<&'a str> {
    def?.parameters
        .value()
        .get("properties")?
        .get(key)?
        .get("format")?
        .as_str()
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn url_regex() -> Option<&'static regex::Regex> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r#"(?i)\b[a-z][a-z0-9+.-]*://[^\s'"<>`]+"#).ok())
        .as_ref()
}

fn walk(value: &Value, pointer: &str, kind: Kind, out: &mut Targets) {
    match value {
        Value::String(s) => {
            out.strings.push((pointer.to_owned(), s.clone()));
            match kind {
                Kind::Path => out.paths.push((pointer.to_owned(), s.clone())),
                Kind::Url => out.urls.push((pointer.to_owned(), s.clone())),
                Kind::Host => out.hosts.push((pointer.to_owned(), s.clone())),
                Kind::Text => {
                    if let Some(re) = url_regex() {
                        for m in re.find_iter(s) {
                            out.urls.push((pointer.to_owned(), m.as_str().to_owned()));
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{pointer}/{i}"), kind, out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                walk(
                    item,
                    &format!("{pointer}/{}", escape_pointer(key)),
                    kind_of_key(key),
                    out,
                );
            }
        }
        _ => {}
    }
}

fn path_like(word: &str) -> bool {
    word.starts_with('/')
        || word.starts_with("~/")
        || word == "~"
        || word.starts_with("./")
        || word.starts_with("../")
        || word.starts_with("$HOME")
        || word.starts_with("${HOME}")
}

/// Everything a call's arguments name. `def` supplies declared formats (examples checked at load
/// have none); `argv` is a custom tool's rendered command.
pub fn targets(
    def: Option<&ToolDefinition>,
    arguments: &Value,
    argv: Option<&[String]>,
) -> Targets {
    let mut out = Targets::default();
    if let Value::Object(map) = arguments {
        for (key, value) in map {
            let kind = declared_format(def, key)
                .and_then(kind_of_format)
                .unwrap_or_else(|| kind_of_key(key));
            walk(value, &format!("/{}", escape_pointer(key)), kind, &mut out);
        }
    } else {
        walk(arguments, "", Kind::Text, &mut out);
    }
    let has_command = argv.is_some()
        || arguments.get("command").is_some_and(Value::is_string)
        || arguments.get("argv").is_some_and(Value::is_array);
    if has_command && let Parsed::Commands(commands) = commands_of(argv, arguments) {
        for c in commands {
            for word in c.argv.iter().skip(1) {
                if path_like(word) {
                    out.paths.push(("command".to_owned(), word.clone()));
                }
            }
            for r in &c.redirects {
                if !r.target.starts_with('&') {
                    out.paths.push(("command".to_owned(), r.target.clone()));
                }
            }
        }
    }
    if let Some(argv) = argv {
        for (i, word) in argv.iter().enumerate() {
            out.strings.push((format!("argv/{i}"), word.clone()));
        }
    }
    out
}

/// Where a rule's check failed.
struct Breach {
    code: &'static str,
    severity: Severity,
    reason: String,
    rule: String,
}

impl ArgRule {
    /// Whether the rule applies to the tool (`None`: it does not).
    pub fn applies_to(&self, def: &ToolDefinition) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|t| t.first_match(def).is_some())
    }

    fn check_paths(
        &self,
        targets: &Targets,
        base: &str,
        home: Option<&str>,
        resolver: &dyn Resolver,
    ) -> Option<Breach> {
        for (pointer, raw) in &targets.paths {
            let normalized = normalize_path(raw, base, home);
            let mut forms = vec![normalized.clone()];
            if let Some(real) = resolver.canonicalize(&normalized)
                && real != normalized
            {
                forms.push(real);
            }
            for form in &forms {
                if let Some(list) = &self.forbid_paths
                    && let Some(p) = list.first_match(form)
                {
                    let via = if *form == normalized {
                        String::new()
                    } else {
                        format!(" (it leads to {form})")
                    };
                    return Some(Breach {
                        code: "path_forbidden",
                        severity: Severity::Critical,
                        reason: format!("{pointer}: path {raw:?}{via} is forbidden by {p:?}"),
                        rule: format!("forbid_paths {p:?}"),
                    });
                }
                if let Some(list) = &self.allow_paths
                    && list.first_match(form).is_none()
                {
                    return Some(Breach {
                        code: "path_not_allowed",
                        severity: Severity::Error,
                        reason: format!(
                            "{pointer}: path {raw:?} ({form}) is outside the allowed paths"
                        ),
                        rule: "allow_paths".to_owned(),
                    });
                }
            }
        }
        None
    }

    fn check_hosts(&self, targets: &Targets) -> Option<Breach> {
        if self.allow_domains.is_none() && self.block_domains.is_none() {
            return None;
        }
        let hosts = targets
            .urls
            .iter()
            .map(|(p, raw)| {
                (
                    p,
                    raw,
                    parse_url(raw).map(|u| u.host).map_err(|e| e.to_string()),
                )
            })
            .chain(
                targets
                    .hosts
                    .iter()
                    .map(|(p, raw)| (p, raw, parse_host(raw).map_err(|e| e.to_string()))),
            );
        for (pointer, raw, host) in hosts {
            let host = match host {
                Ok(h) => h,
                Err(e) => {
                    return Some(Breach {
                        code: "domain_not_allowed",
                        severity: Severity::Error,
                        reason: format!(
                            "{pointer}: the host of {raw:?} cannot be determined, so it is refused: {e}"
                        ),
                        rule: "allow_domains/block_domains".to_owned(),
                    });
                }
            };
            if let Some(list) = &self.block_domains
                && let Some(p) = list.first_match(&host)
            {
                return Some(Breach {
                    code: "domain_blocked",
                    severity: Severity::Error,
                    reason: format!(
                        "{pointer}: host {host} (from {raw:?}) is blocked by {:?}",
                        p.as_str()
                    ),
                    rule: format!("block_domains {:?}", p.as_str()),
                });
            }
            if let Some(list) = &self.allow_domains
                && list.first_match(&host).is_none()
            {
                return Some(Breach {
                    code: "domain_not_allowed",
                    severity: Severity::Error,
                    reason: format!(
                        "{pointer}: host {host} (from {raw:?}) is not on the allowed domains"
                    ),
                    rule: "allow_domains".to_owned(),
                });
            }
        }
        None
    }

    fn check_strings(&self, arguments: &Value, targets: &Targets) -> Option<Breach> {
        if let Some(max) = self.max_argument_bytes {
            let size = arguments.to_string().len() as u64;
            if size > max {
                return Some(Breach {
                    code: "argument_too_large",
                    severity: Severity::Warning,
                    reason: format!("the arguments are {size} bytes; the limit is {max}"),
                    rule: format!("max_argument_bytes = {max}"),
                });
            }
        }
        for (pointer, s) in &targets.strings {
            if let Some(max) = self.max_string_length {
                let len = s.chars().count() as u64;
                if len > max {
                    return Some(Breach {
                        code: "argument_too_large",
                        severity: Severity::Warning,
                        reason: format!("{pointer} is {len} characters long; the limit is {max}"),
                        rule: format!("max_string_length = {max}"),
                    });
                }
            }
            if let Some((set, written)) = &self.block_patterns
                && let Some(i) = set.matches(s).iter().next()
            {
                return Some(Breach {
                    code: "blocked_pattern",
                    severity: Severity::Critical,
                    reason: format!("{pointer} matches the blocked pattern {:?}", written[i]),
                    rule: format!("block_patterns {:?}", written[i]),
                });
            }
        }
        None
    }

    /// The rule's verdict on a call, or `None` if the call passes it.
    pub fn check(
        &self,
        arguments: &Value,
        targets: &Targets,
        base: &str,
        home: Option<&str>,
        resolver: &dyn Resolver,
    ) -> Option<LayerVerdict> {
        let breach = self
            .check_paths(targets, base, home, resolver)
            .or_else(|| self.check_hosts(targets))
            .or_else(|| self.check_strings(arguments, targets))?;
        Some(
            LayerVerdict::stop(
                Layer::Arguments,
                self.decision,
                breach.code,
                breach.severity,
                breach.reason,
            )
            .by(RuleRef::new(
                format!("{}: {}", self.name, breach.rule),
                &self.source,
            )),
        )
    }
}

/// The argument layer: the strictest verdict of every rule that applies (the first-written on a
/// tie), or a pass.
pub fn layer(
    rules: &[ArgRule],
    def: &ToolDefinition,
    arguments: &Value,
    argv: Option<&[String]>,
    base: &str,
    home: Option<&str>,
    resolver: &dyn Resolver,
) -> LayerVerdict {
    let applicable: Vec<&ArgRule> = rules.iter().filter(|r| r.applies_to(def)).collect();
    if applicable.is_empty() {
        return LayerVerdict::allow(
            Layer::Arguments,
            format!("no argument rule applies to {}", def.name),
        );
    }
    let targets = targets(Some(def), arguments, argv);
    let mut worst: Option<LayerVerdict> = None;
    for rule in &applicable {
        if let Some(v) = rule.check(arguments, &targets, base, home, resolver)
            && worst.as_ref().is_none_or(|w| v.decision > w.decision)
        {
            worst = Some(v);
        }
    }
    worst.unwrap_or_else(|| {
        LayerVerdict::allow(
            Layer::Arguments,
            format!("the arguments pass {} argument rule(s)", applicable.len()),
        )
    })
}
