//! Fuzzes the tool definition loader (`tw_core::load_tool_specs`), which reads custom tool files
//! in TOML, JSON and YAML (`tools add`, the desktop's form, the admin API's `POST /tools`, and
//! every custom tool the store reads back at start). Each input is tried in all three formats.
//! Beyond "no panic":
//! - an error names the file and a line (and column) inside the text;
//! - a loaded spec is saved as the store saves it (JSON) and loads back as the same spec, so a
//!   tool that was accepted can always be read again; the same holds through YAML;
//! - what a definition promises holds: a trimmed description of 1 to 4096 characters, a
//!   parameter schema whose root is an object, allowed modes sorted and not empty, and a
//!   command template whose program no argument can change (rendered with different
//!   arguments, `argv[0]` stays the same);
//! - the exports agents see (OpenAI, Anthropic, MCP) are built without panicking.
//!
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/tool_defs` are the definitions from
//! the README, the loader's tests and the integration tests, in each format, valid and not.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tw_core::{DefinitionFormat, ExportFormat, ToolSpec, export_tool, load_tool_specs};
use tw_fuzz::assert_located;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for (format, file) in [
        (DefinitionFormat::Json, "tool.json"),
        (DefinitionFormat::Toml, "tool.toml"),
        (DefinitionFormat::Yaml, "tool.yaml"),
    ] {
        match load_tool_specs(&text, file, format) {
            Err(e) => {
                assert_eq!(e.file, file, "an error names another file: {e}");
                assert_located(
                    text.strip_prefix('\u{feff}').unwrap_or(&text),
                    e.line,
                    e.column,
                    &e,
                );
            }
            Ok(specs) => {
                assert!(!specs.is_empty(), "a file loaded as no tools at all");
                for spec in &specs {
                    check(spec);
                }
            }
        }
    }
});

fn check(spec: &ToolSpec) {
    let json = serde_json::to_string(spec)
        .unwrap_or_else(|e| panic!("a loaded spec does not serialize: {e}"));
    match load_tool_specs(&json, "saved.json", DefinitionFormat::Json) {
        Ok(back) => assert_eq!(
            back,
            vec![spec.clone()],
            "saved and loaded again, it changed"
        ),
        Err(e) => panic!("a loaded spec, saved as JSON, does not load again: {e}\n{json}"),
    }
    if let Ok(yaml) = serde_yaml_ng::to_string(spec) {
        match load_tool_specs(&yaml, "saved.yaml", DefinitionFormat::Yaml) {
            Ok(back) => assert_eq!(
                back,
                vec![spec.clone()],
                "saved as YAML and loaded, it changed"
            ),
            Err(e) => panic!("a loaded spec, saved as YAML, does not load again: {e}\n{yaml}"),
        }
    }

    let def = &spec.definition;
    let n = def.description.chars().count();
    assert!((1..=4096).contains(&n), "a description of {n} characters");
    assert_eq!(
        def.description.trim(),
        def.description,
        "description not trimmed"
    );
    assert_eq!(
        def.parameters.value().get("type"),
        Some(&json!("object")),
        "a parameter schema whose root is not an object"
    );
    assert!(!def.allowed_modes.is_empty(), "no mode to run in");
    assert!(
        def.allowed_modes.windows(2).all(|w| w[0] < w[1]),
        "allowed modes not sorted and unique"
    );
    for format in [
        ExportFormat::OpenAi,
        ExportFormat::Anthropic,
        ExportFormat::Mcp,
    ] {
        let _ = export_tool(def, format);
    }

    if let Some(template) = &spec.command {
        let first = template.render(&json!({}), &def.parameters);
        let names: Vec<String> = def
            .parameters
            .value()
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let hostile: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!("/tmp/evil --exec=sh; $(id) {x}")))
            .collect();
        let second = template.render(&Value::Object(hostile), &def.parameters);
        // A schema default holding a NUL byte is refused at rendering; nothing to compare then.
        if let (Ok(a), Ok(b)) = (first, second) {
            assert_eq!(a.first(), b.first(), "an argument changed the program");
            assert!(
                b.len() <= template.argv().count(),
                "an argument added elements"
            );
        }
    }
}
