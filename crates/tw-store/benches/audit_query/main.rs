//! What the desktop app's audit viewer costs on a big log: one page (50 rows, newest first) of a
//! 1,000,000-row audit log for every filter the viewer offers, against the goal set for the
//! viewer (a page in <= 10 ms, issue 20). A log grows by every governed call and is never
//! pruned, so the pages must stay quick when it is large, not only on the small files the tests
//! use.
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
//! cache) and printed as `audit summary:` lines; figures are printed, never asserted. The store
//! builds the log's text index (`<log>.search`) in the background, from the oldest record up;
//! the bench waits for it to be complete before timing, and prints how long that took (the first
//! run after the index came in builds it for the whole log) and its size. A text search reads at
//! most `TEXT_INDEX_WINDOW` of the index's candidates a page, so its line also says how far one
//! page searched, and one more line times following its cursors down the whole log (what
//! `toolwarden audit list --text` does while its page is not full). Then it prints SQLite's plan
//! for every page query, which shows the index each one uses (the SQL is rebuilt here the way
//! `query.rs` builds it, so the plan is the one the store gets).
//!
//! Before the pages, `audit verify` is timed over the whole log (every hash link, output digest
//! and checkpoint), against issue 21's goal of 10 s for 1,000,000 records; then the log is
//! copied into a team store on a throwaway PostgreSQL cluster by `store migrate`, `audit verify`
//! is timed there too, and so is `audit archive` of the older half and `audit verify` after it.
//!
//! Without `--bench` (`cargo test --benches`) it is a smoke run on a 10,000-row log in a
//! temporary directory, a few queries each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::time::Instant;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Row as _, SqliteConnection};
use tw_core::ToolStatus;
use tw_store::{AuditQuery, Store, StoreOptions, TEXT_INDEX_WINDOW};

use log::{
    CALLERS, CASE_BUDGET, DAY_US, DAYS, DEEP_PAGE, FULL_ROWS, GOAL_MS, IN_FLIGHT, MAX_ITERS,
    MIN_ITERS, PAGE, SMOKE_ROWS, T0, TOOLS, build, cache_path, open_cached, with_suffix,
};

mod log;

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
        case(
            "text \"cargo test\", deep page by cursor",
            Q::all().text("cargo test").cursor(deep_cursor),
        ),
        case(
            "text \"cargo test\" + status = denied",
            Q::all()
                .text("cargo test")
                .status(ToolStatus::PermissionDenied),
        ),
        case(
            "text \"postgres deadlock\" (uncommon)",
            Q::all().text("postgres deadlock"),
        ),
        case("text \"EN\" (too short for the index)", Q::all().text("EN")),
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
        case("count, text \"cargo test\"", Q::all().text("cargo test")),
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

