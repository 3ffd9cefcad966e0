//! Tool chains on the real pipeline, audit on (a real SQLite file in WAL mode), no-op steps
//! (`echo`), measured from a task on a 2-worker runtime as a transport's handler would call:
//! - the engine's own cost per step, above the governed calls it makes (goal: p50 <= 10 us):
//!   a chain of one step costs F + (S + C) and one of ten steps in a row F + 10 (S + C), where
//!   C is a governed call, S the engine's per-step cost and F the run's fixed cost (its run
//!   record and its own audit row); so S = (ten - one) / 9 - C;
//! - a fan-out of ten independent steps with ten parallel slots against a one-step chain
//!   (goal <= 1.5x), twice: with no-op steps, which are all CPU, so that on this machine's two
//!   cores ten of them can never take the time of one; and with steps that wait, an `http_fetch`
//!   of a local page served after 20 ms (the kind of step a fan-out exists for: its slots are
//!   what lets the waits overlap).
//!
//! Machine noise matters (2 shared cores): compare the figures printed by one run.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tw_core::chain::{Chain, ChainBuilder, StepBuilder};
use tw_core::{Caller, ToolStatus};
use tw_runtime::chains::ChainEntry;
use tw_runtime::net::StaticResolver;
use tw_runtime::{Config, Runtime, RuntimeOptions};

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// The p50 of each of `calls` (a tool and its arguments), taken in turn `rounds` times so that
/// machine noise falls on all of them alike, from a task on the runtime as a transport's handler
/// would call. Every call must succeed.
fn in_turn<const K: usize>(
    tokio: &tokio::runtime::Runtime,
    rt: &Runtime,
    caller: &Caller,
    rounds: usize,
    calls: [(&'static str, Value); K],
) -> [Duration; K] {
    let (rt, caller) = (rt.clone(), caller.clone());
    let samples = tokio
        .block_on(tokio.spawn(async move {
            let mut s: [Vec<Duration>; K] = std::array::from_fn(|_| Vec::with_capacity(rounds));
            for _ in 0..rounds {
                for (k, (tool, args)) in calls.iter().enumerate() {
                    let call = rt.call(tool, args.clone(), caller.clone());
                    let t = Instant::now();
                    let r = rt.execute(call).await;
                    s[k].push(t.elapsed());
                    assert_eq!(r.status, ToolStatus::Success, "{tool}: {r:?}");
                }
            }
            s
        }))
        .unwrap();
    samples.map(p50)
}

fn echo(id: &str) -> StepBuilder {
    StepBuilder::new(id, "echo").arg("ping", 1)
}

/// How long the local page takes to answer.
const WAIT: Duration = Duration::from_millis(20);

/// A step that waits: a governed fetch of the page that answers after [`WAIT`].
fn fetch(id: &str, port: u16) -> StepBuilder {
    StepBuilder::new(id, "http_fetch").arg("url", format!("http://bench.test:{port}/slow"))
}

/// Answers every request of every connection with a small page, [`WAIT`] after it came.
async fn serve_slowly() -> u16 {
    let response = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
    common::serve(response.to_vec(), WAIT).await
}

fn chains(port: u16) -> Vec<ChainBuilder> {
    let mut seq = Chain::builder("seq10");
    let mut fan = Chain::builder("fan10").max_parallel(10);
    let mut fan_wait = Chain::builder("fan10_wait").max_parallel(10);
    for i in 0..10 {
        let id = format!("s{i}");
        let mut step = echo(&id);
        if i > 0 {
            step = step.depends_on(&format!("s{}", i - 1));
        }
        seq = seq.step(step);
        fan = fan.step(echo(&id));
        fan_wait = fan_wait.step(fetch(&id, port));
    }
    vec![
        Chain::builder("one").step(echo("s0")),
        seq,
        fan,
        Chain::builder("one_wait").step(fetch("s0", port)),
        fan_wait,
    ]
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let port = tokio.block_on(serve_slowly());
    // The built-in policy denies tools no rule names, chains included: allow them, and the
    // local page's made-up name (the gatekeeper refuses loopback addresses no rule allows).
    let config = Config::parse(
        "[policy]\ndefault = \"allow\"\n[[policy.rules]]\nname = \"bench\"\ntools = [\"http_fetch\"]\nallow_domains = [\"bench.test\"]\n",
        &dir.path().join("config.toml"),
        None,
    )
    .unwrap();
    let mut options = RuntimeOptions::new(dir.path().join("data"), vec![ws], config);
    options.resolver = Arc::new(StaticResolver::new([(
        "bench.test",
        vec![vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]],
    )]));
    let rt = tokio.block_on(Runtime::open(options)).unwrap();
    rt.chains().install(
        chains(port)
            .into_iter()
            .map(|b| ChainEntry {
                chain: b.build().unwrap(),
                origin: "bench".to_owned(),
                skill: None,
            })
            .collect(),
        Vec::new(),
    );
    let caller = Caller::agent("bench");
    for tool in [
        "echo",
        "chain__one",
        "chain__seq10",
        "chain__fan10",
        "chain__one_wait",
        "chain__fan10_wait",
    ] {
        let args = if tool == "echo" {
            json!({"ping": 1})
        } else {
            json!({})
        };
        let r = tokio.block_on(rt.execute(rt.call(tool, args, caller.clone())));
        assert_eq!(r.status, ToolStatus::Success, "{tool}: {r:?}");
    }

    let mut group = c.benchmark_group("chain");
    for tool in ["chain__one", "chain__fan10"] {
        group.bench_function(tool, |b| {
            b.to_async(&tokio).iter(|| async {
                black_box(rt.execute(rt.call(tool, json!({}), caller.clone())).await)
            })
        });
    }
    group.finish();

    let [call, one, seq, fan] = in_turn(
        &tokio,
        &rt,
        &caller,
        1_500,
        [
            ("echo", json!({"ping": 1})),
            ("chain__one", json!({})),
            ("chain__seq10", json!({})),
            ("chain__fan10", json!({})),
        ],
    );
    let per_step = (seq.saturating_sub(one)) / 9;
    let engine = per_step.saturating_sub(call);
    let fixed = one.saturating_sub(per_step);
    println!(
        "governed no-op call p50 {call:?}; chain of 1 step p50 {one:?}; 10 steps in a row p50 {seq:?}; 10 in parallel (10 slots) p50 {fan:?}"
    );
    println!(
        "engine cost per step above its governed call: p50 {engine:?} (goal <= 10us); fixed cost of a run (run record, its own row): {fixed:?}"
    );
    println!(
        "10-step fan-out / one step, no-op steps: {:.2}x (goal <= 1.5x; all CPU, so bounded by 2 cores: ten calls' work cannot take one call's time)",
        fan.as_secs_f64() / one.as_secs_f64()
    );

    // Steps that wait (fewer rounds: each takes 20 ms or more).
    let [one_wait, fan_wait] = in_turn(
        &tokio,
        &rt,
        &caller,
        100,
        [
            ("chain__one_wait", json!({})),
            ("chain__fan10_wait", json!({})),
        ],
    );
    println!(
        "steps that wait ({WAIT:?} each, an http_fetch): chain of 1 step p50 {one_wait:?}; 10 in parallel (10 slots) p50 {fan_wait:?}; fan-out / one step: {:.2}x (goal <= 1.5x; 10 in a row would be about {:.1}x)",
        fan_wait.as_secs_f64() / one_wait.as_secs_f64(),
        (10.0 * WAIT.as_secs_f64()) / one_wait.as_secs_f64()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
