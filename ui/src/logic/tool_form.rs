//! The custom-tool form's model: the fields a person fills in, turned into the tool spec the shell
//! saves (the same JSON `toolwarden tools add` reads), and back from a saved spec for editing; and
//! which field an error belongs to, so it is shown next to that field. Problems the form can see
//! itself (the parameters box is not JSON, no command) are caught here with the same shape of
//! error the shell gives.

use serde_json::{Map, Value, json};

/// The categories a tool may have (tw-core's `ToolCategory`).
pub(crate) const CATEGORIES: [&str; 8] = [
    "file_system",
    "network",
    "database",
    "code_execution",
    "external_api",
    "knowledge",
    "communication",
    "system",
];
/// Risk levels.
pub(crate) const RISKS: [&str; 3] = ["low", "medium", "high"];

/// The form's fields, as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolForm {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) category: String,
    pub(crate) risk: String,
    pub(crate) tier: String,
    pub(crate) requires_confirmation: bool,
    /// The parameters JSON Schema, as text.
    pub(crate) parameters: String,
    /// The command, one argument per line (`{name}` placeholders for parameters).
    pub(crate) argv: String,
    /// Fields of a loaded spec the form has no input for (constraints, rate limit...), kept as
    /// they were so that editing does not drop them.
    pub(crate) rest: Map<String, Value>,
}

impl Default for ToolForm {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: String::new(),
            category: "system".to_owned(),
            risk: "medium".to_owned(),
            tier: "core".to_owned(),
            requires_confirmation: false,
            parameters: "{\n  \"type\": \"object\",\n  \"properties\": {}\n}".to_owned(),
            argv: String::new(),
            rest: Map::new(),
        }
    }
}

/// The inputs an error can point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Name,
    Description,
    Category,
    Risk,
    Tier,
    Confirmation,
    Parameters,
    Command,
    /// Anything else: shown above the form.
    Form,
}

impl Field {
    /// The input a JSON pointer into the spec belongs to.
    pub(crate) fn of(pointer: Option<&str>) -> Field {
        let first = pointer
            .unwrap_or("")
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        match first {
            "name" => Field::Name,
            "description" => Field::Description,
            "category" => Field::Category,
            "risk_level" => Field::Risk,
            "license_tier" => Field::Tier,
            "requires_confirmation" => Field::Confirmation,
            "parameters" => Field::Parameters,
            "command" => Field::Command,
            _ => Field::Form,
        }
    }

    /// The `data-field` the view marks the message with.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::Description => "description",
            Field::Category => "category",
            Field::Risk => "risk",
            Field::Tier => "tier",
            Field::Confirmation => "confirmation",
            Field::Parameters => "parameters",
            Field::Command => "command",
            Field::Form => "form",
        }
    }
}

/// An error at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub(crate) field: Field,
    pub(crate) message: String,
}

impl ToolForm {
    /// The spec to save, or the first problem the form can see itself.
    pub(crate) fn to_spec(&self) -> Result<Value, FieldError> {
        let parameters: Value = serde_json::from_str(&self.parameters).map_err(|e| FieldError {
            field: Field::Parameters,
            message: format!(
                "not JSON: {} (line {}, column {})",
                strip_position(&e.to_string()),
                e.line(),
                e.column()
            ),
        })?;
        let argv: Vec<&str> = self
            .argv
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if argv.is_empty() {
            return Err(FieldError {
                field: Field::Command,
                message: "the command needs at least the program to run".to_owned(),
            });
        }
        let mut spec = self.rest.clone();
        let mut command = spec
            .remove("command")
            .and_then(|c| c.as_object().cloned())
            .unwrap_or_default();
        command.insert("argv".to_owned(), json!(argv));
        spec.insert("name".to_owned(), json!(self.name.trim()));
        spec.insert("description".to_owned(), json!(self.description));
        spec.insert("category".to_owned(), json!(self.category));
        spec.insert("risk_level".to_owned(), json!(self.risk));
        spec.insert("license_tier".to_owned(), json!(self.tier));
        spec.insert(
            "requires_confirmation".to_owned(),
            json!(self.requires_confirmation),
        );
        spec.insert("parameters".to_owned(), parameters);
        spec.insert("command".to_owned(), Value::Object(command));
        Ok(Value::Object(spec))
    }

