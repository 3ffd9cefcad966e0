//! The envelope's rules: capabilities reach tools registered after the skill was written,
//! overrides beat both the manifest and the classifier, and an entry's domain rules and rate
//! limit apply to the calls it lets through.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::ToolSpec;
use crate::skill::{SkillManifest, parse_skill};

fn skill(text: &str, name: &str) -> SkillManifest {
    let text = format!("---\nname: {name}\ndescription: d\n{text}---\n");
    let p = parse_skill(&text, Some(name));
    p.manifest.unwrap_or_else(|| panic!("{:?}", p.diagnostics))
}

fn def(name: &str, group: &str) -> ToolDefinition {
    serde_json::from_value::<ToolSpec>(json!({
        "name": name,
        "description": "A tool.",
        "category": "network",
        "group": group,
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}
    }))
    .unwrap()
    .definition
}

fn index(tools: &[(&str, &[&str])]) -> CapabilityIndex {
    CapabilityIndex::new(tools.iter().map(|(t, caps)| {
        (
            (*t).to_owned(),
            caps.iter().map(|c| (*c).to_owned()).collect(),
        )
    }))
}

fn names(env: &Envelopes<'_>, skill: &str) -> Vec<(String, Provenance)> {
    env.resolve(skill)
        .unwrap()
        .iter()
        .map(|r| (r.name.to_owned(), r.via.to_provenance()))
        .collect()
}

#[test]
fn a_newly_registered_tool_is_picked_up_by_a_skill_whose_permissions_match() {
    let map = SkillMap::new(&[skill(
        "tools: [read_file]\npermissions: [web_read]\n",
        "research",
    )]);
    let none = Overrides::default();
    let before = index(&[
        ("read_file", &["filesystem_read"]),
        ("http_fetch", &["web_read"]),
    ]);
    let env = Envelopes {
        skills: &map,
        capabilities: &before,
        overrides: &none,
    };
    assert_eq!(
        names(&env, "research"),
        vec![
            ("read_file".into(), Provenance::Manifest),
            (
                "http_fetch".into(),
                Provenance::Capability("web_read".into())
            ),
        ]
    );
    assert!(matches!(
        env.validate_access("research", "rss_reader", "web", AccessLevel::Standard),
        Err(Refusal::NotInSkill { .. })
    ));
    // A tool registered later and classified web_read: the skill reaches it, unedited.
    let after = index(&[
        ("read_file", &["filesystem_read"]),
        ("http_fetch", &["web_read"]),
        ("rss_reader", &["web_read", "api_call"]),
    ]);
    let env = Envelopes {
        capabilities: &after,
        ..env
    };
    let reach = env
        .validate_access("research", "rss_reader", "web", AccessLevel::Standard)
        .unwrap();
    assert_eq!(reach.via, Via::Capability("web_read"));
    assert_eq!(reach.access_level, AccessLevel::Standard);
    // Capability matches are standard access: more needs the manifest or an override.
    assert!(matches!(
        env.validate_access("research", "rss_reader", "web", AccessLevel::Elevated),
        Err(Refusal::AboveLevel { .. })
    ));
    assert_eq!(names(&env, "research").len(), 3);
}

#[test]
fn an_override_beats_the_classifier_and_the_manifest() {
    let map = SkillMap::new(&[skill(
        "tools: [read_file]\npermissions: [web_read]\n",
        "research",
    )]);
    let caps = index(&[
        ("read_file", &["filesystem_read"]),
        ("http_fetch", &["web_read"]),
        ("exec", &["code_execute"]),
    ]);
    let ov = Overrides::new([
        SkillOverride {
            skill: "research".into(),
            tool: "http_fetch".into(),
            action: OverrideAction::Remove,
            by: "alice".into(),
        },
        SkillOverride {
            skill: "research".into(),
            tool: "read_file".into(),
            action: OverrideAction::Remove,
            by: "alice".into(),
        },
        SkillOverride {
            skill: "research".into(),
            tool: "exec".into(),
            action: OverrideAction::Add {
                access_level: AccessLevel::Elevated,
            },
            by: "bob".into(),
        },
    ]);
    let env = Envelopes {
        skills: &map,
        capabilities: &caps,
        overrides: &ov,
    };
    assert_eq!(
        env.validate_access("research", "http_fetch", "web", AccessLevel::Standard)
            .unwrap_err()
            .to_string(),
        "tool http_fetch was removed from skill research by an override (alice)"
    );
    assert!(matches!(
        env.validate_access("research", "read_file", "fs", AccessLevel::Standard),
        Err(Refusal::RemovedByOverride { .. })
    ));
    let exec = env
        .validate_access("research", "exec", "exec", AccessLevel::Elevated)
        .unwrap();
    assert_eq!(exec.via, Via::Override("bob"));
    assert_eq!(
        names(&env, "research"),
        vec![("exec".into(), Provenance::Override("bob".into()))]
    );
    let verdict = env
        .judge(
            "research",
            &def("http_fetch", "web"),
            AccessLevel::Standard,
            &json!({}),
            None,
        )
        .verdict;
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.code.as_deref(), Some(SKILL_DENIED));
}

