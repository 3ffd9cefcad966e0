//! Fuzzes the admin API's request bodies (`tw_server::body`): every body a route reads, with the
//! functions its handlers call. Only the administrator's token reaches these routes, but a
//! panic in a handler is still a dropped request with no message, and the explain and answer
//! bodies carry agent-made arguments onward. Each input is read as every body:
//! - `POST /tools`, `PUT /tools/{name}`: one custom tool (the loader, see `tool_defs`);
//! - `POST /tools/{name}/enable|disable`: nothing or `{"tier"}`;
//! - `POST /policy/explain`: read as axum's `Json` extractor reads it (`Json::from_bytes`, which
//!   it calls after checking the content type), then judged by the built-in policy as explain
//!   does;
//! - `POST /confirmations/{id}/approve|deny`: nothing, or a note and a grant to remember;
//! - `POST /skills/{name}/override`: a tool, an action, a level and a reason;
//! - `POST /skills/classify/{tool}`: one of set (with a note), clear and again;
//! - `POST /grants`: a tool, and what, whose and how long to remember;
//! - `PUT /mode`: one operational mode.
//!
//! Beyond "no panic": a refusal is a 400 or 422 with a code and a message, located inside the
//! body when it names a line; callers come out sanitized (no control characters, at most 128
//! characters, never empty); a denial never carries a grant, and an approval carries one
//! exactly when it asked to remember; a remembered pattern that passes its check matches calls
//! without panicking. Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/api_body` are the
//! bodies of the API's tests and of its OpenAPI document's examples.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use tw_core::policy::grant::{Grant, GrantScope};
use tw_core::{Caller, OperationalMode};
use tw_fuzz::{assert_located, builtin_policy, judge, tool};
use tw_runtime::{Answer, Remember};
use tw_server::body::{self, BodyError, ExplainBody};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    match body::tool_spec(&text) {
        Ok(spec) => assert!(!spec.definition.description.is_empty()),
        Err(e) => refused(&text, &e, &[422]),
    }

    match body::switch(&text) {
        Ok(tier) => {
            if text.trim().is_empty() {
                assert_eq!(tier, None, "an empty body names a tier");
            }
        }
        Err(e) => refused(&text, &e, &[400]),
    }

    match axum::Json::<ExplainBody>::from_bytes(data) {
        Ok(axum::Json(b)) => {
            let e = b.into_explain("api");
            assert!(
                e.arguments.is_object(),
                "explain's arguments are not an object"
            );
            assert_sanitized(&e.caller);
            if let Some(t) = tool(&e.tool) {
                let _ = judge(
                    builtin_policy(),
                    t,
                    &e.arguments,
                    &e.caller,
                    OperationalMode::Normal,
                );
            }
        }
        Err(rejection) => assert!(
            !rejection.body_text().is_empty(),
            "a rejection without a reason"
        ),
    }

    match body::skill_override(&text) {
        Ok(r) => assert!(
            !matches!(r.change, tw_runtime::OverrideChange::Clear) || text.contains("clear"),
            "a clear from a body that never says so"
        ),
        Err(e) => refused(&text, &e, &[400]),
    }
    match body::classify(&text) {
        Ok(body::Classify::Set { capabilities, .. }) => {
            assert!(
                text.contains("set"),
                "capabilities from a body without set: {capabilities:?}"
            )
        }
        Ok(_) => {}
        Err(e) => refused(&text, &e, &[400]),
    }

    match body::grant(&text) {
        Ok(g) => {
            // What was read is what the body says (read again as plain JSON, escapes and all).
            let sent: serde_json::Value =
                serde_json::from_str(&text).expect("a grant read from a body that is not JSON");
            assert_eq!(
                sent["tool"],
                g.tool.as_str(),
                "the grant's tool is not the body's"
            );
            assert!(
                sent.get("remember").is_some() || g.spec.remember == Remember::Tool,
                "a grant that remembers more than its tool without saying so"
            );
            if let Remember::Pattern(p) = g.spec.remember {
                let scope = GrantScope::Pattern(p);
                if scope.check().is_ok() {
                    covers(scope);
                }
            }
        }
        Err(e) => refused(&text, &e, &[400]),
    }
    match body::mode(&text) {
        Ok(mode) => {
            let sent: serde_json::Value =
                serde_json::from_str(&text).expect("a mode read from a body that is not JSON");
            // Names of modes are read as the other enums' are: any case, with `_`, `-` or
            // spaces anywhere (`Lock-Down`); the letters must be the mode's, in order.
            let letters = |s: &str| -> String {
                s.chars()
                    .filter(|c| !matches!(c, '_' | '-' | ' '))
                    .flat_map(char::to_lowercase)
                    .collect()
            };
            let named = sent["mode"]
                .as_str()
                .expect("a mode read from a body without one");
            assert_eq!(
                letters(named),
                letters(mode.as_str()),
                "the mode is not the body's"
            );
        }
        Err(e) => refused(&text, &e, &[400]),
    }

    for approve in [true, false] {
        match body::answer(&text, approve) {
            Ok(a) => {
                assert_eq!(a.answer.approves(), approve);
                let grant = match a.answer {
                    Answer::Approve { grant } => grant,
                    Answer::Deny => None,
                };
                if let Some(Remember::Pattern(p)) = grant.map(|g| g.remember) {
                    let scope = GrantScope::Pattern(p);
                    if scope.check().is_ok() {
                        covers(scope);
                    }
                }
            }
            Err(e) => refused(&text, &e, &[400]),
        }
    }
});

fn refused(text: &str, e: &BodyError, statuses: &[u16]) {
    assert!(
        statuses.contains(&e.status.as_u16()),
        "refused with {}: {}",
        e.status,
        e.message
    );
    assert!(
        !e.code.is_empty() && !e.message.is_empty(),
        "a refusal without a reason"
    );
    assert_located(text, e.line, e.column, &e.message);
}

fn assert_sanitized(caller: &Caller) {
    for id in [
        Some(&caller.agent_id),
        caller.skill.as_ref(),
        caller.user.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(
            !id.is_empty() && id.chars().count() <= 128 && !id.chars().any(char::is_control),
            "a caller id that is not sanitized: {id:?}"
        );
        assert_eq!(id.trim(), id, "a caller id that is not trimmed: {id:?}");
    }
    assert_eq!(
        &caller.sanitized(),
        caller,
        "sanitizing twice changes a caller"
    );
}

fn covers(scope: GrantScope) {
    let grant = Grant {
        id: "g".to_owned(),
        tool: "read_file".to_owned(),
        scope,
        agent_id: None,
        skill: None,
        expires_at: None,
        revoked: false,
    };
    let caller = Caller::agent("agent-1");
    for arguments in [
        json!({"path": "notes.txt"}),
        json!({"path": "/etc/passwd", "limit": 3}),
        json!({"path": ["a"], "x": null}),
        json!("not an object"),
    ] {
        let _ = grant.covers("read_file", &arguments, &caller, 0);
        assert!(
            !grant.covers("write_file", &arguments, &caller, 0),
            "a grant covers another tool"
        );
    }
    let _ = grant.describe();
}
