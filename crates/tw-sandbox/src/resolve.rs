//! The policy engine's view of this host: which file a program name would run, and where a path
//! really leads. It answers with the same PATH search the sandbox uses to start a child, so an
//! exec allowlist entry is judged against the binary that would actually run, not a guess.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use tw_core::policy::Resolver;

use crate::process::{BASE_PATH, find_program};

/// Resolves programs on the sandbox's `PATH` and canonicalizes paths, remembering program
/// lookups (a policy load and every command-running call ask for the same few programs).
#[derive(Debug, Default)]
pub struct HostResolver {
    programs: Mutex<HashMap<String, Option<String>>>,
}

impl HostResolver {
    /// A resolver with an empty cache.
    pub fn new() -> Self {
        Self::default()
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
        canonical(Path::new(path))
    }
}

#[cfg(test)]
mod tests {
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
}
