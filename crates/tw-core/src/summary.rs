//! Reading what test runners and linters print, so `run_tests` and `run_linter` can answer an
//! agent with counts and the failing items instead of a wall of text. Parsers recognise cargo
//! test, pytest, Python's unittest, go test and jest/vitest summaries, and `path:line:col:`
//! diagnostics (clippy/rustc short format, ruff, flake8, eslint unix format, mypy, gcc). Output
//! they do not recognise yields no summary, never a wrong one. The output is the tested code's,
//! so counts saturate: a printed count near `u64::MAX` cannot wrap a sum round to "0 failed".

use serde::Serialize;

/// What a test run reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TestSummary {
    /// Which runner's summary was recognised.
    pub framework: &'static str,
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed (errors included).
    pub failed: u64,
    /// Tests skipped or ignored.
    pub skipped: u64,
    /// Names of failing tests, as the runner printed them (at most 50).
    pub failures: Vec<String>,
}

/// The most failing test names kept.
const MAX_FAILURES: usize = 50;

/// The number in front of `word` in `text` (`"3 passed"` → 3), if any.
fn count_before(text: &str, words: &[&str]) -> Option<u64> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '=')
        .filter(|t| !t.is_empty())
        .collect();
    let mut found = None;
    for pair in tokens.windows(2) {
        if words.iter().any(|w| pair[1].trim_end_matches('.') == *w)
            && let Ok(n) = pair[0].parse::<u64>()
        {
            found = Some(found.unwrap_or(0_u64).saturating_add(n));
        }
    }
    found
}

/// Recognises the summary of a test run in its combined output.
pub fn parse_tests(output: &str) -> Option<TestSummary> {
    cargo(output)
        .or_else(|| pytest(output))
        .or_else(|| jest(output))
        .or_else(|| go(output))
        .or_else(|| unittest(output))
}

fn cargo(output: &str) -> Option<TestSummary> {
    let mut s = TestSummary {
        framework: "cargo test",
        ..TestSummary::default()
    };
    let mut seen = false;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("test result: ") {
            seen = true;
            let count = |words: &[&str]| count_before(rest, words).unwrap_or(0);
            s.passed = s.passed.saturating_add(count(&["passed"]));
            s.failed = s.failed.saturating_add(count(&["failed"]));
            s.skipped = s.skipped.saturating_add(count(&["ignored"]));
        } else if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
            && s.failures.len() < MAX_FAILURES
        {
            s.failures.push(name.to_owned());
        }
    }
    seen.then_some(s)
}

fn pytest(output: &str) -> Option<TestSummary> {
    // `==== 2 failed, 3 passed, 1 skipped in 0.12s ====`
    let line = output.lines().rev().find(|l| {
        let t = l.trim();
        t.starts_with('=')
            && t.ends_with('=')
            && t.contains(" in ")
            && t.chars().any(|c| c.is_ascii_digit())
    })?;
    let failures = output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FAILED "))
        .map(|l| l.split(" - ").next().unwrap_or(l).to_owned())
        .take(MAX_FAILURES)
        .collect();
    Some(TestSummary {
        framework: "pytest",
        passed: count_before(line, &["passed"]).unwrap_or(0),
        failed: count_before(line, &["failed", "error", "errors"]).unwrap_or(0),
        skipped: count_before(line, &["skipped", "xfailed", "deselected"]).unwrap_or(0),
        failures,
    })
}

fn jest(output: &str) -> Option<TestSummary> {
    // jest: `Tests:       1 failed, 4 passed, 5 total`; vitest: `Tests  1 failed | 4 passed (5)`
    let line = output
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Tests:") || (l.starts_with("Tests ") && l.contains("passed")))?;
    let line = line.replace('|', ",");
    Some(TestSummary {
        framework: "jest",
        passed: count_before(&line, &["passed"]).unwrap_or(0),
        failed: count_before(&line, &["failed"]).unwrap_or(0),
        skipped: count_before(&line, &["skipped", "todo"]).unwrap_or(0),
        failures: output
            .lines()
            .filter_map(|l| l.trim().strip_prefix("● "))
            .map(str::to_owned)
            .take(MAX_FAILURES)
            .collect(),
    })
}

