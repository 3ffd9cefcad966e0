//! The process-running built-ins through the whole pipeline, with real sandboxed processes: what
//! `exec`, `python_exec`, `run_tests` and `run_linter` return, what the audit record says about
//! the sandbox (id, level, CPU, memory), the argument checks that stop a call before anything
//! runs, and policy raising a tool's isolation and hiding forbidden paths from its processes.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tw_core::{Caller, ToolResult, ToolStatus};

use super::*;
use crate::EventKind;
use crate::events::Received;

struct Fixture {
    dir: tempfile::TempDir,
    rt: Runtime,
}

impl Fixture {
    /// A runtime whose policy lets every command through (the exec layer is tested elsewhere),
    /// plus `extra` configuration.
    async fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let text = format!(
            "[policy]\ndefault = \"deny\"\nallow = [\"group:exec\", \"group:fs\"]\n\
             [policy.exec]\nsecurity = \"full\"\n{extra}"
        );
        let config = Config::parse(&text, Path::new("/etc/tw/config.toml"), None).unwrap();
        let rt = Runtime::open(RuntimeOptions::new(
            dir.path().join("data"),
            vec![ws],
            config,
        ))
        .await
        .unwrap();
        Self { dir, rt }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.rt
            .execute(self.rt.call(tool, args, Caller::agent("t")))
            .await
    }

    /// The execution facts in the call's audit record.
    async fn facts(&self, r: &ToolResult) -> Value {
        let row = self
            .rt
            .store()
            .get(r.execution_id.as_str())
            .await
            .unwrap()
            .unwrap();
        row.metadata
    }
}

fn output(r: &ToolResult) -> &Value {
    r.output.as_ref().unwrap_or(&Value::Null)
}

