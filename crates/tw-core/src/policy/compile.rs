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
//! examples (`match` / `not_match`) are run: a policy whose examples fail does not load.
//!
//! Each layer reads its own section of a document, in its own module (`tools`, `mode`,
//! `exec::gather`, `args::gather`, `access`, `rate`); this module hands each document to them
//! in turn, reads `[confirmation]` itself (a setting of the whole policy, not a layer), and puts
//! the gathered layers together into one [`Policy`].

use std::collections::{BTreeMap, BTreeSet};

use super::access::{self, AccessPolicy};
use super::args::{self, ArgLayer, ArgRule};
use super::doc::{ConfirmationDoc, PolicyDoc};
use super::exec::{self, ExecPolicy};
use super::permissions::{self, PermissionPolicy};
use super::rate::{self, RateLayer, RateRule};
use super::source::Reading;
use super::{ToolPolicy, mode, tools};
use crate::definition::OperationalMode;

pub use super::env::{LexicalResolver, PolicyEnv, Resolver};
pub use super::exec::gather::EXEC_TOOLS_DEFAULT;
pub use super::mode::{MODE_DEFAULTS, MODE_DEFAULTS_FILE, ModeRules};
pub use super::source::{PolicyError, PolicySource};

/// Where the built-in policy is quoted from in explanations.
pub const BUILTIN_FILE: &str = "built-in policy";

/// The policy used when the configuration names none: fail closed, with the built-in file tools,
/// system tools, the content checks, the agent's memory, the team's knowledge store (teams
/// tier), the exec tools and the administrator's own custom tools allowed, every command not on
/// the exec allowlist asked about, credentials and cloud metadata out of reach, and the command
/// lines seed 000 names as dangerous refused outright whatever the allowlist says (a recursive
/// `rm` such as `rm -rf`, `sudo`, `chmod 777`, a download piped into a shell, `eval(`,
/// `__import__`): in a command tool's line, each command it would run, and its other string
/// arguments. `python_exec` needs the elevated access level (seed 000), which no caller holds
/// until a policy of the administrator's grants it.
pub const BUILTIN_POLICY: &str = r#"default = "deny"
allow = ["group:fs", "group:system", "group:validation", "group:memory", "group:knowledge", "group:custom", "group:exec"]

[exec]
security = "allowlist"
ask = "on-miss"

[[rules]]
name = "credentials"
forbid_paths = ["~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.kube", "/etc/shadow", "/etc/sudoers"]
block_domains = ["link-local"]
match = [{ tool = "read_file", arguments = { path = "~/.ssh/id_rsa" } }]
not_match = [{ tool = "read_file", arguments = { path = "README.md" } }]

[[rules]]
name = "dangerous commands"
tools = ["category:code_execution"]
block_patterns = [
  '\brm\s+(\S+\s+)*(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b',
  '\bsudo\b',
  '\bchmod\s+(-[a-zA-Z]+\s+)*0?777\b',
  '\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b',
  '\beval\s*\(',
  '__import__',
]
match = [{ tool = "exec", arguments = { argv = ["rm", "-rf", "/"] } }]
not_match = [{ tool = "exec", arguments = { argv = ["rm", "notes.txt"] } }]

[access]
tools = { python_exec = "elevated" }
"#;

/// Default time a call waits for a person.
pub const DEFAULT_CONFIRMATION_TIMEOUT_SECS: u64 = 120;

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
    /// Permissions.
    pub permissions: PermissionPolicy,
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

/// Collects the rules of every source before compiling them; switches are kept per document.
#[derive(Default)]
struct Gather {
    errors: Vec<PolicyError>,
    summary: BTreeSet<String>,
    tools: tools::Gathered,
    modes: mode::Gathered,
    exec: exec::Gathered,
    rules: Vec<ArgRule>,
    access: access::Gathered,
    permissions: permissions::Gathered,
    rates: Vec<RateRule>,
    /// Each document's confirmation timeout.
    timeouts: Vec<(u64, String)>,
}

impl Gather {
    /// Reads one document, section by section; each layer reads its own.
    fn add(&mut self, src: &PolicySource<'_>, env: &PolicyEnv) {
        let doc = src.doc;
        let r = &mut Reading::new(src, &mut self.errors, &mut self.summary);
        tools::gather(r, doc, &mut self.tools);
        mode::gather(r, &doc.modes, &mut self.modes);
        exec::gather(r, doc.exec.as_ref(), env, &mut self.exec);
        args::gather(r, &doc.rules, env, &mut self.rules);
        access::gather(r, doc.access.as_ref(), &mut self.access);
        permissions::gather(r, doc.permissions.as_ref(), &mut self.permissions);
        rate::gather(r, &doc.rate_limits, &mut self.rates);
        gather_confirmation(r, doc.confirmation.as_ref(), &mut self.timeouts);
    }

    /// Puts the gathered layers together, or returns every problem found.
    fn finish(mut self, files: Vec<String>, env: PolicyEnv) -> Result<Policy, Vec<PolicyError>> {
        let timeout = self
            .timeouts
            .iter()
            .min_by_key(|(secs, _)| *secs)
            .cloned()
            .unwrap_or((DEFAULT_CONFIRMATION_TIMEOUT_SECS, "default".to_owned()));
        self.summary
            .insert(format!("confirmation timeout {}s", timeout.0));
        let errors = &mut self.errors;
        let modes = self.modes.build(errors);
        let exec = self.exec.build(errors);
        let tools = self.tools.build(BUILTIN_FILE, &mut self.summary, errors);
        let access = self.access.build(&mut self.summary, errors);
        let permissions = self.permissions.build(errors);
        let (Some(tools), Some(access), Some(permissions)) = (tools, access, permissions) else {
            return Err(self.errors);
        };
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        Ok(Policy {
            tools,
            modes,
            exec,
            rules: ArgLayer::new(self.rules, &env.base, env.home.as_deref()),
            access,
            permissions,
            rates: RateLayer::new(self.rates),
            confirmation_timeout: timeout,
            env,
            files,
            summary: self.summary,
        })
    }
}

/// Reads one document's `[confirmation]` section: its timeout, or the default (the shortest of
/// every document's stands).
fn gather_confirmation(
    r: &mut Reading<'_>,
    section: Option<&ConfirmationDoc>,
    out: &mut Vec<(u64, String)>,
) {
    match section.and_then(|c| c.timeout_secs.as_ref()) {
        Some(t) => {
            let secs = *t.get_ref();
            if secs == 0 || secs > 24 * 3600 {
                r.fail(
                    t.span(),
                    "confirmation.timeout_secs must be between 1 and 86400",
                );
            } else {
                out.push((secs, r.at(t.span())));
            }
        }
        None => out.push((
            DEFAULT_CONFIRMATION_TIMEOUT_SECS,
            format!(
                "{} (no timeout set: {DEFAULT_CONFIRMATION_TIMEOUT_SECS} s)",
                r.file()
            ),
        )),
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
        g.modes
            .keep_builtin(sources.is_empty(), &mut g.errors)
            .map_err(|e| vec![e])?;
        let files = sources.iter().map(|s| s.file.to_owned()).collect();
        g.finish(files, env)
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
