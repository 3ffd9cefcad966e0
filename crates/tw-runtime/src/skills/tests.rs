//! The skills service's own rules, on a real skills directory and store: what a SKILL.md and an
//! override may be (the checks the desktop app once made on its own, now the service's for every
//! front end), each refusal naming its field.

use pretty_assertions::assert_eq;
use tw_core::policy::access::AccessLevel;

use super::*;
use crate::{Runtime, RuntimeOptions};

struct Install {
    dir: tempfile::TempDir,
}

impl Install {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("ws/skills/research");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: research\ndescription: Reads things.\ntools: [read_file]\n---\n",
        )
        .unwrap();
        Self { dir }
    }

    async fn open(&self) -> Runtime {
        Runtime::open(RuntimeOptions::new(
            self.dir.path().join("data"),
            vec![self.dir.path().join("ws")],
            Config::default(),
        ))
        .await
        .unwrap()
    }
}

/// The error's field and message, or `Ok`.
fn field<T>(r: Result<T>) -> std::result::Result<(), (Option<&'static str>, String)> {
    r.map(|_| ()).map_err(|e| (e.field(), e.to_string()))
}

#[tokio::test]
async fn names_and_texts_are_checked_before_anything_is_read_or_written() {
    let install = Install::new();
    let rt = install.open().await;
    let skills = rt.skills();
    assert_eq!(
        field(skills.check_text("../etc", "---\n")).unwrap_err().0,
        Some("name")
    );
    let big = "x".repeat(MAX_SKILL_TEXT + 1);
    let (f, message) = field(skills.check_text("data-viz", &big)).unwrap_err();
    assert_eq!(f, Some("text"));
    assert_eq!(
        message,
        "a SKILL.md is at most 256 KiB; this one is 257 KiB"
    );
    assert_eq!(field(skills.check_text("data-viz", "---\n")), Ok(()));
    // Saving is held to the same rules: nothing is written.
    assert_eq!(
        field(skills.save("data-viz", &big, "tester").await)
            .unwrap_err()
            .0,
        Some("text")
    );
    assert!(!install.dir.path().join("ws/skills/data-viz").exists());
    let e = skills.text("missing").unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::NotFound, "{e}");
    rt.close().await;
}

#[tokio::test]
async fn an_override_is_checked_field_by_field() {
    let install = Install::new();
    let rt = install.open().await;
    let skills = rt.skills();
    let change =
        |skill: &'static str, tool: &'static str, c: OverrideChange, why: Option<String>| {
            let skills = rt.skills();
            async move {
                field(
                    skills
                        .change_override(skill, tool, c, why.as_deref(), "alice")
                        .await,
                )
                .map_err(|(f, _)| f)
            }
        };
    let too_long = Some("x".repeat(MAX_REASON + 1));
    let got = vec![
        change("Research", "echo", OverrideChange::Remove, None).await,
        change("research", "echo tool", OverrideChange::Remove, None).await,
        change("research", "echo", OverrideChange::Remove, too_long).await,
        change(
            "research",
            "echo",
            OverrideChange::Clear,
            Some("because".into()),
        )
        .await,
        change(
            "research",
            "echo",
            OverrideChange::Add(AccessLevel::Elevated),
            Some(format!("  {}  ", "y".repeat(MAX_REASON))),
        )
        .await,
    ];
    assert_eq!(
        got,
        vec![
            Err(Some("skill")),
            Err(Some("tool")),
            Err(Some("reason")),
            Err(Some("reason")),
            Ok(()),
        ]
    );
    // The reason is stored trimmed; a blank one is none.
    let rows = skills.overrides().rows.clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].reason.as_deref().map(str::len), Some(MAX_REASON));
    skills
        .change_override(
            "research",
            "echo",
            OverrideChange::Remove,
            Some("  "),
            "alice",
        )
        .await
        .unwrap();
    assert_eq!(skills.overrides().rows[0].reason, None);
    // A skill that is not loaded cannot be changed, but its overrides can still be cleared.
    let e = skills
        .change_override("gone", "echo", OverrideChange::Remove, None, "alice")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::NotFound, "{e}");
    assert_eq!(
        field(
            skills
                .change_override("gone", "echo", OverrideChange::Clear, None, "alice")
                .await
        ),
        Ok(())
    );
    rt.close().await;
}