fn go(output: &str) -> Option<TestSummary> {
    let mut s = TestSummary {
        framework: "go test",
        ..TestSummary::default()
    };
    let mut seen = false;
    for line in output.lines().map(str::trim) {
        if line.starts_with("--- PASS: ") {
            seen = true;
            s.passed += 1;
        } else if let Some(name) = line.strip_prefix("--- FAIL: ") {
            seen = true;
            s.failed += 1;
            if s.failures.len() < MAX_FAILURES {
                s.failures
                    .push(name.split_whitespace().next().unwrap_or(name).to_owned());
            }
        } else if line.starts_with("--- SKIP: ") {
            seen = true;
            s.skipped += 1;
        } else if line.starts_with("ok  \t") || line.starts_with("FAIL\t") {
            seen = true;
        }
    }
    seen.then_some(s)
}

fn unittest(output: &str) -> Option<TestSummary> {
    // `Ran 5 tests in 0.001s` then `OK`, `OK (skipped=1)` or `FAILED (failures=1, errors=1)`
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let ran_at = lines
        .iter()
        .rposition(|l| l.starts_with("Ran ") && l.contains(" test"))?;
    let ran: u64 = lines[ran_at].split_whitespace().nth(1)?.parse().ok()?;
    let verdict = lines[ran_at + 1..].iter().find(|l| !l.is_empty())?;
    let field = |name: &str| {
        verdict
            .split(['(', ')', ',', ' '])
            .find_map(|part| {
                part.strip_prefix(name)?
                    .strip_prefix('=')?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    let failed = field("failures").saturating_add(field("errors"));
    let skipped = field("skipped").saturating_add(field("expected failures"));
    Some(TestSummary {
        framework: "unittest",
        passed: ran.saturating_sub(failed.saturating_add(skipped)),
        failed,
        skipped,
        failures: lines
            .iter()
            .filter_map(|l| {
                l.strip_prefix("FAIL: ")
                    .or_else(|| l.strip_prefix("ERROR: "))
            })
            .map(|l| (*l).to_owned())
            .take(MAX_FAILURES)
            .collect(),
    })
}

/// One finding of a linter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file, as printed.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, when printed.
    pub column: Option<u64>,
    /// `error`, `warning`, or `note` (linters that print no level: `error`).
    pub severity: String,
    /// The message, with any rule code.
    pub message: String,
}

/// What a lint run reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LintSummary {
    /// Findings at error level.
    pub errors: u64,
    /// Findings at warning level.
    pub warnings: u64,
    /// The findings (at most 200).
    pub diagnostics: Vec<Diagnostic>,
}

/// The most diagnostics kept.
const MAX_DIAGNOSTICS: usize = 200;

/// Collects every `path:line[:col]: message` line of a linter's output.
pub fn parse_lint(output: &str) -> LintSummary {
    let mut s = LintSummary::default();
    for line in output.lines() {
        let Some(d) = diagnostic(line.trim_end()) else {
            continue;
        };
        match d.severity.as_str() {
            "warning" => s.warnings += 1,
            "note" | "help" | "info" => {}
            _ => s.errors += 1,
        }
        if s.diagnostics.len() < MAX_DIAGNOSTICS {
            s.diagnostics.push(d);
        }
    }
    s
}

fn diagnostic(line: &str) -> Option<Diagnostic> {
    let mut parts = line.splitn(4, ':');
    let path = parts.next()?.trim();
    if path.is_empty() || path.contains(' ') {
        return None;
    }
    let line_no: u64 = parts.next()?.trim().parse().ok()?;
    let third = parts.next()?;
    let (column, rest) = match third.trim().parse::<u64>() {
        Ok(col) => (Some(col), parts.next().unwrap_or("").trim()),
        Err(_) => {
            let rest = match parts.next() {
                Some(more) => format!("{third}:{more}"),
                None => third.to_owned(),
            };
            return Some(finish(path, line_no, None, rest.trim()));
        }
    };
    Some(finish(path, line_no, column, rest))
}

fn finish(path: &str, line: u64, column: Option<u64>, rest: &str) -> Diagnostic {
    // ASCII lowercasing keeps byte offsets, so a prefix found in `lower` cuts `rest` too.
    let lower = rest.to_ascii_lowercase();
    let level = ["error", "warning", "note", "help", "info"]
        .into_iter()
        .find(|level| {
            lower
                .strip_prefix(level)
                .is_some_and(|m| m.starts_with(':') || m.starts_with('['))
        });
    let (severity, message) = match level {
        Some(level) => (level, rest[level.len()..].trim_start_matches(':').trim()),
        None => ("error", rest),
    };
    Diagnostic {
        path: path.to_owned(),
        line,
        column,
        severity: severity.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn tests(output: &str, expect: Option<(&'static str, u64, u64, u64, &[&str])>) {
        let got =
            parse_tests(output).map(|s| (s.framework, s.passed, s.failed, s.skipped, s.failures));
        let expect = expect.map(|(f, p, x, s, names)| {
            (f, p, x, s, names.iter().map(|n| (*n).to_owned()).collect())
        });
        assert_eq!(got, expect, "{output}");
    }

    #[test]
    fn test_runner_summaries() {
        tests(
            "running 3 tests\ntest a ... ok\ntest m::b ... FAILED\ntest c ... ignored\n\n\
             test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out\n\
             running 2 tests\ntest result: ok. 2 passed; 0 failed; 0 ignored\n",
            Some(("cargo test", 3, 1, 1, &["m::b"])),
        );
        tests(
            "tests/t.py::test_x FAILED\nFAILED tests/t.py::test_x - assert 1 == 2\n\
             ======= 1 failed, 3 passed, 2 skipped in 0.05s =======\n",
            Some(("pytest", 3, 1, 2, &["tests/t.py::test_x"])),
        );
        tests(
            "===== 4 passed in 0.01s =====",
            Some(("pytest", 4, 0, 0, &[])),
        );
        tests(
            "  ● adds > negative\nTests:       1 failed, 4 passed, 5 total\n",
            Some(("jest", 4, 1, 0, &["adds > negative"])),
        );
        tests(
            "--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.01s)\nFAIL\tpkg\t0.02s\n",
            Some(("go test", 1, 1, 0, &["TestB"])),
        );
        tests(
            "FAIL: test_b (t.T.test_b)\n----\nRan 5 tests in 0.001s\n\nFAILED (failures=1, skipped=1)\n",
            Some(("unittest", 3, 1, 1, &["test_b (t.T.test_b)"])),
        );
        tests(
            "Ran 2 tests in 0.000s\n\nOK\n",
            Some(("unittest", 2, 0, 0, &[])),
        );
        tests("compiling...\nsomething else\n", None);
    }

    /// Found by fuzzing (`fuzz/corpus/run_summary/overflow-*.txt`): counts a test printed near
    /// `u64::MAX` overflowed the sums (a panic with overflow checks, and otherwise a wrap that
    /// turned many failures into none).
    #[test]
    fn huge_counts_saturate_instead_of_wrapping_to_no_failures() {
        const MAX: u64 = u64::MAX;
        tests(
            "test result: FAILED. 18446744073709551615 passed; 18446744073709551615 failed; 0 ignored\n\
             test result: FAILED. 1 passed; 1 failed; 0 ignored\n",
            Some(("cargo test", MAX, MAX, 0, &[])),
        );
        tests(
            "==== 18446744073709551615 failed, 1 failed, 9 passed in 0.1s ====\n",
            Some(("pytest", 9, MAX, 0, &[])),
        );
        tests(
            "Ran 18446744073709551615 tests in 0.1s\n\n\
             FAILED (failures=18446744073709551615, errors=1, skipped=18446744073709551615, expected failures=1)\n",
            Some(("unittest", 0, MAX, MAX, &[])),
        );
    }

    #[test]
    fn lint_diagnostics() {
        let out = "src/lib.rs:3:5: warning: unused variable: `x`\n\
                   app.py:10:1: F401 'os' imported but unused\n\
                   main.c:7: error: expected ';'\n\
                   Found 2 errors.\n\
                   src/a.ts:1:1: note: see here\n";
        let s = parse_lint(out);
        assert_eq!((s.errors, s.warnings), (2, 1));
        assert_eq!(
            s.diagnostics,
            vec![
                Diagnostic {
                    path: "src/lib.rs".into(),
                    line: 3,
                    column: Some(5),
                    severity: "warning".into(),
                    message: "unused variable: `x`".into(),
                },
                Diagnostic {
                    path: "app.py".into(),
                    line: 10,
                    column: Some(1),
                    severity: "error".into(),
                    message: "F401 'os' imported but unused".into(),
                },
                Diagnostic {
                    path: "main.c".into(),
                    line: 7,
                    column: None,
                    severity: "error".into(),
                    message: "expected ';'".into(),
                },
                Diagnostic {
                    path: "src/a.ts".into(),
                    line: 1,
                    column: Some(1),
                    severity: "note".into(),
                    message: "see here".into(),
                },
            ]
        );
        assert_eq!(parse_lint("all good\n"), LintSummary::default());
    }
}
