//! `validate_content`'s check (`ContentProfile::check`) on the sizes that decide where it runs:
//! 16 KiB, the most `validate_content` checks inline on an async worker, and 1 MiB, the most
//! content a call may carry, which runs on the blocking pool. Each as text under every text rule
//! (length, ASCII, a forbidden and a required pattern), and as a JSON string parsed and
//! validated against a schema before the same text rules.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tw_core::ParameterSchema;
use tw_core::content::{ContentProfile, Encoding, Pattern, TextRules};

fn rules() -> TextRules {
    TextRules {
        min_length: Some(1),
        max_length: Some(2 << 20),
        encoding: Encoding::Ascii,
        forbid: vec![Pattern::new(r"(?i)password\s*=").unwrap()],
        require: vec![Pattern::new("^TICKET-[0-9]+").unwrap()],
    }
}

/// Ticket lines, `bytes` long.
fn text(bytes: usize) -> String {
    let line = "TICKET-1234 the build fails on the second run, see the log attached\n";
    line.repeat(bytes / line.len() + 1)[..bytes].to_owned()
}

/// A JSON array of ticket objects, about `bytes` long when serialized.
fn json_text(bytes: usize) -> String {
    let item =
        json!({"id": "TICKET-1234", "priority": 3, "summary": "the build fails on the second run"});
    let n = bytes / item.to_string().len();
    Value::Array(vec![item; n]).to_string()
}

fn schema() -> ParameterSchema {
    ParameterSchema::any(json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^TICKET-[0-9]+$"},
                "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                "summary": {"type": "string", "maxLength": 200}
            },
            "required": ["id", "priority"],
            "additionalProperties": false
        }
    }))
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let text_only = ContentProfile::new(None, rules()).unwrap();
    let with_schema = ContentProfile::new(
        Some(schema()),
        TextRules {
            require: Vec::new(),
            ..rules()
        },
    )
    .unwrap();
    let mut g = c.benchmark_group("content");
    g.measurement_time(Duration::from_secs(3));
    g.sample_size(20);
    for (label, bytes) in [("16KiB", 16 << 10), ("1MiB", 1 << 20)] {
        let t = Value::String(text(bytes));
        assert!(text_only.check(&t).valid);
        g.bench_function(format!("text_{label}"), |b| {
            b.iter(|| black_box(text_only.check(black_box(&t))))
        });
        let j = Value::String(json_text(bytes));
        assert!(with_schema.check(&j).valid);
        g.bench_function(format!("json_schema_{label}"), |b| {
            b.iter(|| black_box(with_schema.check(black_box(&j))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
