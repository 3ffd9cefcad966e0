//! The tool around the checks: its schema lists the profiles, a name the config lacks is refused
//! naming those it has (or saying how to add one), and JSON content is measured as serialized.

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::json;
use tw_core::content::{ContentProfile, Encoding, TextRules};

use super::*;

fn tool(names: &[&str]) -> ValidateContent {
    let profile = Arc::new(
        ContentProfile::new(
            None,
            TextRules {
                encoding: Encoding::Ascii,
                ..TextRules::default()
            },
        )
        .unwrap(),
    );
    let profiles: BTreeMap<String, Arc<ContentProfile>> = names
        .iter()
        .map(|n| ((*n).to_owned(), Arc::clone(&profile)))
        .collect();
    ValidateContent::new(Arc::new(profiles))
}

#[test]
fn the_schema_lists_the_configured_profiles() {
    let with = tool(&["ticket", "note"]).definition().unwrap();
    assert_eq!(
        with.parameters.value()["properties"]["profile"]["enum"],
        json!(["note", "ticket"])
    );
    let without = tool(&[]).definition().unwrap();
    assert_eq!(
        without.parameters.value()["properties"]["profile"].get("enum"),
        None,
        "an empty enum would refuse every name without saying why"
    );
    assert_eq!(
        (
            with.group.as_str(),
            with.category,
            with.constraints.isolation,
            with.constraints.side_effects,
            with.risk_level,
            with.license_tier
        ),
        (
            "validation",
            ToolCategory::System,
            IsolationLevel::None,
            false,
            tw_core::RiskLevel::Low,
            tw_core::LicenseTier::Core
        )
    );
}

#[test]
fn an_unknown_profile_is_refused_naming_the_known_ones() {
    let refusal = |t: &ValidateContent, name: &str| {
        t.profile(name)
            .map(|_| ())
            .map_err(|f| (f.status, f.code, f.message))
    };
    assert_eq!(
        refusal(&tool(&["ticket", "note"]), "tickets"),
        Err((
            ToolStatus::ValidationError,
            "unknown_profile".to_owned(),
            "no validation profile named \"tickets\"; the config has note, ticket".to_owned()
        ))
    );
    assert_eq!(
        refusal(&tool(&[]), "ticket"),
        Err((
            ToolStatus::Failed,
            "not_configured".to_owned(),
            "no validation profiles are configured: add [validation.profiles.NAME] to the \
             config (a schema, lengths, an encoding, forbid or require patterns)"
                .to_owned()
        ))
    );
    assert!(refusal(&tool(&["ticket"]), "ticket").is_ok());
}

#[test]
fn json_content_is_measured_as_serialized_in_characters() {
    assert_eq!(text_bytes(&json!("héllo")).unwrap(), 6);
    // {"a":"é"} is 9 characters, 10 bytes.
    assert_eq!(text_bytes(&json!({"a": "é"})).unwrap(), 10);
    // Exactly at the limit in characters, though more in bytes: accepted.
    let at_limit = json!(["é".repeat(MAX_CONTENT_CHARS - 4)]);
    assert_eq!(
        text_bytes(&at_limit).unwrap(),
        2 * (MAX_CONTENT_CHARS - 4) + 4
    );
    let over = json!(["x".repeat(MAX_CONTENT_CHARS)]);
    let refused = text_bytes(&over).unwrap_err();
    assert_eq!(
        (refused.status, refused.code.as_str(), refused.message),
        (
            ToolStatus::ValidationError,
            "invalid_arguments",
            format!(
                "content: the JSON is {} characters serialized; at most {MAX_CONTENT_CHARS} are \
                 allowed",
                MAX_CONTENT_CHARS + 4
            )
        )
    );
}
