//! Where policy comes from and how it stays current: the config's `[policy]` table and the files
//! `policy_files` names are read and compiled together (the built-in policy when there are none).
//! The settings service (`crate::settings`) holds the policy in force and reloads it when the
//! shared file watcher sees one of these files change.
//!
//! A process that starts with an invalid policy refuses to start. A running process that sees an
//! invalid change keeps its last good policy, says so (log, warning event, admin log) and keeps
//! watching. Every successful reload is recorded in the admin log with what changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tw_core::policy::compile::BUILTIN_FILE;
use tw_core::policy::{Policy, PolicyDoc, PolicyEnv, PolicyError, PolicySource};
use tw_sandbox::Workspace;

use crate::config::Config;

/// Why a policy could not be loaded: every problem, each with its file and position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct PolicyLoadError {
    /// The problems.
    pub errors: Vec<PolicyError>,
}

fn io_error(path: &Path, e: &std::io::Error) -> PolicyError {
    PolicyError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot read the policy file: {e}"),
    }
}

/// The files a config's policy is read from: the config itself (if it has `[policy]`) and its
/// `policy_files`.
pub fn policy_paths(config: &Config) -> Vec<PathBuf> {
    config
        .source
        .iter()
        .filter(|_| config.policy.is_some())
        .cloned()
        .chain(config.policy_files.iter().cloned())
        .collect()
}

/// Reads and compiles the policy a config names.
pub fn load(config: &Config, env: PolicyEnv) -> Result<Policy, PolicyLoadError> {
    let config_file = config
        .source
        .as_ref()
        .map_or_else(|| "config".to_owned(), |p| p.display().to_string());
    let mut texts = Vec::new();
    let mut errors = Vec::new();
    for path in &config.policy_files {
        match std::fs::read_to_string(path) {
            Ok(text) => texts.push((path.display().to_string(), text)),
            Err(e) => errors.push(io_error(path, &e)),
        }
    }
    let mut docs = Vec::new();
    for (file, text) in &texts {
        match PolicyDoc::parse(text, file) {
            Ok(doc) => docs.push((file.as_str(), text.as_str(), doc)),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(PolicyLoadError { errors });
    }
    let mut sources: Vec<PolicySource<'_>> = Vec::new();
    if let Some(doc) = &config.policy {
        sources.push(PolicySource {
            file: &config_file,
            text: &config.text,
            doc,
        });
    }
    for (file, text, doc) in &docs {
        sources.push(PolicySource { file, text, doc });
    }
    let compiled = if sources.is_empty() {
        Policy::builtin(env)
    } else {
        Policy::compile(&sources, env)
    };
    compiled.map_err(|errors| PolicyLoadError { errors })
}

/// Describes where a loaded policy came from, for `config` and explanations.
pub fn describe(policy: &Policy) -> String {
    if policy.files.iter().any(|f| f == BUILTIN_FILE) {
        "the built-in policy".to_owned()
    } else {
        policy.files.join(", ")
    }
}

/// The policy environment of a runtime: the host resolver (which checks paths beneath the
/// workspace's roots first), home and the first workspace root, canonical as the workspace
/// opened it.
pub(crate) fn env(workspace: &Arc<Workspace>) -> PolicyEnv {
    let base = workspace.roots().first().and_then(|r| r.to_str());
    PolicyEnv {
        home: crate::paths::home_dir().and_then(|h| h.to_str().map(str::to_owned)),
        base: base.unwrap_or("/").to_owned(),
        resolver: Arc::new(tw_sandbox::HostResolver::beneath(Arc::clone(workspace))),
    }
}
