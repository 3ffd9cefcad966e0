//! The workspace attack suite: an agent choosing path strings tries to read, write, list, search
//! or delete outside the root. Every attempt must be refused with the precise code, and the
//! secrets placed outside the root must never appear in any answer and must stay exactly as they
//! were.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use rustix::fs::{CWD, RenameFlags};
use tempfile::TempDir;

use super::*;
use crate::workspace::{PathError, Workspace};

const SECRET: &str = "TOP-SECRET outside the workspace\n";
const SIBLING_SECRET: &str = "TOP-SECRET in a sibling directory\n";

struct Fixture {
    _dir: TempDir,
    base: PathBuf,
    root: PathBuf,
    ws: Workspace,
}

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

impl Fixture {
    /// ```text
    /// base/outside/secret            the secret
    /// base/rootx/secret              a sibling whose name starts with the root's
    /// base/root/                     the workspace
    ///   a/inner.txt
    ///   a/link -> ../../outside      intermediate relative symlink out
    ///   link_file -> base/outside/secret
    ///   link_dir -> base/outside
    ///   rel_link_file -> ../outside/secret
    ///   rel_link_dir -> ../outside
    ///   abs_inside -> base/root/a/inner.txt   absolute, but pointing inside
    ///   devzero -> /dev/zero
    ///   proc_link -> /proc/self/root
    ///   rel_proc -> ../../../../../../../../proc/self/root
    ///   fifo
    /// ```
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        for d in ["outside", "rootx", "root/a"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("outside/secret"), SECRET).unwrap();
        std::fs::write(base.join("rootx/secret"), SIBLING_SECRET).unwrap();
        std::fs::write(root.join("a/inner.txt"), "inner\n").unwrap();
        symlink("../../outside", root.join("a/link"));
        symlink(base.join("outside/secret"), root.join("link_file"));
        symlink(base.join("outside"), root.join("link_dir"));
        symlink("../outside/secret", root.join("rel_link_file"));
        symlink("../outside", root.join("rel_link_dir"));
        symlink(root.join("a/inner.txt"), root.join("abs_inside"));
        symlink("/dev/zero", root.join("devzero"));
        symlink("/proc/self/root", root.join("proc_link"));
        symlink(
            "../../../../../../../../proc/self/root",
            root.join("rel_proc"),
        );
        rustix::fs::mkfifoat(
            CWD,
            root.join("fifo"),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        let ws = Workspace::open(std::slice::from_ref(&root)).unwrap();
        Self {
            _dir: dir,
            base,
            root,
            ws,
        }
    }

    fn abs(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base.display())
    }

    /// The secrets are unchanged and nothing was added next to them.
    fn assert_untouched(&self, what: &str) {
        for (dir, secret) in [("outside", SECRET), ("rootx", SIBLING_SECRET)] {
            let names: Vec<String> = std::fs::read_dir(self.base.join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, vec!["secret"], "{what}: {dir} was written to");
            let content = std::fs::read_to_string(self.base.join(dir).join("secret")).unwrap();
            assert_eq!(content, secret, "{what}: the {dir} secret changed");
        }
    }

    fn read(&self, path: &str) -> Result<ReadOutput, PathError> {
        read_file(&self.ws, path, ReadOptions::default())
    }
}

/// One attempt: it must fail with `code`, reveal no secret, and leave the outside untouched.
fn check<T: Debug>(f: &Fixture, what: &str, got: Result<T, PathError>, code: &str) {
    let shown = format!("{got:?}");
    assert!(!shown.contains("TOP-SECRET"), "{what}: leaked {shown}");
    match got {
        Ok(v) => panic!("{what}: expected {code}, got {v:?}"),
        Err(e) => assert_eq!(e.code(), code, "{what}: {e}"),
    }
    f.assert_untouched(what);
}

const OUT: &str = "path_outside_workspace";

