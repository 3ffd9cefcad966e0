//! Hosts, URLs and paths found in a tool call's arguments, normalized so that policy lists
//! (allowed/blocked domains, allowed/forbidden paths) match what the tool will actually reach rather
//! than how the agent happened to spell it.
//!
//! Design decisions:
//! - **One host parser.** Hosts go through the WHATWG host parser of the `url` crate, the one
//!   browsers implement: percent-decoding, UTS-46 (IDN to punycode, fullwidth to ASCII, lowercase)
//!   and every IPv4 spelling (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`). On top of it we drop a
//!   trailing dot, refuse empty labels, strip IPv6 zone ids and read IPv4-mapped IPv6
//!   (`::ffff:127.0.0.1`) as the IPv4 address it reaches. Opaque hosts of non-special schemes
//!   (`ssh://127.1/`) are re-parsed as domains so they cannot dodge that normalization.
//! - **Refuse what parsers disagree on.** Whitespace and control characters anywhere in a URL or host,
//!   and a backslash followed by `@` in an authority (`http://a.org\@b.com`: WHATWG reads host `a.org`,
//!   curl reads `b.com`), are errors; policy denies what it cannot read unambiguously.
//! - **Hostless URLs are errors** (`mailto:`, `data:`, `javascript:`, `file:`): there is no host to
//!   check, so policy should deny them. Input without a scheme (`example.com/x`, `localhost:8080`) is
//!   read as `http://`.
//! - **Domain patterns match on label boundaries** and named classes (`loopback`, `private`,
//!   `link-local`, `unspecified`, `ip`) cover IP literals; `loopback` also covers `localhost` and
//!   `*.localhost` (RFC 6761 reserves them). Other names are not resolved here: DNS answers are the
//!   runtime's job, which can call [`DomainList::first_match`] again with the resolved addresses.
//! - **Paths are normalized lexically**: home expansion, joining to a base directory, `.`/`..`/`//`.
//!   Symlinks are resolved by the runtime, which canonicalizes existing paths and asks again.
//! - **A path pattern covers what it names and everything beneath it**, as in `.gitignore`:
//!   `/etc` matches `/etc/passwd`, and a pattern without `/` (`*.pem`, `id_rsa`) matches a name at
//!   any depth.

pub mod egress;
mod host;
mod path;
#[cfg(test)]
mod tests;

pub use egress::{AddressClass, Egress, EgressLayer, EgressRefusal, classify};
pub use host::{DomainList, DomainPattern, Host, UrlTarget, parse_host, parse_url};
pub use path::{PathCase, PathList, expand_home, normalize_path};

/// Why a URL, host or pattern was refused. Messages quote the input (shortened if long) and say what
/// was wrong with it, because they reach agents and audit records verbatim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A URL argument could not be read, or has no network host.
    #[error("invalid url {input:?}: {reason}")]
    Url {
        /// The URL as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A host argument could not be read.
    #[error("invalid host {input:?}: {reason}")]
    Host {
        /// The host as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A domain list entry could not be compiled.
    #[error("invalid domain pattern {pattern:?}: {reason}")]
    DomainPattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A path list entry could not be compiled.
    #[error("invalid path pattern {pattern:?}: {reason}")]
    PathPattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Quotes untrusted input in an error without copying a megabyte-long argument into the audit log.
fn shown(input: &str) -> String {
    const MAX: usize = 200;
    match input.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &input[..cut]),
        None => input.to_owned(),
    }
}