#[test]
fn permissions_are_inherited_with_the_tools() {
    let map = SkillMap::new(&[
        skill("permissions: [web_read]\n", "base"),
        skill(
            "inherit_tools_from: [base]\npermissions: [api_call]\n",
            "child",
        ),
    ]);
    assert_eq!(map.permissions_of("child"), ["api_call", "web_read"]);
    assert_eq!(map.permissions_of("base"), ["web_read"]);
    assert!(map.permissions_of("ghost").is_empty());
}

#[test]
fn an_entrys_domain_rules_and_rate_limit_apply_to_its_calls() {
    let map = SkillMap::new(&[skill(
        "tools:\n  - name: http_fetch\n    allowed_domains: [docs.rs, \"*.python.org\"]\n    blocked_domains: [evil.docs.rs]\n    rate_limit: {per_minute: 5}\n",
        "research",
    )]);
    let caps = CapabilityIndex::default();
    let ov = Overrides::default();
    let env = Envelopes {
        skills: &map,
        capabilities: &caps,
        overrides: &ov,
    };
    let fetch = def("http_fetch", "web");
    let judge = |url: &str| {
        env.judge(
            "research",
            &fetch,
            AccessLevel::Standard,
            &json!({ "url": url }),
            None,
        )
    };
    let ok = judge("https://docs.rs/serde");
    assert_eq!(ok.verdict.decision, Decision::Allow);
    let rate = ok.rate.unwrap();
    assert_eq!(rate.key, "skill:research:tool:http_fetch");
    assert_eq!(
        rate.windows,
        vec![RateWindow {
            window_us: MINUTE_US,
            limit: 5
        }]
    );
    assert_eq!(
        judge("https://peps.python.org/pep-8/").verdict.decision,
        Decision::Allow
    );
    let outside = judge("https://example.com/");
    assert_eq!(outside.verdict.decision, Decision::Deny);
    assert_eq!(
        outside.verdict.reason,
        "under skill research, tool http_fetch may not reach \"https://example.com/\" at /url: it is not in allowed_domains"
    );
    let blocked = judge("https://evil.docs.rs/x").verdict;
    assert_eq!(blocked.decision, Decision::Deny);
    assert!(
        blocked
            .reason
            .contains("blocked_domains has \"evil.docs.rs\""),
        "{}",
        blocked.reason
    );
    // The apex is not "*.python.org".
    assert_eq!(
        judge("https://python.org/").verdict.decision,
        Decision::Deny
    );
    let garbage = judge("https://[::1/").verdict;
    assert_eq!(garbage.decision, Decision::Deny);
    assert!(
        garbage.reason.contains("cannot tell which host"),
        "{}",
        garbage.reason
    );
}

#[test]
fn an_entrys_domain_rules_are_one_egress_layer_named_after_the_skill() {
    let map = SkillMap::new(&[
        skill(
            "tools:\n  - name: http_fetch\n    allowed_domains: [docs.rs]\n    blocked_domains: [evil.docs.rs]\n",
            "research",
        ),
        skill("tools:\n  - name: http_fetch\n", "loose"),
    ]);
    let caps = CapabilityIndex::default();
    let ov = Overrides::default();
    let env = Envelopes {
        skills: &map,
        capabilities: &caps,
        overrides: &ov,
    };
    let fetch = def("http_fetch", "web");
    let layer = env
        .egress_layer("research", &fetch, AccessLevel::Standard)
        .unwrap();
    let egress = crate::target::Egress::new(vec![layer]);
    let rule = |url: &str| egress.url(url).map(|_| ()).map_err(|r| r.rule);
    assert_eq!(rule("https://docs.rs/serde"), Ok(()));
    assert_eq!(
        rule("https://example.com/"),
        Err("skill research allow_domains".to_owned())
    );
    assert_eq!(
        rule("https://evil.docs.rs/"),
        Err("skill research block_domains \"evil.docs.rs\"".to_owned())
    );
    // No rules, no layer; a skill that does not reach the tool adds none either (its calls are
    // refused by the skill layer before anything runs).
    assert_eq!(
        env.egress_layer("loose", &fetch, AccessLevel::Standard),
        None
    );
    assert_eq!(
        env.egress_layer("ghost", &fetch, AccessLevel::Standard),
        None
    );
}

