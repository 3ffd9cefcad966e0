//! A reader that stops reading ends a command quietly, as it ends a Unix tool (issue 15): every
//! command that prints runs once with its stdout already closed and once piped into `head -c 1`,
//! and none may panic, print a backtrace, complain about the pipe or report an error. With stdout
//! closed from the start each exits 141 (128 + SIGPIPE, what a shell reports for `cat` or `git`
//! ended by a closed pipe); into `head`, where the command may have written everything before
//! `head` left, 0 or 141.
//!
//! The commands come from one table, [`PRINTING`]; a test reads `--help` and fails on a
//! subcommand the table does not run, so a new command cannot be forgotten. Calls in flight when
//! the reader goes are cancelled as on Ctrl-C and keep their audit records: a call, a batch, and
//! an MCP session whose client stops reading while keeping stdin open.
#![allow(clippy::disallowed_methods)] // the tests spawn `head` and read the binary's help

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Env, TestCommand, binary, on_team_store};

/// How long one command may take before the test fails (a strict self-test included).
const LIMIT: Duration = Duration::from_secs(60);

/// The exit status of a command whose stdout's reader went away.
const EXIT_CLOSED: i32 = 141;

/// What a command reads, or how it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Prints and ends.
    Prints,
    /// `toolwarden mcp`: an MCP client's first requests on stdin, then end of input.
    McpSession,
    /// Prints its first line and serves until stopped: with stdout closed it must stop at once;
    /// into `head` it would (rightly) go on serving, so that run is skipped.
    Server,
}

