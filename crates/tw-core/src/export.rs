//! Exports the callable tool set as the function schemas agents consume: OpenAI function tools,
//! Anthropic tools and MCP `tools/list` entries. These are wire formats other programs parse, so each
//! is pinned by a snapshot test.

use std::str::FromStr;

use serde_json::{Map, Value, json};

use crate::definition::{RiskLevel, ToolCategory, ToolDefinition};

/// A function-schema dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// `{"type": "function", "function": {name, description, parameters}}`
    OpenAi,
    /// `{name, description, input_schema}`
    Anthropic,
    /// `{name, description, inputSchema, outputSchema?, annotations}`
    Mcp,
}

impl FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "mcp" => Ok(Self::Mcp),
            _ => Err(format!(
                "unknown export format {s:?}: expected openai, anthropic or mcp"
            )),
        }
    }
}

/// MCP behaviour hints derived from the definition: read-only when it declares no side effects,
/// destructive when it has side effects of more than low risk, open-world when it reaches outside.
pub fn mcp_annotations(def: &ToolDefinition) -> Value {
    let read_only = def.is_read_only();
    let mut a = Map::new();
    a.insert("readOnlyHint".into(), json!(read_only));
    a.insert(
        "destructiveHint".into(),
        json!(!read_only && def.risk_level != RiskLevel::Low),
    );
    a.insert(
        "openWorldHint".into(),
        json!(matches!(
            def.category,
            ToolCategory::Network | ToolCategory::ExternalApi | ToolCategory::Communication
        )),
    );
    Value::Object(a)
}

/// One tool in the given dialect.
pub fn export_tool(def: &ToolDefinition, format: ExportFormat) -> Value {
    match format {
        ExportFormat::OpenAi => json!({
            "type": "function",
            "function": {
                "name": def.name,
                "description": def.description,
                "parameters": def.parameters,
            }
        }),
        ExportFormat::Anthropic => json!({
            "name": def.name,
            "description": def.description,
            "input_schema": def.parameters,
        }),
        ExportFormat::Mcp => {
            let mut t = Map::new();
            t.insert("name".into(), json!(def.name));
            t.insert("description".into(), json!(def.description));
            t.insert("inputSchema".into(), json!(def.parameters));
            if let Some(out) = &def.output_schema {
                t.insert("outputSchema".into(), json!(out));
            }
            t.insert("annotations".into(), mcp_annotations(def));
            Value::Object(t)
        }
    }
}

/// Several tools as one JSON document: a list for OpenAI and Anthropic, `{"tools": [...]}` for MCP
/// (the shape of a `tools/list` result).
pub fn export_tools<'a>(
    defs: impl IntoIterator<Item = &'a ToolDefinition>,
    format: ExportFormat,
) -> Value {
    let list: Vec<Value> = defs.into_iter().map(|d| export_tool(d, format)).collect();
    match format {
        ExportFormat::Mcp => json!({ "tools": list }),
        _ => Value::Array(list),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::ToolSpec;

    fn tools() -> Vec<ToolDefinition> {
        let specs: Vec<ToolSpec> = serde_json::from_value(json!([
            {
                "name": "read_file",
                "description": "Read a text file from the workspace.",
                "category": "file_system",
                "group": "fs",
                "parameters": [{"name": "path", "type": "string", "description": "Relative path", "required": true}],
                "output_schema": {"type": "object", "properties": {"content": {"type": "string"}}}
            },
            {
                "name": "delete_file",
                "description": "Delete a file.",
                "category": "file_system",
                "group": "fs",
                "risk_level": "high",
                "constraints": {"side_effects": true},
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            },
            {
                "name": "fetch",
                "description": "Fetch a URL.",
                "category": "network",
                "group": "net",
                "parameters": [{"name": "url", "type": "string", "required": true}]
            }
        ]))
        .unwrap();
        specs.into_iter().map(|s| s.definition).collect()
    }

    #[test]
    fn openai() {
        insta::assert_json_snapshot!(export_tools(&tools(), ExportFormat::OpenAi));
    }

    #[test]
    fn anthropic() {
        insta::assert_json_snapshot!(export_tools(&tools(), ExportFormat::Anthropic));
    }

    #[test]
    fn mcp() {
        insta::assert_json_snapshot!(export_tools(&tools(), ExportFormat::Mcp));
    }

    #[test]
    fn format_names() {
        assert_eq!("OpenAI".parse(), Ok(ExportFormat::OpenAi));
        assert!("gemini".parse::<ExportFormat>().is_err());
    }
}
