//! Chain files: good ones for every feature of the format (each read to the chain it means, and
//! written back by `to_yaml` and read again to the same chain), a corpus of malformed ones each
//! with exactly the diagnostics (line, severity, field, message) it must give, and the registry
//! checks against a small catalog whose tools are written inline.

use std::collections::HashMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::skill::Severity;

type Found = Vec<(usize, Severity, String, String)>;

fn found(diagnostics: &[crate::skill::Diagnostic]) -> Found {
    diagnostics
        .iter()
        .map(|d| {
            (
                d.line,
                d.severity,
                d.field.clone().unwrap_or_default(),
                d.message.clone(),
            )
        })
        .collect()
}

fn owned(want: &[(usize, Severity, &str, &str)]) -> Found {
    want.iter()
        .map(|(l, s, f, m)| (*l, *s, (*f).to_owned(), (*m).to_owned()))
        .collect()
}

/// Reads `text`, which must be clean, and checks that each chain written back with `to_yaml`
/// reads again to itself.
fn good(text: &str) -> Vec<ChainSource> {
    let p = parse_chain_file(text);
    assert_eq!(found(&p.diagnostics), vec![], "{text}");
    for c in &p.chains {
        round_trip(&c.chain);
    }
    p.chains
}

fn round_trip(chain: &Chain) {
    let yaml = chain.to_yaml();
    let again = parse_chain_file(&yaml);
    assert_eq!(found(&again.diagnostics), vec![], "{yaml}");
    let chains: Vec<&Chain> = again.chains.iter().map(|c| &c.chain).collect();
    assert_eq!(chains, vec![chain], "{yaml}");
}

/// Every feature of the format in one file.
const FULL: &str = r#"name: research
description: search, fetch the results, summarize
input:
  type: object
  required: [query]
  properties:
    query: {type: string}
    limit: {type: integer}
max_parallel: 2
timeout_ms: 60000
steps:
  - id: search
    tool: web_search
    arguments:
      query: $input.query
      limit: 3
  - id: fetch
    tool: http_fetch
    for_each: {items: $search.results, max_parallel: 3}
    arguments:
      url: $item.url
      note: "item ${index} of ${input.query}, costs $$5"
    on_error: {retry: {max: 2, backoff_ms: 50}}
    timeout_ms: 5000
  - id: summarize
    chain: summarize
    depends_on: [search]
    when: $steps.fetch.status == 'completed' && $input.limit > 1
    arguments:
      text: $fetch
    on_error: {default: {summary: none}}
  - id: log
    tool: write_file
    depends_on: summarize
    on_error: continue
    arguments:
      path: log.md
      content: ["${summarize.summary}", $steps.search.output.total]
output:
  summary: $summarize.summary
  sources: $search.results
"#;

fn full() -> Chain {
    Chain::builder("research")
        .description("search, fetch the results, summarize")
        .input(json!({
            "type": "object",
            "required": ["query"],
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}
        }))
        .max_parallel(2)
        .timeout_ms(60000)
        .step(
            StepBuilder::new("search", "web_search")
                .arg("query", "$input.query")
                .arg("limit", 3),
        )
        .step(
            StepBuilder::new("fetch", "http_fetch")
                .for_each("$search.results", 3)
                .arg("url", "$item.url")
                .arg("note", "item ${index} of ${input.query}, costs $$5")
                .on_error(OnError::Retry {
                    max: 2,
                    backoff_ms: 50,
                })
                .timeout_ms(5000),
        )
        .step(
            StepBuilder::chain("summarize", "summarize")
                .depends_on("search")
                .when("$steps.fetch.status == 'completed' && $input.limit > 1")
                .arg("text", "$fetch")
                .on_error(OnError::Default(json!({"summary": "none"}))),
        )
        .step(
            StepBuilder::new("log", "write_file")
                .depends_on("summarize")
                .on_error(OnError::Continue)
                .arg("path", "log.md")
                .arg(
                    "content",
                    json!(["${summarize.summary}", "$steps.search.output.total"]),
                ),
        )
        .output(json!({"summary": "$summarize.summary", "sources": "$search.results"}))
        .build()
        .unwrap()
}

#[test]
fn a_file_with_every_feature_reads_to_the_chain_the_builder_makes() {
    let chains = good(FULL);
    assert_eq!(chains.len(), 1);
    assert_eq!(chains[0].chain, full());
    assert_eq!(chains[0].field, "");
    // Lines: of a step, of a field, of an argument, of a nested value, and a parent's for what
    // has none.
    let lines: Vec<(&str, usize)> = [
        "",
        "/input",
        "/steps/0",
        "/steps/1/for_each/items",
        "/steps/1/arguments/note",
        "/steps/2/when",
        "/steps/3/arguments/content/1",
        "/steps/3/on_error/retry/max",
        "/output/sources",
    ]
    .into_iter()
    .map(|p| (p, chains[0].line_of(p)))
    .collect();
    assert_eq!(
        lines,
        vec![
            ("", 1),
            ("/input", 3),
            ("/steps/0", 12),
            ("/steps/1/for_each/items", 19),
            ("/steps/1/arguments/note", 22),
            ("/steps/2/when", 28),
            ("/steps/3/arguments/content/1", 38),
            ("/steps/3/on_error/retry/max", 35),
            ("/output/sources", 41),
        ]
    );
    assert_eq!(
        chains[0].field_of("/steps/3/arguments/content/1"),
        "steps[3].arguments.content[1]"
    );
}

