//! `list_directory`, `file_search` and the search for what a sandbox must hide
//! ([`paths_to_hide`]): walks of a directory tree that never leave it.
//!
//! The walk holds a descriptor per directory on its current path and opens each child directory
//! relative to its parent's descriptor with `openat2(RESOLVE_NO_SYMLINKS)` on the single name, so
//! a symlink is never followed (it is reported as a symlink), and a directory swapped for a
//! symlink mid-walk is refused rather than entered. Each directory's names are read in full and
//! sorted before descending, which gives path order with every directory followed by its
//! contents, deterministic output and an early stop at the entry limit without collecting the
//! whole tree.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::SearcherBuilder;
use grep_searcher::sinks::UTF8;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

use super::{
    BINARY_SNIFF, DirEntry, EntryKind, ListOptions, ListOutput, SearchMatch, SearchOptions,
    SearchOutput, has_nul,
};
use crate::workspace::{NO_SYMLINKS, PathError, Workspace, WsPath, openat2_beneath};

/// How deep a search descends; deeper directories are not searched.
const SEARCH_MAX_DEPTH: u32 = 128;
/// The most memory a content pattern may compile to.
const MAX_PATTERN_SIZE: usize = 8 << 20;
/// Longest matching line returned by a content search.
const MAX_LINE_TEXT: usize = 500;

/// Lists a directory of the workspace, `opts.depth` levels deep, in path order.
pub fn list_directory(
    ws: &Workspace,
    path: &str,
    opts: ListOptions,
) -> Result<ListOutput, PathError> {
    let (p, fd) = open_start(ws, path)?;
    let base = p.display();
    let mut entries = Vec::new();
    let mut truncated = false;
    walk(fd, opts.depth.max(1), opts.include_hidden, |e| {
        if entries.len() >= opts.max_entries {
            truncated = true;
            return Flow::Stop;
        }
        let size = match e.kind {
            EntryKind::File => rustix::fs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .and_then(|st| u64::try_from(st.st_size).ok()),
            _ => None,
        };
        entries.push(DirEntry {
            path: join(&base, e.below),
            kind: e.kind,
            size,
        });
        Flow::Continue
    })?;
    Ok(ListOutput {
        path: base,
        entries,
        truncated,
    })
}

