//! `read_system_logs`: the newest entries of the systemd journal or of a log file under one of
//! the config's log roots (`[system.log_roots]`), newest last, filtered by text and, in the
//! journal, by unit, priority and time. Reads only, and only what the config names.
//!
//! The journal is read by `journalctl` (the one reader that understands every journal format
//! systemd writes), run through the sandbox like every process a tool starts, without a shell,
//! its arguments built from validated values: newest entries first, as many as asked for
//! (matching entries are counted), the text filter a literal `--grep`; the process is stopped
//! at its time limit or with the call.
//!
//! A log file is opened beneath its root like a workspace file (no symlink or `..` leads out, a
//! FIFO or device is refused before a byte is read), and only its last [`MAX_SCAN_BYTES`] are
//! read: logs are long and the newest lines are the ones asked about. Without a `file`, the call
//! lists the root's files instead.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tw_core::{ErrorCode, IsolationLevel, RiskLevel, ToolCategory, ToolDefinition, ToolStatus};
use tw_sandbox::fs::{self as sfs, ListOptions};
use tw_sandbox::{FsView, PathError, ProcessSpec, RunOutcome};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, blocking, lit};
use crate::config::{JOURNAL, LogRoots, SystemSettings};

/// Entries returned unless the call asks for fewer or more.
const DEFAULT_LIMIT: u64 = 100;
/// The most entries one call returns.
const MAX_LIMIT: u64 = 1_000;
/// How long `journalctl` may take (the call's own limit is 30 s).
const JOURNAL_TIME: Duration = Duration::from_secs(25);
/// How much of `journalctl`'s output is kept: 1,000 entries of a few KiB each.
const MAX_JOURNAL_OUTPUT: usize = 8 << 20;
/// How much of a log file's end one call reads.
const MAX_SCAN_BYTES: u64 = 16 << 20;
/// The longest message returned; longer ones are cut, marked with `…`.
const MAX_MESSAGE: usize = 4_096;
/// The most files a listing returns.
const MAX_FILES: usize = 500;
/// The journal's priorities, most severe first (their index is syslog's number).
const PRIORITIES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

const NOT_CONFIGURED: &str = "not_configured";
const NOT_AVAILABLE: &str = "not_available";

pub(super) struct ReadSystemLogs {
    /// The journal, when the config allows it: `None` for the system's, or a directory.
    journal: Option<Option<PathBuf>>,
    roots: Arc<LogRoots>,
}

#[derive(Deserialize)]
struct Args {
    source: String,
    file: Option<String>,
    unit: Option<String>,
    priority: Option<String>,
    since: Option<String>,
    until: Option<String>,
    contains: Option<String>,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    DEFAULT_LIMIT
}

fn invalid(message: String) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::ValidationError,
        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
        message,
    }
}

impl ReadSystemLogs {
    fn sources(&self) -> Vec<&str> {
        let mut s: Vec<&str> = Vec::new();
        if self.journal.is_some() {
            s.push(JOURNAL);
        }
        s.extend(self.roots.keys().map(String::as_str));
        s
    }
}

