//! Capability catalog and classifiers: the shipped catalog, a corpus of malformed catalogs with
//! the line and message each must give, a no-panic sweep, the heuristic on named cases, the model
//! answer reader on garbage, and the definition fingerprint.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::name::ToolGroup;
use crate::schema::ParameterSchema;

const SHIPPED: &str = include_str!("../../../../config/tool_capabilities.yaml");

const BUILTINS: &[&str] = &[
    "create_entity",
    "delete_file",
    "echo",
    "exec",
    "exec_kill",
    "exec_output",
    "exec_wait",
    "file_search",
    "list_directory",
    "memory_delete",
    "memory_get",
    "memory_put",
    "memory_search",
    "python_exec",
    "read_file",
    "run_linter",
    "run_tests",
    "search_knowledge",
    "sql_query",
    "validate_content",
    "write_file",
];

const PLANNED: &[&str] = &["http_fetch", "web_search", "browser"];

fn shipped() -> Catalog {
    parse_catalog(SHIPPED).unwrap()
}

fn def(
    name: &str,
    description: &str,
    category: ToolCategory,
    parameters: Value,
    side_effects: bool,
) -> ToolDefinition {
    let mut d = ToolDefinition::new(
        ToolName::new(name).unwrap(),
        description,
        category,
        ToolGroup::new("custom").unwrap(),
        ParameterSchema::parameters(parameters).unwrap(),
    );
    d.constraints.side_effects = side_effects;
    d
}

fn props(names: &[(&str, Value)]) -> Value {
    let mut properties = serde_json::Map::new();
    for (name, schema) in names {
        properties.insert((*name).to_owned(), schema.clone());
    }
    json!({"type": "object", "properties": properties})
}

fn names(c: &Classification) -> Vec<&str> {
    c.capabilities
        .iter()
        .map(|a| a.capability.as_str())
        .collect()
}

// ---- the catalog ------------------------------------------------------------------------------

#[test]
fn the_shipped_catalog_parses_and_maps_every_builtin() {
    let catalog = shipped();
    let all: Vec<&str> = catalog.names().collect();
    assert_eq!(
        all,
        [
            "web_search",
            "web_read",
            "browser_control",
            "filesystem_read",
            "filesystem_write",
            "code_execute",
            "database_read",
            "database_write",
            "api_call",
            "messaging",
            "knowledge_search",
            "knowledge_write",
            "memory",
            "system_info",
            "content_check",
        ]
    );
    for tool in BUILTINS.iter().chain(PLANNED) {
        assert!(
            !catalog.static_for(tool).is_empty(),
            "{tool} is not in the static map"
        );
        assert!(classify_static(tool, &catalog).is_some());
    }
    assert_eq!(catalog.static_for("read_file"), ["filesystem_read"]);
    assert_eq!(catalog.static_for("echo"), ["system_info"]);
    assert_eq!(catalog.static_for("validate_content"), ["content_check"]);
    assert_eq!(catalog.static_for("sql_query"), ["database_read"]);
    assert_eq!(catalog.static_for("http_fetch"), ["web_read", "api_call"]);
    assert_eq!(
        catalog.static_for("browser"),
        ["web_read", "browser_control"]
    );
    assert!(catalog.static_for("frobnicate").is_empty());
    assert!(catalog.contains("web_read"));
    assert!(!catalog.contains("teleport"));
    let web_read = catalog.get("web_read").unwrap();
    assert_eq!(web_read.categories, [ToolCategory::Network]);
    assert_eq!(web_read.writes, Some(false));
    assert_eq!(catalog.get("api_call").unwrap().writes, None);
    for c in catalog.capabilities() {
        assert!(!c.keywords.is_empty(), "{} has no keywords", c.name);
        assert!(!c.categories.is_empty(), "{} has no categories", c.name);
    }
}

