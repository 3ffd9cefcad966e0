//! `toolwarden serve` with real peers: the official MCP Python SDK over streamable HTTP (listing,
//! calls and refusals, an agent's token, a confirmation approved through the admin API,
//! cancellation, closing a session, the cap on sessions per token), and attack tests against the
//! endpoint over a real socket: no token, a forged one, a foreign Origin, a rebound Host, an
//! agent's token reaching for the admin API, a token past its session cap, and a non-loopback
//! address, which is refused unless configured. The soak (issue 15) opens and closes 2,000
//! sessions and fails if the server's resident memory grew more than 10% after its warm-up.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::Child;
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{CLIENT, Client, FS_AND_ECHO, LIMIT, names, outcome, poll_rows, text, wait_for_file};
use crate::suite::support::Env;

/// `toolwarden serve` on a free loopback port; stopped with SIGTERM when dropped.
pub(super) struct Served {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    base: String,
    /// Its standard error so far, read as it comes, and the thread reading it.
    stderr: Arc<Mutex<Vec<u8>>>,
    reading: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    pub(super) fn start(env: &Env) -> Self {
        let mut child = env.cmd(&["serve", "--listen", "127.0.0.1:0"]).spawn();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(LIMIT).unwrap_or_default();
        let Some(base) = line.trim().strip_suffix("/mcp") else {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "serve printed {line:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut from = child.stderr.take().unwrap();
        let into = Arc::clone(&stderr);
        let reading = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Self {
            base: base.to_owned(),
            child: Some(child),
            stderr,
            reading: Some(reading),
        }
    }

    /// What it has written to standard error so far.
    pub(super) fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub(super) fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Stops it with SIGTERM and returns its exit code and stderr.
    fn stop(mut self) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        terminate(&child);
        let code = child.wait().unwrap().code();
        if let Some(reading) = self.reading.take() {
            reading.join().unwrap();
        }
        (code, self.stderr_so_far())
    }
}

fn terminate(child: &Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP/1.1 request over a fresh connection, written by hand so every header is exactly what
/// the test says (a client library would add or fix some). Returns the status and the body.
fn request(
    served: &Served,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(served.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {}\r\n", served.addr()));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "not an HTTP response: {out:?}; the endpoint's stderr so far:\n{}",
                served.stderr_so_far()
            )
        });
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

