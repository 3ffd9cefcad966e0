//! The config's `[system]` section: what the host-inspection tools may look at. Which processes
//! `check_process_health` may report on (name globs; a process asked for by pid is held to them
//! by its name), whether `read_system_logs` may read the journal (and which one), and the
//! directories of log files it may read, each by a short name agents use.
//!
//! Parsing stays pure like the rest of the config: globs are compiled here once to check them
//! (the tool compiles its own set from the written forms), log roots are made absolute and
//! opened only when the runtime opens, so a missing directory refuses to start with its place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::MAX_SHORT_NAME;

/// What `[system]` says, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemSettings {
    /// Globs of the process names `check_process_health` may report on; `None` is every process
    /// the runtime's user can see.
    pub processes: Option<Vec<String>>,
    /// Whether `read_system_logs` may read the systemd journal (through `journalctl`).
    pub journal: bool,
    /// The journal directory to read instead of the system's (`journalctl --directory`): a
    /// container's or a copied journal.
    pub journal_directory: Option<PathBuf>,
    /// Directories of log files `read_system_logs` may read, by the name agents give.
    pub log_roots: BTreeMap<String, LogRoot>,
}

impl Default for SystemSettings {
    fn default() -> Self {
        Self {
            processes: None,
            journal: true,
            journal_directory: None,
            log_roots: BTreeMap::new(),
        }
    }
}

/// One `[system.log_roots]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRoot {
    /// The directory (absolute).
    pub path: PathBuf,
    /// Where the config names it (a byte offset into the config's text), for errors.
    pub at: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SystemDoc {
    processes: Option<Vec<Spanned<String>>>,
    journal: Option<bool>,
    journal_directory: Option<Spanned<String>>,
    #[serde(default)]
    log_roots: BTreeMap<Spanned<String>, Spanned<String>>,
}

type Failure = (usize, String);

/// The most process globs: they are one set, but a list this long is a mistake.
const MAX_GLOBS: usize = 256;

/// Checks `[system]`.
pub(super) fn settings(
    d: SystemDoc,
    base: &Path,
    home: Option<&Path>,
) -> Result<SystemSettings, Failure> {
    let mut s = SystemSettings::default();
    if let Some(globs) = d.processes {
        if globs.len() > MAX_GLOBS {
            let at = globs.get(MAX_GLOBS).map_or(0, |g| g.span().start);
            return Err((
                at,
                format!("system.processes: at most {MAX_GLOBS} patterns"),
            ));
        }
        let mut written = Vec::with_capacity(globs.len());
        for g in globs {
            if g.get_ref().is_empty() {
                return Err((
                    g.span().start,
                    "system.processes: a pattern is empty".into(),
                ));
            }
            globset::Glob::new(g.get_ref()).map_err(|e| {
                (
                    g.span().start,
                    format!(
                        "system.processes: {:?} is not a glob: {}",
                        g.get_ref(),
                        e.kind()
                    ),
                )
            })?;
            written.push(g.into_inner());
        }
        s.processes = Some(written);
    }
    if let Some(j) = d.journal {
        s.journal = j;
    }
    if let Some(dir) = d.journal_directory {
        if dir.get_ref().is_empty() {
            return Err((dir.span().start, "system.journal_directory is empty".into()));
        }
        s.journal_directory = Some(super::expand(dir.get_ref(), base, home));
    }
    for (name, path) in d.log_roots {
        let n = name.get_ref();
        if !super::short_name(n) || n == JOURNAL {
            return Err((
                name.span().start,
                format!(
                    "system.log_roots: {n:?} is not a log root name (1 to {MAX_SHORT_NAME} lowercase \
                     letters, digits, '_' and '-', starting with a letter; {JOURNAL:?} is the \
                     journal's)"
                ),
            ));
        }
        if path.get_ref().is_empty() {
            return Err((
                path.span().start,
                format!("system.log_roots.{n}: the directory is empty"),
            ));
        }
        let root = LogRoot {
            path: super::expand(path.get_ref(), base, home),
            at: path.span().start,
        };
        s.log_roots.insert(name.into_inner(), root);
    }
    Ok(s)
}

/// The source name that means the journal.
pub const JOURNAL: &str = "journal";

/// The log roots `read_system_logs` reads, each opened as a one-root workspace, by name.
pub type LogRoots = BTreeMap<String, std::sync::Arc<tw_sandbox::Workspace>>;

impl super::Config {
    /// Opens every `[system.log_roots]` directory (the runtime calls this when it opens). One that
    /// is missing or not a directory is refused with the place the config names it.
    pub fn log_roots(&self) -> Result<LogRoots, super::ConfigError> {
        let mut out = LogRoots::new();
        for (name, root) in &self.system.log_roots {
            let ws =
                tw_sandbox::Workspace::open(std::slice::from_ref(&root.path)).map_err(|e| {
                    let (line, column) = tw_core::load::line_col(&self.text, root.at);
                    super::ConfigError {
                        file: self
                            .source
                            .as_ref()
                            .map_or_else(|| "config".to_owned(), |p| p.display().to_string()),
                        line: Some(line),
                        column: Some(column),
                        message: format!("system.log_roots.{name}: {e}"),
                    }
                })?;
            out.insert(name.clone(), std::sync::Arc::new(ws));
        }
        Ok(out)
    }
}
