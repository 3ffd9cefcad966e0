//! The process-running built-ins: `exec` (a command as an argv list, or a shell line judged by
//! the exec approval layer), `python_exec` (a Python snippet in Debian's python3), `run_tests`
//! and `run_linter` (the workspace's configured or detected test and lint commands, with their
//! summaries parsed). They only describe the process; the runtime runs it in the sandbox at the
//! level the definition asks for (strict for all four), raised by policy, with the call's limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{
    CoreError, ErrorCode, IsolationLevel, RiskLevel, ToolCategory, ToolDefinition, ToolStatus,
};
use tw_sandbox::{ProcessOutput, Workspace};

use super::{ToolFailure, args, lit};
use crate::config::Commands;

/// What a process tool may consult while planning its process.
pub struct ProcessContext<'a> {
    /// The workspace the process runs in.
    pub workspace: &'a Workspace,
    /// `[commands]` from the configuration.
    pub commands: &'a Commands,
}

/// The process a call runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planned {
    /// Program and arguments; the program is looked up on the sandbox's `PATH`.
    pub argv: Vec<String>,
    /// Working directory (default: the first workspace root).
    pub cwd: Option<PathBuf>,
    /// Standard input.
    pub stdin: Option<Vec<u8>>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// A time limit tighter than the call's.
    pub timeout: Option<Duration>,
    /// Run in the background for up to this long: the call returns a job id at once (`exec`'s
    /// `background`; see `builtins::jobs`).
    pub background: Option<Duration>,
}

/// How long a background job runs unless its call says otherwise.
pub const BACKGROUND_DEFAULT: Duration = Duration::from_secs(30 * 60);
/// The longest a background job may run.
pub const BACKGROUND_MAX_MS: u64 = 24 * 3600 * 1000;

/// A built-in tool that runs one sandboxed process.
pub trait ProcessTool: Send + Sync + 'static {
    /// The tool's contract.
    fn definition(&self) -> Result<ToolDefinition, CoreError>;
    /// The process for validated arguments.
    fn plan(&self, ctx: &ProcessContext<'_>, args: &Value) -> Result<Planned, ToolFailure>;
    /// The commands the exec approval layer judges, from the plan the call will run: `None`
    /// lets it read the call's own `command` or `argv` argument.
    fn policy_argv(&self, planned: &Planned) -> Option<Vec<String>> {
        Some(planned.argv.clone())
    }
    /// The result, from the finished process.
    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure>;
}

/// Every process tool this build ships.
pub fn all() -> Vec<Arc<dyn ProcessTool>> {
    vec![
        Arc::new(Exec),
        Arc::new(PythonExec),
        Arc::new(RunTests),
        Arc::new(RunLinter),
        Arc::new(super::git::GitStatus),
    ]
}

/// Environment variables an agent may always set: locale, terminal and the usual verbosity
/// switches. Not `PATH`, `LD_*`, `PYTHONPATH` or anything else that changes what code runs.
const ENV_ALLOW: &[&str] = &[
    "LANG",
    "LC_*",
    "TZ",
    "TERM",
    "NO_COLOR",
    "CLICOLOR",
    "CI",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
];

fn env_allowed(name: &str, extra: &[String]) -> bool {
    ENV_ALLOW
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        })
}

fn invalid(message: impl Into<String>) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::ValidationError,
        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
        message: message.into(),
    }
}

/// A directory of the workspace named by the agent, checked to stay inside after symlinks.
pub(super) fn workspace_dir(
    ws: &Workspace,
    path: &str,
    pointer: &str,
) -> Result<PathBuf, ToolFailure> {
    let p = ws.resolve(path).map_err(|e| ToolFailure {
        status: ToolStatus::PermissionDenied,
        code: ErrorCode::PATH_OUTSIDE_WORKSPACE.to_owned(),
        message: format!("{pointer}: {e}"),
    })?;
    let root = ws.roots().get(p.root_index()).cloned().unwrap_or_default();
    let joined = root.join(p.relative());
    let real = joined
        .canonicalize()
        .map_err(|e| invalid(format!("{pointer}: {path:?} cannot be used: {e}")))?;
    let inside = ws
        .roots()
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| real.starts_with(r));
    if !inside {
        return Err(ToolFailure {
            status: ToolStatus::PermissionDenied,
            code: ErrorCode::PATH_OUTSIDE_WORKSPACE.to_owned(),
            message: format!("{pointer}: {path:?} leads outside the workspace"),
        });
    }
    if !real.is_dir() {
        return Err(invalid(format!("{pointer}: {path:?} is not a directory")));
    }
    Ok(joined)
}

