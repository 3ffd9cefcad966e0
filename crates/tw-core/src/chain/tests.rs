//! The chain model: references, templates, `when` expressions, dependency order and the
//! structural checks, each as a table of inputs and what they give.

use std::collections::HashMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

fn scope_with<'a>(input: &'a Value, steps: &'a HashMap<String, StepValue>) -> Scope<'a> {
    Scope {
        input,
        steps,
        item: None,
    }
}

fn steps(done: &[(&str, StepStatus, Value)]) -> HashMap<String, StepValue> {
    done.iter()
        .map(|(id, status, output)| {
            (
                (*id).to_owned(),
                StepValue {
                    status: *status,
                    output: output.clone(),
                },
            )
        })
        .collect()
}

#[test]
fn references_parse_to_their_canonical_spelling_or_say_what_is_wrong() {
    let cases: &[(&str, Result<&str, &str>)] = &[
        ("$input", Ok("$input")),
        ("$input.query", Ok("$input.query")),
        (
            "$steps.search.output.results[0].url",
            Ok("$steps.search.output.results[0].url"),
        ),
        ("$steps.search.status", Ok("$steps.search.status")),
        // The seed's shorthands.
        ("$step1.output.text", Ok("$steps.step1.output.text")),
        (
            "$search.results[0].url",
            Ok("$steps.search.output.results[0].url"),
        ),
        ("$item", Ok("$item")),
        ("$item[\"a b\"]", Ok("$item[\"a b\"]")),
        ("$index", Ok("$index")),
        ("input", Err("a reference starts with '$'")),
        ("$", Err("a reference names")),
        ("$steps", Err("`$steps` is followed by a step id")),
        (
            "$steps.a.result",
            Err("`$steps.a` is followed by `.output` or `.status`"),
        ),
        (
            "$steps.a.status.x",
            Err("a step's status is a string and has no fields"),
        ),
        ("$index.x", Err("`$index` is a number and has no fields")),
        ("$input.", Err("a field name must follow '.'")),
        ("$input[x]", Err("\"x\" is not an index")),
        ("$input[0", Err("an unclosed '['")),
        ("$5", Err("is not a step id")),
        ("$input.a b", Err("unexpected \" b\" after the reference")),
    ];
    for (text, want) in cases {
        let got = Ref::parse(text)
            .map(|r| r.to_string())
            .map_err(|e| e.message);
        match (want, &got) {
            (Ok(w), Ok(g)) => assert_eq!(w, g, "{text}"),
            (Err(w), Err(g)) => assert!(g.contains(w), "{text}: {g}"),
            _ => panic!("{text}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn templates_keep_types_for_whole_references_and_write_text_inside_strings() {
    let input = json!({"query": "rust", "n": 3, "list": [1, 2]});
    let done = steps(&[
        (
            "search",
            StepStatus::Completed,
            json!({"results": [{"url": "http://a/"}]}),
        ),
        ("gone", StepStatus::Failed, Value::Null),
    ]);
    let scope = scope_with(&input, &done);
    let cases: &[(Value, Result<Value, &str>)] = &[
        (json!("$input.n"), Ok(json!(3))),
        (json!("$input.list"), Ok(json!([1, 2]))),
        (
            json!("q=${input.query}&n=${input.n}"),
            Ok(json!("q=rust&n=3")),
        ),
        (
            json!({"url": "$search.results[0].url", "k": [1, "$input.n"]}),
            Ok(json!({"url": "http://a/", "k": [1, 3]})),
        ),
        (
            json!("costs $5 and $$HOME"),
            Ok(json!("costs $5 and $HOME")),
        ),
        (json!("echo $HOME"), Ok(json!("echo $HOME"))),
        (
            json!("$search.results[1].url"),
            Err("index 1 is past the end of $steps.search.output.results (1 items)"),
        ),
        (
            json!("$input.missing"),
            Err("$input has no field \"missing\""),
        ),
        (
            json!("$input.query.x"),
            Err("$input.query is a string, not an object"),
        ),
        (
            json!("$gone.x"),
            Err("step \"gone\" has no output (it is failed)"),
        ),
        (json!("$later"), Err("step \"later\" has not run")),
    ];
    for (written, want) in cases {
        let t = Template::from_value(written).unwrap();
        let got = t.render(&scope).map_err(|e| e.message);
        match (want, &got) {
            (Ok(w), Ok(g)) => assert_eq!(w, g, "{written}"),
            (Err(w), Err(g)) => assert!(g.contains(w), "{written}: {g}"),
            _ => panic!("{written}: want {want:?}, got {got:?}"),
        }
        // Written back and read again, the template is the same.
        assert_eq!(Template::from_value(&t.to_value()).unwrap(), t, "{written}");
    }
    let err = Template::from_value(&json!({"a": ["x", "${input.q"]})).unwrap_err();
    assert_eq!(err.0, "/a/1");
    assert!(err.1.message.contains("an unclosed '${'"), "{}", err.1);
    let err = Template::from_value(&json!("$5")).unwrap_err();
    assert!(
        err.1
            .message
            .contains("write '${...}' for one inside text, '$$' for a '$'"),
        "{}",
        err.1
    );
}

#[test]
fn when_expressions_read_references_leniently() {
    let input = json!({"n": 3, "s": "b", "flag": true, "empty": []});
    let done = steps(&[
        (
            "a",
            StepStatus::Completed,
            json!({"count": 0, "items": [1]}),
        ),
        ("b", StepStatus::Failed, Value::Null),
    ]);
    let scope = scope_with(&input, &done);
    let cases: &[(&str, bool)] = &[
        ("$input.flag", true),
        ("!$input.flag", false),
        ("$input.empty", false),
        ("$input.n > 2", true),
        ("$input.n >= 3 && $input.s == 'b'", true),
        ("$input.n < 3 || $input.s != \"b\"", false),
        ("$a.count == 0", true),
        ("$a.items", true),
        ("$a.missing == null", true),
        ("$b.x", false),
        ("$steps.b.status == 'failed'", true),
        ("$steps.zz.status == null", true),
        ("$input.n > 'x'", false),
        ("!($input.n == 3 && false) && (null || 1.5)", true),
        ("3 == 3.0", true),
        ("!!$input.flag", true),
        ("!$input.n == 3", false),
        ("(!$input.flag) == false", true),
    ];
    for (text, want) in cases {
        let e = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(e.eval(&scope), *want, "{text}");
        let again = Expr::parse(&e.to_string()).unwrap();
        assert_eq!(again, e, "{text} -> {e}");
    }
    let errors: &[(&str, &str)] = &[
        ("", "at byte 0: a value or reference is missing"),
        ("$input.n >", "at byte 10: a value or reference is missing"),
        ("($input.n", "at byte 9: ')' expected"),
        ("'abc", "at byte 0: an unclosed string"),
        ("$input.n = 1", "at byte 9: unexpected \"= 1\""),
        ("yes", "at byte 0: unexpected 'y'"),
        ("1.2.3", "at byte 0: \"1.2.3\" is not a number"),
    ];
    for (text, want) in errors {
        let got = Expr::parse(text).unwrap_err().to_string();
        assert!(got.starts_with(want), "{text}: {got}");
    }
    // As deep as allowed in nots, it is written back no deeper (the fuzzer found `!(!(...))`).
    let nots = format!("{}0", "!".repeat(32));
    let e = Expr::parse(&nots).unwrap();
    assert_eq!(e.to_string(), nots);
    assert_eq!(Expr::parse(&e.to_string()).unwrap(), e);
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    assert!(
        Expr::parse(&deep)
            .unwrap_err()
            .message
            .contains("nested more than 32 deep")
    );
    let long = "!".repeat(2000);
    assert!(
        Expr::parse(&long)
            .unwrap_err()
            .message
            .contains("at most 1024 bytes")
    );
}

fn research() -> ChainBuilder {
    Chain::builder("research")
        .description("search, fetch the first result, summarize")
        .input(json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}))
        .step(StepBuilder::new("search", "web_search").arg("query", "$input.query"))
        .step(StepBuilder::new("fetch", "http_fetch").arg("url", "$search.results[0].url").arg("as", "markdown"))
        .step(
            StepBuilder::new("summarize", "write_file")
                .arg("path", "summary.md")
                .arg("content", "# ${input.query}\n\n${steps.fetch.output.content}")
                .when("$steps.fetch.output.status == 200")
                .on_error(OnError::Retry { max: 2, backoff_ms: 100 }),
        )
        .output(json!({"summary": "$summarize", "source": "$search.results[0].url"}))
}

#[test]
fn the_builder_gives_the_same_chain_its_yaml_does() {
    let chain = research().build().unwrap();
    assert_eq!(chain.order().unwrap(), vec![0, 1, 2]);
    assert_eq!(
        chain
            .step("summarize")
            .unwrap()
            .needs()
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["fetch"]
    );
    let yaml = chain.to_yaml();
    assert!(
        yaml.contains("url: $steps.search.output.results[0].url"),
        "{yaml}"
    );
    assert!(
        yaml.contains("when: $steps.fetch.output.status == 200"),
        "{yaml}"
    );
}

#[test]
fn structural_problems_are_each_reported_where_they_are() {
    let bad = Chain::builder("Bad")
        .step(StepBuilder::new("a", "t").arg("x", "$b").depends_on("zz"))
        .step(
            StepBuilder::new("b", "t")
                .arg("x", "$a.y")
                .arg("i", "$item"),
        )
        .step(StepBuilder::new("a", "t"))
        .step(
            StepBuilder::new("c", "t")
                .on_error(OnError::Retry {
                    max: 0,
                    backoff_ms: 0,
                })
                .for_each("$input.list", 0),
        )
        .build()
        .unwrap_err();
    let want = [
        "name: \"Bad\" is not a chain name",
        "steps[0].depends_on: no step has id \"zz\"",
        "steps[1].arguments/i: $item: `$item` and `$index` exist only in a step with `for_each`",
        "steps[2].id: step id \"a\" is used twice",
        "steps[3].for_each.max_parallel: must be 1 to 64",
        "steps[3].on_error.retry.max: must be 1 to 10",
    ];
    for w in want {
        assert!(
            bad.iter().any(|p| p.starts_with(w)),
            "missing {w:?} in {bad:#?}"
        );
    }
}

#[test]
fn a_cycle_names_the_steps_on_it_and_not_those_waiting_behind_it() {
    let bad = Chain::builder("c")
        .step(StepBuilder::new("start", "t"))
        .step(StepBuilder::new("a", "t").arg("x", "$b").arg("y", "$start"))
        .step(StepBuilder::new("b", "t").when("$steps.c.status == 'completed'"))
        .step(StepBuilder::new("c", "t").depends_on("a"))
        .step(StepBuilder::new("after", "t").arg("x", "$c"))
        .step(StepBuilder::new("me", "t").arg("x", "${me.n}"))
        .build()
        .unwrap_err();
    assert_eq!(
        bad,
        vec![
            "steps[5].arguments/x: $steps.me.output.n: a step cannot use its own output".to_owned(),
            "steps[1]: steps wait for each other in a cycle: a, b, c".to_owned(),
        ]
    );
}

#[test]
fn a_call_read_from_the_wire_cannot_file_itself_under_a_chain_run() {
    let call: crate::ToolCall = serde_json::from_value(json!({
        "tool": "write_file",
        "arguments": {},
        "caller": {"agent_id": "a"},
        "execution_id": "e1",
        "trace_id": "t1",
        "chain": {"run_id": "someone-elses-run", "step": "s", "attempt": 1, "depth": 1}
    }))
    .unwrap();
    assert_eq!(call.chain, None);
    assert!(serde_json::to_value(&call).unwrap().get("chain").is_none());
}
