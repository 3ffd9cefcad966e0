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
//!
//! Speed: a call's arguments are read once ([`Prepared`]), and the forbidden paths and blocked
//! patterns of every rule are compiled into one glob set and one regex set ([`ArgLayer`]), so a
//! call only runs a rule's own checks when one of those sets flags it or the rule has checks the
//! sets cannot cover (allow lists, domains, sizes). A hundred rules cost about what one does.
//!
//! Reading a document's `[[rules]]` into [`ArgRule`]s, each checked against its examples, is
//! `gather`'s job.

use regex::RegexSet;
use serde_json::Value;

use super::env::Resolver;
use super::exec::commands_of;
use super::{Decision, Layer, LayerVerdict, RuleIndex, RuleRef, SelectorSet, Severity};
use crate::definition::{IsolationLevel, ToolDefinition};
use crate::shell::Parsed;
use crate::target::{
    DomainList, EgressLayer, Host, PathCase, PathList, normalize_path, parse_host, parse_url,
};

mod gather;
pub(super) use gather::gather;

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
    /// The same, as written (compiled again into the layer's combined set).
    pub forbid_written: Vec<String>,
    /// If set, paths must match one of these.
    pub allow_paths: Option<PathList>,
    /// If set, hosts must match one of these.
    pub allow_domains: Option<DomainList>,
    /// Hosts no argument may name.
    pub block_domains: Option<DomainList>,
    /// Hosts the rule's tools' processes may reach through the egress proxy.
    pub network: Option<DomainList>,
    /// The workspace folder (relative to the first root) the rule's browser tools may save
    /// downloads in.
    pub downloads: Option<String>,
    /// Patterns no string may match, with their written forms.
    pub block_patterns: Option<(RegexSet, Vec<String>)>,
    /// Largest serialized arguments.
    pub max_argument_bytes: Option<u64>,
    /// Longest string.
    pub max_string_length: Option<u64>,
    /// What a violation yields (Deny or Ask).
    pub decision: Decision,
    /// The least isolation the rule's tools run with.
    pub isolation: Option<IsolationLevel>,
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
    // Compared without case, in place (every key of every call is asked).
    let k = key.as_bytes();
    let eq = |name: &str| k.eq_ignore_ascii_case(name.as_bytes());
    // `path`, `input_path`: the name itself, or ending in `_name`.
    let is = |names: &[&str]| {
        names.iter().any(|n| {
            k.len().checked_sub(n.len()).is_some_and(|cut| {
                k[cut..].eq_ignore_ascii_case(n.as_bytes()) && (cut == 0 || k[cut - 1] == b'_')
            })
        })
    };
    if is(&["url", "uri", "href", "endpoint", "link"]) || eq("urls") {
        Kind::Url
    } else if is(&["host", "hostname", "domain"]) || eq("hosts") || eq("domains") {
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
    ]) || eq("paths")
        || eq("files")
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
    def?.parameters.declared_format(key)
}

fn escape_pointer(key: &str) -> std::borrow::Cow<'_, str> {
    if key.contains(['~', '/']) {
        key.replace('~', "~0").replace('/', "~1").into()
    } else {
        key.into()
    }
}

/// `parent` followed by `/` and the escaped `key`: a JSON pointer one level down (joined in
/// place, as every key of every call's arguments is named this way).
fn child_pointer(parent: &str, key: &str) -> String {
    let key = escape_pointer(key);
    let mut pointer = String::with_capacity(parent.len() + 1 + key.len());
    pointer.push_str(parent);
    pointer.push('/');
    pointer.push_str(&key);
    pointer
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
                walk(item, &child_pointer(pointer, key), kind_of_key(key), out);
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
            walk(value, &child_pointer("", key), kind, &mut out);
        }
    } else {
        walk(arguments, "", Kind::Text, &mut out);
    }
    let has_command = argv.is_some()
        || arguments.get("command").is_some_and(Value::is_string)
        || arguments.get("argv").is_some_and(Value::is_array);
    if has_command && let Parsed::Commands(commands) = commands_of(argv, arguments) {
        // Each command the line would run, as one string: a blocked pattern such as `rm\s+-rf`
        // spans words that an argv array holds apart.
        for (i, c) in commands.iter().enumerate() {
            out.strings.push((format!("command {i}"), c.argv.join(" ")));
        }
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

/// A call's arguments read once for every rule: each path with the forms it is checked in, each
/// host parsed, each string.
#[derive(Debug)]
pub struct Prepared<'a> {
    arguments: &'a Value,
    /// (pointer, as written, forms: normalized and, if it leads elsewhere, canonical).
    paths: Vec<(String, String, Vec<String>)>,
    /// (pointer, as written, the host or why it cannot be read).
    hosts: Vec<(String, String, Result<Host, String>)>,
    strings: Vec<(String, String)>,
    size: std::cell::OnceCell<u64>,
}