fn timeout(ms: Option<u64>) -> Option<Duration> {
    ms.map(Duration::from_millis)
}

/// The shared result of `exec` and `python_exec`: the exit status and both streams, lossily
/// decoded. A non-zero exit is a result, not a failure: `grep` finding nothing is an answer.
fn process_result(out: &ProcessOutput) -> Value {
    json!({
        "exit_code": out.exit.code,
        "signal": out.exit.signal,
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
        "stdout_truncated": out.stdout_truncated,
        "stderr_truncated": out.stderr_truncated,
    })
}

fn process_output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["exit_code", "stdout", "stderr"],
        "properties": {
            "exit_code": {"type": ["integer", "null"], "description": "null when killed by a signal"},
            "signal": {"type": ["integer", "null"]},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"}
        }
    })
}

fn definition(
    name: &str,
    description: &str,
    params: Value,
    output: Value,
    risk: RiskLevel,
) -> Result<ToolDefinition, CoreError> {
    let mut d = ToolDefinition::new(
        lit::name(name)?,
        description,
        ToolCategory::CodeExecution,
        lit::group("exec")?,
        lit::params(params)?,
    );
    d.output_schema = lit::output(output)?;
    d.risk_level = risk;
    d.constraints.side_effects = true;
    d.constraints.isolation = IsolationLevel::Strict;
    d.constraints.max_execution_time_ms = 120_000;
    d.constraints.max_output_bytes = 64 * 1024;
    Ok(d)
}

struct Exec;

#[derive(Deserialize)]
struct ExecArgs {
    argv: Option<Vec<String>>,
    command: Option<String>,
    cwd: Option<String>,
    stdin: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    background: bool,
}

impl ProcessTool for Exec {
    fn definition(&self) -> Result<ToolDefinition, CoreError> {
        definition(
            "exec",
            "Run a command in the workspace, sandboxed (no network, system read-only, workspace \
             writable). Give `argv` (a list, no shell) or `command` (a shell line); each command \
             is checked against the exec allowlist and may need approval. With `background`, \
             the call returns a job id at once and the command runs on (up to `timeout_ms`, 30 \
             minutes by default): read its output with exec_output, wait for it with exec_wait, \
             stop it with exec_kill; it dies with the runtime.",
            json!({
                "type": "object",
                "properties": {
                    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                             "description": "Program and arguments, each one element."},
                    "command": {"type": "string", "minLength": 1,
                                "description": "A shell command line, run with /bin/sh -c."},
                    "cwd": {"type": "string", "description": "Working directory in the workspace."},
                    "stdin": {"type": "string", "maxLength": 1048576},
                    "env": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Extra variables (only allowlisted names)."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": BACKGROUND_MAX_MS},
                    "background": {"type": "boolean",
                                   "description": "Start it and return a job id at once (default false)."}
                },
                "oneOf": [{"required": ["argv"]}, {"required": ["command"]}],
                "additionalProperties": false
            }),
            // An object either way (MCP carries object output schemas only).
            json!({"type": "object", "anyOf": [
                process_output_schema(),
                {
                    "type": "object",
                    "required": ["job_id", "background"],
                    "properties": {
                        "job_id": {"type": "string"},
                        "background": {"const": true},
                        "time_limit_ms": {"type": "integer"}
                    }
                }
            ]}),
            RiskLevel::High,
        )
    }

    fn plan(&self, ctx: &ProcessContext<'_>, raw: &Value) -> Result<Planned, ToolFailure> {
        let a: ExecArgs = args(raw)?;
        let argv = match (a.argv, a.command) {
            (Some(argv), None) => argv,
            (None, Some(line)) => vec!["/bin/sh".to_owned(), "-c".to_owned(), line],
            _ => return Err(invalid("give exactly one of `argv` and `command`")),
        };
        if let Some(bad) = a
            .env
            .keys()
            .find(|k| !env_allowed(k, &ctx.commands.env_allow))
        {
            return Err(invalid(format!(
                "/env/{bad}: this variable may not be set by a call (allowed: {}; an \
                 administrator can add names under [commands] env_allow)",
                ENV_ALLOW.join(", ")
            )));
        }
        Ok(Planned {
            argv,
            cwd: a
                .cwd
                .as_deref()
                .map(|c| workspace_dir(ctx.workspace, c, "/cwd"))
                .transpose()?,
            stdin: a.stdin.map(String::into_bytes),
            env: a.env,
            timeout: if a.background {
                None
            } else {
                timeout(a.timeout_ms)
            },
            background: a.background.then(|| {
                a.timeout_ms
                    .map_or(BACKGROUND_DEFAULT, Duration::from_millis)
            }),
        })
    }

    fn policy_argv(&self, _planned: &Planned) -> Option<Vec<String>> {
        // The exec layer reads `argv` or parses `command` itself, every simple command of it.
        None
    }

    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure> {
        Ok(process_result(out))
    }
}

