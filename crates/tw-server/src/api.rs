//! The admin API (`/api/v1`): the operations the desktop app and the CLI offer, for scripts.
//! Tools (list, show, create, replace, delete, switch on and off), policy (explain, reload), the
//! operational mode (show, switch), confirmations (list, approve, deny), grants (`grants`: list,
//! give, revoke), chains (`chains`: list, show, check, runs), skills (`skills`: list, show, check, resolved tools, overrides, SKILL.md,
//! capabilities, metrics), the audit log (query, one record, export, the usage report, the admin
//! log), calls in flight (`running`: list, cancel), the sandbox's doctor report and the live
//! events. Every handler is a thin call into the runtime; changes are recorded in the admin log
//! as made by `api`.
//!
//! Errors are `{"error": {"code", "message", "field"?}}`. A body or query string that does not
//! parse is 400 (with its line or field); a refusal by the runtime gets the status of its kind,
//! decided once in [`status_of`] (404 not found, 409 conflict, 422 invalid with the field, 403
//! denied, 503 unavailable, 500 internal, logged and answered without its details) and the
//! runtime's stable code (`unknown_tool`, `builtin`, `tier_limit`, ...).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::Caller;
use tw_core::OperationalMode;
use tw_runtime::{ErrorKind, Runtime, RuntimeError};
use tw_store::{
    AdminQuery, AuditExportFormat, AuditFilter, AuditQuery, ConfirmationQuery, ConfirmationState,
};

use crate::Gateway;
use crate::body;

mod chains;
mod grants;
mod running;
mod skills;

/// Who admin-API changes are recorded as.
const ACTOR: &str = "api";

type Shared = State<Arc<Gateway>>;

pub(crate) fn routes(state: Arc<Gateway>) -> Router {
    Router::new()
        .route("/openapi.json", get(openapi))
        .route("/tools", get(list_tools).post(create_tool))
        .route(
            "/tools/{name}",
            get(show_tool).put(replace_tool).delete(delete_tool),
        )
        .route("/tools/{name}/enable", post(enable_tool))
        .route("/tools/{name}/disable", post(disable_tool))
        .route("/policy/explain", post(explain))
        .route("/policy/reload", post(reload))
        .route("/mode", get(mode).put(set_mode))
        .route("/confirmations", get(confirmations))
        .route("/confirmations/{id}/approve", post(approve))
        .route("/confirmations/{id}/deny", post(deny))
        .route("/audit", get(audit))
        .route("/audit/export", get(export))
        .route("/audit/report", get(report))
        .route("/audit/changes", get(changes))
        .route("/audit/verify", get(verify).post(verify_with))
        .route("/audit/checkpoint", post(checkpoint))
        .route("/audit/{execution_id}", get(audit_record))
        .route("/upstream", get(upstream))
        .route("/upstream/review", get(upstream_review))
        .route("/upstream/review/{tool}/accept", post(upstream_accept))
        .route("/sandbox/doctor", get(sandbox_doctor))
        .route("/events", get(crate::events::stream))
        .merge(chains::routes())
        .merge(grants::routes())
        .merge(running::routes())
        .merge(skills::routes())
        .with_state(state)
}

/// A handler's failure: the status, a stable code and a message that says what to fix.
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// The part of the request at fault, when the runtime names one.
    field: Option<&'static str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(field) = self.field {
            error["field"] = json!(field);
        }
        (self.status, axum::Json(json!({ "error": error }))).into_response()
    }
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl AsRef<str>) -> Self {
        Self {
            status,
            code,
            message: message.as_ref().to_owned(),
            field: None,
        }
    }

    fn bad(message: impl AsRef<str>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn unknown_tool(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_tool",
            format!("no tool is registered as {name:?}"),
        )
    }
}

/// The HTTP status of each kind of runtime error: the one place the admin API decides it.
pub(crate) fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Denied => StatusCode::FORBIDDEN,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        let kind = e.kind();
        if kind == ErrorKind::Internal {
            // Internals stay in the server's log, not in the answer.
            tracing::error!(error = %e, "an admin API request failed");
            return Self::new(
                status_of(kind),
                e.code(),
                "the request failed; the server's log says why",
            );
        }
        Self {
            field: e.field(),
            ..Self::new(status_of(kind), e.code(), e.to_string())
        }
    }
}

impl From<tw_store::StoreError> for ApiError {
    fn from(e: tw_store::StoreError) -> Self {
        RuntimeError::from(e).into()
    }
}

