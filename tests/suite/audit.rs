//! The audit log through the CLI: one record per call whatever its outcome, secrets redacted, and
//! list, show, export and report working on a real SQLite file.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Env;

#[test]
fn one_record_per_call_including_refusals_with_secrets_redacted() {
    let env = Env::new().with_config("[policy]\nallow = [\"echo\", \"read_file\"]\n");
    env.write("f.txt", "data");
    let calls = [
        (
            "echo",
            json!({"password": "hunter2", "nested": {"api_key": "k-123"}, "max_tokens": 5}),
        ),
        ("read_file", json!({"path": "f.txt"})),
        ("read_file", json!({"path": 1})),
        ("write_file", json!({"path": "x", "content": "y"})),
        ("missing", json!({})),
    ];
    let mut ids = Vec::new();
    for (tool, args) in &calls {
        ids.push(
            env.call(tool, args.clone()).json()["execution_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let rows = env.audit_rows();
    assert_eq!(
        rows.iter()
            .map(|r| r.execution_id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    assert_eq!(
        rows.iter()
            .map(|r| r.status.to_string())
            .collect::<Vec<_>>(),
        [
            "success",
            "success",
            "validation_error",
            "permission_denied",
            "not_found"
        ]
    );
    let echo = &rows[0];
    assert_eq!(
        echo.arguments,
        json!({"password": "[REDACTED]", "nested": {"api_key": "[REDACTED]"}, "max_tokens": 5})
    );
    let stored = serde_json::to_string(&rows).unwrap();
    assert!(
        !stored.contains("hunter2") && !stored.contains("k-123"),
        "a secret reached the audit log"
    );
    // Output hashes are over the stored output.
    let read = &rows[1];
    assert_eq!(
        read.output_bytes as usize,
        serde_json::to_string(read.output.as_ref().unwrap())
            .unwrap()
            .len()
    );
    assert_eq!(read.output_sha256.as_ref().map(String::len), Some(64));
    // The explanation is stored with the decision.
    assert_eq!(rows[3].decision.as_deref(), Some("deny"));
    assert!(
        rows[3]
            .explanation
            .as_ref()
            .unwrap()
            .to_string()
            .contains("no allow or deny rule names tool write_file")
    );
}

#[test]
fn list_show_export_and_report() {
    let env = Env::new();
    for i in 0..7 {
        env.call("echo", json!({"i": i})).ok();
    }
    env.call("read_file", json!({"path": "nope.txt"}));
    env.cmd(&["--agent", "other-agent", "call", "echo", "--args", "{}"])
        .run()
        .ok();

    let page = env
        .cmd(&["audit", "list", "--limit", "4", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(page["rows"].as_array().unwrap().len(), 4);
    let cursor = page["next_cursor"].as_i64().unwrap();
    let page2 = env
        .cmd(&[
            "audit",
            "list",
            "--limit",
            "10",
            "--cursor",
            &cursor.to_string(),
            "--json",
        ])
        .run()
        .ok()
        .json();
    assert_eq!(page2["rows"].as_array().unwrap().len(), 5);
    assert!(page2["next_cursor"].is_null());

    let failed = env
        .cmd(&["audit", "list", "--status", "failed", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(failed["rows"].as_array().unwrap().len(), 1);
    let by_caller = env
        .cmd(&["audit", "list", "--caller", "other-agent", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(by_caller["rows"].as_array().unwrap().len(), 1);
    let text = env
        .cmd(&["audit", "list", "--text", "nope.txt", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(text["rows"].as_array().unwrap().len(), 1);
    let recent = env
        .cmd(&["audit", "list", "--since", "1h", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(recent["rows"].as_array().unwrap().len(), 9);
    let future = env
        .cmd(&["audit", "list", "--since", "2100-01-01T00:00:00Z", "--json"])
        .run()
        .ok()
        .json();
    assert_eq!(future["rows"].as_array().unwrap().len(), 0);

    let id = failed["rows"][0]["execution_id"].as_str().unwrap();
    let shown = env.cmd(&["audit", "show", id]).run().ok().json();
    assert_eq!(shown["error_code"], "not_found");

    let csv = env
        .cmd(&["audit", "export", "--format", "csv"])
        .run()
        .ok()
        .stdout;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 10, "{csv}");
    assert!(
        lines[0].starts_with("id,execution_id,trace_id,started_at"),
        "{}",
        lines[0]
    );
    let jsonl = env
        .cmd(&["audit", "export", "--tool", "echo"])
        .run()
        .ok()
        .stdout;
    assert_eq!(jsonl.lines().count(), 8);
    for l in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["tool"], "echo");
    }

    let report = env.cmd(&["audit", "report", "--json"]).run().ok().json();
    let echo = report["by_tool"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "echo")
        .unwrap();
    assert_eq!(
        (echo["calls"].as_u64(), echo["success"].as_u64()),
        (Some(8), Some(8))
    );
    let read = report["by_tool"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "read_file")
        .unwrap();
    assert_eq!(
        (read["calls"].as_u64(), read["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let cli = report["by_caller"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "cli")
        .unwrap();
    assert_eq!(
        (cli["calls"].as_u64(), cli["distinct_tools"].as_u64()),
        (Some(8), Some(2))
    );
}

#[test]
fn an_invalid_config_refuses_to_start_with_its_location() {
    let env = Env::new()
        .with_config("license_tier = \"pro\"\n[policy]\nallow = [\"fine\", \"Not A Name\"]\n");
    let run = env.call("echo", json!({}));
    assert_eq!(run.code, 10);
    let cfg = env.config.as_ref().unwrap().display().to_string();
    assert_eq!(
        run.stderr.trim(),
        format!(
            "error: cannot open toolwarden with data directory {}: the policy is invalid, so nothing can be judged: \
             {cfg}:3:18: allow: invalid tool name \"Not A Name\": must start with a lowercase letter",
            env.data.display()
        )
    );
    // Nothing ran, so nothing was recorded.
    assert!(!env.db().exists());
}

/// An attacker with the data directory: the database with its triggers dropped.
/// Runs `sql` on the installation's store with its guards off, as someone with the database's
/// own rights could: SQLite's triggers dropped, PostgreSQL's switched off for the transaction.
fn tamper(env: &Env, sql: &str) {
    if let Some(url) = &env.store_url {
        let sql = sql.to_owned();
        let url = url.clone();
        return super::support::block_on(async move {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("SET LOCAL session_replication_role = replica")
                .execute(&mut *tx)
                .await
                .unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            pool.close().await;
        });
    }
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let triggers: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for t in triggers {
        conn.execute_batch(&format!("DROP TRIGGER {t}")).unwrap();
    }
    conn.execute_batch(sql).unwrap();
}

#[test]
fn audit_verify_passes_on_an_untouched_log_and_names_each_edit() {
    let env = Env::new();
    for i in 0..6 {
        env.call("echo", json!({"message": format!("call {i}")}))
            .ok();
    }
    // A checkpoint kept outside the data directory.
    let saved = env.write(
        "saved-checkpoint.jsonl",
        &env.cmd(&["audit", "checkpoint"]).run().ok().stdout,
    );
    let run = env.cmd(&["audit", "verify"]).run().ok();
    assert!(
        run.stdout.contains("audit log: 6 records"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("ok: every record"), "{}", run.stdout);

    // A record's result changed in place.
    tamper(
        &env,
        "UPDATE audit_log SET status = 'permission_denied' WHERE id = 2",
    );
    let run = env.cmd(&["audit", "verify", "--json"]).run();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["problems"][0]["log"], "audit");
    assert_eq!(report["problems"][0]["id"], 2);
    assert_eq!(report["problems"][0]["kind"], "edited");

    // The last records removed, with the checkpoints in the database and beside it: the one
    // saved elsewhere still shows the cut.
    tamper(
        &env,
        "DELETE FROM audit_log WHERE id >= 5; DELETE FROM audit_checkpoints;",
    );
    // Each store keeps its checkpoints beside the database file under its own name; a team
    // store's chain (one here: each CLI call adopts the one the call before let go) is cut at
    // its end, not at an id.
    let team = env.store_url.is_some();
    let beside = env.db().with_file_name(if team {
        "toolwarden.db.team-checkpoints"
    } else {
        "toolwarden.db.checkpoints"
    });
    std::fs::remove_file(&beside).unwrap();
    let saved = saved.to_str().unwrap();
    let run = env
        .cmd(&["audit", "verify", "--from-checkpoint", saved])
        .run();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("audit 2: Edited"), "{}", run.stdout);
    let (kind, what) = if team {
        ("Truncated", "ends at its record 4, but the checkpoint")
    } else {
        ("audit 5: Truncated", "5 to 6 were removed")
    };
    assert!(
        run.stdout.contains(kind) && run.stdout.contains(what),
        "{}",
        run.stdout
    );
    // A file that holds no checkpoint is refused as bad input, naming the line.
    let bad = env.write("bad.jsonl", "{\"created_at\": 1}\n");
    let run = env
        .cmd(&[
            "audit",
            "verify",
            "--from-checkpoint",
            bad.to_str().unwrap(),
        ])
        .run();
    assert_eq!(run.code, 8, "{}", run.stderr);
    assert!(run.stderr.contains("bad.jsonl:1"), "{}", run.stderr);
}

#[test]
fn audit_archive_moves_old_records_out_and_refuses_a_tampered_range() {
    let env = Env::new();
    for i in 0..4 {
        env.call("echo", json!({"message": format!("call {i}")}))
            .ok();
    }
    let old = env.root.path().join("old.jsonl");
    let old = old.to_str().unwrap();
    let run = env
        .cmd(&["audit", "archive", "--before", "0s", "-o", old])
        .run()
        .ok();
    // SQLite's one chain by id; a team store's by chain (each CLI call's writer adopts the
    // chain the one before let go, so there is one).
    let said = if env.store_url.is_some() {
        "archived 4 records of 1 chain (ids 1 to 4)"
    } else {
        "archived records 1 to 4 (4)"
    };
    assert!(
        run.stdout.contains(said) && run.stdout.contains("removed 4 from the log"),
        "{}",
        run.stdout
    );
    let run = env.cmd(&["audit", "verify", "--archive", old]).run().ok();
    assert!(run.stdout.contains("ok: the signature"), "{}", run.stdout);
    env.call("echo", json!({"message": "after"})).ok();
    let run = env.cmd(&["audit", "verify", "--json"]).run().ok();
    let report = run.json();
    assert_eq!(
        (&report["audit_records"], &report["archives"]),
        (&json!(1), &json!(1))
    );
    // A range with an edited record is not archived, and nothing leaves the log.
    env.call("echo", json!({"message": "more"})).ok();
    tamper(&env, "UPDATE audit_log SET tool = 'rm' WHERE id = 5");
    let newer = env.root.path().join("newer.jsonl");
    let run = env
        .cmd(&[
            "audit",
            "archive",
            "--before",
            "0s",
            "-o",
            newer.to_str().unwrap(),
        ])
        .run();
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("nothing was removed"), "{}", run.stderr);
    assert!(!newer.exists());
    assert_eq!(env.audit_rows().len(), 2);
}