#[test]
fn a_domain_pattern_that_does_not_compile_is_a_diagnostic() {
    let p = parse_skill(
        "---\nname: s\ndescription: d\ntools:\n  - name: http_fetch\n    allowed_domains: [\"https://docs.rs\"]\n---\n",
        Some("s"),
    );
    assert!(p.manifest.is_none());
    assert_eq!(p.diagnostics.len(), 1, "{:?}", p.diagnostics);
    // The line of the pattern's key inside the entry, not the `tools:` line.
    assert_eq!(p.diagnostics[0].line, 6);
    assert_eq!(
        p.diagnostics[0].field.as_deref(),
        Some("tools[0].allowed_domains[0]")
    );
}

/// The skill layer's verdict on one `read_file` call under a skill name, for every state the
/// skills directory can be in: only a loaded skill that names the tool lets it through. A name
/// with no skill behind it is never a label (issue 15): with no skills at all (a missing or
/// empty directory) it is unknown, a skill that does not load or an unreadable directory is
/// refused with its reason, and a loaded skill marked as not loading is refused too.
#[test]
fn a_skill_that_is_not_loaded_reaches_nothing_whatever_the_directory_holds() {
    let reader = || SkillMap::new(&[skill("tools: [read_file]\n", "reader")]);
    let none = SkillMap::default();
    let mut broken = reader();
    broken.mark_unusable(
        "draft",
        "/s/draft/SKILL.md:4: error: tools: expected a list",
    );
    let mut reader_broken = reader();
    reader_broken.mark_unusable(
        "reader",
        "/s/reader/SKILL.md:1: error: cannot read the file",
    );
    let unreadable = SkillMap::unreadable("/s: Not a directory (os error 20)");
    let loaded = reader();
    let cases: [(&str, &SkillMap, &str); 8] = [
        ("a loaded skill naming the tool", &loaded, "reader"),
        ("an unknown name beside a loaded skill", &loaded, "ghost"),
        ("any name with no skills at all", &none, "reader"),
        ("the empty name", &none, ""),
        ("a skill that does not load", &broken, "draft"),
        (
            "a loaded skill marked as not loading",
            &reader_broken,
            "reader",
        ),
        ("an unreadable directory", &unreadable, "reader"),
        (
            "an unreadable directory, unknown name",
            &unreadable,
            "ghost",
        ),
    ];
    let caps = CapabilityIndex::default();
    let ov = Overrides::default();
    let read = def("read_file", "fs");
    // Each case's verdict, and whether the skill resolves to any envelope at all.
    let got: Vec<(&str, Decision, Option<String>, String, bool)> = cases
        .iter()
        .map(|(case, map, name)| {
            let env = Envelopes {
                skills: map,
                capabilities: &caps,
                overrides: &ov,
            };
            let judged = env.judge(name, &read, AccessLevel::Standard, &json!({}), None);
            let v = judged.verdict;
            (
                *case,
                v.decision,
                v.code,
                v.reason,
                env.resolve(name).is_some(),
            )
        })
        .collect();
    let denied = |case, reason: &str| {
        (
            case,
            Decision::Deny,
            Some(SKILL_DENIED.to_owned()),
            reason.to_owned(),
            false,
        )
    };
    let unreadable_reason = |name: &str| {
        format!(
            "skill {name} cannot be checked: the skills directory cannot be read (/s: Not a \
             directory (os error 20)); no call under a skill is allowed until it can"
        )
    };
    assert_eq!(
        got,
        vec![
            (
                "a loaded skill naming the tool",
                Decision::Allow,
                None,
                "tool read_file is in skill reader's tools, up to standard access".to_owned(),
                true
            ),
            denied(
                "an unknown name beside a loaded skill",
                "no skill named \"ghost\" is loaded, so it reaches no tool"
            ),
            denied(
                "any name with no skills at all",
                "no skill named \"reader\" is loaded, so it reaches no tool"
            ),
            denied(
                "the empty name",
                "no skill named \"\" is loaded, so it reaches no tool"
            ),
            denied(
                "a skill that does not load",
                "skill draft does not load (/s/draft/SKILL.md:4: error: tools: expected a list), \
                 so it reaches no tool"
            ),
            denied(
                "a loaded skill marked as not loading",
                "skill reader does not load (/s/reader/SKILL.md:1: error: cannot read the file), \
                 so it reaches no tool"
            ),
            denied("an unreadable directory", &unreadable_reason("reader")),
            denied(
                "an unreadable directory, unknown name",
                &unreadable_reason("ghost")
            ),
        ]
    );
}
