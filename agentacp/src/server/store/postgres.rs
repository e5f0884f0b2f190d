//! Sessions and the operator's memory in PostgreSQL (feature `postgres`): every replica that
//! opens the same database sees the same sessions of an identity and the same memory.
//!
//! Schema (component `sessions`, version 1; component `memory`, version 1; see docs/store.md):
//!
//! - `agentacp_sessions`: one row per session, keyed by `(operator, identity, id)` (`identity`
//!   is `''` for the store without an identity: stdio, an open listener), with its `cwd` and
//!   `created_at` / `updated_at`; indexed for `session/list`'s order (newest first, ties by id),
//!   with and without a `cwd`.
//! - `agentacp_session_updates`: one row per recorded `update`, in order (`n`), removed with
//!   its session.
//! - `agentacp_memory`: one row per kept memory (`operator.jsonl`, `thread-<session>.jsonl`),
//!   its entries as JSON lines, replaced whole, with a version for optimistic writes.
//!
//! Durability: each [`append`](crate::server::SessionStore::append) is its own transaction,
//! committed with `synchronous_commit = off`: visible to every replica at once and kept when
//! this process dies, but made durable on the database's disk only by the next synchronous
//! commit (at most a few hundred milliseconds later, by PostgreSQL's WAL writer), which
//! [`flush_session`](crate::server::SessionStore::flush_session) (the end of each turn) forces.
//! That is what the file store promises: written at once, synced at the end of a turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use acp_postgres::postgres::types::{ToSql, Type};
use acp_postgres::postgres::{self, Client};
use acp_postgres::{Database, DbError, Migration};
use serde_json::value::RawValue;

use super::lease::Fence;
use crate::server::memory::{Expected, MemoryRows};
use crate::server::session::{SessionStore, SessionSummary, StoredSession};

/// The steps of component `sessions`.
pub static SESSION_STEPS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions and their history",
    sql: "
        create table agentacp_sessions (
            pk bigint generated always as identity primary key,
            operator text not null,
            identity text not null,
            id text not null,
            cwd text not null,
            created_at timestamptz not null default now(),
            updated_at timestamptz not null default now(),
            unique (operator, identity, id)
        );
        create index agentacp_sessions_newest
            on agentacp_sessions (operator, identity, updated_at desc, id);
        create index agentacp_sessions_newest_by_cwd
            on agentacp_sessions (operator, identity, cwd, updated_at desc, id);
        create table agentacp_session_updates (
            session bigint not null references agentacp_sessions (pk) on delete cascade,
            n bigint generated always as identity,
            body text not null,
            primary key (session, n)
        );",
}];

/// The steps of component `memory`.
pub static MEMORY_STEPS: &[Migration] = &[Migration {
    version: 1,
    name: "the operator's kept memories",
    sql: "
        create table agentacp_memory (
            operator text not null,
            name text not null,
            entries text not null,
            version bigint not null,
            updated_at timestamptz not null default now(),
            primary key (operator, name)
        );",
}];

/// Applies the schema of the sessions and the memory to `database`.
pub fn migrate(database: &Database) -> std::io::Result<()> {
    for (component, steps) in [("sessions", SESSION_STEPS), ("memory", MEMORY_STEPS)] {
        acp_postgres::migrate(database, component, steps)
            .map_err(|error| std::io::Error::other(format!("cannot prepare the {component} schema: {error}")))?;
    }
    tracing::info!(
        database = database.shown(),
        "sessions and memory are kept in PostgreSQL"
    );
    Ok(())
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.database.shown())
            .field("operator", &self.operator)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// The sessions of one identity of one operator in PostgreSQL. Cheap to make: handles on the
/// same database share its pool.
#[derive(Clone)]
pub struct PostgresStore {
    database: Database,
    operator: Arc<str>,
    /// `''`: the sessions without an identity.
    identity: Arc<str>,
    /// The leases this process holds: an append to a leased session is fenced by its epoch.
    fences: Option<Arc<super::lease::Fences>>,
}

