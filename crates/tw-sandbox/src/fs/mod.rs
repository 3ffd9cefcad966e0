//! The file operations built-in tools offer agents: read, write, list, search and delete, each
//! confined to the [`Workspace`](crate::Workspace).
//!
//! Every operation resolves its path through the workspace (the kernel checks it beneath a root's
//! descriptor) and then works only on descriptors: `fstat` on the opened file, `getdents` on the
//! opened directory, `*at` calls relative to a parent directory obtained the same way. Walks never
//! follow symlinks; they report them.
//!
//! The functions are synchronous and cheap for small files (a handful of system calls, one or
//! two buffers sized to the file); callers decide whether a call is worth a blocking thread.
//!
//! Outputs are `Serialize` with snake_case fields, so the runtime can return them as JSON as-is.

mod decode;
mod read;
mod walk;
mod write;

use rustix::fs::FileType;
use serde::Serialize;

pub use decode::{Encoding, MAX_DECODED_FILE, read_decoded};
pub use read::{open_regular, read_file};
pub use walk::{HiddenPaths, file_search, list_directory, paths_to_hide};
pub use write::{delete_file, save_new_file, write_file};

/// What to read from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// First line to return, 1-based. `None` starts at the beginning.
    pub start_line: Option<u64>,
    /// Last line to return, inclusive. `None` reads to the end.
    pub end_line: Option<u64>,
    /// Most bytes of content to return; the cut is made at a character boundary.
    pub max_bytes: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            start_line: None,
            end_line: None,
            max_bytes: 1024 * 1024,
        }
    }
}

/// What [`read_file`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadOutput {
    /// The path as the workspace shows it.
    pub path: String,
    /// The text read (lines keep their line endings).
    pub content: String,
    /// The file's size in bytes.
    pub size: u64,
    /// The first line asked for (1 unless a range was given).
    pub start_line: u64,
    /// The last line (partly) returned; `start_line - 1` if none was.
    pub end_line: u64,
    /// The number of lines in the file, when the whole file was read.
    pub total_lines: Option<u64>,
    /// Whether content was cut at `max_bytes`.
    pub truncated: bool,
}

impl ReadOutput {
    /// The output as JSON, the same object `Serialize` writes (same keys, same order), with the
    /// content moved in: serializing by reference would copy it, and it is most of the output.
    pub fn into_json(self) -> serde_json::Value {
        let ReadOutput {
            path,
            content,
            size,
            start_line,
            end_line,
            total_lines,
            truncated,
        } = self;
        let mut map = serde_json::Map::with_capacity(7);
        map.insert("path".to_owned(), path.into());
        map.insert("content".to_owned(), content.into());
        map.insert("size".to_owned(), size.into());
        map.insert("start_line".to_owned(), start_line.into());
        map.insert("end_line".to_owned(), end_line.into());
        map.insert("total_lines".to_owned(), total_lines.into());
        map.insert("truncated".to_owned(), truncated.into());
        serde_json::Value::Object(map)
    }
}

/// How [`write_file`] treats an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Create a new file; fail with `already_exists` if anything is there.
    Create,
    /// Replace the file atomically, or create it.
    Overwrite,
    /// Append to the file, or create it.
    Append,
}

/// What [`write_file`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteOutput {
    /// The path as the workspace shows it.
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// Whether the file did not exist before.
    pub created: bool,
}

/// What to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOptions {
    /// How deep to go: 1 lists direct children only (0 is treated as 1).
    pub depth: u32,
    /// Whether to list (and descend into) names starting with `.`.
    pub include_hidden: bool,
    /// Most entries to return.
    pub max_entries: usize,
}

impl Default for ListOptions {
    fn default() -> Self {
        Self {
            depth: 1,
            include_hidden: false,
            max_entries: 1000,
        }
    }
}

/// What kind of thing a directory entry is. Symlinks are reported as such, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl EntryKind {
    pub(crate) fn of(ft: FileType) -> Self {
        match ft {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        }
    }
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirEntry {
    /// The entry's path as the workspace shows it (usable as input to the other operations).
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes, for regular files.
    pub size: Option<u64>,
}

/// What [`list_directory`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListOutput {
    /// The listed directory as the workspace shows it.
    pub path: String,
    /// Entries in path order, each directory followed by its contents.
    pub entries: Vec<DirEntry>,
    /// Whether more entries existed than `max_entries`.
    pub truncated: bool,
}

/// What to search for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    /// Glob the file's path must match. A pattern without `/` matches the file name at any depth
    /// (`*.rs`); one with `/` matches the path relative to the searched directory, where `*`
    /// stays within one name and `**` crosses directories (`src/**/*.rs`).
    pub glob: Option<String>,
    /// Text the file must contain, literal and case-sensitive unless `regex` or
    /// `case_insensitive` say otherwise; each matching line is reported.
    pub content: Option<String>,
    /// Whether `content` is a regular expression (Rust's syntax, as ripgrep takes it; a match
    /// never spans lines).
    pub regex: bool,
    /// Whether `content` matches regardless of case.
    pub case_insensitive: bool,
    /// Whether to search names starting with `.`.
    pub include_hidden: bool,
    /// Most matches to return.
    pub max_results: usize,
    /// Files larger than this are not searched for content.
    pub max_file_bytes: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            glob: None,
            content: None,
            regex: false,
            case_insensitive: false,
            include_hidden: false,
            max_results: 200,
            max_file_bytes: 16 * 1024 * 1024,
        }
    }
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchMatch {
    /// The file as the workspace shows it.
    pub path: String,
    /// The 1-based line of a content match.
    pub line: Option<u64>,
    /// The matching line (without its line ending), at most 500 bytes.
    pub text: Option<String>,
}

/// What [`file_search`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchOutput {
    /// Matches in path order, then line order.
    pub matches: Vec<SearchMatch>,
    /// Regular files visited (whether or not they matched).
    pub files_scanned: u64,
    /// Whether more matches existed than `max_results`.
    pub truncated: bool,
    /// Whether the search stopped early because it was cancelled.
    pub cancelled: bool,
}

/// What [`delete_file`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeleteOutput {
    /// The deleted path as the workspace shows it.
    pub path: String,
    /// What was deleted: a file, or a symlink (never its target).
    pub deleted_kind: EntryKind,
}

/// How many leading bytes are checked for NUL to call a file binary.
pub(crate) const BINARY_SNIFF: usize = 8192;

/// Whether `bytes` hold a NUL. Folded without stopping early so that it vectorizes: about three
/// times faster than `contains(&0)` on the few KiB it is asked about.
pub(crate) fn has_nul(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |seen, &b| seen | u8::from(b == 0)) != 0
}

#[cfg(test)]
mod attacks;
#[cfg(test)]
mod regex_tests;
#[cfg(test)]
mod tests;
