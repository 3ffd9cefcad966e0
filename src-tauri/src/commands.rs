//! The commands the UI calls: thin adapters from tw-protocol parameters to tw-runtime calls and
//! back. Every one answers `Result<_, IpcError>`; errors say what was wrong without leaking
//! internals (a store failure is logged in full and reported as `internal`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tauri::State;
use tw_core::{Caller, LicenseTier, OperationalMode, ToolFilter};
use tw_protocol::{
    AnswerParams, AnswerResponse, AuditDetail, AuditPage, AuditQueryParams, AuditRecordParams,
    CancelParams, Confirmation, Decision, Grant, GrantParams, IpcError, ListToolsParams,
    PolicyFile, SetModeParams, SetToolEnabledParams, Settings, ToolDetail, ToolParams, ToolSummary,
};
use tw_runtime::{
    Answer, Answered, ErrorKind, GrantSpec, Remember, Runtime, RuntimeError, ToolKind, Who,
};
use tw_store::{AuditFilter, AuditQuery};

use crate::Desktop;
use crate::convert;

pub mod chains;
pub mod custom;
pub mod report;
pub mod skills;

pub(crate) type Reply<T> = Result<T, IpcError>;

/// The identity the app's own calls and answers are recorded under.
pub(crate) fn caller() -> Caller {
    let c = Caller::agent("desktop");
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => c.with_user(&user),
        _ => c,
    }
}

pub(crate) fn actor() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("desktop:{user}"),
        _ => "desktop".to_owned(),
    }
}

pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> IpcError {
    tracing::error!(error = %e, "{what} failed");
    IpcError::new("internal", format!("{what} failed; see the app's log"))
}

/// The IPC error for a request the runtime refused: the one place the desktop maps runtime
/// errors. The code is the error's kind (`not_found`, `conflict`, `invalid`, `denied`,
/// `unavailable`, `internal`), the field a JSON pointer into the command's parameters, and an
/// internal failure is logged in full and reported without its details.
pub(crate) fn refused(what: &str, e: RuntimeError) -> IpcError {
    let kind = e.kind();
    if kind == ErrorKind::Internal {
        return internal(what, e);
    }
    IpcError {
        code: kind.as_str().to_owned(),
        message: e.to_string(),
        field: e.field().map(pointer_of),
    }
}

/// A runtime service's field name as the JSON pointer of the parameter that carries it.
fn pointer_of(field: &str) -> String {
    let param = match field {
        "since" => "sinceAt",
        "until" => "untilAt",
        "agent_id" => "caller",
        "duration" => "rememberSecs",
        "remember" => "rememberScope",
        "who" => "anyCaller",
        other => other,
    };
    format!("/{param}")
}

pub(crate) fn invalid(field: &str, message: impl Into<String>) -> IpcError {
    IpcError {
        code: "invalid".to_owned(),
        message: message.into(),
        field: Some(field.to_owned()),
    }
}

pub(crate) fn summary(rt: &Runtime, name: &str, caller: &Caller) -> Reply<ToolSummary> {
    let tool = rt
        .registry()
        .get(name)
        .ok_or_else(|| IpcError::new("not_found", format!("no tool named {name:?}")))?;
    let decision = rt.tool_decision(name, caller);
    Ok(convert::tool_summary(
        &tool,
        decision.as_ref(),
        &rt.tools().disabled_tiers(name),
        rt.settings().tier(),
    ))
}

/// The tools, filtered by a search text.
#[tauri::command]
pub async fn list_tools(
    state: State<'_, Arc<Desktop>>,
    params: ListToolsParams,
) -> Reply<Vec<ToolSummary>> {
    let rt = &state.runtime;
    let caller = caller();
    let filter = ToolFilter {
        text: params.search,
        ..ToolFilter::default()
    };
    rt.registry()
        .find(&filter)
        .iter()
        .map(|t| summary(rt, t.definition.name.as_str(), &caller))
        .collect()
}