/// Searches the files under a directory of the workspace by glob and/or literal content. Checks
/// `cancel` before each file and returns what it found so far, flagged, once it says stop.
pub fn file_search(
    ws: &Workspace,
    path: &str,
    opts: SearchOptions,
    cancel: &dyn Fn() -> bool,
) -> Result<SearchOutput, PathError> {
    let glob = opts
        .glob
        .as_deref()
        .map(|g| compile_glob(g).map(|m| (m, !g.contains('/'))))
        .transpose()?;
    if opts.content.as_deref() == Some("") {
        return Err(PathError::invalid(
            path,
            "the content to search for is empty",
        ));
    }
    let matcher = match &opts.content {
        Some(c) if opts.regex || opts.case_insensitive => {
            Some(content_matcher(c, opts.regex, opts.case_insensitive)?)
        }
        _ => None,
    };
    let mut searcher = SearcherBuilder::new().line_number(true).build();
    let (p, fd) = open_start(ws, path)?;
    let base = p.display();
    let mut out = SearchOutput {
        matches: Vec::new(),
        files_scanned: 0,
        truncated: false,
        cancelled: false,
    };
    let mut buf = Vec::new();
    walk(fd, SEARCH_MAX_DEPTH, opts.include_hidden, |e| {
        if e.kind != EntryKind::File {
            return Flow::Continue;
        }
        if cancel() {
            out.cancelled = true;
            return Flow::Stop;
        }
        out.files_scanned += 1;
        if let Some((matcher, name_only)) = &glob {
            let subject = if *name_only {
                e.below.rsplit('/').next().unwrap_or(e.below)
            } else {
                e.below
            };
            if !matcher.is_match(subject) {
                return Flow::Continue;
            }
        }
        let shown = join(&base, e.below);
        let Some(needle) = opts.content.as_deref() else {
            return push(&mut out, &opts, shown, None, None);
        };
        let Some(text) = read_text(e.dir, e.name, opts.max_file_bytes, &mut buf) else {
            return Flow::Continue;
        };
        if let Some(m) = &matcher {
            let mut flow = Flow::Continue;
            // The sink never fails and the text is UTF-8, so the search cannot fail either.
            let _ = searcher.search_slice(
                m,
                text.as_bytes(),
                UTF8(|line, found| {
                    let found = cap(found.trim_end_matches(['\n', '\r']), MAX_LINE_TEXT);
                    flow = push(
                        &mut out,
                        &opts,
                        shown.clone(),
                        Some(line),
                        Some(found.to_owned()),
                    );
                    Ok(flow == Flow::Continue)
                }),
            );
            return flow;
        }
        let mut line = 1u64;
        let mut counted = 0usize;
        let mut from = 0usize;
        while let Some(i) = text[from..].find(needle) {
            let at = from + i;
            line += text.as_bytes()[counted..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count() as u64;
            counted = at;
            let start = text[..at].rfind('\n').map_or(0, |j| j + 1);
            let end = text[at..].find('\n').map_or(text.len(), |j| at + j);
            let found = cap(text[start..end].trim_end_matches('\r'), MAX_LINE_TEXT);
            if push(
                &mut out,
                &opts,
                shown.clone(),
                Some(line),
                Some(found.to_owned()),
            ) == Flow::Stop
            {
                return Flow::Stop;
            }
            // One match per line: continue after this line (and after the match, in case the
            // needle itself contains a line break).
            from = end.max(at + needle.len());
            if from >= text.len() {
                break;
            }
        }
        Flow::Continue
    })?;
    Ok(out)
}

fn push(
    out: &mut SearchOutput,
    opts: &SearchOptions,
    path: String,
    line: Option<u64>,
    text: Option<String>,
) -> Flow {
    if out.matches.len() >= opts.max_results {
        out.truncated = true;
        return Flow::Stop;
    }
    out.matches.push(SearchMatch { path, line, text });
    Flow::Continue
}

/// The matcher for a regular expression or a case-insensitive literal: ripgrep's own, lines
/// never spanned, its compiled size bounded (a pattern is the agent's, so is its cost).
fn content_matcher(content: &str, regex: bool, ci: bool) -> Result<RegexMatcher, PathError> {
    let pattern = if regex {
        content.to_owned()
    } else {
        regex_syntax::escape(content)
    };
    RegexMatcherBuilder::new()
        .case_insensitive(ci)
        .line_terminator(Some(b'\n'))
        .size_limit(MAX_PATTERN_SIZE)
        .dfa_size_limit(MAX_PATTERN_SIZE)
        .build(&pattern)
        .map_err(|e| PathError::Pattern {
            pattern: content.to_owned(),
            reason: e.to_string(),
        })
}

fn compile_glob(glob: &str) -> Result<GlobMatcher, PathError> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| PathError::invalid(glob, format!("not a valid glob: {e}")))
}

/// Reads a regular file named `name` in `dir` as text, or `None` if it is not one, is larger
/// than `max`, or is binary. `buf` is reused across files.
fn read_text<'b>(
    dir: BorrowedFd<'_>,
    name: &CStr,
    max: u64,
    buf: &'b mut Vec<u8>,
) -> Option<&'b str> {
    let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::NOFOLLOW;
    let fd = openat2_beneath(dir, c_path(name), flags, Mode::empty(), NO_SYMLINKS).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || u64::try_from(st.st_size).ok()? > max
    {
        return None;
    }
    buf.clear();
    File::from(fd).take(max).read_to_end(buf).ok()?;
    if has_nul(&buf[..buf.len().min(BINARY_SNIFF)]) {
        return None;
    }
    std::str::from_utf8(buf).ok()
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn cap(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

fn join(base: &str, below: &str) -> String {
    if base == "." {
        below.to_owned()
    } else {
        format!("{base}/{below}")
    }
}

fn c_path(name: &CStr) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()))
}

/// Resolves and opens the directory a walk starts from.
fn open_start(ws: &Workspace, path: &str) -> Result<(WsPath, OwnedFd), PathError> {
    let p = ws.resolve(path)?;
    let fd = ws
        .open_at(&p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| PathError::from_errno(e, path))?;
    Ok((p, fd))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    /// Go on, but not into this directory.
    Skip,
    Stop,
}

/// What [`paths_to_hide`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HiddenPaths {
    /// Every entry was seen; these are the ones to hide (a hidden directory's contents are not
    /// listed separately).
    Complete(Vec<PathBuf>),
    /// The roots hold more than the walk may visit, so the list would be incomplete.
    TooMany {
        /// The limit that was reached.
        limit: usize,
    },
}