#[test]
fn static_classification_is_certain_and_in_catalog_order() {
    let catalog = shipped();
    assert_eq!(
        classify_static("http_fetch", &catalog),
        Some(Classification {
            source: Source::Static,
            capabilities: vec![
                Assigned {
                    capability: "web_read".into(),
                    confidence: 1.0
                },
                Assigned {
                    capability: "api_call".into(),
                    confidence: 1.0
                },
            ],
            detail: None,
        })
    );
    assert_eq!(classify_static("frobnicate", &catalog), None);
}

/// Parses `input` and compares every error's line and a fragment of its `Display`.
fn check(input: &str, expect: &[(usize, &str)]) {
    let errors = parse_catalog(input).expect_err(input);
    let got: Vec<(usize, String)> = errors.iter().map(|e| (e.line, e.to_string())).collect();
    assert_eq!(got.len(), expect.len(), "input:\n{input}\ngot: {got:#?}");
    for ((line, text), (want_line, fragment)) in got.iter().zip(expect) {
        assert_eq!(
            (line, text.contains(fragment)),
            (want_line, true),
            "input:\n{input}\nerror: {text}\nexpected line {want_line} containing {fragment:?}"
        );
    }
}

/// Found by fuzzing (`fuzz/corpus/capabilities/yaml-error-at-end-without-newline.json`): a YAML
/// error at the end of a catalog without a final newline (or after a lone `\r`) was reported on
/// a line the file does not have, and its message kept libyaml's own line numbers.
#[test]
fn yaml_errors_are_reported_on_lines_of_the_file() {
    let errors = parse_catalog("version: 1\ncapabilities: {web: {description: d}").unwrap_err();
    assert_eq!(
        errors,
        vec![CatalogError {
            line: 2,
            field: None,
            message: "not valid YAML: did not find expected ',' or '}', while parsing a flow \
                      mapping"
                .to_owned(),
        }]
    );
    let errors = parse_catalog("version: 1\rcapabilities: [\r").unwrap_err();
    assert_eq!(errors.iter().map(|e| e.line).collect::<Vec<_>>(), [1]);
}

