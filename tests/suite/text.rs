//! Reading and searching text through the real binary. `read_file`'s `encoding`: a UTF-16 file
//! (with its byte order mark) and a Latin-1 file come back as text, a byte ASCII cannot hold
//! fails with where it is, an unknown encoding is invalid arguments naming the field.
//! `file_search`'s regular expressions and case-insensitive literals find their lines, and a
//! pattern that is not one is invalid arguments. Each call audited.

use serde_json::json;

use super::support::{Env, check_status};

#[test]
fn read_file_decodes_what_it_is_told_and_says_where_it_cannot() {
    let env = Env::new();
    let mut utf16 = vec![0xff, 0xfe];
    for u in "Grüße\nzwei\n".encode_utf16() {
        utf16.extend(u.to_le_bytes());
    }
    std::fs::write(env.write("w.txt", ""), &utf16).unwrap();
    std::fs::write(env.write("l.txt", ""), b"caf\xe9\n").unwrap();

    let run = env.call(
        "read_file",
        json!({"path": "w.txt", "encoding": "utf-16", "start_line": 2}),
    );
    check_status(&run, 0, "success", None);
    assert_eq!(run.json()["output"]["content"], "zwei\n");
    // Without the encoding it is not UTF-8 text.
    check_status(
        &env.call("read_file", json!({"path": "w.txt"})),
        1,
        "failed",
        Some("binary_file"),
    );

    let run = env.call("read_file", json!({"path": "l.txt", "encoding": "latin-1"}));
    assert_eq!(run.json()["output"]["content"], "café\n");
    let run = env.call("read_file", json!({"path": "l.txt", "encoding": "ascii"}));
    check_status(&run, 1, "failed", Some("encoding_error"));
    assert_eq!(
        run.json()["error"]["message"],
        "\"l.txt\" is not ascii text: a byte above 127 at byte 3"
    );
    let run = env.call("read_file", json!({"path": "l.txt", "encoding": "ebcdic"}));
    check_status(&run, 8, "validation_error", Some("invalid_arguments"));
    assert!(run.stdout.contains("/encoding"), "{}", run.stdout);

    let statuses: Vec<String> = env
        .audit_rows()
        .iter()
        .map(|r| r.status.as_str().to_owned())
        .collect();
    assert_eq!(
        statuses,
        ["success", "failed", "success", "failed", "validation_error"]
    );
}

#[test]
fn file_search_takes_a_regular_expression_or_ignores_case() {
    let env = Env::new();
    env.write("src/a.rs", "fn alpha() {}\nconst X: u8 = 1; // TODO\n");
    env.write("src/b.rs", "pub fn beta(x: u8) {}\n");
    let run = env.call(
        "file_search",
        json!({"path": "src", "content": r"^(pub )?fn \w+\(", "regex": true}),
    );
    check_status(&run, 0, "success", None);
    let found: Vec<(String, u64)> = run.json()["output"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [("src/a.rs".to_owned(), 1), ("src/b.rs".to_owned(), 1)]
    );

    let run = env.call(
        "file_search",
        json!({"content": "todo", "case_insensitive": true}),
    );
    assert_eq!(run.json()["output"]["matches"][0]["line"], 2);

    let run = env.call("file_search", json!({"content": "fn (", "regex": true}));
    check_status(&run, 8, "validation_error", Some("invalid_pattern"));
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("\"fn (\" is not a valid regular expression"),
        "{}",
        run.stdout
    );
    assert_eq!(env.audit_rows().len(), 3);
}
