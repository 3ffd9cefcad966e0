//! Lexical path normalization and path allow/forbid globs. Pure string work: the home directory and
//! base directory are passed in, and symlinks are the runtime's business.

use std::borrow::Cow;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::{TargetError, shown};

/// Length of a leading home reference: `~` or `$HOME` ending at `/` or the end, or `${HOME}`.
/// `~user` is not expanded: that needs the password database, which is I/O.
fn home_prefix(text: &str) -> Option<usize> {
    let ends = |n: usize| text.len() == n || text[n..].starts_with('/');
    if text.starts_with('~') && ends(1) {
        Some(1)
    } else if text.starts_with("$HOME") && ends(5) {
        Some(5)
    } else if text.starts_with("${HOME}") {
        Some(7)
    } else {
        None
    }
}

/// Replaces a leading `~`, `~/`, `$HOME` or `${HOME}` with `home`. Without a home directory, or
/// for `~user`, the text is returned unchanged. A `$HOME` later in the text is left alone: only a
/// shell would expand it, and only the leading position is unambiguous.
pub fn expand_home(path: &str, home: Option<&str>) -> String {
    with_home(path, home).into_owned()
}

/// [`expand_home`], borrowing `path` when there is no home to expand (policy normalizes every
/// path argument of every call, and most name none).
fn with_home<'a>(path: &'a str, home: Option<&str>) -> Cow<'a, str> {
    match (home_prefix(path), home) {
        (Some(n), Some(home)) => Cow::Owned(format!("{home}{}", &path[n..])),
        _ => Cow::Borrowed(path),
    }
}

/// Makes `path` absolute and lexically normal: home expanded, relative paths joined to `base`,
/// `.`, `..` and repeated slashes removed, no trailing slash. `..` above `/` stays at `/`. A
/// relative `base` is taken as relative to `/`.
pub fn normalize_path(path: &str, base: &str, home: Option<&str>) -> String {
    let path = with_home(path, home);
    if path.starts_with('/') {
        lexical(&path)
    } else {
        lexical_parts(&[base, &path])
    }
}

fn lexical(path: &str) -> String {
    lexical_parts(&[path])
}

/// The lexical normal form of `pieces` joined with `/`, written into one string.
fn lexical_parts(pieces: &[&str]) -> String {
    let mut out = String::with_capacity(pieces.iter().map(|p| p.len() + 1).sum());
    for part in pieces.iter().flat_map(|p| p.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                let parent = out.rfind('/').unwrap_or(0);
                out.truncate(parent);
            }
            part => {
                out.push('/');
                out.push_str(part);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Whether path patterns tell upper from lower case. Use `Insensitive` where the file system
/// does not (macOS and Windows defaults), or `~/.SSH/id_rsa` slips past `~/.ssh/**`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathCase {
    /// `A` and `a` differ.
    Sensitive,
    /// `A` and `a` are the same.
    Insensitive,
}

/// An ordered path allow or forbid list of globs.
///
/// Each pattern is home-expanded and, if it contains a `/`, joined to the base directory and
/// normalized like a path. A pattern without `/` (`*.pem`, `id_rsa`) matches a name at any depth.
/// `*` and `?` stay within one path component, `**` crosses them, `\` escapes. Every pattern also
/// covers everything beneath what it matches, so `/etc` forbids `/etc/passwd` (but `/etc/**`
/// does not match `/etc` itself).
#[derive(Debug, Clone)]
pub struct PathList {
    patterns: Vec<String>,
    /// For each glob in `set`, the index of the pattern it came from.
    owners: Vec<usize>,
    set: GlobSet,
}

impl PathList {
    /// Compiles `patterns` against `base` and `home`. A pattern using `~` or `$HOME` when `home`
    /// is `None` is refused rather than read literally, so a forbid list keeps its meaning.
    pub fn new<I, S>(
        patterns: I,
        base: &str,
        home: Option<&str>,
        case: PathCase,
    ) -> Result<Self, TargetError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list = PathList {
            patterns: Vec::new(),
            owners: Vec::new(),
            set: GlobSet::empty(),
        };
        let mut builder = GlobSetBuilder::new();
        for (index, pattern) in patterns.into_iter().enumerate() {
            let pattern = pattern.as_ref();
            let err = |reason: String| TargetError::PathPattern {
                pattern: shown(pattern),
                reason,
            };
            let glob = pattern_glob(pattern, base, home).map_err(err)?;
            // Trimmed so that `/` covers `/**`, not `//**`.
            let beneath = format!("{}/**", glob.trim_end_matches('/'));
            for glob in [glob.as_str(), beneath.as_str()] {
                let compiled = GlobBuilder::new(glob)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .case_insensitive(case == PathCase::Insensitive)
                    .build()
                    .map_err(|e| err(e.kind().to_string()))?;
                builder.add(compiled);
                list.owners.push(index);
            }
            list.patterns.push(pattern.to_owned());
        }
        list.set = builder.build().map_err(|e| TargetError::PathPattern {
            pattern: e.glob().unwrap_or_default().to_owned(),
            reason: e.kind().to_string(),
        })?;
        Ok(list)
    }

    /// The indices (in list order, ascending, no repeats) of every pattern that covers
    /// `normalized_path`; see [`PathList::first_match`].
    pub fn matching(&self, normalized_path: &str) -> Vec<usize> {
        let mut hits: Vec<usize> = self
            .set
            .matches(normalized_path)
            .into_iter()
            .filter_map(|g| self.owners.get(g).copied())
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits
    }

    /// The pattern at `index`, as written.
    pub fn pattern(&self, index: usize) -> Option<&str> {
        self.patterns.get(index).map(String::as_str)
    }

    /// The first pattern, in list order and as written, that covers `normalized_path`. The path
    /// must come from [`normalize_path`] (with the same base and home), or `..` could walk out.
    pub fn first_match(&self, normalized_path: &str) -> Option<&str> {
        let first = self
            .set
            .matches(normalized_path)
            .into_iter()
            .filter_map(|g| self.owners.get(g))
            .min();
        first
            .and_then(|&i| self.patterns.get(i))
            .map(String::as_str)
    }
}

/// The glob a pattern compiles to. Substituted home and base directories are escaped so a `[` in
/// a directory name is not read as a character class.
fn pattern_glob(pattern: &str, base: &str, home: Option<&str>) -> Result<String, String> {
    let escape = |dir: &str| globset::escape(&lexical(dir)).replace('\\', "\\\\");
    if pattern.is_empty() {
        return Err("empty".into());
    }
    let pattern = match (home_prefix(pattern), home) {
        (Some(n), Some(home)) => format!("{}{}", escape(home), &pattern[n..]),
        (Some(_), None) => {
            return Err("refers to the home directory, which is not known here".into());
        }
        (None, _) => pattern.to_owned(),
    };
    Ok(if pattern.starts_with('/') {
        lexical(&pattern)
    } else if pattern.contains('/') {
        lexical(&format!("{}/{pattern}", escape(base)))
    } else {
        format!("**/{pattern}")
    })
}
