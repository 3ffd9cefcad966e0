//! The audit log's write path on a real SQLite file (WAL, synchronous = NORMAL): the latency of one
//! append waited for alone (p50/p99), and appends per second with many concurrent writers sharing
//! group commits. The last line is the floor to compare with, measured in the same run: the same
//! row inserted by one plain statement per commit on a bare sqlx connection.
//!
//! The rate limiter shares the write connection, so it is measured here too: one `rate_acquire`
//! (count two windows, record one event, commit) waited for alone, and with 64 callers at once.
//! Its cost grows with the events inside the windows; the figures are for a busy agent making one
//! call every 100 ms under 100/s and 1,000/min, so up to 600 events are counted per call.
//!
//! Then the same on a team store: a throwaway PostgreSQL cluster of Debian's server (fsync on,
//! as a database people rely on runs), one append alone, appends/s from one replica's store and
//! from two (each on its own chain), and the floor there: the same row by one plain INSERT on a
//! bare connection.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Connection as _;
use tw_core::ToolStatus;
use tw_store::{AuditRecord, RateCheck, RateOutcome, RateWindow, Store, StoreOptions};

fn record(i: u64) -> AuditRecord {
    AuditRecord {
        execution_id: format!("0192f0c2-0000-7000-8000-{i:012}"),
        trace_id: "0192f0c200007000800000000000abcd".to_owned(),
        tool: "echo".to_owned(),
        agent_id: "bench".to_owned(),
        skill: None,
        user_id: None,
        arguments: json!({"ping": 1}),
        decision: Some("allow".to_owned()),
        explanation: Some(
            json!([{"layer": "tools", "decision": "allow", "reason": "allowed by rule \"group:system\""}])
                .into(),
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

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q) as usize];
    (at(0.5), at(0.99))
}

