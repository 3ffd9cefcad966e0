//! `git_status`: a repository's branch, its upstream and how far ahead and behind, staged,
//! unstaged, untracked and conflicted paths, and the last commits. Read-only.
//!
//! Git itself reads the repository, run like every process a tool starts: in the sandbox at
//! restricted isolation (the workspace read-only, policy's forbidden paths hidden, no network),
//! under the call's limits. A repository is data an agent may not trust, and its own config could
//! name programs for git to run (`core.fsmonitor`); the command line turns that one off, the
//! user's and the system's config are not read at all, git takes no optional locks, and whatever
//! a hostile config could still make git do happens inside the sandbox. Decision 0038 says why
//! this is git and not a Rust git library.
//!
//! One constant `sh` script runs the two commands (the log first, its length before it, then
//! `status --porcelain=v2 -z`, whose format git keeps stable for scripts); the agent's values
//! reach it only as positional parameters.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{
    CoreError, ErrorCode, IsolationLevel, RiskLevel, ToolCategory, ToolDefinition, ToolStatus,
};
use tw_sandbox::ProcessOutput;

use super::exec::{Planned, ProcessContext, ProcessTool, workspace_dir};
use super::{ToolFailure, args, lit};

/// The most commits a call may ask for.
const MAX_COMMITS: u64 = 50;
/// The most paths listed in each of staged, unstaged, untracked and conflicted.
const MAX_PATHS: usize = 500;

/// The script: `$1` is the number of commits, `$2` git status' untracked-files mode. Prints the
/// log's length in bytes, a newline, the log (commits as `\x1e`-ended records of `\x1f`-separated
/// fields), then git status' porcelain v2 output.
const SCRIPT: &str = r#"g() { git -c core.fsmonitor=false -c core.untrackedCache=false -c 'safe.directory=*' --no-optional-locks "$@"; }
log=
if [ "$1" -gt 0 ] && g rev-parse -q --verify HEAD >/dev/null 2>&1; then
  log=$(g log -n "$1" --no-color '--format=%H%x1f%an%x1f%ae%x1f%at%x1f%s%x1e') || exit $?
fi
printf '%s\n' "${#log}"
printf '%s' "$log"
g status --porcelain=v2 --branch -z "--untracked-files=$2"
"#;

pub(super) struct GitStatus;

#[derive(Deserialize)]
struct Args {
    path: Option<String>,
    #[serde(default = "default_commits")]
    commits: u64,
    #[serde(default = "default_untracked")]
    untracked: bool,
}

fn default_commits() -> u64 {
    5
}

fn default_untracked() -> bool {
    true
}

