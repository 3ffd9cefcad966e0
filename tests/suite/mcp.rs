//! `toolwarden mcp` with a real peer: the official MCP Python SDK (tests/mcp/client.py, installed
//! by scripts/setup-mcp into `$CARGO_TARGET_DIR/mcp-venv`) starts the server over stdio and runs a
//! plan of steps; these tests assert on what it saw and on the audit log. Covered: the handshake,
//! a listing of exactly what policy lets the caller call (the same entries as `tools export
//! --format mcp`), a success with structured content, refusals and invalid or unknown calls as
//! `isError` results that say why, a call that waits for a person (with progress notifications)
//! released from another process, client cancellation ending as `cancelled` in the audit log,
//! `tools/list_changed` after a mode switch, and the caller id (`mcp:<client name>` or `--agent`)
//! on every audit row.
#![allow(clippy::disallowed_methods)] // the tests spawn the Python client

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

/// How long any one wait in this module may take before the test fails.
const LIMIT: Duration = Duration::from_secs(60);

/// The name (and version) the client gives in `initialize`.
const CLIENT: &str = "tw-test-client";

/// Where scripts/setup-mcp installs the MCP peers: `$CARGO_TARGET_DIR`, or the target directory
/// this test binary was built in.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("test executable path");
            // target/<profile>/deps/all-HASH
            exe.ancestors()
                .nth(3)
                .expect("test executable lives in target/<profile>/deps")
                .to_owned()
        })
}

/// The Python of the venv scripts/setup-mcp makes (`mcp-venv` in the target directory).
pub(super) fn python() -> PathBuf {
    let python = target_dir().join("mcp-venv/bin/python");
    assert!(
        python.is_file(),
        "{} does not exist: run scripts/setup-mcp (scripts/test does) to install the MCP Python \
         SDK these tests use as their client",
        python.display()
    );
    python
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py")
}

/// The plan for tests/mcp/client.py: the server is `toolwarden [extra...] mcp` on `env`.
fn plan(env: &Env, extra: &[&str], steps: Value) -> Value {
    let mut args = vec![
        "--data-dir".to_owned(),
        env.data.display().to_string(),
        "--workspace".to_owned(),
        env.ws.display().to_string(),
    ];
    if let Some(cfg) = &env.config {
        args.extend(["--config".to_owned(), cfg.display().to_string()]);
    }
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("mcp".to_owned());
    // The server the SDK starts uses the installation's store (the SDK passes only a few
    // variables of its own environment on).
    let server_env = env
        .store_url
        .as_ref()
        .map(|url| json!({"TOOLWARDEN_STORE_URL": url}));
    json!({
        "server": {"command": super::support::binary(), "args": args, "env": server_env},
        "client": {"name": CLIENT, "version": "1.2.3"},
        "steps": steps,
    })
}

/// A running client. Killed if the test fails before it ends, so no test leaves a process behind
/// (the SDK stops the server when its client goes). Its output is read as it comes: a report
/// larger than a pipe's buffer would otherwise stop the client mid-write.
pub(super) struct Client {
    child: Option<Child>,
    stdout: Option<std::thread::JoinHandle<Vec<u8>>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

/// Reads a child's stream to its end on a thread of its own.
fn drain(stream: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut s) = stream {
            let _ = s.read_to_end(&mut out);
        }
        out
    })
}

impl Client {
    pub(super) fn start(env: &Env, extra: &[&str], steps: Value) -> Self {
        Self::start_plan(env, &plan(env, extra, steps))
    }

    fn start_plan(env: &Env, plan: &Value) -> Self {
        let file = env.root.path().join("plan.json");
        std::fs::write(&file, plan.to_string()).unwrap();
        let mut cmd = Command::new(python());
        cmd.arg(client_script())
            .arg(&file)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.root.path())
            .env("USER", "tester");
        // The toolwarden the client starts uses the installation's store.
        if let Some(url) = &env.store_url {
            cmd.env("TOOLWARDEN_STORE_URL", url);
        }
        let mut child = cmd
            .current_dir(env.root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the MCP client");
        let stdout = Some(drain(child.stdout.take()));
        let stderr = Some(drain(child.stderr.take()));
        Self {
            child: Some(child),
            stdout,
            stderr,
        }
    }

