//! Exec approvals: how command-running tools are judged. A command line is taken apart (`shell`)
//! into every simple command it would run, wrappers such as `bash -c`, `env`, `xargs` and `nice`
//! unwrapped, and each command is judged on its own: its program resolved to an absolute path
//! (through the runtime's resolver, so `/bin/../bin/rm` and `rm` are the same file), its arguments
//! matched against the allowlist entry's globs. The raw string is never matched, so nothing can be
//! smuggled past an entry by a `;`, a `$( )` or quoting. A line that cannot be taken apart with
//! certainty is denied.
//!
//! An entry covers a command only if, besides its program and argument globs, everything else the
//! command does is allowed by the entry too: every redirection that can write a file must name a
//! path its `writes` globs allow (`/dev/null` always may), every variable the command is given
//! (`X=1 cmd`, `env X=1 cmd`, assigned earlier in the line, or in the call's `env`) must be one
//! its `env` names, a word the shell computes (`$X`, a glob, `find`'s `{}`) or arguments a wrapper
//! appends (`xargs`) only match `**`, and a relative program or write target is placed in the
//! directory the command runs in (the call's working directory; after a `cd` in the line it
//! cannot be placed, so it is a miss).
//!
//! `security`: `deny` refuses every command-running call, `allowlist` lets through calls whose
//! every command matches an entry, `full` lets everything through. `ask`: `off` denies a miss,
//! `on-miss` asks a person about a miss, `always` asks about every call. Each policy document
//! judges with its own settings (a setting it leaves out is the default: `allowlist`,
//! `on-miss`, on `category:code_execution`) and the strictest of their verdicts stands.
//!
//! Reading a document's `[exec]` section into these settings and entries is `gather`'s job.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use super::env::Resolver;
use super::{Decision, Layer, LayerVerdict, RuleRef, SelectorSet, Severity};
use crate::shell::{self, Parsed, Redirect, SimpleCommand};
use crate::target::normalize_path;

pub(super) mod gather;
pub(super) use gather::{Gathered, gather};

/// How much command running is allowed; ordered from most to least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Security {
    /// Every command.
    Full,
    /// Commands matching an allowlist entry.
    Allowlist,
    /// No command.
    Deny,
}

impl Security {
    /// Parses `deny`, `allowlist` or `full`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "deny" => Ok(Self::Deny),
            "allowlist" => Ok(Self::Allowlist),
            "full" => Ok(Self::Full),
            other => Err(format!(
                "unknown exec security {other:?}: expected deny, allowlist or full"
            )),
        }
    }
}

impl fmt::Display for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Security::Full => "full",
            Security::Allowlist => "allowlist",
            Security::Deny => "deny",
        })
    }
}

/// When to ask a person; ordered from least to most asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AskMode {
    /// Never: a miss is denied.
    Off,
    /// About commands the allowlist does not cover.
    OnMiss,
    /// About every command-running call.
    Always,
}

impl AskMode {
    /// Parses `off`, `on-miss` or `always`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "on-miss" => Ok(Self::OnMiss),
            "always" => Ok(Self::Always),
            other => Err(format!(
                "unknown exec ask mode {other:?}: expected off, on-miss or always"
            )),
        }
    }
}

impl fmt::Display for AskMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AskMode::Off => "off",
            AskMode::OnMiss => "on-miss",
            AskMode::Always => "always",
        })
    }
}

#[derive(Debug, Clone)]
enum ArgPattern {
    /// One argument.
    One(GlobMatcher),
    /// `**`: any number of arguments.
    Rest,
}

/// One allowlist entry.
#[derive(Debug, Clone)]
pub struct ExecEntry {
    /// The entry as written.
    pub written: String,
    /// The program's absolute path, `None` if it could not be found when the policy loaded (the
    /// entry then matches nothing).
    pub program: Option<String>,
    args: Vec<ArgPattern>,
    /// Paths its redirections may write, as written and compiled (relative ones are relative to
    /// where the command runs).
    writes: Vec<(String, GlobMatcher)>,
    /// Variables it may be given.
    env: Vec<(String, GlobMatcher)>,
    /// Where it was written.
    pub source: String,
}

/// What a call adds to the commands it runs: where they start and the variables it sets.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The absolute directory the call's process starts in.
    pub cwd: &'a str,
    /// Variables the call sets for every command (exec's `env` argument).
    pub env: &'a [String],
}

