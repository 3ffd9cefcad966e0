//! What the fuzz targets share: the check that a located error points into the text it came
//! from, the tools policy is judged on (the real built-ins, and custom tools from definition
//! files), and judging a call the way the pipeline does before it validates the arguments.
//!
//! The pipeline (`Runtime::stages`) judges a call before it checks the arguments against the
//! schema, so everything up to validation sees arguments exactly as an agent sent them: the
//! redaction of secrets, rendering a custom tool's command, a process tool's plan, and every
//! policy layer. [`judge`] runs those in that order, with the same public functions.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};
use tw_core::policy::{Evaluation, Policy, PolicyDoc, PolicyEnv, PolicySource, Request};
use tw_core::{
    Caller, CommandTemplate, DefinitionFormat, LicenseTier, OperationalMode, ToolDefinition,
    load_tool_specs,
};
use tw_runtime::Commands;
use tw_runtime::builtins::exec::{ProcessContext, ProcessTool};
use tw_sandbox::Workspace;

/// Asserts that an error's 1-based `line` (and `column`) lie within `text` (a line just past
/// the end counts: "unexpected end of file" points there).
pub fn assert_located(text: &str, line: Option<usize>, column: Option<usize>, error: &dyn Display) {
    let shown = error.to_string();
    let Some(line) = line else {
        assert!(column.is_none(), "a column without a line: {shown}");
        return;
    };
    let last = text.matches('\n').count() + 1;
    assert!(
        (1..=last).contains(&line),
        "line {line} is outside the text's lines 1..={last}: {shown}"
    );
    if let Some(column) = column {
        // Byte length: serde_json counts bytes, the others characters, and bytes >= characters.
        let width = text.split('\n').nth(line - 1).map_or(0, str::len);
        assert!(
            column <= width + 1,
            "column {column} is past the end of line {line} ({width} bytes): {shown}"
        );
    }
}

/// What a call is made to: a definition and how it runs, as the registry holds it.
pub struct Tool {
    /// The contract.
    pub definition: ToolDefinition,
    /// How it runs, where that matters before validation.
    pub kind: Kind,
}

/// The part of a tool's implementation the pipeline consults before validating arguments.
pub enum Kind {
    /// A built-in that only sees validated arguments.
    Builtin,
    /// A built-in that runs a process: its plan gives the command policy judges.
    Process(Arc<dyn ProcessTool>),
    /// A custom tool: its template is rendered from the arguments for policy.
    Custom(CommandTemplate),
}

/// Custom tools as an administrator would define them (the README's and the tests' examples):
/// a command template with placeholders in several positions, and schemas with defaults.
const CUSTOM_TOOLS: &str = r#"{"tools": [
  {"name": "word_count", "description": "Count words in a file", "category": "file_system",
   "parameters": {"type": "object", "required": ["path"],
                  "properties": {"path": {"type": "string"}}},
   "command": {"argv": ["wc", "-w", "--", "{path}"]}},
  {"name": "git_log", "description": "Recent commits", "category": "code_execution",
   "parameters": [{"name": "limit", "type": "integer", "default": 5},
                  {"name": "path", "type": "string", "required": false}],
   "constraints": {"side_effects": false, "isolation": "strict"},
   "command": {"argv": ["git", "log", "--max-count={limit}", "--", "{path}"]}},
  {"name": "fetch_page", "description": "Fetch a URL", "category": "network",
   "parameters": {"type": "object", "required": ["url"],
                  "properties": {"url": {"type": "string", "format": "uri"},
                                 "headers": {"type": "object"}}},
   "command": {"argv": ["curl", "-sS", "--max-time", "10", "{url}"], "output": "text"}}
]}"#;

/// The validation profiles `validate_content` is built with here, read from a config as the
/// runtime reads them, so its schema lists profile names as it does for agents.
fn profiles() -> Arc<tw_runtime::config::ContentProfiles> {
    static PROFILES: LazyLock<Arc<tw_runtime::config::ContentProfiles>> = LazyLock::new(|| {
        let config = tw_runtime::Config::parse(
            "[validation.profiles.ticket]\nschema = { type = \"object\", required = [\"id\"] }\n\
             max_length = 10000\nforbid = ['(?i)password\\s*=']\n\
             [validation.profiles.note]\nencoding = \"ascii\"\n",
            std::path::Path::new("/etc/toolwarden/config.toml"),
            None,
        )
        .unwrap_or_else(|e| panic!("the fuzzers' validation profiles do not parse: {e}"));
        let profiles = config
            .content_profiles(|p| panic!("no schema file to read: {}", p.display()))
            .unwrap_or_else(|e| panic!("the fuzzers' validation profiles do not load: {e}"));
        Arc::new(profiles)
    });
    Arc::clone(&PROFILES)
}

/// The built-in tools a runtime with the fuzzers' validation profiles registers (and nothing
/// else configured).
fn builtins() -> Vec<Arc<dyn tw_runtime::builtins::BuiltinTool>> {
    let settings = tw_runtime::builtins::Settings {
        profiles: profiles(),
        ..Default::default()
    };
    tw_runtime::builtins::all(&settings)
        .unwrap_or_else(|e| panic!("the built-in tools do not build: {e}"))
}

