//! What the desktop app's audit viewer costs on a big log: one page (50 rows, newest first) of a
//! 1,000,000-row audit log for every filter the viewer offers, against the goal set for the
//! viewer (a page in <= 50 ms). A log grows by every governed call and is never pruned, so the
//! pages must stay quick when it is large, not only on the small files the tests use.
//!
//! The log is built once through the public API (`Store::append`, many appends in flight so they
//! share group commits) into `<target>/bench-data/audit-1m.db` and reused by later runs while its
//! row count and generator version match, so only the first run pays for it. The rows are shaped
//! like real traffic: 30 tools and 10 callers with skewed popularity, a few skills, mostly
//! successes with some denials, failures, invalid arguments and timeouts (timeouts only from tools
//! that run processes or go to the network), starts spread over 30 days, small JSON arguments and
//! outputs, and every layer's verdict in the explanation as the policy engine writes it.
//!
//! The store opens the cached log as it opens any user's file, so migrations it lacks (new
//! indexes) are run on it then, once, and the time that took is in the `opened in` line.
//!
//! Each case is timed by its own loop (median and p95 after two warm-up queries, on a warm page
//! cache) and printed as `audit summary:` lines; figures are printed, never asserted. A text
//! search reads at most `TEXT_SCAN_WINDOW` ids a page, so its line also says how far one page
//! searched, and one more line times following its cursors down the whole log (what
//! `toolwarden audit list --text` does while its page is not full). Then it prints SQLite's plan
//! for every page query, which shows the index each one uses (the SQL is rebuilt here the way
//! `query.rs` builds it, so the plan is the one the store gets).
//!
//! Without `--bench` (`cargo test --benches`) it is a smoke run on a 10,000-row log in a
//! temporary directory, a few queries each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Row as _, SqliteConnection};
use tw_core::ToolStatus;
use tw_core::policy::{Decision, Layer, LayerVerdict, RuleRef, Severity};
use tw_store::{AuditQuery, AuditRecord, AuditViolation, Store, StoreOptions, TEXT_SCAN_WINDOW};

/// Rows in the log of a full run, and of a smoke run.
const FULL_ROWS: u64 = 1_000_000;
const SMOKE_ROWS: u64 = 10_000;
/// Bump when `record` changes, so a cached log built by the old generator is rebuilt.
const GENERATOR: &str = "audit_query generator v1";
/// Where the cached log records how it was made.
const FIXTURE_SETTING: &str = "bench.audit_query.fixture";
/// The viewer's page size.
const PAGE: u32 = 50;
/// The goal for one page.
const GOAL_MS: f64 = 50.0;
/// The page reached by cursor in the deep-page case (of a full run).
const DEEP_PAGE: u64 = 10_000;
/// Appends in flight while the log is built: enough to fill every group commit.
const IN_FLIGHT: usize = 4096;
/// Timed queries per case at most, and the time one case may take once it has `MIN_ITERS`.
const MAX_ITERS: usize = 200;
const MIN_ITERS: usize = 10;
const CASE_BUDGET: Duration = Duration::from_secs(4);
/// 2026-01-01T00:00:00Z, the first call's start; the log covers `DAYS` days from there.
const T0: i64 = 1_767_225_600_000_000;
const DAYS: i64 = 30;
const DAY_US: i64 = 86_400 * 1_000_000;

/// What a tool does, which decides its arguments, outputs, duration and how it can end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Exec,
    Git,
    Net,
    Other,
}

/// The tools and their share of the calls (per 1,000-ish): a few file tools do most of the work.
const TOOLS: &[(&str, Kind, u64)] = &[
    ("read_file", Kind::Read, 240),
    ("list_dir", Kind::Read, 120),
    ("search_files", Kind::Read, 90),
    ("edit_file", Kind::Write, 80),
    ("exec", Kind::Exec, 70),
    ("glob", Kind::Read, 50),
    ("write_file", Kind::Write, 45),
    ("run_tests", Kind::Exec, 40),
    ("git_status", Kind::Git, 35),
    ("git_diff", Kind::Git, 30),
    ("run_linter", Kind::Exec, 25),
    ("http_get", Kind::Net, 20),
    ("python_exec", Kind::Exec, 15),
    ("git_log", Kind::Git, 15),
    ("fetch_url", Kind::Net, 15),
    ("web_search", Kind::Net, 12),
    ("echo", Kind::Other, 10),
    ("git_commit", Kind::Git, 8),
    ("get_time", Kind::Other, 8),
    ("move_file", Kind::Write, 6),
    ("delete_file", Kind::Write, 6),
    ("sql_query", Kind::Net, 6),
    ("copy_file", Kind::Write, 5),
    ("make_dir", Kind::Write, 5),
    ("http_post", Kind::Net, 5),
    ("env_info", Kind::Other, 4),
    ("docker_ps", Kind::Exec, 3),
    ("kubectl_get", Kind::Exec, 3),
    ("send_email", Kind::Net, 2),
    ("jira_create_issue", Kind::Net, 2),
];

const CALLERS: &[(&str, u64)] = &[
    ("claude-code", 300),
    ("cursor", 200),
    ("codex-cli", 150),
    ("ci-bot", 120),
    ("review-agent", 80),
    ("docs-agent", 50),
    ("ops-agent", 40),
    ("aider", 30),
    ("nightly-refactor", 20),
    ("support-triage", 10),
];

/// Most calls are made under no skill.
const SKILLS: &[(Option<&str>, u64)] = &[
    (None, 700),
    (Some("release-notes"), 150),
    (Some("db-migrations"), 80),
    (Some("triage"), 50),
    (Some("pdf-report"), 15),
    (Some("security-audit"), 5),
];

const USERS: &[(Option<&str>, u64)] = &[
    (None, 40),
    (Some("alice@example.com"), 30),
    (Some("bob@example.com"), 15),
    (Some("carol@example.com"), 10),
    (Some("dave@example.com"), 5),
];