#[test]
fn reads_that_try_to_escape() {
    let f = Fixture::new();
    let root = f.root.display().to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("dot-dot", "../outside/secret".into(), OUT),
        ("dot-dot after a name", "a/../../outside/secret".into(), OUT),
        ("hidden dot-dot", "./a/./../.././outside/secret".into(), OUT),
        ("many dot-dots", "a/b/../../../outside/secret".into(), OUT),
        ("bare dot-dot", "..".into(), OUT),
        ("absolute outside", f.abs("outside/secret"), OUT),
        (
            "absolute sibling with the root's prefix",
            f.abs("rootx/secret"),
            OUT,
        ),
        (
            "absolute climbing out of the root",
            format!("{root}/../outside/secret"),
            OUT,
        ),
        (
            "absolute climbing out from deeper",
            format!("{root}/a/../../rootx/secret"),
            OUT,
        ),
        ("absolute /etc", "/etc/passwd".into(), OUT),
        (
            "proc root",
            format!("/proc/self/root{}", f.abs("outside/secret")),
            OUT,
        ),
        ("proc cwd", "/proc/self/cwd/../outside/secret".into(), OUT),
        ("symlinked file, absolute", "link_file".into(), OUT),
        ("symlinked file, relative", "rel_link_file".into(), OUT),
        ("symlinked dir, absolute", "link_dir/secret".into(), OUT),
        ("symlinked dir, relative", "rel_link_dir/secret".into(), OUT),
        (
            "intermediate symlink then dot-dots",
            "a/link/../../outside/secret".into(),
            OUT,
        ),
        ("intermediate symlink", "a/link/secret".into(), OUT),
        ("absolute symlink pointing inside", "abs_inside".into(), OUT),
        ("symlink to /dev/zero", "devzero".into(), OUT),
        (
            "symlink to a proc magic link",
            format!("proc_link{}", f.abs("outside/secret")),
            OUT,
        ),
        (
            "relative symlink up to /proc",
            format!("rel_proc{}", f.abs("outside/secret")),
            OUT,
        ),
        ("empty", String::new(), "invalid_path"),
        (
            "nul",
            "a/inner.txt\0../../outside/secret".into(),
            "invalid_path",
        ),
        (
            "backslashes are names, not separators",
            "..\\outside\\secret".into(),
            "not_found",
        ),
        (
            "overlong name",
            "a/".to_owned() + &"x".repeat(300),
            "invalid_path",
        ),
    ];
    assert!(cases.len() >= 20);
    for (what, path, code) in &cases {
        let got = f.read(path);
        // Messages never show the root's host path to an agent that did not write it.
        if let Err(e) = &got
            && !path.starts_with('/')
        {
            assert!(!e.to_string().contains(&root), "{what}: {e}");
        }
        check(&f, what, got, code);
    }
    // The same paths through a line-range read, which takes the streaming path.
    for (what, path, code) in &cases {
        let opts = ReadOptions {
            start_line: Some(1),
            end_line: Some(5),
            max_bytes: 100,
        };
        check(&f, what, read_file(&f.ws, path, opts), code);
    }
}

#[test]
fn reading_a_fifo_is_refused_at_once() {
    let f = Fixture::new();
    let t = Instant::now();
    check(&f, "fifo", f.read("fifo"), "not_a_file");
    assert!(t.elapsed() < Duration::from_secs(2), "blocked on the fifo");
}