impl BuiltinTool for ReadSystemLogs {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let sources = self.sources();
        let source = if sources.is_empty() {
            json!({"type": "string", "minLength": 1,
                   "description": "Where to read. None is configured: the administrator enables the journal or adds [system.log_roots] to the config."})
        } else {
            json!({"type": "string", "enum": sources,
                   "description": "\"journal\" for the systemd journal, or a log root's name from the config."})
        };
        let mut d = ToolDefinition::new(
            lit::name("read_system_logs")?,
            "Read the newest entries of the systemd journal or of a log file under a log root \
             the administrator configured, oldest of them first. Filter by text (any source) \
             and by unit, priority and time (the journal). Without a file, a log root's files \
             are listed.",
            ToolCategory::System,
            lit::group("system")?,
            lit::params(json!({
                "type": "object",
                "properties": {
                    "source": source,
                    "file": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "A log file, relative to the log root (log roots only). Omit it to list the root's files."},
                    "unit": {"type": "string", "pattern": "^[A-Za-z0-9_][A-Za-z0-9@._:\\\\-]{0,255}$",
                             "description": "Only this systemd unit's entries, like nginx.service (journal only)."},
                    "priority": {"enum": PRIORITIES,
                                 "description": "Only entries this severe or more (journal only)."},
                    "since": {"type": "string", "minLength": 1, "maxLength": 64,
                              "description": "Only entries from this time on: RFC 3339 in UTC (2026-11-28T12:00:00Z) or a duration ago (1h, 30min, 2days) (journal only)."},
                    "until": {"type": "string", "minLength": 1, "maxLength": 64,
                              "description": "Only entries up to this time, written like since (journal only)."},
                    "contains": {"type": "string", "minLength": 1, "maxLength": 256,
                                 "description": "Only entries whose message contains this text, ignoring case."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                              "description": "The most entries to return, the newest (default 100)."}
                },
                "required": ["source"],
                "additionalProperties": false
            }))?,
        );
        d.output_schema = lit::output(json!({
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "entries": {"type": "array", "maxItems": MAX_LIMIT},
                "files": {"type": "array"},
                "truncated": {"type": "boolean"}
            },
            "required": ["source", "truncated"]
        }))?;
        d.risk_level = RiskLevel::Medium;
        d.constraints.isolation = IsolationLevel::None;
        d.constraints.max_execution_time_ms = 30_000;
        d.constraints.max_output_bytes = 4 << 20;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: Args = args(raw)?;
            if a.source == JOURNAL {
                let Some(directory) = &self.journal else {
                    return Err(not_configured(&self.sources()));
                };
                if a.file.is_some() {
                    return Err(invalid(
                        "file: the journal has no files to name; file is for log roots".into(),
                    ));
                }
                return journal(ctx, directory.as_deref(), &a).await;
            }
            let Some(ws) = self.roots.get(&a.source) else {
                return Err(not_configured(&self.sources()));
            };
            for (field, given) in [
                ("unit", a.unit.is_some()),
                ("priority", a.priority.is_some()),
                ("since", a.since.is_some()),
                ("until", a.until.is_some()),
            ] {
                if given {
                    return Err(invalid(format!(
                        "{field}: applies to the journal only, not to the log root {:?}",
                        a.source
                    )));
                }
            }
            let ws = Arc::clone(ws);
            let source = a.source.clone();
            blocking("reading the log", move || file(&ws, &source, &a)).await
        })
    }
}

fn not_configured(sources: &[&str]) -> ToolFailure {
    if sources.is_empty() {
        return ToolFailure::failed(
            NOT_CONFIGURED,
            "no log source is configured: set [system] journal = true or add \
             [system.log_roots] NAME = \"/var/log/app\" to the config",
        );
    }
    invalid(format!(
        "source: not a log source here; the config has {}",
        sources.join(", ")
    ))
}

