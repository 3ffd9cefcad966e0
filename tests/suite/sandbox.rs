//! The sandbox through the real binary: `sandbox doctor` on this host (every level available, every
//! escape of the self-test contained) and where the helper is missing (every level refused with how
//! to fix it); an `exec` call whose audit record carries the sandbox's facts; and an `exec` call
//! cancelled with Ctrl-C whose processes, background ones included, are all gone afterwards.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::Env;

#[test]
fn doctor_reports_every_level_and_a_contained_self_test() {
    let env = Env::new();
    let report = env.cmd(&["sandbox", "doctor", "--json"]).run().ok().json();
    let levels: Vec<(String, bool)> = report["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_owned(),
                l["available"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            ("standard".to_owned(), true),
            ("strict".to_owned(), true),
            ("restricted".to_owned(), true)
        ]
    );
    let cases = report["self_test"].as_array().unwrap();
    assert!(cases.len() >= 10, "{report:#}");
    let escaped: Vec<&Value> = cases.iter().filter(|c| c["contained"] != true).collect();
    assert!(escaped.is_empty(), "{escaped:#?}");
    assert!(
        report["helper"]["Ok"]
            .as_str()
            .unwrap()
            .ends_with("tw-sandbox-helper")
    );
    // The pool's size (the default here); a one-shot command builds none ahead.
    assert_eq!(report["built_ahead"], json!([2, 0]), "{report:#}");

    // Every protection strict needs is listed, and held on the machines this is tested on.
    let mut protections: Vec<(String, bool)> = report["protections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["held"].as_bool().unwrap(),
            )
        })
        .collect();
    let mut expect: Vec<(String, bool)> = [
        "Landlock ABI 6+ (file rights, abstract-socket and signal scoping)",
        "seccomp filters",
        "a process cap per pid namespace (pid_max, Linux 6.14+)",
        "id-mapped and detached mounts (Linux 5.12+)",
    ]
    .iter()
    .map(|n| ((*n).to_owned(), true))
    .collect();
    if !super::support::running_as_root() {
        expect.push(("unprivileged user namespaces".to_owned(), true));
    }
    protections.sort();
    expect.sort();
    assert_eq!(protections, expect);

    // The text form says the same.
    let text = env.cmd(&["sandbox", "doctor"]).run().ok().stdout;
    assert!(text.contains("strict      yes"), "{text}");
    assert!(!text.contains("ESCAPED"), "{text}");
    assert!(!text.contains("MISSING"), "{text}");
    assert!(text.contains("seccomp filters"), "{text}");
}

#[test]
fn without_the_helper_every_level_is_refused_with_how_to_fix_it() {
    let env = Env::new().with_config(
        "[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n[sandbox]\nhelper = \"/nonexistent/tw-sandbox-helper\"\n",
    );
    let report = env.cmd(&["sandbox", "doctor", "--json"]).run().ok().json();
    for level in report["levels"].as_array().unwrap() {
        assert_eq!(level["available"], false, "{level}");
        let detail = level["detail"].as_str().unwrap();
        assert!(
            detail.contains("/nonexistent/tw-sandbox-helper does not exist"),
            "{detail}"
        );
    }
    let r = env.call("exec", json!({"argv": ["true"]}));
    assert_eq!(r.code, 6, "{}", r.stdout);
    assert_eq!(r.json()["status"], "sandbox_error");
}

#[test]
fn an_exec_call_records_the_sandbox_it_ran_in() {
    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n");
    let r = env
        .call("exec", json!({"argv": ["sh", "-c", "echo hi; id -u"]}))
        .ok()
        .json();
    let out = r["output"]["stdout"].as_str().unwrap();
    assert!(out.starts_with("hi\n"), "{r:#}");
    let rows = env.audit_rows();
    assert_eq!(rows.len(), 1);
    let facts = &rows[0].metadata;
    assert_eq!(facts["isolation"], "strict", "{facts}");
    assert_eq!(facts["exit_code"], 0);
    for key in [
        "sandbox_id",
        "wall_time_us",
        "cpu_time_us",
        "peak_memory_bytes",
    ] {
        assert!(!facts[key].is_null(), "{key} missing: {facts}");
    }
    // `audit show` prints them too.
    let shown = env
        .cmd(&["audit", "show", r["execution_id"].as_str().unwrap()])
        .run()
        .ok()
        .stdout;
    assert!(shown.contains("sandbox_id"), "{shown}");
}

/// Every live process whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}

#[test]
fn ctrl_c_on_an_exec_call_leaves_no_process_behind() {
    let env = Env::new()
        .with_config("[policy]\nallow = [\"group:exec\"]\n[policy.exec]\nsecurity = \"full\"\n");
    // A unique sleep length marks this test's processes; one of them is a daemon in its own
    // session, which a process-group kill would miss.
    let marker = format!("7{}.5", std::process::id());
    let script =
        format!("setsid sleep {marker} > /dev/null 2>&1 & sleep {marker} & echo started; wait");
    let child = env
        .cmd(&[
            "call",
            "exec",
            "--args",
            &json!({"command": script}).to_string(),
        ])
        .spawn();
    let start = Instant::now();
    while processes_with(&marker).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "cancelled", "{result:#}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(env.audit_rows().len(), 1);
}
