//! Operations telemetry: what every governed call this process ran adds up to, kept by the
//! pipeline as each call finishes (after its audit record) and rendered in the OpenMetrics text
//! format for `toolwarden serve`'s `/metrics` (issue 22; Prometheus scrapes it). Calls by tool,
//! status and caller; latency by tool; refusals by the layer that refused and its code; the
//! sandbox's CPU time and peak memory by tool; the operational mode; calls in flight.
//!
//! Label values come from callers (agent ids) and from tools they name, so they are bounded: a
//! tool no registry knows is counted as `(unknown)`, and past [`MAX_CALLERS`] distinct callers the
//! rest are counted as `(other)`, so a caller cannot grow the scrape without end.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tw_core::{Caller, OperationalMode, ToolResult, ToolStatus};

/// Distinct callers counted by name; the rest are `(other)`.
pub(crate) const MAX_CALLERS: usize = 200;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    status: String,
    caller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    layer: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: String,
}

type Histograms = Family<ToolLabels, Histogram, fn() -> Histogram>;

/// The counters, kept for the life of the runtime.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    duration: Histograms,
    refusals: Family<RefusalLabels, Counter>,
    cpu: Family<ToolLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    memory: Histograms,
    mode: Family<ModeLabels, Gauge>,
    in_flight: Gauge,
    audit_failures: Counter,
    callers: Mutex<HashSet<String>>,
    /// The same counts for the OTLP export, when `[telemetry]` turns it on.
    otel: OnceLock<Instruments>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Call latency buckets (seconds): 100 µs to about 105 s, each 4 times the one before.
pub(crate) const LATENCY_BUCKETS: [f64; 11] = [
    0.000_1, 0.000_4, 0.001_6, 0.006_4, 0.025_6, 0.102_4, 0.409_6, 1.638_4, 6.553_6, 26.214_4,
    104.857_6,
];

/// Peak memory buckets (bytes): 1 MiB to 4 GiB, each 4 times the one before.
pub(crate) const MEMORY_BUCKETS: [f64; 7] = [
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
    268_435_456.0,
    1_073_741_824.0,
    4_294_967_296.0,
];

fn latency() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn memory() -> Histogram {
    Histogram::new(MEMORY_BUCKETS)
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolwarden");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Governed tool calls this process finished, by tool, status and caller (refused and invalid ones included)",
            calls.clone(),
        );
        let duration: Histograms = Family::new_with_constructor(latency);
        registry.register_with_unit(
            "tool_call_duration",
            "How long governed calls took, from lookup to result, by tool",
            prometheus_client::registry::Unit::Seconds,
            duration.clone(),
        );
        let refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "tool_calls_refused",
            "Calls refused before they ran, by the layer that refused them and its code",
            refusals.clone(),
        );
        let cpu = Family::<ToolLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register_with_unit(
            "sandbox_cpu",
            "CPU time sandboxed processes used, by tool",
            prometheus_client::registry::Unit::Seconds,
            cpu.clone(),
        );
        let memory: Histograms = Family::new_with_constructor(memory);
        registry.register_with_unit(
            "sandbox_peak_memory",
            "Peak memory of sandboxed runs, by tool",
            prometheus_client::registry::Unit::Bytes,
            memory.clone(),
        );
        let mode = Family::<ModeLabels, Gauge>::default();
        registry.register(
            "mode",
            "The operational mode: 1 for the current one",
            mode.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "tool_calls_in_flight",
            "Calls this process is running now",
            in_flight.clone(),
        );
        let audit_failures = Counter::default();
        registry.register(
            "audit_write_failures",
            "Calls whose audit record could not be written (their results were withheld)",
            audit_failures.clone(),
        );
        Self {
            registry,
            calls,
            duration,
            refusals,
            cpu,
            memory,
            mode,
            in_flight,
            audit_failures,
            callers: Mutex::new(HashSet::new()),
            otel: OnceLock::new(),
        }
    }
}

impl Metrics {
    /// Counts into `instruments` too from here on (the OTLP export).
    pub(crate) fn export_to(&self, instruments: Instruments) {
        let _ = self.otel.set(instruments);
    }

    /// Counts a call whose audit record could not be written.
    pub(crate) fn audit_failed(&self) {
        self.audit_failures.inc();
        if let Some(o) = self.otel.get() {
            o.audit_failures.add(1, &[]);
        }
    }

    /// Calls whose audit record could not be written, since the runtime started (the resource
    /// watcher degrades the mode when this grows).
    pub(crate) fn audit_failures(&self) -> u64 {
        self.audit_failures.get()
    }

