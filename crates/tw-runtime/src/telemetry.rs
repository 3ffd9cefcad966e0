//! OpenTelemetry export (issue 22): each governed call's `tool_call` span, and the call metrics
//! `serve`'s `/metrics` shows, sent over OTLP/HTTP (protobuf) to the collector `[telemetry]`
//! names; off unless it names one. The span's ids are the call's own: its trace id is the
//! call's (hashed into the W3C shape when a caller supplied another), its span id comes from the
//! execution id ([`crate::ids::span_id`]), and a chain step's parent is its chain call's span,
//! so the audit log, the log lines and the collector's traces name the same spans.
//!
//! Export runs on the tokio runtime in batches, off the call's path: a collector that is slow
//! or gone costs a call nothing, and what it cannot take is dropped, never the call.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use opentelemetry::metrics::{Meter, MeterProvider as _, ObservableGauge};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SpanData, SpanProcessor as _};
use serde_json::Value;
use tw_core::{Caller, OperationalMode, ToolResult, ToolStatus};

use crate::config::{HeaderValue, TelemetrySettings};
use crate::metrics::Instruments;

/// What the runtime's state gauges read when the metrics are collected: the mode and the calls
/// in flight.
pub(crate) type StateSource = Box<dyn Fn() -> Option<(OperationalMode, usize)> + Send + Sync>;

/// The exporters, while the runtime runs.
pub(crate) struct Telemetry {
    spans: Arc<BatchSpanProcessor<Tokio>>,
    meters: SdkMeterProvider,
    scope: InstrumentationScope,
    /// Read by the mode and in-flight gauges; set once the services exist.
    state: Arc<Mutex<Option<StateSource>>>,
    _gauges: [ObservableGauge<u64>; 2],
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the exporters `[telemetry]` asks for; `None` when it names no collector. Must run
    /// on the tokio runtime (the batches are sent from its tasks).
    pub(crate) fn start(
        s: &TelemetrySettings,
    ) -> Result<Option<(Self, Instruments)>, crate::RuntimeError> {
        let Some(endpoint) = &s.otlp_endpoint else {
            return Ok(None);
        };
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            crate::RuntimeError::Config(crate::config::ConfigError {
                file: "[telemetry]".to_owned(),
                line: None,
                column: None,
                message: format!("the OTLP {what} export cannot start: {e}"),
            })
        };
        let headers = headers(&s.headers).map_err(|e| fail("header", &e))?;
        let timeout = Duration::from_millis(s.timeout_ms);
        let resource = Resource::builder()
            .with_service_name(s.service_name.clone())
            .build();
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .with_timeout(timeout)
            .with_headers(headers.clone())
            .build()
            .map_err(|e| fail("span", &e))?;
        let mut spans = BatchSpanProcessor::builder(spans, Tokio).build();
        spans.set_resource(&resource);
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/metrics"))
            .with_timeout(timeout)
            .with_headers(headers)
            .build()
            .map_err(|e| fail("metric", &e))?;
        let reader = PeriodicReader::builder(metrics, Tokio)
            .with_interval(Duration::from_millis(s.metrics_interval_ms))
            .with_timeout(timeout)
            .build();
        let meters = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("toolwarden")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let meter = meters.meter_with_scope(scope.clone());
        let state: Arc<Mutex<Option<StateSource>>> = Arc::default();
        let gauges = gauges(&meter, &state);
        let instruments = crate::metrics::instruments(&meter);
        Ok(Some((
            Self {
                spans: Arc::new(spans),
                meters,
                scope,
                state,
                _gauges: gauges,
            },
            instruments,
        )))
    }

    /// Where the mode and in-flight gauges read from (the services made after the runtime's
    /// shared state).
    pub(crate) fn watch_state(&self, source: StateSource) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Some(source);
    }

    /// Queues a finished call's span (after its audit record was written, or failed to be).
    pub(crate) fn span(&self, caller: &Caller, result: &ToolResult) {
        self.spans
            .on_end(span_data(caller, result, self.scope.clone()));
    }

    /// Sends what is queued and stops the exporters (on a blocking thread: the SDK waits for its
    /// export tasks, which run on this runtime).
    pub(crate) async fn shutdown(&self) {
        let spans = Arc::clone(&self.spans);
        let meters = self.meters.clone();
        let done = tokio::task::spawn_blocking(move || {
            if let Err(e) = spans.shutdown() {
                tracing::warn!(error = %e, "the last spans could not be sent");
            }
            if let Err(e) = meters.shutdown() {
                tracing::warn!(error = %e, "the last metrics could not be sent");
            }
        });
        let _ = done.await;
    }
}