/// One tool in full, with policy's explanation for the app's caller or a chosen agent.
#[tauri::command]
pub async fn get_tool(state: State<'_, Arc<Desktop>>, params: ToolParams) -> Reply<ToolDetail> {
    let rt = &state.runtime;
    let caller = match params.caller.as_deref().map(str::trim) {
        Some(agent) if !agent.is_empty() => {
            tw_core::call::check_agent_id(agent).map_err(|e| invalid("/caller", e))?;
            Caller::agent(agent)
        }
        _ => caller(),
    };
    let s = summary(rt, &params.name, &caller)?;
    let tool = rt
        .registry()
        .get(&params.name)
        .ok_or_else(|| IpcError::new("not_found", format!("no tool named {:?}", params.name)))?;
    let d = &tool.definition;
    let json = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap_or_default();
    let spec = match &tool.kind {
        ToolKind::Custom(command) => Some(json(serde_json::to_value(tw_core::ToolSpec {
            definition: d.clone(),
            command: Some(command.clone()),
        }))),
        _ => None,
    };
    Ok(ToolDetail {
        summary: s,
        parameters: json(serde_json::to_value(&d.parameters)),
        output_schema: d
            .output_schema
            .as_ref()
            .map(|o| json(serde_json::to_value(o))),
        constraints: json(serde_json::to_value(&d.constraints)),
        explanation: rt
            .tool_decision(&params.name, &caller)
            .map(|p| convert::trace(&p.trace))
            .unwrap_or_default(),
        explained_for: caller.agent_id.clone(),
        spec,
    })
}

/// Switches a tool on or off for a tier; the runtime records it in the admin log.
#[tauri::command]
pub async fn set_tool_enabled(
    state: State<'_, Arc<Desktop>>,
    params: SetToolEnabledParams,
) -> Reply<ToolSummary> {
    let rt = &state.runtime;
    let tier: LicenseTier = params
        .tier
        .parse()
        .map_err(|e: String| invalid("/tier", e))?;
    rt.tools()
        .set_tool_enabled(&params.name, Some(tier), params.enabled, &actor())
        .await
        .map_err(|e| refused("switching the tool", e))?;
    summary(rt, &params.name, &caller())
}

/// The pending confirmations, oldest first.
#[tauri::command]
pub async fn list_confirmations(state: State<'_, Arc<Desktop>>) -> Reply<Vec<Confirmation>> {
    let rt = &state.runtime;
    let rows = rt
        .confirmations()
        .pending_confirmations()
        .await
        .map_err(|e| refused("listing confirmations", e))?;
    Ok(rows
        .iter()
        .map(|r| {
            let risk = rt
                .registry()
                .get(&r.tool)
                .map(|t| t.definition.risk_level.to_string());
            convert::confirmation(r, risk)
        })
        .collect())
}

/// Approves or denies a pending call; an approval may be remembered as a grant for a while.
#[tauri::command]
pub async fn answer_confirmation(
    state: State<'_, Arc<Desktop>>,
    params: AnswerParams,
) -> Reply<AnswerResponse> {
    let approve = params.decision == Decision::Approve;
    let remember = match params.remember_scope.as_deref() {
        None | Some("exact") => Remember::Exact,
        Some("tool") => Remember::Tool,
        Some(other) => {
            return Err(invalid(
                "/rememberScope",
                format!("{other:?} is not a grant scope; use exact or tool"),
            ));
        }
    };
    // Unless the person widened it, whose calls a grant covers is the service's default.
    let who = params.any_caller.then_some(Who::Anyone);
    let answer = match (approve, params.remember_secs) {
        (true, Some(secs)) => Answer::Approve {
            grant: Some(GrantSpec {
                remember,
                who,
                duration: Some(Duration::from_secs(secs)),
            }),
        },
        (true, None) => Answer::Approve { grant: None },
        (false, Some(_)) => {
            return Err(invalid(
                "/rememberSecs",
                "only an approval can be remembered",
            ));
        }
        (false, None) => Answer::Deny,
    };
    let outcome = state
        .runtime
        .confirmations()
        .answer(&params.id, answer, &actor(), params.note.as_deref())
        .await
        .map_err(|e| refused("answering the confirmation", e))?;
    Ok(match outcome {
        Answered::Resolved {
            confirmation,
            grant,
        } => AnswerResponse {
            outcome: confirmation.state.as_str().to_owned(),
            grant_id: grant.map(|g| g.id),
        },
        Answered::AlreadyResolved { state, by, .. } => AnswerResponse {
            outcome: match by {
                Some(by) => format!("already {} by {by}", state.as_str()),
                None => format!("already {}", state.as_str()),
            },
            grant_id: None,
        },
    })
}

