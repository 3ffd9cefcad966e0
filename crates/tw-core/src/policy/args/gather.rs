//! Reading the `[[rules]]` section of a policy document into [`ArgRule`]s. Every list is checked
//! entry by entry, so each bad path, domain or pattern is reported where it was written; a rule
//! must check something; and its `match` / `not_match` example calls are run, so a policy whose
//! examples fail does not load.

use regex::RegexSet;
use toml::Spanned;

use super::{ArgRule, Prepared};
use crate::definition::IsolationLevel;
use crate::policy::Decision;
use crate::policy::doc::RuleDoc;
use crate::policy::env::PolicyEnv;
use crate::policy::source::Reading;
use crate::target::{DomainList, DomainPattern, PathCase, PathList};

/// Reads one document's `[[rules]]`; the rules that compile without a problem go to `out`.
pub(crate) fn gather(
    r: &mut Reading<'_>,
    section: &[Spanned<RuleDoc>],
    env: &PolicyEnv,
    out: &mut Vec<ArgRule>,
) {
    for (index, rule) in section.iter().enumerate() {
        if let Some(compiled) = arg_rule(r, rule, index, env) {
            out.push(compiled);
        }
    }
}

/// One rule, or `None` if anything in it is wrong (each problem reported). `index` names an
/// unnamed rule (`rules[2]`).
fn arg_rule(
    r: &mut Reading<'_>,
    rule: &Spanned<RuleDoc>,
    index: usize,
    env: &PolicyEnv,
) -> Option<ArgRule> {
    let doc = rule.get_ref();
    let before = r.error_count();
    let name = doc
        .name
        .clone()
        .unwrap_or_else(|| format!("rules[{index}]"));
    let tools = doc.tools.as_ref().map(|t| r.selector_set(t, "rules.tools"));
    let forbid_paths = paths(r, &doc.forbid_paths, "forbid_paths", env);
    let allow_paths = paths(r, &doc.allow_paths, "allow_paths", env);
    let allow_domains = domains(r, &doc.allow_domains, "allow_domains");
    let block_domains = domains(r, &doc.block_domains, "block_domains");
    let network = domains(r, &doc.network, "network");
    let downloads = downloads(r, doc);
    let block_patterns = patterns(r, &doc.block_patterns);
    let decision = decision(r, doc);
    let isolation = isolation(r, doc);
    if checks_nothing(doc) {
        r.fail(
            rule.span(),
            format!(
                "rule {name:?} checks nothing: give it paths, domains, patterns, a size limit, \
                 an isolation level, a network grant or a downloads folder"
            ),
        );
    }
    if r.error_count() > before {
        return None;
    }
    let compiled = ArgRule {
        name,
        source: r.at(rule.span()),
        tools,
        forbid_paths,
        forbid_written: written(&doc.forbid_paths),
        allow_paths,
        allow_domains,
        block_domains,
        network,
        downloads,
        block_patterns,
        max_argument_bytes: doc.max_argument_bytes.as_ref().map(|v| *v.get_ref()),
        max_string_length: doc.max_string_length.as_ref().map(|v| *v.get_ref()),
        decision,
        isolation,
    };
    check_examples(r, &compiled, doc, env);
    r.note(summary(&compiled, doc));
    Some(compiled)
}

fn written(list: &[Spanned<String>]) -> Vec<String> {
    list.iter().map(|p| p.get_ref().clone()).collect()
}

/// A path list (`forbid_paths`, `allow_paths`), each entry checked on its own so a bad one is
/// reported where it was written; `None` when the list is empty or bad.
fn paths(
    r: &mut Reading<'_>,
    list: &[Spanned<String>],
    what: &str,
    env: &PolicyEnv,
) -> Option<PathList> {
    if list.is_empty() {
        return None;
    }
    let home = env.home.as_deref();
    for p in list {
        if let Err(e) = PathList::new([p.get_ref()], &env.base, home, PathCase::Sensitive) {
            r.fail(p.span(), format!("rules.{what}: {e}"));
        }
    }
    PathList::new(
        list.iter().map(|p| p.get_ref()),
        &env.base,
        home,
        PathCase::Sensitive,
    )
    .ok()
}

/// The `downloads` folder: a relative path that stays in the workspace (no `..`, no `~`).
fn downloads(r: &mut Reading<'_>, doc: &RuleDoc) -> Option<String> {
    let folder = doc.downloads.as_ref()?;
    let text = folder.get_ref().trim_end_matches('/');
    let bad = if text.is_empty() {
        Some("is empty (name a folder in the workspace, such as \"downloads\")")
    } else if text.starts_with('/') || text.starts_with('~') {
        Some("must be relative to the workspace's first root")
    } else if text.split('/').any(|c| c == ".." || c.is_empty()) {
        Some("may not climb out with `..` or hold empty components")
    } else if text.chars().any(char::is_control) {
        Some("holds a control character")
    } else {
        None
    };
    match bad {
        Some(why) => {
            r.fail(folder.span(), format!("rules.downloads {text:?} {why}"));
            None
        }
        None => Some(text.to_owned()),
    }
}