fn main() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = tokio
        .block_on(Store::open(StoreOptions::new(dir.path().join("tw.db"))))
        .unwrap();
    let n = 20_000u64;
    let (p50, p99) = tokio.block_on(async {
        let mut samples = Vec::with_capacity(n as usize);
        for i in 0..n {
            let t = Instant::now();
            store.append(record(i)).await.unwrap();
            samples.push(t.elapsed());
        }
        percentiles(samples)
    });
    println!("audit append, one writer waiting alone: p50 {p50:?}  p99 {p99:?}");

    for writers in [2u64, 64] {
        let per = 40_000 / writers;
        let base = n + writers * 1_000_000;
        let elapsed = tokio.block_on(async {
            let t = Instant::now();
            let mut tasks = Vec::new();
            for w in 0..writers {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0..per {
                        store.append(record(base + w * per + i)).await.unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            t.elapsed()
        });
        println!(
            "audit appends/s with {writers} concurrent writers: {:.0}",
            (per * writers) as f64 / elapsed.as_secs_f64()
        );
    }
    let checks = |key: String| {
        vec![RateCheck {
            key,
            rule: tw_core::RuleRef::new("bench", "bench"),
            windows: vec![
                RateWindow {
                    window_us: 1_000_000,
                    limit: 100,
                },
                RateWindow {
                    window_us: 60_000_000,
                    limit: 1_000,
                },
            ],
        }]
    };
    let (a50, a99) = tokio.block_on(async {
        let alone = checks("tool:echo".to_owned());
        let mut samples = Vec::with_capacity(n as usize);
        for i in 0..n {
            let t = Instant::now();
            let outcome = store
                .rate_acquire(&alone, 1_700_000_000_000_000 + i as i64 * 100_000)
                .await
                .unwrap();
            assert_eq!(outcome, RateOutcome::Admitted);
            samples.push(t.elapsed());
        }
        percentiles(samples)
    });
    println!("rate_acquire, one caller alone: p50 {a50:?}  p99 {a99:?}");
    let elapsed = tokio.block_on(async {
        let t = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..64u64 {
            let (store, checks) = (store.clone(), checks(format!("agent:{w}")));
            tasks.push(tokio::spawn(async move {
                for i in 0..250u64 {
                    store
                        .rate_acquire(&checks, 1_800_000_000_000_000 + (i * 100_000) as i64)
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        t.elapsed()
    });
    println!(
        "rate_acquire/s with 64 concurrent callers: {:.0}",
        16_000.0 / elapsed.as_secs_f64()
    );
    tokio.block_on(store.close());

    // The floor: the same row inserted with one plain statement per commit on a bare sqlx
    // connection to the same file (SQLite's own checkpointing left on, as a plain user would).
    let (r50, r99) = tokio.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("tw.db").display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("PRAGMA synchronous=NORMAL")
            .execute(&mut conn)
            .await
            .unwrap();
        let mut samples = Vec::with_capacity(n as usize);
        for i in 0..n {
            let r = record(9_000_000 + i);
            let t = Instant::now();
            sqlx::query(
                "INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, skill, user_id, \
                 arguments, decision, explanation, status, error_code, error_message, output, \
                 output_sha256, output_bytes, truncated, started_at, completed_at, duration_us, \
                 metadata, prev, hash) \
                 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?, zeroblob(32), zeroblob(32)) \
                 RETURNING id",
            )
            .bind(r.execution_id)
            .bind(r.trace_id)
            .bind(r.tool)
            .bind(r.agent_id)
            .bind(r.skill)
            .bind(r.user_id)
            .bind(r.arguments.to_string())
            .bind(r.decision)
            .bind(r.explanation.map(|e| e.as_str().to_owned()))
            .bind("success")
            .bind(r.error_code)
            .bind(r.error_message)
            .bind(r.output.map(|o| o.to_string()))
            .bind("0".repeat(64))
            .bind(10i64)
            .bind(false)
            .bind(r.started_at)
            .bind(r.completed_at)
            .bind(r.duration_us)
            .bind("{}")
            .fetch_one(&mut conn)
            .await
            .unwrap();
            samples.push(t.elapsed());
        }
        percentiles(samples)
    });
    println!(
        "the same row, one INSERT per commit on a bare sqlx connection: p50 {r50:?}  p99 {r99:?}"
    );
    tokio.block_on(team_store(n / 4));
}

/// The team store's figures (see the file's head).
async fn team_store(n: u64) {
    let cluster = tw_store::testing::PgCluster::start(&["fsync=on", "full_page_writes=on"])
        .expect("a PostgreSQL cluster");
    let url = cluster.fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str| {
        let mut o = StoreOptions::new(dir.path().join(name));
        o.url = Some(url.clone());
        Store::open(o)
    };
    let a = open("a.db").await.unwrap();
    let mut samples = Vec::with_capacity(n as usize);
    for i in 0..n {
        let t = Instant::now();
        a.append(record(20_000_000 + i)).await.unwrap();
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    println!("team store: audit append, one writer waiting alone: p50 {p50:?}  p99 {p99:?}");
    let b = open("b.db").await.unwrap();
    for (label, stores) in [
        ("one replica", vec![a.clone()]),
        ("two replicas", vec![a.clone(), b.clone()]),
    ] {
        let writers = 64u64;
        let per = 10_000 / writers;
        let base = 30_000_000 + stores.len() as u64 * 1_000_000;
        let t = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..writers {
            let store = stores[w as usize % stores.len()].clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..per {
                    store.append(record(base + w * per + i)).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        println!(
            "team store: audit appends/s with 64 concurrent writers, {label}: {:.0}",
            (per * writers) as f64 / t.elapsed().as_secs_f64()
        );
    }
    a.close().await;
    b.close().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut samples = Vec::with_capacity(n as usize);
    for i in 0..n {
        let r = record(40_000_000 + i);
        let t = Instant::now();
        sqlx::query(
            "INSERT INTO audit_log (chain, seq, execution_id, trace_id, tool, agent_id, arguments, \
             decision, explanation, status, output, output_sha256, output_bytes, truncated, \
             started_at, completed_at, duration_us, metadata, prev, hash) \
             VALUES ('floor', $1, $2, $3, $4, $5, $6, $7, $8, 'success', $9, $10, 10, 0, $11, $12, \
             $13, '{}', decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex')) \
             RETURNING id",
        )
        .bind(i as i64 + 1)
        .bind(r.execution_id)
        .bind(r.trace_id)
        .bind(r.tool)
        .bind(r.agent_id)
        .bind(r.arguments.to_string())
        .bind(r.decision)
        .bind(r.explanation.map(|e| e.as_str().to_owned()))
        .bind(r.output.map(|o| o.to_string()))
        .bind("0".repeat(64))
        .bind(r.started_at)
        .bind(r.completed_at)
        .bind(r.duration_us)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        samples.push(t.elapsed());
    }
    let (r50, r99) = percentiles(samples);
    println!(
        "team store: the same row, one INSERT per commit on a bare connection: p50 {r50:?}  p99 {r99:?}"
    );
}
