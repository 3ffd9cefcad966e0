//! Fuzzes `tw_core::shell`, which takes apart the command lines agents send to `exec` (and the
//! argv of custom tools) so the exec approval layer judges every command they would run. It is
//! a security boundary whose input is written by the agent, so beyond "no panic" it checks what
//! shell.rs promises:
//! - it is total and deterministic: the same line always gives the same answer;
//! - `Parsed::Commands` never holds a command with an empty argv, and `Uncertain` always says why;
//! - what `sh -c LINE` runs is what `LINE` runs: if the wrapped form is understood, the bare line
//!   is understood as the same commands, each with `sh -c` as its outermost wrapper, so a
//!   command (or a redirection) cannot hide inside `sh -c` (an extra nesting level may only
//!   make the wrapped form uncertain, never the other way round);
//! - the result survives a JSON round trip (it is stored in explanations).
//!
//! The input is one command line; every line of it is also taken as one argv element, so
//! `expand_argv` (custom tools' rendered commands) is fuzzed on the same bytes. Run it with
//! `scripts/fuzz`; the seeds in `fuzz/corpus/shell_line` come from the parser's tests and the
//! exec bypass table.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tw_core::shell::{Parsed, expand_argv, parse_command_line};

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let parsed = parse_command_line(&line);
    assert_eq!(parsed, parse_command_line(&line), "not deterministic");
    check(&parsed);

    let wrapped = expand_argv(&["sh".to_owned(), "-c".to_owned(), line.to_string()]);
    check(&wrapped);
    if let Parsed::Commands(inner) = &wrapped {
        let Parsed::Commands(bare) = &parsed else {
            panic!("`sh -c LINE` is understood but LINE is not: {parsed:?} vs {wrapped:?}");
        };
        let unwrapped: Vec<_> = inner
            .iter()
            .map(|c| {
                let mut c = c.clone();
                assert_eq!(
                    c.wrappers.first().map(String::as_str),
                    Some("sh -c"),
                    "a command of `sh -c LINE` without `sh -c` as its wrapper: {c:?}"
                );
                c.wrappers.remove(0);
                c
            })
            .collect();
        assert_eq!(
            &unwrapped, bare,
            "`sh -c LINE` runs other commands than LINE"
        );
    }

    let argv: Vec<String> = line.split('\n').map(str::to_owned).collect();
    let expanded = expand_argv(&argv);
    assert_eq!(expanded, expand_argv(&argv), "not deterministic");
    check(&expanded);
});

fn check(parsed: &Parsed) {
    match parsed {
        Parsed::Commands(commands) => {
            for c in commands {
                assert!(!c.argv.is_empty(), "a command with an empty argv: {c:?}");
            }
        }
        Parsed::Uncertain { reason } => {
            assert!(!reason.trim().is_empty(), "uncertain without a reason");
        }
    }
    let json = serde_json::to_string(parsed).unwrap_or_default();
    let back: Option<Parsed> = serde_json::from_str(&json).ok();
    assert_eq!(back.as_ref(), Some(parsed), "JSON round trip changed it");
}
