//! The tools console's write side: adding, editing and removing custom tools (with errors that
//! point at the field at fault, so the form can show them there), and "try it", which runs one
//! call through the governed pipeline like any agent's and reports how it ended.

use std::sync::Arc;

use tauri::State;
use tw_core::{DefinitionFormat, load_tool_specs};
use tw_protocol::{RunResult, RunToolParams, SaveToolParams, ToolParams, ToolSummary};

use super::{Reply, actor, caller, internal, invalid, refused, summary};
use crate::Desktop;

/// A dotted field path from the spec loader (`command.argv[0]`) as a JSON pointer
/// (`/command/argv/0`).
pub(crate) fn pointer(dotted: &str) -> String {
    let mut out = String::new();
    for part in dotted.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        let name_end = rest.find('[').unwrap_or(rest.len());
        out.push('/');
        out.push_str(&rest[..name_end].replace('~', "~0").replace('/', "~1"));
        rest = &rest[name_end..];
        while let Some(close) = rest.find(']') {
            out.push('/');
            out.push_str(&rest[1..close]);
            rest = &rest[close + 1..];
        }
    }
    out
}

/// The field a loader message is about when the loader gives no path (`missing field `name``).
fn missing_field(message: &str) -> Option<String> {
    let rest = message.split_once("missing field `")?.1;
    Some(format!("/{}", rest.split_once('`')?.0))
}

/// Parses a spec sent by the form, with errors located at their field.
pub(crate) fn parse_spec(spec: &serde_json::Value) -> Reply<tw_core::ToolSpec> {
    if !spec.is_object() {
        return Err(invalid("", "a tool spec is a JSON object"));
    }
    if spec.get("tools").is_some() {
        return Err(invalid("/tools", "the form saves one tool at a time"));
    }
    let text = serde_json::to_string(spec).map_err(|e| internal("encoding the spec", e))?;
    let mut specs = load_tool_specs(&text, "spec", DefinitionFormat::Json).map_err(|e| {
        let field = e
            .field
            .as_deref()
            .map(pointer)
            .or_else(|| missing_field(&e.message))
            .unwrap_or_default();
        invalid(&field, e.message)
    })?;
    let spec = specs
        .pop()
        .ok_or_else(|| invalid("", "the spec holds no tool"))?;
    if spec.command.is_none() {
        return Err(invalid(
            "/command",
            "a custom tool needs a command, e.g. {\"argv\": [\"wc\", \"-w\", \"{path}\"]}",
        ));
    }
    Ok(spec)
}

/// Adds a custom tool, or replaces the one being edited (renaming it if the name changed) in
/// one step; the tools service checks the name and the tier's allowance.
#[tauri::command]
pub async fn save_custom_tool(
    state: State<'_, Arc<Desktop>>,
    params: SaveToolParams,
) -> Reply<ToolSummary> {
    let rt = &state.runtime;
    let spec = parse_spec(&params.spec)?;
    let name = spec.definition.name.to_string();
    let saved = match params.original_name.filter(|o| !o.is_empty()) {
        Some(original) => {
            rt.tools()
                .replace_custom_tool(&original, spec, &actor())
                .await
        }
        None => rt.tools().create_custom_tool(spec, &actor()).await,
    };
    saved.map_err(|e| refused("saving the tool", e))?;
    summary(rt, &name, &caller())
}

/// Removes a custom tool.
#[tauri::command]
pub async fn remove_custom_tool(state: State<'_, Arc<Desktop>>, params: ToolParams) -> Reply<()> {
    state
        .runtime
        .tools()
        .remove_custom_tool(&params.name, &actor())
        .await
        .map_err(|e| refused("removing the tool", e))
}

/// Runs one call as the app's caller, through the whole pipeline (policy, confirmation,
/// validation, sandbox, audit), and reports how it ended.
#[tauri::command]
pub async fn run_tool(state: State<'_, Arc<Desktop>>, params: RunToolParams) -> Reply<RunResult> {
    let rt = &state.runtime;
    let call = rt.call(&params.name, params.arguments, caller());
    let result = rt.execute(call).await;
    let error_field = result
        .error
        .as_ref()
        .and_then(|e| e.violations.first())
        .map(|v| v.pointer.clone());
    Ok(RunResult {
        execution_id: result.execution_id.to_string(),
        status: result.status.to_string(),
        output: result.output.clone(),
        error: result.error.as_ref().map(|e| e.message.clone()),
        error_field,
        duration_us: result.metadata.duration_us,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn dotted_paths_become_json_pointers() {
        assert_eq!(pointer("parameters"), "/parameters");
        assert_eq!(pointer("command.argv[0]"), "/command/argv/0");
        assert_eq!(pointer("a/b.c~d"), "/a~1b/c~0d");
        assert_eq!(pointer(""), "");
    }

    fn error(spec: serde_json::Value) -> tw_protocol::IpcError {
        parse_spec(&spec).unwrap_err()
    }

    #[test]
    fn a_bad_spec_is_reported_at_its_field() {
        let good = json!({
            "name": "word_count",
            "description": "Counts words",
            "category": "file_system",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "command": {"argv": ["wc", "-w", "{path}"]}
        });
        assert_eq!(
            parse_spec(&good).unwrap().definition.name.as_str(),
            "word_count"
        );
        let mut bad_schema = good.clone();
        bad_schema["parameters"]["properties"]["path"]["type"] = json!("strng");
        let e = error(bad_schema);
        assert_eq!(e.field.as_deref(), Some("/parameters"));
        assert!(e.message.contains("invalid JSON Schema"), "{e}");
        assert!(e.message.contains("/properties/path/type"), "{e}");

        let mut bad_name = good.clone();
        bad_name["name"] = json!("Word Count");
        assert_eq!(error(bad_name).field.as_deref(), Some("/name"));

        let mut no_description = good.clone();
        no_description
            .as_object_mut()
            .unwrap()
            .remove("description");
        assert_eq!(error(no_description).field.as_deref(), Some("/description"));

        let mut no_command = good.clone();
        no_command.as_object_mut().unwrap().remove("command");
        assert_eq!(error(no_command).field.as_deref(), Some("/command"));

        assert_eq!(error(json!([1])).code, "invalid");
        assert_eq!(error(json!({"tools": []})).field.as_deref(), Some("/tools"));
    }
}