/// Files in the seed's shapes and other short forms, each beside the canonical file it means.
const SAME: &[(&str, &str, &str)] = &[
    (
        "bare tool names run in sequence",
        "name: c\nsteps: [web_search, http_fetch, write_file]\n",
        "name: c\nsteps:\n  - {id: step1, tool: web_search}\n  - {id: step2, tool: http_fetch, depends_on: [step1]}\n  - {id: step3, tool: write_file, depends_on: [step2]}\n",
    ),
    (
        "a step without id is stepN by position; only bare names wait for each other",
        "name: c\nsteps:\n  - web_search\n  - tool: http_fetch\n  - write_file\n",
        "name: c\nsteps:\n  - {id: step1, tool: web_search}\n  - {id: step2, tool: http_fetch}\n  - {id: step3, tool: write_file, depends_on: [step1]}\n",
    ),
    (
        "the seed's $ID shorthand",
        "name: c\nsteps:\n  - web_search\n  - tool: http_fetch\n    arguments:\n      url: $step1.results[0].url\n      text: $step1.output.text\n",
        "name: c\nsteps:\n  - {id: step1, tool: web_search}\n  - tool: http_fetch\n    id: step2\n    arguments:\n      url: $steps.step1.output.results[0].url\n      text: $steps.step1.output.text\n",
    ),
    (
        "max_retries, on_error: retry, a retry count",
        "name: c\nsteps:\n  - {id: a, tool: t, max_retries: 3}\n  - {id: b, tool: t, on_error: retry}\n  - {id: d, tool: t, on_error: {retry: 4}}\n  - {id: e, tool: t, on_error: {retry: {backoff_ms: 7}}}\n  - {id: f, tool: t, max_retries: 0}\n",
        "name: c\nsteps:\n  - {id: a, tool: t, on_error: {retry: {max: 3, backoff_ms: 200}}}\n  - {id: b, tool: t, on_error: {retry: {max: 1, backoff_ms: 200}}}\n  - {id: d, tool: t, on_error: {retry: {max: 4, backoff_ms: 200}}}\n  - {id: e, tool: t, on_error: {retry: {max: 1, backoff_ms: 7}}}\n  - {id: f, tool: t, on_error: abort}\n",
    ),
    (
        "for_each as a reference, depends_on as one id, when as a boolean",
        "name: c\nsteps:\n  - {id: a, tool: t}\n  - {id: b, tool: t, for_each: $a.items, depends_on: a, when: true}\n",
        "name: c\nsteps:\n  - {id: a, tool: t}\n  - {id: b, tool: t, for_each: {items: $steps.a.output.items, max_parallel: 4}, depends_on: [a], when: 'true'}\n",
    ),
    (
        "input as a simple parameter list, or absent",
        "name: c\ninput:\n  - {name: q, type: string, required: true}\n  - {name: n, type: integer, default: 3}\nsteps: [t]\n",
        "name: c\ninput:\n  type: object\n  properties:\n    q: {type: string}\n    n: {type: integer, default: 3}\n  required: [q]\n  additionalProperties: false\nsteps: [t]\n",
    ),
    (
        "no input is an empty object schema; null arguments are none",
        "name: c\nsteps:\n  - {id: a, tool: t, arguments: }\n",
        "name: c\ninput: {type: object, properties: {}}\nsteps:\n  - {id: a, tool: t, arguments: {}}\n",
    ),
];

#[test]
fn short_forms_read_to_the_chain_their_canonical_file_does() {
    for (what, short, canonical) in SAME {
        let a = good(short);
        let b = good(canonical);
        let a: Vec<&Chain> = a.iter().map(|c| &c.chain).collect();
        let b: Vec<&Chain> = b.iter().map(|c| &c.chain).collect();
        assert_eq!(a, b, "{what}");
    }
}

