//! `read_file`: a text file, or a range of its lines, in one streaming pass.
//!
//! The file is opened non-blocking and checked with `fstat` on the opened descriptor before a
//! single byte is read, so a FIFO or device planted in the workspace is refused immediately
//! instead of blocking or producing endless data. Reading streams through one buffer sized to
//! the file (at most 64 KiB), checking for NUL bytes in the first 8 KiB and validating UTF-8 as it
//! goes, and stops as soon as the requested range or byte budget is filled.

use std::fs::File;
use std::io::{self, Read};

use rustix::fs::{FileType, Mode, OFlags};

use super::{BINARY_SNIFF, ReadOptions, ReadOutput, has_nul};
use crate::workspace::{PathError, Workspace, WsPath};

/// Upper bound of the read buffer.
const MAX_CHUNK: usize = 64 * 1024;
/// Lower bound of the read buffer.
const MIN_CHUNK: usize = 512;

/// Opens a regular file of the workspace for reading, beneath its root (no symlink leads out),
/// non-blocking and checked on the opened descriptor: a FIFO, device or directory is refused
/// before a byte is read. Returns the file and its size.
pub fn open_regular(ws: &Workspace, path: &str) -> Result<(File, u64), PathError> {
    open(ws, path).map(|(_, file, size)| (file, size))
}

/// The first and last line `opts` asks for (1-based, inclusive; the last `u64::MAX` for "to the
/// end"), refusing a line 0 and a range that ends before it starts.
pub(super) fn line_range(path: &str, opts: ReadOptions) -> Result<(u64, u64), PathError> {
    let start = opts.start_line.unwrap_or(1);
    if start == 0 {
        return Err(PathError::invalid(
            path,
            "start_line is 1-based, so it must be at least 1",
        ));
    }
    let end = opts.end_line.unwrap_or(u64::MAX);
    if end < start {
        return Err(PathError::invalid(
            path,
            format!("end_line {end} is before start_line {start}"),
        ));
    }
    Ok((start, end))
}

/// [`open_regular`], with the path as the workspace shows it.
pub(super) fn open_shown(ws: &Workspace, path: &str) -> Result<(String, File, u64), PathError> {
    open(ws, path).map(|(p, file, size)| (p.into_display(), file, size))
}

fn open(ws: &Workspace, path: &str) -> Result<(WsPath, File, u64), PathError> {
    let p = ws.resolve(path)?;
    let fd = ws
        .open_at(
            &p,
            OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| PathError::from_errno(e, path))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| PathError::io(path, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(PathError::NotAFile {
            path: path.to_owned(),
        });
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    Ok((p, File::from(fd), size))
}

/// Reads a UTF-8 text file from the workspace, whole or by lines, capped at `opts.max_bytes`.
pub fn read_file(ws: &Workspace, path: &str, opts: ReadOptions) -> Result<ReadOutput, PathError> {
    let (start, end) = line_range(path, opts)?;

    let (p, mut file, size) = open(ws, path)?;

    let max_bytes = usize::try_from(opts.max_bytes).unwrap_or(usize::MAX);
    let size_hint = usize::try_from(size).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; size_hint.saturating_add(1).clamp(MIN_CHUNK, MAX_CHUNK)];
    // A whole-file read usually returns the whole file; a range is usually a small part of it.
    let expected = if opts.start_line.is_none() && opts.end_line.is_none() {
        size_hint
    } else {
        size_hint.min(MAX_CHUNK)
    };
    let mut out: Vec<u8> = Vec::with_capacity(expected.min(max_bytes));
    let mut utf8 = Utf8Stream::default();
    let binary = || PathError::Binary {
        path: path.to_owned(),
    };

    let mut line = 1u64; // the line the next byte belongs to
    let mut offset = 0usize; // bytes read so far
    let mut last = start - 1; // the last line (partly) returned
    let mut ends_with_newline = false;
    let mut truncated = false;
    let mut eof = false;
    'read: loop {
        let n = match file.read(&mut buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(PathError::io(path, e)),
        };
        let chunk = &buf[..n];
        if offset < BINARY_SNIFF && has_nul(&chunk[..n.min(BINARY_SNIFF - offset)]) {
            return Err(binary());
        }
        if !utf8.feed(chunk) {
            return Err(binary());
        }
        offset += n;
        ends_with_newline = chunk.last() == Some(&b'\n');

        let mut pos = 0;
        while pos < n {
            if line >= start && end == u64::MAX {
                // Every line from here on is wanted (a whole file, or all from `start`): the rest
                // of the chunk is copied at once, up to the budget, and its newlines counted,
                // rather than line by line (which cost most of a small file's read).
                let rest = &chunk[pos..];
                let take = rest.len().min(max_bytes - out.len());
                let copied = &rest[..take];
                out.extend_from_slice(copied);
                let newlines = count_newlines(copied);
                if let Some(&final_byte) = copied.last() {
                    // The line the last copied byte belongs to.
                    last = line + newlines - u64::from(final_byte == b'\n');
                }
                if take < rest.len() {
                    truncated = true;
                    break 'read;
                }
                line += newlines;
                break;
            }
            if line > end {
                // If the rest of the file is already in memory, counting its lines is nearly
                // free; one more read confirms nothing was appended since the fstat.
                if offset as u64 >= size {
                    line += chunk[pos..].iter().filter(|&&b| b == b'\n').count() as u64;
                    eof = matches!(file.read(&mut buf), Ok(0));
                }
                break 'read;
            }
            let newline = chunk[pos..].iter().position(|&b| b == b'\n');
            let seg_end = newline.map_or(n, |i| pos + i + 1);
            if line >= start {
                let seg = &chunk[pos..seg_end];
                let room = max_bytes - out.len();
                if seg.len() > room {
                    out.extend_from_slice(&seg[..room]);
                    if room > 0 {
                        last = line;
                    }
                    truncated = true;
                    break 'read;
                }
                out.extend_from_slice(seg);
                last = line;
            }
            pos = seg_end;
            if newline.is_some() {
                line += 1;
            }
        }
    }
    if eof && !utf8.is_complete() {
        return Err(binary());
    }

    let content = match String::from_utf8(out) {
        Ok(s) => s,
        // The stream was valid UTF-8, so the only possible fault is a character cut by the byte
        // budget; drop its first bytes.
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| binary())?
        }
    };
    let total_lines = eof.then(|| match (offset, ends_with_newline) {
        (0, _) => 0,
        (_, true) => line - 1,
        (_, false) => line,
    });
    Ok(ReadOutput {
        path: p.into_display(),
        content,
        size,
        start_line: start,
        end_line: last,
        total_lines,
        truncated,
    })
}