    /// What the client wrote to a stream, once it has ended.
    fn collected(handle: Option<std::thread::JoinHandle<Vec<u8>>>) -> Vec<u8> {
        handle
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Waits for the client to end and returns its report; fails on a non-zero exit.
    pub(super) fn finish(mut self) -> Value {
        let mut child = self.child.take().expect("finished once");
        let deadline = Instant::now() + LIMIT;
        while child.try_wait().expect("wait for the client").is_none() {
            if Instant::now() > deadline {
                child.kill().expect("kill the client");
                child.wait().expect("reap the client");
                panic!(
                    "the MCP client did not end within {LIMIT:?}; stderr:\n{}",
                    String::from_utf8_lossy(&Self::collected(self.stderr.take()))
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child.wait().expect("reap the client");
        let stdout = Self::collected(self.stdout.take());
        let stderr = Self::collected(self.stderr.take());
        let stderr = String::from_utf8_lossy(&stderr);
        assert!(
            status.success(),
            "the MCP client failed ({status}); stderr:\n{stderr}"
        );
        serde_json::from_slice(&stdout).unwrap_or_else(|e| {
            panic!(
                "the client's report is not JSON ({e}):\n{}\nstderr:\n{stderr}",
                String::from_utf8_lossy(&stdout)
            )
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a whole plan and returns the client's report.
pub(super) fn run(env: &Env, extra: &[&str], steps: Value) -> Value {
    Client::start(env, extra, steps).finish()
}

/// Waits until `path` exists (a step of the client wrote it).
pub(super) fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + LIMIT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} was not written within {LIMIT:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `toolwarden COMMAND --json` until its array has `n` rows.
pub(super) fn poll_rows(env: &Env, command: &[&str], n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let rows = env.cmd(command).run().ok().json();
        let rows = rows.as_array().unwrap().clone();
        if rows.len() == n {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} row(s) from {command:?}, have {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn names(listing: &Value) -> Vec<&str> {
    listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// A `tools/call` result's text, `isError` and `_meta` status, compared as one.
fn outcome(step: &Value) -> (Value, Value, Value) {
    let r = &step["result"];
    (
        r["content"].clone(),
        r["isError"].clone(),
        r["_meta"]["toolwarden/status"].clone(),
    )
}

fn text(s: &str) -> Value {
    json!([{"type": "text", "text": s}])
}

/// `[policy]` replaces the built-in policy: the file tools and echo, except delete_file.
const FS_AND_ECHO: &str = r#"[policy]
allow = ["group:fs", "echo"]
deny = ["delete_file"]
"#;

#[test]
fn a_session_lists_what_policy_allows_and_relays_every_outcome_as_a_result() {
    let env = Env::new().with_config(FS_AND_ECHO);
    env.write("notes.txt", "hello\n");
    let report = run(
        &env,
        &[],
        json!([
            {"op": "list"},
            {"op": "call", "tool": "read_file", "arguments": {"path": "notes.txt"}},
            {"op": "call", "tool": "delete_file", "arguments": {"path": "notes.txt"}},
            {"op": "call", "tool": "read_file", "arguments": {"path": 3}},
            {"op": "call", "tool": "no_such_tool", "arguments": {}},
        ]),
    );

    let init = &report["initialize"];
    assert_eq!(
        (
            &init["serverInfo"]["name"],
            &init["serverInfo"]["version"],
            &init["capabilities"]["tools"]
        ),
        (
            &json!("toolwarden"),
            &json!(env!("CARGO_PKG_VERSION")),
            &json!({"listChanged": true})
        )
    );

    // Exactly the callable tools (delete_file is denied, exec and the rest are not allowed),
    // each entry the same as `tools export --format mcp` gives.
    let listing = &report["steps"][0];
    assert_eq!(
        names(listing),
        [
            "echo",
            "file_search",
            "list_directory",
            "read_file",
            "write_file"
        ]
    );
    let exported = env
        .cmd(&["tools", "export", "--format", "mcp"])
        .run()
        .ok()
        .json();
    assert_eq!(listing["tools"], exported["tools"]);
    let annotations = |name: &str| {
        listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["annotations"].clone())
    };
    assert_eq!(
        (annotations("read_file"), annotations("write_file")),
        (
            Some(json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})),
            Some(json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}))
        )
    );

    // Success: the output as JSON text, and as structured content (read_file has an output
    // schema).
    let read = &report["steps"][1]["result"];
    let output = json!({
        "path": "notes.txt", "content": "hello\n", "size": 6, "start_line": 1, "end_line": 1,
        "total_lines": 1, "truncated": false
    });
    assert_eq!(
        outcome(&report["steps"][1]),
        (text(&output.to_string()), json!(false), json!("success"))
    );
    assert_eq!(read["structuredContent"], output);

    // A denied tool called by name anyway, invalid arguments and an unknown tool: results with
    // isError and the reason, not protocol errors.
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
    assert_eq!(
        outcome(&report["steps"][3]),
        (
            text(
                "validation_error: invalid_arguments: arguments do not match the schema (1 violation): at /path: 3 is not of type \"string\""
            ),
            json!(true),
            json!("validation_error")
        )
    );
    assert_eq!(
        outcome(&report["steps"][4]),
        (
            text("not_found: tool_not_found: no tool named \"no_such_tool\" is registered"),
            json!(true),
            json!("not_found")
        )
    );
    assert!(env.ws.join("notes.txt").exists(), "the denied call ran");

    // One audit record per call, as the client, in one trace (the session).
    let rows = env.audit_rows();
    let ids: Vec<Value> = (1..=4)
        .map(|i| report["steps"][i]["result"]["_meta"]["toolwarden/executionId"].clone())
        .collect();
    assert_eq!(
        rows.iter()
            .map(|r| (
                json!(r.execution_id.to_string()),
                r.tool.as_str(),
                r.status.as_str(),
                r.agent_id.as_str()
            ))
            .collect::<Vec<_>>(),
        vec![
            (ids[0].clone(), "read_file", "success", "mcp:tw-test-client"),
            (
                ids[1].clone(),
                "delete_file",
                "permission_denied",
                "mcp:tw-test-client"
            ),
            (
                ids[2].clone(),
                "read_file",
                "validation_error",
                "mcp:tw-test-client"
            ),
            (
                ids[3].clone(),
                "no_such_tool",
                "not_found",
                "mcp:tw-test-client"
            ),
        ]
    );
    let traces: Vec<String> = rows.iter().map(|r| r.trace_id.to_string()).collect();
    assert_eq!(traces, vec![traces[0].clone(); 4]);
}

#[test]
fn a_configured_agent_id_replaces_the_client_name() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let report = run(
        &env,
        &["--agent", "ci-bot"],
        json!([{"op": "call", "tool": "echo", "arguments": {"n": 1}}]),
    );
    assert_eq!(
        outcome(&report["steps"][0]),
        (text("{\"n\":1}"), json!(false), json!("success"))
    );
    let agents: Vec<String> = env.audit_rows().into_iter().map(|r| r.agent_id).collect();
    assert_eq!(agents, ["ci-bot"]);
}

#[test]
fn a_call_waiting_for_a_person_reports_progress_and_is_released_by_an_approval() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:fs\"]\n[policy.modes.normal]\nask = [\"write_file\"]\n",
    );
    let waiting = env.root.path().join("waiting");
    let client = Client::start(
        &env,
        &[],
        json!([{
            "op": "call", "tool": "write_file",
            "arguments": {"path": "approved.txt", "content": "yes"},
            "progress": true, "signal_on_progress": waiting,
        }]),
    );
    // The client heard that the call waits; the request is pending, for the MCP caller.
    wait_for_file(&waiting);
    let rows = poll_rows(&env, &["confirm", "list", "--json"], 1);
    let id = rows[0]["id"].as_str().unwrap().to_owned();
    let reason = "in normal mode write_file needs a person's approval (rule \"write_file\")";
    assert_eq!(
        (&rows[0]["tool"], &rows[0]["agent_id"], &rows[0]["reason"]),
        (
            &json!("write_file"),
            &json!("mcp:tw-test-client"),
            &json!(reason)
        )
    );
    assert!(
        !env.ws.join("approved.txt").exists(),
        "it ran before approval"
    );

    let answer = env.cmd(&["confirm", "approve", &id]).run().ok();
    assert_eq!(
        answer.stdout,
        format!("approved {id} (write_file for mcp:tw-test-client)\n")
    );
    let report = client.finish();
    let step = &report["steps"][0];
    assert_eq!(
        outcome(step),
        (
            text(r#"{"path":"approved.txt","bytes_written":3,"created":true}"#),
            json!(false),
            json!("success")
        )
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("approved.txt")).unwrap(),
        "yes"
    );
    let progress = step["progress"].as_array().unwrap();
    assert_eq!(
        progress[0],
        json!(format!(
            "waiting for confirmation ({reason}); approve: toolwarden confirm approve {id}"
        ))
    );
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (r.status.as_str(), r.agent_id.as_str()))
            .collect::<Vec<_>>(),
        [("success", "mcp:tw-test-client")]
    );
}

#[test]
fn a_call_the_client_cancels_is_stopped_and_recorded_as_cancelled() {
    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n");
    let cancel = env.root.path().join("cancel");
    let client = Client::start(
        &env,
        &[],
        json!([{
            "op": "call", "tool": "exec", "arguments": {"argv": ["sleep", "30"]},
            "cancel_when": cancel,
        }]),
    );
    // The server publishes its calls like `call` does: the call is seen running, as the client.
    let running = poll_rows(&env, &["running", "--json"], 1);
    assert_eq!(
        (&running[0]["tool"], &running[0]["agent_id"]),
        (&json!("exec"), &json!("mcp:tw-test-client"))
    );
    let id = running[0]["execution_id"].as_str().unwrap().to_owned();
    std::fs::write(&cancel, "now").unwrap();
    let report = client.finish();
    assert_eq!(report["steps"][0]["cancelled"], json!(true));

    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (
                r.execution_id.to_string(),
                r.status.as_str(),
                r.agent_id.as_str()
            ))
            .collect::<Vec<_>>(),
        [(id, "cancelled", "mcp:tw-test-client")]
    );
}

