//! What can go wrong with the store, in terms a person can act on.

use std::path::PathBuf;

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file exists but is not an SQLite database.
    #[error(
        "{path} is not a Toolwarden database (it is not SQLite); move it aside or choose another data directory"
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The database was written by a newer Toolwarden; opening it would risk damaging it.
    #[error(
        "{path} has schema version {found}, newer than this build supports ({supported}); upgrade Toolwarden to use it"
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Highest migration recorded in the file.
        found: i64,
        /// Highest migration this build knows.
        supported: i64,
    },
    /// The data directory or file could not be prepared.
    #[error("cannot prepare {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Bringing the schema up to date failed.
    #[error("cannot migrate {path}: {cause}")]
    Migrate {
        /// The file.
        path: PathBuf,
        /// The cause (in the message, not chained: it would print twice).
        cause: sqlx::migrate::MigrateError,
    },
    /// The writer has stopped (the store was closed).
    #[error("the store's writer has stopped; nothing more can be recorded")]
    WriterClosed,
    /// SQLite refused a batch of audit records.
    #[error("the audit record could not be written: {0}")]
    WriteFailed(String),
    /// A stored value could not be read back.
    #[error("stored {what} is damaged: {message}")]
    Corrupt {
        /// Which value (`audit row 12, column output`).
        what: String,
        /// Why it could not be read.
        message: String,
    },
    /// A value could not be prepared for storage.
    #[error("cannot encode {what}: {message}")]
    Encode {
        /// Which value.
        what: String,
        /// Why.
        message: String,
    },
    /// A request the store refuses before touching the file (a kind that is not snake_case, a
    /// rate window that is not positive, a grant offered with a denial, ...).
    #[error("invalid {what}: {message}")]
    Invalid {
        /// Which value (`admin event kind "Mode Switch"`).
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// An audit filter that makes no sense (see [`crate::AuditFilter`]).
    #[error("invalid audit query: {field}: {message}")]
    InvalidQuery {
        /// The filter's field (`limit`, `until`, ...).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// SQLite reported an error.
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    /// SQLite reported an error on the connection writes made in place use
    /// (`Writer::write_in_place`); busy after the busy timeout included.
    #[error("database error: {0}")]
    Database(String),
    /// The team store's database could not be reached; nothing was read or written.
    #[error(
        "the team store at {url} cannot be reached ({cause}); calls are refused until it answers again"
    )]
    Unreachable {
        /// Its URL, without the password.
        url: String,
        /// What the driver said.
        cause: String,
    },
    /// Writing an export failed.
    #[error("cannot write the export: {0}")]
    Export(std::io::Error),
}

impl StoreError {
    /// Whether another connection held the file (SQLite's BUSY, LOCKED or BUSY_SNAPSHOT), so
    /// trying again later may work.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sqlx(sqlx::Error::Database(d))
            if d.code().is_some_and(|c| c == "5" || c == "6" || c == "517"))
    }
}

/// Results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
