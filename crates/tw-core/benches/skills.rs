//! The skill layer at scale: one call judged against the envelope of a skill that names 1,000
//! tools (500 of its own, 500 inherited through a parent), the check every call made under a skill
//! pays; and building the map for 50 such skills. Besides criterion's timings it prints latency
//! percentiles of single checks, since issue 6 states its goal as a p99 (<= 10 us).
//! Capability-based resolution (`permissions` -> tools) is not built yet; this measures the
//! in-memory lookup it will share.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tw_core::policy::access::AccessLevel;
use tw_core::skill::{SkillManifest, SkillMap, parse_skill};
use tw_core::{ToolDefinition, ToolSpec};

const TOOLS: usize = 1_000;

fn skill(name: &str, tools: impl Iterator<Item = usize>, parents: &str) -> SkillManifest {
    let list: Vec<String> = tools.map(|i| format!("  - tool_{i:04}\n")).collect();
    let text = format!(
        "---\nname: {name}\ndescription: A skill.\ninherit_tools_from: {parents}\ntools:\n{}---\n",
        list.concat()
    );
    parse_skill(&text, Some(name)).manifest.unwrap()
}

fn skills(n: usize) -> Vec<SkillManifest> {
    let mut out = vec![skill("base", 0..TOOLS / 2, "[]")];
    for i in 0..n {
        out.push(skill(&format!("work-{i}"), TOOLS / 2..TOOLS, "[base]"));
    }
    out
}

fn tool(i: usize) -> ToolDefinition {
    serde_json::from_value::<ToolSpec>(json!({
        "name": format!("tool_{i:04}"),
        "description": "A tool.",
        "category": "system",
        "group": "g"
    }))
    .unwrap()
    .definition
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.50), at(0.99), at(0.999))
}

fn bench(c: &mut Criterion) {
    let map = SkillMap::new(&skills(1));
    assert_eq!(map.tools_of("work-0").unwrap().len(), TOOLS);
    let tools: Vec<ToolDefinition> = (0..TOOLS).map(tool).collect();
    let outside = tool(TOOLS + 1);

    let mut samples = Vec::with_capacity(100_000);
    for i in 0..100_000 {
        let t = &tools[(i * 7919) % TOOLS];
        let start = Instant::now();
        black_box(map.judge("work-0", black_box(t), AccessLevel::Standard));
        samples.push(start.elapsed());
    }
    let (p50, p99, p999) = percentiles(samples);
    println!(
        "skill envelope check, skill with {TOOLS} tools: p50 {p50:?}  p99 {p99:?}  p99.9 {p999:?}  (goal p99 <= 10us)"
    );

    c.bench_function("skill judge: a tool in the envelope (1,000 tools)", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 7919) % TOOLS;
            black_box(map.judge("work-0", &tools[i], AccessLevel::Standard))
        })
    });
    c.bench_function("skill judge: a tool outside it (1,000 tools)", |b| {
        b.iter(|| black_box(map.judge("work-0", &outside, AccessLevel::Standard)))
    });
    let many = skills(50);
    c.bench_function("skill map: build 51 skills of 500-1,000 tools", |b| {
        b.iter(|| black_box(SkillMap::new(&many)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