impl PostgresStore {
    /// The sessions of `identity` (`None`: those without one) of operator `operator` in
    /// `database` (whose schema [`migrate`] applied).
    pub fn new(database: Database, operator: &str, identity: Option<&str>) -> Self {
        PostgresStore {
            database,
            operator: operator.into(),
            identity: identity.unwrap_or_default().into(),
            fences: None,
        }
    }

    /// The same store, each append to a session whose lease this process holds checked
    /// against the lease's epoch in the append's transaction (issue #49's fencing).
    pub(crate) fn with_fences(mut self, fences: Option<Arc<super::lease::Fences>>) -> Self {
        self.fences = fences;
        self
    }

    /// [`append`](SessionStore::append), its row written only when `fence` (run in the same
    /// transaction) allows it. A refused append is an error saying so.
    pub fn append_fenced(&self, id: &str, update: &str, fence: Option<Fence>) -> std::io::Result<()> {
        let (operator, identity) = self.key();
        let (id, update) = (id.to_string(), update.to_string());
        let shown = self.database.shown().to_string();
        let written = self.database.run_raw(move |client| {
            lazily_committed(client, &shown, |client| {
                if let Some(fence) = fence
                    && !fence(client)?
                {
                    return Ok(false);
                }
                client.execute_typed(
                    APPEND,
                    &[
                        (&operator, Type::TEXT),
                        (&identity, Type::TEXT),
                        (&id, Type::TEXT),
                        (&update, Type::TEXT),
                    ],
                )?;
                Ok(true)
            })
        });
        match written.map_err(|error| failed("record an update of the session", error))? {
            true => Ok(()),
            false => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the update was not recorded: another replica holds the session now",
            )),
        }
    }

    fn key(&self) -> (String, String) {
        (self.operator.to_string(), self.identity.to_string())
    }

    /// Runs `query` with the key (`$1`, `$2`) and `more` parameters; its rows.
    fn rows(&self, what: &str, query: &'static str, more: Vec<Arg>) -> std::io::Result<Vec<postgres::Row>> {
        let (operator, identity) = self.key();
        self.database
            .run(move |client| {
                let mut params: Vec<(&(dyn ToSql + Sync), Type)> =
                    vec![(&operator, Type::TEXT), (&identity, Type::TEXT)];
                params.extend(more.iter().map(Arg::param));
                client.query_typed(query, &params)
            })
            .map_err(|error| failed(what, error))
    }
}

/// A parameter of a query after the key.
enum Arg {
    Text(String),
    Int(i64),
}

impl Arg {
    fn param(&self) -> (&(dyn ToSql + Sync), Type) {
        match self {
            Arg::Text(text) => (text, Type::TEXT),
            Arg::Int(number) => (number, Type::INT8),
        }
    }
}

/// `error` as an I/O error saying what could not be done (the database named, without its
/// password).
fn failed(what: &str, error: DbError) -> std::io::Error {
    let error = std::io::Error::from(error);
    std::io::Error::new(error.kind(), format!("cannot {what}: {error}"))
}

/// A recorded update: its row, and a touch of the session's time at most once a second (the
/// time `session/list` orders by, without rewriting the session's row at every chunk).
const APPEND: &str = "
    with session as (
        select pk from agentacp_sessions where operator = $1 and identity = $2 and id = $3
    ), touched as (
        update agentacp_sessions set updated_at = now()
        where pk = (select pk from session) and updated_at < now() - interval '1 second'
    )
    insert into agentacp_session_updates (session, body) select pk, $4 from session";

/// Runs `work` in a transaction committed with `synchronous_commit = off`, rolled back when
/// it fails.
fn lazily_committed<T>(
    client: &mut Client,
    shown: &str,
    work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
) -> Result<T, DbError> {
    let done = client
        .batch_execute("begin; set local synchronous_commit = off")
        .and_then(|()| work(client))
        .and_then(|value| client.batch_execute("commit").map(|()| value));
    done.map_err(|error| {
        // A broken connection is opened again for the next job; a live one must not stay
        // inside the failed transaction.
        if !client.is_closed() {
            let _ = client.batch_execute("rollback");
        }
        DbError::query(shown, &error)
    })
}