#[test]
fn writes_that_try_to_escape() {
    let f = Fixture::new();
    let w =
        |p: &str, mode: WriteMode, parents: bool| write_file(&f.ws, p, "pwned\n", mode, parents);
    for mode in [WriteMode::Create, WriteMode::Overwrite, WriteMode::Append] {
        for parents in [false, true] {
            let label = |what: &str| format!("{what} ({mode:?}, create_parents {parents})");
            check(
                &f,
                &label("dot-dot"),
                w("../outside/new", mode, parents),
                OUT,
            );
            check(
                &f,
                &label("absolute"),
                w(&f.abs("outside/new"), mode, parents),
                OUT,
            );
            check(
                &f,
                &label("sibling"),
                w(&f.abs("rootx/secret"), mode, parents),
                OUT,
            );
            check(
                &f,
                &label("symlinked parent"),
                w("link_dir/new", mode, parents),
                OUT,
            );
            check(
                &f,
                &label("symlinked parent, onto the secret"),
                w("rel_link_dir/secret", mode, parents),
                OUT,
            );
            check(
                &f,
                &label("new dirs under a symlinked parent"),
                w("link_dir/sub/new", mode, parents),
                OUT,
            );
            check(
                &f,
                &label("intermediate symlink"),
                w("a/link/new", mode, parents),
                OUT,
            );
            check(
                &f,
                &label("proc magic link"),
                w("proc_link/tmp/pwned", mode, parents),
                OUT,
            );
        }
    }
    // Appending follows a final symlink, beneath the root only.
    check(
        &f,
        "append through a symlinked file",
        w("link_file", WriteMode::Append, false),
        OUT,
    );
    check(
        &f,
        "append through a relative symlinked file",
        w("rel_link_file", WriteMode::Append, false),
        OUT,
    );
    check(
        &f,
        "create onto an existing symlink",
        w("link_file", WriteMode::Create, false),
        "already_exists",
    );
    check(
        &f,
        "write to a fifo",
        w("fifo", WriteMode::Append, false),
        "not_a_file",
    );

    // Overwriting a symlink replaces the link itself; the secret it pointed to is untouched.
    let out = w("link_file", WriteMode::Overwrite, false).unwrap();
    assert_eq!((out.path.as_str(), out.created), ("link_file", false));
    assert!(
        std::fs::symlink_metadata(f.root.join("link_file"))
            .unwrap()
            .is_file()
    );
    f.assert_untouched("overwrite of a symlink");
}

#[test]
fn listings_and_searches_do_not_follow_symlinks_out() {
    let f = Fixture::new();
    let list = |p: &str| {
        list_directory(
            &f.ws,
            p,
            ListOptions {
                depth: 8,
                include_hidden: true,
                max_entries: 1000,
            },
        )
    };
    check(&f, "list a symlinked dir", list("link_dir"), OUT);
    check(
        &f,
        "list a relative symlinked dir",
        list("rel_link_dir"),
        OUT,
    );
    check(
        &f,
        "list through an intermediate symlink",
        list("a/link"),
        OUT,
    );
    check(&f, "list the parent", list(".."), OUT);
    check(
        &f,
        "list an absolute outside dir",
        list(&f.abs("outside")),
        OUT,
    );
    check(&f, "list a sibling", list(&f.abs("rootx")), OUT);
    check(&f, "list through proc", list("proc_link/etc"), OUT);

    // A full recursive listing shows the links as links and nothing behind them.
    let all = list(".").unwrap();
    let paths: Vec<&str> = all.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "a",
            "a/inner.txt",
            "a/link",
            "abs_inside",
            "devzero",
            "fifo",
            "link_dir",
            "link_file",
            "proc_link",
            "rel_link_dir",
            "rel_link_file",
            "rel_proc",
        ]
    );
    assert!(
        all.entries
            .iter()
            .filter(|e| e.path.contains("link"))
            .all(|e| e.kind == EntryKind::Symlink)
    );

    let search = |p: &str, glob: Option<&str>, content: Option<&str>| {
        file_search(
            &f.ws,
            p,
            SearchOptions {
                glob: glob.map(str::to_owned),
                content: content.map(str::to_owned),
                regex: false,
                case_insensitive: false,
                include_hidden: true,
                max_results: 1000,
                max_file_bytes: 1 << 20,
            },
            &|| false,
        )
    };
    let found = search(".", None, Some("TOP-SECRET")).unwrap();
    assert_eq!((found.matches, found.files_scanned), (vec![], 1));
    let found = search(".", Some("**/secret"), None).unwrap();
    assert_eq!(found.matches, vec![]);
    check(
        &f,
        "search a symlinked dir",
        search("link_dir", None, Some("TOP")),
        OUT,
    );
    check(
        &f,
        "search the parent",
        search("..", None, Some("TOP")),
        OUT,
    );
    check(
        &f,
        "search an absolute outside dir",
        search(&f.abs("outside"), None, None),
        OUT,
    );
    f.assert_untouched("search");
}