/// The entries under the workspace roots that `hidden` asks to hide, for a sandbox to mask:
/// every entry (dot files too; symlinks are reported, never followed) is shown to `hidden` as an
/// absolute path, and a directory it hides is not entered. Names that are not UTF-8 are shown
/// lossily. Gives up after `max_entries` entries, since a partial list would leave the rest
/// visible.
pub fn paths_to_hide(
    ws: &Workspace,
    max_entries: usize,
    hidden: &dyn Fn(&str) -> bool,
) -> Result<HiddenPaths, PathError> {
    let mut found = Vec::new();
    let mut seen = 0usize;
    for root in ws.roots() {
        let shown = root.to_string_lossy();
        let (_, fd) = open_start(ws, &shown)?;
        let mut too_many = false;
        walk(fd, SEARCH_MAX_DEPTH, true, |e| {
            seen += 1;
            if seen > max_entries {
                too_many = true;
                return Flow::Stop;
            }
            let path = join(shown.trim_end_matches('/'), e.below);
            if hidden(&path) {
                found.push(PathBuf::from(path));
                return Flow::Skip;
            }
            Flow::Continue
        })?;
        if too_many {
            return Ok(HiddenPaths::TooMany { limit: max_entries });
        }
    }
    Ok(HiddenPaths::Complete(found))
}

/// What a walk shows its visitor.
struct Entry<'a> {
    /// The directory containing the entry.
    dir: BorrowedFd<'a>,
    /// The entry's name in `dir`.
    name: &'a CStr,
    /// The path below the starting directory, `/`-separated.
    below: &'a str,
    kind: EntryKind,
}

/// One directory on the walk's current path.
struct Frame {
    dir: Dir,
    /// Path of this directory below the start ("" for the start).
    below: String,
    /// Names not yet visited, sorted in reverse so `pop` yields them in order.
    names: Vec<(CString, FileType)>,
    /// Depth of this directory's children (1 for the start's).
    depth: u32,
}

/// Visits everything under `start` down to `max_depth`, depth first in name order, without
/// following symlinks.
fn walk(
    start: OwnedFd,
    max_depth: u32,
    include_hidden: bool,
    mut visit: impl FnMut(&Entry<'_>) -> Flow,
) -> Result<(), PathError> {
    let first =
        frame(start, String::new(), 1, include_hidden).map_err(|e| PathError::io(".", e))?;
    let mut stack = vec![first];
    while let Some(top) = stack.last_mut() {
        let Some((name, hint)) = top.names.pop() else {
            stack.pop();
            continue;
        };
        let lossy = name.to_string_lossy();
        let below = if top.below.is_empty() {
            lossy.into_owned()
        } else {
            format!("{}/{lossy}", top.below)
        };
        let Ok(dir_fd) = top.dir.fd() else {
            stack.pop();
            continue;
        };
        let ft = match hint {
            FileType::Unknown => match rustix::fs::statat(dir_fd, &name, AtFlags::SYMLINK_NOFOLLOW)
            {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                // Gone since the directory was read.
                Err(_) => continue,
            },
            ft => ft,
        };
        let kind = EntryKind::of(ft);
        let entry = Entry {
            dir: dir_fd,
            name: &name,
            below: &below,
            kind,
        };
        let flow = visit(&entry);
        if flow == Flow::Stop {
            return Ok(());
        }
        if flow == Flow::Continue && kind == EntryKind::Directory && top.depth < max_depth {
            let depth = top.depth + 1;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW;
            // Refused (ELOOP) if the directory was swapped for a symlink since it was read.
            let child = openat2_beneath(dir_fd, c_path(&name), flags, Mode::empty(), NO_SYMLINKS);
            match child
                .map_err(std::io::Error::from)
                .and_then(|fd| frame(fd, below, depth, include_hidden))
            {
                Ok(f) => stack.push(f),
                Err(e) => {
                    tracing::debug!(error = %e, "skipping a directory that could not be read")
                }
            }
        }
    }
    Ok(())
}

fn frame(fd: OwnedFd, below: String, depth: u32, include_hidden: bool) -> std::io::Result<Frame> {
    let mut dir = Dir::new(fd)?;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." || (!include_hidden && bytes.starts_with(b".")) {
            continue;
        }
        names.push((name.to_owned(), entry.file_type()));
    }
    names.sort_unstable_by(|a, b| b.0.cmp(&a.0));
    Ok(Frame {
        dir,
        below,
        names,
        depth,
    })
}
