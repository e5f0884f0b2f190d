//! Where a server keeps what outlives a connection in a database: sessions (their header and history, per
//! identity) and the operator's memory. Two backends, chosen at start (docs/store.md):
//!
//! - files in the state folder ([`FileStore`](crate::server::FileStore) and the memory
//!   folder), the default, for one process on one machine;
//! - PostgreSQL (feature `postgres`; [`postgres::PostgresStore`] and the memory rows), when
//!   `AGENTACP_DATABASE_URL` or [`ServerOptions::database`](crate::server::ServerOptions::database)
//!   names a database: every replica of a fleet sees the same sessions and memory.
//!
//! The interface is the same for both: [`SessionStore`](crate::server::SessionStore).

#[cfg(feature = "postgres")]
pub(crate) mod appender;
#[cfg(feature = "postgres")]
pub(crate) mod fleet;
#[cfg(feature = "postgres")]
pub(crate) mod lease;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;

use crate::database::Shared;

/// The epochs of the leases this process's turns hold, which fence its appends (issue #49).
#[cfg(feature = "postgres")]
pub(crate) type Fences = lease::Fences;

/// Without feature `postgres` there are no leases.
#[cfg(not(feature = "postgres"))]
pub(crate) type Fences = Shared;

/// Where a server keeps its sessions in a database: the pool, its operator's id, and the
/// fences of its leases (`None`: appends are not fenced).
#[derive(Debug, Clone)]
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "never made without the feature")
)]
pub(crate) struct InDatabase {
    pub(crate) database: Shared,
    pub(crate) operator: String,
    pub(crate) fences: Option<std::sync::Arc<Fences>>,
}

/// The session store of `identity` (`None`: the sessions without one) in `place`.
pub(crate) fn session_store(
    place: &InDatabase,
    identity: Option<&str>,
) -> std::sync::Arc<dyn crate::server::SessionStore> {
    #[cfg(feature = "postgres")]
    {
        let store = postgres::PostgresStore::new(place.database.clone(), &place.operator, identity);
        std::sync::Arc::new(store.with_fences(place.fences.clone()))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = identity;
        place.database.absurd()
    }
}

/// The operator's kept memories in `database`.
pub(crate) fn memory_rows(database: &Shared, operator: &str) -> std::sync::Arc<dyn crate::server::memory::MemoryRows> {
    #[cfg(feature = "postgres")]
    {
        std::sync::Arc::new(postgres::PostgresMemory::new(database.clone(), operator))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = operator;
        database.absurd()
    }
}
