//! The workspace: the set of directories file tools may touch, and the one place an agent-chosen
//! path string becomes something the kernel resolves.
//!
//! Attack model: the agent picks the path. It may use `..`, absolute paths, symlinks it finds (or
//! that a concurrently running tool creates), `/proc` magic links, and may swap a directory for a
//! symlink between a check and a use. The defence is to never check a path and then open it:
//! [`Workspace::open`] keeps an `O_PATH` descriptor per root, and every path is opened with
//! `openat2(root_fd, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel refuses any
//! resolution that would leave the root at the moment it happens. Operations then work on the
//! descriptors they got (`fstat`, `read`, `getdents`, and `*at` calls relative to a parent
//! directory descriptor obtained the same way).
//!
//! [`Workspace::resolve`] is only lexical: it picks the root and refuses what is obviously
//! outside (an absolute path under no root, `..` climbing above the root) so that those get a
//! precise answer without a system call. Everything else is left to the kernel.
//!
//! `RESOLVE_BENEATH` also refuses absolute symlinks that point back inside the root. That is
//! accepted: such links are refused as outside the workspace, which fails closed.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{Result, SandboxError};

/// How every agent-supplied path is resolved: never above the starting directory, never through
/// `/proc` magic links.
pub(crate) const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// How a single name inside an already-open directory is opened while walking: no symlinks at all.
pub(crate) const NO_SYMLINKS: ResolveFlags = BENEATH.union(ResolveFlags::NO_SYMLINKS);

/// `openat2` may fail with EAGAIN when a concurrent rename makes it unable to prove a `..` stayed
/// beneath the root; the documented answer is to retry.
const EAGAIN_RETRIES: u32 = 16;

/// Why a file operation was refused or failed. Messages name the path as the agent wrote it (or
/// as the workspace shows it), never the host path of a root the agent did not write itself.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path leaves the workspace, lexically or through a symlink.
    #[error("path {path:?} is outside the workspace")]
    OutsideWorkspace {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("{path:?} does not exist")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The path exists but is not a regular file (a directory, FIFO, device, socket, ...).
    #[error("{path:?} is not a regular file")]
    NotAFile {
        /// The path as given.
        path: String,
    },
    /// The path (or one of its parents) exists but is not a directory.
    #[error("{path:?} is not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// Something already exists where a new file was to be created.
    #[error("{path:?} already exists")]
    AlreadyExists {
        /// The path as given.
        path: String,
    },
    /// The path (or an option that goes with it) is malformed.
    #[error("invalid {path:?}: {reason}")]
    Invalid {
        /// The path, or other input, as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is not UTF-8 text.
    #[error("{path:?} is a binary file, not UTF-8 text")]
    Binary {
        /// The path as given.
        path: String,
    },
    /// A search pattern that is not a valid regular expression.
    #[error("{pattern:?} is not a valid regular expression: {reason}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is not valid text in the encoding it was read as.
    #[error("{path:?} is not {encoding} text: {reason} at byte {offset}")]
    Encoding {
        /// The path as given.
        path: String,
        /// The encoding's name.
        encoding: &'static str,
        /// Where the first offending byte is.
        offset: u64,
        /// What is there.
        reason: &'static str,
    },
    /// The file is larger than allowed.
    #[error("{path:?} is {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The operating system refused or failed the operation for another reason.
    #[error("cannot access {path:?}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl PathError {
    /// A stable machine-readable code for the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            PathError::OutsideWorkspace { .. } => "path_outside_workspace",
            PathError::NotFound { .. } => "not_found",
            PathError::NotAFile { .. } => "not_a_file",
            PathError::NotADirectory { .. } => "not_a_directory",
            PathError::AlreadyExists { .. } => "already_exists",
            PathError::Invalid { .. } => "invalid_path",
            PathError::Binary { .. } => "binary_file",
            PathError::Encoding { .. } => "encoding_error",
            PathError::Pattern { .. } => "invalid_pattern",
            PathError::TooLarge { .. } => "too_large",
            PathError::Io { .. } => "io_error",
        }
    }

    pub(crate) fn invalid(path: &str, reason: impl Into<String>) -> Self {
        PathError::Invalid {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: &str, source: impl Into<io::Error>) -> Self {
        PathError::Io {
            path: path.to_owned(),
            source: source.into(),
        }
    }

    /// Maps what the kernel said while resolving or opening `path`.
    pub(crate) fn from_errno(e: Errno, path: &str) -> Self {
        let path = path.to_owned();
        match e {
            // EXDEV: resolution would leave the root (`..`, an absolute or outward symlink).
            // ELOOP: a magic link, or a symlink where none is allowed. Both fail closed.
            Errno::XDEV | Errno::LOOP => PathError::OutsideWorkspace { path },
            Errno::NOENT => PathError::NotFound { path },
            Errno::NOTDIR => PathError::NotADirectory { path },
            Errno::EXIST => PathError::AlreadyExists { path },
            // EISDIR: a directory where a file was needed. ENXIO: a socket, or a FIFO opened for
            // writing with no reader.
            Errno::ISDIR | Errno::NXIO => PathError::NotAFile { path },
            Errno::NAMETOOLONG => PathError::Invalid {
                path,
                reason: "the path or one of its names is too long".to_owned(),
            },
            e => PathError::Io {
                path,
                source: e.into(),
            },
        }
    }
}

