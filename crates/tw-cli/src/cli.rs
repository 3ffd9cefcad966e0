//! The command-line surface: every subcommand and flag, in one place, so `--help` and the README stay
//! in step with what the binary accepts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tw_core::LicenseTier;

/// Toolwarden: the governed runtime between AI agents and the tools they run.
///
/// Every call goes through policy, schema validation, limits and the audit log.
///
/// Exit codes of `call` and `batch`: 0 success, 1 failed, 3 timeout, 4 cancelled, 5 requires
/// confirmation, 6 sandbox error, 7 permission denied, 8 validation error, 9 tool not found;
/// 2 is a usage error and 10 a problem with Toolwarden itself (config, data directory). Any
/// command whose stdout is closed by its reader (`| head`) stops quietly and exits 141; calls in
/// flight are then cancelled, and recorded, as on Ctrl-C.
#[derive(Debug, Parser)]
#[command(name = "toolwarden", version, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Data directory (audit log, custom tools). Default: the platform data dir, e.g.
    /// ~/.local/share/toolwarden.
    #[arg(long, global = true, env = "TOOLWARDEN_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A workspace root the file tools may use; repeat for several. Default: the config's
    /// `workspace`, else the current directory.
    #[arg(long = "workspace", global = true, value_name = "DIR")]
    pub workspace: Vec<PathBuf>,
    /// Config file (TOML). Default: ~/.config/toolwarden/config.toml when it exists.
    #[arg(long, global = true, env = "TOOLWARDEN_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Agent id recorded as the caller. Default: cli; for `mcp`, mcp:<the client's name>.
    #[arg(long, global = true, env = "TOOLWARDEN_AGENT")]
    pub agent: Option<String>,
    /// Skill the calls are made under.
    #[arg(long, global = true)]
    pub skill: Option<String>,
    /// Log pipeline activity to stderr (RUST_LOG overrides the level).
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List, inspect, export, add and remove tools; switch them off and on per license tier.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Call one tool and print its result as JSON.
    Call(CallArgs),
    /// Run a batch of calls from a JSON array or JSON-lines file and print one result per line.
    Batch(BatchArgs),
    /// Read the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Inspect the store: the database every process on the data directory shares.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Inspect, explain, check and simulate the policy.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// List, approve and deny calls waiting for a person.
    #[command(subcommand)]
    Confirm(ConfirmCommand),
    /// List, add and revoke standing approvals (grants).
    #[command(subcommand)]
    Grants(GrantsCommand),
    /// Show or switch the operational mode (normal, alert, degraded, lockdown, recovery).
    Mode {
        #[command(subcommand)]
        cmd: Option<ModeCommand>,
    },
    /// Inspect the process sandbox.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Inspect and check the skills (SKILL.md folders) and the tools each may use.
    #[command(subcommand)]
    Skills(SkillsCommand),
    /// Tool chains: several governed calls run as one (the tool chain__NAME).
    #[command(subcommand)]
    Chains(ChainsCommand),
    /// List the calls in flight in every process on the data directory.
    Running {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a call in flight in any process on the data directory (exit 9 if none has it).
    Cancel {
        /// The call's execution id (from `toolwarden running`).
        execution_id: String,
    },
    /// Serve the tools to an MCP client over stdin/stdout (what an agent's `mcpServers` entry
    /// starts). Calls are made as --agent when given, else as mcp:<the client's name>; logs go
    /// to stderr. The `[upstream.NAME]` servers' tools are imported as NAME__tool.
    Mcp {
        #[command(subcommand)]
        cmd: Option<McpCommand>,
    },
    /// Serve MCP over streamable HTTP at /mcp and the admin API at /api/v1 (loopback only
    /// unless configured; every request needs a bearer token). Prints the URL, then runs until
    /// SIGINT or SIGTERM.
    Serve {
        /// Listen here instead of `[serve] listen` (default 127.0.0.1:8790; port 0: any free).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        #[command(subcommand)]
        cmd: Option<ServeCommand>,
    },
    /// Show the resolved configuration: files, directories, workspace and policy.
    Config,
}

