//! Decoding on real files: UTF-16 by its byte order mark and as asked, Latin-1, ASCII, each
//! giving the same lines and budget answers as a UTF-8 read; what an encoding cannot hold is
//! refused with its offset; a link out of the workspace and an oversized file are refused.

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::*;

fn utf16(text: &str, little: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if bom {
        out.extend(if little { [0xff, 0xfe] } else { [0xfe, 0xff] });
    }
    for u in text.encode_utf16() {
        out.extend(if little {
            u.to_le_bytes()
        } else {
            u.to_be_bytes()
        });
    }
    out
}

struct Fixture {
    _dir: TempDir,
    ws: Workspace,
}

impl Fixture {
    fn new(files: &[(&str, Vec<u8>)]) -> Self {
        let dir = TempDir::new().unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let ws = Workspace::open(&[dir.path().to_path_buf()]).unwrap();
        Self { _dir: dir, ws }
    }

    fn read(&self, path: &str, enc: Encoding, opts: ReadOptions) -> Result<ReadOutput, PathError> {
        read_decoded(&self.ws, path, opts, enc)
    }
}

const TEXT: &str = "Grüße, 世界\nline two 🎉\nthree\n";

#[test]
fn utf16_is_read_by_its_mark_or_as_asked_and_answers_like_utf8() {
    let f = Fixture::new(&[
        ("le-bom.txt", utf16(TEXT, true, true)),
        ("be-bom.txt", utf16(TEXT, false, true)),
        ("le.txt", utf16(TEXT, true, false)),
        ("be.txt", utf16(TEXT, false, false)),
        ("plain.txt", TEXT.as_bytes().to_vec()),
    ]);
    let all = ReadOptions::default();
    for (file, enc) in [
        ("le-bom.txt", Encoding::Utf16),
        ("be-bom.txt", Encoding::Utf16),
        ("le.txt", Encoding::Utf16),
        ("le-bom.txt", Encoding::Utf16Le),
        ("be.txt", Encoding::Utf16Be),
        ("be-bom.txt", Encoding::Utf16Be),
    ] {
        let out = f.read(file, enc, all).unwrap();
        assert_eq!(
            (out.content.as_str(), out.total_lines, out.truncated),
            (TEXT, Some(3), false),
            "{file} as {enc:?}"
        );
    }
    // Lines and the byte budget mean what they mean for UTF-8: the same answer.
    for opts in [
        ReadOptions {
            start_line: Some(2),
            end_line: Some(2),
            ..all
        },
        ReadOptions {
            max_bytes: 9,
            ..all
        },
        ReadOptions {
            start_line: Some(2),
            max_bytes: 12,
            ..all
        },
    ] {
        let decoded = f.read("le-bom.txt", Encoding::Utf16, opts).unwrap();
        let utf8 = crate::fs::read_file(&f.ws, "plain.txt", opts).unwrap();
        assert_eq!(
            (decoded.content, decoded.end_line, decoded.truncated),
            (utf8.content, utf8.end_line, utf8.truncated),
            "{opts:?}"
        );
    }
}

#[test]
fn latin1_and_ascii_and_what_they_cannot_hold() {
    let f = Fixture::new(&[
        ("latin.txt", b"caf\xe9 cr\xe8me\n".to_vec()),
        ("ascii.txt", b"plain\n".to_vec()),
        ("nul.txt", b"a\x00b".to_vec()),
        ("odd.txt", vec![0xff, 0xfe, b'a', 0, b'b']),
        ("surrogate.txt", vec![b'a', 0, 0x00, 0xd8, b'b', 0]),
    ]);
    let all = ReadOptions::default();
    assert_eq!(
        f.read("latin.txt", Encoding::Latin1, all).unwrap().content,
        "café crème\n"
    );
    assert_eq!(
        f.read("ascii.txt", Encoding::Ascii, all).unwrap().content,
        "plain\n"
    );
    let refused = |file: &str, enc: Encoding| match f.read(file, enc, all) {
        Err(e @ PathError::Encoding { .. }) => (e.code(), e.to_string()),
        other => panic!("{file} as {enc:?}: {other:?}"),
    };
    assert_eq!(
        refused("latin.txt", Encoding::Ascii),
        (
            "encoding_error",
            "\"latin.txt\" is not ascii text: a byte above 127 at byte 3".to_owned()
        )
    );
    assert_eq!(
        refused("nul.txt", Encoding::Latin1).1,
        "\"nul.txt\" is not latin-1 text: a NUL byte: this is a binary file at byte 1"
    );
    assert_eq!(
        refused("odd.txt", Encoding::Utf16).1,
        "\"odd.txt\" is not utf-16 text: an odd number of bytes at byte 4"
    );
    assert_eq!(
        refused("surrogate.txt", Encoding::Utf16Le).1,
        "\"surrogate.txt\" is not utf-16le text: an unpaired surrogate at byte 2"
    );
}

#[test]
fn a_link_out_and_an_oversized_file_are_refused() {
    let f = Fixture::new(&[]);
    let root = &f.ws.roots()[0];
    std::os::unix::fs::symlink("/etc/passwd", root.join("out.txt")).unwrap();
    let all = ReadOptions::default();
    assert!(matches!(
        f.read("out.txt", Encoding::Latin1, all),
        Err(PathError::OutsideWorkspace { .. })
    ));
    let big = std::fs::File::create(root.join("big.txt")).unwrap();
    big.set_len(MAX_DECODED_FILE + 1).unwrap();
    assert!(matches!(
        f.read("big.txt", Encoding::Latin1, all),
        Err(PathError::TooLarge { .. })
    ));
}