/// `text` cut to [`MAX_MESSAGE`] bytes at a character boundary, marked when cut.
fn cut(text: &str) -> String {
    if text.len() <= MAX_MESSAGE {
        return text.to_owned();
    }
    let mut end = MAX_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Whether `message` contains `needle` (already lowercased), ignoring case.
fn matches(message: &str, needle: Option<&str>) -> bool {
    needle.is_none_or(|n| message.to_lowercase().contains(n))
}

/// A `since`/`until` argument as seconds since the epoch.
fn instant(field: &str, text: &str) -> Result<u64, ToolFailure> {
    let at = humantime::parse_rfc3339_weak(text)
        .ok()
        .or_else(|| {
            humantime::parse_duration(text)
                .ok()
                .and_then(|ago| SystemTime::now().checked_sub(ago))
        })
        .ok_or_else(|| {
            invalid(format!(
                "{field}: {text:?} is neither an RFC 3339 time in UTC (2026-11-28T12:00:00Z) nor \
                 a duration ago (1h, 30min, 2days)"
            ))
        })?;
    Ok(at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// Reads the journal: `journalctl` as a sandboxed process (standard isolation: it reads what
/// the runtime's user may read, under the sandbox's limits), newest entries first and only as
/// many as asked for (`--lines` counts matching entries), its output capped.
async fn journal(
    ctx: &ToolContext,
    directory: Option<&std::path::Path>,
    a: &Args,
) -> Result<Value, ToolFailure> {
    let mut argv: Vec<String> = [
        "--no-pager",
        "--quiet",
        "--output=json",
        "--reverse",
        "--output-fields=MESSAGE,PRIORITY,_SYSTEMD_UNIT,_PID,SYSLOG_IDENTIFIER",
    ]
    .map(str::to_owned)
    .into();
    if let Some(dir) = directory {
        argv.push(format!("--directory={}", dir.display()));
    }
    if let Some(unit) = &a.unit {
        argv.push(format!("--unit={unit}"));
    }
    if let Some(p) = &a.priority {
        argv.push(format!("--priority={p}"));
    }
    if let Some(s) = &a.since {
        argv.push(format!("--since=@{}", instant("since", s)?));
    }
    if let Some(u) = &a.until {
        argv.push(format!("--until=@{}", instant("until", u)?));
    }
    if let Some(text) = &a.contains {
        argv.push(format!("--grep={}", literal(text)));
        argv.push("--case-sensitive=false".to_owned());
    }
    argv.push(format!("--lines={}", a.limit));
    let mut spec = ProcessSpec::new("journalctl", "/");
    spec.args = argv;
    spec.isolation = IsolationLevel::Standard;
    spec.timeout = JOURNAL_TIME;
    spec.max_output_bytes = MAX_JOURNAL_OUTPUT;
    spec.fs = FsView::default();
    spec.env.insert("LC_ALL".into(), "C.UTF-8".into());
    spec.env.insert("SYSTEMD_COLORS".into(), "0".into());
    let outcome = ctx
        .sandbox
        .run(spec, ctx.cancel.clone(), None)
        .await
        .map_err(|e| {
            ToolFailure::failed(NOT_AVAILABLE, format!("cannot run journalctl here: {e}"))
        })?;
    let out = match outcome {
        RunOutcome::Exited(out) => out,
        RunOutcome::TimedOut(_) => {
            return Err(ToolFailure {
                status: ToolStatus::Timeout,
                code: ErrorCode::TIMEOUT.to_owned(),
                message: format!(
                    "journalctl did not finish within {} s: narrow the search (unit, \
                     priority, since)",
                    JOURNAL_TIME.as_secs()
                ),
            });
        }
        RunOutcome::Cancelled(_) => {
            return Err(ToolFailure {
                status: ToolStatus::Cancelled,
                code: ErrorCode::CANCELLED.to_owned(),
                message: "cancelled while reading the journal".to_owned(),
            });
        }
    };
    // Like grep, journalctl exits 1 when --grep matched nothing, saying nothing.
    let nothing_matched = out.exit.code == Some(1)
        && a.contains.is_some()
        && out.stdout.is_empty()
        && out.stderr.trim_ascii().is_empty();
    if out.exit.code != Some(0) && !nothing_matched {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!("journalctl failed ({:?}): {}", out.exit, cut(err.trim())),
        ));
    }
    let mut lines: Vec<&[u8]> = out.stdout.split(|b| *b == b'\n').collect();
    if out.stdout_truncated {
        // The last line was cut: it is not an entry.
        lines.pop();
    }
    let mut entries: Vec<Value> = lines.into_iter().filter_map(journal_entry).collect();
    let limit = usize::try_from(a.limit).unwrap_or(usize::MAX);
    // Newest last, like a log file read.
    entries.reverse();
    Ok(json!({
        "source": JOURNAL,
        "entries": entries,
        // Cut by the output cap, or `limit` reached: older entries may be there.
        "truncated": out.stdout_truncated || entries.len() == limit,
    }))
}

/// `text` as a PCRE2 pattern matching it literally: every ASCII character that is not a letter,
/// a digit or a space escaped with a backslash (PCRE2 takes any such escape literally).
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() && c != ' ' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One journal line as an entry, or `None` when it does not match or is not an entry.
fn journal_entry(line: &[u8]) -> Option<Value> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let text = |key: &str| -> Option<String> {
        match fields.get(key)? {
            Value::String(s) => Some(s.clone()),
            // A field that is not UTF-8 comes as its bytes.
            Value::Array(bytes) => {
                let raw: Vec<u8> = bytes
                    .iter()
                    .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect();
                Some(String::from_utf8_lossy(&raw).into_owned())
            }
            _ => None,
        }
    };
    let message = text("MESSAGE").unwrap_or_default();
    let mut e = Map::new();
    if let Some(us) = text("__REALTIME_TIMESTAMP").and_then(|t| t.parse::<u64>().ok()) {
        let at = UNIX_EPOCH + Duration::from_micros(us);
        e.insert(
            "time".into(),
            json!(humantime::format_rfc3339_micros(at).to_string()),
        );
    }
    if let Some(p) = text("PRIORITY")
        .and_then(|p| p.parse::<usize>().ok())
        .and_then(|p| PRIORITIES.get(p))
    {
        e.insert("priority".into(), json!(p));
    }
    if let Some(u) = text("_SYSTEMD_UNIT") {
        e.insert("unit".into(), json!(u));
    }
    if let Some(i) = text("SYSLOG_IDENTIFIER") {
        e.insert("identifier".into(), json!(i));
    }
    if let Some(pid) = text("_PID").and_then(|p| p.parse::<u64>().ok()) {
        e.insert("pid".into(), json!(pid));
    }
    e.insert("message".into(), json!(cut(&message)));
    Some(Value::Object(e))
}