/// The export headers, with `env:` values read now.
fn headers(
    h: &std::collections::BTreeMap<String, HeaderValue>,
) -> Result<std::collections::HashMap<String, String>, String> {
    h.iter()
        .map(|(name, v)| {
            let value = match v {
                HeaderValue::Literal(v) => v.clone(),
                HeaderValue::Env(var) => std::env::var(var).map_err(|_| {
                    format!("telemetry.headers.{name} names ${var}, which is not set")
                })?,
            };
            Ok((name.clone(), value))
        })
        .collect()
}

fn gauges(meter: &Meter, state: &Arc<Mutex<Option<StateSource>>>) -> [ObservableGauge<u64>; 2] {
    let read = |state: &Arc<Mutex<Option<StateSource>>>| {
        state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|f| f())
    };
    let for_mode = Arc::clone(state);
    let mode = meter
        .u64_observable_gauge("toolwarden.mode")
        .with_description("The operational mode: 1 for the current one")
        .with_callback(move |o| {
            if let Some((now, _)) = read(&for_mode) {
                for m in OperationalMode::ALL {
                    o.observe(u64::from(*m == now), &[KeyValue::new("mode", m.as_str())]);
                }
            }
        })
        .build();
    let for_flights = Arc::clone(state);
    let in_flight = meter
        .u64_observable_gauge("toolwarden.tool_calls.in_flight")
        .with_description("Calls this process is running now")
        .with_unit("{call}")
        .with_callback(move |o| {
            if let Some((_, n)) = read(&for_flights) {
                o.observe(n as u64, &[]);
            }
        })
        .build();
    [mode, in_flight]
}

/// A call's trace id in the W3C shape: the call's own when it has that shape (the runtime's
/// ids do), else derived from it.
pub(crate) fn trace_id(id: &str) -> TraceId {
    let hex = if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        id.to_ascii_lowercase()
    } else {
        tw_store::sha256_hex(id.as_bytes())[..32].to_owned()
    };
    match TraceId::from_hex(&hex) {
        Ok(t) if t != TraceId::INVALID => t,
        _ => TraceId::from_bytes([1; 16]),
    }
}

fn span_id(execution_id: &str) -> SpanId {
    SpanId::from_hex(&crate::ids::span_id(execution_id)).unwrap_or(SpanId::from_bytes([1; 8]))
}