/// A domain list (`allow_domains`, `block_domains`), checked like [`paths`].
fn domains(r: &mut Reading<'_>, list: &[Spanned<String>], what: &str) -> Option<DomainList> {
    if list.is_empty() {
        return None;
    }
    for d in list {
        if let Err(e) = DomainPattern::parse(d.get_ref()) {
            r.fail(d.span(), format!("rules.{what}: {e}"));
        }
    }
    DomainList::parse(list.iter().map(|d| d.get_ref())).ok()
}

/// `block_patterns` as one regex set, with the patterns as written.
fn patterns(r: &mut Reading<'_>, list: &[Spanned<String>]) -> Option<(RegexSet, Vec<String>)> {
    if list.is_empty() {
        return None;
    }
    for p in list {
        if let Err(e) = regex::Regex::new(p.get_ref()) {
            // The regex crate draws its errors over several lines; one line reads better after
            // file:line:column.
            let e = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            r.fail(p.span(), format!("rules.block_patterns: {e}"));
        }
    }
    let written = written(list);
    RegexSet::new(&written).ok().map(|set| (set, written))
}

/// What breaking the rule yields: `deny` (also when left out) or `ask`.
fn decision(r: &mut Reading<'_>, doc: &RuleDoc) -> Decision {
    match doc
        .decision
        .as_ref()
        .map(|d| (d.get_ref().as_str(), d.span()))
    {
        None | Some(("deny", _)) => Decision::Deny,
        Some(("ask", _)) => Decision::Ask,
        Some((other, span)) => {
            r.fail(
                span,
                format!("rules.decision: {other:?} must be \"deny\" or \"ask\""),
            );
            Decision::Deny
        }
    }
}

/// The isolation the rule requires of its tools; a rule can only raise it, so `none` is refused.
fn isolation(r: &mut Reading<'_>, doc: &RuleDoc) -> Option<IsolationLevel> {
    let i = doc.isolation.as_ref()?;
    match i.get_ref().parse::<IsolationLevel>() {
        Ok(IsolationLevel::None) => {
            r.fail(
                i.span(),
                "rules.isolation: \"none\" cannot be required; a rule can only raise isolation \
                 to standard, strict or restricted",
            );
            None
        }
        Ok(level) => Some(level),
        Err(e) => {
            r.fail(i.span(), format!("rules.isolation: {e}"));
            None
        }
    }
}

/// Whether the rule sets none of the checks (a rule that only names tools would stop nothing).
fn checks_nothing(doc: &RuleDoc) -> bool {
    doc.forbid_paths.is_empty()
        && doc.isolation.is_none()
        && doc.allow_paths.is_empty()
        && doc.allow_domains.is_empty()
        && doc.block_domains.is_empty()
        && doc.network.is_empty()
        && doc.downloads.is_none()
        && doc.block_patterns.is_empty()
        && doc.max_argument_bytes.is_none()
        && doc.max_string_length.is_none()
}

/// Runs the rule's `match` examples (each must be stopped) and `not_match` examples (none may
/// be), judged without a tool definition, in the policy's base directory.
fn check_examples(r: &mut Reading<'_>, rule: &ArgRule, doc: &RuleDoc, env: &PolicyEnv) {
    let name = &rule.name;
    for (examples, want) in [(&doc.matches, true), (&doc.not_match, false)] {
        for ex in examples {
            let call = ex.get_ref();
            let prepared = Prepared::new(
                None,
                &call.arguments,
                None,
                &env.base,
                env.home.as_deref(),
                env.resolver.as_ref(),
            );
            let stopped = rule.check(&prepared).is_some();
            if stopped == want {
                continue;
            }
            r.fail(
                ex.span(),
                if want {
                    format!(
                        "rule {name:?} does not stop its example call to {} with {}",
                        call.tool, call.arguments
                    )
                } else {
                    format!(
                        "rule {name:?} stops {} with {}, listed under not_match",
                        call.tool, call.arguments
                    )
                },
            );
        }
    }
}

/// The rule's summary line: its name, decision and every check, as written.
fn summary(rule: &ArgRule, doc: &RuleDoc) -> String {
    let list = |what: &str, v: &[Spanned<String>]| {
        (!v.is_empty()).then(|| {
            let items: Vec<&str> = v.iter().map(|p| p.get_ref().as_str()).collect();
            format!("{what} {}", items.join(", "))
        })
    };
    let parts: Vec<String> = [
        list("forbid_paths", &doc.forbid_paths),
        list("allow_paths", &doc.allow_paths),
        list("allow_domains", &doc.allow_domains),
        list("block_domains", &doc.block_domains),
        list("network", &doc.network),
        doc.downloads
            .as_ref()
            .map(|d| format!("downloads into {}", d.get_ref())),
        list("block_patterns", &doc.block_patterns),
        doc.max_argument_bytes
            .as_ref()
            .map(|v| format!("max_argument_bytes {}", v.get_ref())),
        doc.max_string_length
            .as_ref()
            .map(|v| format!("max_string_length {}", v.get_ref())),
        rule.isolation.map(|i| format!("isolation at least {i}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "rule {} ({}): {}",
        rule.name,
        rule.decision,
        parts.join("; ")
    )
}