/// Every command that writes to stdout, with each `--json`/`--format` variant. `{exec}`,
/// `{grant}`, `{c1}`, `{c2}`, `{running}`, `{chainrun}`, `{root}`, `{data}` and `{team}` (a fresh
/// PostgreSQL database) come from [`setup`]; rows that change
/// something run in this order (add before remove).
const PRINTING: &[(&[&str], Shape)] = &[
    (&["--help"], Shape::Prints),
    (&["--version"], Shape::Prints),
    (&["config"], Shape::Prints),
    (&["tools", "list"], Shape::Prints),
    (&["tools", "list", "--json"], Shape::Prints),
    (&["tools", "show", "echo"], Shape::Prints),
    (&["tools", "show", "echo", "--json"], Shape::Prints),
    (&["tools", "export", "--format", "mcp"], Shape::Prints),
    (
        &["tools", "export", "--format", "openai", "--all"],
        Shape::Prints,
    ),
    (&["tools", "export", "--format", "anthropic"], Shape::Prints),
    (&["tools", "add", "{root}/words.toml"], Shape::Prints),
    (&["tools", "remove", "count_words"], Shape::Prints),
    (
        &["tools", "disable", "echo", "--tier", "core"],
        Shape::Prints,
    ),
    (
        &["tools", "enable", "echo", "--tier", "core"],
        Shape::Prints,
    ),
    (
        &["call", "echo", "--args", r#"{"say": "hi"}"#],
        Shape::Prints,
    ),
    (&["batch", "{root}/calls.jsonl"], Shape::Prints),
    (
        &["batch", "{root}/calls.jsonl", "--parallel", "2"],
        Shape::Prints,
    ),
    (&["audit", "list"], Shape::Prints),
    (&["audit", "list", "--json"], Shape::Prints),
    (&["audit", "show", "{exec}"], Shape::Prints),
    (&["audit", "export"], Shape::Prints),
    (&["audit", "export", "--format", "csv"], Shape::Prints),
    (&["audit", "report"], Shape::Prints),
    (&["audit", "report", "--json"], Shape::Prints),
    (&["audit", "changes"], Shape::Prints),
    (&["audit", "changes", "--json"], Shape::Prints),
    (&["audit", "verify"], Shape::Prints),
    (&["audit", "verify", "--json"], Shape::Prints),
    (&["audit", "checkpoint"], Shape::Prints),
    (&["store", "doctor"], Shape::Prints),
    (&["store", "doctor", "--json"], Shape::Prints),
    (&["policy", "show"], Shape::Prints),
    (&["policy", "explain", "--tool", "echo"], Shape::Prints),
    (
        &["policy", "explain", "--tool", "echo", "--json"],
        Shape::Prints,
    ),
    (&["policy", "check"], Shape::Prints),
    (
        &["policy", "simulate", "{root}/proposed.toml"],
        Shape::Prints,
    ),
    (
        &["policy", "simulate", "{root}/proposed.toml", "--json"],
        Shape::Prints,
    ),
    (&["confirm", "list"], Shape::Prints),
    (&["confirm", "list", "--json"], Shape::Prints),
    (&["confirm", "approve", "{c1}"], Shape::Prints),
    (&["confirm", "deny", "{c2}"], Shape::Prints),
    (&["grants", "list"], Shape::Prints),
    (&["grants", "list", "--json"], Shape::Prints),
    (&["grants", "add", "echo", "--for", "1h"], Shape::Prints),
    (&["grants", "revoke", "{grant}"], Shape::Prints),
    (&["mode"], Shape::Prints),
    (&["mode", "show"], Shape::Prints),
    (&["mode", "set", "normal"], Shape::Prints),
    (&["sandbox", "doctor"], Shape::Prints),
    (&["sandbox", "doctor", "--json"], Shape::Prints),
    (&["skills", "list"], Shape::Prints),
    (&["skills", "list", "--json"], Shape::Prints),
    (&["skills", "show", "reader"], Shape::Prints),
    (&["skills", "show", "reader", "--json"], Shape::Prints),
    (&["skills", "check"], Shape::Prints),
    (&["skills", "report", "reader"], Shape::Prints),
    (&["skills", "report", "reader", "--json"], Shape::Prints),
    (&["skills", "resolved", "reader"], Shape::Prints),
    (&["skills", "resolved", "reader", "--json"], Shape::Prints),
    (
        &["skills", "override", "reader", "add", "echo"],
        Shape::Prints,
    ),
    (
        &["skills", "override", "reader", "remove", "read_file"],
        Shape::Prints,
    ),
    (
        &["skills", "override", "reader", "clear", "echo"],
        Shape::Prints,
    ),
    (&["skills", "overrides"], Shape::Prints),
    (&["skills", "overrides", "--json"], Shape::Prints),
    (&["skills", "capabilities"], Shape::Prints),
    (&["skills", "capabilities", "--json"], Shape::Prints),
    (
        &["skills", "classify", "echo", "--set", "web_read"],
        Shape::Prints,
    ),
    (&["skills", "classify", "echo", "--clear"], Shape::Prints),
    (&["skills", "classify", "echo", "--again"], Shape::Prints),
    (&["skills", "metrics"], Shape::Prints),
    (&["skills", "metrics", "--json"], Shape::Prints),
    (&["skills", "text", "reader"], Shape::Prints),
    (
        &["skills", "save", "writer", "{root}/writer.md"],
        Shape::Prints,
    ),
    (&["chains", "list"], Shape::Prints),
    (&["chains", "list", "--json"], Shape::Prints),
    (&["chains", "show", "echoes"], Shape::Prints),
    (&["chains", "show", "echoes", "--json"], Shape::Prints),
    (&["chains", "check"], Shape::Prints),
    (&["chains", "check", "{root}/other.yaml"], Shape::Prints),
    (&["chains", "run", "echoes"], Shape::Prints),
    (&["chains", "runs"], Shape::Prints),
    (&["chains", "runs", "--json"], Shape::Prints),
    (&["chains", "runs", "{chainrun}"], Shape::Prints),
    (&["chains", "save", "{root}/other.yaml"], Shape::Prints),
    // Planning needs a language model; its printing goes through the same `out` as `show`'s.
    (&["chains", "plan", "--help"], Shape::Prints),
    (&["running"], Shape::Prints),
    (&["running", "--json"], Shape::Prints),
    (&["cancel", "{running}"], Shape::Prints),
    (&["mcp"], Shape::McpSession),
    (&["mcp", "review"], Shape::Prints),
    (&["mcp", "review", "--json"], Shape::Prints),
    (&["mcp", "servers"], Shape::Prints),
    (&["mcp", "servers", "--json"], Shape::Prints),
    (&["serve", "--listen", "127.0.0.1:0"], Shape::Server),
    (&["serve", "token"], Shape::Prints),
    (&["serve", "issue", "bot"], Shape::Prints),
    (&["serve", "revoke", "bot"], Shape::Prints),
    (&["serve", "tokens"], Shape::Prints),
    (&["serve", "tokens", "--json"], Shape::Prints),
    // Into a fresh team store: the log is whole until the archive below.
    (
        &[
            "store",
            "migrate",
            "--from",
            "sqlite:{data}/toolwarden.db",
            "--to",
            "{team}",
        ],
        Shape::Prints,
    ),
    // Last: it takes every record out of the log.
    (
        &[
            "audit",
            "archive",
            "--before",
            "0s",
            "-o",
            "{root}/old.jsonl",
        ],
        Shape::Prints,
    ),
];

/// The rows that work on the data directory's SQLite file only, skipped when the suite runs
/// against a team store: a migration reads that file, and archiving is not on the team store
/// yet (it says so). `the_table_runs_every_subcommand` still sees them.
const SQLITE_ONLY: &[&str] = &["migrate", "archive"];

/// The table's rows this run runs.
fn table_rows() -> impl Iterator<Item = &'static (&'static [&'static str], Shape)> {
    PRINTING
        .iter()
        .filter(|(row, _)| !(on_team_store() && row.len() > 1 && SQLITE_ONLY.contains(&row[1])))
}

/// Policy under which `echo` runs without a person and `write_file` waits for one: a call in
/// flight here is one waiting for a person, which needs no sandbox (so these tests hold for an
/// unprivileged user on any host).
const CONFIG: &str = r#"[policy]
allow = ["group:fs", "group:system", "group:chains"]
[policy.modes.normal]
ask = ["write_file"]
"#;

/// The first requests of an MCP client, one JSON-RPC message a line.
fn mcp_requests() -> String {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipes", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect()
}

/// Background `toolwarden` processes of one setup: killed if a test fails first.
struct Background(Vec<Child>);

impl Drop for Background {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls `cmd --json` until it lists `n` rows.
fn rows(env: &Env, cmd: &[&str], n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let listed = env.cmd(cmd).run().ok().json();
        let listed = listed.as_array().unwrap().clone();
        if listed.len() == n {
            return listed;
        }
        assert!(Instant::now() < deadline, "{cmd:?}: {listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An installation where every row of [`PRINTING`] has something to print: an audited call, a
/// grant, three calls waiting for a person (two to answer, one to cancel), a skill, and the
/// files rows name.
fn setup() -> (Env, BTreeMap<&'static str, String>, Background) {
    let env = Env::new().with_config(CONFIG);
    env.write(
        "skills/reader/SKILL.md",
        "---\nname: reader\ndescription: Reads files.\ntools: [read_file, echo]\n---\n",
    );
    let root = env.root.path();
    std::fs::write(
        root.join("words.toml"),
        "[[tools]]\nname = \"count_words\"\ndescription = \"Count words.\"\n\
         category = \"file_system\"\nparameters = [{ name = \"path\", type = \"string\", \
         required = true }]\n[tools.command]\nargv = [\"wc\", \"-w\", \"{path}\"]\n",
    )
    .unwrap();
    std::fs::write(root.join("proposed.toml"), "allow = [\"echo\"]\n").unwrap();
    env.write(
        "chains/echoes.yaml",
        "name: echoes\nsteps:\n  - {id: a, tool: echo, arguments: {n: 1}}\n",
    );
    std::fs::write(
        root.join("other.yaml"),
        "name: other\nsteps:\n  - {id: a, tool: echo, arguments: {n: 2}}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("calls.jsonl"),
        "{\"tool\": \"echo\", \"arguments\": {\"n\": 1}}\n{\"tool\": \"echo\", \"arguments\": {\"n\": 2}}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("writer.md"),
        "---\nname: writer\ndescription: Writes.\ntools: [write_file]\n---\n",
    )
    .unwrap();

    let mut fill = BTreeMap::new();
    fill.insert("root", root.display().to_string());
    fill.insert("data", env.data.display().to_string());
    let team = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(tw_store::testing::PgCluster::shared().fresh_database());
    fill.insert("team", team);
    let call = env.call("echo", json!({"n": 0})).ok();
    fill.insert(
        "exec",
        call.json()["execution_id"].as_str().unwrap().to_owned(),
    );
    let ran = env.cmd(&["chains", "run", "echoes"]).run().ok();
    fill.insert(
        "chainrun",
        ran.json()["execution_id"].as_str().unwrap().to_owned(),
    );
    let granted = env
        .cmd(&["grants", "add", "echo", "--for", "1h"])
        .run()
        .ok();
    let grant = granted.stdout.split_whitespace().nth(1).unwrap().to_owned();
    fill.insert("grant", grant);

    let mut background = Background(Vec::new());
    for n in 0..3 {
        background
            .0
            .push(wait_for_a_person(&env, &format!("w{n}.txt")));
    }
    let pending = rows(&env, &["confirm", "list", "--json"], 3);
    fill.insert("c1", pending[0]["id"].as_str().unwrap().to_owned());
    fill.insert("c2", pending[1]["id"].as_str().unwrap().to_owned());
    // Still in flight when `cancel` runs: the rows before it answer the other two.
    fill.insert(
        "running",
        pending[2]["execution_id"].as_str().unwrap().to_owned(),
    );
    (env, fill, background)
}

/// A `toolwarden call write_file` that waits for a person, with its stdout kept open.
fn wait_for_a_person(env: &Env, path: &str) -> Child {
    let args = json!({"path": path, "content": "x"}).to_string();
    env.cmd(&["call", "write_file", "--args", &args]).spawn()
}

fn args(row: &[&str], fill: &BTreeMap<&str, String>) -> Vec<String> {
    row.iter()
        .map(|a| {
            fill.iter().fold((*a).to_owned(), |a, (k, v)| {
                a.replace(&format!("{{{k}}}"), v)
            })
        })
        .collect()
}

/// Waits for `child` at most [`LIMIT`]; kills it and fails if it is still running then.
fn wait(mut child: Child, what: &str) -> (i32, String) {
    let deadline = Instant::now() + LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still ran after {LIMIT:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A stdout whose reader is already gone: the command's first write fails with EPIPE.
fn closed_stdout() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

/// Starts `toolwarden ARGS` with `stdout`, feeding the MCP requests to an MCP session.
fn start(env: &Env, args: &[String], shape: Shape, stdout: Stdio) -> Child {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let TestCommand { mut cmd } = env.cmd(&refs);
    let stdin = if shape == Shape::McpSession {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut stdin) = child.stdin.take() {
        // It may have ended already (its stdout is closed): a failed write is expected then.
        let _ = stdin.write_all(mcp_requests().as_bytes());
    }
    child
}

/// The lines of `stderr` that are not quiet: a panic, a backtrace, a complaint about the pipe,
/// or an error the command reports. (What the host says about itself, such as a sandbox level
/// it cannot build, is not about the pipe and may be there.)
fn noise(stderr: &str) -> Vec<&str> {
    const NOISE: [&str; 6] = [
        "panicked",
        "backtrace",
        "Broken pipe",
        "broken pipe",
        "os error 32",
        "error: ",
    ];
    stderr
        .lines()
        .filter(|l| NOISE.iter().any(|n| l.contains(n)))
        .collect()
}

#[test]
fn every_printing_command_ends_quietly_when_its_stdout_is_closed() {
    let (env, fill, _background) = setup();
    let mut got = Vec::new();
    let mut expected = Vec::new();
    for (row, shape) in table_rows() {
        let args = args(row, &fill);
        let shown = args.join(" ");
        let (code, stderr) = wait(start(&env, &args, *shape, closed_stdout()), &shown);
        got.push((shown.clone(), code, noise(&stderr).join("\n")));
        expected.push((shown, EXIT_CLOSED, String::new()));
    }
    assert_eq!(got, expected);
}

#[test]
fn every_printing_command_piped_into_head_ends_quietly() {
    let (env, fill, _background) = setup();
    let mut got = Vec::new();
    let mut expected = Vec::new();
    for (row, shape) in table_rows() {
        if *shape == Shape::Server {
            continue;
        }
        let args = args(row, &fill);
        let shown = args.join(" ");
        let mut child = start(&env, &args, *shape, Stdio::piped());
        let head = std::process::Command::new("head")
            .args(["-c", "1"])
            .stdin(Stdio::from(child.stdout.take().unwrap()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let head = head.wait_with_output().unwrap();
        let (code, stderr) = wait(child, &shown);
        // Whether the command wrote everything before `head` left is a race: 0 if it did.
        let code = if code == 0 { EXIT_CLOSED } else { code };
        got.push((
            shown.clone(),
            head.stdout.len(),
            code,
            noise(&stderr).join("\n"),
        ));
        expected.push((shown, 1, EXIT_CLOSED, String::new()));
    }
    assert_eq!(got, expected);
}

/// The subcommands `toolwarden PATH --help` lists, and whether PATH runs without one.
fn subcommands(path: &[String]) -> (Vec<String>, bool) {
    let out = std::process::Command::new(binary())
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?} --help");
    let help = String::from_utf8(out.stdout).unwrap();
    let optional = help
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .is_some_and(|l| !l.contains("<COMMAND>"));
    let names = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect();
    (names, optional)
}

#[test]
fn the_table_runs_every_subcommand() {
    // Every command path (`skills override add`), from the binary's own help.
    let mut children: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    let mut runnable: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let (names, optional) = subcommands(&path);
        if names.is_empty() || optional {
            runnable.insert(path.clone());
        }
        for n in &names {
            let mut p = path.clone();
            p.push(n.clone());
            todo.push(p);
        }
        children.insert(path, names);
    }
    // The command path each row runs: its words that name a subcommand where they stand.
    let ran: BTreeSet<Vec<String>> = PRINTING
        .iter()
        .map(|(row, _)| {
            let mut path = Vec::new();
            for word in *row {
                if children
                    .get(&path)
                    .is_some_and(|c| c.iter().any(|n| n == word))
                {
                    path.push((*word).to_owned());
                }
            }
            path
        })
        .collect();
    let missing: Vec<String> = runnable.difference(&ran).map(|p| p.join(" ")).collect();
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "add these commands to PRINTING (every command that prints is run with its stdout closed)"
    );
    assert!(runnable.len() > 50, "{runnable:?}");
}

/// Audit rows as (tool, status).
fn audited(env: &Env) -> Vec<(String, String)> {
    env.audit_rows()
        .into_iter()
        .map(|r| (r.tool, r.status.as_str().to_owned()))
        .collect()
}

#[test]
fn a_call_whose_reader_goes_away_is_cancelled_at_once_and_recorded() {
    let env = Env::new().with_config(CONFIG);
    let mut child = wait_for_a_person(&env, "out.txt");
    let stdout = child.stdout.take().unwrap();
    rows(&env, &["running", "--json"], 1);
    let started = Instant::now();
    drop(stdout);
    let (code, stderr) = wait(child, "call");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call waited on after its reader left"
    );
    assert_eq!((code, noise(&stderr)), (EXIT_CLOSED, vec![]), "{stderr}");
    assert_eq!(
        audited(&env),
        [("write_file".to_owned(), "cancelled".to_owned())]
    );
    assert!(!env.ws.join("out.txt").exists());
}

#[test]
fn a_batch_whose_reader_goes_away_stops_as_on_ctrl_c_and_records_every_call() {
    let env = Env::new().with_config(CONFIG);
    let file = env.root.path().join("calls.jsonl");
    let calls = [
        json!({"tool": "echo", "arguments": {"n": 1}}),
        json!({"tool": "write_file", "arguments": {"path": "out.txt", "content": "x"}}),
        json!({"tool": "echo", "arguments": {"n": 3}}),
    ];
    std::fs::write(
        &file,
        calls.iter().map(|c| format!("{c}\n")).collect::<String>(),
    )
    .unwrap();
    let started = Instant::now();
    let child = start(
        &env,
        &[
            "batch".into(),
            file.display().to_string(),
            "--parallel".into(),
            "2".into(),
        ],
        Shape::Prints,
        closed_stdout(),
    );
    let (code, stderr) = wait(child, "batch");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the batch ran on after its reader left"
    );
    assert_eq!((code, noise(&stderr)), (EXIT_CLOSED, vec![]), "{stderr}");
    // One record per call: none that started was lost, and the rest never ran.
    let mut statuses = audited(&env);
    statuses.sort();
    assert_eq!(statuses.len(), 3, "{statuses:?}");
    assert!(
        statuses.contains(&("write_file".to_owned(), "cancelled".to_owned())),
        "{statuses:?}"
    );
    assert!(!env.ws.join("out.txt").exists());
}

#[test]
fn an_mcp_session_whose_client_stops_reading_ends_and_records_the_call_in_flight() {
    let env = Env::new().with_config(CONFIG);
    let TestCommand { mut cmd } = env.cmd(&["mcp"]);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}});
    let mut requests = mcp_requests();
    requests.push_str(&format!("{call}\n"));
    stdin.write_all(requests.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("\"id\":1"), "{first}");
    rows(&env, &["running", "--json"], 1);
    // The client stops reading but keeps our stdin open: the closed stdout alone ends it.
    let started = Instant::now();
    drop(stdout);
    let (code, stderr) = wait(child, "mcp");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the session ran on after its client stopped reading"
    );
    assert_eq!((code, noise(&stderr)), (EXIT_CLOSED, vec![]), "{stderr}");
    assert_eq!(
        audited(&env),
        [("write_file".to_owned(), "cancelled".to_owned())]
    );
    assert!(!env.ws.join("out.txt").exists());
    drop(stdin);
}
