//! Stages 9 and 10, what every call leaves behind: its audit record (arguments and JSON output
//! redacted, the decision trace, the violation it was) and its final event and log line.

use serde_json::Value;
use tw_core::policy::{self, PolicyDecision};
use tw_core::{Caller, ToolResult, ToolStatus};
use tw_store::{AuditRecord, AuditViolation, JsonText};

use super::Pipeline;
use crate::events::{EventKind, ExecutionEvent};

impl Pipeline {
    pub(super) async fn audit(
        &self,
        caller: &Caller,
        arguments: Value,
        result: &ToolResult,
    ) -> tw_store::Result<i64> {
        let violation = violation(result);
        let record = AuditRecord {
            execution_id: result.execution_id.to_string(),
            trace_id: result.trace_id.to_string(),
            tool: result.tool.clone(),
            agent_id: caller.agent_id.clone(),
            skill: caller.skill.clone(),
            user_id: caller.user.clone(),
            arguments,
            decision: result.decision.as_ref().map(|d| d.decision.to_string()),
            explanation: result.decision.as_ref().map(|d| JsonText::encode(&d.trace)),
            status: result.status,
            error_code: result.error.as_ref().map(|e| e.code.clone()),
            error_message: result.error.as_ref().map(|e| e.message.clone()),
            // JSON outputs get the same key-based redaction: a tool that echoes or returns
            // credentials must not copy them into a log that gets exported and shared.
            output: result.output.as_ref().map(|o| {
                if tw_core::redact::needs_redaction(o) {
                    tw_core::redact::redact(o)
                } else {
                    o.clone()
                }
            }),
            output_bytes: result.metadata.output_bytes,
            truncated: result.metadata.truncated,
            started_at: result.metadata.started_at,
            completed_at: result.metadata.completed_at,
            duration_us: result.metadata.duration_us,
            metadata: JsonText::encode(&result.metadata.execution),
            violation,
        };
        self.shared.store.append(record).await
    }

    /// Publishes the final event and the matching tracing event.
    pub(super) fn announce(&self, result: &ToolResult, span: &tracing::Span) {
        let _enter = span.enter();
        let message = result.error.as_ref().map_or("", |e| e.message.as_str());
        match result.status {
            ToolStatus::Success => {
                tracing::info!(name: "tool_call_completed", trace_id = %result.trace_id, status = %result.status, duration_us = result.metadata.duration_us, "tool call completed");
            }
            // A tool that broke or ran out of time is worth a warning; a refusal is governance
            // doing its job (the caller gets the reason, and the audit log has it), logged as
            // blocked with the layer that refused, apart from calls that ran and failed.
            ToolStatus::Failed | ToolStatus::Timeout | ToolStatus::SandboxError => {
                tracing::warn!(name: "tool_call_failed", trace_id = %result.trace_id, status = %result.status, error = message, duration_us = result.metadata.duration_us, "tool call did not succeed");
            }
            status if crate::metrics::is_refusal(status) => {
                let layer = result
                    .decision
                    .as_ref()
                    .and_then(|d| d.deciding())
                    .map_or("", |v| v.layer.as_str());
                tracing::info!(name: "tool_call_blocked", trace_id = %result.trace_id, status = %result.status, layer, error = message, "tool call refused");
            }
            _ => {
                tracing::info!(name: "tool_call_failed", trace_id = %result.trace_id, status = %result.status, error = message, duration_us = result.metadata.duration_us, "tool call did not succeed");
            }
        }
        if !self.shared.events.has_subscribers() {
            return;
        }
        let kind = match result.status {
            ToolStatus::Success => EventKind::Completed {
                status: result.status,
                duration_us: result.metadata.duration_us,
            },
            ToolStatus::Timeout => EventKind::Timeout {
                duration_us: result.metadata.duration_us,
            },
            ToolStatus::Failed | ToolStatus::Cancelled | ToolStatus::SandboxError => {
                EventKind::Failed {
                    status: result.status,
                    code: result
                        .error
                        .as_ref()
                        .map(|e| e.code.clone())
                        .unwrap_or_default(),
                    message: message.to_owned(),
                }
            }
            ToolStatus::RequiresConfirmation
            | ToolStatus::PermissionDenied
            | ToolStatus::ValidationError
            | ToolStatus::NotFound => EventKind::Denied {
                status: result.status,
                reason: message.to_owned(),
            },
        };
        self.emit(result, kind);
    }

    pub(super) fn emit(&self, result: &ToolResult, kind: EventKind) {
        if self.shared.events.has_subscribers() {
            self.shared.events.publish(ExecutionEvent {
                execution_id: result.execution_id.clone(),
                trace_id: result.trace_id.clone(),
                tool: result.tool.clone(),
                at: self.shared.now_us(),
                kind,
                replica: None,
            });
        }
    }
}

/// The violation a refused call records: the policy's, or one the tool itself reported (a path
/// outside the workspace is an attempt at the boundary).
fn violation(result: &ToolResult) -> Option<AuditViolation> {
    if let Some((kind, severity)) = result.decision.as_ref().and_then(PolicyDecision::violation) {
        return Some(AuditViolation { kind, severity });
    }
    let code = &result.error.as_ref()?.code;
    match result.status {
        ToolStatus::PermissionDenied => Some(AuditViolation {
            kind: code.clone(),
            severity: if code == "path_outside_workspace" {
                policy::Severity::Critical
            } else {
                policy::Severity::Error
            },
        }),
        _ => None,
    }
}
