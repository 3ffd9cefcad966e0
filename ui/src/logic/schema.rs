//! A tool's parameters JSON Schema as rows a person reads: one row per property (nested objects and
//! array items flattened into dotted paths), with its type, whether it is required, its
//! description and its constraints in words. Unknown keywords are left out rather than guessed at;
//! the raw schema is shown next to the rows.

use serde_json::{Map, Value};

/// One property of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FormRow {
    /// `path`, `options.mode`, `files[].name`.
    pub(crate) path: String,
    /// How deep it is nested (0 for top-level properties).
    pub(crate) depth: usize,
    /// `string`, `integer | null`, `array of string`...
    pub(crate) ty: String,
    pub(crate) required: bool,
    pub(crate) description: String,
    /// Constraints in words: `one of: "r", "w"`, `pattern: ^a`, `min: 1`...
    pub(crate) rules: Vec<String>,
}

/// The rows of an object schema's properties, in the schema's order.
pub(crate) fn form_rows(schema: &Value) -> Vec<FormRow> {
    let mut rows = Vec::new();
    properties(schema, "", 0, &mut rows);
    rows
}

fn properties(schema: &Value, prefix: &str, depth: usize, rows: &mut Vec<FormRow>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required = required(schema);
    for (name, prop) in props {
        let path = format!("{prefix}{name}");
        rows.push(FormRow {
            path: path.clone(),
            depth,
            ty: type_of(prop),
            required: required.contains(&name.as_str()),
            description: description(prop),
            rules: prop.as_object().map(rules).unwrap_or_default(),
        });
        properties(prop, &format!("{path}."), depth + 1, rows);
        if let Some(items) = prop.get("items") {
            properties(items, &format!("{path}[]."), depth + 1, rows);
        }
    }
}

/// The names an object schema lists as `required`.
pub(crate) fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A property's `description`, or nothing.
pub(crate) fn description(prop: &Value) -> String {
    prop.get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A property's type in words.
fn type_of(prop: &Value) -> String {
    let base = match prop.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => {
            let alternatives = ["anyOf", "oneOf"]
                .iter()
                .find_map(|k| prop.get(*k).and_then(Value::as_array));
            match alternatives {
                Some(alts) => alts.iter().map(type_of).collect::<Vec<_>>().join(" | "),
                None if prop.get("enum").is_some() => "enum".to_owned(),
                None if prop.get("const").is_some() => "const".to_owned(),
                None => "any".to_owned(),
            }
        }
    };
    match prop.get("items") {
        Some(items) if base == "array" => format!("array of {}", type_of(items)),
        _ => base,
    }
}

/// The constraint keywords a person cares about, in a fixed order.
fn rules(prop: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Array(values)) = prop.get("enum") {
        let list: Vec<String> = values.iter().map(Value::to_string).collect();
        out.push(format!("one of: {}", list.join(", ")));
    }
    if let Some(v) = prop.get("const") {
        out.push(format!("always: {v}"));
    }
    let words = [
        ("pattern", "pattern"),
        ("format", "format"),
        ("minimum", "min"),
        ("exclusiveMinimum", "more than"),
        ("maximum", "max"),
        ("exclusiveMaximum", "less than"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
        ("default", "default"),
    ];
    for (key, word) in words {
        match prop.get(key) {
            Some(Value::String(s)) if key != "default" => out.push(format!("{word}: {s}")),
            Some(v) => out.push(format!("{word}: {v}")),
            None => {}
        }
    }
    if prop.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push("unique items".to_owned());
    }
    if prop.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push("no other properties".to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn row(
        path: &str,
        depth: usize,
        ty: &str,
        required: bool,
        desc: &str,
        rules: &[&str],
    ) -> FormRow {
        FormRow {
            path: path.to_owned(),
            depth,
            ty: ty.to_owned(),
            required,
            description: desc.to_owned(),
            rules: rules.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn properties_become_rows_in_schema_order() {
        let schema = json!({
            "type": "object",
            "required": ["path", "mode"],
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "Where.", "pattern": "^[^/]", "maxLength": 4096},
                "mode": {"enum": ["r", "w"], "default": "r"},
                "count": {"type": ["integer", "null"], "minimum": 1, "maximum": 10},
                "options": {
                    "type": "object",
                    "required": ["depth"],
                    "properties": {"depth": {"type": "integer", "exclusiveMinimum": 0}}
                },
                "files": {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": true,
                    "items": {"type": "object", "properties": {"name": {"type": "string", "format": "uri"}}}
                },
                "any": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
                "free": {}
            }
        });
        assert_eq!(
            form_rows(&schema),
            vec![
                row(
                    "path",
                    0,
                    "string",
                    true,
                    "Where.",
                    &["pattern: ^[^/]", "max length: 4096"]
                ),
                row(
                    "mode",
                    0,
                    "enum",
                    true,
                    "",
                    &["one of: \"r\", \"w\"", "default: \"r\""]
                ),
                row(
                    "count",
                    0,
                    "integer | null",
                    false,
                    "",
                    &["min: 1", "max: 10"]
                ),
                row("options", 0, "object", false, "", &[]),
                row("options.depth", 1, "integer", true, "", &["more than: 0"]),
                row(
                    "files",
                    0,
                    "array of object",
                    false,
                    "",
                    &["min items: 1", "unique items"]
                ),
                row("files[].name", 1, "string", false, "", &["format: uri"]),
                row("any", 0, "string | array of number", false, "", &[]),
                row("free", 0, "any", false, "", &[]),
            ]
        );
    }

    #[test]
    fn a_schema_without_properties_has_no_rows() {
        assert_eq!(form_rows(&json!({"type": "object"})), vec![]);
        assert_eq!(form_rows(&json!(null)), vec![]);
    }
}