#[test]
fn a_file_holds_one_chain_a_list_or_chains_and_lines_follow_each_shape() {
    let list = good("- name: a\n  steps: [t]\n- name: b\n  steps:\n    - id: x\n      tool: t\n");
    let names: Vec<(&str, &str, usize)> = list
        .iter()
        .map(|c| {
            (
                c.chain.name.as_str(),
                c.field.as_str(),
                c.line_of("/steps/0"),
            )
        })
        .collect();
    assert_eq!(names, vec![("a", "[0]", 2), ("b", "[1]", 5)]);
    let under = good("chains:\n  - name: a\n    steps: [t]\n");
    assert_eq!(under[0].field, "chains[0]");
    // A chain written as its list of steps: its lines still answer `/steps/N`.
    let map = good("chains:\n  a: [t, u]\n  b:\n    steps: [t]\n");
    let names: Vec<(&str, &str, usize, usize)> = map
        .iter()
        .map(|c| {
            (
                c.chain.name.as_str(),
                c.field.as_str(),
                c.line_of("/steps/1"),
                c.line_of(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![("a", "chains.a", 2, 2), ("b", "chains.b", 4, 3)]
    );
}

#[test]
fn to_yaml_quotes_every_string_that_would_read_as_something_else() {
    let tricky = [
        "",
        "~",
        "null",
        "Null",
        "NULL",
        "true",
        "True",
        "FALSE",
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "12",
        "-12",
        "+12",
        "012",
        "0x1F",
        "0o17",
        "0b11",
        "1.5",
        ".5",
        "1.",
        "-1.5e3",
        "1e3",
        "1E3",
        "+0.5e-3",
        ".inf",
        "-.Inf",
        "+.INF",
        ".nan",
        ".NaN",
        "NaN",
        "1_000",
        "- x",
        "? x",
        ": x",
        "a: b",
        "a #b",
        "#x",
        "*x",
        "&x",
        "!x",
        "%x",
        "@x",
        "`x",
        "{x",
        "[x",
        "'x",
        "\"x",
        "|",
        ">",
        " lead",
        "trail ",
        "line\nline",
        "\t",
        "\u{0}",
        "\u{85}",
        "\u{2028}",
        "é",
        "---",
        "...",
        "=",
        "<<",
        "$$",
    ];
    let mut args = serde_json::Map::new();
    for (i, s) in tricky.iter().enumerate() {
        args.insert(format!("a{i}"), json!(s));
        args.insert((*s).to_owned(), json!(i));
    }
    let chain = Chain::builder("c")
        .step(StepBuilder::new("a", "t").arg("x", Value::Object(args)))
        .output(json!({"n": [1.5, -0.0, 1e300, 18_446_744_073_709_551_615u64, i64::MIN]}))
        .build()
        .unwrap();
    round_trip(&chain);
}

type Bad = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [(usize, Severity, &'static str, &'static str)],
);

/// Malformed files: (what, text, the chains still read, every diagnostic).
const BAD: &[Bad] = &[
    (
        "yaml syntax",
        "name: c\nsteps: [a\n",
        &[],
        &[(
            2,
            Severity::Error,
            "",
            "not valid YAML: while parsing a flow sequence, expected ',' or ']'",
        )],
    ),
    (
        "anchor",
        "name: &n c\nsteps: [t]\n",
        &[],
        &[(
            1,
            Severity::Error,
            "",
            "anchors (`&name`) are not supported: write the value out",
        )],
    ),
    (
        "alias",
        "name: c\ndescription: &d x\nsteps:\n  - id: a\n    tool: t\n    arguments: {x: *d}\n",
        &[],
        &[
            (
                2,
                Severity::Error,
                "",
                "anchors (`&name`) are not supported: write the value out",
            ),
            (
                6,
                Severity::Error,
                "",
                "aliases (`*name`) are not supported: write the value out",
            ),
        ],
    ),
    (
        "duplicate key",
        "name: c\nsteps: [t]\nname: d\n",
        &[],
        &[(3, Severity::Error, "", "the key \"name\" is written twice")],
    ),
    (
        "infinity",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments: {x: .inf}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "",
            ".inf is not a number JSON can hold; quote it for the text",
        )],
    ),
    (
        "second document",
        "name: c\nsteps: [t]\n---\nname: d\nsteps: [t]\n",
        &[],
        &[(
            3,
            Severity::Error,
            "",
            "a second YAML document starts here; a file holds one (a list holds several chains)",
        )],
    ),
    (
        "non-string key",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments: {1: x}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "",
            "mapping keys must be strings: \"1\" reads as a number; quote it",
        )],
    ),
    (
        "empty file",
        "# nothing\n",
        &[],
        &[(1, Severity::Error, "", "the file holds no chain")],
    ),
    (
        "a scalar file",
        "just text\n",
        &[],
        &[(
            1,
            Severity::Error,
            "",
            "a chain file holds a chain (a mapping), a list of chains, or `chains:` with a list",
        )],
    ),
    (
        "missing name",
        "description: d\nsteps: [t]\n",
        &[],
        &[(1, Severity::Error, "", "a chain needs a `name`")],
    ),
    (
        "bad chain name",
        "name: Research\nsteps: [t]\n",
        &[],
        &[(
            1,
            Severity::Error,
            "name",
            "\"Research\" is not a chain name: a lowercase letter first, then lowercase letters, digits and '_', at most 57",
        )],
    ),
    (
        "name not a string",
        "name: [c]\nsteps: [t]\n",
        &[],
        &[(1, Severity::Error, "name", "must be a string")],
    ),
    (
        "description not a string",
        "name: c\ndescription: {a: 1}\nsteps: [t]\n",
        &[],
        &[(2, Severity::Error, "description", "must be a string")],
    ),
    (
        "no steps",
        "name: c\ndescription: d\n",
        &[],
        &[(1, Severity::Error, "steps", "a chain has at least one step")],
    ),
    (
        "empty steps",
        "name: c\nsteps: []\n",
        &[],
        &[(2, Severity::Error, "steps", "a chain has at least one step")],
    ),
    (
        "steps not a list",
        "name: c\nsteps: web_search\n",
        &[],
        &[(2, Severity::Error, "steps", "must be a list of steps")],
    ),
    (
        "step a number",
        "name: c\nsteps:\n  - t\n  - 7\n",
        &[],
        &[(
            4,
            Severity::Error,
            "steps[1]",
            "a step is a tool name, or a mapping with `id` and `tool` or `chain`",
        )],
    ),
    (
        "step calls nothing",
        "name: c\nsteps:\n  - id: a\n    arguments: {x: 1}\n",
        &[],
        &[(
            3,
            Severity::Error,
            "steps[0]",
            "a step needs a `tool` (or a `chain`) to call",
        )],
    ),
    (
        "step calls both",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    chain: d\n",
        &[],
        &[(
            3,
            Severity::Error,
            "steps[0]",
            "a step calls a `tool` or a `chain`, not both",
        )],
    ),
    (
        "bad tool name",
        "name: c\nsteps:\n  - id: a\n    tool: Web Search\n",
        &[],
        &[(
            4,
            Severity::Error,
            "steps[0].tool",
            "invalid tool name \"Web Search\": must start with a lowercase letter",
        )],
    ),
    (
        "bad called chain name",
        "name: c\nsteps:\n  - id: a\n    chain: Other-Chain\n",
        &[],
        &[(
            4,
            Severity::Error,
            "steps[0].chain",
            "\"Other-Chain\" is not a chain name: a lowercase letter first, then lowercase letters, digits and '_', at most 57",
        )],
    ),
    (
        "calls itself",
        "name: c\nsteps:\n  - id: a\n    chain: c\n",
        &[],
        &[(
            4,
            Severity::Error,
            "steps[0].chain",
            "a chain cannot call itself",
        )],
    ),
    (
        "duplicate step id",
        "name: c\nsteps:\n  - {id: a, tool: t}\n  - {id: a, tool: u}\n",
        &[],
        &[(
            4,
            Severity::Error,
            "steps[1].id",
            "step id \"a\" is used twice",
        )],
    ),
    (
        "reserved step id",
        "name: c\nsteps:\n  - id: input\n    tool: t\n",
        &[],
        &[(
            3,
            Severity::Error,
            "steps[0].id",
            "\"input\" is not a step id: it is a word references start with",
        )],
    ),
    (
        "id not a string",
        "name: c\nsteps:\n  - id: [a]\n    tool: t\n",
        &[],
        &[(3, Severity::Error, "steps[0].id", "must be a string")],
    ),
    (
        "depends on nothing",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    depends_on: [zz]\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].depends_on",
            "no step has id \"zz\"",
        )],
    ),
    (
        "depends_on a number",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    depends_on: 5\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].depends_on",
            "must be a step id or a list of step ids",
        )],
    ),
    (
        "arguments a list",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments: [1, 2]\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].arguments",
            "must be a mapping of argument names to values",
        )],
    ),
    (
        "unclosed interpolation",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments:\n      q: x\n      text: \"see ${input.q\"\n",
        &[],
        &[(
            7,
            Severity::Error,
            "steps[0].arguments.text",
            "${input.q: an unclosed '${': close it with '}' or write '$$' for a '$'",
        )],
    ),
    (
        "reference to no step",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments:\n      url: $search.results[0].url\n",
        &[],
        &[(
            6,
            Severity::Error,
            "steps[0].arguments.url",
            "$steps.search.output.results[0].url: no step has id \"search\"",
        )],
    ),
    (
        "reference to its own output",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments:\n      x: $steps.a.output\n",
        &[],
        &[(
            6,
            Severity::Error,
            "steps[0].arguments.x",
            "$steps.a.output: a step cannot use its own output",
        )],
    ),
    (
        "item outside for_each",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments:\n      x: $item\n",
        &[],
        &[(
            6,
            Severity::Error,
            "steps[0].arguments.x",
            "$item: `$item` and `$index` exist only in a step with `for_each`",
        )],
    ),
    (
        "cycle",
        "name: c\nsteps:\n  - {id: a, tool: t, depends_on: b}\n  - {id: b, tool: t, arguments: {x: $a}}\n",
        &[],
        &[(
            3,
            Severity::Error,
            "steps[0]",
            "steps wait for each other in a cycle: a, b",
        )],
    ),
    (
        "bad when",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    when: $input.n >\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].when",
            "not a valid expression: at byte 10: a value or reference is missing",
        )],
    ),
    (
        "when a number",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    when: 3\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].when",
            "must be an expression (a string)",
        )],
    ),
    (
        "for_each without items",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    for_each: {max_parallel: 2}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].for_each",
            "names its items: a reference, or {items, max_parallel}",
        )],
    ),
    (
        "for_each empty",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    for_each:\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].for_each",
            "names its items: a reference, or {items, max_parallel}",
        )],
    ),
    (
        "for_each max_parallel 0",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    for_each: {items: $input.list, max_parallel: 0}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].for_each.max_parallel",
            "must be 1 to 64",
        )],
    ),
    (
        "for_each over its item",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    for_each: $item.list\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].for_each.items",
            "$item.list: the items cannot name the item itself",
        )],
    ),
    (
        "on_error unknown",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    on_error: ignore\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].on_error",
            "must be abort, continue, retry, {retry: {max, backoff_ms}} or {default: VALUE}",
        )],
    ),
    (
        "retry max too high",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    on_error: {retry: {max: 11}}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].on_error.retry.max",
            "must be 1 to 10",
        )],
    ),
    (
        "retry max a string",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    on_error:\n      retry: {max: many, backoff_ms: 10}\n",
        &[],
        &[(
            6,
            Severity::Error,
            "steps[0].on_error.retry.max",
            "must be a whole number",
        )],
    ),
    (
        "on_error two forms",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    on_error: {retry: 2, default: 1}\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].on_error",
            "must be abort, continue, retry, {retry: {max, backoff_ms}} or {default: VALUE}",
        )],
    ),
    (
        "max_retries and on_error",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    on_error: continue\n    max_retries: 2\n",
        &[],
        &[(
            6,
            Severity::Error,
            "steps[0].max_retries",
            "write `max_retries` or `on_error`, not both (`on_error: {retry: {max: N}}`)",
        )],
    ),
    (
        "max_retries too high",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    max_retries: 20\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].max_retries",
            "must be 0 to 10",
        )],
    ),
    (
        "step timeout zero",
        "name: c\nsteps:\n  - id: a\n    tool: t\n    timeout_ms: 0\n",
        &[],
        &[(
            5,
            Severity::Error,
            "steps[0].timeout_ms",
            "must be a whole number above 0",
        )],
    ),
    (
        "chain timeout a string",
        "name: c\ntimeout_ms: soon\nsteps: [t]\n",
        &[],
        &[(
            2,
            Severity::Error,
            "timeout_ms",
            "must be a whole number above 0",
        )],
    ),
    (
        "max_parallel too high",
        "name: c\nmax_parallel: 100\nsteps: [t]\n",
        &[],
        &[(2, Severity::Error, "max_parallel", "must be 1 to 64")],
    ),
    (
        "max_parallel past u32",
        "name: c\nmax_parallel: 99999999999\nsteps: [t]\n",
        &[],
        &[(2, Severity::Error, "max_parallel", "must be 1 to 64")],
    ),
    (
        "input not an object schema",
        "name: c\ninput: {type: string}\nsteps: [t]\n",
        &[],
        &[(
            2,
            Severity::Error,
            "input",
            "the input schema describes an object (`type: object`)",
        )],
    ),
    (
        "input not a schema",
        "name: c\ninput: query\nsteps: [t]\n",
        &[],
        &[(
            2,
            Severity::Error,
            "input",
            "must be a JSON Schema (a mapping) or a list of parameters",
        )],
    ),
    (
        "input invalid schema",
        "name: c\ninput:\n  type: object\n  properties:\n    q: {type: 5}\nsteps: [t]\n",
        &[],
        &[(
            2,
            Severity::Error,
            "input",
            "invalid JSON Schema: at /properties/q/type: 5 is not valid under any of the schemas listed in the 'anyOf' keyword",
        )],
    ),
    (
        "input bad parameter list",
        "name: c\ninput:\n  - {name: q, type: string}\n  - {name: n, type: text}\nsteps: [t]\n",
        &[],
        &[(
            4,
            Severity::Error,
            "input[1]",
            "unknown variant `text`, expected one of `string`, `integer`, `number`, `boolean`, `array`, `object`",
        )],
    ),
    (
        "output bad reference",
        "name: c\nsteps: [t]\noutput:\n  a: $steps.zz.output\n",
        &[],
        &[(
            4,
            Severity::Error,
            "output.a",
            "$steps.zz.output: no step has id \"zz\"",
        )],
    ),
    (
        "output item",
        "name: c\nsteps: [t]\noutput: {a: [$index]}\n",
        &[],
        &[(
            3,
            Severity::Error,
            "output.a[0]",
            "$index: `$item` and `$index` exist only in a step with `for_each`",
        )],
    ),
    (
        "unknown fields warn",
        "name: c\ncolour: blue\nsteps:\n  - id: a\n    tool: t\n    retries: 3\n    for_each: {items: $input.l, parallel: 2}\n",
        &["c"],
        &[
            (
                2,
                Severity::Warning,
                "colour",
                "unknown field \"colour\" is ignored",
            ),
            (
                6,
                Severity::Warning,
                "steps[0].retries",
                "unknown field \"retries\" is ignored",
            ),
            (
                7,
                Severity::Warning,
                "steps[0].for_each.parallel",
                "unknown field \"parallel\" is ignored",
            ),
        ],
    ),
    (
        "list with a bad chain",
        "- name: good\n  steps: [t]\n- name: bad\n  steps: []\n- name: also_good\n  steps: [t]\n",
        &["good", "also_good"],
        &[(
            4,
            Severity::Error,
            "[1].steps",
            "a chain has at least one step",
        )],
    ),
    (
        "duplicate chain names",
        "- name: c\n  steps: [t]\n- name: c\n  steps: [u]\n",
        &["c"],
        &[(
            3,
            Severity::Error,
            "[1].name",
            "the chain name \"c\" is used twice",
        )],
    ),
    (
        "unnamed chain in a list",
        "- steps: [t]\n",
        &[],
        &[(1, Severity::Error, "[0]", "a chain needs a `name`")],
    ),
    (
        "chains not a list",
        "chains: nope\n",
        &[],
        &[(
            1,
            Severity::Error,
            "chains",
            "must be a list of chains, or a mapping from chain names to chains",
        )],
    ),
    (
        "chains map name disagrees",
        "chains:\n  a:\n    name: b\n    steps: [t]\nversion: 2\n",
        &[],
        &[
            (
                3,
                Severity::Error,
                "chains.a.name",
                "the chain is under the key \"a\" but its `name` is \"b\"",
            ),
            (
                5,
                Severity::Warning,
                "version",
                "unknown field \"version\" is ignored",
            ),
        ],
    ),
];