/// The viewer's filters as the store's audit filter; the store checks them, and a bad value is
/// reported at its field.
pub(crate) fn audit_query(params: AuditQueryParams) -> Reply<AuditQuery> {
    AuditFilter {
        tool: params.tool,
        status: params.status,
        agent_id: params.caller,
        skill: params.skill,
        since: params.since_at,
        until: params.until_at,
        text: params.text,
        violations_only: false,
        cursor: params.cursor,
        limit: params.limit,
    }
    .query()
    .map_err(|e| refused("the audit query", e.into()))
}

/// The grants not revoked (in force or lapsed), newest first.
#[tauri::command]
pub async fn list_grants(state: State<'_, Arc<Desktop>>) -> Reply<Vec<Grant>> {
    let rows = state
        .runtime
        .confirmations()
        .grants(false)
        .await
        .map_err(|e| refused("listing grants", e))?;
    Ok(rows.iter().map(convert::grant).collect())
}

/// Revokes a grant; the runtime records who did it. One unknown or already revoked is
/// `not_found`.
#[tauri::command]
pub async fn revoke_grant(state: State<'_, Arc<Desktop>>, params: GrantParams) -> Reply<()> {
    state
        .runtime
        .confirmations()
        .revoke_grant(&params.id, &actor())
        .await
        .map_err(|e| refused("revoking the grant", e))
}