pub(super) fn admin_token(env: &Env) -> String {
    env.cmd(&["serve", "token"])
        .run()
        .ok()
        .stdout
        .trim()
        .to_owned()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The plan for tests/mcp/client.py against the endpoint.
fn http_plan(served: &Served, token: &str, steps: Value) -> Value {
    json!({
        "server": {"url": format!("{}/mcp", served.base), "token": token},
        "client": {"name": CLIENT, "version": "1.2.3"},
        "steps": steps,
    })
}

#[test]
fn over_streamable_http_a_session_lists_calls_and_is_refused_as_over_stdio() {
    let env = Env::new().with_config(FS_AND_ECHO);
    env.write("notes.txt", "hello\n");
    let served = Served::start(&env);
    let token = admin_token(&env);
    let report = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([
                {"op": "list"},
                {"op": "call", "tool": "read_file", "arguments": {"path": "notes.txt"}},
                {"op": "call", "tool": "delete_file", "arguments": {"path": "notes.txt"}},
            ]),
        ),
    )
    .finish();
    assert_eq!(report["initialize"]["serverInfo"]["name"], "toolwarden");
    assert_eq!(
        names(&report["steps"][0]),
        [
            "echo",
            "file_search",
            "list_directory",
            "read_file",
            "write_file"
        ]
    );
    assert_eq!(outcome(&report["steps"][1]).2, json!("success"));
    assert_eq!(
        outcome(&report["steps"][2]),
        (
            text(
                "permission_denied: policy_denied: tool delete_file is denied by rule \"delete_file\""
            ),
            json!(true),
            json!("permission_denied")
        )
    );
    assert!(env.ws.join("notes.txt").exists(), "the denied call ran");
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (r.tool.as_str(), r.status.as_str(), r.agent_id.as_str()))
            .collect::<Vec<_>>(),
        [
            ("read_file", "success", "mcp:tw-test-client"),
            ("delete_file", "permission_denied", "mcp:tw-test-client")
        ]
    );
    // SIGTERM ends it cleanly.
    let (code, stderr) = served.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_agents_token_records_its_agent_and_does_not_open_the_admin_api() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let served = Served::start(&env);
    let issued = env
        .cmd(&["serve", "issue", "ci-bot", "--label", "nightly"])
        .run()
        .ok();
    let token = issued.stdout.trim().to_owned();
    assert!(
        issued.stderr.contains("for agent ci-bot"),
        "{}",
        issued.stderr
    );
    let report = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([{"op": "call", "tool": "echo", "arguments": {"n": 1}}]),
        ),
    )
    .finish();
    assert_eq!(outcome(&report["steps"][0]).2, json!("success"));
    let agents: Vec<String> = env.audit_rows().into_iter().map(|r| r.agent_id).collect();
    assert_eq!(agents, ["ci-bot"]);

    let (status, body) = request(
        &served,
        "GET",
        "/api/v1/confirmations",
        &[("Authorization", &bearer(&token))],
        "",
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("admin_only"), "{body}");

    // Revoked, it opens nothing.
    env.cmd(&["serve", "revoke", "ci-bot"]).run().ok();
    let (status, _) = request(
        &served,
        "POST",
        "/mcp",
        &[("Authorization", &bearer(&token))],
        "{}",
    );
    assert_eq!(status, 401);
    let listed = env
        .cmd(&["serve", "tokens", "--all", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(listed[0]["agent_id"], "ci-bot");
    assert!(listed[0]["revoked_at"].is_i64(), "{listed}");
    assert!(
        !listed.to_string().contains(&token),
        "the token itself is stored"
    );
}

#[test]
fn over_http_a_call_waits_for_a_person_who_approves_it_through_the_admin_api() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:fs\"]\n[policy.modes.normal]\nask = [\"write_file\"]\n",
    );
    let served = Served::start(&env);
    let token = admin_token(&env);
    let waiting = env.root.path().join("waiting");
    let client = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([{
                "op": "call", "tool": "write_file",
                "arguments": {"path": "approved.txt", "content": "yes"},
                "progress": true, "signal_on_progress": waiting,
            }]),
        ),
    );
    wait_for_file(&waiting);
    let auth = bearer(&token);
    let (status, body) = request(
        &served,
        "GET",
        "/api/v1/confirmations",
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let pending: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(pending[0]["tool"], "write_file");
    assert_eq!(pending[0]["agent_id"], "mcp:tw-test-client");
    let id = pending[0]["id"].as_str().unwrap();
    assert!(
        !env.ws.join("approved.txt").exists(),
        "it ran before approval"
    );
    let (status, body) = request(
        &served,
        "POST",
        &format!("/api/v1/confirmations/{id}/approve"),
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        r#"{"note": "looks fine"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let report = client.finish();
    assert_eq!(outcome(&report["steps"][0]).2, json!("success"));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("approved.txt")).unwrap(),
        "yes"
    );
    assert!(
        report["steps"][0]["progress"][0]
            .as_str()
            .unwrap()
            .starts_with("waiting for confirmation"),
        "{report}"
    );
    // Answered twice: the second answer changes nothing.
    let (status, _) = request(
        &served,
        "POST",
        &format!("/api/v1/confirmations/{id}/deny"),
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 409);
}