/// A path inside the workspace: which root, and the path relative to it. Only
/// [`Workspace::resolve`] makes one, so it never starts with `/` and never climbs above its root
/// lexically; whether it stays inside through symlinks is decided by the kernel when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPath {
    root: usize,
    rel: PathBuf,
    shown: String,
}

impl WsPath {
    /// The path as the workspace shows it: relative to its root with `/` separators (`.` for the
    /// root itself). Paths in a root other than the first are shown absolute, because that is
    /// the only form that resolves back to the same file.
    pub fn display(&self) -> String {
        self.shown.clone()
    }

    /// The path as the workspace shows it, without a copy.
    pub fn into_display(self) -> String {
        self.shown
    }

    /// The path as the workspace shows it, borrowed.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// Which root the path is in (an index into [`Workspace::roots`]).
    pub fn root_index(&self) -> usize {
        self.root
    }

    /// The path relative to its root (empty for the root itself).
    pub fn relative(&self) -> &Path {
        &self.rel
    }

    /// The containing directory and the final name, if the path ends in a name (not the root,
    /// not `..`).
    pub(crate) fn split_last(&self) -> Option<(WsPath, &OsStr)> {
        let Some(Component::Normal(name)) = self.rel.components().next_back() else {
            return None;
        };
        let parent = self.rel.parent().unwrap_or(Path::new("")).to_owned();
        let shown = match self.shown.rfind('/') {
            Some(0) => "/".to_owned(),
            Some(i) => self.shown[..i].to_owned(),
            None => ".".to_owned(),
        };
        Some((
            WsPath {
                root: self.root,
                rel: parent,
                shown,
            },
            name,
        ))
    }

    /// The path to hand to `openat2`: `.` for the root itself.
    fn kernel_path(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }
}