#[tokio::test]
async fn exec_runs_argv_and_shell_lines_in_a_strict_sandbox_and_records_it() {
    let f = Fixture::new("").await;
    let r = f
        .call(
            "exec",
            json!({"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]}),
        )
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(
        output(&r),
        &json!({"exit_code": 3, "signal": null, "stdout": "out\n", "stderr": "err\n",
                "stdout_truncated": false, "stderr_truncated": false})
    );
    let facts = f.facts(&r).await;
    assert_eq!(facts["isolation"], "strict");
    assert!(
        facts["sandbox_id"].as_str().unwrap().starts_with("strict-"),
        "{facts}"
    );
    assert!(facts["cpu_time_us"].as_u64().is_some(), "{facts}");
    assert!(facts["peak_memory_bytes"].as_u64().unwrap() > 0, "{facts}");
    assert_eq!(facts["exit_code"], 3);

    // The shell form, with stdin, an allowed variable and a working directory.
    std::fs::create_dir(f.ws().join("sub")).unwrap();
    let r = f
        .call(
            "exec",
            json!({"command": "cat; echo \" $TZ $(basename $PWD)\"", "stdin": "piped",
                   "env": {"TZ": "UTC"}, "cwd": "sub"}),
        )
        .await;
    assert_eq!(output(&r)["stdout"], "piped UTC sub\n", "{r:?}");

    // What a strict tool writes lands in the workspace; the network is not there.
    let r = f
        .call(
            "exec",
            json!({"command": "echo made > made.txt; cat /etc/shadow; \
                               python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 1)'"}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(f.ws().join("made.txt")).unwrap(),
        "made\n"
    );
    let stderr = output(&r)["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("/etc/shadow: Permission denied"),
        "{stderr}"
    );
    assert!(stderr.contains("Network is unreachable"), "{stderr}");
}

#[tokio::test]
async fn exec_arguments_are_checked_before_anything_runs() {
    let f = Fixture::new("[commands]\nenv_allow = [\"MY_*\"]\n").await;
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.ws().join("link")).unwrap();
    let cases = [
        (
            json!({"argv": ["true"], "env": {"LD_PRELOAD": "/tmp/x.so"}}),
            ToolStatus::ValidationError,
            "/env/LD_PRELOAD: this variable may not be set by a call",
        ),
        (
            json!({"argv": ["true"], "cwd": "../"}),
            ToolStatus::PermissionDenied,
            "/cwd: ",
        ),
        (
            json!({"argv": ["true"], "cwd": "link"}),
            ToolStatus::PermissionDenied,
            "/cwd: \"link\" leads outside the workspace",
        ),
        (
            json!({"argv": ["true"], "command": "true"}),
            ToolStatus::ValidationError,
            "",
        ),
        (json!({"argv": []}), ToolStatus::ValidationError, ""),
    ];
    for (args, status, message) in cases {
        let r = f.call("exec", args.clone()).await;
        assert_eq!(r.status, status, "{args}: {r:?}");
        let got = r
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(got.contains(message), "{args}: {got}");
    }
    // A variable the configuration adds to the allowlist passes.
    let r = f
        .call(
            "exec",
            json!({"argv": ["sh", "-c", "echo $MY_VAR"], "env": {"MY_VAR": "ok"}}),
        )
        .await;
    assert_eq!(output(&r)["stdout"], "ok\n", "{r:?}");
}

#[tokio::test]
async fn python_exec_runs_a_snippet_and_streams_its_output() {
    let f = Fixture::new("").await;
    let mut sub = f.rt.events().subscribe();
    let r = f
        .call(
            "python_exec",
            json!({"code": "import sys\nprint(sum(range(10)))\nsys.stderr.write('warn\\n')\nsys.exit(2)"}),
        )
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert_eq!(output(&r)["stdout"], "45\n");
    assert_eq!(output(&r)["stderr"], "warn\n");
    assert_eq!(output(&r)["exit_code"], 2);
    let mut streamed = String::new();
    while let Some(Received::Event(e)) = sub.try_recv() {
        if let EventKind::InProgress { text, .. } = &e.kind {
            streamed.push_str(text);
        }
    }
    assert!(streamed.contains("45"), "{streamed:?}");

    // Non-UTF-8 output is decoded lossily, not refused.
    let r = f
        .call(
            "python_exec",
            json!({"code": "import sys; sys.stdout.buffer.write(b'a\\xffb')"}),
        )
        .await;
    assert_eq!(output(&r)["stdout"], "a\u{fffd}b");
}

#[tokio::test]
async fn run_tests_and_run_linter_summarise_what_the_commands_print() {
    let f = Fixture::new(
        "[commands]\ntest = [\"python3\", \"-m\", \"unittest\"]\n\
         lint = [\"sh\", \"-c\", \"echo 'app.py:3:1: W291 trailing whitespace'; echo 'app.py:9:5: error: bad'; exit 1\"]\n",
    )
    .await;
    std::fs::write(
        f.ws().join("test_app.py"),
        "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self): pass\n    \
         def test_bad(self): self.assertEqual(1, 2)\n    \
         @unittest.skip('later')\n    def test_later(self): pass\n",
    )
    .unwrap();
    let r = f.call("run_tests", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let out = output(&r);
    assert_eq!(out["success"], false);
    assert_eq!(
        out["summary"],
        json!({"framework": "unittest", "passed": 1, "failed": 1, "skipped": 1,
               "failures": ["test_bad (test_app.T.test_bad)"]})
    );

    let r = f.call("run_linter", json!({})).await;
    let out = output(&r);
    assert_eq!(
        (
            out["clean"].clone(),
            out["errors"].clone(),
            out["warnings"].clone()
        ),
        (json!(false), json!(2), json!(0))
    );
    assert_eq!(out["diagnostics"][1]["message"], "bad");
}

#[tokio::test]
async fn without_a_configured_or_detectable_command_run_tests_says_how_to_set_one() {
    let f = Fixture::new("").await;
    let r = f.call("run_tests", json!({})).await;
    assert_eq!(r.status, ToolStatus::Failed);
    let message = r.error.unwrap().message;
    assert!(message.contains("set [commands] test = "), "{message}");
}

#[tokio::test]
async fn policy_raises_isolation_and_hides_forbidden_paths_from_processes() {
    let f = Fixture::new(
        "[[policy.rules]]\nname = \"read-only exec\"\ntools = [\"exec\"]\nisolation = \"restricted\"\n\
         [[policy.rules]]\nname = \"secrets\"\nforbid_paths = [\"private\"]\n",
    )
    .await;
    std::fs::create_dir(f.ws().join("private")).unwrap();
    std::fs::write(f.ws().join("private/key"), "hunter2").unwrap();
    std::fs::write(f.ws().join("open.txt"), "visible").unwrap();
    // The argument check never sees `private` (the shell builds the name), the mount does.
    let r = f
        .call(
            "exec",
            json!({"command": "cat open.txt; cat $(echo priv)ate/key; echo x > new.txt"}),
        )
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let out = output(&r);
    assert_eq!(out["stdout"], "visible");
    let stderr = out["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("private/key: Permission denied"),
        "{stderr}"
    );
    assert!(
        stderr.contains("new.txt: Read-only file system")
            || stderr.contains("new.txt: Permission denied"),
        "{stderr}"
    );
    assert!(!f.ws().join("new.txt").exists());
    let facts = f.facts(&r).await;
    assert_eq!(facts["isolation"], "restricted");
    assert!(
        facts["isolation_raised_by"]
            .as_str()
            .unwrap()
            .starts_with("rule read-only exec"),
        "{facts}"
    );
    // python_exec is not named by the rule: it keeps its strict level and a writable workspace.
    let r = f
        .call(
            "python_exec",
            json!({"code": "open('py.txt', 'w').write('ok')"}),
        )
        .await;
    assert_eq!(output(&r)["exit_code"], 0, "{r:?}");
    assert_eq!(f.facts(&r).await["isolation"], "strict");
}

#[tokio::test]
async fn paths_forbidden_by_a_pattern_are_hidden_wherever_they_are_in_the_workspace() {
    let f = Fixture::new(
        "[[policy.rules]]\nname = \"secrets\"\nforbid_paths = [\"**/.env\", \"**/keys/**\"]\n",
    )
    .await;
    for (path, text) in [
        (".env", "ROOT_SECRET"),
        ("app/.env", "APP_SECRET"),
        ("app/.env.example", "EXAMPLE"),
        ("deploy/keys/id", "KEY_SECRET"),
        ("deploy/notes", "NOTES"),
    ] {
        let p = f.ws().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let r = f
        .call(
            "exec",
            // The names are built by the shell, so only the sandbox's view can stop them.
            json!({"command": "e=.env; k=keys; cat $e app/$e app/$e.example deploy/notes; \
                              cat deploy/$k/id; echo leak > app/$e"}),
        )
        .await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    let out = output(&r);
    // The masked files read as empty; their neighbours are untouched.
    assert_eq!(out["stdout"], "EXAMPLENOTES");
    // A masked file is /dev/null: what is written to it goes nowhere.
    assert_eq!(
        std::fs::read_to_string(f.ws().join("app/.env")).unwrap(),
        "APP_SECRET"
    );
    assert_eq!(f.facts(&r).await["isolation"], "strict");
}

/// Issue 15, item 4: a relative program is judged in the directory it will run in. The
/// workspace holds two different `run.sh`; the allowlist names the one at the root.
#[tokio::test]
async fn relative_programs_are_judged_where_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    for (path, says) in [("run.sh", "root"), ("sub/run.sh", "sub")] {
        let p = ws.join(path);
        std::fs::write(&p, format!("#!/bin/sh\necho {says}\n")).unwrap();
        let mut perms = std::fs::metadata(&p).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&p, perms).unwrap();
    }
    let text = "[policy]\ndefault = \"deny\"\nallow = [\"group:exec\"]\n\
                [policy.exec]\nsecurity = \"allowlist\"\nask = \"off\"\n\
                [[policy.exec.allow]]\ncommand = \"./run.sh **\"\n\
                [[policy.exec.allow]]\ncommand = \"env **\"\n\
                [[policy.exec.allow]]\ncommand = \"find **\"\n\
                [commands]\ntest = [\"./run.sh\"]\n";
    let config = Config::parse(text, Path::new("/etc/tw/config.toml"), None).unwrap();
    let rt = Runtime::open(RuntimeOptions::new(
        dir.path().join("data"),
        vec![ws.clone()],
        config,
    ))
    .await
    .unwrap();
    let call = |tool: &'static str, args: Value| {
        let rt = &rt;
        async move { rt.execute(rt.call(tool, args, Caller::agent("t"))).await }
    };
    // The allowed program, where the entry named it.
    let r = call("exec", json!({"argv": ["./run.sh"]})).await;
    assert_eq!(output(&r)["stdout"], "root\n", "{r:?}");
    let r = call("run_tests", json!({})).await;
    assert_eq!(r.status, ToolStatus::Success, "{r:?}");
    assert!(
        output(&r)["output_tail"].as_str().unwrap().contains("root"),
        "{r:?}"
    );
    // Every way of running sub/run.sh instead is refused before anything runs.
    for (tool, args) in [
        ("exec", json!({"argv": ["./run.sh"], "cwd": "sub"})),
        ("exec", json!({"command": "./run.sh", "cwd": "sub"})),
        ("exec", json!({"command": "env -C sub ./run.sh"})),
        ("exec", json!({"argv": ["env", "--chdir=sub", "./run.sh"]})),
        (
            "exec",
            json!({"command": "find sub -name run.sh -execdir ./run.sh \\;"}),
        ),
        ("run_tests", json!({"path": "sub"})),
    ] {
        let r = call(tool, args.clone()).await;
        assert_eq!(
            r.status,
            ToolStatus::PermissionDenied,
            "{tool} {args}: {r:?}"
        );
        let message = r.error.map(|e| e.message).unwrap_or_default();
        assert!(
            message.contains("sub/run.sh") || message.contains("cannot be known"),
            "{tool} {args}: {message}"
        );
    }
}

/// What the parser says a line's redirections do, as the exec layer reads it: `write` if one can
/// write a file other than `/dev/null` (which every entry may write), `none` if none can,
/// `refused` if the line is uncertain.
fn redirect_class(line: &str) -> &'static str {
    match tw_core::shell::parse_command_line(line) {
        tw_core::Parsed::Uncertain { .. } => "refused",
        tw_core::Parsed::Commands(cmds) => {
            let file =
                |r: &tw_core::Redirect| r.writes() && (r.expanded || r.target != "/dev/null");
            if cmds.iter().flat_map(|c| &c.redirects).any(file) {
                "write"
            } else {
                "none"
            }
        }
    }
}

