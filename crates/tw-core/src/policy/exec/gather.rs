//! Reading the `[exec]` section of a policy document: the document's own settings (which tools
//! run commands, `security`, `ask`; a setting left out is the default, quoted as such) and its
//! `[[exec.allow]]` entries, each compiled with its program resolved and its `match` /
//! `not_match` examples run, so a policy whose examples fail does not load.

use toml::Spanned;

use super::{AskMode, ExecEntry, ExecPolicy, ExecSettings, Security};
use crate::policy::PolicyRule;
use crate::policy::doc::{ExecDoc, ExecEntryDoc};
use crate::policy::env::PolicyEnv;
use crate::policy::source::{PolicyError, Reading, build_set};
use crate::shell;

/// How the source of a document's default exec tools ends (`file (no exec.tools set: ...)`).
pub const EXEC_TOOLS_DEFAULT: &str = "(no exec.tools set: category:code_execution)";

/// One document's exec settings, as read: the tools it judges, its security and its ask mode,
/// each with where it was set.
type Settings = (Vec<PolicyRule>, (Security, String), (AskMode, String));

/// Every document's `[exec]` section, gathered.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// Each document's settings, in document order.
    documents: Vec<Settings>,
    /// Every document's allowlist entries.
    allow: Vec<ExecEntry>,
}

/// Reads one document's `[exec]` section (a document without one has the default settings).
pub(crate) fn gather(
    r: &mut Reading<'_>,
    section: Option<&ExecDoc>,
    env: &PolicyEnv,
    out: &mut Gathered,
) {
    let default = ExecDoc::default();
    let exec = section.unwrap_or(&default);
    if let Some(settings) = settings(r, exec) {
        out.documents.push(settings);
    }
    for entry in &exec.allow {
        if let Some(compiled) = allow_entry(r, entry, env) {
            out.allow.push(compiled);
        }
    }
}

impl Gathered {
    /// The exec layer.
    pub(crate) fn build(self, errors: &mut Vec<PolicyError>) -> ExecPolicy {
        ExecPolicy {
            documents: self
                .documents
                .into_iter()
                .map(|(tools, security, ask)| ExecSettings {
                    tools: build_set(tools, errors),
                    security,
                    ask,
                })
                .collect(),
            allow: self.allow,
        }
    }
}

/// The document's `tools`, `security` and `ask`; `None` if `security` or `ask` is not one of
/// their values (reported).
fn settings(r: &mut Reading<'_>, exec: &ExecDoc) -> Option<Settings> {
    let mut tools = match &exec.tools {
        Some(tools) => r.selectors(tools, "exec.tools"),
        None => Vec::new(),
    };
    if tools.is_empty() {
        tools.push(PolicyRule::new(
            "category:code_execution",
            format!("{} {EXEC_TOOLS_DEFAULT}", r.file()),
        ));
    }
    for rule in &tools {
        r.note(format!("exec applies to {}", rule.pattern));
    }
    let security = match &exec.security {
        Some(s) => match Security::parse(s.get_ref()) {
            Ok(security) => Some((security, r.at(s.span()))),
            Err(e) => {
                r.fail(s.span(), format!("exec.security: {e}"));
                None
            }
        },
        None => Some((
            Security::Allowlist,
            format!("{} (no exec.security set: allowlist)", r.file()),
        )),
    };
    let ask = match &exec.ask {
        Some(a) => match AskMode::parse(a.get_ref()) {
            Ok(ask) => Some((ask, r.at(a.span()))),
            Err(e) => {
                r.fail(a.span(), format!("exec.ask: {e}"));
                None
            }
        },
        None => Some((
            AskMode::OnMiss,
            format!("{} (no exec.ask set: on-miss)", r.file()),
        )),
    };
    let (security, ask) = (security?, ask?);
    r.note(format!("exec security {}", security.0));
    r.note(format!("exec ask {}", ask.0));
    Some((tools, security, ask))
}

/// One `[[exec.allow]]` entry, compiled and checked against its examples; `None` if it does not
/// compile (reported). An entry whose examples fail is reported but still returned, since the
/// policy will not load anyway.
fn allow_entry(
    r: &mut Reading<'_>,
    entry: &Spanned<ExecEntryDoc>,
    env: &PolicyEnv,
) -> Option<ExecEntry> {
    let e = entry.get_ref();
    let written = |list: &[Spanned<String>]| -> Vec<String> {
        list.iter().map(|w| w.get_ref().clone()).collect()
    };
    let compiled = match ExecEntry::compile(
        e.command.get_ref(),
        r.at(e.command.span()),
        &env.base,
        env.resolver.as_ref(),
        &written(&e.writes),
        &written(&e.env),
    ) {
        Ok(c) => c,
        Err(msg) => {
            r.fail(e.command.span(), format!("exec.allow: {msg}"));
            return None;
        }
    };
    check_examples(r, e, &compiled, env);
    r.note(format!("exec allow {}", e.command.get_ref()));
    Some(compiled)
}

/// Runs an entry's `match` examples (each must be allowed by the entry alone) and `not_match`
/// examples (none may be), as if run in the policy's base directory.
fn check_examples(r: &mut Reading<'_>, e: &ExecEntryDoc, compiled: &ExecEntry, env: &PolicyEnv) {
    for (examples, want) in [(&e.matches, true), (&e.not_match, false)] {
        for ex in examples {
            let parsed = shell::parse_command_line(ex.get_ref());
            if ExecPolicy::entry_allows(compiled, &parsed, &env.base, env.resolver.as_ref()) == want
            {
                continue;
            }
            let program = compiled
                .program
                .as_deref()
                .unwrap_or("a program that was not found");
            r.fail(
                ex.span(),
                if want {
                    format!(
                        "exec.allow {:?} (program {program}) does not allow its example {:?}",
                        e.command.get_ref(),
                        ex.get_ref()
                    )
                } else {
                    format!(
                        "exec.allow {:?} allows {:?}, listed under not_match",
                        e.command.get_ref(),
                        ex.get_ref()
                    )
                },
            );
        }
    }
}
