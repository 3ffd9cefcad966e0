//! The host as policy sees it. tw-core does no I/O, so finding a program on PATH or following a
//! symlink is the runtime's job, handed in as a [`Resolver`]. The layers that judge programs and
//! paths (`exec`, `args`) and the compiler all use it; it lives apart from them so that none of
//! them has to import another to know what a resolver is.

use std::fmt;
use std::sync::Arc;

/// What the policy needs to know about the host, supplied by the runtime (tw-core does no I/O).
pub trait Resolver: Send + Sync + fmt::Debug {
    /// The canonical absolute path of a program: a bare name is looked up on PATH, a path has its
    /// symlinks resolved. `None` if there is no such executable.
    fn resolve(&self, program: &str) -> Option<String>;
    /// The canonical path of an existing file or directory (symlinks resolved), `None` if it
    /// does not exist or cannot be seen.
    fn canonicalize(&self, path: &str) -> Option<String>;
}

/// A resolver that finds nothing: programs named by absolute path resolve to themselves, and
/// nothing is canonicalized. For tests and for hosts where files cannot be seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalResolver;

impl Resolver for LexicalResolver {
    fn resolve(&self, program: &str) -> Option<String> {
        program.starts_with('/').then(|| program.to_owned())
    }
    fn canonicalize(&self, _: &str) -> Option<String> {
        None
    }
}

/// The environment paths and programs are judged in.
#[derive(Debug, Clone)]
pub struct PolicyEnv {
    /// The home directory `~` and `$HOME` stand for.
    pub home: Option<String>,
    /// Where relative paths are relative to (the first workspace root).
    pub base: String,
    /// Finds programs and canonical paths.
    pub resolver: Arc<dyn Resolver>,
}

impl PolicyEnv {
    /// An environment with no view of the host (see [`LexicalResolver`]).
    pub fn lexical(base: &str, home: Option<&str>) -> Self {
        Self {
            home: home.map(str::to_owned),
            base: base.to_owned(),
            resolver: Arc::new(LexicalResolver),
        }
    }
}