/// Every built-in tool this build registers, then [`CUSTOM_TOOLS`]: the real definitions, so
/// the fuzzers judge and validate against the schemas agents are given.
pub fn tools() -> &'static [Tool] {
    static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
        let mut tools = Vec::new();
        for t in builtins() {
            if let Ok(definition) = t.definition() {
                tools.push(Tool {
                    definition,
                    kind: Kind::Builtin,
                });
            }
        }
        for t in tw_runtime::builtins::exec::all() {
            if let Ok(definition) = t.definition() {
                tools.push(Tool {
                    definition,
                    kind: Kind::Process(t),
                });
            }
        }
        let specs = load_tool_specs(CUSTOM_TOOLS, "custom.json", DefinitionFormat::Json)
            .unwrap_or_else(|e| panic!("the fuzzers' custom tools do not load: {e}"));
        for spec in specs {
            if let Some(template) = spec.command {
                tools.push(Tool {
                    definition: spec.definition,
                    kind: Kind::Custom(template),
                });
            }
        }
        // Every built-in and the three custom tools: none may be left out for a definition that
        // does not build.
        assert_eq!(
            tools.len(),
            builtins().len()
                + tw_runtime::builtins::exec::all().len()
                + 3,
            "a built-in tool's definition does not build"
        );
        tools
    });
    &TOOLS
}

/// The tool called `name`, if there is one.
pub fn tool(name: &str) -> Option<&'static Tool> {
    tools().iter().find(|t| t.definition.name.as_str() == name)
}

/// A scratch workspace (a root with a subdirectory, a file, and a link that leads out) for the
/// process tools' plans, which resolve directories an agent names.
fn workspace() -> &'static Workspace {
    static WORKSPACE: LazyLock<Workspace> = LazyLock::new(|| {
        // One fixed place, made again if missing: every run and target can share it.
        let root = std::env::temp_dir().join("tw-fuzz-workspace");
        let made = std::fs::create_dir_all(root.join("sub"))
            .and_then(|()| std::fs::write(root.join("Cargo.toml"), "[package]\n"))
            .and_then(|()| std::fs::write(root.join("notes.txt"), "notes\n"));
        if let Err(e) = made {
            panic!("cannot make the fuzzers' workspace {}: {e}", root.display());
        }
        let _ = std::os::unix::fs::symlink("/etc", root.join("out"));
        Workspace::open(&[PathBuf::from(&root)])
            .unwrap_or_else(|e| panic!("cannot open the fuzzers' workspace: {e}"))
    });
    &WORKSPACE
}

/// The `[commands]` of a configuration that sets none: commands are detected.
static COMMANDS: LazyLock<Commands> = LazyLock::new(Commands::default);

/// The environment policies are compiled in: no view of the host, so nothing is resolved.
pub fn env() -> PolicyEnv {
    PolicyEnv::lexical("/w", Some("/home/u"))
}

/// The built-in policy (what runs when the configuration names none).
pub fn builtin_policy() -> &'static Policy {
    static POLICY: LazyLock<Policy> = LazyLock::new(|| {
        Policy::builtin(env()).unwrap_or_else(|e| panic!("the built-in policy: {e:?}"))
    });
    &POLICY
}

/// A policy with a rule of every kind, so each layer has something to judge.
pub fn strict_policy() -> &'static Policy {
    const TEXT: &str = r#"default = "deny"
allow = ["group:fs", "group:system", "group:exec", "group:custom", "fetch_page"]
deny = ["delete_*"]

[modes.alert]
ask = ["risk:high"]

[exec]
security = "allowlist"
ask = "on-miss"
[[exec.allow]]
command = "/usr/bin/git status **"
match = ["/usr/bin/git status --short"]
not_match = ["/usr/bin/git push"]
[[exec.allow]]
command = "/bin/ls **"

[[rules]]
name = "secrets"
forbid_paths = ["~/.ssh/**", "/etc/shadow", "**/.env"]
block_domains = ["loopback", "private", "link-local"]
block_patterns = ['rm\s+-rf', '(?i)drop\s+table']
max_argument_bytes = 4096
max_string_length = 1024

[[rules]]
name = "web"
tools = ["fetch_page"]
allow_domains = ["*.wikipedia.org", "example.com"]
decision = "ask"

[access]
tools = { exec = "elevated" }
callers = { ci-bot = "admin" }

[[rate_limits]]
tools = ["fetch_page"]
per = "caller"
per_minute = 10

[confirmation]
timeout_secs = 60
"#;
    static POLICY: LazyLock<Policy> = LazyLock::new(|| {
        compile(&[("strict.toml", TEXT)])
            .unwrap_or_else(|e| panic!("the fuzzers' strict policy: {e}"))
    });
    &POLICY
}

