//! Functional tests of the file operations: every option, on real files in a temporary workspace.

use std::fmt::Debug;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;
use tempfile::TempDir;

use super::*;
use crate::workspace::{PathError, Workspace};

struct Fixture {
    _dir: TempDir,
    root: PathBuf,
    ws: Workspace,
}

impl Fixture {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = Workspace::open(std::slice::from_ref(&root)).unwrap();
        Self {
            _dir: dir,
            root,
            ws,
        }
    }

    fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> &Self {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    fn dir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.root.join(rel)).unwrap();
        self
    }

    fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> &Self {
        std::os::unix::fs::symlink(target, self.root.join(rel)).unwrap();
        self
    }

    fn fifo(&self, rel: &str) -> &Self {
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            self.root.join(rel),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        self
    }

    fn content(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }

    /// Every name in the root, hidden ones included, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn read(
        &self,
        path: &str,
        start: Option<u64>,
        end: Option<u64>,
        max: u64,
    ) -> Result<ReadOutput, PathError> {
        read_file(
            &self.ws,
            path,
            ReadOptions {
                start_line: start,
                end_line: end,
                max_bytes: max,
            },
        )
    }

    fn list(
        &self,
        path: &str,
        depth: u32,
        hidden: bool,
        max: usize,
    ) -> Result<ListOutput, PathError> {
        list_directory(
            &self.ws,
            path,
            ListOptions {
                depth,
                include_hidden: hidden,
                max_entries: max,
            },
        )
    }

    fn search(&self, path: &str, opts: SearchOptions) -> Result<SearchOutput, PathError> {
        file_search(&self.ws, path, opts, &|| false)
    }
}

/// Compares a result with the expected value, or its error with the expected code.
fn check<T: Debug + PartialEq>(got: Result<T, PathError>, expect: Result<T, &str>) {
    let got = got.map_err(|e| {
        // Every message names the path and is lowercase at the start.
        let msg = e.to_string();
        assert!(msg.starts_with(|c: char| !c.is_uppercase()), "{msg}");
        e.code()
    });
    assert_eq!(got, expect);
}

fn read_out(
    content: &str,
    size: u64,
    lines: (u64, u64),
    total: Option<u64>,
    truncated: bool,
) -> ReadOutput {
    ReadOutput {
        path: String::new(),
        content: content.to_owned(),
        size,
        start_line: lines.0,
        end_line: lines.1,
        total_lines: total,
        truncated,
    }
}

fn with_path(mut r: ReadOutput, path: &str) -> ReadOutput {
    r.path = path.to_owned();
    r
}

#[test]
fn read_whole_files() {
    let f = Fixture::new();
    f.file("a.txt", "one\ntwo\nthree\n")
        .file("no_newline.txt", "one\ntwo")
        .file("empty.txt", "")
        .file("sub/deep.txt", "x\n");
    check(
        f.read("a.txt", None, None, 1000),
        Ok(with_path(
            read_out("one\ntwo\nthree\n", 14, (1, 3), Some(3), false),
            "a.txt",
        )),
    );
    check(
        f.read("no_newline.txt", None, None, 1000),
        Ok(with_path(
            read_out("one\ntwo", 7, (1, 2), Some(2), false),
            "no_newline.txt",
        )),
    );
    check(
        f.read("empty.txt", None, None, 1000),
        Ok(with_path(
            read_out("", 0, (1, 0), Some(0), false),
            "empty.txt",
        )),
    );
    let abs = format!("{}/sub/./deep.txt", f.root.display());
    check(
        f.read(&abs, None, None, 1000),
        Ok(with_path(
            read_out("x\n", 2, (1, 1), Some(1), false),
            "sub/deep.txt",
        )),
    );
}

#[test]
fn read_output_as_json_is_what_serialize_writes() {
    for out in [
        read_out("one\ntwo\n", 8, (1, 2), Some(2), false),
        read_out("a \"quoted\" é", 40, (3, 3), None, true),
    ] {
        let serialized = serde_json::to_string(&out).unwrap();
        assert_eq!(out.into_json().to_string(), serialized);
    }
}