struct PythonExec;

/// Debian's interpreter: inside the sandbox's system allowlist, unlike per-user installs.
const PYTHON: &str = "/usr/bin/python3";

#[derive(Deserialize)]
struct PythonArgs {
    code: String,
    stdin: Option<String>,
    timeout_ms: Option<u64>,
}

impl ProcessTool for PythonExec {
    fn definition(&self) -> Result<ToolDefinition, CoreError> {
        definition(
            "python_exec",
            "Run a Python 3 snippet in a sandbox (no network, system read-only, workspace \
             writable, private /tmp) and return what it printed.",
            json!({
                "type": "object",
                "required": ["code"],
                "properties": {
                    "code": {"type": "string", "minLength": 1, "maxLength": 100000},
                    "stdin": {"type": "string", "maxLength": 1048576},
                    "timeout_ms": {"type": "integer", "minimum": 1}
                },
                "additionalProperties": false
            }),
            process_output_schema(),
            RiskLevel::Medium,
        )
    }

    fn plan(&self, _ctx: &ProcessContext<'_>, raw: &Value) -> Result<Planned, ToolFailure> {
        let a: PythonArgs = args(raw)?;
        Ok(Planned {
            // -I: no user site-packages, no PYTHON* variables, no script directory on sys.path.
            argv: vec![PYTHON.to_owned(), "-I".to_owned(), "-c".to_owned(), a.code],
            cwd: None,
            stdin: a.stdin.map(String::into_bytes),
            env: BTreeMap::from([("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned())]),
            timeout: timeout(a.timeout_ms),
            background: None,
        })
    }

    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure> {
        Ok(process_result(out))
    }
}

#[derive(Deserialize)]
struct SuiteArgs {
    path: Option<String>,
    filter: Option<String>,
    timeout_ms: Option<u64>,
}

/// Which kind of project the workspace root is, by its marker files.
fn detect(root: &Path, table: &[(&[&str], &[&str])]) -> Option<Vec<String>> {
    table
        .iter()
        .find(|(markers, _)| markers.iter().any(|m| root.join(m).exists()))
        .map(|(_, argv)| argv.iter().map(|s| (*s).to_owned()).collect())
}

const TEST_COMMANDS: &[(&[&str], &[&str])] = &[
    (&["Cargo.toml"], &["cargo", "test"]),
    (
        &[
            "pytest.ini",
            "pyproject.toml",
            "setup.cfg",
            "tox.ini",
            "conftest.py",
        ],
        &["python3", "-m", "pytest"],
    ),
    (&["go.mod"], &["go", "test", "./..."]),
    (&["package.json"], &["npm", "test", "--silent"]),
];

const LINT_COMMANDS: &[(&[&str], &[&str])] = &[
    (
        &["Cargo.toml"],
        &["cargo", "clippy", "--message-format=short"],
    ),
    (
        &["pyproject.toml", "setup.cfg", "ruff.toml"],
        &[
            "python3",
            "-m",
            "ruff",
            "check",
            "--output-format=concise",
            ".",
        ],
    ),
    (&["go.mod"], &["go", "vet", "./..."]),
    (
        &["package.json"],
        &["npx", "eslint", "--format", "unix", "."],
    ),
];

fn suite_plan(
    ctx: &ProcessContext<'_>,
    raw: &Value,
    configured: Option<&Vec<String>>,
    table: &[(&[&str], &[&str])],
    what: &str,
) -> Result<Planned, ToolFailure> {
    let a: SuiteArgs = args(raw)?;
    let cwd = a
        .path
        .as_deref()
        .map(|p| workspace_dir(ctx.workspace, p, "/path"))
        .transpose()?;
    let root = cwd
        .clone()
        .or_else(|| ctx.workspace.roots().first().cloned())
        .unwrap_or_default();
    let mut argv = match configured {
        Some(argv) => argv.clone(),
        None => detect(&root, table).ok_or_else(|| {
            ToolFailure::failed(
                ErrorCode::EXECUTION_FAILED,
                format!(
                    "no {what} command is configured and none could be detected in {} (looked \
                     for Cargo.toml, pyproject.toml, go.mod, package.json); set [commands] \
                     {what} = [\"program\", \"arg\", ...] in the configuration",
                    root.display()
                ),
            )
        })?,
    };
    if let Some(filter) = a.filter {
        argv.push(filter);
    }
    Ok(Planned {
        argv,
        cwd,
        stdin: None,
        env: BTreeMap::new(),
        timeout: timeout(a.timeout_ms),
        background: None,
    })
}

fn suite_params(filter: bool) -> Value {
    let mut props = json!({
        "path": {"type": "string", "description": "Directory in the workspace to run in."},
        "timeout_ms": {"type": "integer", "minimum": 1}
    });
    if filter && let Some(p) = props.as_object_mut() {
        p.insert(
            "filter".into(),
            json!({"type": "string", "description": "Passed to the test command as its last argument."}),
        );
    }
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

/// Both streams, stdout first: what the summary parsers read.
fn combined(out: &ProcessOutput) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The last 4 KiB of both streams, where runners print their verdict.
fn output_tail(out: &ProcessOutput) -> String {
    let both = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
    crate::sandboxed::tail(&both, 4096)
}

struct RunTests;

impl ProcessTool for RunTests {
    fn definition(&self) -> Result<ToolDefinition, CoreError> {
        definition(
            "run_tests",
            "Run the workspace's test command (configured, or detected: cargo, pytest, go, npm) \
             in a sandbox and summarise the result: passed, failed, skipped, failing tests.",
            suite_params(true),
            json!({
                "type": "object",
                "required": ["success", "exit_code"],
                "properties": {
                    "success": {"type": "boolean"},
                    "exit_code": {"type": ["integer", "null"]},
                    "summary": {"type": ["object", "null"]},
                    "output_tail": {"type": "string"}
                }
            }),
            RiskLevel::Medium,
        )
    }

    fn plan(&self, ctx: &ProcessContext<'_>, raw: &Value) -> Result<Planned, ToolFailure> {
        suite_plan(ctx, raw, ctx.commands.test.as_ref(), TEST_COMMANDS, "test")
    }

    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure> {
        let summary = tw_core::summary::parse_tests(&combined(out));
        Ok(json!({
            "success": out.exit.code == Some(0),
            "exit_code": out.exit.code,
            "summary": summary,
            "output_tail": output_tail(out),
        }))
    }
}

struct RunLinter;

impl ProcessTool for RunLinter {
    fn definition(&self) -> Result<ToolDefinition, CoreError> {
        definition(
            "run_linter",
            "Run the workspace's lint command (configured, or detected: clippy, ruff, go vet, \
             eslint) in a sandbox and list its findings as path, line, column, severity, message.",
            suite_params(false),
            json!({
                "type": "object",
                "required": ["clean", "exit_code", "errors", "warnings", "diagnostics"],
                "properties": {
                    "clean": {"type": "boolean"},
                    "exit_code": {"type": ["integer", "null"]},
                    "errors": {"type": "integer"},
                    "warnings": {"type": "integer"},
                    "diagnostics": {"type": "array"},
                    "output_tail": {"type": "string"}
                }
            }),
            RiskLevel::Low,
        )
    }

    fn plan(&self, ctx: &ProcessContext<'_>, raw: &Value) -> Result<Planned, ToolFailure> {
        suite_plan(ctx, raw, ctx.commands.lint.as_ref(), LINT_COMMANDS, "lint")
    }

    fn finish(&self, out: &ProcessOutput) -> Result<Value, ToolFailure> {
        let s = tw_core::summary::parse_lint(&combined(out));
        Ok(json!({
            "clean": out.exit.code == Some(0) && s.errors == 0,
            "exit_code": out.exit.code,
            "errors": s.errors,
            "warnings": s.warnings,
            "diagnostics": s.diagnostics,
            "output_tail": output_tail(out),
        }))
    }
}