/// Compiles `(file, text)` documents together, as the runtime compiles policy files.
pub fn compile(sources: &[(&str, &str)]) -> Result<Policy, String> {
    let docs = sources
        .iter()
        .map(|(file, text)| PolicyDoc::parse(text, file))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let sources: Vec<PolicySource<'_>> = sources
        .iter()
        .zip(&docs)
        .map(|((file, text), doc)| PolicySource { file, text, doc })
        .collect();
    Policy::compile(&sources, env()).map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// What judging a call produced, for comparing two runs.
#[derive(Debug, PartialEq)]
pub struct Judged {
    /// The command policy judged (a custom tool's rendering, a process tool's plan).
    pub argv: Option<Vec<String>>,
    /// The decision with its trace.
    pub decision: tw_core::PolicyDecision,
}

/// Judges a call as the pipeline does before validation: secrets redacted, the command rendered
/// or planned from the raw arguments, then every policy layer.
pub fn judge(
    policy: &Policy,
    tool: &Tool,
    arguments: &Value,
    caller: &Caller,
    mode: OperationalMode,
) -> (Judged, Evaluation) {
    let redacted =
        tw_core::redact::needs_redaction(arguments).then(|| tw_core::redact::redact(arguments));
    let judged_arguments = redacted.as_ref().unwrap_or(arguments);
    // As the runtime plans a call (`Runtime::plan_run`): the command and the directory it runs
    // in come from one plan, and policy judges that.
    let mut cwd = None;
    let argv = match &tool.kind {
        Kind::Builtin => None,
        Kind::Process(p) => match p.plan(&process_context(), arguments) {
            Ok(planned) => {
                cwd = planned.cwd.clone();
                p.policy_argv(&planned)
            }
            Err(_) => None,
        },
        Kind::Custom(template) => {
            let rendered = template.render(arguments, &tool.definition.parameters).ok();
            if let Some(argv) = &rendered {
                assert_eq!(
                    argv.first().map(String::as_str),
                    Some(template.program()),
                    "the arguments changed which program a custom tool runs"
                );
            }
            rendered
        }
    };
    let caller = caller.sanitized();
    let evaluation = tw_core::policy::evaluate(
        policy,
        &Request {
            tool: &tool.definition,
            arguments: judged_arguments,
            caller: &caller,
            // Pro: the first tier with custom tools, so theirs are judged past the license.
            tier: LicenseTier::Pro,
            mode,
            custom_rank: matches!(tool.kind, Kind::Custom(_)).then_some(0),
            argv: argv.as_deref(),
            cwd: cwd.as_deref().and_then(|c| c.to_str()),
            requires_confirmation: tool.definition.requires_confirmation,
            disabled: None,
            switched_off: None,
        },
    );
    let decision = &evaluation.decision;
    assert_eq!(
        Some(decision.decision),
        decision.trace.iter().map(|v| v.decision).max(),
        "the decision is not the strictest layer's"
    );
    (
        Judged {
            argv,
            decision: evaluation.decision.clone(),
        },
        evaluation,
    )
}

/// What process tools consult while planning: the scratch workspace, commands detected.
pub fn process_context() -> ProcessContext<'static> {
    ProcessContext {
        workspace: workspace(),
        commands: &COMMANDS,
    }
}

/// Calls that reach every layer: shell lines and argv for exec, paths that are and are not
/// forbidden, a URL to a private address, a secret to redact, a custom tool's template.
fn sample_calls() -> Vec<(&'static str, Value, Caller)> {
    let agent = Caller::agent("agent-1");
    let bot = Caller::agent("ci-bot").with_skill("research");
    vec![
        (
            "exec",
            json!({"command": "/usr/bin/git status --short"}),
            agent.clone(),
        ),
        (
            "exec",
            json!({"command": "ls -la | grep x > out.txt; rm -rf /"}),
            bot.clone(),
        ),
        (
            "exec",
            json!({"argv": ["/bin/ls", "-la", "~/.ssh"], "cwd": "sub"}),
            agent.clone(),
        ),
        ("read_file", json!({"path": "~/.ssh/id_rsa"}), agent.clone()),
        (
            "read_file",
            json!({"path": "docs/../README.md"}),
            bot.clone(),
        ),
        (
            "write_file",
            json!({"path": "/etc/passwd", "content": "root::0:0"}),
            agent.clone(),
        ),
        (
            "fetch_page",
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
            bot.clone(),
        ),
        ("git_log", json!({"limit": 3, "path": "src"}), agent.clone()),
        (
            "echo",
            json!({"api_key": "sk-123", "note": "DROP TABLE users"}),
            bot,
        ),
        ("run_tests", json!({"filter": "parser"}), agent),
    ]
}

/// Judges [`sample_calls`] in normal and lockdown mode, for comparing policies.
pub fn judge_samples(policy: &Policy) -> Vec<Judged> {
    let mut out = Vec::new();
    for (name, arguments, caller) in sample_calls() {
        let Some(t) = tool(name) else {
            panic!("no sample tool {name}");
        };
        for mode in [OperationalMode::Normal, OperationalMode::Lockdown] {
            out.push(judge(policy, t, &arguments, &caller, mode).0);
        }
    }
    out
}
