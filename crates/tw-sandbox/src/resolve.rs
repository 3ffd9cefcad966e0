//! The policy engine's view of this host: which file a program name would run, and where a path
//! really leads. It answers with the same PATH search the sandbox uses to start a child, so an
//! exec allowlist entry is judged against the binary that would actually run, not a guess.
//!
//! Paths are never remembered: what a path names can change under us (a file swapped for a
//! symlink between two calls must be judged as the link the second time). What makes asking
//! cheap is the workspace: a path beneath a root that leads through no symlink is its own
//! canonical form, which one `openat2` beneath the root's descriptor proves
//! ([`Workspace::is_canonical`]), where `realpath` reads every component from `/`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tw_core::policy::Resolver;

use crate::process::{BASE_PATH, find_program};
use crate::workspace::Workspace;

/// Resolves programs on the sandbox's `PATH` and canonicalizes paths, remembering program
/// lookups (a policy load and every command-running call ask for the same few programs).
#[derive(Debug, Default)]
pub struct HostResolver {
    programs: Mutex<HashMap<String, Option<String>>>,
    /// Where paths are first checked beneath a root's descriptor (see the module docs).
    workspace: Option<Arc<Workspace>>,
}

impl HostResolver {
    /// A resolver with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A resolver that answers for paths beneath `workspace`'s roots with one system call.
    pub fn beneath(workspace: Arc<Workspace>) -> Self {
        Self {
            programs: Mutex::default(),
            workspace: Some(workspace),
        }
    }
}

fn canonical(path: &Path) -> Option<String> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned))
}

impl Resolver for HostResolver {
    fn resolve(&self, program: &str) -> Option<String> {
        if program.contains('/') {
            // Paths are not cached: what a path names can change under us.
            let meta = std::fs::metadata(program).ok()?;
            return (meta.is_file())
                .then(|| canonical(Path::new(program)))
                .flatten();
        }
        let mut cache = self
            .programs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.get(program) {
            return hit.clone();
        }
        let found = find_program(program, BASE_PATH, Path::new("/"))
            .ok()
            .and_then(|p| canonical(&p));
        cache.insert(program.to_owned(), found.clone());
        found
    }

    fn canonicalize(&self, path: &str) -> Option<String> {
        if self
            .workspace
            .as_ref()
            .is_some_and(|ws| ws.is_canonical(path))
        {
            return Some(path.to_owned());
        }
        canonical(Path::new(path))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn names_paths_and_links_resolve_to_the_file_that_would_run() {
        let r = HostResolver::new();
        let sh = r.resolve("sh").unwrap();
        assert!(sh.starts_with('/'), "{sh}");
        // /bin is a link to /usr/bin on merged-/usr systems; both spellings are one file.
        assert_eq!(r.resolve("/bin/sh"), Some(sh.clone()));
        assert_eq!(r.resolve("/usr/bin/sh"), Some(sh));
        assert_eq!(r.resolve("no-such-program-here"), None);
        assert_eq!(r.resolve("/etc"), None, "a directory is not a program");
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("innocent");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(r.canonicalize(link.to_str().unwrap()), canonical(&target));
        assert_eq!(r.canonicalize("/no/such/path"), None);
    }

    /// The fast answer for paths beneath a root must be realpath's answer, asked afresh every
    /// time: `paths` are checked with both resolvers against `expect` (relative to the
    /// temporary directory holding the root `ws` and the outside directory `out`).
    fn check(base: &Path, beneath: &HostResolver, paths: &[(&str, Option<&str>)]) {
        let plain = HostResolver::new();
        let at = |rel: &str| format!("{}/{rel}", base.display());
        let got: Vec<_> = paths
            .iter()
            .map(|(p, _)| {
                let p = at(p);
                (beneath.canonicalize(&p), plain.canonicalize(&p))
            })
            .collect();
        let expect: Vec<_> = paths.iter().map(|(_, e)| (e.map(at), e.map(at))).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn paths_beneath_a_root_are_canonical_only_while_no_link_is_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["ws/sub", "out/keys"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        for f in [
            "ws/notes.txt",
            "ws/sub/a.txt",
            "out/secret",
            "out/keys/a.txt",
        ] {
            std::fs::write(base.join(f), "x").unwrap();
        }
        let ws = Arc::new(Workspace::open(&[base.join("ws")]).unwrap());
        let r = HostResolver::beneath(ws);
        check(
            &base,
            &r,
            &[
                ("ws", Some("ws")),
                ("ws/sub", Some("ws/sub")),
                ("ws/notes.txt", Some("ws/notes.txt")),
                ("ws/sub/a.txt", Some("ws/sub/a.txt")),
                ("ws/missing.txt", None),
                ("ws/sub/../notes.txt", Some("ws/notes.txt")),
                ("wsx/notes.txt", None),
            ],
        );
        // Between two calls, the file becomes a link out and the directory a link elsewhere:
        // the next answers follow them.
        std::fs::remove_file(base.join("ws/notes.txt")).unwrap();
        std::os::unix::fs::symlink(base.join("out/secret"), base.join("ws/notes.txt")).unwrap();
        std::fs::remove_dir_all(base.join("ws/sub")).unwrap();
        std::os::unix::fs::symlink("../out/keys", base.join("ws/sub")).unwrap();
        check(
            &base,
            &r,
            &[
                ("ws/notes.txt", Some("out/secret")),
                ("ws/sub/a.txt", Some("out/keys/a.txt")),
                ("ws/sub", Some("out/keys")),
            ],
        );
    }
}
