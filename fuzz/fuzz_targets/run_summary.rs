//! Fuzzes the readers of test-runner and linter output (`tw_core::summary`), which `run_tests`
//! and `run_linter` apply to whatever the workspace's tests and linters print: code the agent
//! may have written, so the input is the agent's. A summary is shown to the agent as the
//! verdict of its run, so beyond "no panic" (overflow checks are on: a count that wraps would
//! turn "many failed" into "none failed"):
//! - a recognised test summary names its framework and keeps at most 50 failing names;
//! - a lint summary keeps at most 200 findings, each at a line and column as printed, and counts
//!   every finding whether kept or not: linting two outputs one after the other counts what
//!   each counts, added up;
//! - both are deterministic.
//!
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/run_summary` are outputs of cargo test,
//! pytest, unittest, go test, jest, vitest, clippy, ruff, eslint and gcc.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tw_core::summary::{parse_lint, parse_tests};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let tests = parse_tests(&text);
    assert_eq!(tests, parse_tests(&text), "not deterministic");
    if let Some(s) = &tests {
        assert!(!s.framework.is_empty(), "a summary without a framework");
        assert!(
            s.failures.len() <= 50,
            "{} failing names kept",
            s.failures.len()
        );
    }

    let lint = parse_lint(&text);
    assert_eq!(lint, parse_lint(&text), "not deterministic");
    assert!(
        lint.diagnostics.len() <= 200,
        "{} findings kept",
        lint.diagnostics.len()
    );
    let counted = lint.errors.saturating_add(lint.warnings);
    let kept = lint
        .diagnostics
        .iter()
        .filter(|d| matches!(d.severity.as_str(), "error" | "warning"))
        .count();
    assert!(
        counted >= kept as u64,
        "{counted} errors and warnings counted, {kept} kept"
    );

    // Split at a line break, each half lints to its share of the whole.
    if let Some(at) = text.find('\n') {
        let (a, b) = (&text[..at], &text[at + 1..]);
        let (la, lb) = (parse_lint(a), parse_lint(b));
        assert_eq!(
            lint.errors,
            la.errors.saturating_add(lb.errors),
            "errors are not counted line by line"
        );
        assert_eq!(
            lint.warnings,
            la.warnings.saturating_add(lb.warnings),
            "warnings are not counted line by line"
        );
    }
});