const CRATES: &[&str] = &[
    "api", "billing", "core", "db", "auth", "web", "jobs", "search", "mailer", "cli", "metrics",
    "storage",
];
const MODULES: &[&str] = &[
    "lib", "main", "config", "error", "handlers", "models", "routes", "schema", "session", "cache",
    "queue", "retry", "parser", "render", "client", "server", "util", "tests", "migrate", "auth",
];
const COMMANDS: &[&str] = &[
    "cargo test -p core",
    "cargo build --release",
    "cargo clippy --all-targets",
    "npm run build",
    "npm test -- --watch=false",
    "ls -la",
    "make check",
    "pytest -q tests/",
    "git grep -n TODO",
    "docker compose up -d db",
];
const URLS: &[&str] = &[
    "https://api.github.com/repos/acme/shop/issues",
    "https://api.github.com/repos/acme/shop/pulls/812/files",
    "https://docs.rs/sqlx/latest/sqlx/",
    "https://registry.npmjs.org/react",
    "https://status.example.com/api/v2/summary.json",
    "https://jira.example.com/rest/api/2/search",
];
const SEARCHES: &[&str] = &[
    "sqlite covering index order by",
    "tokio joinset abort on drop",
    "react useEffect cleanup fetch",
    "postgres deadlock detected",
    "rust lifetime may not live long enough",
];

/// A small deterministic generator (splitmix64), so row `i` is the same in every build.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `per_mille` times in 1,000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn weighted<'a, T>(&mut self, items: &'a [(T, u64)]) -> &'a T {
        &self.weighted_by(items, |(_, w)| *w).0
    }

    fn weighted_by<'a, T>(&mut self, items: &'a [T], weight: impl Fn(&T) -> u64) -> &'a T {
        let total: u64 = items.iter().map(&weight).sum();
        let mut roll = self.below(total);
        for item in items {
            if roll < weight(item) {
                return item;
            }
            roll -= weight(item);
        }
        &items[items.len() - 1]
    }
}

/// How a generated call ended, before it is dressed as a record.
enum End {
    Success,
    Denied(LayerVerdict),
    Invalid,
    Failed,
    Timeout,
    Cancelled,
    Asked,
    NotFound,
}

/// The arguments a tool of this kind is typically called with.
fn arguments(rng: &mut Rng, name: &str, kind: Kind) -> Value {
    let file = |rng: &mut Rng| format!("crates/{}/src/{}.rs", rng.pick(CRATES), rng.pick(MODULES));
    match (kind, name) {
        (Kind::Read, "list_dir") => json!({"path": format!("crates/{}/src", rng.pick(CRATES))}),
        (Kind::Read, "search_files") => json!({
            "pattern": format!("fn {}", rng.pick(MODULES)),
            "path": format!("crates/{}", rng.pick(CRATES)),
        }),
        (Kind::Read, "glob") => json!({"pattern": format!("crates/{}/**/*.rs", rng.pick(CRATES))}),
        (Kind::Read, _) => json!({"path": file(rng)}),
        (Kind::Write, "edit_file") => json!({
            "path": file(rng),
            "old": "let retries = 3;",
            "new": format!("let retries = {};", rng.below(10)),
        }),
        (Kind::Write, "move_file" | "copy_file") => {
            json!({"from": file(rng), "to": file(rng)})
        }
        (Kind::Write, _) => json!({"path": file(rng), "bytes": rng.below(8000)}),
        (Kind::Exec, "run_tests") => {
            json!({"filter": format!("{}::{}", rng.pick(CRATES), rng.pick(MODULES))})
        }
        (Kind::Exec, "run_linter") => json!({"paths": [format!("crates/{}", rng.pick(CRATES))]}),
        (Kind::Exec, "python_exec") => {
            let file = rng.pick(MODULES);
            json!({"code": format!("import json; print(len(json.load(open('data/{file}.json'))))")})
        }
        (Kind::Exec, "docker_ps") => json!({"all": rng.chance(500)}),
        (Kind::Exec, "kubectl_get") => json!({"resource": "pods", "namespace": "staging"}),
        (Kind::Exec, _) => json!({"command": rng.pick(COMMANDS), "cwd": "/home/alice/src/shop"}),
        (Kind::Git, "git_commit") => {
            let (c, m) = (rng.pick(CRATES), rng.pick(MODULES));
            json!({"message": format!("fix({c}): handle empty {m}")})
        }
        (Kind::Git, "git_log") => json!({"max_count": 20}),
        (Kind::Git, _) => json!({"path": "."}),
        (Kind::Net, "web_search") => json!({"query": rng.pick(SEARCHES)}),
        (Kind::Net, "sql_query") => {
            let days = rng.below(30);
            let sql = format!(
                "SELECT count(*) FROM orders WHERE created_at > now() - interval '{days} days'"
            );
            json!({ "sql": sql })
        }
        (Kind::Net, "send_email") => {
            json!({"to": "ops@example.com", "subject": "nightly build report"})
        }
        (Kind::Net, "jira_create_issue") => {
            json!({"project": "SHOP", "summary": format!("flaky test in {}", rng.pick(CRATES))})
        }
        (Kind::Net, "http_post") => json!({"url": rng.pick(URLS), "body": {"state": "closed"}}),
        (Kind::Net, _) => json!({"url": format!("{}?page={}", rng.pick(URLS), rng.below(5) + 1)}),
        (Kind::Other, "echo") => json!({"ping": rng.below(100)}),
        (Kind::Other, _) => json!({}),
    }
}

