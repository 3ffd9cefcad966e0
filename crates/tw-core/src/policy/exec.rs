//! Exec approvals: how command-running tools are judged. A command line is taken apart (`shell`)
//! into every simple command it would run, wrappers such as `bash -c`, `env`, `xargs` and `nice`
//! unwrapped, and each command is judged on its own: its program resolved to an absolute path
//! (through the runtime's resolver, so `/bin/../bin/rm` and `rm` are the same file), its arguments
//! matched against the allowlist entry's globs. The raw string is never matched, so nothing can be
//! smuggled past an entry by a `;`, a `$( )` or quoting. A line that cannot be taken apart with
//! certainty is denied.
//!
//! `security`: `deny` refuses every command-running call, `allowlist` lets through calls whose
//! every command matches an entry, `full` lets everything through. `ask`: `off` denies a miss,
//! `on-miss` asks a person about a miss, `always` asks about every call.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use super::compile::Resolver;
use super::{Decision, Layer, LayerVerdict, RuleRef, SelectorSet, Severity};
use crate::shell::{self, Parsed, SimpleCommand};
use crate::target::normalize_path;

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
    /// Where it was written.
    pub source: String,
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
    /// Compiles an entry; `resolver` finds its program.
    pub fn compile(
        written: &str,
        source: impl Into<String>,
        base: &str,
        resolver: &dyn Resolver,
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
        Ok(Self {
            written: written.to_owned(),
            program: resolve_program(program, base, resolver),
            args,
            source: source.into(),
        })
    }

    fn args_match(patterns: &[ArgPattern], args: &[String]) -> bool {
        match patterns.split_first() {
            None => args.is_empty(),
            Some((ArgPattern::Rest, rest)) => {
                (0..=args.len()).any(|skip| Self::args_match(rest, &args[skip..]))
            }
            Some((ArgPattern::One(glob), rest)) => match args.split_first() {
                Some((first, others)) => glob.is_match(first) && Self::args_match(rest, others),
                None => false,
            },
        }
    }

    /// Whether the entry allows one command whose program resolved to `program`.
    pub fn matches(&self, program: &str, command: &SimpleCommand) -> bool {
        self.program.as_deref() == Some(program)
            && Self::args_match(&self.args, command.argv.get(1..).unwrap_or_default())
    }
}

/// The compiled exec layer.
#[derive(Debug, Clone)]
pub struct ExecPolicy {
    /// Which tools are command-running.
    pub tools: SelectorSet,
    /// Security, and where it was set.
    pub security: (Security, String),
    /// Ask mode, and where it was set.
    pub ask: (AskMode, String),
    /// Allowlist entries.
    pub allow: Vec<ExecEntry>,
}

