//! Network tools. `http_fetch` sends one HTTP request through the egress gatekeeper
//! ([`crate::net`]): the policy's domain rules for the tool judge every host and address it
//! reaches, redirects included, and what it did on the network goes into its audit record.
//! `web_search` (in `search`) asks the configured search provider through the same gatekeeper.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tw_core::target::Egress;
use tw_core::{ErrorCode, IsolationLevel, RiskLevel, ToolCategory, ToolDefinition, ToolStatus};

use super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit};
use crate::config::NetworkSettings;
use crate::net::{Gatekeeper, Limits, NetError, NetFacts, Request};

mod email;
pub(super) mod html;
mod message;
mod search;
mod secrets;

/// What a network tool reaches the network through, for one call.
pub struct NetContext {
    /// The connector.
    pub gate: Arc<Gatekeeper>,
    /// The rules this call is held to.
    pub egress: Egress,
    /// The config's `[network]`: limits, secrets, the search provider.
    pub settings: Arc<NetworkSettings>,
    /// What the call did on the network, read by the pipeline for the audit record.
    pub facts: Mutex<NetFacts>,
    /// The runtime's browser, for the browser tools.
    pub browsers: Arc<crate::browser::Browsers>,
    /// Whose browser session the call uses: its agent and skill.
    pub owner: String,
    /// Publishes a picture of the call's browser page; `None` when nobody watches.
    pub frames: Option<Announce>,
    /// Where the call's browser downloads may be saved; `None` refuses them.
    pub downloads: Option<DownloadGrant>,
}

/// Where a call's browser downloads may be saved, as its policy grants.
pub struct DownloadGrant {
    /// The workspace folder (relative to its first root).
    pub folder: String,
    /// The rule that grants it.
    pub rule: String,
    /// Why no file may be written at an absolute path (the rules' `forbid_paths` and
    /// `allow_paths` for the tool), if none may.
    pub refusal: PathRefusal,
}

/// Why no file may be written at an absolute path, if none may.
pub type PathRefusal = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Publishes a live event about one call.
pub type Announce = Arc<dyn Fn(crate::events::EventKind) + Send + Sync>;

impl NetContext {
    /// Sends `req` under this call's rules and `limits`, adding what happened to the facts.
    pub async fn fetch(
        &self,
        req: Request,
        limits: &Limits,
    ) -> Result<crate::net::Response, NetError> {
        self.fetch_under(&self.egress, req, limits).await
    }

    /// Like [`NetContext::fetch`], under other rules (a configured provider's own).
    pub async fn fetch_under(
        &self,
        egress: &Egress,
        req: Request,
        limits: &Limits,
    ) -> Result<crate::net::Response, NetError> {
        let mut facts = NetFacts::default();
        let outcome = self.gate.fetch(egress, req, limits, &mut facts).await;
        self.facts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(facts);
        outcome
    }
}

/// How much of a response body is read unless the call asks for more (and the config allows it).
const DEFAULT_BYTES: u64 = 1 << 20;
/// The most of a response body a call may ask for.
const MAX_BYTES: u64 = 5 << 20;

struct HttpFetch;

#[derive(Deserialize)]
struct FetchArgs {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default, rename = "as")]
    read_as: Option<String>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

impl BuiltinTool for HttpFetch {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = ToolDefinition::new(
            lit::name("http_fetch")?,
            "Send one HTTP request (GET by default) to an http or https URL and return the \
             status, headers and body: as text, as JSON, or as Markdown read from HTML. Every \
             host, address and redirect is checked against the network rules.",
            ToolCategory::Network,
            lit::group("net")?,
            lit::params(json!({
                "type": "object",
                "required": ["url"],
                "additionalProperties": false,
                "properties": {
                    "url": {"type": "string", "format": "iri", "minLength": 1, "maxLength": 8192,
                            "description": "The http or https URL to fetch."},
                    "method": {"type": "string",
                               "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
                               "description": "GET unless given."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"},
                                "description": "Request headers by name."},
                    "body": {"type": "string", "description": "The request body, as text."},
                    "as": {"type": "string", "enum": ["text", "json", "markdown"],
                           "description": "How to return the body: text (the default), parsed JSON, or Markdown: an HTML page's article (Readability), else the whole page."},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES,
                                  "description": "The most of the body to read (1 MiB unless given); the rest is cut and `truncated` is true."}
                }
            }))?,
        );
        d.output_schema = lit::output(json!({
            "type": "object",
            "required": ["status", "final_url", "headers", "content", "truncated"],
            "properties": {
                "status": {"type": "integer"},
                "final_url": {"type": "string"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "content_type": {"type": ["string", "null"]},
                "content": {"description": "Text or Markdown as a string; parsed JSON as it came."},
                "truncated": {"type": "boolean"}
            }
        }))?;
        d.risk_level = RiskLevel::Medium;
        // A request may change something at the other end (POST, PUT, PATCH, DELETE); each
        // call is judged by its method (`side_effects` below), listings by the worst case.
        d.constraints.side_effects = true;
        d.constraints.isolation = IsolationLevel::None;
        d.constraints.max_execution_time_ms = 65_000;
        // Room for the largest body a call may ask for, with its headers and encoding.
        d.constraints.max_output_bytes = MAX_BYTES + (1 << 20);
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(fetch(ctx, args))
    }

    /// GET and HEAD only read; every other method may change something at the other end.
    fn side_effects(&self, args: &Value) -> Option<bool> {
        let method = match args.get("method") {
            None | Some(Value::Null) => "GET",
            Some(Value::String(m)) => m.as_str(),
            Some(_) => return None,
        };
        Some(!matches!(method, "GET" | "HEAD"))
    }
}

