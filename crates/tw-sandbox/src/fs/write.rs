//! `write_file` and `delete_file`: the operations that change the workspace.
//!
//! Both work on a descriptor of the containing directory, opened beneath the root, and then act on
//! a single name inside it (`renameat`, `unlinkat`, `mkdirat`, `openat2` with `O_EXCL`), so the
//! final name is never followed out of the workspace: a symlink there is replaced or removed
//! itself, never written through.
//!
//! Create and overwrite are atomic: the content goes to a fresh temporary file in the same
//! directory, is flushed with `fsync`, and is renamed into place (with `RENAME_NOREPLACE` for
//! create, so a concurrent creator cannot be clobbered). Readers see the old file or the new one,
//! never a half-written one.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::{DeleteOutput, EntryKind, WriteMode, WriteOutput};
use crate::workspace::{BENEATH, NO_SYMLINKS, PathError, Workspace, WsPath, openat2_beneath};

/// Permissions of a newly created file (before the umask).
const FILE_MODE: u32 = 0o644;
/// Permissions of a newly created directory (before the umask).
const DIR_MODE: u32 = 0o755;
/// Attempts at finding an unused temporary name.
const TEMP_ATTEMPTS: u32 = 16;

/// Distinguishes temporary files made by concurrent writes in this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `content` to a file in the workspace. With `create_parents`, missing directories on
/// the way are created, each one beneath the root.
pub fn write_file(
    ws: &Workspace,
    path: &str,
    content: &str,
    mode: WriteMode,
    create_parents: bool,
) -> Result<WriteOutput, PathError> {
    let p = ws.resolve(path)?;
    let Some((parent, name)) = p.split_last() else {
        return Err(PathError::invalid(path, "the path does not name a file"));
    };
    let dir = open_parent(ws, &parent, create_parents)?;
    let created = match mode {
        WriteMode::Append => append(ws, &p, &dir, name, content, path)?,
        WriteMode::Create | WriteMode::Overwrite => {
            replace(&dir, name, content.as_bytes(), mode, path)?
        }
    };
    Ok(WriteOutput {
        path: p.display(),
        bytes_written: content.len() as u64,
        created,
    })
}

/// The most names [`save_new_file`] tries (`name`, `name (1)`, ...) before it gives up.
const SAVE_ATTEMPTS: u32 = 100;

/// Saves `content` as a new file named `name` in the workspace folder `folder` (made, with its
/// parents, if missing), never replacing anything: when `name` is taken it tries `stem (1).ext`,
/// `stem (2).ext` and so on. `name` must be one plain component. The file gets ordinary
/// permissions (0644 before the umask), whatever the content.
pub fn save_new_file(
    ws: &Workspace,
    folder: &str,
    name: &str,
    content: &[u8],
) -> Result<WriteOutput, PathError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(PathError::invalid(
            name,
            "a file name must be one plain component",
        ));
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => name.split_at(i),
        _ => (name, ""),
    };
    for n in 0..SAVE_ATTEMPTS {
        let candidate = if n == 0 {
            name.to_owned()
        } else {
            format!("{stem} ({n}){ext}")
        };
        let path = format!("{}/{candidate}", folder.trim_end_matches('/'));
        let p = ws.resolve(&path)?;
        let Some((parent, leaf)) = p.split_last() else {
            return Err(PathError::invalid(&path, "the path does not name a file"));
        };
        let dir = open_parent(ws, &parent, true)?;
        match replace(&dir, leaf, content, WriteMode::Create, &path) {
            Ok(_) => {
                return Ok(WriteOutput {
                    path: p.display(),
                    bytes_written: content.len() as u64,
                    created: true,
                });
            }
            Err(PathError::AlreadyExists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(PathError::AlreadyExists {
        path: format!("{folder}/{name} (and {SAVE_ATTEMPTS} numbered names)"),
    })
}

/// Deletes a regular file or a symlink (the link itself, never its target). Directories and
/// other kinds are refused.
pub fn delete_file(ws: &Workspace, path: &str) -> Result<DeleteOutput, PathError> {
    let p = ws.resolve(path)?;
    let Some((parent, name)) = p.split_last() else {
        return Err(PathError::invalid(path, "the path does not name a file"));
    };
    let dir = open_parent(ws, &parent, false)?;
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| PathError::from_errno(e, path))?;
    let kind = EntryKind::of(FileType::from_raw_mode(st.st_mode));
    if !matches!(kind, EntryKind::File | EntryKind::Symlink) {
        return Err(PathError::NotAFile {
            path: path.to_owned(),
        });
    }
    // Without AT_REMOVEDIR this cannot remove a directory swapped in since the stat.
    rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| match e {
        Errno::ISDIR | Errno::PERM => PathError::NotAFile {
            path: path.to_owned(),
        },
        e => PathError::from_errno(e, path),
    })?;
    Ok(DeleteOutput {
        path: p.display(),
        deleted_kind: kind,
    })
}

/// Opens the directory `parent` beneath its root, creating it first if asked to.
fn open_parent(ws: &Workspace, parent: &WsPath, create: bool) -> Result<OwnedFd, PathError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    match ws.open_at(parent, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if create => create_dirs(ws, parent),
        Err(e) => Err(PathError::from_errno(e, parent.shown())),
    }
}