/// The page query of a text search below the text index's reach, as `query.rs` builds it: the
/// index's candidates newest first, each read and checked against every filter.
fn index_sql(q: &AuditQuery, text: &str, below: i64) -> (String, Vec<Bind>) {
    let chars: Vec<char> = text.chars().collect();
    let terms: Vec<String> = chars
        .windows(3)
        .map(|w| format!("\"{}\"", w.iter().collect::<String>().replace('"', "\"\"")))
        .collect();
    let (filter, binds) = filter_sql(q, None, None);
    let sql = format!(
        "SELECT * FROM audit_log WHERE id IN (SELECT a.id FROM (SELECT rowid AS rid FROM \
         search.audit_text WHERE audit_text MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?) \
         AS m CROSS JOIN audit_log AS a ON a.id = m.rid WHERE 1 = 1{filter} LIMIT ?) ORDER BY \
         id DESC"
    );
    let mut all = vec![
        Bind::Text(terms.join(" AND ")),
        Bind::Int(below),
        Bind::Int(TEXT_INDEX_WINDOW),
    ];
    all.extend(binds);
    all.push(Bind::Int(i64::from(q.limit) + 1));
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
    let (sql, binds) = match &q.text {
        Some(text) => index_sql(q, text, q.cursor.unwrap_or(newest + 1)),
        None => page_sql(q, q.cursor, None),
    };
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

/// The log copied into a team store by `store migrate`, `audit verify` timed there, and the
/// older half archived.
async fn team_verify(path: &Path) -> Vec<String> {
    let cluster = tw_store::testing::PgCluster::start(&[]).unwrap();
    let url = cluster.fresh_database().await;
    let local = tempfile::tempdir().unwrap();
    let key_at = local.path().join("tw.db");
    let t = Instant::now();
    let copied = tw_store::migrate_to_team_store(path, &url, &key_at)
        .await
        .unwrap();
    let migrated = t.elapsed();
    let mut options = StoreOptions::new(&key_at);
    options.url = Some(url.clone());
    let store = Store::open(options).await.unwrap();
    let t = Instant::now();
    let report = store.verify(Vec::new()).await.unwrap();
    let took = t.elapsed();
    assert!(report.ok(), "{:?}", report.problems);
    // Retention there: the older half archived (written, read back and verified, recorded,
    // removed), then the log verified again across the cut.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let middle: i64 = sqlx::query_scalar(
        "SELECT ((MIN(started_at) + MAX(started_at)) / 2)::bigint FROM audit_log",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    let out = local.path().join("older-half.jsonl");
    let t = Instant::now();
    let cut = store.archive(middle, &out).await.unwrap().unwrap();
    let archived = t.elapsed();
    let file_size = std::fs::metadata(&out).map_or(0, |m| m.len());
    let t = Instant::now();
    let after = store.verify(Vec::new()).await.unwrap();
    let verified_after = t.elapsed();
    assert!(after.ok(), "{:?}", after.problems);
    store.close().await;
    cluster.stop().unwrap();
    vec![
        format!(
            "team store: store migrate of {} audit records: {:.1} s (the source verified first, \
             every table counted, the copy signed and verified)",
            copied.verified.audit_records,
            migrated.as_secs_f64()
        ),
        format!(
            "team store: audit verify of {} records and {} checkpoints on PostgreSQL: {:.2} s \
             ({:.0} records/s; goal <= 10 s for 1,000,000)",
            report.audit_records,
            report.checkpoints,
            took.as_secs_f64(),
            report.audit_records as f64 / took.as_secs_f64()
        ),
        format!(
            "team store: audit archive of the older half, {} records: {:.1} s ({:.0} records/s: \
             written, read back and verified, removed, the table vacuumed; the file {:.0} MiB), \
             then audit verify of the {} left across the cut and of the archive's file: {:.2} s",
            cut.removed,
            archived.as_secs_f64(),
            cut.removed as f64 / archived.as_secs_f64(),
            file_size as f64 / (1 << 20) as f64,
            after.audit_records,
            verified_after.as_secs_f64()
        ),
    ]
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

    // `audit verify` over the whole log: every chain link, output digest and checkpoint
    // (issue 21's goal: 1,000,000 records in at most 10 s).
    let t = Instant::now();
    let report = tokio.block_on(store.verify(Vec::new())).unwrap();
    let took = t.elapsed();
    assert!(report.ok(), "{:?}", report.problems);
    say(format!(
        "audit verify of {} records and {} checkpoints: {:.2} s ({:.0} records/s; \
         goal <= 10 s for 1,000,000)",
        report.audit_records,
        report.checkpoints,
        took.as_secs_f64(),
        report.audit_records as f64 / took.as_secs_f64()
    ));

    // The same log on a team store: `store migrate` copies it into a throwaway PostgreSQL
    // cluster (verifying it before and after), then `audit verify` runs there on its own.
    for line in tokio.block_on(team_verify(&path)) {
        say(line);
    }

    // The text index is built in the background from the oldest record up (a log opened for the
    // first time since the index came in has none); the text searches are timed once it is
    // complete, as they are on a log the index has followed all along.
    let t = Instant::now();
    let (indexed, caught_up) = tokio.block_on(async {
        let first = store.text_index().await.unwrap().unwrap();
        loop {
            let s = store.text_index().await.unwrap().unwrap();
            if s.indexed_to >= s.newest {
                return (first, s);
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    let index_size: u64 = [".search", ".search-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(with_suffix(&path, s)).ok())
        .map(|m| m.len())
        .sum();
    say(format!(
        "text index: {} records were indexed at open, {} after {:.1} s ({:.0} records/s at nice \
         19); {:.0} MiB ({:.0} bytes a row)",
        indexed.indexed_to,
        caught_up.indexed_to,
        t.elapsed().as_secs_f64(),
        (caught_up.indexed_to - indexed.indexed_to) as f64 / t.elapsed().as_secs_f64(),
        index_size as f64 / (1 << 20) as f64,
        index_size as f64 / rows as f64
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
         runs); a text search reads at most {TEXT_INDEX_WINDOW} of the text index's candidates \
         a page"
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
        sqlx::query("ATTACH DATABASE ? AS search")
            .bind(with_suffix(&path, ".search").to_string_lossy().into_owned())
            .execute(&mut conn)
            .await
            .unwrap();
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
