//! What is worked out from a spec before anything starts: the child's environment (with the
//! egress proxy's variables for a tool that has an egress port), the working directory's
//! checks, and the program, found the way `execvp` would in the child's `PATH`.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{BASE_PATH, EGRESS_PROXY_URL, ProcessSpec};
use crate::error::{Result, SandboxError};

/// The child's whole environment: the minimal base, then the spec's variables.
pub(super) fn child_env(spec: &ProcessSpec) -> Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    env.insert("PATH".to_owned(), BASE_PATH.to_owned());
    env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
    env.insert("HOME".to_owned(), spec.cwd.to_string_lossy().into_owned());
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains(['=', '\0']) {
            return Err(SandboxError::InvalidSpec(format!(
                "environment variable name {k:?} must be non-empty and contain neither '=' nor NUL"
            )));
        }
        if v.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "environment variable {k} contains a NUL byte"
            )));
        }
        env.insert(k.clone(), v.clone());
    }
    if spec.egress.is_some() {
        for k in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            env.insert(k.to_owned(), EGRESS_PROXY_URL.to_owned());
        }
        env.remove("NO_PROXY");
        env.remove("no_proxy");
        // Node reads the variables above only when told to (22.21 and 24 onwards).
        env.insert("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned());
    }
    Ok(env)
}

pub(super) fn check_cwd(cwd: &Path) -> Result<()> {
    let fail = |reason: String| SandboxError::WorkingDirectory {
        path: cwd.to_owned(),
        reason,
    };
    if !cwd.is_absolute() {
        return Err(fail("must be an absolute path".to_owned()));
    }
    match std::fs::metadata(cwd) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail("is not a directory".to_owned())),
        Err(e) => Err(fail(format!("cannot be used: {e}"))),
    }
}

/// Finds `program` the way `execvp` would, but in the child's `PATH` rather than ours.
pub(crate) fn find_program(program: &str, path_var: &str, cwd: &Path) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program name is empty",
        ));
    }
    if program.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program name contains a NUL byte",
        ));
    }
    if program.contains('/') {
        // The kernel reports a missing or non-executable path itself, at spawn.
        return Ok(cwd.join(program));
    }
    let mut not_executable = None;
    // An empty PATH entry would mean the working directory, which an agent may be able to
    // write to; it is skipped.
    for dir in path_var.split(':').filter(|d| d.starts_with('/')) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
        {
            if meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
            not_executable.get_or_insert(candidate);
        }
    }
    Err(match not_executable {
        Some(p) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not executable", p.display()),
        ),
        None => io::Error::new(
            io::ErrorKind::NotFound,
            format!("not found in PATH {path_var}"),
        ),
    })
}
