//! Compiling policy documents into one [`Policy`]. Several documents combine (the configuration's
//! `[policy]` table and any number of policy files) so that adding a document never loosens a
//! decision another one makes, except through the lists that grant by name:
//!
//! - Grants add up: `allow`, `[[exec.allow]]` entries, and the levels `[access]` gives callers and
//!   skills (where two documents name the same caller or skill, the lower level stands).
//! - Restrictions add up: `deny`, `[[rules]]` (the strictest verdict of any rule stands), rate
//!   limits, `[access] tools`.
//! - Every switch is each document's own value, and the strictest of them stands. A document
//!   that leaves a switch out counts as the built-in default, because that is what it would mean
//!   alone: `default` (deny), `[exec]` `security`/`ask`/`tools` (allowlist, on-miss,
//!   `category:code_execution`; each document judges with its own three, the strictest verdict
//!   stands), `[access] default` (standard), `[modes.NAME]` (the built-in meaning of the mode:
//!   one document defining lockdown does not replace it for the others) and
//!   `[confirmation] timeout_secs` (120; the shortest stands). So a switch is only looser than
//!   its default when every document says so.
//!
//! Every problem is reported with file:line:column, all of them at once, and every rule's
//! examples (`match` / `not_match`) are run here: a policy whose examples fail does not load.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::ops::Range;

use regex::RegexSet;

use super::access::{AccessLevel, AccessNeeds, AccessPolicy, Held};
use super::args::{ArgLayer, ArgRule, Prepared};
use super::doc::{DefaultDoc, PolicyDoc};
use super::exec::{AskMode, ExecEntry, ExecPolicy, ExecSettings, Security};
use super::rate::{Per, RateLayer, RateRule};
use super::{Decision, PolicyRule, SelectorSet, ToolPolicy, selector};
use crate::definition::{IsolationLevel, OperationalMode};
use crate::load::line_col;
use crate::shell;
use crate::target::{DomainList, DomainPattern, PathCase, PathList};

pub use super::env::{LexicalResolver, PolicyEnv, Resolver};

/// Where the built-in policy is quoted from in explanations.
pub const BUILTIN_FILE: &str = "built-in policy";

/// The policy used when the configuration names none: fail closed, with the built-in file tools,
/// system tools, the exec tools and the administrator's own custom tools allowed, every command
/// not on the exec allowlist asked about, and credentials and cloud metadata out of reach.
pub const BUILTIN_POLICY: &str = r#"default = "deny"
allow = ["group:fs", "group:system", "group:custom", "group:exec"]

[exec]
security = "allowlist"
ask = "on-miss"

[[rules]]
name = "credentials"
forbid_paths = ["~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.kube", "/etc/shadow", "/etc/sudoers"]
block_domains = ["link-local"]
match = [{ tool = "read_file", arguments = { path = "~/.ssh/id_rsa" } }]
not_match = [{ tool = "read_file", arguments = { path = "README.md" } }]
"#;

/// Where mode defaults are quoted from.
pub const MODE_DEFAULTS_FILE: &str = "built-in mode defaults";

/// What each operational mode means when no policy document mentions it.
pub const MODE_DEFAULTS: &str = r#"[modes.alert]
ask = ["risk:high"]

[modes.degraded]
forbid = ["risk:high"]
ask = ["risk:medium"]

[modes.lockdown]
forbid = ["side_effects", "risk:medium", "risk:high"]

[modes.recovery]
ask = ["side_effects"]
"#;

/// Default time a call waits for a person.
pub const DEFAULT_CONFIRMATION_TIMEOUT_SECS: u64 = 120;

/// How the source of a document's default exec tools ends (`file (no exec.tools set: ...)`).
pub const EXEC_TOOLS_DEFAULT: &str = "(no exec.tools set: category:code_execution)";

/// A problem in a policy document, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl PolicyDoc {
    /// Parses a standalone policy file.
    pub fn parse(text: &str, file: &str) -> Result<PolicyDoc, PolicyError> {
        toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unzip();
            PolicyError {
                file: file.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })
    }
}

