//! `acp-postgres`: the PostgreSQL layer that agentacp's stores share (sessions, operator
//! memory, the audit sink, tokens), so that each of them does not open, pool, time out and
//! migrate on its own.
//!
//! - [`Database`]: a pool of connections, each owned by a thread of its own, behind a blocking
//!   [`Database::run`] that waits at most [`Options::answer_within`]. The stores that use it
//!   have blocking interfaces (like a file's), so the synchronous `postgres` client fits; async
//!   code calls it where blocking is acceptable, as it does for file I/O. A connection that
//!   breaks is opened again for the next call: a call in flight fails with a sentence, and
//!   the caller decides whether to repeat it.
//! - [`migrate`]: each component's schema as numbered steps, applied at start in one
//!   transaction under an advisory lock, recorded in `agentacp_schema`; a database newer than
//!   the build is refused.
//! - [`Database::listen`](Database::listen): `LISTEN` on channels from a thread of its own,
//!   reconnecting after an outage and saying so (notifications may have been missed).

mod error;
mod listen;
mod migrate;
mod pool;
#[cfg(feature = "tls")]
mod tls;

pub use error::DbError;
pub use listen::{LISTEN_POLL, Listener, Notice};
pub use migrate::{Migration, SCHEMA_TABLE, migrate};
pub use pool::{Database, Options};
/// The client the jobs given to [`Database::run`] receive.
pub use postgres;

/// The URL without its password, for messages and `scaffold-aip explain`:
/// `postgres://user@host:port/dbname` (key=value strings are shown the same way).
pub fn shown_url(url: &str) -> String {
    let Ok(config) = url.parse::<postgres::Config>() else {
        return "an unreadable database URL".to_string();
    };
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let host = config
        .get_hosts()
        .first()
        .map(|host| match host {
            postgres::config::Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".to_string());
    let port = config.get_ports().first().map(|p| format!(":{p}")).unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{host}{port}/{db}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shown_url_never_holds_the_password() {
        let shown = super::shown_url("postgres://alice:s3cret@db.example:6543/agents");
        assert_eq!(shown, "postgres://alice@db.example:6543/agents");
        let shown = super::shown_url("host=db user=bob password=s3cret dbname=x");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