fn path_failure(e: PathError, root: &str) -> ToolFailure {
    let (status, message) = match &e {
        PathError::OutsideWorkspace { path } => (
            ToolStatus::PermissionDenied,
            format!("{path:?} is outside the log root {root:?}"),
        ),
        _ => (ToolStatus::Failed, e.to_string()),
    };
    ToolFailure {
        status,
        code: e.code().to_owned(),
        message,
    }
}

/// The newest lines of a log file, or the root's files when no file is named.
fn file(ws: &tw_sandbox::Workspace, source: &str, a: &Args) -> Result<Value, ToolFailure> {
    let Some(path) = &a.file else {
        let listed = sfs::list_directory(
            ws,
            ".",
            ListOptions {
                depth: 3,
                include_hidden: false,
                max_entries: MAX_FILES,
            },
        )
        .map_err(|e| path_failure(e, source))?;
        let files: Vec<Value> = listed
            .entries
            .into_iter()
            .filter(|e| e.kind == sfs::EntryKind::File)
            .map(|e| json!({"file": e.path, "size": e.size}))
            .collect();
        return Ok(json!({"source": source, "files": files, "truncated": listed.truncated}));
    };
    let (mut f, size) = sfs::open_regular(ws, path).map_err(|e| path_failure(e, source))?;
    let io = |e: std::io::Error| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!("reading {path:?}: {e}"),
        )
    };
    let start = size.saturating_sub(MAX_SCAN_BYTES);
    f.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut window = Vec::with_capacity(usize::try_from(size - start).unwrap_or(0));
    f.take(MAX_SCAN_BYTES)
        .read_to_end(&mut window)
        .map_err(io)?;
    if window.iter().take(8 << 10).any(|b| *b == 0) {
        return Err(path_failure(
            PathError::Binary { path: path.clone() },
            source,
        ));
    }
    // A window that starts inside the file starts inside a line: that part is dropped.
    let body: &[u8] = if start > 0 {
        window
            .iter()
            .position(|b| *b == b'\n')
            .map_or(&[][..], |i| &window[i + 1..])
    } else {
        &window
    };
    let needle = a.contains.as_deref().map(str::to_lowercase);
    let limit = usize::try_from(a.limit).unwrap_or(usize::MAX);
    let mut entries = Vec::new();
    let mut more = false;
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    for raw in body.rsplit(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(raw);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        if !matches(text, needle.as_deref()) || (text.is_empty() && needle.is_none()) {
            continue;
        }
        if entries.len() == limit {
            more = true;
            break;
        }
        entries.push(json!({"message": cut(text)}));
    }
    entries.reverse();
    Ok(json!({
        "source": source,
        "file": path,
        "entries": entries,
        "file_size": size,
        "scanned_bytes": size - start,
        "truncated": more || start > 0,
    }))
}

pub(super) fn tools(settings: &SystemSettings, roots: Arc<LogRoots>) -> Vec<Arc<dyn BuiltinTool>> {
    let journal = settings.journal.then(|| settings.journal_directory.clone());
    vec![Arc::new(ReadSystemLogs { journal, roots })]
}