    /// The form for editing a saved spec.
    pub(crate) fn from_spec(spec: &Value) -> ToolForm {
        let mut rest = spec.as_object().cloned().unwrap_or_default();
        let mut take = |key: &str| rest.remove(key);
        let text = |v: Option<Value>, default: &str| match v {
            Some(Value::String(s)) => s,
            _ => default.to_owned(),
        };
        let defaults = ToolForm::default();
        let name = text(take("name"), "");
        let description = text(take("description"), "");
        let category = text(take("category"), &defaults.category);
        let risk = text(take("risk_level"), &defaults.risk);
        let tier = text(take("license_tier"), &defaults.tier);
        let requires_confirmation = take("requires_confirmation")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let parameters = take("parameters")
            .map(|p| serde_json::to_string_pretty(&p).unwrap_or_default())
            .unwrap_or(defaults.parameters);
        let mut command = take("command")
            .and_then(|c| c.as_object().cloned())
            .unwrap_or_default();
        let argv = command
            .remove("argv")
            .and_then(|a| a.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect::<Vec<_>>()
            .join("\n");
        if !command.is_empty() {
            rest.insert("command".to_owned(), Value::Object(command));
        }
        ToolForm {
            name,
            description,
            category,
            risk,
            tier,
            requires_confirmation,
            parameters,
            argv,
            rest,
        }
    }
}

/// serde_json's message without its " at line L column C" tail (the form says it its own way).
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn filled() -> ToolForm {
        ToolForm {
            name: " word_count ".into(),
            description: "Counts words".into(),
            category: "file_system".into(),
            risk: "low".into(),
            tier: "pro".into(),
            requires_confirmation: true,
            parameters: r#"{"type": "object", "properties": {"path": {"type": "string"}}}"#.into(),
            argv: "wc\n-w\n\n  {path}  \n".into(),
            rest: Map::new(),
        }
    }

    #[test]
    fn the_form_becomes_the_spec_the_cli_reads() {
        assert_eq!(
            filled().to_spec().unwrap(),
            json!({
                "name": "word_count",
                "description": "Counts words",
                "category": "file_system",
                "risk_level": "low",
                "license_tier": "pro",
                "requires_confirmation": true,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                "command": {"argv": ["wc", "-w", "{path}"]}
            })
        );
    }

    #[test]
    fn problems_the_form_sees_are_reported_at_their_field() {
        let mut f = filled();
        f.parameters = "{\"type\": \"object\",\n \"properties\": }".into();
        let e = f.to_spec().unwrap_err();
        assert_eq!(e.field, Field::Parameters);
        assert!(
            e.message.starts_with("not JSON: expected value"),
            "{}",
            e.message
        );
        assert!(e.message.ends_with("(line 2, column 16)"), "{}", e.message);
        let mut f = filled();
        f.argv = "  \n".into();
        assert_eq!(f.to_spec().unwrap_err().field, Field::Command);
    }

    #[test]
    fn editing_a_spec_keeps_what_the_form_does_not_show() {
        let spec = json!({
            "name": "word_count",
            "description": "Counts words",
            "category": "file_system",
            "risk_level": "low",
            "license_tier": "pro",
            "requires_confirmation": true,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "constraints": {"timeout_ms": 5000},
            "command": {"argv": ["wc", "-w", "{path}"], "env": {"LC_ALL": "C"}}
        });
        let form = ToolForm::from_spec(&spec);
        assert_eq!(form.argv, "wc\n-w\n{path}");
        assert!(form.requires_confirmation);
        assert_eq!(form.to_spec().unwrap(), spec);
    }

    #[test]
    fn pointers_name_their_input() {
        assert_eq!(Field::of(Some("/parameters")), Field::Parameters);
        assert_eq!(
            Field::of(Some("/parameters/properties/x")),
            Field::Parameters
        );
        assert_eq!(Field::of(Some("/command/argv/0")), Field::Command);
        assert_eq!(Field::of(Some("/risk_level")), Field::Risk);
        assert_eq!(Field::of(Some("/name")), Field::Name);
        assert_eq!(Field::of(Some("/constraints")), Field::Form);
        assert_eq!(Field::of(None), Field::Form);
    }
}
