//! Content checks on real profiles: each rule with the place it reports, a string that is not
//! JSON, JSON judged by its schema and its serialization, the cap on what is listed, and the
//! config-facing parsers (encodings, patterns).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

fn pattern(s: &str) -> Pattern {
    Pattern::new(s).unwrap()
}

fn ticket_schema() -> ParameterSchema {
    ParameterSchema::any(json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^TICKET-[0-9]+$"},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["id"],
        "additionalProperties": false
    }))
    .unwrap()
}

fn profile(schema: Option<ParameterSchema>, rules: TextRules) -> ContentProfile {
    ContentProfile::new(schema, rules).unwrap()
}

/// Checks `content` against `profile` and compares the whole report, as the tool returns it.
fn check(profile: &ContentProfile, content: Value, expect: Value) {
    let got = serde_json::to_value(profile.check(&content)).unwrap();
    assert_eq!(got, expect, "content: {content}");
}

fn valid() -> Value {
    json!({"valid": true, "violations": [], "violation_count": 0})
}

#[test]
fn valid_content_has_no_violations() {
    let p = profile(
        Some(ticket_schema()),
        TextRules {
            min_length: Some(1),
            max_length: Some(100),
            encoding: Encoding::Ascii,
            forbid: vec![pattern(r"(?i)password\s*=")],
            require: vec![pattern("TICKET-[0-9]+")],
        },
    );
    check(&p, json!({"id": "TICKET-7", "priority": 2}), valid());
    check(&p, json!("{\"id\": \"TICKET-7\"}"), valid());
    check(
        &profile(None, TextRules::default()),
        json!("anything"),
        valid(),
    );
}

#[test]
fn schema_violations_carry_their_json_pointer() {
    let p = profile(Some(ticket_schema()), TextRules::default());
    check(
        &p,
        json!({"id": "T-1", "priority": 9, "tags": ["a", 2], "colour": "red"}),
        json!({
            "valid": false,
            "violations": [
                {"rule": "schema", "path": "/id", "message": "\"T-1\" does not match \"^TICKET-[0-9]+$\""},
                {"rule": "schema", "path": "/priority", "message": "9 is greater than the maximum of 5"},
                {"rule": "schema", "path": "/tags/1", "message": "2 is not of type \"string\""},
                {"rule": "schema", "path": "", "message": "Additional properties are not allowed ('colour' was unexpected)"}
            ],
            "violation_count": 4
        }),
    );
    // A string is parsed for the schema; the pointers are into what it holds.
    check(
        &p,
        json!("{\"priority\": 0}"),
        json!({
            "valid": false,
            "violations": [
                {"rule": "schema", "path": "/priority", "message": "0 is less than the minimum of 1"},
                {"rule": "schema", "path": "", "message": "\"id\" is a required property"}
            ],
            "violation_count": 2
        }),
    );
}

#[test]
fn a_string_that_is_not_json_says_where_parsing_stopped() {
    let p = profile(Some(ticket_schema()), TextRules::default());
    check(
        &p,
        json!("{\n  \"id\": \"TICKET-1\",\n  oops\n}"),
        json!({
            "valid": false,
            "violations": [{
                "rule": "schema",
                "path": "",
                "message": "the content is not JSON: key must be a string (line 3, column 3)",
                "at": {"line": 3, "column": 3, "offset": 24}
            }],
            "violation_count": 1
        }),
    );
    // Cut short: the place is the end of the text.
    check(
        &p,
        json!("{\"id\": \"TICKET-1\""),
        json!({
            "valid": false,
            "violations": [{
                "rule": "schema",
                "path": "",
                "message": "the content is not JSON: EOF while parsing an object (line 1, column 18)",
                "at": {"line": 1, "column": 18, "offset": 17}
            }],
            "violation_count": 1
        }),
    );
    // Columns count characters; offsets count bytes.
    check(
        &p,
        json!("[\"é\", x]"),
        json!({
            "valid": false,
            "violations": [{
                "rule": "schema",
                "path": "",
                "message": "the content is not JSON: expected value (line 1, column 7)",
                "at": {"line": 1, "column": 7, "offset": 7}
            }],
            "violation_count": 1
        }),
    );
}