fn time(us: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// A finished call as an OpenTelemetry span.
pub(crate) fn span_data(
    caller: &Caller,
    result: &ToolResult,
    scope: InstrumentationScope,
) -> SpanData {
    let trace = trace_id(result.trace_id.as_str());
    let chain = result.metadata.execution.get("chain");
    let parent = chain
        .and_then(|c| c["run_id"].as_str())
        .map_or(SpanId::INVALID, span_id);
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", result.tool.clone()),
        KeyValue::new("toolwarden.execution_id", result.execution_id.to_string()),
        KeyValue::new("toolwarden.trace_id", result.trace_id.to_string()),
        KeyValue::new("toolwarden.status", result.status.as_str()),
        KeyValue::new("toolwarden.caller.agent", caller.agent_id.clone()),
        KeyValue::new("toolwarden.duration_us", result.metadata.duration_us.max(0)),
    ];
    if let Some(skill) = &caller.skill {
        attributes.push(KeyValue::new("toolwarden.caller.skill", skill.clone()));
    }
    if let Some(d) = &result.decision {
        attributes.push(KeyValue::new("toolwarden.decision", d.decision.as_str()));
    }
    if let Some((layer, _)) = crate::metrics::refusal(result) {
        attributes.push(KeyValue::new("toolwarden.refused_by", layer));
    }
    if let Some(e) = &result.error {
        attributes.push(KeyValue::new("error.type", e.code.clone()));
    }
    if let Some(c) = chain {
        if let Some(step) = c["step"].as_str() {
            attributes.push(KeyValue::new("toolwarden.chain.step", step.to_owned()));
        }
        if let Some(run) = c["run_id"].as_str() {
            attributes.push(KeyValue::new("toolwarden.chain.run_id", run.to_owned()));
        }
    }
    for key in ["cpu_time_us", "peak_memory_bytes"] {
        if let Some(v) = result.metadata.execution.get(key).and_then(Value::as_i64) {
            attributes.push(KeyValue::new(format!("toolwarden.sandbox.{key}"), v));
        }
    }
    let status = match (result.status, &result.error) {
        (ToolStatus::Success, _) => Status::Ok,
        (_, Some(e)) => Status::error(e.message.clone()),
        (s, None) => Status::error(s.as_str()),
    };
    SpanData {
        span_context: SpanContext::new(
            trace,
            span_id(result.execution_id.as_str()),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: parent,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed("tool_call"),
        start_time: time(result.metadata.started_at),
        end_time: time(result.metadata.completed_at),
        attributes,
        dropped_attributes_count: 0,
        events: Default::default(),
        links: Default::default(),
        status,
        instrumentation_scope: scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tw_core::{ExecutionId, ResultMetadata, ToolError};

    fn result(trace: &str, execution: &str, status: ToolStatus) -> ToolResult {
        ToolResult {
            execution_id: ExecutionId::new(execution).unwrap(),
            trace_id: tw_core::TraceId::new(trace).unwrap(),
            tool: "read_file".to_owned(),
            status,
            output: None,
            error: None,
            decision: None,
            metadata: ResultMetadata {
                started_at: 1_700_000_000_000_000,
                completed_at: 1_700_000_000_000_250,
                duration_us: 250,
                ..Default::default()
            },
        }
    }

    fn attr<'a>(s: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    #[test]
    fn a_calls_span_carries_its_trace_id_and_a_span_id_from_its_execution_id() {
        let trace = "01a2245e84f37219ae4a5ff00b28d10b";
        let r = result(
            trace,
            "01a2245e-84f3-7219-ae4a-5ff1e7346c9a",
            ToolStatus::Success,
        );
        let s = span_data(&Caller::agent("a"), &r, InstrumentationScope::default());
        assert_eq!(s.span_context.trace_id().to_string(), trace);
        assert_eq!(
            s.span_context.span_id().to_string(),
            crate::ids::span_id("01a2245e-84f3-7219-ae4a-5ff1e7346c9a")
        );
        assert_eq!(s.parent_span_id, SpanId::INVALID);
        assert_eq!(s.status, Status::Ok);
        assert_eq!(
            s.end_time.duration_since(s.start_time).unwrap(),
            Duration::from_micros(250)
        );
        // A trace id of another shape is hashed into the W3C one, the same way each time.
        let other = span_data(
            &Caller::agent("a"),
            &result("my-trace", "e-1", ToolStatus::Success),
            InstrumentationScope::default(),
        );
        assert_eq!(
            other.span_context.trace_id(),
            trace_id("my-trace"),
            "derived once, the same everywhere"
        );
        assert_ne!(other.span_context.trace_id(), TraceId::INVALID);
    }

    #[test]
    fn a_chain_steps_span_is_a_child_of_its_chain_calls_span_and_a_refusal_is_an_error() {
        let mut r = result(
            "01a2245e84f37219ae4a5ff00b28d10b",
            "step-exec",
            ToolStatus::PermissionDenied,
        );
        r.metadata.execution.insert(
            "chain".to_owned(),
            serde_json::json!({"run_id": "chain-exec", "step": "fetch", "attempt": 1, "depth": 1}),
        );
        r.error = Some(ToolError::new("policy_denied", "no rule allows it"));
        let s = span_data(&Caller::agent("a"), &r, InstrumentationScope::default());
        assert_eq!(s.parent_span_id, span_id("chain-exec"));
        assert_eq!(s.status, Status::error("no rule allows it"));
        assert_eq!(
            attr(&s, "toolwarden.refused_by").map(ToString::to_string),
            Some("pipeline".to_owned())
        );
        assert_eq!(
            attr(&s, "error.type").map(ToString::to_string),
            Some("policy_denied".to_owned())
        );
        assert_eq!(
            attr(&s, "toolwarden.chain.step").map(ToString::to_string),
            Some("fetch".to_owned())
        );
    }
}
