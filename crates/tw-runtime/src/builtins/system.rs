//! System tools. `echo` returns its arguments unchanged: agents use it to check that they reach
//! Toolwarden and are governed as expected, and it is the no-op the pipeline benchmarks measure.

use std::sync::Arc;

use serde_json::{Value, json};
use tw_core::{IsolationLevel, ToolCategory, ToolDefinition};

use super::{BuiltinTool, ToolContext, ToolFuture, lit};

struct Echo;

impl BuiltinTool for Echo {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = ToolDefinition::new(
            lit::name("echo")?,
            "Return the arguments unchanged. Use it to check connectivity and governance.",
            ToolCategory::System,
            lit::group("system")?,
            lit::params(
                json!({"type": "object", "description": "Any JSON object; it is returned as is."}),
            )?,
        );
        d.constraints.isolation = IsolationLevel::None;
        d.constraints.max_execution_time_ms = 1_000;
        Ok(d)
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(std::future::ready(Ok(args.clone())))
    }
}

pub(super) fn tools() -> Vec<Arc<dyn BuiltinTool>> {
    vec![Arc::new(Echo)]
}
