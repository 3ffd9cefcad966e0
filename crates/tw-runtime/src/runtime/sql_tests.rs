//! `sql_query` through the whole pipeline against a real SQLite file and a real PostgreSQL
//! database (the throwaway cluster): values read by type, parameters bound, rows, bytes and time
//! capped, and every write the database is asked for refused by the database itself (a write
//! in a CTE, a function, a `DO` block, a procedure, a second statement, `ATTACH`, `VACUUM
//! INTO`, a pragma), the file's bytes and the tables' rows unchanged after; every call audited.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sqlx::Connection as _;
use tw_core::ToolStatus;

use super::net_tests::called;
use super::policy_tests::Install;
use super::*;

/// A call as the analyst: its status and output or error (code and message); audited.
async fn query(rt: &Runtime, args: Value) -> (ToolStatus, Value) {
    called(rt, "analyst", "sql_query", args).await
}

fn config(databases: &str) -> String {
    format!("license_tier = \"teams\"\n\n[policy]\nallow = [\"sql_query\"]\n\n{databases}")
}

/// A SQLite file with a few rows; its path.
fn sqlite_file(install: &Install) -> std::path::PathBuf {
    let path = install.path("shop.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL, photo BLOB);
         INSERT INTO items VALUES (1, 'pen', 1.5, x'CAFE'), (2, 'ink', 12.25, NULL),
                                  (3, 'paper', 4.0, NULL), (4, 'desk', 150.0, NULL);
         CREATE VIEW cheap AS SELECT name FROM items WHERE price < 5;",
    )
    .unwrap();
    path
}

fn digest(path: &std::path::Path) -> String {
    tw_store::sha256_hex(&std::fs::read(path).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_is_read_with_parameters_and_caps() {
    let install = Install::new("");
    sqlite_file(&install);
    std::fs::write(
        install.path("config.toml"),
        config("[databases.shop]\nsqlite = \"shop.db\"\nmax_rows = 3\ntimeout_ms = 300\n"),
    )
    .unwrap();
    let rt = install.open().await.unwrap();

    let (status, out) = query(
        &rt,
        json!({"database": "shop", "sql": "SELECT id, name, price, photo FROM items WHERE price < ?1 ORDER BY id", "params": [13]}),
    )
    .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(
        (
            &out["columns"],
            &out["rows"],
            &out["row_count"],
            &out["truncated"]
        ),
        (
            &json!(["id", "name", "price", "photo"]),
            &json!([
                [1, "pen", 1.5, "\\xcafe"],
                [2, "ink", 12.25, null],
                [3, "paper", 4.0, null]
            ]),
            &json!(3),
            &Value::Null
        )
    );
    // The database's row cap holds whatever the call asks; a smaller ask holds too.
    let (_, out) = query(
        &rt,
        json!({"database": "shop", "sql": "SELECT * FROM items", "max_rows": 100}),
    )
    .await;
    assert_eq!(
        (&out["row_count"], &out["truncated"]),
        (&json!(3), &json!("rows"))
    );
    let (_, out) = query(
        &rt,
        json!({"database": "shop", "sql": "SELECT * FROM cheap", "max_rows": 1}),
    )
    .await;
    assert_eq!(
        (&out["rows"], &out["truncated"]),
        (&json!([["pen"]]), &json!("rows"))
    );
    // So does the answer's byte budget: rows of 300 KB stop at the tool's 1 MiB.
    let big = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) \
               SELECT x, printf('%.*c', 300000, 'a') FROM c";
    let (status, out) = query(&rt, json!({"database": "shop", "sql": big})).await;
    assert_eq!(
        (status, &out["row_count"], &out["truncated"]),
        (ToolStatus::Success, &json!(3), &Value::Null)
    );
    let bigger = big.replace("300000", "400000");
    let (_, out) = query(&rt, json!({"database": "shop", "sql": bigger})).await;
    assert_eq!(
        (&out["row_count"], &out["truncated"]),
        (&json!(2), &json!("bytes"))
    );
    // And the time cap: a statement still running at 300 ms is interrupted.
    let slow =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let (status, out) = query(&rt, json!({"database": "shop", "sql": slow})).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Timeout, &json!("timeout")),
        "{out}"
    );

    // Bad input says what and where, and runs nothing.
    let (status, out) = query(&rt, json!({"database": "shop", "sql": "SELEC 1"})).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Failed, &json!("query_failed"))
    );
    assert!(
        out["message"].as_str().unwrap().contains("syntax error"),
        "{out}"
    );
    let (status, out) = query(&rt, json!({"database": "warehouse", "sql": "SELECT 1"})).await;
    assert_eq!(status, ToolStatus::ValidationError, "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("/database"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_to_a_sqlite_file_is_refused_by_sqlite_and_the_file_is_unchanged() {
    let install = Install::new("");
    let file = sqlite_file(&install);
    std::fs::write(
        install.path("config.toml"),
        config("[databases.shop]\nsqlite = \"shop.db\"\n"),
    )
    .unwrap();
    let rt = install.open().await.unwrap();
    let before = digest(&file);
    let elsewhere = install.path("elsewhere.db");
    let copy = install.path("copy.db");
    let writes = [
        (
            "WITH doomed AS (SELECT id FROM items) DELETE FROM items WHERE id IN doomed",
            ToolStatus::PermissionDenied,
        ),
        (
            "INSERT INTO items (name) SELECT name FROM items RETURNING id",
            ToolStatus::PermissionDenied,
        ),
        ("UPDATE items SET price = 0", ToolStatus::PermissionDenied),
        ("DROP VIEW cheap", ToolStatus::PermissionDenied),
        ("PRAGMA user_version = 7", ToolStatus::PermissionDenied),
        ("SELECT 1; DELETE FROM items", ToolStatus::ValidationError),
        (
            "SELECT 1 /* harmless */; DROP TABLE items",
            ToolStatus::ValidationError,
        ),
        (
            &format!("ATTACH DATABASE '{}' AS other", elsewhere.display()),
            ToolStatus::Failed,
        ),
        (
            &format!("VACUUM INTO '{}'", copy.display()),
            ToolStatus::Failed,
        ),
        (
            "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')",
            ToolStatus::Failed,
        ),
    ];
    for (sql, expected) in writes {
        let (status, out) = query(&rt, json!({"database": "shop", "sql": sql})).await;
        assert_eq!(status, expected, "{sql}: {out}");
        if expected == ToolStatus::PermissionDenied {
            assert_eq!(out["code"], json!("read_only"), "{sql}: {out}");
        }
    }
    assert_eq!(
        digest(&file),
        before,
        "the file is byte for byte what it was"
    );
    assert!(
        !elsewhere.exists() && !copy.exists(),
        "no other file was written"
    );
    let (_, out) = query(
        &rt,
        json!({"database": "shop", "sql": "SELECT count(*) FROM items"}),
    )
    .await;
    assert_eq!(out["rows"], json!([[4]]));
}

