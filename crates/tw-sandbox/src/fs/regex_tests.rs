//! Content search with ripgrep's engine: a regular expression, a literal regardless of case (its
//! punctuation still literal), one match a line with its number, the result cap, binary and
//! hidden files skipped as for a literal search; and patterns that would match across lines,
//! do not parse or compile too large are refused as invalid patterns, before any file is read.

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::*;
use crate::workspace::{PathError, Workspace};

fn workspace(files: &[(&str, &[u8])]) -> (TempDir, Workspace) {
    let dir = TempDir::new().unwrap();
    for (name, bytes) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    let ws = Workspace::open(&[dir.path().to_path_buf()]).unwrap();
    (dir, ws)
}

const FILES: &[(&str, &[u8])] = &[
    (
        "main.rs",
        b"fn main() {\n    let a.b = 1; // TODO: later\n}\n",
    ),
    (
        "src/lib.rs",
        b"pub fn parse(x: &str) {}\n// todo twice todo\nfn   spaced () {}\n",
    ),
    ("src/axb.txt", b"axb\n"),
    ("src/blob.bin", b"fn binary(\0)"),
    (".hidden/h.rs", b"fn hidden() {}\n"),
];

fn hits(
    ws: &Workspace,
    content: &str,
    regex: bool,
    ci: bool,
) -> Result<Vec<(String, u64, String)>, PathError> {
    let out = file_search(
        ws,
        ".",
        SearchOptions {
            content: Some(content.to_owned()),
            regex,
            case_insensitive: ci,
            ..SearchOptions::default()
        },
        &|| false,
    )?;
    Ok(out
        .matches
        .into_iter()
        .map(|m| (m.path, m.line.unwrap(), m.text.unwrap()))
        .collect())
}

fn hit(path: &str, line: u64, text: &str) -> (String, u64, String) {
    (path.to_owned(), line, text.to_owned())
}

#[test]
fn a_regular_expression_finds_each_matching_line_with_its_number() {
    let (_d, ws) = workspace(FILES);
    assert_eq!(
        hits(&ws, r"^\s*(pub )?fn\s+\w+\s*\(", true, false).unwrap(),
        [
            hit("main.rs", 1, "fn main() {"),
            hit("src/lib.rs", 1, "pub fn parse(x: &str) {}"),
            hit("src/lib.rs", 3, "fn   spaced () {}"),
        ]
    );
}

#[test]
fn a_literal_regardless_of_case_keeps_its_punctuation_literal() {
    let (_d, ws) = workspace(FILES);
    assert_eq!(
        hits(&ws, "todo", false, true).unwrap(),
        [
            hit("main.rs", 2, "    let a.b = 1; // TODO: later"),
            hit("src/lib.rs", 2, "// todo twice todo"),
        ]
    );
    assert_eq!(
        hits(&ws, "A.B", false, true).unwrap(),
        [hit("main.rs", 2, "    let a.b = 1; // TODO: later")],
        "the dot is a dot, not any character (axb.txt)"
    );
    assert_eq!(
        hits(&ws, "A.B", true, true).unwrap().len(),
        2,
        "as a regex it is not"
    );
}

#[test]
fn the_cap_holds() {
    let (_d, ws) = workspace(FILES);
    let out = file_search(
        &ws,
        ".",
        SearchOptions {
            content: Some("fn".into()),
            regex: true,
            max_results: 2,
            ..SearchOptions::default()
        },
        &|| false,
    )
    .unwrap();
    assert_eq!((out.matches.len(), out.truncated), (2, true));
}

#[test]
fn bad_patterns_are_refused_before_anything_is_read() {
    let (_d, ws) = workspace(FILES);
    for pattern in ["(unclosed", r"a\nb", r"(\w{100}){100}"] {
        match hits(&ws, pattern, true, false) {
            Err(e @ PathError::Pattern { .. }) => assert_eq!(e.code(), "invalid_pattern"),
            other => panic!("{pattern}: {other:?}"),
        }
    }
}