#[test]
fn every_malformed_file_gets_exactly_its_diagnostics() {
    assert!(BAD.len() >= 50);
    for (what, text, chains, want) in BAD {
        let p = parse_chain_file(text);
        assert_eq!(found(&p.diagnostics), owned(want), "{what}");
        let names: Vec<&str> = p.chains.iter().map(|c| c.chain.name.as_str()).collect();
        assert_eq!(&names, chains, "{what}");
        assert_eq!(
            p.has_errors(),
            want.iter().any(|d| d.1 == Severity::Error),
            "{what}"
        );
    }
    let deep = format!(
        "name: c\nsteps:\n  - id: a\n    tool: t\n    arguments: {{x: {}1{}}}\n",
        "[".repeat(70),
        "]".repeat(70)
    );
    assert_eq!(
        found(&parse_chain_file(&deep).diagnostics),
        owned(&[(5, Severity::Error, "", "nested more than 64 deep")])
    );
}

#[test]
fn arbitrary_text_never_panics_and_what_parses_round_trips() {
    // A small deterministic fuzz (the real one is fuzz/fuzz_targets/chain.rs): every prefix of
    // the full file, and noise spliced into it.
    for end in 0..=FULL.len() {
        if FULL.is_char_boundary(end) {
            for c in parse_chain_file(&FULL[..end]).chains {
                round_trip(&c.chain);
            }
        }
    }
    let mut seed: u32 = 11;
    for _ in 0..300 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let at = (seed as usize >> 3) % FULL.len();
        let noise = [
            "\u{0}", ":", "- ", "[", "{", "\n---\n", "\t", "'", "&a *a", "$", "${", "$$", "\r",
            "!!str ", "? ",
        ][(seed >> 16) as usize % 15];
        let mut text = FULL.to_owned();
        let at = (0..=at)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.insert_str(at, noise);
        let p = parse_chain_file(&text);
        let last = text.lines().count().max(1);
        assert!(p.diagnostics.iter().all(|d| (1..=last).contains(&d.line)));
        for c in p.chains {
            round_trip(&c.chain);
        }
    }
}