/// One page of the audit log.
#[tauri::command]
pub async fn query_audit(
    state: State<'_, Arc<Desktop>>,
    params: AuditQueryParams,
) -> Reply<AuditPage> {
    let q = audit_query(params)?;
    let started = Instant::now();
    let page = state
        .runtime
        .store()
        .query(&q)
        .await
        .map_err(|e| refused("the audit query", e.into()))?;
    Ok(AuditPage {
        rows: page.rows.iter().map(convert::audit_summary).collect(),
        next_cursor: page.next_cursor,
        scanned_to: page.scanned_to,
        query_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// One audit record in full.
#[tauri::command]
pub async fn get_audit_record(
    state: State<'_, Arc<Desktop>>,
    params: AuditRecordParams,
) -> Reply<AuditDetail> {
    let row = state
        .runtime
        .store()
        .get(&params.execution_id)
        .await
        .map_err(|e| refused("reading the audit record", e.into()))?
        .ok_or_else(|| {
            IpcError::new(
                "not_found",
                format!("no audit record for {:?}", params.execution_id),
            )
        })?;
    Ok(AuditDetail {
        summary: convert::audit_summary(&row),
        arguments: row.arguments.clone(),
        output: row.output.clone(),
        explanation: convert::stored_trace(row.explanation.as_ref()),
        execution: row.metadata.clone(),
    })
}

/// Cancels a call running in this process or in another one on the data directory.
#[tauri::command]
pub async fn cancel_execution(state: State<'_, Arc<Desktop>>, params: CancelParams) -> Reply<bool> {
    let id = tw_core::ExecutionId::new(&params.execution_id)
        .map_err(|e| invalid("/executionId", e.to_string()))?;
    let rt = &state.runtime;
    Ok(rt.cancel_anywhere(&id).await)
}

/// Closes the window the person asked to close although calls wait for approval (they stay
/// pending in the processes that made them, and lapse unanswered).
#[tauri::command]
pub async fn close_window(
    state: State<'_, Arc<Desktop>>,
    window: tauri::WebviewWindow,
) -> Reply<()> {
    state
        .close_confirmed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    window
        .close()
        .map_err(|e| internal("closing the window", e))
}

/// The UI's first view is drawn with its data: logs the time since the process started, once,
/// and exits if `TOOLWARDEN_DESKTOP_EXIT_WHEN_INTERACTIVE=1` asked for one timed start.
#[tauri::command]
pub async fn report_interactive(
    state: State<'_, Arc<Desktop>>,
    app: tauri::AppHandle,
) -> Reply<()> {
    if state.startup.interactive() {
        // Through the event loop, so the runtime closes as on any other exit.
        app.exit(0);
    }
    Ok(())
}

/// Re-reads the config and policy files now (they are also watched); a refused change shows in
/// the settings' `policyError`, and the previous policy stays.
#[tauri::command]
pub async fn reload_policy(state: State<'_, Arc<Desktop>>) -> Reply<Settings> {
    // The outcome is in the settings (and the admin log); an invalid policy is not an IPC error.
    let _ = state.runtime.settings().reload_policy(&actor()).await;
    Ok(settings(&state).await)
}

/// The settings page.
#[tauri::command]
pub async fn get_settings(state: State<'_, Arc<Desktop>>) -> Reply<Settings> {
    Ok(settings(&state).await)
}

/// Switches the operational mode (the UI asks for confirmation first).
#[tauri::command]
pub async fn set_mode(state: State<'_, Arc<Desktop>>, params: SetModeParams) -> Reply<Settings> {
    let mode: OperationalMode = params
        .mode
        .parse()
        .map_err(|e: String| invalid("/mode", e))?;
    state
        .runtime
        .settings()
        .set_mode(mode, &actor())
        .await
        .map_err(|e| refused("switching the mode", e))?;
    Ok(settings(&state).await)
}

async fn settings(d: &Desktop) -> Settings {
    let rt = &d.runtime;
    let mut files: Vec<PolicyFile> = Vec::new();
    if let Some(config) = &d.options.places.config_file {
        files.push(PolicyFile {
            path: config.display().to_string(),
            loaded: true,
            error: None,
        });
    }
    for path in &d.options.places.config.policy_files {
        files.push(PolicyFile {
            path: path.display().to_string(),
            loaded: path.is_file(),
            error: (!path.is_file()).then(|| "not found".to_owned()),
        });
    }
    let warnings = rt.warnings();
    if let Some(first) = files.first_mut()
        && !warnings.is_empty()
    {
        first.error = Some(warnings.join("; "));
    }
    Settings {
        mode: rt.settings().mode().to_string(),
        modes: OperationalMode::ALL
            .iter()
            .map(ToString::to_string)
            .collect(),
        tier: rt.settings().tier().to_string(),
        data_dir: d.options.places.data_dir.display().to_string(),
        policy_files: files,
        policy_error: rt
            .settings()
            .policy_error()
            .map(|(at, errors)| tw_protocol::PolicyError { at, errors }),
        endpoint: d.endpoint.clone(),
        automatic: rt
            .settings()
            .automatic_switch()
            .await
            .map(|a| tw_protocol::AutomaticSwitch {
                from: a.from.to_string(),
                to: a.to.to_string(),
                reasons: a.reasons,
                at: a.at,
            }),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The desktop's whole mapping of runtime errors: the kind is the IPC code, a field becomes
    /// a JSON pointer into the command's parameters, an internal failure hides its details.
    #[test]
    fn runtime_errors_map_to_ipc_codes_and_fields() {
        let cases: Vec<(RuntimeError, (&str, Option<&str>))> = vec![
            (
                RuntimeError::unknown_skill("x", std::path::Path::new("/ws/skills")),
                ("not_found", None),
            ),
            (
                RuntimeError::BuiltinName("echo".into()),
                ("conflict", Some("/name")),
            ),
            (
                RuntimeError::invalid("duration", "a grant must last some time"),
                ("invalid", Some("/rememberSecs")),
            ),
            (
                tw_store::StoreError::InvalidQuery {
                    field: "until",
                    message: "after its start".into(),
                }
                .into(),
                ("invalid", Some("/untilAt")),
            ),
            (
                RuntimeError::TierLimit {
                    tier: LicenseTier::Pro,
                    limit: 10,
                },
                ("denied", None),
            ),
            (
                RuntimeError::Unavailable("the skills directory cannot be read".into()),
                ("unavailable", None),
            ),
            (
                RuntimeError::Internal("secret detail".into()),
                ("internal", None),
            ),
        ];
        for (e, (code, field)) in cases {
            let shown = e.to_string();
            let ipc = refused("the test", e);
            assert_eq!(
                (ipc.code.as_str(), ipc.field.as_deref()),
                (code, field),
                "{shown}"
            );
            if code == "internal" {
                assert!(!ipc.message.contains("secret"), "{}", ipc.message);
            } else {
                assert_eq!(ipc.message, shown);
            }
        }
    }
}
