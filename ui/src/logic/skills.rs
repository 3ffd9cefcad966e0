//! The skills page's logic, kept off the DOM so it is tested on the host: how a skill's status and
//! a SKILL.md diagnostic read, the template a new skill starts from, the name rule a new skill
//! must meet before it is sent, and the editor's draft, which a reloaded skill must not clobber
//! while the person has unsaved changes.

use tw_protocol::{SkillDiagnostic, SkillSummary};

/// The access levels an override may add a tool at, least first.
pub(crate) const LEVELS: [&str; 3] = ["standard", "elevated", "admin"];

/// How long the editor waits after the last keystroke before it checks the text.
pub(crate) const CHECK_AFTER_MS: u64 = 400;

/// Longest skill name (tw-core's `skill::MAX_NAME`).
const MAX_NAME: usize = 64;

/// A diagnostic as the editor lists it: `line N: severity: field: message`.
pub(crate) fn diagnostic_text(d: &SkillDiagnostic) -> String {
    match &d.field {
        Some(field) => format!("line {}: {}: {field}: {}", d.line, d.severity, d.message),
        None => format!("line {}: {}: {}", d.line, d.severity, d.message),
    }
}

/// A skill's status in the list: `ok`, `N errors`, or `not loaded` (no manifest in force and no
/// error to say why, which should not happen).
pub(crate) fn status(s: &SkillSummary) -> String {
    match (s.errors, s.loaded) {
        (0, true) => "ok".to_owned(),
        (0, false) => "not loaded".to_owned(),
        (1, _) => "1 error".to_owned(),
        (n, _) => format!("{n} errors"),
    }
}

/// `1 warning`, `N warnings`, or nothing.
pub(crate) fn warnings(n: usize) -> Option<String> {
    match n {
        0 => None,
        1 => Some("1 warning".to_owned()),
        n => Some(format!("{n} warnings")),
    }
}

/// The SKILL.md a new skill starts from: the front matter every skill needs, one tool, and a
/// body to replace.
pub(crate) fn template(name: &str) -> String {
    format!(
        "---\n\
         name: {name}\n\
         description: What this skill is for, in one sentence.\n\
         version: 0.1.0\n\
         tools:\n  \
         - read_file\n\
         # permissions: [filesystem_read]   # capabilities; tools that have them are added\n\
         ---\n\
         # {name}\n\
         \n\
         What the skill does, and how an agent should use its tools.\n"
    )
}

/// Whether `name` may name a new skill: 1-64 lowercase letters, digits and hyphens, not starting
/// or ending with a hyphen (tw-core's rule; the shell checks again).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a skill name is 1 to {MAX_NAME} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("a skill name may only contain lowercase letters, digits and hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("a skill name must not start or end with a hyphen".into());
    }
    Ok(())
}

/// The SKILL.md being edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Draft {
    /// The skill it belongs to.
    pub(crate) skill: String,
    /// What the editor holds.
    pub(crate) text: String,
    /// What is on disk (for a new skill: nothing yet).
    pub(crate) saved: String,
    /// A skill that has never been saved.
    pub(crate) new: bool,
}

impl Draft {
    /// The text of a skill as loaded.
    pub(crate) fn loaded(skill: &str, text: &str) -> Self {
        Self {
            skill: skill.to_owned(),
            text: text.to_owned(),
            saved: text.to_owned(),
            new: false,
        }
    }

    /// A new skill, starting from the template.
    pub(crate) fn new_skill(skill: &str) -> Self {
        Self {
            skill: skill.to_owned(),
            text: template(skill),
            saved: String::new(),
            new: true,
        }
    }

    /// Whether the editor holds something not saved.
    pub(crate) fn dirty(&self) -> bool {
        self.new || self.text != self.saved
    }

    /// The draft after `skill` was (re)loaded with `text` on disk: the loaded text, unless this
    /// draft is of the same skill and has unsaved changes, which stay (with the new disk text
    /// as what they would replace).
    pub(crate) fn reloaded(current: Option<&Draft>, skill: &str, text: &str) -> Draft {
        match current {
            Some(d) if d.skill == skill && d.dirty() && !d.new => Draft {
                saved: text.to_owned(),
                ..d.clone()
            },
            _ => Draft::loaded(skill, text),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn summary(errors: usize, loaded: bool) -> SkillSummary {
        SkillSummary {
            name: "x".into(),
            description: None,
            loaded,
            errors,
            warnings: 0,
            tool_count: 0,
            overrides: 0,
            calls: 0,
            skill_denied: 0,
        }
    }

    #[test]
    fn statuses_and_diagnostics_read_as_the_cli_writes_them() {
        assert_eq!(
            [
                status(&summary(0, true)),
                status(&summary(1, true)),
                status(&summary(3, false)),
                status(&summary(0, false)),
            ],
            ["ok", "1 error", "3 errors", "not loaded"].map(String::from)
        );
        assert_eq!(
            [warnings(0), warnings(1), warnings(2)],
            [None, Some("1 warning".into()), Some("2 warnings".into())]
        );
        let d = SkillDiagnostic {
            severity: "error".into(),
            line: 3,
            field: Some("tools[0].access_level".into()),
            message: "unknown access level".into(),
        };
        assert_eq!(
            diagnostic_text(&d),
            "line 3: error: tools[0].access_level: unknown access level"
        );
        let no_field = SkillDiagnostic { field: None, ..d };
        assert_eq!(
            diagnostic_text(&no_field),
            "line 3: error: unknown access level"
        );
    }

    #[test]
    fn new_skill_names_follow_the_skill_name_rule() {
        let got: Vec<bool> = [
            "notes",
            "web-2",
            "",
            "Notes",
            "-a",
            "a-",
            "a_b",
            &"a".repeat(65),
        ]
        .iter()
        .map(|n| check_name(n).is_ok())
        .collect();
        assert_eq!(got, [true, true, false, false, false, false, false, false]);
    }

    #[test]
    fn the_template_names_the_skill_in_its_front_matter() {
        // The same text `toolwarden skills save notes` accepts without a diagnostic.
        assert_eq!(
            template("notes"),
            "---\nname: notes\ndescription: What this skill is for, in one sentence.\n\
             version: 0.1.0\ntools:\n  - read_file\n\
             # permissions: [filesystem_read]   # capabilities; tools that have them are added\n\
             ---\n# notes\n\nWhat the skill does, and how an agent should use its tools.\n"
        );
    }

    #[test]
    fn a_reload_keeps_unsaved_edits_of_the_same_skill_only() {
        let clean = Draft::loaded("a", "one");
        let edited = Draft {
            text: "two".into(),
            ..clean.clone()
        };
        let fresh = Draft::new_skill("b");
        assert!(!clean.dirty() && edited.dirty() && fresh.dirty());
        assert_eq!(
            vec![
                Draft::reloaded(None, "a", "one"),
                Draft::reloaded(Some(&clean), "a", "three"),
                Draft::reloaded(Some(&edited), "a", "three"),
                Draft::reloaded(Some(&edited), "c", "four"),
                Draft::reloaded(Some(&fresh), "b", "saved"),
            ],
            vec![
                Draft::loaded("a", "one"),
                Draft::loaded("a", "three"),
                Draft {
                    skill: "a".into(),
                    text: "two".into(),
                    saved: "three".into(),
                    new: false,
                },
                Draft::loaded("c", "four"),
                Draft::loaded("b", "saved"),
            ]
        );
    }
}
