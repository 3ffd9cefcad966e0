//! The governed pipeline end to end, audit on (a real SQLite file in WAL mode), with issue 20's
//! goals, each next to its baseline measured in the same run:
//! - a governed no-op call (`echo`), its record committed before the reply: latency p50/p99
//!   (goals: p50 <= 25 us, p99 <= 100 us), next to the floor: one bare rusqlite commit of a
//!   similar row into a table with no index but its unique execution id (one WAL append), and to
//!   the store's audit append alone;
//! - governed calls per second on a 2-worker tokio runtime, with 2 callers (goal >= 25,000/s)
//!   and 64 concurrent callers (goal >= 40,000/s; group commit shares commits between them);
//! - read_file of a 4 KiB file governed, up to the audit write, vs a bare `std::fs::read`
//!   (goal <= 1.3x).
//!
//! Lines starting `pipeline summary:` are what `scripts/bench all` collects. Machine noise
//! matters (2 shared cores): compare the ratios printed by one run.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tw_core::{Caller, ToolStatus};
use tw_runtime::{Config, Runtime, RuntimeOptions};

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.50), at(0.99))
}

struct Setup {
    _dir: tempfile::TempDir,
    tokio: tokio::runtime::Runtime,
    rt: Runtime,
    ws: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("4k.txt"), "0123456789abcde\n".repeat(256)).unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = RuntimeOptions::new(dir.path().join("data"), vec![ws.clone()], Config::default());
    let rt = tokio.block_on(Runtime::open(options)).unwrap();
    Setup {
        _dir: dir,
        tokio,
        rt,
        ws,
    }
}

