//! The engine's error type. Every error has an [`ErrorKind`] (the CLI maps each to one exit code
//! of SPEC §9) and, where a front end may word advice around it, a [`Topic`]. Hints written here
//! speak of the engine's own terms (configuration keys, files), never of commands or flags.

use std::fmt;

/// What went wrong, as a script needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Bad input: invalid JSON, an empty key, a malformed branch id, an oversize value… (exit 1)
    InvalidInput,
    /// The command line itself is wrong (exit 2).
    Usage,
    /// An unknown branch, record or event (exit 3).
    NotFound,
    /// The request contradicts what is stored, e.g. forking an existing id under another parent (exit 4).
    Conflict,
    /// The database stayed locked past `busy_timeout` (exit 5).
    Busy,
    /// Not a memctl database, corrupt, unreadable, or written by a newer memctl (exit 6).
    IncompatibleDb,
    /// A bug or an unexpected failure of the platform (exit 255).
    Internal,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::InvalidInput,
        ErrorKind::Usage,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Busy,
        ErrorKind::IncompatibleDb,
        ErrorKind::Internal,
    ];

    /// The `kind` field of the JSON error object.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Usage => "usage",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Busy => "busy",
            ErrorKind::IncompatibleDb => "incompatible_db",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A situation a front end may word its own advice around (the CLI names its commands and
/// flags there; the engine knows neither).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topic {
    /// No branch has this id or node_uid.
    UnknownBranch,
    /// No database file at the path given.
    NoDatabase,
    /// An empty file, or an SQLite database memctl did not create.
    NotMemctlDatabase,
    /// An import would write branches that already exist.
    ImportTargetInUse,
    /// A legacy import was given the directory that holds this database file.
    LegacyDirectory(std::path::PathBuf),
    /// A strict `apply` found problems in a memory update block.
    RejectedUpdate,
    /// The database file, its directory or the disk failed a read or a write: no write of the
    /// transaction can go on.
    DatabaseFile,
}

/// An engine error: a kind, a one-line message, optionally a hint on what to do about it, and
/// optionally the [`Topic`] it is about.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
    hint: Option<String>,
    topic: Option<Topic>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the transaction it happened in cannot go on (a lock not had, the database file
    /// failing, a bug), as opposed to one write refused, which an `apply --lenient` skips.
    pub fn ends_transaction(&self) -> bool {
        matches!(self.kind, ErrorKind::Busy | ErrorKind::Internal) || self.topic == Some(Topic::DatabaseFile)
    }

    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hint: None, topic: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Conflict, message)
    }

    pub fn incompatible(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::IncompatibleDb, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The same error (kind, hint, topic) with another message.
    pub fn with_message(self, message: impl Into<String>) -> Self {
        Error { message: message.into(), ..self }
    }

    pub fn with_topic(mut self, topic: Topic) -> Self {
        self.topic = Some(topic);
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    pub fn topic(&self) -> Option<&Topic> {
        self.topic.as_ref()
    }
}

/// SQLite's own words for an error, without rusqlite's wrapping.
pub(crate) fn sqlite_reason(err: &rusqlite::Error) -> String {
    match err {
        rusqlite::Error::SqliteFailure(code, Some(message)) if !message.is_empty() => {
            format!("{message} ({})", code.extended_code)
        }
        rusqlite::Error::SqliteFailure(code, _) => code.to_string(),
        other => other.to_string(),
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        let code = err.sqlite_error_code();
        let kind = match code {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => ErrorKind::Busy,
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => ErrorKind::IncompatibleDb,
            // The file, its directory or the disk, not the database nor memctl: as for a file
            // an export cannot write.
            Some(
                ErrorCode::CannotOpen
                | ErrorCode::ReadOnly
                | ErrorCode::PermissionDenied
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure,
            ) => ErrorKind::InvalidInput,
            _ => ErrorKind::Internal,
        };
        let message = match kind {
            ErrorKind::Busy => "the database stayed locked by other writers past busy_timeout".to_string(),
            _ => format!("database error: {}", sqlite_reason(&err)),
        };
        let error = Error::new(kind, message);
        match kind {
            ErrorKind::Busy => error.with_hint(
                "another process held the write lock past busy_timeout; raise [sqlite] busy_timeout_ms",
            ),
            ErrorKind::IncompatibleDb => {
                error.with_hint("check that the path points at a readable memctl database")
            }
            ErrorKind::InvalidInput => error
                .with_hint(
                    "check the path, the permissions of the file and of its directory (SQLite writes \
                     -wal and -shm files beside it) and the free space",
                )
                .with_topic(Topic::DatabaseFile),
            _ => error,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error::internal(format!("JSON encoding failed: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing database file is exit 1 with advice, and ends the transaction: `apply
    /// --lenient` must not skip the write it failed and commit the rest.
    #[test]
    fn a_failing_database_file_ends_the_transaction() {
        for code in [rusqlite::ffi::SQLITE_READONLY, rusqlite::ffi::SQLITE_FULL, rusqlite::ffi::SQLITE_IOERR]
        {
            let error = Error::from(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None));
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{code}");
            assert!(error.ends_transaction(), "{code}");
        }
        assert!(!Error::invalid("archival text must not be empty").ends_transaction());
    }

    #[test]
    fn kinds_have_the_documented_names() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            vec!["invalid_input", "usage", "not_found", "conflict", "busy", "incompatible_db", "internal"]
        );
    }
}
