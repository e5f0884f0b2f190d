//! What can go wrong talking to the database, said as sentences.

use std::fmt;
use std::time::Duration;

/// An error of the database layer. Its `Display` is a sentence naming the database (without
/// its password) and what failed.
#[derive(Debug)]
pub enum DbError {
    /// The URL could not be read.
    BadUrl(String),
    /// No connection could be opened.
    Unreachable {
        /// The database, as [`shown_url`](crate::shown_url) shows it.
        database: String,
        /// Why.
        why: String,
    },
    /// The database did not answer within the deadline.
    Timeout {
        /// The database.
        database: String,
        /// The deadline.
        after: Duration,
    },
    /// A statement failed (a constraint, a broken connection, a cancelled statement, …).
    Query {
        /// The database.
        database: String,
        /// PostgreSQL's message (its SQLSTATE when it gave one).
        why: String,
    },
    /// The database's schema is newer than this build knows, or a migration failed.
    Schema(String),
    /// The pool's threads are gone (the process is ending).
    Closed,
    /// A [dedicated](crate::Database::dedicated) connection broke: what it held (a lock,
    /// settings) is gone with it.
    Lost {
        /// The database.
        database: String,
    },
}

impl DbError {
    /// A failed statement on `database`.
    pub fn query(database: &str, error: &postgres::Error) -> DbError {
        let why = match error.as_db_error() {
            Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
            None => error.to_string(),
        };
        DbError::Query {
            database: database.to_string(),
            why,
        }
    }

    /// The SQLSTATE of a failed statement, when PostgreSQL gave one (`"23505"`: a unique
    /// violation, `"40001"`: a serialisation failure, …).
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            DbError::Query { why, .. } => why
                .rsplit_once("(SQLSTATE ")
                .map(|(_, code)| code.trim_end_matches(')')),
            _ => None,
        }
    }

    /// Whether the connection a statement ran on is gone (cut by the server or the network),
    /// so that the pool opens a new one: an error without SQLSTATE (I/O, a closed connection),
    /// a connection exception (`08…`) or the server ending it (`57P…`).
    pub fn breaks_connection(&self) -> bool {
        match self {
            DbError::Query { .. } => self
                .sqlstate()
                .is_none_or(|code| code.starts_with("08") || code.starts_with("57P")),
            _ => false,
        }
    }

    /// Whether trying again later may succeed (the database was unreachable, slow, or cut the
    /// connection), as opposed to a statement that is wrong.
    pub fn is_transient(&self) -> bool {
        match self {
            DbError::Unreachable { .. } | DbError::Timeout { .. } | DbError::Closed | DbError::Lost { .. } => true,
            DbError::Query { .. } => self.sqlstate().is_none_or(|code| {
                // Connection exceptions, operator intervention (shutdown), serialisation.
                code.starts_with("08") || code.starts_with("57") || code == "40001" || code == "40P01"
            }),
            DbError::BadUrl(_) | DbError::Schema(_) => false,
        }
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::BadUrl(why) => write!(f, "the database URL cannot be read: {why}"),
            DbError::Unreachable { database, why } => write!(f, "cannot reach the database at {database}: {why}"),
            DbError::Timeout { database, after } => {
                write!(
                    f,
                    "the database at {database} did not answer within {} ms",
                    after.as_millis()
                )
            }
            DbError::Query { database, why } => write!(f, "the database at {database} refused a statement: {why}"),
            DbError::Schema(why) => f.write_str(why),
            DbError::Closed => f.write_str("the database connections were closed"),
            DbError::Lost { database } => write!(
                f,
                "the connection to the database at {database} that held a lock or settings was lost"
            ),
        }
    }
}

impl std::error::Error for DbError {}

impl From<DbError> for std::io::Error {
    fn from(error: DbError) -> std::io::Error {
        let kind = match &error {
            DbError::Timeout { .. } => std::io::ErrorKind::TimedOut,
            DbError::Unreachable { .. } | DbError::Closed | DbError::Lost { .. } => std::io::ErrorKind::NotConnected,
            DbError::BadUrl(_) => std::io::ErrorKind::InvalidInput,
            DbError::Query { .. } | DbError::Schema(_) => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, error.to_string())
    }
}
