//! What policy adds to a tool's sandbox: rules can raise the isolation a tool runs with (never
//! lower it), and the paths rules forbid arguments to name are hidden from the processes the tool
//! runs, so a command cannot reach what the call itself could not name.

use super::compile::Policy;
use crate::definition::{IsolationLevel, ToolDefinition};
use crate::target::normalize_path;

/// The sandbox a tool's process must get under the current policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRequirements {
    /// The definition's level, raised by any rule that applies.
    pub isolation: IsolationLevel,
    /// The rule that raised it (`rule NAME (file:line)`), if one did.
    pub raised_by: Option<String>,
    /// Absolute forms of the forbidden paths that are literal (no glob characters), to be
    /// masked in the sandbox's filesystem view.
    pub forbidden_paths: Vec<String>,
    /// The forbidden paths that are glob patterns, as written. What they match is found by
    /// walking the sandbox's view and asking [`Policy::sandbox_forbids`] about each entry.
    pub forbidden_patterns: Vec<String>,
}

fn is_literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?', '[', '{'])
}

impl Policy {
    /// The isolation and hidden paths for `def`'s processes.
    pub fn sandbox_requirements(&self, def: &ToolDefinition) -> SandboxRequirements {
        let mut req = SandboxRequirements {
            isolation: def.constraints.isolation,
            raised_by: None,
            forbidden_paths: Vec::new(),
            forbidden_patterns: Vec::new(),
        };
        for rule in self.rules.rules.iter().filter(|r| r.applies_to(def)) {
            if let Some(level) = rule.isolation
                && level > req.isolation
            {
                req.isolation = level;
                req.raised_by = Some(format!("rule {} ({})", rule.name, rule.source));
            }
            for pattern in &rule.forbid_written {
                if !is_literal(pattern) {
                    if !req.forbidden_patterns.contains(pattern) {
                        req.forbidden_patterns.push(pattern.clone());
                    }
                    continue;
                }
                let path = normalize_path(pattern, &self.env.base, self.env.home.as_deref());
                if !req.forbidden_paths.contains(&path) {
                    req.forbidden_paths.push(path);
                }
            }
        }
        req
    }

    /// The forbidden path pattern (as written) of a rule applying to `def` that covers `path`,
    /// an absolute path without `.` or `..` components, if one does.
    pub fn sandbox_forbids(&self, def: &ToolDefinition, path: &str) -> Option<&str> {
        self.rules
            .rules
            .iter()
            .filter(|r| r.applies_to(def))
            .find_map(|r| r.forbid_paths.as_ref()?.first_match(path))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::policy::{PolicyDoc, PolicyEnv, PolicySource};
    use crate::schema::ParameterSchema;
    use crate::{ToolCategory, ToolGroup, ToolName};

    fn def(name: &str, category: ToolCategory, isolation: IsolationLevel) -> ToolDefinition {
        let mut d = ToolDefinition::new(
            ToolName::new(name).unwrap(),
            "test tool",
            category,
            ToolGroup::new("exec").unwrap(),
            ParameterSchema::parameters(json!({"type": "object"})).unwrap(),
        );
        d.constraints.isolation = isolation;
        d
    }

    fn compile(text: &str, home: Option<&str>) -> Result<Policy, String> {
        let doc = PolicyDoc::parse(text, "p.toml").map_err(|e| e.to_string())?;
        let source = PolicySource {
            file: "p.toml",
            text,
            doc: &doc,
        };
        Policy::compile(&[source], PolicyEnv::lexical("/ws", home)).map_err(|e| {
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    fn policy(text: &str) -> Policy {
        compile(text, Some("/home/u")).unwrap()
    }

    #[test]
    fn rules_raise_isolation_and_list_literal_forbidden_paths() {
        let p = policy(
            r#"default = "allow"
[[rules]]
name = "code in strict"
tools = ["category:code_execution"]
isolation = "strict"

[[rules]]
name = "secrets"
forbid_paths = ["~/.ssh", "secrets/", "**/.env", "/etc/shadow"]
"#,
        );
        let exec = def(
            "exec",
            ToolCategory::CodeExecution,
            IsolationLevel::Standard,
        );
        let got = p.sandbox_requirements(&exec);
        assert_eq!(
            got,
            SandboxRequirements {
                isolation: IsolationLevel::Strict,
                raised_by: Some("rule code in strict (p.toml:2)".to_owned()),
                forbidden_paths: vec![
                    "/home/u/.ssh".to_owned(),
                    "/ws/secrets".to_owned(),
                    "/etc/shadow".to_owned()
                ],
                forbidden_patterns: vec!["**/.env".to_owned()],
            }
        );
        // Each entry of a walk is checked against the same lists the arguments are.
        for (path, want) in [
            ("/ws/app/.env", Some("**/.env")),
            ("/ws/.env", Some("**/.env")),
            ("/ws/secrets/key", Some("secrets/")),
            ("/ws/app/.env.example", None),
            ("/ws/src/main.rs", None),
        ] {
            assert_eq!(p.sandbox_forbids(&exec, path), want, "{path}");
        }
        // A rule never lowers what the definition asks for.
        let restricted = def(
            "py",
            ToolCategory::CodeExecution,
            IsolationLevel::Restricted,
        );
        assert_eq!(
            p.sandbox_requirements(&restricted).isolation,
            IsolationLevel::Restricted
        );
        let other = def("ls", ToolCategory::System, IsolationLevel::Standard);
        let got = p.sandbox_requirements(&other);
        assert_eq!(
            (got.isolation, got.raised_by),
            (IsolationLevel::Standard, None)
        );
    }

    #[test]
    fn a_rule_cannot_require_none_or_an_unknown_level() {
        for (level, message) in [
            ("none", "\"none\" cannot be required"),
            ("sealed", "rules.isolation: "),
        ] {
            let text = format!("[[rules]]\nname = \"r\"\nisolation = \"{level}\"\n");
            let e = compile(&text, None).unwrap_err();
            assert!(e.contains("p.toml:3:13"), "{e}");
            assert!(e.contains(message), "{e}");
        }
    }
}