impl From<body::BodyError> for ApiError {
    fn from(e: body::BodyError) -> Self {
        Self::new(e.status, e.code, e.message)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        Self::bad(format!("the request body: {}", e.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        Self::bad(format!("the query string: {}", e.body_text()))
    }
}

type Reply = Result<Response, ApiError>;

fn ok(value: impl serde::Serialize) -> Reply {
    Ok(axum::Json(value).into_response())
}

/// One tool as listed by `tools list --json` and `GET /api/v1/tools`: what it is and what policy
/// decides for `caller` before arguments are known.
pub fn tool_summary(rt: &Runtime, tool: &tw_runtime::Entry, caller: &Caller) -> Value {
    let d = &tool.definition;
    json!({
        "name": d.name,
        "kind": tool.kind.label(),
        "group": d.group,
        "category": d.category,
        "risk_level": d.risk_level,
        "license_tier": d.license_tier,
        "requires_confirmation": d.requires_confirmation,
        "policy": rt.tool_decision(d.name.as_str(), caller).map(|p| p.decision),
        "disabled_tiers": rt.tools().disabled_tiers(d.name.as_str()),
        "description": d.description,
    })
}

async fn openapi() -> Response {
    axum::Json(crate::openapi::document()).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    search: Option<String>,
    category: Option<String>,
    group: Option<String>,
    tier: Option<String>,
    /// Whose view of policy the `policy` column shows (default `api`).
    agent: Option<String>,
}

fn parse<T: std::str::FromStr<Err = String>>(
    field: &str,
    v: Option<String>,
) -> Result<Option<T>, ApiError> {
    v.map(|s| {
        s.parse()
            .map_err(|e: String| ApiError::bad(format!("{field}: {e}")))
    })
    .transpose()
}

async fn list_tools(State(g): Shared, q: Result<Query<ListParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    let filter = tw_core::registry::ToolFilter {
        category: parse("category", q.category)?,
        group: q
            .group
            .map(|g| tw_core::ToolGroup::new(&g))
            .transpose()
            .map_err(|e| ApiError::bad(format!("group: {e}")))?,
        tier: parse("tier", q.tier)?,
        mode: None,
        text: q.search,
    };
    let caller = Caller::agent(q.agent.as_deref().unwrap_or(ACTOR));
    let list: Vec<Value> =
        g.rt.registry()
            .find(&filter)
            .iter()
            .map(|t| tool_summary(&g.rt, t, &caller))
            .collect();
    ok(list)
}

async fn show_tool(State(g): Shared, Path(name): Path<String>) -> Reply {
    let Some(t) = g.rt.registry().get(&name) else {
        return Err(ApiError::unknown_tool(&name));
    };
    let custom = match &t.kind {
        tw_runtime::ToolKind::Custom(c) => serde_json::to_value(c).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let mut v = tool_summary(&g.rt, &t, &Caller::agent(ACTOR));
    if let Value::Object(m) = &mut v {
        m.insert(
            "definition".into(),
            serde_json::to_value(&t.definition).unwrap_or(Value::Null),
        );
        m.insert("custom".into(), custom);
    }
    ok(v)
}

async fn create_tool(State(g): Shared, body: String) -> Reply {
    let spec = body::tool_spec(&body)?;
    let name = spec.definition.name.to_string();
    g.rt.tools().create_custom_tool(spec, ACTOR).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "name": name, "created": true })),
    )
        .into_response())
}

async fn replace_tool(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    let spec = body::tool_spec(&body)?;
    if spec.definition.name.as_str() != name {
        return Err(ApiError::bad(format!(
            "the body defines {:?} but the path names {name:?}",
            spec.definition.name.as_str()
        )));
    }
    let created = g.rt.tools().add_custom_tool(spec, ACTOR).await?;
    ok(json!({ "name": name, "created": created }))
}