#[test]
fn lengths_count_characters() {
    let p = profile(
        None,
        TextRules {
            min_length: Some(3),
            max_length: Some(5),
            ..TextRules::default()
        },
    );
    check(&p, json!("héllo"), valid());
    check(
        &p,
        json!("hé"),
        json!({
            "valid": false,
            "violations": [{
                "rule": "min_length", "path": "",
                "message": "the text is 2 characters; at least 3 are required"
            }],
            "violation_count": 1
        }),
    );
    check(
        &p,
        json!("ab\ncdéfg"),
        json!({
            "valid": false,
            "violations": [{
                "rule": "max_length", "path": "",
                "message": "the text is 8 characters; at most 5 are allowed",
                "at": {"line": 2, "column": 3, "offset": 5}
            }],
            "violation_count": 1
        }),
    );
}

#[test]
fn every_character_the_encoding_cannot_hold_is_placed() {
    let ascii = profile(
        None,
        TextRules {
            encoding: Encoding::Ascii,
            ..TextRules::default()
        },
    );
    check(
        &ascii,
        json!("café\nnaïve ☃"),
        json!({
            "valid": false,
            "violations": [
                {"rule": "encoding", "path": "", "message": "'é' (U+00E9) is not ASCII",
                 "at": {"line": 1, "column": 4, "offset": 3}},
                {"rule": "encoding", "path": "", "message": "'ï' (U+00EF) is not ASCII",
                 "at": {"line": 2, "column": 3, "offset": 8}},
                {"rule": "encoding", "path": "", "message": "'☃' (U+2603) is not ASCII",
                 "at": {"line": 2, "column": 7, "offset": 13}}
            ],
            "violation_count": 3
        }),
    );
    let latin1 = profile(
        None,
        TextRules {
            encoding: Encoding::Latin1,
            ..TextRules::default()
        },
    );
    check(
        &latin1,
        json!("café ☃"),
        json!({
            "valid": false,
            "violations": [
                {"rule": "encoding", "path": "", "message": "'☃' (U+2603) is not Latin-1",
                 "at": {"line": 1, "column": 6, "offset": 6}}
            ],
            "violation_count": 1
        }),
    );
}

#[test]
fn every_forbidden_match_is_placed_without_quoting_it() {
    let p = profile(
        None,
        TextRules {
            forbid: vec![pattern(r"(?i)password\s*="), pattern("sk-[a-z0-9]{8}")],
            ..TextRules::default()
        },
    );
    check(
        &p,
        json!("user=ann\nPassword = hunter2\nkey sk-abcd1234 password=x"),
        json!({
            "valid": false,
            "violations": [
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"(?i)password\\\\s*=\"",
                 "at": {"line": 2, "column": 1, "offset": 9}},
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"(?i)password\\\\s*=\"",
                 "at": {"line": 3, "column": 17, "offset": 44}},
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"sk-[a-z0-9]{8}\"",
                 "at": {"line": 3, "column": 5, "offset": 32}}
            ],
            "violation_count": 3
        }),
    );
}

#[test]
fn every_required_pattern_must_match() {
    let p = profile(
        None,
        TextRules {
            require: vec![pattern("^TICKET-[0-9]+"), pattern("(?m)^Owner: ")],
            ..TextRules::default()
        },
    );
    check(&p, json!("TICKET-12 broken\nOwner: ann"), valid());
    check(
        &p,
        json!("see TICKET-12"),
        json!({
            "valid": false,
            "violations": [
                {"rule": "require", "path": "", "message": "does not match the required pattern \"^TICKET-[0-9]+\""},
                {"rule": "require", "path": "", "message": "does not match the required pattern \"(?m)^Owner: \""}
            ],
            "violation_count": 2
        }),
    );
}