/// The network context of a call, which every network tool has.
pub(super) fn net_context(ctx: &ToolContext) -> Result<&Arc<NetContext>, ToolFailure> {
    ctx.net.as_ref().ok_or_else(|| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            "this call has no network context",
        )
    })
}

async fn fetch(ctx: &ToolContext, raw: &Value) -> Result<Value, ToolFailure> {
    let a: FetchArgs = args(raw)?;
    let net = net_context(ctx)?;
    let method = a.method.as_deref().unwrap_or("GET");
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| invalid(format!("method: {method:?} is not an HTTP method")))?;
    let ceiling = net.settings.limits.max_response_bytes;
    let asked =
        usize::try_from(a.max_bytes.unwrap_or(DEFAULT_BYTES).min(MAX_BYTES)).unwrap_or(usize::MAX);
    let limits = Limits {
        max_response_bytes: asked.min(ceiling),
        ..net.settings.limits
    };
    let filled = secrets::fill(
        a.headers.into_iter().collect(),
        &net.settings.secrets,
        |v| std::env::var(v).ok(),
    )?;
    let req = Request {
        method,
        url: a.url,
        headers: filled.headers,
        body: a.body.map(String::into_bytes),
        confined: filled.confined,
    };
    let secrets = filled.used;
    let mut response = net.fetch(req, &limits).await.map_err(failure)?;
    response.body = secrets.mask(response.body);
    for (_, v) in &mut response.headers {
        *v = secrets.mask_text(std::mem::take(v));
    }
    let content_type = response
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.clone());
    let body = std::mem::take(&mut response.body);
    let content = match a.read_as.as_deref().unwrap_or("text") {
        "json" => serde_json::from_slice(&body).map_err(|e| {
            ToolFailure::failed(
                ErrorCode::EXECUTION_FAILED,
                format!("the response body is not JSON: {e}"),
            )
        })?,
        "markdown" => {
            let page = text(body);
            let cancel = ctx.cancel.clone();
            let read = tokio::task::spawn_blocking(move || html::markdown(&page, &cancel))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            Value::String(read.map_err(|e| {
                ToolFailure::failed(
                    ErrorCode::EXECUTION_FAILED,
                    format!("the response body could not be read as Markdown: {e}"),
                )
            })?)
        }
        _ => Value::String(text(body)),
    };
    let headers = joined(response.headers);
    // Built in place: the body (up to megabytes) is moved into the output, never copied.
    Ok(Value::Object(Map::from_iter([
        ("status".to_owned(), Value::from(response.status)),
        ("final_url".to_owned(), Value::String(response.final_url)),
        ("headers".to_owned(), Value::Object(headers)),
        (
            "content_type".to_owned(),
            content_type.map_or(Value::Null, Value::String),
        ),
        ("content".to_owned(), content),
        ("truncated".to_owned(), Value::Bool(response.truncated)),
    ])))
}

/// Headers by name, in name order; a repeated header's values joined with ", " in the order
/// they came.
fn joined(mut listed: Vec<(String, String)>) -> Map<String, Value> {
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut headers = Map::with_capacity(listed.len());
    let mut last: Option<(String, String)> = None;
    for (k, v) in listed {
        match &mut last {
            Some((name, all)) if *name == k => {
                all.push_str(", ");
                all.push_str(&v);
            }
            _ => {
                if let Some((name, all)) = last.replace((k, v)) {
                    headers.insert(name, Value::String(all));
                }
            }
        }
    }
    if let Some((name, all)) = last {
        headers.insert(name, Value::String(all));
    }
    headers
}

/// A body as text, taken over as it is when it is UTF-8 (no copy), read lossily otherwise.
fn text(body: Vec<u8>) -> String {
    String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn invalid(message: String) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::ValidationError,
        code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
        message,
    }
}

/// A gatekeeper's answer as the call's result: a refusal is a denial with the rule that made
/// it, a malformed request is invalid at its field, a limit is a timeout.
pub(super) fn failure(e: NetError) -> ToolFailure {
    match e {
        NetError::Refused(r) => ToolFailure {
            status: ToolStatus::PermissionDenied,
            code: "egress_refused".to_owned(),
            message: format!("{} (rule: {})", r.reason, r.rule),
        },
        NetError::Invalid { field, message } => invalid(format!("{field}: {message}")),
        NetError::Timeout(message) => ToolFailure {
            status: ToolStatus::Timeout,
            code: ErrorCode::TIMEOUT.to_owned(),
            message,
        },
        NetError::Failed(message) => ToolFailure::failed(ErrorCode::NETWORK_ERROR, message),
    }
}

pub(super) fn tools(messaging: Arc<crate::config::MessagingSettings>) -> Vec<Arc<dyn BuiltinTool>> {
    vec![
        Arc::new(HttpFetch),
        Arc::new(search::WebSearch),
        Arc::new(message::SendMessage::new(messaging)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_come_back_by_name_with_repeated_values_joined_in_arrival_order() {
        let h = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let headers = joined(vec![
            h("x-b", "1"),
            h("set-cookie", "a=1"),
            h("content-type", "text/html"),
            h("set-cookie", "b=2"),
            h("x-b", "2"),
            h("set-cookie", "c=3"),
        ]);
        assert_eq!(
            Value::Object(headers).to_string(),
            r#"{"content-type":"text/html","set-cookie":"a=1, b=2, c=3","x-b":"1, 2"}"#
        );
        assert!(joined(Vec::new()).is_empty());
    }
}