#[test]
fn deletes_that_try_to_escape() {
    let f = Fixture::new();
    let d = |p: &str| delete_file(&f.ws, p);
    check(&f, "dot-dot", d("../outside/secret"), OUT);
    check(&f, "absolute", d(&f.abs("outside/secret")), OUT);
    check(&f, "sibling", d(&f.abs("rootx/secret")), OUT);
    check(&f, "symlinked parent", d("link_dir/secret"), OUT);
    check(
        &f,
        "relative symlinked parent",
        d("rel_link_dir/secret"),
        OUT,
    );
    check(&f, "intermediate symlink", d("a/link/secret"), OUT);
    check(&f, "the root itself", d("."), "invalid_path");
    check(&f, "the parent", d(".."), OUT);
    // Deleting a symlink removes the link, never its target.
    let out = d("link_file").unwrap();
    assert_eq!(out.deleted_kind, EntryKind::Symlink);
    assert!(!f.root.join("link_file").exists());
    d("link_dir").unwrap();
    f.assert_untouched("delete of symlinks");
}

/// Swaps `root/a` (a directory holding `secret`) with `root/b` (a symlink to the outside) as
/// fast as it can while this thread reads `a/secret` and writes `a/written`: no read may ever
/// return the outside, and no write may land there.
fn toctou_swap(absolute: bool) {
    let f = Fixture::new();
    let link_target = if absolute {
        f.abs("outside")
    } else {
        "../outside".to_owned()
    };
    std::fs::write(f.root.join("a/secret"), "inside\n").unwrap();
    symlink(&link_target, f.root.join("b"));
    let stop = AtomicBool::new(false);
    let (a, b) = (f.root.join("a"), f.root.join("b"));
    let mut outcomes: BTreeMap<String, u32> = BTreeMap::new();
    let mut swaps = 0u32;
    std::thread::scope(|s| {
        let swapper = s.spawn(|| {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).is_err() {
                    break;
                }
                n += 1;
            }
            n
        });
        // Nothing in this loop may panic: the swapper only stops when told to. Refused reads are
        // much faster than reads that go through, so most reads land while `a` is the symlink;
        // the loop runs until both cases have been seen often (or a generous budget runs out).
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in 0..200_000u32 {
            let seen = |k: &str| outcomes.get(k).copied().unwrap_or(0);
            if (seen("read inside") >= 300 && seen("read refused: path_outside_workspace") >= 300)
                || Instant::now() > deadline
            {
                break;
            }
            let read = match f.read("a/secret") {
                Ok(out) if out.content == "inside\n" => "read inside".to_owned(),
                Ok(out) => format!("LEAKED {:?}", out.content),
                Err(e) => format!("read refused: {}", e.code()),
            };
            *outcomes.entry(read).or_default() += 1;
            // Writes race the same swap, less often since they fsync.
            if i % 10 == 0 {
                let write = match write_file(&f.ws, "a/written", "w", WriteMode::Overwrite, false) {
                    Ok(_) => "write inside".to_owned(),
                    Err(e) => format!("write refused: {}", e.code()),
                };
                *outcomes.entry(write).or_default() += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        swaps = swapper.join().unwrap();
    });
    eprintln!("toctou ({link_target}): {swaps} swaps, {outcomes:?}");
    let kinds: BTreeSet<&str> = outcomes.keys().map(String::as_str).collect();
    let allowed: BTreeSet<&str> = [
        "read inside",
        "read refused: path_outside_workspace",
        "write inside",
        "write refused: path_outside_workspace",
    ]
    .into();
    assert!(kinds.is_subset(&allowed), "{outcomes:?}");
    // Both reads that went through and reads that were refused happened, so the race was real.
    assert!(
        kinds.contains("read inside") && kinds.contains("read refused: path_outside_workspace"),
        "{outcomes:?}"
    );
    f.assert_untouched("toctou");
}

#[test]
fn toctou_swap_with_an_absolute_symlink() {
    toctou_swap(true);
}

#[test]
fn toctou_swap_with_a_relative_symlink() {
    toctou_swap(false);
}
