//! The config's `[telemetry]` section: where the runtime sends its `tool_call` spans and call
//! metrics over OTLP/HTTP (`crate::telemetry`). Off unless `otlp_endpoint` is set; the
//! Prometheus `/metrics` endpoint of `serve` needs no setting.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// What `[telemetry]` says, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// The OTLP/HTTP collector's base address (`/v1/traces` and `/v1/metrics` are added); none:
    /// nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` the spans and metrics carry.
    pub service_name: String,
    /// How often the metrics are sent, in milliseconds.
    pub metrics_interval_ms: u64,
    /// The longest one export may take, in milliseconds.
    pub timeout_ms: u64,
    /// Headers sent with every export (a collector's key): the value as written, or for
    /// `env:NAME`, taken from that environment variable when the runtime starts.
    pub headers: BTreeMap<String, HeaderValue>,
}

/// A header's value: as written, or from the environment when the runtime starts (so a key
/// need not be in the config file).
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    /// The value as written.
    Literal(String),
    /// The environment variable that holds it.
    Env(String),
}

impl Default for TelemetrySettings {
    /// Nothing exported.
    fn default() -> Self {
        defaults()
    }
}

/// The defaults, with nothing exported.
pub(super) fn defaults() -> TelemetrySettings {
    TelemetrySettings {
        otlp_endpoint: None,
        service_name: "toolwarden".to_owned(),
        metrics_interval_ms: 60_000,
        timeout_ms: 10_000,
        headers: BTreeMap::new(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TelemetryDoc {
    otlp_endpoint: Option<Spanned<String>>,
    service_name: Option<Spanned<String>>,
    metrics_interval_ms: Option<Spanned<u64>>,
    timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    headers: BTreeMap<Spanned<String>, Spanned<String>>,
}

type Failure = (usize, String);

fn within(v: &Option<Spanned<u64>>, range: (u64, u64), what: &str) -> Result<Option<u64>, Failure> {
    match v {
        Some(v) if !(range.0..=range.1).contains(v.get_ref()) => Err((
            v.span().start,
            format!("telemetry.{what}: from {} to {}", range.0, range.1),
        )),
        Some(v) => Ok(Some(*v.get_ref())),
        None => Ok(None),
    }
}

/// Checks `[telemetry]`.
pub(super) fn settings(d: TelemetryDoc) -> Result<TelemetrySettings, Failure> {
    let mut s = defaults();
    if let Some(e) = d.otlp_endpoint {
        let at = e.span().start;
        let url = url::Url::parse(e.get_ref()).map_err(|why| {
            (
                at,
                format!(
                    "telemetry.otlp_endpoint {:?} is not a URL: {why}",
                    e.get_ref()
                ),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https")
            || url.host_str().is_none()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err((
                at,
                format!(
                    "telemetry.otlp_endpoint {:?}: an http or https address of an OTLP/HTTP \
                     collector, without query or fragment (e.g. \"http://127.0.0.1:4318\")",
                    e.get_ref()
                ),
            ));
        }
        s.otlp_endpoint = Some(url.as_str().trim_end_matches('/').to_owned());
    }
    if let Some(n) = d.service_name {
        if n.get_ref().trim().is_empty() {
            return Err((n.span().start, "telemetry.service_name is empty".to_owned()));
        }
        s.service_name = n.into_inner();
    }
    if let Some(v) = within(
        &d.metrics_interval_ms,
        (1_000, 3_600_000),
        "metrics_interval_ms",
    )? {
        s.metrics_interval_ms = v;
    }
    if let Some(v) = within(&d.timeout_ms, (100, 60_000), "timeout_ms")? {
        s.timeout_ms = v;
    }
    for (name, value) in d.headers {
        let at = name.span().start;
        if http_token(name.get_ref()).is_none() {
            return Err((
                at,
                format!(
                    "telemetry.headers: {:?} is not a header name",
                    name.get_ref()
                ),
            ));
        }
        let v = match value.get_ref().strip_prefix("env:") {
            Some(var) if !var.is_empty() => HeaderValue::Env(var.to_owned()),
            Some(_) => {
                return Err((
                    value.span().start,
                    format!(
                        "telemetry.headers.{}: `env:` names no variable",
                        name.get_ref()
                    ),
                ));
            }
            None if value.get_ref().chars().any(char::is_control) => {
                return Err((
                    value.span().start,
                    format!("telemetry.headers.{}: a control character", name.get_ref()),
                ));
            }
            None => HeaderValue::Literal(value.get_ref().clone()),
        };
        s.headers.insert(name.into_inner().to_ascii_lowercase(), v);
    }
    Ok(s)
}

/// `name` when it is an HTTP header name (an RFC 9110 token).
fn http_token(name: &str) -> Option<&str> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    ok.then_some(name)
}