impl<'a> Prepared<'a> {
    /// Reads `arguments` (see [`targets`]) and normalizes what they name.
    pub fn new(
        def: Option<&ToolDefinition>,
        arguments: &'a Value,
        argv: Option<&[String]>,
        base: &str,
        home: Option<&str>,
        resolver: &dyn Resolver,
    ) -> Self {
        let t = targets(def, arguments, argv);
        let paths = t
            .paths
            .into_iter()
            .map(|(pointer, raw)| {
                let normalized = normalize_path(&raw, base, home);
                let mut forms = vec![normalized.clone()];
                if let Some(real) = resolver.canonicalize(&normalized)
                    && real != normalized
                {
                    forms.push(real);
                }
                (pointer, raw, forms)
            })
            .collect();
        let hosts = t
            .urls
            .into_iter()
            .map(|(p, raw)| {
                let host = parse_url(&raw).map(|u| u.host).map_err(|e| e.to_string());
                (p, raw, host)
            })
            .chain(t.hosts.into_iter().map(|(p, raw)| {
                let host = parse_host(&raw).map_err(|e| e.to_string());
                (p, raw, host)
            }))
            .collect();
        Self {
            arguments,
            paths,
            hosts,
            strings: t.strings,
            size: std::cell::OnceCell::new(),
        }
    }

    fn size(&self) -> u64 {
        *self
            .size
            .get_or_init(|| self.arguments.to_string().len() as u64)
    }
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

