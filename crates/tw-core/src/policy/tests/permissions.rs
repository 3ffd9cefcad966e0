//! The permissions layer: a tool needs its definition's permissions plus those `[permissions]
//! tools` adds; a caller holds what its agent id, its skill and `"*"` are granted, across
//! documents; a call missing one is denied naming it, and a bad permission or selector is
//! refused at its place.

use pretty_assertions::assert_eq;

use super::*;

fn needing(perms: &[&str]) -> ToolDefinition {
    let mut d = tool(
        "query_db",
        "data",
        ToolCategory::Database,
        RiskLevel::Medium,
        false,
    );
    d.permissions = perms.iter().map(|p| (*p).to_owned()).collect();
    d
}

fn judge(p: &Policy, def: &ToolDefinition, caller: &Caller) -> PolicyDecision {
    let c = Call {
        caller: caller.clone(),
        ..call(def.name.as_str(), json!({}))
    };
    judge_def(p, def, &c)
}

const POLICY: &str = r#"default = "allow"
[permissions]
tools = { "group:net" = ["internet"] }
callers = { "analyst" = ["db.read"], "admin-bot" = ["db.read", "db.write"], "*" = ["basic"] }
skills = { "reporting" = ["db.write"] }
"#;

#[test]
fn a_call_needs_every_permission_its_tool_needs() {
    let p = policy(POLICY);
    let read = needing(&["db.read"]);
    let write = needing(&["db.read", "db.write"]);
    let basic = needing(&["basic"]);
    let cases = [
        (&read, Caller::agent("analyst"), "allow"),
        (
            &write,
            Caller::agent("analyst"),
            "deny permissions missing_permission",
        ),
        (&write, Caller::agent("admin-bot"), "allow"),
        (
            &read,
            Caller::agent("stranger"),
            "deny permissions missing_permission",
        ),
        (&basic, Caller::agent("stranger"), "allow"),
        (
            &write,
            Caller::agent("analyst").with_skill("reporting"),
            "allow",
        ),
        (
            &write,
            Caller::agent("stranger").with_skill("reporting"),
            "deny permissions missing_permission",
        ),
    ];
    for (def, caller, expect) in cases {
        let d = judge(&p, def, &caller);
        assert_eq!(outcome(&d), expect, "{} as {caller:?}", def.name);
    }
    let d = judge(&p, &write, &Caller::agent("analyst"));
    let v = d.deciding().unwrap();
    assert_eq!(
        v.reason,
        "tool query_db needs permission db.read, db.write; caller analyst does not hold db.write \
         (grant it in [permissions] callers or skills)"
    );
    // A tool needing nothing passes the layer whoever calls.
    let d = judge(&p, &needing(&[]), &Caller::agent("stranger"));
    assert_eq!(outcome(&d), "allow");
}

#[test]
fn the_policy_adds_permissions_to_tools_it_selects() {
    let p = policy(POLICY);
    let defs = tools();
    let fetch = &defs["http_fetch"];
    assert_eq!(p.permissions.needed(fetch), ["internet"]);
    assert_eq!(
        outcome(&judge(&p, fetch, &Caller::agent("analyst"))),
        "deny permissions missing_permission"
    );
    let granted = policy(&POLICY.replace(
        "\"analyst\" = [\"db.read\"]",
        "\"analyst\" = [\"db.read\", \"internet\"]",
    ));
    assert_eq!(
        outcome(&judge(&granted, fetch, &Caller::agent("analyst"))),
        "allow"
    );
}

#[test]
fn grants_add_up_across_documents() {
    let first = r#"default = "allow"
[permissions]
callers = { "analyst" = ["db.read"] }
"#;
    let second = r#"default = "allow"
[permissions]
callers = { "analyst" = ["db.write"] }
"#;
    let p = compile_docs(&[first, second]);
    let d = judge(
        &p,
        &needing(&["db.read", "db.write"]),
        &Caller::agent("analyst"),
    );
    assert_eq!(outcome(&d), "allow");
}

#[test]
fn a_bad_permission_or_selector_is_refused_at_its_place() {
    let errs = compile_err(
        "[permissions]\ncallers = { \"analyst\" = [\"db read\"] }\ntools = { \"group:\" = [\"x\"] }\n",
    )
    .unwrap_err();
    let mut shown: Vec<String> = errs.iter().map(ToString::to_string).collect();
    shown.sort();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].starts_with("p.toml:2:") && shown[0].contains("\"db read\" is not a permission"),
        "{shown:?}"
    );
    assert!(shown[1].starts_with("p.toml:3:"), "{shown:?}");
}