fn bench(c: &mut Criterion) {
    let s = setup();
    let caller = Caller::agent("bench");
    let echo_args = json!({"ping": 1});
    let read_args = json!({"path": "4k.txt"});

    // Sanity: the calls measured below really succeed.
    for (tool, args) in [("echo", &echo_args), ("read_file", &read_args)] {
        let r = s
            .tokio
            .block_on(s.rt.execute(s.rt.call(tool, args.clone(), caller.clone())));
        assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    }

    let mut group = c.benchmark_group("pipeline");
    group.bench_function("governed_noop_echo", |b| {
        b.to_async(&s.tokio).iter(|| async {
            black_box(
                s.rt.execute(s.rt.call("echo", echo_args.clone(), caller.clone()))
                    .await,
            )
        })
    });
    group.bench_function("governed_read_file_4k", |b| {
        b.to_async(&s.tokio).iter(|| async {
            black_box(
                s.rt.execute(s.rt.call("read_file", read_args.clone(), caller.clone()))
                    .await,
            )
        })
    });
    let path = s.ws.join("4k.txt");
    group.bench_function("bare_std_fs_read_4k", |b| {
        b.iter(|| black_box(std::fs::read(&path).unwrap()))
    });
    group.finish();

    // Latency percentiles of sequential governed calls, made from a task on the runtime as a
    // transport's handler would (not from `block_on`, whose thread is outside the runtime and adds
    // two cross-thread hand-offs per call). Each sample also keeps the result's own duration,
    // which the pipeline measures before the audit write: the governed overhead without it.
    let latencies = |tool: &'static str, args: serde_json::Value, n: usize| {
        let rt = s.rt.clone();
        let caller = caller.clone();
        s.tokio
            .block_on(s.tokio.spawn(async move {
                let mut total = Vec::with_capacity(n);
                let mut before_audit = Vec::with_capacity(n);
                for _ in 0..n {
                    let call = rt.call(tool, args.clone(), caller.clone());
                    let t = Instant::now();
                    let r = black_box(rt.execute(call).await);
                    total.push(t.elapsed());
                    before_audit.push(Duration::from_micros(r.metadata.duration_us as u64));
                }
                (percentiles(total), percentiles(before_audit))
            }))
            .unwrap()
    };
    let ((p50, p99), (e50, _)) = latencies("echo", echo_args.clone(), 20_000);
    let (a50, a99) = append_alone(&s, 20_000);
    let (f50, f99) = wal_append_floor(20_000);
    println!(
        "governed no-op call (echo, audit on): p50 {p50:?}  p99 {p99:?}; before the audit write: p50 {e50:?}"
    );
    println!("the store's audit append alone, from a task: p50 {a50:?}  p99 {a99:?}");
    println!(
        "floor, one bare WAL append (rusqlite, one INSERT per commit): p50 {f50:?}  p99 {f99:?}"
    );
    println!(
        "pipeline summary: governed no-op call p50 {} (goal <= 25 us), p99 {} (goal <= 100 us); floor (one WAL append) p50 {}, p99 {}: {:.2}x / {:.2}x the floor",
        us(p50),
        us(p99),
        us(f50),
        us(f99),
        ratio(p50, f50),
        ratio(p99, f99)
    );
    let ((r50, r99), (rb50, _)) = latencies("read_file", read_args.clone(), 20_000);
    let mut bare = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let t = Instant::now();
        black_box(std::fs::read(&path).unwrap());
        bare.push(t.elapsed());
    }
    let (b50, b99) = percentiles(bare);
    println!(
        "read_file 4 KiB governed: p50 {r50:?}  p99 {r99:?}; bare std::fs::read: p50 {b50:?}  p99 {b99:?}"
    );
    println!(
        "pipeline summary: read_file 4 KiB governed up to the audit write p50 {} vs bare std::fs::read {}: {:.2}x (goal <= 1.3x)",
        us(rb50),
        us(b50),
        ratio(rb50, b50)
    );

    // Throughput on the 2-worker runtime.
    for callers in [2usize, 64] {
        let per_caller = 40_000 / callers;
        let rt = s.rt.clone();
        let commits_before = s.rt.store().batches_committed();
        let elapsed = s.tokio.block_on(async {
            let start = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..callers {
                let rt = rt.clone();
                let args = echo_args.clone();
                let caller = Caller::agent("bench");
                tasks.push(tokio::spawn(async move {
                    for _ in 0..per_caller {
                        let r = rt
                            .execute(rt.call("echo", args.clone(), caller.clone()))
                            .await;
                        debug_assert_eq!(r.status, ToolStatus::Success);
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            start.elapsed()
        });
        let total = per_caller * callers;
        let goal = if callers == 2 { 25_000 } else { 40_000 };
        let commits = s.rt.store().batches_committed() - commits_before;
        println!(
            "pipeline summary: governed calls/s, 2 worker threads, {callers} callers: {:.0} (goal >= {goal}; {total} calls in {:.2?}, {:.1} records per commit)",
            total as f64 / elapsed.as_secs_f64(),
            elapsed,
            total as f64 / commits.max(1) as f64
        );
    }
    let batches = s.rt.store().batches_committed();
    let rows = s
        .tokio
        .block_on(s.rt.store().count(&Default::default()))
        .unwrap();
    println!(
        "audit: {rows} rows in {batches} commits ({:.1} rows per commit)",
        rows as f64 / batches.max(1) as f64
    );
    s.tokio.block_on(s.rt.close());
}

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// The store's append alone, sequential, from a task on the runtime (as the pipeline makes it).
fn append_alone(s: &Setup, n: usize) -> (Duration, Duration) {
    let store = s.rt.store().clone();
    s.tokio
        .block_on(s.tokio.spawn(async move {
            let mut samples = Vec::with_capacity(n);
            for i in 0..n {
                let record = floor_record(i);
                let t = Instant::now();
                black_box(store.append(record).await.unwrap());
                samples.push(t.elapsed());
            }
            percentiles(samples)
        }))
        .unwrap()
}

/// A record like a governed echo call's.
fn floor_record(i: usize) -> tw_store::AuditRecord {
    tw_store::AuditRecord {
        execution_id: format!("0192f0c2-0000-7000-8000-{i:012}"),
        trace_id: "0192f0c200007000800000000000abcd".to_owned(),
        tool: "echo".to_owned(),
        agent_id: "bench".to_owned(),
        skill: None,
        user_id: None,
        arguments: json!({"ping": 1}),
        decision: Some("allow".to_owned()),
        explanation: Some(
            json!([{"layer": "tools", "decision": "allow", "reason": "allowed"}]).into(),
        ),
        status: ToolStatus::Success,
        error_code: None,
        error_message: None,
        output: Some(json!({"ping": 1})),
        output_bytes: 10,
        truncated: false,
        started_at: 1_700_000_000_000_000,
        completed_at: 1_700_000_000_000_050,
        duration_us: 50,
        metadata: json!({}).into(),
        violation: None,
    }
}

/// What one commit of such a row costs SQLite itself: a fresh file in WAL with synchronous =
/// NORMAL, a table with the audit columns and no index but the unique execution id, one prepared
/// INSERT per commit, no async runtime.
fn wal_append_floor(n: usize) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("floor.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, execution_id TEXT NOT NULL UNIQUE, \
         trace_id TEXT, tool TEXT, agent_id TEXT, arguments TEXT, decision TEXT, \
         explanation TEXT, status TEXT, output TEXT, output_sha256 TEXT, output_bytes INTEGER, \
         truncated INTEGER, started_at INTEGER, completed_at INTEGER, duration_us INTEGER, \
         metadata TEXT) STRICT",
    )
    .unwrap();
    let mut stmt = conn
        .prepare(
            "INSERT INTO t (execution_id, trace_id, tool, agent_id, arguments, decision, \
             explanation, status, output, output_sha256, output_bytes, truncated, started_at, \
             completed_at, duration_us, metadata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
        .unwrap();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let r = floor_record(i);
        let arguments = r.arguments.to_string();
        let explanation = r.explanation.map(|e| e.as_str().to_owned());
        let output = r.output.map(|o| o.to_string());
        let digest = "0".repeat(64);
        let t = Instant::now();
        stmt.execute(rusqlite::params![
            r.execution_id,
            r.trace_id,
            r.tool,
            r.agent_id,
            arguments,
            r.decision,
            explanation,
            "success",
            output,
            digest,
            10i64,
            false,
            r.started_at,
            r.completed_at,
            r.duration_us,
            "{}",
        ])
        .unwrap();
        samples.push(t.elapsed());
    }
    percentiles(samples)
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