    fn check_paths(&self, p: &Prepared<'_>) -> Option<Breach> {
        for (pointer, raw, forms) in &p.paths {
            for form in forms {
                if let Some(list) = &self.forbid_paths
                    && let Some(pattern) = list.first_match(form)
                {
                    let via = if *form == forms[0] {
                        String::new()
                    } else {
                        format!(" (it leads to {form})")
                    };
                    return Some(Breach {
                        code: "path_forbidden",
                        severity: Severity::Critical,
                        reason: format!("{pointer}: path {raw:?}{via} is forbidden by {pattern:?}"),
                        rule: format!("forbid_paths {pattern:?}"),
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

    fn check_hosts(&self, p: &Prepared<'_>) -> Option<Breach> {
        if self.allow_domains.is_none() && self.block_domains.is_none() {
            return None;
        }
        for (pointer, raw, host) in &p.hosts {
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
                && let Some(pattern) = list.first_match(host)
            {
                return Some(Breach {
                    code: "domain_blocked",
                    severity: Severity::Error,
                    reason: format!(
                        "{pointer}: host {host} (from {raw:?}) is blocked by {:?}",
                        pattern.as_str()
                    ),
                    rule: format!("block_domains {:?}", pattern.as_str()),
                });
            }
            if let Some(list) = &self.allow_domains
                && list.first_match(host).is_none()
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

    fn check_strings(&self, p: &Prepared<'_>) -> Option<Breach> {
        if let Some(max) = self.max_argument_bytes {
            let size = p.size();
            if size > max {
                return Some(Breach {
                    code: "argument_too_large",
                    severity: Severity::Warning,
                    reason: format!("the arguments are {size} bytes; the limit is {max}"),
                    rule: format!("max_argument_bytes = {max}"),
                });
            }
        }
        for (pointer, s) in &p.strings {
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
                && set.is_match(s)
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

    /// Whether the rule has checks the layer's merged sets do not cover, for a call with these
    /// arguments (a domain list cannot be broken by a call that names no host).
    fn needs_own_check(&self, p: &Prepared<'_>) -> bool {
        (self.allow_paths.is_some() && !p.paths.is_empty())
            || ((self.allow_domains.is_some() || self.block_domains.is_some())
                && !p.hosts.is_empty())
            || self.max_argument_bytes.is_some()
            || self.max_string_length.is_some()
    }

    /// The rule's verdict on a call, or `None` if the call passes it.
    pub fn check(&self, p: &Prepared<'_>) -> Option<LayerVerdict> {
        let breach = self
            .check_paths(p)
            .or_else(|| self.check_hosts(p))
            .or_else(|| self.check_strings(p))?;
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

/// The compiled argument layer: the rules, and their forbidden paths and blocked patterns merged
/// into one set each.
#[derive(Debug, Clone, Default)]
pub struct ArgLayer {
    /// The rules, in written order.
    pub rules: Vec<ArgRule>,
    /// Every rule's forbidden paths, and for each pattern its rule.
    forbid: Option<(PathList, Vec<usize>)>,
    /// Every rule's blocked patterns, and for each its rule.
    block: Option<(RegexSet, Vec<usize>)>,
    /// Whether the merged sets hold every rule's forbidden paths and blocked patterns (otherwise
    /// each rule is checked on its own).
    merged: bool,
    /// Which rules apply to a tool (`None` if the selectors could not be merged: each rule is
    /// then asked on its own).
    index: Option<RuleIndex>,
}

impl ArgLayer {
    /// Merges the rules' sets. Patterns were checked rule by rule when they compiled; should a
    /// merge still fail, every rule is simply checked on its own.
    pub fn new(rules: Vec<ArgRule>, base: &str, home: Option<&str>) -> Self {
        let mut paths = Vec::new();
        let mut path_owner = Vec::new();
        let mut patterns = Vec::new();
        let mut pattern_owner = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            for p in &r.forbid_written {
                paths.push(p.clone());
                path_owner.push(i);
            }
            for p in r.block_patterns.iter().flat_map(|(_, w)| w) {
                patterns.push(p.clone());
                pattern_owner.push(i);
            }
        }
        let forbid = (!paths.is_empty())
            .then(|| PathList::new(&paths, base, home, PathCase::Sensitive).ok())
            .flatten()
            .map(|l| (l, path_owner));
        let block = (!patterns.is_empty())
            .then(|| RegexSet::new(&patterns).ok())
            .flatten()
            .map(|s| (s, pattern_owner));
        let merged =
            (forbid.is_some() || paths.is_empty()) && (block.is_some() || patterns.is_empty());
        let selectors: Vec<Option<&SelectorSet>> = rules.iter().map(|r| r.tools.as_ref()).collect();
        let index = RuleIndex::new(&selectors).ok();
        Self {
            rules,
            forbid,
            block,
            merged,
            index,
        }
    }

    /// What the rules that apply to `def` ask of its connections, for the egress gatekeeper:
    /// one layer per rule with `allow_domains` or `block_domains`, named after the rule, so a
    /// connection must pass each (the same lists that judge the call's URL arguments judge every
    /// host and address it reaches, redirects included).
    pub fn egress_layers(&self, def: &ToolDefinition) -> Vec<EgressLayer> {
        self.rules
            .iter()
            .filter(|r| r.applies_to(def))
            .filter(|r| r.allow_domains.is_some() || r.block_domains.is_some())
            .map(|r| EgressLayer {
                source: format!("policy rule {}", r.name),
                allow: r.allow_domains.clone().unwrap_or_default(),
                block: r.block_domains.clone().unwrap_or_default(),
                ports: Vec::new(),
            })
            .collect()
    }

    /// Where `def`'s downloads may be saved: the folder of the first applying rule that names
    /// one (relative to the workspace's first root) and that rule's name; `None` refuses them.
    pub fn downloads(&self, def: &ToolDefinition) -> Option<(&str, &str)> {
        self.rules
            .iter()
            .filter(|r| r.applies_to(def))
            .find_map(|r| Some((r.downloads.as_deref()?, r.name.as_str())))
    }

    /// Why no file may be written at `path` (absolute and normalized) by `def`: a `forbid_paths`
    /// of a rule that applies to it matches the path, or an `allow_paths` does not.
    pub fn path_refusal(&self, def: &ToolDefinition, path: &str) -> Option<String> {
        for r in self.rules.iter().filter(|r| r.applies_to(def)) {
            if let Some(list) = &r.forbid_paths
                && let Some(pattern) = list.first_match(path)
            {
                return Some(format!(
                    "{path} is forbidden by {pattern:?} (rule {})",
                    r.name
                ));
            }
            if let Some(list) = &r.allow_paths
                && list.first_match(path).is_none()
            {
                return Some(format!(
                    "{path} is outside the allowed paths of rule {}",
                    r.name
                ));
            }
        }
        None
    }

    /// The hosts a tool's processes are granted, through the egress proxy: every applying
    /// rule's `network` list and the definition's own `constraints.network` together, as one
    /// layer (`policy network`, `tool network`, or both); `None` when nothing grants the tool
    /// any network.
    pub fn network_grant(&self, def: &ToolDefinition) -> Option<EgressLayer> {
        let mut patterns: Vec<String> = Vec::new();
        for r in self.rules.iter().filter(|r| r.applies_to(def)) {
            if let Some(list) = &r.network {
                patterns.extend(list.patterns().iter().map(|p| p.as_str().to_owned()));
            }
        }
        let source = match (patterns.is_empty(), def.constraints.network.is_empty()) {
            (true, true) => return None,
            (false, true) => "policy network",
            (true, false) => "tool network",
            (false, false) => "policy and tool network",
        };
        patterns.extend(def.constraints.network.iter().cloned());
        // The definition's patterns were checked when it was read; one that is not valid
        // grants nothing (fail closed).
        EgressLayer::parse(source, &patterns, &[], &[]).ok()
    }

    /// The argument layer: the strictest verdict of every rule that applies (the first-written
    /// on a tie), or a pass.
    pub fn evaluate(
        &self,
        def: &ToolDefinition,
        arguments: &Value,
        argv: Option<&[String]>,
        base: &str,
        home: Option<&str>,
        resolver: &dyn Resolver,
    ) -> LayerVerdict {
        let applies: Vec<bool> = match &self.index {
            Some(index) => index.applying(def),
            None => self.rules.iter().map(|r| r.applies_to(def)).collect(),
        };
        let count = applies.iter().filter(|a| **a).count();
        if count == 0 {
            return LayerVerdict::allow(
                Layer::Arguments,
                format!("no argument rule applies to {}", def.name),
            );
        }
        let p = Prepared::new(Some(def), arguments, argv, base, home, resolver);
        let mut flagged: Vec<bool> = self
            .rules
            .iter()
            .zip(&applies)
            .map(|(r, &a)| a && (!self.merged || r.needs_own_check(&p)))
            .collect();
        if let Some((list, owner)) = &self.forbid {
            for (_, _, forms) in &p.paths {
                for form in forms {
                    for i in list.matching(form) {
                        flagged[owner[i]] |= applies[owner[i]];
                    }
                }
            }
        }
        if let Some((set, owner)) = &self.block {
            for (_, s) in &p.strings {
                if set.is_match(s) {
                    for i in set.matches(s).iter() {
                        flagged[owner[i]] |= applies[owner[i]];
                    }
                }
            }
        }
        let mut worst: Option<LayerVerdict> = None;
        for (rule, _) in self.rules.iter().zip(&flagged).filter(|(_, f)| **f) {
            if let Some(v) = rule.check(&p)
                && worst.as_ref().is_none_or(|w| v.decision > w.decision)
            {
                worst = Some(v);
            }
        }
        worst.unwrap_or_else(|| {
            LayerVerdict::allow(
                Layer::Arguments,
                format!("the arguments pass {count} argument rule(s)"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::targets;
    use crate::definition::{ToolCategory, ToolDefinition};
    use crate::{ParameterSchema, ToolGroup, ToolName};

    /// What each key's string is read as (`path`, `url`, `host` or `text`), for a tool whose
    /// parameter schema is `schema`.
    fn check(schema: serde_json::Value, keys: &[(&str, &str)]) {
        let def = ToolDefinition::new(
            ToolName::new("t").unwrap(),
            "test",
            ToolCategory::System,
            ToolGroup::new("test").unwrap(),
            ParameterSchema::parameters(schema).unwrap(),
        );
        let got: Vec<(&str, &str)> = keys
            .iter()
            .map(|&(key, _)| {
                let t = targets(Some(&def), &json!({ key: "x" }), None);
                let kind = if !t.paths.is_empty() {
                    "path"
                } else if !t.urls.is_empty() {
                    "url"
                } else if !t.hosts.is_empty() {
                    "host"
                } else {
                    "text"
                };
                (key, kind)
            })
            .collect();
        assert_eq!(got, keys);
    }

    #[test]
    fn keys_say_what_their_strings_name_whatever_their_case() {
        check(
            json!({"type": "object"}),
            &[
                ("path", "path"),
                ("input_path", "path"),
                ("Output_PATH", "path"),
                ("xpath", "text"),
                ("_path", "path"),
                ("FILES", "path"),
                ("cwd", "path"),
                ("url", "url"),
                ("callback_URL", "url"),
                ("urls", "url"),
                ("curl", "text"),
                ("hostname", "host"),
                ("Domains", "host"),
                ("ghost", "text"),
                ("pathé", "text"),
                ("", "text"),
            ],
        );
    }

    #[test]
    fn a_declared_format_outranks_the_key() {
        check(
            json!({"type": "object", "properties": {
                "where": {"type": "string", "format": "path"},
                "next": {"type": "string", "format": "uri"},
                "path": {"type": "string", "format": "hostname"},
                "url": {"type": "string", "format": "date"},
                "plain": {"type": "string"}
            }}),
            &[
                ("where", "path"),
                ("next", "url"),
                ("path", "host"),
                ("url", "url"),
                ("plain", "text"),
            ],
        );
    }
}