/// The configured workspace roots, each held open as a directory descriptor.
pub struct Workspace {
    roots: Vec<PathBuf>,
    fds: Vec<OwnedFd>,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// Opens the roots. Each must exist and be a directory. Roots are trusted configuration, so
    /// they are canonicalized here, once; agent paths never are.
    pub fn open(roots: &[PathBuf]) -> Result<Workspace> {
        if roots.is_empty() {
            return Err(SandboxError::WorkspaceRoot {
                path: PathBuf::new(),
                reason: "is missing: at least one workspace root is required".to_owned(),
            });
        }
        let mut canon = Vec::with_capacity(roots.len());
        let mut fds = Vec::with_capacity(roots.len());
        for root in roots {
            let fail = |reason: String| SandboxError::WorkspaceRoot {
                path: root.clone(),
                reason,
            };
            let path =
                std::fs::canonicalize(root).map_err(|e| fail(format!("cannot be used: {e}")))?;
            let fd = rustix::fs::open(
                &path,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                Errno::NOTDIR => fail("is not a directory".to_owned()),
                e => fail(format!("cannot be opened: {}", io::Error::from(e))),
            })?;
            canon.push(path);
            fds.push(fd);
        }
        Ok(Workspace { roots: canon, fds })
    }

    /// The roots, canonicalized. The first is where relative paths are resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Turns an agent's path into a root and a relative path, lexically. A relative path is in
    /// the first root; an absolute path must start with one of the roots (component by
    /// component, so `/work/rootX` is not inside `/work/root`; the longest matching root wins).
    /// `.` components are dropped; `..` components are kept for the kernel, except that a `..`
    /// that would climb above the root is refused here.
    pub fn resolve(&self, user_path: &str) -> std::result::Result<WsPath, PathError> {
        if user_path.is_empty() {
            return Err(PathError::invalid(user_path, "the path is empty"));
        }
        if user_path.contains('\0') {
            return Err(PathError::invalid(
                user_path,
                "the path contains a NUL byte",
            ));
        }
        let outside = || PathError::OutsideWorkspace {
            path: user_path.to_owned(),
        };
        let path = Path::new(user_path);
        let (root, rest) = if path.is_absolute() {
            self.roots
                .iter()
                .enumerate()
                .filter_map(|(i, r)| path.strip_prefix(r).ok().map(|rest| (i, r, rest)))
                .max_by_key(|(_, r, _)| r.components().count())
                .map(|(i, _, rest)| (i, rest))
                .ok_or_else(outside)?
        } else {
            (0, path)
        };

        let mut rel = PathBuf::new();
        let mut joined = String::with_capacity(user_path.len());
        let mut depth = 0usize;
        for c in rest.components() {
            let name = match c {
                Component::CurDir => continue,
                Component::ParentDir => {
                    depth = depth.checked_sub(1).ok_or_else(outside)?;
                    OsStr::new("..")
                }
                Component::Normal(name) => {
                    depth += 1;
                    name
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::invalid(user_path, "the path is malformed"));
                }
            };
            rel.push(name);
            if !joined.is_empty() {
                joined.push('/');
            }
            joined.push_str(&name.to_string_lossy());
        }
        let shown = if root == 0 {
            if joined.is_empty() {
                ".".to_owned()
            } else {
                joined
            }
        } else {
            let base = self.roots[root].display().to_string();
            match (base.trim_end_matches('/'), joined.is_empty()) {
                (_, true) => base,
                (trimmed, false) => format!("{trimmed}/{joined}"),
            }
        };
        Ok(WsPath { root, rel, shown })
    }

    /// Whether `path` is already the canonical path of something that exists: an absolute path
    /// under a root, written without `.`, `..` or empty names, that the kernel resolves beneath
    /// that root's descriptor through no symbolic link at all. One system call answers it
    /// (`openat2` with `O_PATH` and `RESOLVE_NO_SYMLINKS`, or `readlinkat` for a single name),
    /// where `realpath` reads every component from `/`: policy asks this of every path argument,
    /// so it is on every file call's path. `false` only means "not known this way": the caller
    /// then canonicalizes the general way.
    ///
    /// The root's own path is the one canonicalized when the workspace opened: roots are trusted
    /// configuration, and this is the directory every file tool opens beneath. Like `realpath`,
    /// the answer holds for the moment it is given; a link swapped in afterwards is seen by the
    /// next question, because nothing here is remembered between calls.
    pub fn is_canonical(&self, path: &str) -> bool {
        let Some((root, rel)) = self
            .roots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, path.strip_prefix(r.to_str()?)?)))
            .filter(|(_, rest)| rest.is_empty() || rest.starts_with('/'))
            .min_by_key(|(_, rest)| rest.len())
        else {
            return false;
        };
        let Some(rel) = rel.strip_prefix('/') else {
            return true; // the root itself
        };
        if rel.split('/').any(|name| matches!(name, "" | "." | "..")) {
            return false;
        }
        let dir = self.fds[root].as_fd();
        if !rel.contains('/') {
            // One name: `readlinkat` tells a symlink (it answers) from anything else (EINVAL)
            // and from nothing, in half the time of opening it.
            return matches!(
                rustix::fs::readlinkat(dir, rel, Vec::new()),
                Err(Errno::INVAL)
            );
        }
        openat2_beneath(
            dir,
            Path::new(rel),
            OFlags::PATH,
            Mode::empty(),
            NO_SYMLINKS,
        )
        .is_ok()
    }

    /// The descriptor of `p`'s root.
    pub(crate) fn root_fd(&self, p: &WsPath) -> BorrowedFd<'_> {
        self.fds[p.root].as_fd()
    }

    /// Opens `p` beneath its root.
    pub(crate) fn open_at(
        &self,
        p: &WsPath,
        flags: OFlags,
        mode: Mode,
    ) -> rustix::io::Result<OwnedFd> {
        openat2_beneath(self.root_fd(p), p.kernel_path(), flags, mode, BENEATH)
    }
}

