//! The two accepted forms of a tool's `parameters`: a full JSON Schema object, or the simple list
//! many tool catalogues use (`[{name, type, description, required, default, enum}]`), which is
//! converted to an equivalent strict schema (no undeclared arguments) so everything downstream
//! sees one representation.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use crate::schema::ParameterSchema;

/// A checked parameter schema, deserialized from either form.
#[derive(Debug, Clone)]
pub struct Parameters(pub ParameterSchema);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SimpleParam {
    name: String,
    #[serde(rename = "type")]
    ty: SimpleType,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    default: Option<Value>,
    #[serde(default, rename = "enum")]
    choices: Option<Vec<Value>>,
    #[serde(default)]
    items: Option<Value>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum SimpleType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl SimpleType {
    fn name(self) -> &'static str {
        match self {
            SimpleType::String => "string",
            SimpleType::Integer => "integer",
            SimpleType::Number => "number",
            SimpleType::Boolean => "boolean",
            SimpleType::Array => "array",
            SimpleType::Object => "object",
        }
    }

    fn admits(self, v: &Value) -> bool {
        match self {
            SimpleType::String => v.is_string(),
            SimpleType::Integer => v.is_i64() || v.is_u64(),
            SimpleType::Number => v.is_number(),
            SimpleType::Boolean => v.is_boolean(),
            SimpleType::Array => v.is_array(),
            SimpleType::Object => v.is_object(),
        }
    }
}

/// Converts the simple list form into a JSON Schema, or says which entry is wrong.
pub fn simple_list_to_schema(list: &[Value]) -> Result<Value, String> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (i, raw) in list.iter().enumerate() {
        let p: SimpleParam =
            serde_json::from_value(raw.clone()).map_err(|e| format!("[{i}]: {e}"))?;
        let valid_name = !p.name.is_empty()
            && p.name.len() <= 64
            && p.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(format!(
                "[{i}].name: {:?} must be 1-64 letters, digits, '_' or '-'",
                p.name
            ));
        }
        if properties.contains_key(&p.name) {
            return Err(format!("[{i}].name: {:?} is declared twice", p.name));
        }
        if p.items.is_some() && p.ty != SimpleType::Array {
            return Err(format!(
                "[{i}].items: only an array parameter may have items"
            ));
        }
        if let Some(choices) = &p.choices {
            if choices.is_empty() {
                return Err(format!("[{i}].enum: must list at least one value"));
            }
            if let Some(bad) = choices.iter().find(|c| !p.ty.admits(c)) {
                return Err(format!("[{i}].enum: {bad} is not of type {}", p.ty.name()));
            }
        }
        if let Some(default) = &p.default {
            if !p.ty.admits(default) {
                return Err(format!(
                    "[{i}].default: {default} is not of type {}",
                    p.ty.name()
                ));
            }
            if p.choices.as_ref().is_some_and(|c| !c.contains(default)) {
                return Err(format!(
                    "[{i}].default: {default} is not one of the enum values"
                ));
            }
        }
        let mut prop = Map::new();
        prop.insert("type".into(), json!(p.ty.name()));
        if let Some(d) = p.description {
            prop.insert("description".into(), json!(d));
        }
        if let Some(c) = p.choices {
            prop.insert("enum".into(), Value::Array(c));
        }
        if let Some(d) = p.default {
            prop.insert("default".into(), d);
        }
        if let Some(items) = p.items {
            prop.insert("items".into(), items);
        }
        if p.required {
            required.push(json!(p.name));
        }
        properties.insert(p.name, Value::Object(prop));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Ok(Value::Object(schema))
}

impl<'de> Deserialize<'de> for Parameters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::checked(d, "a JSON Schema object or a list of parameters", |value| {
            let schema = match value {
                Value::Array(list) => simple_list_to_schema(&list)?,
                other @ Value::Object(_) => other,
                other => {
                    return Err(format!(
                        "expected a JSON Schema object or a list of parameters, found {other}"
                    ));
                }
            };
            ParameterSchema::parameters(schema)
                .map(Parameters)
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn check(list: Value, expect: Result<Value, &str>) {
        let Value::Array(list) = list else {
            panic!("test input must be a list")
        };
        assert_eq!(simple_list_to_schema(&list), expect.map_err(str::to_owned));
    }

    #[test]
    fn converts_every_field() {
        check(
            json!([
                {"name": "path", "type": "string", "description": "File", "required": true},
                {"name": "mode", "type": "string", "enum": ["r", "w"], "default": "r"},
                {"name": "tags", "type": "array", "items": {"type": "string"}}
            ]),
            Ok(json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File"},
                    "mode": {"type": "string", "enum": ["r", "w"], "default": "r"},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["path"],
                "additionalProperties": false
            })),
        );
    }

    #[test]
    fn reports_the_entry_at_fault() {
        check(
            json!([{"name": "a", "type": "text"}]),
            Err(
                "[0]: unknown variant `text`, expected one of `string`, `integer`, `number`, `boolean`, `array`, `object`",
            ),
        );
        check(
            json!([{"name": "a", "type": "string"}, {"name": "a", "type": "string"}]),
            Err("[1].name: \"a\" is declared twice"),
        );
        check(
            json!([{"name": "n", "type": "integer", "default": "3"}]),
            Err("[0].default: \"3\" is not of type integer"),
        );
        check(
            json!([{"name": "m", "type": "string", "enum": ["a"], "default": "b"}]),
            Err("[0].default: \"b\" is not one of the enum values"),
        );
        check(
            json!([{"type": "string"}]),
            Err("[0]: missing field `name`"),
        );
    }
}