/// What a successful call of this kind returns.
fn success_output(rng: &mut Rng, name: &str, kind: Kind) -> Value {
    match kind {
        Kind::Read => {
            let m = rng.pick(MODULES);
            json!({
                "content": format!("//! The {m} module: loading, caching and retrying.\n"),
                "lines": rng.below(600) + 10,
            })
        }
        Kind::Write => json!({"written": rng.below(8000) + 1}),
        Kind::Exec => json!({
            "exit_code": 0,
            "stdout": format!("test result: ok. {} passed; 0 failed; 0 ignored", rng.below(300)),
            "stderr": "",
        }),
        Kind::Git if name == "git_diff" => {
            let c = rng.pick(CRATES);
            json!({"stdout": format!(" crates/{c}/src/lib.rs | 4 ++--\n 1 file changed")})
        }
        Kind::Git => {
            let (c, m) = (rng.pick(CRATES), rng.pick(MODULES));
            json!({"stdout": format!(" M crates/{c}/src/{m}.rs\n")})
        }
        Kind::Net => {
            let n = rng.below(500);
            json!({"status": 200, "body": format!("{{\"total_count\":{n},\"items\":[]}}")})
        }
        Kind::Other => json!({"ok": true}),
    }
}

/// A verdict that denies the call, as the layer that would deny this kind of tool writes it.
fn denial(rng: &mut Rng, name: &str, kind: Kind, args: &Value) -> LayerVerdict {
    let policy = "/home/alice/.config/toolwarden/policy.toml";
    match (kind, rng.below(4)) {
        (Kind::Read | Kind::Write, 0 | 1) => {
            let path = args["path"].as_str().unwrap_or("~/.ssh/id_ed25519");
            LayerVerdict::stop(
                Layer::Arguments,
                Decision::Deny,
                "path_forbidden",
                Severity::Critical,
                format!("path {path} matches forbidden pattern \"**/secrets/**\""),
            )
            .by(RuleRef::new(
                "forbidden_paths **/secrets/**",
                format!("{policy}:31"),
            ))
        }
        (Kind::Exec, 0 | 1) => LayerVerdict::stop(
            Layer::Exec,
            Decision::Deny,
            "exec_denied",
            Severity::Error,
            "docker is not on the exec allow list".to_owned(),
        )
        .by(RuleRef::new("exec.allow", format!("{policy}:44"))),
        (_, 2) => LayerVerdict::stop(
            Layer::RateLimit,
            Decision::Deny,
            "rate_limited",
            Severity::Warning,
            format!("{name}: 100 calls in the last second (limit 100/s)"),
        )
        .by(RuleRef::new("rate 100/s", format!("{policy}:58"))),
        (_, 3) => LayerVerdict::stop(
            Layer::Mode,
            Decision::Deny,
            "mode_forbidden",
            Severity::Warning,
            format!("read_only mode forbids {name} (rule \"group:write\")"),
        )
        .by(RuleRef::new(
            "modes.read_only.forbid group:write",
            "built-in mode defaults",
        )),
        _ => LayerVerdict::stop(
            Layer::Tools,
            Decision::Deny,
            "policy_denied",
            Severity::Error,
            format!("tool {name} is denied by rule \"group:network\""),
        )
        .by(RuleRef::new("group:network", format!("{policy}:8"))),
    }
}

/// Every layer's verdict for an allowed call, with `stop` (if any) in its layer's place.
fn explanation(name: &str, kind: Kind, caller: &str, stop: Option<LayerVerdict>) -> Value {
    let policy = "/home/alice/.config/toolwarden/policy.toml";
    let group = match kind {
        Kind::Read | Kind::Write => "group:fs",
        Kind::Exec => "group:exec",
        Kind::Git => "group:git",
        Kind::Net => "group:network",
        Kind::Other => "group:system",
    };
    let mut trace = vec![
        LayerVerdict::allow(
            Layer::Tools,
            format!("tool {name} is allowed by rule \"{group}\""),
        )
        .by(RuleRef::new(group, format!("{policy}:7"))),
        LayerVerdict::allow(
            Layer::License,
            format!("tool {name} is included in the pro tier"),
        ),
        LayerVerdict::allow(Layer::Mode, format!("tool {name} may run in normal mode")),
    ];
    if kind == Kind::Exec {
        trace.push(
            LayerVerdict::allow(Layer::Exec, "cargo, npm, make are on the exec allow list")
                .by(RuleRef::new("exec.allow", format!("{policy}:44"))),
        );
    }
    trace.push(if matches!(kind, Kind::Read | Kind::Write) {
        LayerVerdict::allow(Layer::Arguments, "the arguments pass 2 argument rule(s)")
    } else {
        LayerVerdict::allow(
            Layer::Arguments,
            format!("no argument rule applies to {name}"),
        )
    });
    let needed = if kind == Kind::Read { "read" } else { "write" };
    trace.push(LayerVerdict::allow(
        Layer::Access,
        format!("tool {name} needs {needed} access; write is held by agent {caller}"),
    ));
    trace.push(LayerVerdict::allow(
        Layer::Confirmation,
        format!("tool {name} does not require confirmation"),
    ));
    if let Some(stop) = stop {
        match trace.iter_mut().find(|v| v.layer == stop.layer) {
            Some(slot) => *slot = stop,
            None => trace.push(stop),
        }
    }
    serde_json::to_value(&trace).unwrap()
}