/// A `cwd` as the database keeps it: UTF-8 text.
fn cwd_text(cwd: &Path) -> std::io::Result<String> {
    cwd.to_str().map(str::to_string).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the session's cwd `{}` is not UTF-8 text", cwd.display()),
        )
    })
}

/// A row of `id, cwd, updated_at`.
fn summary(row: &postgres::Row) -> SessionSummary {
    SessionSummary {
        id: row.get(0),
        cwd: PathBuf::from(row.get::<_, String>(1)),
        updated_at: Some(row.get::<_, SystemTime>(2)),
    }
}

impl SessionStore for PostgresStore {
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()> {
        let cwd = cwd_text(cwd)?;
        let rows = self.rows(
            "record the session",
            "insert into agentacp_sessions (operator, identity, id, cwd) values ($1, $2, $3, $4)
             on conflict do nothing returning pk",
            vec![Arg::Text(id.to_string()), Arg::Text(cwd)],
        )?;
        if rows.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("a session `{id}` is stored already"),
            ));
        }
        Ok(())
    }

    fn append(&self, id: &str, update: &str) -> std::io::Result<()> {
        let fence = self.fences.as_ref().and_then(|fences| fences.fence(id));
        self.append_fenced(id, update, fence)
    }

    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>> {
        let rows = self.rows(
            "read the session",
            "select s.cwd, u.body from agentacp_sessions s
             left join agentacp_session_updates u on u.session = s.pk
             where s.operator = $1 and s.identity = $2 and s.id = $3
             order by u.n",
            vec![Arg::Text(id.to_string())],
        )?;
        let Some(first) = rows.first() else { return Ok(None) };
        let cwd = PathBuf::from(first.get::<_, String>(0));
        let mut history = Vec::with_capacity(rows.len());
        for (index, row) in rows.iter().enumerate() {
            let Some(body) = row.get::<_, Option<String>>(1) else {
                continue;
            };
            match RawValue::from_string(body) {
                Ok(update) => history.push(update),
                Err(error) => {
                    tracing::warn!(session = id, update = index + 1, %error, "skipping an unreadable history update");
                }
            }
        }
        Ok(Some(StoredSession { cwd, history }))
    }

    fn flush(&self) -> std::io::Result<()> {
        // Each append is committed; a synchronous commit that writes (a transaction id makes
        // it write its commit record) makes every earlier one durable.
        self.database
            .run(|client| client.batch_execute("select txid_current()"))
            .map_err(|error| failed("save the sessions", error))
    }

    fn flush_session(&self, id: &str) -> std::io::Result<()> {
        // A synchronous commit that writes: the WAL is flushed up to it, with every append
        // before it. Its time is the turn's end, which `session/list` orders by.
        self.rows(
            "save the session",
            "update agentacp_sessions set updated_at = now()
             where operator = $1 and identity = $2 and id = $3 returning pk",
            vec![Arg::Text(id.to_string())],
        )
        .map(drop)
    }

    fn summary(&self, id: &str) -> std::io::Result<Option<SessionSummary>> {
        let rows = self.rows(
            "read the session",
            "select id, cwd, updated_at from agentacp_sessions where operator = $1 and identity = $2 and id = $3",
            vec![Arg::Text(id.to_string())],
        )?;
        Ok(rows.first().map(summary))
    }

    fn list(&self) -> std::io::Result<Vec<SessionSummary>> {
        let rows = self.rows(
            "list the sessions",
            "select id, cwd, updated_at from agentacp_sessions
             where operator = $1 and identity = $2 order by updated_at desc, id",
            Vec::new(),
        )?;
        Ok(rows.iter().map(summary).collect())
    }

    fn list_page(&self, cwd: Option<&Path>, start: usize, len: usize) -> std::io::Result<(Vec<SessionSummary>, bool)> {
        // One more than the page: whether any come after.
        let limit = Arg::Int(i64::try_from(len.saturating_add(1)).unwrap_or(i64::MAX));
        let offset = Arg::Int(i64::try_from(start).unwrap_or(i64::MAX));
        let rows = match cwd {
            Some(cwd) => self.rows(
                "list the sessions",
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2 and cwd = $3
                 order by updated_at desc, id limit $4 offset $5",
                vec![Arg::Text(cwd_text(cwd)?), limit, offset],
            )?,
            None => self.rows(
                "list the sessions",
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2
                 order by updated_at desc, id limit $3 offset $4",
                vec![limit, offset],
            )?,
        };
        let more = rows.len() > len;
        Ok((rows.iter().take(len).map(summary).collect(), more))
    }

    fn delete(&self, id: &str) -> std::io::Result<bool> {
        let rows = self.rows(
            "delete the session",
            "delete from agentacp_sessions where operator = $1 and identity = $2 and id = $3 returning pk",
            vec![Arg::Text(id.to_string())],
        )?;
        Ok(!rows.is_empty())
    }
}

