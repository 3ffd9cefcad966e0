//! The "try it" form: one input per top-level parameter of a tool's JSON Schema (a text box, a
//! number box, a checkbox, a choice among an enum's values, or a JSON box for anything richer),
//! and the arguments object built from what was typed. Empty optional inputs are left out, so
//! the schema's defaults apply; what cannot be read is reported at its input.

use serde_json::{Map, Value};

use crate::logic::schema::{description, required};

/// What kind of input a parameter gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InputKind {
    Text,
    Integer,
    Number,
    Bool,
    /// One of these (JSON-encoded values shown as text).
    Choice(Vec<String>),
    /// Arrays, objects, unions: typed as JSON.
    Json,
}

/// One input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TryInput {
    pub(crate) name: String,
    pub(crate) kind: InputKind,
    pub(crate) required: bool,
    pub(crate) description: String,
}

/// The inputs for a parameters schema, in the schema's order.
pub(crate) fn inputs(schema: &Value) -> Vec<TryInput> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required = required(schema);
    props
        .iter()
        .map(|(name, prop)| TryInput {
            name: name.clone(),
            kind: kind_of(prop),
            required: required.contains(&name.as_str()),
            description: description(prop),
        })
        .collect()
}

fn kind_of(prop: &Value) -> InputKind {
    if let Some(Value::Array(values)) = prop.get("enum") {
        return InputKind::Choice(values.iter().map(Value::to_string).collect());
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("string") => InputKind::Text,
        Some("integer") => InputKind::Integer,
        Some("number") => InputKind::Number,
        Some("boolean") => InputKind::Bool,
        _ => InputKind::Json,
    }
}

/// The arguments from the typed values (`values[i]` for `inputs[i]`; a checkbox is `"true"` or
/// `"false"`), or the input that cannot be read and why.
pub(crate) fn arguments(inputs: &[TryInput], values: &[String]) -> Result<Value, (String, String)> {
    let mut out = Map::new();
    for (input, raw) in inputs.iter().zip(values) {
        let text = raw.trim();
        let bad = |why: String| (input.name.clone(), why);
        if text.is_empty() && !matches!(input.kind, InputKind::Bool | InputKind::Text) {
            continue;
        }
        let value = match &input.kind {
            InputKind::Text if raw.is_empty() && !input.required => continue,
            InputKind::Text => Value::String(raw.clone()),
            InputKind::Bool => Value::Bool(text == "true"),
            InputKind::Integer => text
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad(format!("{text:?} is not a whole number")))?,
            InputKind::Number => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| bad(format!("{text:?} is not a number")))?,
            InputKind::Choice(_) | InputKind::Json => {
                serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?
            }
        };
        out.insert(input.name.clone(), value);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "Where."},
                "lines": {"type": "integer"},
                "ratio": {"type": "number"},
                "follow": {"type": "boolean"},
                "mode": {"enum": ["r", "w"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"type": "string"}
            }
        })
    }

    #[test]
    fn each_parameter_gets_an_input_of_its_kind() {
        let kinds: Vec<(String, InputKind, bool)> = inputs(&schema())
            .into_iter()
            .map(|i| (i.name, i.kind, i.required))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("path".into(), InputKind::Text, true),
                ("lines".into(), InputKind::Integer, false),
                ("ratio".into(), InputKind::Number, false),
                ("follow".into(), InputKind::Bool, false),
                (
                    "mode".into(),
                    InputKind::Choice(vec!["\"r\"".into(), "\"w\"".into()]),
                    false
                ),
                ("tags".into(), InputKind::Json, false),
                ("note".into(), InputKind::Text, false),
            ]
        );
        assert_eq!(inputs(&json!({"type": "object"})), vec![]);
    }

    #[test]
    fn typed_values_become_arguments_and_empty_optional_ones_are_left_out() {
        let i = inputs(&schema());
        let v = |s: [&str; 7]| s.map(String::from).to_vec();
        assert_eq!(
            arguments(
                &i,
                &v(["a.txt", " 12 ", "0.5", "true", "\"w\"", "[\"x\"]", ""])
            )
            .unwrap(),
            json!({"path": "a.txt", "lines": 12, "ratio": 0.5, "follow": true, "mode": "w", "tags": ["x"]})
        );
        assert_eq!(
            arguments(&i, &v(["", "", "", "false", "", "", ""])).unwrap(),
            json!({"path": "", "follow": false})
        );
        assert_eq!(
            arguments(&i, &v(["a", "1.5", "", "false", "", "", ""])).unwrap_err(),
            (
                "lines".to_owned(),
                "\"1.5\" is not a whole number".to_owned()
            )
        );
        assert_eq!(
            arguments(&i, &v(["a", "", "", "false", "", "[x", ""]))
                .unwrap_err()
                .0,
            "tags"
        );
    }
}
