//! SKILL.md parsing: a good manifest with every field, and a corpus of malformed files, each with
//! the diagnostic (severity, line, message) it must give.

use pretty_assertions::assert_eq;

use crate::chain::{Chain, StepBuilder};

use super::*;

const GOOD: &str = "---
name: research
description: Finds and reads sources on the web.
license: Apache-2.0
compatibility: needs network access
metadata:
  author: toolwarden
  revision: 3
allowed-tools: web_search http_fetch
version: 1.2.0
triggers: [\"research\", \"find sources\"]
tools:
  - web_search
  - name: http_fetch
    access_level: standard
    rate_limit: {per_minute: 30}
    allowed_domains: [\"*.wikipedia.org\", \"arxiv.org\"]
    blocked_domains: [\"localhost\"]
inherit_tools_from: [synthesis]
permissions: [web_search, web_read]
chains:
  - steps: [web_search, http_fetch]
---
# Research

Use the tools above.
";

#[test]
fn a_full_manifest_loads_with_every_field() {
    let p = parse_skill(GOOD, Some("research"));
    assert_eq!(p.diagnostics, vec![]);
    let m = p.manifest.unwrap();
    assert_eq!(m.name, "research");
    assert_eq!(m.description, "Finds and reads sources on the web.");
    assert_eq!(m.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(m.metadata["revision"], "3");
    assert_eq!(m.allowed_tools, ["web_search", "http_fetch"]);
    assert_eq!(m.version.as_deref(), Some("1.2.0"));
    assert_eq!(m.triggers, ["research", "find sources"]);
    assert_eq!(
        m.tools[1],
        SkillTool {
            name: "http_fetch".into(),
            access_level: Some(AccessLevel::Standard),
            rate_limit: Some(SkillRate {
                per_minute: Some(30),
                per_hour: None
            }),
            allowed_domains: vec!["*.wikipedia.org".into(), "arxiv.org".into()],
            blocked_domains: vec!["localhost".into()],
        }
    );
    assert_eq!(m.inherit_tools_from, ["synthesis"]);
    assert_eq!(m.permissions, ["web_search", "web_read"]);
    // The seed's shape: an unnamed chain of bare tool names, named after the skill, each step
    // waiting for the one before.
    let chains: Vec<&crate::chain::Chain> = m.chains.iter().map(|c| &c.chain).collect();
    let want = Chain::builder("research")
        .step(StepBuilder::new("step1", "web_search"))
        .step(StepBuilder::new("step2", "http_fetch").depends_on("step1"))
        .build()
        .unwrap();
    assert_eq!(chains, vec![&want]);
    assert_eq!(m.chains[0].line_of("/steps/1"), 22);
    assert_eq!(m.chains[0].field, "chains[0]");
    assert_eq!(m.body_line, 24);
    assert!(m.body.starts_with("# Research"));
}

#[test]
fn the_minimal_agent_skills_form_loads() {
    let p = parse_skill(
        "---\nname: pdf\ndescription: Work with PDF files.\n---\nBody\n",
        Some("pdf"),
    );
    assert_eq!(p.diagnostics, vec![]);
    assert_eq!(p.manifest.unwrap().body, "Body\n");
}

/// Each malformed file: (what it tests, text, severity, line, a part of the message, usable).
const CORPUS: &[(&str, &str, Severity, usize, &str, bool)] = &[
    (
        "no front matter",
        "# Just markdown\n",
        Severity::Error,
        1,
        "starts with a `---` line",
        false,
    ),
    (
        "unclosed front matter",
        "---\nname: a\ndescription: b\n",
        Severity::Error,
        1,
        "not closed",
        false,
    ),
    (
        "empty file",
        "",
        Severity::Error,
        1,
        "starts with a `---` line",
        false,
    ),
    (
        "yaml syntax",
        "---\nname: a\ndescription: [b\n---\n",
        Severity::Error,
        4,
        "not valid YAML",
        false,
    ),
    (
        "not a mapping",
        "---\n- a\n- b\n---\n",
        Severity::Error,
        2,
        "must be a YAML mapping",
        false,
    ),
    (
        "missing name",
        "---\ndescription: d\n---\n",
        Severity::Error,
        1,
        "`name` is missing",
        false,
    ),
    (
        "missing description",
        "---\nname: a\n---\n",
        Severity::Error,
        1,
        "`description` is missing",
        false,
    ),
    (
        "upper-case name",
        "---\nname: Research\ndescription: d\n---\n",
        Severity::Error,
        2,
        "lowercase letters",
        false,
    ),
    (
        "leading hyphen",
        "---\nname: -a\ndescription: d\n---\n",
        Severity::Error,
        2,
        "start or end with a hyphen",
        false,
    ),
    (
        "trailing hyphen",
        "---\nname: a-\ndescription: d\n---\n",
        Severity::Error,
        2,
        "start or end with a hyphen",
        false,
    ),
    (
        "name too long",
        "---\nname: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ndescription: d\n---\n",
        Severity::Error,
        2,
        "1 to 64 characters",
        false,
    ),
    (
        "name not the folder",
        "---\nname: other\ndescription: d\n---\n",
        Severity::Error,
        2,
        "must equal the skill's folder name \"a\"",
        false,
    ),
    (
        "name not a string",
        "---\nname: [a]\ndescription: d\n---\n",
        Severity::Error,
        2,
        "must be a string",
        false,
    ),
    (
        "empty description",
        "---\nname: a\ndescription: \"  \"\n---\n",
        Severity::Error,
        3,
        "must not be empty",
        false,
    ),
    (
        "compatibility too long",
        "---\nname: a\ndescription: d\ncompatibility: COMPAT\n---\n",
        Severity::Warning,
        4,
        "is 501 characters; the Agent Skills format allows 500",
        true,
    ),
    (
        "metadata not a map",
        "---\nname: a\ndescription: d\nmetadata: [x]\n---\n",
        Severity::Error,
        4,
        "mapping of strings",
        false,
    ),
    (
        "metadata value a list",
        "---\nname: a\ndescription: d\nmetadata:\n  k: [1]\n---\n",
        Severity::Error,
        4,
        "must be a string",
        false,
    ),
    (
        "unknown field",
        "---\nname: a\ndescription: d\ncolour: blue\n---\n",
        Severity::Warning,
        4,
        "unknown field \"colour\"",
        true,
    ),
    (
        "tools not a list",
        "---\nname: a\ndescription: d\ntools: read_file\n---\n",
        Severity::Error,
        4,
        "must be a list",
        false,
    ),
    (
        "tool entry without name",
        "---\nname: a\ndescription: d\ntools:\n  - access_level: admin\n---\n",
        Severity::Error,
        5,
        "needs a `name`",
        false,
    ),
    (
        "bad access level",
        "---\nname: a\ndescription: d\ntools:\n  - {name: exec, access_level: root}\n---\n",
        Severity::Error,
        5,
        "unknown access level \"root\"",
        false,
    ),
    (
        "zero rate",
        "---\nname: a\ndescription: d\ntools:\n  - {name: exec, rate_limit: {per_minute: 0}}\n---\n",
        Severity::Error,
        5,
        "whole number above 0",
        false,
    ),
    (
        "empty rate",
        "---\nname: a\ndescription: d\ntools:\n  - {name: exec, rate_limit: {}}\n---\n",
        Severity::Error,
        5,
        "needs per_minute or per_hour",
        false,
    ),
    (
        "unknown tool field",
        "---\nname: a\ndescription: d\ntools:\n  - {name: exec, level: 2}\n---\n",
        Severity::Warning,
        5,
        "unknown field \"level\"",
        true,
    ),
    (
        "bad parent name",
        "---\nname: a\ndescription: d\ninherit_tools_from: [Base]\n---\n",
        Severity::Error,
        4,
        "lowercase letters",
        false,
    ),
    (
        "permissions not strings",
        "---\nname: a\ndescription: d\npermissions: [1, web_read]\n---\n",
        Severity::Error,
        4,
        "must be a string",
        false,
    ),
];

#[test]
fn every_malformed_skill_gets_its_diagnostic() {
    assert!(CORPUS.len() >= 20);
    let long = "x".repeat(501);
    for (what, text, severity, line, message, usable) in CORPUS {
        let text = text.replace("COMPAT", &long);
        let p = parse_skill(&text, Some("a"));
        let found = p.diagnostics.iter().find(|d| d.message.contains(message));
        let Some(d) = found else {
            panic!(
                "{what}: no diagnostic containing {message:?} in {:?}",
                p.diagnostics
            );
        };
        assert_eq!((d.severity, d.line), (*severity, *line), "{what}: {d}");
        assert_eq!(p.manifest.is_some(), *usable, "{what}: {:?}", p.diagnostics);
        assert_eq!(p.has_errors(), !usable, "{what}");
    }
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let p = parse_skill(
        "---\nname: Bad\ndescription: d\nextra: 1\ntools:\n  - {name: exec, access_level: root}\n---\n",
        None,
    );
    let lines: Vec<(usize, Severity)> =
        p.diagnostics.iter().map(|d| (d.line, d.severity)).collect();
    assert_eq!(
        lines,
        vec![
            (2, Severity::Error),
            (4, Severity::Warning),
            (6, Severity::Error)
        ]
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small deterministic fuzz: every prefix of a manifest, and byte noise spliced into it.
    for end in 0..=GOOD.len() {
        if GOOD.is_char_boundary(end) {
            let _ = parse_skill(&GOOD[..end], Some("research"));
        }
    }
    let mut seed: u32 = 7;
    for _ in 0..500 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let at = (seed as usize >> 3) % GOOD.len();
        let noise = [
            "\u{0}",
            ":",
            "- ",
            "[",
            "{",
            "\n---\n",
            "\t",
            "'",
            "&a *a",
            "!!binary x",
        ][(seed >> 16) as usize % 10];
        let mut text = GOOD.to_owned();
        let at = (0..=at)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.insert_str(at, noise);
        let _ = parse_skill(&text, Some("research"));
    }
}

#[test]
fn the_shipped_skills_load_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let folder = entry.unwrap().path();
        let text = std::fs::read_to_string(folder.join("SKILL.md")).unwrap();
        let folder_name = folder.file_name().unwrap().to_str().unwrap().to_owned();
        let p = parse_skill(&text, Some(&folder_name));
        assert_eq!(p.diagnostics, vec![], "{}", folder.display());
        names.push(p.manifest.unwrap().name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "automation",
            "data-viz",
            "research",
            "retrieval",
            "synthesis"
        ]
    );
}

#[test]
fn an_empty_name_or_description_is_an_error_and_a_yaml_error_line_stays_in_the_file() {
    // Found by the fuzzer: `name:` with no value counted as present.
    let p = parse_skill("---\nname:\ndescription:\n---\n", Some("research"));
    assert!(p.manifest.is_none());
    let found: Vec<(usize, Option<&str>, &str)> = p
        .diagnostics
        .iter()
        .map(|d| (d.line, d.field.as_deref(), d.message.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![
            (2, Some("name"), "must not be empty"),
            (3, Some("description"), "must not be empty"),
        ]
    );
    // Found by the fuzzer: libyaml counts a lone CR (and U+2028) as a line break.
    for text in [
        "---\na: [\r\r\r\r\r\n---\n",
        "---\na: [\u{2028}\u{2028}\u{2028}\n---\n",
    ] {
        let p = parse_skill(text, None);
        assert_eq!(p.diagnostics.len(), 1, "{:?}", p.diagnostics);
        assert!(
            (1..=text.lines().count()).contains(&p.diagnostics[0].line),
            "{:?}",
            p.diagnostics
        );
    }
}

#[test]
fn front_matter_shaped_like_the_public_skills_loads() {
    // The shapes the official anthropics/skills files use (checked against them; the text here
    // is our own): a long plain description with parentheses, slashes and commas; a license
    // sentence; a name with a trailing comment; a block description over the 1024 limit, which
    // loads with a warning; allowed-tools as one space-delimited string.
    let plain = "---\nname: pdf-kit\ndescription: Use this skill for PDF files (reading text/tables, merging, splitting, OCR), whenever a .pdf is mentioned.\nlicense: Proprietary. LICENSE.txt has complete terms\n---\n\n# PDF\n";
    let p = parse_skill(plain, Some("pdf-kit"));
    assert_eq!(p.diagnostics, vec![]);
    assert_eq!(
        p.manifest.unwrap().license.as_deref(),
        Some("Proprietary. LICENSE.txt has complete terms")
    );
    let commented = "---\nname: template-kit # lowercase, hyphens\ndescription: A template.\nallowed-tools: Read Grep Bash(git:*)\n---\n";
    let m = parse_skill(commented, Some("template-kit"))
        .manifest
        .unwrap();
    assert_eq!(m.name, "template-kit");
    assert_eq!(m.allowed_tools, ["Read", "Grep", "Bash(git:*)"]);
    let long = format!(
        "---\nname: api-guide\ndescription: |-\n  {}\n  TRIGGER when the code imports the SDK.\n---\n",
        "Reference for the API — models, streaming, tools. ".repeat(22)
    );
    let p = parse_skill(&long, Some("api-guide"));
    assert!(p.manifest.is_some(), "{:?}", p.diagnostics);
    assert_eq!(p.diagnostics.len(), 1);
    assert_eq!(p.diagnostics[0].severity, Severity::Warning);
    assert_eq!(p.diagnostics[0].line, 3);
    assert!(
        p.diagnostics[0].message.ends_with(
            "characters; the Agent Skills format allows 1024, and agents may cut the rest"
        ),
        "{}",
        p.diagnostics[0].message
    );
}

#[test]
fn a_problem_inside_a_tools_entry_points_at_its_own_line() {
    let text = "---\nname: a\ndescription: d\ntools:\n  - read_file\n  # a comment\n  - name: exec\n    rate_limit: {per_minute: 5}\n    access_level: root\n- name: write_file\n  access_level: sudo\n---\n";
    let p = parse_skill(text, Some("a"));
    let found: Vec<(usize, Option<&str>)> = p
        .diagnostics
        .iter()
        .map(|d| (d.line, d.field.as_deref()))
        .collect();
    // YAML refuses the unindented third item; fixed, each entry's problem is on its own line.
    assert_eq!(found.len(), 1, "{:?}", p.diagnostics);
    let text = text.replace(
        "- name: write_file\n  access_level: sudo",
        "  - name: write_file\n    access_level: sudo",
    );
    let p = parse_skill(&text, Some("a"));
    let found: Vec<(usize, Option<&str>)> = p
        .diagnostics
        .iter()
        .map(|d| (d.line, d.field.as_deref()))
        .collect();
    assert_eq!(
        found,
        vec![
            (9, Some("tools[1].access_level")),
            (11, Some("tools[2].access_level")),
        ]
    );
}

/// What a SKILL.md's `chains:` gives: (what it tests, the chains part of the front matter (from
/// line 4), the chains loaded, and each diagnostic as (line, field, message)).
type ChainCase = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [(usize, &'static str, &'static str)],
);

const CHAIN_CASES: &[ChainCase] = &[
    (
        "the seed's map of names to step lists",
        "chains:\n  research: [web_search, http_fetch]\n  other:\n    steps: [read_file]\n",
        &["research", "other"],
        &[],
    ),
    (
        "several unnamed chains get the skill's name and their position",
        "chains:\n  - steps: [a_tool]\n  - name: named\n    steps: [b_tool]\n  - [c_tool]\n",
        &["my_skill_1", "named", "my_skill_3"],
        &[],
    ),
    (
        "a chain that is not a list or a mapping",
        "chains: nope\n",
        &[],
        &[(
            4,
            "chains",
            "must be a list of chains, or a mapping from chain names to chains",
        )],
    ),
    (
        "a broken chain is left out, the others load",
        "chains:\n  - name: good\n    steps: [a_tool]\n  - name: bad\n    steps:\n      - id: s\n        tool: a_tool\n        arguments: {x: $nowhere.y}\n",
        &["good"],
        &[(
            11,
            "chains[1].steps[0].arguments.x",
            "$steps.nowhere.output.y: no step has id \"nowhere\"",
        )],
    ),
    (
        "a key that disagrees with the name",
        "chains:\n  research:\n    name: other\n    steps: [a_tool]\n",
        &[],
        &[(
            6,
            "chains.research.name",
            "the chain is under the key \"research\" but its `name` is \"other\"",
        )],
    ),
    (
        "an anchor elsewhere in the front matter stops the chains, not the skill",
        "metadata:\n  a: &x b\nchains: [[a_tool]]\n",
        &[],
        &[(
            5,
            "chains",
            "the chains cannot be read: anchors (`&name`) are not supported: write the value out",
        )],
    ),
];

#[test]
fn chains_load_with_their_lines_and_a_broken_one_leaves_the_skill_usable() {
    for (what, chains, names, want) in CHAIN_CASES {
        let text = format!("---\nname: my-skill\ndescription: d\n{chains}---\n");
        let p = parse_skill(&text, Some("my-skill"));
        let m = p
            .manifest
            .unwrap_or_else(|| panic!("{what}: the skill does not load: {:?}", p.diagnostics));
        let got: Vec<&str> = m.chains.iter().map(|c| c.chain.name.as_str()).collect();
        assert_eq!(&got, names, "{what}");
        let found: Vec<(usize, &str, &str)> = p
            .diagnostics
            .iter()
            .map(|d| (d.line, d.field.as_deref().unwrap_or(""), d.message.as_str()))
            .collect();
        assert_eq!(&found, want, "{what}");
        assert!(
            p.diagnostics.iter().all(Diagnostic::is_about_chains),
            "{what}"
        );
    }
}

#[test]
fn a_rate_limit_may_be_a_bare_number_of_calls_a_minute() {
    let text = "---\nname: a\ndescription: d\ntools:\n  - {name: exec, rate_limit: 30}\n  - {name: ls, rate_limit: 0}\n---\n";
    let p = parse_skill(text, Some("a"));
    let found: Vec<(usize, &str)> = p
        .diagnostics
        .iter()
        .map(|d| (d.line, d.message.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![(6, "must be a whole number of calls a minute above 0")]
    );
    let p = parse_skill(
        "---\nname: a\ndescription: d\ntools:\n  - {name: exec, rate_limit: 30}\n---\n",
        Some("a"),
    );
    assert_eq!(
        p.manifest.unwrap().tools[0].rate_limit,
        Some(SkillRate {
            per_minute: Some(30),
            per_hour: None
        })
    );
}