/// Row `i` of a log of `rows` rows: a pure function of both.
fn record(i: u64, rows: u64) -> AuditRecord {
    let mut rng = Rng::new(i);
    let step = DAYS * DAY_US / rows as i64;
    // Calls arrive in order, give or take the few that overlap.
    let started_at = T0 + i as i64 * step + rng.below(2 * step as u64) as i64;
    let (mut name, kind, _) = *rng.weighted_by(TOOLS, |t| t.2);
    let caller = *rng.weighted(CALLERS);
    let skill = *rng.weighted(SKILLS);
    let user = *rng.weighted(USERS);
    let args = arguments(&mut rng, name, kind);

    let roll = rng.below(10_000);
    let (deny, fail, timeout) = match kind {
        Kind::Exec => (600, 1200, 200),
        Kind::Net => (500, 500, 300),
        Kind::Write => (450, 200, 0),
        Kind::Git => (150, 300, 0),
        Kind::Read => (200, 200, 0),
        Kind::Other => (50, 0, 0),
    };
    let asks = matches!(
        name,
        "send_email" | "http_post" | "delete_file" | "git_commit"
    );
    let end = if roll < 10 {
        name = "bash";
        End::NotFound
    } else if roll < 10 + deny {
        End::Denied(denial(&mut rng, name, kind, &args))
    } else if roll < 160 + deny {
        End::Invalid
    } else if roll < 160 + deny + fail {
        End::Failed
    } else if roll < 160 + deny + fail + timeout {
        End::Timeout
    } else if kind == Kind::Exec && roll < 170 + deny + fail + timeout {
        End::Cancelled
    } else if asks && rng.chance(100) {
        End::Asked
    } else {
        End::Success
    };

    let mut duration_us = match kind {
        Kind::Read | Kind::Other => 150 + rng.below(2_000),
        Kind::Write | Kind::Git => 500 + rng.below(20_000),
        Kind::Exec => 50_000 + rng.below(30_000_000),
        Kind::Net => 80_000 + rng.below(2_000_000),
    } as i64;
    let mut decision = Some("allow");
    let mut stop = None;
    let mut output = None;
    let mut error: Option<(String, String)> = None;
    let mut violation = None;
    let mut truncated = false;
    let status = match end {
        End::Success => {
            let o = success_output(&mut rng, name, kind);
            truncated = kind == Kind::Read && rng.chance(10);
            output = Some(o);
            ToolStatus::Success
        }
        End::Denied(verdict) => {
            duration_us = 40 + rng.below(200) as i64;
            decision = Some("deny");
            error = Some((
                verdict.code.clone().unwrap_or_default(),
                verdict.reason.clone(),
            ));
            violation = Some(AuditViolation {
                kind: verdict.code.clone().unwrap_or_default(),
                severity: verdict.severity.unwrap_or(Severity::Error),
            });
            stop = Some(verdict);
            ToolStatus::PermissionDenied
        }
        End::Invalid => {
            duration_us = 60 + rng.below(300) as i64;
            error = Some((
                "invalid_arguments".to_owned(),
                "arguments do not match the schema (1 violation): /path: \"\" is shorter than 1 \
                 character"
                    .to_owned(),
            ));
            ToolStatus::ValidationError
        }
        End::Failed => {
            let message = match kind {
                Kind::Exec => {
                    output = Some(json!({
                        "exit_code": 101,
                        "stdout": "test result: FAILED. 41 passed; 1 failed",
                        "stderr": "thread 'retry::backoff' panicked: assertion failed",
                    }));
                    format!("{name} exited with status 101")
                }
                Kind::Net => format!("{} answered 503 Service Unavailable", rng.pick(URLS)),
                _ => format!("no such file: {}", args["path"].as_str().unwrap_or(".")),
            };
            error = Some(("execution_failed".to_owned(), message));
            ToolStatus::Failed
        }
        End::Timeout => {
            let limit = if kind == Kind::Exec { 120 } else { 30 };
            duration_us = limit * 1_000_000 + rng.below(5_000) as i64;
            error = Some((
                "timeout".to_owned(),
                format!("{name} exceeded its time limit of {limit} s and was stopped"),
            ));
            ToolStatus::Timeout
        }
        End::Cancelled => {
            error = Some((
                "cancelled".to_owned(),
                "the caller cancelled the call".to_owned(),
            ));
            ToolStatus::Cancelled
        }
        End::Asked => {
            decision = Some("ask");
            stop = Some(
                LayerVerdict::stop(
                    Layer::Confirmation,
                    Decision::Ask,
                    "confirmation_required",
                    Severity::Warning,
                    format!("tool {name} requires a person to approve each call"),
                )
                .by(RuleRef::new(
                    "requires_confirmation = true",
                    format!("tool {name}"),
                )),
            );
            error = Some((
                "confirmation_required".to_owned(),
                format!("tool {name} requires a person to approve each call"),
            ));
            ToolStatus::RequiresConfirmation
        }
        End::NotFound => {
            decision = None;
            duration_us = 20 + rng.below(50) as i64;
            error = Some((
                "tool_not_found".to_owned(),
                "no tool named \"bash\"".to_owned(),
            ));
            ToolStatus::NotFound
        }
    };
    let explanation = decision.map(|_| explanation(name, kind, caller, stop));
    let metadata = if kind == Kind::Exec && status != ToolStatus::PermissionDenied {
        json!({
            "exit_code": if status == ToolStatus::Success { 0 } else { 101 },
            "sandbox": "strict",
            "peak_memory_kib": 20_000 + rng.below(400_000),
            "cpu_ms": duration_us / 2_000,
        })
    } else {
        json!({})
    };
    let ms = (started_at / 1000) as u64;
    AuditRecord {
        // Shaped like the runtime's UUIDv7 ids; the low bits hold `i` so they are unique.
        execution_id: format!(
            "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
            ms >> 16,
            ms & 0xffff,
            rng.below(0x1000),
            0x8000 | rng.below(0x4000),
            (rng.next() & 0xffff_0000_0000) | i
        ),
        // A task is a run of a few calls sharing a trace.
        trace_id: format!("{:032x}", Rng::new(i / 6).next() as u128 * 0x1_0000_0001),
        tool: name.to_owned(),
        agent_id: caller.to_owned(),
        skill: skill.map(str::to_owned),
        user_id: user.map(str::to_owned),
        arguments: args,
        decision: decision.map(str::to_owned),
        explanation,
        status,
        error_code: error.as_ref().map(|(c, _)| c.clone()),
        error_message: error.map(|(_, m)| m),
        output_bytes: output.as_ref().map_or(0, |o| o.to_string().len() as u64),
        output,
        truncated,
        started_at,
        completed_at: started_at + duration_us,
        duration_us,
        metadata,
        violation,
    }
}