/// A catalog written inline: tools, chains, and what the skill leaves out.
struct Catalog {
    tools: HashMap<&'static str, ToolInfo>,
    chains: HashMap<&'static str, ChainInfo>,
    outside: HashMap<&'static str, &'static str>,
}

impl ChainCatalog for Catalog {
    fn tool(&self, name: &str) -> Option<ToolInfo> {
        self.tools.get(name).cloned()
    }
    fn chain(&self, name: &str) -> Option<ChainInfo> {
        self.chains.get(name).cloned()
    }
    fn outside_skill(&self, tool: &str) -> Option<String> {
        self.outside.get(tool).map(|s| (*s).to_owned())
    }
}

fn catalog() -> Catalog {
    let tool = |parameters: Value, output: Option<Value>| ToolInfo {
        parameters,
        output,
        quarantined: false,
    };
    let mut tools = HashMap::new();
    tools.insert(
        "web_search",
        tool(
            json!({
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
                "required": ["query"],
                "additionalProperties": false
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"url": {"type": "string"}, "title": {"type": "string"}}
                    }},
                    "total": {"type": "integer"}
                }
            })),
        ),
    );
    tools.insert(
        "http_fetch",
        tool(
            json!({
                "type": "object",
                "properties": {"url": {"type": "string"}, "as": {"enum": ["markdown", "html"]}},
                "required": ["url"]
            }),
            Some(json!({
                "type": "object",
                "properties": {"status": {"type": "integer"}, "content": {"type": "string"}},
                "additionalProperties": true
            })),
        ),
    );
    tools.insert(
        "write_file",
        tool(
            json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": ["string", "null"]}},
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            None,
        ),
    );
    tools.insert("any_tool", tool(json!({"type": "object"}), None));
    tools.insert(
        "held_tool",
        ToolInfo {
            quarantined: true,
            ..tool(json!({"type": "object"}), None)
        },
    );
    tools.insert("admin_tool", tool(json!({"type": "object"}), None));
    let mut chains = HashMap::new();
    chains.insert(
        "summarize",
        ChainInfo {
            input: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            }),
            output: Some(json!({"type": "object", "properties": {"summary": {"type": "string"}}})),
        },
    );
    let mut outside = HashMap::new();
    outside.insert(
        "admin_tool",
        "its access level admin is above the skill's standard",
    );
    Catalog {
        tools,
        chains,
        outside,
    }
}