/// Creates the missing directories of `parent` one at a time. Each step opens the prefix so far
/// beneath the root and creates the next name inside that descriptor, so a symlinked directory
/// on the way that points out of the workspace is refused, not created through.
fn create_dirs(ws: &Workspace, parent: &WsPath) -> Result<OwnedFd, PathError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let root = ws.root_fd(parent);
    let shown = parent.shown();
    let mut current = openat2_beneath(root, Path::new("."), flags, Mode::empty(), BENEATH)
        .map_err(|e| PathError::from_errno(e, shown))?;
    let mut prefix = PathBuf::new();
    for component in parent.relative().components() {
        prefix.push(component);
        let open = || openat2_beneath(root, &prefix, flags, Mode::empty(), BENEATH);
        current = match open() {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                let name = component.as_os_str();
                match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(DIR_MODE)) {
                    // Someone else made it meanwhile: fine, it is opened beneath the root next.
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(PathError::from_errno(e, shown)),
                }
                open().map_err(|e| PathError::from_errno(e, shown))?
            }
            Err(e) => return Err(PathError::from_errno(e, shown)),
        };
    }
    Ok(current)
}

/// Appends to the file at `p`, creating it if missing. Returns whether it was created.
fn append(
    ws: &Workspace,
    p: &WsPath,
    dir: &OwnedFd,
    name: &OsStr,
    content: &str,
    path: &str,
) -> Result<bool, PathError> {
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::NOCTTY | OFlags::NONBLOCK;
    let (fd, created) = match ws.open_at(p, flags, Mode::empty()) {
        Ok(fd) => (fd, false),
        Err(Errno::NOENT) => {
            let create = flags | OFlags::CREATE | OFlags::EXCL;
            let fd = openat2_beneath(
                dir.as_fd(),
                name.as_ref(),
                create,
                Mode::from_raw_mode(FILE_MODE),
                NO_SYMLINKS,
            )
            .map_err(|e| PathError::from_errno(e, path))?;
            (fd, true)
        }
        Err(e) => return Err(PathError::from_errno(e, path)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| PathError::io(path, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(PathError::NotAFile {
            path: path.to_owned(),
        });
    }
    File::from(fd)
        .write_all(content.as_bytes())
        .map_err(|e| PathError::io(path, e))?;
    Ok(created)
}

/// Writes a temporary file next to `name` and renames it into place. Returns whether nothing
/// existed at `name` before.
fn replace(
    dir: &OwnedFd,
    name: &OsStr,
    content: &[u8],
    mode: WriteMode,
    path: &str,
) -> Result<bool, PathError> {
    let existing = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(Errno::NOENT) => None,
        Err(e) => return Err(PathError::from_errno(e, path)),
    };
    let mut perm = FILE_MODE;
    if let Some(st) = &existing {
        match (mode, FileType::from_raw_mode(st.st_mode)) {
            (WriteMode::Create, _) => {
                return Err(PathError::AlreadyExists {
                    path: path.to_owned(),
                });
            }
            (_, FileType::Directory) => {
                return Err(PathError::NotAFile {
                    path: path.to_owned(),
                });
            }
            // Replacing a file keeps its permission bits (but never set-id bits).
            (_, FileType::RegularFile) => perm = st.st_mode & 0o777,
            _ => {}
        }
    }

    let (tmp_name, fd) = create_temp(dir, path)?;
    let result = fill_temp(fd, content, perm, path).and_then(|()| {
        let renamed = match mode {
            WriteMode::Create => rename_noreplace(dir, &tmp_name, name),
            _ => rustix::fs::renameat(dir, &tmp_name, dir, name),
        };
        renamed.map_err(|e| match e {
            Errno::EXIST => PathError::AlreadyExists {
                path: path.to_owned(),
            },
            Errno::ISDIR | Errno::NOTEMPTY => PathError::NotAFile {
                path: path.to_owned(),
            },
            e => PathError::from_errno(e, path),
        })
    });
    if result.is_err() {
        // Leave nothing behind; the original error is what matters.
        let _ = rustix::fs::unlinkat(dir, &tmp_name, AtFlags::empty());
    }
    result.map(|()| existing.is_none())
}

fn create_temp(dir: &OwnedFd, path: &str) -> Result<(String, OwnedFd), PathError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOCTTY;
    let mut last = Errno::EXIST;
    for _ in 0..TEMP_ATTEMPTS {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = format!(".tw-write-{}-{n}-{nanos:08x}.tmp", std::process::id());
        match openat2_beneath(
            dir.as_fd(),
            tmp.as_ref(),
            flags,
            Mode::from_raw_mode(FILE_MODE),
            NO_SYMLINKS,
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(PathError::from_errno(e, path)),
        }
    }
    Err(PathError::io(path, last))
}

fn fill_temp(fd: OwnedFd, content: &[u8], perm: u32, path: &str) -> Result<(), PathError> {
    if perm != FILE_MODE {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(perm)).map_err(|e| PathError::io(path, e))?;
    }
    let mut file = File::from(fd);
    file.write_all(content)
        .map_err(|e| PathError::io(path, e))?;
    file.sync_all().map_err(|e| PathError::io(path, e))
}

/// `renameat2(RENAME_NOREPLACE)`, or on file systems without it, a hard link (which also fails
/// if the name exists) followed by removing the temporary name.
fn rename_noreplace(dir: &OwnedFd, from: &str, to: &OsStr) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL) => {
            rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())?;
            rustix::fs::unlinkat(dir, from, AtFlags::empty())
        }
        r => r,
    }
}