/// The number of `\n` in `bytes`, summed in byte lanes so that it vectorizes.
fn count_newlines(bytes: &[u8]) -> u64 {
    // At most 255 per lane before it is widened, so no lane overflows.
    bytes
        .chunks(255)
        .map(|block| u64::from(block.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n'))))
        .sum()
}

/// Validates UTF-8 across chunk boundaries without copying the chunks.
#[derive(Default)]
struct Utf8Stream {
    pending: [u8; 4],
    len: usize,
}

impl Utf8Stream {
    /// Whether the bytes so far could still be valid UTF-8.
    fn feed(&mut self, mut chunk: &[u8]) -> bool {
        // First finish a character split by the previous chunk.
        while self.len > 0 {
            let Some((&b, rest)) = chunk.split_first() else {
                return true;
            };
            self.pending[self.len] = b;
            self.len += 1;
            chunk = rest;
            match std::str::from_utf8(&self.pending[..self.len]) {
                Ok(_) => self.len = 0,
                Err(e) if e.error_len().is_some() => return false,
                Err(_) if self.len == self.pending.len() => return false,
                Err(_) => {}
            }
        }
        match std::str::from_utf8(chunk) {
            Ok(_) => true,
            Err(e) if e.error_len().is_some() => false,
            Err(e) => {
                let tail = &chunk[e.valid_up_to()..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.len = tail.len();
                true
            }
        }
    }

    /// Whether no character is left unfinished.
    fn is_complete(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::Utf8Stream;

    /// Feeds `bytes` split at every possible point and checks the verdict is always `expect`.
    fn check(bytes: &[u8], expect: bool) {
        for split in 0..=bytes.len() {
            let mut s = Utf8Stream::default();
            let (a, b) = bytes.split_at(split);
            let ok = s.feed(a) && s.feed(b) && s.is_complete();
            assert_eq!(ok, expect, "{bytes:?} split at {split}");
        }
        // One byte at a time.
        let mut s = Utf8Stream::default();
        let ok = bytes.iter().all(|b| s.feed(std::slice::from_ref(b))) && s.is_complete();
        assert_eq!(ok, expect, "{bytes:?} byte by byte");
    }

    #[test]
    fn utf8_is_validated_across_chunk_boundaries() {
        check("plain ascii".as_bytes(), true);
        check("grüße — 日本語 🦀".as_bytes(), true);
        check(b"", true);
        check(&[0xff], false);
        check(&[b'a', 0xe2, 0x82], false); // cut short at the end
        check(&[0xe2, 0x41, 0x41], false); // lead byte without continuation
        check(&[0xf0, 0x9f, 0xa6, 0x80, 0x80], false); // stray continuation
        check(&[0xed, 0xa0, 0x80], false); // surrogate
    }
}
