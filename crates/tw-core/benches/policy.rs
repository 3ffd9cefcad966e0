//! Decision latency of the policy engine with 1,000 rules (goal: p99 <= 20 us), for a call that
//! passes every layer and for one the exec layer has to take apart. Rules: 400 tool selectors,
//! 200 mode selectors, 100 exec allowlist entries, 100 argument rules with paths, domains and
//! patterns, 100 access selectors and 100 rate limits.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tw_core::definition::{OperationalMode, RiskLevel, ToolCategory};
use tw_core::policy::{Policy, PolicyDoc, PolicyEnv, PolicySource, Request, evaluate};
use tw_core::{Caller, LicenseTier, ParameterSchema, ToolDefinition, ToolGroup, ToolName};

fn thousand_rules() -> String {
    let mut t = String::from("default = \"deny\"\nallow = [\"group:fs\", \"group:runtime\"");
    for i in 0..200 {
        t.push_str(&format!(", \"tool_{i}\", \"glob_{i}_*\""));
    }
    t.push_str("]\ndeny = [\"delete_*\"]\n");
    for mode in ["alert", "degraded", "lockdown", "recovery"] {
        t.push_str(&format!("[modes.{mode}]\nask = ["));
        for i in 0..50 {
            t.push_str(&format!("\"m{i}_*\", "));
        }
        t.push_str("\"risk:high\"]\n");
    }
    t.push_str("[exec]\nsecurity = \"allowlist\"\nask = \"on-miss\"\n");
    for i in 0..99 {
        t.push_str(&format!(
            "[[exec.allow]]\ncommand = \"/usr/bin/tool{i} --flag *\"\n"
        ));
    }
    t.push_str("[[exec.allow]]\ncommand = \"/usr/bin/git status **\"\n");
    for i in 0..100 {
        t.push_str(&format!(
            "[[rules]]\nname = \"r{i}\"\ntools = [\"group:fs\", \"group:runtime\"]\nforbid_paths = [\"/secret{i}/**\"]\nblock_domains = [\"evil{i}.example\"]\nblock_patterns = ['pattern{i}\\s+x']\n"
        ));
    }
    t.push_str("[access]\ntools = {");
    for i in 0..100 {
        t.push_str(&format!(
            "{}\"a{i}_*\" = \"elevated\"",
            if i > 0 { ", " } else { "" }
        ));
    }
    t.push_str("}\n");
    for i in 0..100 {
        t.push_str(&format!(
            "[[rate_limits]]\ntools = [\"rl{i}_*\"]\nper = \"caller\"\nper_minute = 100\n"
        ));
    }
    t
}

fn def(name: &str, group: &str, category: ToolCategory) -> ToolDefinition {
    let mut d = ToolDefinition::new(
        ToolName::new(name).unwrap(),
        "bench",
        category,
        ToolGroup::new(group).unwrap(),
        ParameterSchema::no_parameters(),
    );
    d.risk_level = RiskLevel::Low;
    d
}

fn bench(c: &mut Criterion) {
    let text = thousand_rules();
    let doc = PolicyDoc::parse(&text, "bench.toml").unwrap();
    let policy = Policy::compile(
        &[PolicySource {
            file: "bench.toml",
            text: &text,
            doc: &doc,
        }],
        PolicyEnv::lexical("/w", Some("/home/u")),
    )
    .unwrap();
    let read = def("read_file", "fs", ToolCategory::FileSystem);
    let run = def("run", "runtime", ToolCategory::CodeExecution);
    let read_args = json!({"path": "src/main.rs", "max_bytes": 4096});
    let run_args = json!({"command": "/usr/bin/git status --short && /usr/bin/tool7 --flag x"});
    let caller = Caller::agent("bench");
    let request = |tool, args| Request {
        tool,
        arguments: args,
        caller: &caller,
        tier: LicenseTier::Enterprise,
        mode: OperationalMode::Normal,
        custom_rank: None,
        argv: None,
        requires_confirmation: false,
        disabled: None,
        switched_off: None,
        cwd: None,
    };
    let cases = [
        ("read_file", request(&read, &read_args)),
        ("exec_line", request(&run, &run_args)),
    ];
    for (name, req) in &cases {
        assert_eq!(
            evaluate(&policy, req).decision.decision.to_string(),
            "allow",
            "{name}"
        );
    }
    let mut group = c.benchmark_group("policy_1000_rules");
    for (name, req) in &cases {
        group.bench_function(*name, |b| b.iter(|| black_box(evaluate(&policy, req))));
    }
    group.finish();
    for (name, req) in &cases {
        let mut samples: Vec<Duration> = (0..50_000)
            .map(|_| {
                let t = Instant::now();
                black_box(evaluate(&policy, req));
                t.elapsed()
            })
            .collect();
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        println!(
            "policy decision with 1,000 rules ({name}): p50 {:?}  p99 {:?}  (goal p99 <= 20us)",
            at(0.5),
            at(0.99)
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
