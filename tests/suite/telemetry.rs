//! The OTLP export through the real binary, against an OTLP/HTTP receiver in the test that
//! decodes what arrives with the protocol's own message types: each call's `tool_call` span with
//! the audit record's trace id and a span id its log lines carry too, the call metrics, the
//! configured headers; and a collector that never answers costs the calls nothing.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::{Span, status};
use prost::Message as _;
use serde_json::json;

use super::support::Env;

/// One request the receiver took: its path, headers (names in lower case) and body.
struct Export {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// An OTLP/HTTP receiver on a free local port: it takes every request (several on one
/// connection) and answers 200, or, when `answer` is false, never answers.
fn receiver(answer: bool) -> (u16, Arc<Mutex<Vec<Export>>>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let got: Arc<Mutex<Vec<Export>>> = Arc::default();
    let into = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let into = Arc::clone(&into);
            std::thread::spawn(move || take(stream, &into, answer));
        }
    });
    (port, got)
}

fn take(stream: TcpStream, into: &Mutex<Vec<Export>>, answer: bool) {
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        into.lock().unwrap().push(Export {
            path,
            headers,
            body,
        });
        if !answer {
            // Holds the connection open, unanswered, until the exporter gives up on it.
            let _ = reader.read_line(&mut String::new());
            return;
        }
        let reply =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| text(kv.value.as_ref()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const POLICY: &str = r#"
[policy]
default = "allow"
deny = ["write_file"]
"#;

#[test]
fn each_call_is_a_span_with_the_audit_records_ids_and_the_call_metrics_reach_the_collector() {
    let (port, got) = receiver(true);
    let env = Env::new().with_config(&format!(
        "{POLICY}
[telemetry]
otlp_endpoint = \"http://127.0.0.1:{port}\"
service_name = \"tw-suite\"
[telemetry.headers]
x-suite-key = \"env:TW_SUITE_OTLP_KEY\"
"
    ));
    env.write("note.txt", "hello\n");
    let batch = env.root.path().join("calls.jsonl");
    std::fs::write(
        &batch,
        format!(
            "{}\n{}\n",
            json!({"tool": "read_file", "arguments": {"path": "note.txt"}}),
            json!({"tool": "write_file", "arguments": {"path": "x.txt", "content": "x"}}),
        ),
    )
    .unwrap();
    let mut cmd = env.cmd(&["--verbose", "batch", &batch.display().to_string()]);
    cmd.cmd.env("TW_SUITE_OTLP_KEY", "k-123");
    let run = cmd.run();
    // One call was refused: the batch says so in its exit code.
    assert_eq!(
        run.stdout.lines().count(),
        2,
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    // The runtime sent what it had before the command ended.
    let got = got.lock().unwrap();
    let traces: Vec<&Export> = got.iter().filter(|e| e.path == "/v1/traces").collect();
    let metrics: Vec<&Export> = got.iter().filter(|e| e.path == "/v1/metrics").collect();
    assert!(
        !traces.is_empty() && !metrics.is_empty(),
        "paths: {:?}\n{}",
        got.iter().map(|e| &e.path).collect::<Vec<_>>(),
        run.stderr
    );
    for e in got.iter() {
        assert_eq!(
            e.headers.get("x-suite-key").map(String::as_str),
            Some("k-123")
        );
        assert_eq!(
            e.headers.get("content-type").map(String::as_str),
            Some("application/x-protobuf")
        );
    }
    let mut spans: Vec<Span> = Vec::new();
    for e in &traces {
        let req = ExportTraceServiceRequest::decode(e.body.as_slice()).unwrap();
        for rs in req.resource_spans {
            let resource = rs.resource.unwrap_or_default();
            assert_eq!(
                attr(&resource.attributes, "service.name").as_deref(),
                Some("tw-suite")
            );
            for ss in rs.scope_spans {
                assert_eq!(ss.scope.unwrap_or_default().name, "toolwarden");
                spans.extend(ss.spans);
            }
        }
    }
    let rows = env.audit_rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for row in &rows {
        let span_id = &tw_store::sha256_hex(row.execution_id.as_bytes())[..16];
        let span = spans
            .iter()
            .find(|s| hex(&s.span_id) == span_id)
            .unwrap_or_else(|| panic!("no span {span_id} for {row:?} in {spans:#?}"));
        assert_eq!(span.name, "tool_call");
        assert_eq!(hex(&span.trace_id), row.trace_id);
        assert!(
            span.parent_span_id.is_empty(),
            "a call an agent made has no parent"
        );
        assert_eq!(
            attr(&span.attributes, "toolwarden.execution_id").as_deref(),
            Some(row.execution_id.as_str())
        );
        assert_eq!(
            attr(&span.attributes, "gen_ai.tool.name").as_deref(),
            Some(row.tool.as_str())
        );
        assert_eq!(
            attr(&span.attributes, "toolwarden.status").as_deref(),
            Some(row.status.as_str())
        );
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
        let code = span.status.clone().unwrap_or_default().code;
        if row.tool == "read_file" {
            assert_eq!(code, status::StatusCode::Ok as i32);
        } else {
            assert_eq!(code, status::StatusCode::Error as i32);
            assert_eq!(
                attr(&span.attributes, "toolwarden.refused_by").as_deref(),
                Some("tools"),
                "{span:#?}"
            );
            // The refusal's log line names the same span.
            assert!(
                run.stderr.contains(&format!("span_id={span_id}")),
                "{}",
                run.stderr
            );
        }
    }
    // The metrics: both calls by tool and status, the refusal by its layer.
    let mut sums: HashMap<String, Vec<(String, i64)>> = HashMap::new();
    for e in &metrics {
        let req = ExportMetricsServiceRequest::decode(e.body.as_slice()).unwrap();
        for rm in req.resource_metrics {
            for sm in rm.scope_metrics {
                for m in sm.metrics {
                    if let Some(metric::Data::Sum(s)) = m.data {
                        for p in s.data_points {
                            let labels = ["tool", "status", "layer"]
                                .iter()
                                .filter_map(|k| attr(&p.attributes, k))
                                .collect::<Vec<_>>()
                                .join(",");
                            let n = match p.value {
                                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n)) => n,
                                other => panic!("{other:?}"),
                            };
                            sums.entry(m.name.clone()).or_default().push((labels, n));
                        }
                    }
                }
            }
        }
    }
    let calls = sums
        .get("toolwarden.tool_calls")
        .cloned()
        .unwrap_or_default();
    assert!(
        calls.contains(&("read_file,success".to_owned(), 1))
            && calls.contains(&("write_file,permission_denied".to_owned(), 1)),
        "{sums:#?}"
    );
    assert_eq!(
        sums.get("toolwarden.tool_calls.refused"),
        Some(&vec![("tools".to_owned(), 1)]),
        "{sums:#?}"
    );
}

#[test]
fn a_collector_that_never_answers_costs_the_calls_nothing() {
    let (port, got) = receiver(false);
    let env = Env::new().with_config(&format!(
        "{POLICY}
[telemetry]
otlp_endpoint = \"http://127.0.0.1:{port}\"
timeout_ms = 500
"
    ));
    env.write("note.txt", "hello\n");
    let run = env.call("read_file", json!({"path": "note.txt"})).ok();
    assert_eq!(run.json()["output"]["content"], "hello\n");
    assert_eq!(env.audit_rows().len(), 1);
    // It was tried, and given up on.
    assert!(
        got.lock().unwrap().iter().any(|e| e.path == "/v1/traces"),
        "{}",
        run.stderr
    );
}
