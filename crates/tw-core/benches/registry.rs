//! Hot paths of tw-core at scale: registry lookup and search with 10,000 tools, registration, and
//! argument validation through the validator cache. Besides criterion's timings it prints latency
//! percentiles of single lookups, since the goal is stated as a p99 (<= 1 us).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tw_core::{ToolDefinition, ToolRegistry, ToolSpec, ValidatorCache};

const TOOLS: usize = 10_000;

const CATEGORIES: [&str; 4] = ["file_system", "network", "database", "knowledge"];

fn spec(i: usize) -> Value {
    json!({
        "name": format!("tool_{i:05}"),
        "description": format!("Synthetic tool number {i} that reads records from source {}", i % 97),
        "category": CATEGORIES[i % 4],
        "group": format!("group{}", i % 50),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 4096},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                "mode": {"enum": ["fast", "full"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16}
            },
            "required": ["path"],
            "additionalProperties": false
        }
    })
}

fn definitions() -> Vec<ToolDefinition> {
    (0..TOOLS)
        .map(|i| {
            serde_json::from_value::<ToolSpec>(spec(i))
                .unwrap()
                .definition
        })
        .collect()
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.50), at(0.99), at(0.999))
}

fn bench(c: &mut Criterion) {
    let t = Instant::now();
    let defs = definitions();
    let parse = t.elapsed();
    let registry: ToolRegistry<()> = ToolRegistry::new();
    let t = Instant::now();
    for d in defs {
        registry.register(d, ()).unwrap();
    }
    let register = t.elapsed();
    println!(
        "registration of {TOOLS} tools: parse+check {:.1} ms ({:.1} us/tool), insert {:.2} ms",
        parse.as_secs_f64() * 1e3,
        parse.as_secs_f64() * 1e6 / TOOLS as f64,
        register.as_secs_f64() * 1e3
    );

    let names: Vec<String> = (0..TOOLS)
        .map(|i| format!("tool_{:05}", (i * 7919) % TOOLS))
        .collect();
    let mut group = c.benchmark_group("registry_10k");
    let mut i = 0usize;
    group.bench_function("lookup_hit", |b| {
        b.iter(|| {
            i = (i + 1) % TOOLS;
            black_box(registry.get(&names[i]))
        })
    });
    group.bench_function("lookup_miss", |b| {
        b.iter(|| black_box(registry.get("no_such_tool")))
    });
    group.bench_function("search_text", |b| {
        let filter = tw_core::ToolFilter {
            text: Some("source 42".into()),
            ..Default::default()
        };
        b.iter(|| black_box(registry.find(&filter)))
    });
    group.finish();

    // Percentiles of single lookups (timer overhead included, so these are upper bounds).
    let mut samples = Vec::with_capacity(1_000_000);
    for k in 0..1_000_000 {
        let name = &names[k % TOOLS];
        let t = Instant::now();
        black_box(registry.get(name));
        samples.push(t.elapsed());
    }
    let (p50, p99, p999) = percentiles(samples);
    println!(
        "registry lookup at {TOOLS} tools: p50 {p50:?}  p99 {p99:?}  p99.9 {p999:?}  (goal p99 <= 1us)"
    );

    let cache = ValidatorCache::default();
    let tool = registry.get("tool_00042").unwrap();
    let schema = &tool.definition.parameters;
    let valid = json!({"path": "src/main.rs", "limit": 20, "mode": "fast", "tags": ["a", "b"]});
    let invalid = json!({"path": "", "limit": 0, "mode": "slow", "tags": [1], "extra": true});
    let mut group = c.benchmark_group("validation");
    group.bench_function("valid_call_cached", |b| {
        b.iter(|| black_box(cache.validate(schema, black_box(&valid)).unwrap().is_ok()))
    });
    group.bench_function("invalid_call_all_violations", |b| {
        b.iter(|| {
            black_box(
                cache
                    .validate(schema, black_box(&invalid))
                    .unwrap()
                    .unwrap_err()
                    .len(),
            )
        })
    });
    group.bench_function("first_use_compile", |b| {
        b.iter_batched(
            || ParameterSchemaFresh::new(&tool.definition),
            |s| {
                black_box(
                    ValidatorCache::new(4)
                        .validate(&s.0, &valid)
                        .unwrap()
                        .is_ok(),
                )
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut samples = Vec::with_capacity(200_000);
    for _ in 0..200_000 {
        let t = Instant::now();
        black_box(cache.validate(schema, &valid).unwrap().is_ok());
        samples.push(t.elapsed());
    }
    let (p50, p99, _) = percentiles(samples);
    println!("argument validation (typical call, cached validator): p50 {p50:?}  p99 {p99:?}");
}

/// A copy of a schema with a new identity, so the cache has to compile it.
struct ParameterSchemaFresh(tw_core::ParameterSchema);

impl ParameterSchemaFresh {
    fn new(def: &ToolDefinition) -> Self {
        Self(tw_core::ParameterSchema::parameters(def.parameters.value().clone()).unwrap())
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