/// `toolwarden mcp ...`
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Upstream tools whose server changed their definition since it was pinned (quarantined:
    /// no call reaches them), each with the difference. With a tool and --accept, the new
    /// definition becomes the pin and the tool is callable again.
    Review {
        /// The tool (SERVER__TOOL).
        tool: Option<String>,
        /// Accept the new definition.
        #[arg(long, requires = "tool")]
        accept: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Connect to every configured upstream server once and show what it offers (exit 1 if one
    /// cannot be reached).
    Servers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden serve ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ServeCommand {
    /// Print the administrator's token (made on first use; it reaches MCP and the admin API).
    Token,
    /// Issue a token for one agent: it reaches /mcp only, and its calls are recorded as that
    /// agent. Printed once; only its hash is kept.
    Issue {
        /// The agent id calls made with it are recorded as.
        agent: String,
        /// A note (what it is for).
        #[arg(long)]
        label: Option<String>,
    },
    /// Revoke every token of an agent.
    Revoke {
        /// The agent id.
        agent: String,
    },
    /// List agents' tokens (fingerprints, never the tokens).
    Tokens {
        /// Revoked ones too.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden skills ...`
#[derive(Debug, Subcommand)]
pub(crate) enum SkillsCommand {
    /// Every skill in the skills directory, with its tools and whether it loaded.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One skill: its manifest, its resolved tools with where each came from, and its SKILL.md.
    Show {
        /// The skill.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every SKILL.md; prints each problem as FILE:LINE. Exits 1 if any has an error.
    Check,
    /// A skill's declared tools next to the tools its calls actually used (from the audit log).
    Report {
        /// The skill.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every tool a skill may use now, with where each came from: manifest, inherited,
    /// capability (with who classified the tool and how sure), or override.
    Resolved {
        /// The skill.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add a tool to a skill or remove one, over its manifest and capabilities; or clear an
    /// override. Recorded in the admin log.
    Override {
        /// The skill.
        name: String,
        #[command(subcommand)]
        action: OverrideCommand,
    },
    /// The overrides in force (of one skill, or all).
    Overrides {
        /// Only this skill's.
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every registered tool's capabilities: who classified it (static, llm, heuristic,
    /// admin), how sure, and why.
    Capabilities {
        /// Only this tool.
        tool: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set a tool's capabilities as an administrator (--set), clear that (--clear), or run the
    /// classifier on it again (--again).
    Classify {
        /// The tool.
        tool: String,
        /// Capabilities, comma-separated (an empty string: none).
        #[arg(long, conflicts_with_all = ["clear", "again"])]
        set: Option<String>,
        /// Why, kept with the setting.
        #[arg(long, requires = "set")]
        note: Option<String>,
        /// Clear an administrator's setting; a classifier decides again.
        #[arg(long, conflicts_with = "again")]
        clear: bool,
        /// Run the classifier again (the model when one is configured).
        #[arg(long)]
        again: bool,
    },
    /// Lifecycle figures: activations, resolved tools by provenance, overrides, calls and
    /// refusals per skill; classification sources.
    Metrics {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a skill's SKILL.md.
    Text {
        /// The skill.
        name: String,
    },
    /// Save a skill's SKILL.md from a file (or - for stdin): checked first and refused with its
    /// diagnostics if it has an error; written atomically; in force at once.
    Save {
        /// The skill (its folder's name).
        name: String,
        /// The file to read, or - for stdin.
        file: String,
    },
}

/// `toolwarden skills override NAME ...`
#[derive(Debug, Subcommand)]
pub(crate) enum OverrideCommand {
    /// The skill may use TOOL, whatever its manifest and capabilities say.
    Add {
        /// The tool.
        tool: String,
        /// The highest access level it may use the tool at.
        #[arg(long, default_value = "standard")]
        level: String,
        /// Why, for the admin log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// The skill may not use TOOL, whatever its manifest and capabilities say.
    Remove {
        /// The tool.
        tool: String,
        /// Why, for the admin log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Drop the override of TOOL; the manifest and capabilities decide again.
    Clear {
        /// The tool.
        tool: String,
    },
}

/// `toolwarden sandbox ...`
#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// Report what this host supports: the helper, kernel features, each isolation level, and
    /// the escape self-test case by case. Exits 1 if any escape succeeded.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden store ...`
#[derive(Debug, Subcommand)]
pub(crate) enum StoreCommand {
    /// Report where the store is, whether it answers and how fast, its schema against this
    /// build's, and how far the tail's move, the text index and the signed checkpoints are behind
    /// the newest record. Exits 1 if the store takes no records or runs another schema.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy a single-user SQLite store into a new, empty team store on PostgreSQL: settings,
    /// tools, grants, tokens, pins, confirmations, chain runs, the admin log and the audit log
    /// with its hash chain. The source must verify first; the copy is counted table by table and
    /// verified after. Nothing is removed from the source.
    Migrate {
        /// The source, `sqlite:PATH` (e.g. `sqlite:~/.local/share/toolwarden/toolwarden.db`).
        #[arg(long, value_name = "sqlite:PATH")]
        from: String,
        /// The target, `postgres://user:password@host/database`.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden tools ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List tools with their group, risk and what policy decides for them.
    List(ListArgs),
    /// Show one tool: description, constraints, policy explanation and parameter schema.
    Show {
        /// Tool name.
        name: String,
        /// Print the definition as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Export the callable tools as function schemas.
    Export {
        /// Dialect.
        #[arg(long, value_enum)]
        format: Format,
        /// Include tools that policy denies.
        #[arg(long)]
        all: bool,
    },
    /// Add (or replace) custom tools from a JSON, TOML or YAML file.
    Add {
        /// The definition file.
        file: PathBuf,
    },
    /// Remove a custom tool.
    Remove {
        /// Tool name.
        name: String,
    },
    /// Switch a tool off for license tiers, for every process on this data directory; recorded
    /// in `audit changes`.
    Disable(SwitchArgs),
    /// Switch a tool back on for license tiers.
    Enable(SwitchArgs),
}

/// Which tool `tools disable` and `tools enable` switch, and for which tiers.
#[derive(Debug, Args)]
pub(crate) struct SwitchArgs {
    /// Tool name.
    pub name: String,
    /// A license tier: core, pro, teams or enterprise; repeat for several. Default: the tier
    /// this installation runs.
    #[arg(long = "tier", value_name = "TIER", value_parser = tier)]
    pub tiers: Vec<LicenseTier>,
}

/// Parses a license tier for clap, so a bad one is a usage error that names the flag.
fn tier(s: &str) -> Result<LicenseTier, String> {
    s.parse()
}

/// Export dialects.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    /// OpenAI function tools.
    Openai,
    /// Anthropic tools.
    Anthropic,
    /// MCP tools/list.
    Mcp,
}

/// Filters for `tools list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only this category (e.g. file_system, network).
    #[arg(long)]
    pub category: Option<String>,
    /// Only this group (e.g. fs, custom).
    #[arg(long)]
    pub group: Option<String>,
    /// Only tools available in this license tier.
    #[arg(long)]
    pub tier: Option<String>,
    /// Only tools allowed in this operational mode.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only tools whose name or description contains these words.
    #[arg(long)]
    pub search: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `toolwarden chains ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ChainsCommand {
    /// Every chain loaded (from the chains directory and the skills), and every problem with
    /// those that did not load, as FILE:LINE.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check a chain file against the tools registered now (every problem as FILE:LINE), or
    /// with no file every chain loaded. Exits 1 if any has an error; nothing is saved.
    Check {
        /// The chain file ("-" for stdin).
        file: Option<PathBuf>,
        /// Check it as a chain of this skill (its steps held to the skill's tools).
        #[arg(long)]
        skill: Option<String>,
    },
    /// One chain in YAML, as `chains check` and a chain file read it.
    Show {
        /// The chain's name.
        name: String,
        /// Print JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
    /// Run a chain: the call chain__NAME, each step a governed call of its own. Prints the
    /// result like `call` and exits with its status's code.
    Run {
        /// The chain's name.
        name: String,
        /// The chain's input as a JSON object.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Time limit in milliseconds (the chain's own still applies).
        #[arg(long, value_name = "MS")]
        timeout: Option<u64>,
        /// Do not wait for a person: a step that needs approval ends the run at once.
        #[arg(long)]
        no_wait: bool,
    },
    /// Ask the configured language model ([classifier] endpoint) for a chain reaching GOAL with
    /// the skill's tools; prints it as YAML with every problem. Nothing is saved or run unless
    /// --accept (and then only a chain without errors). Exits 1 when the plan has errors.
    Plan {
        /// What the chain should do.
        goal: String,
        /// Plan within this skill's tools (its steps then run under it).
        #[arg(long)]
        skill: Option<String>,
        /// Save the plan into the chains directory once it checks clean.
        #[arg(long)]
        accept: bool,
    },
    /// Save a chain file (checked first; nothing is written if it has an error) into the
    /// chains directory, one NAME.yaml per chain, and load it.
    Save {
        /// The chain file ("-" for stdin).
        file: PathBuf,
        /// Check it as a chain of this skill.
        #[arg(long)]
        skill: Option<String>,
        /// Save over a chain of the same name saved this way before (its NAME.yaml).
        #[arg(long)]
        replace: bool,
    },
    /// Runs, newest first; with a run id, that run with each step's status, timing and calls.
    Runs {
        /// One run's id (the chain call's execution id).
        id: Option<String>,
        /// Only runs of this chain.
        #[arg(long)]
        chain: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden call`
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// Tool name.
    pub tool: String,
    /// Arguments as a JSON object.
    #[arg(long, default_value = "{}", conflicts_with = "args_file")]
    pub args: String,
    /// Read the arguments from a JSON file ("-" for stdin).
    #[arg(long, value_name = "FILE")]
    pub args_file: Option<PathBuf>,
    /// Time limit in milliseconds (the tool's own limit still applies).
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// Trace id joining this call to others.
    #[arg(long)]
    pub trace_id: Option<String>,
    /// Do not wait for a person: a call that needs approval exits at once with code 5.
    #[arg(long)]
    pub no_wait: bool,
}

/// `toolwarden batch`
#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// File of calls: a JSON array or JSON lines of {"tool": ..., "arguments": {...}, "timeout_ms": N}
    /// ("-" for stdin).
    pub file: PathBuf,
    /// Run up to N calls at once (results are still printed in input order).
    #[arg(long, value_name = "N", conflicts_with = "stop_on_error")]
    pub parallel: Option<usize>,
    /// Skip the remaining calls once one does not succeed.
    #[arg(long)]
    pub stop_on_error: bool,
    /// Trace id shared by every call of the batch (default: a new one).
    #[arg(long)]
    pub trace_id: Option<String>,
}

/// Audit filters shared by list, export and report.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct AuditFilter {
    /// Only this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only this status (success, failed, timeout, cancelled, requires_confirmation, sandbox_error,
    /// permission_denied, validation_error, not_found).
    #[arg(long)]
    pub status: Option<String>,
    /// Only this caller (agent id).
    #[arg(long)]
    pub caller: Option<String>,
    /// Only this skill.
    #[arg(long)]
    pub skill: Option<String>,
    /// From this time: RFC 3339 (2026-11-22T10:00:00Z) or a duration ago (90m, 2h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Until this time (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// Text in the tool name, arguments, error or output.
    #[arg(long)]
    pub text: Option<String>,
}

/// `toolwarden audit ...`
#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// List records, newest first, a page at a time.
    List {
        #[command(flatten)]
        filter: AuditFilter,
        /// Records per page (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Continue after this cursor (printed at the end of the previous page).
        #[arg(long)]
        cursor: Option<i64>,
        /// Print the page as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one record in full.
    Show {
        /// Execution id.
        execution_id: String,
    },
    /// Export the filtered records.
    Export {
        #[command(flatten)]
        filter: AuditFilter,
        /// File format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Check that neither the audit log nor the admin log was edited: recompute every record's
    /// hash chain and output digest, check every signed checkpoint (the database's, the
    /// `<database>.checkpoints` file's and any given) against its signature, this store's key and
    /// the logs, and name the first edited, deleted, inserted or moved record. Exits 1 if
    /// anything is wrong.
    Verify {
        /// Also check the checkpoints saved in this file (one JSON object a line, as
        /// `toolwarden audit checkpoint` prints them): the log must still hold what they signed.
        #[arg(long)]
        from_checkpoint: Vec<PathBuf>,
        /// Check this archive file on its own instead of the store (as `audit archive` wrote
        /// it): its signature, every record's link and output, its count and last hash.
        #[arg(long, conflicts_with = "from_checkpoint")]
        archive: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move the records that started before a time out of the log into an archive file: written,
    /// read back and verified, recorded with its signature, and only then removed (`[audit]
    /// keep_days` does this by itself, hourly). `audit verify` still passes across the cut, and
    /// `audit verify --archive FILE` checks the file alone.
    Archive {
        /// Records that started before this: RFC 3339 or a duration ago (90d).
        #[arg(long)]
        before: String,
        /// The archive to write (must not exist).
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Sign a checkpoint of both logs' heads now (one is made every 1,000 records or minute
    /// anyway) and print it as one JSON line, to keep somewhere else for `verify
    /// --from-checkpoint`.
    Checkpoint,
    /// Usage per tool and per caller.
    Report {
        #[command(flatten)]
        filter: AuditFilter,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Administrative changes, newest first: mode switches, policy reloads (with what changed),
    /// grants given and revoked, tools switched off and on, custom tools added, updated and
    /// removed, skills saved, skill overrides and tool capabilities set and cleared.
    Changes {
        /// From this time: RFC 3339 or a duration ago.
        #[arg(long)]
        since: Option<String>,
        /// Only this kind (mode_changed, policy_reloaded, policy_reload_failed, grant_created,
        /// grant_revoked, tool_disabled, tool_enabled, custom_tool_added, custom_tool_updated,
        /// custom_tool_removed, skill_saved, skill_override_set, skill_override_cleared,
        /// tool_classified, tool_classification_cleared).
        #[arg(long)]
        kind: Option<String>,
        /// Most changes shown.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Audit export formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One JSON record per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
}

/// `toolwarden policy ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Where the policy comes from and every rule in it.
    Show,
    /// Explain how policy would judge a call, without running anything.
    Explain {
        /// Tool name.
        #[arg(long)]
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Judge as this caller (agent id); default: --agent.
        #[arg(long)]
        caller: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a policy: errors with their location, then rules that name unknown tools or
    /// groups, can never match, or are shadowed by others. Default: the configured policy.
    Check {
        /// Policy files to check instead of the configured policy.
        files: Vec<PathBuf>,
    },
    /// Replay recorded calls against a proposed policy and list every call whose decision would
    /// change.
    Simulate {
        /// The proposed policy file(s), taken as the whole policy.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Only calls recorded since: RFC 3339 or a duration ago (default 7d).
        #[arg(long, default_value = "7d")]
        since: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `toolwarden confirm ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConfirmCommand {
    /// Calls waiting for a person (with --all: answered ones too).
    List {
        /// Include answered and expired requests.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve waiting calls.
    Approve(AnswerArgs),
    /// Deny waiting calls.
    Deny(AnswerArgs),
}

/// Which requests to answer, and how.
#[derive(Debug, Args)]
pub(crate) struct AnswerArgs {
    /// Confirmation ids.
    #[arg(required_unless_present = "all_pending")]
    pub ids: Vec<String>,
    /// Every pending request.
    #[arg(long, conflicts_with = "ids")]
    pub all_pending: bool,
    /// Why (recorded with the answer).
    #[arg(long)]
    pub note: Option<String>,
    /// With approve: remember it as a grant: `exact` (this exact call), `tool` (every call of
    /// the tool) or a JSON argument pattern such as '{"path": "src/**"}'.
    #[arg(long, value_name = "SCOPE")]
    pub remember: Option<String>,
    /// With --remember: for any caller (default: only the caller of the approved call).
    #[arg(long, conflicts_with = "caller_only")]
    pub any_caller: bool,
    /// With --remember: only for the caller of the approved call (the default).
    #[arg(long)]
    pub caller_only: bool,
    /// With --remember: for this long (e.g. 30m, 8h, 7d; default: until revoked).
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: Option<String>,
}

/// `toolwarden grants ...`
#[derive(Debug, Subcommand)]
pub(crate) enum GrantsCommand {
    /// Grants in force (with --all: revoked and expired ones too).
    List {
        /// Include revoked and expired grants.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give a standing approval for a tool.
    Add {
        /// The tool.
        tool: String,
        /// Only calls whose arguments match this JSON pattern (default: every call).
        #[arg(long)]
        pattern: Option<String>,
        /// Only this agent's calls (default: any caller). Its own id: the global `--agent`
        /// names who is giving the grant.
        #[arg(long = "for-agent", id = "grant_agent", value_name = "AGENT")]
        agent: Option<String>,
        /// For this long (default: until revoked).
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// Revoke a grant.
    Revoke {
        /// Grant id.
        id: String,
    },
}

/// `toolwarden mode ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ModeCommand {
    /// Print the current mode (the default).
    Show,
    /// Switch every process on this data directory to MODE; recorded in `audit changes`.
    Set {
        /// normal, alert, degraded, lockdown or recovery.
        mode: String,
    },
}