impl ProcessTool for GitStatus {
    fn definition(&self) -> Result<ToolDefinition, CoreError> {
        let mut d = ToolDefinition::new(
            lit::name("git_status")?,
            "A git repository's state: its branch, the upstream and how many commits it is \
             ahead and behind, staged, unstaged, untracked and conflicted paths, and the last \
             commits. Reads only.",
            ToolCategory::System,
            lit::group("system")?,
            lit::params(json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "A directory of the repository, in the workspace (default: the workspace's first root)."},
                    "commits": {"type": "integer", "minimum": 0, "maximum": MAX_COMMITS,
                                "description": "How many of the last commits to list (default 5)."},
                    "untracked": {"type": "boolean",
                                  "description": "Whether to list untracked files (default true)."}
                },
                "additionalProperties": false
            }))?,
        );
        let paths = json!({"type": "array", "maxItems": MAX_PATHS});
        d.output_schema = lit::output(json!({
            "type": "object",
            "properties": {
                "branch": {"type": ["string", "null"]},
                "head": {"type": ["string", "null"]},
                "upstream": {"type": ["string", "null"]},
                "ahead": {"type": ["integer", "null"]},
                "behind": {"type": ["integer", "null"]},
                "staged": paths,
                "unstaged": paths,
                "untracked": paths,
                "conflicted": paths,
                "clean": {"type": "boolean"},
                "commits": {"type": "array", "maxItems": MAX_COMMITS},
                "truncated": {"type": "boolean"}
            },
            "required": ["branch", "head", "staged", "unstaged", "untracked", "conflicted", "clean", "commits", "truncated"]
        }))?;
        d.risk_level = RiskLevel::Low;
        d.constraints.isolation = IsolationLevel::Restricted;
        d.constraints.max_execution_time_ms = 30_000;
        d.constraints.max_output_bytes = 1 << 20;
        Ok(d)
    }

    fn plan(&self, ctx: &ProcessContext<'_>, raw: &Value) -> Result<Planned, ToolFailure> {
        let a: Args = args(raw)?;
        let cwd = a
            .path
            .as_deref()
            .map(|p| workspace_dir(ctx.workspace, p, "/path"))
            .transpose()?;
        let env: BTreeMap<String, String> = [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("LC_ALL", "C"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Ok(Planned {
            argv: vec![
                "sh".into(),
                "-c".into(),
                SCRIPT.into(),
                "git_status".into(),
                a.commits.to_string(),
                if a.untracked { "all" } else { "no" }.into(),
            ],
            cwd,
            stdin: None,
            env,
            timeout: None,
            background: None,
        })
    }

    /// What command-judging layers see: the git commands the script runs, not the script (its
    /// words, `/dev/null` among them, are no agent's paths).
    fn policy_argv(&self, _planned: &Planned) -> Option<Vec<String>> {
        Some(vec!["git".into(), "status".into()])
    }

    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure> {
        if out.exit.code != Some(0) {
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.trim();
            if err.contains("not a git repository") {
                return Err(ToolFailure::failed(
                    "not_a_repository",
                    format!("not in a git repository: {err}"),
                ));
            }
            return Err(ToolFailure::failed(
                ErrorCode::EXECUTION_FAILED,
                format!("git failed ({:?}): {err}", out.exit),
            ));
        }
        parse(&out.stdout, out.stdout_truncated).ok_or_else(|| ToolFailure {
            status: ToolStatus::Failed,
            code: ErrorCode::EXECUTION_FAILED.to_owned(),
            message: "git's output was not in the expected form".to_owned(),
        })
    }
}

/// The report from the script's output; `None` when it is not in the script's form.
fn parse(stdout: &[u8], cut: bool) -> Option<Value> {
    let newline = stdout.iter().position(|b| *b == b'\n')?;
    let len: usize = std::str::from_utf8(&stdout[..newline]).ok()?.parse().ok()?;
    let rest = &stdout[newline + 1..];
    let log = rest.get(..len)?;
    let status = &rest[len..];
    let mut r = Report::default();
    let mut records: Vec<&[u8]> = status.split(|b| *b == 0).collect();
    // The last piece follows the last NUL: empty, or a record the output cap cut.
    records.pop();
    let mut records = records.into_iter();
    while let Some(rec) = records.next() {
        let text = String::from_utf8_lossy(rec);
        if let Some(header) = text.strip_prefix("# ") {
            r.header(header);
            continue;
        }
        let fields: Vec<&str> = text.splitn(2, ' ').collect();
        match fields.as_slice() {
            ["1", rest] => {
                // XY sub mH mI mW hH hI path
                let f: Vec<&str> = rest.splitn(8, ' ').collect();
                if let [xy, _, _, _, _, _, _, path] = f.as_slice() {
                    r.changed(xy, path, None);
                }
            }
            ["2", rest] => {
                // XY sub mH mI mW hH hI Xscore path, then the original path as its own record
                let f: Vec<&str> = rest.splitn(9, ' ').collect();
                let from = records
                    .next()
                    .map(|o| String::from_utf8_lossy(o).into_owned());
                if let [xy, _, _, _, _, _, _, _, path] = f.as_slice() {
                    r.changed(xy, path, from);
                }
            }
            ["u", rest] => {
                if let Some(path) = rest.splitn(10, ' ').nth(9) {
                    r.push(Bucket::Conflicted, json!(path));
                }
            }
            ["?", path] => r.push(Bucket::Untracked, json!(path)),
            _ => {}
        }
    }
    let commits: Vec<Value> =
        log.split(|b| *b == 0x1e)
            .filter_map(|c| {
                let c = String::from_utf8_lossy(c);
                let f: Vec<&str> = c.trim_start_matches('\n').split('\x1f').collect();
                let [id, author, email, at, subject] = f.as_slice() else {
                    return None;
                };
                let time = at.parse::<u64>().ok().map(|s| {
                    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(s))
                });
                Some(json!({
                    "id": id,
                    "author": author,
                    "email": email,
                    "time": time.map(|t| t.to_string()),
                    "subject": subject,
                }))
            })
            .collect();
    let clean = r.staged.is_empty()
        && r.unstaged.is_empty()
        && r.untracked.is_empty()
        && r.conflicted.is_empty()
        && !cut;
    Some(json!({
        "branch": r.branch,
        "head": r.head,
        "upstream": r.upstream,
        "ahead": r.ahead,
        "behind": r.behind,
        "staged": r.staged,
        "unstaged": r.unstaged,
        "untracked": r.untracked,
        "conflicted": r.conflicted,
        "clean": clean,
        "commits": commits,
        "truncated": r.truncated || cut,
    }))
}