/// A parsed document and the text its spans point into.
#[derive(Debug, Clone, Copy)]
pub struct PolicySource<'a> {
    /// The file, for messages and explanations.
    pub file: &'a str,
    /// The file's whole text.
    pub text: &'a str,
    /// The document (for the configuration file: its `[policy]` table).
    pub doc: &'a PolicyDoc,
}

/// Per-mode selectors.
#[derive(Debug, Clone, Default)]
pub struct ModeRules {
    /// Need approval in the mode.
    pub ask: SelectorSet,
    /// Refused in the mode.
    pub forbid: SelectorSet,
}

/// A compiled policy: every layer's rules, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The tool allow/deny lists.
    pub tools: ToolPolicy,
    /// Per-mode rules.
    pub modes: BTreeMap<OperationalMode, ModeRules>,
    /// Exec approvals.
    pub exec: ExecPolicy,
    /// Argument rules.
    pub rules: ArgLayer,
    /// Access levels.
    pub access: AccessPolicy,
    /// Rate limits.
    pub rates: RateLayer,
    /// How long a call waits for a person, and where that was set.
    pub confirmation_timeout: (u64, String),
    /// Paths, home and resolver.
    pub env: PolicyEnv,
    /// The documents it was compiled from.
    pub files: Vec<String>,
    /// One line per rule, without locations: what `diff` compares.
    pub summary: BTreeSet<String>,
}

/// Locates spans in one source.
struct Loc<'a> {
    file: &'a str,
    text: &'a str,
}

impl Loc<'_> {
    fn at(&self, span: Range<usize>) -> String {
        format!("{}:{}", self.file, line_col(self.text, span.start).0)
    }

    fn error(&self, span: Range<usize>, message: impl Into<String>) -> PolicyError {
        let (line, column) = line_col(self.text, span.start);
        PolicyError {
            file: self.file.to_owned(),
            line: Some(line),
            column: Some(column),
            message: message.into(),
        }
    }
}

/// One document's `[access]` needs, as gathered: its default and (selector, level) pairs.
type AccessVote = (Option<Held>, Vec<(PolicyRule, AccessLevel)>);

/// One document's exec switches, as gathered.
type ExecVote = (Vec<PolicyRule>, (Security, String), (AskMode, String));

/// Collects the rules of every source before compiling them; switches are kept per document.
#[derive(Default)]
struct Gather {
    errors: Vec<PolicyError>,
    /// Each document's `default`: (deny, where).
    defaults: Vec<(bool, String)>,
    allow: Vec<PolicyRule>,
    deny: Vec<PolicyRule>,
    modes: BTreeMap<OperationalMode, (Vec<PolicyRule>, Vec<PolicyRule>)>,
    /// Modes some document leaves out, which therefore keep their built-in meaning.
    silent_modes: BTreeSet<OperationalMode>,
    exec: Vec<ExecVote>,
    exec_allow: Vec<ExecEntry>,
    rules: Vec<ArgRule>,
    access: Vec<AccessVote>,
    callers: HashMap<String, Held>,
    skills: HashMap<String, Held>,
    rates: Vec<RateRule>,
    /// Each document's confirmation timeout.
    timeouts: Vec<(u64, String)>,
    summary: BTreeSet<String>,
}

fn selectors(
    loc: &Loc<'_>,
    list: &[toml::Spanned<String>],
    what: &str,
    errors: &mut Vec<PolicyError>,
) -> Vec<PolicyRule> {
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        match selector::check_selector(s.get_ref()) {
            Ok(()) => out.push(PolicyRule::new(s.get_ref().trim(), loc.at(s.span()))),
            Err(e) => errors.push(loc.error(s.span(), format!("{what}: {e}"))),
        }
    }
    out
}

fn build_set(rules: Vec<PolicyRule>, errors: &mut Vec<PolicyError>) -> SelectorSet {
    // Each selector was checked with its location already, so this cannot fail in practice; an
    // error here would still be reported rather than ignored.
    SelectorSet::build(rules).unwrap_or_else(|e| {
        errors.push(PolicyError {
            file: "policy".to_owned(),
            line: None,
            column: None,
            message: e.to_string(),
        });
        SelectorSet::default()
    })
}