/// A PostgreSQL database with a table, a sequence, a function and a procedure that write.
async fn postgres_database() -> String {
    let url = tw_store::testing::PgCluster::shared()
        .fresh_database()
        .await;
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer text, total numeric(10,2),
                              placed timestamptz, due date, ref uuid, meta jsonb, raw bytea, tags text[]);
         INSERT INTO orders VALUES
           (1, 'ada', 1234.50, '2025-06-01 12:30:00+00', '2025-07-01',
            'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"rush\": true}', '\\xdead', '{a,b}'),
           (2, 'bob', -0.05, '1999-12-31 23:59:59.5+00', '1969-07-20', NULL, NULL, NULL, NULL);
         CREATE SEQUENCE ticket;
         CREATE FUNCTION sneaky() RETURNS int LANGUAGE plpgsql AS
           $$ BEGIN DELETE FROM orders; RETURN 1; END $$;
         CREATE PROCEDURE wipe() LANGUAGE sql AS $$ DELETE FROM orders $$;",
    )
    .execute(&mut c)
    .await
    .unwrap();
    c.close().await.unwrap();
    url
}

async fn orders(url: &str) -> (i64, i64) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&mut c)
        .await
        .unwrap();
    let s: i64 = sqlx::query_scalar("SELECT last_value FROM ticket")
        .fetch_one(&mut c)
        .await
        .unwrap();
    (n, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_is_read_by_type_and_refuses_every_hidden_write() {
    let url = postgres_database().await;
    let install = Install::new(&config(&format!(
        "[databases.sales]\nurl = \"{url}\"\ntimeout_ms = 500\n\n[databases.missing]\nurl_env = \"TW_TEST_SALES_URL_UNSET\"\n"
    )));
    let rt = install.open().await.unwrap();

    let (status, out) = query(
        &rt,
        json!({"database": "sales", "sql": "SELECT id, customer, total, placed, due, ref, meta, raw, $1::int + 1 AS next FROM orders WHERE customer <> $2 ORDER BY id", "params": [41, "nobody"]}),
    )
    .await;
    assert_eq!(status, ToolStatus::Success, "{out}");
    assert_eq!(
        out["rows"],
        json!([
            [1, "ada", "1234.50", "2025-06-01T12:30:00Z", "2025-07-01", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", {"rush": true}, "\\xdead", 42],
            [2, "bob", "-0.05", "1999-12-31T23:59:59.500000Z", "1969-07-20", null, null, null, 42]
        ])
    );
    // An empty result still names its columns; a type not read here says how to read it.
    let (_, out) = query(
        &rt,
        json!({"database": "sales", "sql": "SELECT id, customer FROM orders WHERE false"}),
    )
    .await;
    assert_eq!(
        (&out["columns"], &out["rows"]),
        (&json!(["id", "customer"]), &json!([]))
    );
    let (status, out) = query(
        &rt,
        json!({"database": "sales", "sql": "SELECT tags FROM orders"}),
    )
    .await;
    assert_eq!(status, ToolStatus::Failed);
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("cast it in the query (tags::text)"),
        "{out}"
    );

    let writes = [
        (
            "WITH gone AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM gone",
            ToolStatus::PermissionDenied,
        ),
        ("SELECT sneaky()", ToolStatus::PermissionDenied),
        ("CALL wipe()", ToolStatus::PermissionDenied),
        (
            "DO $$ BEGIN DELETE FROM orders; END $$",
            ToolStatus::PermissionDenied,
        ),
        ("SELECT nextval('ticket')", ToolStatus::PermissionDenied),
        ("UPDATE orders SET total = 0", ToolStatus::PermissionDenied),
        ("SELECT 1; DELETE FROM orders", ToolStatus::ValidationError),
        ("SET TRANSACTION READ WRITE", ToolStatus::Failed),
    ];
    for (sql, expected) in writes {
        let (status, out) = query(&rt, json!({"database": "sales", "sql": sql})).await;
        assert_eq!(status, expected, "{sql}: {out}");
    }
    assert_eq!(
        orders(&url).await,
        (2, 1),
        "no row deleted, the sequence not advanced"
    );

    // The server stops a statement at the database's time cap.
    let (status, out) = query(
        &rt,
        json!({"database": "sales", "sql": "SELECT pg_sleep(5)"}),
    )
    .await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Timeout, &json!("timeout")),
        "{out}"
    );
    // A URL in an unset variable fails saying which, without any URL.
    let (status, out) = query(&rt, json!({"database": "missing", "sql": "SELECT 1"})).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::Failed, &json!("not_configured"))
    );
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("TW_TEST_SALES_URL_UNSET"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_needs_the_teams_tier_and_an_allowing_policy() {
    let install = Install::new("[databases.shop]\nsqlite = \"shop.db\"\n");
    sqlite_file(&install);
    let rt = install.open().await.unwrap();
    let (status, out) = query(&rt, json!({"database": "shop", "sql": "SELECT 1"})).await;
    assert_eq!(status, ToolStatus::PermissionDenied, "{out}");
    let install =
        Install::new("license_tier = \"teams\"\n[databases.shop]\nsqlite = \"shop.db\"\n");
    sqlite_file(&install);
    let rt = install.open().await.unwrap();
    let (status, out) = query(&rt, json!({"database": "shop", "sql": "SELECT 1"})).await;
    assert_eq!(
        (status, &out["code"]),
        (ToolStatus::PermissionDenied, &json!("policy_denied")),
        "{out}"
    );
}

#[test]
fn a_database_section_that_cannot_be_read_is_refused_with_its_line() {
    for (text, expected) in [
        (
            "[databases.Shop]\nsqlite = \"a.db\"\n",
            "config.toml:1:12: databases: \"Shop\" is not a database name",
        ),
        (
            "[databases.shop]\n",
            "config.toml:1:12: databases.shop: set exactly one of sqlite, url and url_env",
        ),
        (
            "[databases.shop]\nurl = \"mysql://x/y\"\n",
            "config.toml:2:7: databases.shop.url: not a postgres:// or postgresql:// URL",
        ),
        (
            "[databases.shop]\nsqlite = \"a.db\"\nmax_rows = 0\n",
            "config.toml:3:12: databases.shop.max_rows: must be from 1 to 100000",
        ),
        (
            "[databases.shop]\nsqlite = \"a.db\"\ntimeout_ms = 600000\n",
            "config.toml:3:14: databases.shop.timeout_ms: must be from 1 to 60000",
        ),
    ] {
        let err = Config::parse(text, std::path::Path::new("config.toml"), None).unwrap_err();
        assert!(err.to_string().starts_with(expected), "{text:?}: {err}");
    }
}