async fn delete_tool(State(g): Shared, Path(name): Path<String>) -> Reply {
    g.rt.tools().remove_custom_tool(&name, ACTOR).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn switch(g: &Gateway, name: &str, body: &str, enabled: bool) -> Reply {
    let tier = body::switch(body)?;
    let outcome =
        g.rt.tools()
            .set_tool_enabled(name, tier, enabled, ACTOR)
            .await?;
    ok(json!({
        "tool": outcome.tool,
        "tier": outcome.tier,
        "enabled": outcome.enabled,
        "changed": outcome.changed,
    }))
}

async fn enable_tool(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    switch(&g, &name, &body, true).await
}

async fn disable_tool(State(g): Shared, Path(name): Path<String>, body: String) -> Reply {
    switch(&g, &name, &body, false).await
}

async fn explain(
    State(g): Shared,
    body: Result<axum::Json<body::ExplainBody>, JsonRejection>,
) -> Reply {
    let axum::Json(b) = body?;
    let e = b.into_explain(ACTOR);
    match g.rt.explain(&e.tool, &e.arguments, &e.caller) {
        Some(d) => ok(d),
        None => Err(ApiError::unknown_tool(&e.tool)),
    }
}

async fn reload(State(g): Shared) -> Reply {
    let warnings = g.rt.settings().reload_policy(ACTOR).await?;
    ok(json!({ "reloaded": true, "warnings": warnings }))
}

/// The operational mode in force, and every mode there is.
async fn mode(State(g): Shared) -> Reply {
    ok(json!({
        "mode": g.rt.settings().mode(),
        "modes": OperationalMode::ALL,
    }))
}

/// Switches the operational mode for every process on the data directory.
async fn set_mode(State(g): Shared, body: String) -> Reply {
    let to = body::mode(&body)?;
    let from = g.rt.settings().set_mode(to, ACTOR).await?;
    ok(json!({ "from": from, "to": to }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfirmationParams {
    /// `pending` (default), `approved`, `denied`, `expired` or `all`.
    state: Option<String>,
    limit: Option<u32>,
}

async fn confirmations(
    State(g): Shared,
    q: Result<Query<ConfirmationParams>, QueryRejection>,
) -> Reply {
    let Query(q) = q?;
    let state = match q.state.as_deref().unwrap_or("pending") {
        "all" => None,
        s => Some(
            serde_json::from_value::<ConfirmationState>(Value::String(s.to_owned())).map_err(
                |_| {
                    ApiError::bad(format!(
                        "state: {s:?} is not one of pending, approved, denied, expired, all"
                    ))
                },
            )?,
        ),
    };
    let rows =
        g.rt.confirmations()
            .confirmations(&ConfirmationQuery {
                state,
                limit: q.limit.unwrap_or(50).clamp(1, tw_store::MAX_PAGE),
            })
            .await?;
    ok(rows)
}

async fn answer(g: &Gateway, id: &str, body: &str, approve: bool) -> Reply {
    let request = body::answer(body, approve)?;
    let outcome =
        g.rt.confirmations()
            .answer(id, request.answer, ACTOR, request.note.as_deref())
            .await?;
    match outcome {
        tw_runtime::Answered::AlreadyResolved { .. } => {
            Ok((StatusCode::CONFLICT, axum::Json(outcome)).into_response())
        }
        resolved => ok(resolved),
    }
}

async fn approve(State(g): Shared, Path(id): Path<String>, body: String) -> Reply {
    answer(&g, &id, &body, true).await
}

async fn deny(State(g): Shared, Path(id): Path<String>, body: String) -> Reply {
    answer(&g, &id, &body, false).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    tool: Option<String>,
    status: Option<String>,
    agent: Option<String>,
    skill: Option<String>,
    /// µs since the epoch.
    since: Option<i64>,
    until: Option<i64>,
    text: Option<String>,
    #[serde(default)]
    violations: bool,
    cursor: Option<i64>,
    limit: Option<u32>,
    /// For export: `jsonl` (default) or `csv`.
    format: Option<String>,
}

/// The query string as the store's audit filter; the store checks it.
fn audit_query(q: AuditParams) -> Result<AuditQuery, ApiError> {
    let filter = AuditFilter {
        tool: q.tool,
        status: q.status,
        agent_id: q.agent,
        skill: q.skill,
        since: q.since,
        until: q.until,
        text: q.text,
        violations_only: q.violations,
        cursor: q.cursor,
        limit: q.limit,
    };
    filter.query().map_err(|e| ApiError {
        // A query string that makes no sense is a bad request, like one that does not parse.
        status: StatusCode::BAD_REQUEST,
        ..ApiError::from(RuntimeError::from(e))
    })
}

async fn audit(State(g): Shared, q: Result<Query<AuditParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    if q.format.is_some() {
        return Err(ApiError::bad("format: only for /api/v1/audit/export"));
    }
    let page = g.rt.store().query(&audit_query(q)?).await?;
    ok(page)
}

async fn audit_record(State(g): Shared, Path(id): Path<String>) -> Reply {
    match g.rt.store().get(&id).await? {
        Some(row) => ok(row),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_record",
            format!("no audit record has execution id {id:?}"),
        )),
    }
}

/// The matching records, streamed as they are read (a large log is never held in memory).
async fn export(State(g): Shared, q: Result<Query<AuditParams>, QueryRejection>) -> Reply {
    let Query(mut q) = q?;
    let (format, content_type) = match q.format.take().as_deref().unwrap_or("jsonl") {
        "jsonl" => (AuditExportFormat::Jsonl, "application/jsonl"),
        "csv" => (AuditExportFormat::Csv, "text/csv; charset=utf-8"),
        other => {
            return Err(ApiError::bad(format!(
                "format: {other:?} is not jsonl or csv"
            )));
        }
    };
    let query = audit_query(q)?;
    let (mut writer, reader) = tokio::io::duplex(64 * 1024);
    let rt = g.rt.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        match rt.store().export(&query, format, &mut writer).await {
            Ok(n) => tracing::info!(records = n, "audit exported over HTTP"),
            // The status is sent; a cut-short body is all that can be said now.
            Err(e) => tracing::error!(error = %e, "an audit export over HTTP failed midway"),
        }
        let _ = writer.shutdown().await;
    });
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(tokio_util::io::ReaderStream::new(reader)),
    )
        .into_response())
}