/// Steps for the check cases, written under a chain with `$input.query` (a string) and
/// `$input.n` (an integer).
const HEAD: &str = "name: c\ninput:\n  type: object\n  properties:\n    query: {type: string}\n    n: {type: integer}\nsteps:\n  - id: search\n    tool: web_search\n    arguments: {query: $input.query}\n";

type CheckCase = (
    &'static str,
    &'static str,
    &'static [(usize, &'static str, &'static str)],
);

/// (what, the steps after `search` (from line 11), every diagnostic as (line, field, message)).
const CHECKS: &[CheckCase] = &[
    (
        "a good chain",
        "  - id: fetch\n    tool: http_fetch\n    arguments: {url: \"$search.results[0].url\", as: markdown}\n  - id: save\n    tool: write_file\n    arguments: {path: out.md, content: \"# ${input.query}\\n${fetch.content}\"}\noutput: {page: $fetch.content, n: $search.total}\n",
        &[],
    ),
    (
        "unknown tool and chain",
        "  - {id: a, tool: no_such_tool}\n  - {id: b, chain: no_such_chain}\n",
        &[
            (
                11,
                "steps[1].tool",
                "no tool \"no_such_tool\" is registered",
            ),
            (
                12,
                "steps[2].chain",
                "no chain \"no_such_chain\" is registered",
            ),
        ],
    ),
    (
        "quarantined, and outside the skill",
        "  - {id: a, tool: held_tool}\n  - admin_tool\n",
        &[
            (11, "steps[1].tool", "the tool \"held_tool\" is quarantined"),
            (
                12,
                "steps[2].tool",
                "the tool \"admin_tool\" is outside the skill: its access level admin is above the skill's standard",
            ),
        ],
    ),
    (
        "an argument the tool does not have, and a required one missing",
        "  - id: again\n    tool: web_search\n    arguments:\n      q: $input.query\n",
        &[
            (
                13,
                "steps[1].arguments",
                "the required parameter \"query\" of tool \"web_search\" is not given",
            ),
            (
                14,
                "steps[1].arguments.q",
                "tool \"web_search\" has no parameter \"q\", it has: query, limit",
            ),
        ],
    ),
    (
        "fields that do not exist",
        "  - id: fetch\n    tool: http_fetch\n    arguments:\n      url: $search.reslts[0].url\n      as: $input.format\n  - id: save\n    tool: write_file\n    arguments: {path: \"$search.results[0].url.host\", content: $fetch.anything.goes}\n",
        &[
            (
                14,
                "steps[1].arguments.url",
                "$steps.search.output.reslts[0].url: $steps.search.output has no field \"reslts\", it has: results, total",
            ),
            (
                15,
                "steps[1].arguments.as",
                "$input.format: $input has no field \"format\", it has: query, n",
            ),
            (
                18,
                "steps[2].arguments.path",
                "$steps.search.output.results[0].url.host: $steps.search.output.results[0].url is string, not an object",
            ),
        ],
    ),
    (
        "types that cannot fit",
        "  - id: more\n    tool: web_search\n    arguments:\n      query: $search.total\n      limit: $input.query\n  - id: fetch\n    tool: http_fetch\n    arguments: {url: \"${search.total}\", as: $input.n}\n  - id: again\n    tool: web_search\n    arguments: {query: $index, limit: \"n=${input.n}\"}\n    for_each: $search.results\n  - id: lit\n    tool: web_search\n    arguments: {query: q, limit: five}\n",
        &[
            (
                14,
                "steps[1].arguments.query",
                "$steps.search.output.total is integer, but \"query\" of tool \"web_search\" takes string",
            ),
            (
                15,
                "steps[1].arguments.limit",
                "$input.query is string, but \"limit\" of tool \"web_search\" takes integer",
            ),
            (
                18,
                "steps[2].arguments.as",
                "$input.n is integer, but \"as\" of tool \"http_fetch\" takes string",
            ),
            (
                21,
                "steps[3].arguments.query",
                "$index is integer, but \"query\" of tool \"web_search\" takes string",
            ),
            (
                21,
                "steps[3].arguments.limit",
                "a text with $input.n in it is a string, but \"limit\" of tool \"web_search\" takes integer",
            ),
            (
                25,
                "steps[4].arguments.limit",
                "\"limit\" of tool \"web_search\" takes integer, not string",
            ),
        ],
    ),
    (
        "for_each over what is not a list, and $item's fields",
        "  - id: a\n    tool: web_search\n    for_each: $input.query\n    arguments: {query: q}\n  - id: b\n    tool: http_fetch\n    for_each: {items: $search.results}\n    arguments: {url: $item.url, as: $item.nope}\n  - id: d\n    tool: any_tool\n    for_each: \"${input.query}\"\n",
        &[
            (
                13,
                "steps[1].for_each.items",
                "`for_each` runs over a list, not $input.query, which is string",
            ),
            (
                18,
                "steps[2].arguments.as",
                "$item.nope: $item has no field \"nope\", it has: url, title",
            ),
            (
                21,
                "steps[3].for_each.items",
                "`for_each` runs over a list, not a text (a string)",
            ),
        ],
    ),
    (
        "when and output references get the field check",
        "  - id: fetch\n    tool: http_fetch\n    when: $search.totl > 0 && $steps.search.status == 'completed'\n    arguments: {url: x}\noutput: {a: $fetch.content, b: \"$search.results[0].titel\"}\n",
        &[
            (
                13,
                "steps[1].when",
                "$steps.search.output.totl: $steps.search.output has no field \"totl\", it has: results, total",
            ),
            (
                15,
                "output.b",
                "$steps.search.output.results[0].titel: $steps.search.output.results[0] has no field \"titel\", it has: url, title",
            ),
        ],
    ),
    (
        "a chain step: its input and its output",
        "  - id: sum\n    chain: summarize\n    arguments: {text: $search.total}\n  - id: sum2\n    chain: summarize\n  - id: use\n    tool: web_search\n    arguments: {query: $sum.summary, limit: $sum.words}\n",
        &[
            (
                13,
                "steps[1].arguments.text",
                "$steps.search.output.total is integer, but \"text\" of chain \"summarize\" takes string",
            ),
            (
                14,
                "steps[2].arguments",
                "the required parameter \"text\" of chain \"summarize\" is not given",
            ),
            (
                18,
                "steps[3].arguments.limit",
                "$steps.sum.output.words: $steps.sum.output has no field \"words\", it has: summary",
            ),
        ],
    ),
    (
        "a status is a string; an unknown output lets anything through",
        "  - id: w\n    tool: any_tool\n  - id: x\n    tool: web_search\n    arguments: {query: \"$w.deep.down[3].x\", limit: $steps.w.status}\n",
        &[(
            15,
            "steps[2].arguments.limit",
            "$steps.w.status is string, but \"limit\" of tool \"web_search\" takes integer",
        )],
    ),
];

