//! Fuzzes `tw_core::skill::parse_skill`, which reads SKILL.md files a user or a downloaded skill
//! pack put on disk, so it must never panic whatever the bytes. Beyond "no panic" it checks what
//! skill.rs documents about the result, so a parse that quietly returns nonsense also counts as a
//! crash:
//! - a diagnostic's `line` is a 1-based line of the file (or the one just past its end);
//! - diagnostics come in file order;
//! - there is a manifest exactly when there is no error outside its `chains` (`Severity::Error`:
//!   "the skill cannot be used as written"; `SkillParse::manifest`: "unless an error makes the
//!   skill unusable (one about its `chains` does not)"), so a skill is never dropped without a
//!   diagnostic saying why;
//! - a chain it keeps has a valid name, no structural problem, and reads back from `to_yaml`;
//! - a manifest's fields keep the limits their docs state (name valid and equal to the folder,
//!   description not empty, ...) and its body is the text after the front matter;
//! - the folder only adds the name check: a manifest parsed with a folder is the one parsed
//!   without.
//!
//! Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/skill_md` are the repository's skills and
//! a few malformed files.

#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use tw_core::chain::{check_chain_name, parse_chain_file, structure};
use tw_core::skill::{
    MAX_COMPATIBILITY, MAX_DESCRIPTION, Severity, SkillParse, check_name, parse_skill,
};
use tw_core::target::DomainPattern;

/// The folder the second parse pretends the file is in.
const FOLDER: &str = "research";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let bare = parse_skill(&text, None);
    let in_folder = parse_skill(&text, Some(FOLDER));
    check(&text, None, &bare);
    check(&text, Some(FOLDER), &in_folder);
    if let Some(m) = &in_folder.manifest {
        assert_eq!(
            bare.manifest.as_ref(),
            Some(m),
            "a folder may only take a manifest away, never change it"
        );
    }
});

fn check(text: &str, folder: Option<&str>, parse: &SkillParse) {
    let last_line = text.lines().count() + 1;
    let mut previous = 1;
    let mut shown = String::new();
    for d in &parse.diagnostics {
        assert!(
            (1..=last_line).contains(&d.line),
            "line {} is outside the file's lines 1..={last_line}: {d}",
            d.line
        );
        assert!(
            d.line >= previous,
            "diagnostics out of file order: {:?}",
            parse.diagnostics
        );
        previous = d.line;
        shown.clear();
        let _ = write!(shown, "{d}");
    }

    let blocking = parse
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error && !d.is_about_chains());
    let Some(m) = &parse.manifest else {
        assert!(
            blocking,
            "no manifest and no error to say why: {:?}",
            parse.diagnostics
        );
        return;
    };
    assert!(
        !blocking,
        "a skill with an error has a manifest: {:?}",
        parse.diagnostics
    );
    for c in &m.chains {
        assert!(
            check_chain_name(&c.chain.name).is_ok(),
            "chain {:?}",
            c.chain.name
        );
        assert_eq!(structure(&c.chain), vec![], "chain {:?}", c.chain.name);
        let again = parse_chain_file(&c.chain.to_yaml());
        assert_eq!(
            again.chains.first().map(|a| &a.chain),
            Some(&c.chain),
            "chain {:?} does not read back: {:?}",
            c.chain.name,
            again.diagnostics
        );
    }

    assert!(
        check_name(&m.name).is_ok(),
        "manifest with an invalid name {:?}",
        m.name
    );
    if let Some(folder) = folder {
        assert_eq!(m.name, folder, "manifest name differs from its folder");
    }
    let n = m.description.chars().count();
    assert!(n >= 1, "an empty description: {:?}", m.description);
    if n > MAX_DESCRIPTION {
        assert!(
            parse
                .diagnostics
                .iter()
                .any(|d| d.field.as_deref() == Some("description")),
            "a description of {n} characters without a warning"
        );
    }
    assert_eq!(
        m.description.trim(),
        m.description,
        "description is not trimmed"
    );
    let n = m.compatibility.as_deref().map_or(0, |c| c.chars().count());
    if n > MAX_COMPATIBILITY {
        assert!(
            parse
                .diagnostics
                .iter()
                .any(|d| d.field.as_deref() == Some("compatibility")),
            "compatibility of {n} characters without a warning"
        );
    }
    for parent in &m.inherit_tools_from {
        assert!(
            check_name(parent).is_ok(),
            "inherits from an invalid name {parent:?}"
        );
    }
    for tool in &m.tools {
        assert!(!tool.name.trim().is_empty(), "a tool without a name");
        if let Some(rate) = tool.rate_limit {
            assert!(
                rate.per_minute.is_some() || rate.per_hour.is_some(),
                "a rate limit with no limit on {:?}",
                tool.name
            );
            assert!(
                rate.per_minute != Some(0) && rate.per_hour != Some(0),
                "a zero rate limit on {:?}",
                tool.name
            );
        }
        for pattern in tool.allowed_domains.iter().chain(&tool.blocked_domains) {
            assert!(
                DomainPattern::parse(pattern).is_ok(),
                "domain pattern {pattern:?} on {:?} does not compile",
                tool.name
            );
        }
    }

    assert!(
        text.ends_with(m.body.as_str()),
        "the body is not the end of the file"
    );
    let before = &text[..text.len() - m.body.len()];
    let body_line = before.matches('\n').count() + 1;
    if m.body.is_empty() {
        // No body: the line after the closing `---`, which may be past the end of the file.
        assert!(
            (body_line..=body_line + 1).contains(&m.body_line),
            "empty body at line {}, expected {body_line} or the next",
            m.body_line
        );
    } else {
        assert_eq!(m.body_line, body_line, "body_line is not the body's line");
    }
}
