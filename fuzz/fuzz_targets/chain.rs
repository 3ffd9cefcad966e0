//! Fuzzes the chain format (`tw_core::chain`): chain files and SKILL.md `chains:` are written by
//! people and downloaded with skill packs, and the references and `when` expressions in them
//! are read again on every run, so none of it may panic whatever the bytes. Beyond "no panic" it
//! checks what chain/parse.rs, reference.rs and expr.rs promise:
//! - every diagnostic's line is a line of the file, and they come in line order;
//! - a chain is returned only without errors: it passes `structure` and its name is a chain name;
//! - a returned chain written with `to_yaml` reads back, with no diagnostic, to the same chain,
//!   and its line map only names lines of the file;
//! - `Expr::parse`, `Ref::parse` and `Template::from_value` (on the text as one string, and on
//!   it as JSON when it is JSON) read what they write back (`Display`, `to_value`) to the same
//!   value.
//!
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/chain` are good chain files in each
//! shape and a few malformed ones.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tw_core::chain::{
    Expr, Ref, Template, check_chain_name, parse_chain_file, structure, yaml::escape_pointer,
};
use tw_core::skill::Severity;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    chain_file(&text);
    let first = text.lines().next().unwrap_or("");
    if let Ok(e) = Expr::parse(first) {
        let written = e.to_string();
        assert_eq!(
            Expr::parse(&written).as_ref(),
            Ok(&e),
            "{first:?} written as {written:?}"
        );
    }
    if let Ok(r) = Ref::parse(first) {
        let written = r.to_string();
        assert_eq!(
            Ref::parse(&written).as_ref(),
            Ok(&r),
            "{first:?} written as {written:?}"
        );
    }
    template(&Value::String(text.to_string()));
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        template(&v);
    }
});

fn chain_file(text: &str) {
    let parse = parse_chain_file(text);
    let last = text.lines().count().max(1);
    let mut previous = 1;
    for d in &parse.diagnostics {
        assert!(
            (1..=last).contains(&d.line),
            "line {} is outside the file's lines 1..={last}: {d}",
            d.line
        );
        assert!(
            d.line >= previous,
            "diagnostics out of line order: {:?}",
            parse.diagnostics
        );
        previous = d.line;
    }
    if parse.chains.is_empty() {
        return;
    }
    for source in &parse.chains {
        let chain = &source.chain;
        assert!(
            check_chain_name(&chain.name).is_ok(),
            "a chain named {:?} was returned",
            chain.name
        );
        assert_eq!(
            structure(chain),
            vec![],
            "a chain with structural problems was returned"
        );
        for (i, step) in chain.steps.iter().enumerate() {
            for pointer in [
                format!("/steps/{i}"),
                format!("/steps/{i}/arguments/{}", escape_pointer(&step.id)),
            ] {
                let line = source.line_of(&pointer);
                assert!((1..=last).contains(&line), "{pointer} is on line {line}");
            }
        }
        let yaml = chain.to_yaml();
        let again = parse_chain_file(&yaml);
        assert!(
            again
                .diagnostics
                .iter()
                .all(|d| d.severity != Severity::Error),
            "to_yaml wrote what does not read: {:?}\n{yaml}",
            again.diagnostics
        );
        assert_eq!(again.chains.len(), 1, "{yaml}");
        assert_eq!(&again.chains[0].chain, chain, "{yaml}");
    }
}

fn template(value: &Value) {
    let Ok(t) = Template::from_value(value) else {
        return;
    };
    let written = t.to_value();
    assert_eq!(
        Template::from_value(&written).as_ref(),
        Ok(&t),
        "{value} written as {written}"
    );
}