#[test]
fn read_caps_at_max_bytes_on_a_character_boundary() {
    let f = Fixture::new();
    f.file("euro.txt", "ab€cd\nnext\n");
    // '€' is three bytes (2..5); a cap of 3 or 4 bytes would split it.
    for max in [3, 4] {
        check(
            f.read("euro.txt", None, None, max),
            Ok(with_path(
                read_out("ab", 13, (1, 1), None, true),
                "euro.txt",
            )),
        );
    }
    check(
        f.read("euro.txt", None, None, 5),
        Ok(with_path(
            read_out("ab€", 13, (1, 1), None, true),
            "euro.txt",
        )),
    );
    check(
        f.read("euro.txt", None, None, 13),
        Ok(with_path(
            read_out("ab€cd\nnext\n", 13, (1, 2), Some(2), false),
            "euro.txt",
        )),
    );
}

#[test]
fn read_line_ranges() {
    let f = Fixture::new();
    f.file("five.txt", "a\nb\nc\nd\ne\n");
    let cases = [
        (
            (Some(2), Some(3), 100),
            read_out("b\nc\n", 10, (2, 3), Some(5), false),
        ),
        (
            (Some(4), None, 100),
            read_out("d\ne\n", 10, (4, 5), Some(5), false),
        ),
        (
            (None, Some(1), 100),
            read_out("a\n", 10, (1, 1), Some(5), false),
        ),
        (
            (Some(5), Some(9), 100),
            read_out("e\n", 10, (5, 5), Some(5), false),
        ),
        (
            (Some(7), Some(9), 100),
            read_out("", 10, (7, 6), Some(5), false),
        ),
        (
            (Some(2), Some(4), 3),
            read_out("b\nc", 10, (2, 3), None, true),
        ),
        // Open-ended: the rest of each buffer is taken at once, and the cut still says which
        // line it fell in.
        ((Some(2), None, 3), read_out("b\nc", 10, (2, 3), None, true)),
        ((None, None, 4), read_out("a\nb\n", 10, (1, 2), None, true)),
        (
            (Some(5), None, 100),
            read_out("e\n", 10, (5, 5), Some(5), false),
        ),
        (
            (Some(7), None, 100),
            read_out("", 10, (7, 6), Some(5), false),
        ),
    ];
    for ((start, end, max), expect) in cases {
        check(
            f.read("five.txt", start, end, max),
            Ok(with_path(expect, "five.txt")),
        );
    }
    check(f.read("five.txt", Some(0), None, 100), Err("invalid_path"));
    check(
        f.read("five.txt", Some(3), Some(2), 100),
        Err("invalid_path"),
    );
}

#[test]
fn read_line_ranges_across_buffer_boundaries() {
    let f = Fixture::new();
    let text: String = (1..=20_000).map(|i| format!("line {i} é\n")).collect();
    f.file("big.txt", &text);
    let size = text.len() as u64;
    let out = f.read("big.txt", Some(15_000), Some(15_002), 1000).unwrap();
    assert_eq!(
        out,
        with_path(
            read_out(
                "line 15000 é\nline 15001 é\nline 15002 é\n",
                size,
                (15_000, 15_002),
                None,
                false
            ),
            "big.txt"
        )
    );
    let out = f.read("big.txt", Some(19_999), None, 1000).unwrap();
    assert_eq!(
        (out.content.as_str(), out.total_lines),
        ("line 19999 é\nline 20000 é\n", Some(20_000))
    );
    let whole = f.read("big.txt", None, None, size).unwrap();
    assert_eq!(
        (whole.content == text, whole.total_lines, whole.truncated),
        (true, Some(20_000), false)
    );
    // Cut in the second buffer, inside the `é` of line 7,778 (bytes 100,004 and 100,005): the
    // content stops before it.
    let cut = f.read("big.txt", None, None, 100_005).unwrap();
    let expect = &text[..100_004];
    assert_eq!(
        (
            cut.content.as_str(),
            cut.end_line,
            cut.total_lines,
            cut.truncated
        ),
        (expect, 7_778, None, true)
    );
    assert!(expect.ends_with("\nline 7778 "));
}

#[test]
fn read_refuses_binary_files() {
    let f = Fixture::new();
    let mut late_invalid = "x".repeat(70_000).into_bytes();
    late_invalid.push(0xff);
    f.file("nul.bin", b"abc\0def")
        .file("latin1.txt", b"caf\xe9\n")
        .file("late.bin", &late_invalid)
        .file("cut.txt", b"ends in the middle \xe2\x82");
    for p in ["nul.bin", "latin1.txt", "late.bin", "cut.txt"] {
        check(f.read(p, None, None, 1 << 20), Err("binary_file"));
    }
    // A NUL in the first 8 KiB marks the file binary even when the budget stops earlier.
    let mut nul_late = b"text ".repeat(1000);
    nul_late.push(0);
    f.file("nul_late.bin", &nul_late);
    check(f.read("nul_late.bin", None, None, 10), Err("binary_file"));
}