#[derive(Default)]
struct Report {
    branch: Option<String>,
    head: Option<String>,
    upstream: Option<String>,
    ahead: Option<u64>,
    behind: Option<u64>,
    staged: Vec<Value>,
    unstaged: Vec<Value>,
    untracked: Vec<Value>,
    conflicted: Vec<Value>,
    truncated: bool,
}

#[derive(Clone, Copy)]
enum Bucket {
    Staged,
    Unstaged,
    Untracked,
    Conflicted,
}

impl Report {
    fn header(&mut self, h: &str) {
        let Some((key, value)) = h.split_once(' ') else {
            return;
        };
        match key {
            "branch.oid" if value != "(initial)" => self.head = Some(value.to_owned()),
            "branch.head" if value != "(detached)" => self.branch = Some(value.to_owned()),
            "branch.upstream" => self.upstream = Some(value.to_owned()),
            "branch.ab" => {
                let mut n = value.split(' ');
                self.ahead = n
                    .next()
                    .and_then(|a| a.trim_start_matches('+').parse().ok());
                self.behind = n
                    .next()
                    .and_then(|b| b.trim_start_matches('-').parse().ok());
            }
            _ => {}
        }
    }

    /// A changed entry: `X` (the index against HEAD) makes it staged, `Y` (the worktree
    /// against the index) unstaged; `.` is unchanged.
    fn changed(&mut self, xy: &str, path: &str, from: Option<String>) {
        let mut codes = xy.chars();
        let (Some(x), Some(y)) = (codes.next(), codes.next()) else {
            return;
        };
        for (code, bucket) in [(x, Bucket::Staged), (y, Bucket::Unstaged)] {
            if let Some(change) = change(code) {
                let mut e = json!({"path": path, "change": change});
                if let (Some(from), 'R' | 'C') = (&from, code) {
                    e["from"] = json!(from);
                }
                self.push(bucket, e);
            }
        }
    }

    fn push(&mut self, bucket: Bucket, entry: Value) {
        let list = match bucket {
            Bucket::Staged => &mut self.staged,
            Bucket::Unstaged => &mut self.unstaged,
            Bucket::Untracked => &mut self.untracked,
            Bucket::Conflicted => &mut self.conflicted,
        };
        if list.len() < MAX_PATHS {
            list.push(entry);
        } else {
            self.truncated = true;
        }
    }
}

/// What a porcelain status letter means; `None` for `.` (unchanged).
fn change(code: char) -> Option<&'static str> {
    Some(match code {
        'M' => "modified",
        'T' => "type_changed",
        'A' => "added",
        'D' => "deleted",
        'R' => "renamed",
        'C' => "copied",
        '.' => return None,
        _ => "changed",
    })
}
