//! The file-system tools: read_file, write_file, list_directory, file_search, delete_file.
//!
//! Every path goes through `tw_sandbox::Workspace`, which resolves it beneath a workspace root in
//! the kernel (openat2 RESOLVE_BENEATH), so `..`, outside absolute paths, symlinks pointing out and
//! check-then-swap races are refused where the file is opened, not by string checks here.
//!
//! Small operations run inline on the async worker: they are a few syscalls, and handing them to a
//! blocking thread would cost more than the work. Walks and line scans, whose cost grows with the
//! tree or file, run on the blocking pool and stop when the call is cancelled.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{ErrorCode, IsolationLevel, RiskLevel, ToolCategory, ToolDefinition, ToolStatus};
use tw_sandbox::PathError;
use tw_sandbox::fs::{self as sfs, ListOptions, ReadOptions, SearchOptions, WriteMode};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, blocking, lit, output};

/// Room left in the output budget for the JSON around a file's content.
const ENVELOPE_BYTES: u64 = 1024;

fn failure(e: PathError) -> ToolFailure {
    let status = match e {
        PathError::OutsideWorkspace { .. } => ToolStatus::PermissionDenied,
        // The agent's pattern, not the file system: invalid arguments.
        PathError::Pattern { .. } => ToolStatus::ValidationError,
        _ => ToolStatus::Failed,
    };
    ToolFailure {
        status,
        code: e.code().to_owned(),
        message: e.to_string(),
    }
}

fn fs_definition(
    name: &str,
    description: &str,
    params: Value,
    out: Value,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut d = ToolDefinition::new(
        lit::name(name)?,
        description,
        ToolCategory::FileSystem,
        lit::group("fs")?,
        lit::params(params)?,
    );
    d.output_schema = lit::output(out)?;
    d.constraints.isolation = IsolationLevel::None;
    d.constraints.max_execution_time_ms = 10_000;
    Ok(d)
}

struct ReadFile;

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    start_line: Option<u64>,
    end_line: Option<u64>,
    max_bytes: Option<u64>,
    encoding: Option<String>,
}

/// `read_file`'s `encoding`: `None` for UTF-8, the streamed default.
fn encoding(name: Option<&str>) -> Option<sfs::Encoding> {
    match name? {
        "utf-16" => Some(sfs::Encoding::Utf16),
        "utf-16le" => Some(sfs::Encoding::Utf16Le),
        "utf-16be" => Some(sfs::Encoding::Utf16Be),
        "latin-1" => Some(sfs::Encoding::Latin1),
        "ascii" => Some(sfs::Encoding::Ascii),
        _ => None,
    }
}

impl BuiltinTool for ReadFile {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        fs_definition(
            "read_file",
            "Read a text file from the workspace, optionally a range of lines: UTF-8 unless encoding says UTF-16, Latin-1 or ASCII (the content comes back as text either way). Binary files are refused.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "Path relative to the workspace root, or absolute inside a root."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return (inclusive)."},
                    "max_bytes": {"type": "integer", "minimum": 1, "description": "Return at most this many bytes of content."},
                    "encoding": {"enum": ["utf-8", "utf-16", "utf-16le", "utf-16be", "latin-1", "ascii"], "description": "The file's encoding (default utf-8). utf-16 follows the byte order mark, little-endian without one. Files in another encoding than utf-8 are read whole: at most 32 MiB."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "size": {"type": "integer"},
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                    "total_lines": {"type": ["integer", "null"]},
                    "truncated": {"type": "boolean"}
                },
                "required": ["path", "content", "truncated"]
            }),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: ReadArgs = args(raw)?;
            if let (Some(s), Some(e)) = (a.start_line, a.end_line)
                && e < s
            {
                return Err(ToolFailure::failed(
                    ErrorCode::INVALID_ARGUMENTS,
                    format!("end_line {e} is before start_line {s}"),
                ));
            }
            let budget = ctx.max_output_bytes.saturating_sub(ENVELOPE_BYTES).max(1);
            let opts = ReadOptions {
                start_line: a.start_line,
                end_line: a.end_line,
                max_bytes: a.max_bytes.map_or(budget, |m| m.min(budget)),
            };
            if let Some(enc) = encoding(a.encoding.as_deref()) {
                let ws = Arc::clone(&ctx.workspace);
                let out = blocking("file task", move || {
                    sfs::read_decoded(&ws, &a.path, opts, enc).map_err(failure)
                })
                .await?;
                return Ok(out.into_json());
            }
            let out = if a.start_line.is_none() && a.end_line.is_none() {
                // Bounded by max_bytes: a few syscalls, cheaper inline than on a thread.
                sfs::read_file(&ctx.workspace, &a.path, opts).map_err(failure)?
            } else {
                let ws = Arc::clone(&ctx.workspace);
                blocking("file task", move || {
                    sfs::read_file(&ws, &a.path, opts).map_err(failure)
                })
                .await?
            };
            Ok(out.into_json())
        })
    }
}

struct WriteFile;

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ModeArg {
    Create,
    Overwrite,
    Append,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    mode: Option<ModeArg>,
    #[serde(default)]
    create_parents: bool,
}