#[test]
fn read_refuses_what_is_not_a_regular_file() {
    let f = Fixture::new();
    f.dir("sub")
        .fifo("pipe")
        .file("target.txt", "t\n")
        .symlink("link.txt", "target.txt");
    check(f.read("sub", None, None, 100), Err("not_a_file"));
    check(f.read(".", None, None, 100), Err("not_a_file"));
    check(f.read("pipe", None, None, 100), Err("not_a_file"));
    check(f.read("missing.txt", None, None, 100), Err("not_found"));
    check(
        f.read("target.txt/x", None, None, 100),
        Err("not_a_directory"),
    );
    // A relative symlink that stays inside is followed.
    check(
        f.read("link.txt", None, None, 100),
        Ok(with_path(
            read_out("t\n", 2, (1, 1), Some(1), false),
            "link.txt",
        )),
    );
}

#[test]
fn write_create_overwrite_append() {
    let f = Fixture::new();
    let w = |p: &str, c: &str, m: WriteMode| write_file(&f.ws, p, c, m, false);
    let out = |p: &str, n: u64, created: bool| WriteOutput {
        path: p.to_owned(),
        bytes_written: n,
        created,
    };
    check(
        w("new.txt", "hello\n", WriteMode::Create),
        Ok(out("new.txt", 6, true)),
    );
    check(
        w("new.txt", "again\n", WriteMode::Create),
        Err("already_exists"),
    );
    assert_eq!(f.content("new.txt"), "hello\n");
    check(
        w("new.txt", "replaced\n", WriteMode::Overwrite),
        Ok(out("new.txt", 9, false)),
    );
    assert_eq!(f.content("new.txt"), "replaced\n");
    check(
        w("new.txt", "more\n", WriteMode::Append),
        Ok(out("new.txt", 5, false)),
    );
    assert_eq!(f.content("new.txt"), "replaced\nmore\n");
    check(
        w("fresh.txt", "x", WriteMode::Append),
        Ok(out("fresh.txt", 1, true)),
    );
    check(
        w("other.txt", "é", WriteMode::Overwrite),
        Ok(out("other.txt", 2, true)),
    );
    assert_eq!(f.content("other.txt"), "é");
    // No temporary files are left behind.
    assert_eq!(f.names(), vec!["fresh.txt", "new.txt", "other.txt"]);
}