#[test]
fn the_client_is_told_when_a_mode_switch_changes_its_listing() {
    let env = Env::new().with_config("[policy]\nallow = [\"group:fs\"]\n");
    let ready = env.root.path().join("ready");
    let client = Client::start(
        &env,
        &[],
        json!([
            {"op": "list"},
            {"op": "signal", "path": ready},
            {"op": "wait_list_changed"},
            {"op": "list"},
        ]),
    );
    wait_for_file(&ready);
    // Lockdown forbids side effects, in every process on the data directory.
    env.cmd(&["mode", "set", "lockdown"]).run().ok();
    let report = client.finish();
    assert_eq!(
        names(&report["steps"][0]),
        [
            "delete_file",
            "file_search",
            "list_directory",
            "read_file",
            "write_file"
        ]
    );
    assert_eq!(report["steps"][2], json!({"list_changed": true}));
    assert_eq!(
        names(&report["steps"][3]),
        ["file_search", "list_directory", "read_file"]
    );
}

mod http;
mod seed;
mod team;
mod upstream;

/// Issue 15, through the MCP door: a session started under a skill that is not loaded (here no
/// skills directory at all) lists no tool and is refused every call, with the reason; before,
/// the skill name was a label and policy alone decided.
#[test]
fn a_session_under_a_skill_that_is_not_loaded_reaches_nothing() {
    let env = Env::new().with_config(FS_AND_ECHO);
    let report = run(
        &env,
        &["--skill", "no-such-skill"],
        json!([
            {"op": "list"},
            {"op": "call", "tool": "echo", "arguments": {}},
        ]),
    );
    assert_eq!(names(&report["steps"][0]), Vec::<&str>::new());
    assert_eq!(
        outcome(&report["steps"][1]),
        (
            text(
                "permission_denied: skill_denied: no skill named \"no-such-skill\" is loaded, so it reaches no tool"
            ),
            json!(true),
            json!("permission_denied")
        )
    );
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| (r.tool.as_str(), r.status.as_str(), r.skill.as_deref()))
            .collect::<Vec<_>>(),
        [("echo", "permission_denied", Some("no-such-skill"))]
    );
}
