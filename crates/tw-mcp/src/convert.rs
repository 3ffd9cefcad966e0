//! Toolwarden's values in MCP's shapes: a definition as a `tools/list` entry (through
//! `tw_core::export`, so `toolwarden tools export --format mcp` and the server agree) and a
//! `ToolResult` as a `tools/call` result. Pure functions, so the wire shapes are pinned by
//! snapshot tests without a session.

use rmcp::model::{CallToolResult, ContentBlock, MetaObject, Tool};
use serde_json::{Map, Value, json};
use tw_core::export::{ExportFormat, export_tool};
use tw_core::{ToolDefinition, ToolResult, ToolStatus};

/// The `_meta` key carrying the call's execution id, to find its audit record
/// (`toolwarden audit show ID`).
pub(crate) const META_EXECUTION_ID: &str = "toolwarden/executionId";
/// The `_meta` key carrying the pipeline's status (`success`, `permission_denied`, ...).
pub(crate) const META_STATUS: &str = "toolwarden/status";

/// The definition's output schema when MCP can carry it: MCP requires an object schema (its
/// `structuredContent` is an object), so a tool whose output is text or an array advertises none
/// and answers with text only.
pub(crate) fn object_output_schema(def: &ToolDefinition) -> Option<&Value> {
    def.output_schema
        .as_ref()
        .map(|s| s.value())
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
}

/// One `tools/list` entry as JSON: name, description, inputSchema, outputSchema (object schemas
/// only) and the behaviour hints (`tw_core::export::mcp_annotations`).
pub(crate) fn tool_json(def: &ToolDefinition) -> Value {
    let mut v = export_tool(def, ExportFormat::Mcp);
    if object_output_schema(def).is_none()
        && let Some(t) = v.as_object_mut()
    {
        t.remove("outputSchema");
    }
    v
}

/// [`tool_json`] as rmcp's type; `None` (logged) for a definition MCP cannot carry.
pub(crate) fn tool(def: &ToolDefinition) -> Option<Tool> {
    match serde_json::from_value(tool_json(def)) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(tool = %def.name, error = %e, "the tool cannot be listed over MCP");
            None
        }
    }
}