/// Why one command is not covered, or `None` if an entry covers it.
fn miss(
    command: &SimpleCommand,
    entries: &[ExecEntry],
    base: &str,
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
    // Duplicating a descriptor (`2>&1`) and reading input write nothing; any other redirection
    // writes a file the allowlist entry never mentioned.
    if let Some(r) = command.redirects.iter().find(|r| {
        let reads =
            r.op.trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with('<')
                && r.op != "<>";
        !(reads || r.op.ends_with('&') || r.target == "/dev/null")
    }) {
        return Some(format!(
            "`{shown}` writes to {} through a redirection",
            r.target
        ));
    }
    // A wrapper runs too: one given by path must be the system's own program of that name, or
    // `./nice git status` would run whatever `./nice` is.
    for w in &command.wrappers {
        let word = w.split_whitespace().next().unwrap_or_default();
        if word.contains('/') {
            let name = word.rsplit('/').next().unwrap_or_default();
            let given = resolve_program(word, base, resolver);
            if given.is_none() || given != resolver.resolve(name) {
                return Some(format!(
                    "`{shown}` runs under {word}, which is not the system's {name}"
                ));
            }
        }
    }
    let program = command.argv.first()?;
    let Some(resolved) = resolve_program(program, base, resolver) else {
        return Some(format!("`{shown}`: program {program:?} was not found"));
    };
    if entries.iter().any(|e| e.matches(&resolved, command)) {
        None
    } else {
        Some(format!("`{shown}` ({resolved}) matches no allowlist entry"))
    }
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

impl ExecPolicy {
    /// Whether every command of `parsed` is covered by `entry` alone (for load-time examples).
    pub fn entry_allows(
        entry: &ExecEntry,
        parsed: &Parsed,
        base: &str,
        resolver: &dyn Resolver,
    ) -> bool {
        match parsed {
            Parsed::Uncertain { .. } => false,
            Parsed::Commands(cmds) => {
                !cmds.is_empty()
                    && cmds
                        .iter()
                        .all(|c| miss(c, std::slice::from_ref(entry), base, resolver).is_none())
            }
        }
    }

    /// The exec layer's verdict, or `None` when the tool is not command-running.
    pub fn evaluate(
        &self,
        tool: &crate::definition::ToolDefinition,
        argv: Option<&[String]>,
        arguments: &Value,
        base: &str,
        resolver: &dyn Resolver,
    ) -> Option<LayerVerdict> {
        let selector = self.tools.first_match(tool)?;
        let applies = RuleRef::new(&selector.pattern, &selector.source);
        let (security, security_source) = &self.security;
        let (ask, ask_source) = &self.ask;
        let settings = RuleRef::new(
            format!("security = \"{security}\", ask = \"{ask}\""),
            format!("{security_source}; {ask_source}"),
        );
        if *security == Security::Deny {
            return Some(
                LayerVerdict::stop(
                    Layer::Exec,
                    Decision::Deny,
                    "exec_denied",
                    Severity::Error,
                    format!("tool {} runs commands and exec security is deny", tool.name),
                )
                .by(RuleRef::new("security = \"deny\"", security_source)),
            );
        }
        let parsed = commands_of(argv, arguments);
        let commands = match parsed {
            Parsed::Uncertain { reason } if *security == Security::Allowlist => {
                return Some(
                    LayerVerdict::stop(
                        Layer::Exec,
                        Decision::Deny,
                        "command_uncertain",
                        Severity::Critical,
                        format!(
                            "the command cannot be judged with certainty, so it is denied: {reason}"
                        ),
                    )
                    .by(settings),
                );
            }
            Parsed::Uncertain { .. } => Vec::new(),
            Parsed::Commands(c) => c,
        };
        let ask_all = |what: String| {
            LayerVerdict::stop(
                Layer::Exec,
                Decision::Ask,
                "exec_ask",
                Severity::Warning,
                format!("{what}; exec ask is \"always\", so a person must approve it"),
            )
            .by(RuleRef::new("ask = \"always\"", ask_source))
        };
        if *security == Security::Full {
            let what = format!(
                "exec security is full (tool {} via {})",
                tool.name, applies.rule
            );
            return Some(if *ask == AskMode::Always {
                ask_all(what)
            } else {
                LayerVerdict::allow(Layer::Exec, what).by(settings)
            });
        }
        let misses: Vec<String> = commands
            .iter()
            .filter_map(|c| miss(c, &self.allow, base, resolver))
            .collect();
        let shown = |cmds: &[SimpleCommand]| {
            cmds.iter()
                .map(|c| format!("`{}`", c.argv.join(" ")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if commands.is_empty() {
            return Some(
                LayerVerdict::stop(
                    Layer::Exec,
                    Decision::Deny,
                    "command_uncertain",
                    Severity::Critical,
                    "the command line runs no command that could be judged".to_owned(),
                )
                .by(settings),
            );
        }
        if misses.is_empty() {
            let what = format!("every command is on the allowlist: {}", shown(&commands));
            return Some(if *ask == AskMode::Always {
                ask_all(what)
            } else {
                LayerVerdict::allow(Layer::Exec, what).by(settings)
            });
        }
        let reason = misses.join("; ");
        Some(if *ask == AskMode::Off {
            LayerVerdict::stop(
                Layer::Exec,
                Decision::Deny,
                "exec_denied",
                Severity::Error,
                format!("not on the exec allowlist: {reason}"),
            )
            .by(settings)
        } else {
            LayerVerdict::stop(
                Layer::Exec,
                Decision::Ask,
                "exec_ask",
                Severity::Warning,
                format!("not on the exec allowlist, so a person must approve it: {reason}"),
            )
            .by(settings)
        })
    }
}