#[test]
fn malformed_catalogs_report_the_line_and_the_problem() {
    check(
        "version: 1\ncapabilities:\n  web:\n    description: [unclosed\n",
        &[(5, "not valid YAML: ")],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n\tdescription: tab\n",
        &[(4, "not valid YAML: ")],
    );
    check(
        "version: 2\ncapabilities:\n  web:\n    description: d\n",
        &[(1, "line 1: version: must be 1, got 2")],
    );
    check(
        "version: \"1\"\ncapabilities:\n  web:\n    description: d\n",
        &[(1, "version: must be 1, got \"1\"")],
    );
    check(
        "capabilities:\n  web:\n    description: d\n",
        &[(1, "the required field `version` is missing")],
    );
    check(
        "version: 1\ncapabilities:\n  Web-Read:\n    description: d\n",
        &[(
            3,
            "line 3: capabilities.Web-Read: capability name \"Web-Read\" must match ^[a-z][a-z0-9_]{0,63}$",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    description: d\n    tool: [x]\n",
        &[(
            5,
            "capabilities.web.tool: unknown field \"tool\"; a capability has description, tools, \
             keywords, categories, writes",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    description: d\n    categories:\n      - network\n      - files\n",
        &[(
            7,
            "capabilities.web.categories[1]: unknown category \"files\": expected one of \
             file_system, network, database, code_execution, external_api, knowledge, \
             communication, system",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    description: \"  \"\n",
        &[(
            4,
            "capabilities.web.description: must be 1 to 1024 characters (it has 0)",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    tools: [a]\n",
        &[(
            3,
            "capabilities.web: the required field `description` is missing",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  fs:\n    description: d\n    tools:\n      - read_file\n      - Read-File\n",
        &[(
            7,
            "capabilities.fs.tools[1]: invalid tool name \"Read-File\": must start with a lowercase letter",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  fs:\n    description: d\n    tools: [read_file, read_file]\n",
        &[(
            5,
            "capabilities.fs.tools[1]: tool \"read_file\" is listed twice",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    description: d\n  web:\n    description: e\n",
        &[(
            5,
            "not valid YAML: capabilities: duplicate entry with key \"web\"",
        )],
    );
    check(
        "version: 1\ncapabilities: {}\n",
        &[(2, "capabilities: the catalog declares no capabilities")],
    );
    check(
        "version: 1\ncapabilities:\n",
        &[(2, "capabilities: the catalog declares no capabilities")],
    );
    check("", &[(1, "the catalog is empty")]);
    check(
        "- web\n",
        &[(
            1,
            "the catalog must be a mapping with `version` and `capabilities`, not a list",
        )],
    );
    check(
        "version: 1\ncapabilities:\n  web:\n    description: d\n    writes: \"yes\"\n    keywords: [Web Search, ok]\n",
        &[
            (
                5,
                "capabilities.web.writes: must be true or false, not a string",
            ),
            (
                6,
                "capabilities.web.keywords[0]: keyword \"Web Search\" must be one word of lowercase letters and digits",
            ),
        ],
    );
    check(
        "version: 1\nextra: true\ncapabilities:\n  web: just a string\n",
        &[
            (
                2,
                "extra: unknown field \"extra\"; expected version or capabilities",
            ),
            (
                4,
                "capabilities.web: must be a mapping with description, tools, keywords, categories, writes, not a string",
            ),
        ],
    );
    // A field inside a flow mapping is reported at its capability's line.
    check(
        "version: 1\ncapabilities:\n  web: {description: d, tools: [ok, 9]}\n",
        &[(
            3,
            "capabilities.web.tools[1]: must be a string, not a number",
        )],
    );
    // Block scalars and multi-line flow lists do not confuse the line finder.
    check(
        "version: 1\ncapabilities:\n  web:\n    description: |\n      not: a key\n    tools: [\n      a,\n      b]\n    bogus: 1\n",
        &[(9, "capabilities.web.bogus: unknown field")],
    );
}

#[test]
fn errors_display_line_field_and_message() {
    let e = CatalogError {
        line: 3,
        field: Some("capabilities.web".into()),
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "line 3: capabilities.web: bad");
    let e = CatalogError {
        line: 1,
        field: None,
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "line 1: bad");
}

#[test]
fn source_round_trips_as_text_and_json() {
    for source in Source::ALL {
        assert_eq!(source.to_string().parse::<Source>(), Ok(*source));
        let json = serde_json::to_value(source).unwrap();
        assert_eq!(json, Value::String(source.to_string()));
        assert_eq!(serde_json::from_value::<Source>(json).unwrap(), *source);
    }
    assert!("Static".parse::<Source>().is_err());
    let c = Classification {
        source: Source::Llm,
        capabilities: vec![Assigned {
            capability: "web_read".into(),
            confidence: 0.75,
        }],
        detail: Some("model-x".into()),
    };
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(
        json,
        json!({"source": "llm", "capabilities": [{"capability": "web_read", "confidence": 0.75}],
               "detail": "model-x"})
    );
    assert_eq!(serde_json::from_value::<Classification>(json).unwrap(), c);
}

/// A deterministic generator for the sweep below (Knuth's MMIX constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn parse_never_panics(text: &str) {
    let lines = text.lines().count() + 1;
    match parse_catalog(text) {
        Ok(catalog) => assert!(!catalog.capabilities().is_empty()),
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in errors {
                assert!(
                    (1..=lines).contains(&e.line),
                    "line {} out of 1..={lines}: {e}\n{text}",
                    e.line
                );
            }
        }
    }
}

#[test]
fn no_input_makes_parsing_panic() {
    assert!(SHIPPED.is_ascii());
    // Every line end and every other byte: cuts inside keys, values and flow lists.
    for end in 0..=SHIPPED.len() {
        if end % 2 == 0 || SHIPPED.as_bytes().get(end) == Some(&b'\n') {
            parse_never_panics(&SHIPPED[..end]);
        }
    }
    const BYTES: &[u8] = b":-[]{}#\"' \n\t&*!|>?,%@`aZ9_\\\x00\xff";
    let mut rng = Lcg(0x5eed);
    for _ in 0..2000 {
        let mut bytes = SHIPPED.as_bytes().to_vec();
        for _ in 0..=rng.below(4) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = BYTES[rng.below(BYTES.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, BYTES[rng.below(BYTES.len())]),
            }
        }
        parse_never_panics(&String::from_utf8_lossy(&bytes));
    }
}

// ---- the heuristic ----------------------------------------------------------------------------

fn assigned(c: &Classification) -> Vec<(&str, f32)> {
    c.capabilities
        .iter()
        .map(|a| (a.capability.as_str(), a.confidence))
        .collect()
}

#[test]
fn heuristic_github_issue_search_is_a_web_search_and_an_api_call() {
    let d = def(
        "gh_issue_search",
        "Search GitHub issues",
        ToolCategory::ExternalApi,
        props(&[("query", json!({"type": "string"}))]),
        false,
    );
    let c = classify_heuristic(&d, &shipped());
    assert_eq!(c.source, Source::Heuristic);
    assert_eq!(names(&c), ["web_search", "api_call"]);
    assert_eq!(
        c.detail.as_deref(),
        Some(
            "web_search 0.74 (name search, description search, parameter query at \
             /properties/query, reads); api_call 0.52 (description github, category \
             external_api); direction read (description search, name search)"
        )
    );
}

#[test]
fn heuristic_read_only_sql_is_database_read_not_write() {
    let d = def(
        "pg_select",
        "Run a read-only SQL SELECT against Postgres",
        ToolCategory::Database,
        props(&[("sql", json!({"type": "string"}))]),
        false,
    );
    let c = classify_heuristic(&d, &shipped());
    assert_eq!(assigned(&c), [("database_read", 0.9)]);
    assert!(!c.has("database_write"));
}

#[test]
fn heuristic_s3_put_object_is_an_api_call() {
    let d = def(
        "s3_put_object",
        "Upload an object to an S3 bucket",
        ToolCategory::ExternalApi,
        props(&[
            ("bucket", json!({"type": "string"})),
            ("key", json!({"type": "string"})),
            ("body", json!({"type": "string"})),
        ]),
        true,
    );
    let c = classify_heuristic(&d, &shipped());
    assert_eq!(names(&c), ["api_call"]);
}

#[test]
fn heuristic_fetching_a_page_by_uri_is_web_read() {
    let d = def(
        "get_page",
        "Fetch a page",
        ToolCategory::Network,
        props(&[("url", json!({"type": "string", "format": "uri"}))]),
        false,
    );
    let c = classify_heuristic(&d, &shipped());
    assert_eq!(names(&c), ["web_read"]);
    let detail = c.detail.unwrap();
    assert!(detail.contains("format uri at /properties/url"), "{detail}");
}

#[test]
fn heuristic_gives_nonsense_nothing() {
    let catalog = shipped();
    for category in ToolCategory::ALL {
        let d = def(
            "frobnicate",
            "does things",
            *category,
            props(&[("x", json!({"type": "string"}))]),
            true,
        );
        let c = classify_heuristic(&d, &catalog);
        assert_eq!(c.capabilities, vec![], "category {category}");
        assert_eq!(
            c.detail.as_deref(),
            Some("no capability reached 0.35; direction write (side effects)")
        );
    }
}

#[test]
fn heuristic_separates_reading_and_writing_files() {
    let catalog = shipped();
    let read = def(
        "cat_files",
        "Show the contents of files",
        ToolCategory::FileSystem,
        props(&[(
            "paths",
            json!({"type": "array", "items": {"type": "string"}}),
        )]),
        false,
    );
    assert_eq!(
        names(&classify_heuristic(&read, &catalog)),
        ["filesystem_read"]
    );
    let write = def(
        "save_document",
        "Save text to a file in the workspace",
        ToolCategory::FileSystem,
        props(&[
            ("path", json!({"type": "string"})),
            ("text", json!({"type": "string"})),
        ]),
        true,
    );
    assert_eq!(
        names(&classify_heuristic(&write, &catalog)),
        ["filesystem_write"]
    );
}

/// The shipped catalog written back out with its capabilities in reverse order.
fn reversed(catalog: &Catalog) -> String {
    let mut out = String::from("version: 1\ncapabilities:\n");
    for c in catalog.capabilities().iter().rev() {
        let list = |items: Vec<String>| format!("[{}]", items.join(", "));
        out.push_str(&format!(
            "  {}:\n    description: {:?}\n    tools: {}\n    keywords: {}\n    categories: {}\n",
            c.name,
            c.description,
            list(c.tools.iter().rev().cloned().collect()),
            list(c.keywords.iter().rev().cloned().collect()),
            list(c.categories.iter().rev().map(|x| x.to_string()).collect()),
        ));
        if let Some(w) = c.writes {
            out.push_str(&format!("    writes: {w}\n"));
        }
    }
    out
}

#[test]
fn heuristic_is_deterministic_whatever_the_catalog_order() {
    let catalog = shipped();
    let backwards = parse_catalog(&reversed(&catalog)).unwrap();
    assert_eq!(
        backwards.names().collect::<Vec<_>>(),
        catalog.names().rev().collect::<Vec<_>>()
    );
    let defs = [
        def(
            "gh_issue_search",
            "Search GitHub issues",
            ToolCategory::ExternalApi,
            props(&[("query", json!({"type": "string"}))]),
            false,
        ),
        def(
            "pg_select",
            "Run a read-only SQL SELECT against Postgres",
            ToolCategory::Database,
            props(&[("sql", json!({"type": "string"}))]),
            false,
        ),
        def(
            "slack_post",
            "Send a message to a Slack channel",
            ToolCategory::Communication,
            props(&[
                ("channel", json!({"type": "string"})),
                ("text", json!({"type": "string"})),
            ]),
            true,
        ),
    ];
    for d in &defs {
        let once = classify_heuristic(d, &catalog);
        assert_eq!(classify_heuristic(d, &catalog), once);
        assert_eq!(classify_heuristic(d, &backwards), once);
        assert!(once.capabilities.len() <= heuristic::MAX_CAPABILITIES);
        for a in &once.capabilities {
            assert!(a.confidence >= MIN_CONFIDENCE && a.confidence < 1.0);
        }
    }
}

#[test]
fn offline_classification_prefers_the_static_map() {
    let catalog = shipped();
    let read_file = def(
        "read_file",
        "Read a file",
        ToolCategory::FileSystem,
        props(&[("path", json!({"type": "string"}))]),
        false,
    );
    assert_eq!(
        classify_offline(&read_file, &catalog).source,
        Source::Static
    );
    let other = def(
        "get_page",
        "Fetch a page",
        ToolCategory::Network,
        props(&[("url", json!({"type": "string", "format": "uri"}))]),
        false,
    );
    assert_eq!(classify_offline(&other, &catalog).source, Source::Heuristic);
}

#[test]
fn words_split_on_separators_and_humps_and_stem_alike() {
    assert_eq!(
        heuristic::split_words("HTTPFetch_getPage-v2.s3Put"),
        [
            "httpfetch",
            "http",
            "fetch",
            "getpage",
            "get",
            "page",
            "v2",
            "s3put",
            "s3",
            "put"
        ]
    );
    for (a, b) in [
        ("files", "file"),
        ("searches", "search"),
        ("queries", "query"),
        ("fetched", "fetch"),
        ("writing", "write"),
        ("uses", "use"),
        ("messages", "messaging"),
    ] {
        assert_eq!(heuristic::stem(a), heuristic::stem(b), "{a} / {b}");
    }
    assert_ne!(heuristic::stem("browser"), heuristic::stem("browse"));
}

// ---- the model ---------------------------------------------------------------------------------

fn answer(content: Value) -> Value {
    json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
}

#[test]
fn the_chat_request_lists_the_catalog_and_the_tool() {
    let catalog = shipped();
    let d = def(
        "get_page",
        "Fetch a page",
        ToolCategory::Network,
        props(&[("url", json!({"type": "string", "format": "uri"}))]),
        false,
    );
    let body = chat_request(&d, &catalog, "small-model");
    assert_eq!(body["model"], "small-model");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(system.contains("- web_read: Fetch and read web pages and other resources by URL.\n"));
    assert!(system.contains("- system_info: "));
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert_eq!(body["messages"][1]["role"], "user");
    assert!(
        user.starts_with("Tool name: get_page\nDescription: Fetch a page\nCategory: network\n")
    );
    assert!(user.contains(r#""format":"uri""#), "{user}");
    assert!(user.contains("{\"capabilities\":[{\"name\":...,\"confidence\":...}]}"));

    let many: Vec<(String, Value)> = (0..400)
        .map(|i| {
            (
                format!("field_{i}"),
                json!({"type": "string", "description": "é"}),
            )
        })
        .collect();
    let many: Vec<(&str, Value)> = many.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let huge = def("big", "Big", ToolCategory::System, props(&many), false);
    let user = chat_request(&huge, &catalog, "m")["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("… (truncated, "), "{user}");
    assert!(user.len() < llm::MAX_SCHEMA_BYTES + 1024);
}

/// What reading an answer gave, as (name, confidence) pairs.
type Read = Result<Vec<(String, f32)>, String>;

fn read(response: Value) -> Read {
    parse_chat_answer(&response, &shipped()).map(|v| {
        v.into_iter()
            .map(|a| (a.capability, a.confidence))
            .collect()
    })
}

fn ok(pairs: &[(&str, f32)]) -> Read {
    Ok(pairs.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect())
}

#[test]
fn model_answers_are_read_leniently_in_form() {
    let cases: Vec<(Value, Read)> = vec![
        (
            answer(json!(
                r#"{"capabilities":[{"name":"web_read","confidence":0.9}]}"#
            )),
            ok(&[("web_read", 0.9)]),
        ),
        (
            answer(json!(
                "Here you go:\n```json\n{\"capabilities\": [{\"name\": \"web_read\", \"confidence\": 0.8}, {\"name\": \"api_call\", \"confidence\": 0.4}]}\n```\nHope that helps."
            )),
            ok(&[("web_read", 0.8), ("api_call", 0.4)]),
        ),
        (
            answer(json!(
                "Sure [see below]: {\"capabilities\": [\"web_search\"]} -- done"
            )),
            ok(&[("web_search", 0.5)]),
        ),
        (
            answer(json!(
                r#"[{"capability": " Web_Read ", "confidence": "0.7"}]"#
            )),
            ok(&[("web_read", 0.7)]),
        ),
        (answer(json!(r#"{"capabilities": []}"#)), ok(&[])),
        (
            answer(json!(
                r#"{"capabilities":[{"name":"web_read","confidence":7},{"name":"api_call","confidence":-1},{"name":"web_read","confidence":0.2},{"name":"system_info"}]}"#
            )),
            ok(&[("web_read", 1.0), ("system_info", 0.5), ("api_call", 0.0)]),
        ),
        (
            answer(json!(
                r#"{"capabilities":[{"name":"teleport","confidence":0.9},{"name":"filesystem_read","confidence":0.6}]}"#
            )),
            ok(&[("filesystem_read", 0.6)]),
        ),
    ];
    for (response, expect) in cases {
        assert_eq!(read(response.clone()), expect, "{response}");
    }
}

#[test]
fn unusable_model_answers_say_what_was_wrong() {
    let cases: Vec<(Value, &str)> = vec![
        (
            answer(json!("I think web")),
            "choices[0].message.content is not JSON: \"I think web\"",
        ),
        (
            answer(json!(
                "I'm sorry, but I can't help with classifying this tool."
            )),
            "choices[0].message.content is not JSON: \"I'm sorry, but I can't help with classifying this tool.\"",
        ),
        (
            answer(json!(r#"{"capabilities": "web"}"#)),
            "capabilities is a string, expected a list of {name, confidence}",
        ),
        (
            answer(json!(r#"{"answer": ["web_read"]}"#)),
            "the answer has no capabilities list (its keys: answer)",
        ),
        (
            answer(json!(
                r#"{"capabilities":[{"name":"teleport"},{"name":"warp"}]}"#
            )),
            "capabilities \"teleport\", \"warp\" are not in the catalog",
        ),
        (
            answer(json!(r#"{"capabilities":["teleport"]}"#)),
            "capability \"teleport\" is not in the catalog",
        ),
        (
            answer(json!(
                r#"{"capabilities":[{"name":"web_read","confidence":"NaN"}]}"#
            )),
            "capabilities[0].confidence \"NaN\" is not a number",
        ),
        (
            answer(json!(
                r#"{"capabilities":[{"name":"web_read","confidence":true}]}"#
            )),
            "capabilities[0].confidence is a boolean, expected a number from 0 to 1",
        ),
        (
            answer(json!(r#"{"capabilities":[42]}"#)),
            "capabilities[0] is a number, expected {name, confidence} or a name",
        ),
        (
            answer(json!(r#"{"capabilities":[{"confidence":1}]}"#)),
            "capabilities[0] has no name",
        ),
        (
            answer(json!(null)),
            "choices[0].message.content is null, expected a string",
        ),
        (
            json!({"choices": [{"message": {"content": null, "refusal": "I can't do that."}}]}),
            "the model refused: I can't do that.",
        ),
        (
            json!({"object": "chat.completion"}),
            "no choices in the response",
        ),
        (
            json!({"choices": []}),
            "no choices: the response's choices list is empty",
        ),
        (
            json!({"error": {"message": "model not found"}}),
            "no choices; the endpoint said: model not found",
        ),
        (
            json!({"choices": "x"}),
            "choices is a string, expected a list",
        ),
        (json!({"choices": [{}]}), "choices[0] has no message"),
        (json!([1]), "the response is a list, not an object"),
    ];
    for (response, expect) in cases {
        assert_eq!(read(response.clone()), Err(expect.to_owned()), "{response}");
    }
}

// ---- the fingerprint ---------------------------------------------------------------------------

#[test]
fn the_definition_hash_follows_what_classification_reads() {
    let base = def(
        "get_page",
        "Fetch a page",
        ToolCategory::Network,
        json!({"type": "object", "properties": {"url": {"type": "string", "format": "uri"}},
               "required": ["url"]}),
        false,
    );
    let hash = definition_hash(&base);
    assert_eq!(hash.len(), 64);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(definition_hash(&base.clone()), hash);

    let mut reordered = base.clone();
    reordered.parameters = ParameterSchema::parameters(json!({"required": ["url"],
        "properties": {"url": {"format": "uri", "type": "string"}}, "type": "object"}))
    .unwrap();
    assert_eq!(definition_hash(&reordered), hash);

    let mut unrelated = base.clone();
    unrelated.risk_level = crate::definition::RiskLevel::High;
    unrelated.version = "2.0.0".into();
    assert_eq!(definition_hash(&unrelated), hash);

    let mut changes: Vec<ToolDefinition> = Vec::new();
    let mut d = base.clone();
    d.description = "Fetch a web page".into();
    changes.push(d);
    let mut d = base.clone();
    d.name = ToolName::new("get_pages").unwrap();
    changes.push(d);
    let mut d = base.clone();
    d.category = ToolCategory::ExternalApi;
    changes.push(d);
    let mut d = base.clone();
    d.group = ToolGroup::new("net").unwrap();
    changes.push(d);
    let mut d = base.clone();
    d.parameters = ParameterSchema::parameters(
        json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
    )
    .unwrap();
    changes.push(d);
    let mut d = base.clone();
    d.output_schema = Some(ParameterSchema::any(json!({"type": "string"})).unwrap());
    changes.push(d);
    let mut seen = std::collections::BTreeSet::from([hash]);
    for d in changes {
        assert!(seen.insert(definition_hash(&d)), "{d:?}");
    }
}