#[test]
fn overwrite_keeps_permissions_and_replaces_symlinks_themselves() {
    let f = Fixture::new();
    f.file("run.sh", "old")
        .file("target.txt", "target\n")
        .symlink("link.txt", "target.txt");
    std::fs::set_permissions(
        f.root.join("run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    write_file(&f.ws, "run.sh", "new", WriteMode::Overwrite, false).unwrap();
    let mode = std::fs::metadata(f.root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        (f.content("run.sh"), mode & 0o777),
        ("new".to_owned(), 0o750)
    );

    write_file(&f.ws, "link.txt", "replaced", WriteMode::Overwrite, false).unwrap();
    let link_meta = std::fs::symlink_metadata(f.root.join("link.txt")).unwrap();
    assert_eq!(
        (
            link_meta.is_file(),
            f.content("link.txt"),
            f.content("target.txt")
        ),
        (true, "replaced".to_owned(), "target\n".to_owned())
    );
}

#[test]
fn write_refusals() {
    let f = Fixture::new();
    f.dir("sub").file("plain.txt", "p");
    let w = |p: &str, m: WriteMode, parents: bool| {
        write_file(&f.ws, p, "x", m, parents).map(|o| o.created)
    };
    check(w("sub", WriteMode::Overwrite, false), Err("not_a_file"));
    check(w("sub", WriteMode::Append, false), Err("not_a_file"));
    check(w("sub", WriteMode::Create, false), Err("already_exists"));
    check(w(".", WriteMode::Overwrite, false), Err("invalid_path"));
    check(
        w("sub/..", WriteMode::Overwrite, false),
        Err("invalid_path"),
    );
    check(
        w("missing/x.txt", WriteMode::Create, false),
        Err("not_found"),
    );
    check(
        w("plain.txt/x.txt", WriteMode::Create, true),
        Err("not_a_directory"),
    );
    check(
        w("plain.txt/x.txt", WriteMode::Create, false),
        Err("not_a_directory"),
    );
    assert_eq!(f.names(), vec!["plain.txt", "sub"]);
}

#[test]
fn write_creates_missing_parents_when_asked() {
    let f = Fixture::new();
    f.dir("a");
    let out = write_file(&f.ws, "a/b/c/d.txt", "deep", WriteMode::Create, true).unwrap();
    assert_eq!(
        (out.path.as_str(), out.created, f.content("a/b/c/d.txt")),
        ("a/b/c/d.txt", true, "deep".to_owned())
    );
    // `..` inside the workspace is fine and resolved by the kernel.
    write_file(&f.ws, "x/../y/z.txt", "z", WriteMode::Append, true).unwrap();
    assert_eq!(f.content("y/z.txt"), "z");
    assert_eq!(f.names(), vec!["a", "x", "y"]);
}

#[test]
fn list_depth_hidden_and_limits() {
    let f = Fixture::new();
    f.file("b.txt", "12345")
        .file("a/inner.txt", "1")
        .file("a/deeper/x.txt", "")
        .file(".hidden", "h")
        .file(".git/config", "c")
        .file("a.txt", "")
        .symlink("link", "b.txt")
        .fifo("pipe");
    let e = |p: &str, kind: EntryKind, size: Option<u64>| DirEntry {
        path: p.to_owned(),
        kind,
        size,
    };
    let out = |entries: Vec<DirEntry>, truncated: bool| ListOutput {
        path: ".".to_owned(),
        entries,
        truncated,
    };
    check(
        f.list(".", 1, false, 100),
        Ok(out(
            vec![
                e("a", EntryKind::Directory, None),
                e("a.txt", EntryKind::File, Some(0)),
                e("b.txt", EntryKind::File, Some(5)),
                e("link", EntryKind::Symlink, None),
                e("pipe", EntryKind::Other, None),
            ],
            false,
        )),
    );
    check(
        f.list(".", 2, true, 100),
        Ok(out(
            vec![
                e(".git", EntryKind::Directory, None),
                e(".git/config", EntryKind::File, Some(1)),
                e(".hidden", EntryKind::File, Some(1)),
                e("a", EntryKind::Directory, None),
                e("a/deeper", EntryKind::Directory, None),
                e("a/inner.txt", EntryKind::File, Some(1)),
                e("a.txt", EntryKind::File, Some(0)),
                e("b.txt", EntryKind::File, Some(5)),
                e("link", EntryKind::Symlink, None),
                e("pipe", EntryKind::Other, None),
            ],
            false,
        )),
    );
    check(
        f.list(".", 3, false, 3),
        Ok(out(
            vec![
                e("a", EntryKind::Directory, None),
                e("a/deeper", EntryKind::Directory, None),
                e("a/deeper/x.txt", EntryKind::File, Some(0)),
            ],
            true,
        )),
    );
    check(
        f.list("a", 1, false, 100),
        Ok(ListOutput {
            path: "a".to_owned(),
            entries: vec![
                e("a/deeper", EntryKind::Directory, None),
                e("a/inner.txt", EntryKind::File, Some(1)),
            ],
            truncated: false,
        }),
    );
    // Exactly max_entries entries is not a truncation.
    assert!(!f.list("a", 1, false, 2).unwrap().truncated);
    check(f.list("b.txt", 1, false, 100), Err("not_a_directory"));
    check(f.list("nope", 1, false, 100), Err("not_found"));
}

#[test]
fn outputs_serialize_with_snake_case_fields_and_lowercase_kinds() {
    let list = ListOutput {
        path: ".".into(),
        entries: vec![DirEntry {
            path: "l".into(),
            kind: EntryKind::Symlink,
            size: None,
        }],
        truncated: false,
    };
    let delete = DeleteOutput {
        path: "f".into(),
        deleted_kind: EntryKind::File,
    };
    let search = SearchOutput {
        matches: vec![SearchMatch {
            path: "f".into(),
            line: Some(3),
            text: Some("t".into()),
        }],
        files_scanned: 1,
        truncated: false,
        cancelled: true,
    };
    let read = with_path(read_out("x", 1, (1, 1), Some(1), false), "f");
    let write = WriteOutput {
        path: "f".into(),
        bytes_written: 1,
        created: true,
    };
    assert_eq!(
        [
            serde_json::to_value(&list).unwrap(),
            serde_json::to_value(&delete).unwrap(),
            serde_json::to_value(&search).unwrap(),
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&write).unwrap(),
            serde_json::to_value(WriteMode::Overwrite).unwrap(),
        ],
        [
            json!({"path": ".", "entries": [{"path": "l", "kind": "symlink", "size": null}], "truncated": false}),
            json!({"path": "f", "deleted_kind": "file"}),
            json!({"matches": [{"path": "f", "line": 3, "text": "t"}], "files_scanned": 1, "truncated": false, "cancelled": true}),
            json!({"path": "f", "content": "x", "size": 1, "start_line": 1, "end_line": 1, "total_lines": 1, "truncated": false}),
            json!({"path": "f", "bytes_written": 1, "created": true}),
            json!("overwrite"),
        ]
    );
}

fn hit(path: &str, line: u64, text: &str) -> SearchMatch {
    SearchMatch {
        path: path.to_owned(),
        line: Some(line),
        text: Some(text.to_owned()),
    }
}

fn file_hit(path: &str) -> SearchMatch {
    SearchMatch {
        path: path.to_owned(),
        line: None,
        text: None,
    }
}

fn search_out(matches: Vec<SearchMatch>, files_scanned: u64, truncated: bool) -> SearchOutput {
    SearchOutput {
        matches,
        files_scanned,
        truncated,
        cancelled: false,
    }
}

fn search_fixture() -> Fixture {
    let f = Fixture::new();
    f.file("main.rs", "fn main() {\n    todo!()\n}\n")
        .file(
            "src/lib.rs",
            "// todo: docs\npub fn a() {}\n// TODO upper case\nlet todo = todo;\n",
        )
        .file("src/deep/mod.rs", "no match here\n")
        .file("src/notes.txt", "todo in a text file\n")
        .file("src/blob.bin", b"todo\0binary")
        .file(".hidden/secret.rs", "todo hidden\n")
        .symlink("linked.rs", "main.rs")
        .symlink("linked_dir", "src");
    f
}

#[test]
fn search_by_glob() {
    let f = search_fixture();
    let glob = |g: &str| SearchOptions {
        glob: Some(g.to_owned()),
        ..SearchOptions::default()
    };
    // Without '/', the glob matches the name at any depth; symlinks are not followed.
    check(
        f.search(".", glob("*.rs")),
        Ok(search_out(
            vec![
                file_hit("main.rs"),
                file_hit("src/deep/mod.rs"),
                file_hit("src/lib.rs"),
            ],
            5,
            false,
        )),
    );
    check(
        f.search(".", glob("src/*.rs")),
        Ok(search_out(vec![file_hit("src/lib.rs")], 5, false)),
    );
    check(
        f.search(".", glob("**/deep/*.rs")),
        Ok(search_out(vec![file_hit("src/deep/mod.rs")], 5, false)),
    );
    // Relative to the searched directory, shown relative to the root.
    check(
        f.search("src", glob("deep/*")),
        Ok(search_out(vec![file_hit("src/deep/mod.rs")], 4, false)),
    );
    check(
        f.search(
            ".",
            SearchOptions {
                include_hidden: true,
                ..glob("*.rs")
            },
        ),
        Ok(search_out(
            vec![
                file_hit(".hidden/secret.rs"),
                file_hit("main.rs"),
                file_hit("src/deep/mod.rs"),
                file_hit("src/lib.rs"),
            ],
            6,
            false,
        )),
    );
    check(f.search(".", glob("a[")), Err("invalid_path"));
    let e = f.search(".", glob("a[")).unwrap_err().to_string();
    assert!(e.starts_with("invalid \"a[\": not a valid glob: "), "{e}");
}

#[test]
fn search_by_content() {
    let f = search_fixture();
    let content = |c: &str| SearchOptions {
        content: Some(c.to_owned()),
        ..SearchOptions::default()
    };
    // Case-sensitive, one match per line, binary files skipped.
    check(
        f.search(".", content("todo")),
        Ok(search_out(
            vec![
                hit("main.rs", 2, "    todo!()"),
                hit("src/lib.rs", 1, "// todo: docs"),
                hit("src/lib.rs", 4, "let todo = todo;"),
                hit("src/notes.txt", 1, "todo in a text file"),
            ],
            5,
            false,
        )),
    );
    check(
        f.search(
            ".",
            SearchOptions {
                glob: Some("*.rs".into()),
                ..content("todo")
            },
        ),
        Ok(search_out(
            vec![
                hit("main.rs", 2, "    todo!()"),
                hit("src/lib.rs", 1, "// todo: docs"),
                hit("src/lib.rs", 4, "let todo = todo;"),
            ],
            5,
            false,
        )),
    );
    check(
        f.search(
            ".",
            SearchOptions {
                max_results: 2,
                ..content("todo")
            },
        ),
        Ok(search_out(
            vec![
                hit("main.rs", 2, "    todo!()"),
                hit("src/lib.rs", 1, "// todo: docs"),
            ],
            4,
            true,
        )),
    );
    check(
        f.search(
            ".",
            SearchOptions {
                max_file_bytes: 25,
                ..content("todo")
            },
        ),
        Ok(search_out(
            vec![hit("src/notes.txt", 1, "todo in a text file")],
            5,
            false,
        )),
    );
    check(f.search(".", content("")), Err("invalid_path"));
    check(f.search("main.rs", content("x")), Err("not_a_directory"));
}

#[test]
fn search_caps_long_lines_and_handles_crlf() {
    let f = Fixture::new();
    let long = format!(
        "{}needle{}\r\nsecond needle\r\n",
        "é".repeat(300),
        "x".repeat(600)
    );
    f.file("long.txt", &long);
    let out = f
        .search(
            ".",
            SearchOptions {
                content: Some("needle".into()),
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let texts: Vec<(u64, usize)> = out
        .matches
        .iter()
        .map(|m| (m.line.unwrap(), m.text.as_ref().unwrap().len()))
        .collect();
    // 250 two-byte characters fit in 500 bytes.
    assert_eq!(texts, vec![(1, 500), (2, 13)]);
    assert_eq!(out.matches[1].text.as_deref(), Some("second needle"));
}

#[test]
fn search_stops_when_cancelled() {
    let f = search_fixture();
    let seen = std::cell::Cell::new(0);
    let out = file_search(&f.ws, ".", SearchOptions::default(), &|| {
        seen.set(seen.get() + 1);
        seen.get() > 2
    })
    .unwrap();
    assert_eq!(
        out,
        SearchOutput {
            matches: vec![file_hit("main.rs"), file_hit("src/blob.bin")],
            files_scanned: 2,
            truncated: false,
            cancelled: true,
        }
    );
}

#[test]
fn delete_files_and_symlinks_only() {
    let f = Fixture::new();
    f.file("a.txt", "a")
        .file("target.txt", "t")
        .symlink("link", "target.txt")
        .symlink("dangling", "nowhere")
        .dir("sub")
        .fifo("pipe");
    let d = |p: &str| delete_file(&f.ws, p);
    let out = |p: &str, kind| DeleteOutput {
        path: p.to_owned(),
        deleted_kind: kind,
    };
    check(d("a.txt"), Ok(out("a.txt", EntryKind::File)));
    check(d("link"), Ok(out("link", EntryKind::Symlink)));
    check(d("dangling"), Ok(out("dangling", EntryKind::Symlink)));
    check(d("a.txt"), Err("not_found"));
    check(d("sub"), Err("not_a_file"));
    check(d("pipe"), Err("not_a_file"));
    check(d("."), Err("invalid_path"));
    check(d("sub/.."), Err("invalid_path"));
    check(d("target.txt/x"), Err("not_a_directory"));
    // The link is gone; its target is not.
    assert_eq!(f.names(), vec!["pipe", "sub", "target.txt"]);
    assert_eq!(f.content("target.txt"), "t");
}

#[test]
fn paths_in_a_second_root_are_shown_absolute() {
    let first = TempDir::new().unwrap();
    let second = TempDir::new().unwrap();
    let second_root = std::fs::canonicalize(second.path()).unwrap();
    std::fs::write(second_root.join("s.txt"), "second\n").unwrap();
    let ws = Workspace::open(&[first.path().to_owned(), second_root.clone()]).unwrap();
    let abs = format!("{}/s.txt", second_root.display());
    let out = read_file(&ws, &abs, ReadOptions::default()).unwrap();
    assert_eq!(
        (out.path.as_str(), out.content.as_str()),
        (abs.as_str(), "second\n")
    );
    let listed = list_directory(
        &ws,
        &second_root.display().to_string(),
        ListOptions::default(),
    )
    .unwrap();
    assert_eq!(listed.entries[0].path, abs);
    // A shown path can be used again.
    assert_eq!(
        read_file(&ws, &listed.entries[0].path, ReadOptions::default())
            .unwrap()
            .content,
        "second\n"
    );
    check(
        read_file(&ws, "s.txt", ReadOptions::default()).map(|o| o.content),
        Err("not_found"),
    );
}

#[test]
fn timing_of_small_operations() {
    // Not an assertion (time is measured in the benches); printed for a quick look with
    // `cargo test -- --nocapture`.
    let f = Fixture::new();
    f.file("four_k.txt", "x".repeat(4095) + "\n");
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let out = f.read("four_k.txt", None, None, 1 << 20).unwrap();
        assert_eq!(out.size, 4096);
    }
    eprintln!(
        "read_file of a 4 KiB file: {:?} per call (debug build)",
        t.elapsed() / n
    );
}

#[test]
fn search_for_text_spanning_a_line_break_terminates() {
    let f = Fixture::new();
    f.file("two.txt", "a\nb\na\nb\n");
    let out = f
        .search(
            ".",
            SearchOptions {
                content: Some("\nb".into()),
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        out.matches,
        vec![hit("two.txt", 1, "a"), hit("two.txt", 3, "a")]
    );
}

#[test]
fn paths_to_hide_finds_matches_anywhere_and_does_not_enter_hidden_directories() {
    let f = Fixture::new();
    f.file(".env", "a")
        .file("app/.env", "b")
        .file("app/main.rs", "c")
        .file("vault/inner/.env", "d")
        .symlink("link", "/etc");
    let root = f.root.display().to_string();
    let seen = std::cell::RefCell::new(Vec::new());
    let hidden = |p: &str| {
        seen.borrow_mut().push(p.to_owned());
        p.ends_with("/.env") || p.ends_with("/vault")
    };
    let got = paths_to_hide(&f.ws, 100, &hidden).unwrap();
    let expect: Vec<PathBuf> = [".env", "app/.env", "vault"]
        .iter()
        .map(|r| f.root.join(r))
        .collect();
    assert_eq!(got, HiddenPaths::Complete(expect));
    let seen = seen.borrow().clone();
    // Absolute paths; the symlink is reported, not followed; the hidden directory is not entered.
    assert!(seen.contains(&format!("{root}/link")), "{seen:?}");
    assert!(!seen.iter().any(|p| p.contains("/link/")), "{seen:?}");
    assert!(!seen.iter().any(|p| p.contains("/vault/")), "{seen:?}");
    // A walk cut short is reported as such, never as a shorter list.
    assert_eq!(
        paths_to_hide(&f.ws, 3, &hidden).unwrap(),
        HiddenPaths::TooMany { limit: 3 }
    );
}

#[test]
fn a_saved_download_never_replaces_a_file_and_cannot_leave_its_folder() {
    let f = Fixture::new();
    f.file("downloads/report.pdf", "old")
        .symlink("downloads/link.txt", "/etc/passwd");
    let first = save_new_file(&f.ws, "downloads", "report.pdf", b"new").unwrap();
    assert_eq!(first.path, "downloads/report (1).pdf");
    assert_eq!(f.content("downloads/report.pdf"), "old");
    assert_eq!(f.content("downloads/report (1).pdf"), "new");
    let second = save_new_file(&f.ws, "downloads", "report.pdf", b"newer").unwrap();
    assert_eq!(second.path, "downloads/report (2).pdf");
    // A symlink at the name is a taken name, not a way out.
    let linked = save_new_file(&f.ws, "downloads", "link.txt", b"x").unwrap();
    assert_eq!(linked.path, "downloads/link (1).txt");
    // The folder is made when missing; the file gets ordinary permissions.
    let made = save_new_file(&f.ws, "in/new", "run.sh", b"#!/bin/sh\n").unwrap();
    assert_eq!(made.path, "in/new/run.sh");
    let mode = std::fs::metadata(f.root.join("in/new/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7111, 0, "{mode:o}");
    for bad in ["", ".", "..", "a/b", "../x"] {
        let e = save_new_file(&f.ws, "downloads", bad, b"x").unwrap_err();
        assert_eq!(e.code(), "invalid_path", "{bad:?}: {e}");
    }
    let out = save_new_file(&f.ws, "../outside", "x", b"x").unwrap_err();
    assert!(!f.root.parent().unwrap().join("outside").exists(), "{out}");
}
