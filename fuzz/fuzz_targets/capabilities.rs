//! Fuzzes the two readers of the capability classifier's input (`tw_core::capability`): the
//! capability catalog (YAML, `config/tool_capabilities.yaml` or the file a config names with
//! `capabilities_file`) and the classifying model's answer (`parse_chat_answer`), which comes
//! from whatever OpenAI-compatible endpoint the config names, so it is the endpoint's to choose.
//! Each input is read as a catalog, as a whole chat-completions response, and as the content of
//! the model's message. Beyond "no panic":
//! - a catalog's errors come sorted, each at a line of the file;
//! - a catalog that loads has valid capability names, and classifying the built-in tools with it
//!   (static map, then the heuristic) only gives its capabilities, with confidences from 0 to 1;
//! - a model's answer yields known capabilities only, each once, with confidences from 0 to 1,
//!   most confident first (then by name), or an error that says why.
//!
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/capabilities` are the built-in catalog,
//! the catalogs and model answers of the tests, and answers the way models write them (fenced,
//! with prose around, refusing).

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tw_core::capability::llm::parse_chat_answer;
use tw_core::capability::{
    Assigned, Catalog, check_capability_name, classify_offline, parse_catalog,
};
use tw_fuzz::{assert_located, tools};

static BUILTIN: LazyLock<Catalog> = LazyLock::new(|| {
    parse_catalog(tw_runtime::capabilities::BUILTIN_CATALOG)
        .unwrap_or_else(|e| panic!("the built-in catalog: {e:?}"))
});

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_catalog(&text) {
        Err(errors) => {
            assert!(!errors.is_empty(), "a catalog refused without an error");
            assert!(
                errors.windows(2).all(|w| w[0].line <= w[1].line),
                "errors out of line order: {errors:?}"
            );
            for e in &errors {
                assert_located(&text, Some(e.line), None, e);
            }
        }
        Ok(catalog) => {
            for name in catalog.names() {
                assert!(
                    check_capability_name(name).is_ok(),
                    "capability name {name:?}"
                );
            }
            for t in tools() {
                let c = classify_offline(&t.definition, &catalog);
                check_assigned(&c.capabilities, &catalog, false);
            }
        }
    }

    if let Ok(response) = serde_json::from_slice::<Value>(data) {
        answer(&response);
    }
    answer(&json!({"choices": [{"message": {"role": "assistant", "content": text}}]}));
});

fn answer(response: &Value) {
    match parse_chat_answer(response, &BUILTIN) {
        Ok(assigned) => check_assigned(&assigned, &BUILTIN, true),
        Err(why) => assert!(!why.trim().is_empty(), "an answer refused without a reason"),
    }
}

fn check_assigned(assigned: &[Assigned], catalog: &Catalog, ordered: bool) {
    for (i, a) in assigned.iter().enumerate() {
        assert!(
            catalog.contains(&a.capability),
            "{:?} is not in the catalog",
            a.capability
        );
        assert!(
            (0.0..=1.0).contains(&a.confidence),
            "confidence {} for {}",
            a.confidence,
            a.capability
        );
        assert!(
            !assigned[..i].iter().any(|b| b.capability == a.capability),
            "{} assigned twice",
            a.capability
        );
    }
    if ordered {
        assert!(
            assigned.windows(2).all(|w| {
                w[0].confidence > w[1].confidence
                    || (w[0].confidence == w[1].confidence && w[0].capability < w[1].capability)
            }),
            "not most confident first: {assigned:?}"
        );
    }
}