/// Issue 15, item 2: the redirection table, proven against real bash and dash (`/bin/sh` on
/// Debian, what exec's `command` runs): each form runs in an empty directory, and the parser
/// must call it a write exactly when either shell created the file `f`. Refused forms are lines
/// the policy denies as uncertain whatever the shells do with them.
#[tokio::test]
async fn redirection_table_matches_what_bash_and_dash_do() {
    let f = Fixture::new("").await;
    #[rustfmt::skip]
    let table: &[(&str, &str)] = &[
        ("true <f", "none"),
        ("true >f", "write"),
        ("true 2>f", "write"),
        ("true >>f", "write"),
        ("true 3>>f", "write"),
        ("true >|f", "write"),
        ("true <>f", "write"),
        ("true 3<>f", "write"),
        ("true &>f", "write"),
        ("true &>>f", "write"),
        ("true >&f", "write"),
        ("true >& f", "write"),
        ("true 1>&f", "write"),
        ("X=f; true >&$X", "write"),
        ("true {v}>f", "write"),
        ("true {v}<>f", "write"),
        ("true {v}>>f", "write"),
        ("true {v}>|f", "write"),
        ("true {v}&>f", "write"),
        ("true {v}<f", "none"),
        ("true {v}>&-", "none"),
        ("true >&-", "none"),
        ("true 2>&1", "none"),
        ("true 3>&1 1>&2 2>&3", "none"),
        ("true <&0", "none"),
        ("true <<<f", "none"),
        ("true >/dev/null 2>&1", "none"),
        ("true &>/dev/null", "none"),
        ("(true) >f", "write"),
        ("{ true; } >f", "write"),
        ("{ true; } {v}>f", "write"),
        ("bash -c 'true >&f'", "write"),
        ("sh -c 'true 3<>f'", "write"),
        ("true 2>&f", "refused"),
        ("true 3>&f", "refused"),
        ("true <&f", "refused"),
        ("true 0<&f", "refused"),
        ("true {v}>&f", "refused"),
        (">f", "refused"),
        ("exec 3>f", "refused"),
        ("true <<EOF\nx\nEOF", "refused"),
    ];
    let mut wrong = Vec::new();
    for (i, (line, class)) in table.iter().enumerate() {
        let parsed = redirect_class(line);
        if parsed != *class {
            wrong.push(format!(
                "{line:?}: the table says {class}, the parser {parsed}"
            ));
        }
        let mut wrote = Vec::new();
        for shell in ["/bin/bash", "/bin/dash"] {
            let dir = format!("{}{i}", shell.rsplit('/').next().unwrap());
            std::fs::create_dir(f.ws().join(&dir)).unwrap();
            let r = f
                .call("exec", json!({"argv": [shell, "-c", line], "cwd": dir}))
                .await;
            assert_eq!(r.status, ToolStatus::Success, "{shell} {line:?}: {r:?}");
            if f.ws().join(&dir).join("f").exists() {
                wrote.push(shell);
            }
        }
        let writes = !wrote.is_empty();
        if *class != "refused" && (*class == "write") != writes {
            wrong.push(format!(
                "{line:?}: the table says {class}, but the file was written by {wrote:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether each of `n` exec calls, a pause apart, ran in a sandbox built ahead (the audit
/// record's `sandbox_prepared_ahead`), stopping at the first that did.
async fn prepared_ahead(f: &Fixture, n: usize) -> Vec<bool> {
    let mut seen = Vec::new();
    for _ in 0..n {
        let r = f.call("exec", json!({"argv": ["true"]})).await;
        assert_eq!(r.status, ToolStatus::Success, "{r:?}");
        let ahead = f.facts(&r).await["sandbox_prepared_ahead"] == json!(true);
        seen.push(ahead);
        if ahead {
            break;
        }
        // Room for the pool to build the next one, as an agent's think time gives it.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_exec_calls_run_in_sandboxes_built_ahead_and_their_records_say_so() {
    let f = Fixture::new("").await;
    let seen = prepared_ahead(&f, 20).await;
    // The first two build their own (the pool starts on a shape of run seen twice); one of the
    // next is served ahead.
    assert!(
        seen.len() > 2 && seen[..2] == [false, false] && seen.last() == Some(&true),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_none_in_the_config_builds_every_sandbox_on_the_spot() {
    let f = Fixture::new("[sandbox]\npool = 0\n").await;
    assert_eq!(prepared_ahead(&f, 5).await, vec![false; 5]);
}