/// `openat2` with close-on-exec and the EAGAIN retry.
pub(crate) fn openat2_beneath(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> rustix::io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, mode, resolve) {
            Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tempfile::TempDir;

    use super::*;

    struct Fixture {
        _dirs: TempDir,
        ws: Workspace,
        first: PathBuf,
        second: PathBuf,
    }

    fn fixture() -> Fixture {
        let dirs = TempDir::new().unwrap();
        let base = std::fs::canonicalize(dirs.path()).unwrap();
        let first = base.join("root");
        let second = base.join("other");
        std::fs::create_dir(&first).unwrap();
        std::fs::create_dir(&second).unwrap();
        std::fs::create_dir(base.join("rootx")).unwrap();
        let ws = Workspace::open(&[first.clone(), second.clone()]).unwrap();
        Fixture {
            _dirs: dirs,
            ws,
            first,
            second,
        }
    }

    /// Resolves `input` and compares (root, relative path, display) or the error code.
    fn check(f: &Fixture, input: &str, expect: std::result::Result<(usize, &str, &str), &str>) {
        let got =
            f.ws.resolve(input)
                .map(|p| {
                    (
                        p.root_index(),
                        p.relative().to_string_lossy().into_owned(),
                        p.display(),
                    )
                })
                .map_err(|e| e.code());
        let expect = expect.map(|(r, rel, shown)| (r, rel.to_owned(), shown.to_owned()));
        assert_eq!(got, expect, "resolving {input:?}");
    }

    #[test]
    fn relative_paths_are_in_the_first_root() {
        let f = fixture();
        check(&f, "a/b.txt", Ok((0, "a/b.txt", "a/b.txt")));
        check(&f, "./a//./b.txt", Ok((0, "a/b.txt", "a/b.txt")));
        check(&f, ".", Ok((0, "", ".")));
        check(&f, "a/../b", Ok((0, "a/../b", "a/../b")));
        check(&f, "a/..", Ok((0, "a/..", "a/..")));
    }

    #[test]
    fn absolute_paths_pick_their_root_component_wise() {
        let f = fixture();
        let first = f.first.display().to_string();
        let second = f.second.display().to_string();
        check(&f, &format!("{first}/a"), Ok((0, "a", "a")));
        check(&f, &first, Ok((0, "", ".")));
        check(&f, &format!("{first}/"), Ok((0, "", ".")));
        check(
            &f,
            &format!("{second}/x/y"),
            Ok((1, "x/y", &format!("{second}/x/y"))),
        );
        check(
            &f,
            &format!("{first}x/secret"),
            Err("path_outside_workspace"),
        );
        check(&f, "/etc/passwd", Err("path_outside_workspace"));
    }

    #[test]
    fn climbing_above_the_root_is_refused_lexically() {
        let f = fixture();
        let first = f.first.display().to_string();
        for input in [
            "..",
            "../secret",
            "a/../../secret",
            "./../x",
            "a/./../..",
            &format!("{first}/../rootx/secret"),
            &format!("{first}/a/../../x"),
        ] {
            check(&f, input, Err("path_outside_workspace"));
        }
    }

    #[test]
    fn empty_and_nul_paths_are_invalid() {
        let f = fixture();
        check(&f, "", Err("invalid_path"));
        check(&f, "a\0b", Err("invalid_path"));
    }

    #[test]
    fn split_last_needs_a_final_name() {
        let f = fixture();
        let p = f.ws.resolve("a/b/c.txt").unwrap();
        let (parent, name) = p.split_last().unwrap();
        assert_eq!(
            (parent.display(), parent.relative(), name),
            ("a/b".to_owned(), Path::new("a/b"), OsStr::new("c.txt"))
        );
        let (parent, _) = f.ws.resolve("c.txt").unwrap().split_last().unwrap();
        assert_eq!(parent.display(), ".");
        assert!(f.ws.resolve(".").unwrap().split_last().is_none());
        assert!(f.ws.resolve("a/..").unwrap().split_last().is_none());
    }

    #[test]
    fn roots_must_exist_and_be_directories() {
        let f = fixture();
        let file = f.first.join("file");
        std::fs::write(&file, "").unwrap();
        for (roots, reason) in [
            (vec![], "is missing"),
            (vec![f.first.join("missing")], "cannot be used"),
            (vec![file], "is not a directory"),
        ] {
            let e = Workspace::open(&roots).unwrap_err();
            assert!(
                matches!(&e, SandboxError::WorkspaceRoot { reason: r, .. } if r.starts_with(reason)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn errors_have_stable_codes() {
        let p = || "p".to_owned();
        let all = [
            PathError::OutsideWorkspace { path: p() },
            PathError::NotFound { path: p() },
            PathError::NotAFile { path: p() },
            PathError::NotADirectory { path: p() },
            PathError::AlreadyExists { path: p() },
            PathError::invalid("p", "r"),
            PathError::Binary { path: p() },
            PathError::TooLarge {
                path: p(),
                size: 2,
                limit: 1,
            },
            PathError::io("p", io::Error::other("x")),
        ];
        let codes: Vec<_> = all.iter().map(PathError::code).collect();
        assert_eq!(
            codes,
            vec![
                "path_outside_workspace",
                "not_found",
                "not_a_file",
                "not_a_directory",
                "already_exists",
                "invalid_path",
                "binary_file",
                "too_large",
                "io_error"
            ]
        );
        assert_eq!(
            all[0].to_string(),
            "path \"p\" is outside the workspace".to_owned()
        );
    }
}
