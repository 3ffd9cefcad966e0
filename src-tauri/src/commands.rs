//! The commands the UI calls: thin adapters from tw-protocol parameters to tw-runtime calls and
//! back. Every one answers `Result<_, IpcError>`; errors say what was wrong without leaking
//! internals (a store failure is logged in full and reported as `internal`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tauri::State;
use tw_core::{Caller, LicenseTier, OperationalMode, ToolFilter, ToolStatus};
use tw_protocol::{
    AnswerParams, AnswerResponse, AuditDetail, AuditPage, AuditQueryParams, AuditRecordParams,
    CancelParams, Confirmation, Decision, Grant, GrantParams, IpcError, ListToolsParams,
    PolicyFile, SetModeParams, SetToolEnabledParams, Settings, ToolDetail, ToolParams, ToolSummary,
};
use tw_runtime::{Answer, GrantSpec, Remember, Runtime, ToolKind, Who};
use tw_store::{AuditQuery, ResolveOutcome};

use crate::Desktop;
use crate::convert;

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
        &rt.disabled_tiers(name),
        rt.tier(),
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
            if agent.len() > 128 || agent.chars().any(char::is_control) {
                return Err(invalid(
                    "/caller",
                    "an agent id is 1-128 characters, none of them control characters",
                ));
            }
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
    rt.set_tool_enabled(&params.name, tier, params.enabled, &actor())
        .await
        .map_err(|e| IpcError::new("invalid", e.to_string()))?;
    summary(rt, &params.name, &caller())
}

/// The pending confirmations, oldest first.
#[tauri::command]
pub async fn list_confirmations(state: State<'_, Arc<Desktop>>) -> Reply<Vec<Confirmation>> {
    let rt = &state.runtime;
    let rows = rt
        .pending_confirmations()
        .await
        .map_err(|e| internal("listing confirmations", e))?;
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
    let who = if params.any_caller {
        Who::Anyone
    } else {
        Who::SameCaller
    };
    let grant = match (approve, params.remember_secs) {
        (true, Some(0)) => return Err(invalid("/rememberSecs", "a grant must last a while")),
        (true, Some(secs)) => Some(GrantSpec {
            remember,
            who,
            duration: Some(Duration::from_secs(secs)),
        }),
        (false, Some(_)) => {
            return Err(invalid(
                "/rememberSecs",
                "only an approval can be remembered",
            ));
        }
        (_, None) => None,
    };
    let answer = Answer {
        approve,
        by: actor(),
        note: params.note,
        grant,
    };
    let outcome = state
        .runtime
        .answer(&params.id, answer)
        .await
        .map_err(|e| IpcError::new("invalid", e.to_string()))?;
    Ok(match outcome {
        ResolveOutcome::Resolved {
            confirmation,
            grant,
        } => AnswerResponse {
            outcome: confirmation.state.as_str().to_owned(),
            grant_id: grant.map(|g| g.id),
        },
        ResolveOutcome::NotFound => {
            return Err(IpcError::new(
                "not_found",
                format!("no confirmation {:?}", params.id),
            ));
        }
        ResolveOutcome::AlreadyResolved { state, by, .. } => AnswerResponse {
            outcome: match by {
                Some(by) => format!("already {} by {by}", state.as_str()),
                None => format!("already {}", state.as_str()),
            },
            grant_id: None,
        },
    })
}

/// The store's query for the viewer's filters; bad values are reported at their field.
pub(crate) fn audit_query(params: AuditQueryParams) -> Reply<AuditQuery> {
    let status = params
        .status
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<ToolStatus>())
        .transpose()
        .map_err(|e| invalid("/status", e.to_string()))?;
    let limit = params.limit.unwrap_or(50);
    if !(1..=tw_store::MAX_PAGE).contains(&limit) {
        return Err(invalid(
            "/limit",
            format!("a page holds 1 to {} rows", tw_store::MAX_PAGE),
        ));
    }
    if let (Some(since), Some(until)) = (params.since_at, params.until_at)
        && until <= since
    {
        return Err(invalid(
            "/untilAt",
            "the end of the range must be after its start",
        ));
    }
    let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    Ok(AuditQuery {
        tool: nonempty(params.tool),
        status,
        agent_id: nonempty(params.caller),
        skill: nonempty(params.skill),
        since: params.since_at,
        until: params.until_at,
        text: nonempty(params.text),
        violations_only: false,
        cursor: params.cursor,
        limit,
    })
}

/// The grants not revoked (in force or lapsed), newest first.
#[tauri::command]
pub async fn list_grants(state: State<'_, Arc<Desktop>>) -> Reply<Vec<Grant>> {
    let rows = state
        .runtime
        .grants(false)
        .await
        .map_err(|e| internal("listing grants", e))?;
    Ok(rows.iter().map(convert::grant).collect())
}

/// Revokes a grant; the runtime records who did it.
#[tauri::command]
pub async fn revoke_grant(state: State<'_, Arc<Desktop>>, params: GrantParams) -> Reply<bool> {
    state
        .runtime
        .revoke_grant(&params.id, &actor())
        .await
        .map_err(|e| internal("revoking the grant", e))
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
        .map_err(|e| internal("the audit query", e))?;
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
        .map_err(|e| internal("reading the audit record", e))?
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
    Ok(rt.cancel(&id) || tw_runtime::live::cancel_elsewhere(rt.data_dir(), &id).await)
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

/// Re-reads the config and policy files now (they are also watched); a refused change shows in
/// the settings' `policyError`, and the previous policy stays.
#[tauri::command]
pub async fn reload_policy(state: State<'_, Arc<Desktop>>) -> Reply<Settings> {
    // The outcome is in the settings (and the admin log); an invalid policy is not an IPC error.
    let _ = state.runtime.reload_policy(&actor()).await;
    Ok(settings(&state))
}

/// The settings page.
#[tauri::command]
pub async fn get_settings(state: State<'_, Arc<Desktop>>) -> Reply<Settings> {
    Ok(settings(&state))
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
        .set_mode(mode, &actor())
        .await
        .map_err(|e| internal("switching the mode", e))?;
    Ok(settings(&state))
}

fn settings(d: &Desktop) -> Settings {
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
        mode: rt.mode().to_string(),
        modes: OperationalMode::ALL
            .iter()
            .map(ToString::to_string)
            .collect(),
        tier: rt.tier().to_string(),
        data_dir: d.options.places.data_dir.display().to_string(),
        policy_files: files,
        policy_error: rt
            .policy_error()
            .map(|(at, errors)| tw_protocol::PolicyError { at, errors }),
        endpoint: d.endpoint.clone(),
    }
}
