//! Grants: a person's standing approval, created when they approve a call and choose to remember
//! it. A grant covers this exact call (the arguments, and so a custom tool's argv, bound), or the
//! tool with an argument pattern, or the tool; for one caller or any; until it expires or is
//! revoked. A grant only ever answers an Ask: the engine never lets one override a Deny.

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::call::Caller;

/// What a grant covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scope", content = "arguments", rename_all = "snake_case")]
pub enum GrantScope {
    /// Calls with exactly these arguments.
    Exact(Value),
    /// Calls whose arguments match: each key's pattern is a glob (`*` matches any characters,
    /// `/` included) for a string argument, or a value the argument must equal. Keys the pattern
    /// does not name are unconstrained.
    Pattern(Map<String, Value>),
    /// Every call of the tool.
    Tool,
}

impl GrantScope {
    /// `exact`, `pattern` or `tool`.
    pub fn kind(&self) -> &'static str {
        match self {
            GrantScope::Exact(_) => "exact",
            GrantScope::Pattern(_) => "pattern",
            GrantScope::Tool => "tool",
        }
    }

    /// Checks a pattern's globs, so a bad one is refused when the grant is made.
    pub fn check(&self) -> Result<(), String> {
        if let GrantScope::Pattern(map) = self {
            if map.is_empty() {
                return Err("an argument pattern needs at least one argument; use the tool scope to cover every call".to_owned());
            }
            for (key, p) in map {
                if let Value::String(glob) = p {
                    GlobBuilder::new(glob)
                        .build()
                        .map_err(|e| format!("pattern for {key:?}: {e}"))?;
                }
            }
        }
        Ok(())
    }
}

/// A standing approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// Its id.
    pub id: String,
    /// The tool it covers.
    pub tool: String,
    /// Which calls of the tool.
    pub scope: GrantScope,
    /// Only this agent's calls; `None` is any caller.
    pub agent_id: Option<String>,
    /// Only calls under this skill; `None` is any.
    pub skill: Option<String>,
    /// When it stops covering calls (µs since the epoch); `None` is never.
    pub expires_at: Option<i64>,
    /// Whether it was revoked.
    pub revoked: bool,
}

fn matches_pattern(pattern: &Map<String, Value>, arguments: &Value) -> bool {
    let Value::Object(args) = arguments else {
        return false;
    };
    pattern.iter().all(|(key, p)| match (p, args.get(key)) {
        (Value::String(glob), Some(Value::String(actual))) => GlobBuilder::new(glob)
            .build()
            .is_ok_and(|g| g.compile_matcher().is_match(actual)),
        (expected, Some(actual)) => expected == actual,
        (_, None) => false,
    })
}

impl Grant {
    /// Whether the grant covers a call to `tool` with `arguments` by `caller` at `now`.
    pub fn covers(&self, tool: &str, arguments: &Value, caller: &Caller, now: i64) -> bool {
        if self.revoked || self.tool != tool || self.expires_at.is_some_and(|t| t <= now) {
            return false;
        }
        if self
            .agent_id
            .as_ref()
            .is_some_and(|a| *a != caller.agent_id)
        {
            return false;
        }
        if self
            .skill
            .as_ref()
            .is_some_and(|s| caller.skill.as_ref() != Some(s))
        {
            return false;
        }
        match &self.scope {
            GrantScope::Exact(expected) => expected == arguments,
            GrantScope::Pattern(pattern) => matches_pattern(pattern, arguments),
            GrantScope::Tool => true,
        }
    }

    /// A one-line description for explanations and lists.
    pub fn describe(&self) -> String {
        let who = match (&self.agent_id, &self.skill) {
            (Some(a), Some(s)) => format!("caller {a} under skill {s}"),
            (Some(a), None) => format!("caller {a}"),
            (None, Some(s)) => format!("any caller under skill {s}"),
            (None, None) => "any caller".to_owned(),
        };
        let what = match &self.scope {
            GrantScope::Exact(args) => format!("{} with arguments {args}", self.tool),
            GrantScope::Pattern(p) => format!(
                "{} with arguments matching {}",
                self.tool,
                Value::Object(p.clone())
            ),
            GrantScope::Tool => format!("every call of {}", self.tool),
        };
        format!("{what}, for {who}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn grant(scope: GrantScope, agent: Option<&str>, expires_at: Option<i64>) -> Grant {
        Grant {
            id: "g1".into(),
            tool: "write_file".into(),
            scope,
            agent_id: agent.map(str::to_owned),
            skill: None,
            expires_at,
            revoked: false,
        }
    }

    #[test]
    fn what_each_scope_covers() {
        let me = Caller::agent("me");
        let other = Caller::agent("other");
        let args = json!({"path": "src/main.rs", "content": "x"});
        let pattern = |p: Value| GrantScope::Pattern(p.as_object().unwrap().clone());
        let cases: Vec<(Grant, &str, Value, &Caller, i64, bool)> = vec![
            (
                grant(GrantScope::Exact(args.clone()), None, None),
                "write_file",
                args.clone(),
                &me,
                0,
                true,
            ),
            (
                grant(GrantScope::Exact(args.clone()), None, None),
                "write_file",
                json!({"path": "src/main.rs", "content": "y"}),
                &me,
                0,
                false,
            ),
            (
                grant(pattern(json!({"path": "src/**"})), None, None),
                "write_file",
                args.clone(),
                &me,
                0,
                true,
            ),
            (
                grant(pattern(json!({"path": "docs/*"})), None, None),
                "write_file",
                args.clone(),
                &me,
                0,
                false,
            ),
            (
                grant(pattern(json!({"missing": "*"})), None, None),
                "write_file",
                args.clone(),
                &me,
                0,
                false,
            ),
            (
                grant(GrantScope::Tool, None, None),
                "write_file",
                args.clone(),
                &other,
                0,
                true,
            ),
            (
                grant(GrantScope::Tool, None, None),
                "delete_file",
                args.clone(),
                &me,
                0,
                false,
            ),
            (
                grant(GrantScope::Tool, Some("me"), None),
                "write_file",
                args.clone(),
                &other,
                0,
                false,
            ),
            (
                grant(GrantScope::Tool, Some("me"), Some(100)),
                "write_file",
                args.clone(),
                &me,
                99,
                true,
            ),
            (
                grant(GrantScope::Tool, Some("me"), Some(100)),
                "write_file",
                args.clone(),
                &me,
                100,
                false,
            ),
        ];
        for (i, (g, tool, args, caller, now, expect)) in cases.into_iter().enumerate() {
            assert_eq!(
                g.covers(tool, &args, caller, now),
                expect,
                "case {i}: {}",
                g.describe()
            );
        }
        let mut revoked = grant(GrantScope::Tool, None, None);
        revoked.revoked = true;
        assert!(!revoked.covers("write_file", &args, &me, 0));
    }

    #[test]
    fn bad_patterns_are_refused_when_made() {
        let bad = GrantScope::Pattern(json!({"path": "a["}).as_object().unwrap().clone());
        assert!(bad.check().unwrap_err().contains("pattern for \"path\""));
        assert!(GrantScope::Pattern(Map::new()).check().is_err());
        assert!(GrantScope::Tool.check().is_ok());
    }
}
