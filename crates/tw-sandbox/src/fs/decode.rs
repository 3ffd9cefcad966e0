//! `read_file` for text that is not UTF-8: UTF-16 (by its byte order mark, or little- or
//! big-endian as asked), Latin-1 and ASCII, decoded into UTF-8 before lines are chosen and the
//! byte budget applied, so an agent gets the same answer as for a UTF-8 file. The file is opened
//! like every workspace file ([`super::read::open_regular`]) and read whole, so it is refused
//! above [`MAX_DECODED_FILE`]. A byte the encoding cannot hold is refused with its offset.

use std::io::Read;

use super::{BINARY_SNIFF, ReadOptions, ReadOutput, has_nul};
use crate::workspace::{PathError, Workspace};

/// The largest file decoded (UTF-8 files are streamed and have no such limit).
pub const MAX_DECODED_FILE: u64 = 32 << 20;

/// A text encoding other than UTF-8 that [`read_decoded`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-16 with a byte order mark saying which; little-endian without one (as Windows
    /// writes it).
    Utf16,
    /// UTF-16, little-endian (a byte order mark, if any, is dropped).
    Utf16Le,
    /// UTF-16, big-endian (a byte order mark, if any, is dropped).
    Utf16Be,
    /// ISO 8859-1: every byte is the character of the same number.
    Latin1,
    /// 7-bit ASCII: a byte above 127 is an error.
    Ascii,
}

impl Encoding {
    /// The encoding's name as the tools write it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf16 => "utf-16",
            Encoding::Utf16Le => "utf-16le",
            Encoding::Utf16Be => "utf-16be",
            Encoding::Latin1 => "latin-1",
            Encoding::Ascii => "ascii",
        }
    }
}

/// Reads a text file in `encoding` from the workspace, whole or by lines, decoded to UTF-8 and
/// capped at `opts.max_bytes` of it.
pub fn read_decoded(
    ws: &Workspace,
    path: &str,
    opts: ReadOptions,
    encoding: Encoding,
) -> Result<ReadOutput, PathError> {
    let (start, end) = super::read::line_range(path, opts)?;
    let (shown, file, size) = super::read::open_shown(ws, path)?;
    let too_large = |size| PathError::TooLarge {
        path: path.to_owned(),
        size,
        limit: MAX_DECODED_FILE,
    };
    if size > MAX_DECODED_FILE {
        return Err(too_large(size));
    }
    let mut raw = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_DECODED_FILE + 1)
        .read_to_end(&mut raw)
        .map_err(|e| PathError::io(path, e))?;
    if raw.len() as u64 > MAX_DECODED_FILE {
        return Err(too_large(raw.len() as u64));
    }
    let text = decode(&raw, encoding).map_err(|(offset, reason)| PathError::Encoding {
        path: path.to_owned(),
        encoding: encoding.name(),
        offset,
        reason,
    })?;
    let (content, last, truncated) = lines(&text, start, end, opts.max_bytes);
    let total = if text.is_empty() {
        0
    } else {
        text.split_inclusive('\n').count() as u64
    };
    Ok(ReadOutput {
        path: shown,
        content,
        size,
        start_line: start,
        end_line: last,
        total_lines: Some(total),
        truncated,
    })
}

/// `raw` as text, or the byte offset of the first thing `encoding` cannot hold and why.
fn decode(raw: &[u8], encoding: Encoding) -> Result<String, (u64, &'static str)> {
    match encoding {
        Encoding::Ascii | Encoding::Latin1 if has_nul(&raw[..raw.len().min(BINARY_SNIFF)]) => {
            let at = raw.iter().position(|b| *b == 0).unwrap_or(0);
            Err((at as u64, "a NUL byte: this is a binary file"))
        }
        Encoding::Ascii => match raw.iter().position(|b| *b > 0x7f) {
            Some(at) => Err((at as u64, "a byte above 127")),
            // Every byte is below 128, so every byte is its own character.
            None => Ok(raw.iter().map(|&b| char::from(b)).collect()),
        },
        Encoding::Latin1 => Ok(raw.iter().map(|&b| char::from(b)).collect()),
        Encoding::Utf16 | Encoding::Utf16Le | Encoding::Utf16Be => {
            let (little, skip) = match (encoding, raw) {
                (Encoding::Utf16Be, [0xfe, 0xff, ..]) => (false, 2),
                (Encoding::Utf16Be, _) => (false, 0),
                (Encoding::Utf16Le | Encoding::Utf16, [0xff, 0xfe, ..]) => (true, 2),
                (Encoding::Utf16, [0xfe, 0xff, ..]) => (false, 2),
                _ => (true, 0),
            };
            let body = &raw[skip..];
            if body.len() % 2 == 1 {
                return Err(((raw.len() - 1) as u64, "an odd number of bytes"));
            }
            let units = body.chunks_exact(2).map(|p| {
                if little {
                    u16::from_le_bytes([p[0], p[1]])
                } else {
                    u16::from_be_bytes([p[0], p[1]])
                }
            });
            let mut text = String::with_capacity(body.len() / 2);
            let mut at = skip as u64;
            for c in char::decode_utf16(units) {
                match c {
                    Ok(c) => {
                        at += c.len_utf16() as u64 * 2;
                        text.push(c);
                    }
                    Err(_) => return Err((at, "an unpaired surrogate")),
                }
            }
            Ok(text)
        }
    }
}

/// Lines `start..=end` of `text` (with their endings), cut at `max_bytes` on a character
/// boundary; the last line (partly) returned, and whether the budget cut it.
fn lines(text: &str, start: u64, end: u64, max_bytes: u64) -> (String, u64, bool) {
    let budget = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut last = start - 1;
    for (n, line) in (1u64..).zip(text.split_inclusive('\n')) {
        if n < start {
            continue;
        }
        if n > end {
            break;
        }
        let room = budget - out.len();
        if line.len() > room {
            let mut cut = room;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&line[..cut]);
            if cut > 0 {
                last = n;
            }
            return (out, last, true);
        }
        out.push_str(line);
        last = n;
    }
    (out, last, false)
}

#[cfg(test)]
mod tests;