impl BuiltinTool for WriteFile {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = fs_definition(
            "write_file",
            "Write a UTF-8 text file in the workspace: create (fails if it exists), overwrite (atomic replace, the default) or append.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "content": {"type": "string"},
                    "mode": {"enum": ["create", "overwrite", "append"], "default": "overwrite"},
                    "create_parents": {"type": "boolean", "default": false, "description": "Create missing parent directories."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "bytes_written": {"type": "integer"},
                    "created": {"type": "boolean"}
                },
                "required": ["path", "bytes_written", "created"]
            }),
        )?;
        d.constraints.side_effects = true;
        d.risk_level = RiskLevel::Medium;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: WriteArgs = args(raw)?;
            let mode = match a.mode {
                Some(ModeArg::Create) => WriteMode::Create,
                Some(ModeArg::Append) => WriteMode::Append,
                Some(ModeArg::Overwrite) | None => WriteMode::Overwrite,
            };
            let out = sfs::write_file(&ctx.workspace, &a.path, &a.content, mode, a.create_parents)
                .map_err(failure)?;
            output(&out)
        })
    }
}

struct ListDirectory;

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default = "dot")]
    path: String,
    #[serde(default = "one")]
    depth: u32,
    #[serde(default)]
    include_hidden: bool,
    #[serde(default = "thousand")]
    max_entries: usize,
}

fn dot() -> String {
    ".".to_owned()
}

fn one() -> u32 {
    1
}

fn thousand() -> usize {
    1000
}

impl BuiltinTool for ListDirectory {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        fs_definition(
            "list_directory",
            "List a workspace directory, optionally recursively. Symbolic links are listed, never followed.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "default": "."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 16, "default": 1},
                    "include_hidden": {"type": "boolean", "default": false},
                    "max_entries": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1000}
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "entries": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "kind": {"enum": ["file", "directory", "symlink", "other"]},
                                "size": {"type": ["integer", "null"]}
                            },
                            "required": ["path", "kind"]
                        }
                    },
                    "truncated": {"type": "boolean"}
                },
                "required": ["path", "entries", "truncated"]
            }),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: ListArgs = args(raw)?;
            let ws = Arc::clone(&ctx.workspace);
            let out = blocking("file task", move || {
                let opts = ListOptions {
                    depth: a.depth,
                    include_hidden: a.include_hidden,
                    max_entries: a.max_entries,
                };
                sfs::list_directory(&ws, &a.path, opts).map_err(failure)
            })
            .await?;
            output(&out)
        })
    }
}

struct FileSearch;

#[derive(Deserialize)]
struct SearchArgs {
    #[serde(default = "dot")]
    path: String,
    glob: Option<String>,
    content: Option<String>,
    #[serde(default)]
    regex: bool,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    include_hidden: bool,
    #[serde(default = "two_hundred")]
    max_results: usize,
}

fn two_hundred() -> usize {
    200
}

impl BuiltinTool for FileSearch {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = fs_definition(
            "file_search",
            "Find files in the workspace by glob (e.g. \"**/*.rs\") and/or by text they contain (literal, or a regular expression searched with ripgrep's engine). Returns matching paths, and matching lines for content searches.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "default": ".", "description": "Directory to search."},
                    "glob": {"type": "string", "minLength": 1, "description": "Glob matched against paths relative to `path`."},
                    "content": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Text to look for: literal and case-sensitive unless regex or case_insensitive say otherwise."},
                    "regex": {"type": "boolean", "default": false, "description": "content is a regular expression (ripgrep's syntax; a match never spans lines)."},
                    "case_insensitive": {"type": "boolean", "default": false, "description": "Match content regardless of case."},
                    "include_hidden": {"type": "boolean", "default": false},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 200}
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "matches": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "line": {"type": ["integer", "null"]},
                                "text": {"type": ["string", "null"]}
                            },
                            "required": ["path"]
                        }
                    },
                    "files_scanned": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                    "cancelled": {"type": "boolean"}
                },
                "required": ["matches", "truncated"]
            }),
        )?;
        d.constraints.max_execution_time_ms = 30_000;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: SearchArgs = args(raw)?;
            let ws = Arc::clone(&ctx.workspace);
            let cancel = ctx.cancel.clone();
            let out = blocking("file task", move || {
                let opts = SearchOptions {
                    glob: a.glob,
                    content: a.content,
                    regex: a.regex,
                    case_insensitive: a.case_insensitive,
                    include_hidden: a.include_hidden,
                    max_results: a.max_results,
                    max_file_bytes: 16 * 1024 * 1024,
                };
                sfs::file_search(&ws, &a.path, opts, &|| cancel.is_cancelled()).map_err(failure)
            })
            .await?;
            output(&out)
        })
    }
}

struct DeleteFile;

#[derive(Deserialize)]
struct DeleteArgs {
    path: String,
}

impl BuiltinTool for DeleteFile {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = fs_definition(
            "delete_file",
            "Delete a file (or a symbolic link, never its target) from the workspace. Directories are refused.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "minLength": 1}},
                "required": ["path"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "deleted_kind": {"enum": ["file", "directory", "symlink", "other"]}
                },
                "required": ["path", "deleted_kind"]
            }),
        )?;
        d.constraints.side_effects = true;
        d.requires_confirmation = true;
        d.risk_level = RiskLevel::High;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: DeleteArgs = args(raw)?;
            let out = sfs::delete_file(&ctx.workspace, &a.path).map_err(failure)?;
            output(&out)
        })
    }
}

pub(super) fn tools() -> Vec<Arc<dyn BuiltinTool>> {
    vec![
        Arc::new(ReadFile),
        Arc::new(WriteFile),
        Arc::new(ListDirectory),
        Arc::new(FileSearch),
        Arc::new(DeleteFile),
    ]
}