/// Splits an entry into words: whitespace separated, with single and double quotes. Anything a
/// shell would treat as an operator is refused, so an entry is always one plain command.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(other) => word.push(other),
                        None => return Err(format!("unclosed {c} quote")),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            ';' | '&' | '|' | '<' | '>' | '`' | '$' | '(' | ')' | '\\' | '\n' => {
                return Err(format!(
                    "{c:?} is not allowed in an allowlist entry: an entry is one program and its argument globs"
                ));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The absolute path a program word names: a path is normalized (relative to `base`, where
/// commands run), then resolved with symlinks followed; a bare name is looked up on PATH.
pub fn resolve_program(program: &str, base: &str, resolver: &dyn Resolver) -> Option<String> {
    if program.contains('/') {
        let normalized = normalize_path(program, base, None);
        resolver.resolve(&normalized)
    } else {
        resolver.resolve(program)
    }
}

impl ExecEntry {
    /// Compiles an entry; `resolver` finds its program. `writes` and `env` are its write path
    /// globs and variable name globs.
    pub fn compile(
        written: &str,
        source: impl Into<String>,
        base: &str,
        resolver: &dyn Resolver,
        writes: &[String],
        env: &[String],
    ) -> Result<Self, String> {
        let words = split_words(written)?;
        let Some((program, patterns)) = words.split_first() else {
            return Err("the entry is empty: write a program and its argument globs".to_owned());
        };
        if program.contains(['*', '?', '[', '{']) {
            return Err(format!(
                "the program {program:?} must be a name or a path, not a glob"
            ));
        }
        let mut args = Vec::with_capacity(patterns.len());
        for p in patterns {
            if p == "**" {
                args.push(ArgPattern::Rest);
            } else {
                let glob = GlobBuilder::new(p)
                    .literal_separator(false)
                    .build()
                    .map_err(|e| format!("argument glob {p:?}: {e}"))?;
                args.push(ArgPattern::One(glob.compile_matcher()));
            }
        }
        let mut write_globs = Vec::with_capacity(writes.len());
        for w in writes {
            if w.starts_with('~') || w.split('/').any(|part| part == "..") || w.is_empty() {
                return Err(format!(
                    "writes {w:?}: give a path relative to where the command runs, or an absolute \
                     one, without `~` or `..`"
                ));
            }
            let glob = GlobBuilder::new(w.trim_start_matches("./"))
                .literal_separator(true)
                .build()
                .map_err(|e| format!("writes {w:?}: {e}"))?;
            write_globs.push((w.clone(), glob.compile_matcher()));
        }
        let mut env_globs = Vec::with_capacity(env.len());
        for name in env {
            if let Some(why) = shell::sensitive_variable(name.trim_end_matches('*')) {
                return Err(format!("env {name:?}: {why}, so no entry may allow it"));
            }
            let glob = GlobBuilder::new(name)
                .build()
                .map_err(|e| format!("env {name:?}: {e}"))?;
            env_globs.push((name.clone(), glob.compile_matcher()));
        }
        Ok(Self {
            written: written.to_owned(),
            program: resolve_program(program, base, resolver),
            args,
            writes: write_globs,
            env: env_globs,
            source: source.into(),
        })
    }

    /// `args` are (text, computed) pairs: a computed word may become any number of words with
    /// any text, so only `**` matches it.
    fn args_match(patterns: &[ArgPattern], args: &[(&str, bool)]) -> bool {
        match patterns.split_first() {
            None => args.is_empty(),
            Some((ArgPattern::Rest, rest)) => {
                (0..=args.len()).any(|skip| Self::args_match(rest, &args[skip..]))
            }
            Some((ArgPattern::One(glob), rest)) => match args.split_first() {
                Some(((first, computed), others)) => {
                    !computed && glob.is_match(first) && Self::args_match(rest, others)
                }
                None => false,
            },
        }
    }

    /// Whether the entry's program and argument globs match one command whose program resolved
    /// to `program`.
    pub fn matches(&self, program: &str, command: &SimpleCommand) -> bool {
        let mut args: Vec<(&str, bool)> = command
            .argv
            .iter()
            .zip(command.computed.iter().chain(std::iter::repeat(&false)))
            .skip(1)
            .map(|(a, c)| (a.as_str(), *c))
            .collect();
        if command.appended {
            // Whatever a wrapper appends stands for one computed word.
            args.push(("", true));
        }
        self.program.as_deref() == Some(program) && Self::args_match(&self.args, &args)
    }

    /// Why the entry does not cover what `command` does besides running its program: a variable
    /// it is given or a file it writes that the entry does not allow.
    fn refuses(
        &self,
        command: &SimpleCommand,
        call: &CallContext<'_>,
        resolver: &dyn Resolver,
    ) -> Option<String> {
        let names = command
            .assignments
            .iter()
            .map(|(n, _)| n)
            .chain(&command.set_before)
            .chain(call.env);
        for name in names {
            if !self.env.iter().any(|(_, g)| g.is_match(name)) {
                return Some(format!(
                    "is given variable {name}, which entry {:?} ({}) does not allow (its env: {})",
                    self.written,
                    self.source,
                    listed(&self.env)
                ));
            }
        }
        for r in command.redirects.iter().filter(|r| r.writes()) {
            if r.target == "/dev/null" && !r.expanded {
                continue;
            }
            if let Some(why) = self.write_refused(r, command, call, resolver) {
                return Some(format!("writes {} through `{}`: {why}", r.target, r.op));
            }
        }
        None
    }

    fn write_refused(
        &self,
        r: &Redirect,
        command: &SimpleCommand,
        call: &CallContext<'_>,
        resolver: &dyn Resolver,
    ) -> Option<String> {
        let not_allowed = || {
            format!(
                "entry {:?} ({}) does not allow it (its writes: {})",
                self.written,
                self.source,
                listed(&self.writes)
            )
        };
        if r.expanded {
            return Some(format!(
                "the target is only known when the shell runs, and {}",
                not_allowed()
            ));
        }
        if !r.target.starts_with('/')
            && let Some(why) = &command.moved
        {
            return Some(format!("{why}, so the relative target cannot be placed"));
        }
        let lexical = normalize_path(&r.target, call.cwd, None);
        // The file a write reaches: the target itself if it exists, else its directory's.
        let canonical = resolver.canonicalize(&lexical).or_else(|| {
            let (dir, name) = lexical.rsplit_once('/')?;
            let dir = resolver.canonicalize(if dir.is_empty() { "/" } else { dir })?;
            Some(format!("{}/{name}", dir.trim_end_matches('/')))
        });
        let canonical_cwd = resolver
            .canonicalize(call.cwd)
            .unwrap_or_else(|| call.cwd.to_owned());
        let allowed = |path: &str, cwd: &str| {
            let relative = path
                .strip_prefix(cwd.trim_end_matches('/'))
                .and_then(|p| p.strip_prefix('/'));
            self.writes.iter().any(|(written, g)| {
                if written.starts_with('/') {
                    g.is_match(path)
                } else {
                    relative.is_some_and(|rel| g.is_match(rel))
                }
            })
        };
        let reached = canonical.as_deref().filter(|c| *c != lexical);
        if !allowed(&lexical, call.cwd) {
            return Some(not_allowed());
        }
        match reached {
            Some(c) if !allowed(c, &canonical_cwd) => {
                Some(format!("it leads to {c}, and {}", not_allowed()))
            }
            _ => None,
        }
    }
}

fn listed(globs: &[(String, GlobMatcher)]) -> String {
    if globs.is_empty() {
        "none".to_owned()
    } else {
        globs
            .iter()
            .map(|(w, _)| w.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One document's exec settings.
#[derive(Debug, Clone)]
pub struct ExecSettings {
    /// Which tools the document judges as command-running.
    pub tools: SelectorSet,
    /// Security, and where it was set.
    pub security: (Security, String),
    /// Ask mode, and where it was set.
    pub ask: (AskMode, String),
}

/// The compiled exec layer.
#[derive(Debug, Clone)]
pub struct ExecPolicy {
    /// Each document's settings, in document order; the strictest verdict of those whose tools
    /// name a tool stands.
    pub documents: Vec<ExecSettings>,
    /// Allowlist entries, from every document.
    pub allow: Vec<ExecEntry>,
}

/// Why one command is not covered, or `None` if an entry covers it.
fn miss(
    command: &SimpleCommand,
    entries: &[ExecEntry],
    call: &CallContext<'_>,
    resolver: &dyn Resolver,
) -> Option<String> {
    let shown = command.argv.join(" ");
    if let Some(w) = command
        .wrappers
        .iter()
        .find(|w| matches!(w.as_str(), "sudo" | "doas" | "su" | "chroot" | "pkexec"))
    {
        return Some(format!("`{shown}` would run under {w}"));
    }
    let unplaced = |word: &str| {
        let relative = word.contains('/') && !word.starts_with('/');
        command
            .moved
            .as_ref()
            .filter(|_| relative)
            .map(|why| format!("`{shown}`: {why}, so which file `{word}` is cannot be known"))
    };
    // A wrapper runs too: one given by path must be the system's own program of that name, or
    // `./nice git status` would run whatever `./nice` is.
    for w in &command.wrappers {
        let word = w.split_whitespace().next().unwrap_or_default();
        if word.contains('/') {
            if let Some(why) = unplaced(word) {
                return Some(why);
            }
            let name = word.rsplit('/').next().unwrap_or_default();
            let given = resolve_program(word, call.cwd, resolver);
            if given.is_none() || given != resolver.resolve(name) {
                return Some(format!(
                    "`{shown}` runs under {word}, which is not the system's {name}"
                ));
            }
        }
    }
    let program = command.argv.first()?;
    if let Some(why) = unplaced(program) {
        return Some(why);
    }
    let Some(resolved) = resolve_program(program, call.cwd, resolver) else {
        return Some(format!("`{shown}`: program {program:?} was not found"));
    };
    let mut refusal = None;
    for entry in entries.iter().filter(|e| e.matches(&resolved, command)) {
        match entry.refuses(command, call, resolver) {
            None => return None,
            Some(why) => {
                refusal.get_or_insert(why);
            }
        }
    }
    Some(match refusal {
        Some(why) => format!("`{shown}` ({resolved}) {why}"),
        None => format!("`{shown}` ({resolved}) matches no allowlist entry"),
    })
}

/// The commands a call would run, from a custom tool's rendered argv or the arguments'
/// `command` (a command line) or `argv` (a list).
pub fn commands_of(argv: Option<&[String]>, arguments: &Value) -> Parsed {
    if let Some(argv) = argv {
        return shell::expand_argv(argv);
    }
    match (arguments.get("command"), arguments.get("argv")) {
        (Some(Value::String(line)), _) => shell::parse_command_line(line),
        (_, Some(Value::Array(items))) => {
            let words: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            match words {
                Some(words) => shell::expand_argv(&words),
                None => Parsed::Uncertain {
                    reason: "argv holds something other than strings".to_owned(),
                },
            }
        }
        _ => Parsed::Uncertain {
            reason: "the arguments name no command (expected `command` or `argv`)".to_owned(),
        },
    }
}

/// The variables a call sets for its commands: the names in its own `env` argument, when the
/// commands come from its own `command` or `argv` (a custom tool's rendered argv has its
/// environment fixed by the tool's author).
fn call_env(argv: Option<&[String]>, arguments: &Value) -> Result<Vec<String>, String> {
    if argv.is_some() {
        return Ok(Vec::new());
    }
    match arguments.get("env") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => {
            for name in map.keys() {
                if let Some(why) = shell::sensitive_variable(name) {
                    return Err(format!("the call's env: {why}"));
                }
            }
            Ok(map.keys().cloned().collect())
        }
        Some(_) => Err("the call's env is not an object of variables".to_owned()),
    }
}

/// The call's commands, judged against the allowlist once for every document's settings.
enum Judged {
    /// The commands could not be taken apart.
    Uncertain(String),
    /// The commands and why each one that is not covered is not.
    Commands {
        commands: Vec<SimpleCommand>,
        misses: Vec<String>,
    },
}

impl ExecPolicy {
    /// Whether every command of `parsed` is covered by `entry` alone (for load-time examples,
    /// judged as if run in `base`).
    pub fn entry_allows(
        entry: &ExecEntry,
        parsed: &Parsed,
        base: &str,
        resolver: &dyn Resolver,
    ) -> bool {
        let call = CallContext {
            cwd: base,
            env: &[],
        };
        match parsed {
            Parsed::Uncertain { .. } => false,
            Parsed::Commands(cmds) => {
                !cmds.is_empty()
                    && cmds
                        .iter()
                        .all(|c| miss(c, std::slice::from_ref(entry), &call, resolver).is_none())
            }
        }
    }

    fn judge(
        &self,
        argv: Option<&[String]>,
        arguments: &Value,
        cwd: &str,
        resolver: &dyn Resolver,
    ) -> Judged {
        let env = match call_env(argv, arguments) {
            Ok(env) => env,
            Err(reason) => return Judged::Uncertain(reason),
        };
        let commands = match commands_of(argv, arguments) {
            Parsed::Uncertain { reason } => return Judged::Uncertain(reason),
            Parsed::Commands(c) => c,
        };
        let call = CallContext { cwd, env: &env };
        let misses = commands
            .iter()
            .filter_map(|c| miss(c, &self.allow, &call, resolver))
            .collect();
        Judged::Commands { commands, misses }
    }

    /// The exec layer's verdict, or `None` when no document judges the tool as command-running.
    /// `cwd` is the absolute directory the call's process starts in.
    pub fn evaluate(
        &self,
        tool: &crate::definition::ToolDefinition,
        argv: Option<&[String]>,
        arguments: &Value,
        cwd: &str,
        resolver: &dyn Resolver,
    ) -> Option<LayerVerdict> {
        let judging: Vec<(&ExecSettings, RuleRef)> = self
            .documents
            .iter()
            .filter_map(|d| {
                let s = d.tools.first_match(tool)?;
                Some((d, RuleRef::new(&s.pattern, &s.source)))
            })
            .collect();
        if judging.is_empty() {
            return None;
        }
        // Parsed once, and only if some document does not deny outright.
        let mut judged = None;
        let mut worst: Option<LayerVerdict> = None;
        for (settings, applies) in &judging {
            let judged = match settings.security.0 {
                Security::Deny => None,
                _ => {
                    Some(&*judged.get_or_insert_with(|| self.judge(argv, arguments, cwd, resolver)))
                }
            };
            let v = verdict(settings, applies, tool, judged);
            if worst.as_ref().is_none_or(|w| v.decision > w.decision) {
                worst = Some(v);
            }
        }
        worst
    }
}

/// One document's verdict on a call; `judged` is `None` only when its security is `deny`.
fn verdict(
    settings: &ExecSettings,
    applies: &RuleRef,
    tool: &crate::definition::ToolDefinition,
    judged: Option<&Judged>,
) -> LayerVerdict {
    let (security, security_source) = &settings.security;
    let (commands, misses) = match judged {
        None => {
            return LayerVerdict::stop(
                Layer::Exec,
                Decision::Deny,
                "exec_denied",
                Severity::Error,
                format!("tool {} runs commands and exec security is deny", tool.name),
            )
            .by(RuleRef::new("security = \"deny\"", security_source));
        }
        Some(Judged::Uncertain(reason)) if *security == Security::Allowlist => {
            return LayerVerdict::stop(
                Layer::Exec,
                Decision::Deny,
                "command_uncertain",
                Severity::Critical,
                format!("the command cannot be judged with certainty, so it is denied: {reason}"),
            )
            .by(settings_rule(settings));
        }
        Some(Judged::Uncertain(_)) => (&[][..], &[][..]),
        Some(Judged::Commands { commands, misses }) => (&commands[..], &misses[..]),
    };
    if *security == Security::Full {
        let what = format!(
            "exec security is full (tool {} via {})",
            tool.name, applies.rule
        );
        return allow_or_ask(settings, what);
    }
    allowlist_verdict(settings, commands, misses)
}

/// The rule a verdict quotes: the document's security and ask mode, and where each was set.
fn settings_rule(settings: &ExecSettings) -> RuleRef {
    let (security, security_source) = &settings.security;
    let (ask, ask_source) = &settings.ask;
    RuleRef::new(
        format!("security = \"{security}\", ask = \"{ask}\""),
        format!("{security_source}; {ask_source}"),
    )
}

/// A call the settings let through: allowed, unless ask is `always`.
fn allow_or_ask(settings: &ExecSettings, what: String) -> LayerVerdict {
    let (ask, ask_source) = &settings.ask;
    if *ask == AskMode::Always {
        LayerVerdict::stop(
            Layer::Exec,
            Decision::Ask,
            "exec_ask",
            Severity::Warning,
            format!("{what}; exec ask is \"always\", so a person must approve it"),
        )
        .by(RuleRef::new("ask = \"always\"", ask_source))
    } else {
        LayerVerdict::allow(Layer::Exec, what).by(settings_rule(settings))
    }
}

/// An allowlist document's verdict on the call's commands and why each one not covered is not.
fn allowlist_verdict(
    settings: &ExecSettings,
    commands: &[SimpleCommand],
    misses: &[String],
) -> LayerVerdict {
    if commands.is_empty() {
        return LayerVerdict::stop(
            Layer::Exec,
            Decision::Deny,
            "command_uncertain",
            Severity::Critical,
            "the command line runs no command that could be judged".to_owned(),
        )
        .by(settings_rule(settings));
    }
    if misses.is_empty() {
        let shown = commands
            .iter()
            .map(|c| format!("`{}`", c.argv.join(" ")))
            .collect::<Vec<_>>()
            .join(", ");
        return allow_or_ask(
            settings,
            format!("every command is on the allowlist: {shown}"),
        );
    }
    let reason = misses.join("; ");
    if settings.ask.0 == AskMode::Off {
        LayerVerdict::stop(
            Layer::Exec,
            Decision::Deny,
            "exec_denied",
            Severity::Error,
            format!("not on the exec allowlist: {reason}"),
        )
        .by(settings_rule(settings))
    } else {
        LayerVerdict::stop(
            Layer::Exec,
            Decision::Ask,
            "exec_ask",
            Severity::Warning,
            format!("not on the exec allowlist, so a person must approve it: {reason}"),
        )
        .by(settings_rule(settings))
    }
}
