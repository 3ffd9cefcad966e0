//! The config's `[databases.NAME]` sections: the databases `sql_query` may read, each by a short
//! name agents use. A database is a SQLite file (opened read-only) or a PostgreSQL URL, written
//! or, since it usually holds a password, named as an environment variable read when a query
//! runs; each has its row and time caps.
//!
//! Parsing stays pure like the rest of the config: a path is made absolute, a URL's scheme
//! checked, an environment variable only named; nothing is opened until a query runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::MAX_SHORT_NAME;

/// What `[databases]` says, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatabaseSettings {
    /// The databases, by name.
    pub databases: BTreeMap<String, Database>,
}

/// One `[databases.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    /// Where it is.
    pub source: DatabaseSource,
    /// The most rows one query returns.
    pub max_rows: u64,
    /// The longest one query may run.
    pub timeout_ms: u64,
}

/// Where a database is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseSource {
    /// A SQLite file (absolute).
    Sqlite(PathBuf),
    /// A PostgreSQL URL the config writes.
    Postgres(String),
    /// A PostgreSQL URL in an environment variable.
    PostgresFromEnv(String),
}

impl Database {
    /// The default row cap.
    pub const DEFAULT_MAX_ROWS: u64 = 1_000;
    /// The highest row cap the config may set.
    pub const MAX_ROWS: u64 = 100_000;
    /// The default time cap.
    pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
    /// The highest time cap the config may set: the tool's own time limit is above it.
    pub const MAX_TIMEOUT_MS: u64 = 60_000;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DatabaseDoc {
    sqlite: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    url_env: Option<Spanned<String>>,
    max_rows: Option<Spanned<u64>>,
    timeout_ms: Option<Spanned<u64>>,
}

type Failure = (usize, String);

/// Checks `[databases]`.
pub(super) fn settings(
    d: BTreeMap<Spanned<String>, DatabaseDoc>,
    base: &Path,
    home: Option<&Path>,
) -> Result<DatabaseSettings, Failure> {
    let mut s = DatabaseSettings::default();
    for (name, doc) in d {
        let n = name.get_ref();
        if !super::short_name(n) {
            return Err((
                name.span().start,
                format!(
                    "databases: {n:?} is not a database name (1 to {MAX_SHORT_NAME} lowercase \
                     letters, digits, '_' and '-', starting with a letter)"
                ),
            ));
        }
        let key = format!("databases.{n}");
        let source = match (doc.sqlite, doc.url, doc.url_env) {
            (Some(path), None, None) => {
                if path.get_ref().is_empty() {
                    return Err((path.span().start, format!("{key}.sqlite: an empty path")));
                }
                DatabaseSource::Sqlite(super::expand(path.get_ref(), base, home))
            }
            (None, Some(url), None) => {
                let ok = url::Url::parse(url.get_ref())
                    .is_ok_and(|u| matches!(u.scheme(), "postgres" | "postgresql"));
                if !ok {
                    return Err((
                        url.span().start,
                        format!("{key}.url: not a postgres:// or postgresql:// URL"),
                    ));
                }
                DatabaseSource::Postgres(url.into_inner())
            }
            (None, None, Some(env)) => {
                super::network::env_name(&env, &format!("{key}.url_env"))?;
                DatabaseSource::PostgresFromEnv(env.into_inner())
            }
            _ => {
                return Err((
                    name.span().start,
                    format!("{key}: set exactly one of sqlite, url and url_env"),
                ));
            }
        };
        let max_rows = bounded(doc.max_rows, Database::DEFAULT_MAX_ROWS, Database::MAX_ROWS)
            .map_err(|(at, m)| (at, format!("{key}.max_rows: {m}")))?;
        let timeout_ms = bounded(
            doc.timeout_ms,
            Database::DEFAULT_TIMEOUT_MS,
            Database::MAX_TIMEOUT_MS,
        )
        .map_err(|(at, m)| (at, format!("{key}.timeout_ms: {m}")))?;
        s.databases.insert(
            name.into_inner(),
            Database {
                source,
                max_rows,
                timeout_ms,
            },
        );
    }
    Ok(s)
}

/// A number from 1 to `max`, `default` when unset.
fn bounded(v: Option<Spanned<u64>>, default: u64, max: u64) -> Result<u64, Failure> {
    match v {
        None => Ok(default),
        Some(v) if (1..=max).contains(v.get_ref()) => Ok(v.into_inner()),
        Some(v) => Err((v.span().start, format!("must be from 1 to {max}"))),
    }
}