#[test]
fn over_http_a_call_the_client_cancels_is_recorded_as_cancelled() {
    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n");
    let served = Served::start(&env);
    let token = admin_token(&env);
    let cancel = env.root.path().join("cancel");
    let client = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([{
                "op": "call", "tool": "exec", "arguments": {"argv": ["sleep", "30"]},
                "cancel_when": cancel,
            }]),
        ),
    );
    let running = poll_rows(&env, &["running", "--json"], 1);
    assert_eq!(running[0]["agent_id"], "mcp:tw-test-client");
    std::fs::write(&cancel, "now").unwrap();
    let report = client.finish();
    assert_eq!(report["steps"][0]["cancelled"], json!(true));
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let rows = env.audit_rows();
        if let Some(r) = rows.first() {
            assert_eq!((r.tool.as_str(), r.status.as_str()), ("exec", "cancelled"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no audit record");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_endpoint_refuses_no_token_a_forged_one_a_foreign_origin_and_a_rebound_host() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let served = Served::start(&env);
    let token = admin_token(&env);
    let auth = bearer(&token);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let mcp_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    let (status, body) = request(&served, "POST", "/mcp", &mcp_headers, init);
    assert_eq!(status, 401, "no token: {body}");
    let (status, _) = request(&served, "GET", "/api/v1/tools", &[], "");
    assert_eq!(status, 401);
    let forged = format!("Bearer tw_{}", "0".repeat(64));
    let (status, _) = request(
        &served,
        "GET",
        "/api/v1/tools",
        &[("Authorization", &forged)],
        "",
    );
    assert_eq!(status, 401);

    let (status, body) = request(
        &served,
        "GET",
        "/api/v1/tools",
        &[("Authorization", &auth), ("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(status, 403, "foreign origin: {body}");
    assert!(body.contains("origin_not_allowed"), "{body}");
    let (status, body) = request(
        &served,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Host", "evil.example"),
            mcp_headers[0],
            mcp_headers[1],
        ],
        init,
    );
    assert_eq!(status, 403, "rebound host: {body}");
    assert!(body.contains("host_not_allowed"), "{body}");

    // The same requests from the right place with the token pass.
    let mut ok_headers = vec![("Authorization", auth.as_str())];
    ok_headers.extend(mcp_headers);
    let (status, body) = request(&served, "POST", "/mcp", &ok_headers, init);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("toolwarden"), "{body}");
    let origin = served.base.clone();
    let (status, body) = request(
        &served,
        "GET",
        "/api/v1/openapi.json",
        &[("Authorization", &auth), ("Origin", &origin)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    // The refused requests ran nothing and left no audit records.
    assert!(env.audit_rows().is_empty());
}

#[test]
fn serve_refuses_a_non_loopback_address_unless_the_configuration_allows_it() {
    let env = Env::new();
    let refused = env.cmd(&["serve", "--listen", "0.0.0.0:0"]).run();
    assert_ne!(refused.code, 0);
    assert!(
        refused
            .stderr
            .contains("refusing to listen on 0.0.0.0:0: it is not a loopback address")
            && refused.stderr.contains("allow_non_loopback"),
        "{}",
        refused.stderr
    );
    let env =
        Env::new().with_config("[serve]\nallow_non_loopback = true\nlisten = \"0.0.0.0:0\"\n");
    let mut child = env.cmd(&["serve"]).spawn();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    terminate(&child);
    let status = child.wait().unwrap();
    assert!(line.starts_with("http://0.0.0.0:"), "{line}");
    assert_eq!(status.code(), Some(0));
    // A non-loopback address in the file without the switch is a configuration error, with
    // its line.
    let env = Env::new().with_config("[serve]\nlisten = \"0.0.0.0:8790\"\n");
    let bad = env.cmd(&["serve"]).run();
    assert_ne!(bad.code, 0);
    // Line 3: the test's config starts with the tier line.
    assert!(
        bad.stderr
            .contains("config.toml:3:10: serve.listen 0.0.0.0:8790 is not a loopback address"),
        "{}",
        bad.stderr
    );
}

/// Polls the running endpoint's `GET /api/v1/tools` until `has(names)` holds.
fn wait_for_tools(served: &Served, token: &str, has: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let (status, body) = request(
            served,
            "GET",
            "/api/v1/tools",
            &[("Authorization", &bearer(token))],
            "",
        );
        assert_eq!(status, 200, "{body}");
        let names: Vec<String> = serde_json::from_str::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        if has(&names) {
            return names;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the endpoint still lists {names:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_custom_tool_added_or_removed_with_the_cli_reaches_a_running_endpoint() {
    let env = Env::new().with_config("[policy]\nallow = [\"say_hi\"]\n");
    let served = Served::start(&env);
    let token = admin_token(&env);
    let file = env.root.path().join("say_hi.json");
    std::fs::write(
        &file,
        r#"{"name": "say_hi", "description": "Says hi.", "category": "system", "parameters": [], "command": {"argv": ["echo", "hi"]}}"#,
    )
    .unwrap();
    env.cmd(&["tools", "add", file.to_str().unwrap()])
        .run()
        .ok();
    wait_for_tools(&served, &token, |n| n.iter().any(|t| t == "say_hi"));
    // And an agent over MCP can call it.
    let report = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([{"op": "call", "tool": "say_hi", "arguments": {}}]),
        ),
    )
    .finish();
    assert_eq!(outcome(&report["steps"][0]).2, json!("success"), "{report}");
    env.cmd(&["tools", "remove", "say_hi"]).run().ok();
    wait_for_tools(&served, &token, |n| !n.iter().any(|t| t == "say_hi"));
}

/// The headers of an MCP POST, with `token` and (if any) `session`.
fn mcp_headers<'a>(auth: &'a str, session: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("Authorization", auth),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(id) = session {
        h.push(("Mcp-Session-Id", id));
    }
    h
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// Opens a session with a hand-written handshake and leaves it open; its id, or the refusal.
fn open_raw_session(served: &Served, token: &str) -> Result<String, (u16, String)> {
    let auth = bearer(token);
    let mut s = TcpStream::connect(served.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        served.addr(),
        INITIALIZE.len()
    );
    for (k, v) in mcp_headers(&auth, None) {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(INITIALIZE);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let id = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    });
    match (status, id) {
        (200, Some(id)) => Ok(id),
        _ => Err((status, body.to_owned())),
    }
}

#[test]
fn a_session_the_python_sdk_closes_is_gone_and_its_delete_is_not_a_failure() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let served = Served::start(&env);
    let token = admin_token(&env);
    let report = Client::start_plan(
        &env,
        &http_plan(
            &served,
            &token,
            json!([{"op": "call", "tool": "echo", "arguments": {"n": 1}}]),
        ),
    )
    .finish();
    assert_eq!(outcome(&report["steps"][0]).2, json!("success"));
    // rmcp answered the SDK's DELETE with 202, which it logs as "Session termination failed".
    assert_eq!(report["warnings"], json!([]), "{report}");
    let id = report["session_id"].as_str().unwrap();
    let auth = bearer(&token);
    let (status, body) = request(&served, "POST", "/mcp", &mcp_headers(&auth, Some(id)), LIST);
    assert_eq!(status, 404, "the closed session still answers: {body}");
    let (status, _) = request(&served, "DELETE", "/mcp", &mcp_headers(&auth, Some(id)), "");
    assert_eq!(status, 404);
}

#[test]
fn a_token_past_its_session_cap_is_refused_until_it_closes_one() {
    let env = Env::new().with_config(&format!(
        "{FS_AND_ECHO}[serve]\nmax_sessions_per_token = 2\n"
    ));
    let served = Served::start(&env);
    let token = admin_token(&env);
    let auth = bearer(&token);
    let first = open_raw_session(&served, &token).unwrap();
    let second = open_raw_session(&served, &token).unwrap();
    let (status, body) = open_raw_session(&served, &token).unwrap_err();
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("\"too_many_sessions\""), "{body}");

    // The official client hears why.
    let plan = http_plan(&served, &token, json!([{"op": "list"}]));
    let report = Client::start_plan(&env, &plan).finish();
    assert_eq!(
        report["initialize_error"]["message"],
        "the administrator's token already has 2 open MCP sessions, the most one token may have \
         ([serve] max_sessions_per_token); close one (an HTTP DELETE with its Mcp-Session-Id, \
         which MCP clients send when they close) or wait until one has had no request for 1800 s \
         ([serve] session_idle_timeout_secs)",
        "{report}"
    );
    // An agent's token has its own allowance.
    let agent = env
        .cmd(&["serve", "issue", "ci-bot"])
        .run()
        .ok()
        .stdout
        .trim()
        .to_owned();
    let report =
        Client::start_plan(&env, &http_plan(&served, &agent, json!([{"op": "list"}]))).finish();
    assert!(report["steps"][0]["tools"].is_array(), "{report}");

    // The open sessions were never touched; closing one makes room.
    for id in [&first, &second] {
        let (status, body) = request(&served, "POST", "/mcp", &mcp_headers(&auth, Some(id)), LIST);
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = request(
        &served,
        "DELETE",
        "/mcp",
        &mcp_headers(&auth, Some(&first)),
        "",
    );
    assert_eq!((status, body.as_str()), (204, ""));
    let report = Client::start_plan(&env, &plan).finish();
    assert!(report["steps"][0]["tools"].is_array(), "{report}");
    assert_eq!(report["warnings"], json!([]), "{report}");
}

/// Issue 15: every session opened and closed cost the server about 100 KB for good (each one's
/// listing watcher never stopped), and rmcp answered the DELETE with 202. The official client
/// opens and closes 2,000 sessions (after 200 to warm up) against a real `toolwarden serve`; the
/// server's resident memory after them may be at most 10% above what it was after the warm-up.
#[test]
fn serve_frees_every_session_it_closes_over_two_thousand_sessions() {
    const SESSIONS: u32 = 2000;
    let env = Env::new().with_config(FS_AND_ECHO);
    let served = Served::start(&env);
    let token = admin_token(&env);
    let out = std::process::Command::new(super::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/soak.py"))
        .args(["--url", &format!("{}/mcp", served.base), "--token", &token])
        .args(["--pid", &served.pid().to_string()])
        .args(["--sessions", &SESSIONS.to_string(), "--warmup", "200"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .current_dir(env.root.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the soak failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rss = &report["rss_kib"];
    let (warm, end) = (rss["warm"].as_f64().unwrap(), rss["end"].as_f64().unwrap());
    let figures = format!(
        "RSS {} KiB at start, {warm} KiB after 200 sessions, {end} KiB after {SESSIONS} more \
         ({:+.1}%); {} sessions/s over {} s",
        rss["start"],
        (end / warm - 1.0) * 100.0,
        report["sessions_per_s"],
        report["seconds"]
    );
    eprintln!("soak: {figures}");
    assert_eq!(report["warnings"], json!([]), "{figures}");
    assert!(
        end <= warm * 1.10,
        "memory grew with the sessions: {figures}"
    );
}

/// Issue 15, through the admin API: explaining a call under a skill that is not loaded (no skills
/// directory at all) gives the skill layer's refusal, not policy's allow alone.
#[test]
fn the_admin_api_refuses_a_skill_that_is_not_loaded() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let served = Served::start(&env);
    let auth = bearer(&admin_token(&env));
    let explain = |skill: Option<&str>| {
        let (status, body) = request(
            &served,
            "POST",
            "/api/v1/policy/explain",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            &json!({"tool": "echo", "skill": skill}).to_string(),
        );
        assert_eq!(status, 200, "{body}");
        let d: Value = serde_json::from_str(&body).unwrap();
        let skill_layer = d["trace"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["layer"] == "skill")
            .map(|v| {
                (
                    v["decision"].clone(),
                    v["code"].clone(),
                    v["reason"].clone(),
                )
            });
        (d["decision"].clone(), skill_layer)
    };
    assert_eq!(
        explain(Some("no-such-skill")),
        (
            json!("deny"),
            Some((
                json!("deny"),
                json!("skill_denied"),
                json!("no skill named \"no-such-skill\" is loaded, so it reaches no tool")
            ))
        )
    );
    assert_eq!(explain(None), (json!("allow"), None));
}