/// Calls per tool, per caller and per skill among the records the filters match.
async fn report(State(g): Shared, q: Result<Query<AuditParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    if q.format.is_some() || q.cursor.is_some() || q.limit.is_some() {
        return Err(ApiError::bad(
            "cursor, limit and format are not filters: the report counts every matching record",
        ));
    }
    ok(g.rt.store().usage_report(&audit_query(q)?).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesParams {
    /// µs since the epoch.
    since: Option<i64>,
    kind: Option<String>,
    cursor: Option<i64>,
    limit: Option<u32>,
}

/// One page of the admin log, newest first: who changed the rules, when and how.
async fn changes(State(g): Shared, q: Result<Query<ChangesParams>, QueryRejection>) -> Reply {
    let Query(q) = q?;
    let defaults = AdminQuery::default();
    let query = AdminQuery {
        since: q.since,
        kind: q.kind,
        cursor: q.cursor,
        limit: q.limit.unwrap_or(defaults.limit),
    }
    .checked()
    .map_err(|e| ApiError {
        // As with the audit log's filters: a query string that makes no sense is a bad request.
        status: StatusCode::BAD_REQUEST,
        ..ApiError::from(RuntimeError::from(e))
    })?;
    let rows = g.rt.store().admin_events(&query).await?;
    // The store's paging: a full page may have more below its last id, a short one is the last.
    let next_cursor = (rows.len() == query.limit as usize)
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    ok(json!({ "rows": rows, "next_cursor": next_cursor }))
}

/// `toolwarden audit verify --json`: both logs' chains, every output and every checkpoint the
/// store knows, checked; 200 whether or not something is wrong (the report says).
async fn verify(State(g): Shared) -> Reply {
    ok(g.rt.store().verify(Vec::new()).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyBody {
    /// Checkpoints saved elsewhere, as `POST /audit/checkpoint` returned them.
    checkpoints: Vec<tw_store::Checkpoint>,
}

/// The same, also against checkpoints the caller kept elsewhere.
async fn verify_with(
    State(g): Shared,
    body: Result<axum::Json<VerifyBody>, JsonRejection>,
) -> Reply {
    let axum::Json(b) = body?;
    ok(g.rt.store().verify(b.checkpoints).await?)
}

/// A signed checkpoint of both logs' heads, made now (or the newest, if nothing was appended
/// since), to keep elsewhere; null while both logs are empty.
async fn checkpoint(State(g): Shared) -> Reply {
    ok(g.rt.store().checkpoint().await?)
}

/// The sandbox's report on this host, as `toolwarden sandbox doctor --json` prints it.
async fn sandbox_doctor(State(g): Shared) -> Reply {
    ok(g.rt.sandbox_doctor().await)
}

/// The upstream servers this process connected (or tried to).
async fn upstream(State(g): Shared) -> Reply {
    ok(g.rt.upstreams().upstream_status())
}

/// Quarantined upstream tools, each with its pinned and its new definition.
async fn upstream_review(State(g): Shared) -> Reply {
    let pins = g.rt.store().upstream_pins().await?;
    let rows: Vec<Value> = pins
        .iter()
        .filter(|p| p.quarantined())
        .map(tw_mcp::upstream::review_entry)
        .collect();
    ok(rows)
}

/// Accepts a quarantined tool's new definition (`SERVER__TOOL`).
async fn upstream_accept(State(g): Shared, Path(tool): Path<String>) -> Reply {
    let pins = g.rt.store().upstream_pins().await?;
    let Some(pin) = pins
        .iter()
        .find(|p| tw_mcp::upstream::registered_name(&p.server, &p.tool) == tool)
    else {
        return Err(ApiError::unknown_tool(&tool));
    };
    match g
        .rt
        .upstreams()
        .accept_upstream_change(&pin.server, &pin.tool, ACTOR)
        .await?
    {
        Some(row) => ok(json!({ "tool": tool, "accepted": true, "pinned_at": row.pinned_at })),
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_quarantined",
            format!("{tool} is not quarantined"),
        )),
    }
}

#[cfg(test)]
mod tests;