#[test]
fn registry_checks_report_each_problem_on_its_line() {
    let catalog = catalog();
    for (what, steps, want) in CHECKS {
        let text = format!("{HEAD}{steps}");
        let p = parse_chain_file(&text);
        assert_eq!(found(&p.diagnostics), vec![], "{what}");
        let [source] = p.chains.as_slice() else {
            panic!("{what}: {} chains", p.chains.len());
        };
        let got = check(source, &catalog);
        let got: Vec<(usize, &str, &str)> = got
            .iter()
            .map(|d| {
                assert_eq!(d.severity, Severity::Error);
                (d.line, d.field.as_deref().unwrap_or(""), d.message.as_str())
            })
            .collect();
        assert_eq!(&got, want, "{what}");
    }
}

#[test]
fn a_chains_output_schema_is_its_output_shape_or_its_last_steps_output() {
    let catalog = catalog();
    let with_output = parse_chain_file(&format!(
        "{HEAD}  - id: fetch\n    tool: http_fetch\n    arguments: {{url: x}}\noutput: {{page: $fetch.content, all: $fetch, list: [\"$search.results[0]\", \"n=${{input.n}}\"], k: 1}}\n"
    ));
    let chain = &with_output.chains[0].chain;
    assert_eq!(
        output_schema(chain, &catalog),
        Some(json!({
            "type": "object",
            "properties": {
                "page": {"type": "string"},
                "all": {
                    "type": "object",
                    "properties": {"status": {"type": "integer"}, "content": {"type": "string"}},
                    "additionalProperties": true
                },
                "list": {"type": "array", "prefixItems": [
                    {"type": "object", "properties": {"url": {"type": "string"}, "title": {"type": "string"}}},
                    {"type": "string"}
                ]},
                "k": {"const": 1}
            },
            "required": ["page", "all", "list", "k"],
            "additionalProperties": false
        }))
    );
    let last = parse_chain_file(&format!(
        "{HEAD}  - id: fetch\n    tool: http_fetch\n    for_each: $search.results\n    arguments: {{url: $item.url}}\n"
    ));
    assert_eq!(
        output_schema(&last.chains[0].chain, &catalog),
        Some(json!({"type": "array", "items": {
            "type": "object",
            "properties": {"status": {"type": "integer"}, "content": {"type": "string"}},
            "additionalProperties": true
        }}))
    );
    let unknown = parse_chain_file(&format!("{HEAD}  - any_tool\n"));
    assert_eq!(output_schema(&unknown.chains[0].chain, &catalog), None);
    // A chain built in Rust is checked too, every line being 1.
    let built = Chain::builder("b")
        .step(StepBuilder::new("a", "nope"))
        .build()
        .unwrap();
    let got = check(&ChainSource::unplaced(built), &catalog);
    assert_eq!(
        found(&got),
        owned(&[(
            1,
            Severity::Error,
            "steps[0].tool",
            "no tool \"nope\" is registered"
        )])
    );
}

#[test]
fn a_doubled_dollar_inside_a_literal_list_or_mapping_is_one_dollar() {
    // Found by the round trip: an all-literal array or object kept the text as written (`$$`),
    // so it rendered `$$` and was written back as `$$$$`.
    let t = Template::from_value(&json!({"a": ["$$5", {"b": "$$HOME"}]})).unwrap();
    assert_eq!(t, Template::Literal(json!({"a": ["$5", {"b": "$HOME"}]})));
    assert_eq!(Template::from_value(&t.to_value()).unwrap(), t);
}

#[test]
fn strings_yaml_1_1_emitters_break_are_written_so_they_read_back() {
    // Found by the round trip: serde_yaml_ng wrote U+2028 as a line break and indented the
    // next line, which a YAML 1.2 reader keeps as text.
    for s in [
        "\u{2028}",
        "a\u{85}b",
        "\u{feff}x",
        "\u{1}",
        "\u{7f}",
        "\u{10ffff}",
    ] {
        let v = json!({ s: s });
        let written = yaml::write(&v);
        assert_eq!(yaml::read(&written, 1).value, Some(v), "{written:?}");
    }
}