/// The cached log of a full run: `<target>/bench-data/audit-1m.db`.
fn cache_path() -> PathBuf {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`, absolute, wherever the target directory is.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .unwrap_or(tmp)
        .join("bench-data")
        .join("audit-1m.db")
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes a database file and the files SQLite and the store keep beside it.
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
}

/// What the setting in a log built for `rows` rows starts with.
fn fixture_tag(rows: u64) -> String {
    format!("{GENERATOR}; {rows} rows")
}

/// Opens the cached log if it has the right rows from the right generator; returns the store and
/// what the setting says about how it was built. A log the store refuses (say, one migrated by a
/// migration since edited or from a newer build) is rebuilt, and the reason printed.
async fn open_cached(path: &Path, rows: u64) -> Option<(Store, String)> {
    if !path.exists() {
        return None;
    }
    let store = match Store::open(StoreOptions::new(path)).await {
        Ok(store) => store,
        Err(e) => {
            say(format!("fixture: rebuilding {}: {e}", path.display()));
            return None;
        }
    };
    let tag = store
        .get_setting(FIXTURE_SETTING)
        .await
        .ok()
        .flatten()
        .map(|s| s.value);
    let count = store.count(&AuditQuery::default()).await.ok();
    match tag {
        Some(tag) if tag.starts_with(&fixture_tag(rows)) && count == Some(rows) => {
            Some((store, tag))
        }
        _ => {
            store.close().await;
            None
        }
    }
}

/// Appends `rows` generated records with many appends in flight, so each commit carries up to
/// `max_batch` of them (the fastest way in through the public API).
async fn fill(store: &Store, rows: u64, progress: bool) {
    let mut inflight = tokio::task::JoinSet::<tw_store::Result<i64>>::new();
    let t = Instant::now();
    for i in 0..rows {
        if inflight.len() >= IN_FLIGHT {
            inflight.join_next().await.unwrap().unwrap().unwrap();
        }
        let store = store.clone();
        inflight.spawn(async move { store.append(record(i, rows)).await });
        if progress && i > 0 && i % 100_000 == 0 {
            eprintln!(
                "audit_query: {i} rows appended in {:.1} s",
                t.elapsed().as_secs_f64()
            );
        }
    }
    while let Some(r) = inflight.join_next().await {
        r.unwrap().unwrap();
    }
}

/// Builds a log of `rows` rows at `path` (replacing whatever is there) and returns the build time.
/// Built under another name and renamed when complete, so an interrupted build is never reused.
async fn build(path: &Path, rows: u64, progress: bool) -> Duration {
    remove_db(path);
    let partial = with_suffix(path, ".building");
    remove_db(&partial);
    let t = Instant::now();
    let mut options = StoreOptions::new(&partial);
    options.max_batch = 1000;
    let store = Store::open(options).await.unwrap();
    fill(&store, rows, progress).await;
    let took = t.elapsed();
    store
        .set_setting(
            FIXTURE_SETTING,
            &format!(
                "{}; built in {:.1} s",
                fixture_tag(rows),
                took.as_secs_f64()
            ),
            "bench",
            0,
        )
        .await
        .unwrap();
    store.close().await;
    // The last connection to close checkpoints the WAL into the file; make sure of it before the
    // file is renamed without its WAL.
    let mut conn = connect(&partial, false).await;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    drop(conn);
    std::fs::rename(&partial, path).unwrap();
    remove_db(&partial);
    took
}

async fn connect(path: &Path, read_only: bool) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .read_only(read_only)
        .connect()
        .await
        .unwrap()
}

/// Sorted samples' nearest-rank percentile.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median and p95 in ms of one operation, and what it returned (rows or a count).
struct Timing {
    median: f64,
    p95: f64,
    runs: usize,
    result: u64,
}

/// Times `op` after two warm-up runs: up to `max` runs, stopping early once `CASE_BUDGET` is
/// spent and `MIN_ITERS` are in.
async fn time(max: usize, mut op: impl AsyncFnMut() -> u64) -> Timing {
    let mut result = 0;
    for _ in 0..2 {
        result = op().await;
    }
    let mut ms = Vec::with_capacity(max);
    let started = Instant::now();
    while ms.len() < max && (ms.len() < MIN_ITERS.min(max) || started.elapsed() < CASE_BUDGET) {
        let t = Instant::now();
        result = std::hint::black_box(op().await);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    Timing {
        median: percentile(&ms, 0.5),
        p95: percentile(&ms, 0.95),
        runs: ms.len(),
        result,
    }
}

/// One thing the viewer asks for.
struct Case {
    name: &'static str,
    query: AuditQuery,
}

/// Builds the viewer's queries one filter at a time.
struct Q(AuditQuery);

impl Q {
    fn all() -> Self {
        Self(AuditQuery::default())
    }
    fn tool(mut self, tool: &str) -> Self {
        self.0.tool = Some(tool.to_owned());
        self
    }
    fn status(mut self, status: ToolStatus) -> Self {
        self.0.status = Some(status);
        self
    }
    fn caller(mut self, caller: &str) -> Self {
        self.0.agent_id = Some(caller.to_owned());
        self
    }
    fn skill(mut self, skill: &str) -> Self {
        self.0.skill = Some(skill.to_owned());
        self
    }
    /// Calls started on day `d` (0-based) of the log.
    fn day(self, d: i64) -> Self {
        self.days(d, d + 1)
    }
    /// Calls started on days `from` up to (not including) `to`.
    fn days(self, from: i64, to: i64) -> Self {
        self.since_day(from).until_day(to)
    }
    fn since_day(mut self, d: i64) -> Self {
        self.0.since = Some(T0 + d * DAY_US);
        self
    }
    /// Calls started in hour `h` of day `d`.
    fn hour(mut self, d: i64, h: i64) -> Self {
        let start = T0 + d * DAY_US + h * DAY_US / 24;
        self.0.since = Some(start);
        self.0.until = Some(start + DAY_US / 24);
        self
    }
    /// Calls started before day `d`.
    fn until_day(mut self, d: i64) -> Self {
        self.0.until = Some(T0 + d * DAY_US);
        self
    }
    fn cursor(mut self, id: i64) -> Self {
        self.0.cursor = Some(id);
        self
    }
    fn text(mut self, text: &str) -> Self {
        self.0.text = Some(text.to_owned());
        self
    }
}

fn case(name: &'static str, q: Q) -> Case {
    Case { name, query: q.0 }
}

/// The viewer's queries: every filter it offers alone, the combinations people reach for, a page
/// deep in the log, and the text search. Filters that match nothing are the worst case for an
/// index that only narrows the search: the whole narrowed range is read to find no row.
fn page_cases(deep_cursor: i64, range_cursor: i64) -> Vec<Case> {
    use ToolStatus::{Failed, PermissionDenied, Timeout};
    let mid = DAYS / 2;
    vec![
        case("first page, no filter", Q::all()),
        case("tool = read_file (24% of rows)", Q::all().tool("read_file")),
        case("tool = send_email (0.2%)", Q::all().tool("send_email")),
        case(
            "status = permission_denied (3%)",
            Q::all().status(PermissionDenied),
        ),
        case("status = timeout (0.2%)", Q::all().status(Timeout)),
        case(
            "caller = support-triage (1%)",
            Q::all().caller("support-triage"),
        ),
        case(
            "skill = release-notes (15%)",
            Q::all().skill("release-notes"),
        ),
        case(
            "skill = security-audit (0.5%)",
            Q::all().skill("security-audit"),
        ),
        case(
            "skill = onboarding (in no row)",
            Q::all().skill("onboarding"),
        ),
        case(
            "tool = exec + status = failed",
            Q::all().tool("exec").status(Failed),
        ),
        case(
            "tool = read_file + status = timeout (none)",
            Q::all().tool("read_file").status(Timeout),
        ),
        case(
            "caller = ci-bot + status = failed",
            Q::all().caller("ci-bot").status(Failed),
        ),
        // Time ranges: narrow and wide, at the top, in the middle and at the old end of the log,
        // open at either end, below a cursor, and with a tool or a caller.
        case("1-day range, the last day", Q::all().day(DAYS - 1)),
        case("1-day range, day 15 of 30", Q::all().day(mid)),
        case("1-day range, the first day", Q::all().day(0)),
        case("1-hour range, day 1", Q::all().hour(1, 12)),
        case("7-day range, days 23 to 29", Q::all().days(23, 30)),
        case("7-day range, days 8 to 14", Q::all().days(8, 15)),
        case("7-day range, days 0 to 6", Q::all().days(0, 7)),
        case("20-day range, days 5 to 24", Q::all().days(5, 25)),
        case("15-day range, days 0 to 14", Q::all().days(0, mid)),
        case("from day 23 on (no end)", Q::all().since_day(23)),
        case("from day 1 on (no end)", Q::all().since_day(1)),
        case("up to day 28 (no start)", Q::all().until_day(28)),
        case("up to day 15 (no start)", Q::all().until_day(mid)),
        case("up to day 2 (no start)", Q::all().until_day(2)),
        case(
            "up to day 15, deep page by cursor",
            Q::all().until_day(mid).cursor(range_cursor),
        ),
        case(
            "1-day range (day 15) + tool = exec",
            Q::all().day(mid).tool("exec"),
        ),
        case(
            "1-day range (day 15) + caller = ci-bot",
            Q::all().day(mid).caller("ci-bot"),
        ),
        case(
            "up to day 15 + tool = read_file",
            Q::all().until_day(mid).tool("read_file"),
        ),
        case(
            "up to day 2 + tool = send_email",
            Q::all().until_day(2).tool("send_email"),
        ),
        case(
            "from day 1 on + caller = claude-code",
            Q::all().since_day(1).caller("claude-code"),
        ),
        case(
            "7-day range (days 8-14) + support-triage",
            Q::all().days(8, 15).caller("support-triage"),
        ),
        case(
            "up to day 15 + status = timeout",
            Q::all().until_day(mid).status(Timeout),
        ),
        case(
            "1-day range (day 15) + status = denied",
            Q::all().day(mid).status(PermissionDenied),
        ),
        case(
            "deep page by cursor, no filter",
            Q::all().cursor(deep_cursor),
        ),
        case(
            "deep page by cursor + tool = exec",
            Q::all().cursor(deep_cursor).tool("exec"),
        ),
        case("text \"cargo test\" (common)", Q::all().text("cargo test")),
        case("text \"ENOSPC\" (in no row)", Q::all().text("ENOSPC")),
        case(
            "text \"ENOSPC\", deep page by cursor",
            Q::all().text("ENOSPC").cursor(deep_cursor),
        ),
        case(
            "text \"ENOSPC\" + tool = exec",
            Q::all().text("ENOSPC").tool("exec"),
        ),
        case(
            "text \"ENOSPC\" + 1-day range (day 15)",
            Q::all().text("ENOSPC").day(mid),
        ),
        case(
            "text \"ENOSPC\" + up to day 15",
            Q::all().text("ENOSPC").until_day(mid),
        ),
    ]
}

/// Counts: the viewer does not show one today; these are what a "N matching" label would cost.
fn count_cases() -> Vec<Case> {
    vec![
        case("count, no filter", Q::all()),
        case("count, tool = read_file", Q::all().tool("read_file")),
        case(
            "count, status = permission_denied",
            Q::all().status(ToolStatus::PermissionDenied),
        ),
        case("count, 1-day range (day 15)", Q::all().day(DAYS / 2)),
        case(
            "count, 1-day range (day 15) + tool = exec",
            Q::all().day(DAYS / 2).tool("exec"),
        ),
        case(
            "count, up to day 15 + caller = ci-bot",
            Q::all().until_day(DAYS / 2).caller("ci-bot"),
        ),
        case("count, text \"ENOSPC\"", Q::all().text("ENOSPC")),
    ]
}

#[derive(Clone)]
enum Bind {
    Text(String),
    Int(i64),
}

/// The page query as `query.rs` builds it, with its bound values, so its plan can be asked for:
/// the page's ids chosen first, below `below` and at or above `from` (a text search's window),
/// then those rows read. A time range alone or with a tool or a caller walks the log's blocks
/// of 4096 ids through a block index (see `push_ids` in `query.rs`).
fn page_sql(q: &AuditQuery, below: Option<i64>, from: Option<i64>) -> (String, Vec<Bind>) {
    let (filter, binds) = filter_sql(q, below, from);
    let n = i64::from(q.limit) + 1;
    let ranged = q.since.is_some() || q.until.is_some();
    let others = q.status.is_some() || q.skill.is_some() || q.text.is_some() || from.is_some();
    let index = match (&q.tool, &q.agent_id) {
        _ if !ranged || others => None,
        (None, None) => Some("audit_log_block_started"),
        (Some(_), None) => Some("audit_log_tool_block"),
        (None, Some(_)) => Some("audit_log_agent_block"),
        (Some(_), Some(_)) => None,
    };
    let Some(index) = index else {
        let sql = format!(
            "SELECT * FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE 1 = 1{filter} \
             ORDER BY id DESC LIMIT ?) ORDER BY id DESC"
        );
        let mut all = binds;
        all.push(Bind::Int(n));
        return (sql, all);
    };
    let (top, mut all) = match below {
        Some(b) => ("?".to_owned(), vec![Bind::Int(((b - 1) >> 12) + 1)]),
        None => (
            "((SELECT MAX(id) FROM audit_log) >> 12) + 1".to_owned(),
            vec![],
        ),
    };
    let sql = format!(
        "SELECT * FROM audit_log WHERE id IN (WITH RECURSIVE walk(block, found) AS (SELECT {top}, \
         0 UNION ALL SELECT block - 1, found + (SELECT COUNT(*) FROM (SELECT 1 FROM audit_log \
         INDEXED BY {index} WHERE 1 = 1{filter} AND (id >> 12) = walk.block - 1 LIMIT ?)) FROM \
         walk WHERE found < ? AND block > (SELECT MIN(id) FROM audit_log) >> 12) SELECT id FROM \
         audit_log INDEXED BY {index} WHERE 1 = 1{filter} AND (id >> 12) IN (SELECT block FROM \
         walk) ORDER BY id DESC LIMIT ?) ORDER BY id DESC"
    );
    all.extend(binds.iter().cloned());
    all.extend([Bind::Int(n), Bind::Int(n)]);
    all.extend(binds);
    all.push(Bind::Int(n));
    (sql, all)
}

/// The page query's filters as `AND ...` terms, and their bound values.
fn filter_sql(q: &AuditQuery, below: Option<i64>, from: Option<i64>) -> (String, Vec<Bind>) {
    let mut sql = String::new();
    let mut binds = Vec::new();
    let equal = [
        ("tool", q.tool.as_deref()),
        ("status", q.status.map(ToolStatus::as_str)),
        ("agent_id", q.agent_id.as_deref()),
        ("skill", q.skill.as_deref()),
    ];
    for (column, value) in equal {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            binds.push(Bind::Text(v.to_owned()));
        }
    }
    if let Some(v) = q.since {
        sql.push_str(" AND started_at >= ?");
        binds.push(Bind::Int(v));
    }
    if let Some(v) = q.until {
        sql.push_str(" AND started_at < ?");
        binds.push(Bind::Int(v));
    }
    if let Some(t) = &q.text {
        let columns = ["tool", "arguments", "error_message", "output"];
        let likes: Vec<String> = columns
            .iter()
            .map(|c| format!("{c} LIKE ? ESCAPE '\\'"))
            .collect();
        sql.push_str(&format!(" AND ({})", likes.join(" OR ")));
        for _ in columns {
            binds.push(Bind::Text(format!("%{t}%")));
        }
    }
    if let Some(c) = below {
        sql.push_str(" AND id < ?");
        binds.push(Bind::Int(c));
    }
    if let Some(c) = from {
        sql.push_str(" AND id >= ?");
        binds.push(Bind::Int(c));
    }
    (sql, binds)
}

fn bind_all<'q>(
    sql: &'q str,
    binds: Vec<Bind>,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::Text(s) => query.bind(s),
            Bind::Int(i) => query.bind(i),
        };
    }
    query
}

/// SQLite's plan for the store's page query, its steps joined by " / ". A text search's window
/// is placed at the top of the log or below the cursor (where the store places it when no other
/// filter rules out the newest rows); the plan does not depend on where.
async fn plan(conn: &mut SqliteConnection, q: &AuditQuery, newest: i64) -> String {
    let (below, from) = if q.text.is_some() {
        let below = q.cursor.unwrap_or(newest + 1);
        (Some(below), Some(below - TEXT_SCAN_WINDOW))
    } else {
        (q.cursor, None)
    };
    let (sql, binds) = page_sql(q, below, from);
    let explain = format!("EXPLAIN QUERY PLAN {sql}");
    bind_all(&explain, binds)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The id a viewer passes as the cursor for page `page` of the unfiltered log: the last id of
/// page `page - 1`. Asked of SQLite directly (one OFFSET over the rowid) rather than by paging
/// 10,000 times; the page query timed with it is the viewer's.
async fn cursor_for_page(path: &Path, page: u64) -> i64 {
    let mut conn = connect(path, true).await;
    let offset = ((page - 1) * u64::from(PAGE) - 1) as i64;
    sqlx::query_scalar("SELECT id FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?")
        .bind(offset)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

fn verdict(median: f64) -> &'static str {
    if median <= GOAL_MS { "ok" } else { "MISSES" }
}

fn ms(t: &Timing) -> String {
    format!("{:>8.2} ms {:>8.2} ms", t.median, t.p95)
}

async fn time_pages(store: &Store, cases: &[Case], max: usize) -> Vec<Timing> {
    let mut out = Vec::new();
    for c in cases {
        let t = time(max, async || {
            store.query(&c.query).await.unwrap().rows.len() as u64
        })
        .await;
        out.push(t);
    }
    out
}

/// Follows a query's cursors to the end of the log; returns the rows and the pages it took.
async fn every_page(store: &Store, q: &AuditQuery) -> (u64, u64) {
    let mut q = q.clone();
    let (mut rows, mut pages) = (0, 0);
    loop {
        let page = store.query(&q).await.unwrap();
        rows += page.rows.len() as u64;
        pages += 1;
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return (rows, pages),
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) this is a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let rows = if full { FULL_ROWS } else { SMOKE_ROWS };
    let max_iters = if full { MAX_ITERS } else { 2 };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load_before = loadavg();
    let scratch = tempfile::tempdir().unwrap();
    if !full {
        say(format!(
            "note: smoke run (no --bench): {rows} rows, {max_iters} queries per case; figures \
             not meaningful"
        ));
    }

    let path = if full {
        cache_path()
    } else {
        scratch.path().join("audit-smoke.db")
    };
    let store = tokio.block_on(async {
        let t = Instant::now();
        if let Some((store, tag)) = open_cached(&path, rows).await {
            // Opening migrates the file forward: the first run after a migration pays for it here.
            let how = format!(
                "reused {} ({tag}); opened in {:.1} s, migrations included",
                path.display(),
                t.elapsed().as_secs_f64()
            );
            return (store, how);
        }
        let took = build(&path, rows, full).await;
        let store = Store::open(StoreOptions::new(&path)).await.unwrap();
        let how = format!(
            "built {} in {:.1} s ({:.0} appends/s through Store::append, up to {IN_FLIGHT} in \
             flight, max_batch 1000)",
            path.display(),
            took.as_secs_f64(),
            rows as f64 / took.as_secs_f64()
        );
        (store, how)
    });
    let (store, how) = store;
    say(format!("fixture: {how}"));
    let size: u64 = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(with_suffix(&path, s)).ok())
        .map(|m| m.len())
        .sum();
    say(format!(
        "fixture: {rows} rows over {DAYS} days, {} tools, {} callers, {:.0} MiB ({:.0} bytes a \
         row)",
        TOOLS.len(),
        CALLERS.len(),
        size as f64 / (1 << 20) as f64,
        size as f64 / rows as f64
    ));

    let deep_page = if full {
        DEEP_PAGE
    } else {
        rows / u64::from(PAGE) / 2
    };
    let deep_cursor = tokio.block_on(cursor_for_page(&path, deep_page));
    say(format!(
        "deep page: page {deep_page} starts below id {deep_cursor} ({} rows down)",
        (deep_page - 1) * u64::from(PAGE)
    ));

    // A cursor 30% of the way up the log: a page well inside the range "up to day 15".
    let range_cursor = (rows * 3 / 10) as i64;
    let cases = page_cases(deep_cursor, range_cursor);
    let pages = tokio.block_on(time_pages(&store, &cases, max_iters));
    // How far one page of each text search got: a page that ends at its window says so.
    let reach: Vec<Option<i64>> = tokio.block_on(async {
        let mut out = Vec::new();
        for c in &cases {
            out.push(store.query(&c.query).await.unwrap().scanned_to);
        }
        out
    });
    // What a text search costs when it is followed to the end of the log, as `toolwarden audit
    // list --text` does while its page is not full.
    let walk_query = Q::all().text("ENOSPC").0;
    let mut walked = (0, 0);
    let walk = tokio.block_on(time(max_iters.min(3), async || {
        walked = every_page(&store, &walk_query).await;
        walked.0
    }));
    let counts: Vec<(Case, Timing)> = tokio.block_on(async {
        let mut out = Vec::new();
        for c in count_cases() {
            let t = time(max_iters, async || store.count(&c.query).await.unwrap()).await;
            out.push((c, t));
        }
        out
    });
    tokio.block_on(store.close());

    say(format!(
        "page queries through Store::query, {rows} rows, warm cache (median, p95, rows returned, \
         runs); a text search reads at most {TEXT_SCAN_WINDOW} ids a page"
    ));
    for ((c, t), reach) in cases.iter().zip(&pages).zip(&reach) {
        let reach = reach.map_or_else(String::new, |id| format!(", searched down to id {id}"));
        say(format!(
            "  {:<42} {} {:>3} {:>4}  {} (goal <= {GOAL_MS} ms){reach}",
            c.name,
            ms(t),
            t.result,
            t.runs,
            verdict(t.median)
        ));
    }
    say(format!(
        "  {:<42} {} {:>3} {:>4}  in {} pages (the whole log; no goal)",
        "text \"ENOSPC\", every page to the end",
        ms(&walk),
        walk.result,
        walk.runs,
        walked.1
    ));
    say(
        "counts through Store::count (the viewer shows none today; for a \"N matching\" label)"
            .to_owned(),
    );
    for (c, t) in &counts {
        say(format!("  {:<42} {}  = {}", c.name, ms(t), t.result));
    }

    // Which index answers each page: the evidence that each index of the log is used.
    tokio.block_on(async {
        let mut conn = connect(&path, true).await;
        let newest: i64 = sqlx::query_scalar("SELECT MAX(id) FROM audit_log")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_log' \
             AND sql IS NOT NULL ORDER BY name",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        say(format!("indexes on audit_log: {}", indexes.join(", ")));
        say("plans of the page queries (EXPLAIN QUERY PLAN):");
        for c in &cases {
            say(format!(
                "  {}: {}",
                c.name,
                plan(&mut conn, &c.query, newest).await
            ));
        }
    });

    say(format!(
        "machine: {} cores, 1-minute load average {load_before} at the start, {} at the end",
        std::thread::available_parallelism().map_or(0, usize::from),
        loadavg()
    ));
}

fn say(line: impl std::fmt::Display) {
    println!("audit summary: {line}");
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}
