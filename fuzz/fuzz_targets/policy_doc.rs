//! Fuzzes policy documents (`tw_core::policy`): parsing a policy file and compiling it, with the
//! examples its rules carry, then judging calls with the result. Policy files are written by
//! administrators but also arrive with downloaded setups and through the admin API's reload, and
//! a policy that panics the runtime is a denial of service at start, so none may. Beyond that:
//! - every error carries a line (and column) inside the document, as `PolicyError` promises;
//! - compiling is deterministic: the same document compiles to the same rules (`Policy::diff`
//!   is empty) or fails with the same errors;
//! - a compiled policy judges every sample call without panicking, the same way twice, and its
//!   decision is the strictest layer's;
//! - a document that compiles alone also compiles next to the built-in policy, and a document
//!   compiled together with itself judges exactly as it does alone (lists add up, and where two
//!   documents set one switch the stricter wins, so a repeat changes nothing);
//! - `policy check`'s lint runs on it without panicking.
//!
//! Programs are resolved lexically (only absolute paths resolve), since tw-core does no I/O.
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/policy_doc` are the built-in policy,
//! the documentation's example and the policies of the tests, valid and malformed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tw_core::ToolDefinition;
use tw_core::policy::compile::{BUILTIN_FILE, BUILTIN_POLICY};
use tw_core::policy::{Policy, PolicyDoc, PolicySource, lint::lint};
use tw_fuzz::{assert_located, env, judge_samples, tools};

const FILE: &str = "policy.toml";

fn compile_with(sources: &[(&str, &str, &PolicyDoc)]) -> Result<Policy, Vec<tw_core::PolicyError>> {
    let sources: Vec<PolicySource<'_>> = sources
        .iter()
        .map(|(file, text, doc)| PolicySource { file, text, doc })
        .collect();
    Policy::compile(&sources, env())
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let doc = match PolicyDoc::parse(&text, FILE) {
        Ok(doc) => doc,
        Err(e) => {
            assert_eq!(e.file, FILE, "an error names another file: {e}");
            assert_located(&text, e.line, e.column, &e);
            return;
        }
    };
    let alone = compile_with(&[(FILE, &text, &doc)]);
    let again = compile_with(&[(FILE, &text, &doc)]);
    let policy = match (alone, again) {
        (Ok(a), Ok(b)) => {
            assert_eq!(
                a.diff(&b),
                Vec::<String>::new(),
                "compiling is not deterministic"
            );
            a
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "compiling is not deterministic");
            assert!(!a.is_empty(), "compile failed without an error");
            for e in &a {
                if e.file == FILE {
                    assert_located(&text, e.line, e.column, e);
                }
            }
            return;
        }
        (a, b) => panic!(
            "compiling is not deterministic: {:?} then {:?}",
            a.err(),
            b.err()
        ),
    };

    let judged = judge_samples(&policy);
    assert_eq!(
        judged,
        judge_samples(&policy),
        "judging is not deterministic"
    );
    let defs: Vec<ToolDefinition> = tools().iter().map(|t| t.definition.clone()).collect();
    let _ = lint(&policy, &defs);

    let twice = compile_with(&[(FILE, &text, &doc), ("again.toml", &text, &doc)])
        .unwrap_or_else(|e| panic!("a document that compiles does not compile twice: {e:?}"));
    let judged_twice = judge_samples(&twice);
    for (one, two) in judged.iter().zip(&judged_twice) {
        assert_eq!(
            one.decision.decision, two.decision.decision,
            "a document repeated judges otherwise than alone: {one:?} vs {two:?}"
        );
    }

    let builtin = PolicyDoc::parse(BUILTIN_POLICY, BUILTIN_FILE)
        .unwrap_or_else(|e| panic!("the built-in policy: {e}"));
    let with_builtin = compile_with(&[
        (BUILTIN_FILE, BUILTIN_POLICY, &builtin),
        (FILE, &text, &doc),
    ]);
    if let Err(e) = with_builtin {
        panic!("a document that compiles alone does not compile with the built-in policy: {e:?}");
    }
});