/// The kept memories of one operator in PostgreSQL.
#[derive(Debug, Clone)]
pub(crate) struct PostgresMemory {
    database: Database,
    operator: String,
}

impl PostgresMemory {
    pub(crate) fn new(database: Database, operator: &str) -> Self {
        PostgresMemory {
            database,
            operator: operator.to_string(),
        }
    }
}

impl MemoryRows for PostgresMemory {
    fn read(&self, name: &str) -> std::io::Result<Option<(String, i64)>> {
        let (operator, name) = (self.operator.clone(), name.to_string());
        let row = self
            .database
            .run(move |client| {
                client.query_typed_opt(
                    "select entries, version from agentacp_memory where operator = $1 and name = $2",
                    &[(&operator, Type::TEXT), (&name, Type::TEXT)],
                )
            })
            .map_err(|error| failed("read the operator's memory", error))?;
        Ok(row.map(|row| (row.get(0), row.get(1))))
    }

    fn replace(&self, name: &str, entries: &str, expected: Expected) -> std::io::Result<Option<i64>> {
        let (operator, name, entries) = (self.operator.clone(), name.to_string(), entries.to_string());
        let row = self
            .database
            .run(move |client| {
                let version = match expected {
                    Expected::Version(version) => version,
                    Expected::Absent | Expected::Any => 0,
                };
                let key: [(&(dyn ToSql + Sync), Type); 4] = [
                    (&operator, Type::TEXT),
                    (&name, Type::TEXT),
                    (&entries, Type::TEXT),
                    (&version, Type::INT8),
                ];
                match expected {
                    Expected::Absent => client.query_typed_opt(
                        "insert into agentacp_memory (operator, name, entries, version) values ($1, $2, $3, 1)
                         on conflict do nothing returning version",
                        &key[..3],
                    ),
                    Expected::Version(_) => client.query_typed_opt(
                        "update agentacp_memory set entries = $3, version = version + 1, updated_at = now()
                         where operator = $1 and name = $2 and version = $4 returning version",
                        &key,
                    ),
                    Expected::Any => client.query_typed_opt(
                        "insert into agentacp_memory (operator, name, entries, version) values ($1, $2, $3, 1)
                         on conflict (operator, name) do update
                         set entries = excluded.entries, version = agentacp_memory.version + 1, updated_at = now()
                         returning version",
                        &key[..3],
                    ),
                }
            })
            .map_err(|error| failed("save the operator's memory", error))?;
        Ok(row.map(|row| row.get(0)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::governance::{MemoryKind, MemoryPolicy, MemorySpec};
    use crate::server::memory::MemoryBook;
    use crate::server::session::tests::{lists_and_deletes, pages_match_the_sorted_list, roundtrip};

    /// A pool of its own on `url` (as another replica's), with the schema applied.
    fn open(url: &str) -> std::io::Result<Database> {
        let database = Database::connect(url, acp_postgres::Options::default())?;
        migrate(&database)?;
        Ok(database)
    }

    /// A fresh database with the schema, or `None` (skipped) without PostgreSQL.
    fn database(test: &str) -> Option<(Database, String)> {
        let cluster = test_support::postgres::cluster()?;
        let url = cluster.database(test);
        Some((open(&url).expect("opens"), url))
    }

    /// The store of `identity` of operator `op`.
    fn store(database: &Database, identity: Option<&str>) -> PostgresStore {
        PostgresStore::new(database.clone(), "op", identity)
    }

    #[test]
    fn the_store_keeps_the_contract_of_the_file_store() {
        let Some((db, _)) = database("contract") else { return };
        roundtrip(&store(&db, Some("roundtrip")));
        lists_and_deletes(&store(&db, Some("lists")));
        pages_match_the_sorted_list(&store(&db, Some("pages")));
        let twice = store(&db, None)
            .create("sess_1", Path::new("/w"))
            .and_then(|()| store(&db, None).create("sess_1", Path::new("/w")));
        assert_eq!(twice.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        // Applied once: a second start finds the schema in place.
        migrate(&db).unwrap();
    }

    /// Sessions are per identity (and per operator), as the file store's folders keep them.
    #[test]
    fn one_identity_never_sees_another_identitys_sessions() {
        let Some((db, _)) = database("identities") else { return };
        let alice = store(&db, Some("alice"));
        alice.create("sess_a", Path::new("/w")).unwrap();
        alice.append("sess_a", r#"{"n":1}"#).unwrap();
        let others = [
            store(&db, Some("bob")),
            store(&db, None),
            PostgresStore::new(db.clone(), "another-operator", Some("alice")),
        ];
        for other in &others {
            assert!(other.load("sess_a").unwrap().is_none(), "{other:?}");
            assert!(other.summary("sess_a").unwrap().is_none(), "{other:?}");
            assert!(other.list().unwrap().is_empty(), "{other:?}");
            assert_eq!(other.list_page(None, 0, 10).unwrap(), (Vec::new(), false));
            other.append("sess_a", r#"{"n":2}"#).unwrap();
            assert!(!other.delete("sess_a").unwrap(), "{other:?}");
            // The same id is free for another identity.
            other.create("sess_a", Path::new("/elsewhere")).unwrap();
        }
        let history = alice.load("sess_a").unwrap().unwrap();
        assert_eq!(history.cwd, Path::new("/w"));
        assert_eq!(
            history.history.iter().map(|u| u.get()).collect::<Vec<_>>(),
            [r#"{"n":1}"#]
        );
    }

    /// Two replicas: two pools on one database see one another's sessions and history.
    #[test]
    fn a_session_made_through_one_pool_is_seen_through_another() {
        let Some((db, url)) = database("replicas") else { return };
        let (a, b) = (store(&db, Some("alice")), store(&open(&url).unwrap(), Some("alice")));
        a.create("sess_x", Path::new("/w/x")).unwrap();
        a.append("sess_x", r#"{"from":"a"}"#).unwrap();
        a.flush_session("sess_x").unwrap();
        assert_eq!(b.summary("sess_x").unwrap().unwrap().cwd, Path::new("/w/x"));
        b.append("sess_x", r#"{"from":"b"}"#).unwrap();
        let history = a.load("sess_x").unwrap().unwrap().history;
        assert_eq!(
            history.iter().map(|u| u.get()).collect::<Vec<_>>(),
            [r#"{"from":"a"}"#, r#"{"from":"b"}"#]
        );
        assert_eq!(b.list_page(Some(Path::new("/w/x")), 0, 5).unwrap().0.len(), 1);
        assert!(b.delete("sess_x").unwrap());
        assert!(a.load("sess_x").unwrap().is_none());
    }

    /// `session/list` over 100,000 sessions: the pages are right, and both queries (with and
    /// without a `cwd`) read the index in order: no sort of the whole set.
    #[test]
    fn pages_over_a_hundred_thousand_sessions_read_the_index_in_order() {
        let Some((db, _)) = database("many") else { return };
        db.run(|client| {
            client.batch_execute(
                "insert into agentacp_sessions (operator, identity, id, cwd, updated_at)
                 select 'op', 'many', 'sess_' || lpad(n::text, 6, '0'), '/w/' || (n % 10),
                        timestamptz '2026-01-01' + n * interval '1 second'
                 from generate_series(1, 100000) n;
                 analyze agentacp_sessions",
            )
        })
        .unwrap();
        let many = store(&db, Some("many"));
        let (first, more) = many.list_page(None, 0, 50).unwrap();
        assert!(more);
        assert_eq!(first[0].id, "sess_100000");
        assert_eq!(first[49].id, "sess_099951");
        let (deep, more) = many.list_page(Some(Path::new("/w/3")), 9_990, 50).unwrap();
        assert_eq!((deep.len(), more), (10, false), "10,000 sessions in /w/3");
        assert_eq!(deep.last().unwrap().id, "sess_000003");
        for (query, index) in [
            (
                "select id, cwd, updated_at from agentacp_sessions where operator = 'op' and identity = 'many' order by updated_at desc, id limit 51 offset 0",
                "agentacp_sessions_newest on",
            ),
            (
                "select id, cwd, updated_at from agentacp_sessions where operator = 'op' and identity = 'many' and cwd = '/w/3' order by updated_at desc, id limit 51 offset 0",
                "agentacp_sessions_newest_by_cwd on",
            ),
        ] {
            let plan: String = db
                .run(move |client| {
                    let rows = client.query(&format!("explain {query}"), &[])?;
                    Ok(rows
                        .iter()
                        .map(|row| row.get::<_, String>(0))
                        .collect::<Vec<_>>()
                        .join("\n"))
                })
                .unwrap();
            assert!(plan.contains(&format!("Scan using {index}")), "{plan}");
            assert!(!plan.contains("Sort"), "{plan}");
        }
    }

    /// The database goes away in the middle of an append: an error in a sentence naming the
    /// database (no panic, nothing half-written), and the next append once it is back works.
    #[test]
    fn an_outage_mid_append_is_an_error_in_a_sentence_and_the_store_recovers() {
        let Some((db, url)) = database("outage") else { return };
        let name = url.rsplit('/').next().unwrap().to_string();
        let sessions = store(&db, None);
        sessions.create("sess_o", Path::new("/w")).unwrap();
        sessions.append("sess_o", r#"{"n":1}"#).unwrap();
        // The append's connection is cut inside its transaction (by another connection, which
        // waits until it is gone), and no new one is let in.
        let cluster = test_support::postgres::cluster().unwrap();
        let mut admin = postgres::Client::connect(&cluster.url("postgres"), postgres::NoTls).unwrap();
        let refuse = format!("alter database {name} allow_connections false");
        let database_name = name.clone();
        let fence: Fence = Box::new(move |_| {
            admin.batch_execute(&refuse)?;
            // Every connection of the pool: the next append cannot take another one.
            admin.execute(
                "select pg_terminate_backend(pid, 60000) from pg_stat_activity where datname = $1",
                &[&database_name],
            )?;
            Ok(true)
        });
        let error = sessions.append_fenced("sess_o", r#"{"n":2}"#, Some(fence)).unwrap_err();
        let said = error.to_string();
        assert!(
            said.starts_with("cannot record an update of the session: the database at postgres://postgres@127.0.0.1:"),
            "{said}"
        );
        // The pool's other connections were cut too: each says so once, then it cannot reach
        // the database.
        let unreachable = (0..=db.options().connections)
            .map(|_| sessions.append("sess_o", r#"{"n":3}"#).unwrap_err())
            .inspect(|error| {
                assert!(
                    error
                        .to_string()
                        .starts_with("cannot record an update of the session: "),
                    "{error}"
                )
            })
            .find(|error| error.kind() == std::io::ErrorKind::NotConnected)
            .expect("the database cannot be reached");
        let shown = format!(
            "cannot reach the database at postgres://postgres@127.0.0.1:{}/{name}",
            cluster.port()
        );
        assert!(unreachable.to_string().contains(&shown), "{unreachable}");
        let allow = format!("alter database {name} allow_connections true");
        cluster.psql(&cluster.url("postgres"), &allow).unwrap();
        sessions.append("sess_o", r#"{"n":4}"#).unwrap();
        let history = sessions.load("sess_o").unwrap().unwrap().history;
        assert_eq!(
            history.iter().map(|u| u.get()).collect::<Vec<_>>(),
            [r#"{"n":1}"#, r#"{"n":4}"#]
        );
    }

    /// A fence that refuses writes nothing, and says why.
    #[test]
    fn a_refusing_fence_writes_nothing() {
        let Some((db, _)) = database("fence") else { return };
        let sessions = store(&db, None);
        sessions.create("sess_f", Path::new("/w")).unwrap();
        let error = sessions
            .append_fenced("sess_f", "{}", Some(Box::new(|_| Ok(false))))
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(sessions.load("sess_f").unwrap().unwrap().history.is_empty());
    }

    fn book(db: &Database, kind: MemoryKind, policy: MemoryPolicy) -> MemoryBook {
        let spec = MemorySpec {
            kind,
            policy,
            share_with: Vec::new(),
            external: None,
        };
        let rows: Arc<dyn MemoryRows> = Arc::new(PostgresMemory::new(db.clone(), "op"));
        // The folder is never used: memories are rows.
        MemoryBook::new(Some(spec), Path::new("/nonexistent-state")).with_rows(Some(rows))
    }

    /// Two replicas appending to the operator's memory: both entries are kept (the second
    /// writer adds its own after the first's), and a later session of either sees them.
    #[test]
    fn two_replicas_appending_to_the_operator_memory_lose_nothing() {
        let Some((db, url)) = database("memory_merge") else {
            return;
        };
        let other = open(&url).unwrap();
        let (a, b) = (
            book(&db, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
            book(&other, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
        );
        let (on_a, on_b) = (a.for_session("sess_1"), b.for_session("sess_2"));
        on_a.append(json!("from a"));
        on_b.append(json!("from b"));
        a.persist("sess_1", &on_a, None);
        b.persist("sess_2", &on_b, None);
        assert_eq!(on_b.entries(), [json!("from a"), json!("from b")]);
        assert_eq!(
            a.for_session("sess_3").entries(),
            [json!("from a"), json!("from b")],
            "read again"
        );
        let fresh = book(&db, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly);
        assert_eq!(fresh.for_session("sess_4").len(), 2);
        assert!(!Path::new("/nonexistent-state").exists());
    }

    /// A memory summarised on one replica replaces what another wrote meanwhile (the last
    /// write wins); a thread memory comes back with its session on another replica.
    #[test]
    fn a_summarised_memory_wins_and_a_thread_follows_its_session() {
        let Some((db, url)) = database("memory_lww") else {
            return;
        };
        let other = open(&url).unwrap();
        let (a, b) = (
            book(&db, MemoryKind::OperatorContext, MemoryPolicy::Summarising),
            book(&other, MemoryKind::OperatorContext, MemoryPolicy::Summarising),
        );
        let (on_a, on_b) = (a.for_session("sess_1"), b.for_session("sess_2"));
        on_a.append(json!(1));
        a.persist("sess_1", &on_a, None);
        on_b.summarise(vec![json!("summary")]).unwrap();
        b.persist("sess_2", &on_b, None);
        assert_eq!(a.for_session("sess_3").entries(), [json!("summary")]);
        let (ta, tb) = (
            book(&db, MemoryKind::Thread, MemoryPolicy::Summarising),
            book(&other, MemoryKind::Thread, MemoryPolicy::Summarising),
        );
        let thread = ta.for_session("sess_t");
        thread.append(json!("t"));
        ta.close("sess_t", &thread, None);
        assert_eq!(tb.for_session("sess_t").entries(), [json!("t")]);
        assert!(tb.for_session("sess_u").is_empty());
    }
}
