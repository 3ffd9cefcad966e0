//! The benchmark's audit log: a deterministic generator of rows shaped like real traffic, and
//! the cached 1,000,000-row file it builds once through the public API and reuses.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tw_core::ToolStatus;
use tw_core::policy::{Decision, Layer, LayerVerdict, RuleRef, Severity};
use tw_store::{AuditQuery, AuditRecord, AuditViolation, Store, StoreOptions};

use super::{connect, say};
/// Rows in the log of a full run, and of a smoke run.
pub(crate) const FULL_ROWS: u64 = 1_000_000;
pub(crate) const SMOKE_ROWS: u64 = 10_000;
/// Bump when `record` changes, so a cached log built by the old generator is rebuilt.
pub(crate) const GENERATOR: &str = "audit_query generator v1";
/// Where the cached log records how it was made.
pub(crate) const FIXTURE_SETTING: &str = "bench.audit_query.fixture";
/// The viewer's page size.
pub(crate) const PAGE: u32 = 50;
/// The goal for one page (issue 20; it was 50 ms).
pub(crate) const GOAL_MS: f64 = 10.0;
/// The page reached by cursor in the deep-page case (of a full run).
pub(crate) const DEEP_PAGE: u64 = 10_000;
/// Appends in flight while the log is built: enough to fill every group commit.
pub(crate) const IN_FLIGHT: usize = 4096;
/// Timed queries per case at most, and the time one case may take once it has `MIN_ITERS`.
pub(crate) const MAX_ITERS: usize = 200;
pub(crate) const MIN_ITERS: usize = 10;
pub(crate) const CASE_BUDGET: Duration = Duration::from_secs(4);
/// 2026-01-01T00:00:00Z, the first call's start; the log covers `DAYS` days from there.
pub(crate) const T0: i64 = 1_767_225_600_000_000;
pub(crate) const DAYS: i64 = 30;
pub(crate) const DAY_US: i64 = 86_400 * 1_000_000;

/// What a tool does, which decides its arguments, outputs, duration and how it can end.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
    Exec,
    Git,
    Net,
    Other,
}

/// The tools and their share of the calls (per 1,000-ish): a few file tools do most of the work.
pub(crate) const TOOLS: &[(&str, Kind, u64)] = &[
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

pub(crate) const CALLERS: &[(&str, u64)] = &[
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
pub(crate) const SKILLS: &[(Option<&str>, u64)] = &[
    (None, 700),
    (Some("release-notes"), 150),
    (Some("db-migrations"), 80),
    (Some("triage"), 50),
    (Some("pdf-report"), 15),
    (Some("security-audit"), 5),
];

pub(crate) const USERS: &[(Option<&str>, u64)] = &[
    (None, 40),
    (Some("alice@example.com"), 30),
    (Some("bob@example.com"), 15),
    (Some("carol@example.com"), 10),
    (Some("dave@example.com"), 5),
];

pub(crate) const CRATES: &[&str] = &[
    "api", "billing", "core", "db", "auth", "web", "jobs", "search", "mailer", "cli", "metrics",
    "storage",
];
pub(crate) const MODULES: &[&str] = &[
    "lib", "main", "config", "error", "handlers", "models", "routes", "schema", "session", "cache",
    "queue", "retry", "parser", "render", "client", "server", "util", "tests", "migrate", "auth",
];
pub(crate) const COMMANDS: &[&str] = &[
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
pub(crate) const URLS: &[&str] = &[
    "https://api.github.com/repos/acme/shop/issues",
    "https://api.github.com/repos/acme/shop/pulls/812/files",
    "https://docs.rs/sqlx/latest/sqlx/",
    "https://registry.npmjs.org/react",
    "https://status.example.com/api/v2/summary.json",
    "https://jira.example.com/rest/api/2/search",
];
pub(crate) const SEARCHES: &[&str] = &[
    "sqlite covering index order by",
    "tokio joinset abort on drop",
    "react useEffect cleanup fetch",
    "postgres deadlock detected",
    "rust lifetime may not live long enough",
];

/// A small deterministic generator (splitmix64), so row `i` is the same in every build.
pub(crate) struct Rng(u64);

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
pub(crate) enum End {
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
pub(crate) fn arguments(rng: &mut Rng, name: &str, kind: Kind) -> Value {
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
pub(crate) fn success_output(rng: &mut Rng, name: &str, kind: Kind) -> Value {
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
pub(crate) fn denial(rng: &mut Rng, name: &str, kind: Kind, args: &Value) -> LayerVerdict {
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
pub(crate) fn explanation(
    name: &str,
    kind: Kind,
    caller: &str,
    stop: Option<LayerVerdict>,
) -> Value {
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
pub(crate) fn record(i: u64, rows: u64) -> AuditRecord {
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
        explanation: explanation.map(Into::into),
        status,
        error_code: error.as_ref().map(|(c, _)| c.clone()),
        error_message: error.map(|(_, m)| m),
        output_bytes: output.as_ref().map_or(0, |o| o.to_string().len() as u64),
        output,
        truncated,
        started_at,
        completed_at: started_at + duration_us,
        duration_us,
        metadata: metadata.into(),
        violation,
    }
}

/// The cached log of a full run: `<target>/bench-data/audit-1m.db`.
pub(crate) fn cache_path() -> PathBuf {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`, absolute, wherever the target directory is.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .unwrap_or(tmp)
        .join("bench-data")
        .join("audit-1m.db")
}

pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes a database file and the files SQLite and the store keep beside it.
pub(crate) fn remove_db(path: &Path) {
    for suffix in [
        "",
        "-wal",
        "-shm",
        ".lock",
        ".search",
        ".search-wal",
        ".search-shm",
        ".audit-key",
        ".checkpoints",
    ] {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
}

/// What the setting in a log built for `rows` rows starts with.
pub(crate) fn fixture_tag(rows: u64) -> String {
    format!("{GENERATOR}; {rows} rows")
}

/// Opens the cached log if it has the right rows from the right generator; returns the store and
/// what the setting says about how it was built. A log the store refuses (say, one migrated by a
/// migration since edited or from a newer build) is rebuilt, and the reason printed.
pub(crate) async fn open_cached(path: &Path, rows: u64) -> Option<(Store, String)> {
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
pub(crate) async fn fill(store: &Store, rows: u64, progress: bool) {
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
pub(crate) async fn build(path: &Path, rows: u64, progress: bool) -> Duration {
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
    // The signing key and the checkpoints go with the log (the database last: its name is what
    // says the build is complete).
    for suffix in [".audit-key", ".checkpoints"] {
        std::fs::rename(with_suffix(&partial, suffix), with_suffix(path, suffix)).unwrap();
    }
    std::fs::rename(&partial, path).unwrap();
    remove_db(&partial);
    took
}