    /// Counts a finished call. A call the lookup refused (`NotFound`) names a tool no registry
    /// has: it is counted as `(unknown)`.
    pub(crate) fn record(&self, caller: &Caller, result: &ToolResult) {
        let tool = if result.status == ToolStatus::NotFound {
            "(unknown)"
        } else {
            result.tool.as_str()
        };
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                status: result.status.as_str().to_owned(),
                caller: self.caller_label(&caller.agent_id),
            })
            .inc();
        let tool_labels = ToolLabels {
            tool: tool.to_owned(),
        };
        self.duration
            .get_or_create(&tool_labels)
            .observe(result.metadata.duration_us.max(0) as f64 / 1e6);
        if let Some((layer, code)) = refusal(result) {
            self.refusals
                .get_or_create(&RefusalLabels { layer, code })
                .inc();
        }
        let facts = &result.metadata.execution;
        if let Some(us) = facts.get("cpu_time_us").and_then(serde_json::Value::as_u64) {
            self.cpu.get_or_create(&tool_labels).inc_by(us as f64 / 1e6);
        }
        if let Some(bytes) = facts
            .get("peak_memory_bytes")
            .and_then(serde_json::Value::as_u64)
        {
            self.memory
                .get_or_create(&tool_labels)
                .observe(bytes as f64);
        }
        if let Some(o) = self.otel.get() {
            self.export(o, caller, result, tool);
        }
    }

    /// The same counts as [`Self::record`], into the OTLP instruments.
    fn export(&self, o: &Instruments, caller: &Caller, result: &ToolResult, tool: &str) {
        use opentelemetry::KeyValue;
        let by_tool = [KeyValue::new("tool", tool.to_owned())];
        o.calls.add(
            1,
            &[
                by_tool[0].clone(),
                KeyValue::new("status", result.status.as_str()),
                KeyValue::new("caller", self.caller_label(&caller.agent_id)),
            ],
        );
        o.duration
            .record(result.metadata.duration_us.max(0) as f64 / 1e6, &by_tool);
        if let Some((layer, code)) = refusal(result) {
            o.refusals.add(
                1,
                &[KeyValue::new("layer", layer), KeyValue::new("code", code)],
            );
        }
        let facts = &result.metadata.execution;
        if let Some(us) = facts.get("cpu_time_us").and_then(serde_json::Value::as_u64) {
            o.cpu.add(us as f64 / 1e6, &by_tool);
        }
        if let Some(bytes) = facts
            .get("peak_memory_bytes")
            .and_then(serde_json::Value::as_u64)
        {
            o.memory.record(bytes as f64, &by_tool);
        }
    }

    fn caller_label(&self, agent: &str) -> String {
        let Ok(mut seen) = self.callers.lock() else {
            return "(other)".to_owned();
        };
        if seen.contains(agent) {
            return agent.to_owned();
        }
        if seen.len() < MAX_CALLERS {
            seen.insert(agent.to_owned());
            return agent.to_owned();
        }
        "(other)".to_owned()
    }

    /// The metrics in the OpenMetrics text format, with the mode and the calls in flight as
    /// they are now.
    pub(crate) fn render(&self, mode: OperationalMode, in_flight: usize) -> String {
        for m in OperationalMode::ALL {
            self.mode
                .get_or_create(&ModeLabels {
                    mode: m.as_str().to_owned(),
                })
                .set(i64::from(*m == mode));
        }
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The call metrics' instruments, recorded next to the Prometheus ones (`crate::metrics`) with
/// the same bounded labels.
#[derive(Debug)]
pub(crate) struct Instruments {
    pub calls: opentelemetry::metrics::Counter<u64>,
    pub duration: opentelemetry::metrics::Histogram<f64>,
    pub refusals: opentelemetry::metrics::Counter<u64>,
    pub cpu: opentelemetry::metrics::Counter<f64>,
    pub memory: opentelemetry::metrics::Histogram<f64>,
    pub audit_failures: opentelemetry::metrics::Counter<u64>,
}

/// The instruments, made on the OTLP export's meter.
pub(crate) fn instruments(meter: &opentelemetry::metrics::Meter) -> Instruments {
    Instruments {
        calls: meter
            .u64_counter("toolwarden.tool_calls")
            .with_description(
                "Governed tool calls finished, by tool, status and caller (refused and invalid ones included)",
            )
            .with_unit("{call}")
            .build(),
        duration: meter
            .f64_histogram("toolwarden.tool_call.duration")
            .with_description("How long governed calls took, from lookup to result, by tool")
            .with_unit("s")
            .with_boundaries(LATENCY_BUCKETS.to_vec())
            .build(),
        refusals: meter
            .u64_counter("toolwarden.tool_calls.refused")
            .with_description("Calls refused before they ran, by the layer that refused and its code")
            .with_unit("{call}")
            .build(),
        cpu: meter
            .f64_counter("toolwarden.sandbox.cpu")
            .with_description("CPU time sandboxed processes used, by tool")
            .with_unit("s")
            .build(),
        memory: meter
            .f64_histogram("toolwarden.sandbox.peak_memory")
            .with_description("Peak memory of sandboxed runs, by tool")
            .with_unit("By")
            .with_boundaries(MEMORY_BUCKETS.to_vec())
            .build(),
        audit_failures: meter
            .u64_counter("toolwarden.audit.write_failures")
            .with_description("Calls whose audit record could not be written (results withheld)")
            .with_unit("{call}")
            .build(),
    }
}

/// The layer that refused a call and its code, for a call that did not run because the
/// pipeline refused it: policy, tier, mode, a rate limit, a person (`PermissionDenied`), a
/// confirmation nobody gave, arguments its schema refused, a tool that does not exist.
pub(crate) fn refusal(result: &ToolResult) -> Option<(String, String)> {
    let code = result
        .error
        .as_ref()
        .map_or_else(String::new, |e| e.code.clone());
    match result.status {
        ToolStatus::PermissionDenied | ToolStatus::RequiresConfirmation => {
            let layer = result
                .decision
                .as_ref()
                .and_then(|d| d.deciding())
                .map_or("pipeline", |v| v.layer.as_str());
            Some((layer.to_owned(), code))
        }
        ToolStatus::ValidationError => Some(("validation".to_owned(), code)),
        ToolStatus::NotFound => Some(("lookup".to_owned(), code)),
        _ => None,
    }
}

/// Whether a status is a refusal (the call did not run because the pipeline said no), which
/// the log names `tool_call_blocked`, apart from `tool_call_failed`.
pub(crate) fn is_refusal(status: ToolStatus) -> bool {
    matches!(
        status,
        ToolStatus::PermissionDenied
            | ToolStatus::RequiresConfirmation
            | ToolStatus::ValidationError
            | ToolStatus::NotFound
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tw_core::{ExecutionId, ResultMetadata, TraceId};

    fn result(tool: &str, status: ToolStatus) -> ToolResult {
        ToolResult {
            execution_id: ExecutionId::new("exec-1").unwrap(),
            trace_id: TraceId::new("trace-1").unwrap(),
            tool: tool.to_owned(),
            status,
            output: None,
            error: None,
            decision: None,
            metadata: ResultMetadata::default(),
        }
    }

    #[test]
    fn callers_past_the_cap_are_counted_together_so_a_caller_cannot_grow_the_scrape() {
        let m = Metrics::default();
        for n in 0..MAX_CALLERS + 50 {
            m.record(
                &Caller::agent(&format!("agent-{n}")),
                &result("echo", ToolStatus::Success),
            );
        }
        // A caller seen before the cap keeps its own label.
        m.record(
            &Caller::agent("agent-0"),
            &result("echo", ToolStatus::Success),
        );
        let text = m.render(OperationalMode::Normal, 0);
        let calls: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("toolwarden_tool_calls_total{"))
            .collect();
        assert_eq!(calls.len(), MAX_CALLERS + 1, "{calls:#?}");
        assert!(calls.contains(
            &r#"toolwarden_tool_calls_total{tool="echo",status="success",caller="(other)"} 50"#
        ));
        assert!(calls.contains(
            &r#"toolwarden_tool_calls_total{tool="echo",status="success",caller="agent-0"} 2"#
        ));
    }

    #[test]
    fn a_sandboxed_runs_cpu_and_peak_memory_are_counted_by_tool() {
        let m = Metrics::default();
        let mut r = result("exec", ToolStatus::Success);
        r.metadata
            .execution
            .insert("cpu_time_us".into(), serde_json::json!(1_500_000));
        r.metadata
            .execution
            .insert("peak_memory_bytes".into(), serde_json::json!(3_000_000));
        m.record(&Caller::agent("a"), &r);
        let text = m.render(OperationalMode::Normal, 1);
        assert!(
            text.contains(r#"toolwarden_sandbox_cpu_seconds_total{tool="exec"} 1.5"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"toolwarden_sandbox_peak_memory_bytes_bucket{le="4194304.0",tool="exec"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("toolwarden_tool_calls_in_flight 1"), "{text}");
    }
}