/// A tool's answer as a `tools/call` result. Success: the output as text (a string output as
/// itself, JSON as compact JSON), plus `structuredContent` when the tool advertises an output
/// schema and the output is an object (a capped output is a string, and then only text goes).
/// Anything else: `isError` with `"<status>: <error code>: <message>"`; the message carries the
/// policy explanation's reason for a refusal. Either way `_meta` names the execution.
/// With `passthrough`, the output is an upstream server's `{"content": [...]}`: its content blocks
/// (text, images, resources) are relayed as they came.
pub(crate) fn call_result(
    result: &ToolResult,
    structured: bool,
    passthrough: bool,
) -> CallToolResult {
    let blocks = passthrough
        .then_some(result.output.as_ref())
        .flatten()
        .and_then(|o| o.get("content"))
        .and_then(|c| serde_json::from_value::<Vec<ContentBlock>>(c.clone()).ok());
    let mut out = if result.status == ToolStatus::Success
        && let Some(blocks) = blocks
    {
        CallToolResult::success(blocks)
    } else if result.status == ToolStatus::Success
        && let Some((image, rest)) = result.output.as_ref().and_then(image)
    {
        // An image (a screenshot): the picture as an image block, the rest as text and
        // structured content, without the picture's base64 a second and third time.
        let mut r = CallToolResult::success(vec![image, ContentBlock::text(rest.to_string())]);
        if structured {
            r.structured_content = Some(rest);
        }
        r
    } else if result.status == ToolStatus::Success {
        let text = match &result.output {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        if structured && let Some(v @ Value::Object(_)) = &result.output {
            r.structured_content = Some(v.clone());
        }
        r
    } else {
        let text = match &result.error {
            Some(e) => format!("{}: {}: {}", result.status, e.code, e.message),
            None => result.status.to_string(),
        };
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    let mut meta = Map::new();
    meta.insert(
        META_EXECUTION_ID.into(),
        json!(result.execution_id.to_string()),
    );
    meta.insert(META_STATUS.into(), json!(result.status.as_str()));
    out.meta = Some(MetaObject(meta));
    out
}

/// An output that is an image (`{"mime_type": "image/...", "data": BASE64, ...}`): its image
/// block, and the output without `data`.
fn image(output: &Value) -> Option<(ContentBlock, Value)> {
    let o = output.as_object()?;
    let mime = o.get("mime_type")?.as_str()?;
    let data = o.get("data")?.as_str()?;
    if !mime.starts_with("image/") {
        return None;
    }
    let mut rest = o.clone();
    rest.remove("data");
    Some((ContentBlock::image(data, mime), Value::Object(rest)))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_core::ToolSpec;
    use tw_core::{ExecutionId, ToolError, TraceId};

    use super::*;

    fn defs() -> Vec<ToolDefinition> {
        let specs: Vec<ToolSpec> = serde_json::from_value(json!([
            {
                "name": "read_file",
                "description": "Read a file.",
                "category": "file_system",
                "group": "fs",
                "parameters": [{"name": "path", "type": "string", "required": true}],
                "output_schema": {"type": "object", "properties": {"content": {"type": "string"}}}
            },
            {
                "name": "shout",
                "description": "Upper-case text.",
                "category": "system",
                "group": "custom",
                "parameters": [{"name": "text", "type": "string", "required": true}],
                "output_schema": {"type": "string"}
            },
            {
                "name": "delete_file",
                "description": "Delete a file.",
                "category": "file_system",
                "group": "fs",
                "risk_level": "high",
                "constraints": {"side_effects": true},
                "parameters": [{"name": "path", "type": "string", "required": true}]
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

    /// The listing as the wire carries it: through rmcp's type and back to JSON.
    #[test]
    fn tools_list_entries() {
        let listed: Vec<Value> = defs()
            .iter()
            .map(|d| serde_json::to_value(tool(d).unwrap()).unwrap())
            .collect();
        insta::assert_json_snapshot!(listed);
    }

    fn result(status: ToolStatus, output: Option<Value>, error: Option<ToolError>) -> ToolResult {
        ToolResult {
            execution_id: ExecutionId::new("exec-0190b4c6-5a4e-7c2d-8f00-000000000001").unwrap(),
            trace_id: TraceId::new("trace-1").unwrap(),
            tool: "read_file".into(),
            status,
            output,
            error,
            decision: None,
            metadata: Default::default(),
        }
    }

    fn wire(r: CallToolResult) -> Value {
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn success_with_an_object_schema_is_text_and_structured() {
        let out = json!({"path": "a.txt", "content": "hi\n", "truncated": false});
        insta::assert_json_snapshot!(wire(call_result(
            &result(ToolStatus::Success, Some(out), None),
            true,
            false
        )));
    }

    #[test]
    fn success_without_a_schema_is_text_only() {
        let r = wire(call_result(
            &result(ToolStatus::Success, Some(json!({"a": [1, 2]})), None),
            false,
            false,
        ));
        assert_eq!(
            (&r["content"], r.get("structuredContent"), &r["isError"]),
            (
                &json!([{"type": "text", "text": "{\"a\":[1,2]}"}]),
                None,
                &json!(false)
            )
        );
    }

    #[test]
    fn a_string_output_is_the_text_itself_and_never_structured() {
        let r = wire(call_result(
            &result(ToolStatus::Success, Some(json!("cut {\"a\"")), None),
            true,
            false,
        ));
        assert_eq!(
            (&r["content"], r.get("structuredContent")),
            (&json!([{"type": "text", "text": "cut {\"a\""}]), None)
        );
    }

    #[test]
    fn a_refusal_is_a_tool_error_with_status_code_and_reason() {
        let err = ToolError::new(
            "policy_denied",
            "delete_file is denied: tools layer: deny [\"delete_*\"] (policy.toml:3)",
        );
        insta::assert_json_snapshot!(wire(call_result(
            &result(ToolStatus::PermissionDenied, None, Some(err)),
            true,
            false
        )));
    }

    #[test]
    fn an_upstream_tools_content_blocks_are_relayed_as_they_came() {
        let content = json!([
            {"type": "text", "text": "Echo: hi"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ]);
        let out = json!({ "content": content });
        let r = wire(call_result(
            &result(ToolStatus::Success, Some(out.clone()), None),
            false,
            true,
        ));
        assert_eq!((&r["content"], &r["isError"]), (&content, &json!(false)));
        // Without passthrough (a built-in whose output happens to look like that): JSON text.
        let r = wire(call_result(
            &result(ToolStatus::Success, Some(out), None),
            false,
            false,
        ));
        assert_eq!(r["content"][0]["type"], "text");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("{\"content\"")
        );
    }

    #[test]
    fn an_image_output_is_an_image_block_and_its_facts_without_the_picture() {
        let out = json!({"url": "http://x.test/", "mime_type": "image/png", "bytes": 8,
                         "sha256": "ab", "data": "iVBORw0KGgo="});
        let r = wire(call_result(
            &result(ToolStatus::Success, Some(out), None),
            true,
            false,
        ));
        let facts = json!({"url": "http://x.test/", "mime_type": "image/png", "bytes": 8,
                           "sha256": "ab"});
        assert_eq!(
            r["content"],
            json!([
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "text", "text": facts.to_string()}
            ])
        );
        assert_eq!(r["structuredContent"], facts);
        // Data that is not an image stays JSON text.
        let r = wire(call_result(
            &result(
                ToolStatus::Success,
                Some(json!({"mime_type": "text/plain", "data": "x"})),
                None,
            ),
            false,
            false,
        ));
        assert_eq!(r["content"][0]["type"], "text");
    }

    #[test]
    fn a_status_without_an_error_still_says_which() {
        let r = wire(call_result(
            &result(ToolStatus::Failed, None, None),
            false,
            false,
        ));
        assert_eq!(
            (&r["content"], &r["isError"]),
            (&json!([{"type": "text", "text": "failed"}]), &json!(true))
        );
    }
}