fn level(
    loc: &Loc<'_>,
    s: &toml::Spanned<String>,
    errors: &mut Vec<PolicyError>,
) -> Option<AccessLevel> {
    s.get_ref()
        .parse()
        .map_err(|e: String| errors.push(loc.error(s.span(), e)))
        .ok()
}

impl Gather {
    fn add(&mut self, src: &PolicySource<'_>, env: &PolicyEnv) {
        let loc = Loc {
            file: src.file,
            text: src.text,
        };
        let doc = src.doc;
        let errors = &mut self.errors;
        self.defaults.push(match &doc.default {
            Some(d) => (*d.get_ref() == DefaultDoc::Deny, loc.at(d.span())),
            None => (true, format!("{} (no default set: deny)", src.file)),
        });
        for (list, target, verb) in [
            (&doc.allow, &mut self.allow, "allow"),
            (&doc.deny, &mut self.deny, "deny"),
        ] {
            let rules = selectors(&loc, list, verb, errors);
            for r in &rules {
                self.summary.insert(format!("{verb} {}", r.pattern));
            }
            target.extend(rules);
        }
        for m in OperationalMode::ALL {
            if !doc
                .modes
                .keys()
                .any(|k| k.get_ref().parse::<OperationalMode>().ok() == Some(*m))
            {
                self.silent_modes.insert(*m);
            }
        }
        for (name, mode) in &doc.modes {
            let Ok(m) = name.get_ref().parse::<OperationalMode>() else {
                errors.push(loc.error(
                    name.span(),
                    format!("modes: unknown operational mode {:?}: expected normal, alert, degraded, lockdown or recovery", name.get_ref()),
                ));
                continue;
            };
            let ask = selectors(&loc, &mode.ask, &format!("modes.{m}.ask"), errors);
            let forbid = selectors(&loc, &mode.forbid, &format!("modes.{m}.forbid"), errors);
            for r in &ask {
                self.summary.insert(format!("mode {m} ask {}", r.pattern));
            }
            for r in &forbid {
                self.summary
                    .insert(format!("mode {m} forbid {}", r.pattern));
            }
            let entry = self.modes.entry(m).or_default();
            entry.0.extend(ask);
            entry.1.extend(forbid);
        }
        let exec = doc.exec.clone().unwrap_or_default();
        let mut exec_tools = match &exec.tools {
            Some(tools) => selectors(&loc, tools, "exec.tools", errors),
            None => Vec::new(),
        };
        if exec_tools.is_empty() {
            exec_tools.push(PolicyRule::new(
                "category:code_execution",
                format!("{} {EXEC_TOOLS_DEFAULT}", src.file),
            ));
        }
        for r in &exec_tools {
            self.summary
                .insert(format!("exec applies to {}", r.pattern));
        }
        let security = match &exec.security {
            Some(s) => Security::parse(s.get_ref())
                .map(|sec| (sec, loc.at(s.span())))
                .map_err(|e| errors.push(loc.error(s.span(), format!("exec.security: {e}"))))
                .ok(),
            None => Some((
                Security::Allowlist,
                format!("{} (no exec.security set: allowlist)", src.file),
            )),
        };
        let ask = match &exec.ask {
            Some(a) => AskMode::parse(a.get_ref())
                .map(|ask| (ask, loc.at(a.span())))
                .map_err(|e| errors.push(loc.error(a.span(), format!("exec.ask: {e}"))))
                .ok(),
            None => Some((
                AskMode::OnMiss,
                format!("{} (no exec.ask set: on-miss)", src.file),
            )),
        };
        if let (Some(security), Some(ask)) = (security, ask) {
            self.summary.insert(format!("exec security {}", security.0));
            self.summary.insert(format!("exec ask {}", ask.0));
            self.exec.push((exec_tools, security, ask));
        }
        {
            for entry in &exec.allow {
                let e = entry.get_ref();
                let written = |list: &[toml::Spanned<String>]| -> Vec<String> {
                    list.iter().map(|w| w.get_ref().clone()).collect()
                };
                let compiled = match ExecEntry::compile(
                    e.command.get_ref(),
                    loc.at(e.command.span()),
                    &env.base,
                    env.resolver.as_ref(),
                    &written(&e.writes),
                    &written(&e.env),
                ) {
                    Ok(c) => c,
                    Err(msg) => {
                        errors.push(loc.error(e.command.span(), format!("exec.allow: {msg}")));
                        continue;
                    }
                };
                for (examples, want) in [(&e.matches, true), (&e.not_match, false)] {
                    for ex in examples {
                        let parsed = shell::parse_command_line(ex.get_ref());
                        if ExecPolicy::entry_allows(
                            &compiled,
                            &parsed,
                            &env.base,
                            env.resolver.as_ref(),
                        ) != want
                        {
                            let program = compiled
                                .program
                                .as_deref()
                                .unwrap_or("a program that was not found");
                            errors.push(loc.error(
                                ex.span(),
                                if want {
                                    format!("exec.allow {:?} (program {program}) does not allow its example {:?}", e.command.get_ref(), ex.get_ref())
                                } else {
                                    format!("exec.allow {:?} allows {:?}, listed under not_match", e.command.get_ref(), ex.get_ref())
                                },
                            ));
                        }
                    }
                }
                self.summary
                    .insert(format!("exec allow {}", e.command.get_ref()));
                self.exec_allow.push(compiled);
            }
        }
        for (i, rule) in doc.rules.iter().enumerate() {
            if let Some(r) = self.arg_rule(&loc, rule, i, env) {
                self.rules.push(r);
            }
        }
        if let Some(access) = &doc.access {
            let errors = &mut self.errors;
            let mut default = None;
            if let Some(d) = &access.default
                && let Some(l) = level(&loc, d, errors)
            {
                self.summary.insert(format!("access default {l}"));
                default = Some(Held {
                    level: l,
                    source: loc.at(d.span()),
                });
            }
            let mut needs = Vec::new();
            for (sel, lvl) in &access.tools {
                let ok = selector::check_selector(sel.get_ref())
                    .map_err(|e| errors.push(loc.error(sel.span(), format!("access.tools: {e}"))))
                    .is_ok();
                if let (true, Some(l)) = (ok, level(&loc, lvl, errors)) {
                    self.summary
                        .insert(format!("access {} needs {l}", sel.get_ref()));
                    needs.push((PolicyRule::new(sel.get_ref().trim(), loc.at(sel.span())), l));
                }
            }
            self.access.push((default, needs));
            for (map, target) in [
                (&access.callers, &mut self.callers),
                (&access.skills, &mut self.skills),
            ] {
                for (who, lvl) in map {
                    if let Some(l) = level(&loc, lvl, errors) {
                        let held = Held {
                            level: l,
                            source: loc.at(who.span()),
                        };
                        // Two documents disagreeing about one caller: the lower level stands.
                        match target.get(who.get_ref()) {
                            Some(cur) if cur.level <= l => {}
                            _ => {
                                target.insert(who.get_ref().clone(), held);
                            }
                        }
                    }
                }
            }
        }
        for rate in &doc.rate_limits {
            let r = rate.get_ref();
            let errors = &mut self.errors;
            let tools = r
                .tools
                .as_ref()
                .map(|t| build_set(selectors(&loc, t, "rate_limits.tools", errors), errors));
            let per = match r.per.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                None | Some(("tool", _)) => Per::Tool,
                Some(("caller", _)) => Per::Caller,
                Some(("skill_tool", _)) => Per::SkillTool,
                Some((other, span)) => {
                    errors.push(loc.error(span, format!("rate_limits.per: unknown scope {other:?}: expected tool, caller or skill_tool")));
                    continue;
                }
            };
            let per_minute = r.per_minute.as_ref().map(|v| (*v.get_ref(), v.span()));
            let per_hour = r.per_hour.as_ref().map(|v| (*v.get_ref(), v.span()));
            if per_minute.is_none() && per_hour.is_none() {
                errors
                    .push(loc.error(rate.span(), "rate_limits: set per_minute, per_hour or both"));
                continue;
            }
            if let Some((_, span)) = [&per_minute, &per_hour]
                .into_iter()
                .flatten()
                .find(|(v, _)| *v == 0)
                .cloned()
            {
                errors.push(loc.error(
                    span,
                    "rate_limits: a limit of 0 would block the tools; deny them instead",
                ));
                continue;
            }
            self.summary.insert(format!(
                "rate limit {} per {per:?} {:?}/min {:?}/h",
                r.tools
                    .as_ref()
                    .map(|t| t
                        .iter()
                        .map(|s| s.get_ref().as_str())
                        .collect::<Vec<_>>()
                        .join(","))
                    .unwrap_or_else(|| "*".to_owned()),
                per_minute.as_ref().map(|v| v.0),
                per_hour.as_ref().map(|v| v.0)
            ));
            self.rates.push(RateRule {
                tools,
                per,
                per_minute: per_minute.map(|v| v.0),
                per_hour: per_hour.map(|v| v.0),
                source: loc.at(rate.span()),
            });
        }
        match doc
            .confirmation
            .as_ref()
            .and_then(|c| c.timeout_secs.as_ref())
        {
            Some(t) => {
                let secs = *t.get_ref();
                if secs == 0 || secs > 24 * 3600 {
                    self.errors.push(loc.error(
                        t.span(),
                        "confirmation.timeout_secs must be between 1 and 86400",
                    ));
                } else {
                    self.timeouts.push((secs, loc.at(t.span())));
                }
            }
            None => self.timeouts.push((
                DEFAULT_CONFIRMATION_TIMEOUT_SECS,
                format!(
                    "{} (no timeout set: {DEFAULT_CONFIRMATION_TIMEOUT_SECS} s)",
                    src.file
                ),
            )),
        }
    }

    fn arg_rule(
        &mut self,
        loc: &Loc<'_>,
        rule: &toml::Spanned<super::doc::RuleDoc>,
        index: usize,
        env: &PolicyEnv,
    ) -> Option<ArgRule> {
        let r = rule.get_ref();
        let errors = &mut self.errors;
        let before = errors.len();
        let name = r.name.clone().unwrap_or_else(|| format!("rules[{index}]"));
        let tools = r
            .tools
            .as_ref()
            .map(|t| build_set(selectors(loc, t, "rules.tools", errors), errors));
        let home = env.home.as_deref();
        let mut paths = |list: &[toml::Spanned<String>], what: &str| -> Option<PathList> {
            if list.is_empty() {
                return None;
            }
            for p in list {
                if let Err(e) = PathList::new([p.get_ref()], &env.base, home, PathCase::Sensitive) {
                    errors.push(loc.error(p.span(), format!("rules.{what}: {e}")));
                }
            }
            PathList::new(
                list.iter().map(|p| p.get_ref()),
                &env.base,
                home,
                PathCase::Sensitive,
            )
            .ok()
        };
        let forbid_paths = paths(&r.forbid_paths, "forbid_paths");
        let allow_paths = paths(&r.allow_paths, "allow_paths");
        let mut domains = |list: &[toml::Spanned<String>], what: &str| -> Option<DomainList> {
            if list.is_empty() {
                return None;
            }
            for d in list {
                if let Err(e) = DomainPattern::parse(d.get_ref()) {
                    errors.push(loc.error(d.span(), format!("rules.{what}: {e}")));
                }
            }
            DomainList::parse(list.iter().map(|d| d.get_ref())).ok()
        };
        let allow_domains = domains(&r.allow_domains, "allow_domains");
        let block_domains = domains(&r.block_domains, "block_domains");
        let block_patterns = if r.block_patterns.is_empty() {
            None
        } else {
            for p in &r.block_patterns {
                if let Err(e) = regex::Regex::new(p.get_ref()) {
                    // The regex crate draws its errors over several lines; one line reads better
                    // after file:line:column.
                    let e = e
                        .to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    errors.push(loc.error(p.span(), format!("rules.block_patterns: {e}")));
                }
            }
            let written: Vec<String> = r
                .block_patterns
                .iter()
                .map(|p| p.get_ref().clone())
                .collect();
            RegexSet::new(&written).ok().map(|set| (set, written))
        };
        let decision = match r
            .decision
            .as_ref()
            .map(|d| (d.get_ref().as_str(), d.span()))
        {
            None | Some(("deny", _)) => Decision::Deny,
            Some(("ask", _)) => Decision::Ask,
            Some((other, span)) => {
                errors.push(loc.error(
                    span,
                    format!("rules.decision: {other:?} must be \"deny\" or \"ask\""),
                ));
                Decision::Deny
            }
        };
        let isolation =
            r.isolation
                .as_ref()
                .and_then(|i| match i.get_ref().parse::<IsolationLevel>() {
                    Ok(IsolationLevel::None) => {
                        errors.push(loc.error(
                        i.span(),
                        "rules.isolation: \"none\" cannot be required; a rule can only raise \
                         isolation to standard, strict or restricted"
                            .to_owned(),
                    ));
                        None
                    }
                    Ok(level) => Some(level),
                    Err(e) => {
                        errors.push(loc.error(i.span(), format!("rules.isolation: {e}")));
                        None
                    }
                });
        if r.forbid_paths.is_empty()
            && r.isolation.is_none()
            && r.allow_paths.is_empty()
            && r.allow_domains.is_empty()
            && r.block_domains.is_empty()
            && r.block_patterns.is_empty()
            && r.max_argument_bytes.is_none()
            && r.max_string_length.is_none()
        {
            errors.push(loc.error(
                rule.span(),
                format!(
                    "rule {name:?} checks nothing: give it paths, domains, patterns, a size limit \
                     or an isolation level"
                ),
            ));
        }
        if errors.len() > before {
            return None;
        }
        let compiled = ArgRule {
            name: name.clone(),
            source: loc.at(rule.span()),
            tools,
            forbid_paths,
            forbid_written: r.forbid_paths.iter().map(|p| p.get_ref().clone()).collect(),
            allow_paths,
            allow_domains,
            block_domains,
            block_patterns,
            max_argument_bytes: r.max_argument_bytes.as_ref().map(|v| *v.get_ref()),
            max_string_length: r.max_string_length.as_ref().map(|v| *v.get_ref()),
            decision,
            isolation,
        };
        for (examples, want) in [(&r.matches, true), (&r.not_match, false)] {
            for ex in examples {
                let call = ex.get_ref();
                let prepared = Prepared::new(
                    None,
                    &call.arguments,
                    None,
                    &env.base,
                    home,
                    env.resolver.as_ref(),
                );
                let stopped = compiled.check(&prepared).is_some();
                if stopped != want {
                    errors.push(loc.error(
                        ex.span(),
                        if want {
                            format!(
                                "rule {name:?} does not stop its example call to {} with {}",
                                call.tool, call.arguments
                            )
                        } else {
                            format!(
                                "rule {name:?} stops {} with {}, listed under not_match",
                                call.tool, call.arguments
                            )
                        },
                    ));
                }
            }
        }
        let list = |what: &str, v: &[toml::Spanned<String>]| {
            (!v.is_empty()).then(|| {
                let items: Vec<&str> = v.iter().map(|p| p.get_ref().as_str()).collect();
                format!("{what} {}", items.join(", "))
            })
        };
        let parts: Vec<String> = [
            list("forbid_paths", &r.forbid_paths),
            list("allow_paths", &r.allow_paths),
            list("allow_domains", &r.allow_domains),
            list("block_domains", &r.block_domains),
            list("block_patterns", &r.block_patterns),
            r.max_argument_bytes
                .as_ref()
                .map(|v| format!("max_argument_bytes {}", v.get_ref())),
            r.max_string_length
                .as_ref()
                .map(|v| format!("max_string_length {}", v.get_ref())),
            isolation.map(|i| format!("isolation at least {i}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.summary
            .insert(format!("rule {name} ({decision}): {}", parts.join("; ")));
        Some(compiled)
    }
}

impl Policy {
    /// Compiles documents into one policy. Every problem in every document is reported.
    pub fn compile(
        sources: &[PolicySource<'_>],
        env: PolicyEnv,
    ) -> Result<Policy, Vec<PolicyError>> {
        let mut g = Gather::default();
        for src in sources {
            g.add(src, &env);
        }
        // Modes no document mentions keep their built-in meaning.
        let defaults = PolicyDoc::parse(MODE_DEFAULTS, MODE_DEFAULTS_FILE).map_err(|e| vec![e])?;
        let mut d = Gather::default();
        d.add(
            &PolicySource {
                file: MODE_DEFAULTS_FILE,
                text: MODE_DEFAULTS,
                doc: &defaults,
            },
            &env,
        );
        g.errors.extend(d.errors);
        // A mode some document leaves out keeps its built-in meaning, on top of what the others
        // add: one document defining lockdown does not loosen it for the rest.
        for (mode, (ask, forbid)) in d.modes {
            if sources.is_empty() || g.silent_modes.contains(&mode) {
                let entry = g.modes.entry(mode).or_default();
                entry.0.extend(ask);
                entry.1.extend(forbid);
            }
        }
        let (default_deny, default_source) = g
            .defaults
            .iter()
            .find(|(deny, _)| *deny)
            .or(g.defaults.first())
            .cloned()
            .unwrap_or_else(|| (true, format!("{BUILTIN_FILE} (no default set: deny)")));
        g.summary.insert(format!(
            "default {}",
            if default_deny { "deny" } else { "allow" }
        ));
        for (what, map) in [("caller", &g.callers), ("skill", &g.skills)] {
            for (who, held) in map {
                g.summary
                    .insert(format!("access {what} {who} holds {}", held.level));
            }
        }
        let timeout = g
            .timeouts
            .iter()
            .min_by_key(|(secs, _)| *secs)
            .cloned()
            .unwrap_or((DEFAULT_CONFIRMATION_TIMEOUT_SECS, "default".to_owned()));
        g.summary
            .insert(format!("confirmation timeout {}s", timeout.0));
        let errors = &mut g.errors;
        let tools = ToolPolicy::new(g.allow, g.deny, default_deny, default_source);
        let modes = g
            .modes
            .into_iter()
            .map(|(m, (ask, forbid))| {
                (
                    m,
                    ModeRules {
                        ask: build_set(ask, errors),
                        forbid: build_set(forbid, errors),
                    },
                )
            })
            .collect();
        let exec = ExecPolicy {
            documents: g
                .exec
                .into_iter()
                .map(|(tools, security, ask)| ExecSettings {
                    tools: build_set(tools, errors),
                    security,
                    ask,
                })
                .collect(),
            allow: g.exec_allow,
        };
        let needs: Result<Vec<AccessNeeds>, _> = g
            .access
            .into_iter()
            .map(|(default, needs)| AccessNeeds::new(default, needs))
            .collect();
        let (tools, needs) = match (tools, needs) {
            (Ok(t), Ok(n)) => (t, n),
            (t, n) => {
                for e in [t.err(), n.err()].into_iter().flatten() {
                    errors.push(PolicyError {
                        file: "policy".to_owned(),
                        line: None,
                        column: None,
                        message: e.to_string(),
                    });
                }
                return Err(g.errors);
            }
        };
        if !g.errors.is_empty() {
            return Err(g.errors);
        }
        Ok(Policy {
            tools,
            modes,
            exec,
            rules: ArgLayer::new(g.rules, &env.base, env.home.as_deref()),
            access: AccessPolicy::new(needs, g.callers, g.skills),
            rates: RateLayer::new(g.rates),
            confirmation_timeout: timeout,
            env,
            files: sources.iter().map(|s| s.file.to_owned()).collect(),
            summary: g.summary,
        })
    }

    /// The built-in policy (see [`BUILTIN_POLICY`]).
    pub fn builtin(env: PolicyEnv) -> Result<Policy, Vec<PolicyError>> {
        let doc = PolicyDoc::parse(BUILTIN_POLICY, BUILTIN_FILE).map_err(|e| vec![e])?;
        Policy::compile(
            &[PolicySource {
                file: BUILTIN_FILE,
                text: BUILTIN_POLICY,
                doc: &doc,
            }],
            env,
        )
    }

    /// What changed from `old` to `self`, one line per rule added (`+`) or removed (`-`).
    pub fn diff(&self, old: &Policy) -> Vec<String> {
        let removed = old
            .summary
            .difference(&self.summary)
            .map(|l| format!("- {l}"));
        let added = self
            .summary
            .difference(&old.summary)
            .map(|l| format!("+ {l}"));
        removed.chain(added).collect()
    }
}