#[test]
fn json_content_is_judged_as_its_compact_serialization() {
    let p = profile(
        Some(ticket_schema()),
        TextRules {
            max_length: Some(20),
            encoding: Encoding::Ascii,
            forbid: vec![pattern("secret")],
            ..TextRules::default()
        },
    );
    // {"id":"TICKET-1","tags":["secret","ü"]}
    check(
        &p,
        json!({"id": "TICKET-1", "tags": ["secret", "ü"]}),
        json!({
            "valid": false,
            "violations": [
                {"rule": "max_length", "path": "", "message": "the text is 39 characters; at most 20 are allowed",
                 "at": {"line": 1, "column": 21, "offset": 20}},
                {"rule": "encoding", "path": "", "message": "'ü' (U+00FC) is not ASCII",
                 "at": {"line": 1, "column": 36, "offset": 35}},
                {"rule": "forbid", "path": "", "message": "matches the forbidden pattern \"secret\"",
                 "at": {"line": 1, "column": 27, "offset": 26}}
            ],
            "violation_count": 3
        }),
    );
}

#[test]
fn the_list_is_capped_and_the_count_is_not() {
    let p = profile(
        None,
        TextRules {
            encoding: Encoding::Ascii,
            require: vec![pattern("x")],
            ..TextRules::default()
        },
    );
    let report = p.check(&json!("é".repeat(250)));
    assert_eq!(
        (
            report.valid,
            report.violations.len(),
            report.violation_count,
            report.violations.last().and_then(|v| v.at)
        ),
        (
            false,
            MAX_REPORTED,
            251,
            Some(Position {
                line: 1,
                column: 100,
                offset: 198
            })
        )
    );
    assert!(
        report.violations.iter().all(|v| v.rule == Rule::Encoding),
        "what comes after the cap is counted, not listed"
    );
}

#[test]
fn long_messages_are_cut() {
    let p = profile(
        Some(ParameterSchema::any(json!({"type": "string"})).unwrap()),
        TextRules::default(),
    );
    let report = p.check(&json!({"a": "x".repeat(5000)}));
    let message = &report.violations[0].message;
    assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    assert!(message.ends_with('…'), "{message}");
}

#[test]
fn encodings_and_patterns_are_read_with_a_reason_when_they_cannot_be() {
    let encodings: Vec<_> = [
        "utf-8",
        "UTF8",
        "ascii",
        "US-ASCII",
        "latin-1",
        "ISO-8859-1",
    ]
    .into_iter()
    .map(|s| s.parse::<Encoding>().map(Encoding::as_str))
    .collect();
    assert_eq!(
        encodings,
        [
            Ok("utf-8"),
            Ok("utf-8"),
            Ok("ascii"),
            Ok("ascii"),
            Ok("latin-1"),
            Ok("latin-1")
        ]
    );
    assert_eq!(
        "ebcdic".parse::<Encoding>(),
        Err("unknown encoding \"ebcdic\": expected one of utf-8, ascii, latin-1".to_owned())
    );
    let errors: Vec<_> = ["(unclosed", "", "a{99999}{99999}", "(?<=x)y"]
        .into_iter()
        .map(|s| Pattern::new(s).map(|p| p.as_str().to_owned()))
        .collect();
    assert_eq!(
        errors,
        [
            Err("not a regular expression: unclosed group".to_owned()),
            Err("an empty pattern matches every text; leave it out".to_owned()),
            Err("the pattern compiles to more than 1048576 bytes; write a simpler one".to_owned()),
            Err("not a regular expression: look-around, including look-ahead and look-behind, is not supported".to_owned()),
        ]
    );
}

#[test]
fn json_errors_are_placed_on_the_text() {
    let place = |text: &str| {
        let e = serde_json::from_str::<Value>(text).unwrap_err();
        json_error(&e, text)
    };
    assert_eq!(place("x"), ("expected value".to_owned(), 0));
    assert_eq!(place("[1,]"), ("trailing comma".to_owned(), 3));
    assert_eq!(place("[1,\n 2"), ("EOF while parsing a list".to_owned(), 6));
    assert_eq!(place("[1] 2"), ("trailing characters".to_owned(), 4));
}
